"""Figure layout of drjax's figures: ``fit_layout``, a replacement for ``fig.tight_layout``.

Why not matplotlib's own layouts: ``tight_layout`` (and ``constrained_layout``) run a full layout
pass -- every tick label, axis label and title measured by drawing -- and the figure is then
drawn twice more (PNG and PDF), placing the labels again each time. ``fit_layout`` measures each
subplot's decorations once from their text extents, computes the same margins and gaps as
``tight_layout`` (``pad`` x the font size), places figure legends and footers, and pins the axis
labels and titles where the draw would put them, so the PNG and PDF draws do not lay them out
again: several times cheaper for the many-panel figures of ``drjax reproduce``. It sets one
private matplotlib attribute (``Axes._autotitlepos = False``, see ``_pin_labels``): without it,
every draw checks the title position again; if a matplotlib release drops the attribute the
figure is still correct, only slower. On canvases without a renderer it falls back to
``fig.tight_layout``.
"""

from __future__ import annotations

import numpy as np


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


def fit_layout(fig, suptitle=None, pad: float = 1.08, *, legend=None, footer=None) -> None:
  """``fig.tight_layout(pad=pad)`` for a figure of subplots, from the sizes of its texts only.

  ``legend``: a figure legend (``fig.legend(..., loc="upper center")``), placed under the
  suptitle, its height kept free above the subplots. ``footer``: a figure text
  (``fig.text(0.5, 0, ..., ha="center", va="bottom")``), placed at the bottom, its height kept
  free below the subplots.

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
  below_title = 1 - pad_in / height
  if suptitle is not None and suptitle.get_text():
    st = to_fig.transform_bbox(suptitle.get_window_extent(renderer))
    top += st.height + pad_in / height
    below_title = st.y0 - 0.3 * pad_in / height
  if legend is not None:
    legend.set_bbox_to_anchor((0.5, below_title), transform=fig.transFigure)
    top += to_fig.transform_bbox(legend.get_window_extent(renderer)).height + 0.3 * pad_in / height
  bottom = max(vs[-1].max(), 0) + pad_in / height
  if footer is not None and footer.get_text():
    footer.set_position((0.5, 0.5 * pad_in / height))
    foot = to_fig.transform_bbox(footer.get_window_extent(renderer))
    bottom += foot.height + 0.5 * pad_in / height
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
