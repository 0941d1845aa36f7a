"""The buffer form planning over its filled slots (``make_train(..., blocks=B)``, issue 35 item 3)
against the whole-capacity plan (``blocks=0``) and the strongest NumPy, in one process:

* put option, DR-LSVI-UCB (``drjax bench``'s engine workload: 100 seeds x 100 episodes, rho 0.3,
  beta 1, lambda 0.1) against ``drjax.bench.numpy_ref.put_option``;
* CartPole, the shift study's configuration (``benchmarks/shifts_speed.py``: H 30, d 32, regressed
  reward, 64 seeds x 150 episodes) against that script's NumPy trainer.

drjax is called through ``drjax.sweep`` with ``drjax.train.PLAN_BLOCK`` set to each block size in
turn (a fresh compilation each, no persistent cache: ``DRJAX_NO_CACHE=1``). Compile time: the first
call minus the median warm call. Warm calls are interleaved (every variant, then NumPy, per
repeat); both wall and process CPU seconds are recorded (the machine is shared: the CPU seconds
are the steadier figure), medians of ``--repeats``.

  python benchmarks/filled_slots.py [--only put cartpole] [--blocks 0 16 32] [--repeats 5] [--merge]

Writes ``benchmarks/results/<machine>-filled-slots.json`` (configuration, machine, versions, git
revision).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import sys
import time

os.environ.setdefault("DRJAX_NO_CACHE", "1")  # every variant compiles from scratch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import drjax  # noqa: E402,F401  (drjax's XLA flags before JAX starts)
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from drjax import _io, train  # noqa: E402
from drjax.bench import machine  # noqa: E402
from drjax.bench import numpy_ref_kernels as nk  # noqa: E402


def _clock():
  return time.perf_counter(), time.process_time()


def _since(t):
  w, c = _clock()
  return w - t[0], c - t[1]


def put_workload(seeds, episodes):
  from drjax.bench import engine, numpy_ref  # pylint: disable=g-import-not-at-top

  def drjax_run(seed):
    run, _, _ = engine.drjax_runner("put", seeds, episodes, {})
    return lambda: run(jax.random.PRNGKey(seed))

  def numpy_run(seed):
    return numpy_ref.put_option(seeds, episodes, seed=seed)

  config = {"env": "put-option", "agent": "dr-lsvi-ucb", "seeds": seeds, "episodes": episodes,
            "rho": 0.3, "beta": 1.0, "lam": 0.1, "numpy": "drjax.bench.numpy_ref.put_option"}
  return drjax_run, numpy_run, config


def cartpole_workload(seeds, episodes):
  import shifts_speed as ss  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from drjax.agents import base, registry  # pylint: disable=g-import-not-at-top
  env = ss.make_env()
  params = env.default_params()
  d = env.feature_dim

  def drjax_run(seed):
    agent = registry.make("dr-lsvi-ucb", env, capacity=episodes, reward="regressed")
    hp = base.HParams(rho=jnp.full((ss.H, d), ss.RHO, jnp.float32), beta=jnp.float32(ss.BETA),
                      lam=jnp.float32(ss.LAM))
    return lambda: np.asarray(train.sweep(env, params, agent, jax.random.PRNGKey(seed),
                                          num_seeds=seeds, num_episodes=episodes, hparams=hp,
                                          outputs=("returns",)).returns)

  def numpy_run(seed):
    return ss.numpy_train(seeds, episodes, env, seed=seed)

  config = {"env": "cartpole", "env_args": {k: list(v) if isinstance(v, tuple) else v
                                            for k, v in ss.ENV_ARGS.items()},
            "agent": "dr-lsvi-ucb", "reward": "regressed", "H": ss.H, "d": d, "seeds": seeds,
            "episodes": episodes, "rho": ss.RHO, "beta": ss.BETA, "lam": ss.LAM,
            "numpy": "benchmarks/shifts_speed.py numpy_train"}
  return drjax_run, numpy_run, config


WORKLOADS = {"put": (put_workload, 100, 100), "cartpole": (cartpole_workload, 64, 150)}


def measure(name, blocks, repeats, log=print):
  make, seeds, episodes = WORKLOADS[name]
  drjax_run, numpy_run, config = make(seeds, episodes)
  runs, cold, first = {}, {}, {}
  saved = (train.PLAN_BLOCK, train._compiled_sweep)  # pylint: disable=protected-access
  # One compiled-program cache per block size (drjax.sweep looks its program up by the sweep's
  # arguments, which do not name the block size).
  inner = train._compiled_sweep.__wrapped__  # pylint: disable=protected-access
  caches = {b: functools.lru_cache(maxsize=None)(inner) for b in blocks}

  def use(b):
    train.PLAN_BLOCK = b
    train._compiled_sweep = caches[b]  # pylint: disable=protected-access

  for b in blocks:
    use(b)
    fn = drjax_run(0)
    t = _clock()
    first[b] = np.asarray(fn())
    cold[b] = _since(t)
    runs[b] = drjax_run(1)
    log(f"[filled-slots] {name}: blocks {b} first call {cold[b][0]:.1f} s wall, "
        f"{cold[b][1]:.1f} s CPU")
  ref = first[blocks[0]]
  identical = {b: bool(np.array_equal(ref, r)) for b, r in first.items()}
  times = {str(b): {"wall": [], "cpu": []} for b in blocks}
  times["numpy"] = {"wall": [], "cpu": []}
  np_out = None
  with nk.blas_threads(1):
    for _ in range(repeats):
      for b in blocks:
        use(b)
        runs[b]()  # right after the others' runs, caches are cold: warm up, then time
        t = _clock()
        runs[b]()
        w, c = _since(t)
        times[str(b)]["wall"].append(w)
        times[str(b)]["cpu"].append(c)
      t = _clock()
      np_out = numpy_run(100)
      w, c = _since(t)
      times["numpy"]["wall"].append(w)
      times["numpy"]["cpu"].append(c)
  train.PLAN_BLOCK, train._compiled_sweep = saved  # pylint: disable=protected-access
  med = {k: {m: statistics.median(v[m]) for m in v} for k, v in times.items()}
  res = {"config": {**config, "blocks": list(blocks), "repeats": repeats,
                    "entry_point": "drjax.sweep"},
         "seconds": times, "median_s": med,
         "compile_s": {str(b): {"wall": cold[b][0] - med[str(b)]["wall"],
                                "cpu": cold[b][1] - med[str(b)]["cpu"]} for b in blocks},
         "first_call_s": {str(b): {"wall": cold[b][0], "cpu": cold[b][1]} for b in blocks},
         "numpy_over_drjax": {str(b): {m: med["numpy"][m] / med[str(b)][m] for m in ("wall", "cpu")}
                              for b in blocks},
         "over_whole_capacity": {str(b): {m: med[str(blocks[0])][m] / med[str(b)][m]
                                          for m in ("wall", "cpu")} for b in blocks},
         "returns_identical_to_first_blocks": identical,
         "load_average_1min": os.getloadavg()[0], **machine.source_info(),
         "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
         "mean_return": {"drjax": float(np.mean(ref)), "numpy": float(np.mean(np_out))}}
  short = {k: res[k] for k in ("numpy_over_drjax", "compile_s")}
  log(f"[filled-slots] {name}: {json.dumps(short)}")
  return res


def main(argv=None) -> dict:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--only", nargs="+", default=list(WORKLOADS), choices=list(WORKLOADS))
  ap.add_argument("--blocks", nargs="+", type=int, default=[0, 16, 32],
                  help="block sizes; the first is the reference (0: the whole capacity)")
  ap.add_argument("--repeats", type=int, default=5)
  ap.add_argument("--out", default=None)
  ap.add_argument("--merge", action="store_true",
                  help="keep the other workloads' results already in the output file")
  a = ap.parse_args(argv)
  path = a.out or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                               f"{machine.short_machine_name()}-filled-slots.json")
  workloads = {}
  if a.merge and os.path.exists(path):  # keep the other workloads' results
    with open(path, encoding="utf-8") as f:
      workloads = json.load(f)["workloads"]
  workloads.update({n: measure(n, a.blocks, a.repeats) for n in a.only})
  res = {"workloads": workloads, "machine": machine.machine_info(), "jax": jax.__version__,
         "numpy": np.__version__, "device": str(jax.devices()[0]), **machine.source_info(),
         "created": time.strftime("%Y-%m-%d %H:%M:%S +0000", time.gmtime())}
  _io.atomic_write(path, json.dumps(res, indent=1))
  print(f"wrote {path}")
  return res


if __name__ == "__main__":
  main()
