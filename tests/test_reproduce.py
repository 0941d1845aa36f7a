"""`drjax reproduce` / `drjax train` end to end with small settings, results files, bad input."""

import json
import os

import numpy as np
import pytest

from drjax import cli
from drjax.paper import outputs, plotting, programs as paper

# --opt-level 0: these runs check outputs, not the level (tests/test_opt_level.py does); the
# put option's program compiles 3.6x faster at -O0 than at "auto"'s -O1.
SMALL = ["--seeds", "2", "--episodes", "4", "--test-episodes", "3", "--quiet", "--opt-level", "0"]
REQUIRED_CONFIG = {"env", "rho", "seeds", "episodes", "preset", "beta", "lambda"}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
  # One run per test session: conftest.py keeps this module's tests on one xdist worker.
  out = str(tmp_path_factory.mktemp("res") / "out")
  assert cli.main(["reproduce", "all", "--out", out] + SMALL) == 0
  return out


def _panels(out, name):
  d = os.path.join(out, name)
  return {f[:-5]: json.load(open(os.path.join(d, f))) for f in sorted(os.listdir(d))
          if f.endswith(".json")}


def test_every_figure_has_panels_figures_and_full_config(results):
  expected = {"fig1": 3, "fig3": 9, "fig2": 3, "subopt": 3}  # (drpvi, r2pvi: own tests)
  for name, n in expected.items():
    panels = _panels(results, name)
    assert len(panels) == n, name
    for f in (f"{name}.png", f"{name}.pdf"):
      assert os.path.getsize(os.path.join(results, name, f)) > 1000
    for tag, p in panels.items():
      assert {"x", "x_label", "curves", "config"} <= set(p), tag
      assert {"LSVI-UCB", "DR-LSVI-UCB"} <= set(p["curves"])
      for c in p["curves"].values():
        assert len(c["mean"]) == len(c["stderr"]) == len(p["x"])
        assert np.all(np.isfinite(c["mean"])) and np.all(np.asarray(c["stderr"]) >= 0)
      assert REQUIRED_CONFIG <= set(p["config"]), tag
      assert p["config"]["seeds"] == 2 and p["config"]["episodes"] == 4
      assert p["config"]["preset"] == "paper"
      if p["config"]["env"] == "linear-mdp":
        assert "xi_norm" in p["config"]
  assert not [f for f in os.listdir(results) if f.startswith(".")]  # no temporary leftovers


def test_linear_mdp_panels_match_independent_facts(results):
  for tag, p in _panels(results, "fig3").items():
    x = np.asarray(p["x"])
    np.testing.assert_allclose(x, np.linspace(0, 1, 21))
    xi, rho = p["config"]["xi_norm"], p["config"]["rho"]
    assert tag == f"xi{xi:g}_rho{rho:g}"
    # A fixed policy's value is affine in q: the exact reference curves are straight lines.
    for name in ("robust optimum (exact)", "non-robust optimum (exact)"):
      y = np.asarray(p["curves"][name]["mean"])
      np.testing.assert_allclose(np.diff(y, 2), 0.0, atol=1e-5)
    # Returns lie in [0, H] = [0, 3].
    for c in p["curves"].values():
      assert 0.0 <= min(c["mean"]) and max(c["mean"]) <= 3.0
    # Critical q against the closed form of exact planning, 1 - m - (1-p) m (1-m) / 2 (bisected
    # to float32 rounding: 0.48012 for xi_norm = 0.1, not the midpoint of a grid cell).
    m, pp = 0.3 + xi, 0.001
    assert abs(p["critical_q"] - (1 - m - (1 - pp) * m * (1 - m) / 2)) <= 1e-5
    assert p["critical_q_paper_formula"] == pytest.approx((4 - 2 * m * (3 - m)) / (4 - 2 * m))
  fig1 = _panels(results, "fig1")
  fig3 = _panels(results, "fig3")
  assert set(fig1) == {t for t in fig3 if t.endswith("rho0.5")}
  for tag in fig1:
    assert fig1[tag]["curves"] == fig3[tag]["curves"]


