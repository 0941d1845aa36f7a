"""The benchmark harness (drjax/bench/bench.py) on tiny sizes: structure and consistency only.

No timing assertions: the machine is shared and timings are not reproducible. The cold
``drjax reproduce all`` subprocess is not spawned, and the two paper programs are replaced by a
small jitted stand-in (their compile alone takes ~20 s); first_result times one cold command;
the other benchmarks run for real.
``bench.main`` runs once, in one test (the suite runs under pytest-xdist, where a module fixture
would run once per worker); its parts are checked by the ``_check_*`` helpers.
"""

import functools
import json
import math
import os
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from drjax.paper import programs as paper

from drjax.bench import bench, timing  # noqa: E402

TINY = {
    "engine": dict(only=["linear_20x100"], reps=1),
    "reproduce_all": dict(seeds=2, episodes=3, test_episodes=2, subprocess_run=False),
    "seed_scaling": dict(seeds=(2,), lsvi_seeds=0, episodes=3, warm_reps=1),
    "alpha_max": dict(sizes=(30,), grids=(5,), batch=3),
    "hyperparameter_grid": dict(shape=(2, 1, 2), seeds=2, episodes=3),
    # One cold command (fresh process) instead of the quick run's three sweeps: the start-ups and
    # one command give the result its whole structure (every command takes the same path,
    # run_command; test_bench_first_result.py checks what one measurement holds).
    "first_result": dict(commands=("sweep-online",)),
}
CALLS = []


def _stand_in(family, use_jit=True):
  """A cheap stand-in for ``paper.run_linear_mdp`` / ``run_put_option`` (cached jit per size)."""
  @functools.lru_cache(maxsize=None)
  def program(n):
    return jax.jit(lambda k: jnp.sin(jax.random.key_data(k)).sum() * n)

  def run(preset, *, seeds, episodes, key, test_episodes=None):
    CALLS.append(dict(family=family, preset=preset.name, seeds=seeds, episodes=episodes,
                      test_episodes=test_episodes))
    if not use_jit:
      time.sleep(0.01)
    return {"x": np.asarray(program(seeds)(key) if use_jit else seeds)}

  return run


def _run_main(tmp_path):
  path = str(tmp_path / "sub" / "bench.json")
  CALLS.clear()
  mp = pytest.MonkeyPatch()
  mp.setattr(bench, "LOAD_SAMPLE_S", 0.05)
  mp.setattr(paper, "run_linear_mdp", _stand_in("linear-mdp"))
  mp.setattr(paper, "run_put_option", _stand_in("put-option"))
  try:
    res = bench.main(quick=True, json_path=path, overrides=TINY, only=list(bench.BENCHMARKS))
  finally:
    mp.undo()
  return res, path, list(CALLS)


def test_main_quick_on_tiny_sizes(tmp_path):
  run = _run_main(tmp_path)
  _check_main_and_machine(run)
  _check_json_and_report(run)
  _check_reproduce_all(run)
  _check_seed_scaling(run)
  _check_alpha_max(run)
  _check_hyperparameter_grid(run)
  _check_engine(run)
  _check_first_result(run)


def _check_first_result(run):
  r = run[0]["benchmarks"]["first_result"]
  assert list(r["labels"]["now"]["commands"]) == ["sweep-online"]  # TINY reached it


def _check_engine(run):
  rows = run[0]["benchmarks"]["engine"]["workloads"]
  row = rows["linear_20x100"]
  assert row["seeds"] == 20 and row["episodes"] == 50  # quick caps the sizes
  assert _pos(row["drjax"]["warm_s"]) and row["drjax"]["compile_s"] >= 0
  assert set(row["numpy"]) == {"stats", "buffer"}
  for v in row["numpy"].values():
    assert _pos(v["s"]) and isinstance(v["returns_agree"], bool)
  assert row["speedup_vs_best_numpy"] == pytest.approx(
      min(v["s"] for v in row["numpy"].values()) / row["drjax"]["warm_s"])
  # Process CPU seconds beside the wall seconds, and their ratio.
  assert _pos(row["drjax"]["warm_cpu_s"]) and all(_pos(v["cpu_s"]) for v in row["numpy"].values())
  assert row["numpy_best_cpu_s"] == min(v["cpu_s"] for v in row["numpy"].values())
  assert row["speedup_cpu_vs_best_numpy"] == pytest.approx(
      row["numpy_best_cpu_s"] / row["drjax"]["warm_cpu_s"])
  assert "linear_20x100" in run[0]["benchmarks"]["engine"]["markdown"]


