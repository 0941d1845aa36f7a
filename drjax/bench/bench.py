"""Speed benchmarks of drjax (``drjax bench``, ``python -m drjax.bench``, ``python benchmarks/run.py`` in a checkout).

Four benchmarks, one function each; each returns a dict (JSON-able) and ``main`` prints them as
markdown tables:

* ``reproduce_all`` -- wall time of ``drjax reproduce all`` in a fresh process (cold: every
  program is traced and compiled; no persistent compilation cache), compared with the ~23 minutes
  the authors' NumPy notebooks take for the same 12 panels (their reported numbers, quoted from
  ``shared/notes/reference-implementation.md``; their code is not run here); plus, in-process, the
  compile share of each experiment family: first call (compile + run) vs second call (another
  PRNG key, same shapes).
* ``seed_scaling`` -- ``jit(vmap(make_train(...)))`` of DR-LSVI-UCB on the linear MDP (K = 100,
  rho_{1,4} = 0.5, beta = 1, lambda = 0.1) over 20 ... 2,000 seeds, and LSVI-UCB at 400 seeds.
* ``alpha_max`` -- the inner maximization over alpha alone: ``robust.alpha_max_exact`` vs
  ``robust.alpha_max_grid`` (G = 100, 1,000), d = 20, vmapped over a batch of 64 problems.
* ``hyperparameter_grid`` -- ``drjax.sweep`` over rho x beta x lambda x seeds in one compiled
  call; a second call with different values of the same shapes must not retrace or recompile.

The machines this runs on are shared, so every benchmark records the load average and the cores
other processes kept busy (``/proc/stat``, sampled while the benchmark sleeps) at its start and
end, and the average number of cores other processes kept busy *during* it (all busy CPU time
minus this process's own). A full run waits for a quiet machine before each benchmark and reruns
a benchmark once when others were busy during it, keeping the least disturbed attempt. Warm
timings are the minimum over repeats (robust to interference); the medians are recorded too.
"""

from __future__ import annotations

# Before JAX initializes its CPU backend: drjax's XLA flags (single-threaded Eigen: vmapped scans
# hang without it on 2-core machines; fast compiles). See drjax/_xla.py.
from drjax import _xla  # noqa: I001  isort: skip

_xla.configure()

import contextlib  # noqa: E402
import functools  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import resource  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

# The authors' NumPy notebooks (not run here; numbers from shared/notes/reference-implementation.md,
# measured on a 2-core machine like ours with Python 3.11 and NumPy 2.x).
REFERENCE = {
    "linear_mdp_panel_s": 114.0,  # one (xi_norm, rho) panel: 20 seeds x 2 algorithms x K = 100
    "put_option_rho_s": 113.0,    # one rho: 10 seeds x 2 algorithms x K = 100, 29 x 100 tests
    "linear_mdp_panels": 9,       # Figure 1 + its ablation (3 xi_norm x 3 rho)
    "put_option_panels": 3,       # Figure 2 (3 rho)
    "all_s": 23 * 60.0,           # all 12 panels of Figures 1-3: "about 23 minutes"
    "source": ("the authors' NumPy/SciPy notebooks as measured on a 2-core machine (Python 3.11, "
               "NumPy 2.x); quoted from shared/notes/reference-implementation.md, not run here"),
}
REFERENCE["linear_mdp_s"] = REFERENCE["linear_mdp_panel_s"] * REFERENCE["linear_mdp_panels"]
REFERENCE["put_option_s"] = REFERENCE["put_option_rho_s"] * REFERENCE["put_option_panels"]

DISTURBED_CORES = 0.25  # other processes' average busy cores above which a full run reruns
LOAD_SAMPLE_S = 0.5  # seconds of /proc/stat sampling for ``cores_busy`` at a benchmark's ends

# ---------------------------------------------------------------------------------------------
# Machine, load and compile accounting


from drjax.bench.machine import (  # noqa: E402,F401
    _cpu_model, _num_cores, machine_info, short_machine_name)
from drjax.bench.compiles import CompileStats, count_compiles  # noqa: E402,F401



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


# ---------------------------------------------------------------------------------------------
# 1. reproduce all


def _drjax_command() -> list[str]:
  script = os.path.join(os.path.dirname(sys.executable), "drjax")
  if os.path.exists(script):
    return [script]
  found = shutil.which("drjax")
  return [found] if found else [sys.executable, "-m", "drjax.cli"]


def cold_env() -> dict:
  """Environment of the cold subprocess: no persistent compilation cache of any kind."""
  env = dict(os.environ)
  env.pop("JAX_COMPILATION_CACHE_DIR", None)
  env["DRJAX_NO_CACHE"] = "1"
  env["JAX_ENABLE_COMPILATION_CACHE"] = "false"
  return env


