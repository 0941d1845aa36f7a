"""Timing and machine-load accounting shared by the benchmarks of ``drjax bench``.

The machines this runs on are shared, so every benchmark (decorated with ``_benchmark``) records
the load average and the cores other processes kept busy (``/proc/stat``, sampled while the
benchmark sleeps) at its start and end, and the average number of cores other processes kept busy
*during* it (all busy CPU time minus this process's own, ``OthersMeter``). ``_timed`` / ``_repeat``
time a call (warm timings: the minimum over repeats, with the median).
"""

from __future__ import annotations

import contextlib
import functools
import os
import resource
import statistics
import time

import jax

from drjax.bench.machine import _num_cores

LOAD_SAMPLE_S = 0.5  # seconds of /proc/stat sampling for ``cores_busy`` at a benchmark's ends


def _cpu_times() -> tuple[float, float] | None:
  try:
    with open("/proc/stat") as f:
      vals = [float(x) for x in f.readline().split()[1:]]
  except (OSError, ValueError):
    return None
  idle = vals[3] + (vals[4] if len(vals) > 4 else 0.0)  # idle + iowait
  return sum(vals), idle


def cores_busy(interval: float = 0.5) -> float | None:
  """Cores kept busy by all processes over ``interval`` seconds (/proc/stat); ``None`` if unknown.

  Sampled while the benchmark itself sleeps, so it measures the *other* processes' load.
  """
  a = _cpu_times()
  time.sleep(interval)
  b = _cpu_times()
  if a is None or b is None or b[0] <= a[0]:
    return None
  busy = 1.0 - (b[1] - a[1]) / (b[0] - a[0])
  return round(max(0.0, busy) * _num_cores(), 3)


def _busy_cpu_s() -> float | None:
  """CPU seconds all processes have spent busy since boot (/proc/stat); ``None`` if unknown."""
  t = _cpu_times()
  if t is None:
    return None
  return (t[0] - t[1]) / os.sysconf("SC_CLK_TCK")


def _own_cpu_s() -> float:
  """CPU seconds of this process and its waited-for children (user + system)."""
  me = resource.getrusage(resource.RUSAGE_SELF)
  kids = resource.getrusage(resource.RUSAGE_CHILDREN)
  return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


class OthersMeter:
  """Average number of cores that *other* processes kept busy between ``start()`` and ``stop()``.

  All busy CPU time of the machine (/proc/stat) minus this process's own (getrusage), divided by
  the wall time: interference during a measurement, not just at its ends.
  """

  def __init__(self):
    self._t0 = time.perf_counter()
    self._busy0 = _busy_cpu_s()
    self._own0 = _own_cpu_s()

  def stop(self) -> float | None:
    wall = time.perf_counter() - self._t0
    busy = _busy_cpu_s()
    if busy is None or self._busy0 is None or wall <= 0:
      return None
    others = (busy - self._busy0) - (_own_cpu_s() - self._own0)
    return round(max(0.0, others / wall), 3)


def _load() -> dict:
  try:
    la = [round(x, 2) for x in os.getloadavg()]
  except OSError:
    la = None
  return {"loadavg": la, "cores_busy": cores_busy(LOAD_SAMPLE_S)}


def wait_for_quiet(max_busy: float = 0.5, max_wait_s: float = 60.0, poll_s: float = 2.0) -> float:
  """Waits (at most ``max_wait_s``) until other processes keep fewer than ``max_busy`` cores busy.

  Returns the seconds waited.
  """
  t0 = time.perf_counter()
  while time.perf_counter() - t0 < max_wait_s:
    busy = cores_busy(min(poll_s, 1.0))
    if busy is None or busy < max_busy:
      break
    time.sleep(max(0.0, poll_s - 1.0))
  return round(time.perf_counter() - t0, 1)


@contextlib.contextmanager
def no_persistent_cache():
  """Disables JAX's persistent compilation cache (cold compiles are what is measured)."""
  old = jax.config.jax_enable_compilation_cache
  jax.config.update("jax_enable_compilation_cache", False)
  try:
    yield
  finally:
    jax.config.update("jax_enable_compilation_cache", old)


def _benchmark(fn):
  """Records wall time and the machine load at the start and end of a benchmark."""

  @functools.wraps(fn)
  def wrapper(*args, **kwargs):
    start = _load()
    t0 = time.perf_counter()
    meter = OthersMeter()
    with no_persistent_cache():
      out = fn(*args, **kwargs)
    out["others_cores_busy"] = meter.stop()
    out["wall_s"] = round(time.perf_counter() - t0, 3)
    out["load_start"] = start
    out["load_end"] = _load()
    return out

  return wrapper


def _block(x):
  return jax.block_until_ready(x)


def _timed(fn, *args):
  t0 = time.perf_counter()
  out = _block(fn(*args))
  return time.perf_counter() - t0, out


def _repeat(fn, args_list, min_reps=3, max_reps=50, min_time_s=0.3):
  """Warm timings of ``fn(*args)`` cycling through ``args_list``; (min, median, n) seconds."""
  times = []
  while len(times) < min_reps or (sum(times) < min_time_s and len(times) < max_reps):
    dt, _ = _timed(fn, *args_list[len(times) % len(args_list)])
    times.append(dt)
  return min(times), statistics.median(times), len(times)


def _r(x, nd=6):
  return None if x is None else float(round(float(x), nd))


def _ratio(a, b, nd=6):
  """``a / b`` rounded, ``None`` when ``b`` is not positive."""
  return _r(a / b, nd) if b > 0 else None
