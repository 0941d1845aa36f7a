"""The buffer form's exact TV dual at every breakpoint: three ways to get ``z_i(c_j) = sum_k
M[i, k] min(v_k, c_j)`` for all ``d`` coordinates and ``K + 2`` candidates, compiled by XLA on this
machine (issue 35 item 3: why the put option stays below 2x NumPy on a CPU):

* ``product``: what drjax runs, sort-free, one ``[d, K] x [K, K + 2]`` product
  (``duals_tv.alpha_max_atoms(..., operator=...)``), O(d K^2);
* ``argsort``: one ``jnp.argsort`` and two prefix sums (``duals_tv._exact_candidates``), O(K log K + d K);
* ``ranks``: no sort: each target's rank from K^2 comparisons, a scatter of the weights into
  ranked order, then the same prefix sums, O(K^2 + d K);

and, to split the last one, its ``ranks + scatter`` alone and its two ``cumsum``s alone.

Each is vmapped over 100 seeds (the put-option workload: d = 21) and run 50 times in one
``lax.scan``; the three full variants are first checked equal (float64, targets in [0, H]).
Medians of ``--repeats`` warm calls, in milliseconds per 50 steps of 100 seeds.

  python benchmarks/dual_orderings.py [--sizes 50 100] [--repeats 20] [--json FILE]

Writes ``--json`` (default ``benchmarks/results/<machine>-dual-orderings.json``) with the machine,
the versions and the git revision.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

from drjax import _io, duals_tv
from drjax.bench import machine

D, SEEDS, STEPS, H = 21, 100, 50, 20.0


def product(M, v, h):
  c = jnp.concatenate([jnp.zeros(1, v.dtype), jnp.clip(v, 0, h), h[None]])
  return c, M @ jnp.minimum(v[:, None], c[None, :])


def argsort(M, v, h):
  return duals_tv._exact_candidates(M, v, h)  # pylint: disable=protected-access


def _ranked(M, v):
  k = v.shape[0]
  idx = jnp.arange(k)
  before = (v[None, :] < v[:, None]) | ((v[None, :] == v[:, None]) & (idx[None, :] < idx[:, None]))
  r = jnp.sum(before, axis=1)  # the rank of each target (ties by index)
  vs = jnp.zeros_like(v).at[r].set(v, unique_indices=True)
  ms = jnp.zeros_like(M).at[:, r].set(M, unique_indices=True)
  return vs, ms


def ranks(M, v, h):
  """For targets in [0, H] (the check's and the workload's): candidates [0, v sorted, H]."""
  k = v.shape[0]
  vs, ms = _ranked(M, v)
  zero = jnp.zeros((M.shape[0], 1), M.dtype)
  cm = jnp.concatenate([zero, jnp.cumsum(ms, axis=1)], axis=1)
  cmv = jnp.concatenate([zero, jnp.cumsum(ms * vs[None, :], axis=1)], axis=1)
  c = jnp.concatenate([jnp.zeros(1, v.dtype), vs, h[None]])
  z = jnp.concatenate([cmv[:, :1], cmv[:, 1:] + vs[None, :] * (cm[:, k:] - cm[:, 1:]),
                       cmv[:, k:]], axis=1)
  return c, z


def ranks_and_scatter_only(M, v, h):
  del h
  return v, _ranked(M, v)[1]


def cumsums_only(M, v, h):
  del h
  return v, jnp.cumsum(M, axis=1) + jnp.cumsum(M * v[None, :], axis=1)


VARIANTS = (product, argsort, ranks, ranks_and_scatter_only, cumsums_only)


def _check(k):
  km, kv = jax.random.split(jax.random.PRNGKey(1))
  M = jax.random.normal(km, (D, k), jnp.float64)
  v = jnp.round(jax.random.uniform(kv, (k,), jnp.float64, 0, H))  # ties included
  h = jnp.asarray(H, jnp.float64)
  for rho in (0.0, 0.05, 0.3, 1.0):
    best = [np.asarray(jnp.max(z - rho * c[None, :], axis=1)) for c, z in
            (f(M, v, h) for f in (product, argsort, ranks))]
    np.testing.assert_allclose(best[1], best[0], rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(best[2], best[0], rtol=1e-12, atol=1e-9)


def _time(f, k, repeats):
  km, kv = jax.random.split(jax.random.PRNGKey(0))
  M = jax.random.normal(km, (SEEDS, D, k), jnp.float32)
  v = jax.random.uniform(kv, (SEEDS, k), jnp.float32, 0, H)
  h = jnp.asarray(H, jnp.float32)

  @jax.jit
  def run(M, v):
    def body(acc, i):
      z = jax.vmap(lambda m, x: f(m + i * 1e-3, x, h)[1])(M, v)
      return acc + jnp.sum(jnp.max(z, axis=-1)), None
    return jax.lax.scan(body, jnp.float32(0), jnp.arange(STEPS, dtype=jnp.float32))[0]

  run(M, v).block_until_ready()
  ts = []
  for _ in range(repeats):
    t = time.perf_counter()
    run(M, v).block_until_ready()
    ts.append(time.perf_counter() - t)
  return statistics.median(ts) * 1e3


def main():
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  p.add_argument("--sizes", type=int, nargs="+", default=[50, 100])
  p.add_argument("--repeats", type=int, default=20)
  p.add_argument("--json", default=None)
  a = p.parse_args()
  if a.repeats < 1 or any(k < 2 for k in a.sizes):
    p.error("--repeats must be >= 1 and every --sizes value >= 2")
  path = a.json or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                f"{machine.short_machine_name()}-dual-orderings.json")
  jax.config.update("jax_enable_x64", True)
  out = {}
  for k in a.sizes:
    _check(k)
    out[k] = {f.__name__: round(_time(f, k, a.repeats), 2) for f in VARIANTS}
    print(f"K = {k}: " + ", ".join(f"{n} {t} ms" for n, t in out[k].items()), flush=True)
  res = {"what": "ms per 50 steps of 100 seeds (d = 21), medians of warm calls",
         "ms": out, "repeats": a.repeats, "machine": machine.machine_info(),
         "load_average_1min": os.getloadavg()[0], **machine.source_info(),
         "created": time.strftime("%Y-%m-%d %H:%M:%S %z")}
  _io.atomic_write(path, json.dumps(res, indent=1))
  print(f"wrote {path}")


if __name__ == "__main__":
  main()
