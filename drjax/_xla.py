"""XLA flags drjax sets before JAX starts (see README, "CPU hang and compile time").

* ``--xla_cpu_multi_thread_eigen=false``: XLA's multi-threaded Eigen pool wedged (hung forever)
  on vmapped scans of DR-LSVI-UCB on 2-core machines; single-threaded Eigen runs at the same speed.
* ``--xla_cpu_use_fusion_emitters=false`` (jaxlib < 0.11 only): halves the CPU compile time of
  drjax's training programs (e.g. 27 s -> 13 s for the linear-MDP reproduction) with no measurable
  run-time cost, and the peak memory of ``drjax reproduce all`` (jaxlib 0.10.2 with the emitters
  on: 3.8 GiB instead of 1.5 GiB). XLA removed the option (and the legacy emitters) in jaxlib 0.11.
  No flag of jaxlib 0.12's XLA replaces it: measured on 2 cores with jaxlib 0.12.0.1,
  ``--xla_cpu_opt_preset=CPU_OPT_PRESET_FAST_COMPILE``, ``--xla_cpu_use_new_xtile_lowering=false``,
  ``--xla_cpu_experimental_enable_tiling_propagation=false``,
  ``--xla_cpu_parallel_codegen_split_count=1``, ``--xla_llvm_disable_expensive_passes=true`` and
  ``--xla_cpu_use_xnnpack=false`` each left the compile time and peak memory of ``reproduce all``
  and ``reproduce r2pvi`` within run-to-run noise (the preset was 4-8 % slower), so none is set.

The flags must be in ``XLA_FLAGS`` before JAX initializes its CPU backend. ``configure()`` appends
each to whatever the user already has, unless they set that option themselves, and does nothing
(returning ``False``) once a backend exists, because then it can no longer take effect.
Set ``DRJAX_NO_XLA_FLAG=1`` to opt out.
"""

from __future__ import annotations

import os
import sys

FLAGS = ("--xla_cpu_multi_thread_eigen=false", "--xla_cpu_use_fusion_emitters=false")
# XLA aborts the process on a flag it does not know: the fusion-emitter flag is gone from the XLA
# of jaxlib 0.11 (seen on a GPU machine with jaxlib 0.11.2), so it is only added before that.
FLAG_MAX_JAXLIB = {"--xla_cpu_use_fusion_emitters": (0, 11)}


def _jaxlib_version() -> tuple[int, int] | None:
  try:
    from importlib.metadata import version  # pylint: disable=g-import-not-at-top
    major, minor = version("jaxlib").split(".")[:2]
    return int(major), int(minor)
  except Exception:  # pylint: disable=broad-except  (not installed, odd version string)
    return None


def flags_for_this_jaxlib() -> tuple[str, ...]:
  """``FLAGS`` less those the installed jaxlib's XLA no longer knows."""
  v = _jaxlib_version()
  return tuple(f for f in FLAGS
               if not (v is not None and f.split("=")[0] in FLAG_MAX_JAXLIB
                       and v >= FLAG_MAX_JAXLIB[f.split("=")[0]]))


def _backend_initialized() -> bool:
  xb = sys.modules.get("jax._src.xla_bridge")
  if xb is None:
    return False
  backends = getattr(xb, "_backends", None)
  return bool(backends)


def configure() -> bool:
  """Adds drjax's flags to ``XLA_FLAGS`` if they can still take effect; True if any was added."""
  if os.environ.get("DRJAX_NO_XLA_FLAG") or _backend_initialized():
    return False
  flags = os.environ.get("XLA_FLAGS", "")
  new = [f for f in flags_for_this_jaxlib() if f.split("=")[0] not in flags]
  if not new:
    return False
  os.environ["XLA_FLAGS"] = " ".join([flags] + new).strip()
  return True
