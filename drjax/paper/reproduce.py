"""``drjax reproduce`` and ``drjax train``: run experiments, write results files and figures."""

from __future__ import annotations

import glob
import json
import os
import sys
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
    probe = _io.temp_name(out, prefix=".drjax-probe-")
    try:
      open(probe, "xb").close()
    finally:
      if os.path.lexists(probe):
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
              evaluation: str = "exact", opt_level="auto", grid: str = "default") -> dict:
  """Runs the requested figures and writes ``out/<NAME>/`` and ``out/results.md``.

  The experiment families run one after the other in this process; each family's figures are
  drawn as soon as its results are in.

  ``grid``: the dimension study's grid (``drjax.paper.dimension.GRIDS``); its sweeps go to
  ``out/dimension-sweeps/`` (finished ones are reused: an interrupted study resumes).

  ``opt_level``: XLA backend optimization level of the training programs (``"auto"``, 0-3; see
  ``programs.opt_level_for``).

  Returns a dict with the time (seconds from the start, compilation included) at which each
  family's figures were written, and ``phases``: per family, the seconds it spent tracing,
  lowering and compiling, and in all.
  """
  t_start = time.perf_counter()
  pre = paper.PRESETS[preset]
  paper.opt_level_for(opt_level, 0)  # validates before anything is traced
  names = list(dict.fromkeys(names))
  _recover_all(out, quiet)
  run = _run_id()
  key = jax.random.PRNGKey(seed)
  k_lin, k_put = jax.random.split(key)
  timings = {"phases": {}}

  def compute(family, what, fn):
    res, phases = _timed(fn)
    timings["phases"][family] = phases
    _log(quiet, f"[drjax]   {what} computed: {_describe(phases)}")
    return res

  def write(name, panels, family, plot=None, note=""):
    outputs.write_figure(out, name, _stamp(panels, run), plot=plot)
    timings[family] = time.perf_counter() - t_start
    extra = f"{note}, " if note else ""
    _log(quiet, f"[drjax]   wrote {os.path.join(out, name)}/ ({extra}done at "
                f"{timings[family]:.1f} s)")

  lin_names = [n for n in names if n in ("fig1", "fig3", "subopt")]
  if lin_names:
    s_lin = seeds or paper.DEFAULT_SEEDS["linear-mdp"]
    # fig1 and subopt use rho_1,4 = 0.5 only; the other two levels are trained for fig3 alone.
    rhos = paper.LINEAR_RHO if "fig3" in lin_names else (paper.FIG1_RHO,)
    _log(quiet, f"[drjax] linear MDP ({', '.join(lin_names)}): {len(paper.LINEAR_XI)} xi_norm x "
                f"{len(rhos)} rho_1,4 {list(rhos)} x {s_lin} seeds x {episodes} episodes, both "
                f"algorithms, 21 targets (exact) ...")
    res = compute("linear-mdp", "linear MDP", lambda: paper.run_linear_mdp(
        pre, seeds=s_lin, episodes=episodes, key=k_lin, rhos=rhos, opt_level=opt_level))
    panels = paper.linear_panels(res, pre, seeds=s_lin, episodes=episodes, names=lin_names)
    for n in lin_names:
      write(n, panels[n], "linear-mdp", note=f"{len(panels[n])} panels")
  if "fig2" in names:
    s_put = seeds or paper.DEFAULT_SEEDS["put-option"]
    how = ("exact, price lattice" if evaluation == "exact" else
           f"{test_episodes} test episodes, Monte Carlo with common random numbers")
    _log(quiet, f"[drjax] put option (fig2): 3 rho x {s_put} seeds x {episodes} episodes, both "
                f"algorithms, 29 targets ({how}) ...")
    res = compute("put-option", "put option", lambda: paper.run_put_option(
        pre, seeds=s_put, episodes=episodes, key=k_put, test_episodes=test_episodes,
        evaluation=evaluation, opt_level=opt_level))
    panels = paper.put_panels(res, pre, seeds=s_put, episodes=episodes,
                              test_episodes=test_episodes)
    write("fig2", panels["fig2"], "put-option")
  if "drpvi" in names:
    from drjax.paper import drpvi  # pylint: disable=g-import-not-at-top
    s_off = seeds or drpvi.DEFAULT_SEEDS
    off_pre = drpvi.PRESETS[preset]
    _log(quiet, f"[drjax] DRPVI paper (drpvi): {len(drpvi.XI)} xi_norm x {len(drpvi.RHO)} "
                f"rho_1,4 x {s_off} seeds x {episodes} uniform trajectories, "
                f"{', '.join(drpvi.AGENTS)}, 21 targets (exact) ...")
    res = compute("drpvi", "DRPVI paper", lambda: drpvi.run(
        off_pre, seeds=s_off, trajectories=episodes, key=jax.random.fold_in(key, 7),
        opt_level=opt_level))
    write("drpvi", drpvi.panels(res, off_pre, seeds=s_off, trajectories=episodes), "drpvi")
  if "r2pvi" in names:
    from drjax.paper import r2pvi  # pylint: disable=g-import-not-at-top
    s_r2 = seeds or r2pvi.DEFAULT_SEEDS
    _log(quiet, f"[drjax] R2PVI paper (r2pvi): Figure 1(a)-(d), {s_r2} seeds x {episodes} "
                "uniform trajectories, exact evaluation ...")
    k_r2 = jax.random.fold_in(key, 8)
    res = compute("r2pvi", "R2PVI paper", lambda: r2pvi.run(
        seeds=s_r2, trajectories=episodes, key=k_r2, opt_level=opt_level))
    write("r2pvi", r2pvi.panels(res, seeds=s_r2, trajectories=episodes), "r2pvi",
          plot=r2pvi.plot)
  if "sensitivity" in names:
    from drjax.paper import sensitivity  # pylint: disable=g-import-not-at-top
    _log(quiet, "[drjax] sensitivity (linear MDP, exact): V*, dV*/drho_1,4 (autodiff and closed "
                "form) on 101 rho x 3 xi_norm, kinks, [H, d] map, worst-case search ...")
    panels, _ = compute("sensitivity", "sensitivity", lambda: sensitivity.run(seed=seed))
    write("sensitivity", panels, "sensitivity", plot=sensitivity.plot)
  # The two studies over sweeps (not part of all): the same steps, each with its own grid and log.
  for name in ("dimension", "shifts"):
    if name not in names:
      continue
    import dataclasses  # pylint: disable=g-import-not-at-top
    from drjax.paper import dimension, shifts  # pylint: disable=g-import-not-at-top
    study = {"dimension": dimension, "shifts": shifts}[name]
    g = dataclasses.replace(study.GRIDS[grid], seed=seed)
    if name == "dimension":
      what = (f"dimension study ({grid} grid): d in {list(g.dims)}, families "
              f"{list(study.available_families(g.families))}, {g.instances} instances x "
              f"{g.seeds} seeds x K = {g.episodes}, agents {list(study.agents())}")
    else:
      what = f"{study.describe(g)} ({grid} grid)"
    _log(quiet, f"[drjax] {what} ...")
    (panels, _), phases = _timed(lambda: study.run(  # pylint: disable=cell-var-from-loop
        g, sweep_dir=os.path.join(out, f"{name}-sweeps"), log=lambda m: _log(quiet, m)))
    timings["phases"][name] = phases
    write(name, panels, name, plot=study.plot)
  if "r2pvi-time" in names:
    # Timed last: no compilation of another family runs beside the timed fits.
    from drjax.paper import r2pvi_time  # pylint: disable=g-import-not-at-top
    _log(quiet, "[drjax] R2PVI paper Figure 2 (r2pvi-time): one fit of "
                f"{', '.join(r2pvi_time.AGENTS)} at {len(r2pvi_time.grid())} (N, anchors) points, "
                "drjax and NumPy interleaved, warm minima (1-2 minutes) ...")
    res = r2pvi_time.run(log=(lambda m: None) if quiet else print)
    write("r2pvi-time", r2pvi_time.panels(res), "r2pvi-time", plot=r2pvi_time.plot)
  path = outputs.write_summary(out, load_results(out), header=_header())
  _log(quiet, f"[drjax] wrote {path} ({time.perf_counter() - t_start:.1f} s)")
  return timings


_PHASES = {"/jax/core/compile/jaxpr_trace_duration": "trace",
           "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower",
           "/jax/core/compile/backend_compile_duration": "compile"}


def _timed(fn):
  """``(fn(), phases)``: the seconds ``fn`` spent tracing, lowering and compiling (JAX's
  ``jax.monitoring`` events), and in all (``total``)."""
  phases = {}

  def listen(event, duration_secs, **_):
    if event in _PHASES:
      phases[_PHASES[event]] = phases.get(_PHASES[event], 0.0) + duration_secs

  jax.monitoring.register_event_duration_secs_listener(listen)
  t0 = time.perf_counter()
  try:
    res = fn()
  finally:
    jax.monitoring.unregister_event_duration_listener(listen)
  phases["total"] = time.perf_counter() - t0
  return res, phases


def _describe(p: dict) -> str:
  return (f"trace {p.get('trace', 0.0):.1f} s, lower {p.get('lower', 0.0):.1f} s, XLA compile "
          f"{p.get('compile', 0.0):.1f} s, in all {p.get('total', 0.0):.1f} s")


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
