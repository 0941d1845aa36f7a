"""Sweep benchmarks (README, "Sweeps"): --devices 2 vs 1, and peak RSS / time of a large sweep.

  python -m drjax.bench.sweep_bench devices [--seeds 2000] [--repeats 3]
  python -m drjax.bench.sweep_bench large [--seeds 100000] [--chunk 0]
  python -m drjax.bench.sweep_bench assemble --dir DIR
  python -m drjax.bench.sweep_bench engine [--seeds 4000] [--repeats 5] [--chunk C]
  python -m drjax.bench.sweep_bench source [--seeds 2000] [--repeats 5] [--chunk 2000]
  python -m drjax.bench.sweep_bench wall --seeds 2000 8000 [--chunk 2000] [--devices 1] [--csv]
      [--repeats 3] [--src DIR ...]

``wall`` times fresh, cold ``drjax sweep`` processes (DR-LSVI-UCB, rho_1,4 in {0, 0.5}, K = 100,
21 exact targets; ``DRJAX_NO_CACHE=1``) under ``/usr/bin/time``: wall clock, peak RSS of the
process, and the timings of its ``sweep.json`` (compile, chunk compute, host work and how much
of it the devices waited for, the final step). ``--src`` also times other checkouts (e.g. an
extract of the previous commit: ``git archive HEAD | tar -x -C DIR``), interleaved run by run.

``engine`` compares, warm and in one process, the sweep's chunk program (``sweeps.run`` in memory,
no files) with the engine it wraps (``drjax.sweep`` + exact evaluation on the 21 targets) on the
same runs (rho_1,4 in {0, 0.5} x seeds), interleaved; it prints the medians and their ratios.

``source`` compares, warm and in one process, a sweep that varies a source parameter
(``xi_norm`` in {0.1, 0.2} x rho_1,4 in {0, 0.5} x ``--seeds``) with one over a single source
value and twice the seeds (the same number of runs), interleaved (``sweeps.run`` in memory); it
prints the medians of the chunk time per 4,000 runs and their ratio.

``assemble`` measures the last step alone (reading every chunk, streaming the rows into
Parquet, summary and figure) for a sweep directory holding a few real chunks (e.g. a ``large`` run
stopped early): the missing chunks are filled with copies of the real ones (right seeds and
settings, repeated numbers), then ``drjax sweep --merge`` runs under ``/usr/bin/time``. The numbers
are repeated, so only its time and memory are meaningful.

Each measurement is a fresh ``drjax sweep`` process (DR-LSVI-UCB, linear MDP, K = 100,
rho_1,4 = 0.5, 21 exact targets q in [0, 1]); peak RSS comes from ``getrusage`` of the child.
Prints one JSON line per run and a summary (medians).
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def sweep(out, seeds, *, devices=None, chunk=None, extra=()):
  cmd = [sys.executable, "-m", "drjax.cli", "sweep", "--env", "linear-mdp", "--agents",
         "dr-lsvi-ucb", "--seeds", str(seeds), "--episodes", "100", "--rho", "0.5", "--rho-at",
         "1,4", "--targets", "q=0:1:21", "--out", out, "--quiet", *extra]
  if devices:
    cmd += ["--devices", str(devices)]
  if chunk:
    cmd += ["--chunk", str(chunk)]
  env = dict(os.environ, DRJAX_NO_CACHE="1")
  t0 = time.perf_counter()
  before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
  subprocess.run(cmd, check=True, env=env)
  wall = time.perf_counter() - t0
  rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # KiB, max over children so far
  with open(os.path.join(out, "sweep.json")) as f:
    info = json.load(f)
  t = info["timings"]
  return {"seeds": seeds, "devices": devices or 1, "wall_s": round(wall, 2),
          "compile_s": sum(t["compile_s"].values()), "chunks_s": t["chunks_s"],
          "runs_per_s": t.get("runs_per_s"), "chunk": info["layout"]["chunk_size"],
          "peak_rss_mb_max_so_far": round(max(rss, before) / 1024, 1)}


def devices_bench(seeds, repeats, chunk=500):
  tmp = tempfile.mkdtemp()
  rows = {1: [], 2: []}
  try:
    for r in range(repeats):
      for n in (1, 2):
        out = os.path.join(tmp, f"d{n}_{r}")
        res = sweep(out, seeds, devices=n, chunk=chunk)
        rows[n].append(res)
        print(json.dumps(res), flush=True)
    # Parquet metadata holds the git revision/dirty flag: equal only if the checkout did not
    # change during the benchmark, so the CSV files are compared byte for byte and Parquet as data.
    import pandas as pd  # pylint: disable=g-import-not-at-top
    same = {f: all(filecmp.cmp(os.path.join(tmp, "d1_0", f), os.path.join(tmp, f"d2_{r}", f),
                               shallow=False) for r in range(repeats))
            for f in ("results.csv", "summary.csv", "results.parquet")
            if os.path.exists(os.path.join(tmp, "d1_0", f))}
    same["parquet_data"] = all(pd.read_parquet(os.path.join(tmp, "d1_0", "results.parquet")).equals(
        pd.read_parquet(os.path.join(tmp, f"d2_{r}", "results.parquet"))) for r in range(repeats))
    med = {n: statistics.median(x["chunks_s"] for x in rows[n]) for n in rows}
    medw = {n: statistics.median(x["wall_s"] for x in rows[n]) for n in rows}
    print(json.dumps({"median_chunks_s": med, "median_wall_s": medw,
                      "speedup_compute": round(med[1] / med[2], 2),
                      "speedup_wall": round(medw[1] / medw[2], 2),
                      "identical_files": same}))
  finally:
    shutil.rmtree(tmp)


def large_bench(seeds, chunk):
  tmp = tempfile.mkdtemp()
  try:
    res = sweep(os.path.join(tmp, "big"), seeds, chunk=chunk or None)
    sizes = {f: os.path.getsize(os.path.join(tmp, "big", f)) for f in
             ("results.parquet", "results.csv", "summary.csv")
             if os.path.exists(os.path.join(tmp, "big", f))}
    res["file_bytes"] = sizes
    print(json.dumps(res), flush=True)
  finally:
    shutil.rmtree(tmp)


def assemble_bench(out):
  import io  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  from drjax import sweeps  # pylint: disable=g-import-not-at-top
  cfg = sweeps.validate(sweeps.load_config(out))
  lay = sweeps.layout(cfg)
  chash = sweeps.config_hash(cfg)
  real = sorted(f for f in os.listdir(os.path.join(out, "chunks")) if f.endswith(".npz"))
  data = [dict(np.load(os.path.join(out, "chunks", f))) for f in real]
  for j in range(len(lay.chunks)):
    path = os.path.join(out, "chunks", f"chunk-{j:06d}.npz")
    if os.path.exists(path):
      continue
    setting, seed = lay.chunk_runs(j)
    src = data[j % len(data)]
    n = len(seed)
    res = {k: src[k][:n] for k in ("train_return", "value", "value_stderr")}
    buf = io.BytesIO()
    np.savez(buf, config_hash=np.array(chash), chunk=np.array(j), setting=setting, seed=seed,
             seconds=np.array(0.0), **res)
    with open(path, "wb") as f:
      f.write(buf.getvalue())
  t0 = time.perf_counter()
  res = subprocess.run(["/usr/bin/time", "-f", "%M %e", sys.executable, "-m", "drjax.cli",
                        "sweep", "--merge", "--out", out, "--quiet"], capture_output=True,
                       text=True, check=True)
  rss_kb, secs = res.stderr.strip().splitlines()[-1].split()
  sizes = {f: os.path.getsize(os.path.join(out, f)) for f in
           ("results.parquet", "results.csv", "summary.csv") if os.path.exists(os.path.join(out, f))}
  print(json.dumps({"chunks": len(lay.chunks), "real_chunks": len(real),
                    "rows": sum(c[2] for c in lay.chunks) * (cfg.targets[3] if cfg.targets else 1),
                    "merge_wall_s": float(secs), "merge_peak_rss_mb": round(int(rss_kb) / 1024, 1),
                    "file_bytes": sizes, "elapsed_s": round(time.perf_counter() - t0, 2)}))


def engine_bench(seeds, repeats, chunk=None):
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top

  import drjax  # pylint: disable=g-import-not-at-top
  from drjax import evaluate, sweeps  # pylint: disable=g-import-not-at-top
  from drjax.envs.linear_mdp import LinearMDP, target_params  # pylint: disable=g-import-not-at-top

  K = 100
  env = LinearMDP()
  params = env.make_params()
  agent = drjax.dr_lsvi_ucb(3, 4, 16, K)
  rho = jnp.stack([drjax.rho_array(3, 4, r, at=[(0, 3)]) for r in (0.0, 0.5)])
  hp = drjax.make_hparams(3, 4, rho=rho, beta=jnp.ones(2), lam=jnp.full(2, 0.1))
  tp = target_params(params, jnp.asarray(sweeps.target_values(("q", 0.0, 1.0, 21))))

  @jax.jit
  def values(qfs):
    one = lambda qf: jax.vmap(lambda p: evaluate.target_value(env, agent, qf, p))(tp)  # noqa: E731
    return jax.vmap(jax.vmap(one))(qfs)

  def engine():
    out = drjax.sweep(env, params, agent, jax.random.PRNGKey(0), num_seeds=seeds,
                      num_episodes=K, hparams=hp, outputs=("returns", "final_qf"))
    return jax.block_until_ready((out.returns.mean(-1), values(out.final_qf)))

  cfg = sweeps.SweepConfig(env="linear-mdp", agents=("dr-lsvi-ucb",), seeds=seeds, episodes=K,
                           rho=(0.0, 0.5), rho_at=((0, 3),), targets=("q", 0.0, 1.0, 21),
                           chunk=chunk)
  engine()
  res = sweeps.run(cfg)  # compiles
  t = {"engine_s": [], "sweeps_run_s": [], "sweeps_chunks_s": []}
  for _ in range(repeats):
    t0 = time.perf_counter()
    engine()
    t["engine_s"].append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    res = sweeps.run(cfg)
    t["sweeps_run_s"].append(time.perf_counter() - t0)
    t["sweeps_chunks_s"].append(res.info["timings"]["chunks_s"])
  med = {k: round(statistics.median(v), 3) for k, v in t.items()}
  print(json.dumps({"runs": 2 * seeds, "chunk": res.info["layout"]["chunk_size"],
                    "dtype": cfg.dtype or str(jnp.result_type(float)),
                    "raw": {k: [round(x, 3) for x in v] for k, v in t.items()}, "median": med,
                    "ratio_chunks_vs_engine": round(med["sweeps_chunks_s"] / med["engine_s"], 2),
                    "ratio_run_vs_engine": round(med["sweeps_run_s"] / med["engine_s"], 2)}))


def source_bench(seeds, repeats, chunk):
  from drjax import sweeps  # pylint: disable=g-import-not-at-top

  base = dict(env="linear-mdp", agents=("dr-lsvi-ucb",), episodes=100, rho=(0.0, 0.5),
              rho_at=((0, 3),), targets=("q", 0.0, 1.0, 21), chunk=chunk)
  cfgs = {"one_source_value": sweeps.SweepConfig(**base, seeds=2 * seeds),
          "two_source_values": sweeps.SweepConfig(**base, seeds=seeds,
                                                  env_params={"xi_norm": (0.1, 0.2)})}
  for cfg in cfgs.values():
    sweeps.run(cfg)  # compiles
  t = {k: [] for k in cfgs}
  for _ in range(repeats):
    for k, cfg in cfgs.items():
      tm = sweeps.run(cfg).info["timings"]
      t[k].append(tm["chunks_s"] / tm["runs_computed"] * 4000)
  med = {k: round(statistics.median(v), 3) for k, v in t.items()}
  print(json.dumps({"runs": 4 * seeds, "chunk": chunk, "unit": "chunk seconds per 4,000 runs",
                    "raw": {k: [round(x, 3) for x in v] for k, v in t.items()}, "median": med,
                    "ratio_two_vs_one": round(med["two_source_values"]
                                              / med["one_source_value"], 2)}))


def wall_bench(seeds_list, chunk, devices, csv, repeats, srcs):
  tmp = tempfile.mkdtemp()
  rows = []
  try:
    for r in range(repeats):
      for seeds in seeds_list:
        for src in srcs:
          out = os.path.join(tmp, f"s{seeds}-r{r}-{abs(hash(src)) % 10000}")
          cmd = [sys.executable, "-m", "drjax.cli", "sweep", "--env", "linear-mdp", "--agents",
                 "dr-lsvi-ucb", "--seeds", str(seeds), "--episodes", "100", "--rho", "0", "0.5",
                 "--rho-at", "1,4", "--targets", "q=0:1:21", "--out", out, "--quiet"]
          cmd += ["--chunk", str(chunk)] if chunk else []
          cmd += ["--devices", str(devices)] if devices else []
          cmd += ["--csv"] if csv and src == "." else []
          env = dict(os.environ, DRJAX_NO_CACHE="1")
          cwd = os.getcwd() if src == "." else src
          if src != ".":
            env["PYTHONPATH"] = src
          res = subprocess.run(["/usr/bin/time", "-f", "%M %e", *cmd], capture_output=True,
                               text=True, env=env, cwd=cwd)
          if res.returncode:
            raise RuntimeError(res.stderr[-2000:])
          rss_kb, secs = res.stderr.strip().splitlines()[-1].split()
          t = json.load(open(os.path.join(out, "sweep.json")))["timings"]
          row = {"src": src, "seeds": seeds, "runs": 2 * seeds, "wall_s": float(secs),
                 "peak_rss_mb": round(int(rss_kb) / 1024, 1),
                 "compile_s": round(sum(t["compile_s"].values()), 3),
                 "chunks_s": t["chunks_s"], "total_s": t.get("total_s"),
                 **{k: t[k] for k in ("host_busy_s", "host_wait_s", "finish_s", "write_s")
                    if k in t},
                 "files": sorted(f for f in os.listdir(out) if not f.startswith("."))}
          rows.append(row)
          print(json.dumps(row), flush=True)
          shutil.rmtree(out)
    for seeds in seeds_list:
      for src in srcs:
        sel = [x for x in rows if x["seeds"] == seeds and x["src"] == src]
        med = {k: round(statistics.median(x[k] for x in sel), 3)
               for k in ("wall_s", "peak_rss_mb", "compile_s", "chunks_s")}
        med["wall_over_compile_plus_chunks"] = round(
            med["wall_s"] / (med["compile_s"] + med["chunks_s"]), 2)
        print(json.dumps({"median": med, "seeds": seeds, "src": src, "n": len(sel)}))
  finally:
    shutil.rmtree(tmp)


def main():
  p = argparse.ArgumentParser()
  p.add_argument("what", choices=("devices", "large", "assemble", "engine", "wall",
                                        "source"))
  p.add_argument("--dir", default=None)
  p.add_argument("--seeds", type=int, nargs="+", default=None)
  p.add_argument("--devices", type=int, default=None)
  p.add_argument("--csv", action="store_true")
  p.add_argument("--src", nargs="+", default=["."])
  p.add_argument("--repeats", type=int, default=3)
  p.add_argument("--chunk", type=int, default=0)
  a = p.parse_args()
  if a.what == "devices":
    devices_bench(a.seeds[0] if a.seeds else 2000, a.repeats, a.chunk or 500)
  elif a.what == "assemble":
    assemble_bench(a.dir)
  elif a.what == "engine":
    engine_bench(a.seeds[0] if a.seeds else 4000, a.repeats, a.chunk or None)
  elif a.what == "source":
    source_bench(a.seeds[0] if a.seeds else 2000, a.repeats, a.chunk or 2000)
  elif a.what == "wall":
    wall_bench(a.seeds or [2000, 8000], a.chunk, a.devices, a.csv, a.repeats, a.src)
  else:
    large_bench(a.seeds[0] if a.seeds else 100_000, a.chunk)


if __name__ == "__main__":
  main()