def test_subopt_and_results_table(results):
  for p in _panels(results, "subopt").values():
    k = np.asarray(p["x"])
    np.testing.assert_array_equal(k, np.arange(1, 5))
    for name in ("DR-LSVI-UCB", "LSVI-UCB"):
      assert min(p["curves"][name]["mean"]) >= -1e-6  # AveSubopt >= 0 up to rounding
    bound = np.asarray(p["curves"]["Theorem 1 bound"]["mean"])
    assert np.all(bound >= np.asarray(p["curves"]["DR-LSVI-UCB"]["mean"]))
  table = open(os.path.join(results, "results.md")).read()
  for name in ("fig1", "fig3", "fig2", "subopt"):
    for tag in _panels(results, name):
      assert f"| {name} | {tag} |" in table
  p = _panels(results, "fig2")["rho0.3"]
  c = p["curves"]
  cross = outputs.crossing(p["x"], c["DR-LSVI-UCB"]["mean"], c["LSVI-UCB"]["mean"])
  row = [r for r in table.splitlines() if r.startswith("| fig2 | rho0.3 |")][0]
  assert (f"| {cross:.3f} |" in row) if cross is not None else ("| none |" in row)
  assert (f"| {outputs.area(p['x'], c['LSVI-UCB']['mean']):.4f} | "
          f"{outputs.area(p['x'], c['DR-LSVI-UCB']['mean']):.4f} |") in row  # AUC LSVI, DR
  assert "| paper | 2 | 4 | exact |" in row  # preset, seeds, K, evaluation of this row's run
  crit = [r for r in table.splitlines() if r.startswith("| fig1 | xi0.1_rho0.5 |")][0]
  assert "| 0.48012 | 0.600 |" in crit  # exact critical q, the paper's formula
  assert "All rows come from one run." in table


def test_put_option_panels_are_exact_with_exact_references(results):
  for tag, p in _panels(results, "fig2").items():
    c, cfg = p["curves"], p["config"]
    assert cfg["evaluation"].startswith("exact") and "test_episodes" not in cfg
    assert cfg["breakpoint_max_changes_per_step"] <= 8
    nonrobust = np.asarray(c["non-robust optimum (exact)"]["mean"])
    robust = np.asarray(c["robust optimum (exact)"]["mean"])
    # The source-optimal policy holds to maturity (the price is a martingale at p_u = 0.5): its
    # value falls with p_u; the robust one (worst case p_u = 0.5 + rho) exercises earlier.
    assert np.all(np.diff(nonrobust) < 0)
    i = p["x"].index(0.85)
    assert robust[i] > nonrobust[i] and robust[0] < nonrobust[0]
    for name in ("LSVI-UCB", "DR-LSVI-UCB"):  # learned policies: between 0 and the best payoff
      assert 0 <= min(c[name]["mean"]) and max(c[name]["mean"]) <= 100 - 95 * 0.98**9


def test_results_md_says_when_rows_come_from_different_runs(tmp_path):
  out = str(tmp_path)
  panel = {"x": [0, 1], "x_label": "q", "curves": {
      "LSVI-UCB": {"mean": [1, 2], "stderr": [0, 0]},
      "DR-LSVI-UCB": {"mean": [2, 1], "stderr": [0, 0]}}}
  for name, seeds, run in (("fig1", 3, "r1"), ("fig2", 7, "r2")):
    cfg = dict(preset="paper", seeds=seeds, episodes=5, run=run, evaluation="exact ...")
    outputs.write_figure(out, name, {"a": dict(panel, config=cfg)})
  from drjax.paper import reproduce as rep
  table = open(outputs.write_summary(out, rep.load_results(out), rep._header())).read()
  assert "Rows come from 2 different runs" in table
  assert "| fig1 | a | paper | 3 | 5 | exact | r1 | 0.500 |" in table
  assert "| fig2 | a | paper | 7 | 5 | exact | r2 | 0.500 |" in table


