"""Offline benchmark: drjax's ``agent.fit`` (PEVI, DRPVI, VA-DRPVI, R2PVI-TV / -KL / -chi2,
DRVI-L) against vectorized NumPy.

Two workloads, each timed warm (after a first call that traces and compiles) in this process,
drjax and NumPy interleaved on the same data, minimum and median over the repeats (the machines
are shared: the minimum is the least disturbed run):

* **Put option** (``PutOption(num_anchors, horizon=20, variant="notebook")``, ``d = anchors + 1``,
  A = 2), the R2PVI paper's timing table: datasets of N trajectories under ``data.fixed(1)``
  (always hold, as the R2PVI public code), beta = 0.1, lambda = 1, rho = 0.1 (the TV radius of
  DRPVI / VA-DRPVI and the KL radius of DRVI-L), R2PVI's regularization weight 1 (the smallest of
  the paper's put-option lambda in {1, 3, 5}); ONE ``agent.fit(ds, hp[, pilot=ds2])`` through the
  entry point a user calls (host-side argument checks included; ``jit`` column: the same fit
  wrapped in ``jax.jit``, no host checks) vs ``numpy_offline.fit`` on the same arrays. The
  paper's published NumPy timings (laptop i5-11300H; none for VA-DRPVI and R2PVI-chi2) are quoted
  as a reference column; they were not measured here. Each R2PVI row also gives its time over
  its non-regularized counterpart's at the same (N, anchors) (``BASELINE``: PEVI for R2PVI-TV /
  -KL, DRPVI for R2PVI-chi2 and DRVI-L), drjax and NumPy alike.
* **Linear MDP** (``LinearMDP()``, xi_norm = 0.2, H = 3, d = 4, A = 16), DRPVI with rho_{1,4} =
  0.4, beta = 1, lambda = 0.1, 1,000 seeds x 100 trajectories (uniform behavior):
  ``jit(vmap(make_fit + exact target values on 21 targets))`` over the seeds (collection + fit in
  the sufficient-statistics form + exact evaluation), and the fit alone on the same 1,000
  datasets: drjax ``jit(vmap(agent.fit))`` (buffer form, m = data minimum, the NumPy
  algorithm; and the sufficient-statistics form ``make_fit`` uses) vs NumPy looping over the
  seeds (and NumPy batched over the seeds in one call).

Each row records the first call's wall time and the seconds JAX spent tracing, lowering and
compiling in it (``jax.monitoring`` events), and the largest ``|w_numpy - w_drjax|`` (in the
run's float dtype: float32 unless ``jax_enable_x64``). Ratios are NumPy / drjax (and published /
drjax) of the warm minima: above 1 means drjax is faster.

``python -m drjax.bench.offline [--quick] [--full]`` prints the markdown table.
"""

from __future__ import annotations

import ctypes
import glob
import os
import statistics
import sys
import time

import drjax  # noqa: E402  (sets drjax's XLA flags before JAX starts)
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from drjax.bench import numpy_offline as npo  # noqa: E402
from drjax.bench.compiles import count_compiles  # noqa: E402

