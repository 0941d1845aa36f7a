"""Offline datasets: collection against the environment's model, behaviors, files, bad input."""

import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import drjax
from drjax import data
from drjax.agents import offline, registry

LIN = drjax.LinearMDP()
LIN_P = LIN.make_params(xi_norm=0.2)
# One uniform behavior for the module: ``collect`` compiles once per (env, behavior, N), and each
# ``data.uniform(16)`` call is a new behavior function.
UNIFORM = data.uniform(16)


def test_collect_follows_the_model_and_the_behavior():
  ds = data.collect(LIN, LIN_P, UNIFORM, jax.random.key(0), 4000)
  model = LIN.model(LIN_P)
  H, N, d = ds.phi.shape
  s, a, s2 = (np.asarray(x) for x in (ds.state, ds.action, ds.next_state))
  phi_tab = np.asarray(model.phi)
  # Recorded features, rewards and fail flags are the model's at the recorded (state, action).
  for h in range(H):
    np.testing.assert_allclose(np.asarray(ds.phi[h]), phi_tab[h, s[h], a[h]], atol=1e-12)
    np.testing.assert_allclose(np.asarray(ds.reward[h]), np.asarray(model.reward)[h, s[h], a[h]],
                               atol=1e-12)
    np.testing.assert_array_equal(np.asarray(ds.next_fail[h]), s2[h] == int(model.fail_state))
    if h + 1 < H:
      np.testing.assert_array_equal(s[h + 1], s2[h])
  # Uniform behavior: action frequencies at step 1 (all trajectories start in x1).
  freq = np.bincount(a[0], minlength=16) / N
  assert np.abs(freq - 1 / 16).max() < 4 * np.sqrt((1 / 16) * (15 / 16) / N)
  # Transition frequencies from x1 under the uniform policy match the model's kernel.
  P = np.asarray(model.transition)[0, 0].mean(0)  # [S'] averaged over the uniform actions
  emp = np.bincount(s2[0], minlength=P.shape[0]) / N
  assert np.abs(emp - P).max() < 4 * np.sqrt(0.25 / N) + 1e-3


def test_behaviors_fixed_and_epsilon_greedy():
  ds = data.collect(LIN, LIN_P, data.fixed(5), jax.random.key(1), 50)
  assert np.all(np.asarray(ds.action) == 5)
  agent = offline.drpvi(3, 4, 16)
  qf = agent.fit(ds, offline.make_hparams(agent, rho=0.2))
  greedy = data.collect(LIN, LIN_P, data.epsilon_greedy(agent, qf, 0.0), jax.random.key(2), 30)
  for h in range(3):
    for n in range(0, 30, 5):
      assert int(greedy.action[h, n]) == int(agent.act(qf, h, jnp.asarray(
          LIN.model(LIN_P).phi[h, int(greedy.state[h, n])]), False))
  explore = data.collect(LIN, LIN_P, data.epsilon_greedy(agent, qf, 1.0), jax.random.key(2), 400)
  assert len(np.unique(np.asarray(explore.action[0]))) == 16


def test_collect_is_vmappable_and_sizes_are_nested():
  keys = jax.random.split(jax.random.key(3), 4)
  # vmapped (and jitted: one program instead of the batched ops one by one)
  batch = jax.jit(jax.vmap(lambda k: data.collect(LIN, LIN_P, UNIFORM, k, 20)))(keys)
  assert batch.phi.shape == (4, 3, 20, 4)
  one = data.collect(LIN, LIN_P, UNIFORM, keys[2], 20)
  np.testing.assert_array_equal(np.asarray(batch.action[2]), np.asarray(one.action))
  small = data.collect(LIN, LIN_P, UNIFORM, keys[2], 7)
  np.testing.assert_array_equal(np.asarray(one.action[:, :7]), np.asarray(small.action))
  # with_size(ds, 7) fits exactly as the 7-trajectory dataset does.
  agent = offline.drpvi(3, 4, 16)
  hp = offline.make_hparams(agent, rho=0.3)
  a = agent.fit(data.with_size(one, 7), hp)
  b = agent.fit(small, hp)
  np.testing.assert_allclose(np.asarray(a.w), np.asarray(b.w), atol=1e-12)


