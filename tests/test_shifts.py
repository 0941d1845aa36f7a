"""The shift study (drjax.paper.shifts): a smoke-size run of its code path, the 95% band against
a hand computation, the targets against the configuration."""

import dataclasses
import math

import numpy as np
import pytest

pytest.importorskip("gymnax")

from drjax.paper import shifts  # pylint: disable=g-import-not-at-top

TINY_ENV = dataclasses.replace(shifts.CARTPOLE, env_args=(("horizon", 4), ("obs_dims", (2, 3)),
                                                          ("centers_per_dim", 2)))
TINY = shifts.Grid(envs=(TINY_ENV,), rhos=(0.2,), seeds=2, episodes=3, trajectories=3,
                   targets=3, test_episodes=4)


def test_band_against_hand_computation():
  v = [10.0, 12.0, 17.0]
  mean = 13.0
  sd = math.sqrt(((10 - 13) ** 2 + (12 - 13) ** 2 + (17 - 13) ** 2) / 2)  # ddof = 1: sqrt(13)
  se = sd / math.sqrt(3)
  b = shifts.band(v)
  assert b["mean"] == pytest.approx(mean)
  assert b["stderr"] == pytest.approx(se)
  assert b["lo"] == pytest.approx(mean - 1.96 * se)
  assert b["hi"] == pytest.approx(mean + 1.96 * se)
  assert b["seeds"] == 3


def test_config_targets_and_modes():
  cfg = shifts.config(shifts.GRIDS["default"], shifts.CARTPOLE, "online")
  assert cfg.targets == ("length", 0.25, 2.0, 11)
  assert cfg.agents == ("dr-lsvi-ucb", "lsvi-ucb")
  off = shifts.config(shifts.GRIDS["default"], shifts.PENDULUM, "offline")
  assert off.agents == ("drpvi", "pevi") and off.behavior == "uniform"
  np.testing.assert_allclose(shifts.target_grid(shifts.CARTPOLE, 11),
                             [0.25 + 0.175 * i for i in range(11)])
  with pytest.raises(ValueError, match="mode"):
    shifts.config(shifts.GRIDS["default"], shifts.CARTPOLE, "both")


def test_smoke_run():
  ps, df = shifts.run(TINY)
  assert set(ps) == {"cartpole-online", "cartpole-offline"}
  # targets: exactly the configured linspace, for every curve
  want = [0.25, 1.125, 2.0]
  for panel in ps.values():
    assert panel["config"]["envs"]["cartpole"]["targets"] == pytest.approx(want)
    labels = {c["label"] for c in panel["curves"]}
    assert labels in ({"dr-lsvi-ucb rho=0.2", "lsvi-ucb"}, {"drpvi rho=0.2", "pevi"})
    for c in panel["curves"]:
      assert [p["target"] for p in c["points"]] == pytest.approx(want)
      for p in c["points"]:
        assert 0.0 <= p["mean"] <= 4.0  # returns of H = 4 steps in [0, 1]
  # the bands are recomputed by hand from the rows
  for (mode, lab, t), g in df.groupby(["mode", "label", "target"]):
    c = next(c for c in ps[f"cartpole-{mode}"]["curves"] if c["label"] == lab)
    p = next(p for p in c["points"] if p["target"] == t)
    v = g["value"].to_numpy()
    assert len(v) == TINY.seeds
    se = np.std(v, ddof=1) / np.sqrt(len(v))
    assert p["lo"] == pytest.approx(v.mean() - 1.96 * se)
  lines = shifts.summary_table(ps)
  assert any("lsvi-ucb" in line for line in lines)


def test_wired_into_reproduce():
  from drjax import paper  # pylint: disable=g-import-not-at-top
  from drjax.paper import outputs  # pylint: disable=g-import-not-at-top
  assert "shifts" in paper.FIGURES and "shifts" in paper.LONG_FIGURES
  assert "shifts" not in paper.ALL_FIGURES
  assert outputs.own_tables()["shifts"] is shifts.summary_table
  assert set(paper.DIMENSION_GRIDS) <= set(shifts.GRIDS)  # every --grid choice has a shifts grid
  assert shifts.GRIDS["full"].seeds == 10 * shifts.GRIDS["default"].seeds