AGENTS = npo.AGENTS
PUT_HP = {"beta": 0.1, "lam": 1.0, "rho": 0.1, "reg_weight": 1.0}  # each agent takes its own
PUT_HORIZON = 20
# (N trajectories, anchors): the R2PVI paper's table; the default run does its first row only.
PUT_GRID_FULL = ((1000, 30), (5000, 30), (10000, 30), (1000, 60), (1000, 120))
PUT_GRID_DEFAULT = ((1000, 30),)
PUT_GRID_QUICK = ((50, 30),)
# Published NumPy seconds (R2PVI paper, laptop i5-11300H; no VA-DRPVI or R2PVI-chi2 number), by
# (agent, N, anchors).
PUBLISHED = {
    ("pevi", 1000, 30): 0.80, ("pevi", 5000, 30): 4.07, ("pevi", 10000, 30): 8.15,
    ("drpvi", 1000, 30): 1.70, ("drpvi", 5000, 30): 6.77, ("drpvi", 10000, 30): 13.40,
    ("pevi", 1000, 60): 1.84, ("pevi", 1000, 120): 5.56,
    ("drpvi", 1000, 60): 3.49, ("drpvi", 1000, 120): 16.66,
    ("r2pvi-tv", 1000, 30): 1.08, ("r2pvi-tv", 5000, 30): 5.05, ("r2pvi-tv", 10000, 30): 8.99,
    ("r2pvi-tv", 1000, 60): 1.95, ("r2pvi-tv", 1000, 120): 4.97,
    ("r2pvi-kl", 1000, 30): 1.04, ("r2pvi-kl", 5000, 30): 5.02, ("r2pvi-kl", 10000, 30): 9.03,
    ("r2pvi-kl", 1000, 60): 1.79, ("r2pvi-kl", 1000, 120): 6.31,
    ("drvi-l", 1000, 30): 1.64, ("drvi-l", 5000, 30): 7.01, ("drvi-l", 10000, 30): 15.04,
    ("drvi-l", 1000, 60): 4.12, ("drvi-l", 1000, 120): 16.19,
}
# The non-regularized counterpart each R2PVI row (and DRVI-L) is compared with at the same
# (N, anchors): the time ratio agent / baseline.
BASELINE = {"r2pvi-tv": "pevi", "r2pvi-kl": "pevi", "r2pvi-chi2": "drpvi", "drvi-l": "drpvi"}
PUBLISHED_SOURCE = "R2PVI paper, NumPy on a laptop i5-11300H (quoted, not run here)"
LINEAR = {"seeds": 1000, "trajectories": 100, "targets": 21, "xi_norm": 0.2, "beta": 1.0,
          "lam": 0.1, "rho_04": 0.4}
LINEAR_QUICK_SEEDS = 10
MIN_TIME_S = 0.5  # repeat each side until it has run this long (at least ``reps`` times) ...
MAX_REPS = 30     # ... or this many times

def _openblas_fn(kind: str):
  """NumPy's bundled OpenBLAS ``get``/``set`` num-threads function (None if not found)."""
  try:
    lib_dir = os.path.dirname(np.__file__) + ".libs"
    for path in glob.glob(os.path.join(lib_dir, "*openblas*")):
      lib = ctypes.CDLL(path)
      for name in (f"scipy_openblas_{kind}_num_threads64_", f"openblas_{kind}_num_threads64_",
                   f"openblas_{kind}_num_threads"):
        fn = getattr(lib, name, None)
        if fn is not None:
          return fn
  except OSError:
    pass
  return None


def blas_threads() -> int | None:
  """Threads of NumPy's bundled OpenBLAS (None when it cannot be asked)."""
  fn = _openblas_fn("get")
  return None if fn is None else int(fn())


def numpy_call(fn, threads: int | None):
  """``fn`` run with NumPy's OpenBLAS limited to ``threads`` (None: as it is), restored after.

  On this shared 2-core machine OpenBLAS's default 2 threads stall for up to ~1 s per call when
  another process holds a core (one BLAS thread waits for the other); drjax's XLA runs
  single-threaded (``--xla_cpu_multi_thread_eigen=false``), so 1 thread is the like-for-like
  NumPy setting and the default is measured too.
  """
  get, set_ = _openblas_fn("get"), _openblas_fn("set")
  if threads is None or get is None or set_ is None:
    return fn

  def run():
    old = int(get())
    set_(int(threads))
    try:
      return fn()
    finally:
      set_(old)

  return run


def _first(fn):
  """Wall seconds of the first call (block_until_ready) and the seconds JAX spent tracing,
  lowering and compiling inside it (``compiles.count_compiles``)."""
  with count_compiles() as stats:
    t0 = time.perf_counter()
    out = jax.block_until_ready(fn())
    dt = time.perf_counter() - t0
  return out, {"first_s": dt, "compile_s": stats.total_s, "compiles": stats.compiles}


def _interleaved(fns: dict, reps: int, min_time_s: float = MIN_TIME_S,
                 max_reps: int = MAX_REPS) -> dict:
  """Warm timings of the callables in ``fns`` (name -> fn), interleaved round by round; each
  runs at least ``reps`` times and then until it has run ``min_time_s`` (at most ``max_reps``
  times): a slow one does not make the fast ones repeat for as long."""
  times = {k: [] for k in fns}

  def more(t):
    return len(t) < reps or (sum(t) < min_time_s and len(t) < max_reps)

  while any(more(t) for t in times.values()):
    for k, fn in fns.items():
      if more(times[k]):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        times[k].append(time.perf_counter() - t0)
  return {k: {"warm_min_s": min(t), "warm_median_s": statistics.median(t), "reps": len(t)}
          for k, t in times.items()}


