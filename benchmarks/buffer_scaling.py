"""How one buffer-form run grows with K, H and d, and whether the sweeps' chunking bounds it.

For DR-LSVI-UCB on the put option (continuous prices: buffer form; ``num_anchors = d - 1`` hat
features, A = 2) at each ``(K, H, d)``:

* ``state_MB``: the bytes of the final ``AgentState`` (buffers ``[H, K, ...]`` and the ``[H, d, d]``
  Gram matrix and inverse), from the arrays ``make_train`` returns;
* ``run_MB``: XLA's compiled footprint of one ``make_train`` run (arguments + outputs + temporaries,
  ``memory_analysis()``);
* ``ms_per_episode`` (median and min of 5) / ``cpu_ms_per_episode``: warm wall / process CPU time
  of one jitted run divided by K (the CPU time is less sensitive to other processes on a shared
  machine);
* ``chunk_MB_per_run`` / ``estimate_MB``: the sweep's compiled chunk program (4 runs, 100 test
  episodes in the source) per run, against ``drjax.sweeps.grid.bytes_per_run``, which sizes the
  chunks.

  python benchmarks/buffer_scaling.py --out benchmarks/results/amd-epyc-2c-buffer-scaling.json

then ``python -m drjax.bench.doc_tables`` rewrites docs/engine.md's table from that file.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import jax
import numpy as np


def _bytes(tree) -> int:
  return int(sum(np.asarray(x).nbytes for x in jax.tree_util.tree_leaves(tree)))


def _footprint(compiled) -> int:
  m = compiled.memory_analysis()
  return int(m.argument_size_in_bytes + m.output_size_in_bytes + m.temp_size_in_bytes)


def one_run(K: int, H: int, d: int, dtype: str) -> dict:
  from drjax.agents import registry  # pylint: disable=g-import-not-at-top
  from drjax.envs.put_option import PutOption  # pylint: disable=g-import-not-at-top
  from drjax.train import make_train  # pylint: disable=g-import-not-at-top

  env = PutOption(num_anchors=d - 1, horizon=H)
  params = env.default_params()
  agent = registry.make("dr-lsvi-ucb", env, capacity=K)
  hp = registry.make_hparams("dr-lsvi-ucb", env, rho=0.1)
  train = make_train(env, agent, K, form="buffer", outputs=("returns", "final_qf", "state"))
  key = jax.random.PRNGKey(0)
  t0 = time.perf_counter()
  out = jax.block_until_ready(train(key, hp, params))
  first = time.perf_counter() - t0
  # Timed: the jitted run (``train`` itself validates its arguments on the host at every call,
  # which costs more than a small run).
  run = jax.jit(lambda k: train(k, hp, params).returns)
  jax.block_until_ready(run(key))
  times, cpu = [], []
  for i in range(5):
    t0, c0 = time.perf_counter(), time.process_time()
    jax.block_until_ready(run(jax.random.PRNGKey(i + 1)))
    times.append(time.perf_counter() - t0)
    cpu.append(time.process_time() - c0)
  row = {"K": K, "H": H, "d": d, "A": env.num_actions, "dtype": dtype,
         "state_MB": round(_bytes(out.state) / 2**20, 3),
         "buffers_MB": round(_bytes((out.state.phi, out.state.reward, out.state.next_phi,
                                     out.state.next_fail)) / 2**20, 3),
         "first_call_s": round(first, 2),
         "ms_per_episode": round(1e3 * statistics.median(times) / K, 4),
         "ms_per_episode_min": round(1e3 * min(times) / K, 4),
         "cpu_ms_per_episode": round(1e3 * statistics.median(cpu) / K, 4)}
  try:
    lowered = jax.jit(lambda k: train(k, hp, params)).lower(key)
    row["run_MB"] = round(_footprint(lowered.compile()) / 2**20, 3)
  except Exception as e:  # pylint: disable=broad-except  (memory_analysis is backend-dependent)
    row["run_MB"] = f"n/a ({type(e).__name__})"
  return row


def chunk(K: int, H: int, d: int, dtype: str, runs: int = 4) -> dict:
  from drjax.sweeps import SweepConfig  # pylint: disable=g-import-not-at-top
  from drjax.sweeps import running  # pylint: disable=g-import-not-at-top
  from drjax.sweeps.config import resolve  # pylint: disable=g-import-not-at-top
  # pylint: disable-next=g-import-not-at-top
  from drjax.sweeps.grid import _layout, _settings, bytes_per_run

  rs = resolve(SweepConfig(env="put-option", env_args={"num_anchors": d - 1, "horizon": H},
                           agents=("dr-lsvi-ucb",), seeds=runs, episodes=K, chunk=runs,
                           test_episodes=100, dtype=dtype))
  cfg, env = rs.config, rs.env
  # pylint: disable=protected-access
  lay = _layout(rs)
  grids = {"dr-lsvi-ucb": _settings(rs, "dr-lsvi-ucb")}
  mesh = running._mesh(None)
  progs = running._compile(rs, lay, grids, list(range(len(lay.chunks))), mesh,
                           {"compile_s": {}}, True)
  # pylint: enable=protected-access
  compiled, C = progs[0][0], progs[0][1]
  return {"K": K, "H": H, "d": d, "chunk_runs": C,
          "chunk_MB_per_run": round(_footprint(compiled) / C / 2**20, 3),
          "estimate_MB": round(bytes_per_run(cfg, env) / 2**20, 3)}


def main(argv=None) -> int:
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--quick", action="store_true", help="three points only")
  p.add_argument("--out", default=None, help="write the rows as JSON here")
  p.add_argument("--dtype", default="float32", choices=("float32", "float64"))
  args = p.parse_args(argv)
  if args.dtype == "float64":
    jax.config.update("jax_enable_x64", True)
  base = (100, 10, 21)
  points = [base, (200, 10, 21), (400, 10, 21), (800, 10, 21), (100, 20, 21), (100, 40, 21),
            (100, 10, 41), (100, 10, 81), (100, 10, 161)]
  if args.quick:
    points = points[:3]
  rows, chunks = [], []
  for K, H, d in points:
    rows.append(one_run(K, H, d, args.dtype))
    print(json.dumps(rows[-1]), flush=True)
  for K, H, d in ([base, (400, 10, 21), (100, 10, 81), (50, 10, 321), (20, 10, 641)]
                  if not args.quick else [base]):
    chunks.append(chunk(K, H, d, args.dtype))
    print(json.dumps(chunks[-1]), flush=True)
  if args.out:
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    from drjax.bench import machine  # pylint: disable=g-import-not-at-top
    with open(args.out, "w") as f:
      json.dump({"machine": machine.machine_info(), "runs": rows, "chunks": chunks}, f, indent=1)
  return 0


if __name__ == "__main__":
  sys.exit(main())