@_benchmark
def reproduce_all(quick: bool = False, *, seeds: int | None = None, episodes: int | None = None,
                  test_episodes: int | None = None, subprocess_run: bool = True,
                  preset: str = "paper", timeout_s: float = 3600.0,
                  in_process: bool = True) -> dict:
  """``drjax reproduce all`` cold in a subprocess, and each family's compile share in-process.

  Args:
    quick: small sizes (2 seeds, 10 episodes, 10 test episodes) unless given explicitly.
    seeds, episodes, test_episodes: override the sizes (``None``: the paper's, or quick's).
    subprocess_run: run the CLI in a fresh process (skipped when False).
    preset: ``paper`` or ``notebook``.
    timeout_s: subprocess timeout.
  """
  from drjax.paper import programs as paper  # pylint: disable=g-import-not-at-top

  if quick:
    seeds, episodes, test_episodes = seeds or 2, episodes or 10, test_episodes or 10
  lin_seeds = seeds or paper.DEFAULT_SEEDS["linear-mdp"]
  put_seeds = seeds or paper.DEFAULT_SEEDS["put-option"]
  episodes = episodes or 100
  test_episodes = test_episodes or 100
  paper_sizes = (seeds is None and episodes == 100 and test_episodes == 100)
  config = {"preset": preset, "seeds_linear_mdp": lin_seeds, "seeds_put_option": put_seeds,
            "episodes": episodes, "test_episodes": test_episodes, "paper_sizes": paper_sizes}
  res = {"config": config, "reference": dict(REFERENCE)}

  sub = None
  if subprocess_run:
    with tempfile.TemporaryDirectory(prefix="drjax-bench-") as tmp:
      out_dir = os.path.join(tmp, "out")
      cmd = _drjax_command() + ["reproduce", "all", "--out", out_dir, "--quiet",
                                "--preset", preset]
      if seeds is not None:
        cmd += ["--seeds", str(seeds)]
      if not paper_sizes:
        cmd += ["--episodes", str(episodes), "--test-episodes", str(test_episodes)]
      ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
      t0 = time.perf_counter()
      proc = subprocess.run(cmd, env=cold_env(), capture_output=True, text=True,
                            timeout=timeout_s, check=False)
      wall = time.perf_counter() - t0
      ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
      ok = proc.returncode == 0 and os.path.exists(os.path.join(out_dir, "results.md"))
      shown = [os.path.basename(cmd[0])] + cmd[1:]
      sub = {
          "command": " ".join(shown).replace(out_dir, "<tmpdir>"),
          "env": {"DRJAX_NO_CACHE": "1", "JAX_COMPILATION_CACHE_DIR": None,
                  "JAX_ENABLE_COMPILATION_CACHE": "false"},
          "returncode": proc.returncode,
          "ok": ok,
          "wall_s": _r(wall),
          "cpu_s": _r((ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)),
          "speedup_vs_notebooks": _ratio(REFERENCE["all_s"], wall, 1) if paper_sizes and ok
                                  else None,
      }
      if not ok:
        sub["stderr_tail"] = proc.stderr[-2000:]
  res["subprocess"] = sub
  if not in_process:  # the default `drjax bench` run: the cold command only (3-minute budget)
    res["families"] = {}
    res["in_process"] = None
    return res

  pre = paper.PRESETS[preset]
  families = {}
  runs = {
      "linear-mdp": (lambda key: paper.run_linear_mdp(pre, seeds=lin_seeds, episodes=episodes,
                                                      key=key),
                     REFERENCE["linear_mdp_s"]),
      "put-option": (lambda key: paper.run_put_option(pre, seeds=put_seeds, episodes=episodes,
                                                      key=key, test_episodes=test_episodes),
                     REFERENCE["put_option_s"]),
  }
  keys = [jax.random.PRNGKey(i) for i in (11, 12)]
  _block(keys)
  for name, (run, ref_s) in runs.items():
    with count_compiles() as cold_stats:
      t0 = time.perf_counter()
      run(keys[0])  # returns host NumPy arrays (device_get inside)
      cold = time.perf_counter() - t0
    with count_compiles() as warm_stats:
      t0 = time.perf_counter()
      run(keys[1])
      warm = time.perf_counter() - t0
    families[name] = {
        "cold_s": _r(cold),
        "warm_s": _r(warm),
        "compile_share": _ratio(max(0.0, cold - warm), cold),
        "compile_s_measured": _r(cold_stats.total_s),
        "compile_share_measured": _ratio(min(cold, cold_stats.total_s), cold),
        "cold_compiles": cold_stats.compiles,
        "warm_compiles": warm_stats.compiles,
        "reference_s": ref_s if paper_sizes else None,
        "speedup_cold": _ratio(ref_s, cold, 1) if paper_sizes else None,
        "speedup_warm": _ratio(ref_s, warm, 1) if paper_sizes else None,
    }
  res["families"] = families
  cold_total = sum(f["cold_s"] for f in families.values())
  warm_total = sum(f["warm_s"] for f in families.values())
  res["in_process"] = {
      "cold_s": _r(cold_total), "warm_s": _r(warm_total),
      "compile_share": _ratio(max(0.0, cold_total - warm_total), cold_total),
      "speedup_cold": _ratio(REFERENCE["all_s"], cold_total, 1) if paper_sizes else None,
      "speedup_warm": _ratio(REFERENCE["all_s"], warm_total, 1) if paper_sizes else None,
  }
  return res


