"""Results files: one JSON per panel, PNG + PDF figures, and ``results.md``; written atomically.

Everything of one figure NAME is first written into a temporary directory next to ``DIR/<NAME>``
and renamed into place only when complete, so an interrupted run leaves either the previous
complete results or none — never a half-written directory.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile

import numpy as np

from drjax.agents import registry

COLORS = {**{s.display: s.color for s in registry.specs()},
          "robust optimum (exact)": "tab:red", "non-robust optimum (exact)": "tab:blue",
          "Theorem 1 bound": "tab:gray"}
# Curves that often coincide with another one (VA-DRPVI with DRPVI when every variance estimate
# is at its floor of 1) are dotted, so the one underneath stays visible.
LINESTYLES = {"VA-DRPVI": (0, (1.5, 1.5))}
TITLES = {"fig1": "Figure 1: simulated linear MDP (rho_1,4 = 0.5)",
          "fig3": "Ablation (Appendix A): rho_1,4 in {0.3, 0.4, 0.5}",
          "fig2": "Figure 2: American put option",
          "subopt": "AveSubopt(k) on the simulated linear MDP",
          "drpvi": "DRPVI paper (Liu & Xu 2024b), Figure 2: offline, 100 uniform trajectories",
          "r2pvi": "R2PVI paper (Tang, Liu & Xu 2025), Figure 1(a)-(d): offline, robust regularized"}


def crossing(x, a, b, tol=1e-9):
  """First x where curve ``a - b`` changes sign (linear interpolation).

  Points where the curves coincide (``|a - b| <= tol``) carry no sign; the crossing is between the
  last point with one sign and the next point with the other. Returns None if the sign never
  changes (including identical curves).
  """
  x, diff = np.asarray(x, float), np.asarray(a, float) - np.asarray(b, float)
  last = None
  for i in range(len(x)):
    if abs(diff[i]) <= tol:
      continue
    if last is not None and diff[last] * diff[i] < 0:
      if i == last + 1:
        return float(x[last] + (x[i] - x[last]) * diff[last] / (diff[last] - diff[i]))
      return float(x[last + 1])  # the curves touch in between
    last = i
  return None


def area(x, y):
  """Area under a curve (trapezoid rule)."""
  x, y = np.asarray(x, float), np.asarray(y, float)
  return float(np.sum((x[1:] - x[:-1]) * (y[1:] + y[:-1]) / 2))


def _settings(panels: dict) -> str:
  """"N seeds, K = k" (and the put-option evaluation) of a figure, from its panels' configs."""
  cfgs = [p.get("config", {}) for p in panels.values()]
  parts = []
  for key, fmt in (("seeds", "{} seeds"), ("episodes", "K = {}"), ("preset", "preset {}")):
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


_OFFSET_PAD = 3  # points between the tick labels and an axis' offset text (Axis.OFFSETTEXTPAD)


def _drawn_ticks(axis):
  """The ticks (major and minor) that a draw of ``axis`` shows, placed and labelled."""
  axis.get_majorticklabels()  # runs the locators and formatters; places and labels the ticks
  to = axis.get_transform().transform
  lo, hi = sorted(to(list(axis.get_view_interval())))
  tol = 1e-10 * (hi - lo)  # the draw's tolerance
  with np.errstate(all="ignore"):
    return [t for t in axis.get_major_ticks() + axis.get_minor_ticks()
            if lo - tol <= to(t.get_loc()) <= hi + tol]


def _outward(side: str, bbox) -> float:
  """How far ``bbox`` reaches out on ``side`` (display units, growing away from the axes)."""
  return {"bottom": -bbox.y0, "top": bbox.y1, "left": -bbox.x0, "right": bbox.x1}[side]


