"""Compile options of the paper's programs (the XLA backend optimization level)."""

from __future__ import annotations

import threading

import jax
import jax.numpy as jnp


# Compilation. At the paper's sizes these programs spend ~95% of a cold run compiling (XLA CPU,
# LLVM -O3 by default) and well under a second running. LLVM -O0 compiles them ~4x faster and runs
# them 1-5x slower; "auto" uses it (-O1 for the put option) when the workload is small (seeds x
# episodes x runs up to FAST_COMPILE_MAX_WORK), where the trade is a net gain. Results agree to
# float rounding.
OPT_LEVELS = ("auto", 0, 1, 2, 3)
FAST_COMPILE_MAX_WORK = 50_000


def opt_level_for(opt_level, work: int, small: int = 0) -> int | None:
  """The XLA backend optimization level to compile with (``None``: XLA's default).

  ``"auto"``: ``small`` for workloads up to ``FAST_COMPILE_MAX_WORK``, else XLA's default. The
  put-option program passes ``small=1``: at -O0 its unvectorized elementwise code ran 8.4 s
  against 3.0 s of compile saved (-O1: 7.3 s compile, ~2 s run; measured on 2 cores).
  """
  if isinstance(opt_level, bool) or opt_level not in OPT_LEVELS:
    raise ValueError(f"opt_level must be one of {OPT_LEVELS}, got {opt_level!r}")
  if opt_level == "auto":
    return small if work <= FAST_COMPILE_MAX_WORK else None
  return int(opt_level)


def _level_name(level) -> str:
  return "XLA default" if level is None else f"O{int(level)}"


def compiler_options(level: int | None) -> dict | None:
  return None if level is None else {"xla_backend_optimization_level": int(level)}


def _stack(trees):
  return jax.tree_util.tree_map(lambda *x: jnp.stack(x), *trees)


# `drjax reproduce` computes its families in threads (at most as many as there are cores).
# Tracing and lowering hold the GIL, XLA's compilation does not: families that trace at the same
# time take turns on one core, then compile together. With this lock one family traces while the
# others compile or run, so both cores stay busy: `reproduce all` cold 16.5-16.7 -> 15.6-16.4 s in
# three interleaved pairs on amd-epyc-2c (jax 0.10.2; with six families at once instead of two,
# 16.0-18.3 s).
TRACE_LOCK = threading.Lock()


def call(program, *args, **kwargs):
  """``program(*args, **kwargs)`` (a ``jax.jit`` function), traced and lowered under
  ``TRACE_LOCK``: ``program.lower`` fills the caches that the call then uses (measured: the call
  after it only compiles), so the call compiles and runs outside the lock."""
  with TRACE_LOCK:
    program.lower(*args, **kwargs)
  return program(*args, **kwargs)
