"""Exact robust DP (drjax.planning) against linear programs, plain NumPy and brute force."""

import itertools

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import linprog

from drjax import planning, robust
from drjax.envs.base import LinearModel
from drjax.envs.linear_mdp import LinearMDP
from drjax.envs.random_mdp import random_linear_drmdp

# (instance kind, transformation): every kernel runs jitted, and un-jitted on one instance kind.
KIND_JIT = [pytest.param("general", jax.jit, id="general-jit"),
            pytest.param("fail", jax.jit, id="fail-jit"),
            pytest.param("general", lambda f: f, id="general-nojit")]

# Shared jitted kernels (one compilation per shape for the whole module).
DP = jax.jit(planning.robust_dp)
REVAL = jax.jit(planning.robust_evaluate)
REVAL_MANY = jax.jit(jax.vmap(planning.robust_evaluate, in_axes=(None, None, 0)))


# ---------------------------------------------------------------------------------------------
# Instances and independent references.


def general_model(seed, S=5, A=3, d=3, H=3, sparse=True) -> LinearModel:
  """A random linear DRMDP *without* fail state: rewards in [0.1, 1], so min_s V_{h+1}(s) > 0.

  With ``sparse`` some factor distributions put zero mass on some states (often on the
  lowest-value one), which the general TV dual must still use (min over *all* states).
  """
  rng = np.random.default_rng(seed)
  phi = rng.dirichlet(np.ones(d), size=(H, S, A))
  mu = rng.dirichlet(np.ones(S), size=(H, d))
  if sparse:
    mask = rng.random((H, d, S)) < 0.4
    mask[..., 0] = True  # state 0 gets no nominal mass from any factor
    mu = np.where(mask, 0.0, mu) + 1e-300
    mu[..., 0] = 0.0
    mu /= mu.sum(-1, keepdims=True)
  theta = rng.uniform(0.1, 1.0, size=(H, d))
  reward = np.einsum("hsad,hd->hsa", phi, theta)
  reward[:, 0] *= 0.5  # make state 0 (never reached nominally) the least valuable one
  init = rng.dirichlet(np.ones(S))
  return LinearModel(phi=jnp.asarray(phi), theta=jnp.asarray(theta), mu=jnp.asarray(mu),
                     reward=jnp.asarray(reward), fail_state=jnp.asarray(-1, jnp.int32),
                     init_dist=jnp.asarray(init))


def fail_model(seed, S=5, A=3, d=3, H=3) -> LinearModel:
  env, params = random_linear_drmdp(jax.random.key(seed), S, A, d, H)
  return env.model(params)


def random_rho(seed, H, d, hi=0.6):
  return np.random.default_rng(seed + 1000).uniform(0.0, hi, size=(H, d))


def lp_tv_ball_min(mu0, V, rho):
  """min_{nu in simplex, 1/2 ||nu - mu0||_1 <= rho} nu @ V as an LP in (nu, t), t >= |nu - mu0|."""
  S = len(mu0)
  c = np.concatenate([V, np.zeros(S)])
  eye = np.eye(S)
  A_ub = np.block([[eye, -eye], [-eye, -eye], [np.zeros((1, S)), np.ones((1, S))]])
  b_ub = np.concatenate([mu0, -mu0, [2 * rho]])
  A_eq = np.concatenate([np.ones(S), np.zeros(S)])[None]
  res = linprog(c, A_ub=A_ub, b_ub=b_ub, A_eq=A_eq, b_eq=[1.0], bounds=[(0, None)] * (2 * S),
                method="highs")
  assert res.status == 0
  return res.fun, res.x[:S]


def lp_product_of_balls(weights, mu0, V, rho):
  """Joint LP: min over (nu_1..nu_d), nu_i in the TV ball of radius rho_i around mu0_i, of
  sum_i weights_i nu_i @ V. ``weights [d]``, ``mu0 [d, S]``, ``V [S]``, ``rho [d]``."""
  d, S = mu0.shape
  n = d * S
  c = np.concatenate([(weights[:, None] * V[None, :]).ravel(), np.zeros(n)])
  eye = np.eye(n)
  rows_tv = np.zeros((d, 2 * n))
  rows_eq = np.zeros((d, 2 * n))
  for i in range(d):
    rows_tv[i, n + i * S:n + (i + 1) * S] = 1.0
    rows_eq[i, i * S:(i + 1) * S] = 1.0
  A_ub = np.concatenate([np.concatenate([eye, -eye], 1), np.concatenate([-eye, -eye], 1),
                         rows_tv])
  b_ub = np.concatenate([mu0.ravel(), -mu0.ravel(), 2 * np.asarray(rho)])
  res = linprog(c, A_ub=A_ub, b_ub=b_ub, A_eq=rows_eq, b_eq=np.ones(d),
                bounds=[(0, None)] * (2 * n), method="highs")
  assert res.status == 0
  return res.fun


