"""The source-only tuning protocol (``SweepConfig.tune``): pick beta and lambda by source return.

The off-dynamics setting has no target data, so a tuned agent's hyperparameters may depend on the
source domain only. A sweep with ``tune="greedy"`` (or ``"played"``) searches its beta x lambda
grid: every run is evaluated in the source (the ``value`` column without targets, else the
``source_value`` column), and for each agent and every other setting (rho, dataset size, source
parameters, ...) ``select_best`` picks the (beta, lambda) whose mean source value over seeds of
the named policy is largest (ties: the first in grid order). The selection and the grid are
recorded in ``sweep.json`` (``tuning``) and the selected rows, at every target and policy, in
``tuned.csv`` (``tuned_rows``). The same functions apply to any finished sweep's summary (the
two-stage recipe of docs/sweeps.md).
"""

from __future__ import annotations

import numpy as np

TUNED = ("beta", "lam")  # the hyperparameters the protocol selects


def _metric(summary) -> str:
  if "source_value_mean" in summary.columns:
    return "source_value_mean"
  if any(c.startswith("target_") for c in summary.columns):
    raise ValueError("summary: a sweep with targets has no source value to tune by; run it with "
                     "tune='greedy' / --tune greedy (a source_value column), or tune on a "
                     "source-only sweep first (docs/sweeps.md)")
  return "value_mean"


def _keys(summary) -> list:
  """The setting columns a selection is made within (all but the tuned ones)."""
  from drjax.sweeps.tables import STATS, SOURCE_STAT  # pylint: disable=g-import-not-at-top
  stats = {f"{m}_{s}" for m in STATS + (SOURCE_STAT,) for s in ("mean", "stderr", "count")}
  return [c for c in summary.columns
          if c not in stats and c not in TUNED + ("setting", "rho_index", "policy", "agent")
          and not c.startswith("target_")]


def select_best(summary, policy: str = "greedy"):
  """The (beta, lambda) of each agent and setting with the best mean source value.

  Args:
    summary: a sweep's summary (``SweepResult.summary``, ``summary.csv``) or its results table
      (``SweepResult.df``; summarized first). Its source value is ``source_value_mean`` (a tuned
      sweep with targets) or ``value_mean`` (a source-only sweep).
    policy: ``"greedy"`` or ``"played"``: whose source value decides, for online agents (their
      rows in the ``policy`` column); agents with one policy (offline, baselines) use theirs.

  Returns:
    A DataFrame, one row per agent and setting of the other columns, with the selected
    ``beta``, ``lam``, ``setting``, and the source value's ``mean``, ``stderr`` and ``count``;
    agents without beta and lambda (baselines) are left out.
  """
  import pandas as pd  # pylint: disable=g-import-not-at-top
  from drjax.sweeps.config import EVAL_MODES  # pylint: disable=g-import-not-at-top
  if policy not in EVAL_MODES:
    raise ValueError(f"policy must be one of {', '.join(EVAL_MODES)}, got {policy!r}")
  if "value_mean" not in summary.columns:  # a results table
    from drjax.sweeps.tables import summarize  # pylint: disable=g-import-not-at-top
    summary = summarize(summary)
  metric = _metric(summary)
  s = summary.copy()
  s["agent"] = s["agent"].astype(str)
  if "policy" in s.columns:
    s["policy"] = s["policy"].astype(str)
    has = s.groupby("agent")["policy"].agg(lambda p: policy in set(p))
    s = s[(s["policy"] == policy) | ~s["agent"].map(has)]
  s = s[s["beta"].notna() | s["lam"].notna()]
  tcols = [c for c in s.columns if c.startswith("target_")]
  if tcols:  # the source value repeats over the targets: one row per setting
    s = s.drop_duplicates(subset=["agent", "setting"] + (["policy"] if "policy" in s else []))
  keys = _keys(s)
  rows = []
  for _, g in s.groupby(["agent"] + keys, dropna=False, sort=False):
    best = g.iloc[int(np.argmax(np.nan_to_num(g[metric].to_numpy(), nan=-np.inf)))]
    stem = metric[:-len("_mean")]
    row = {"agent": best["agent"], **{k: best[k] for k in keys},
           "policy": best["policy"] if "policy" in g.columns else "played",
           "beta": best["beta"], "lam": best["lam"], "setting": int(best["setting"]),
           "mean": float(best[metric]), "stderr": float(best[stem + "_stderr"]),
           "count": int(best[stem + "_count"]), "candidates": len(g)}
    rows.append(row)
  return pd.DataFrame(rows)


def tuned_rows(summary, selected):
  """The rows of ``summary`` of the selected settings (every target and policy), plus the rows
  of agents that are not tuned (baselines)."""
  sel = {(str(a), int(s)) for a, s in zip(selected["agent"], selected["setting"])}
  tuned_agents = {str(a) for a in selected["agent"]}
  keep = [(str(a), int(s)) in sel or str(a) not in tuned_agents
          for a, s in zip(summary["agent"], summary["setting"])]
  return summary[np.asarray(keep, bool)].reset_index(drop=True)


def _plain(v):
  """A JSON value: NumPy scalars as Python's, NaN (a setting an agent does not have) as None."""
  v = v.item() if hasattr(v, "item") else v
  return None if isinstance(v, float) and v != v else v


def record(config, summary, *, resolved=None) -> tuple:
  """``(tuning, tuned)``: the ``sweep.json`` entry (grid, policy, selection) and the tuned
  summary rows of a sweep with ``config.tune``. ``resolved``: the sweep's ``ResolvedSweep``
  (its agents' specs and axes), else they are looked up."""
  if resolved is not None:
    specs, axes = resolved.specs, resolved.axes
  else:
    from drjax.agents import registry  # pylint: disable=g-import-not-at-top
    from drjax.sweeps.config import agent_axis  # pylint: disable=g-import-not-at-top
    specs = {a: registry.get(a) for a in config.agents}
    axes = {a: {n: agent_axis(config, a, n, specs[a]) for n in TUNED} for a in config.agents}
  sel = select_best(summary, config.tune)
  grid = {a: {n: list(axes[a][n]) for n in TUNED if n in specs[a].hparams}
          for a in config.agents if set(TUNED) & set(specs[a].hparams)}
  entry = {"by": "source", "policy": config.tune, "metric": _metric(summary), "grid": grid,
           "selected": [{k: _plain(v) for k, v in r.items()} for r in sel.to_dict("records")]}
  return entry, tuned_rows(summary, sel)