def test_fig1_alone_trains_only_rho_one_four_of_half(tmp_path, monkeypatch):
  seen = {}

  class Stop(Exception):
    pass

  def fake(preset, *, rhos, **kw):
    seen["rhos"] = rhos
    raise Stop

  monkeypatch.setattr(paper, "run_linear_mdp", fake)
  for names, want in ((["fig1"], (0.5,)), (["subopt", "fig1"], (0.5,)),
                      (["fig1", "fig3"], paper.LINEAR_RHO)):
    with pytest.raises(Stop):
      cli.main(["reproduce", *names, "--out", str(tmp_path), "--quiet"])
    assert tuple(seen["rhos"]) == tuple(want)


def test_sensitivity_outputs(results):
  panels = _panels(results, "sensitivity")
  assert set(panels) == {"xi0.1", "xi0.2", "xi0.3"}
  for f in ("sensitivity.png", "sensitivity.pdf"):
    assert os.path.getsize(os.path.join(results, "sensitivity", f)) > 1000
  table = open(os.path.join(results, "results.md")).read()
  for tag, p in panels.items():
    assert {"rho", "value", "grad_autodiff", "grad_closed_form", "kinks", "config"} <= set(p)
    np.testing.assert_allclose(p["rho"], np.linspace(0, 1, 101))
    np.testing.assert_allclose(p["grad_autodiff"], p["grad_closed_form"], atol=1e-12)
    xi = p["config"]["xi_norm"]
    m, pp = 0.3 + xi, 0.001
    rho_star = 1 - (1 - pp) * (2 * m + (1 - m) * (1 - pp) * m) / 2  # docs/findings/index.md / critical_point.py
    assert len(p["kinks"]) == 1 and abs(p["kinks"][0] - rho_star) < 1e-8
    # V* is convex piecewise linear in rho_1,4 with slope -2 g(a*): -2(0.3 + xi) then -2(0.3 - xi).
    v, x = np.asarray(p["value"]), np.asarray(p["rho"])
    # At rho = 1 every alpha of the TV dual ties and the smallest is taken: slope 0 there.
    below, above = x < rho_star - 0.01, (x > rho_star + 0.01) & (x < 1)
    assert p["grad_autodiff"][-1] == p["grad_closed_form"][-1] == 0.0
    np.testing.assert_allclose(np.asarray(p["grad_autodiff"])[below], -2 * m, atol=1e-9)
    np.testing.assert_allclose(np.asarray(p["grad_autodiff"])[above], -2 * (0.3 - xi), atol=1e-9)
    np.testing.assert_allclose(np.diff(v[below]) / 0.01, -2 * m, atol=1e-9)
    for fam in p["worst_case"]["families"].values():
      if fam["exact"] is not None:
        assert fam["exact"] - 1e-12 <= fam["found"] <= fam["exact"] + 1e-4
    assert f"| sensitivity | {tag} |" in table


def test_crossing_and_area_by_hand():
  assert outputs.crossing([0, 1, 2], [0, 1, 2], [1, 1, 1]) == pytest.approx(1.0)
  assert outputs.crossing([0, 1], [0, 1], [1, 0]) == pytest.approx(0.5)
  assert outputs.crossing([0, 1, 2], [1, 1, 1], [1, 1, 1]) is None  # identical curves
  assert outputs.crossing([0, 1, 2], [1, 2, 3], [0, 0, 0]) is None
  assert outputs.area([0, 1, 3], [1, 1, 2]) == pytest.approx(1 + 3)