def _ratio(a, b):
  return None if a is None or b is None or b <= 0 else a / b


# ---------------------------------------------------------------------------------------------
# Put option


def put_rows(num_trajectories: int, anchors: int, *, reps: int = 3, agents=AGENTS,
             min_time_s: float = MIN_TIME_S, log=print) -> list[dict]:
  """One row per agent at (N, anchors): drjax entry point, drjax jit-wrapped, NumPy."""
  from drjax import data  # pylint: disable=g-import-not-at-top
  from drjax.agents import registry  # pylint: disable=g-import-not-at-top

  env = drjax.PutOption(num_anchors=anchors, horizon=PUT_HORIZON, variant="notebook")
  params = env.make_params()
  behavior = data.fixed(1)
  ds = data.collect(env, params, behavior, jax.random.key(0), num_trajectories)
  pilot = data.collect(env, params, behavior, jax.random.key(1), num_trajectories)
  nds, npilot = npo.from_drjax(ds), npo.from_drjax(pilot)
  dtype = str(nds.phi.dtype)
  rows = []
  for name in agents:
    log(f"[drjax bench] offline: put option {name} N={num_trajectories} anchors={anchors} ...")
    agent = registry.make(name, env)
    kw = npo.hparams_for(name, PUT_HP)
    hp = registry.make_hparams(name, env, **kw)
    p = pilot if agent.needs_pilot else None
    entry = lambda: agent.fit(ds, hp, pilot=p)  # noqa: E731
    fit_jit = jax.jit(lambda d, h, q: agent.fit(d, h, pilot=q))
    wrapped = lambda: fit_jit(ds, hp, p)  # noqa: E731
    numpy = lambda: npo.fit(name, nds, pilot=npilot, **kw)  # noqa: E731
    numpy_1 = numpy_call(numpy, 1)
    qf, first = _first(entry)
    _, first_jit = _first(wrapped)
    t0 = time.perf_counter()
    ref = numpy_1()
    numpy_first = time.perf_counter() - t0
    warm = _interleaved({"drjax": entry, "drjax_jit": wrapped, "numpy_1": numpy_1,
                         "numpy_default": numpy}, reps, min_time_s=min_time_s)
    w = np.asarray(qf.w)
    published = PUBLISHED.get((name, num_trajectories, anchors))
    default_threads = blas_threads()
    best, best_t = min(((1, warm["numpy_1"]), (default_threads, warm["numpy_default"])),
                       key=lambda x: x[1]["warm_min_s"])
    row = {
        "workload": "put_option", "agent": name, "N": num_trajectories, "anchors": anchors,
        "d": env.feature_dim, "H": env.horizon, "dtype": dtype,
        "drjax": {**first, **warm["drjax"]},
        "drjax_jit": {**first_jit, **warm["drjax_jit"]},
        # the faster BLAS setting (by warm minimum); both are in numpy_1thread / numpy_default
        "numpy": {"first_s": numpy_first, "blas_threads": best, **best_t},
        "numpy_1thread": warm["numpy_1"],
        "numpy_default": {"blas_threads": default_threads, **warm["numpy_default"]},
        "published_s": published,
        "max_abs_w_diff": float(np.max(np.abs(ref["w"] - w))),
        "w_scale": float(np.max(np.abs(w))),
    }
    _add_ratios(row)
    log(f"[drjax bench]   {_short(row)}")
    rows.append(row)
  _add_baseline_ratios(rows)
  return rows


def _add_baseline_ratios(rows):
  """``ratio_over_baseline``: ``{"baseline", "drjax", "drjax_jit", "numpy"}`` warm-minimum ratios
  of each ``BASELINE`` agent over its counterpart in ``rows`` (one (N, anchors)); None when the
  counterpart was not run."""
  by_agent = {r["agent"]: r for r in rows}
  for r in rows:
    base = by_agent.get(BASELINE.get(r["agent"]))
    if base is None:
      r["ratio_over_baseline"] = None
      continue
    r["ratio_over_baseline"] = {"baseline": base["agent"], **{
        k: _ratio(r[k]["warm_min_s"], base[k]["warm_min_s"])
        for k in ("drjax", "drjax_jit", "numpy")}}