def _pos(x):
  return isinstance(x, (int, float)) and math.isfinite(x) and x > 0


def _check_load(res):
  for k in ("load_start", "load_end"):
    la = res[k]["loadavg"]
    assert la is None or (len(la) == 3 and all(x >= 0 for x in la))
    assert res[k]["cores_busy"] is None or res[k]["cores_busy"] >= 0
  assert res["others_cores_busy"] is None or res["others_cores_busy"] >= 0
  assert _pos(res["wall_s"])


def _check_source(res):
  """The code that ran: in a git checkout, its commit and the changed files, read by git here."""
  import subprocess  # pylint: disable=g-import-not-at-top
  root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(bench.__file__))))
  if not os.path.isdir(os.path.join(root, ".git")):
    assert "source_commit" not in res
    return
  git = lambda *a: subprocess.run(["git", "-C", root, *a], capture_output=True, text=True,
                                  check=True).stdout
  assert res["source_commit"] == git("rev-parse", "HEAD").strip()
  changed = {ln[3:] for ln in git("status", "--porcelain").splitlines()}
  got = {ln[3:] for ln in res["source_changes"]}
  assert got <= changed and all(p.startswith(("drjax/", "benchmarks/")) for p in got), got
  assert {p for p in changed if p.startswith("drjax/")} <= got, (changed, got)


def _check_main_and_machine(run):
  res = run[0]
  assert res["quick"] is True
  assert list(res["benchmarks"]) == list(bench.BENCHMARKS)
  m = res["machine"]
  for k in ("cpu_model", "python", "jax", "jaxlib", "XLA_FLAGS", "name"):
    assert isinstance(m[k], str) and (m[k] or k == "XLA_FLAGS")
  assert m["cores"] >= 1 and m["jax"] == jax.__version__
  assert "--xla_cpu_multi_thread_eigen=false" in m["XLA_FLAGS"]  # set by conftest / drjax
  assert _pos(res["total_s"])
  _check_source(res)
  for b in res["benchmarks"].values():
    _check_load(b)
    assert len(b["attempts"]) == 1 and b["attempts"][0]["kept"]  # quick: never rerun


def _check_json_and_report(run):
  res, path = run[:2]
  with open(path) as f:
    assert json.load(f) == json.loads(json.dumps(res))
  report = bench.format_report(res)
  for name in bench.BENCHMARKS:
    assert f"## {name}" in report
  assert res["machine"]["cpu_model"] in report


def _check_reproduce_all(run):
  r, calls = run[0]["benchmarks"]["reproduce_all"], run[2]
  assert r["subprocess"] is None  # not spawned in tests
  assert r["config"]["paper_sizes"] is False
  assert {c["family"] for c in calls} == {"linear-mdp", "put-option"}
  for c in calls:  # the sizes reach the runs; cold and warm each called once per family
    assert (c["seeds"], c["episodes"]) == (2, 3) and c["preset"] == "paper"
    assert c["test_episodes"] in (None, 2)
  assert len(calls) == 4
  for name in ("linear-mdp", "put-option"):
    f = r["families"][name]
    assert _pos(f["cold_s"]) and _pos(f["warm_s"])
    assert 0 <= f["compile_share"] <= 1 and 0 <= f["compile_share_measured"] <= 1
    assert f["cold_compiles"] >= 1 and f["warm_compiles"] == 0
    assert f["reference_s"] is None and f["speedup_cold"] is None  # not the paper's sizes
  ip = r["in_process"]
  assert ip["cold_s"] == pytest.approx(sum(f["cold_s"] for f in r["families"].values()), abs=2e-3)
  assert r["reference"]["all_s"] == 23 * 60
  assert r["reference"]["linear_mdp_s"] + r["reference"]["put_option_s"] == 9 * 114 + 3 * 113


