"""`drjax reproduce r2pvi-time` (the R2PVI paper's Figure 2: fit time against N and d) on a tiny
grid: the rows, the ratios, the published seconds and the figure are checked against the
quantities they are computed from (timings themselves are not asserted: they live in
benchmarks)."""

import json
import os

import numpy as np
import pytest

from drjax.bench import offline
from drjax.paper import ALL_FIGURES, FIGURES, r2pvi_time, reproduce as rep


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
  # the paper's base point (N = 1,000, 30 anchors: it has published seconds) and one more N
  res = r2pvi_time.run(n_grid=(1000, 1200), anchor_grid=(30,), agents=("pevi", "r2pvi-tv"),
                       reps=1, min_time_s=0.0, log=lambda m: None)
  return res, r2pvi_time.panels(res)


def test_rows_and_panels(tiny):
  res, p = tiny
  assert {(r["agent"], r["N"], r["anchors"]) for r in res["rows"]} == {
      (a, n, 30) for a in ("pevi", "r2pvi-tv") for n in (1000, 1200)}
  assert p["fig2a"]["x"] == [1000, 1200] and p["fig2b"]["x"] == [30]
  for r in res["rows"]:  # drjax and the NumPy baseline fitted the same weights (float32)
    assert r["max_abs_w_diff"] <= 1e-4 * max(1.0, r["w_scale"]), r
  s = p["fig2a"]["series"]["pevi"]
  row = next(r for r in res["rows"] if r["agent"] == "pevi" and r["N"] == 1000)
  assert s["drjax_s"][0] == row["drjax"]["warm_min_s"] > 0
  assert s["numpy_s"][0] == row["numpy"]["warm_min_s"] > 0
  # published seconds: the paper's table at its grid points, none elsewhere
  assert s["published_s"] == [offline.PUBLISHED[("pevi", 1000, 30)], None] == [0.80, None]
  assert s["published_over_drjax"][0] == pytest.approx(0.80 / s["drjax_s"][0])
  assert s["published_over_drjax"][1] is None
  assert s["numpy_over_drjax"][1] == pytest.approx(s["numpy_s"][1] / s["drjax_s"][1])
  m = p["fig2a"]["config"]["machine"]
  assert m["backend"] and m["cores"] >= 1 and m["jax"]


def test_figure_draws_every_series(tiny, tmp_path):
  import matplotlib.pyplot as plt
  from drjax.paper import plotting
  _, p = tiny
  drawn = []
  orig = plotting.save_figure
  plotting.save_figure = lambda fig, base: (drawn.append(fig), orig(fig, base))
  try:
    r2pvi_time.plot(p, str(tmp_path / "f"))
  finally:
    plotting.save_figure = orig
  fig = drawn[0]
  ax_a, ax_b = fig.axes[:2]
  # panel a: 2 agents x (drjax, NumPy, published: only at N = 1,000, a single point)
  lines = [np.asarray(line.get_ydata(), float) for line in ax_a.lines]
  want = [np.asarray([np.nan if v is None else v for v in p["fig2a"]["series"][a][k]], float)
          for a in ("pevi", "r2pvi-tv") for k in ("drjax_s", "numpy_s", "published_s")]
  assert len(lines) == len(want) == 6
  for w in want:  # every series is drawn, with its own numbers
    assert sum(np.allclose(y, w, equal_nan=True) for y in lines) >= 1
  assert ax_a.get_yscale() == "log"
  m = p["fig2a"]["config"]["machine"]
  assert m["jax"] in fig._suptitle.get_text()  # the machine is named on the figure
  assert (m["cpu_model"] if m["backend"] == "cpu" else m["backend"]) in fig._suptitle.get_text()
  labels = [t.get_text() for t in fig.legends[0].get_texts()]
  assert labels[:2] == ["PEVI", "R2PVI-TV"] and any("published" in t for t in labels)
  assert os.path.exists(tmp_path / "f.png")
  plt.close(fig)


def test_not_in_all_and_reproduce_writes_it(monkeypatch, tmp_path):
  assert "r2pvi-time" in FIGURES and "r2pvi-time" not in ALL_FIGURES
  monkeypatch.setattr(r2pvi_time, "N_GRID", (300,))
  monkeypatch.setattr(r2pvi_time, "ANCHOR_GRID", (4,))
  monkeypatch.setattr(r2pvi_time, "ANCHORS_AT_N", 4)
  monkeypatch.setattr(r2pvi_time, "N_AT_ANCHORS", 300)
  monkeypatch.setattr(r2pvi_time, "AGENTS", ("drvi-l",))
  monkeypatch.setattr(r2pvi_time, "REPS", 1)
  monkeypatch.setattr(r2pvi_time, "MIN_TIME_S", 0.0)
  rep.reproduce(["r2pvi-time"], out=str(tmp_path), quiet=True)
  d = tmp_path / "r2pvi-time"
  assert sorted(os.listdir(d)) == ["fig2a.json", "fig2b.json", "r2pvi-time.pdf",
                                   "r2pvi-time.png"]
  panel = json.loads((d / "fig2a.json").read_text())
  assert panel["config"]["run"] and panel["config"]["strike"] == 100
  assert list(panel["series"]) == ["drvi-l"]
  md = (tmp_path / "results.md").read_text()
  assert "| r2pvi-time | fig2a DRVI-L | N 300:" in md


def test_bad_agents():
  with pytest.raises(TypeError, match="agents"):
    r2pvi_time.run(agents="pevi")
  with pytest.raises(ValueError, match="unknown agent|registered"):
    r2pvi_time.run(agents=("nope",))