def _add_ratios(row):
  d, n = row["drjax"], row["numpy"]
  row["ratio_numpy_over_drjax"] = _ratio(n["warm_min_s"], d["warm_min_s"])
  row["ratio_numpy_over_drjax_median"] = _ratio(n["warm_median_s"], d["warm_median_s"])
  row["ratio_published_over_drjax"] = _ratio(row.get("published_s"), d["warm_min_s"])


def _short(row) -> str:
  d, n = row["drjax"], row["numpy"]
  return (f"drjax {d['warm_min_s']:.4f}/{d['warm_median_s']:.4f} s (min/median, first "
          f"{d['first_s']:.2f} s, compile {d['compile_s']:.2f} s), numpy "
          f"{n['warm_min_s']:.4f}/{n['warm_median_s']:.4f} s, numpy/drjax "
          f"{row['ratio_numpy_over_drjax']:.2f}, max |dw| {row['max_abs_w_diff']:.2e}")


# ---------------------------------------------------------------------------------------------
# Linear MDP: 1,000 seeds x 100 trajectories


def linear_rows(seeds: int = LINEAR["seeds"], *, reps: int = 3,
                min_time_s: float = MIN_TIME_S, log=print) -> list[dict]:
  """The pipeline (collection + fit + 21 exact target values) and the fit alone, drjax vs NumPy
  on the same ``seeds`` datasets."""
  from drjax import data, evaluate  # pylint: disable=g-import-not-at-top
  from drjax.agents import registry  # pylint: disable=g-import-not-at-top
  from drjax.train import make_fit  # pylint: disable=g-import-not-at-top

  N = LINEAR["trajectories"]
  env = drjax.LinearMDP()
  params = env.make_params(xi_norm=LINEAR["xi_norm"])
  agent = registry.make("drpvi", env)
  rho = np.zeros((env.horizon, env.feature_dim))
  rho[0, 3] = LINEAR["rho_04"]
  kw = {"rho": rho, "beta": LINEAR["beta"], "lam": LINEAR["lam"]}
  hp = registry.make_hparams("drpvi", env, **kw)
  targets = env.target_params(params, jnp.linspace(0.0, 1.0, LINEAR["targets"]))
  fit_run = make_fit(env, agent, N)

  def one(k):
    out = fit_run(k, hp, params)
    values = jax.vmap(lambda p: evaluate.target_value(env, agent, out.final_qf, p))(targets)
    return out.final_qf, values

  pipeline = jax.jit(jax.vmap(one))
  behavior = data.uniform(env.num_actions)
  collect = jax.jit(jax.vmap(lambda k: data.collect(env, params, behavior,
                                                    jax.random.fold_in(k, 0), N)))
  model = env.model(params)
  fit_buffer = jax.jit(jax.vmap(lambda d: agent.fit(d, hp)))
  fit_stats = jax.jit(jax.vmap(lambda d: agent.fit(d, hp, model=model)))

  key_sets = [jax.random.split(jax.random.key(r), seeds) for r in range(MAX_REPS + 1)]
  calls = iter(range(1, 10**9))
  base = {"workload": "linear_mdp", "agent": "drpvi", "seeds": seeds, "N": N,
          "d": env.feature_dim, "H": env.horizon}

  log(f"[drjax bench] offline: linear MDP pipeline {seeds} seeds x {N} trajectories ...")
  (qf_pipe, values), first_pipe = _first(lambda: pipeline(key_sets[0]))
  # Same datasets as the pipeline's (make_fit collects with fold_in(key, 0)).
  dss, first_collect = _first(lambda: collect(key_sets[0]))
  qf_b, first_b = _first(lambda: fit_buffer(dss))
  qf_s, first_s = _first(lambda: fit_stats(dss))
  nds = npo.from_drjax(dss)
  per_seed = [npo.NpDataset(*(x[b] for x in nds)) for b in range(seeds)]

  # NumPy with 1 BLAS thread (d = 4: OpenBLAS has nothing to parallelize, and its second thread
  # stalls on a busy machine).
  numpy_loop = numpy_call(lambda: [npo.drpvi(d1, **kw)["w"] for d1 in per_seed], 1)
  numpy_batched = numpy_call(lambda: npo.drpvi(nds, **kw)["w"], 1)

  t0 = time.perf_counter()
  w_loop = np.stack(numpy_loop())
  loop_first = time.perf_counter() - t0
  t0 = time.perf_counter()
  w_batched = numpy_batched()
  batched_first = time.perf_counter() - t0
  log("[drjax bench] offline: linear MDP warm timings ...")
  warm = _interleaved({
      "pipeline": lambda: pipeline(key_sets[next(calls) % len(key_sets)]),
      "fit_buffer": lambda: fit_buffer(dss),
      "fit_stats": lambda: fit_stats(dss),
      "numpy_loop": numpy_loop,
      "numpy_batched": numpy_batched,
  }, reps, min_time_s=min_time_s)
  w_b = np.asarray(qf_b.w)
  diff_loop = float(np.max(np.abs(w_loop - w_b)))
  diff_batched = float(np.max(np.abs(w_batched - w_b)))
  dtype = str(nds.phi.dtype)
  rows = [
      {**base, "program": "pipeline", "what": (
          f"jit(vmap(make_fit + {LINEAR['targets']} exact target values)): collection, fit "
          "(sufficient statistics, exact m), evaluation"),
       "drjax": {**first_pipe, **warm["pipeline"]},
       "value_mean": float(np.mean(np.asarray(values))), "dtype": dtype},
      {**base, "program": "fit_buffer", "what": "jit(vmap(agent.fit)): buffer form, m = data min",
       "drjax": {**first_b, **warm["fit_buffer"]}, "dtype": dtype},
      {**base, "program": "fit_stats", "what": "jit(vmap(agent.fit(model=...))): sufficient "
       "statistics, exact m (what make_fit runs)",
       "drjax": {**first_s, **warm["fit_stats"]}, "dtype": dtype},
      {**base, "program": "numpy_loop", "what": "NumPy fit, Python loop over the seeds",
       "numpy": {"first_s": loop_first, **warm["numpy_loop"]},
       "max_abs_w_diff": diff_loop, "dtype": dtype},
      {**base, "program": "numpy_batched", "what": "NumPy fit, batched over the seeds",
       "numpy": {"first_s": batched_first, **warm["numpy_batched"]},
       "max_abs_w_diff": diff_batched, "dtype": dtype},
  ]
  fit_min = warm["fit_buffer"]["warm_min_s"]
  for r in rows:
    t = (r.get("drjax") or r.get("numpy"))["warm_min_s"]
    r["ratio_over_drjax_fit_buffer"] = _ratio(t, fit_min)
  rows[0]["collect_first"] = first_collect
  rows[0]["under_1s"] = warm["pipeline"]["warm_min_s"] < 1.0
  for r in rows:
    t = r.get("drjax") or r.get("numpy")
    log(f"[drjax bench]   {r['program']}: {t['warm_min_s']:.4f}/{t['warm_median_s']:.4f} s "
        f"(min/median), vs drjax fit {r['ratio_over_drjax_fit_buffer']:.2f}")
  return rows


