"""``drjax reproduce`` and ``drjax train``: run experiments, write results files and figures."""

from __future__ import annotations

import glob
import json
import os
import sys
import tempfile
import threading
import time

import jax

from drjax import _io
from drjax.paper import outputs, programs as paper


def _log(quiet, msg):
  if not quiet:
    print(msg, file=sys.stderr, flush=True)


def check_out_dir(out: str) -> None:
  """Raises ``ValueError`` (one line) unless files can be written in ``out``.

  Creates ``out`` (and missing parents) if needed, then creates and removes a probe file in it,
  so unusable targets (``''``, ``/proc/x``, names longer than the filesystem allows, read-only
  or full file systems) fail here, before any training. Directories it created are removed again
  when the probe fails.
  """
  if not isinstance(out, str) or not out.strip():
    raise ValueError(f"--out must be a directory name, got {out!r}")
  if os.path.exists(out) and not os.path.isdir(out):
    raise ValueError(f"--out {out!r} exists and is not a directory")
  created = []
  try:
    probe_dir = os.path.abspath(out)
    missing = []
    while not os.path.exists(probe_dir):
      missing.append(probe_dir)
      parent = os.path.dirname(probe_dir)
      if parent == probe_dir:
        break
      probe_dir = parent
    for d in reversed(missing):
      os.mkdir(d)
      created.append(d)
    fd, probe = tempfile.mkstemp(prefix=".drjax-probe-", dir=out)
    os.close(fd)
    os.remove(probe)
  except OSError as e:
    for d in reversed(created):
      try:
        os.rmdir(d)
      except OSError:
        pass
    reason = e.strerror or type(e).__name__
    raise ValueError(f"--out {out!r} is not a writable directory ({reason})") from None


def _recover_all(out: str, quiet: bool) -> None:
  """Finishes or undoes figure-directory swaps a killed run left half done; cleans temp dirs."""
  for name in paper.FIGURES + ("train",):
    done = outputs.recover(out, name)
    if done:
      _log(quiet, f"[drjax] {done} (left by an interrupted run)")


