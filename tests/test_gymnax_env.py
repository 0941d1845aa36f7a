"""The gymnax adapter (drjax.envs.gymnax_env) against gymnax's own rollouts, its physics targets,
and the d-rectangular feature maps (drjax.features) against NumPy loops and hand-computed cases."""

from __future__ import annotations

import math
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from drjax import envs, features

gymnax = pytest.importorskip("gymnax")

from drjax.envs import gymnax_env  # noqa: E402  (after the importorskip)
from drjax.envs.gymnax_env import GymnaxEnv, GymnaxParams, GymnaxState  # noqa: E402

IDS = ("CartPole-v1", "Acrobot-v1", "MountainCar-v0", "Pendulum-v1")
# gymnax's Pendulum reward at its worst: -(pi^2 + 0.1 * 8^2 + 0.001 * 2^2).
PENDULUM_RMIN = -(math.pi**2 + 0.1 * 64.0 + 0.001 * 4.0)


def _mapped(env_id, r, terminated):
  """The documented [0, 1] reward maps, written from the docs."""
  if env_id == "CartPole-v1":
    return 1.0
  if env_id == "Acrobot-v1":
    return 1.0 if terminated else 0.0  # gymnax: -1 per step, 0 on the goal step
  if env_id == "MountainCar-v0":
    return 1.0 if terminated else 0.0
  return (r - PENDULUM_RMIN) / (-PENDULUM_RMIN)


def _gym_action(env_id, a):
  return float(np.linspace(-2.0, 2.0, 5)[a]) if env_id == "Pendulum-v1" else a


def _start(env_id, env, params, key):
  """A start state: gymnax's reset, or (Acrobot, MountainCar) a state one or two steps from the
  goal, so that every environment's termination is exercised within a short horizon."""
  s = env.reset(key, params)
  f = lambda v: jnp.asarray(v, s.obs.dtype)  # noqa: E731
  if env_id == "Acrobot-v1":  # -cos(t1) - cos(t1 + t2) = 0.83: below the bar, swinging up
    es = s.env_state.replace(joint_angle1=f(2.0), joint_angle2=f(0.0), velocity_1=f(2.0),
                             velocity_2=f(0.0))
  elif env_id == "MountainCar-v0":
    es = s.env_state.replace(position=f(0.45), velocity=f(0.03))
  else:
    return s
  return s._replace(env_state=es, obs=env.gym.get_obs(es))


@pytest.mark.parametrize("env_id", IDS)
def test_step_for_step_against_gymnax(env_id):
  H = 40
  env = GymnaxEnv(env_id, horizon=H)
  params = env.default_params()
  gym, gparams = gymnax.make(env_id)
  key = jax.random.PRNGKey(3)
  obs0, _ = gym.reset(jax.random.fold_in(key, 99), gparams)  # reset matches gymnax's reset
  s0 = env.reset(jax.random.fold_in(key, 99), params)
  np.testing.assert_array_equal(np.asarray(s0.obs), np.asarray(obs0))
  assert int(s0.h) == 0 and not bool(s0.fail)
  s = _start(env_id, env, params, jax.random.fold_in(key, 99))
  gstate = s.env_state.replace(time=0)  # gymnax's own state types (a Python time counter)
  rng = np.random.default_rng(0)  # the action sequence only (keys are JAX keys)
  actions = rng.integers(0, env.num_actions, H)
  if env_id == "CartPole-v1":
    actions[:] = 1  # push one way: the pole falls within H
  step = jax.jit(env.step)
  terminated_at = None
  for h in range(H):
    k = jax.random.fold_in(key, h)
    a = int(actions[h])
    s2, r, done = step(k, s, jnp.int32(a), params)
    assert int(s2.h) == h + 1 and bool(done) == (h + 1 == H)
    if terminated_at is None:
      gobs, gstate2, gr, gterm, _, info = gym.step(k, gstate, _gym_action(env_id, a), gparams)
      # gymnax's step auto-resets at termination; its info keeps the terminal observation.
      np.testing.assert_array_equal(np.asarray(s2.obs), np.asarray(info["final_observation"]))
      if not bool(gterm):
        np.testing.assert_array_equal(np.asarray(s2.obs), np.asarray(gobs))
      np.testing.assert_allclose(float(r), _mapped(env_id, float(gr), bool(gterm)), rtol=1e-6,
                                 atol=1e-6)
      assert bool(s2.fail) == bool(gterm)
      phi = np.asarray(env.phi_all(s2, params))
      if bool(gterm):
        terminated_at = h
        assert (phi == 0).all()
      else:
        np.testing.assert_allclose(phi.sum(-1), 1.0, atol=1e-5)
        assert phi.min() >= 0
      gstate = gstate2
    else:  # absorbing, zero reward, zero features
      assert bool(s2.fail) and float(r) == 0.0
      np.testing.assert_array_equal(np.asarray(s2.obs), np.asarray(s.obs))
      assert (np.asarray(env.phi_all(s2, params)) == 0).all()
    s = s2
  if env_id == "Pendulum-v1":
    assert terminated_at is None  # Pendulum never terminates
  else:
    assert terminated_at is not None, "the rollout should have terminated within H"


