"""The R2PVI paper's Figure 2 (Tang, Liu & Xu, ICML 2025): fit time against the dataset size N
and the feature dimension d on the American put option, for PEVI, R2PVI-TV, R2PVI-KL, DRPVI and
DRVI-L -- drjax beside the paper's published seconds and beside a vectorized NumPy of the same
algorithms, timed in this process on this machine.

Timing harness: ``drjax.bench.offline.put_rows`` (the rows of ``drjax bench --only offline``):
the put option with ``anchors`` hat features (``d = anchors + 1``), H = 20, datasets of N
always-hold trajectories (as the public code), strike 100, beta 0.1, ridge lambda 1, R2PVI weight
1, DRPVI / DRVI-L radius 0.1; ONE ``agent.fit`` through the entry point a user calls, warm (after
a first call that compiles), drjax and NumPy interleaved, minimum over the repeats (the machine is
shared: the minimum is the least disturbed run); NumPy is the faster of 1 BLAS thread and its
default. The published seconds were measured by the paper's authors on a laptop i5-11300H and are
quoted, not run here. The machine that ran the drjax and NumPy timings is written on the figure
and in every panel's ``config``.

The grid is the paper's: N in {1,000, 5,000, 10,000} at 30 anchors (panel a) and 30 / 60 / 120
anchors at N = 1,000 (panel b). Not part of ``drjax reproduce all`` (about 1-2 minutes here):
``drjax reproduce r2pvi-time``.
"""

from __future__ import annotations

import numpy as np

from drjax.agents import registry

AGENTS = ("pevi", "r2pvi-tv", "r2pvi-kl", "drpvi", "drvi-l")  # the paper's Figure 2
N_GRID = (1000, 5000, 10000)   # panel (a), at ANCHORS_AT_N anchors
ANCHORS_AT_N = 30
ANCHOR_GRID = (30, 60, 120)    # panel (b), at N_AT_ANCHORS trajectories
N_AT_ANCHORS = 1000
REPS = 3
MIN_TIME_S = None  # None: the harness's default (each side repeated until it ran 0.5 s)


def grid(n_grid=N_GRID, anchor_grid=ANCHOR_GRID, anchors_at_n=ANCHORS_AT_N,
         n_at_anchors=N_AT_ANCHORS) -> list[tuple[int, int]]:
  """The (N, anchors) points of both panels, each once (the panels share their first point)."""
  pts = [(n, anchors_at_n) for n in n_grid] + [(n_at_anchors, a) for a in anchor_grid]
  return list(dict.fromkeys(pts))


def run(*, n_grid=None, anchor_grid=None, anchors_at_n: int | None = None,
        n_at_anchors: int | None = None, agents=None, reps: int | None = None,
        min_time_s: float | None = None, log=print) -> dict:
  """Times every agent at every point of both panels (``grid``; None: this module's constants,
  the paper's grid); returns ``{"rows", "machine", "anchors_at_n", "n_at_anchors"}``."""
  from drjax.bench import machine, offline  # pylint: disable=g-import-not-at-top
  n_grid = N_GRID if n_grid is None else n_grid
  anchor_grid = ANCHOR_GRID if anchor_grid is None else anchor_grid
  anchors_at_n = ANCHORS_AT_N if anchors_at_n is None else anchors_at_n
  n_at_anchors = N_AT_ANCHORS if n_at_anchors is None else n_at_anchors
  agents = AGENTS if agents is None else agents
  reps = REPS if reps is None else reps
  if isinstance(agents, str):
    raise TypeError(f"agents must be a sequence of agent names, got the string {agents!r}")
  points = grid(n_grid, anchor_grid, anchors_at_n, n_at_anchors)
  for name in agents:
    registry.get(name)  # unknown names fail before anything is timed
  min_time_s = MIN_TIME_S if min_time_s is None else min_time_s
  kw = {} if min_time_s is None else {"min_time_s": min_time_s}
  rows = []
  for n, anchors in points:
    rows += offline.put_rows(n, anchors, reps=reps, agents=tuple(agents), log=log, **kw)
  return {"rows": rows, "machine": machine.machine_info(), "anchors_at_n": anchors_at_n,
          "n_at_anchors": n_at_anchors}


def _series(rows, agent, key, xs, fixed):
  """The warm minima (seconds) of ``agent`` along ``xs`` (``key`` varies, ``fixed`` holds)."""
  out = []
  for x in xs:
    match = [r for r in rows if r["agent"] == agent and r[key] == x
             and all(r[k] == v for k, v in fixed.items())]
    out.append(match[0] if match else None)
  return out


