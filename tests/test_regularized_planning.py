"""Robust regularized (R2PVI: TV / KL / chi2 penalties) and KL-constrained kernels and planners.

Every kernel of drjax.regularized is checked against a direct numerical minimisation of its
*primal* problem over the simplex (scipy: linprog for TV, SLSQP / a softmax parametrisation for
the smooth ones), never against its own closed form; the planners against per-policy backward
recursions built on those references and against a brute force over all deterministic policies.
"""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize
import scipy.special

from drjax import planning, regularized
from drjax.envs import RandomLinearMDP

TIGHT = 1e-7  # closed forms / exact duals vs scipy's primal minimum (scipy's own accuracy ~1e-9)


# ------------------------------------------------------------------ independent references


def _tv_primal(mu, V, w):
  """min_nu <nu, V> + w/2 ||nu - mu||_1 over the simplex: linprog over (nu, t), t >= |nu - mu|."""
  S = len(mu)
  c = np.concatenate([V, 0.5 * w * np.ones(S)])
  eye = np.eye(S)
  A_ub = np.block([[eye, -eye], [-eye, -eye]])
  b_ub = np.concatenate([mu, -mu])
  A_eq = np.concatenate([np.ones(S), np.zeros(S)])[None]
  res = scipy.optimize.linprog(c, A_ub=A_ub, b_ub=b_ub, A_eq=A_eq, b_eq=[1.0],
                               bounds=[(0, None)] * (2 * S), method="highs")
  assert res.status == 0
  return res.fun


def _kl_primal(mu, V, w):
  """min_nu <nu, V> + w KL(nu || mu) over the simplex (nu << mu, else KL = inf): BFGS over
  nu = softmax(x) on the support of mu (a smooth unconstrained parametrisation of its interior)."""
  sup = mu > 0
  v, m = V[sup], mu[sup]

  def f(x):
    nu = scipy.special.softmax(x)
    return nu @ v + w * np.sum(nu * (np.log(nu) - np.log(m)))

  best = np.inf
  for x0 in (np.log(m), np.zeros(len(m)), -v / max(w, 1e-3)):
    res = scipy.optimize.minimize(f, x0, method="BFGS", options=dict(gtol=1e-12, maxiter=5000))
    best = min(best, res.fun)
  return best


def _chi2_primal(mu, V, w):
  """min_nu <nu, V> + w sum (nu - mu)^2 / mu over the simplex (on the support of mu), SLSQP.

  Returns (value, nu) with nu on all states."""
  sup = mu > 0
  v, m = V[sup], mu[sup]

  def f(x):
    return x @ v + w * np.sum((x - m) ** 2 / m)

  def jac(x):
    return v + 2 * w * (x - m) / m

  res = scipy.optimize.minimize(f, m, jac=jac, method="SLSQP", bounds=[(0, 1)] * len(m),
                                constraints=[{"type": "eq", "fun": lambda x: x.sum() - 1,
                                              "jac": lambda x: np.ones_like(x)}],
                                options=dict(ftol=1e-16, maxiter=2000))
  nu = np.zeros_like(mu)
  nu[sup] = res.x
  return res.fun, nu


def _kl_ball_primal(mu, V, rho):
  """min_nu <nu, V> s.t. KL(nu || mu) <= rho over the simplex (support of mu), SLSQP."""
  sup = mu > 0
  v, m = V[sup], mu[sup]

  def kl(x):
    x = np.maximum(x, 1e-300)
    return np.sum(x * (np.log(x) - np.log(m)))

  res = scipy.optimize.minimize(
      lambda x: x @ v, m, jac=lambda x: v, method="SLSQP", bounds=[(0, 1)] * len(m),
      constraints=[{"type": "eq", "fun": lambda x: x.sum() - 1},
                   {"type": "ineq", "fun": lambda x: rho - kl(x)}],
      options=dict(ftol=1e-15, maxiter=2000))
  assert kl(res.x) <= rho + 1e-6 and abs(res.x.sum() - 1) < 1e-8
  return res.fun


