"""``drjax reproduce dimension``: does the d-rectangular bonus cost an extra sqrt(d)?

Liu & Xu (AISTATS 2024) bound DR-LSVI-UCB's AveSubopt by ``O~(sqrt(d^4 H^4 / K))`` and leave open
(after Theorem 1) whether the d-rectangular estimation error ``sum_k sum_h sum_i phi_i
sqrt([Lambda_h^k]^-1_ii)`` really costs a factor sqrt(d) over the elliptical one ``sum_k sum_h
sqrt(phi^T [Lambda_h^k]^-1 phi)`` that LSVI-UCB's analysis uses (``<= H sqrt(2 d K log(1 +
K/d))`` by the elliptical potential lemma). This study measures it on random linear DRMDPs:

* per feature family (``dense`` simplex features, ``sparse`` ones, ``one-hot`` = tabular) and
  ``d`` (doubling), one ``drjax.sweeps`` sweep over instances x seeds with
  ``record=("width_rect", "width_ellip", "switches", "dual_calls", "ave_subopt")`` at episode
  checkpoints: the two bonus sums, the policy switches and dual-oracle calls, and the exact
  AveSubopt(k) against the exact robust optimum (finite models, ``planning.robust_dp``);
* agents: DR-LSVI-UCB (beta 1, and Theorem 1's beta ``d H sqrt(log(3 d K H / p))`` with the
  absolute constant taken as 1, p = 0.1), LSVI-UCB and the variance-weighted, rare-switching
  ``we-drive-u`` when it is registered;
* fits: the log-log slope in d (at every checkpoint K) and in K (per d) of each quantity, with
  95% bootstrap intervals that resample instances (each with all its seeds) within each cell,
  drawn with ``jax.random`` keys.

Grids: ``default`` (15 minutes on two loaded CPU cores), ``quick`` (4 minutes), ``full`` (d up to 256, K = 10^4, more
instances: a GPU job, ``benchmarks/gpu/dimension.sh``) and ``smoke`` (the tests').
"""

from __future__ import annotations

import dataclasses
import math
import os
import time

import jax
import numpy as np

from drjax import sweeps
from drjax.agents import registry


@dataclasses.dataclass(frozen=True)
class Grid:
  """One grid of the study (every field is recorded in the results' configuration)."""

  dims: tuple
  families: tuple
  episodes: int
  record_at: tuple
  instances: int
  seeds: int
  num_states: int = 64
  num_actions: int = 4
  horizon: int = 3
  rho: float = 0.1
  beta: float = 1.0
  lam: float = 1.0
  theory_beta: bool = True  # also DR-LSVI-UCB with Theorem 1's beta (dense family)
  p: float = 0.1  # Theorem 1's failure probability in the theory beta
  bootstrap: int = 1000
  seed: int = 0


GRIDS = {
    "smoke": Grid(dims=(4, 8), families=("dense", "one-hot"), episodes=32, record_at=(8, 32),
                  instances=3, seeds=2, num_states=8, num_actions=2, horizon=2, bootstrap=50),
    # 4.2 minutes cold on amd-epyc-2c under a load average of 4-5 from other jobs.
    "quick": Grid(dims=(4, 8, 16, 32, 64), families=("dense", "sparse", "one-hot"),
                  episodes=1000, record_at=(125, 250, 500, 1000), instances=8, seeds=3,
                  num_states=33),
    # 15.3 minutes cold on amd-epyc-2c (2 CPU cores) under a load average of 4-5 from other
    # jobs (docs/findings/dimension.md). One-hot features at d = 128 need (S - 1) A >= d - 1.
    "default": Grid(dims=(4, 8, 16, 32, 64, 128), families=("dense", "sparse", "one-hot"),
                    episodes=2000, record_at=(125, 250, 500, 1000, 2000), instances=10, seeds=3,
                    num_states=33),
    # A GPU job (benchmarks/gpu/dimension.sh): 3 families x 7 d x 1,024 runs x K = 10^4.
    "full": Grid(dims=(4, 8, 16, 32, 64, 128, 256), families=("dense", "sparse", "one-hot"),
                 episodes=10000, record_at=(100, 300, 1000, 3000, 10000), instances=64,
                 seeds=16, num_states=64),
}
SPARSITY = 4  # nonzero feature coordinates of the sparse family (at most d - 1)
QUANTITIES = ("ratio", "width_rect", "width_ellip", "rect_over_bound", "ellip_over_bound",
              "ave_subopt", "switches", "dual_calls")
