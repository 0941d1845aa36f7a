"""Counts of JAX traces, lowerings and backend compilations, and their seconds, from
``jax.monitoring`` events: ``with count_compiles() as stats: ...`` (the benchmarks' compile
shares, ``drjax.bench.bench`` and ``drjax.bench.offline``)."""

from __future__ import annotations

import contextlib

import jax

_TRACE_EVENT = "/jax/core/compile/jaxpr_trace_duration"
_LOWER_EVENT = "/jax/core/compile/jaxpr_to_mlir_module_duration"
_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"


class CompileStats:
  """Counts of JAX traces / lowerings / backend compilations and their seconds."""

  def __init__(self):
    self.traces = 0
    self.compiles = 0
    self.trace_s = 0.0
    self.lower_s = 0.0
    self.compile_s = 0.0

  @property
  def total_s(self) -> float:
    """Seconds spent tracing, lowering to MLIR and compiling (the whole compile cost)."""
    return self.trace_s + self.lower_s + self.compile_s

  def as_dict(self) -> dict:
    return {"traces": self.traces, "compiles": self.compiles,
            "compile_s": round(self.total_s, 3)}


_ACTIVE: list[CompileStats] = []
_LISTENING = False


def _listener(event, duration_secs, **_):
  for c in _ACTIVE:
    if event == _TRACE_EVENT:
      c.traces += 1
      c.trace_s += duration_secs
    elif event == _LOWER_EVENT:
      c.lower_s += duration_secs
    elif event == _COMPILE_EVENT:
      c.compiles += 1
      c.compile_s += duration_secs


@contextlib.contextmanager
def count_compiles():
  """Context manager yielding a ``CompileStats`` filled from ``jax.monitoring`` events."""
  global _LISTENING
  if not _LISTENING:
    jax.monitoring.register_event_duration_secs_listener(_listener)
    _LISTENING = True
  stats = CompileStats()
  _ACTIVE.append(stats)
  try:
    yield stats
  finally:
    _ACTIVE.remove(stats)