def _kl_ball_dual(mu, V, rho):
  """sup_{alpha > 0} -alpha log E_mu exp(-V/alpha) - alpha rho, brute force in numpy: a fine
  log grid of 20,000 points plus a bounded scalar refinement, and the alpha -> 0 limit."""
  sup = mu > 0
  v, m = V[sup], mu[sup] / mu[sup].sum()
  lo = v.min()

  def h(log_alpha):
    a = np.exp(np.asarray(log_alpha, np.float64))[..., None]
    x = -(v - lo) / a
    # log E exp(x): log1p(E expm1(x)) for a sum near 1 (keeps the digits), plain log otherwise.
    z = np.sum(m * np.exp(x), -1)
    log_z = np.where(z > 0.5, np.log1p(np.sum(m * np.expm1(x), -1)), np.log(z))
    return lo - a[..., 0] * log_z - a[..., 0] * rho

  grid = np.linspace(np.log(1e-8), np.log(1e8), 20_000)
  vals = h(grid)
  j = int(np.argmax(vals))
  bounds = (grid[max(j - 1, 0)], grid[min(j + 1, len(grid) - 1)])
  res = scipy.optimize.minimize_scalar(lambda t: -float(h(t)), bounds=bounds, method="bounded",
                                       options=dict(xatol=1e-13))
  best = max(vals[j], -res.fun, lo)
  if rho == 0:
    best = max(best, m @ v)
  return best


def _chi2_dual_candidates(mu, V, w):
  """The chi2 dual maximised the literal way: every interval endpoint (sorted V on the support)
  and every interval's stationary point, each evaluated with a centred variance (numpy)."""
  sup = mu > 0
  v, m = V[sup], mu[sup]

  def g(a):
    x = np.minimum(v, a)
    return m @ x - m @ (x - m @ x) ** 2 / (4 * w)

  vs = np.sort(np.unique(v))
  cands = list(vs)
  for k, lo in enumerate(vs):
    below = v <= lo
    P, A = m[below].sum(), m[below] @ v[below]
    hi = vs[k + 1] if k + 1 < len(vs) else np.inf
    cands.append(min(max((A + 2 * w) / P, lo), hi))
  return max(g(a) for a in cands)


