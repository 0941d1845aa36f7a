"""Compile options of the paper's programs (the XLA backend optimization level)."""

from __future__ import annotations

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
