"""drjax reproduce runs at most max_jobs() experiment families at once (DRJAX_REPRODUCE_JOBS)."""

import threading
import time

import numpy as np
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
  from drjax import _io  # pylint: disable=g-import-not-at-top
  for workers in (1, 0):  # a figure directory gets the mode of os.mkdir (mkdtemp gives 0o700)
    assert os.stat(tmp_path / f"w{workers}" / "fig2").st_mode & 0o777 == _io.DIR_MODE
  for k in got[0]:
    assert got[1][k] == got[0][k], k


def test_the_worker_is_used_for_two_families_or_more(monkeypatch):
  monkeypatch.delenv("DRJAX_FIGURE_WORKERS", raising=False)
  assert rep._figure_workers(1) == 0 and rep._figure_workers(2) == 1  # pylint: disable=protected-access
  assert rep._figure_workers(2, auto=False) == 0  # library calls: in this process  # pylint: disable=protected-access
  monkeypatch.setenv("DRJAX_FIGURE_WORKERS", "3")
  assert rep._figure_workers(1) == 3  # pylint: disable=protected-access


def test_ctrl_c_prints_one_line_exits_130_and_leaves_only_complete_figures(tmp_path):
  """SIGINT once the first family has its results (its figure then being drawn by the worker):
  exit code 130, one line, every figure directory complete, no temporary directory, and no
  worker process left behind."""
  import os  # pylint: disable=g-import-not-at-top
  import signal  # pylint: disable=g-import-not-at-top
  import subprocess  # pylint: disable=g-import-not-at-top
  import sys  # pylint: disable=g-import-not-at-top

  out = tmp_path / "out"
  env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
  env.update(PYTHONUNBUFFERED="1", DRJAX_NO_CACHE="1")
  proc = subprocess.Popen([sys.executable, "-m", "drjax.cli", "reproduce", "sensitivity", "fig2",
                           "--seeds", "2", "--episodes", "3", "--test-episodes", "3",
                           "--out", str(out)], stderr=subprocess.PIPE, text=True, env=env)
  lines = []
  for line in proc.stderr:
    lines.append(line)
    if "computed:" in line:
      proc.send_signal(signal.SIGINT)
      break
  _, rest = proc.communicate(timeout=120)
  lines += rest.splitlines(keepends=True)
  assert proc.returncode == 130, "".join(lines)
  assert lines[-1].startswith("drjax reproduce: interrupted;"), "".join(lines[-5:])
  assert not any("Traceback" in x for x in lines), "".join(lines)
  names = sorted(os.listdir(out))
  assert not [n for n in names if n.startswith(".")], names  # no temporary directories
  for n in names:
    if os.path.isdir(out / n):
      assert any(f.endswith(".png") for f in os.listdir(out / n)), n
  ps = subprocess.run(["ps", "-o", "pid=,ppid=,args=", "-e"], capture_output=True, text=True)
  assert not [x for x in ps.stdout.splitlines() if f"{proc.pid}" in x.split()[1:2]], ps.stdout


def test_paper_programs_trace_under_the_trace_lock_and_compile_once():
  """``compile_options.call`` traces and lowers under ``TRACE_LOCK`` (one family traces at a
  time) and the call that follows reuses that trace: one trace, one compilation, the result of
  the plain call."""
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  from drjax.paper import compile_options  # pylint: disable=g-import-not-at-top
  traced = []

  def f(x):
    traced.append(compile_options.TRACE_LOCK.locked())
    return jnp.sin(x) * 2.0

  compiles = []

  def listen(event, duration, **_):
    del duration
    if event.endswith("backend_compile_duration"):
      compiles.append(event)

  x = jnp.arange(7.0)
  jax.monitoring.register_event_duration_secs_listener(listen)
  try:
    got = compile_options.call(jax.jit(f), x)
  finally:
    jax.monitoring.unregister_event_duration_listener(listen)
  assert traced == [True]
  assert len(compiles) == 1
  np.testing.assert_array_equal(got, jnp.sin(x) * 2.0)
  assert not compile_options.TRACE_LOCK.locked()


def test_a_finished_run_ends_its_worker_quickly_and_cleanly(tmp_path):
  """A run that completes: exit 0, every figure written, no warning from multiprocessing's
  resource tracker (the pool's semaphores are released without the full garbage collection of
  the interrupted path; the worker exits without the interpreter's teardown, which shutdown
  waited for)."""
  import os  # pylint: disable=g-import-not-at-top
  import subprocess  # pylint: disable=g-import-not-at-top
  import sys  # pylint: disable=g-import-not-at-top

  out = tmp_path / "out"
  env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
  env.update(DRJAX_NO_CACHE="1", DRJAX_FIGURE_WORKERS="1")  # the worker for one family too
  proc = subprocess.run([sys.executable, "-m", "drjax.cli", "reproduce", "fig1", "subopt",
                         "--seeds", "2", "--episodes", "3", "--quiet", "--out", str(out)],
                        capture_output=True, text=True, env=env, timeout=300)
  assert proc.returncode == 0, proc.stderr
  assert proc.stderr == "", proc.stderr  # --quiet: nothing, and no resource-tracker warning
  for name in ("fig1", "subopt"):
    assert any(f.endswith(".png") for f in os.listdir(out / name)), name
  assert (out / "results.md").exists()