def _axis_box(axis, renderer):
  """``(box, side, label_at)`` of a visible axis, placed as the next draw places it.

  ``box``: its drawn tick labels, offset text and label (collapsed along the axis, as
  tight_layout does), or None; ``side``: where its label goes; ``label_at``: how far beyond the
  axes' edge on that side the label's inner edge is (display units). Mirrors the draw's
  ``Axis._update_label_position`` and ``_update_offset_text_position``.
  """
  from matplotlib.transforms import Bbox  # pylint: disable=g-import-not-at-top

  ax = axis.axes
  side = axis.get_label_position()
  boxes, side1, side2 = [], [], []
  for tick in _drawn_ticks(axis):
    for t, near in ((tick.label1, side1), (tick.label2, side2)):
      if t.get_visible():
        b = t.get_window_extent(renderer)
        near.append(b)  # empty labels too, as the draw
        if t.get_text():
          boxes.append(b)
  near = side1 if side in ("bottom", "left") else side2
  edge = max([_outward(side, b) for b in near] +
             [_outward(side, ax.spines.get(side, ax).get_window_extent())])
  label_at = edge - _outward(side, ax.bbox) + renderer.points_to_pixels(axis.labelpad)
  text = axis.major.formatter.get_offset()
  if text and axis.offsetText.get_visible():
    axis.offsetText.set_text(text)  # set and placed as the draw does
    pad = renderer.points_to_pixels(_OFFSET_PAD)
    x, _ = axis.offsetText.get_position()
    if axis is ax.xaxis and axis.get_ticks_position() == "top":
      y = (Bbox.union(side2).y1 if side2 else ax.bbox.y1) + pad
    elif axis is ax.xaxis:
      y = (Bbox.union(side1).y0 if side1 else ax.bbox.y0) - pad
    else:
      y = ax.spines.get("outline", ax).get_window_extent().y1 + pad
    axis.offsetText.set_position((x, y))
    boxes.append(axis.offsetText.get_window_extent(renderer))
  if axis.label.get_visible() and axis.label.get_text():
    b = axis.label.get_window_extent(renderer)
    reach = _outward(side, ax.bbox) + label_at + (b.height if axis is ax.xaxis else b.width)
    x, y = ax.bbox.intervalx.mean(), ax.bbox.intervaly.mean()
    boxes.append(Bbox.from_extents(*{"bottom": (x, -reach, x, -reach),
                                     "top": (x, reach, x, reach),
                                     "left": (-reach, y, -reach, y),
                                     "right": (reach, y, reach, y)}[side]))
  return (Bbox.union(boxes) if boxes else None), side, label_at


def _decorated_bbox(ax, renderer, placed: dict):
  """Display box of ``ax`` with its tick labels, axis labels, offset texts and title.

  A cheap stand-in for ``ax.get_tightbbox(for_layout_only=True)``: the tick labels are placed and
  measured, the axis labels, offset texts and title put where the draw puts them (it places
  them only when drawing, from the tick labels' extents); widths of titles and x labels
  (heights of y labels) are left out as tight_layout does, and so are the data artists (they
  are clipped to the axes). Records in ``placed[ax]`` where the labels go (``_pin_labels``).
  """
  from matplotlib.transforms import Bbox  # pylint: disable=g-import-not-at-top

  locator = ax.get_axes_locator()  # e.g. a colorbar's, with its aspect: as the draw does
  ax.apply_aspect(locator(ax, renderer) if locator else None)
  boxes, labels, above = [ax.bbox], [], ax.bbox.y1
  if ax.axison:
    for axis in (ax.xaxis, ax.yaxis):
      if axis.get_visible():
        box, side, label_at = _axis_box(axis, renderer)
        boxes += [box] if box is not None else []
        labels.append((axis, side, label_at))
        if (box is not None and axis is ax.xaxis and
            (axis.get_ticks_position() in ("top", "unknown") or side == "top")):
          above = max(above, box.y1)
  clear = True  # the title stays where it is
  title = ax.title
  if title.get_visible() and title.get_text():
    b = title.get_window_extent(renderer)
    offset = ax.yaxis.offsetText
    if ax.axison and offset.get_visible() and offset.get_text():
      ob = offset.get_window_extent(renderer)
      if ob.overlaps(b):
        above = max(above, ob.y1)
    shift = 0.0
    if b.y0 < above:  # the draw moves the title up past what sticks out on top (as there)
      clear = False
      shift = above - ax.bbox.y1
      if b.y0 + shift < above:
        shift = above - b.y0
    y = b.y1 + shift
    boxes.append(Bbox.from_extents(b.intervalx.mean(), y, b.intervalx.mean(), y))
  placed[ax] = (_tick_locs(ax), labels, clear)
  return Bbox.union(boxes)


