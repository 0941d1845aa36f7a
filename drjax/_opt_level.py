"""The XLA backend optimization level of drjax's compiled programs (``drjax reproduce``, ``drjax
sweep``): LLVM -O0 for small workloads, where compiling is the whole wait.

At the paper's sizes the programs spend ~95% of a cold run compiling (XLA CPU, LLVM -O3 by
default) and well under a second running. LLVM -O0 compiles them ~4x faster (a small linear-MDP
sweep's chunk program: 4.9 -> 1.0 CPU s) and runs them 1-5x slower; "auto" uses it (-O1 for the
buffer form's put option) when the workload is small (runs x episodes up to
``FAST_COMPILE_MAX_WORK``), where the trade is a net gain. Results agree to float rounding. The
level is a function of the workload's size alone (never of values), so every chunk, part and
resumed run of a sweep compiles the same program.
"""

from __future__ import annotations

OPT_LEVELS = ("auto", 0, 1, 2, 3)
FAST_COMPILE_MAX_WORK = 50_000


def plan_blocks_for(work: int) -> int | None:
  """``make_train``'s ``blocks`` for a buffer-form workload of ``work`` run-episodes: ``0`` (one
  plan over the whole capacity) up to ``FAST_COMPILE_MAX_WORK``, where compiling is the wait and
  every plan size of the filled-slot switch is one more copy of the plan to compile; else
  ``None`` (``make_train``'s default, the filled slots). Measured: ``drjax reproduce fig2`` cold
  (10 seeds, 6 settings, K = 100), 14.6 / 17.2 s wall with the filled slots against 11.3 / 13.1 s
  with one plan, the same numbers. A function of the size alone, as the level."""
  return 0 if work <= FAST_COMPILE_MAX_WORK else None


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


def compiler_options(level: int | None) -> dict | None:
  """``jax.jit(..., compiler_options=...)`` / ``Lowered.compile(...)`` for ``level``."""
  return None if level is None else {"xla_backend_optimization_level": int(level)}