def test_interrupted_write_leaves_previous_results(tmp_path, monkeypatch):
  out = str(tmp_path)
  panels = {"a": {"x": [0, 1], "x_label": "q", "curves": {"LSVI-UCB": {"mean": [1, 2],
                                                                       "stderr": [0, 0]}}}}
  outputs.write_figure(out, "figX", panels)
  before = open(os.path.join(out, "figX", "a.json")).read()

  def boom(*a, **k):
    raise KeyboardInterrupt

  monkeypatch.setattr(plotting, "save_curve_figure", boom)
  changed = {"b": panels["a"]}
  with pytest.raises(KeyboardInterrupt):
    outputs.write_figure(out, "figX", changed)
  assert sorted(os.listdir(os.path.join(out, "figX"))) == ["a.json", "figX.pdf", "figX.png"]
  assert open(os.path.join(out, "figX", "a.json")).read() == before
  assert sorted(os.listdir(out)) == ["figX"]  # no temporary directories left


@pytest.mark.parametrize("argv,msg", [
    (["reproduce", "fig9"], "unknown figure 'fig9'"),
    (["reproduce", "fig1", "--seeds", "0"], "--seeds must be an integer in [1, 2147483647]"),
    (["reproduce", "fig1", "--episodes", "-3"], "--episodes must be an integer in [1, 2147483647]"),
    (["reproduce", "fig1", "--preset", "colab"], "invalid choice: 'colab'"),
    (["train", "--rho", "1.5"], "--rho must lie in [0, 1]"),
    (["train", "--lam", "0"], "--lam must be > 0"),
])
def test_bad_flags_exit_2_with_one_line_and_write_nothing(argv, msg, tmp_path, capsys):
  out = str(tmp_path / "never")
  with pytest.raises(SystemExit) as e:
    cli.main(argv + ["--out", out])
  assert e.value.code == 2
  err = capsys.readouterr().err.strip()
  assert len(err.splitlines()) == 1 and msg in err, err
  assert not os.path.exists(out)


def test_out_that_is_a_file_is_rejected(tmp_path, capsys):
  f = tmp_path / "file.txt"
  f.write_text("keep me")
  with pytest.raises(SystemExit) as e:
    cli.main(["reproduce", "fig1", "--out", str(f)])
  assert e.value.code == 2
  assert "exists and is not a directory" in capsys.readouterr().err
  assert f.read_text() == "keep me"


def test_help_documents_every_flag_and_default(capsys):
  with pytest.raises(SystemExit):
    cli.main(["reproduce", "--help"])
  text = capsys.readouterr().out
  for flag in ("--out", "--seeds", "--episodes", "--preset", "--quiet", "--test-episodes",
               "--seed"):
    assert flag in text
  assert text.count("default") >= 5


def test_train_command_writes_panels(tmp_path):
  out = str(tmp_path / "t")
  linear = [a for a in SMALL if a not in ("--test-episodes", "3")]  # put-option-only flag
  assert cli.main(["train", "--env", "linear-mdp", "--rho", "0.2", "0.5", "--out", out]
                  + linear) == 0
  panels = _panels(out, "train")
  assert set(panels) == {"linear-mdp_xi0.1_rho0.2", "linear-mdp_xi0.1_rho0.5"}
  assert panels["linear-mdp_xi0.1_rho0.2"]["config"]["rho"] == 0.2
  assert "| train | linear-mdp_xi0.1_rho0.5 |" in open(os.path.join(out, "results.md")).read()


def test_presets_differ_only_where_documented():
  a, b = paper.PRESETS["paper"], paper.PRESETS["notebook"]
  same = ("beta", "lam", "episodes", "delta", "p")
  assert all(getattr(a, f) == getattr(b, f) for f in same)
  assert (a.beta, a.lam, a.episodes, a.delta, a.p) == (1.0, 0.1, 100, 0.3, 0.001)
  assert (a.bonus, a.clip, a.put_variant, a.put_fixed_init) == ("paper", "paper", "paper", False)
  assert (b.bonus, b.clip, b.put_variant, b.put_fixed_init) == (
      "notebook", "notebook", "notebook", True)


