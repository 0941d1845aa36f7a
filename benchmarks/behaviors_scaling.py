"""How sweep-level offline behaviors scale (issue 34, item 3; docs/offline.md, "Behaviors").

For the shifts study's CartPole (H = 30, d = 32, A = 2) and PEVI, one fresh process per
(behavior, N) runs a small sweep (4 seeds, source only, 50 test episodes) and reports the chunk
program's compile time and run time (``sweep.json`` timings), and the bytes of one collected
dataset (every leaf's ``nbytes``) against the layout formula ``H N (A d + d + 3) * 4 + H N (4 + 1)``
(float32 features/rewards; int32 action/state/next_state, bool fail flags; the ``[H, N, A, d]``
next-state features dominate). Stage 1 (``drjax sweep --save-policies``): LSVI-UCB, K = 50.

  DRJAX_NO_CACHE=1 python benchmarks/behaviors_scaling.py --out pass1.json   # twice (pass2)
  python benchmarks/behaviors_scaling.py --merge benchmarks/results/intel-xeon-2c-behaviors.json \
      pass1.json pass2.json                  # every pass's times and their medians
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

from drjax.bench import machine

ENV_ARGS = {"horizon": 30, "obs_dims": (2, 3), "centers_per_dim": 4}


def one(spec: str, n: int, out: str) -> dict:
  import jax
  import numpy as np

  from drjax import data, envs, policies, sweeps
  cfg = sweeps.SweepConfig(env="cartpole", env_args=ENV_ARGS, agents=("pevi",), seeds=4,
                           trajectories=(n,), behavior=spec, beta=(0.1,), lam=(1.0,),
                           test_episodes=50, dtype="float32")
  res = sweeps.run(cfg, out=out, quiet=True)
  t = res.info["timings"]
  env = envs.make("cartpole", **ENV_ARGS)
  b, _ = policies.parse(spec, env)
  ds = data.collect(env, env.make_params(), b, jax.random.PRNGKey(0), n)
  nbytes = int(sum(np.asarray(x).nbytes for x in ds))
  H, d, A = env.horizon, env.feature_dim, env.num_actions
  formula = H * n * (A * d + d + 3) * 4 + H * n * 5 + n + H * d * 4
  return {"spec": spec, "N": n, "compile_s": t["compile_s"]["pevi"], "chunks_s": t["chunks_s"],
          "dataset_bytes": nbytes, "formula_bytes": formula,
          "data_return": float(res.summary["train_return_mean"].iloc[0]),
          "mean_value": float(res.summary["value_mean"].iloc[0])
          if "value_mean" in res.summary else None}


def merge(paths, out):
  """Several passes (``--out`` files of this script) -> one file: every pass's rows, and per
  (behavior, N) the median compile and chunk times over the passes."""
  passes = [json.load(open(p))["rows"] for p in paths]
  rows = []
  for r in passes[0]:
    same = [q for ps in passes for q in ps if q["spec"] == r["spec"] and q["N"] == r["N"]]
    row = dict(r)
    for k in ("compile_s", "chunks_s"):
      row[k + "_all"] = [q[k] for q in same]
      row[k] = float(np.median(row[k + "_all"]))
    rows.append(row)
  with open(out, "w") as f:
    json.dump({"machine": machine.short_machine_name(), "passes": len(passes), "rows": rows}, f, indent=1)


def main():
  if len(sys.argv) > 1 and sys.argv[1] == "--merge":  # --merge OUT IN1.json IN2.json ...
    merge(sys.argv[3:], sys.argv[2])
    return
  p = argparse.ArgumentParser()
  p.add_argument("--sizes", type=int, nargs="+", default=[200, 1000])
  p.add_argument("--out", default=None)
  p.add_argument("--child", nargs=2, default=None, help=argparse.SUPPRESS)
  a = p.parse_args()
  tmp = tempfile.mkdtemp(prefix="drjax-behaviors-")
  if a.child:
    print(json.dumps(one(a.child[0], int(a.child[1]), os.path.join(tmp, "sweep"))))
    return
  pol = os.path.join(tmp, "stage1.npz")
  subprocess.run([sys.executable, "-m", "drjax.cli", "sweep", "--env", "cartpole",
                  *sum([["--env-arg", f"{k}={','.join(map(str, v)) if isinstance(v, tuple) else v}"]
                        for k, v in ENV_ARGS.items()], []),
                  "--agents", "lsvi-ucb", "--seeds", "1", "--episodes", "50", "--beta", "30",
                  "--lam", "0.1", "--test-episodes", "50", "--out", os.path.join(tmp, "s1"),
                  "--save-policies", pol, "--quiet"], check=True)
  specs = ["uniform", f"eps-greedy:file={pol},eps=0.3", f"eps-greedy:file={pol},eps=0.3,mode=played",
           f"mix:0.5*uniform+0.5*eps-greedy:file={pol},eps=0.3"]
  rows = []
  for n in a.sizes:
    for spec in specs:
      r = subprocess.run([sys.executable, __file__, "--child", spec, str(n)], check=True,
                         capture_output=True, text=True, env=dict(os.environ, DRJAX_NO_CACHE="1"))
      row = json.loads(r.stdout.strip().splitlines()[-1])
      row["spec"] = row["spec"].replace(pol, "stage1.npz")
      rows.append(row)
      print(json.dumps(row), flush=True)
  if a.out:
    with open(a.out, "w") as f:
      json.dump({"machine": machine.short_machine_name(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
  main()