# ---------------------------------------------------------------------------------------------
# 2. seed scaling


def _linear_setup(agent_name: str, episodes: int):
  from drjax.agents.base import make_hparams, rho_array  # pylint: disable=g-import-not-at-top
  from drjax.agents.lsvi import dr_lsvi_ucb, lsvi_ucb  # pylint: disable=g-import-not-at-top
  from drjax.envs.linear_mdp import LinearMDP  # pylint: disable=g-import-not-at-top

  env = LinearMDP()
  H, d, A = env.horizon, env.feature_dim, env.num_actions
  params = env.make_params(delta=0.3, p=0.001, xi_norm=0.1)
  if agent_name == "DR-LSVI-UCB":
    agent = dr_lsvi_ucb(H, d, A, episodes)
    hp = make_hparams(H, d, rho=rho_array(H, d, 0.5, at=[(0, 3)]), beta=1.0, lam=0.1)
  else:
    agent = lsvi_ucb(H, d, A, episodes)
    hp = make_hparams(H, d, rho=0.0, beta=1.0, lam=0.1)
  return env, params, agent, hp


def _linear_setup_model(params):
  from drjax.envs.linear_mdp import LinearMDP  # pylint: disable=g-import-not-at-top
  return LinearMDP().model(params)


def _seed_row(agent_name: str, num_seeds: int, episodes: int, warm_reps: int) -> dict:
  from drjax.train import make_train  # pylint: disable=g-import-not-at-top

  env, params, agent, hp = _linear_setup(agent_name, episodes)
  train = make_train(env, agent, episodes)
  traces = [0]

  def counted(key, hparams, env_params):
    traces[0] += 1
    return train(key, hparams, env_params)

  fn = jax.jit(jax.vmap(counted, in_axes=(0, None, None)))
  keys = [jax.random.split(jax.random.PRNGKey(100 + i), num_seeds) for i in range(warm_reps + 1)]
  _block(keys)
  with count_compiles() as first_stats:
    first, out = _timed(fn, keys[0], hp, params)
  returns = np.asarray(out.returns)
  with count_compiles() as warm_stats:
    warm, warm_med, reps = _repeat(fn, [(k, hp, params) for k in keys[1:]], min_reps=warm_reps,
                                   max_reps=max(warm_reps, 10), min_time_s=1.0)
  # One re-planning on the final (full) buffers, for all seeds: a run plans once per episode.
  model = params and _linear_setup_model(params)
  plan = jax.jit(jax.vmap(lambda st, hp: agent.plan(st, hp, model), in_axes=(0, None)))
  _block(plan(out.state, hp))
  plan_s, _, _ = _repeat(plan, [(out.state, hp)], min_reps=3, max_reps=20, min_time_s=0.3)
  return {
      "algorithm": agent_name,
      "seeds": num_seeds,
      "episodes": episodes,
      "first_s": _r(first),
      "warm_s": _r(warm),
      "warm_median_s": _r(warm_med),
      "warm_reps": reps,
      "ms_per_seed": _r(1e3 * warm / num_seeds),
      "plan_full_ms": _r(1e3 * plan_s),
      "plan_share": _ratio(episodes * plan_s, warm, 3),
      "traces": traces[0],
      "first_compiles": first_stats.compiles,
      "warm_compiles": warm_stats.compiles,
      "mean_return": _r(returns.mean()),
      "finite": bool(np.all(np.isfinite(returns))),
  }


