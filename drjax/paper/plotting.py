"""Plotting of ``drjax reproduce``'s figures: Agg figures (no pyplot), PNG + PDF, curve panels.

``new_figure`` / ``save_figure`` (every figure family draws on these), ``draw_curves`` (one panel
of learned curves with 95% bands and exact references, its y axis scaled to the learned curves),
``figure`` (the curve figures fig1, fig3, fig2, subopt, train) and ``figure_legend``; the layout
is ``drjax.paper.layout.fit_layout`` (re-exported here). Colours and line styles come from
``drjax.style``.
"""

from __future__ import annotations

import math

import numpy as np

from drjax import style
from drjax.agents import registry
# The layout of every figure: drjax.paper.layout (why not tight_layout: see there).
from drjax.paper.layout import fit_layout  # noqa: F401  (re-exported)

# Colours of every curve name a panel can hold: algorithms from the registry, exact references in
# black and greys (drjax.style). Kept for notebooks that colour their own plots by curve name.
COLORS = {**{s.display: s.color for s in registry.specs()},
          **{n: style.color(n) for n in ("robust optimum (exact)", "non-robust optimum (exact)",
                                         "Theorem 1 bound")}}
TITLES = {"fig1": r"Figure 1: simulated linear MDP ($\rho_{1,4}$ = 0.5)",
          "fig3": r"Ablation (Appendix A): $\rho_{1,4}$ in {0.3, 0.4, 0.5}",
          "fig2": "Figure 2: American put option",
          "subopt": "AveSubopt$(k)$ on the simulated linear MDP",
          "drpvi": "DRPVI paper (Liu & Xu 2024b), Figure 2: offline, 100 uniform trajectories",
          "r2pvi": "R2PVI paper (Tang, Liu & Xu 2025), Figure 1(a)-(d): offline, robust regularized"}


def _settings(panels: dict) -> str:
  """"N seeds, K = k" (and the put-option evaluation) of a figure, from its panels' configs."""
  cfgs = [p.get("config", {}) for p in panels.values()]
  parts = []
  for key, fmt in (("seeds", "{} seeds"), ("episodes", "$K$ = {}"), ("preset", "preset {}")):
    vals = sorted({str(c[key]) for c in cfgs if key in c})
    if vals:
      parts.append(fmt.format("/".join(vals)))
  evals = {c.get("evaluation", "") for c in cfgs if c.get("env") == "put-option"}
  if evals:
    parts.append("exact lattice evaluation" if all(e.startswith("exact") for e in evals)
                 else "Monte Carlo evaluation (common random numbers)")
  return ", ".join(parts)


def _title(name: str, panels: dict) -> str:
  if name == "train":
    envs = sorted({p.get("config", {}).get("env", "?") for p in panels.values()})
    return f"drjax train: {', '.join(envs)}"
  return TITLES.get(name, name)


PNG_DPI = 130
_PNG_OPTIONS = {"compress_level": 1}  # zlib level 1: a few % larger, encodes ~2x faster than 6


def new_figure(figsize):
  """A ``matplotlib.figure.Figure`` on its own Agg canvas: no pyplot, no global backend state.

  Its dpi is the PNG's, so text measured for the layout (``fit_layout``) is measured once, by the
  renderer that then draws the PNG.
  """
  from matplotlib.backends.backend_agg import FigureCanvasAgg  # pylint: disable=g-import-not-at-top
  from matplotlib.figure import Figure  # pylint: disable=g-import-not-at-top

  fig = Figure(figsize=figsize, dpi=PNG_DPI)
  FigureCanvasAgg(fig)
  return fig


def save_figure(fig, path_base: str) -> None:
  """Writes ``path_base.png`` (``PNG_DPI``) and ``path_base.pdf``."""
  fig.savefig(path_base + ".png", dpi=PNG_DPI, pil_kwargs=_PNG_OPTIONS)
  fig.savefig(path_base + ".pdf")