def test_save_load_roundtrip_and_split(tmp_path):
  ds = data.collect(LIN, LIN_P, UNIFORM, jax.random.key(4), 12)
  path = tmp_path / "d.npz"
  data.save(path, ds, metadata={"env": "linear-mdp", "xi_norm": 0.2})
  back, meta = data.load(path, env=LIN)
  assert meta == {"env": "linear-mdp", "xi_norm": 0.2}
  for x, y in zip(ds, back):
    np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
  first, rest = data.split(ds, 5)
  assert data.num_trajectories(first) == 5 and data.num_trajectories(rest) == 7
  np.testing.assert_array_equal(np.asarray(rest.action), np.asarray(ds.action[:, 5:]))
  assert not [f for f in os.listdir(tmp_path) if f.startswith(".")]


def _check_raises(exc, match, fn, *args, **kwargs):
  with pytest.raises(exc, match=match):
    fn(*args, **kwargs)


def test_bad_datasets_and_arguments(tmp_path):
  ds = data.collect(LIN, LIN_P, UNIFORM, jax.random.key(5), 12)  # save_load's program
  agent = offline.drpvi(3, 4, 16)
  hp = offline.make_hparams(agent, rho=0.2)
  put = drjax.PutOption(num_anchors=5, horizon=3)
  # Shapes of another environment.
  _check_raises(ValueError, r"dataset\.next_phi must have shape", agent.fit,
                ds._replace(next_phi=ds.next_phi[:, :, :4]), hp)
  pds = data.collect(put, put.make_params(), data.uniform(2), jax.random.key(0), 5)
  _check_raises(ValueError, r"dataset\.phi must have shape", agent.fit, pds, hp)
  # Empty dataset.
  _check_raises(ValueError, "dataset is empty", agent.fit, ds._replace(valid=ds.valid & False), hp)
  # Hyperparameters of another agent.
  pevi = offline.pevi(3, 4, 16)
  _check_raises(TypeError, r"DRPVI takes DRPVIHParams\(rho, beta, lam\)", agent.fit, ds,
                offline.make_hparams(pevi))
  _check_raises(ValueError, "PEVI has no hyperparameter 'rho'", offline.make_hparams, pevi,
                rho=0.1)
  _check_raises(ValueError, r"hparams\.rho must lie in \[0, 1\]", offline.make_hparams, agent,
                rho=1.5)
  _check_raises(ValueError, r"hparams\.lam must be > 0", offline.make_hparams, agent, lam=0.0)
  # VA-DRPVI: missing pilot; pilot of a different environment (other theta).
  va = offline.va_drpvi(3, 4, 16)
  vhp = offline.make_hparams(va, rho=0.2)
  _check_raises(ValueError, "needs an independent pilot", va.fit, ds, vhp)
  rnd = drjax.RandomLinearMDP(num_states=5, num_actions=16, feature_dim=4, horizon=3)
  other = data.collect(rnd, rnd.sample_params(jax.random.key(6)), data.uniform(16),
                       jax.random.key(6), 10)
  _check_raises(ValueError, "pilot: its reward parameters theta differ", va.fit, ds, vhp,
                pilot=other)
  # A behavior that returns an invalid action, or not an integer.
  _check_raises(ValueError, r"behavior returned actions outside \[0, 15\]", data.collect, LIN,
                LIN_P, lambda k, phi, h: jnp.int32(16), jax.random.key(0), 5)
  _check_raises(TypeError, "behavior must return one integer action", data.collect, LIN, LIN_P,
                lambda k, phi, h: jnp.float32(1.0), jax.random.key(0), 5)
  _check_raises(ValueError, "num_trajectories must be an integer >= 1", data.collect, LIN, LIN_P,
                data.uniform(16), jax.random.key(0), 0)
  _check_raises(TypeError, "key must be a JAX PRNG key", data.collect, LIN, LIN_P,
                data.uniform(16), 3, 5)
  # Unknown agent names and options.
  _check_raises(ValueError, "registered agents: dr-lsvi-ucb, lsvi-ucb, pevi, drpvi, va-drpvi",
                registry.get, "cql")  # (followed by any agents registered after these)
  _check_raises(ValueError, "has no option 'bonus'", registry.make, "pevi", LIN, bonus="paper")
  # Loading a file of the wrong environment; nothing else is written.
  path = tmp_path / "d.npz"
  data.save(path, ds)
  _check_raises(ValueError, r"dataset .*d\.npz \(for the env\)\.phi must have shape", data.load,
                path, env=put)
  np.savez(tmp_path / "bad.npz", phi=np.zeros(3))
  _check_raises(ValueError, "not a drjax dataset", data.load, tmp_path / "bad.npz")
  assert sorted(os.listdir(tmp_path)) == ["bad.npz", "d.npz"]