def reproduce(names, *, out: str, seeds=None, episodes: int = 100, preset: str = "paper",
              test_episodes: int = 100, seed: int = 0, quiet: bool = False,
              evaluation: str = "exact", opt_level="auto", figure_process: bool = False) -> dict:
  """Runs the requested figures and writes ``out/<NAME>/`` and ``out/results.md``.

  ``figure_process``: draw the figures in a spawned worker process when two or more families run
  (``drjax reproduce`` does; ``DRJAX_FIGURE_WORKERS`` overrides either way). Off by default in
  library calls: a spawned process imports the caller's ``__main__``, which a script without an
  ``if __name__ == "__main__":`` guard would run again.

  ``opt_level``: XLA backend optimization level of the training programs (``"auto"``, 0-3; see
  ``programs.opt_level_for``).

  Returns a dict with the time (seconds from the start, compilation included) at which each
  family's figures were written, and ``phases``: per family, the seconds its thread spent tracing,
  lowering and compiling, and in all.
  """
  t_start = time.perf_counter()
  pre = paper.PRESETS[preset]
  paper.opt_level_for(opt_level, 0)  # validates before anything is traced
  max_jobs()  # DRJAX_REPRODUCE_JOBS, validated before anything is traced
  _figure_workers(0)  # DRJAX_FIGURE_WORKERS, likewise
  names = list(dict.fromkeys(names))
  _recover_all(out, quiet)
  run = _run_id()
  key = jax.random.PRNGKey(seed)
  k_lin, k_put = jax.random.split(key)
  timings = {}
  # Every requested family is traced, compiled and run in its own thread (at most max_jobs() at
  # once, longest first): XLA compiles without the GIL, so one family's compilation overlaps the
  # next one's tracing and the figure drawing below (as each family finishes, in the figure
  # worker or in this thread). The results do not depend on it.
  specs = {}
  lin_names = [n for n in names if n in ("fig1", "fig3", "subopt")]
  if lin_names:
    s_lin = seeds or paper.DEFAULT_SEEDS["linear-mdp"]
    # fig1 and subopt use rho_1,4 = 0.5 only; the other two levels are trained for fig3 alone.
    rhos = paper.LINEAR_RHO if "fig3" in lin_names else (paper.FIG1_RHO,)
    _log(quiet, f"[drjax] linear MDP ({', '.join(lin_names)}): {len(paper.LINEAR_XI)} xi_norm x "
                f"{len(rhos)} rho_1,4 {list(rhos)} x {s_lin} seeds x {episodes} episodes, both "
                f"algorithms, 21 targets (exact) ...")
    specs["linear-mdp"] = (lambda: paper.run_linear_mdp(
        pre, seeds=s_lin, episodes=episodes, key=k_lin, rhos=rhos, opt_level=opt_level))
  if "fig2" in names:
    s_put = seeds or paper.DEFAULT_SEEDS["put-option"]
    how = ("exact, price lattice" if evaluation == "exact" else
           f"{test_episodes} test episodes, Monte Carlo with common random numbers")
    _log(quiet, f"[drjax] put option (fig2): 3 rho x {s_put} seeds x {episodes} episodes, both "
                f"algorithms, 29 targets ({how}) ...")
    specs["put-option"] = (lambda: paper.run_put_option(
        pre, seeds=s_put, episodes=episodes, key=k_put, test_episodes=test_episodes,
        evaluation=evaluation, opt_level=opt_level))
  if "drpvi" in names:
    from drjax.paper import drpvi  # pylint: disable=g-import-not-at-top
    s_off = seeds or drpvi.DEFAULT_SEEDS
    off_pre = drpvi.PRESETS[preset]
    _log(quiet, f"[drjax] DRPVI paper (drpvi): {len(drpvi.XI)} xi_norm x {len(drpvi.RHO)} "
                f"rho_1,4 x {s_off} seeds x {episodes} uniform trajectories, "
                f"{', '.join(drpvi.AGENTS)}, 21 targets (exact) ...")
    specs["drpvi"] = (lambda: drpvi.run(off_pre, seeds=s_off, trajectories=episodes,
                                        key=jax.random.fold_in(key, 7), opt_level=opt_level))
  if "r2pvi" in names:
    from drjax.paper import r2pvi  # pylint: disable=g-import-not-at-top
    s_r2 = seeds or r2pvi.DEFAULT_SEEDS
    _log(quiet, f"[drjax] R2PVI paper (r2pvi): Figure 1(a)-(d), {s_r2} seeds x {episodes} "
                "uniform trajectories, exact evaluation ...")
    k_r2 = jax.random.fold_in(key, 8)
    # Figure 1(d) (the put option) in a thread of its own: its program compiles beside the
    # linear-MDP one instead of after it.
    specs["r2pvi-put"] = (lambda: r2pvi.run_put(
        seeds=r2pvi.put_seeds_for(s_r2), trajectories=episodes, key=r2pvi.put_key(k_r2),
        opt_level=opt_level))
    specs["r2pvi"] = (lambda: r2pvi.run(seeds=s_r2, trajectories=episodes, key=k_r2,
                                        opt_level=opt_level, put=False))
  if "sensitivity" in names:
    from drjax.paper import sensitivity  # pylint: disable=g-import-not-at-top
    _log(quiet, "[drjax] sensitivity (linear MDP, exact): V*, dV*/drho_1,4 (autodiff and closed "
                "form) on 101 rho x 3 xi_norm, kinks, [H, d] map, worst-case search ...")
    specs["sensitivity"] = (lambda: sensitivity.run(seed=seed))
  # Started longest first (they take the max_jobs() slots in this order), so that the last
  # family to finish is a short one.
  jobs = {k: _Job(specs[k]) for k in _START_ORDER if k in specs}
  figures = _Figures(out, quiet, t_start, timings,
                     workers=_figure_workers(len([j for j in jobs if j != "r2pvi-put"]),
                                             figure_process))

  def linear_done():
    res = jobs["linear-mdp"].result()
    _log(quiet, f"[drjax]   linear MDP computed: {jobs['linear-mdp'].describe()}")
    panels = paper.linear_panels(res, pre, seeds=s_lin, episodes=episodes, names=lin_names)
    for n in lin_names:
      figures.write(n, _stamp(panels[n], run), family="linear-mdp",
                    note=f"{len(panels[n])} panels")

  def put_done():
    res = jobs["put-option"].result()
    _log(quiet, f"[drjax]   put option computed: {jobs['put-option'].describe()}")
    panels = paper.put_panels(res, pre, seeds=s_put, episodes=episodes,
                              test_episodes=test_episodes)
    figures.write("fig2", _stamp(panels["fig2"], run), family="put-option")

  def drpvi_done():
    res = jobs["drpvi"].result()
    _log(quiet, f"[drjax]   DRPVI paper computed: {jobs['drpvi'].describe()}")
    figures.write("drpvi", _stamp(drpvi.panels(res, off_pre, seeds=s_off, trajectories=episodes),
                                  run), family="drpvi")

  def r2pvi_done():
    res = dict(jobs["r2pvi"].result(), put=jobs["r2pvi-put"].result())
    _log(quiet, f"[drjax]   R2PVI paper computed: {jobs['r2pvi'].describe()}; Figure 1(d): "
                f"{jobs['r2pvi-put'].describe()}")
    figures.write("r2pvi", _stamp(r2pvi.panels(res, seeds=s_r2, trajectories=episodes), run),
                  plot=r2pvi.plot, family="r2pvi")

  def sensitivity_done():
    panels, _ = jobs["sensitivity"].result()
    _log(quiet, f"[drjax]   sensitivity computed: {jobs['sensitivity'].describe()}")
    figures.write("sensitivity", _stamp(panels, run), plot=sensitivity.plot,
                  family="sensitivity")

  # Each family's figures as soon as its results are in (whichever finishes first).
  waiting = {"linear-mdp": (("linear-mdp",), linear_done), "put-option": (("put-option",), put_done),
             "drpvi": (("drpvi",), drpvi_done), "r2pvi": (("r2pvi", "r2pvi-put"), r2pvi_done),
             "sensitivity": (("sensitivity",), sensitivity_done)}
  waiting = {k: v for k, v in waiting.items() if k in jobs}
  finished = False
  try:
    while waiting:
      ready = [k for k, (deps, _) in waiting.items() if all(jobs[d].done() for d in deps)]
      if not ready:
        time.sleep(0.01)
        continue
      for k in ready:
        waiting.pop(k)[1]()
    figures.wait()
    finished = True
  finally:
    figures.close(finished)
  if "r2pvi-time" in names:
    # Timed last and alone: no other family compiles or runs in a thread beside the timed fits.
    from drjax.paper import r2pvi_time  # pylint: disable=g-import-not-at-top
    _log(quiet, "[drjax] R2PVI paper Figure 2 (r2pvi-time): one fit of "
                f"{', '.join(r2pvi_time.AGENTS)} at {len(r2pvi_time.grid())} (N, anchors) points, "
                "drjax and NumPy interleaved, warm minima (1-2 minutes) ...")
    res = r2pvi_time.run(log=(lambda m: None) if quiet else print)
    outputs.write_figure(out, "r2pvi-time", _stamp(r2pvi_time.panels(res), run),
                         plot=r2pvi_time.plot)
    timings["r2pvi-time"] = time.perf_counter() - t_start
    _log(quiet, f"[drjax]   wrote {os.path.join(out, 'r2pvi-time')}/ (done at "
                f"{timings['r2pvi-time']:.1f} s)")
  path = outputs.write_summary(out, load_results(out), header=_header())
  _log(quiet, f"[drjax] wrote {path} ({time.perf_counter() - t_start:.1f} s)")
  timings["phases"] = {name: dict(job.phases) for name, job in jobs.items()}
  return timings