def _tick_locs(ax):
  return tuple((tuple(a.get_majorticklocs()), tuple(a.get_minorticklocs()),
                tuple(a.get_view_interval())) for a in (ax.xaxis, ax.yaxis))


def _pin_labels(ax, renderer, placed: dict) -> None:
  """Fixes the axis labels (and the title) of ``ax`` where the next draw would put them.

  Every draw otherwise re-measures the tick labels to place them (and the title), twice per
  figure (PNG and PDF); pinned, in axes coordinates, they stay put for both. ``placed``: what
  ``_decorated_bbox`` measured, measured again if the new layout changed the ticks.
  """
  if not ax.axison:
    return
  if ax not in placed or placed[ax][0] != _tick_locs(ax):
    _decorated_bbox(ax, renderer, placed)
  _, labels, clear = placed[ax]
  b = ax.bbox
  for axis, side, label_at in labels:
    auto = getattr(axis, "_autolabelpos", True)  # not placed by the caller (private; else: auto)
    if auto and axis.label.get_visible() and axis.label.get_text():
      x, y = axis.label.get_position()
      if side in ("bottom", "top"):
        axis.set_label_coords(x, -label_at / b.height if side == "bottom" else
                              1 + label_at / b.height)
      else:
        axis.set_label_coords(-label_at / b.width if side == "left" else 1 + label_at / b.width,
                              y)
  if clear:
    # Otherwise every draw checks again that nothing pushes the title up (measuring the y tick
    # labels once more). A private flag: without it, matplotlib merely checks.
    ax._autotitlepos = False  # pylint: disable=protected-access


def fit_layout(fig, suptitle=None, pad: float = 1.08) -> None:
  """``fig.tight_layout(pad=pad)`` for a figure of subplots, from the sizes of its texts only.

  Same margins and gaps as ``tight_layout`` (``pad`` x the font size around and between the
  decorated subplots, ``suptitle`` above them), but each subplot's extent is measured from its
  tick labels, axis labels and title (``_decorated_bbox``) instead of a full layout pass, and
  the axis labels and titles are then pinned where the draw would put them (``_pin_labels``), so
  that drawing (PNG, then PDF) does not place them again. Several times cheaper. Axes that share
  a grid cell (e.g. a colorbar) are measured together.
  """
  import matplotlib as mpl  # pylint: disable=g-import-not-at-top
  from matplotlib.font_manager import FontProperties  # pylint: disable=g-import-not-at-top
  from matplotlib.transforms import Bbox  # pylint: disable=g-import-not-at-top

  get_renderer = getattr(fig.canvas, "get_renderer", None)  # Agg canvases (pyplot's included)
  if get_renderer is None:
    fig.tight_layout(pad=pad)
    return
  renderer = get_renderer()
  width, height = fig.get_size_inches()
  pad_in = pad * FontProperties(size=mpl.rcParams["font.size"]).get_size_in_points() / 72
  cells, shape = {}, None
  for ax in fig.axes:
    ss = ax.get_subplotspec()
    if ss is None or not ax.get_visible():
      continue
    top = ss.get_topmost_subplotspec()
    shape = top.get_gridspec().get_geometry()
    key = (top.rowspan.start, top.rowspan.stop, top.colspan.start, top.colspan.stop)
    cells.setdefault(key, (top, []))[1].append(ax)
  if not cells:
    return
  rows, cols = shape
  placed = {}
  hs, vs = np.zeros((rows, cols + 1)), np.zeros((rows + 1, cols))
  to_fig = fig.transFigure.inverted()
  for (r0, r1, c0, c1), (top, axs) in cells.items():
    cell = top.get_position(fig)
    deco = to_fig.transform_bbox(
        Bbox.union([_decorated_bbox(ax, renderer, placed) for ax in axs]))
    hs[r0:r1, c0] += cell.x0 - deco.x0
    hs[r0:r1, c1] += deco.x1 - cell.x1
    vs[r0, c0:c1] += deco.y1 - cell.y1
    vs[r1, c0:c1] += cell.y0 - deco.y0
  left = max(hs[:, 0].max(), 0) + pad_in / width
  right = max(hs[:, -1].max(), 0) + pad_in / width
  top = max(vs[0].max(), 0) + pad_in / height
  if suptitle is not None and suptitle.get_text():
    top += to_fig.transform_bbox(suptitle.get_window_extent(renderer)).height + pad_in / height
  bottom = max(vs[-1].max(), 0) + pad_in / height
  kw = {"left": left, "right": 1 - right, "bottom": bottom, "top": 1 - top}
  if cols > 1:
    gap = hs[:, 1:-1].max() + pad_in / width
    kw["wspace"] = gap / ((1 - right - left - gap * (cols - 1)) / cols)
  if rows > 1:
    gap = vs[1:-1].max() + pad_in / height
    kw["hspace"] = gap / ((1 - top - bottom - gap * (rows - 1)) / rows)
  fig.subplots_adjust(**kw)
  for _, axs in cells.values():
    for ax in axs:
      _pin_labels(ax, renderer, placed)