THEORY = "dr-lsvi-ucb (theory beta)"


def family_args(family: str, d: int) -> dict:
  """Constructor arguments of ``RandomLinearMDP`` for a feature family at dimension ``d``."""
  if family == "dense":
    return {}
  if family == "sparse":
    return {"features": "sparse", "sparsity": min(SPARSITY, d - 1)}
  if family == "one-hot":
    return {"features": "one-hot"}
  raise ValueError(f"family must be one of dense, sparse, one-hot, got {family!r}")


def available_families(families) -> tuple:
  """The families this version's generator supports (``dense`` always)."""
  import inspect  # pylint: disable=g-import-not-at-top
  from drjax.envs import RandomLinearMDP  # pylint: disable=g-import-not-at-top
  fields = set(inspect.signature(RandomLinearMDP).parameters)
  return tuple(f for f in families if f == "dense" or "features" in fields)


def agents() -> tuple:
  """DR-LSVI-UCB, LSVI-UCB and, when registered, we-drive-u."""
  names = ("dr-lsvi-ucb", "lsvi-ucb", "we-drive-u")
  return tuple(a for a in names if a in registry.names())


def theory_beta(d: int, horizon: int, episodes: int, p: float) -> float:
  """Theorem 1's ``beta = c d H sqrt(iota)``, ``iota = log(3 d K H / p)``, with ``c = 1``."""
  return d * horizon * math.sqrt(math.log(3 * d * episodes * horizon / p))


def _config(grid: Grid, family: str, d: int, agent_names, beta: float) -> sweeps.SweepConfig:
  env_args = dict(num_states=grid.num_states, num_actions=grid.num_actions, feature_dim=d,
                  horizon=grid.horizon, **family_args(family, d))
  return sweeps.SweepConfig(
      env="random", env_args=env_args, agents=tuple(agent_names), seeds=grid.seeds,
      episodes=grid.episodes, rho=(grid.rho,), beta=(beta,), lam=(grid.lam,),
      env_params={"instance": tuple(range(grid.instances))}, seed=grid.seed,
      record=sweeps.config.RECORDS, record_at=tuple(grid.record_at))


def collect(grid: Grid, *, out: str | None = None, log=None):
  """Runs every sweep of ``grid``; returns the tidy rows (one per run) as a DataFrame with
  columns ``family``, ``d``, ``agent``, ``instance``, ``seed`` and ``<quantity>@<k>``.

  ``out``: a directory for the sweeps (``out/<family>-d<d>[-theory]/``, each a ``drjax sweep``
  directory with its ``sweep.json`` provenance; finished ones are reused, so an interrupted study
  resumes), or ``None`` (in memory).
  """
  import pandas as pd  # pylint: disable=g-import-not-at-top
  log = log or (lambda m: None)
  frames = []
  names = agents()
  for family in available_families(grid.families):
    for d in grid.dims:
      if family == "one-hot" and (grid.num_states - 1) * grid.num_actions < d - 1:
        continue  # cannot cover d - 1 coordinates with one-hot (s, a) features
      jobs = [("", names, grid.beta)]
      if grid.theory_beta and family == "dense":
        jobs.append(("-theory", ("dr-lsvi-ucb",),
                     theory_beta(d, grid.horizon, grid.episodes, grid.p)))
      for suffix, agent_names, beta in jobs:
        cfg = _config(grid, family, d, agent_names, beta)
        t0 = time.perf_counter()
        path = None if out is None else os.path.join(out, f"{family}-d{d}{suffix}")
        res = sweeps.run(cfg, out=path, quiet=True)
        df = res.df.copy()
        df["agent"] = df["agent"].astype(str)
        if suffix:
          df["agent"] = THEORY
        df.insert(0, "family", family)
        df.insert(1, "d", d)
        df.insert(2, "horizon", grid.horizon)
        frames.append(df)
        log(f"[drjax]   {family} d={d}{suffix}: {len(df)} runs of {', '.join(agent_names)} "
            f"({time.perf_counter() - t0:.1f} s)")
  return pd.concat(frames, ignore_index=True)