def numpy_value_iteration(P, R):
  """Plain nominal finite-horizon VI on a kernel ``P [H,S,A,S]`` and rewards ``R [H,S,A]``."""
  H, S, A, _ = P.shape
  V = np.zeros((H + 1, S))
  Q = np.zeros((H, S, A))
  for h in reversed(range(H)):
    for s in range(S):
      for a in range(A):
        Q[h, s, a] = R[h, s, a] + P[h, s, a] @ V[h + 1]
      V[h, s] = Q[h, s].max()
  return Q, V


# ---------------------------------------------------------------------------------------------
# The TV worst case: closed form == dual == LP (with and without a zero-value state).


@jax.jit
def _tv_batch(mu, V, rho):
  val, _ = jax.vmap(robust.tv_worst_case_value)(mu, V, rho)
  return val, jax.vmap(robust.tv_worst_case_distribution)(mu, V, rho)


@pytest.mark.parametrize("zero_state", [False, True])
@pytest.mark.parametrize("S", [3, 7])
def test_tv_closed_form_dual_and_lp_agree(zero_state, S):
  rng = np.random.default_rng(3 + zero_state + S)
  T = 20
  mu = rng.dirichlet(np.ones(S), size=T)
  sparse = (rng.random((T, S)) < 0.5) & (np.arange(T) % 3 == 0)[:, None]
  mu = np.where(sparse, 0.0, mu)
  mu[mu.sum(-1) == 0, 0] = 1.0
  mu /= mu.sum(-1, keepdims=True)  # some states without nominal mass
  V = rng.uniform(0.5, 3.0, (T, S))
  if zero_state:
    V[np.arange(T), rng.integers(S, size=T)] = 0.0
  rho = rng.uniform(0, 1, T)
  rho[:3] = [0.0, 1.0, 0.999]
  dual, nu = (np.asarray(x) for x in _tv_batch(jnp.asarray(mu), jnp.asarray(V),
                                                jnp.asarray(rho)))
  for t in range(T):
    lp, _ = lp_tv_ball_min(mu[t], V[t], rho[t])
    np.testing.assert_allclose(dual[t], lp, atol=1e-9)
    np.testing.assert_allclose(nu[t] @ V[t], lp, atol=1e-9)
  assert nu.min() >= -1e-12
  np.testing.assert_allclose(nu.sum(-1), 1.0, atol=1e-12)
  assert np.all(0.5 * np.abs(nu - mu).sum(-1) <= rho + 1e-9)


@pytest.mark.parametrize("kind, jit", KIND_JIT)
def test_one_step_q_equals_lp_over_product_of_factor_balls(kind, jit):
  model = general_model(0, H=2) if kind == "general" else fail_model(0, H=2)
  H, S, A, d = model.phi.shape
  rho = random_rho(0, H, d)
  res = jit(planning.robust_dp)(model, rho)
  V2 = np.asarray(res.v[1])
  if kind == "general":
    assert V2.min() > 0.05  # no zero-value state: the fail-state shortcut does not apply
  phi, mu0, r = (np.asarray(x) for x in (model.phi, model.mu, model.reward))
  for s in range(S):
    for a in range(A):
      lp = lp_product_of_balls(phi[0, s, a], mu0[0], V2, rho[0])
      np.testing.assert_allclose(float(res.q[0, s, a]), r[0, s, a] + lp, atol=1e-9)

  if kind == "general":
    # The fail-state shortcut of Remark 1 (max_alpha E[min(V, alpha)] - rho alpha) is wrong here.
    grid = np.linspace(0, V2.max(), 20001)
    short = np.array([np.max(mu0[0, i] @ np.minimum(V2[:, None], grid[None]) - rho[0, i] * grid)
                      for i in range(d)])
    exact = np.array([lp_tv_ball_min(mu0[0, i], V2, rho[0, i])[0] for i in range(d)])
    assert np.max(np.abs(short - exact)) > 1e-3


# ---------------------------------------------------------------------------------------------
# Robust DP properties.


@pytest.mark.parametrize("kind, jit", KIND_JIT)
def test_rho_zero_is_nominal_value_iteration(kind, jit):
  model = general_model(1) if kind == "general" else fail_model(1)
  H, S, A, d = model.phi.shape
  res = jit(planning.robust_dp)(model, np.zeros((H, d)))
  Q_np, V_np = numpy_value_iteration(np.asarray(model.transition), np.asarray(model.reward))
  np.testing.assert_allclose(np.asarray(res.q), Q_np, atol=1e-12)
  np.testing.assert_allclose(np.asarray(res.v), V_np, atol=1e-12)
  v_nom = jit(planning.nominal_evaluate)(model, res.policy)
  np.testing.assert_allclose(np.asarray(v_nom), V_np, atol=1e-12)
  v_rob0 = jit(planning.robust_evaluate)(model, np.zeros((H, d)), res.policy)
  np.testing.assert_allclose(np.asarray(v_rob0), V_np, atol=1e-12)


