"""The figure: ``sweep.png`` (value against the targets or the swept setting, 95% bands)."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd

from drjax._io import atomic_write as _atomic_write
from drjax.sweeps.config import SweepConfig
from drjax.sweeps.tables import setting_columns


def data_size(config: SweepConfig) -> str:
  """The amount of data of the sweep's runs, as the figure's title names it: ``$K$ = 100``
  training episodes for online agents, ``$N$ = 50`` trajectories (each dataset size of the
  axis) for offline ones, both for a mixed sweep; baselines use no data."""
  from drjax.agents import registry  # pylint: disable=g-import-not-at-top
  return _data_size(config, {registry.get(a).kind for a in config.agents})


def _data_size(config: SweepConfig, kinds: set) -> str:
  """``data_size`` with the agents' kinds at hand."""
  out = []
  if "online" in kinds:
    out.append(f"$K$ = {config.episodes}")
  if "offline" in kinds:
    out.append(f"$N$ = {', '.join(str(n) for n in config.trajectories)} trajectories")
  return ", ".join(out) or "no training data"


def _is_baseline(agent: str) -> bool:
  from drjax.agents import registry  # pylint: disable=g-import-not-at-top
  try:
    return registry.get(agent).kind == "baseline"
  except ValueError:
    return False


def _action(g) -> str:
  """``"action A"`` for a constant baseline's rows, else ``""``."""
  if "action" in g.columns and g["action"].notna().any():
    return f"action {g['action'].dropna().iloc[0]:g}"
  return ""


def _shown(v) -> bool:
  """Whether a setting's value belongs in a line's label: a number that is not NaN (a string
  column such as ``policy`` is labelled apart; ``np.isnan`` of a string raises)."""
  return (isinstance(v, (int, float, np.number)) and not isinstance(v, (bool, np.bool_))
          and not pd.isna(v))


def _plot(df, summary, config: SweepConfig, path: str, kinds: dict | None = None) -> None:
  """Draws ``sweep.png``. ``kinds``: ``{agent: kind}`` of the sweep's agents when at hand (a
  resolved sweep's specs), else looked up in the registry."""
  # The object-oriented API with the Agg canvas: no pyplot state, the user's backend is untouched.
  from matplotlib.backends.backend_agg import FigureCanvasAgg  # pylint: disable=g-import-not-at-top
  from matplotlib.figure import Figure  # pylint: disable=g-import-not-at-top

  from drjax import style  # pylint: disable=g-import-not-at-top

  fig = Figure(figsize=(7, 4.5))
  FigureCanvasAgg(fig)
  ax = fig.subplots()
  tcols = [c for c in summary.columns if c.startswith("target_")]
  scols = setting_columns(df)
  varying = [c for c in scols if c not in ("rho_index", "policy")
             and summary[c].nunique(dropna=True) > 1]
  # The policy column (SweepConfig.eval_modes): each policy its own line style.
  policy = ["policy"] if "policy" in summary.columns else []
  if tcols:
    x, label = tcols[0], tcols[0][len("target_"):]
    groups = ["agent", "setting"] + policy
  else:
    x = varying[0] if varying else "setting"
    label = x
    groups = ["agent"] + [c for c in varying[1:]] + policy
  grouped = list(summary.groupby(groups, dropna=False, observed=True, sort=False))
  # One colour per algorithm (drjax.style, from the registry); its settings in shades of it.
  per_agent = {}
  for key, _ in grouped:
    key = key if isinstance(key, tuple) else (key,)
    per_agent.setdefault(key[0], []).append(key)
  colors = {}
  for agent, keys in per_agent.items():
    base = style.color(str(agent)) or "0.3"
    colors.update(zip(keys, style.shades(base, len(keys)) if len(keys) > 1 else [base]))
  sym = lambda c, v: style.math(f"{ {'lam': 'lambda'}.get(c, c)} = {v:g}")  # noqa: E731
  shown = 0
  for key, g in grouped:
    key = key if isinstance(key, tuple) else (key,)
    color, name = colors[key], style.display(str(key[0]))
    # Baselines (uniform random, constant actions) are reference lines: dashed, thin.
    base = (_is_baseline(str(key[0])) if kinds is None
            else kinds.get(str(key[0])) == "baseline")
    mode = str(key[-1]) if policy else "played"
    ls = "--" if base else ("-" if mode == "played" else ":")
    if policy and not base:
      name = f"{name} ({mode})"
    if g[x].isna().all():  # e.g. LSVI-UCB against rho: a horizontal band
      m, s = g["value_mean"].mean(), g["value_stderr"].fillna(0).mean()
      ax.axhline(m, ls="--" if not base else (0, (4, 2)), lw=1, color=color,
                 label=name + (f" ({_action(g)})" if _action(g) else ""))
      ax.axhspan(m - 1.96 * s, m + 1.96 * s, color=color, alpha=0.1)
      continue
    g = g.sort_values(x)
    desc = [name]
    if tcols:
      row = g.iloc[0]
      desc += [sym(c, row[c]) for c in varying if _shown(row[c])]
    else:
      desc += [sym(c, v) for c, v in zip(groups[1:], key[1:]) if _shown(v)]
    m = g["value_mean"].to_numpy()
    s = g["value_stderr"].fillna(0).to_numpy()
    xs = g[x].to_numpy()
    ax.plot(xs, m, marker="o" if len(xs) < 30 and not base else None, ms=3, color=color,
            ls=ls, lw=1 if base else 1.5, label=", ".join(desc))
    ax.fill_between(xs, m - 1.96 * s, m + 1.96 * s, color=color, alpha=0.2, lw=0)
    shown += 1
  ax.set_xlabel(style.math({"lam": "lambda"}.get(label, label)))
  ax.set_ylabel(style.Y_LABEL if tcols else style.Y_LABEL_SOURCE)
  nseeds = len(config.seed_ids or range(config.seeds))
  band = "mean, 95% band: 1.96 s.e. over seeds" if nseeds > 1 else "one seed: no band"
  size = data_size(config) if kinds is None else _data_size(config, set(kinds.values()))
  # Two lines: one line was clipped at the figure's right edge.
  ax.set_title(f"drjax sweep: {config.env}, {nseeds} seed{'s' if nseeds != 1 else ''}, {size}\n"
               f"{band}", fontsize=10)
  xs_all = (summary[x].dropna().unique() if x in summary.columns
            and pd.api.types.is_numeric_dtype(summary[x]) else ())
  if len(xs_all) == 1:  # one setting: its value as the only tick (not an axis of +-0.04)
    ax.set_xticks([float(xs_all[0])])
  if shown <= 12:
    ax.legend(fontsize=7)
  fig.tight_layout()
  buf = io.BytesIO()
  fig.savefig(buf, format="png", dpi=110, metadata={"Software": None})
  _atomic_write(path, buf.getvalue())
