"""pytest plugin of ``drjax.bench.suite_time``: what JAX did in this pytest process.

Loaded with ``-p drjax.bench._suite_events``; does nothing unless ``DRJAX_SUITE_EVENTS_DIR`` is
set. Counts ``jax.monitoring``'s compile events (XLA's compilations and seconds, tracing and
lowering seconds) and writes them, when the session ends, to ``<dir>/<worker>.json``.
"""

from __future__ import annotations

import collections
import json
import os

EVENTS = {"/jax/core/compile/backend_compile_duration": "xla",
          "/jax/core/compile/jaxpr_trace_duration": "trace",
          "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower"}
_totals: collections.Counter = collections.Counter()


def _listen(event: str, secs: float, **kwargs) -> None:
  del kwargs
  kind = EVENTS.get(event)
  if kind is not None:
    _totals[f"{kind}_s"] += secs
    _totals[f"{kind}_count"] += 1


def pytest_configure(config):
  del config
  if os.environ.get("DRJAX_SUITE_EVENTS_DIR"):
    import jax  # pylint: disable=g-import-not-at-top
    jax.monitoring.register_event_duration_secs_listener(_listen)


def pytest_sessionfinish(session):
  del session
  out = os.environ.get("DRJAX_SUITE_EVENTS_DIR")
  if not out:
    return
  worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
  with open(os.path.join(out, f"{worker}.json"), "w") as f:
    json.dump(dict(_totals), f)