def panels(res: dict) -> dict:
  """Two panels (seconds against N, against anchors), each with drjax / NumPy / published per
  agent, their ratios, and the machine."""
  rows, m = res["rows"], res["machine"]
  agents = list(dict.fromkeys(r["agent"] for r in rows))
  from drjax.bench import offline  # pylint: disable=g-import-not-at-top
  hp = dict(offline.PUT_HP)
  out = {}
  a_n, n_a = res["anchors_at_n"], res["n_at_anchors"]
  ns = sorted({r["N"] for r in rows if r["anchors"] == a_n})
  anchors = sorted({r["anchors"] for r in rows if r["N"] == n_a})
  for tag, key, xs, fixed, label, title in (
      ("fig2a", "N", ns, {"anchors": a_n}, "number of trajectories N",
       f"(a) fit time against N (d = {a_n + 1})"),
      ("fig2b", "anchors", anchors, {"N": n_a}, "anchors (d = anchors + 1)",
       f"(b) fit time against d (N = {n_a:,})")):
    series = {}
    for a in agents:
      found = _series(rows, a, key, xs, fixed)
      if not any(found):
        continue
      get = lambda r, k: None if r is None else r[k]["warm_min_s"]  # noqa: E731
      series[a] = {
          "display": registry.get(a).display,
          "drjax_s": [get(r, "drjax") for r in found],
          "drjax_median_s": [None if r is None else r["drjax"]["warm_median_s"] for r in found],
          "numpy_s": [get(r, "numpy") for r in found],
          "published_s": [None if r is None else r["published_s"] for r in found],
          "compile_s": [None if r is None else r["drjax"]["compile_s"] for r in found],
          "max_abs_w_diff": [None if r is None else r["max_abs_w_diff"] for r in found],
      }
      s = series[a]
      s["numpy_over_drjax"] = [None if n is None or d is None else n / d
                               for n, d in zip(s["numpy_s"], s["drjax_s"])]
      s["published_over_drjax"] = [None if p is None or d is None else p / d
                                   for p, d in zip(s["published_s"], s["drjax_s"])]
    out[tag] = {
        "x": list(xs), "x_label": label, "y_label": "seconds per fit (warm minimum)",
        "title": title, "series": series,
        "config": {"env": "put-option", "variant": "notebook", "H": offline.PUT_HORIZON,
                   "behavior": "fixed:1 (always hold)", "strike": 100, **hp,
                   "agents": agents, "varies": key, **fixed,
                   "drjax": "agent.fit(ds, hparams) through the public entry point, host checks "
                            "included; warm minimum over interleaved repeats",
                   "numpy": "drjax.bench.numpy_offline.fit, the faster of 1 BLAS thread and the "
                            "default; warm minimum",
                   "published": offline.PUBLISHED_SOURCE,
                   "machine": m,
                   "paper": "Tang, Liu & Xu, ICML 2025 (R2PVI), Figure 2"},
    }
  return out


def summary_table(panels_: dict) -> list[str]:
  """``results.md`` lines: a caption and a table with one row per panel and agent
  (``summary_rows``)."""
  return ["", "Fit time (R2PVI paper, Figure 2; put option, H = 20): drjax's warm minimum per "
          "fit, and NumPy / drjax and published / drjax time ratios (above 1: drjax "
          "faster).", "", "| figure | panel, agent | seconds and ratios | machine |",
          "|---|---|---|---|"] + summary_rows(panels_)


def summary_rows(panels_: dict) -> list[str]:
  """results.md lines: per agent, drjax seconds and the NumPy / published ratios."""
  rows = []
  for tag, p in panels_.items():
    for a, s in p["series"].items():
      cells = []
      for x, d, rn, rp in zip(p["x"], s["drjax_s"], s["numpy_over_drjax"],
                              s["published_over_drjax"]):
        if d is None:
          continue
        pub = "-" if rp is None else f"{rp:.0f}x"
        cells.append(f"{p['config']['varies']} {x}: {d * 1e3:.2f} ms (NumPy {rn:.2f}x, "
                     f"published {pub})")
      rows.append(f"| r2pvi-time | {tag} {s['display']} | {'; '.join(cells)} | "
                  f"{p['config']['machine']['name']} |")
  return rows


def plot(panels_: dict, path_base: str) -> None:
  """Seconds (log scale) against N and against d: drjax solid, NumPy dashed, published dotted;
  one colour per agent."""
  from drjax import style  # pylint: disable=g-import-not-at-top
  from drjax.paper import plotting  # pylint: disable=g-import-not-at-top
  from matplotlib.lines import Line2D  # pylint: disable=g-import-not-at-top
  fig = plotting.new_figure((11.0, 4.4))
  axes = fig.subplots(1, 2)
  styles = (("drjax_s", "-", "o", "drjax (this machine)"),
            ("numpy_s", "--", "s", "vectorized NumPy (this machine)"),
            ("published_s", ":", "^", "published NumPy (paper, i5-11300H)"))
  for ax, tag in zip(axes, ("fig2a", "fig2b")):
    p = panels_[tag]
    x = np.asarray(p["x"], float)
    for a, s in p["series"].items():
      color = style.color(a)
      for key, ls, mk, _ in styles:
        y = np.asarray([np.nan if v is None else v for v in s[key]], float)
        if np.all(np.isnan(y)):
          continue
        ax.plot(x, y, ls=ls, marker=mk, ms=3.5, color=color, lw=1.5)
    ax.set_yscale("log")
    ax.set_xticks(x)
    ax.set_xticklabels([f"{int(v):,}" for v in x])
    ax.set_title(style.math(p["title"]), fontsize=9)
    ax.set_xlabel(style.math(p["x_label"]), fontsize=8)
    ax.set_ylabel(p["y_label"], fontsize=8)
    ax.tick_params(labelsize=7)
    ax.grid(True, which="major", alpha=0.3)
  p = panels_["fig2a"]
  handles = [Line2D([], [], color=style.color(a), lw=2, label=style.display(a))
             for a, s in p["series"].items()]
  handles += [Line2D([], [], color="0.3", ls=ls, marker=mk, ms=3.5, label=lab)
              for _, ls, mk, lab in styles]
  fig.legend(handles=handles, fontsize=7, loc="lower center", ncol=len(handles), frameon=False)
  m = p["config"]["machine"]
  where = (f"{m['cpu_model']}, {m['cores']} cores" if m["backend"] == "cpu"
           else f"{m.get('device_kind', m['backend'])} ({m['backend']})")
  fig.suptitle(f"R2PVI paper, Figure 2: one offline fit on the put option ($H$ = 20) -- drjax "
               f"(JAX {m['jax']}) on {where}; NumPy {m['numpy']} in the same process",
               fontsize=9)
  fig.tight_layout(rect=(0, 0.06, 1, 1))
  plotting.save_figure(fig, path_base)