@_benchmark
def seed_scaling(quick: bool = False, *, seeds=None, lsvi_seeds=None, episodes: int = 100,
                 warm_reps: int = 3) -> dict:
  """``jit(vmap(make_train))`` over seeds: first call (compile + run) and warm time per seed count.

  DR-LSVI-UCB on the linear MDP (xi_norm = 0.1, rho_{1,4} = 0.5, beta = 1, lambda = 0.1) for each
  count in ``seeds``, LSVI-UCB (beta = 1, lambda = 0.1) at ``lsvi_seeds``. Each row uses a fresh
  ``jax.jit``, so its first call traces and compiles. Each row also times one vmapped
  ``agent.plan`` on the final (full) buffers: a run re-plans on its whole buffer once per episode,
  so ``episodes x plan / warm`` estimates the planning share of a run.
  """
  if seeds is None:
    seeds = (20, 100) if quick else (20, 100, 400, 2000)
  if lsvi_seeds is None:
    lsvi_seeds = 100 if quick else 400
  rows = [_seed_row("DR-LSVI-UCB", int(n), episodes, warm_reps) for n in seeds]
  if lsvi_seeds:
    rows.append(_seed_row("LSVI-UCB", int(lsvi_seeds), episodes, warm_reps))
  return {"config": {"env": "linear-mdp", "xi_norm": 0.1, "rho_1_4": 0.5, "beta": 1.0,
                     "lambda": 0.1, "episodes": episodes, "alpha": "exact",
                     "program": "jax.jit(jax.vmap(make_train(...), in_axes=(0, None, None)))"},
          "rows": rows}


# ---------------------------------------------------------------------------------------------
# 3. alpha maximization


def _alpha_problems(key, batch: int, num_samples: int, d: int, horizon: float, lam: float):
  """A batch of realistic problems: ridge operators of random simplex features, v in [0, H]."""
  return _block(_alpha_problems_jit(key, batch, num_samples, d, horizon, lam))


@functools.partial(jax.jit, static_argnums=(1, 2, 3))
def _alpha_problems_jit(key, batch, num_samples, d, horizon, lam):
  from drjax import robust  # pylint: disable=g-import-not-at-top

  k1, k2, k3 = jax.random.split(key, 3)
  e = jax.random.exponential(k1, (batch, num_samples, d))
  phi = e / jnp.sum(e, axis=-1, keepdims=True)  # Dirichlet(1, ..., 1) rows
  mask = jnp.ones((batch, num_samples), bool)
  _, M = jax.vmap(robust.ridge_operator, in_axes=(0, 0, None))(phi, mask, lam)
  v = jax.random.uniform(k2, (batch, num_samples), M.dtype, 0.0, horizon)
  rho = jax.random.uniform(k3, (batch, d), M.dtype)
  return M, v, rho


@_benchmark
def alpha_max(quick: bool = False, *, sizes=None, grids=(100, 1000), d: int = 20,
              batch: int = 64, horizon: float = 10.0, lam: float = 0.1) -> dict:
  """Exact vs grid maximization of ``z_i(alpha) - rho_i alpha`` over ``[0, H]`` (kernel alone).

  For each K in ``sizes``: ``jit(vmap(alpha_max_exact))`` and ``jit(vmap(alpha_max_grid))`` for
  each G in ``grids`` on the same batch; warm milliseconds per call (the whole batch), the
  largest shortfall of the grid maximum below the exact one (>= 0 up to rounding), its
  Lipschitz bound ``(H / (G - 1) / 2) * (sum_tau |M_i,tau| + rho_i)``, and the largest
  difference between ``alpha_max_grid(..., include_exact=True)`` and the exact maximum.
  """
  from drjax import robust  # pylint: disable=g-import-not-at-top

  if sizes is None:
    sizes = (100, 1000) if quick else (100, 1000, 10000)
  rows = []
  for K in sizes:
    M, v, rho = _alpha_problems(jax.random.PRNGKey(K), batch, int(K), d, horizon, lam)
    M2, v2, rho2 = _alpha_problems(jax.random.PRNGKey(K + 1), batch, int(K), d, horizon, lam)
    exact = jax.jit(jax.vmap(lambda m, vv, r: robust.alpha_max_exact(m, vv, r, horizon)))
    first, (nu_exact, _) = _timed(exact, M, v, rho)
    warm, warm_med, reps = _repeat(exact, [(M, v, rho), (M2, v2, rho2)])
    rows.append({"K": int(K), "method": "exact", "G": None, "first_s": _r(first),
                 "ms_per_call": _r(1e3 * warm), "ms_median": _r(1e3 * warm_med),
                 "reps": reps, "max_err": 0.0, "min_err": 0.0, "err_bound": 0.0,
                 "include_exact_max_diff": None})
    nu_exact = np.asarray(nu_exact, np.float64)
    lip = np.asarray(jnp.sum(jnp.abs(M), axis=-1) + rho, np.float64)  # [B, d]
    scale = max(1.0, float(np.abs(nu_exact).max()))
    for G in grids:
      pts = robust.make_grid(horizon, int(G), dtype=M.dtype)
      grid = jax.jit(jax.vmap(
          lambda m, vv, r, pts=pts: robust.alpha_max_grid(m, vv, r, horizon, pts)))
      both = jax.jit(jax.vmap(
          lambda m, vv, r, pts=pts: robust.alpha_max_grid(m, vv, r, horizon, pts,
                                                          include_exact=True)))
      first, (nu_grid, _) = _timed(grid, M, v, rho)
      warm, warm_med, reps = _repeat(grid, [(M, v, rho), (M2, v2, rho2)])
      nu_both = np.asarray(both(M, v, rho)[0], np.float64)
      err = nu_exact - np.asarray(nu_grid, np.float64)
      bound = (horizon / (G - 1) / 2) * lip
      eps = 1e-4 * scale if M.dtype == jnp.float32 else 1e-10 * scale  # rounding
      rows.append({
          "K": int(K), "method": f"grid G={G}", "G": int(G), "first_s": _r(first),
          "ms_per_call": _r(1e3 * warm), "ms_median": _r(1e3 * warm_med), "reps": reps,
          "max_err": float(err.max()), "min_err": float(err.min()),
          "err_bound": float(bound.max()),
          "within_bound": bool(np.all(err <= bound + eps)),
          "include_exact_max_diff": float(np.abs(nu_both - nu_exact).max()),
      })
    exact_ms = rows[-1 - len(grids)]["ms_per_call"]
    for row in rows[-len(grids):]:
      row["vs_exact"] = _ratio(row["ms_per_call"], exact_ms, 3)
  return {"config": {"d": d, "batch": batch, "horizon": horizon, "lambda": lam,
                     "dtype": str(jnp.result_type(float)),
                     "data": "M = ridge_operator(Dirichlet(1, ..., 1) features, lambda); v ~ U[0, H]; "
                             "rho ~ U[0, 1]^d"},
          "rows": rows}


