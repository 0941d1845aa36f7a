"""``drjax reproduce shifts``: robust against non-robust agents under physics shifts (gymnax).

The shape off-dynamics benchmarks report (RFQI, Panaganti et al. 2022; ODRL, Lyu et al. 2024):
agents learn in a source physics and are evaluated in target physics of growing shift. Here:

* environments: CartPole-v1 (pole ``length``, source 0.5) and Pendulum-v1 (pendulum ``l``,
  source 1.0), through ``drjax.envs.gymnax_env`` (finite horizon H, rewards in [0, 1], a
  terminal state becomes the absorbing zero-value fail state, soft state aggregation features);
* online: DR-LSVI-UCB at each ``rho`` of the grid against LSVI-UCB (both regress the reward,
  ``reward="regressed"``), K episodes in the source;
* offline: DRPVI at the same ``rho`` against PEVI, fitted to N uniform-behavior trajectories
  collected in the source;
* evaluation: each run's final greedy policy on every target, ``test_episodes`` Monte Carlo
  episodes (vmapped) per (run, target), common random numbers: seed j's evaluation key is the
  same for every agent, rho and target (``drjax.sweeps``);
* one ``drjax.sweeps.run`` per (environment, online/offline): one compiled sweep each.

The band of every curve is ``mean +- 1.96 * stderr`` over seeds, ``stderr = std(ddof=1) /
sqrt(seeds)`` of the per-seed Monte Carlo returns (a normal 95% interval for the mean over
seeds; the Monte Carlo error of each seed's return is inside that spread).

Grids: ``default`` (under 3 minutes cold on two CPU cores), ``full`` (10x the runs, more
targets and episodes: a GPU job, ``benchmarks/gpu_shifts.sh``) and ``smoke`` (the tests').
"""

from __future__ import annotations

import dataclasses
import math
import os
import time

import numpy as np

from drjax import sweeps

ONLINE = ("dr-lsvi-ucb", "lsvi-ucb")
OFFLINE = ("drpvi", "pevi")
ROBUST = {"dr-lsvi-ucb": "lsvi-ucb", "drpvi": "pevi"}  # robust agent -> non-robust counterpart
Z95 = 1.96


@dataclasses.dataclass(frozen=True)
class EnvSpec:
  """One environment of the study: registry name, constructor arguments, shifted field."""

  name: str
  env_args: tuple  # ((key, value), ...) (hashable; a dict in the sweep config)
  field: str
  source: float
  low: float
  high: float


CARTPOLE = EnvSpec("cartpole", (("horizon", 30), ("obs_dims", (2, 3)), ("centers_per_dim", 4)),
                   "length", 0.5, 0.25, 2.0)
PENDULUM = EnvSpec("pendulum", (("horizon", 30), ("centers_per_dim", (3, 3, 3)),
                                ("num_torques", 3)), "l", 1.0, 0.5, 2.0)


@dataclasses.dataclass(frozen=True)
class Grid:
  """One grid of the study (every field is recorded in the panels' configuration)."""

  envs: tuple = (CARTPOLE, PENDULUM)
  rhos: tuple = (0.05, 0.2)
  seeds: int = 8
  episodes: int = 150  # online K
  trajectories: int = 150  # offline N (uniform behavior)
  targets: int = 11
  test_episodes: int = 500
  beta_online: float = 10.0
  beta_offline: float = 0.1
  lam: float = 1.0
  seed: int = 0


GRIDS = {
    "smoke": Grid(rhos=(0.2,), seeds=2, episodes=8, trajectories=8, targets=3, test_episodes=16),
    "default": Grid(),
    "quick": Grid(seeds=4, test_episodes=200),
    # A GPU job (benchmarks/gpu_shifts.sh): 10x the runs (80 seeds), more targets, K and N.
    "full": Grid(rhos=(0.05, 0.1, 0.2, 0.3), seeds=80, episodes=500, trajectories=500,
                  targets=15, test_episodes=2000),
}


def target_grid(spec: EnvSpec, num: int) -> np.ndarray:
  """The target values of ``spec``'s field: ``linspace(low, high, num)`` (as the sweep's)."""
  return np.linspace(spec.low, spec.high, num)


