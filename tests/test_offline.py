"""Offline family (PEVI, DRPVI, VA-DRPVI) against independent computations.

* every algorithm vs the loop-based NumPy oracle written from the papers (``offline_oracle.py``),
  float64, on identical datasets, for the default and the public code's options;
* limits: DRPVI(rho = 0) >= pessimistic VI with known theta per step and == it for one-hot
  (tabular) features; VA-DRPVI with every variance at the floor == DRPVI; PEVI(beta = 0) ==
  least-squares value iteration by ``np.linalg.lstsq``; stats form == buffer form;
* the general TV dual's exact maximization against a dense brute-force grid;
* exact suboptimality and Theorem 4.4's bound against direct computations;
* no recompilation for new hyperparameter values of any offline agent.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import drjax
from drjax import data, evaluate, planning, robust
from drjax.agents import offline, registry
from drjax.train import make_fit

import offline_oracle as oo

LIN = drjax.LinearMDP()
LIN_P = LIN.make_params(xi_norm=0.2)
PUT = drjax.PutOption(num_anchors=4, horizon=5, variant="notebook")
PUT_P = PUT.make_params()


def _np(ds):
  return {f: np.asarray(getattr(ds, f)) for f in ds._fields}


@pytest.fixture(scope="module")
def lin_data():
  ds = data.collect(LIN, LIN_P, data.uniform(16), jax.random.key(0), 30)
  pilot = data.collect(LIN, LIN_P, data.uniform(16), jax.random.key(1), 25)
  # Drop two trajectories through the mask: invalid rows must be ignored entirely.
  ds = ds._replace(valid=ds.valid.at[jnp.array([3, 17])].set(False))
  return ds, pilot


@pytest.fixture(scope="module")
def put_data():
  b = data.uniform(2)
  ds = data.collect(PUT, PUT_P, b, jax.random.key(2), 40)
  pilot = data.collect(PUT, PUT_P, b, jax.random.key(3), 35)
  return ds, pilot


def _rho(H, d, key=0):
  return np.asarray(jax.random.uniform(jax.random.key(key), (H, d), minval=0.0, maxval=0.6))


def _compare(qf, ref, ds, agent, *, pinv=True):
  np.testing.assert_allclose(np.asarray(qf.w), ref["w"], atol=1e-8, rtol=0)
  if pinv:
    np.testing.assert_allclose(np.asarray(qf.pinv), ref["lam_inv"], atol=1e-8, rtol=0)
  H = ds.phi.shape[0]
  nphi, nfail = np.asarray(ds.next_phi), np.asarray(ds.next_fail)
  # drjax's Q_{h+1} at every 7th next state of step h: one compiled call over the states.
  q_rows = jax.jit(jax.vmap(agent.q_values, in_axes=(None, None, 0, 0)))
  for h in range(H - 1):  # Q_{h+1} at every next state of the data, and the greedy actions
    q_all = np.asarray(q_rows(qf, h + 1, nphi[h, ::7], nfail[h, ::7]))
    for i, n in enumerate(range(0, nphi.shape[1], 7)):
      fail = bool(nfail[h, n])
      q_ref = ref["q"](h + 1, nphi[h, n], fail)
      np.testing.assert_allclose(q_all[i], q_ref, atol=1e-8, rtol=0)


@pytest.mark.parametrize("opts", [dict(), dict(truncation="upper", fail_zero=False)])
def test_pevi_matches_oracle(lin_data, put_data, opts):
  for ds, _ in (lin_data, put_data):
    H, N, d = ds.phi.shape
    A = ds.next_phi.shape[2]
    agent = offline.pevi(H, d, A, **opts)
    hp = offline.make_hparams(agent, beta=0.3, lam=0.2)
    ref = oo.pevi(_np(ds), 0.3, 0.2, fail_zero=opts.get("fail_zero", True),
                  clip=opts.get("truncation", "paper"))
    _compare(agent.fit(ds, hp), ref, ds, agent)


@pytest.mark.parametrize("opts", [
    dict(vmin="data"),
    dict(vmin="zero", penalty="notebook", truncation="upper"),
    dict(vmin="data", fail_zero=False),
])
def test_drpvi_matches_oracle(lin_data, put_data, opts):
  for ds, _ in (lin_data, put_data):
    H, N, d = ds.phi.shape
    A = ds.next_phi.shape[2]
    agent = offline.drpvi(H, d, A, **opts)
    rho = _rho(H, d)
    hp = offline.make_hparams(agent, rho=rho, beta=0.05, lam=0.1)
    ref = oo.drpvi(_np(ds), rho, 0.05, 0.1, vmin=opts["vmin"],
                   fail_zero=opts.get("fail_zero", True), clip=opts.get("truncation", "paper"),
                   penalty=opts.get("penalty", "paper"))
    assert np.abs(ref["nu"]).max() > 0.1  # the robust weights are not trivially zero
    _compare(agent.fit(ds, hp), ref, ds, agent)


def test_drpvi_exact_vmin_uses_every_state_of_the_model(lin_data):
  ds, _ = lin_data
  model = LIN.model(LIN_P)
  agent = offline.drpvi(3, 4, 16, vmin="exact")
  rho = _rho(3, 4, 1)
  hp = offline.make_hparams(agent, rho=rho, beta=0.05, lam=0.1)
  qf = agent.fit(ds, hp, model=model, form="buffer")
  # Oracle with m = min over all states of the model of V_{h+1}, computed from drjax's own Q only
  # through the model's features (row h: states at step h + 1).
  m = np.zeros(3)
  for h in range(2):
    fail = np.arange(model.phi.shape[1]) == int(model.fail_state)
    q = np.stack([np.asarray(agent.q_values(qf, h + 1, model.phi[h + 1, s], fail[s]))
                  for s in range(model.phi.shape[1])])
    m[h] = q.max(-1).min()
  ref = oo.drpvi(_np(ds), rho, 0.05, 0.1, vmin=m)
  _compare(qf, ref, ds, agent)


@pytest.mark.parametrize("variance", ["alg3", "alg2"])
def test_va_drpvi_matches_oracle_with_nontrivial_weights(put_data, variance):
  ds, pilot = put_data
  H, N, d = ds.phi.shape
  agent = offline.va_drpvi(H, d, 2, vmin="data", variance=variance,
                           grid_size=5 if variance == "alg2" else 0)
  rho = _rho(H, d, 2)
  hp = offline.make_hparams(agent, rho=rho, beta=0.05, lam=0.1)
  ref = oo.va_drpvi(_np(ds), _np(pilot), rho, 0.05, 0.1, vmin="data", variance=variance,
                    grid=np.asarray(robust.make_grid(H, 5, jnp.float64)) if variance == "alg2"
                    else None)
  qf = agent.fit(ds, hp, pilot=pilot)
  if variance == "alg3":
    # The put option's values reach ~20: the variance weights are not all at the floor of 1, so
    # VA-DRPVI must differ from DRPVI here (otherwise this test would not test the weights).
    dr = offline.drpvi(H, d, 2, vmin="data").fit(ds, offline.make_hparams(
        offline.drpvi(H, d, 2, vmin="data"), rho=rho, beta=0.05, lam=0.1))
    assert np.abs(np.asarray(dr.w) - np.asarray(qf.w)).max() > 1e-3
    _compare(qf, ref, ds, agent)
  else:
    np.testing.assert_allclose(np.asarray(qf.w), ref["w"], atol=1e-8, rtol=0)
    sd = np.sqrt(np.diagonal(np.asarray(qf.pinv), axis1=1, axis2=2))
    np.testing.assert_allclose(sd, ref["penalty_diag"], atol=1e-8, rtol=0)


def test_va_drpvi_at_the_variance_floor_is_drpvi(lin_data):
  ds, pilot = lin_data
  va = offline.va_drpvi(3, 4, 16)
  dr = offline.drpvi(3, 4, 16)
  rho = _rho(3, 4, 3)
  qv = va.fit(ds, offline.make_hparams(va, rho=rho, beta=0.5, var_shift=1e6), pilot=pilot)
  qd = dr.fit(ds, offline.make_hparams(dr, rho=rho, beta=0.5))
  for a, b in zip(qv, qd):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-12)


def test_pevi_without_penalty_is_least_squares_value_iteration(put_data):
  ds, _ = put_data
  H, N, d = ds.phi.shape
  agent = offline.pevi(H, d, 2, truncation="upper", fail_zero=False)
  lam = 0.3
  qf = agent.fit(ds, offline.make_hparams(agent, beta=0.0, lam=lam))
  phi, r, nphi = (np.asarray(x) for x in (ds.phi, ds.reward, ds.next_phi))
  w_next = None
  for h in range(H - 1, -1, -1):
    y = r[h] + (0 if w_next is None else np.minimum(nphi[h] @ w_next, H - h - 1).max(-1))
    # Ridge as ordinary least squares on the augmented system [phi; sqrt(lam) I] w = [y; 0].
    X = np.vstack([phi[h], np.sqrt(lam) * np.eye(d)])
    w = np.linalg.lstsq(X, np.concatenate([y, np.zeros(d)]), rcond=None)[0]
    np.testing.assert_allclose(np.asarray(qf.w[h]), w, atol=1e-8)
    w_next = w


def test_drpvi_rho0_vs_pessimistic_vi_with_known_theta():
  # (1) Per step, for any features: nu(rho = 0) = max_alpha z(alpha) >= z(H) = the ridge of V.
  @jax.jit  # one compiled case (not 20 rounds of eager ops)
  def case(k1, k2):
    g = jax.random.dirichlet(k1, jnp.ones(4), (12,))
    v = jax.random.uniform(k2, (12,), maxval=3.0)
    pinv = jnp.linalg.inv(g.T @ g + 0.1 * jnp.eye(4))
    nu, _ = robust.alpha_max_atoms(pinv, g, v, jnp.zeros(4), 3.0, vmin=jnp.min(v))
    return nu, pinv @ (g.T @ v)

  key = jax.random.key(5)
  for i in range(20):
    k1, k2, key = jax.random.split(key, 3)
    nu, ridge = case(k1, k2)
    assert np.all(np.asarray(nu) >= np.asarray(ridge) - 1e-12)
  # (2) One-hot (tabular) features: equal to pessimistic VI with known theta, a plain loop.
  S, A, H, N = 3, 2, 3, 40
  d = S * A
  rng = np.random.default_rng(0)  # local generator: test data only
  s = rng.integers(0, S, (H, N))
  a = rng.integers(0, A, (H, N))
  s2 = rng.integers(0, S, (H, N))
  onehot = lambda s_, a_: np.eye(d)[s_ * A + a_]  # noqa: E731
  theta = rng.uniform(0, 1, (H, d))
  ds = data.Dataset(
      phi=jnp.asarray(onehot(s, a)), action=jnp.asarray(a, jnp.int32),
      reward=jnp.asarray(np.einsum("hnd,hd->hn", onehot(s, a), theta)),
      next_phi=jnp.asarray(np.stack([onehot(s2, np.full_like(s2, b)) for b in range(A)], 2)),
      next_fail=jnp.zeros((H, N), bool), state=jnp.asarray(s, jnp.int32),
      next_state=jnp.asarray(s2, jnp.int32), theta=jnp.asarray(theta),
      valid=jnp.ones((N,), bool))
  agent = offline.drpvi(H, d, A, vmin="data")
  beta, lam = 0.2, 0.1
  qf = agent.fit(ds, offline.make_hparams(agent, rho=0.0, beta=beta, lam=lam))
  V = np.zeros(S)
  for h in range(H - 1, -1, -1):
    gram = lam * np.eye(d) + onehot(s[h], a[h]).T @ onehot(s[h], a[h])
    pinv = np.linalg.inv(gram)
    w = theta[h] + pinv @ (onehot(s[h], a[h]).T @ V[s2[h]])
    np.testing.assert_allclose(np.asarray(qf.w[h]), w, atol=1e-10)
    q = np.clip(np.eye(d) @ w - beta * np.sqrt(np.diag(pinv)), 0, H - h).reshape(S, A)
    V = q.max(-1)


def test_general_tv_dual_is_exact_against_a_dense_grid():
  @jax.jit  # one compiled case (not 10 rounds of eager ops)
  def case(k1, k2, k3):
    g = jax.random.dirichlet(k1, jnp.ones(3), (15,))
    v = jax.random.uniform(k2, (15,), minval=0.4, maxval=3.0)  # min V > 0: the general form
    rho = jax.random.uniform(k3, (3,))
    pinv = jnp.linalg.inv(g.T @ g + 0.05 * jnp.eye(3))
    m = jnp.min(v)
    nu, alpha = robust.alpha_max_atoms(pinv, g, v, rho, 3.0, vmin=m)
    grid = jnp.linspace(0.0, 3.0, 30001)
    z = pinv @ (g.T @ jnp.minimum(v[:, None], grid[None, :]))
    vals = z - rho[:, None] * (grid - jnp.minimum(m, grid))[None, :]
    # The reported alpha's own objective value.
    z_a = jax.vmap(lambda a: pinv @ (g.T @ jnp.minimum(v, a)))(alpha)
    at = jnp.diagonal(z_a) - rho * (alpha - jnp.minimum(m, alpha))
    return nu, vals.max(1), at

  key = jax.random.key(7)
  for i in range(10):
    k1, k2, k3, key = jax.random.split(key, 4)
    nu, grid_max, at = (np.asarray(x) for x in case(k1, k2, k3))
    np.testing.assert_array_less(grid_max, nu + 1e-12)
    assert np.abs(grid_max - nu).max() < 1e-3
    # The reported alpha attains nu.
    np.testing.assert_allclose(at, nu, atol=1e-10)


def test_stats_form_equals_buffer_form(lin_data):
  ds, pilot = lin_data
  model = LIN.model(LIN_P)
  for name in registry.names("offline"):
    agent = registry.make(name, LIN)
    kw = {"rho": _rho(3, 4, 4)} if registry.get(name).robust else {}
    hp = registry.make_hparams(name, LIN, beta=0.5, **kw)
    a = agent.fit(ds, hp, pilot=pilot, model=model, form="stats")
    b = agent.fit(ds, hp, pilot=pilot, model=model, form="buffer")
    for x, y in zip(a, b):
      np.testing.assert_allclose(np.asarray(x), np.asarray(y), atol=1e-10, err_msg=name)


def test_subopt_and_theorem_4_4_bound_against_direct_computations(lin_data):
  ds, _ = lin_data
  model = LIN.model(LIN_P)
  agent = offline.drpvi(3, 4, 16)
  rho = np.zeros((3, 4))
  rho[0, 3] = 0.4
  qf = agent.fit(ds, offline.make_hparams(agent, rho=rho), model=model)
  zero = np.zeros((3, 4))

  @jax.jit  # drjax's side in one compiled program (planning and evaluate run op by op otherwise)
  def drjax_side(qf):
    opt, opt0 = planning.robust_dp(model, rho), planning.robust_dp(model, zero)
    pi = evaluate.greedy_policy(agent, qf, model)
    u = jnp.stack([agent.width(qf, h, model.phi[h]) for h in range(3)])  # [H, S, A]
    cost = model._replace(reward=u)
    return dict(
        sub=evaluate.offline_subopt(agent, qf, model, rho),
        v_pi=planning.robust_evaluate(model, rho, pi)[0, 0], v_star=opt.v[0, 0],
        v_opt=planning.robust_evaluate(model, rho, opt.policy)[0, 0], u=u, pi_r=opt.policy,
        nominal=planning.nominal_evaluate(cost, opt0.policy)[0, 0],
        bound0=evaluate.offline_bound(agent, qf, model, zero),
        bound=evaluate.offline_bound(agent, qf, model, rho),
        cost_v=planning.nominal_evaluate(cost, opt.policy))

  r = drjax_side(qf)
  sub = float(r["sub"])
  v_pi, v_star = r["v_pi"], r["v_star"]
  assert sub >= -1e-12 and abs(sub - float(v_star - v_pi)) < 1e-12  # x1 is the start state
  # The robust-optimal policy's own suboptimality is 0.
  assert abs(float(v_star - r["v_opt"])) < 1e-12
  # Bound at rho = 0: beta * E_{pi*}[sum_h width] under the nominal kernel (nominal_evaluate).
  u = np.asarray(r["u"])
  nominal = r["nominal"]
  np.testing.assert_allclose(float(r["bound0"]), float(qf.beta * nominal), atol=1e-12)
  # With rho > 0 the sup over the TV set is at least the value of any kernel in it, e.g. the
  # nominal one and the one that moves the rho mass of factor (1, 4) onto the costliest state.
  b = float(r["bound"])
  pi_r = r["pi_r"]
  base = float(qf.beta * r["cost_v"][0, 0])
  assert b >= base - 1e-12
  cost_v = r["cost_v"][1]
  mu = np.asarray(model.mu).copy()
  top = int(np.argmax(np.asarray(cost_v)))
  moved = min(0.4, 1 - mu[0, 3, top])
  src = np.argsort(np.asarray(cost_v))  # take mass from the cheapest states first
  left = moved
  for s_ in src:
    if s_ == top or left <= 0:
      continue
    take = min(mu[0, 3, s_], left)
    mu[0, 3, s_] -= take
    left -= take
  mu[0, 3, top] += moved - left
  kernel = np.einsum("hsad,hdt->hsat", np.asarray(model.phi), mu)
  worse = float(qf.beta * jax.jit(planning.nominal_evaluate)(
      model._replace(reward=jnp.asarray(u)), pi_r, jnp.asarray(kernel))[0, 0])
  assert b >= worse - 1e-10 and worse >= base - 1e-12


def test_no_recompilation_for_new_hyperparameters():
  for name in registry.names("offline"):
    agent = registry.make(name, LIN)
    fit = jax.jit(make_fit(LIN, agent, 8))
    kw = lambda r: {"rho": r} if registry.get(name).robust else {}  # noqa: E731
    out1 = fit(jax.random.key(0), registry.make_hparams(name, LIN, beta=1.0, lam=0.1, **kw(0.1)),
               LIN_P, 8)
    out2 = fit(jax.random.key(0), registry.make_hparams(name, LIN, beta=0.3, lam=0.5, **kw(0.4)),
               LIN_P, 5)
    assert fit._cache_size() == 1, name
    assert not np.allclose(np.asarray(out1.final_qf.w), np.asarray(out2.final_qf.w)), name


def test_rho0_max_exceeds_the_ridge_of_v_on_the_paper_mdp_by_a_measured_amount():
  # Documented in docs/findings/drpvi-paper-grid.md: with general features z_i(alpha) is not monotone, so DRPVI with
  # rho = 0 is not PEVI with known theta. This recomputes the documented size of the gap.
  env = drjax.LinearMDP()
  keys = jax.random.split(jax.random.key(0), 20)
  agent = offline.drpvi(3, 4, 16, vmin="data")
  hp = offline.make_hparams(agent, rho=0.0)
  gaps = []
  # One behavior object: a new data.uniform(16) per call would retrace data.collect every time.
  behavior = data.uniform(16)
  # Q_2 at the 100 next states of step 1: one compiled call per dataset (not 100 eager ones).
  q_next = jax.jit(jax.vmap(lambda qf, p, f: agent.q_values(qf, 1, p, f), in_axes=(None, 0, 0)))
  for k in keys:
    ds = data.collect(env, LIN_P, behavior, k, 100)
    qf = agent.fit(ds, hp)
    # z(H) at step 1 from the same targets: theta + ridge of V_2 (nu - z(H) >= 0).
    v = np.max(np.asarray(q_next(qf, ds.next_phi[0], ds.next_fail[0])), -1)
    phi = np.asarray(ds.phi[0])
    zH = np.linalg.solve(phi.T @ phi + 0.1 * np.eye(4), phi.T @ v)
    gaps.append(np.asarray(qf.nu[0]) - zH)
  gaps = np.asarray(gaps)
  assert gaps.min() > -1e-10
  assert gaps.max() < 0.5  # bounded; docs/findings/drpvi-paper-grid.md quotes the measured maximum


def test_long_horizon_scan_path_matches_oracle():
  # H = 7 > pieces.backward's unroll limit: the lax.scan path, with an invalid trajectory.
  env = drjax.RandomLinearMDP(num_states=6, num_actions=3, feature_dim=4, horizon=7)
  params = env.sample_params(jax.random.key(11))
  ds = data.collect(env, params, data.uniform(3), jax.random.key(12), 25)
  ds = ds._replace(valid=ds.valid.at[4].set(False))
  pilot = data.collect(env, params, data.uniform(3), jax.random.key(13), 20)
  rho = _rho(7, 4, 6)
  for agent, ref in (
      (offline.pevi(7, 4, 3), oo.pevi(_np(ds), 0.2, 0.1)),
      (offline.drpvi(7, 4, 3, vmin="data"), oo.drpvi(_np(ds), rho, 0.05, 0.1)),
      (offline.va_drpvi(7, 4, 3, vmin="data"),
       oo.va_drpvi(_np(ds), _np(pilot), rho, 0.05, 0.1))):
    kw = {"beta": 0.2} if agent.name == "PEVI" else {"rho": rho, "beta": 0.05}
    qf = agent.fit(ds, offline.make_hparams(agent, lam=0.1, **kw), pilot=pilot)
    _compare(qf, ref, ds, agent)


def test_batched_hyperparameters_broadcast_and_one_setting_per_fit(lin_data):
  ds, pilot = lin_data
  agent = offline.drpvi(3, 4, 16)
  rho = _rho(3, 4, 8)
  hp = offline.make_hparams(agent, rho=rho, beta=[0.1, 0.5, 1.0], lam=[0.1, 0.2, 0.3])
  assert hp.rho.shape == (3, 3, 4) and hp.beta.shape == (3,) and hp.lam.shape == (3,)
  batched = jax.vmap(lambda h: agent.fit(ds, h))(hp)
  for j, (b, l) in enumerate(((0.1, 0.1), (0.5, 0.2), (1.0, 0.3))):
    one = agent.fit(ds, offline.make_hparams(agent, rho=rho, beta=b, lam=l))
    np.testing.assert_allclose(np.asarray(batched.w[j]), np.asarray(one.w), atol=1e-12)
  with pytest.raises(ValueError, match=r"hparams\.lam must have shape \(\)"):
    agent.fit(ds, offline.make_hparams(agent, rho=rho)._replace(lam=jnp.full((4,), 0.1)))
  with pytest.raises(ValueError, match=r"hparams\.rho must have shape \(3, 4\)"):
    agent.fit(ds, hp)


def test_pilot_of_another_dtype_and_traced_behavior_parameters(lin_data):
  ds, pilot = lin_data
  va = offline.va_drpvi(3, 4, 16)
  hp = offline.make_hparams(va, rho=0.2)
  p32 = pilot._replace(**{f: getattr(pilot, f).astype(jnp.float32)
                          for f in ("phi", "reward", "next_phi", "theta")})
  a = va.fit(ds, hp, pilot=p32)
  b = va.fit(ds, hp, pilot=pilot)
  assert a.w.dtype == ds.phi.dtype
  np.testing.assert_allclose(np.asarray(a.w), np.asarray(b.w), atol=1e-5)
  agent = offline.drpvi(3, 4, 16)
  qf = agent.fit(ds, offline.make_hparams(agent, rho=0.2))
  eps = jnp.array([0.0, 1.0])
  out = jax.vmap(lambda e: data.collect(LIN, LIN_P, data.epsilon_greedy(agent, qf, e),
                                        jax.random.key(1), 10))(eps)
  assert out.action.shape == (2, 3, 10)