def test_terminal_observation_matches_gymnax_step_env():
  """At termination gymnax's ``step`` auto-resets; the adapter keeps the terminal observation,
  which is ``step_env``'s."""
  env = GymnaxEnv("CartPole-v1", horizon=60)
  params = env.default_params()
  gym, gparams = gymnax.make("CartPole-v1")
  s = env.reset(jax.random.PRNGKey(0), params)
  gstate = s.env_state
  for h in range(60):
    k = jax.random.PRNGKey(h)
    s, _, _ = env.step(k, s, jnp.int32(0), params)
    gobs, gstate, _, gterm, _ = gym.step_env(jax.random.split(k)[0], gstate, 0, gparams)
    np.testing.assert_array_equal(np.asarray(s.obs), np.asarray(gobs))
    if bool(gterm):
      break
  assert bool(s.fail) and bool(gterm)


def test_step_noise_and_step_given_equal_step():
  env = GymnaxEnv("Acrobot-v1", horizon=5)
  params = env.make_params(torque_noise_max=0.5)  # Acrobot's step draws from its key
  s = env.reset(jax.random.PRNGKey(1), params)
  k = jax.random.PRNGKey(7)
  a = env.step(k, s, jnp.int32(2), params)
  b = env.step_given(env.step_noise(k, params), s, jnp.int32(2), params)
  for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
    np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_horizon_cut_and_theta_zero():
  env = GymnaxEnv("Pendulum-v1", horizon=3)
  params = env.default_params()
  assert env.theta(params).shape == (3, env.feature_dim) and not env.theta(params).any()
  assert env.reward_known is False
  s = env.reset(jax.random.PRNGKey(0), params)
  dones = []
  for h in range(3):
    s, r, d = env.step(jax.random.PRNGKey(h), s, jnp.int32(4), params)
    assert 0.0 <= float(r) <= 1.0
    dones.append(bool(d))
  assert dones == [False, False, True]
  with pytest.raises(ValueError, match="state.h"):
    env.step(jax.random.PRNGKey(0), s, jnp.int32(0), params)
  with pytest.raises(ValueError, match="action"):
    env.step(jax.random.PRNGKey(0), env.reset(jax.random.PRNGKey(0), params), jnp.int32(5),
             params)


def test_pendulum_torques():
  env = GymnaxEnv("Pendulum-v1", num_torques=3)
  np.testing.assert_allclose(np.asarray(env.torques(env.make_params(max_torque=1.5))),
                             [-1.5, 0.0, 1.5])
  assert env.num_actions == 3 and env.feature_dim == 3 * 45


