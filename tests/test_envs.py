"""Tests for drjax.envs: models against the paper's formulas (hand-computed numbers), sampled
transitions against the models, fail states, vmap over params without retracing, bad input."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from drjax import envs
from drjax.envs import (
    LinearMDP,
    LinearMDPState,
    PutOption,
    PutOptionState,
    RandomLinearMDP,
    action_vectors,
    fixed_initial_price,
    random_linear_drmdp,
    target_params,
)

N = 20_000  # samples per (params, h, s, a) class: 5 standard errors <= 0.0177 < 0.02
JITS = [pytest.param(jax.jit, id="jit"), pytest.param(lambda f: f, id="nojit")]
X1, X2, X3, X4, X5 = range(5)
RANDOM_SHAPE = (6, 3, 4, 3)  # S, A, d, H: one shape for all random-MDP tests (one compilation)
A_ALL_DOWN, A_MIXED, A_ALL_UP = 0, 11, 15  # (-1,-1,-1,-1), (1,-1,1,1), (1,1,1,1)


def _assert_frequencies(samples, probs, n):
  """Every empirical frequency within 5 standard errors of its probability (exact if p in {0,1})."""
  counts = np.stack([(samples == t).mean(axis=-1) for t in range(probs.shape[-1])], axis=-1)
  tol = 5 * np.sqrt(probs * (1 - probs) / n) + 1e-12
  bad = np.abs(counts - probs) > tol
  assert not bad.any(), (
      f"{bad.sum()} frequencies off, e.g. freq={counts[bad][:5]}, prob={probs[bad][:5]}")


def _sample_classes(env, params_list, classes, key, n=N):
  """Next states, rewards and done flags of ``n`` steps from each (params, h, s, a) class."""
  params = jax.tree.map(lambda *x: jnp.stack(x), *params_list)
  h, s, a = (jnp.asarray(c, jnp.int32) for c in zip(*classes))
  base = env.reset(key, params_list[0])

  def one_class(params, h, s, a, key):
    state = base._replace(s=s, h=h)
    keys = jax.random.split(key, n)
    nxt, r, done = jax.vmap(env.step, in_axes=(0, None, None, None))(keys, state, a, params)
    return nxt.s, r, done

  keys = jax.random.split(key, (len(params_list), len(classes)))
  over_classes = jax.vmap(one_class, in_axes=(None, 0, 0, 0, 0))
  return jax.jit(jax.vmap(over_classes, in_axes=(0, None, None, None, 0)))(params, h, s, a, keys)


# ------------------------------------------------------------------------------------ linear MDP
def test_action_vectors_order():
  av = np.asarray(action_vectors())
  np.testing.assert_array_equal(av, np.array(list(itertools.product([-1, 1], repeat=4))))
  np.testing.assert_array_equal(av[A_ALL_DOWN], [-1, -1, -1, -1])
  np.testing.assert_array_equal(av[A_MIXED], [1, -1, 1, 1])
  np.testing.assert_array_equal(av[A_ALL_UP], [1, 1, 1, 1])


# Hand-computed for delta = 0.3, xi_norm = 0.1: <xi, a> = 0.1, -0.1, 0.05 for the three actions.
HAND_PHI = {
    A_ALL_UP: [(.6, 0, 0, .4), (0, .6, 0, .4), (0, 0, .6, .4), (0, 0, 1, 0), (0, 0, 0, 1)],
    A_ALL_DOWN: [(.8, 0, 0, .2), (0, .8, 0, .2), (0, 0, .8, .2), (0, 0, 1, 0), (0, 0, 0, 1)],
    A_MIXED: [(.65, 0, 0, .35), (0, .65, 0, .35), (0, 0, .65, .35), (0, 0, 1, 0), (0, 0, 0, 1)],
}
HAND_REWARD_STEP23 = {A_ALL_UP: [.4, .4, .4, 0, 1], A_ALL_DOWN: [.2, .2, .2, 0, 1],
                      A_MIXED: [.35, .35, .35, 0, 1]}


@pytest.mark.parametrize("wrap", JITS)
def test_linear_mdp_features_and_rewards_match_paper(wrap):
  env = LinearMDP()
  params = env.make_params(delta=0.3, p=0.001, xi_norm=0.1, q=None)
  model = wrap(env.model)(params)
  phi_all = wrap(env.phi_all)
  step = wrap(env.step)
  np.testing.assert_array_equal(env.theta(params), [[0, 0, 0, 0], [0, 0, 0, 1], [0, 0, 0, 1]])
  for a, rows in HAND_PHI.items():
    for s, row in enumerate(rows):
      for h in range(3):
        state = LinearMDPState(s=jnp.int32(s), h=jnp.int32(h))
        np.testing.assert_allclose(phi_all(state, params)[a], row, atol=1e-12)
        np.testing.assert_allclose(model.phi[h, s, a], row, atol=1e-12)
        expected_r = 0.0 if h == 0 else HAND_REWARD_STEP23[a][s]
        np.testing.assert_allclose(model.reward[h, s, a], expected_r, atol=1e-12)
        _, r, done = step(jax.random.key(h), state, a, params)
        np.testing.assert_allclose(r, expected_r, atol=1e-12)
        assert bool(done) == (h == 2)


def _appendix_a_numpy(delta, p, xi_norm, q, target, dtype):
  """Appendix A's features ``[S, A, d]`` and factors ``[H, d, S]`` built entry by entry in NumPy,
  each entry as the paper writes it (``1 - g``, ``g``, ``(1 - p)``, ``p``; 0 and 1)."""
  dtype = np.dtype(dtype)
  delta, p, xi_norm, q = (dtype.type(x) for x in (delta, p, xi_norm, q))
  one, zero = dtype.type(1), dtype.type(0)
  phi = np.zeros((5, 16, 4), dtype)
  for a, vec in enumerate(itertools.product((-1.0, 1.0), repeat=4)):
    g = delta + (xi_norm / dtype.type(4)) * dtype.type(sum(vec))
    for s in range(3):
      phi[s, a, s], phi[s, a, 3] = one - g, g
    phi[3, a, 2], phi[4, a, 3] = one, one
  src = np.zeros((4, 5), dtype)
  src[0, 1], src[0, 3] = one - p, p
  src[1, 2], src[1, 3] = one - p, p
  src[2, 3], src[3, 4] = one, one
  pert = np.zeros((4, 5), dtype)
  pert[0, 1], pert[1, 2], pert[2, 3] = one, one, one
  pert[3, 4], pert[3, 3] = one - q, q
  mu = np.stack([pert if target else src, src, src])
  return phi, mu


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_linear_mdp_model_is_appendix_a_bit_for_bit(dtype):
  """``model``, ``phi_all`` and ``step_given`` (its next-state probabilities, through draws in the
  middle of each state's interval of the cumulative sums) equal Appendix A's entries computed one by one in NumPy, exactly,
  at random parameters in float32 and float64; the model is built in a few operations."""
  env = LinearMDP()
  rng = np.random.default_rng(7)
  model_fn = jax.jit(env.model)
  phi_fn = jax.jit(env.phi_all)
  step_fn = jax.jit(jax.vmap(env.step_given, in_axes=(0, None, None, None)))
  for case in range(4):
    delta, p, q = rng.uniform(0.05, 0.45), rng.uniform(0.0, 0.5), rng.uniform(0.0, 1.0)
    xi_norm = rng.uniform(0.0, min(delta, 1 - delta))
    target = case % 2
    params = env.make_params(delta=delta, p=p, xi_norm=xi_norm, q=q if target else None)
    params = jax.tree.map(lambda x: jnp.asarray(x, dtype), params)
    phi, mu = _appendix_a_numpy(delta, p, xi_norm, q, target, dtype)
    model = model_fn(params)
    np.testing.assert_array_equal(model.phi, np.broadcast_to(phi, (3, 5, 16, 4)))
    np.testing.assert_array_equal(model.mu, mu)
    for s in range(5):
      for h in range(3):
        state = LinearMDPState(s=jnp.int32(s), h=jnp.int32(h))
        np.testing.assert_array_equal(phi_fn(state, params), phi[s])
        for a in (0, 6, 15):
          probs = phi[s, a] @ mu[h]  # [S]
          # categorical_given picks #{cdf < (1 - u) cdf[-1]}: the midpoint of each state's
          # interval of the cumulative sums lands in that state
          cdf = np.concatenate([[0.0], np.cumsum(probs.astype(np.float64))])
          live = np.flatnonzero(probs > 1e-6)
          u = np.asarray(1 - (cdf[live] + cdf[live + 1]) / 2 / cdf[-1], dtype)
          nxt, r, _ = step_fn(jnp.asarray(u), state, jnp.int32(a), params)
          np.testing.assert_array_equal(np.asarray(nxt.s), live)
          np.testing.assert_allclose(r, phi[s, a] @ np.asarray(env.theta(params))[h], rtol=1e-6)
  # a program builds the model in a few operations (a stack of stacks before: 65 equations)
  assert len(jax.make_jaxpr(env.model)(params).jaxpr.eqns) <= 40


def test_linear_mdp_kernels_hand_computed():
  env = LinearMDP()
  src = env.make_params(delta=0.3, p=0.001, xi_norm=0.1)
  P = np.asarray(env.model(src).transition)
  # Source, action (1,1,1,1): g = 0.4; (1 - p)(1 - g) = 0.5994, p (1 - g) = 0.0006.
  for h in range(3):
    np.testing.assert_allclose(P[h, X1, A_ALL_UP], [0, .5994, 0, .0006, .4], atol=1e-12)
    np.testing.assert_allclose(P[h, X2, A_ALL_UP], [0, 0, .5994, .0006, .4], atol=1e-12)
    np.testing.assert_allclose(P[h, X3, A_ALL_UP], [0, 0, 0, .6, .4], atol=1e-12)
    np.testing.assert_allclose(P[h, X3, A_ALL_DOWN], [0, 0, 0, .8, .2], atol=1e-12)
    np.testing.assert_allclose(P[h, X4], np.tile([0, 0, 0, 1, 0], (16, 1)), atol=1e-12)
    np.testing.assert_allclose(P[h, X5], np.tile([0, 0, 0, 0, 1], (16, 1)), atol=1e-12)
  # Target q = 0.3 at x1: x2 w.p. 1-g, x4 w.p. q g, x5 w.p. (1-q) g; steps 2-3 unchanged.
  tgt = env.make_params(delta=0.3, p=0.001, xi_norm=0.1, q=0.3)
  Pt = np.asarray(env.model(tgt).transition)
  np.testing.assert_allclose(Pt[0, X1, A_ALL_UP], [0, .6, 0, .12, .28], atol=1e-12)
  np.testing.assert_allclose(Pt[0, X1, A_ALL_DOWN], [0, .8, 0, .06, .14], atol=1e-12)
  np.testing.assert_allclose(Pt[0, X1, A_MIXED], [0, .65, 0, .105, .245], atol=1e-12)
  np.testing.assert_allclose(Pt[1:], P[1:], atol=1e-12)
  # The general target formula at x1 for every action and a grid of q.
  g = 0.3 + 0.1 / 4 * np.asarray(action_vectors()).sum(-1)
  for q in (0.0, 0.45, 1.0):
    Pq = np.asarray(env.model(env.make_params(q=q)).transition)
    zero = np.zeros_like(g)
    np.testing.assert_allclose(
        Pq[0, X1], np.stack([zero, 1 - g, zero, q * g, (1 - q) * g], -1), atol=1e-12)
  assert np.allclose(P.sum(-1), 1) and np.allclose(Pt.sum(-1), 1)


@pytest.mark.parametrize("xi_norm", [0.1, 0.2, 0.3])
def test_linear_mdp_optimal_first_action_flips_at_critical_q(xi_norm):
  """Backward induction on the target model: with p = 0 the optimal step-1 action at x1 is
  (1,1,1,1) below q* = 1 - G (3 - G) / 2 and (-1,-1,-1,-1) above, G = delta + xi_norm.

  (Appendix A's eq. for the critical point has denominator 4 - 2G instead of 4: 0.6 instead of
  0.48 for G = 0.4; the exact DP on the paper's own construction gives 0.48.)
  """
  env = LinearMDP()
  g = 0.3 + xi_norm
  q_star = 1 - g * (3 - g) / 2
  batch = target_params(env.make_params(delta=0.3, p=0.0, xi_norm=xi_norm),
                        jnp.asarray([q_star - 0.01, q_star + 0.01]))
  models = jax.vmap(env.model)(batch)
  P = np.asarray(jax.vmap(lambda m: m.transition)(models))
  R = np.asarray(models.reward)
  V = np.zeros((2, 5))
  for h in (2, 1, 0):
    Q = R[:, h] + np.einsum("bsat,bt->bsa", P[:, h], V)
    V = Q.max(-1)
  assert np.argmax(Q[0, X1]) == A_ALL_UP and np.argmax(Q[1, X1]) == A_ALL_DOWN


def test_linear_mdp_sampling_matches_model():
  env = LinearMDP()
  params_list = [
      env.make_params(delta=0.3, p=0.001, xi_norm=0.1),
      env.make_params(delta=0.3, p=0.001, xi_norm=0.1, q=0.3),
      env.make_params(delta=0.4, p=0.05, xi_norm=0.3, q=0.9),
  ]
  classes = [(h, s, a) for h in range(3) for s in range(5)
             for a in (A_ALL_UP, A_ALL_DOWN, A_MIXED)]
  nxt, r, done = _sample_classes(env, params_list, classes, jax.random.key(0))
  for i, params in enumerate(params_list):
    model = env.model(params)
    idx = tuple(np.array(c) for c in zip(*classes))
    _assert_frequencies(np.asarray(nxt[i]), np.asarray(model.transition)[idx], N)
    np.testing.assert_allclose(r[i], np.broadcast_to(np.asarray(model.reward)[idx][:, None],
                                                     r[i].shape), atol=1e-12)
    np.testing.assert_array_equal(done[i], np.broadcast_to((idx[0] == 2)[:, None], done[i].shape))


def test_linear_mdp_reset_and_fail_state():
  env = LinearMDP()
  params = env.make_params(q=0.7)
  state = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(jax.random.key(1), 100), params)
  assert np.all(state.s == X1) and np.all(state.h == 0)
  for p in (env.default_params(), params):
    model = env.model(p)
    assert int(model.fail_state) == X4
    np.testing.assert_allclose(model.transition[:, X4, :, X4], 1.0, atol=1e-12)
    np.testing.assert_array_equal(model.reward[:, X4, :], 0.0)
    np.testing.assert_array_equal(model.init_dist, [1, 0, 0, 0, 0])
  assert bool(env.is_fail(LinearMDPState(jnp.int32(X4), jnp.int32(1)), params))
  assert not bool(env.is_fail(LinearMDPState(jnp.int32(X5), jnp.int32(1)), params))


def test_linear_mdp_vmap_over_1000_targets():
  env = LinearMDP()
  src = env.make_params(delta=0.3, p=0.001, xi_norm=0.1)
  qs = jnp.linspace(0.0, 1.0, 1000)
  batch = target_params(src, qs)
  env.validate(batch)
  models = jax.jit(jax.vmap(env.model))(batch)  # every field has a leading [1000] axis
  assert models.mu.shape == (1000, 3, 4, 5)
  P = np.asarray(jax.vmap(lambda m: m.transition)(models))  # [1000, H, S, A, S]
  assert P.shape == (1000, 3, 5, 16, 5)
  np.testing.assert_allclose(P[:, 0, X1, A_ALL_UP, X4], 0.4 * qs, atol=1e-12)
  np.testing.assert_allclose(P[:, 0, X1, A_ALL_UP, X5], 0.4 * (1 - qs), atol=1e-12)
  source_later = np.asarray(env.model(src).transition)[1:]
  np.testing.assert_allclose(P[:, 1:], np.broadcast_to(source_later, P[:, 1:].shape), atol=1e-12)
  # One vmapped step per target domain, from x1 with (1,1,1,1): lands in the support; x4 w.p. 0.4q.
  keys = jax.random.split(jax.random.key(2), 1000)
  start = env.reset(keys[0], src)
  nxt, r, _ = jax.jit(jax.vmap(env.step, in_axes=(0, None, None, 0)))(keys, start, A_ALL_UP, batch)
  assert np.all(P[np.arange(1000), 0, X1, A_ALL_UP, np.asarray(nxt.s)] > 0)
  assert abs(np.mean(nxt.s == X4) - 0.2) < 5 * np.sqrt(0.2 * 0.8 / 1000)
  np.testing.assert_array_equal(r, 0.0)


def _count_traces(env, policy):
  traces = []

  @jax.jit
  def rollout(key, params):
    traces.append(None)  # runs only while tracing
    k_reset, k_steps = jax.random.split(key)

    def body(state, k):
      nxt, r, done = env.step(k, state, policy(state), params)
      return nxt, (r, done)

    return jax.lax.scan(body, env.reset(k_reset, params), jax.random.split(k_steps, env.horizon))

  return rollout, traces


def test_linear_mdp_no_retrace_when_params_change():
  env = LinearMDP()
  rollout, traces = _count_traces(env, lambda s: jnp.int32(A_ALL_UP))
  src = env.default_params()
  for params in (src, env.make_params(q=0.5), target_params(src, 0.9),
                 env.make_params(delta=0.4, p=0.01, xi_norm=0.2)):
    final, (_, done) = rollout(jax.random.key(3), params)
    np.testing.assert_array_equal(done, [False, False, True])
    assert int(final.h) == 3
  assert len(traces) == 1


# ------------------------------------------------------------------------------------ put option
def _po_state(price, exited=False, h=0):
  return PutOptionState(price=jnp.float64(price), exited=jnp.asarray(exited), h=jnp.int32(h))


def _onehot_row(d, entries):
  row = np.zeros(d + 1)
  for i, v in entries.items():
    row[i] = v
  return row


@pytest.mark.parametrize("wrap", JITS)
def test_put_option_features_paper_variant(wrap):
  env = PutOption()  # d = 20, Delta = 60/20 = 3, anchors 80, 83, ..., 137
  assert env.spacing == 3 and env.anchors[0] == 80 and env.anchors[-1] == 137
  params = env.default_params()
  phi_all = wrap(env.phi_all)
  theta = np.asarray(env.theta(params))
  assert theta.shape == (10, 21)
  np.testing.assert_allclose(theta[0, :8], [20, 17, 14, 11, 8, 5, 2, 0])
  np.testing.assert_array_equal(theta[:, 8:], 0.0)
  cases = {  # price: (hat entries of the exercise row, hold payoff, phi(ex) . theta)
      81.5: ({0: .5, 1: .5}, 18.5, 18.5),
      90.0: ({3: 2 / 3, 4: 1 / 3}, 10.0, 10.0),
      99.5: ({6: .5, 7: .5}, 0.5, 1.0),  # interpolation, not the payoff 0.5
      77.5: ({0: 1 / 6}, 22.5, 20 / 6),
      150.0: ({}, 0.0, 0.0),
  }
  for price, (hats, payoff, approx) in cases.items():
    phi = np.asarray(phi_all(_po_state(price), params))
    np.testing.assert_allclose(phi[0], _onehot_row(20, hats), atol=1e-12)
    np.testing.assert_allclose(phi[1], _onehot_row(20, {20: payoff}), atol=1e-12)
    np.testing.assert_allclose(phi[0] @ theta[0], approx, atol=1e-12)
    np.testing.assert_allclose(phi[1] @ theta[0], 0.0, atol=1e-12)
  small = PutOption(num_anchors=4)  # Delta = 15, anchors 80, 95, 110, 125
  phi = small.phi_all(_po_state(100.0), small.default_params())
  np.testing.assert_allclose(phi[0], [0, 2 / 3, 1 / 3, 0, 0], atol=1e-12)


@pytest.mark.parametrize("wrap", JITS)
def test_put_option_features_notebook_variant(wrap):
  env = PutOption(variant="notebook")  # Delta = 100/20 = 5, anchors 80, 85, ..., 175
  assert env.spacing == 5 and env.anchors[-1] == 175
  params = env.default_params()
  phi_all = wrap(env.phi_all)
  theta = np.asarray(env.theta(params))
  np.testing.assert_array_equal(theta, np.tile(_onehot_row(20, {20: 1}), (10, 1)))
  cases = {81.0: ({0: .8, 1: .2}, 19.0), 102.5: ({4: .5, 5: .5}, 0.0), 175.0: ({19: 1}, 0.0)}
  for price, (hats, payoff) in cases.items():
    phi = np.asarray(phi_all(_po_state(price), params))
    np.testing.assert_allclose(phi[0], _onehot_row(20, {20: payoff}), atol=1e-12)  # exercise
    np.testing.assert_allclose(phi[1], _onehot_row(20, hats), atol=1e-12)  # hold
    np.testing.assert_allclose(phi[0] @ theta[0], payoff, atol=1e-12)  # exact payoff


@pytest.mark.parametrize("variant", ["paper", "notebook"])
def test_put_option_payoff_and_exit_state(variant):
  env = PutOption(variant=variant)
  params = env.default_params()
  step = jax.jit(env.step)
  key = jax.random.key(4)
  nxt, r, _ = step(key, _po_state(90.3), 0, params)
  np.testing.assert_allclose(r, 9.7, atol=1e-12)
  assert bool(nxt.exited) and bool(env.is_fail(nxt, params))
  nxt, r, _ = step(key, _po_state(104.0), 0, params)
  assert float(r) == 0.0 and bool(nxt.exited)
  nxt, r, _ = step(key, _po_state(90.3), 1, params)
  assert float(r) == 0.0 and not bool(nxt.exited)
  # Exit state: absorbing, reward 0, features 0, at every step and for every action.
  hs, actions = (jnp.asarray(x, jnp.int32) for x in zip(*itertools.product(range(10), (0, 1))))
  exited = PutOptionState(price=jnp.full(20, 85.0), exited=jnp.ones(20, bool), h=hs)

  def from_exit(state, action):
    keys = jax.random.split(key, 200)
    nxt, r, done = jax.vmap(env.step, in_axes=(0, None, None, None))(keys, state, action, params)
    return nxt, r, done, env.phi_all(state, params)

  nxt, r, done, phi = jax.jit(jax.vmap(from_exit))(exited, actions)
  assert np.all(nxt.exited) and np.all(nxt.price == 85.0) and np.all(r == 0.0)
  np.testing.assert_array_equal(done, np.broadcast_to((hs == 9)[:, None], done.shape))
  np.testing.assert_array_equal(phi, 0.0)


def test_put_option_price_moves_match_p_u():
  env = PutOption()
  p_us = [0.15, 0.5, 0.85]
  params = env.target_params(env.default_params(), jnp.asarray(p_us))
  keys = jax.random.split(jax.random.key(5), N)
  hold = jax.vmap(env.step, in_axes=(0, None, None, None))  # over keys
  nxt, r, _ = jax.jit(jax.vmap(hold, in_axes=(None, None, None, 0)))(
      keys, _po_state(100.0), 1, params)
  price = np.asarray(nxt.price)
  up = np.isclose(price, 102.0, rtol=0, atol=1e-9)
  down = np.isclose(price, 98.0, rtol=0, atol=1e-9)
  assert np.all(up | down) and np.all(r == 0.0)
  _assert_frequencies(up.astype(int), np.stack([1 - np.array(p_us), p_us], -1), N)


def test_put_option_fixed_initial_price_and_rollout():
  env = PutOption(variant="notebook")
  params = env.default_params()
  fixed = jax.vmap(fixed_initial_price, in_axes=(0, None))(
      jax.random.split(jax.random.key(6), 10), params)
  np.testing.assert_array_equal(fixed.init_low, fixed.init_high)
  assert np.all((fixed.init_low >= 95) & (fixed.init_low <= 105))
  assert np.unique(np.asarray(fixed.init_low)).size == 10
  starts = jax.vmap(env.reset, in_axes=(0, None))(
      jax.random.split(jax.random.key(7), 50), jax.tree.map(lambda x: x[3], fixed))
  np.testing.assert_array_equal(starts.price, fixed.init_low[3])
  # Hold for 3 steps, then exercise; p_u = 0 makes the price path 95 * 0.98^h exactly.
  rollout, traces = _count_traces(env, lambda s: jnp.where(s.h < 3, 1, 0))
  (final, (rewards, done)) = rollout(jax.random.key(8), env.make_params(0.0, 95.0, 95.0))
  np.testing.assert_allclose(rewards, [0, 0, 0, 100 - 95 * 0.98**3, 0, 0, 0, 0, 0, 0], atol=1e-9)
  assert bool(final.exited) and done.tolist() == [False] * 9 + [True]
  (_, (rewards, _)) = rollout(jax.random.key(8), env.make_params(1.0, 95.0, 95.0))
  np.testing.assert_array_equal(rewards, 0.0)  # 95 * 1.02^3 = 100.81 > strike
  for params in (env.make_params(p_u=0.2), jax.tree.map(lambda x: x[0], fixed),
                 env.target_params(env.default_params(), 0.8)):
    rollout(jax.random.key(9), params)
  assert len(traces) == 1


# ------------------------------------------------------------------------------------ random DRMDP
def test_random_drmdp_structure_and_validity():
  env, params = random_linear_drmdp(jax.random.key(10), *RANDOM_SHAPE)
  env.validate(params)
  phi, theta, mu = (np.asarray(x) for x in (params.phi, params.theta, params.mu))
  f = int(params.fail_state)
  np.testing.assert_array_equal(phi[:, f], np.tile([1, 0, 0, 0], (3, 3, 1)))  # e_0 (Section 4.1)
  others = np.delete(phi, f, axis=1)
  np.testing.assert_array_equal(others[..., 0], 0.0)
  np.testing.assert_allclose(others.sum(-1), 1.0, atol=1e-12)
  np.testing.assert_array_equal(theta[:, 0], 0.0)
  assert np.all((theta >= 0) & (theta <= 1))
  np.testing.assert_array_equal(mu[:, 0], np.tile(np.eye(6)[f], (3, 1)))
  np.testing.assert_allclose(mu.sum(-1), 1.0, atol=1e-12)
  model = env.model(params)
  assert model.init_dist[f] == 0 and abs(float(model.init_dist.sum()) - 1) < 1e-12
  np.testing.assert_allclose(model.transition[:, f, :, f], 1.0, atol=1e-12)
  np.testing.assert_array_equal(model.reward[:, f], 0.0)
  assert np.all((model.reward >= 0) & (model.reward <= 1))
  # A batch of instances (stacked params) validates as a batch; a bad member is caught.
  other = env.sample_params(jax.random.key(11))
  assert not np.allclose(other.mu, params.mu)
  batch = jax.tree.map(lambda *x: jnp.stack(x), params, other)
  env.validate(batch)
  with pytest.raises(ValueError, match="mu rows must sum to 1"):
    env.validate(batch._replace(mu=batch.mu.at[1, 2, 1].mul(0.5)))


def test_random_drmdp_sampling_matches_model():
  env, params = random_linear_drmdp(jax.random.key(12), *RANDOM_SHAPE)
  classes = [(h, s, a) for h in range(3) for s in range(6) for a in range(3)]
  nxt, r, _ = _sample_classes(env, [params], classes, jax.random.key(13))
  model = env.model(params)
  idx = tuple(np.array(c) for c in zip(*classes))
  _assert_frequencies(np.asarray(nxt[0]), np.asarray(model.transition)[idx], N)
  np.testing.assert_allclose(r[0][:, 0], np.asarray(model.reward)[idx], atol=1e-12)
  hs, ss = (jnp.asarray(x, jnp.int32) for x in zip(*itertools.product(range(3), range(6))))
  states = env.reset(jax.random.key(0), params)._replace(s=ss, h=hs)
  feats, fails = jax.jit(jax.vmap(lambda st: (env.phi_all(st, params), env.is_fail(st, params))))(
      states)
  np.testing.assert_array_equal(feats, np.asarray(model.phi)[np.asarray(hs), np.asarray(ss)])
  np.testing.assert_array_equal(fails, np.asarray(ss) == int(model.fail_state))
  # reset samples from init_dist.
  starts = jax.jit(jax.vmap(env.reset, in_axes=(0, None)))(
      jax.random.split(jax.random.key(14), N), params)
  _assert_frequencies(np.asarray(starts.s), np.asarray(model.init_dist), N)


def test_random_drmdp_no_retrace():
  env = RandomLinearMDP(*RANDOM_SHAPE)
  rollout, traces = _count_traces(env, lambda s: jnp.int32(1))
  for k in range(3):
    rollout(jax.random.key(20), env.sample_params(jax.random.key(k)))
  assert len(traces) == 1


# ------------------------------------------------------------------------------------ bad input
@pytest.mark.parametrize("build, name", [
    (lambda: LinearMDP().make_params(delta=0.95, xi_norm=0.1), "xi_norm"),
    (lambda: LinearMDP().make_params(delta=0.05, xi_norm=0.1), "xi_norm"),
    (lambda: LinearMDP().make_params(q=1.5), "q must"),
    (lambda: LinearMDP().make_params(q=-0.1), "q must"),
    (lambda: LinearMDP().make_params(p=1.2), "p must"),
    (lambda: LinearMDP().validate(target_params(LinearMDP().default_params(),
                                                jnp.linspace(0, 1.2, 7))), "q must"),
    (lambda: PutOption().make_params(p_u=1.2), "p_u"),
    (lambda: PutOption().make_params(p_u=-0.01), "p_u"),
    (lambda: PutOption().make_params(init_low=106.0), "init_low"),
    (lambda: PutOption().make_params(init_low=-5.0), "init_low"),
    (lambda: PutOption(num_anchors=1), "num_anchors"),
    (lambda: PutOption(horizon=-1), "horizon"),
    (lambda: PutOption(horizon=0), "horizon"),
    (lambda: PutOption(variant="book"), "variant"),
    (lambda: RandomLinearMDP(1, 2, 3, 4), "num_states"),
    (lambda: RandomLinearMDP(3, 0, 3, 4), "num_actions"),
    (lambda: RandomLinearMDP(3, 2, 1, 4), "feature_dim"),
    (lambda: RandomLinearMDP(3, 2, 3, -1), "horizon"),
    (lambda: envs.make("breakout"), "name"),
])
def test_bad_input_raises(build, name):
  with pytest.raises(ValueError, match=name):
    build()


def _bad_random(field):
  env, params = random_linear_drmdp(jax.random.key(15), *RANDOM_SHAPE)
  if field == "phi":  # a feature row summing to 1.1
    return env, params._replace(phi=params.phi.at[0, 1, 0, 1].add(0.1))
  if field == "mu":  # a negative factor probability (rows still sum to 1)
    return env, params._replace(mu=params.mu.at[1, 1, 0].add(-0.6).at[1, 1, 1].add(0.6))
  if field == "theta":  # wrong shape
    return env, params._replace(theta=params.theta[:, :2])
  if field == "init_dist":
    return env, params._replace(init_dist=params.init_dist * 0.5)
  if field == "fail":  # fail state leaks: phi(s_f, a) no longer e_0
    return env, params._replace(phi=params.phi.at[0, 0, 1].set(jnp.asarray([0.0, 1, 0, 0])))
  raise AssertionError(field)


@pytest.mark.parametrize("field, match", [
    ("phi", "phi rows must sum to 1"), ("mu", "mu rows must be nonnegative"),
    ("theta", "theta must have shape"), ("init_dist", "init_dist rows must sum to 1"),
    ("fail", "fail state absorbing"),
])
def test_random_drmdp_validate_rejects(field, match):
  env, params = _bad_random(field)
  with pytest.raises(ValueError, match=match):
    env.validate(params)
  with pytest.raises(ValueError, match=match):
    env.make_params(*params)


def test_validate_refuses_traced_params():
  env = LinearMDP()

  @jax.jit
  def f(params):
    env.validate(params)
    return params.q

  with pytest.raises(TypeError, match="concrete"):
    f(env.default_params())


def test_registry_and_public_names():
  assert isinstance(envs.make("linear-mdp"), LinearMDP)
  assert envs.make("put-option", variant="notebook") == PutOption(variant="notebook")
  assert envs.make("random", num_states=4) == RandomLinearMDP(4, 4, 5, 4)
  for name in envs.__all__:
    assert hasattr(envs, name), name
  assert hash(PutOption()) == hash(PutOption()) and hash(LinearMDP()) == hash(LinearMDP())
