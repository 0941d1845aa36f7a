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


def test_bad_figure_workers_setting_is_refused_before_anything_runs(monkeypatch, tmp_path):
  for bad in ("-1", "one"):
    monkeypatch.setenv("DRJAX_FIGURE_WORKERS", bad)
    with pytest.raises(ValueError, match="DRJAX_FIGURE_WORKERS"):
      rep.reproduce(["fig1", "fig2"], out=str(tmp_path / "o"), seeds=1, episodes=1, quiet=True)
  assert not (tmp_path / "o" / "fig1").exists() and not (tmp_path / "o" / "fig2").exists()


def test_figures_drawn_in_a_worker_process_equal_those_drawn_here(monkeypatch, tmp_path):
  """Two families: with the worker process (the default for two or more) and without, the same
  panel files and the same PNG bytes; the worker really is another process."""
  import glob  # pylint: disable=g-import-not-at-top
  import json  # pylint: disable=g-import-not-at-top
  import os  # pylint: disable=g-import-not-at-top

  pids = {}
  real = rep.outputs.write_figure

  def spy(out, name, panels, plot=None):
    pids[name] = os.getpid()
    return real(out, name, panels, plot=plot)

  got = {}
  for workers in ("1", "0"):
    monkeypatch.setenv("DRJAX_FIGURE_WORKERS", workers)
    monkeypatch.setattr(rep.outputs, "write_figure", spy)
    pids.clear()
    out = tmp_path / f"w{workers}"
    rep.reproduce(["fig1", "fig2"], out=str(out), seeds=2, episodes=3, quiet=True)
    assert (workers == "1") == ("fig1" not in pids)  # the spy only sees this process's writes
    files = {}
    for f in sorted(glob.glob(str(out / "fig*" / "*"))):
      rel = os.path.relpath(f, out)
      if f.endswith(".json"):
        panel = json.load(open(f))
        panel["config"].pop("run")
        files[rel] = panel
      elif f.endswith(".png"):
        files[rel] = open(f, "rb").read()
    got[workers] = files
  assert set(got["1"]) == set(got["0"]) and any(k.endswith(".png") for k in got["1"])
  for k in got["0"]:
    assert got["1"][k] == got["0"][k], k