_PHASES = {"/jax/core/compile/jaxpr_trace_duration": "trace",
           "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower",
           "/jax/core/compile/backend_compile_duration": "compile"}
_local = threading.local()
_listening = False


def _on_event(event, duration_secs, **_):
  phases = getattr(_local, "phases", None)
  if phases is not None and event in _PHASES:
    phases[_PHASES[event]] = phases.get(_PHASES[event], 0.0) + duration_secs


def max_jobs() -> int:
  """How many experiment families run at once: ``DRJAX_REPRODUCE_JOBS``, else as many as there
  are cores.

  Each family compiles in its own thread (XLA compiles without the GIL), so overlapping them
  hides tracing behind compilation; more threads than cores only make every family finish late
  (the figures, drawn in a worker process, then all wait for the end). Measured cold on
  ``amd-epyc-2c`` (jax 0.10.2, idle): 20-21 s with 2 at a time against 24-25 s with all of them;
  on jaxlib 0.12 all at once also peaked at 3.3-3.5 GiB against 1.4 GiB one at a time.
  """
  env = os.environ.get("DRJAX_REPRODUCE_JOBS", "").strip()
  if env:
    if not env.isdigit() or int(env) < 1:
      raise ValueError(f"DRJAX_REPRODUCE_JOBS must be an integer >= 1, got {env!r}")
    return int(env)
  try:
    return max(1, len(os.sched_getaffinity(0)))
  except AttributeError:  # not Linux
    return max(1, os.cpu_count() or 1)