def _plot(name: str, panels: dict, path_base: str) -> None:
  tags = list(panels)
  ncol = 3 if len(tags) >= 3 else len(tags)
  nrow = math.ceil(len(tags) / ncol)
  fig = new_figure((4.2 * ncol, 3.3 * nrow + 0.4))
  axes = fig.subplots(nrow, ncol, squeeze=False)
  log = name == "subopt"
  dropped = set()
  for ax, tag in zip(axes.flat, tags):
    p = panels[tag]
    x = np.asarray(p["x"], float)
    for cname, c in p["curves"].items():
      m, se = np.asarray(c["mean"], float), np.asarray(c["stderr"], float)
      exact = "exact" in cname or "bound" in cname
      lo, hi = m - 1.96 * se, m + 1.96 * se
      if log:  # zeros have no place on a log axis: leave them out (and say so) ...
        zero = m <= 0
        dropped |= {int(k) for k in x[zero]}
        m = np.where(zero, np.nan, m)
        floor = np.nanmin(m) / 2 if np.any(~zero) else 1.0
        lo = np.where(zero, np.nan, np.maximum(lo, floor))  # ... and clip bands at the floor
        hi = np.where(zero, np.nan, hi)
      ax.plot(x, m, ls="--" if exact else LINESTYLES.get(cname, "-"), color=COLORS.get(cname),
              label=cname, lw=1.2 if exact else 1.8)
      if not exact:
        ax.fill_between(x, lo, hi, color=COLORS.get(cname), alpha=0.2)
    if p.get("critical_q") is not None and np.isfinite(p["critical_q"]):
      ax.axvline(p["critical_q"], color="k", ls=":", lw=1,
                 label=f"critical q = {p['critical_q']:.5f} (exact)")
    if log:
      ax.set_xscale("log")
      ax.set_yscale("log")
    ax.set_title(p.get("title", tag), fontsize=9)
    ax.set_xlabel(p["x_label"], fontsize=8)
    ax.set_ylabel(p.get("y_label", ""), fontsize=8)
    ax.tick_params(labelsize=7)
  for ax in list(axes.flat)[len(tags):]:
    ax.axis("off")
  axes.flat[0].legend(fontsize=6.5, loc="best")
  title = f"{_title(name, panels)} — {_settings(panels)}; mean and 95% band across seeds"
  if log and dropped:
    ks = sorted(dropped)
    shown = ", ".join(map(str, ks[:6])) + (", ..." if len(ks) > 6 else "")
    title += (f"\nmean AveSubopt(k) = 0 at k = {shown} (not drawn on the log axis); bands "
              "clipped at half the smallest positive mean")
  fit_layout(fig, fig.suptitle(title, fontsize=9))
  save_figure(fig, path_base)