# ---------------------------------------------------------------------------------------------
# Analysis: cell means and bootstrap fits.


def _slope(x, y) -> float:
  """Least-squares slope of ``log y`` against ``log x``."""
  lx, ly = np.log(np.asarray(x, np.float64)), np.log(np.asarray(y, np.float64))
  lx = lx - lx.mean()
  return float(np.sum(lx * (ly - ly.mean())) / np.sum(lx * lx))


def _values(df, quantity: str, k: int) -> np.ndarray:
  if quantity in ("rect_over_bound", "ellip_over_bound"):  # each sum / H sqrt(2dK log(1+K/d))
    width = df[f"width_{quantity.split('_')[0]}@{k}"].to_numpy(np.float64)
    bound = np.array([potential_bound(int(d), k, int(h), lam) for d, h, lam in
                      zip(df["d"], df["horizon"], df["lam"])])
    return width / bound
  if quantity == "ratio":
    return (df[f"width_rect@{k}"] / df[f"width_ellip@{k}"]).to_numpy(np.float64)
  return df[f"{quantity}@{k}"].to_numpy(np.float64)


def _instance_means(df, quantity: str, k: int) -> np.ndarray:
  """Per instance, the mean over its seeds (the bootstrap's unit)."""
  v = _values(df, quantity, k)
  inst = df["instance"].to_numpy()
  return np.array([v[inst == i].mean() for i in np.unique(inst)])


def _fit(cells, xs, key, num: int) -> dict:
  """Slope of log(mean) against log(x) over cells (each an array of per-instance means) with a
  95% percentile bootstrap interval (instances resampled within each cell)."""
  means = [c.mean() for c in cells]
  if len(xs) < 2 or min(means) <= 0:
    return {"slope": float("nan"), "lo": float("nan"), "hi": float("nan")}
  keys = jax.random.split(key, len(cells))
  boots = []
  for c, k in zip(cells, keys):
    idx = np.asarray(jax.random.randint(k, (num, len(c)), 0, len(c)))
    boots.append(c[idx].mean(axis=1))
  boots = np.stack(boots, axis=1)  # [num, cells]
  ok = np.all(boots > 0, axis=1)
  slopes = np.array([_slope(xs, b) for b in boots[ok]])
  lo, hi = (np.percentile(slopes, [2.5, 97.5]) if len(slopes) else (np.nan, np.nan))
  return {"slope": _slope(xs, means), "lo": float(lo), "hi": float(hi)}


