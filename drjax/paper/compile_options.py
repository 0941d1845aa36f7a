"""Compile options of the paper's programs (the XLA backend optimization level)."""

from __future__ import annotations

import jax
import jax.numpy as jnp


# Compilation: LLVM -O0 for small workloads (drjax._opt_level, shared with drjax sweep).
from drjax._opt_level import (  # noqa: E402,F401
    FAST_COMPILE_MAX_WORK, OPT_LEVELS, compiler_options, opt_level_for)


def _level_name(level) -> str:
  return "XLA default" if level is None else f"O{int(level)}"


def _stack(trees):
  return jax.tree_util.tree_map(lambda *x: jnp.stack(x), *trees)