# A panel's y axis is scaled to its learned curves: their range fills at least 1 / (1 +
# LEARNED_MARGIN) of it. The margin goes where the exact references lie (below or above the
# learned curves); references and bands beyond it are drawn clipped at the axis edge, and the
# value they reach is written in the panel.
LEARNED_MARGIN = 1.5
_COINCIDE = 0.015  # curves closer than this fraction of the axis height (about a line width)
#                   everywhere coincide
# Learned curves that coincide with one drawn before: dashed, then dotted (the one below shows).
_OVERLAP_STYLES = ((0, (4, 3)), (0, (1.2, 1.8)), (2, (4, 3)))


def _finite_range(arrays):
  vals = np.concatenate([np.ravel(np.asarray(a, float)) for a in arrays] or [np.zeros(0)])
  vals = vals[np.isfinite(vals)]
  return (float(vals.min()), float(vals.max())) if vals.size else None


def _window(learned, others, log: bool):
  """``(lo, hi)``: the values a panel's y axis may show (log10 units on a log axis).

  ``learned``: the learned curves' means, whose range the window contains; ``others``: what else
  the panel draws (references, bands), which gets the margin on its side.
  """
  rng = _finite_range(learned)
  if rng is None:
    return None
  lo, hi = rng
  span = hi - lo
  ext = _finite_range(others) or (lo, hi)
  if span <= 1e-9 * max(1.0, abs(hi)):  # flat (or identical) learned curves: nothing to scale to
    span = 0.2 if log else 0.2 * max(abs(hi), 1e-3)
    return min(lo - span / 2, ext[0]), max(hi + span / 2, ext[1])
  below, above = max(lo - ext[0], 0.0) / span, max(ext[1] - hi, 0.0) / span
  half = LEARNED_MARGIN / 2
  if below + above <= LEARNED_MARGIN:
    pass
  elif below <= half:
    above = LEARNED_MARGIN - below
  elif above <= half:
    below = LEARNED_MARGIN - above
  else:
    below = above = half
  return lo - below * span, hi + above * span


def _coincides(a, b, tol) -> bool:
  a, b = np.asarray(a, float), np.asarray(b, float)
  both = np.isfinite(a) & np.isfinite(b)
  return bool(both.any()) and bool(np.all(np.abs(a[both] - b[both]) <= tol)) and bool(
      np.array_equal(np.isfinite(a), np.isfinite(b)))