def config(grid: Grid, spec: EnvSpec, mode: str) -> sweeps.SweepConfig:
  """The sweep of one (environment, ``"online"`` / ``"offline"``)."""
  if mode not in ("online", "offline"):
    raise ValueError(f"mode must be 'online' or 'offline', got {mode!r}")
  online = mode == "online"
  return sweeps.SweepConfig(
      env=spec.name, env_args=dict(spec.env_args), agents=ONLINE if online else OFFLINE,
      seeds=grid.seeds, episodes=grid.episodes, rho=tuple(grid.rhos),
      beta=(grid.beta_online if online else grid.beta_offline,), lam=(grid.lam,),
      targets=(spec.field, spec.low, spec.high, grid.targets), test_episodes=grid.test_episodes,
      trajectories=(grid.trajectories,), behavior="uniform", seed=grid.seed,
      eval_modes=("played",))  # the study's rows: one policy per run (sweeps default: both)


def label(agent: str, rho) -> str:
  """``"dr-lsvi-ucb rho=0.05"`` for a robust agent, the name for a non-robust one."""
  return f"{agent} rho={float(rho):g}" if agent in ROBUST else agent


def collect(grid: Grid, *, out: str | None = None, log=None):
  """Runs the four sweeps; returns the tidy rows (one per run x target) with ``env``,
  ``mode``, ``label``, ``seed``, ``target`` and ``value`` (the run's Monte Carlo return)."""
  import pandas as pd  # pylint: disable=g-import-not-at-top
  log = log or (lambda m: None)
  frames = []
  for spec in grid.envs:
    for mode in ("online", "offline"):
      cfg = config(grid, spec, mode)
      t0 = time.perf_counter()
      path = None if out is None else os.path.join(out, f"{spec.name}-{mode}")
      res = sweeps.run(cfg, out=path, quiet=True)
      df = res.df
      rho = df["rho"].to_numpy(np.float64) if "rho" in df else np.full(len(df), np.nan)
      agent = df["agent"].astype(str).to_numpy()
      frames.append(pd.DataFrame({
          "env": spec.name, "mode": mode, "agent": agent,
          "label": [label(a, r) for a, r in zip(agent, rho)],
          "rho": np.where([a in ROBUST for a in agent], rho, 0.0),
          "seed": df["seed"].to_numpy(), "target": df[f"target_{spec.field}"].to_numpy(np.float64),
          "value": df["value"].to_numpy(np.float64),
          "mc_stderr": df["value_stderr"].to_numpy(np.float64)}))
      log(f"[drjax]   {spec.name} {mode}: {len(df)} rows ({time.perf_counter() - t0:.1f} s)")
  return pd.concat(frames, ignore_index=True)


def band(values) -> dict:
  """Mean, stderr over seeds (``std(ddof=1) / sqrt(n)``) and the 95% band ``mean +- 1.96 se``."""
  v = np.asarray(values, np.float64)
  n = len(v)
  mean = float(v.mean())
  se = float(v.std(ddof=1) / math.sqrt(n)) if n > 1 else 0.0
  return {"mean": mean, "stderr": se, "lo": mean - Z95 * se, "hi": mean + Z95 * se, "seeds": n}


def analyze(df) -> list:
  """One curve per (env, mode, label): the band at every target."""
  curves = []
  for (env, mode, lab), g in df.groupby(["env", "mode", "label"], sort=False):
    pts = []
    for t, gt in g.groupby("target", sort=True):
      pts.append({"target": float(t), **band(gt.sort_values("seed")["value"])})
    curves.append({"env": env, "mode": mode, "label": lab, "agent": str(g["agent"].iloc[0]),
                   "rho": float(g["rho"].iloc[0]), "points": pts})
  return curves


def panels(curves: list, grid: Grid, seconds: float, runs: int) -> dict:
  """The figure's panels (one per environment and mode), each with the full config."""
  from drjax.sweeps import provenance  # pylint: disable=g-import-not-at-top
  envs = {s.name: {"args": dict(s.env_args), "field": s.field, "source": s.source,
                   "targets": target_grid(s, grid.targets).tolist()} for s in grid.envs}
  cfg = {"experiment": "shifts", "grid": dataclasses.asdict(grid), "envs": envs,
         "online_agents": list(ONLINE), "offline_agents": list(OFFLINE), "behavior": "uniform",
         "reward": "regressed", "band": "mean +- 1.96 * stderr over seeds (stderr = std(ddof=1) "
         "/ sqrt(seeds)) of each seed's Monte Carlo return",
         "evaluation": "test_episodes Monte Carlo episodes per run and target, common random "
                       "numbers across agents, rho and targets", "runs": runs,
         "seconds": round(seconds, 1)}
  try:
    cfg["provenance"] = provenance()
  except Exception:  # pylint: disable=broad-except
    pass
  out = {}
  for s in grid.envs:
    for mode in ("online", "offline"):
      out[f"{s.name}-{mode}"] = {"curves": [c for c in curves if c["env"] == s.name
                                            and c["mode"] == mode], "config": cfg}
  return out


