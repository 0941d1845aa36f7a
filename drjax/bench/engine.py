"""Engine benchmark: drjax's training engine against strong NumPy implementations, same process.

For each workload (DR-LSVI-UCB, paper preset, float32; linear MDP xi 0.1, rho_{1,4} = 0.5, beta 1,
lambda 0.1 unless stated) drjax, called through ``drjax.sweep`` (the entry point a user calls,
validation included; before 2026-11-26 evening a direct ``jit(vmap(make_train))``), and the NumPy
baselines of ``numpy_ref.py`` (vectorized over
seeds, O(k) planning, rank-1 updates, batched factorizations, exact alpha maximization by one
argsort + prefix sums; and the sufficient-statistics variant for finite environments) are timed
interleaved, median of ``reps`` warm runs each, and the mean returns of both are reported with
standard errors so a reader can check they solve the same problem. drjax's compile time is the
first call minus the median warm call. Workloads with a memory target run drjax in a fresh
subprocess that reports its own peak RSS (``ru_maxrss``), compile and warm times.

``python -m drjax.bench.engine --rss NAME`` is that subprocess.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import time

import drjax  # noqa: E402,F401  (sets drjax's XLA flags before JAX starts)
import jax  # noqa: E402
import numpy as np  # noqa: E402

# name: (kind, seeds, episodes, extra). Sizes of the targets.
WORKLOADS = {
    "linear_20x100": ("linear", 20, 100, {}),
    "linear_1000x100": ("linear", 1000, 100, {}),
    "linear_1x3000": ("linear", 1, 3000, {}),
    "linear_10000x100": ("linear", 10000, 100, {"rss": True}),
    "linear_1x10000": ("linear", 1, 10000, {}),
    "put_option_1000x100": ("put", 1000, 100, {}),
    "random_d128_100x200": ("random", 100, 200, {"rss": True, "d": 128}),
    # LSVI-UCB (no NumPy baseline: drjax/bench/numpy_ref.py implements DR-LSVI-UCB only); its
    # ellipsoid bonus is the cost that AgentState.quad / StatsState.quad keep incremental.
    "lsvi_put_option_1000x100": ("put", 1000, 100, {"agent": "lsvi"}),
    "lsvi_random_d128_100x200": ("random", 100, 200, {"d": 128, "agent": "lsvi"}),
}
# The default run (under 3 minutes on 2 cores) uses these smaller sizes for the slow ones.
QUICK_SIZES = {"put_option_1000x100": ("put", 100, 100, {}),
               "random_d128_100x200": ("random", 20, 200, {"rss": True, "d": 128})}
NUMPY_FORMS = {"linear": ("stats", "buffer"), "put": ("buffer",), "random": ("stats",)}
NUMPY_SKIP = {"linear_10000x100": ("buffer",), "linear_1x10000": ("buffer",),
              "lsvi_put_option_1000x100": ("buffer",),
              "lsvi_random_d128_100x200": ("stats",)}
FULL_ONLY = ("lsvi_put_option_1000x100", "lsvi_random_d128_100x200")  # keeps the default < 3 min


def _random_env(d: int):
  from drjax.envs.random_mdp import random_linear_drmdp  # pylint: disable=g-import-not-at-top
  return random_linear_drmdp(jax.random.PRNGKey(0), 50, 32, d, 10)


def drjax_runner(kind: str, seeds: int, episodes: int, extra: dict):
  """A jitted ``run(key) -> returns [N, K]`` (host NumPy) for one workload, and its setup."""
  from drjax.envs.linear_mdp import LinearMDP  # pylint: disable=g-import-not-at-top
  from drjax.envs.put_option import PutOption  # pylint: disable=g-import-not-at-top

  if kind == "linear":
    env = LinearMDP()
    params = env.make_params(delta=0.3, p=0.001, xi_norm=0.1)
    rho = drjax.rho_array(3, 4, 0.5, at=[(0, 3)])
  elif kind == "put":
    env = PutOption()
    params = env.default_params()
    rho = 0.3
  else:
    env, params = _random_env(extra["d"])
    rho = 0.1
  H, d, A = env.horizon, env.feature_dim, env.num_actions
  make = drjax.lsvi_ucb if extra.get("agent") == "lsvi" else drjax.dr_lsvi_ucb
  agent = make(H, d, A, episodes)
  hp = drjax.make_hparams(H, d, rho=rho, beta=1.0, lam=0.1)

  def run(key):  # the entry point a user calls, host validation included
    return np.asarray(drjax.sweep(env, params, agent, key, num_seeds=seeds, num_episodes=episodes,
                                  hparams=hp, outputs=("returns",)).returns)

  return run, env, params


def numpy_runner(kind: str, seeds: int, episodes: int, extra: dict, form: str):
  from drjax.bench import numpy_ref  # pylint: disable=g-import-not-at-top
  if kind == "linear":
    return lambda seed: numpy_ref.linear_mdp(seeds, episodes, form=form, seed=seed)
  if kind == "put":
    return lambda seed: numpy_ref.put_option(seeds, episodes, seed=seed)
  env, params = _random_env(extra["d"])
  model = numpy_ref.model_from_drjax(env.model(params))
  return lambda seed: numpy_ref.random_drmdp(seeds, episodes, model=model, rho=0.1, seed=seed)


def _mean_se(x):
  per_seed = np.asarray(x, np.float64).mean(axis=-1)
  se = per_seed.std(ddof=1) / np.sqrt(per_seed.size) if per_seed.size > 1 else float("nan")
  return float(per_seed.mean()), float(se)


def rss_child(name: str, sizes: dict) -> dict:
  """Runs one drjax workload cold then warm in this (fresh) process; peak RSS included."""
  kind, seeds, episodes, extra = sizes[name]
  t0 = time.perf_counter()
  run, _, _ = drjax_runner(kind, seeds, episodes, extra)
  r = run(jax.random.PRNGKey(0))
  cold = time.perf_counter() - t0
  warm, cpu = [], []
  for i in range(2):
    t0, c0 = time.perf_counter(), time.process_time()
    r = run(jax.random.PRNGKey(i + 1))
    warm.append(time.perf_counter() - t0)
    cpu.append(time.process_time() - c0)
  mean, se = _mean_se(r)
  return {"cold_s": cold, "warm_s": statistics.median(warm), "compile_s": cold - min(warm),
          "warm_cpu_s": statistics.median(cpu),
          "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
          "mean_return": mean, "stderr": se}


def engine(quick: bool = False, *, full: bool = False, reps: int = 5, only=None,
           log=print) -> dict:
  """All workloads; returns ``{name: row}``. ``full``: the issue's sizes for every workload."""
  sizes = dict(WORKLOADS)
  if not full:
    sizes.update(QUICK_SIZES)
    for name in FULL_ONLY:
      sizes.pop(name)
  if quick:
    sizes = {k: (v[0], min(v[1], 20), min(v[2], 50), v[3]) for k, v in sizes.items()}
    reps = 1
  names = list(sizes) if only is None else list(only)
  rows = {}
  for name in names:
    kind, seeds, episodes, extra = sizes[name]
    log(f"[drjax bench] engine: {name} ({seeds} seeds x {episodes} episodes) ...")
    row = {"kind": kind, "seeds": seeds, "episodes": episodes, **{k: v for k, v in extra.items()
                                                                   if k != "rss"}}
    if extra.get("rss"):
      env = dict(os.environ)
      cmd = [sys.executable, "-m", "drjax.bench.engine", "--rss", name,
             "--sizes", json.dumps({name: sizes[name]})]
      proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
      if proc.returncode != 0:
        row["error"] = proc.stderr[-1500:]
        rows[name] = row
        continue
      child = json.loads(proc.stdout.strip().splitlines()[-1])
      row["drjax"] = {"warm_s": child["warm_s"], "compile_s": child["compile_s"],
                      "warm_cpu_s": child["warm_cpu_s"],
                      "peak_rss_mb": child["peak_rss_mb"],
                      "peak_rss_mb_per_seed": child["peak_rss_mb"] / seeds,
                      "mean_return": child["mean_return"], "stderr": child["stderr"]}
      drjax_times = None
    else:
      run, _, _ = drjax_runner(kind, seeds, episodes, extra)
      t0 = time.perf_counter()
      r = run(jax.random.PRNGKey(0))
      cold = time.perf_counter() - t0
      drjax_times, drjax_cpu = [], []
      mean, se = _mean_se(r)
      row["drjax"] = {"mean_return": mean, "stderr": se}
    baselines = {}
    for form in NUMPY_FORMS[kind]:
      if form in NUMPY_SKIP.get(name, ()):
        continue
      try:
        baselines[form] = (numpy_runner(kind, seeds, episodes, extra, form), [], [])
      except ImportError as e:  # numpy_ref missing: report drjax alone
        row["numpy_error"] = str(e)
    # Interleaved: drjax, numpy forms, drjax, ... Each turn runs its implementation twice in a
    # row and times the second run (another seed), for every implementation alike: right after
    # the other implementation's runs, caches are cold, which cost a 1,000 x 100 drjax run 15-25 %
    # (0.044 s alone, 0.051-0.056 s right after the NumPy runs, one process, amd-epyc-2c).
    for i in range(reps):
      if drjax_times is not None:
        run(jax.random.PRNGKey(1000 + i))
        t0, c0 = time.perf_counter(), time.process_time()
        run(jax.random.PRNGKey(100 + i))
        drjax_times.append(time.perf_counter() - t0)
        drjax_cpu.append(time.process_time() - c0)
      for form, (fn, times, cpu) in baselines.items():
        fn(1000 + i)
        t0, c0 = time.perf_counter(), time.process_time()
        out = fn(100 + i)
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        if i == 0:
          m, s = _mean_se(out)
          row.setdefault("numpy", {})[form] = {"mean_return": m, "stderr": s}
    if drjax_times is not None:
      warm = statistics.median(drjax_times)
      row["drjax"].update(warm_s=warm, compile_s=max(0.0, cold - min(drjax_times)),
                          warm_cpu_s=statistics.median(drjax_cpu))
    for form, (_, times, cpu) in baselines.items():
      row["numpy"][form].update(s=statistics.median(times), cpu_s=statistics.median(cpu))
    if row.get("numpy"):
      best = min(v["s"] for v in row["numpy"].values())
      row["numpy_best_s"] = best
      row["speedup_vs_best_numpy"] = best / row["drjax"]["warm_s"]
      # Process CPU seconds (every thread): XLA's CPU backend splits some loops over the cores,
      # NumPy's kernels run on one (OpenBLAS at one thread), so wall and CPU ratios differ.
      row["numpy_best_cpu_s"] = min(v["cpu_s"] for v in row["numpy"].values())
      row["speedup_cpu_vs_best_numpy"] = row["numpy_best_cpu_s"] / row["drjax"]["warm_cpu_s"]
      d = row["drjax"]
      for form, v in row["numpy"].items():
        diff = abs(v["mean_return"] - d["mean_return"])
        se = float(np.hypot(v["stderr"], d["stderr"])) if seeds > 1 else float("nan")
        v["returns_agree"] = bool(diff <= 4 * se) if seeds > 1 else None
    log(f"[drjax bench]   {json.dumps(_short(row))}")
    rows[name] = row
  return rows


