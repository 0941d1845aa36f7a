"""The training engine: sufficient statistics == buffer == NumPy oracle, segmented == full buffer,
Sherman-Morrison == Cholesky, the atom kernel == brute force, and the forms' bad inputs."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import oracle
from drjax import linalg, robust
from drjax.agents import registry
from drjax.agents.base import make_hparams
from drjax.agents.lsvi import dr_lsvi_ucb, lsvi_ucb
from drjax.envs.linear_mdp import LinearMDP
from drjax.envs.put_option import PutOption
from drjax.envs.random_mdp import random_linear_drmdp
from drjax.train import make_train, replan, segment_bounds

K = 20


def _env(name):
  if name == "linear-mdp":
    env = LinearMDP()
    return env, env.make_params(delta=0.3, p=0.001, xi_norm=0.2)
  return random_linear_drmdp(jax.random.PRNGKey(4), 7, 3, 5, 3)


def _agent(kind, preset, env, **kw):
  H, d, A = env.horizon, env.feature_dim, env.num_actions
  if kind == "dr":
    return dr_lsvi_ucb(H, d, A, K, bonus=preset, tie_break="optimistic" if preset == "paper"
                       else "first", **kw)
  return lsvi_ucb(H, d, A, K, clip=preset, tie_break="optimistic" if preset == "paper"
                  else "first", **kw)


def _hp(env, seed=0):
  H, d = env.horizon, env.feature_dim
  rho = np.random.default_rng(seed).uniform(0.0, 0.7, size=(H, d))
  return make_hparams(H, d, rho=rho, beta=0.8, lam=0.4)


def _assert_same_run(a, b, tol=1e-10):
  np.testing.assert_array_equal(np.asarray(a.actions), np.asarray(b.actions))
  np.testing.assert_allclose(np.asarray(a.returns), np.asarray(b.returns), atol=tol)
  for f in ("w", "nu", "pinv"):
    np.testing.assert_allclose(np.asarray(getattr(a.qf, f)), np.asarray(getattr(b.qf, f)),
                               atol=tol, rtol=0, err_msg=f)
  np.testing.assert_allclose(np.asarray(a.final_qf.w), np.asarray(b.final_qf.w), atol=tol)


@pytest.mark.parametrize("env_name,kind,preset", [
    ("linear-mdp", "dr", "paper"), ("linear-mdp", "lsvi", "notebook"),
    ("random", "dr", "notebook"), ("random", "lsvi", "paper")])
def test_stats_equals_buffer_equals_oracle(env_name, kind, preset):
  env, params = _env(env_name)
  agent = _agent(kind, preset, env)
  hp = _hp(env)
  key = jax.random.PRNGKey(2)
  runs = {form: jax.jit(make_train(env, agent, K, record_q=True, form=form))(key, hp, params)
          for form in ("stats", "buffer")}
  _assert_same_run(runs["stats"], runs["buffer"])
  # Q-values at every state of the model agree too (not only the weights).
  model = env.model(params)
  fail = jnp.arange(model.phi.shape[1]) == model.fail_state

  @jax.jit  # episode k's Q_h at every state: one compiled call, not op by op per (k, h, form)
  def q_at_states(qf, k, h):
    qf_k = jax.tree_util.tree_map(lambda x: x[k], qf)
    return jax.vmap(lambda ph, f: agent.q_values(qf_k, h, ph, f))(model.phi[h], fail)

  for k in (1, K // 2, K - 1):
    for h in range(env.horizon):
      qs = [np.asarray(q_at_states(r.qf, k, h)) for r in runs.values()]
      np.testing.assert_allclose(qs[0], qs[1], atol=1e-10)
  # And the buffer run still matches the loop-based oracle written from Algorithm 1.
  st = runs["buffer"].state
  buffers = {n: np.asarray(getattr(st, n)) for n in ("phi", "reward", "next_phi", "next_fail")}
  ref = oracle.replay(buffers, np.asarray(env.theta(params)), np.asarray(hp.rho), 0.8, 0.4,
                      robust=kind == "dr", bonus_form=preset, clip_form=preset)
  for k in (0, 3, K - 1):
    np.testing.assert_allclose(np.asarray(runs["stats"].qf.w[k]), ref[k]["w"], atol=1e-8)
    np.testing.assert_allclose(np.asarray(runs["stats"].qf.pinv[k]), ref[k]["Lam_inv"],
                               atol=1e-8)


@pytest.mark.parametrize("kind", ["dr", "lsvi"])
def test_segmented_buffer_equals_full_capacity(kind):
  env, params = _env("random")
  agent = _agent(kind, "paper", env)
  hp = _hp(env, 1)
  key = jax.random.PRNGKey(9)
  seg = jax.jit(make_train(env, agent, K, record_q=True, form="buffer", segments=True))
  full = jax.jit(make_train(env, agent, K, record_q=True, form="buffer", segments=False))
  _assert_same_run(seg(key, hp, params), full(key, hp, params), tol=1e-12)


def test_segment_bounds_cover_and_grow():
  for k in (1, 5, 16, 17, 100, 1000):
    b = segment_bounds(k)
    assert b[-1] == k and all(x < y for x, y in zip(b, b[1:]))
  b = segment_bounds(10_000)
  cost = sum((end - start) * end for start, end in zip((0,) + b[:-1], b))
  assert cost < 1.3 * 10_000 ** 2 / 2  # about K^2/2 atom passes, not K^2


def test_put_option_segmented_buffer_and_sherman_morrison():
  env = PutOption()
  params = env.default_params()
  H, d, A = env.horizon, env.feature_dim, env.num_actions
  hp = make_hparams(H, d, rho=0.3, beta=1.0, lam=0.1)
  key = jax.random.PRNGKey(3)
  outs = {}
  for solver in ("cholesky", "sherman-morrison"):
    agent = dr_lsvi_ucb(H, d, A, 12, solver=solver)
    outs[solver] = jax.jit(make_train(env, agent, 12, record_q=True))(key, hp, params)
  _assert_same_run(outs["cholesky"], outs["sherman-morrison"], tol=1e-8)


@pytest.mark.parametrize("preset", ["paper", "notebook"])
def test_lsvi_incremental_ellipsoid_norms(preset):
  """LSVI-UCB with Sherman-Morrison keeps x^T Lambda_{h+1}^-1 x of every stored next state by
  rank-1 downdates (AgentState.quad): equal to the direct products at the end of a run, the same
  run as refactorizing Cholesky (which computes the bonus from Lambda^-1 at every plan), and the
  same norms whether episodes arrive whole (store_episode) or step by step (observe)."""
  import drjax.paper as P  # pylint: disable=g-import-not-at-top
  s = P.setup(preset, "put-option", episodes=12)
  env, params = s.env, s.params
  H, d, A = env.horizon, env.feature_dim, env.num_actions
  known = s.agents["lsvi-ucb"].config.known
  hp = make_hparams(H, d, rho=0.0, beta=1.0, lam=0.1)
  key = jax.random.PRNGKey(3)
  outs = {}
  for solver in ("cholesky", "sherman-morrison"):
    agent = lsvi_ucb(H, d, A, 12, solver=solver, known=known)
    outs[solver] = jax.jit(make_train(env, agent, 12, record_q=True))(key, hp, params)
  assert outs["cholesky"].state.quad is None
  _assert_same_run(outs["cholesky"], outs["sherman-morrison"], tol=1e-8)
  st = outs["sherman-morrison"].state
  nphi, pinv = np.asarray(st.next_phi), np.asarray(st.pinv)
  direct = np.zeros(st.quad.shape)
  for h in range(H - 1):
    for k in range(12):
      for a in range(A):
        direct[h, k, a] = nphi[h, k, a] @ pinv[h + 1] @ nphi[h, k, a]
  np.testing.assert_allclose(np.asarray(st.quad), direct, atol=1e-9 * max(1.0, direct.max()))
  agent = lsvi_ucb(H, d, A, 12, solver="sherman-morrison", known=known)
  by_step = by_episode = agent.init(env.theta(params), hp.lam)
  # Each update compiled once (episode k and step h traced), not run op by op.
  store, observe, end = (jax.jit(f) for f in (agent.store_episode, agent.observe,
                                              agent.end_episode))
  for k in range(4):
    args = [np.asarray(x)[:, k] for x in (st.phi, st.reward, st.next_phi, st.next_fail)]
    by_episode = store(by_episode, k, *args)
    for h in range(H):
      by_step = observe(by_step, h, *(x[h] for x in args))
    by_step = end(by_step)
  np.testing.assert_allclose(np.asarray(by_step.quad), np.asarray(by_episode.quad), atol=1e-9)
  assert (np.asarray(by_step.quad)[:-1, :4] > 0).any()  # filled in (exit states have 0)


def test_replan_is_a_pathwise_function_of_lambda():
  """replan recomputes Lambda^-1 from the Gram matrix: Sherman-Morrison state, other lambda."""
  env, params = _env("random")
  H, d, A = env.horizon, env.feature_dim, env.num_actions
  agent = dr_lsvi_ucb(H, d, A, K, solver="sherman-morrison")
  hp = _hp(env)
  out = jax.jit(make_train(env, agent, K, form="stats"))(jax.random.PRNGKey(0), hp, params)
  # replan at a traced lambda, compiled once (and its gradient once), not op by op.
  at = lambda lam: replan(env, agent, out.state, hp._replace(lam=lam), params)  # noqa: E731
  at_jit = jax.jit(at)
  qf = at_jit(jnp.asarray(1.7))
  gram = np.asarray(out.state.gram)
  np.testing.assert_allclose(np.asarray(qf.pinv), np.linalg.inv(gram + 1.7 * np.eye(d)),
                             atol=1e-10)
  g = jax.jit(jax.grad(lambda lam: at(lam).w.sum()))
  eps = 1e-6
  f = lambda lam: float(at_jit(jnp.asarray(lam)).w.sum())  # noqa: E731
  np.testing.assert_allclose(float(g(jnp.asarray(0.4))), (f(0.4 + eps) - f(0.4 - eps)) / (2 * eps),
                             rtol=1e-5, atol=1e-7)


def test_lsvi_fail_zero_option_changes_the_backup():
  env, params = _env("random")
  hp = _hp(env)
  key = jax.random.PRNGKey(5)
  H, d, A = env.horizon, env.feature_dim, env.num_actions
  outs = {}
  for fz in (True, False):
    agent = lsvi_ucb(H, d, A, K, fail_zero=fz)
    out = jax.jit(make_train(env, agent, K, record_q=True, form="buffer"))(key, hp, params)
    st = out.state
    buffers = {n: np.asarray(getattr(st, n)) for n in ("phi", "reward", "next_phi", "next_fail")}
    ref = oracle.replay(buffers, np.asarray(env.theta(params)), np.asarray(hp.rho), 0.8, 0.4,
                        robust=False, fail_zero=fz)
    np.testing.assert_allclose(np.asarray(out.qf.w[K - 1]), ref[K - 1]["w"], atol=1e-8)
    # On the same data the oracle distinguishes the two (so the comparison above can fail).
    other = oracle.replay(buffers, np.asarray(env.theta(params)), np.asarray(hp.rho), 0.8, 0.4,
                          robust=False, fail_zero=not fz)
    assert np.abs(other[K - 1]["w"] - ref[K - 1]["w"]).max() > 1e-6


@pytest.mark.parametrize("n", [1, 7, 60, 300])
@pytest.mark.parametrize("method", ["exact", "grid", "exact+grid"])
def test_alpha_max_atoms_equals_brute_force(n, method, monkeypatch):
  rng = np.random.default_rng(n)
  d, H = 3, 4.0
  g = rng.uniform(0, 1, size=(n, d))
  v = np.round(rng.uniform(-0.5, H + 0.5, size=n), 1)  # ties and values outside [0, H]
  gram = 0.3 * np.eye(d) + g.T @ g
  pinv = np.linalg.inv(gram)
  rho = rng.uniform(0, 1, size=d)
  grid = np.linspace(0, H, 9)
  cands = {"exact": [0.0, H] + [min(max(x, 0.0), H) for x in v], "grid": list(grid)}
  cands["exact+grid"] = cands["exact"] + cands["grid"]
  a = np.asarray(cands[method])  # every candidate, brute force: z(a) = Lambda^-1 sum g min(v, a)
  best = (pinv @ g.T @ np.minimum(v[:, None], a[None, :]) - rho[:, None] * a[None, :]).max(1)
  # The sort-free product, the sort by pairwise ranks and XLA's sort (forced by
  # RANK_SORT_MAX = 0); n = 300 is above SORT_FREE_MAX_ATOMS, where sort=None sorts.
  for sort, rank_max in ((False, None), (True, None), (True, 0), (None, None)):
    monkeypatch.setattr(linalg, "RANK_SORT_MAX", 256 if rank_max is None else rank_max)
    # One compiled call per variant (a new function: traced again, reading RANK_SORT_MAX).
    nu, alpha = jax.jit(lambda *a, sort=sort: robust.alpha_max_atoms(
        *a, H, method=method, grid=jnp.asarray(grid), sort=sort))(
            jnp.asarray(pinv), jnp.asarray(g), jnp.asarray(v), jnp.asarray(rho))
    np.testing.assert_allclose(np.asarray(nu), best, atol=1e-10)
    alpha = np.asarray(alpha)
    z_at = np.array([(pinv @ g.T @ np.minimum(v, alpha[i]))[i] - rho[i] * alpha[i]
                     for i in range(d)])
    np.testing.assert_allclose(z_at, best, atol=1e-10)  # alpha_star attains the maximum


def test_spd_inverse_unrolled_and_looped():
  rng = np.random.default_rng(0)
  for d in (1, 3, 8, 12):
    x = rng.normal(size=(3 * d, d))
    a = x.T @ x + 0.1 * np.eye(d)
    np.testing.assert_allclose(np.asarray(robust.spd_inverse(jnp.asarray(a))), np.linalg.inv(a),
                               rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize("sa, sb", [
    ((16, 4), (4,)),            # Q-values: phi_all [A, d] @ w [d]
    ((5, 16, 4), (4,)),         # at every next state
    ((4,), (4, 5)),             # the linear MDP's step: phi [d] @ mu_h [d, S]
    ((4,), (4,)),               # reward: phi @ theta_h
    ((3, 4, 5), (5, 7)),        # matrix x matrix, batch broadcast on one side
    ((2, 1, 3, 8), (4, 8, 2)),  # batch dimensions broadcast against each other, k = 8
    ((6, 9), (9, 2)),           # k = 9 > UNROLL_MAX_D: a @ b
])
def test_small_matmul_equals_matmul_and_unrolls_small_contractions(sa, sb):
  """``linalg._small_matmul`` against NumPy's float64 ``matmul`` in float64 and float32, its
  derivative against finite differences, and no ``dot_general`` left for ``k <= 8`` (what makes
  it faster under vmap) while ``k = 9`` keeps the product."""
  rng = np.random.default_rng(0)
  a, b = rng.normal(size=sa), rng.normal(size=sb)
  want = np.matmul(a, b)
  got = linalg._small_matmul(jnp.asarray(a), jnp.asarray(b))
  assert got.shape == want.shape
  np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12, atol=1e-12)
  # d/da of sum(w * (a @ b)) is w @ b^T (summed over broadcast axes): check by central FD.
  w = rng.normal(size=want.shape)
  f = lambda x: jnp.sum(jnp.asarray(w) * linalg._small_matmul(x, jnp.asarray(b)))  # noqa: E731
  g = np.asarray(jax.grad(f)(jnp.asarray(a)))
  idx = tuple(0 for _ in sa)
  e = np.zeros(sa)
  e[idx] = 1e-6
  fd = (float(f(jnp.asarray(a + e))) - float(f(jnp.asarray(a - e)))) / 2e-6
  np.testing.assert_allclose(g[idx], fd, rtol=1e-6, atol=1e-8)
  got32 = linalg._small_matmul(jnp.asarray(a, jnp.float32), jnp.asarray(b, jnp.float32))
  np.testing.assert_allclose(np.asarray(got32), want, rtol=1e-5, atol=1e-5)
  jaxpr = str(jax.make_jaxpr(jax.vmap(linalg._small_matmul))(
      jnp.zeros((3,) + sa, jnp.float32), jnp.zeros((3,) + sb, jnp.float32)))
  assert ("dot_general" in jaxpr) == (sa[-1] > linalg.UNROLL_MAX_D), jaxpr


@pytest.mark.parametrize("sa, sb", [((16, 4), (4,)), ((4,), (4, 5)), ((4,), (4,)),
                                     ((3, 4, 5), (5, 7)), ((2, 1, 3, 8), (4, 8, 2))])
def test_small_matmul_is_the_in_order_sum_from_one_multiply(sa, sb):
  """The unrolled product is ``t_0 + t_1 + ... + t_{k-1}`` (``t_i`` the i-th products), in that
  order: op by op in float32 it equals that sum computed in NumPy bit for bit; and its k products
  come from ONE elementwise multiply (fewer operations to compile than k multiplies)."""
  rng = np.random.default_rng(1)
  a = rng.normal(size=sa).astype(np.float32)
  b = rng.normal(size=sb).astype(np.float32)
  k = sa[-1]
  if len(sb) == 1:
    terms = [a[..., i] * b[i] for i in range(k)]
  elif len(sa) == 1:
    terms = [a[i] * b[..., i, :] for i in range(k)]
  else:
    terms = [a[..., :, i:i + 1] * b[..., i:i + 1, :] for i in range(k)]
  want = terms[0]
  for t in terms[1:]:
    want = want + t
  with jax.disable_jit():
    got = np.asarray(linalg._small_matmul(jnp.asarray(a), jnp.asarray(b)))
  np.testing.assert_array_equal(got, want)
  jaxpr = jax.make_jaxpr(linalg._small_matmul)(jnp.asarray(a), jnp.asarray(b)).jaxpr
  assert [e.primitive.name for e in jaxpr.eqns].count("mul") == 1, jaxpr


def test_small_matmul_mismatched_shapes_raise_like_matmul():
  with pytest.raises(TypeError):
    linalg._small_matmul(jnp.zeros((3, 4)), jnp.zeros((5,)))
  with pytest.raises(TypeError):
    jnp.zeros((3, 4)) @ jnp.zeros((5,))


def test_forcing_stats_on_a_continuous_env_names_the_option():
  env = PutOption()
  agent = dr_lsvi_ucb(env.horizon, env.feature_dim, env.num_actions, 5)
  with pytest.raises(ValueError, match="form='stats'"):
    make_train(env, agent, 5, form="stats")
  with pytest.raises(ValueError, match="form must be one of"):
    make_train(env, agent, 5, form="fast")
  with pytest.raises(ValueError, match="capacity 5 must be >= num_episodes 6"):
    make_train(env, agent, 6)
  with pytest.raises(ValueError, match="outputs must be a subset"):
    make_train(env, agent, 5, outputs=("returns", "buffers"))


@pytest.mark.parametrize("kind", ["dr", "lsvi"])
def test_stats_sherman_morrison_operator_equals_cholesky(kind):
  """The stats form's incrementally kept ridge operator M = Lambda^-1 G^T (Sherman-Morrison)
  gives the same run as refactorizing the Gram matrix at every plan."""
  env, params = _env("random")
  hp = _hp(env, 3)
  key = jax.random.PRNGKey(8)
  runs = [jax.jit(make_train(env, _agent(kind, "paper", env, solver=sv), K, record_q=True,
                             form="stats"))(key, hp, params)
          for sv in ("cholesky", "sherman-morrison")]
  assert runs[1].state.M is not None and runs[0].state.M is None
  np.testing.assert_allclose(np.asarray(runs[1].state.M),
                             np.linalg.inv(np.asarray(runs[1].state.gram) + 0.4 * np.eye(5))
                             @ np.swapaxes(np.asarray(runs[1].state.G), 1, 2), atol=1e-9)
  _assert_same_run(runs[0], runs[1], tol=1e-8)
  # LSVI-UCB also keeps every state's ellipsoid norm phi^T Lambda^-1 phi (StatsState.quad).
  quad = runs[1].state.quad
  if kind == "dr":
    assert quad is None
  else:
    tab = np.asarray(env.model(params).phi)  # [H, S, A, d]
    pinv = np.linalg.inv(np.asarray(runs[1].state.gram) + 0.4 * np.eye(5))
    direct = np.einsum("hsad,hde,hsae->hsa", tab, pinv, tab)
    np.testing.assert_allclose(np.asarray(quad), direct, atol=1e-9)


def test_float32_small_lambda_is_refused_and_the_smallest_allowed_is_nan_free():
  """float32: lam < 1e-5 raises naming lam (NaN Q-functions otherwise); lam = 1e-5 trains without
  a NaN anywhere under jax_debug_nans (in this process, with float64 and debug_nans switched by
  JAX's context managers: the same programs as a fresh float32 interpreter's)."""
  import drjax  # pylint: disable=g-import-not-at-top
  with jax.enable_x64(False), jax.debug_nans(True):
    with pytest.raises(ValueError, match="lam"):
      drjax.make_hparams(3, 4, lam=1e-6)
    env = LinearMDP()
    p = env.make_params()
    hp = drjax.make_hparams(3, 4, rho=0.3, beta=1.0, lam=1e-5)
    out = jax.jit(drjax.make_train(env, drjax.dr_lsvi_ucb(3, 4, 16, 60), 60, record_q=True))(
        jax.random.PRNGKey(0), hp, p)
    assert out.qf.w.dtype == jnp.float32
    assert bool(jnp.isfinite(out.qf.w).all())


AGENT_CASES = [("dr-lsvi-ucb", {}, dict(rho=0.1)), ("lsvi-ucb", {}, {}),
               ("we-drive-u", dict(reward="regressed", cap="robust"),
                dict(rho=0.05, beta=0.5, lam=0.3, beta_var=1.0, var_floor=0.05))]


@pytest.mark.parametrize("level", [0, 3])
@pytest.mark.parametrize("name,options,values", AGENT_CASES)
def test_the_recorded_action_is_the_played_action(name, options, values, level):
  # Every use of an episode's action reads one value: the returns equal the model's rewards at the
  # recorded states and actions, step by step, for one run and for a batch of seeds. (An argmax
  # written as elementwise comparisons let XLA compute it twice, a rounding apart at a near-tie:
  # at -O0 this We-DRIVE-U run recorded action 1 at its first step and played action 0.)
  env, params = random_linear_drmdp(jax.random.key(0), 6, 3, 4, 3)
  reward = np.asarray(env.model(params).reward)  # [H, S, A]
  K = 40
  agent = registry.make(name, env, capacity=K, **options)
  hp = registry.make_hparams(name, env, **values)
  train = make_train(env, agent, K, outputs=("returns", "states", "actions"))
  opts = {"xla_backend_optimization_level": level}
  one = jax.jit(train, compiler_options=opts)(jax.random.key(1), hp, params)
  many = jax.jit(jax.vmap(train, in_axes=(0, None, None)), compiler_options=opts)(
      jax.random.split(jax.random.key(2), 8), hp, params)
  h = np.arange(env.horizon)
  for out in (one, many):
    s, a = np.asarray(out.states), np.asarray(out.actions)  # [..., K, H]
    np.testing.assert_allclose(np.asarray(out.returns), reward[h, s, a].sum(-1), rtol=1e-12,
                               atol=1e-12)