# ---------------------------------------------------------------------------------------------
# 4. hyperparameter grid


def _grid_hparams(H, d, rhos, betas, lams):
  from drjax.agents.base import make_hparams, rho_array  # pylint: disable=g-import-not-at-top

  rho = np.stack([rho_array(H, d, r, at=[(0, 3)]) for r in rhos])[:, None, None]  # [R,1,1,H,d]
  beta = np.asarray(betas, np.float64)[None, :, None]  # [1, B, 1]
  lam = np.asarray(lams, np.float64)[None, None, :]  # [1, 1, L]
  return make_hparams(H, d, rho=rho, beta=beta, lam=lam)


@_benchmark
def hyperparameter_grid(quick: bool = False, *, shape=None, seeds: int | None = None,
                        episodes: int = 100) -> dict:
  """``drjax.sweep`` over rho_{1,4} x beta x lambda x seeds: one compilation for the whole grid.

  The second call uses different values of every hyperparameter (and another key) with the same
  shapes; it must neither retrace nor recompile (counted with ``jax.monitoring`` events).
  """
  import drjax  # pylint: disable=g-import-not-at-top

  if shape is None:
    shape = (3, 2, 2) if quick else (5, 4, 3)
  if seeds is None:
    seeds = 10 if quick else 20
  n_rho, n_beta, n_lam = shape
  env, params, agent, _ = _linear_setup("DR-LSVI-UCB", episodes)
  H, d = env.horizon, env.feature_dim
  values = [
      (np.linspace(0.1, 0.5, n_rho), np.linspace(0.5, 2.0, n_beta), np.geomspace(0.05, 1.0, n_lam)),
      (np.linspace(0.15, 0.6, n_rho), np.linspace(0.25, 1.5, n_beta), np.geomspace(0.1, 2.0, n_lam)),
  ]
  calls = []
  outs = []
  for i, (rhos, betas, lams) in enumerate(values):
    hp = _grid_hparams(H, d, rhos, betas, lams)
    key = jax.random.PRNGKey(1000 + i)
    with count_compiles() as stats:
      dt, out = _timed(lambda hp=hp, key=key: drjax.sweep(
          env, params, agent, key, num_seeds=seeds, num_episodes=episodes, hparams=hp))
    outs.append(np.asarray(out.returns))
    calls.append({"s": _r(dt), **stats.as_dict(),
                  "rho_1_4": [float(x) for x in rhos], "beta": [float(x) for x in betas],
                  "lambda": [float(x) for x in lams]})
  settings = n_rho * n_beta * n_lam
  runs = settings * seeds
  first, second = calls
  return {
      "config": {"env": "linear-mdp", "grid": list(shape), "settings": settings, "seeds": seeds,
                 "runs": runs, "episodes": episodes, "alpha": "exact"},
      "first": first,
      "second": second,
      "returns_shape": list(outs[0].shape),
      "outputs_differ": bool(not np.array_equal(outs[0], outs[1])),
      "finite": bool(np.all(np.isfinite(outs[0])) and np.all(np.isfinite(outs[1]))),
      "ms_per_run_warm": _r(1e3 * second["s"] / runs),
      "no_recompile": second["traces"] == 0 and second["compiles"] == 0,
  }