def test_sweep_runs_every_registered_agent_and_the_cli_rejects_bad_input(tmp_path, capsys):
  from drjax import cli, sweeps
  every = tuple(a for a in registry.names() if a != "zero-torque")  # no torque on linear-mdp
  cfg = sweeps.SweepConfig(env="linear-mdp", agents=every, seeds=2, episodes=3,
                           rho=(0.3,), rho_at=((0, 3),), trajectories=(4, 6),
                           targets=("q", 0.0, 1.0, 3), hparams={"action": (1.0,)})
  res = sweeps.run(cfg)
  got = set(res.df["agent"].astype(str))
  assert got == set(every)
  off = res.df[res.df["agent"] == "drpvi"]
  assert set(off["trajectories"]) == {4.0, 6.0} and np.all(np.isfinite(off["value"]))
  # The CLI: one line, exit 2, nothing written.
  for argv, msg in ((["--agents", "cql"], "unknown agent 'cql'; registered agents"),
                    (["--agents", "pevi", "--trajectories", "0"], "--trajectories"),
                    (["--agents", "pevi", "--behavior", "fixed:99"], "behavior: fixed:A")):
    out = tmp_path / "o"
    x64 = jax.config.jax_enable_x64  # the sweep command sets the precision of its process
    try:
      with pytest.raises(SystemExit) as e:
        cli.main(["sweep", *argv, "--out", str(out), "--quiet", "--x64"])
    finally:
      jax.config.update("jax_enable_x64", x64)
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and msg in err[0], err
    assert not out.exists()
  # A successful offline sweep through the command: files with the trajectories column.
  out = tmp_path / "ok"
  x64 = jax.config.jax_enable_x64
  try:
    assert cli.main(["sweep", "--agents", "pevi", "drpvi", "--trajectories", "3", "5",
                     "--behavior", "fixed:2", "--seeds", "2", "--rho", "0.2", "--targets",
                     "q=0:1:2", "--out", str(out), "--quiet", "--x64"]) == 0
  finally:
    jax.config.update("jax_enable_x64", x64)
  import pandas as pd  # pylint: disable=g-import-not-at-top
  df = pd.read_parquet(out / "results.parquet")
  assert set(df["trajectories"]) == {3.0, 5.0} and set(df["agent"].astype(str)) == {"pevi",
                                                                                    "drpvi"}
  cfg = json.load(open(out / "sweep.json"))["config"]
  assert cfg["behavior"] == "fixed:2" and cfg["trajectories"] == [3, 5]
  _check_raises(ValueError, "agents: must be a list of agent names", sweeps.validate,
                sweeps.SweepConfig(agents="drpvi"))
  json.dumps(registry.get("va-drpvi").describe())