def test_drpvi_figure_panels_and_robust_optimal_first_actions(results):
  panels = _panels(results, "drpvi")
  assert len(panels) == 9
  assert os.path.getsize(os.path.join(results, "drpvi", "drpvi.png")) > 1000
  # Independent fact (family note, hand calculation with p = 0.001, delta = 0.3): a = (+1,...,+1)
  # is robust-optimal at x1, step 1 iff rho_1,4 < 0.481 (||xi|| = 0.1), 0.376 (0.2), 0.281 (0.3).
  threshold = {0.1: 0.481, 0.2: 0.376, 0.3: 0.281}
  for tag, p in panels.items():
    c = p["config"]
    assert c["seeds"] == 2 and c["trajectories"] == 4 and c["agents"] == ["pevi", "drpvi",
                                                                         "va-drpvi"]
    plus = c["rho"] < threshold[c["xi_norm"]]
    assert p["robust_optimal_first_action"] == ("(+1,+1,+1,+1)" if plus else "(-1,-1,-1,-1)"), tag
    assert {"PEVI", "DRPVI", "VA-DRPVI", "robust optimum (exact)",
            "non-robust optimum (exact)"} <= set(p["curves"])
    for name in ("PEVI", "DRPVI", "VA-DRPVI"):
      f = p["findings"][name]
      assert sum(f["first_action_counts"].values()) == 2
      assert f["subopt_mean"] >= -1e-6 and f["bound_mean"] >= 0
    # Every learned policy's target return is below the non-robust optimum at q = 0 (the source
    # dynamics' optimum) and the exact reference curves are straight lines in q.
    x = np.asarray(p["x"])
    for name in ("robust optimum (exact)", "non-robust optimum (exact)"):
      y = np.asarray(p["curves"][name]["mean"])
      np.testing.assert_allclose(y, np.polyval(np.polyfit(x, y, 1), x), atol=1e-5)
  with open(os.path.join(results, "results.md")) as f:
    md = f.read()
  assert "| drpvi | xi0.1_rho0.3 | paper | 2 | 4 | (+1,+1,+1,+1) |" in md


def test_r2pvi_figure_panels(results):
  panels = _panels(results, "r2pvi")
  assert set(panels) == {"fig1a", "fig1b", "fig1c", "fig1d"}
  dd = panels["fig1d"]
  assert dd["config"]["env"] == "put-option" and dd["config"]["strike"] == 100
  assert len(dd["curves"]) == 8 and all(np.all(np.isfinite(c["mean"]))
                                        for c in dd["curves"].values())
  # The exact optimal stopping rule of the source is worth no less than any learned policy there
  # (p = 0.5 lies between the targets 0.4 and 0.6: compare at both neighbours' average).
  opt = np.asarray(dd["curves"]["optimal stopping of the source (exact)"]["mean"])
  assert np.all(np.diff(opt) <= 1e-9)  # a put is worth less as prices drift up
  assert os.path.getsize(os.path.join(results, "r2pvi", "r2pvi.png")) > 1000
  a, b, c = panels["fig1a"], panels["fig1b"], panels["fig1c"]
  assert {"PEVI", "R2PVI-TV", "R2PVI-KL", "R2PVI-chi2"} <= set(a["curves"])
  assert len(b["curves"]) == 5 and a["config"]["seeds"] == 2 and a["config"]["trajectories"] == 4
  for p in (a, b):
    for cur in p["curves"].values():
      assert np.all(np.isfinite(cur["mean"])) and len(cur["mean"]) == len(p["x"]) == 11
  # Weight 0 is undefined for R2PVI (no point), rho = 0 is defined for DRPVI.
  assert np.isnan(c["curves"]["R2PVI-TV"]["mean"][0]) and np.isfinite(c["curves"]["DRPVI"]["mean"][0])
  w = np.asarray(c["correspondence_weight_for_rho"], float)
  assert np.isnan(w[0]) and np.all(np.diff(w[1:]) <= 1e-9)  # larger radius, smaller weight
  with open(os.path.join(results, "results.md")) as f:
    assert "| r2pvi | fig1c | 2 | 4 |" in f.read()