# ---------------------------------------------------------------------------------------------
# Report


def _fmt(x, nd=3):
  if x is None:
    return "-"
  if isinstance(x, bool):
    return "yes" if x else "no"
  if isinstance(x, int):
    return f"{x:,}"
  if isinstance(x, float):
    if x == 0:
      return "0"
    if abs(x) >= 100:
      return f"{x:,.0f}"
    if abs(x) < 1e-3:
      return f"{x:.2e}"
    return f"{x:.{nd}g}" if abs(x) < 1 else f"{x:.{nd + 1}g}"
  return str(x)


def _table(header, rows) -> str:
  lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
  lines += ["| " + " | ".join(_fmt(c) for c in row) + " |" for row in rows]
  return "\n".join(lines)


def _load_line(res) -> str:
  s, e = res.get("load_start", {}), res.get("load_end", {})
  n = len(res.get("attempts", [])) or 1
  return (f"_load average start {s.get('loadavg')} / end {e.get('loadavg')}; cores busy by "
          f"other processes: {_fmt(s.get('cores_busy'))} before, "
          f"{_fmt(res.get('others_cores_busy'))} on average during, "
          f"{_fmt(e.get('cores_busy'))} after; benchmark wall {_fmt(res.get('wall_s'))} s"
          + (f"; kept the least disturbed of {n} attempts" if n > 1 else "") + "_")