def _short(row):
  out = {"drjax_s": round(row.get("drjax", {}).get("warm_s", float("nan")), 4)}
  if "numpy_best_s" in row:
    out["numpy_best_s"] = round(row["numpy_best_s"], 4)
    out["speedup"] = round(row["speedup_vs_best_numpy"], 2)
    out["speedup_cpu"] = round(row["speedup_cpu_vs_best_numpy"], 2)
  if "peak_rss_mb" in row.get("drjax", {}):
    out["peak_rss_mb"] = round(row["drjax"]["peak_rss_mb"])
  return out


def markdown(rows: dict) -> str:
  lines = ["| workload | drjax warm s | drjax compile s | NumPy stats s | NumPy buffer s | "
           "speedup vs best NumPy | peak RSS MB | mean return drjax / NumPy |",
           "|---|---|---|---|---|---|---|---|"]
  for name, r in rows.items():
    d = r.get("drjax", {})
    n = r.get("numpy", {})
    f = lambda x, nd=3: "" if x is None else f"{x:.{nd}f}"  # noqa: E731
    means = " / ".join([f(d.get("mean_return"))] + [f(v["mean_return"]) for v in n.values()])
    label = name
    if name.count("x") and name.rsplit("_", 1)[-1] != f"{r.get('seeds')}x{r.get('episodes')}":
      # --quick (and the default run's smaller sizes) run fewer seeds/episodes than the name says
      label = f"{name} (ran {r.get('seeds')} x {r.get('episodes')})"
    lines.append(
        f"| {label} | {f(d.get('warm_s'))} | {f(d.get('compile_s'), 1)} | "
        f"{f(n.get('stats', {}).get('s'))} | {f(n.get('buffer', {}).get('s'))} | "
        f"{f(r.get('speedup_vs_best_numpy'), 1) + 'x' if 'speedup_vs_best_numpy' in r else ''}"
        f" | {f(d.get('peak_rss_mb'), 0)} | {means} |")
  return "\n".join(lines)


if __name__ == "__main__":
  import argparse  # pylint: disable=g-import-not-at-top
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--rss", default=None)
  ap.add_argument("--sizes", default=None)
  ap.add_argument("--full", action="store_true")
  ap.add_argument("--only", nargs="+", default=None)
  ns = ap.parse_args()
  if ns.rss:
    print(json.dumps(rss_child(ns.rss, {k: tuple(v) for k, v in json.loads(ns.sizes).items()})))
  else:
    res = engine(full=ns.full, only=ns.only, log=lambda m: print(m, file=sys.stderr, flush=True))
    print(markdown(res))