_SLOTS = {}


def _slots():
  n = max_jobs()
  if n not in _SLOTS:
    _SLOTS[n] = threading.BoundedSemaphore(n)
  return _SLOTS[n]


class _Job:
  """Runs ``fn`` in a daemon thread (a Ctrl-C in the main thread is not held up by it).

  ``phases``: seconds this thread spent tracing, lowering and compiling (``jax.monitoring``
  events fire in the thread that does the work), and the whole job (``total``).
  """

  def __init__(self, fn):
    global _listening
    if not _listening:
      jax.monitoring.register_event_duration_secs_listener(_on_event)
      _listening = True
    self._out = None
    self._err = None
    self.phases = {}
    self._thread = threading.Thread(target=self._run, args=(fn,), daemon=True)
    self._thread.start()

  def _run(self, fn):
    _local.phases = self.phases
    t0 = time.perf_counter()
    with _slots():  # at most max_jobs() families trace, compile and run at once
      try:
        self._out = fn()
      except BaseException as e:  # pylint: disable=broad-except  (re-raised in result())
        self._err = e
    self.phases["total"] = time.perf_counter() - t0

  def describe(self) -> str:
    p = self.phases
    return (f"trace {p.get('trace', 0.0):.1f} s, lower {p.get('lower', 0.0):.1f} s, XLA compile "
            f"{p.get('compile', 0.0):.1f} s, in all {p.get('total', 0.0):.1f} s (threads overlap)")

  def done(self) -> bool:
    return not self._thread.is_alive()

  def result(self):
    self._thread.join()
    if self._err is not None:
      raise self._err
    return self._out


# Families by their cold compute time on amd-epyc-2c (jax 0.10.2), longest first.
_START_ORDER = ("r2pvi", "drpvi", "r2pvi-put", "linear-mdp", "put-option", "sensitivity")


def _figure_workers(families: int, auto: bool = True) -> int:
  """Worker processes that draw the figures: ``DRJAX_FIGURE_WORKERS``, else (with ``auto``) 1 when
  two or more families are computed (the figures of one then draw while the others compile),
  else 0 (drawn in this process)."""
  env = os.environ.get("DRJAX_FIGURE_WORKERS", "").strip()
  if env:
    try:
      n = int(env)
    except ValueError:
      n = -1
    if n < 0:
      raise ValueError(f"DRJAX_FIGURE_WORKERS must be an integer >= 0, got {env!r}")
    return n
  return 1 if auto and families >= 2 else 0


