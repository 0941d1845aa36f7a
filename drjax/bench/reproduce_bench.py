"""``reproduce_all``: ``drjax reproduce all`` cold in a fresh process, and each experiment family's
compile share in-process, against the authors' NumPy notebooks' reported times (``REFERENCE``)."""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

import jax

from drjax.bench.compiles import count_compiles
from drjax.bench.timing import _benchmark, _block, _r, _ratio

# The authors' NumPy notebooks (not run here; numbers from shared/notes/reference-implementation.md,
# measured on a 2-core machine like ours with Python 3.11 and NumPy 2.x).
REFERENCE = {
    "linear_mdp_panel_s": 114.0,  # one (xi_norm, rho) panel: 20 seeds x 2 algorithms x K = 100
    "put_option_rho_s": 113.0,    # one rho: 10 seeds x 2 algorithms x K = 100, 29 x 100 tests
    "linear_mdp_panels": 9,       # Figure 1 + its ablation (3 xi_norm x 3 rho)
    "put_option_panels": 3,       # Figure 2 (3 rho)
    "all_s": 23 * 60.0,           # all 12 panels of Figures 1-3: "about 23 minutes"
    "source": ("the authors' NumPy/SciPy notebooks as measured on a 2-core machine (Python 3.11, "
               "NumPy 2.x); quoted from shared/notes/reference-implementation.md, not run here"),
}
REFERENCE["linear_mdp_s"] = REFERENCE["linear_mdp_panel_s"] * REFERENCE["linear_mdp_panels"]
REFERENCE["put_option_s"] = REFERENCE["put_option_rho_s"] * REFERENCE["put_option_panels"]


def _drjax_command() -> list[str]:
  script = os.path.join(os.path.dirname(sys.executable), "drjax")
  if os.path.exists(script):
    return [script]
  found = shutil.which("drjax")
  return [found] if found else [sys.executable, "-m", "drjax.cli"]


def cold_env() -> dict:
  """Environment of the cold subprocess: no persistent compilation cache of any kind."""
  env = dict(os.environ)
  env.pop("JAX_COMPILATION_CACHE_DIR", None)
  env["DRJAX_NO_CACHE"] = "1"
  env["JAX_ENABLE_COMPILATION_CACHE"] = "false"
  return env


@_benchmark
def reproduce_all(quick: bool = False, *, seeds: int | None = None, episodes: int | None = None,
                  test_episodes: int | None = None, subprocess_run: bool = True,
                  preset: str = "paper", timeout_s: float = 3600.0,
                  in_process: bool = True) -> dict:
  """``drjax reproduce all`` cold in a subprocess, and each family's compile share in-process.

  Args:
    quick: small sizes (2 seeds, 10 episodes, 10 test episodes) unless given explicitly.
    seeds, episodes, test_episodes: override the sizes (``None``: the paper's, or quick's).
    subprocess_run: run the CLI in a fresh process (skipped when False).
    preset: ``paper`` or ``notebook``.
    timeout_s: subprocess timeout.
  """
  from drjax.paper import programs as paper  # pylint: disable=g-import-not-at-top

  if quick:
    seeds, episodes, test_episodes = seeds or 2, episodes or 10, test_episodes or 10
  lin_seeds = seeds or paper.DEFAULT_SEEDS["linear-mdp"]
  put_seeds = seeds or paper.DEFAULT_SEEDS["put-option"]
  episodes = episodes or 100
  test_episodes = test_episodes or 100
  paper_sizes = (seeds is None and episodes == 100 and test_episodes == 100)
  config = {"preset": preset, "seeds_linear_mdp": lin_seeds, "seeds_put_option": put_seeds,
            "episodes": episodes, "test_episodes": test_episodes, "paper_sizes": paper_sizes}
  res = {"config": config, "reference": dict(REFERENCE)}

  sub = None
  if subprocess_run:
    with tempfile.TemporaryDirectory(prefix="drjax-bench-") as tmp:
      out_dir = os.path.join(tmp, "out")
      cmd = _drjax_command() + ["reproduce", "all", "--out", out_dir, "--quiet",
                                "--preset", preset]
      if seeds is not None:
        cmd += ["--seeds", str(seeds)]
      if not paper_sizes:
        cmd += ["--episodes", str(episodes), "--test-episodes", str(test_episodes)]
      ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
      t0 = time.perf_counter()
      proc = subprocess.run(cmd, env=cold_env(), capture_output=True, text=True,
                            timeout=timeout_s, check=False)
      wall = time.perf_counter() - t0
      ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
      ok = proc.returncode == 0 and os.path.exists(os.path.join(out_dir, "results.md"))
      shown = [os.path.basename(cmd[0])] + cmd[1:]
      sub = {
          "command": " ".join(shown).replace(out_dir, "<tmpdir>"),
          "env": {"DRJAX_NO_CACHE": "1", "JAX_COMPILATION_CACHE_DIR": None,
                  "JAX_ENABLE_COMPILATION_CACHE": "false"},
          "returncode": proc.returncode,
          "ok": ok,
          "wall_s": _r(wall),
          "cpu_s": _r((ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)),
          "speedup_vs_notebooks": _ratio(REFERENCE["all_s"], wall, 1) if paper_sizes and ok
                                  else None,
      }
      if not ok:
        sub["stderr_tail"] = proc.stderr[-2000:]
  res["subprocess"] = sub
  if not in_process:  # the default `drjax bench` run: the cold command only (3-minute budget)
    res["families"] = {}
    res["in_process"] = None
    return res

  pre = paper.PRESETS[preset]
  families = {}
  runs = {
      "linear-mdp": (lambda key: paper.run_linear_mdp(pre, seeds=lin_seeds, episodes=episodes,
                                                      key=key),
                     REFERENCE["linear_mdp_s"]),
      "put-option": (lambda key: paper.run_put_option(pre, seeds=put_seeds, episodes=episodes,
                                                      key=key, test_episodes=test_episodes),
                     REFERENCE["put_option_s"]),
  }
  keys = [jax.random.PRNGKey(i) for i in (11, 12)]
  _block(keys)
  for name, (run, ref_s) in runs.items():
    with count_compiles() as cold_stats:
      t0 = time.perf_counter()
      run(keys[0])  # returns host NumPy arrays (device_get inside)
      cold = time.perf_counter() - t0
    with count_compiles() as warm_stats:
      t0 = time.perf_counter()
      run(keys[1])
      warm = time.perf_counter() - t0
    families[name] = {
        "cold_s": _r(cold),
        "warm_s": _r(warm),
        "compile_share": _ratio(max(0.0, cold - warm), cold),
        "compile_s_measured": _r(cold_stats.total_s),
        "compile_share_measured": _ratio(min(cold, cold_stats.total_s), cold),
        "cold_compiles": cold_stats.compiles,
        "warm_compiles": warm_stats.compiles,
        "reference_s": ref_s if paper_sizes else None,
        "speedup_cold": _ratio(ref_s, cold, 1) if paper_sizes else None,
        "speedup_warm": _ratio(ref_s, warm, 1) if paper_sizes else None,
    }
  res["families"] = families
  cold_total = sum(f["cold_s"] for f in families.values())
  warm_total = sum(f["warm_s"] for f in families.values())
  res["in_process"] = {
      "cold_s": _r(cold_total), "warm_s": _r(warm_total),
      "compile_share": _ratio(max(0.0, cold_total - warm_total), cold_total),
      "speedup_cold": _ratio(REFERENCE["all_s"], cold_total, 1) if paper_sizes else None,
      "speedup_warm": _ratio(REFERENCE["all_s"], warm_total, 1) if paper_sizes else None,
  }
  return res