# ---------------------------------------------------------------------------------------------


def offline(quick: bool = False, *, full: bool = False, reps: int = 3, log=print) -> list[dict]:
  """All rows (put option, then linear MDP). ``quick``: N = 50 and 10 seeds (a smoke test);
  ``full``: the whole put-option grid (N = 1k/5k/10k at 30 anchors, 30/60/120 anchors at 1k)."""
  t_start = time.perf_counter()
  log_ = log
  log = lambda m: log_(f"{m} [{time.perf_counter() - t_start:.0f} s]")  # noqa: E731
  grid = PUT_GRID_QUICK if quick else (PUT_GRID_FULL if full else PUT_GRID_DEFAULT)
  min_time = 0.0 if quick else MIN_TIME_S
  reps = 2 if quick else reps
  rows = []
  for n, anchors in grid:
    rows += put_rows(n, anchors, reps=reps, min_time_s=min_time, log=log)
  rows += linear_rows(LINEAR_QUICK_SEEDS if quick else LINEAR["seeds"], reps=reps,
                      min_time_s=min_time, log=log)
  return rows


def _f(x, nd=4):
  if x is None:
    return "-"
  if isinstance(x, bool):
    return "yes" if x else "no"
  if abs(x) >= 100:
    return f"{x:,.0f}"
  if 0 < abs(x) < 1e-3:
    return f"{x:.1e}"
  return f"{x:.{nd}g}"