# Kill hook for the crash-recovery tests only: ``DRJAX_TEST_KILL_AT=<stage>`` ends the process
# (``os._exit``) when ``write_figure`` reaches that stage. Stages, in order: ``writing`` (files
# written, not yet marked complete), ``written`` (new directory complete), ``moved-old`` (previous directory moved aside, ``DIR/<name>`` missing),
# ``moved-new`` (new directory in place, previous one not yet deleted).
STAGES = ("writing", "written", "moved-old", "moved-new")
_COMPLETE = ".complete"


def _stage(name: str) -> None:
  if os.environ.get("DRJAX_TEST_KILL_AT") == name:
    os._exit(99)


def _pid_alive(pid: int) -> bool:
  if pid == os.getpid():
    return True
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except OSError:  # exists, owned by someone else
    return True
  return True


def _temp_entries(out_dir: str, name: str):
  """``(path, kind, pid)`` of this figure's temporary directories (``.<name>.<kind>.<pid>.*``)."""
  prefix = f".{name}."
  found = []
  try:
    entries = os.listdir(out_dir)
  except OSError:
    return found
  for e in entries:
    if not e.startswith(prefix):
      continue
    parts = e[len(prefix):].split(".")
    if len(parts) >= 3 and parts[0] in ("new", "old") and parts[1].isdigit():
      found.append((os.path.join(out_dir, e), parts[0], int(parts[1])))
  return found


def recover(out_dir: str, name: str) -> str | None:
  """Completes or undoes a figure-directory swap that a killed run left half done; cleans up.

  If ``out_dir/<name>`` is missing, the newest *complete* new directory of a dead run is moved into
  place (the swap is completed), else the newest previous directory moved aside is restored.
  Temporary directories of runs that are no longer alive are then deleted (those of live
  processes, e.g. a concurrent run, are left alone). Returns what was done, or None.
  """
  final = os.path.join(out_dir, name)
  stale = [(p, kind) for p, kind, pid in _temp_entries(out_dir, name) if not _pid_alive(pid)]
  action = None
  if not os.path.exists(final):
    mtime = lambda p: os.stat(p).st_mtime  # noqa: E731
    new = sorted((p for p, kind in stale
                  if kind == "new" and os.path.exists(os.path.join(p, _COMPLETE))), key=mtime)
    old = sorted((p for p, kind in stale if kind == "old"), key=mtime)
    pick = new[-1] if new else (old[-1] if old else None)
    if pick is not None:
      os.rename(pick, final)
      action = ("completed" if new else "restored") + f" {final} from {os.path.basename(pick)}"
  marker = os.path.join(final, _COMPLETE)
  if os.path.exists(marker):
    os.remove(marker)
  for p, _ in stale:
    if os.path.exists(p):
      shutil.rmtree(p, ignore_errors=True)
  return action


def write_figure(out_dir: str, name: str, panels: dict, plot=None) -> str:
  """Writes ``out_dir/<name>/{<panel>.json, <name>.png, <name>.pdf}`` atomically.

  ``plot(panels, path_base)`` draws the figure (default: the curve panels of ``_plot``).

  Everything goes to ``out_dir/.<name>.new.<pid>.*`` first, marked complete when done; then the
  previous ``out_dir/<name>`` is renamed to ``.<name>.old.<pid>.*``, the new directory renamed into
  place and the old one deleted. A run killed anywhere in between leaves a state that ``recover``
  (called first by every later write) turns back into a complete ``out_dir/<name>``.
  """
  os.makedirs(out_dir, exist_ok=True)
  recover(out_dir, name)
  final = os.path.join(out_dir, name)
  pid = os.getpid()
  tmp = tempfile.mkdtemp(prefix=f".{name}.new.{pid}.", dir=out_dir)
  old = None
  try:
    for tag, panel in panels.items():
      with open(os.path.join(tmp, f"{tag}.json"), "w") as f:
        json.dump(panel, f, indent=1, allow_nan=True)
    if plot is None:
      _plot(name, panels, os.path.join(tmp, name))
    else:
      plot(panels, os.path.join(tmp, name))
    _stage("writing")
    open(os.path.join(tmp, _COMPLETE), "w").close()
    _stage("written")
    if os.path.exists(final):
      old = tempfile.mkdtemp(prefix=f".{name}.old.{pid}.", dir=out_dir)
      os.rmdir(old)
      os.rename(final, old)
      _stage("moved-old")
    os.rename(tmp, final)
    tmp = None
    _stage("moved-new")
    os.remove(os.path.join(final, _COMPLETE))
    if old:
      shutil.rmtree(old, ignore_errors=True)
  except BaseException:
    if tmp is not None:
      shutil.rmtree(tmp, ignore_errors=True)
    if old is not None and not os.path.exists(final) and os.path.exists(old):
      os.rename(old, final)
    raise
  return final


