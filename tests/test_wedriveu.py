"""We-DRIVE-U (drjax/agents/wedriveu.py): against its loop-based NumPy version
(tests/wedriveu_numpy.py) on teacher-forced runs, the switch count against the determinant bound,
DR-LSVI-UCB as its special cases, its errors, and its registry entry and CLI sweep."""

import math
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import drjax
from drjax.agents import registry, wedriveu
from drjax.envs import random_linear_drmdp

import wedriveu_numpy as ref

H, D, S, A = 3, 4, 6, 3


@pytest.fixture(scope="module")
def instance():
  env, params = random_linear_drmdp(jax.random.key(0), S, A, D, H)
  m = env.model(params)
  model = dict(phi=np.asarray(m.phi, np.float64), theta=np.asarray(m.theta, np.float64),
               fail_state=int(m.fail_state), reward=np.asarray(m.reward, np.float64))
  return env, params, model


_TRAINS = {}


@pytest.fixture(scope="module", autouse=True)
def _forget_trains():
  yield
  _TRAINS.clear()  # the module's programs go with it (conftest clears JAX's caches after it)


def _train(env, agent, K, outputs, record_q=False):
  """The jitted training program, built once per configuration in this module (tests that run
  the same agent and sizes call the same traced program)."""
  key = (env, agent, K, outputs, record_q)
  if key not in _TRAINS:
    _TRAINS[key] = jax.jit(drjax.make_train(env, agent, K, record_q=record_q, outputs=outputs))
  return _TRAINS[key]


CASES = [
    (dict(), dict(rho=0.1, beta=0.5, lam=1.0, beta_var=0.5, var_floor=0.05)),
    (dict(switch="global", cap="robust", solver="sherman-morrison"),
     dict(rho=0.3, beta=0.3, lam=0.5, beta_var=2.0, var_floor=0.02)),
    (dict(switch="every", solver="sherman-morrison"),
     dict(rho=0.2, beta=0.5, lam=1.0, beta_var=1.0, var_floor=0.1)),
    (dict(reward="regressed", cap="robust"),
     dict(rho=0.05, beta=0.5, lam=0.3, beta_var=1.0, var_floor=0.05)),
]


@pytest.mark.parametrize("opts,values", CASES)
def test_matches_the_numpy_version_episode_by_episode(instance, opts, values):
  """Teacher forcing: the NumPy version replays the run's visited states, acting with its own
  Q-functions (the run's action only where Q-values tie); every episode's weights, Sigma^-1 of
  the plan, actions and policy count agree."""
  env, params, model = instance
  K = 40
  agent = wedriveu.we_drive_u(H, D, A, K, **opts)
  hp = wedriveu.make_hparams(H, D, **values)
  out = _train(env, agent, K, ("state", "actions", "states", "final_qf", "switches",
                               "dual_calls"), record_q=True)(jax.random.key(1), hp, params)
  hp_np = {k: np.asarray(v, np.float64) for k, v in hp._asdict().items()}
  want = ref.run(model, hp_np, np.asarray(out.states), played=np.asarray(out.actions),
                 **{k: v for k, v in opts.items() if k != "solver"})
  np.testing.assert_array_equal(np.asarray(out.actions), want["actions"])
  np.testing.assert_array_equal(np.asarray(out.switches), want["policies"])
  np.testing.assert_array_equal(np.asarray(out.dual_calls), want["policies"] * (H - 1) * D)
  np.testing.assert_allclose(np.asarray(out.qf.w), want["w"], rtol=1e-10, atol=1e-10)
  np.testing.assert_allclose(np.asarray(out.qf.pinv), want["pinv"], rtol=1e-10, atol=1e-10)
  np.testing.assert_allclose(np.asarray(out.state.sigma2), want["sigma2"][-1], rtol=1e-10)
  np.testing.assert_allclose(np.asarray(out.state.gram), want["gram"], rtol=1e-10, atol=1e-10)
  np.testing.assert_allclose(np.asarray(out.state.phir), want["phir"], rtol=1e-10, atol=1e-10)
  np.testing.assert_allclose(np.asarray(out.state.G)[:H - 1], want["G"][:H - 1], rtol=1e-10,
                             atol=1e-10)
  assert int(out.state.policies) == want["final_policies"]
  # Not vacuous: the weights vary, and the rare-switching runs switch rarely.
  assert want["sigma2"].max() > want["sigma2"].min() * 1.5
  if opts.get("switch") != "every":
    assert 2 < want["final_policies"] < K - 5