def markdown(rows) -> str:
  """Markdown tables of ``offline``'s rows."""
  put = [r for r in rows if r["workload"] == "put_option"]
  lin = [r for r in rows if r["workload"] == "linear_mdp"]
  out = []
  if put:
    out += [
        f"Put option (H = {put[0]['H']}, A = 2, behavior always-hold, beta 0.1, lambda 1, rho "
        f"0.1; {put[0]['dtype']}): ONE `agent.fit` call, warm seconds min / median (drjax entry "
        "point incl. host checks; jit: the same fit under `jax.jit`); NumPy with 1 OpenBLAS "
        f"thread and with its default ({put[0]['numpy_default']['blas_threads']}); NumPy / drjax "
        "= the faster NumPy minimum over drjax's minimum; compile = JAX trace + lower + compile "
        "seconds in drjax's first call; published = " + PUBLISHED_SOURCE + "; R2PVI "
        f"regularization weight {PUT_HP['reg_weight']:g}, DRVI-L KL radius {PUT_HP['rho']:g}; vs "
        "baseline = the agent's warm minimum over its counterpart's at the same N and anchors "
        "(R2PVI-TV / -KL over PEVI, R2PVI-chi2 and DRVI-L over DRPVI), drjax / drjax jit / NumPy.",
        "",
        "| agent | N | anchors (d) | drjax s min / med | drjax jit s min | NumPy 1 thr s min / med "
        "| NumPy default thr s min / med | NumPy / drjax | published s | published / drjax | "
        "vs baseline | first call s | compile s | max abs w diff |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in put:
      d, j, n1, nd = r["drjax"], r["drjax_jit"], r["numpy_1thread"], r["numpy_default"]
      b = r.get("ratio_over_baseline")
      vs = "-" if not b else (f"{b['baseline']}: {_f(b['drjax'], 3)} / {_f(b['drjax_jit'], 3)} / "
                              f"{_f(b['numpy'], 3)}")
      out.append(
          f"| {r['agent']} | {r['N']:,} | {r['anchors']} ({r['d']}) | {_f(d['warm_min_s'])} / "
          f"{_f(d['warm_median_s'])} | {_f(j['warm_min_s'])} | {_f(n1['warm_min_s'])} / "
          f"{_f(n1['warm_median_s'])} | {_f(nd['warm_min_s'])} / {_f(nd['warm_median_s'])} | "
          f"{_f(r['ratio_numpy_over_drjax'], 3)} | "
          f"{_f(r['published_s'])} | {_f(r['ratio_published_over_drjax'], 3)} | {vs} | "
          f"{_f(d['first_s'], 3)} | {_f(d['compile_s'], 3)} | {_f(r['max_abs_w_diff'], 2)} |")
  if lin:
    r0 = lin[0]
    out += [
        "",
        f"Linear MDP (H = {r0['H']}, d = {r0['d']}, A = 16, xi_norm {LINEAR['xi_norm']}), DRPVI, "
        f"rho_1,4 = {LINEAR['rho_04']}, beta {LINEAR['beta']}, lambda {LINEAR['lam']}, "
        f"{r0['seeds']:,} seeds x {r0['N']} trajectories ({r0['dtype']}); ratios to the drjax "
        "fit alone (buffer form, the NumPy algorithm). Pipeline warm under 1 s: "
        f"{_f(r0.get('under_1s'))}. NumPy with 1 OpenBLAS thread.", "",
        "| program | s min / med | / drjax fit | first call s | compile s | max abs w diff |",
        "|---|---|---|---|---|---|"]
    for r in lin:
      t = r.get("drjax") or r.get("numpy")
      out.append(
          f"| {r['program']}: {r['what']} | {_f(t['warm_min_s'])} / {_f(t['warm_median_s'])} | "
          f"{_f(r['ratio_over_drjax_fit_buffer'], 3)} | {_f(t['first_s'], 3)} | "
          f"{_f(t.get('compile_s'), 3)} | {_f(r.get('max_abs_w_diff'), 2)} |")
  return "\n".join(out).strip("\n")


if __name__ == "__main__":
  import argparse  # pylint: disable=g-import-not-at-top
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--quick", action="store_true")
  ap.add_argument("--full", action="store_true")
  ap.add_argument("--reps", type=int, default=3)
  ns = ap.parse_args()
  res = offline(ns.quick, full=ns.full, reps=ns.reps,
                log=lambda m: print(m, file=sys.stderr, flush=True))
  print(markdown(res))