def _instances(seed, n, S):
  """Random (mu, V): generic, ties, constant V, mu with zeros (incl. zero mass at argmin V)."""
  rng = np.random.default_rng(seed)
  out = []
  for j in range(n):
    mu = rng.dirichlet(np.full(S, 0.7))
    V = rng.uniform(0, 5, S)
    kind = j % 5
    if kind == 1:  # ties
      V = np.round(V)
    elif kind == 2:  # constant
      V = np.full(S, 2.5)
    elif kind == 3:  # zeros in mu, one on the minimiser of V
      mu[[np.argmin(V), (np.argmin(V) + 1) % S]] = 0
      mu /= mu.sum()
    elif kind == 4:  # zeros and ties
      V = np.round(V / 2)
      mu[rng.choice(S, S // 2, replace=False)] = 0
      mu /= mu.sum()
    out.append((mu, V))
  return out


WEIGHTS = (0.01, 0.1, 0.7, 3.0, 50.0)
_tv = jax.jit(regularized.tv_regularized_value)
_kl = jax.jit(regularized.kl_regularized_value)
_chi2 = jax.jit(regularized.chi2_regularized_value)
_klc = jax.jit(regularized.kl_constrained_value)
_tv_nu = jax.jit(regularized.tv_regularized_worst_case_distribution)
_kl_nu = jax.jit(regularized.kl_regularized_worst_case_distribution)
_chi2_nu = jax.jit(regularized.chi2_regularized_worst_case_distribution)
_klc_nu = jax.jit(regularized.kl_constrained_worst_case_distribution)


def _assert_distribution(nu, mu=None):
  nu = np.asarray(nu)
  assert np.all(np.isfinite(nu)) and np.all(nu >= 0), nu
  np.testing.assert_allclose(nu.sum(), 1, atol=1e-12)
  if mu is not None:  # absolutely continuous w.r.t. mu (KL and chi2 adversaries)
    assert np.all(nu[np.asarray(mu) == 0] == 0), (nu, mu)


# ------------------------------------------------------------------ kernels vs the simplex


def test_tv_regularized_vs_linprog_and_convention():
  for mu, V in _instances(0, 10, 6):
    for w in WEIGHTS:
      ref = _tv_primal(mu, V, w)
      value = float(_tv(mu, V, w))
      assert abs(value - ref) < TIGHT, (mu, V, w, value, ref)
      nu = np.asarray(_tv_nu(mu, V, w))
      _assert_distribution(nu)
      attained = nu @ V + w * float(regularized.tv_distance(nu, mu))
      assert abs(attained - value) < 1e-12
  # The convention: with TV = ||nu - mu||_1 (no 1/2) the closed form E_mu min(V, m + w) is wrong.
  mu, V, w = np.array([0.5, 0.5, 0.0]), np.array([3.0, 1.0, 0.0]), 1.0
  assert abs(float(_tv(mu, V, w)) - _tv_primal(mu, V, w)) < TIGHT
  assert abs(float(_tv(mu, V, w)) - _tv_primal(mu, V, 2 * w)) > 0.1


def test_kl_regularized_vs_simplex_minimisation():
  for mu, V in _instances(1, 10, 5):
    for w in WEIGHTS:
      ref = _kl_primal(mu, V, w)
      value = float(_kl(mu, V, w))
      assert abs(value - ref) < TIGHT, (mu, V, w, value, ref)
      nu = np.asarray(_kl_nu(mu, V, w))
      _assert_distribution(nu, mu)
      attained = nu @ V + w * float(regularized.kl_divergence(nu, mu))
      assert abs(attained - value) < 1e-10


def test_chi2_regularized_vs_qp_dual_bound_and_candidates():
  for mu, V in _instances(2, 10, 6):
    sup = mu > 0
    vmin = V[sup].min()
    for w in WEIGHTS:
      value, alpha = (float(x) for x in _chi2(mu, V, w))
      ref, nu_ref = _chi2_primal(mu, V, w)
      assert abs(value - ref) < TIGHT, (mu, V, w, value, ref)
      # The dual is a SUP: at least its value at alpha = min V (= min V); a minimising sign
      # error (the R2PVI linear-MDP code's) lands below it.
      g_min = float(regularized.chi2_dual_objective(mu, V, w, vmin))
      assert abs(g_min - vmin) < 1e-12 and value >= g_min - 1e-12
      assert abs(float(regularized.chi2_dual_objective(mu, V, w, alpha)) - value) < 1e-12
      # ... and the literal candidate search (all endpoints and stationary points) agrees.
      assert abs(value - _chi2_dual_candidates(mu, V, w)) < 1e-10
      # No alpha on a fine grid beats it (weak duality the other way round).
      grid = np.linspace(V.min() - 1, V.max() + 1, 401)
      g_grid = jax.vmap(lambda a: regularized.chi2_dual_objective(mu, V, w, a))(grid)
      assert float(jnp.max(g_grid)) <= value + 1e-12
      nu = np.asarray(_chi2_nu(mu, V, w))
      _assert_distribution(nu, mu)
      np.testing.assert_allclose(nu, nu_ref, atol=1e-6)  # strictly convex: unique minimiser
      attained = nu @ V + w * float(regularized.chi2_divergence(nu, mu))
      assert abs(attained - value) < 1e-10


def test_kl_constrained_vs_slsqp_and_brute_force_dual():
  tol = 1e-6
  for mu, V in _instances(3, 10, 5):
    p_min = mu[(mu > 0) & (V == V[mu > 0].min())].sum()
    for rho in (0.0, 1e-3, 0.05, 0.3, 1.5, -np.log(p_min) + 0.1):
      value, alpha = (float(x) for x in _klc(mu, V, rho))
      dual = _kl_ball_dual(mu, V, rho)
      assert value <= dual + 1e-10  # a dual lower bound, never above the true value
      assert dual - value < 1e-9, (mu, V, rho, value, dual)  # second order in tol
      assert abs(value - _kl_ball_primal(mu, V, rho)) < 1e-6
      nu = np.asarray(_klc_nu(mu, V, rho))
      _assert_distribution(nu, mu)
      assert abs(nu @ V - value) < 1e-6
      assert float(regularized.kl_divergence(nu, mu)) <= rho + 10 * tol
  # The two exact limits: rho = 0 is the nominal mean, a large rho the minimum over the support.
  mu, V = np.array([0.2, 0.3, 0.5, 0.0]), np.array([1.0, 4.0, 2.0, -7.0])
  assert float(_klc(mu, V, 0.0)[0]) == pytest.approx(mu @ V, abs=1e-14)
  assert float(_klc(mu, V, 2.0)[0]) == pytest.approx(1.0, abs=1e-14)  # rho >= -log 0.2
  # A tighter tolerance takes more iterations.
  assert (regularized.kl_constrained_num_iterations(1e-9)
          > regularized.kl_constrained_num_iterations(1e-3) > 0)


# ------------------------------------------------------------------ limits, monotonicity, dtypes


def test_limits_and_monotone_in_weight():
  rng = np.random.default_rng(4)
  ws = np.logspace(-3, 4, 60)
  for _ in range(4):
    mu = rng.dirichlet(np.ones(7))
    V = rng.uniform(0, 3, 7)
    mean = mu @ V
    # TV: w >= max V - min V is the nominal mean, exactly.
    for w in (V.max() - V.min(), V.max() - V.min() + 1, 1e6):
      assert float(_tv(mu, V, w)) == pytest.approx(mean, abs=1e-14)
    for fn in (_tv, _kl, lambda *a: _chi2(*a)[0]):
      vals = np.array([float(fn(mu, V, w)) for w in ws])
      assert np.all(np.diff(vals) >= -1e-12), vals  # nondecreasing in w
      assert np.all(vals <= mean + 1e-12) and np.all(vals >= V.min() - 1e-12)
      assert abs(float(fn(mu, V, 1e9)) - mean) < 1e-8  # w -> inf: the nominal mean
      assert abs(float(fn(mu, V, 1e-9)) - V.min()) < 1e-6  # w -> 0: the minimum
    rhos = np.logspace(-6, 1, 30)  # KL ball: nonincreasing in the radius
    vals = np.array([float(_klc(mu, V, r)[0]) for r in rhos])
    assert np.all(np.diff(vals) <= 1e-9), vals


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_small_weight_no_underflow(dtype):
  mu = np.array([0.1, 0.2, 0.3, 0.25, 0.15])
  V = np.array([20.0, 9.0, 12.0, 8.0, 19.0])  # exp(-V / 0.01) <= e^-800: 0 in float32 and float64
  ref = -0.01 * scipy.special.logsumexp(-V / 0.01, b=mu)  # float64 reference
  mu_t, V_t = jnp.asarray(mu, dtype), jnp.asarray(V, dtype)
  rtol = 1e-6 if dtype == np.float32 else 1e-13
  out = regularized.kl_regularized_value(mu_t, V_t, 0.01)
  assert out.dtype == dtype and np.isfinite(float(out))
  np.testing.assert_allclose(float(out), ref, rtol=rtol)
  nu = regularized.kl_regularized_worst_case_distribution(mu_t, V_t, 0.01)
  assert nu.dtype == dtype and np.all(np.isfinite(nu)) and abs(float(nu.sum()) - 1) < 1e-6
  for fn in (regularized.chi2_regularized_value, regularized.kl_constrained_value):
    value, alpha = fn(mu_t, V_t, 0.01)
    assert value.dtype == dtype and np.isfinite(float(value)) and float(value) >= 8.0 - 1e-5
  # With x64 off altogether (JAX's default float32 world).
  with jax.enable_x64(False):
    out32 = regularized.kl_regularized_value(jnp.asarray(mu), jnp.asarray(V), 0.01)
    assert out32.dtype == jnp.float32
    np.testing.assert_allclose(float(out32), ref, rtol=1e-6)


def test_nan_free_on_degenerate_inputs_under_jit_and_vmap():
  mus = np.array([[0.0, 1.0, 0.0, 0.0], [0.25] * 4, [0.5, 0.0, 0.5, 0.0], [0.0, 0.0, 0.0, 1.0]])
  Vs = np.array([[3.0, 3.0, 3.0, 3.0], [1.0, 1.0, 2.0, 2.0], [-1.0, 7.0, -1.0, 9.0],
                 [0.0, 5.0, 5.0, 5.0]])
  for w in (1e-4, 1.0, 1e5):
    ws = np.full(4, w)
    for fn in (regularized.tv_regularized_value, regularized.kl_regularized_value,
               lambda *a: regularized.chi2_regularized_value(*a)[0],
               lambda *a: regularized.kl_constrained_value(*a)[0],
               regularized.tv_regularized_worst_case_distribution,
               regularized.kl_regularized_worst_case_distribution,
               regularized.chi2_regularized_worst_case_distribution,
               regularized.kl_constrained_worst_case_distribution):
      out = np.asarray(jax.jit(jax.vmap(fn))(mus, Vs, ws))
      assert np.all(np.isfinite(out)), (fn, w, out)
  # Constant V: every penalty leaves the value at that constant.
  for fn in (_tv, _kl, lambda *a: _chi2(*a)[0], lambda *a: _klc(*a)[0]):
    assert float(fn(mus[1], Vs[0], 0.3)) == pytest.approx(3.0, abs=1e-14)


# ------------------------------------------------------------------ planners


ENV = RandomLinearMDP(num_states=4, num_actions=2, feature_dim=3, horizon=3)
_ALL_POLICIES = np.array(list(itertools.product(range(2), repeat=12)), np.int32).reshape(-1, 3, 4)


def _model(k):
  return ENV.model(ENV.sample_params(jax.random.key(k)))


def _ref_evaluate(model, factor_ref, param, policy):
  """Backward recursion of a deterministic policy with a scipy-backed factor oracle."""
  phi, mu, reward = (np.asarray(x) for x in (model.phi, model.mu, model.reward))
  H, S, A, d = phi.shape
  v = np.zeros((H + 1, S))
  for h in reversed(range(H)):
    nu = np.array([factor_ref(mu[h, i], v[h + 1], param[h, i]) for i in range(d)])
    for s in range(S):
      a = policy[h, s]
      v[h, s] = reward[h, s, a] + phi[h, s, a] @ nu
  return v


REFS = {"tv": _tv_primal, "kl": _kl_primal, "chi2": lambda *a: _chi2_primal(*a)[0]}


@pytest.mark.parametrize("divergence", planning.DIVERGENCES)
def test_regularized_planning_vs_scipy_and_all_policies(divergence):
  model = _model(7)
  weight = np.array([[0.05, 0.3, 1.0], [0.2, 0.1, 2.0], [1.0, 0.5, 0.05]])
  rng = np.random.default_rng(5)
  for policy in _ALL_POLICIES[rng.choice(len(_ALL_POLICIES), 2, replace=False)]:
    ref = _ref_evaluate(model, REFS[divergence], weight, policy)
    got = planning.regularized_evaluate(model, weight, divergence, policy)
    np.testing.assert_allclose(got, ref, atol=1e-6)
  # The DP's value is the max over all 4096 deterministic policies' values, state by state.
  res = planning.regularized_dp(model, weight, divergence)
  evals = jax.jit(jax.vmap(lambda p: planning.regularized_evaluate(model, weight, divergence, p))
                  )(_ALL_POLICIES)
  np.testing.assert_allclose(res.v, np.max(evals, axis=0), atol=1e-12)
  np.testing.assert_allclose(planning.regularized_evaluate(model, weight, divergence, res.policy),
                             res.v, atol=1e-12)
  nominal = planning.robust_dp(model, np.zeros((3, 3)))
  assert np.all(np.asarray(res.v) <= np.asarray(nominal.v) + 1e-12)  # the adversary only hurts
  # Worst-case kernel: with the penalty rewards it reproduces the regularized value; without, it
  # gives the value in the worst environment, which the penalties keep below the regularized one.
  v_pi = planning.regularized_evaluate(model, weight, divergence, res.policy)
  mu_w, kernel, penalty = planning.regularized_worst_case_kernel(model, weight, divergence,
                                                                 v_pi[1:])
  assert mu_w.shape == (3, 3, 4) and kernel.shape == (3, 4, 2, 4) and penalty.shape == (3, 3)
  assert np.all(np.asarray(penalty) >= 0)
  penalised = model._replace(reward=model.reward + jnp.einsum("hsad,hd->hsa", model.phi, penalty))
  np.testing.assert_allclose(planning.nominal_evaluate(penalised, res.policy, kernel), v_pi,
                             atol=1e-10)
  assert np.all(np.asarray(planning.nominal_evaluate(model, res.policy, kernel))
                <= np.asarray(v_pi) + 1e-12)


def test_regularized_limits_and_jit_vmap():
  model = _model(11)
  nominal = planning.robust_dp(model, np.zeros((3, 3)))
  # Values lie in [0, H]: a TV weight >= H never pays to move mass, so this is nominal VI exactly.
  tv = planning.regularized_dp(model, 3.0, "tv")
  np.testing.assert_allclose(tv.v, nominal.v, atol=1e-13)
  np.testing.assert_array_equal(tv.policy, nominal.policy)
  for div in ("kl", "chi2"):
    np.testing.assert_allclose(planning.regularized_dp(model, 1e9, div).v, nominal.v, atol=1e-7)
  # Scalar weight == broadcast table; jit (static divergence) and vmap over weights.
  w = np.full((3, 3), 0.4)
  dp_jit = jax.jit(planning.regularized_dp, static_argnums=2)
  for div in planning.DIVERGENCES:
    ref = planning.regularized_dp(model, w, div)
    np.testing.assert_allclose(planning.regularized_dp(model, 0.4, div).v, ref.v, atol=1e-14)
    np.testing.assert_allclose(dp_jit(model, jnp.asarray(w), div).q, ref.q, atol=1e-12)
    batch = jax.vmap(lambda x: planning.regularized_dp(model, x, div).v)(jnp.array([0.4, 5.0]))
    np.testing.assert_allclose(batch[0], ref.v, atol=1e-12)
    # Monotone in the weight, state by state.
    assert np.all(np.asarray(batch[0]) <= np.asarray(batch[1]) + 1e-12)


def test_kl_constrained_planning():
  model = _model(3)
  rho = np.array([[0.05, 0.2, 1.0], [0.5, 0.01, 0.3], [2.0, 0.1, 0.0]])
  policy = _ALL_POLICIES[1234]
  ref = _ref_evaluate(model, _kl_ball_dual, rho, policy)
  got = planning.kl_constrained_evaluate(model, rho, policy)
  assert np.all(np.asarray(got) <= ref + 1e-10)  # every factor is a dual lower bound
  np.testing.assert_allclose(got, ref, atol=1e-8)
  res = planning.kl_constrained_dp(model, rho)
  evals = jax.jit(jax.vmap(lambda p: planning.kl_constrained_evaluate(model, rho, p))
                  )(_ALL_POLICIES)
  np.testing.assert_allclose(res.v, np.max(evals, axis=0), atol=1e-8)
  # rho = 0 is nominal value iteration (the alpha -> inf limit is exact).
  nominal = planning.robust_dp(model, np.zeros((3, 3)))
  np.testing.assert_allclose(planning.kl_constrained_dp(model, 0.0).v, nominal.v, atol=1e-13)
  # The worst-case kernel reproduces the constrained value (up to the search tolerance).
  v_pi = planning.kl_constrained_evaluate(model, rho, res.policy)
  mu_w, kernel = planning.kl_constrained_worst_case_kernel(model, rho, v_pi[1:])
  np.testing.assert_allclose(planning.nominal_evaluate(model, res.policy, kernel), v_pi,
                             atol=1e-5)
  kl = jax.vmap(jax.vmap(regularized.kl_divergence))(mu_w, model.mu)
  assert np.all(np.asarray(kl) <= rho + 1e-5)


# ------------------------------------------------------------------ bad inputs


def test_bad_inputs_raise_named_errors():
  model = _model(0)
  pol = np.zeros((3, 4), np.int32)
  with pytest.raises(ValueError, match=r"divergence must be one of \('tv', 'kl', 'chi2'\)"):
    planning.regularized_dp(model, 0.1, "chi-square")
  for bad in (0.0, -1.0, np.nan, np.inf):
    with pytest.raises(ValueError, match="^weight must"):
      planning.regularized_dp(model, bad, "kl")
    with pytest.raises(ValueError, match="^weight must"):
      planning.regularized_evaluate(model, np.full((3, 3), bad), "tv", pol)
    with pytest.raises(ValueError, match="^w must"):
      regularized.chi2_regularized_value(np.ones(3) / 3, np.zeros(3), bad)
  with pytest.raises(ValueError, match="^weight must be a scalar or have shape"):
    planning.regularized_dp(model, np.ones((3, 2)), "tv")
  with pytest.raises(ValueError, match="^v_next_per_step must be finite"):
    planning.regularized_worst_case_kernel(model, 1.0, "tv", np.full((3, 4), np.nan))
  with pytest.raises(ValueError, match="^policy"):
    planning.regularized_evaluate(model, 1.0, "tv", np.full((3, 4), 2, np.int32))
  for bad in (0.0, -1e-3, np.nan):
    with pytest.raises(ValueError, match="^tol must"):
      planning.kl_constrained_dp(model, 0.1, tol=bad)
  with pytest.raises(ValueError, match="^rho must"):
    planning.kl_constrained_dp(model, -0.1)
  with pytest.raises(ValueError, match="^rho must"):
    regularized.kl_constrained_value(np.ones(3) / 3, np.zeros(3), np.inf)
  with pytest.raises(ValueError, match="^bracket must"):
    regularized.kl_constrained_value(np.ones(3) / 3, np.zeros(3), 0.1, bracket=(1.0, 0.5))
  with pytest.raises(ValueError, match="^mu must be a probability distribution"):
    regularized.kl_regularized_value(np.array([0.5, 0.6]), np.zeros(2), 1.0)
  with pytest.raises(ValueError, match="^V must be finite"):
    regularized.tv_regularized_value(np.ones(2) / 2, np.array([0.0, np.nan]), 1.0)
