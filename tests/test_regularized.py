"""R2PVI (TV, KL, chi-square) and DRVI-L against independent computations.

* every agent vs the loop-based NumPy oracle written from the equations
  (``regularized_oracle.py``), float64, on identical datasets (linear MDP and put option);
* the chi-square dual's exact maximization vs a dense grid plus every target, and >= its value at
  alpha = min V (a minimizing sign error, as in the public linear-MDP script, fails this);
* limits: R2PVI-TV with weight >= max V - min V is pessimistic VI with known theta;
* KL with weight 0.01 and H = 20 stays finite in float32 and float64;
* DRVI-L's search against the oracle and a dense grid where the objective is smooth (tabular
  features); bad input.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import drjax
from drjax import data, robust
from drjax.agents import offline, registry

import regularized_oracle as ro

LIN = drjax.LinearMDP()
LIN_P = LIN.make_params(xi_norm=0.2)
PUT = drjax.PutOption(num_anchors=4, horizon=5, variant="notebook")
PUT_P = PUT.make_params()


def _np(ds):
  return {f: np.asarray(getattr(ds, f)) for f in ds._fields}


@pytest.fixture(scope="module")
def datasets():
  lin = data.collect(LIN, LIN_P, data.uniform(16), jax.random.key(0), 30)
  lin = lin._replace(valid=lin.valid.at[3].set(False))
  put = data.collect(PUT, PUT_P, data.uniform(2), jax.random.key(1), 40)
  return lin, put


def _check(agent, qf, ref, ds):
  np.testing.assert_allclose(np.asarray(qf.w), ref["w"], atol=1e-8, rtol=0)
  nphi, nfail = np.asarray(ds.next_phi), np.asarray(ds.next_fail)
  # drjax's Q_{h+1} at every 9th next state of step h: one compiled call over the states.
  q_rows = jax.jit(jax.vmap(agent.q_values, in_axes=(None, None, 0, 0)))
  for h in range(ds.phi.shape[0] - 1):
    q_all = np.asarray(q_rows(qf, h + 1, nphi[h, ::9], nfail[h, ::9]))
    for i, n in enumerate(range(0, nphi.shape[1], 9)):
      fail = bool(nfail[h, n])
      np.testing.assert_allclose(q_all[i], ref["q"](h + 1, nphi[h, n], fail), atol=1e-8, rtol=0)


@pytest.mark.parametrize("divergence", ["tv", "kl", "chi2"])
@pytest.mark.parametrize("opts", [dict(vmin="data"),
                                  dict(vmin="zero", penalty="notebook", truncation="upper")])
def test_r2pvi_matches_oracle(datasets, divergence, opts):
  fn = {"tv": ro.r2pvi_tv, "kl": ro.r2pvi_kl, "chi2": ro.r2pvi_chi2}[divergence]
  for ds in datasets:
    H, N, d = ds.phi.shape
    A = ds.next_phi.shape[2]
    agent = offline.r2pvi(H, d, A, divergence=divergence, **opts)
    weight = np.asarray(jax.random.uniform(jax.random.key(H), (H, d), minval=0.1, maxval=1.0))
    hp = offline.make_hparams(agent, reg_weight=weight, beta=0.05, lam=0.1)
    kw = dict(clip=opts.get("truncation", "paper"), penalty=opts.get("penalty", "paper"))
    if divergence != "chi2":
      kw["vmin"] = opts["vmin"]
    ref = fn(_np(ds), weight, 0.05, 0.1, **kw)
    _check(agent, agent.fit(ds, hp), ref, ds)


def test_stats_form_equals_buffer_form_for_the_regularized_agents(datasets):
  ds = datasets[0]
  model = LIN.model(LIN_P)
  for name in ("r2pvi-tv", "r2pvi-kl", "r2pvi-chi2", "drvi-l"):
    agent = registry.make(name, LIN)
    hp = registry.make_hparams(name, LIN)
    a = agent.fit(ds, hp, model=model, form="stats")
    b = agent.fit(ds, hp, model=model, form="buffer")
    np.testing.assert_allclose(np.asarray(a.w), np.asarray(b.w), atol=1e-9, err_msg=name)


def test_chi2_dual_is_the_exact_maximum_and_not_a_minimum():
  n, d, H = 14, 3, 4.0

  def case(k1, k2, k3, decimals):
    g = jax.random.dirichlet(k1, jnp.ones(d), (n,))
    v = jnp.round(jax.random.uniform(k2, (n,), maxval=H), decimals)
    w = jax.random.uniform(k3, (d,), minval=0.05, maxval=2.0)
    M = jnp.linalg.inv(g.T @ g + 0.1 * jnp.eye(d)) @ g.T
    return M, v, w, robust.chi2_dual_max(M, v, w, H)

  case = jax.jit(case, static_argnums=3)  # compiled once per rounding (not op by op per case)
  key = jax.random.key(3)
  for i in range(8):
    k1, k2, k3, key = jax.random.split(key, 4)
    M, v, w, got = case(k1, k2, k3, 1 if i % 2 else 6)  # ties when i odd
    got = np.asarray(got)
    alphas = np.unique(np.concatenate([np.linspace(0, H, 20001), np.clip(np.asarray(v), 0, H)]))
    t = np.minimum(np.asarray(v)[:, None], alphas[None, :])
    z, z2 = np.asarray(M) @ t, np.asarray(M) @ (t * t)
    obj = z - (z2 - z * z) / (4 * np.asarray(w)[:, None])
    np.testing.assert_allclose(got, obj.max(1), atol=1e-9)
    at_min = obj[:, np.searchsorted(alphas, float(np.clip(v.min(), 0, H)))]
    assert np.all(got >= at_min - 1e-12) and np.all(got >= obj[:, 0] - 1e-12)


def test_r2pvi_tv_with_a_large_weight_is_pessimistic_vi_with_known_theta(datasets):
  ds = datasets[1]
  H, N, d = ds.phi.shape
  agent = offline.r2pvi_tv(H, d, 2, vmin="data", truncation="upper", fail_zero=False)
  beta, lam = 0.1, 0.2
  qf = agent.fit(ds, offline.make_hparams(agent, reg_weight=50.0, beta=beta, lam=lam))
  phi, nphi, theta = (np.asarray(x) for x in (ds.phi, ds.next_phi, ds.theta))
  w_next = pinv_next = None
  for h in range(H - 1, -1, -1):
    if w_next is None:
      v = np.zeros(N)
    else:
      q = nphi[h] @ w_next - beta * (nphi[h] @ np.sqrt(np.diag(pinv_next)))
      v = np.minimum(q, H - h - 1).max(-1)
    pinv = np.linalg.inv(phi[h].T @ phi[h] + lam * np.eye(d))
    w = theta[h] + pinv @ (phi[h].T @ v)
    np.testing.assert_allclose(np.asarray(qf.w[h]), w, atol=1e-8)
    w_next, pinv_next = w, pinv


def test_kl_small_weight_is_finite_in_float32_and_float64():
  env = drjax.PutOption(num_anchors=6, horizon=20, variant="notebook")
  for x64 in (True, False):
    with jax.enable_x64(x64):
      params = env.make_params()
      ds = data.collect(env, params, data.fixed(1), jax.random.key(4), 30)
      agent = offline.r2pvi_kl(20, 7, 2)
      qf = agent.fit(ds, offline.make_hparams(agent, reg_weight=0.01, beta=0.1, lam=1.0))
      assert qf.w.dtype == (jnp.float64 if x64 else jnp.float32)
      assert np.all(np.isfinite(np.asarray(qf.w))), x64
      assert np.abs(np.asarray(qf.nu)).max() > 0.5  # not a trivial all-zero fit


def test_drvi_l_search_on_tabular_features_matches_a_dense_grid():
  # One-hot features: every ridge estimate of E exp(-V/alpha) is positive and the dual is smooth
  # in alpha, so the search must find the maximum to its tolerance.
  S, A, H, N = 3, 2, 3, 60
  d = S * A
  rng = np.random.default_rng(1)  # local generator: test data only
  s, a, s2 = (rng.integers(0, k, (H, N)) for k in (S, A, S))
  onehot = lambda s_, a_: np.eye(d)[s_ * A + a_]  # noqa: E731
  theta = rng.uniform(0, 1, (H, d))
  ds = data.Dataset(
      phi=jnp.asarray(onehot(s, a)), action=jnp.asarray(a, jnp.int32),
      reward=jnp.asarray(np.einsum("hnd,hd->hn", onehot(s, a), theta)),
      next_phi=jnp.asarray(np.stack([onehot(s2, np.full_like(s2, b)) for b in range(A)], 2)),
      next_fail=jnp.zeros((H, N), bool), state=jnp.asarray(s, jnp.int32),
      next_state=jnp.asarray(s2, jnp.int32), theta=jnp.asarray(theta),
      valid=jnp.ones((N,), bool))
  agent = offline.drvi_l(H, d, A, tol=1e-8)
  rho = np.full((H, d), 0.3)
  qf = agent.fit(ds, offline.make_hparams(agent, rho=rho, beta=0.05, lam=0.1))
  ref = ro.drvi_l(_np(ds), rho, 0.05, 0.1, grid=np.logspace(-4, 4, 20001))
  np.testing.assert_allclose(np.asarray(qf.w), ref["w"], atol=1e-6)


def test_bad_input_names_the_field(datasets):
  ds = datasets[0]
  agent = offline.r2pvi_tv(3, 4, 16)
  for bad in (0.0, -1.0, np.nan, np.inf):
    with pytest.raises(ValueError, match="reg_weight .*must be > 0 and finite"):
      offline.make_hparams(agent, reg_weight=bad)
  with pytest.raises(ValueError, match=r"divergence must be one of \('tv', 'kl', 'chi2'\)"):
    offline.r2pvi(3, 4, 16, divergence="hellinger")
  with pytest.raises(ValueError, match="tol .* must lie in"):
    offline.drvi_l(3, 4, 16, tol=0.0)
  with pytest.raises(TypeError, match=r"R2PVI-TV takes R2PVIHParams\(reg_weight, beta, lam\)"):
    agent.fit(ds, offline.make_hparams(offline.drpvi(3, 4, 16)))
  with pytest.raises(ValueError, match="R2PVI-TV has no hyperparameter 'rho'"):
    offline.make_hparams(agent, rho=0.1)
  # KL radii are not bounded by 1 (DRVI-L), TV radii are.
  offline.make_hparams(offline.drvi_l(3, 4, 16), rho=2.0)
  with pytest.raises(ValueError, match=r"rho must be >= 0 and finite"):
    offline.make_hparams(offline.drvi_l(3, 4, 16), rho=-0.1)


def test_subopt_is_nonnegative_for_every_offline_agent_in_its_own_objective(datasets):
  from drjax import evaluate  # pylint: disable=g-import-not-at-top
  ds = datasets[0]
  model = LIN.model(LIN_P)
  levels = {"tv": np.full((3, 4), 0.0), "tv-reg": np.full((3, 4), 0.3),
            "kl-reg": np.full((3, 4), 0.3), "chi2-reg": np.full((3, 4), 0.3),
            "kl": np.full((3, 4), 0.2)}
  levels["tv"][0, 3] = 0.4
  pilot = data.collect(LIN, LIN_P, data.uniform(16), jax.random.key(9), 30)
  for name in registry.names("offline"):
    agent = registry.make(name, LIN)
    qf = agent.fit(ds, registry.make_hparams(name, LIN), pilot=pilot, model=model)
    objective = agent.config.objective
    sub = float(evaluate.offline_subopt(agent, qf, model, levels[objective]))
    assert sub >= -1e-7, (name, sub)
  # The exact optimum's own suboptimality is 0 (the planner against itself).
  pi = drjax.planning.regularized_dp(model, levels["kl-reg"], "kl").policy
  v = drjax.planning.regularized_evaluate(model, levels["kl-reg"], "kl", pi)[0, 0]
  assert abs(float(drjax.planning.regularized_dp(model, levels["kl-reg"], "kl").v[0, 0] - v)) < 1e-12


def test_weight_for_radius_matches_values():
  from drjax import planning  # pylint: disable=g-import-not-at-top
  model = LIN.model(LIN.make_params(xi_norm=0.2))
  pi = planning.robust_dp(model, jnp.zeros((3, 4))).policy
  prev = np.inf
  for rho in (0.1, 0.3, 0.6):
    w, target, at_w = planning.weight_for_radius(model, pi, rho)
    assert abs(float(at_w - target)) < 1e-9 * max(1.0, abs(float(target)))
    ones = jnp.ones((3, 4))
    below = planning.initial_value(model, planning.regularized_evaluate(
        model, 0.99 * float(w) * ones, "tv", pi))
    assert float(below) < float(target)  # the smallest such weight
    assert float(w) <= prev  # a larger radius is matched by a smaller (more adversarial) weight
    prev = float(w)


@pytest.mark.parametrize("bad", ["0", "-0.5", "nan", "inf", "abc"])
def test_cli_bad_reg_weight_is_one_line_exit_2_nothing_written(bad, tmp_path, capsys):
  from drjax import cli  # pylint: disable=g-import-not-at-top
  out = tmp_path / "sweep"
  with pytest.raises(SystemExit) as e:
    cli.main(["sweep", "--agents", "r2pvi-tv", "--reg-weight", bad, "--out", str(out)])
  assert e.value.code == 2
  err = capsys.readouterr().err.strip().splitlines()
  assert "--reg-weight" in err[-1] and "Traceback" not in "\n".join(err)
  assert not out.exists()
