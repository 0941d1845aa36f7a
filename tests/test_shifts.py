"""The shift study (drjax.paper.shifts): its configuration (agents, baselines, controls, tuning,
targets), the multi-family CartPole target axis against a hand construction, the two exact checks
(the TV / absorbing-fail discount against a NumPy discounted DP, the ledge's exact returns against
the closed form), a smoke-size run (baselines and controls in every panel, bands recomputed by
hand from the rows) and the findings' numbers."""

import math
import os

import numpy as np
import pytest

pytest.importorskip("gymnax")

from drjax import sweeps  # pylint: disable=g-import-not-at-top
from drjax.paper import shifts  # pylint: disable=g-import-not-at-top

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_REAL_DISCOUNT_CHECK = shifts.discount_check
_DISCOUNT = {}


def _discount_check():
  """``shifts.discount_check()`` (defaults) computed once per process: ``test_tv_...`` checks its
  value and ``shifts.run`` (``test_smoke_run``) puts the same value into its panels."""
  if not _DISCOUNT:
    _DISCOUNT["out"] = _REAL_DISCOUNT_CHECK()
  return _DISCOUNT["out"]


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


def test_default_grid_is_the_study_the_issue_asks_for():
  g = shifts.GRIDS["default"]
  assert g.seeds >= 16
  assert [s.name for s in g.envs] == ["cartpole", "ledge"]
  cp = shifts.CARTPOLE
  assert dict(cp.env_args).get("obs_dims") is None  # all four observation coordinates
  assert dict(cp.env_args)["horizon"] >= 50
  # every family shifts in the harder direction: shorter pole, stronger gravity, weaker push
  fam = {f: (src, hard) for f, src, hard in cp.families}
  assert fam["length"][1] < fam["length"][0] and fam["gravity"][1] > fam["gravity"][0]
  assert fam["force_mag"][1] < fam["force_mag"][0]
  assert set(g.offline_agents) == {"pevi", "drpvi", "drpvi-mono", "va-drpvi", "r2pvi-tv",
                                   "r2pvi-kl", "r2pvi-chi2", "drvi-l"}
  with pytest.raises(ValueError, match="mode"):
    shifts.config(g, cp, "both")


@pytest.mark.parametrize("mode", ["online", "offline"])
def test_config_has_baselines_controls_and_tuning(mode):
  g = shifts.GRIDS["default"]
  for spec in g.envs:
    cfg = shifts.config(g, spec, mode)
    res = sweeps.validate(cfg)  # controls resolved: rho 0, nominal counterparts, random
    assert 0.0 in [float(r) for r in res.rho]
    assert {"uniform-random", "constant"} <= set(res.agents)
    assert cfg.hparams["action"] == tuple(float(a) for a in spec.actions)
    if mode == "online":
      assert set(shifts.ONLINE) <= set(res.agents)
      assert cfg.tune == "greedy" and cfg.eval_modes == ("played", "greedy")
      for a in shifts.ONLINE:  # a grid around the recommendation, lambda fixed
        assert len(cfg.agent_hparams[a]["beta"]) == len(shifts.BETA_SCALES)
    else:
      assert "pevi" in res.agents and shifts.REG_NOMINAL in cfg.reg_weight
      assert cfg.behavior == "uniform"


def test_multi_family_targets_against_hand_construction():
  g = shifts.GRIDS["default"]
  cfg = shifts.config(g, shifts.CARTPOLE, "offline")
  from drjax import envs  # pylint: disable=g-import-not-at-top
  env = envs.make(cfg.env, **cfg.env_args)
  src = env.default_params().physics
  n = g.targets
  idx = np.arange(3 * n, dtype=np.float64)
  assert cfg.targets == ("index", 0.0, float(3 * n - 1), 3 * n)
  tp = env.target_params(env.default_params(), "index", idx).physics
  grids = {f: np.linspace(min(s, h), max(s, h), n) for f, s, h in shifts.CARTPOLE.families}
  for j, f in enumerate(("length", "gravity", "force_mag")):
    want = np.full(3 * n, float(getattr(src, f)))
    want[j * n:(j + 1) * n] = grids[f]
    np.testing.assert_allclose(np.asarray(getattr(tp, f)), want, rtol=1e-6)
  np.testing.assert_allclose(np.asarray(tp.polemass_length),
                             np.asarray(tp.length) * float(src.masspole), rtol=1e-6)
  # decoding the rows' target index gives back (family, value)
  import pandas as pd  # pylint: disable=g-import-not-at-top
  fam, val = shifts.decode_targets(g, shifts.CARTPOLE, pd.DataFrame({"target_index": idx}))
  assert list(fam[:n]) == ["length"] * n and list(fam[-n:]) == ["force_mag"] * n
  np.testing.assert_allclose(val, np.concatenate([grids["length"], grids["gravity"],
                                                  grids["force_mag"]]), rtol=1e-12)


def test_tv_absorbing_fail_is_a_discount_exactly():
  """(i): with deterministic moves between alive states and an absorbing zero fail state, the TV
  robust value at rho equals the nominal value discounted by 1 - rho (robust_dp against a NumPy
  loop); once an alive move is random the robust value lies below the discounted one."""
  out = _discount_check()
  assert out["max_abs_diff"] < 1e-5
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  from drjax import planning  # pylint: disable=g-import-not-at-top
  m = shifts.discount_model(seed=3)
  mu = np.asarray(m.mu).copy()
  mu[:, 0] = 0.0
  mu[:, 0, :2] = 0.5  # factor 0 (state 0, action 0): half to state 0, half to state 1
  m = m._replace(mu=jnp.asarray(mu, m.mu.dtype))
  H, d = m.theta.shape
  v = np.asarray(planning.robust_dp(m, jnp.full((H, d), 0.3, m.mu.dtype)).v)
  disc = shifts.discounted_dp(m, 0.7)
  assert np.all(v <= disc + 1e-5) and np.max(disc - v) > 1e-3