# --------------------------------------------------------------------------- physics targets
def test_cartpole_targets_keep_derived_fields_and_step_as_gymnax():
  env = GymnaxEnv("CartPole-v1", horizon=10)
  src = env.make_params(masspole=0.2)
  assert math.isclose(float(src.physics.total_mass), 1.2, rel_tol=1e-6)
  assert math.isclose(float(src.physics.polemass_length), 0.1, rel_tol=1e-6)
  lengths = np.array([0.25, 1.0, 2.0], np.float32)
  tp = env.target_params(src, "length", lengths)
  np.testing.assert_allclose(np.asarray(tp.physics.polemass_length), 0.2 * lengths, rtol=1e-6)
  np.testing.assert_allclose(np.asarray(tp.physics.total_mass), 1.2, rtol=1e-6)
  tm = env.target_params(src, "masspole", 0.5)
  assert math.isclose(float(tm.physics.total_mass), 1.5, rel_tol=1e-6)
  assert math.isclose(float(tm.physics.polemass_length), 0.25, rel_tol=1e-6)
  gym, _ = gymnax.make("CartPole-v1")
  s = env.reset(jax.random.PRNGKey(0), src)
  s = s._replace(env_state=s.env_state.replace(theta=jnp.asarray(0.1, s.obs.dtype)))
  # vmap over the target batch equals gymnax's step_env with EnvParams built by hand.
  out = jax.vmap(lambda p: env.step(jax.random.PRNGKey(1), s, jnp.int32(1), p)[0].obs)(tp)
  for i, ln in enumerate(lengths):
    ref = gymnax.environments.classic_control.cartpole.EnvParams(
        masspole=0.2, total_mass=1.2, length=float(ln), polemass_length=0.2 * float(ln))
    gobs = gym.step_env(jax.random.PRNGKey(0), s.env_state, 1, ref)[0]
    np.testing.assert_allclose(np.asarray(out[i]), np.asarray(gobs), rtol=1e-6, atol=1e-7)
  assert not np.allclose(np.asarray(out[0]), np.asarray(out[2]))  # length changes the dynamics
  with pytest.raises(ValueError, match="derived"):
    env.make_params(total_mass=2.0)
  with pytest.raises(ValueError, match="length must be > 0"):
    env.target_params(src, "length", [1.0, -0.5])
  with pytest.raises(ValueError, match="unknown target field 'tau'"):
    env.target_params(src, "tau", 0.01)
  with pytest.raises(ValueError, match="total_mass must equal"):
    env.validate(GymnaxParams(src.physics.replace(total_mass=jnp.float32(3.0))))


@pytest.mark.parametrize("env_id,name,value", [
    ("Acrobot-v1", "link_mass_2", 2.0), ("Acrobot-v1", "link_length_1", 1.5),
    ("MountainCar-v0", "force", 0.0015), ("MountainCar-v0", "gravity", 0.003),
    ("Pendulum-v1", "g", 5.0), ("Pendulum-v1", "l", 1.5), ("CartPole-v1", "gravity", 20.0),
    ("CartPole-v1", "force_mag", 5.0), ("CartPole-v1", "masscart", 2.0)])
def test_targets_step_as_gymnax_with_those_params(env_id, name, value):
  env = GymnaxEnv(env_id, horizon=5)
  src = env.default_params()
  tp = env.target_params(src, name, value)
  gym, gdefault = gymnax.make(env_id)
  fields = {name: value}
  if env_id == "CartPole-v1":  # derived fields written from their definitions
    mp, mc, ln = gdefault.masspole, gdefault.masscart, gdefault.length
    fields |= dict(total_mass=fields.get("masscart", mc) + mp, polemass_length=mp * ln)
  if name == "link_length_1":
    fields["link_com_pos_1"] = 0.5 * value
  ref = gdefault.replace(**fields)
  s = env.reset(jax.random.PRNGKey(2), src)
  s2 = env.step(jax.random.PRNGKey(3), s, jnp.int32(env.num_actions - 1), tp)[0]
  base = env.step(jax.random.PRNGKey(3), s, jnp.int32(env.num_actions - 1), src)[0]
  act = _gym_action(env_id, env.num_actions - 1)
  gobs = gym.step_env(jax.random.split(jax.random.PRNGKey(3))[0], s.env_state, act, ref)[0]
  np.testing.assert_allclose(np.asarray(s2.obs), np.asarray(gobs), rtol=1e-6, atol=1e-7)
  assert not np.array_equal(np.asarray(s2.obs), np.asarray(base.obs))


def test_several_names_and_aliases():
  env = GymnaxEnv("Acrobot-v1")
  src = env.default_params()
  tp = env.target_params(src, "link_length", jnp.array([0.5, 2.0]))
  np.testing.assert_allclose(np.asarray(tp.physics.link_length_2), [0.5, 2.0])
  np.testing.assert_allclose(np.asarray(tp.physics.link_com_pos_2), [0.25, 1.0])
  assert tp.physics.available_torque.shape == (2, 3)
  tp = env.target_params(src, ("link_mass_1", "link_mass_2"), (1.5, 2.5))
  assert float(tp.physics.link_mass_1) == 1.5 and float(tp.physics.link_mass_2) == 2.5
  with pytest.raises(ValueError, match="named twice"):
    env.target_params(src, ("link_length", "link_length_1"), 1.0)