def format_report(results: dict) -> str:
  """Markdown report of ``main``'s result dict."""
  m = results["machine"]
  out = [f"# drjax benchmarks ({'quick' if results.get('quick') else 'full'})", "",
         f"Machine `{m['name']}`: {m['cpu_model']}, {m['cores']} cores, {m['memory_gib']} GiB; "
         f"Python {m['python']}, jax {m['jax']}, jaxlib {m['jaxlib']}, numpy {m['numpy']}; "
         f"backend {m['backend']}; default float {m['default_float']}; "
         f"XLA_FLAGS=`{m['XLA_FLAGS']}`. Started {results.get('started')}."]
  b = results["benchmarks"]
  if "engine" in b:
    out += ["", "## engine (drjax vs NumPy, same process, interleaved, median warm)", "",
            b["engine"]["markdown"], "", _load_line(b["engine"])]
  if "offline" in b:
    out += ["", "## offline (drjax agent.fit vs vectorized NumPy, same process, interleaved, "
            "warm min / median)", "", b["offline"]["markdown"], "", _load_line(b["offline"])]
  if "reproduce_all" in b:
    r = b["reproduce_all"]
    c = r["config"]
    out += ["", "## reproduce_all", "",
            f"Sizes: {c['seeds_linear_mdp']} seeds (linear MDP), {c['seeds_put_option']} seeds "
            f"(put option), K = {c['episodes']}, {c['test_episodes']} test episodes, preset "
            f"`{c['preset']}`. Notebooks: {REFERENCE['source']}."]
    sub = r.get("subprocess")
    if sub:
      out += ["", _table(
          ["command (fresh process, no compilation cache)", "ok", "wall s", "CPU s",
           "notebooks s", "speedup"],
          [[f"`{sub['command']}`", sub["ok"], sub["wall_s"], sub["cpu_s"],
            REFERENCE["all_s"] if c["paper_sizes"] else None, sub["speedup_vs_notebooks"]]])]
    rows = [[name, f["cold_s"], f["warm_s"], f["compile_share"], f["compile_s_measured"],
             f["cold_compiles"], f["warm_compiles"], f["reference_s"], f["speedup_cold"],
             f["speedup_warm"]] for name, f in r["families"].items()]
    ip = r["in_process"] or {}
    if ip:
      rows.append(["both", ip["cold_s"], ip["warm_s"], ip["compile_share"], None, None, None,
                   REFERENCE["all_s"] if c["paper_sizes"] else None, ip["speedup_cold"],
                   ip["speedup_warm"]])
    out += ["", _table(["family (in-process)", "cold s", "warm s", "compile share",
                        "compile s (measured)", "compiles cold", "compiles warm",
                        "notebooks s", "speedup cold", "speedup warm"], rows),
            "", _load_line(r)]
  if "seed_scaling" in b:
    r = b["seed_scaling"]
    out += ["", "## seed_scaling", "",
            f"Linear MDP, K = {r['config']['episodes']}, rho_1,4 = 0.5, beta = 1, lambda = 0.1, "
            "exact alpha; "
            "`jit(vmap(make_train))` over seeds, a fresh jit per row. Warm = min over "
            "repeats with new keys. Plan on full buffer: one `vmap(agent.plan)` over the seeds "
            "on the final buffers (a run plans once per episode; K x plan / warm estimates the "
            "planning share of a run).", "",
            _table(["algorithm", "seeds", "first call s", "warm s", "warm median s",
                    "ms / seed", "plan on full buffer ms", "K x plan / warm", "traces",
                    "compiles (first/warm)"],
                   [[x["algorithm"], x["seeds"], x["first_s"], x["warm_s"], x["warm_median_s"],
                     x["ms_per_seed"], x["plan_full_ms"], x["plan_share"], x["traces"],
                     f"{x['first_compiles']}/{x['warm_compiles']}"] for x in r["rows"]]),
            "", _load_line(r)]
  if "alpha_max" in b:
    r = b["alpha_max"]
    c = r["config"]
    out += ["", "## alpha_max", "",
            f"Kernel alone, d = {c['d']}, batch of {c['batch']} (vmap), H = {c['horizon']}, "
            f"{c['dtype']}; warm ms per call (whole batch). Error = exact max - grid max.", "",
            _table(["K", "method", "ms / call", "x exact", "max error", "error bound",
                    "exact+grid vs exact"],
                   [[x["K"], x["method"], x["ms_per_call"], x.get("vs_exact"), x["max_err"],
                     x["err_bound"], x["include_exact_max_diff"]] for x in r["rows"]]),
            "", _load_line(r)]
  if "hyperparameter_grid" in b:
    r = b["hyperparameter_grid"]
    c = r["config"]
    out += ["", "## hyperparameter_grid", "",
            f"`drjax.sweep`: rho_1,4 x beta x lambda = {' x '.join(map(str, c['grid']))} = "
            f"{c['settings']} settings x {c['seeds']} seeds = {c['runs']:,} runs of K = "
            f"{c['episodes']} in one call.", "",
            _table(["call", "s", "traces", "compiles", "compile s"],
                   [["first (new values)", r["first"]["s"], r["first"]["traces"],
                     r["first"]["compiles"], r["first"]["compile_s"]],
                    ["second (other values, same shapes)", r["second"]["s"],
                     r["second"]["traces"], r["second"]["compiles"], r["second"]["compile_s"]]]),
            "", f"Warm: {_fmt(r['ms_per_run_warm'])} ms per (setting, seed) run; no retrace/"
            f"recompile: {_fmt(r['no_recompile'])}; outputs differ: {_fmt(r['outputs_differ'])}.",
            "", _load_line(r)]
  out += ["", f"Total {_fmt(results.get('total_s'))} s."]
  return "\n".join(out)


@_benchmark
def engine_bench(quick: bool = False, *, full: bool = False, only=None, reps: int = 5) -> dict:
  """drjax's training engine vs the NumPy baselines of ``numpy_ref.py`` (``engine.py``); medians
  of ``reps`` interleaved turns, each timing the second of two back-to-back runs (see there)."""
  from drjax.bench import engine  # pylint: disable=g-import-not-at-top
  rows = engine.engine(quick, full=full, only=only, reps=reps,
                       log=lambda m: print(m, file=sys.stderr, flush=True))
  return {"workloads": rows, "full": full, "markdown": engine.markdown(rows)}


@_benchmark
def offline_bench(quick: bool = False, *, full: bool = False, reps: int = 3) -> dict:
  """drjax's offline fits (PEVI, DRPVI, VA-DRPVI, R2PVI-TV/KL/chi2, DRVI-L) vs the vectorized
  NumPy of ``drjax/bench/numpy_offline.py`` (``drjax/bench/offline.py``)."""
  from drjax.bench import offline  # pylint: disable=g-import-not-at-top
  rows = offline.offline(quick, full=full, reps=reps,
                         log=lambda m: print(m, file=sys.stderr, flush=True))
  return {"rows": rows, "full": full, "markdown": offline.markdown(rows)}


BENCHMARKS = {
    "engine": engine_bench,
    "reproduce_all": reproduce_all,
    "seed_scaling": seed_scaling,
    "alpha_max": alpha_max,
    "hyperparameter_grid": hyperparameter_grid,
    "offline": offline_bench,
}


