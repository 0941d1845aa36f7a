"""Sweep benchmarks (README, "Sweeps"): --devices 2 vs 1, and peak RSS / time of a large sweep.

  python benchmarks/sweep_bench.py devices [--seeds 2000] [--repeats 3]
  python benchmarks/sweep_bench.py large [--seeds 100000] [--chunk 0]
  python benchmarks/sweep_bench.py assemble --dir DIR

``assemble`` measures the last step alone (reading every chunk, building the DataFrame, writing
Parquet/CSV/summary/figure) for a sweep directory holding a few real chunks (e.g. a ``large`` run
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
            for f in ("results.csv", "summary.csv", "results.parquet")}
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
             ("results.parquet", "results.csv", "summary.csv")}
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
           ("results.parquet", "results.csv", "summary.csv")}
  print(json.dumps({"chunks": len(lay.chunks), "real_chunks": len(real),
                    "rows": sum(c[2] for c in lay.chunks) * (cfg.targets[3] if cfg.targets else 1),
                    "merge_wall_s": float(secs), "merge_peak_rss_mb": round(int(rss_kb) / 1024, 1),
                    "file_bytes": sizes, "elapsed_s": round(time.perf_counter() - t0, 2)}))


def main():
  p = argparse.ArgumentParser()
  p.add_argument("what", choices=("devices", "large", "assemble"))
  p.add_argument("--dir", default=None)
  p.add_argument("--seeds", type=int, default=None)
  p.add_argument("--repeats", type=int, default=3)
  p.add_argument("--chunk", type=int, default=0)
  a = p.parse_args()
  if a.what == "devices":
    devices_bench(a.seeds or 2000, a.repeats, a.chunk or 500)
  elif a.what == "assemble":
    assemble_bench(a.dir)
  else:
    large_bench(a.seeds or 100_000, a.chunk)


if __name__ == "__main__":
  main()