# --------------------------------------------------------------------------- registry and sweeps
def test_registered_and_lazy():
  for name, env_id in gymnax_env.NAMES.items():
    env = envs.make(name, horizon=7)
    assert isinstance(env, GymnaxEnv) and env.env_id == env_id and env.horizon == 7
    assert envs.SWEEP_SPECS[name].targets[0] == envs.SWEEP_SPECS[name].target
  code = ("import sys, drjax, drjax.envs, drjax.sweeps; "
          "assert 'gymnax' not in sys.modules, 'importing drjax imported gymnax'")
  subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_missing_gymnax_is_a_clear_error(monkeypatch):
  monkeypatch.setitem(sys.modules, "gymnax", None)
  gymnax_env._gym.cache_clear()  # pylint: disable=protected-access
  try:
    with pytest.raises(ImportError, match=r'pip install -e "\.\[gymnax\]"'):
      envs.make("cartpole")
  finally:
    gymnax_env._gym.cache_clear()  # pylint: disable=protected-access


def _regressed_dr_lsvi_ucb() -> bool:
  from drjax.agents import registry  # pylint: disable=g-import-not-at-top
  try:
    registry.make("dr-lsvi-ucb", GymnaxEnv("CartPole-v1", horizon=3, centers_per_dim=1),
                  capacity=2, reward="regressed")
  except (TypeError, ValueError):
    return False
  return True


def test_tiny_sweep_cli_cartpole_length(tmp_path):
  import pandas as pd  # pylint: disable=g-import-not-at-top
  import sweep_cli  # tests/sweep_cli.py  pylint: disable=g-import-not-at-top
  agents = ["lsvi-ucb"] + (["dr-lsvi-ucb"] if _regressed_dr_lsvi_ucb() else [])
  code, err = sweep_cli.run(["--env", "cartpole", "--env-arg", "horizon=8", "--env-arg",
                             "centers_per_dim=2", "--agents", *agents, "--seeds", "2",
                             "--episodes", "3", "--test-episodes", "4", "--rho", "0.1",
                             "--targets", "length=0.25:2.0:3", "--out", str(tmp_path), "--quiet"])
  assert code == 0, err
  df = pd.read_parquet(tmp_path / "results.parquet")
  assert sorted(df.target_length.unique()) == [0.25, 1.125, 2.0]
  # cartpole's sweeps evaluate the played and the greedy policy of each run (SweepSpec.eval_modes)
  assert sorted(df.policy.unique()) == ["greedy", "played"]
  assert (df.groupby("policy").size() == len(agents) * 2 * 3).all()
  assert len(df) == len(agents) * 2 * 3 * 2
  assert (tmp_path / "sweep.png").stat().st_size > 0
  assert ((df.value >= 0) & (df.value <= 8)).all()
  code, err = sweep_cli.run(["--env", "cartpole", "--agents", "lsvi-ucb", "--targets",
                             "q=0:1:3", "--out", str(tmp_path / "bad"), "--quiet"])
  assert code != 0 and "length" in err and "force_mag" in err


# --------------------------------------------------------------------------- feature maps
def _rbf_loop(x, low, high, centers, width):
  """Normalized Gaussian RBFs by a loop over the grid, from the equations."""
  u = [min(max((x[j] - low[j]) / (high[j] - low[j]), 0.0), 1.0) for j in range(len(x))]
  grids = [[k / (n - 1) for k in range(n)] if n > 1 else [0.5] for n in centers]
  sig = [width / (n - 1) if n > 1 else width for n in centers]
  out = []
  for idx in np.ndindex(*centers):
    out.append(math.exp(-sum((u[j] - grids[j][k]) ** 2 / (2 * sig[j] ** 2)
                             for j, k in enumerate(idx))))
  out = np.array(out)
  return out / out.sum()


