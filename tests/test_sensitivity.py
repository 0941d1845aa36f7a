"""drjax.sensitivity: gradients vs finite differences, Danskin's closed form, kinks, projection,
worst-case search, pathwise derivatives of a learned estimate, bad input (float64 throughout)."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from scipy.optimize import linprog

import drjax
from drjax import planning, sensitivity as sens
from drjax.envs.linear_mdp import LinearMDP
from drjax.envs.random_mdp import random_linear_drmdp

E14 = np.zeros((3, 4))
E14[0, 3] = 1.0


def _fd(f, x, u, eps=1e-6):
  return (f(x + eps * u) - f(x - eps * u)) / (2 * eps)


@pytest.fixture(scope="module")
def random_case():
  env, params = random_linear_drmdp(jax.random.PRNGKey(7), 6, 3, 4, 3)
  rho = np.asarray(jax.random.uniform(jax.random.PRNGKey(8), (3, 4), minval=0.05, maxval=0.6))
  return env, params, rho


@pytest.fixture(scope="module")
def rho_grad():
  return jax.jit(sens.rho_gradient)


def _assert_kink_free(f, x, u, eps=1e-6, tol=1e-6):
  """Left and right secants agree: no kink within eps (so central FD is a derivative).

  The value is piecewise linear in rho (secants agree to rounding) and smooth between kinks in
  the environment parameters (secants differ by O(eps f''); use tol = 1e-4 there).
  """
  left = (f(x) - f(x - eps * u)) / eps
  right = (f(x + eps * u) - f(x)) / eps
  assert abs(left - right) < tol, (left, right)


# ------------------------------------------------------------------ gradients w.r.t. rho


@pytest.mark.parametrize("which", ["random", "linear"])
@pytest.mark.parametrize("fixed_policy", [False, True])
def test_rho_gradient_matches_fd_and_closed_form(which, fixed_policy, random_case, rho_grad):
  if which == "random":
    env, params, rho = random_case
  else:
    env = LinearMDP()
    params = env.make_params(xi_norm=0.2)
    rho = 0.05 + 0.3 * np.asarray(jax.random.uniform(jax.random.PRNGKey(3), (3, 4)))
  model = env.model(params)
  policy = None
  if fixed_policy:  # some non-optimal policy
    H, S, A = model.reward.shape
    policy = jax.random.randint(jax.random.PRNGKey(5), (H, S), 0, A).astype(jnp.int32)
  res = rho_grad(model, rho, policy)
  value = jax.jit(lambda r: sens.robust_value(model, r, policy))
  assert float(res.value) == pytest.approx(float(value(rho)), abs=1e-12)
  for h, i in itertools.product(range(3), range(4)):
    u = np.zeros((3, 4))
    u[h, i] = 1.0
    _assert_kink_free(value, rho, u)
    np.testing.assert_allclose(res.grad[h, i], _fd(value, rho, u), atol=1e-7)
  np.testing.assert_allclose(res.closed_form, res.grad, atol=1e-12)
  assert np.all(np.asarray(res.grad) <= 1e-12)  # more uncertainty never raises a robust value
  if which == "random":
    assert np.abs(np.asarray(res.grad)).max() > 1e-3  # nontrivial


def test_closed_form_factors_by_hand_linear_mdp():
  """dV*/drho_{1,4} = -alpha*_{1,4} E[phi_4(x1, a*)] = -2 g(a*) (V_2(x5) = 2, V_2(x4) = 0)."""
  env = LinearMDP()
  model = env.model(env.make_params(delta=0.3, p=0.001, xi_norm=0.1))
  for r, g in ((0.2, 0.3 + 0.1), (0.7, 0.3 - 0.1)):  # below / above the switch 0.4806
    res = sens.rho_gradient(model, r * E14)
    assert float(res.alpha_gap[0, 3]) == pytest.approx(2.0)
    assert float(res.feature_occupancy[0, 3]) == pytest.approx(g)
    assert float(res.grad[0, 3]) == pytest.approx(-2 * g)


# ------------------------------------------------------------------ environment parameters


def test_linear_mdp_param_gradients_match_fd():
  env = LinearMDP()
  rho = 0.1 + 0.2 * np.asarray(jax.random.uniform(jax.random.PRNGKey(1), (3, 4)))
  for domain in ("source", "target"):
    q = None if domain == "source" else 0.35
    params = env.make_params(delta=0.31, p=0.02, xi_norm=0.17, q=q)
    names = ("delta", "xi_norm", "p") + (("q",) if q is not None else ())
    value, grads = sens.param_gradient(env, params, rho, names)
    assert set(grads) == set(names)
    for n in names:
      f = lambda x, n=n: sens.robust_value(env.model(params._replace(**{n: x})), rho)  # noqa
      x0 = getattr(params, n)
      _assert_kink_free(f, x0, 1.0, tol=1e-4)
      np.testing.assert_allclose(grads[n], _fd(f, x0, 1.0), atol=1e-7, err_msg=n)
      assert abs(float(grads[n])) > 1e-4, n
    assert float(value) == pytest.approx(float(sens.robust_value(env.model(params), rho)))


def test_random_drmdp_param_gradients_match_fd(random_case):
  env, params, rho = random_case
  _, grads = jax.jit(sens.param_gradient, static_argnums=(0, 3))(env, params, rho,
                                                                   ("mu", "theta"))
  key = jax.random.PRNGKey(11)
  for n in ("mu", "theta"):
    for _ in range(3):
      key, k = jax.random.split(key)
      u = np.asarray(jax.random.normal(k, getattr(params, n).shape))
      if n == "mu":  # stay on the simplex: zero-sum rows, none on the fail factor
        u = u - u.mean(-1, keepdims=True)
        u[:, 0] = 0.0
      f = jax.jit(lambda t, n=n, u=u: sens.robust_value(
          env.model(params._replace(**{n: getattr(params, n) + t * u})), rho))
      _assert_kink_free(f, 0.0, 1.0, tol=1e-4)
      np.testing.assert_allclose(np.sum(grads[n] * u), _fd(f, 0.0, 1.0), atol=1e-7,
                                 err_msg=n)


# ------------------------------------------------------------------ kinks


def _np_first_action(delta, p, xi, rho14):
  """Optimal robust first action at x1 by a loop-based NumPy DP of Appendix A's MDP.

  Written from the paper: phi(x_j, a) for j <= 3 puts 1 - g(a) on factor j and g(a) on factor 4,
  g(a) = delta + xi/4 sum(a); phi(x4) = e3, phi(x5) = e4; theta_1 = 0, theta_2 = theta_3 = e4;
  mu = ((1-p) d_x2 + p d_x4, (1-p) d_x3 + p d_x4, d_x4, d_x5). Worst case over a TV ball: move
  rho of the mass, from the highest-value states down, onto the lowest-value state.
  """
  acts = list(itertools.product((-1, 1), repeat=4))
  g = [delta + xi / 4 * sum(a) for a in acts]
  mu = np.zeros((4, 5))
  mu[0, 1], mu[0, 3] = 1 - p, p
  mu[1, 2], mu[1, 3] = 1 - p, p
  mu[2, 3] = 1.0
  mu[3, 4] = 1.0

  def phi(s, k):
    f = np.zeros(4)
    if s <= 2:
      f[s], f[3] = 1 - g[k], g[k]
    else:
      f[2 if s == 3 else 3] = 1.0
    return f

  def worst(m, v, r):
    m = m.copy()
    low = int(np.argmin(v))
    budget = r
    for s in sorted(range(5), key=lambda s: -v[s]):
      if s == low:
        continue
      take = min(budget, m[s])
      m[s] -= take
      m[low] += take
      budget -= take
    return float(m @ v)

  v = np.zeros(5)
  for h in (2, 1, 0):
    rho = np.zeros(4)
    if h == 0:
      rho[3] = rho14
    nu = np.array([worst(mu[i], v, rho[i]) for i in range(4)])
    theta = np.zeros(4) if h == 0 else np.eye(4)[3]
    q = np.array([[phi(s, k) @ (theta + nu) for k in range(16)] for s in range(5)])
    v = q.max(1)
  return int(np.argmax(q[0]))


def _np_switch(delta, p, xi):
  lo, hi = 0.0, 1.0
  a_lo = _np_first_action(delta, p, xi, lo)
  assert _np_first_action(delta, p, xi, hi - 1e-9) != a_lo
  for _ in range(45):
    mid = 0.5 * (lo + hi)
    if _np_first_action(delta, p, xi, mid) == a_lo:
      lo = mid
    else:
      hi = mid
  return 0.5 * (lo + hi)


@pytest.mark.parametrize("xi, expected", [(0.1, 0.4806), (0.2, 0.3757), (0.3, 0.2808)])
def test_kinks_of_first_action_are_the_exact_switch_points(xi, expected):
  env = LinearMDP()
  model = env.model(env.make_params(delta=0.3, p=0.001, xi_norm=xi))
  kinks = sens.find_kinks(model, np.zeros((3, 4)), E14)
  assert len(kinks) == 1
  truth = _np_switch(0.3, 0.001, xi)
  assert abs(kinks[0] - truth) < 1e-8
  assert abs(kinks[0] - expected) < 1e-4
  # V* is piecewise linear in rho_{1,4} with a single kink: the same point by slope changes.
  assert np.allclose(sens.find_kinks(model, np.zeros((3, 4)), E14, by="slope"), kinks, atol=1e-8)


def test_one_sided_derivatives_at_a_kink_match_one_sided_fd():
  env = LinearMDP()
  model = env.model(env.make_params(delta=0.3, p=0.001, xi_norm=0.2))
  k = sens.find_kinks(model, np.zeros((3, 4)), E14)[0]
  os_ = sens.one_sided_derivatives(model, np.zeros((3, 4)), E14, t=k)
  f = lambda t: float(sens.robust_value(model, t * E14))  # noqa: E731
  h = 1e-5
  np.testing.assert_allclose(os_.left, (f(k) - f(k - h)) / h, atol=1e-6)
  np.testing.assert_allclose(os_.right, (f(k + h) - f(k)) / h, atol=1e-6)
  m = 0.5
  assert float(os_.left) == pytest.approx(-2 * m)  # (1,1,1,1): g = delta + xi
  assert float(os_.right) == pytest.approx(-2 * 0.1)  # (-1,-1,-1,-1): g = delta - xi
  # The bisected kink is not an exact floating-point tie: jax.grad is one of the two sides.
  assert min(abs(os_.autodiff - os_.left), abs(os_.autodiff - os_.right)) < 1e-9


def test_jax_grad_at_an_exact_tie_averages_the_tied_actions():
  """delta = xi_norm = 1/4, p = 0: every number is dyadic, the kink rho* = 3/8 is an exact tie.

  V_2(x2) = 2m + (1-m) m = 5/4 (m = 1/2), so rho* = 1 - V_2(x2)/2 = 3/8, where all 16 actions
  tie (Q_1(x1, a) = 5/4). jnp.max's derivative is the mean over the tied maximisers:
  mean_a -2 g(a) = -2 delta = -1/2, the average of the one-sided derivatives -1 and 0.
  """
  env = LinearMDP()
  model = env.model(env.make_params(delta=0.25, p=0.0, xi_norm=0.25))
  res = planning.robust_dp(model, 0.375 * E14)
  assert bool(res.ties[0, 0]) and np.ptp(np.asarray(res.q[0, 0])) == 0.0
  os_ = sens.one_sided_derivatives(model, np.zeros((3, 4)), E14, t=0.375)
  assert float(os_.left) == pytest.approx(-1.0) and float(os_.right) == pytest.approx(0.0)
  g = jax.grad(lambda r: sens.robust_value(model, r))(0.375 * E14)
  assert float(g[0, 3]) == pytest.approx(-0.5, abs=1e-12)
  assert float(os_.autodiff) == pytest.approx(-0.5, abs=1e-12)


# ------------------------------------------------------------------ projection


def _lp_projection_check(y, mu, rho):
  """Scipy: the projection as a QP via SLSQP on (nu, t) with |nu - mu| <= t."""
  from scipy.optimize import minimize  # pylint: disable=g-import-not-at-top
  S = len(y)
  cons = [{"type": "eq", "fun": lambda z: z[:S].sum() - 1},
          {"type": "ineq", "fun": lambda z: 2 * rho - z[S:].sum()},
          {"type": "ineq", "fun": lambda z: z[S:] - (z[:S] - mu)},
          {"type": "ineq", "fun": lambda z: z[S:] + (z[:S] - mu)}]
  z0 = np.concatenate([mu, np.zeros(S)])
  r = minimize(lambda z: 0.5 * np.sum((z[:S] - y) ** 2), z0, constraints=cons,
               bounds=[(0, None)] * (2 * S), method="SLSQP", options=dict(ftol=1e-14,
                                                                         maxiter=500))
  return r.x[:S]


def test_projection_onto_tv_ball_in_simplex():
  proj = jax.jit(sens.project_tv_simplex)
  feasible = jax.jit(jax.vmap(sens._uniform_in_balls, in_axes=(0, None, None)))
  key = jax.random.PRNGKey(0)
  for trial in range(12):
    key, k1, k2, k3, k4 = jax.random.split(key, 5)
    S = (4, 6)[trial % 2]
    mu = np.asarray(jax.random.dirichlet(k1, 0.5 * jnp.ones(S)))
    scale = float(jax.random.uniform(k4, (), minval=0.05, maxval=2))
    y = mu + np.asarray(jax.random.normal(k2, (S,))) * scale
    rho = (0.0, 1.0)[trial] if trial < 2 else float(jax.random.uniform(k3) * 0.6)
    x = np.asarray(proj(y, mu, rho))
    assert x.min() >= 0 and abs(x.sum() - 1) < 1e-12
    assert 0.5 * np.abs(x - mu).sum() <= rho + 1e-12
    # Variational inequality of a projection, against many feasible points (inside the ball).
    keys = jax.random.split(jax.random.fold_in(jax.random.PRNGKey(1), trial), 500)
    feas = np.asarray(feasible(keys, jnp.asarray(mu), jnp.asarray(rho)))
    assert np.all(0.5 * np.abs(feas - mu).sum(-1) <= rho + 1e-12)  # inside the ball
    assert np.all(feas >= 0) and np.allclose(feas.sum(-1), 1)
    assert ((y - x) * (feas - x)).sum(-1).max() <= 1e-10
    ref = _lp_projection_check(y, mu, rho)
    assert np.sum((x - y) ** 2) <= np.sum((ref - y) ** 2) + 1e-9
    np.testing.assert_allclose(x, ref, atol=1e-5)


# ------------------------------------------------------------------ worst-case search


def _np_sa_robust_value(model, rho_sa, policy):
  """s,a-rectangular robust value by NumPy backward induction with one LP per (h, s)."""
  P = np.asarray(model.transition)
  R = np.asarray(model.reward)
  H, S, A, _ = P.shape
  v = np.zeros(S)
  for h in reversed(range(H)):
    new = np.zeros(S)
    for s in range(S):
      a = int(policy[h, s])
      mu, r = P[h, s, a], float(rho_sa[h, s, a])
      # min <nu, v> s.t. sum nu = 1, nu >= 0, nu - mu <= t, mu - nu <= t, sum t <= 2 r
      c = np.concatenate([v, np.zeros(S)])
      eye = np.eye(S)
      a_ub = np.block([[eye, -eye], [-eye, -eye], [np.zeros((1, S)), np.ones((1, S))]])
      b_ub = np.concatenate([mu, -mu, [2 * r]])
      a_eq = np.concatenate([np.ones(S), np.zeros(S)])[None]
      res = linprog(c, A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=[1.0], bounds=[(0, None)] * 2 * S)
      new[s] = R[h, s, a] + res.fun
    v = new
  return float(np.asarray(model.init_dist) @ v)


def test_worst_case_search_reaches_exact_values_from_above(random_case):
  env, params, rho = random_case
  model = env.model(params)
  policy = planning.robust_dp(model, rho).policy
  key = jax.random.PRNGKey(3)
  exact_d = float(sens.robust_value(model, rho, policy))
  res = sens.worst_case_search(model, policy, sens.d_rectangular_family(model, rho), key,
                               steps=30, restarts=2)
  assert exact_d - 1e-12 <= float(res.value) <= exact_d + 1e-4
  assert np.asarray(res.history).min() >= exact_d - 1e-12  # every iterate is feasible
  # s,a-rectangular ball of radius phi . rho_h: contains the d-rectangular set.
  rho_sa = np.einsum("hsad,hd->hsa", np.asarray(model.phi), rho)
  exact_sa = float(planning.initial_value(model, sens.sa_rectangular_evaluate(model, rho_sa,
                                                                              policy)))
  assert exact_sa == pytest.approx(_np_sa_robust_value(model, rho_sa, np.asarray(policy)),
                                   abs=1e-7)
  assert exact_sa <= exact_d + 1e-12
  res_sa = sens.worst_case_search(model, policy, sens.sa_rectangular_family(model, rho_sa), key,
                                  steps=30, restarts=2)
  assert exact_sa - 1e-12 <= float(res_sa.value) <= exact_sa + 1e-4
  # One factor perturbed towards the fail state at every step: a subset of the d-rect set.
  fam_q = sens.factor_q_family(model, 2, rho[:, 2])
  res_q = sens.worst_case_search(model, policy, fam_q, key, steps=30, restarts=2)
  assert float(res_q.value) >= exact_d - 1e-12
  assert np.all(np.asarray(res_q.params) <= rho[:, 2] + 1e-15)


def test_worst_case_search_linear_mdp_with_an_optimizer_argument():
  env = LinearMDP()
  model = env.model(env.make_params(xi_norm=0.1))
  rho = 0.5 * E14
  policy = planning.robust_dp(model, rho).policy
  exact = float(sens.robust_value(model, rho, policy))
  res = sens.worst_case_search(model, policy, sens.d_rectangular_family(model, rho),
                               jax.random.PRNGKey(0), steps=100, restarts=2,
                               optimizer=optax.chain(optax.clip(1e3), optax.sgd(50.0)))
  assert exact - 1e-12 <= float(res.value) <= exact + 1e-4


# ------------------------------------------------------------------ learned estimates


def test_pathwise_derivative_of_a_learned_estimate_matches_fd():
  env = LinearMDP()
  params = env.make_params(delta=0.3, p=0.001, xi_norm=0.2)
  K = 12
  agent = drjax.dr_lsvi_ucb(3, 4, 16, K)
  hp = drjax.make_hparams(3, 4, rho=0.05, beta=0.05, lam=0.3)
  out = jax.jit(drjax.make_train(env, agent, K))(jax.random.PRNGKey(2), hp, params)
  res = sens.learned_sensitivity(agent, env, params, out.state, hp)
  f = jax.jit(lambda h: sens.learned_value(agent, env, params, out.state, h))
  v, nu = f(hp)
  assert 0.0 < float(res.value) < 3.0 and float(res.value) == pytest.approx(float(v))
  np.testing.assert_allclose(res.nu, nu)
  for name in ("beta", "lam"):
    g = lambda t, name=name: f(hp._replace(**{name: getattr(hp, name) + t}))  # noqa: E731
    np.testing.assert_allclose(getattr(res.d_value, name),
                               (g(1e-6)[0] - g(-1e-6)[0]) / 2e-6, rtol=1e-5, atol=1e-8)
    np.testing.assert_allclose(getattr(res.d_nu, name), (g(1e-6)[1] - g(-1e-6)[1]) / 2e-6,
                               rtol=1e-5, atol=1e-8)
  for h, i in ((0, 3), (1, 1), (0, 0)):
    u = jnp.zeros((3, 4)).at[h, i].set(1.0)
    g = lambda t: f(hp._replace(rho=hp.rho + t * u))  # noqa: E731
    np.testing.assert_allclose(res.d_value.rho[h, i], (g(1e-6)[0] - g(-1e-6)[0]) / 2e-6,
                               rtol=1e-5, atol=1e-8)
    np.testing.assert_allclose(res.d_nu.rho[..., h, i], (g(1e-6)[1] - g(-1e-6)[1]) / 2e-6,
                               rtol=1e-5, atol=1e-8)
  assert float(res.d_value.beta) > 0  # a larger bonus raises the optimistic estimate


def test_learned_sensitivity_of_an_offline_agent_matches_fd():
  """R2PVI-KL re-fit to its dataset: the derivatives in reg_weight, beta and lam (issue 37)."""
  from drjax import data  # pylint: disable=g-import-not-at-top
  from drjax.agents import offline  # pylint: disable=g-import-not-at-top
  env, params = random_linear_drmdp(jax.random.PRNGKey(3), 5, 3, 3, 3)
  params = params._replace(init_dist=jnp.eye(5)[int(params.fail_state == 0)])
  ds = data.collect(env, params, data.uniform(3), jax.random.key(0), 12)
  agent = offline.r2pvi_kl(3, 3, 3)
  hp = offline.make_hparams(agent, reg_weight=0.5, beta=0.05, lam=0.5)
  res = sens.learned_sensitivity(agent, env, params, ds, hp)
  f = jax.jit(lambda h: sens.learned_value(agent, env, params, ds, h)[0])
  assert type(res.d_value) is offline.R2PVIHParams and 0.05 < float(res.value) < 3.0
  assert float(res.value) == pytest.approx(float(f(hp)))
  u = jnp.zeros((3, 3)).at[0, 1].set(1.0)
  for name, d in (("reg_weight", u), ("beta", 1.0), ("lam", 1.0)):
    g = lambda t, name=name, d=d: f(hp._replace(**{name: getattr(hp, name) + t * d}))  # noqa
    want = (g(1e-6) - g(-1e-6)) / 2e-6
    got = jnp.sum(getattr(res.d_value, name) * d)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-8, err_msg=name)
  with pytest.raises(TypeError, match="train_state"):
    sens.learned_sensitivity(agent, env, params, None, hp)
  with pytest.raises(TypeError, match="hparams"):
    sens.learned_sensitivity(agent, env, params, ds, drjax.make_hparams(3, 3))
  va = offline.va_drpvi(3, 3, 3)
  with pytest.raises(TypeError, match="pilot"):
    sens.learned_value(va, env, params, ds, offline.make_hparams(va))


# ------------------------------------------------------------------ bad input


def test_bad_input_raises_value_error_naming_the_argument(random_case):
  env, params, rho = random_case
  model = env.model(params)
  lin = LinearMDP()
  lp = lin.make_params()
  policy = planning.robust_dp(model, rho).policy
  fam = sens.d_rectangular_family(model, rho)
  cases = [
      (lambda: sens.param_gradient(lin, lp, E14, "mu"), "wrt"),
      (lambda: sens.param_gradient(env, params, rho, ("theta", "fail_state")), "wrt"),
      (lambda: sens.rho_gradient(model, rho + 1.0), "rho"),
      (lambda: sens.rho_gradient(model, -rho), "rho"),
      (lambda: sens.rho_gradient(model, rho[:2]), "rho"),
      (lambda: sens.robust_value(model, np.zeros((3, 5))), "rho"),
      (lambda: sens.find_kinks(model, rho, np.ones((3, 4)), t_hi=1.0), "rho"),
      (lambda: sens.one_sided_derivatives(model, rho, np.ones((2, 4))), "direction"),
      (lambda: sens.d_rectangular_family(model, rho * 3), "rho"),
      (lambda: sens.sa_rectangular_family(model, np.full((3, 6, 3), 1.5)), "rho_sa"),
      (lambda: sens.factor_q_family(model, 1, np.array([0.1, 1.2, 0.0])), "q_max"),
      (lambda: sens.factor_q_family(model, 4, np.zeros(3)), "factor"),
      (lambda: sens.worst_case_search(model, policy, fam, jax.random.PRNGKey(0), steps=0),
       "steps"),
      (lambda: sens.worst_case_search(model, policy, fam, jax.random.PRNGKey(0), restarts=-1),
       "restarts"),
      (lambda: sens.worst_case_search(
          model, policy, fam._replace(project=lambda z: 2 * z), jax.random.PRNGKey(0),
          steps=2), "family"),
      (lambda: sens.learned_sensitivity(None, lin, lp, None, drjax.HParams(
          np.full((3, 4), 2.0), np.float64(1.0), np.float64(1.0))), "rho"),
  ]
  for fn, name in cases:
    with pytest.raises(ValueError, match=name):
      fn()