def _check_seed_scaling(run):
  rows = run[0]["benchmarks"]["seed_scaling"]["rows"]
  assert [(x["algorithm"], x["seeds"]) for x in rows] == [("DR-LSVI-UCB", 2)]
  for x in rows:
    for k in ("first_s", "warm_s", "warm_median_s", "ms_per_seed", "plan_full_ms", "plan_share"):
      assert _pos(x[k]), k
    assert x["warm_s"] <= x["warm_median_s"]  # min <= median of the same samples
    assert x["ms_per_seed"] == pytest.approx(1e3 * x["warm_s"] / x["seeds"], rel=1e-2, abs=1e-3)
    assert x["traces"] == 1 and x["first_compiles"] >= 1 and x["warm_compiles"] == 0
    assert x["finite"] and 0 <= x["mean_return"] <= 3  # returns in [0, H]


def _check_alpha_max(run):
  r = run[0]["benchmarks"]["alpha_max"]
  rows = r["rows"]
  assert [(x["K"], x["method"]) for x in rows] == [(30, "exact"), (30, "grid G=5")]
  for x in rows:
    assert _pos(x["ms_per_call"]) and _pos(x["first_s"]) and x["reps"] >= 3
  for x in rows[1:]:
    assert x["max_err"] >= 0 and x["min_err"] >= -1e-9  # grid max never above the exact max
    assert x["within_bound"] and x["err_bound"] > 0
    assert x["include_exact_max_diff"] <= 1e-9  # exact+grid == exact (float64 in tests)
    assert _pos(x["vs_exact"])


def _check_hyperparameter_grid(run):
  r = run[0]["benchmarks"]["hyperparameter_grid"]
  assert r["config"]["settings"] == 4 and r["config"]["runs"] == 8
  assert r["returns_shape"] == [2, 1, 2, 2, 3]
  assert r["second"]["traces"] == 0 and r["second"]["compiles"] == 0 and r["no_recompile"]
  assert r["outputs_differ"] and r["finite"]
  assert r["first"]["rho_1_4"] != r["second"]["rho_1_4"]
  assert _pos(r["first"]["s"]) and _pos(r["second"]["s"]) and _pos(r["ms_per_run_warm"])


def test_cold_subprocess_environment_has_no_cache(monkeypatch):
  monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", "/tmp/some-cache")
  monkeypatch.delenv("DRJAX_NO_CACHE", raising=False)
  env = bench.cold_env()
  assert "JAX_COMPILATION_CACHE_DIR" not in env and env["DRJAX_NO_CACHE"] == "1"
  assert os.environ["JAX_COMPILATION_CACHE_DIR"] == "/tmp/some-cache"  # caller's env untouched
  cmd = bench._drjax_command()  # pylint: disable=protected-access
  assert os.path.exists(cmd[0])


def test_paper_sizes_give_reference_ratios(monkeypatch):
  monkeypatch.setattr(timing, "LOAD_SAMPLE_S", 0.05)  # read by timing._load
  monkeypatch.setattr(paper, "run_linear_mdp", _stand_in("linear-mdp", use_jit=False))
  monkeypatch.setattr(paper, "run_put_option", _stand_in("put-option", use_jit=False))
  r = bench.reproduce_all(subprocess_run=False, seeds=None, episodes=None, test_episodes=None)
  assert r["config"]["paper_sizes"]
  assert r["config"]["seeds_linear_mdp"] == 20 and r["config"]["seeds_put_option"] == 10
  f = r["families"]["linear-mdp"]
  assert f["reference_s"] == 9 * 114
  assert f["speedup_cold"] == pytest.approx(9 * 114 / f["cold_s"], rel=1e-2)
  assert r["in_process"]["speedup_warm"] > 0


def test_short_machine_name_is_a_file_name():
  name = bench.short_machine_name()
  assert name and all(c.isalnum() or c == "-" for c in name) and name.endswith("c")


def test_engine_rows_say_what_ran_when_it_differs_from_the_name():
  from drjax.bench import engine
  md = engine.markdown({"linear_10000x100": {"seeds": 20, "episodes": 50},
                        "linear_20x100": {"seeds": 20, "episodes": 100}})
  assert "| linear_10000x100 (ran 20 x 50) |" in md
  assert "| linear_20x100 |" in md