@pytest.mark.parametrize("kind", ["general", "fail"])
def test_value_nonincreasing_in_rho(kind):
  model = general_model(2) if kind == "general" else fail_model(2)
  H, S, A, d = model.phi.shape
  base = random_rho(2, H, d, hi=1.0)
  ts = jnp.linspace(0.0, 1.0, 21)
  vs = jax.vmap(lambda t: DP(model, t * base).v)(ts)  # [T, H+1, S]
  diffs = np.diff(np.asarray(vs), axis=0)
  assert diffs.max() <= 1e-12
  assert float(vs[0, 0] @ model.init_dist - vs[-1, 0] @ model.init_dist) > 1e-2


@pytest.mark.parametrize("kind", ["general", "fail"])
def test_optimal_policy_attains_v_star_and_beats_random_policies(kind):
  model = general_model(3) if kind == "general" else fail_model(3)
  H, S, A, d = model.phi.shape
  rho = random_rho(3, H, d)
  res = DP(model, rho)
  v_pi = REVAL(model, rho, res.policy)
  np.testing.assert_allclose(np.asarray(v_pi), np.asarray(res.v), atol=1e-12)
  # V_h*(s) = max_a Q_h*(s, a) and the greedy action is a maximiser.
  np.testing.assert_allclose(np.asarray(res.v[:-1]), np.asarray(res.q).max(-1), atol=0)

  pols = jax.random.randint(jax.random.key(3), (2000, H, S), 0, A).astype(jnp.int32)
  v_rand = REVAL_MANY(model, rho, pols)
  gap = np.asarray(res.v)[None] - np.asarray(v_rand)
  assert gap.min() >= -1e-12
  assert gap[:, 0].max() > 1e-2  # random policies are genuinely worse somewhere


@jax.jit
def _worst_case_check(model, rho, pols, mu_other):
  def one(pi):
    v_rob = planning.robust_evaluate(model, rho, pi)
    mu_w, kernel = planning.worst_case_kernel(model, rho, v_rob[1:])
    v_ker = planning.nominal_evaluate(model, pi, kernel)
    other = jnp.einsum("hsad,hdt->hsat", model.phi, mu_other)
    v_other = planning.nominal_evaluate(model, pi, other)
    v_nom = planning.nominal_evaluate(model, pi)
    return v_rob, mu_w, v_ker, v_other, v_nom

  return jax.vmap(one)(pols)


@pytest.mark.parametrize("kind", ["general", "fail"])
def test_worst_case_kernel_attains_robust_value(kind):
  model = general_model(4) if kind == "general" else fail_model(4)
  H, S, A, d = model.phi.shape
  rho = random_rho(4, H, d)
  pols = jnp.concatenate([DP(model, rho).policy[None],
                          jax.random.randint(jax.random.key(4), (50, H, S), 0, A)
                          .astype(jnp.int32)])
  mu0 = np.asarray(model.mu)
  # Another member of the d-rectangular set: mix each factor with a random distribution
  # (TV <= mixing weight <= rho).
  rng = np.random.default_rng(0)
  u = rng.dirichlet(np.ones(S), size=(H, d))
  lam = rng.uniform(0, 1, size=(H, d, 1)) * rho[..., None]
  mu_other = (1 - lam) * mu0 + lam * u
  v_rob, mu_w, v_ker, v_other, v_nom = (
      np.asarray(x) for x in _worst_case_check(model, jnp.asarray(rho), pols,
                                                jnp.asarray(mu_other)))
  np.testing.assert_allclose(v_ker, v_rob, atol=1e-12)
  assert mu_w.min() >= -1e-12
  np.testing.assert_allclose(mu_w.sum(-1), 1.0, atol=1e-12)
  assert np.all(0.5 * np.abs(mu_w - mu0[None]).sum(-1) <= rho[None] + 1e-9)
  # No other member of the set is worse for the agent than the adversary's choice, and the
  # nominal value is at least the robust one (strictly somewhere, since rho > 0).
  assert np.min(v_other - v_rob) >= -1e-12
  assert np.min(v_nom - v_rob) >= -1e-12
  assert np.max(v_nom - v_rob) > 1e-3


# ---------------------------------------------------------------------------------------------
# Tiny instance: brute force over all policies and a joint LP over the factor balls.


