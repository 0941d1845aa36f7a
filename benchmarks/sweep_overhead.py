"""What a warm ``drjax.sweep`` call costs beyond its compiled program (issue 35 item 2: under 1 ms).

The engine table's smallest workload (the linear MDP, DR-LSVI-UCB, 20 seeds x 100 episodes,
float32): ``drjax.sweep(...)`` (the entry point a user calls: every host check, the program's
lookup, the call) against the same compiled program called directly (``fn(key, hparams,
params)``, ``fn`` looked up once). Both block until the returns are ready. The calls alternate
(sweep, direct, sweep, ...) so that both see the same machine; the overhead is the median of the
paired differences, in wall seconds (``perf_counter``) and in this thread's CPU seconds
(``thread_time``, which leaves out XLA's own threads). A third timing, the host side alone: the
sweep with its compiled program replaced by a function that returns at once (everything the entry
point does before the program runs).

  python benchmarks/sweep_overhead.py [--pairs 300] [--json FILE]

Writes ``--json`` (default ``benchmarks/results/<machine>-sweep-overhead.json``) with the machine,
the versions and the git revision.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from unittest import mock

import jax
import numpy as np

import drjax
from drjax import _io, train
from drjax.bench import machine
from drjax.envs.linear_mdp import LinearMDP

SEEDS, EPISODES = 20, 100


def _setup():
  env = LinearMDP()
  params = env.make_params(delta=0.3, p=0.001, xi_norm=0.1)
  rho = drjax.rho_array(3, 4, 0.5, at=[(0, 3)])
  agent = drjax.dr_lsvi_ucb(env.horizon, env.feature_dim, env.num_actions, EPISODES)
  hp = drjax.make_hparams(env.horizon, env.feature_dim, rho=rho, beta=1.0, lam=0.1)
  key = jax.random.PRNGKey(0)
  outputs = ("returns",)

  def via_sweep():
    return drjax.sweep(env, params, agent, key, num_seeds=SEEDS, num_episodes=EPISODES,
                       hparams=hp, outputs=outputs)

  fn = train._compiled_sweep(env, agent, EPISODES, False, False, train.resolve_form(env, "auto"),
                             outputs, SEEDS, ())

  def direct():
    return fn(key, hp, params)

  return via_sweep, direct


def _timed(f):
  w, c = time.perf_counter(), time.thread_time()
  jax.block_until_ready(f())
  return time.perf_counter() - w, time.thread_time() - c


def measure(pairs: int) -> dict:
  via_sweep, direct = _setup()
  a, b = np.asarray(via_sweep().returns), np.asarray(direct().returns)
  if not np.array_equal(a, b):
    raise AssertionError("drjax.sweep and its compiled program returned different returns")
  for _ in range(20):  # warm both
    _timed(via_sweep), _timed(direct)
  rows = [(_timed(via_sweep), _timed(direct)) for _ in range(pairs)]
  sweep_w = [s[0] for s, _ in rows]
  direct_w = [d[0] for _, d in rows]
  diff_w = [s[0] - d[0] for s, d in rows]
  diff_c = [s[1] - d[1] for s, d in rows]
  done = jax.block_until_ready(direct())
  with mock.patch.object(train, "_compiled_sweep", lambda *a, **k: lambda *x: done):
    host = [_timed(via_sweep) for _ in range(pairs)]
  med = statistics.median
  return {"sweep_wall_s": med(sweep_w), "direct_wall_s": med(direct_w),
          "overhead_wall_s": med(diff_w), "overhead_thread_cpu_s": med(diff_c),
          "host_only_wall_s": med(h[0] for h in host),
          "host_only_thread_cpu_s": med(h[1] for h in host),
          "overhead_wall_s_quartiles": [float(q) for q in np.percentile(diff_w, [25, 75])]}


def main(argv=None):
  p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
  p.add_argument("--pairs", type=int, default=300)
  p.add_argument("--json", default=None)
  a = p.parse_args(argv)
  if a.pairs < 10:
    p.error(f"--pairs must be >= 10, got {a.pairs}")
  path = a.json or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                f"{machine.short_machine_name()}-sweep-overhead.json")
  load_start = os.getloadavg()[0]
  res = {"what": f"warm drjax.sweep beyond its compiled program, linear MDP, DR-LSVI-UCB, "
                 f"{SEEDS} seeds x {EPISODES} episodes, float32; medians of {a.pairs} pairs",
         **measure(a.pairs), "pairs": a.pairs, "machine": machine.machine_info(),
         "load_average_1min": [load_start, os.getloadavg()[0]], **machine.source_info(),
         "created": time.strftime("%Y-%m-%d %H:%M:%S +0000", time.gmtime())}
  for k, v in res.items():
    if k.endswith("_s"):
      print(f"{k}: {v * 1e3:.3f} ms")
  _io.atomic_write(path, json.dumps(res, indent=1))
  print(path)


if __name__ == "__main__":
  main()