def _row_settings(p: dict) -> str:
  c = p.get("config", {})
  ev = c.get("evaluation", "")
  ev = "exact" if ev.startswith("exact") else ("MC" if ev else "")
  return (f"{c.get('preset', '?')} | {c.get('seeds', '?')} | {c.get('episodes', '?')} | {ev} | "
          f"{c.get('run', '?')}")


def summary_rows(name: str, panels: dict) -> list[str]:
  """One ``results.md`` row per panel, with the settings of the run that produced it."""
  from drjax.paper.programs import DR, LS  # pylint: disable=g-import-not-at-top
  rows = []
  for tag, p in panels.items():
    c = p["curves"]
    head = f"| {name} | {tag} | {_row_settings(p)} |"
    if name == "subopt":
      s = p.get("slopes", {})
      last = {k: c[k]["mean"][-1] for k in (DR, LS)}
      rows.append(f"{head} DR {s.get(DR, float('nan')):.3f}, "
                  f"LSVI {s.get(LS, float('nan')):.3f} | DR "
                  f"{last[DR]:.4f}, LSVI {last[LS]:.4f} |")
      continue
    x = p["x"]
    cross = crossing(x, c[DR]["mean"], c[LS]["mean"])
    cross_s = "none" if cross is None else f"{cross:.3f}"
    crit = p.get("critical_q")
    crit_s = "" if crit is None else (
        f"{crit:.5f} (paper's formula {p['critical_q_paper_formula']:.3f})")
    rows.append(f"{head} {cross_s} | AUC LSVI {area(x, c[LS]['mean']):.4f}, "
                f"DR {area(x, c[DR]['mean']):.4f} | {crit_s} |")
  return rows


def sensitivity_rows(panels: dict) -> list[str]:
  """``results.md`` rows of ``drjax reproduce sensitivity`` (one per ||xi||_1)."""
  rows = []
  for tag, p in panels.items():
    kinks = ", ".join(f"{k:.6f}" for k in p["kinks"]) or "none"
    sides = "; ".join(f"{o['left']:.4f}, {o['right']:.4f}" for o in p["one_sided"]) or "-"
    diff = float(np.max(np.abs(np.asarray(p["grad_autodiff"]) -
                               np.asarray(p["grad_closed_form"]))))
    g = np.asarray(p["sensitivity_map"]["autodiff"])
    h, i = np.unravel_index(np.argmax(np.abs(g)), g.shape)
    wc = p["worst_case"]
    f = wc["families"]

    def fe(n):
      if n not in f:
        return "-"
      e = f[n].get("exact")
      return f"{f[n]['found']:.6f}" + ("" if e is None else f" / {e:.6f}")

    rows.append(f"| sensitivity | {tag} | {kinks} ({p['rho_star_closed_form']:.6f}) | {sides} | "
                f"{diff:.1e} | h={h + 1}, i={i + 1}: {g[h, i]:.4f} | {wc['nominal_value']:.6f} | "
                f"{fe('d-rectangular')} | {fe('s,a-rectangular')} | "
                f"{fe('factor-4 q at every step')} |")
  return rows