def test_switches_grow_like_log_k(instance):
  """Any-step and global rules: policies <= H d log2(1 + K / (lam var_floor)) + 1 at K = 250,
  1000, 4000 (one run, read at those episodes), and each doubling of K adds a bounded number
  (at most H d + 1 per doubling, not proportional to K); 'every' computes K policies."""
  env, params, _ = instance
  K = 4000
  lam, floor = 1.0, 0.5
  hp = wedriveu.make_hparams(H, D, rho=0.1, beta=0.5, lam=lam, var_floor=floor)
  for switch in ("any-step", "global"):
    agent = wedriveu.we_drive_u(H, D, A, K, switch=switch)
    out = _train(env, agent, K, ("switches", "dual_calls"))(jax.random.key(2), hp, params)
    pol = np.asarray(out.switches)
    counts = {k: int(pol[k - 1]) for k in (250, 1000, 4000)}
    for k, c in counts.items():
      assert c <= H * D * math.log2(1 + k / (lam * floor)) + 1, (switch, k, c)
    assert counts[1000] - counts[250] <= 2 * (H * D + 1)
    assert counts[4000] - counts[1000] <= 2 * (H * D + 1)
    assert counts[4000] < 4000 // 20, counts
    assert np.all(np.diff(pol) >= 0) and pol[0] == 1
    np.testing.assert_array_equal(np.asarray(out.dual_calls), pol * (H - 1) * D)
  every = wedriveu.we_drive_u(H, D, A, 250, switch="every")
  out = _train(env, every, 250, ("switches",))(jax.random.key(2), hp, params)
  np.testing.assert_array_equal(np.asarray(out.switches), np.arange(1, 251))


def _same_run(a, b, atol):
  np.testing.assert_array_equal(np.asarray(a.actions), np.asarray(b.actions))
  for f in ("w", "pinv", "nu", "alpha", "beta", "top"):
    np.testing.assert_allclose(np.asarray(getattr(a.qf, f)), np.asarray(getattr(b.qf, f)),
                               rtol=0, atol=atol, err_msg=f)


def test_unit_weights_switching_every_episode_is_dr_lsvi_ucb(instance):
  env, params, _ = instance
  K = 30
  outputs = ("actions", "final_qf")
  dr = drjax.dr_lsvi_ucb(H, D, A, K)
  we = wedriveu.we_drive_u(H, D, A, K, switch="every", weights="unit")
  hp = drjax.make_hparams(H, D, rho=0.2, beta=0.7, lam=0.5)
  whp = wedriveu.make_hparams(H, D, rho=0.2, beta=0.7, lam=0.5, beta_var=3.0, var_floor=0.01)
  a = _train(env, dr, K, outputs, record_q=True)(jax.random.key(3), hp, params)
  b = _train(env, we, K, outputs, record_q=True)(jax.random.key(3), whp, params)
  _same_run(a, b, atol=0.0)  # bit for bit