def test_rbf_against_numpy_loop_and_simplex():
  low, high, centers = (-1.0, 0.0, -5.0), (1.0, 2.0, 5.0), (3, 1, 4)
  fm = features.rbf(low, high, centers, 0.7)
  assert fm.num_features == 12
  key = jax.random.PRNGKey(0)
  xs = jax.random.uniform(key, (20, 3), minval=-7.0, maxval=7.0)  # some outside the box
  phi = np.asarray(jax.jit(jax.vmap(fm))(xs))  # one compiled program, not op by op
  for x, p in zip(np.asarray(xs, np.float64), phi):
    np.testing.assert_allclose(p, _rbf_loop(x, low, high, centers, 0.7), rtol=1e-5, atol=1e-7)
  np.testing.assert_allclose(phi.sum(-1), 1.0, atol=1e-6)
  assert phi.min() >= 0
  blocks = np.asarray(fm.phi_all(xs[0], 3))
  assert blocks.shape == (3, 36)
  for a in range(3):
    np.testing.assert_array_equal(blocks[a, 12 * a:12 * (a + 1)], phi[0])
    assert blocks[a].sum() == pytest.approx(1.0, abs=1e-6)


def test_rbf_gradient_matches_finite_differences():
  fm = features.rbf((-1.0, -1.0), (1.0, 1.0), 3, 0.5)
  x = jnp.array([0.2, -0.3])
  g = np.asarray(jax.jacfwd(fm)(x))  # [9, 2]
  eps = 1e-2
  for j in range(2):
    e = np.zeros(2, np.float32)
    e[j] = eps
    fd = (np.asarray(fm(x + e), np.float64) - np.asarray(fm(x - e), np.float64)) / (2 * eps)
    np.testing.assert_allclose(g[:, j], fd, atol=2e-3)


def test_tile_coding_hand_computed():
  # n = 2 tiles per dimension, T = 4 tilings on the unit square, x = (0.3, 0.9). Offsets
  # ((t (2j + 1)) mod 4) / 4: dimension 0: 0, 1/4, 1/2, 3/4; dimension 1: 0, 3/4, 1/2, 1/4.
  # t = 0: (floor 0.6, floor 1.8) = (0, 1) -> 0 * 3 + 1 = 1
  # t = 1: (floor 0.85, floor 2.55) = (0, 2) -> 2, + 9 = 11
  # t = 2: (floor 1.1, floor 2.3) = (1, 2) -> 5, + 18 = 23
  # t = 3: (floor 1.35, floor 2.05) = (1, 2) -> 5, + 27 = 32
  fm = features.tile_coding((0.0, 0.0), (1.0, 1.0), 2, 4)
  assert fm.num_features == 36
  phi = np.asarray(fm(jnp.array([0.3, 0.9])))
  expected = np.zeros(36)
  expected[[1, 11, 23, 32]] = 0.25
  np.testing.assert_allclose(phi, expected)
  # Clipped: a point far outside lands in the corner tiles (index 8 of each 3 x 3 tiling).
  phi = np.asarray(fm(jnp.array([5.0, 5.0])))
  np.testing.assert_allclose(np.nonzero(phi)[0], [8, 17, 26, 35])


def test_tiles_env_features_on_the_simplex():
  env = GymnaxEnv("MountainCar-v0", horizon=4, features="tiles")
  assert env.feature_dim == 3 * 4 * 49
  params = env.default_params()
  s = env.reset(jax.random.PRNGKey(0), params)
  phi = np.asarray(env.phi_all(s, params))
  np.testing.assert_allclose(phi.sum(-1), 1.0, atol=1e-6)
  assert (np.count_nonzero(phi, axis=-1) == 4).all()


