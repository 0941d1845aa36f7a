"""Work around XLA's multi-threaded Eigen pool wedging on vmapped scans (see README, "CPU hang").

The flag must be in ``XLA_FLAGS`` before JAX initializes its CPU backend. ``configure()`` appends it
to whatever the user already has, unless they set ``--xla_cpu_multi_thread_eigen`` themselves, and
does nothing (returning ``False``) once a backend exists, because then it can no longer take effect.
Set ``DRJAX_NO_XLA_FLAG=1`` to opt out.
"""

from __future__ import annotations

import os
import sys

FLAG = "--xla_cpu_multi_thread_eigen=false"


def _backend_initialized() -> bool:
  xb = sys.modules.get("jax._src.xla_bridge")
  if xb is None:
    return False
  backends = getattr(xb, "_backends", None)
  return bool(backends)


def configure() -> bool:
  """Adds the single-threaded-Eigen flag to ``XLA_FLAGS`` if it can still take effect."""
  if os.environ.get("DRJAX_NO_XLA_FLAG"):
    return False
  flags = os.environ.get("XLA_FLAGS", "")
  if "xla_cpu_multi_thread_eigen" in flags:
    return False
  if _backend_initialized():
    return False
  os.environ["XLA_FLAGS"] = (flags + " " + FLAG).strip()
  return True