def test_constant_variance_weights_are_dr_lsvi_ucb_with_scaled_lambda_and_beta(instance):
  """beta_var = 0 and var_floor = H^2 give sigma_bar^2 = H^2 for every transition, so
  Sigma = (lam H^2 I + Gram) / H^2: DR-LSVI-UCB with lambda H^2 and beta H (switching every
  episode), whose Lambda^-1 is Sigma^-1 / H^2."""
  env, params, _ = instance
  K = 30
  outputs = ("actions", "final_qf")
  dr = drjax.dr_lsvi_ucb(H, D, A, K)
  we = wedriveu.we_drive_u(H, D, A, K, switch="every")
  lam, beta = 0.05, 0.4
  hp = drjax.make_hparams(H, D, rho=0.2, beta=beta * H, lam=lam * H * H)
  whp = wedriveu.make_hparams(H, D, rho=0.2, beta=beta, lam=lam, beta_var=0.0,
                              var_floor=float(H * H))
  a = _train(env, dr, K, outputs, record_q=True)(jax.random.key(4), hp, params)
  b = _train(env, we, K, outputs, record_q=True)(jax.random.key(4), whp, params)
  np.testing.assert_array_equal(np.asarray(a.actions), np.asarray(b.actions))
  for f in ("w", "nu", "alpha", "top"):
    np.testing.assert_allclose(np.asarray(getattr(a.qf, f)), np.asarray(getattr(b.qf, f)),
                               rtol=1e-9, atol=1e-9, err_msg=f)
  np.testing.assert_allclose(np.asarray(a.qf.pinv) * (H * H), np.asarray(b.qf.pinv), rtol=1e-9,
                             atol=1e-12)
  # With the default floor the weights differ, and so do the runs.
  c = _train(env, we, K, outputs, record_q=True)(
      jax.random.key(4), whp._replace(var_floor=jnp.asarray(0.05)), params)
  assert not np.allclose(np.asarray(b.qf.pinv), np.asarray(c.qf.pinv))


def test_one_compilation_serves_a_grid_of_hyperparameters(instance):
  env, params, _ = instance
  K = 20
  agent = wedriveu.we_drive_u(H, D, A, K)
  train = _train(env, agent, K, ("returns", "switches", "final_qf"))
  grid = [dict(var_floor=0.05, beta_var=0.5), dict(var_floor=0.5, beta_var=2.0)]
  hps = [wedriveu.make_hparams(H, D, rho=0.1, lam=1.0, **g) for g in grid]
  stacked = jax.tree_util.tree_map(lambda *x: jnp.stack(x), *hps)
  batched = jax.jit(jax.vmap(drjax.make_train(env, agent, K, outputs=("returns", "switches",
                                                                       "final_qf")),
                             in_axes=(None, 0, None)))(jax.random.key(5), stacked, params)
  for j, hp in enumerate(hps):
    one = train(jax.random.key(5), hp, params)
    np.testing.assert_allclose(np.asarray(batched.final_qf.w[j]), np.asarray(one.final_qf.w),
                               rtol=1e-10, atol=1e-10)
    np.testing.assert_array_equal(np.asarray(batched.switches[j]), np.asarray(one.switches))