def analyze(df, grid: Grid) -> dict:
  """Cell means (with standard errors over instances) and the fitted exponents."""
  key = jax.random.PRNGKey(grid.seed + 1)
  cells, d_fits, k_fits = [], [], []
  for (family, agent), g in df.groupby(["family", "agent"], sort=False):
    dims = sorted(g["d"].unique())
    for q in QUANTITIES:
      for k in grid.record_at:
        per_d = [_instance_means(g[g.d == d], q, k) for d in dims]
        for d, c in zip(dims, per_d):
          cells.append({"family": family, "agent": agent, "d": int(d), "k": int(k),
                        "quantity": q, "mean": float(c.mean()),
                        "stderr": float(c.std(ddof=1) / math.sqrt(len(c))) if len(c) > 1 else 0.0,
                        "instances": int(len(c))})
        if q in ("ratio", "width_rect", "width_ellip", "rect_over_bound", "ellip_over_bound",
                 "ave_subopt"):
          key, sub = jax.random.split(key)
          d_fits.append({"family": family, "agent": agent, "k": int(k), "quantity": q,
                         **_fit(per_d, dims, sub, grid.bootstrap)})
      if q in ("ave_subopt", "switches", "dual_calls", "width_rect") and len(grid.record_at) > 1:
        for d in dims:
          gd = g[g.d == d]
          per_k = [_instance_means(gd, q, k) for k in grid.record_at]
          key, sub = jax.random.split(key)
          fit = _fit(per_k, grid.record_at, sub, grid.bootstrap)
          # growth per doubling of K (least squares of the mean against log2 K): a constant for
          # counts that grow like log K, doubling itself for counts linear in K
          fit["per_doubling"] = float(np.polyfit(np.log2(grid.record_at),
                                                 [c.mean() for c in per_k], 1)[0])
          k_fits.append({"family": family, "agent": agent, "d": int(d), "quantity": q, **fit})
  return {"cells": cells, "d_exponents": d_fits, "k_exponents": k_fits}


def potential_bound(d: int, k: int, horizon: int, lam: float = 1.0) -> float:
  """The elliptical potential lemma's ``H sqrt(2 d k log(1 + k / (d lam)))`` (sum over steps of
  ``sqrt(k * 2 d log(1 + k / (d lam)))``; rewards per step, features with norm <= 1)."""
  return horizon * math.sqrt(2 * d * k * math.log(1 + k / (d * lam)))


# ---------------------------------------------------------------------------------------------
# Panels, figure, table.


def panels(df, fits: dict, grid: Grid, seconds: float) -> dict:
  """The figure's panels: ``exponents`` (the fits) and ``cells`` (means per family, agent, d,
  K, quantity), each with the grid and the agents in its ``config``."""
  config = {"experiment": "dimension", "grid": dataclasses.asdict(grid),
            "agents": sorted(df["agent"].unique().tolist()),
            "families": sorted(df["family"].unique().tolist()), "runs": int(len(df)),
            "seconds": round(seconds, 1), "sparsity": SPARSITY,
            "potential_bound": "H sqrt(2 d K log(1 + K / (d lam)))"}
  return {"exponents": {"d_exponents": fits["d_exponents"], "k_exponents": fits["k_exponents"],
                        "config": dict(config)},
          "cells": {"cells": fits["cells"], "config": dict(config)}}


def _cell(cells, **want):
  return [c for c in cells if all(c[k] == v for k, v in want.items())]


