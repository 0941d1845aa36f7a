"""The dimension study (drjax reproduce dimension): its fits on synthetic data with known
exponents, the theory beta and the potential bound by hand, and one smoke run end to end."""

import json
import math
import os

import jax
import numpy as np
import pandas as pd
import pytest

from drjax.paper import dimension as dm


def _synthetic(exp_rect, exp_ellip, dims=(4, 8, 16, 32, 64), ks=(100, 400), instances=6, seeds=2):
  """Rows whose width sums follow c d^exp k^0.5 times instance noise (exponents known)."""
  key = jax.random.PRNGKey(5)
  rows = []
  for d in dims:
    for i in range(instances):
      key, sub = jax.random.split(key)
      noise = np.exp(0.05 * np.asarray(jax.random.normal(sub, (seeds, 2))))
      for s in range(seeds):
        row = {"family": "dense", "agent": "dr-lsvi-ucb", "d": d, "instance": i, "seed": s,
               "horizon": 3, "lam": 1.0}
        for k in ks:
          row[f"width_rect@{k}"] = 2.0 * d ** exp_rect * k ** 0.5 * noise[s, 0]
          row[f"width_ellip@{k}"] = 3.0 * d ** exp_ellip * k ** 0.5 * noise[s, 1]
          row[f"ave_subopt@{k}"] = 0.1 * d ** 0.25 * k ** -0.5 * noise[s, 0]
          row[f"switches@{k}"] = k
          row[f"dual_calls@{k}"] = 2 * k * d
        rows.append(row)
  return pd.DataFrame(rows)


def test_fits_recover_known_exponents():
  grid = dm.Grid(dims=(4, 8, 16, 32, 64), families=("dense",), episodes=400, record_at=(100, 400),
                 instances=6, seeds=2, bootstrap=200)
  fits = dm.analyze(_synthetic(0.8, 0.3), grid)
  by = {(e["quantity"], e["k"]): e for e in fits["d_exponents"]}
  for q, want in (("ratio", 0.5), ("width_rect", 0.8), ("width_ellip", 0.3), ("ave_subopt", 0.25)):
    e = by[(q, 400)]
    assert abs(e["slope"] - want) < 0.03, (q, e)
    assert e["lo"] <= e["slope"] <= e["hi"] and e["hi"] - e["lo"] < 0.1
  byk = {(e["quantity"], e["d"]): e for e in fits["k_exponents"]}
  assert abs(byk[("ave_subopt", 16)]["slope"] + 0.5) < 0.03
  assert abs(byk[("switches", 16)]["slope"] - 1.0) < 1e-9
  assert math.isclose(byk[("switches", 16)]["per_doubling"], (400 - 100) / 2)  # log2 400/100 = 2
  # a cell's mean and standard error over instances (seeds averaged first)
  df = _synthetic(0.8, 0.3)
  g = df[(df.d == 8)]
  per_inst = g.groupby("instance")["width_rect@100"].mean().to_numpy()
  cell = [c for c in fits["cells"] if c["d"] == 8 and c["k"] == 100
          and c["quantity"] == "width_rect"][0]
  assert math.isclose(cell["mean"], per_inst.mean(), rel_tol=1e-12)
  assert math.isclose(cell["stderr"], per_inst.std(ddof=1) / math.sqrt(6), rel_tol=1e-12)
  norm = [c for c in fits["cells"] if c["d"] == 8 and c["k"] == 100
          and c["quantity"] == "rect_over_bound"][0]
  bound = 3 * math.sqrt(2 * 8 * 100 * math.log(1 + 100 / 8))
  assert math.isclose(norm["mean"], per_inst.mean() / bound, rel_tol=1e-9)


def test_theory_beta_and_potential_bound_by_hand():
  assert math.isclose(dm.theory_beta(8, 3, 1000, 0.1), 8 * 3 * math.sqrt(math.log(3 * 8 * 1000 * 3 / 0.1)))
  assert math.isclose(dm.potential_bound(4, 100, 3), 3 * math.sqrt(800 * math.log(26)))
  with pytest.raises(ValueError, match="family"):
    dm.family_args("tabular", 8)


def test_reproduce_dimension_smoke(tmp_path):
  """``drjax reproduce dimension --grid smoke`` through ``drjax.cli.main`` in this process, at
  JAX's default precision as the command runs in a new process (float32: the study's sweeps take
  JAX's current default dtype)."""
  import sweep_cli  # tests/sweep_cli.py  pylint: disable=g-import-not-at-top

  from drjax import cli  # pylint: disable=g-import-not-at-top
  out = str(tmp_path / "r")
  with sweep_cli.x64(False):
    assert cli.main(["reproduce", "dimension", "--grid", "smoke", "--out", out, "--quiet"]) == 0
  with open(os.path.join(out, "dimension", "exponents.json")) as f:
    ex = json.load(f)
  assert ex["config"]["grid"]["dims"] == [4, 8]
  ratio = [e for e in ex["d_exponents"] if e["quantity"] == "ratio" and e["family"] == "dense"]
  assert ratio and all(e["slope"] > 0 for e in ratio)  # dense features: the ratio grows
  rows = pd.read_parquet(os.path.join(out, "dimension-sweeps", "rows.parquet"))
  r_ = rows["width_rect@32"] / rows["width_ellip@32"]
  assert (r_ >= 1 - 1e-5).all()  # rect >= ellip: the triangle inequality in the Lambda^-1 norm
  assert os.path.exists(os.path.join(out, "dimension", "dimension.png"))
  with open(os.path.join(out, "results.md")) as f:
    assert "exponents in d" in f.read()