def draw_curves(ax, p: dict, log: bool, x_name: str) -> dict:
  """Draws one panel's curves into ``ax`` and sets its limits.

  Learned curves (``p["curves"]`` that are not ``style.is_reference``): their algorithm's colour
  (shades for variants of one algorithm), solid, with a 95% band; a curve that coincides with
  one drawn before it is dashed (then dotted), the one below thicker, so both show. Exact
  references: ``style.reference_style``, above the learned curves. The y axis (``_window``)
  shows the learned curves on at least 1 / (1 + LEARNED_MARGIN) of its height; a reference
  beyond it is marked at the edge with the value it reaches (``x_name``: the x symbol for that
  note). ``log``: log-log axes (AveSubopt), zero means left out. ``p["critical_q"]``: a
  vertical line with its value.

  Returns ``{"handles": {label: artist}, "zero_k": set, "bands_cut": bool}``: the artists a
  legend may name (only visible ones), the k where a log panel left out a zero mean, and whether
  a band ran off a log axis.
  """
  x = np.asarray(p["x"], float)
  curves = p["curves"]
  learned = {n: c for n, c in curves.items() if not style.is_reference(n)}
  refs = {n: c for n, c in curves.items() if style.is_reference(n)}
  tr = (lambda v: np.log10(v)) if log else (lambda v: v)  # noqa: E731
  zero_k = set()
  info = {"handles": {}, "zero_k": zero_k, "bands_cut": False}

  def mean(c):
    m = np.asarray(c["mean"], float)
    if log:
      zero_k.update(int(k) for k in x[m <= 0])
      m = np.where(m > 0, m, np.nan)
    return m

  with np.errstate(all="ignore"):
    bands = [tr(mean(c) + k * 1.96 * np.asarray(c["stderr"], float))
             for c in learned.values() for k in (-1, 1)]
    win = _window([tr(mean(c)) for c in learned.values()],
                  [tr(mean(c)) for c in refs.values()] + bands, log)
    if win is None:  # nothing learned: the references set the axis
      win = _window([tr(mean(c)) for c in refs.values()], [], log) or (0.0, 1.0)
  w_lo, w_hi = win
  shown = []  # transformed values drawn inside the window, for the axis limits

  def inside(v):
    with np.errstate(all="ignore"):
      t = tr(v)
    t = t[np.isfinite(t)]
    shown.extend(np.clip(t, w_lo, w_hi).tolist())

  for n, c in curves.items():
    m = mean(c)
    inside(m)
    if n in learned:
      se = np.asarray(c["stderr"], float)
      inside(m - 1.96 * se)
      inside(m + 1.96 * se)
  if not shown:  # nothing drawable (e.g. only zeros on a log axis)
    shown = [w_lo, w_hi]
  lo, hi = min(shown), max(shown)
  pad = 0.04 * max(hi - lo, 1e-12)
  lo, hi = lo - pad, hi + pad
  tol = _COINCIDE * (hi - lo)
  ylim = (10 ** lo, 10 ** hi) if log else (lo, hi)
  if log:
    ax.set_yscale("log")
    ax.set_xscale("log")

  drawn = []
  colors = {n: style.color(n) for n in learned}
  for base in set(colors.values()) - {None}:  # variants of one algorithm: shades of its colour
    same = [n for n in learned if colors[n] == base]
    if len(same) > 1:
      colors.update(zip(same, style.shades(base, len(same))))
  for k, name in enumerate(n for n in learned if colors[n] is None):
    colors[name] = f"C{k}"
  for name, c in learned.items():
    m, se = mean(c), np.asarray(c["stderr"], float)
    col = colors[name]
    over = sum(_coincides(tr(m), tr(d), tol) for d in drawn)
    ls = "-" if over == 0 else _OVERLAP_STYLES[(over - 1) % len(_OVERLAP_STYLES)]
    lw = style.LEARNED_LW + (0.6 if over == 0 and any(
        _coincides(tr(m), tr(mean(c2)), tol) for n2, c2 in learned.items() if n2 != name) else 0)
    label = _learned_label(name, p, log)
    (line,) = ax.plot(x, m, color=col, ls=ls, lw=lw, label=label, zorder=style.LEARNED_Z,
                      gid="learned")
    drawn.append(m)
    info["handles"][label] = line
    band_lo, band_hi = m - 1.96 * se, m + 1.96 * se
    if log:  # a band reaching 0 (or below the axis) runs off the bottom edge
      cut = band_lo <= ylim[0]
      info["bands_cut"] |= bool(np.any(cut & np.isfinite(m) & (se > 0)))
      band_lo = np.where(cut, ylim[0] / 10, band_lo)
      band_hi = np.minimum(band_hi, ylim[1] * 10)
    else:
      band_lo = np.clip(band_lo, ylim[0] - (hi - lo), None)
      band_hi = np.clip(band_hi, None, ylim[1] + (hi - lo))
    ax.fill_between(x, band_lo, band_hi, color=col, alpha=0.2, lw=0, zorder=1)
  for name, c in refs.items():
    m = mean(c)
    label = style.math(name + (" (DR-LSVI-UCB)" if name == "Theorem 1 bound" else ""))
    (line,) = ax.plot(x, m, label=label, gid="reference", **style.reference_style(name))
    with np.errstate(all="ignore"):
      t = tr(m)
    above, below = t > hi, t < lo
    for off, side in ((above, "above"), (below, "below")):
      if np.any(off):
        j = int(np.nanargmax(t) if side == "above" else np.nanargmin(t))
        _mark_off_scale(ax, x, off, m[j], x[j], side, line.get_color(), x_name)
    if np.any(np.isfinite(t) & (t >= lo) & (t <= hi)):
      info["handles"][label] = line
  crit = p.get("critical_q")
  if crit is not None and np.isfinite(crit):
    line = ax.axvline(crit, color="0.55", ls="-", lw=0.9, zorder=style.REFERENCE_Z,
                      label="critical $q$ (exact): the optimal first action switches")
    info["handles"][line.get_label()] = line
    ax.text(crit, 0.03, f" $q^*$ = {crit:.3f}", transform=ax.get_xaxis_transform(),
            fontsize=7, ha="left", va="bottom")
  ax.set_ylim(*ylim)
  ax.set_xlim(x.min(), x.max())
  return info