@pytest.mark.parametrize("kind", ["general", "fail"])
def test_tiny_instance_joint_lp_and_all_policies(kind):
  S, A, d, H = 3, 2, 2, 2
  model = general_model(5, S=S, A=A, d=d, H=H) if kind == "general" else fail_model(
      5, S=S, A=A, d=d, H=H)
  rho = np.array([[0.3, 0.7], [0.5, 0.2]])
  phi, mu0, r, init = (np.asarray(x) for x in (model.phi, model.mu, model.reward,
                                               model.init_dist))
  all_pols = np.array(list(itertools.product(range(A), repeat=H * S))).reshape(-1, H, S)
  v_dual = np.asarray(REVAL_MANY(model, rho, jnp.asarray(all_pols, jnp.int32)))
  for pi, vd in zip(all_pols, v_dual):
    # V_2^pi needs no adversary (V_3 = 0); the step-1 adversary picks nu_1..nu_d (shared by all
    # states) in the TV balls to minimise the init-weighted value: one joint LP.
    V2 = r[1, np.arange(S), pi[1]]
    w = init @ phi[0, np.arange(S), pi[0]]  # [d] init-weighted factor weights
    joint = init @ r[0, np.arange(S), pi[0]] + lp_product_of_balls(w, mu0[0], V2, rho[0])
    np.testing.assert_allclose(init @ vd[0], joint, atol=1e-9)
    for s in range(S):  # and from every single start state
      lp_s = r[0, s, pi[0, s]] + lp_product_of_balls(phi[0, s, pi[0, s]], mu0[0], V2, rho[0])
      np.testing.assert_allclose(vd[0, s], lp_s, atol=1e-9)
  res = DP(model, rho)
  np.testing.assert_allclose(v_dual.max(0), np.asarray(res.v), atol=1e-12)
  np.testing.assert_allclose(float(planning.initial_value(model, res.v)),
                             (v_dual[:, 0] @ init).max(), atol=1e-12)


# ---------------------------------------------------------------------------------------------
# The paper's linear MDP: hand-computed numbers (Appendix A).


def test_linear_mdp_hand_computed_values():
  env = LinearMDP()
  delta, p, xi = 0.3, 0.001, 0.1
  m = delta + xi
  v2x2 = 2 * m + (1 - m) * (1 - p) * m  # V_2*(x2)
  src = env.model(env.make_params(delta=delta, p=p, xi_norm=xi))
  plan = DP
  for rho14 in (0.0, 0.3, 0.5):
    rho = np.zeros((3, 4))
    rho[0, 3] = rho14
    res = plan(src, rho)
    v = np.asarray(res.v)
    np.testing.assert_allclose(v[2], [m, m, m, 0, 1], atol=1e-12)
    np.testing.assert_allclose(v[1, [1, 3, 4]], [v2x2, 0, 2], atol=1e-12)
    # Q_1(x1, c) = (1 - c)(1 - p) V_2(x2) + 2 c (1 - rho): affine in c, extreme actions win.
    cands = [(1 - c) * (1 - p) * v2x2 + 2 * c * (1 - rho14) for c in (delta - xi, m)]
    np.testing.assert_allclose(v[0, 0], max(cands), atol=1e-12)
    assert int(res.policy[0, 0]) == (15 if cands[1] > cands[0] else 0)
    assert bool(res.ties[0, 3]) and bool(res.ties[0, 4]) and not bool(res.ties[0, 0])


# ---------------------------------------------------------------------------------------------
# Validation and compilation.


def test_bad_arguments_raise_value_error_naming_them():
  model = fail_model(6)
  H, S, A, d = model.phi.shape
  with pytest.raises(ValueError, match="rho"):
    planning.robust_dp(model, np.zeros((H, d + 1)))
  with pytest.raises(ValueError, match=r"rho must lie in \[0, 1\]"):
    planning.robust_dp(model, np.full((H, d), 1.5))
  with pytest.raises(ValueError, match=r"rho must lie in \[0, 1\]"):
    planning.robust_evaluate(model, np.full((H, d), -0.1), np.zeros((H, S), np.int32))
  with pytest.raises(ValueError, match="policy"):
    planning.robust_evaluate(model, np.zeros((H, d)), np.full((H, S), A, np.int32))
  with pytest.raises(ValueError, match="policy"):
    planning.nominal_evaluate(model, np.zeros((H, S + 1), np.int32))
  with pytest.raises(ValueError, match="policy"):
    planning.nominal_evaluate(model, np.zeros((H, S), np.float64))


def test_jitted_planning_does_not_retrace():
  model = fail_model(7)
  H, S, A, d = model.phi.shape
  fn = jax.jit(chex.assert_max_traces(planning.robust_dp, n=1))
  a = fn(model, jnp.full((H, d), 0.1))
  b = fn(model, jnp.full((H, d), 0.4))
  assert float(a.v[0] @ model.init_dist) > float(b.v[0] @ model.init_dist)