def plot(ps: dict, path_base: str) -> None:
  """Four panels: the ratio of the bonus sums against d per family (with sqrt(d)); AveSubopt(K)
  against d per agent (dense); AveSubopt against K (dense, the middle d); switches against K."""
  from drjax.paper import plotting  # pylint: disable=g-import-not-at-top
  cells = ps["cells"]["cells"]
  grid = ps["cells"]["config"]["grid"]
  kmax = max(grid["record_at"])
  fig = plotting.new_figure((10.5, 7.5))
  flat = fig.subplots(2, 2)
  axes = [[flat[0, 0], flat[0, 1]], [flat[1, 0], flat[1, 1]]]
  ax = axes[0][0]
  for fam in ps["cells"]["config"]["families"]:
    cs = _cell(cells, family=fam, agent="dr-lsvi-ucb", k=kmax, quantity="ratio")
    if cs:
      ax.errorbar([c["d"] for c in cs], [c["mean"] for c in cs],
                  yerr=[1.96 * c["stderr"] for c in cs], marker="o", capsize=3, label=fam)
  dims = sorted({c["d"] for c in cells})
  ax.plot(dims, np.sqrt(dims), "k--", lw=1, label="sqrt(d)")
  ax.set(xscale="log", yscale="log", xlabel="d", title=f"(a) rect / ellip bonus sums, K={kmax}",
         ylabel="ratio")
  ax.legend(fontsize=8)
  ax = axes[0][1]
  for agent in ps["cells"]["config"]["agents"]:
    cs = _cell(cells, family="dense", agent=agent, k=kmax, quantity="ave_subopt")
    if cs:
      ax.errorbar([c["d"] for c in cs], [c["mean"] for c in cs],
                  yerr=[1.96 * c["stderr"] for c in cs], marker="o", capsize=3, label=agent)
  ax.set(xscale="log", yscale="log", xlabel="d", ylabel=f"AveSubopt({kmax})",
         title="(b) exact AveSubopt against d (dense)")
  ax.legend(fontsize=8)
  mid = dims[len(dims) // 2]
  for ax, q, title in ((axes[1][0], "ave_subopt", f"(c) AveSubopt(K), dense, d={mid}"),
                       (axes[1][1], "switches", f"(d) policies computed, dense, d={mid}")):
    for agent in ps["cells"]["config"]["agents"]:
      cs = sorted(_cell(cells, family="dense", agent=agent, d=mid, quantity=q),
                  key=lambda c: c["k"])
      if cs:
        ax.errorbar([c["k"] for c in cs], [c["mean"] for c in cs],
                    yerr=[1.96 * c["stderr"] for c in cs], marker="o", capsize=3, label=agent)
    ax.set(xscale="log", yscale="log", xlabel="K", title=title)
    ax.legend(fontsize=8)
  from matplotlib.ticker import NullFormatter, ScalarFormatter  # pylint: disable=g-import-not-at-top
  for ax in (a for row in axes for a in row):
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_formatter(NullFormatter())
  fig.tight_layout(rect=(0, 0.03, 1, 1))
  fig.text(0.01, 0.005, "means over instances (each averaged over its seeds); bars: 95% normal "
                        "intervals over instances", fontsize=7)
  plotting.save_figure(fig, path_base)


def summary_table(ps: dict) -> list:
  """``results.md`` lines: the exponents in d at the largest K, and in K at the largest d."""
  from drjax.paper.tables import md_table  # pylint: disable=g-import-not-at-top
  ex = ps["exponents"]
  grid = ex["config"]["grid"]
  kmax = max(grid["record_at"])
  rows = [[e["family"], e["agent"], e["quantity"], f"{e['slope']:.3f}",
           f"[{e['lo']:.3f}, {e['hi']:.3f}]"]
          for e in ex["d_exponents"] if e["k"] == kmax]
  lines = ["", f"## dimension: exponents in d at K = {kmax} (log-log slopes, 95% bootstrap "
               f"over instances; {ex['config']['runs']} runs)", ""]
  lines += md_table(["family", "agent", "quantity", "exponent in d", "95% interval"], rows)
  dmax = max(c["d"] for c in ps["cells"]["cells"])
  rows = [[e["family"], e["agent"], e["d"], e["quantity"], f"{e['slope']:.3f}",
           f"[{e['lo']:.3f}, {e['hi']:.3f}]", f"{e.get('per_doubling', float('nan')):.2f}"]
          for e in ex["k_exponents"] if e["d"] in (min(grid["dims"]), dmax)
          and (e["family"] == "dense" or e["quantity"] != "dual_calls")]
  lines += ["", f"## dimension: exponents in K at d = {min(grid['dims'])} and {dmax}", ""]
  lines += md_table(["family", "agent", "d", "quantity", "exponent in K", "95% interval",
                     "growth per doubling of K"], rows)
  return lines


def run(grid: str | Grid = "default", *, sweep_dir: str | None = None, log=None):
  """Collects and analyses the study; returns ``(panels, df)``."""
  g = GRIDS[grid] if isinstance(grid, str) else grid
  t0 = time.perf_counter()
  df = collect(g, out=sweep_dir, log=log)
  if sweep_dir is not None:  # every run's row (each sweep directory also keeps its own)
    df.to_parquet(os.path.join(sweep_dir, "rows.parquet"))
  fits = analyze(df, g)
  return panels(df, fits, g, time.perf_counter() - t0), df