_DRAWING = threading.Lock()  # held by the worker while it writes a figure


def _noop():
  return None


def _draw(out, name, panels, plot):
  """Worker-side ``outputs.write_figure``; returns the wall-clock time it finished."""
  with _DRAWING:
    outputs.write_figure(out, name, panels, plot=plot)
  return time.time()


def _quiet_worker():
  import signal  # pylint: disable=g-import-not-at-top
  # Ctrl-C goes to the whole process group: the main process handles it (stops submitting, waits
  # for the figure being written, shuts the worker down); the worker ignores it. If the main
  # process is killed, the worker finishes its figure and exits.
  signal.signal(signal.SIGINT, signal.SIG_IGN)
  import threading  # pylint: disable=g-import-not-at-top
  parent = os.getppid()

  def orphaned():  # the main process ended (killed): end too, after the current figure
    while os.getppid() == parent:
      time.sleep(0.5)
    with _DRAWING:
      os._exit(0)  # pylint: disable=protected-access

  threading.Thread(target=orphaned, daemon=True).start()
  import atexit  # pylint: disable=g-import-not-at-top

  # Every figure is written and closed before the worker is told to exit; what would follow is
  # the interpreter's teardown of matplotlib and NumPy (0.3-0.4 s), which the main process waits
  # for in shutdown(). Registered last, so run first: after the pool's own exit work is done.
  atexit.register(_io.quick_exit, 0)
  from drjax.paper import layout  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import
  from matplotlib.backends import backend_agg, backend_pdf  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import


class _Figures:
  """Writes figures in a worker process (``workers >= 1``) or in this one (``0``).

  Drawing and saving a figure is Python-bound (matplotlib: ~7 s for ``reproduce all`` on
  ``amd-epyc-2c``); in this process it competes for the GIL with the families still tracing. The
  worker is spawned at once (a fresh interpreter: no JAX state is copied) and imports matplotlib
  while the families trace.
  """

  def __init__(self, out, quiet, t_start, timings, workers: int):
    self._out, self._quiet, self._t0, self._timings = out, quiet, t_start, timings
    self._pending = []
    self._pool = None
    self._wall0 = time.time() - (time.perf_counter() - t_start)
    if workers:
      import concurrent.futures  # pylint: disable=g-import-not-at-top
      import multiprocessing  # pylint: disable=g-import-not-at-top
      import signal  # pylint: disable=g-import-not-at-top
      # The workers start now (a first, empty task) with SIGINT ignored, which a new interpreter
      # keeps: a Ctrl-C while one is still starting cannot reach it (the main process handles it).
      try:
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
      except ValueError:  # not the main thread: leave the handler alone
        previous = None
      try:
        self._pool = concurrent.futures.ProcessPoolExecutor(
            workers, mp_context=multiprocessing.get_context("spawn"), initializer=_quiet_worker)
        for _ in range(workers):
          self._pool.submit(_noop)
      finally:
        if previous is not None:
          signal.signal(signal.SIGINT, previous)

  def write(self, name, panels, *, plot=None, family, note=""):
    if self._pool is None:
      outputs.write_figure(self._out, name, panels, plot=plot)
      self._written(name, family, note, time.perf_counter() - self._t0)
    else:
      fut = self._pool.submit(_draw, self._out, name, panels, plot)
      self._pending.append((fut, name, family, note))

  def _written(self, name, family, note, at):
    self._timings[family] = at
    extra = f"{note}, " if note else ""
    _log(self._quiet, f"[drjax]   wrote {os.path.join(self._out, name)}/ ({extra}done at "
                      f"{at:.1f} s)")

  def wait(self):
    for fut, name, family, note in self._pending:
      self._written(name, family, note, fut.result() - self._wall0)
    self._pending = []

  def close(self, finished: bool = False):
    """Shuts the worker down: queued figures are cancelled, the one being written finishes.

    ``finished``: every figure was written (no exception). The pool's semaphores are then released
    when its queues are freed, at the latest by ``multiprocessing``'s exit handler (which the
    ``drjax`` command runs before its quick exit); otherwise (Ctrl-C: the command exits without
    exit handlers) a full garbage collection releases them now (0.3 s with JAX's objects alive).
    """
    if self._pool is not None:
      import gc  # pylint: disable=g-import-not-at-top
      self._pool.shutdown(wait=True, cancel_futures=True)
      self._pool = None
      self._pending = []
      if not finished:
        gc.collect()