def test_exact_ledge_against_closed_form():
  out = shifts.exact_ledge(shifts.LEDGE, (0.0, 0.1, 0.3), [0.1, 0.3, 0.5])
  k = out["geometry"]["horizon"] - out["geometry"]["split"]
  routes = [p["route"] for p in out["policies"]]
  assert routes == ["ledge", "ledge", "plateau"]
  assert out["critical_rho"] == pytest.approx(1 - 0.1 / (1 - 0.5 ** (1 / k)), abs=1e-5)
  for p in out["policies"]:
    want = ([(1 - w) ** k for w in out["winds"]] if p["route"] == "ledge"
            else [out["safe_reward"]] * 3)
    np.testing.assert_allclose(p["returns"], want, rtol=1e-5)


def test_smoke_run(monkeypatch):
  """The whole smoke grid in one ``shifts.run`` (every (environment, mode) sweep of the grid, as
  ``drjax reproduce shifts --grid smoke`` runs it): the exact checks (``discount_check``,
  ``exact_ledge``) run once for the study instead of once per (environment, mode); the discount
  check's value is shared with ``test_tv_absorbing_fail_is_a_discount_exactly`` (same call)."""
  g = shifts.GRIDS["smoke"]
  calls = []
  monkeypatch.setattr(shifts, "discount_check", lambda: calls.append(1) or _discount_check())
  ps, df = shifts.run(g)
  assert calls == [1]
  assert ps["exact"]["discount"] == _discount_check()  # the value run computed, in its panels
  keys = [k for k in ps if k != "exact"]
  assert set(keys) == {f"{spec.name}-{f[0]}-{mode}" for spec in g.envs for f in spec.families
                       for mode in g.modes}
  assert set(g.modes) == {"online", "offline"} and {s.name for s in g.envs} == {"cartpole",
                                                                              "ledge"}
  for spec in g.envs:
    env = spec.name
    for mode in g.modes:
      mkeys = [k for k in keys if k.startswith(f"{env}-") and k.endswith(f"-{mode}")]
      assert set(mkeys) == {f"{env}-{f[0]}-{mode}" for f in spec.families}
      for key in mkeys:
        curves = ps[key]["curves"]
        kinds = {c["kind"] for c in curves}
        labels = {c["label"] for c in curves}
        assert kinds == {"baseline", "control", "nominal", "robust"}, key
        assert "uniform-random" in labels and "constant a=0" in labels
        fam = next(f for f in spec.families if key == f"{env}-{f[0]}-{mode}")
        want = shifts.target_grid(fam, g.targets)
        for c in curves:
          assert [p["target"] for p in c["points"]] == pytest.approx(want)
          if c["agent"] in shifts.ROBUST and c["kind"] == "robust":  # its control is there too
            ctrl = c["label"].split(" ")[0] + (" reg=10000" if c["agent"] in shifts.REGULARIZED
                                               else " rho=0")
            assert ctrl + (" greedy" if c["policy"] == "greedy" else "") in labels
        if mode == "online":
          assert {c["policy"] for c in curves} == {"played", "greedy"}
  # every panel records the online selections of every environment
  assert set(ps[keys[0]]["config"]["tuning"]["selected"]) == {f"{s.name}-online" for s in g.envs}
  # the bands are recomputed by hand from the rows
  for (e, fam, m, lab, t), grp in df.groupby(["env", "family", "mode", "label", "target"]):
    c = next(c for c in ps[f"{e}-{fam}-{m}"]["curves"] if c["label"] == lab)
    p = next(p for p in c["points"] if p["target"] == t)
    v = grp["value"].to_numpy()
    assert len(v) == g.seeds
    se = np.std(v, ddof=1) / np.sqrt(len(v))
    assert p["lo"] == pytest.approx(v.mean() - 1.96 * se)
    assert p["hi"] == pytest.approx(v.mean() + 1.96 * se)
  assert ps["exact"]["discount"]["max_abs_diff"] < 1e-5
  lines = shifts.summary_table(ps)
  assert any("uniform-random" in line for line in lines)


def test_findings_quote_sourced_numbers_and_no_old_explanation():
  with open(os.path.join(ROOT, "docs", "findings", "shifts.md"), encoding="utf-8") as f:
    page = f.read()
  assert page.count("<!-- src: docs/findings/shifts.json#") >= 10
  for rel in ("README.md", os.path.join("docs", "findings", "index.md"),
              os.path.join("docs", "findings", "shifts.md")):
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
      text = f.read()
    assert "not concentrated" not in text and "concentrate the shrinkage" not in text, rel


def test_wired_into_reproduce():
  from drjax import paper  # pylint: disable=g-import-not-at-top
  from drjax.paper import outputs  # pylint: disable=g-import-not-at-top
  assert "shifts" in paper.FIGURES and "shifts" in paper.LONG_FIGURES
  assert "shifts" not in paper.ALL_FIGURES
  assert outputs.own_tables()["shifts"] is shifts.summary_table
  assert set(paper.DIMENSION_GRIDS) <= set(shifts.GRIDS)  # every --grid choice has a shifts grid
  assert shifts.GRIDS["full"].seeds >= 5 * shifts.GRIDS["default"].seeds