def _learned_label(name: str, p: dict, log: bool) -> str:
  """Legend label of a learned curve: its algorithm's name; on AveSubopt panels also what it is
  measured against."""
  if not log:
    return style.math(name)
  against = "robust" if name == style.display("dr-lsvi-ucb") else "non-robust"
  return f"{name}: AveSubopt against the exact {against} optimum"


def wrap_text(text: str, width: int) -> str:
  """``textwrap.fill`` that never breaks inside ``$...$``."""
  import textwrap  # pylint: disable=g-import-not-at-top

  parts = style._MATH.split(text)  # pylint: disable=protected-access
  protected = "".join(q.replace(" ", "\0") if q.startswith("$") else q for q in parts)
  return textwrap.fill(protected, width).replace("\0", " ")


def _annotate_slopes(ax, p: dict) -> None:
  """Writes the learned curves' fitted slopes in the lower left corner of an AveSubopt panel
  (empty there: AveSubopt falls with k), each line in its curve's colour."""
  slopes = p.get("slopes", {})
  lines = [(name, slopes[name]) for name in p["curves"] if not style.is_reference(name)
           and slopes.get(name) is not None and np.isfinite(slopes[name])]
  for i, (name, s) in enumerate(reversed(lines)):
    value = f"{s:.2f}".replace("-", "\N{MINUS SIGN}")
    ax.text(0.03, 0.04 + 0.075 * i, f"{name}: slope {value}", transform=ax.transAxes,
            fontsize=7.5, color=style.color(name), ha="left", va="bottom")


def _mark_off_scale(ax, x, off, value, x_at, side, color, x_name):
  """Marks where a clipped reference is beyond the axis (a thick stroke on that edge over the
  ``x[off]`` range) and writes the extreme ``value`` it reaches (at ``x_at``)."""
  from matplotlib.transforms import blended_transform_factory  # pylint: disable=g-import-not-at-top

  t = blended_transform_factory(ax.transData, ax.transAxes)
  y = 0.995 if side == "above" else 0.005
  ax.plot([x[off].min(), x[off].max()], [y, y], transform=t, color=color, lw=2.5,
          solid_capstyle="butt", clip_on=False, zorder=style.REFERENCE_Z)
  left = x_at <= (x.min() + x.max()) / 2
  ax.text(x_at, 0.975 if side == "above" else 0.025,
          f"{'↑' if side == 'above' else '↓'} off scale: {value:.3g} at {x_name} = {x_at:g}",
          transform=t, fontsize=6.5, color=color, ha="left" if left else "right",
          va="top" if side == "above" else "bottom")


def x_symbol(p: dict) -> str:
  """The mathtext symbol of a panel's x variable."""
  label = p.get("x_label", "")
  if "p_u" in label:
    return "$p_u$"
  if "probability p" in label:
    return "$p$"
  if "episode" in label:
    return "$k$"
  return "$q$"


