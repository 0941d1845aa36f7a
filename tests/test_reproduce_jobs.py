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


def test_figures_drawn_in_a_worker_process_equal_those_drawn_here(tmp_path):
  """The committed fig2 and r2pvi panels drawn by the worker process and in this process: the
  same panel files and the same PNG bytes."""
  import glob  # pylint: disable=g-import-not-at-top
  import json  # pylint: disable=g-import-not-at-top
  import os  # pylint: disable=g-import-not-at-top
  from drjax.paper import r2pvi  # pylint: disable=g-import-not-at-top

  root = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs",
                      "figures-run", "paper")

  def panels(name):
    return {os.path.splitext(os.path.basename(f))[0]: json.load(open(f))
            for f in sorted(glob.glob(os.path.join(root, name, "*.json")))}

  got = {}
  for workers in (1, 0):
    out = str(tmp_path / f"w{workers}")
    figures = rep._Figures(out, True, 0.0, {}, workers=workers)  # pylint: disable=protected-access
    assert (figures._pool is not None) == (workers == 1)  # pylint: disable=protected-access
    try:
      figures.write("fig2", panels("fig2"), family="put-option")
      figures.write("r2pvi", panels("r2pvi"), plot=r2pvi.plot, family="r2pvi")
      figures.wait()
    finally:
      figures.close()
    files = {}
    for f in sorted(glob.glob(os.path.join(out, "*", "*"))):
      if f.endswith((".json", ".png")):
        files[os.path.relpath(f, out)] = open(f, "rb").read()
    got[workers] = files
  assert len(got[0]) >= 4 and set(got[1]) == set(got[0])
  for k in got[0]:
    assert got[1][k] == got[0][k], k


def test_the_worker_is_used_for_two_families_or_more(monkeypatch):
  monkeypatch.delenv("DRJAX_FIGURE_WORKERS", raising=False)
  assert rep._figure_workers(1) == 0 and rep._figure_workers(2) == 1  # pylint: disable=protected-access
  monkeypatch.setenv("DRJAX_FIGURE_WORKERS", "3")
  assert rep._figure_workers(1) == 3  # pylint: disable=protected-access