def _run_id() -> str:
  return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()) + f"/{os.getpid()}"


def _stamp(panels: dict, run: str) -> dict:
  """Records the run (start time and process) in every panel's config."""
  for p in panels.values():
    p["config"]["run"] = run
  return panels


def _header():
  return ("# drjax results\n\nOne row per panel JSON found under this directory, with the "
          "settings of the run that wrote it. Every panel's full configuration is in its JSON "
          "file (`config`). Crossing: first perturbation where the DR-LSVI-UCB and "
          "LSVI-UCB mean curves cross (linear interpolation). Area: trapezoid rule over the "
          "perturbation grid.")


def load_results(out: str) -> dict:
  """All panels found under ``out/<NAME>/*.json``, {name: {tag: panel}}, in figure order."""
  sections = {}
  for name in paper.FIGURES + ("train",):
    files = sorted(glob.glob(os.path.join(out, name, "*.json")))
    if files:
      sections[name] = {}
      for f in files:
        with open(f) as fh:
          sections[name][os.path.splitext(os.path.basename(f))[0]] = json.load(fh)
  return sections


def train(*, env: str, out: str, rhos, seeds: int, episodes: int, preset: str, beta: float,
          lam: float, xi_norm: float, test_episodes: int, seed: int, quiet: bool,
          evaluation: str = "exact", opt_level="auto") -> dict:
  """``drjax train``: one environment, both algorithms, a list of rho values, N seeds.

  Writes ``out/train/<env>_....json`` panels (one per rho) of the same kind as ``reproduce``.
  """
  import dataclasses  # pylint: disable=g-import-not-at-top

  pre = dataclasses.replace(paper.PRESETS[preset], beta=beta, lam=lam)
  _recover_all(out, quiet)
  run = _run_id()
  key = jax.random.PRNGKey(seed)
  t0 = time.perf_counter()
  _log(quiet, f"[drjax] train {env}: rho {list(rhos)} x {seeds} seeds x {episodes} episodes ...")
  if env == "linear-mdp":
    res = paper.run_linear_mdp(pre, seeds=seeds, episodes=episodes, key=key, xi_norms=(xi_norm,),
                               rhos=tuple(rhos), opt_level=opt_level)
    panels = paper.linear_panels(res, pre, seeds=seeds, episodes=episodes, names=("fig3",))["fig3"]
  else:
    res = paper.run_put_option(pre, seeds=seeds, episodes=episodes, key=key,
                               test_episodes=test_episodes, rhos=tuple(rhos),
                               evaluation=evaluation, opt_level=opt_level)
    panels = paper.put_panels(res, pre, seeds=seeds, episodes=episodes,
                              test_episodes=test_episodes)["fig2"]
  panels = {f"{env}_{tag}": p for tag, p in panels.items()}
  outputs.write_figure(out, "train", _stamp(panels, run))
  path = outputs.write_summary(out, load_results(out), header=_header())
  _log(quiet, f"[drjax] wrote {os.path.join(out, 'train')}/ and {path} "
              f"({time.perf_counter() - t0:.1f} s)")
  return panels