DEFAULT_RUN = ("engine", "reproduce_all")  # under 3 minutes on 2 cores; --full runs all


def results_dir() -> str:
  """``benchmarks/results`` of the source checkout drjax runs from, else ``./bench-results``."""
  root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  checkout = os.path.join(root, "benchmarks")
  if os.path.isdir(checkout) and os.path.isfile(os.path.join(root, "pyproject.toml")):
    return os.path.join(checkout, "results")
  return os.path.abspath("bench-results")


def default_json_path() -> str:
  return os.path.join(results_dir(), f"{short_machine_name()}.json")


def main(quick: bool = False, json_path: str | None = None, *, only=None,
         quiet_wait_s: float | None = None, overrides: dict | None = None,
         max_attempts: int | None = None, full: bool = False) -> dict:
  """Runs the benchmarks, prints a markdown report and returns the results dict.

  Args:
    quick: small sizes (a smoke run of a minute or two).
    json_path: also write the results as JSON there.
    only: names of benchmarks to run (default: all, in the order of ``BENCHMARKS``).
    quiet_wait_s: before each benchmark wait up to this many seconds for other processes to
      use less than half a core (default: 120 for the full run, 0 for quick).
    overrides: ``{benchmark name: keyword arguments}`` passed to that benchmark function (sizes).
    max_attempts: run a benchmark again (up to this many times in all) when other processes kept
      ``DISTURBED_CORES`` or more cores busy on average during it; the least disturbed attempt
      is kept (default: 2 for the full run, 1 for quick).

  Returns:
    ``{"quick", "started", "machine", "benchmarks": {name: result}, "waited_s", "total_s"}``.
  """
  overrides = overrides or {}
  if jax.config.jax_enable_x64:
    print("[drjax bench] note: jax_enable_x64 is on; timings are float64", file=sys.stderr)
  if quiet_wait_s is None:
    quiet_wait_s = 30.0 if full else 0.0
  if max_attempts is None:
    max_attempts = 2 if full else 1
  if full:
    overrides.setdefault("engine", {})["full"] = True
    overrides.setdefault("offline", {})["full"] = True
  elif not quick:
    overrides.setdefault("reproduce_all", {}).setdefault("in_process", False)
  names = (list(BENCHMARKS) if full else list(DEFAULT_RUN)) if only is None else list(only)
  unknown = [n for n in names + list(overrides) if n not in BENCHMARKS]
  if unknown:
    raise ValueError(f"unknown benchmarks {unknown}; choose from {list(BENCHMARKS)}")
  t0 = time.perf_counter()
  results = {"quick": quick, "started": time.strftime("%Y-%m-%d %H:%M:%S %z"),
             "machine": machine_info(), "benchmarks": {}, "waited_s": {}}
  for name in names:
    attempts = []
    for attempt in range(max(1, max_attempts)):
      if quiet_wait_s > 0:
        results["waited_s"][name] = wait_for_quiet(max_wait_s=quiet_wait_s)
      print(f"[drjax bench] {name} ..." + (f" (rerun {attempt}: other processes were busy)"
                                          if attempt else ""), file=sys.stderr, flush=True)
      res = BENCHMARKS[name](quick, **overrides.get(name, {}))
      attempts.append(res)
      others = res.get("others_cores_busy")
      if others is None or others < DISTURBED_CORES:
        break
    best = min(attempts, key=lambda r: r.get("others_cores_busy") or 0.0)
    best["attempts"] = [{"others_cores_busy": r.get("others_cores_busy"), "wall_s": r["wall_s"],
                         "kept": r is best} for r in attempts]
    results["benchmarks"][name] = best
  results["total_s"] = round(time.perf_counter() - t0, 1)
  print(format_report(results), flush=True)
  if json_path is None and not quick:
    json_path = default_json_path()
  if json_path:
    parent = os.path.dirname(os.path.abspath(json_path))
    os.makedirs(parent, exist_ok=True)
    with open(json_path, "w") as f:
      json.dump(results, f, indent=1, default=_json_default)
      f.write("\n")
  return results


def _json_default(x):
  if isinstance(x, (np.floating, np.integer)):
    return x.item()
  if isinstance(x, np.bool_):
    return bool(x)
  if isinstance(x, float) and not math.isfinite(x):
    return None
  raise TypeError(f"not JSON serializable: {type(x)}")


if __name__ == "__main__":
  import argparse  # pylint: disable=g-import-not-at-top

  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--quick", action="store_true")
  ap.add_argument("--json", default=None)
  ns = ap.parse_args()
  main(quick=ns.quick, json_path=ns.json)
