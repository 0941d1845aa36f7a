"""drjax reproduce runs at most max_jobs() experiment families at once (DRJAX_REPRODUCE_JOBS)."""

import threading
import time

import pytest

from drjax.paper import reproduce as rep


def _peak_concurrency(n_jobs, monkeypatch, limit):
  monkeypatch.setenv("DRJAX_REPRODUCE_JOBS", str(limit))
  lock, state = threading.Lock(), {"now": 0, "peak": 0}

  def work():
    with lock:
      state["now"] += 1
      state["peak"] = max(state["peak"], state["now"])
    time.sleep(0.05)
    with lock:
      state["now"] -= 1
    return 1

  jobs = [rep._Job(work) for _ in range(n_jobs)]  # pylint: disable=protected-access
  assert sum(j.result() for j in jobs) == n_jobs
  return state["peak"]


def test_limit_is_respected(monkeypatch):
  assert _peak_concurrency(4, monkeypatch, 1) == 1
  assert _peak_concurrency(4, monkeypatch, 2) <= 2
  assert _peak_concurrency(4, monkeypatch, 4) >= 2  # without a limit they do overlap


def test_bad_setting_is_refused(monkeypatch):
  for bad in ("0", "-1", "two"):
    monkeypatch.setenv("DRJAX_REPRODUCE_JOBS", bad)
    with pytest.raises(ValueError, match="DRJAX_REPRODUCE_JOBS"):
      rep.max_jobs()