def test_errors_name_the_form_the_option_and_the_hyperparameter(instance):
  env, params, _ = instance
  agent = wedriveu.we_drive_u(H, D, A, 5)
  hp = wedriveu.make_hparams(H, D)
  with pytest.raises(ValueError, match="form='buffer'"):
    drjax.make_train(env, agent, 5, form="buffer")(jax.random.key(0), hp, params)
  with pytest.raises(TypeError, match="WeDriveHParams"):
    drjax.make_train(env, agent, 5)(jax.random.key(0), drjax.make_hparams(H, D), params)
  put = drjax.envs.PutOption()
  put_agent = wedriveu.we_drive_u(put.horizon, put.feature_dim, put.num_actions, 5)
  with pytest.raises(ValueError, match="without a finite model"):
    drjax.make_train(put, put_agent, 5)(jax.random.key(0),
                                       wedriveu.make_hparams(put.horizon, put.feature_dim),
                                       put.make_params())
  for name in ("init", "observe", "store_episode"):
    with pytest.raises(ValueError, match="sufficient-statistics form only"):
      getattr(agent, name)(*([None] * {"init": 1, "observe": 6, "store_episode": 6}[name]))
  for option, bad in (("switch", "sometimes"), ("cap", "rho"), ("weights", "none"),
                      ("solver", "qr"), ("alpha", "bisect"), ("reward", "known")):
    with pytest.raises(ValueError, match=option):
      wedriveu.we_drive_u(H, D, A, 5, **{option: bad})
  with pytest.raises(TypeError, match="switch"):
    wedriveu.we_drive_u(H, D, A, 5, switch=1)
  for field, bad in (("var_floor", -1.0), ("var_floor", 0.0), ("beta_var", -0.5),
                     ("var_floor", float("nan"))):
    with pytest.raises(ValueError, match=field):
      wedriveu.make_hparams(H, D, **{field: bad})
    with pytest.raises(ValueError, match=field):
      registry.make_hparams("we-drive-u", env, **{field: bad})
  with pytest.raises(ValueError, match="lam"):
    wedriveu.make_hparams(H, D, lam=0.0)
  # plan and update check their arguments before tracing.
  m = env.model(params)
  state = agent.init_stats(m.theta, S, jnp.asarray(0.1), model=m)
  with pytest.raises(TypeError, match="WeDriveHParams"):
    agent.plan(state, drjax.make_hparams(H, D), m)
  with pytest.raises(ValueError, match="model"):
    agent.plan(state, hp)
  qf = jax.jit(agent.plan)(state, hp, m)  # the valid calls compiled (not op by op)
  phi, r, s2 = jnp.full((H, D), 0.25), jnp.zeros(H), jnp.ones(H, jnp.int32)
  with pytest.raises(ValueError, match="hparams"):
    agent.update(state, phi, r, None, None, s2, model=m, qf=qf)
  with pytest.raises(ValueError, match="qf"):
    agent.update(state, phi, r, None, None, s2, model=m, hparams=hp)
  with pytest.raises(ValueError, match="next_state"):
    agent.update(state, phi, r, None, None, jnp.full(H, S), model=m, qf=qf, hparams=hp)
  with pytest.raises(ValueError, match="lam is required"):
    agent.init_stats(m.theta, S)
  new = jax.jit(lambda st, q, p: agent.update(st, phi, r, None, None, s2, model=m, qf=q,
                                               hparams=p))(state, qf, hp)
  assert int(new.count) == 1 and agent.counters(new)[1] == agent.counters(new)[0] * (H - 1) * D


def test_registry_entry_and_cli_sweep(instance, tmp_path):
  env, params, _ = instance
  spec = registry.get("we-drive-u")
  assert spec.kind == "online" and spec.hparams == wedriveu.WeDriveHParams._fields
  agent = registry.make("we-drive-u", env, capacity=5, switch="global")
  assert agent.hparams_type is wedriveu.WeDriveHParams and agent.config.switch == "global"
  assert spec.defaults == wedriveu.WeDriveHParams._field_defaults
  hp = registry.make_hparams("we-drive-u", env, rho=0.2, var_floor=0.5)
  assert isinstance(hp, wedriveu.WeDriveHParams) and float(hp.var_floor) == 0.5
  import sweep_cli  # tests/sweep_cli.py  pylint: disable=g-import-not-at-top
  out = tmp_path / "s"
  code, err = sweep_cli.run(["--env", "random", "--env-arg", "num_states=6", "--env-arg",
                             "num_actions=3", "--env-arg", "feature_dim=4", "--env-arg",
                             "horizon=3", "--agents", "we-drive-u", "dr-lsvi-ucb", "--episodes",
                             "8", "--seeds", "2", "--rho", "0.1", "--hparam",
                             "var_floor=0.1,1", "--record", "switches", "--record-at", "4,8",
                             "--x64", "--quiet", "--out", str(out)])
  assert code == 0, err
  from drjax import sweeps  # pylint: disable=g-import-not-at-top
  df, _ = sweeps.load(str(out))
  we = df[df.agent == "we-drive-u"]
  assert sorted(set(we.var_floor)) == [0.1, 1.0] and len(we) == 4
  assert np.all(np.isfinite(we.value))
  assert np.all(we["switches@8"] <= 8) and np.all(we["switches@4"] <= we["switches@8"])
  dr = df[df.agent == "dr-lsvi-ucb"]
  assert np.all(dr["switches@8"] == 8)
  assert os.path.isfile(out / "results.parquet")
