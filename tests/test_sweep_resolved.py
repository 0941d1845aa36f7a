"""drjax.sweeps: a sweep resolves its configuration once (issue 35, item 2).

``config.resolve`` validates a ``SweepConfig`` and returns a ``ResolvedSweep`` holding what the
rest of a sweep reads (environment, agents, axes, targets, the source grid, ...). Here: one
``sweeps.run`` (in memory, into a directory, by parts and ``merge``) builds its environment
exactly once; the resolved value's fields equal what the configuration names, computed here
independently; and the layout and the settings tables read the value, not the configuration.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from drjax import envs, sweeps
from drjax.agents import registry
from drjax.sweeps import config as config_lib
from drjax.sweeps import grid, storage

TINY = dict(env="linear-mdp", agents=("dr-lsvi-ucb",), seeds=2, episodes=3, test_episodes=2)


@pytest.fixture
def env_builds(monkeypatch):
  """Counts the environments built (every sweep environment is built by ``drjax.envs.make``)."""
  calls = []
  make = envs.make

  def counting(name, **kwargs):
    calls.append(name)
    return make(name, **kwargs)

  monkeypatch.setattr(envs, "make", counting)
  return calls


def test_one_run_builds_the_environment_once(env_builds, tmp_path):
  cfg = sweeps.SweepConfig(**TINY)
  res = sweeps.run(cfg)
  assert env_builds == ["linear-mdp"] and len(res.df) == 2
  del env_builds[:]
  sweeps.run(cfg, out=str(tmp_path / "dir"))  # a directory: sweep.json, provenance, hash, ...
  assert env_builds == ["linear-mdp"]
  del env_builds[:]
  sweeps.run(cfg, out=str(tmp_path / "dir"))  # resumed: every chunk is done
  assert env_builds == ["linear-mdp"]


def test_parts_and_merge_build_the_environment_once_each(env_builds, tmp_path):
  cfg = sweeps.SweepConfig(**{**TINY, "chunk": 2, "rho": (0.0, 0.5), "rho_at": ((0, 3),)})
  out = str(tmp_path / "parts")
  for i in (1, 2):
    del env_builds[:]
    sweeps.run(cfg, out=out, part=(i, 2))
    assert env_builds == ["linear-mdp"], i
  del env_builds[:]
  sweeps.merge(out)
  assert env_builds == ["linear-mdp"]


def test_an_offline_sweep_builds_the_environment_once(env_builds):
  cfg = sweeps.SweepConfig(env="linear-mdp", agents=("drpvi", "uniform-random"), seeds=2,
                           trajectories=(3,), test_episodes=2, behavior="fixed:1")
  res = sweeps.run(cfg)
  assert env_builds == ["linear-mdp"]
  assert res.info["data"]["behavior"]["spec"] == "fixed:1"


def test_the_resolved_value_holds_what_the_config_names():
  cfg = sweeps.SweepConfig(
      env="linear-mdp", agents=("dr-lsvi-ucb", "lsvi-ucb"), seeds=2, episodes=4,
      beta=(0.5, 1.0), lam=(0.1,), agent_hparams={"lsvi-ucb": {"beta": (2.0,)}},
      env_params={"xi_norm": (0.1, 0.2), "delta": (0.3,)}, targets=("q", 0.0, 1.0, 3),
      controls=True)
  rs = config_lib.resolve(cfg)
  assert isinstance(rs, config_lib.ResolvedSweep)
  assert rs.config == sweeps.validate(cfg)  # validate, public, unchanged
  assert rs.config.agents == ("dr-lsvi-ucb", "lsvi-ucb", "uniform-random")  # controls
  assert rs.env == envs.make("linear-mdp")
  assert list(rs.specs) == list(rs.config.agents) == list(rs.agents)
  assert all(rs.specs[a] is registry.get(a) for a in rs.config.agents)
  assert not rs.offline
  # beta / lam: the shared axes, lsvi-ucb's own beta, the baseline none (NaN)
  assert rs.axes["dr-lsvi-ucb"] == {"beta": (0.5, 1.0), "lam": (0.1,)}
  assert rs.axes["lsvi-ucb"] == {"beta": (2.0,), "lam": (0.1,)}
  assert all(math.isnan(v[0]) and len(v) == 1 for v in rs.axes["uniform-random"].values())
  assert rs.target_mode == "targets"
  np.testing.assert_array_equal(rs.targets, [0.0, 0.5, 1.0])
  assert rs.record_columns == ()
  recorded = config_lib.resolve(sweeps.SweepConfig(**TINY, record=("switches",), record_at=(3, 1)))
  assert recorded.record_columns == ("switches@1", "switches@3")
  # the source grid: the first parameter slowest, each combination's params built once
  assert rs.source_names == ("xi_norm", "delta")
  assert rs.sources == ((0.1, 0.3), (0.2, 0.3))
  for (xi, delta), params in zip(rs.sources, rs.source_params):
    want = rs.env.make_params(xi_norm=xi, delta=delta)
    for a, b in zip(params, want):
      np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  assert rs.hash == storage.config_hash(rs.config)
  assert rs.config_dict == rs.config.to_dict()
  assert rs.data is None and rs.policy_files == ()


def test_with_layout_changes_only_the_layout_and_the_identity():
  rs = config_lib.resolve(sweeps.SweepConfig(**TINY))
  other = dataclasses.replace(rs.config, chunk=3, memory_mb=64.0)
  moved = rs.with_layout(other)
  assert moved.config is other and moved.env is rs.env and moved.agents == rs.agents
  assert moved.hash == storage.config_hash(other) != rs.hash
  assert moved.config_dict == other.to_dict()


def test_resolve_raises_what_validate_raises():
  with pytest.raises(sweeps.SweepError, match="^episodes"):
    config_lib.resolve(sweeps.SweepConfig(**{**TINY, "episodes": 0}))
  with pytest.raises(sweeps.SweepTypeError, match="^agents"):
    config_lib.resolve(sweeps.SweepConfig(**{**TINY, "agents": "dr-lsvi-ucb"}))


def test_the_layout_and_the_settings_read_the_resolved_value():
  """Changed in the value only (not in its config), the axes and the source grid reach the
  layout and the settings tables: they read the value."""
  rs = config_lib.resolve(sweeps.SweepConfig(**{**TINY, "beta": (1.0,)}))
  name = "dr-lsvi-ucb"
  assert grid._layout(rs) == grid.layout(rs.config)  # pylint: disable=protected-access
  wider = dataclasses.replace(rs, axes={name: {"beta": (0.25, 0.5, 4.0), "lam": (0.1,)}})
  lay = grid._layout(wider)  # pylint: disable=protected-access
  assert lay.agents == ((name, 3),) and lay.runs(0) == 3 * 2
  g = grid._settings(wider, name)  # pylint: disable=protected-access
  np.testing.assert_array_equal(g.beta, [0.25, 0.5, 4.0])
  # the source params of the value (xi_norm 0.2), not the config's defaults (0.1)
  params = rs.env.make_params(xi_norm=0.2)
  moved = dataclasses.replace(rs, source_params=(params,))
  g = grid._settings(moved, name)  # pylint: disable=protected-access
  np.testing.assert_array_equal(np.asarray(g.params.xi_norm)[0], np.asarray(params.xi_norm))
  assert not np.array_equal(np.asarray(g.params.xi_norm)[0],
                            np.asarray(rs.env.make_params().xi_norm))