def test_check_feature_map_errors_and_user_maps():
  obs = np.random.default_rng(0).uniform(-1, 1, (16, 2)).astype(np.float32)
  features.check_feature_map(features.rbf((-1, -1), (1, 1), 2), obs, 3)

  def signed(x):
    return jnp.array([x[0], 1.0 - x[0]])

  with pytest.raises(ValueError, match=r"feature map signed .*negative entry.*sum 1.*min -"):
    features.check_feature_map(signed, obs, 2)

  def unnormalized(x):
    return jnp.abs(x)

  with pytest.raises(ValueError, match=r"unnormalized .*does not sum to 1: sum"):
    features.check_feature_map(unnormalized, obs, 2)
  with pytest.raises(ValueError, match=r"num_actions = 3"):
    features.check_feature_map(lambda x: jnp.full((2, 2), 0.5), obs, 3)
  # A user map on an environment: checked when the environment is built.
  with pytest.raises(ValueError, match="Assumption 1"):
    GymnaxEnv("MountainCar-v0", horizon=3, features=unnormalized)

  def two_bins(x):
    p = jax.nn.sigmoid(x[0] * 10.0)
    return jnp.stack([p, 1.0 - p])

  env = GymnaxEnv("MountainCar-v0", horizon=3, features=two_bins)
  assert env.feature_dim == 6
  p = env.default_params()
  phi = env.phi_all(env.reset(jax.random.PRNGKey(0), p), p)
  np.testing.assert_allclose(np.asarray(phi.sum(-1)), 1.0, atol=1e-6)


def test_bad_feature_arguments():
  with pytest.raises(ValueError, match="low must be < high"):
    features.rbf((0.0, 1.0), (1.0, 1.0), 2)
  with pytest.raises(ValueError, match="centers_per_dim must be an integer or 2"):
    features.rbf((0.0, 0.0), (1.0, 1.0), (2, 2, 2))
  with pytest.raises(ValueError, match="width"):
    features.rbf((0.0,), (1.0,), 2, width=0.0)
  with pytest.raises(ValueError, match="num_tilings"):
    features.tile_coding((0.0,), (1.0,), 2, num_tilings=0)
  with pytest.raises(ValueError, match="features"):
    GymnaxEnv("CartPole-v1", features="fourier")
  with pytest.raises(ValueError, match="unknown physics field"):
    GymnaxEnv("CartPole-v1").make_params(mass=1.0)
  assert isinstance(GymnaxEnv("CartPole-v1").reset(jax.random.PRNGKey(0),
                                                     GymnaxEnv("CartPole-v1").default_params()),
                    GymnaxState)


def test_docs_example_runs(tmp_path):
  """docs/environments.md's gymnax example (a ```py block: tests/test_readme.py runs only the
  ```python blocks, which must run without the extra) runs where gymnax is installed."""
  import os  # pylint: disable=g-import-not-at-top
  import re  # pylint: disable=g-import-not-at-top
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  with open(os.path.join(root, "docs", "environments.md"), encoding="utf-8") as f:
    blocks = [b for b in re.findall(r"^```py\n(.*?)^```", f.read(), re.S | re.M)
              if "cartpole" in b]
  assert len(blocks) == 1
  # Run in this process (a fresh interpreter would only add its imports) with JAX's defaults of
  # a new process: float32 and implicit rank promotion allowed (conftest sets x64 and "raise").
  import contextlib  # pylint: disable=g-import-not-at-top
  import io  # pylint: disable=g-import-not-at-top

  import sweep_cli  # tests/sweep_cli.py  pylint: disable=g-import-not-at-top
  script = tmp_path / "block.py"
  script.write_text(blocks[0])
  out = io.StringIO()
  with sweep_cli.x64(False), jax.numpy_rank_promotion("allow"), contextlib.redirect_stdout(out):
    exec(compile(blocks[0], str(script), "exec"),  # noqa: S102  pylint: disable=exec-used
         {"__name__": "__main__"})
  assert out.getvalue().split()[0] == "648"


def test_obs_dims_select_the_feature_coordinates():
  env = GymnaxEnv("CartPole-v1", horizon=3, obs_dims="2,3", centers_per_dim=5)  # CLI strings
  assert env.obs_dims == (2, 3) and env.feature_dim == 2 * 25
  fm = features.rbf((-0.2095, -3.5), (0.2095, 3.5), 5, 0.5)
  p = env.default_params()
  s = env.reset(jax.random.PRNGKey(4), p)
  phi = np.asarray(env.phi_all(s, p))
  np.testing.assert_allclose(phi[1, 25:], np.asarray(fm(s.obs[2:])), rtol=1e-6)
  assert (phi[1, :25] == 0).all()
  assert GymnaxEnv("Acrobot-v1", obs_dims=(4, 5)).feature_dim == 3 * 9  # default (3, 3)
  with pytest.raises(ValueError, match=r"obs_dims must be distinct observation indices in \[0, 3\]"):
    GymnaxEnv("CartPole-v1", obs_dims=(1, 1))
