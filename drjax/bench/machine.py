"""The machine a timing ran on: CPU model, cores, memory, versions, backend and XLA settings
(recorded beside every benchmark result and printed on timing figures)."""

import os
import platform
import re

import jax
import jax.numpy as jnp
import numpy as np


def _cpu_model() -> str:
  try:
    with open("/proc/cpuinfo") as f:
      for line in f:
        if line.lower().startswith("model name"):
          return line.split(":", 1)[1].strip()
  except OSError:
    pass
  return platform.processor() or platform.machine()


def _num_cores() -> int:
  try:
    return len(os.sched_getaffinity(0))
  except AttributeError:  # not Linux
    return os.cpu_count() or 1


def short_machine_name() -> str:
  """A file-name friendly machine label, e.g. ``amd-epyc-2c`` (CPU model and core count)."""
  slug = re.sub(r"\(.*?\)|cpu|processor|@.*$|\d+-core", "", _cpu_model(), flags=re.I)
  slug = re.sub(r"[^a-z0-9]+", "-", slug.lower()).strip("-") or "cpu"
  return f"{slug}-{_num_cores()}c"


def machine_info() -> dict:
  """CPU, cores, memory, versions and the XLA/JAX settings the timings ran under."""
  import jaxlib  # pylint: disable=g-import-not-at-top

  mem_gib = None
  try:
    with open("/proc/meminfo") as f:
      for line in f:
        if line.startswith("MemTotal:"):
          mem_gib = round(int(line.split()[1]) / 2**20, 1)
  except OSError:
    pass
  devices = jax.devices()
  return {
      "name": short_machine_name() if jax.default_backend() == "cpu" else
              f"{devices[0].device_kind.lower().replace(' ', '-')}-x{len(devices)}",
      "cpu_model": _cpu_model(),
      "cores": _num_cores(),
      "cpu_count": os.cpu_count(),
      "memory_gib": mem_gib,
      "platform": platform.platform(),
      "python": platform.python_version(),
      "jax": jax.__version__,
      "jaxlib": jaxlib.__version__,
      "numpy": np.__version__,
      "backend": jax.default_backend(),
      "devices": [str(d) for d in devices],
      "device_kind": devices[0].device_kind,
      "XLA_FLAGS": os.environ.get("XLA_FLAGS", ""),
      "jax_enable_x64": bool(jax.config.jax_enable_x64),
      "default_float": str(jnp.result_type(float)),
  }


def source_info() -> dict:
  """The code a benchmark ran: ``{"source_commit", "source_changes"}`` when drjax is imported from
  a git checkout (the commit, and the package or benchmark files that differ from it, with
  ``git status --porcelain``'s two-letter codes), else ``{}`` (an installed wheel)."""
  from drjax import _git  # pylint: disable=g-import-not-at-top
  st = _git.state("drjax", "benchmarks/*.py")
  return {} if st is None else {"source_commit": st[0], "source_changes": st[1]}