def plot(ps: dict, path_base: str) -> None:
  """Rows: environments; columns: online, offline. Return in the target against the shifted
  field (dotted line: the source), bands 95% over seeds."""
  from drjax.paper import plotting  # pylint: disable=g-import-not-at-top
  cfg = next(iter(ps.values()))["config"]
  names = list(cfg["envs"])
  fig = plotting.new_figure((10.5, 3.6 * len(names)))
  axes = np.asarray(fig.subplots(len(names), 2)).reshape(len(names), 2)
  for i, name in enumerate(names):
    e = cfg["envs"][name]
    for j, mode in enumerate(("online", "offline")):
      ax = axes[i, j]
      for c in ps[f"{name}-{mode}"]["curves"]:
        x = [p["target"] for p in c["points"]]
        ax.plot(x, [p["mean"] for p in c["points"]], marker="o", ms=3, label=c["label"],
                ls="-" if c["agent"] in ROBUST else "--")
        ax.fill_between(x, [p["lo"] for p in c["points"]], [p["hi"] for p in c["points"]],
                        alpha=0.2)
      ax.axvline(e["source"], color="k", ls=":", lw=1)
      ax.set(xlabel=f"target {e['field']} (source {e['source']:g})",
             ylabel=f"return in target (H={e['args'].get('horizon')})",
             title=f"{name}, {mode}")
      ax.legend(fontsize=7)
  fig.tight_layout(rect=(0, 0.03, 1, 1))
  fig.text(0.01, 0.005, f"{cfg['grid']['seeds']} seeds; bands: mean +- 1.96 stderr over seeds; "
                        f"{cfg['grid']['test_episodes']} Monte Carlo episodes per run and target",
           fontsize=7)
  plotting.save_figure(fig, path_base)


def _at(c: dict, x: float) -> dict:
  return min(c["points"], key=lambda p: abs(p["target"] - x))


def _fmt(p: dict) -> str:
  return f"{p['mean']:.2f} [{p['lo']:.2f}, {p['hi']:.2f}]"


def summary_rows(ps: dict) -> list:
  """Per curve: the return at the source and at both ends of the target grid, with bands,
  and the difference to the non-robust counterpart at each (robust minus nominal)."""
  cfg = next(iter(ps.values()))["config"]
  rows = []
  for key, panel in ps.items():
    curves = {c["label"]: c for c in panel["curves"]}
    for c in panel["curves"]:
      e = cfg["envs"][c["env"]]
      xs = (e["targets"][0], e["source"], e["targets"][-1])
      pts = [_at(c, x) for x in xs]
      nominal = curves.get(ROBUST.get(c["agent"], ""))
      diff = ([p["mean"] - _at(nominal, x)["mean"] for p, x in zip(pts, xs)]
              if nominal else [None] * 3)
      rows.append({"panel": key, "label": c["label"], "targets": list(xs), "points": pts,
                   "minus_nominal": diff})
  return rows


def summary_table(ps: dict) -> list:
  """``results.md`` lines: the return at the smallest target, the source and the largest."""
  from drjax.paper.tables import md_table  # pylint: disable=g-import-not-at-top
  cfg = next(iter(ps.values()))["config"]
  rows = []
  for r in summary_rows(ps):
    d = ["" if v is None else f"{v:+.2f}" for v in r["minus_nominal"]]
    rows.append([r["panel"], r["label"]] + [f"{_fmt(p)}" for p in r["points"]]
                + [" / ".join(d) if r["minus_nominal"][0] is not None else ""])
  g = cfg["grid"]
  lines = ["", f"## shifts: return in the target (mean [95% band over {g['seeds']} seeds], "
               f"{g['test_episodes']} Monte Carlo episodes per run and target)", ""]
  lines += md_table(["sweep", "agent", "smallest target", "source", "largest target",
                     "robust - nominal (small / source / large)"], rows)
  return lines


def run(grid: str | Grid = "default", *, sweep_dir: str | None = None, log=None):
  """Collects and analyses the study; returns ``(panels, df)``."""
  g = GRIDS[grid] if isinstance(grid, str) else grid
  t0 = time.perf_counter()
  df = collect(g, out=sweep_dir, log=log)
  if sweep_dir is not None:
    df.to_parquet(os.path.join(sweep_dir, "rows.parquet"))
  curves = analyze(df)
  return panels(curves, g, time.perf_counter() - t0, len(df)), df