def write_summary(out_dir: str, sections: dict, header: str) -> str:
  """Writes ``out_dir/results.md`` (atomically) for all figures in ``sections`` {name: panels}.

  The table is regenerated from the panel JSON files, one row per panel, with the preset, seeds,
  K, evaluation and run (start time and process) each row came from: figures written by different
  runs into one directory are never merged silently.
  """
  runs = sorted({p.get("config", {}).get("run", "?") for ps in sections.values()
                 for p in ps.values()})
  note = (f"Rows come from {len(runs)} different runs (column `run`): compare their settings "
          "before comparing their numbers." if len(runs) > 1 else
          "All rows come from one run.")
  cols = "| figure | panel | preset | seeds | K | evaluation | run |"
  lines = [header, "", note]
  own = ("subopt", "sensitivity", "drpvi", "r2pvi", "r2pvi-time")  # tables of their own below
  if any(n not in own for n in sections):
    lines += ["", f"{cols} DR/LSVI curves cross at | area under curve | exact critical q |",
              "|---|---|---|---|---|---|---|---|---|---|"]
  for name, panels in sections.items():
    if name not in own:
      lines += summary_rows(name, panels)
  if "drpvi" in sections:
    from drjax.paper import drpvi  # pylint: disable=g-import-not-at-top
    lines += ["", "Offline (DRPVI paper, Figure 2; exact evaluation). First action: the exact "
              "robust-optimal action at x1, step 1; share: seeds whose learned first action is "
              "it; SubOpt: mean exact robust suboptimality V*_1 - V^pi_1 at the panel's rho; "
              "last: seeds where VA-DRPVI's greedy policy equals DRPVI's.", "",
              "| figure | panel | preset | seeds | K | robust-optimal first action | share of seeds "
              "choosing it | mean SubOpt | VA-DRPVI == DRPVI | run |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    lines += drpvi.summary_rows(sections["drpvi"])
  if "r2pvi" in sections:
    from drjax.paper import r2pvi  # pylint: disable=g-import-not-at-top
    lines += ["", "Robust regularized (R2PVI paper, Figure 1(a)-(d); exact evaluation): the mean "
              "of each learned curve over its x values; fig1c also the exact weight matching each "
              "rho (planning.weight_for_radius).", "",
              "| figure | panel | seeds | K | mean over x | run |", "|---|---|---|---|---|---|"]
    lines += r2pvi.summary_rows(sections["r2pvi"])
  if "r2pvi-time" in sections:
    from drjax.paper import r2pvi_time  # pylint: disable=g-import-not-at-top
    lines += ["", "Fit time (R2PVI paper, Figure 2; put option, H = 20): drjax's warm minimum per "
              "fit, and NumPy / drjax and published / drjax time ratios (above 1: drjax "
              "faster).", "", "| figure | panel, agent | seconds and ratios | machine |",
              "|---|---|---|---|"]
    lines += r2pvi_time.summary_rows(sections["r2pvi-time"])
  if "subopt" in sections:
    lines += ["", f"{cols} fitted slope of log AveSubopt vs log k | AveSubopt(K) |",
              "|---|---|---|---|---|---|---|---|---|"]
    lines += summary_rows("subopt", sections["subopt"])
  if "sensitivity" in sections:
    lines += ["", "Sensitivity (exact, float64): kinks of the robust first action at x1 along "
              "rho_1,4 (closed form rho* = 1 - (1-p) V_2(x2)/2), one-sided derivatives there, "
              "max |autodiff - closed form| over the 101-point curve, the largest entry of "
              "|dV*/drho| at rho_1,4 = 0.5, and the worst-case values of the policy that is "
              "robust-optimal for rho_h,4 = 0.5 (found by gradient search / exact).", "",
              "| figure | panel | kinks (closed form) | dV/drho_1,4 left, right at kink | "
              "max |autodiff - closed form| | largest |dV*/drho_h,i| | nominal | d-rect found / "
              "exact | s,a-rect found / exact | factor-4 q every step found |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    lines += sensitivity_rows(sections["sensitivity"])
  path = os.path.join(out_dir, "results.md")
  fd, tmp = tempfile.mkstemp(prefix=".results-", suffix=".md", dir=out_dir)
  with os.fdopen(fd, "w") as f:
    f.write("\n".join(lines) + "\n")
  os.replace(tmp, path)
  return path