def figure(name: str, panels: dict):
  """The figure of ``name`` (curve panels: learned curves with 95% bands, exact references) as a
  ``matplotlib.figure.Figure`` on an Agg canvas (no pyplot); ``save_curve_figure`` saves it."""
  tags = list(panels)
  ncol = 3 if len(tags) >= 3 else len(tags)
  nrow = math.ceil(len(tags) / ncol)
  fig = new_figure((max(4.2 * ncol, 6.4), 3.3 * nrow + 0.6))
  axes = fig.subplots(nrow, ncol, squeeze=False)
  log = name == "subopt"
  handles, zero_k, bands_cut, clipped = {}, set(), False, False
  for ax, tag in zip(axes.flat, tags):
    p = panels[tag]
    info = draw_curves(ax, p, log, x_symbol(p))
    for label, artist in info["handles"].items():
      # The first panel where it is visible, drawn in its own style (not dashed over another).
      if label not in handles or (handles[label].get_linestyle() != "-" and
                                  artist.get_linestyle() == "-"):
        handles[label] = artist
    zero_k |= info["zero_k"]
    bands_cut |= info["bands_cut"]
    clipped |= any("off scale" in t.get_text() for t in ax.texts)
    ax.set_title(style.math(p.get("title", tag)), fontsize=9)
    ax.set_xlabel(style.math(p["x_label"]), fontsize=8)
    ax.set_ylabel(style.y_label(p.get("y_label")) if not log else style.math(p["y_label"]),
                  fontsize=8)
    ax.tick_params(labelsize=7)
    if log:
      _annotate_slopes(ax, p)
  for ax in list(axes.flat)[len(tags):]:
    ax.axis("off")
  title = wrap_text(f"{_title(name, panels)} — {_settings(panels)}; mean and 95% band across "
                    "seeds", int(fig.get_figwidth() * 13))
  notes = []
  if log:
    has_slope = any(np.isfinite(v) for p in panels.values()
                    for v in p.get("slopes", {}).values() if v is not None)
    notes.append(r"Each algorithm is measured against its own exact optimum: DR-LSVI-UCB "
                 r"against the robust one (its $\rho$), LSVI-UCB against the non-robust one. " +
                 (r"Slope (lower left): least-squares line of log "
                  r"AveSubopt$(k)$ on log $k$ for $k \geq 10$." if has_slope else
                  r"No fitted slope: it needs two or more $k \geq 10$."))
    zero = []
    if zero_k:
      ks = sorted(zero_k)
      shown = ", ".join(map(str, ks[:6])) + (", ..." if len(ks) > 6 else "")
      zero.append(f"A mean of 0 (every seed optimal so far; here at $k$ = {shown}) cannot be "
                  "drawn on a log axis: those points are left out")
    if bands_cut:
      zero.append("bands whose lower end reaches 0 run off the bottom of the axis")
    if zero:
      notes.append("; ".join(zero) + ".")
  elif clipped:
    notes.append("The y axis shows the learned curves; exact references beyond it are cut at "
                 "the edge (thick mark) with the value they reach written beside it.")
  if notes:
    title += "\n" + "\n".join(wrap_text(n, int(fig.get_figwidth() * 13)) for n in notes)
  legend = figure_legend(fig, handles) if handles else None
  fit_layout(fig, fig.suptitle(title, fontsize=9), legend=legend)
  return fig


def figure_legend(fig, handles: dict):
  """One legend for the whole figure (``{label: artist}``), in as many columns as fit its width
  (``fit_layout`` puts it under the suptitle)."""
  get_renderer = getattr(fig.canvas, "get_renderer", None)
  if get_renderer is None:  # not an Agg canvas
    get_renderer = fig._get_renderer  # pylint: disable=protected-access
  renderer = get_renderer()
  for ncol in range(min(len(handles), 5), 0, -1):
    legend = fig.legend(list(handles.values()), list(handles), loc="upper center", ncol=ncol,
                        fontsize=7, frameon=False)
    if ncol == 1 or legend.get_window_extent(renderer).width <= 0.98 * fig.bbox.width:
      return legend
    legend.remove()
  return legend


def save_curve_figure(name: str, panels: dict, path_base: str) -> None:
  """Writes the curve figure ``figure(name, panels)`` to ``path_base.png`` and ``.pdf``."""
  save_figure(figure(name, panels), path_base)
