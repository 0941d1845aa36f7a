"""The figures of `drjax reproduce` / `drjax train`, read back from their matplotlib objects.

Built from small synthetic panels (no training): every figure is checked for
* y limits that show the learned curves, with at least a third of the axis height between their
  min and max wherever they differ;
* legends whose every entry names an artist that can be seen (drawn, inside the axes, and not
  lying inside the stroke of a solid line drawn above it or of the same colour);
* mathtext wherever a title, label, legend entry or note names a symbol;
and the figure-specific requirements of issue 20 (subopt, sensitivity, colours, wording).
"""

import re

import numpy as np
import pytest

from drjax import style
from drjax.agents import registry
from drjax.paper import outputs, r2pvi, sensitivity

DR, LS = "DR-LSVI-UCB", "LSVI-UCB"
OLD_Y = "average reward in the target domain"  # what panels of earlier runs hold


def _curve(m, se=0.0):
  m = np.asarray(m, float)
  return {"mean": m.tolist(), "stderr": np.broadcast_to(np.asarray(se, float), m.shape).tolist()}


def _linear_panel(xi, rho, *, dr_equals_ls=False):
  """A fig1/fig3-like panel: straight lines crossing at q*, references as in the real data
  (robust optimum under DR-LSVI-UCB, non-robust optimum under LSVI-UCB)."""
  q = np.linspace(0, 1, 21)
  crit = 0.48
  ls = 1.04 - 0.8 * (q - crit)
  dr = ls + 0.003 if dr_equals_ls else 1.04 - 0.45 * (q - crit)
  return {"x": q.tolist(), "x_label": "perturbation level q", "y_label": OLD_Y,
          "curves": {LS: _curve(ls, 0.004), DR: _curve(dr, 0.02),
                     "robust optimum (exact)": _curve(dr - 0.0005),
                     "non-robust optimum (exact)": _curve(ls)},
          "critical_q": crit, "critical_q_paper_formula": 0.6,
          "title": f"||xi||_1 = {xi:g}, rho_1,4 = {rho:g}",
          "config": {"env": "linear-mdp", "seeds": 3, "episodes": 5, "preset": "paper",
                     "xi_norm": xi, "rho": rho, "evaluation": "exact ...", "run": "r"}}


def _put_panels():
  """fig2-like: learned curves between 0.7 and 2.8, the non-robust optimum from 12 to 0."""
  pu = np.linspace(0.15, 0.85, 29)
  out = {}
  for rho in (0.3, 0.4):
    out[f"rho{rho:g}"] = {
        "x": pu.tolist(), "x_label": "price-up probability p_u of the target", "y_label": OLD_Y,
        "curves": {LS: _curve(2.5 - 2.5 * (pu - 0.15), 0.1), DR: _curve(np.full_like(pu, 1.25)),
                   "robust optimum (exact)": _curve(2.2 - 1.3 * (pu - 0.15)),
                   "non-robust optimum (exact)": _curve(12 * ((0.85 - pu) / 0.7) ** 2 + 0.05)},
        "title": f"rho = {rho:g}",
        "config": {"env": "put-option", "seeds": 4, "episodes": 5, "preset": "paper",
                   "rho": rho, "evaluation": "exact ...", "run": "r"}}
  return out


def _subopt_panels():
  k = np.arange(1, 101, dtype=float)
  out = {}
  for xi in (0.1, 0.2):
    dr = 0.2 * k ** -0.8
    dr[0] = 0.0  # every seed optimal at k = 1: not drawable on a log axis
    out[f"xi{xi:g}"] = {
        "x": k.tolist(), "x_label": "episode k", "y_label": "AveSubopt(k)",
        "curves": {DR: _curve(dr, 0.6 * dr), LS: _curve(1.5 * k ** -0.6, 0.01),
                   "Theorem 1 bound": _curve(30 * k ** -0.4)},
        "slopes": {DR: -0.81, LS: -0.6},
        "title": f"||xi||_1 = {xi:g}, rho_1,4 = 0.5",
        "config": {"env": "linear-mdp", "seeds": 3, "episodes": 100, "preset": "paper",
                   "run": "r"}}
  return out


def _offline_panels():
  """drpvi-like: VA-DRPVI identical to DRPVI, both on the robust optimum."""
  q = np.linspace(0, 1, 21)
  dr = 1.23 - 0.4 * q
  return {"xi0.1_rho0.5": {
      "x": q.tolist(), "x_label": "perturbation level q", "y_label": OLD_Y,
      "curves": {"PEVI": _curve(1.35 - 0.65 * q, 0.01), "DRPVI": _curve(dr, 0.01),
                 "VA-DRPVI": _curve(dr, 0.01), "robust optimum (exact)": _curve(dr),
                 "non-robust optimum (exact)": _curve(1.42 - 0.8 * q)},
      "title": "||xi||_1 = 0.1, rho_1,4 = 0.5",
      "config": {"env": "linear-mdp", "seeds": 3, "episodes": 5, "preset": "paper", "run": "r"}}}


def _r2pvi_panels():
  q = np.linspace(0, 1, 11)
  lv = np.linspace(0, 1, 10)
  pu = np.asarray([0.2, 0.4, 0.6, 0.8, 1.0])
  tv_c = np.full(10, 1.145)
  tv_c[0] = np.nan  # weight 0 undefined
  base = {"seeds": 3, "trajectories": 5, "preset": "paper", "run": "r"}
  flat = {f"R2PVI-TV, weight {w:g}": _curve(np.full(11, 1.44)) for w in (0.1, 0.2, 0.3, 0.6)}
  return {
      "fig1a": {"x": q.tolist(), "x_label": "perturbation level q", "y_label": OLD_Y,
                "curves": {"PEVI": _curve(1.53 - 0.75 * q, 0.01),
                           "R2PVI-TV": _curve(1.33 - 0.2 * q, 0.01),
                           "R2PVI-KL": _curve(1.46 - 0.56 * q, 0.05),
                           "R2PVI-chi2": _curve(1.46 - 0.56 * q, 0.05),
                           "non-robust optimum (exact)": _curve(1.62 - q),
                           "TV-regularized optimum, weight 0.1 (exact)": _curve(1.6 - 0.95 * q)},
                "title": "(a) ||xi||_1 = 0.2, regularization weight 0.1", "config": base},
      "fig1b": {"x": q.tolist(), "x_label": "perturbation level q", "y_label": OLD_Y,
                "curves": {**flat, "non-robust optimum (exact)": _curve(1.77 - 1.2 * q)},
                "title": "(b) ||xi||_1 = 0.3, R2PVI-TV by weight", "config": base},
      "fig1c": {"x": lv.tolist(), "x_label": "rho (DRPVI) = weight (R2PVI-TV)",
                "y_label": "average reward at q = 0.9",
                "curves": {"DRPVI": _curve(0.85 + 0.3 * lv, 0.05), "R2PVI-TV": _curve(tv_c)},
                "correspondence_weight_for_rho": [np.nan] + list(1.5 - 1.5 * lv[1:]),
                "title": "(c) ||xi||_1 = 0.2, q = 0.9", "config": base},
      "fig1d": {"x": pu.tolist(), "x_label": "price-up probability p", "y_label": OLD_Y,
                "curves": {"PEVI": _curve(np.zeros(5)),
                           "R2PVI-TV, weight 1": _curve(2.2 - 1.2 * pu, 0.1),
                           "DRPVI, rho 0.1": _curve(3.3 - 2.5 * pu, 0.1),
                           "optimal stopping of the source (exact)": _curve(
                               20.5 * (1 - pu) ** 3)},
                "title": "(d) put option, H = 20, d = 31", "config": dict(base, seeds=2)},
  }


def _sensitivity_panels():
  rho = np.linspace(0, 1, 101)
  out = {}
  for xi, (a, b) in ((0.1, (-0.8, -0.4)), (0.3, (-1.2, 0.0))):
    kink = 0.48 if xi == 0.1 else 0.28
    grad = np.where(rho < kink, a, b)
    grad[-1] = 0.0  # rho_1,4 = 1: the right derivative
    value = 1.4 + np.cumsum(np.r_[0, grad[:-1]]) * 0.01
    g = np.zeros((3, 4))
    g[0, 0], g[0, 3], g[1, 1], g[1, 3] = -0.832 - xi, -0.4, -0.192, -0.42
    out[f"xi{xi:g}"] = {
        "rho": rho.tolist(), "value": value.tolist(), "grad_autodiff": grad.tolist(),
        "grad_closed_form": grad.tolist(), "kinks": [kink],
        "one_sided": [{"rho": kink, "left": a, "right": b, "jax_grad": b}],
        "rho_star_closed_form": kink,
        "sensitivity_map": {"rho_14": 0.5, "autodiff": g.tolist(), "closed_form": g.tolist()},
        "worst_case": {"policy_first_action": [1, 1, 1, 1], "nominal_value": 1.2,
                       "families": {"d-rectangular": {"found": 0.82, "exact": 0.82}}},
        "config": {"xi_norm": xi, "run": "r"}}
  return out


def _figures():
  """``{name: Figure}`` of every figure kind drjax writes, from the synthetic panels."""
  fig3 = {"xi0.1_rho0.3": _linear_panel(0.1, 0.3, dr_equals_ls=True),
          "xi0.1_rho0.5": _linear_panel(0.1, 0.5), "xi0.3_rho0.5": _linear_panel(0.3, 0.5)}
  train = {f"linear-mdp_{t}": p for t, p in fig3.items()}
  return {
      "fig1": outputs.figure("fig1", {t: p for t, p in fig3.items() if t.endswith("0.5")}),
      "fig3": outputs.figure("fig3", fig3),
      "fig2": outputs.figure("fig2", _put_panels()),
      "subopt": outputs.figure("subopt", _subopt_panels()),
      "drpvi": outputs.figure("drpvi", _offline_panels()),
      "train": outputs.figure("train", train),
      "r2pvi": r2pvi.figure(_r2pvi_panels()),
      "sensitivity": sensitivity.agg_figure(_sensitivity_panels()),
  }


@pytest.fixture(scope="module")
def figures():
  figs = _figures()
  for fig in figs.values():
    fig.canvas.draw()  # mathtext that does not parse fails here
  return figs


# ---------------------------------------------------------------------------------------------
# Readers of figure objects.


_ALGORITHMS = {s.display for s in registry.specs()}


def _learned(ax):
  """The learned curves of a panel: marked ``gid="learned"``, or labelled with an algorithm's
  name (``"DRPVI"``, ``"DRPVI, rho 0.1"``, ``"LSVI-UCB: ..."``)."""
  return [line for line in ax.get_lines() if line.get_gid() == "learned" or
          re.split(r"[,:]", line.get_label())[0].strip() in _ALGORITHMS]


def _y_fraction(ax, lo, hi):
  """The fraction of the axis height between the data values lo and hi (log axes: in log)."""
  t = ax.yaxis.get_transform().transform
  y0, y1 = ax.get_ylim()
  return float((t(hi) - t(lo)) / (t(y1) - t(y0)))


def y_limit_problems(fig) -> list[str]:
  """Panels whose y limits cut a learned curve or squash the learned curves (< 1/3 of the
  axis height between their min and max, where they differ)."""
  problems, seen = [], 0
  for ax in fig.axes:
    ys = [np.asarray(line.get_ydata(), float) for line in _learned(ax)]
    ys = np.concatenate(ys) if ys else np.zeros(0)
    ys = ys[np.isfinite(ys)]
    if not ys.size:
      continue
    seen += 1
    lo, hi = ys.min(), ys.max()
    y0, y1 = ax.get_ylim()
    eps = 1e-9 * max(1.0, abs(y1 - y0))
    if lo < y0 - eps or hi > y1 + eps:
      problems.append(f"{ax.get_title()!r}: learned curves [{lo:.3g}, {hi:.3g}] outside the "
                      f"y limits [{y0:.3g}, {y1:.3g}]")
    if hi - lo > 1e-9 * max(1.0, abs(hi)) and _y_fraction(ax, lo, hi) < 1 / 3:
      problems.append(f"{ax.get_title()!r}: learned curves fill only "
                      f"{_y_fraction(ax, lo, hi):.2f} of the axis height")
  if not seen:
    problems.append("no panel with learned curves")
  return problems


def _display_xy(line):
  xy = np.column_stack([np.asarray(line.get_xdata(), float), np.asarray(line.get_ydata(), float)])
  with np.errstate(all="ignore"):
    return line.get_transform().transform(xy)


def _px(fig, points):
  return points * fig.dpi / 72


def _solid(line):
  return line.get_linestyle() in ("-", "solid")


def _covers(m, line, fig) -> bool:
  """Whether solid line ``m`` hides ``line``: every point of ``line``'s stroke lies inside
  ``m``'s stroke (display units)."""
  a, b = _display_xy(line), _display_xy(m)
  a = a[np.all(np.isfinite(a), axis=1)]
  b = b[np.all(np.isfinite(b), axis=1)]
  if len(a) == 0 or len(b) < 2:
    return False
  order = np.argsort(b[:, 0])
  bx, by = b[order, 0], b[order, 1]
  if a[:, 0].min() < bx.min() - 0.5 or a[:, 0].max() > bx.max() + 0.5:
    return False
  gap = np.abs(np.interp(a[:, 0], bx, by) - a[:, 1])
  return bool(np.all(gap + _px(fig, line.get_linewidth()) / 2 <=
                     _px(fig, m.get_linewidth()) / 2 + 0.5))


def _same_color(a, b) -> bool:
  from matplotlib.colors import to_rgba
  return np.allclose(to_rgba(a.get_color()), to_rgba(b.get_color()))


def _hidden(line, ax, fig) -> bool:
  lines = ax.get_lines()
  rank = {id(x): (x.get_zorder(), i) for i, x in enumerate(lines)}
  for m in lines:
    if m is line or not m.get_visible() or not _solid(m):
      continue
    above = rank[id(m)] > rank[id(line)]
    if (above or _same_color(m, line)) and _covers(m, line, fig):
      return True
  return False


def _visible(artist, fig) -> bool:
  from matplotlib.lines import Line2D
  if not artist.get_visible() or artist.get_alpha() == 0:
    return False
  ax = artist.axes
  if isinstance(artist, Line2D):
    xy = _display_xy(artist)
    box = ax.bbox
    inside = ((xy[:, 0] >= box.x0 - 1) & (xy[:, 0] <= box.x1 + 1) & (xy[:, 1] >= box.y0 - 1) &
              (xy[:, 1] <= box.y1 + 1))
    return bool(inside.any()) and not _hidden(artist, ax, fig)
  return True


def legend_problems(fig) -> list[str]:
  """Legend entries that name no visible artist."""
  legends = [(lg, fig.axes) for lg in fig.legends]
  legends += [(ax.get_legend(), [ax]) for ax in fig.axes if ax.get_legend() is not None]
  problems = []
  if not legends:
    problems.append("no legend")
  for lg, axes in legends:
    for text in lg.get_texts():
      label = text.get_text()
      artists = [a for ax in axes for a in ax.get_children()
                 if getattr(a, "get_label", lambda: None)() == label]
      if not any(_visible(a, fig) for a in artists):
        problems.append(f"legend entry {label!r} names no visible artist "
                        f"({len(artists)} artists with that label)")
  return problems


# A symbol written as plain text: ||xi||, a Greek name, a subscript (p_u, rho_1,4), V*, x1, a
# single-letter symbol (q, k, p, K, H, d, N) as a word of its own, AveSubopt(k).
_SYMBOL = re.compile(r"\|\||\b(rho|xi|alpha|beta|lambda|delta|mu|nu|phi)\b|\b[A-Za-z]+_\{?\w|"
                     r"\bV\*|\bx\d\b|\((k|K)\)|(?<![\w(\-'$\\])[qkpKHdN](?![\w)\-'$])")


def _texts(fig):
  out = []
  if fig._suptitle is not None:  # pylint: disable=protected-access
    out.append(fig._suptitle)  # pylint: disable=protected-access
  out += fig.texts
  for lg in fig.legends:
    out += lg.get_texts()
  for ax in fig.axes:
    out += [ax.title, ax.xaxis.label, ax.yaxis.label] + ax.texts
    out += [ax._left_title, ax._right_title]  # pylint: disable=protected-access
    if ax.get_legend() is not None:
      out += ax.get_legend().get_texts()
  return [t.get_text() for t in out if t.get_text()]


def mathtext_problems(fig) -> list[str]:
  problems = []
  for s in _texts(fig):
    plain = re.sub(r"\$[^$]*\$", " ", s)
    m = _SYMBOL.search(plain)
    if m:
      problems.append(f"{s!r}: symbol {m.group(0)!r} outside mathtext")
  return problems


# ---------------------------------------------------------------------------------------------
# The checks, on every figure.

NAMES = ("fig1", "fig3", "fig2", "subopt", "drpvi", "train", "r2pvi", "sensitivity")


@pytest.mark.parametrize("name", NAMES)
def test_y_limits_show_the_learned_curves(figures, name):
  if name == "sensitivity":  # exact values, no learned curves: checked below
    return
  assert y_limit_problems(figures[name]) == []


@pytest.mark.parametrize("name", NAMES)
def test_every_legend_entry_names_a_visible_artist(figures, name):
  assert legend_problems(figures[name]) == []


@pytest.mark.parametrize("name", NAMES)
def test_symbols_are_mathtext(figures, name):
  assert mathtext_problems(figures[name]) == []


# The checkers themselves catch what issue 20 found in the old figures.

def _old_style_panel(fig):
  """The old drawing: dashed reference in its algorithm's colour over the solid curve, one legend
  in panel 1, plain-text labels, the y axis set by a 0-12 reference."""
  ax = fig.subplots()
  q = np.linspace(0, 1, 21)
  ax.plot(q, 1.44 + 0 * q, color="tab:red", lw=1.8, label=DR)
  ax.plot(q, 1.44 + 0 * q, color="tab:red", ls="--", lw=1.2, label="robust optimum (exact)")
  ax.plot(q, 1.2 + 0.5 * q, color="tab:blue", lw=1.8, label=LS)
  ax.plot(q, 12 * (1 - q) ** 2, color="tab:blue", ls="--", lw=1.2)
  ax.set_xlabel("perturbation level q")
  ax.set_title("||xi||_1 = 0.3, rho_1,4 = 0.5")
  ax.legend()
  return fig


def test_checkers_catch_the_old_figures():
  fig = _old_style_panel(outputs.new_figure((4, 3)))
  fig.canvas.draw()
  assert any("fill only" in p for p in y_limit_problems(fig))
  assert any("robust optimum" in p for p in legend_problems(fig))
  found = mathtext_problems(fig)
  assert len(found) == 2  # the title and the x label
  assert mathtext_problems(_one_text("rho = 0.3")) and mathtext_problems(_one_text("p_u"))
  assert mathtext_problems(_one_text("AveSubopt(k)"))
  assert not mathtext_problems(_one_text("(d) d-rectangular R2PVI-chi2 $\\rho$ = 0.3"))


def _one_text(s):
  fig = outputs.new_figure((2, 2))
  fig.suptitle(s)
  return fig


# ---------------------------------------------------------------------------------------------
# Figure-specific requirements.


def test_fig2_references_beyond_the_axis_are_cut_and_noted(figures):
  for ax in figures["fig2"].axes:
    assert ax.get_ylim()[1] < 6  # the learned curves (<= 2.8) set the axis, not the 12
    notes = [t.get_text() for t in ax.texts if "off scale" in t.get_text()]
    assert notes and "12" in notes[0]
  title = figures["fig2"]._suptitle.get_text()  # pylint: disable=protected-access
  assert "cut at the edge" in title


def test_critical_q_in_one_figure_legend_and_its_value_in_every_panel(figures):
  for name in ("fig1", "fig3"):
    fig = figures[name]
    labels = [t.get_text() for lg in fig.legends for t in lg.get_texts()]
    assert sum("critical" in s for s in labels) == 1
    assert all(ax.get_legend() is None for ax in fig.axes)
    for ax in fig.axes:
      assert any("q^*" in t.get_text() and "0.480" in t.get_text() for t in ax.texts)


def test_subopt_says_what_each_curve_is_measured_against_and_shows_slopes(figures):
  fig = figures["subopt"]
  labels = [t.get_text() for lg in fig.legends for t in lg.get_texts()]
  assert any(s.startswith(DR) and "robust optimum" in s and "non-robust" not in s for s in labels)
  assert any(s.startswith(LS) and "non-robust optimum" in s for s in labels)
  for ax in fig.axes:
    slopes = sorted(t.get_text() for t in ax.texts if "slope" in t.get_text())
    assert slopes == [f"{DR}: slope \N{MINUS SIGN}0.81", f"{LS}: slope \N{MINUS SIGN}0.60"]
  title = fig._suptitle.get_text()  # pylint: disable=protected-access
  assert "half the smallest" not in title
  assert "cannot be drawn on a log axis" in title and "run off the bottom" in title


def _relative_luminance(rgba):
  return sensitivity._luminance(rgba)  # pylint: disable=protected-access


def test_sensitivity_map_is_sequential_with_readable_numbers(figures):
  from matplotlib.image import AxesImage
  fig = figures["sensitivity"]
  images = [im for ax in fig.axes for im in ax.get_images() if isinstance(im, AxesImage)]
  assert len(images) == 2
  for im in images:
    g = np.asarray(im.get_array())
    assert g.max() <= 0
    # The colour scale spans the data, not a symmetric range with an unused half ...
    assert im.norm.vmax == 0 and im.norm.vmin == pytest.approx(g.min())
    # ... through a sequential map: luminance monotonic from vmin to vmax.
    lum = [_relative_luminance(im.cmap(v)) for v in np.linspace(0, 1, 64)]
    assert np.all(np.diff(lum) >= -1e-9) or np.all(np.diff(lum) <= 1e-9)
    for t in im.axes.texts:  # each number contrasts with its cell (WCAG AA: 4.5)
      i, h = (int(round(v)) for v in t.get_position())
      cell = im.cmap(im.norm(g[h, i]))
      assert sensitivity.contrast(t.get_color(), cell) >= 4.5, t.get_text()


def test_sensitivity_rows_have_y_labels_and_the_jump_at_one_is_explained(figures):
  fig = figures["sensitivity"]
  plotted = [ax for ax in fig.axes if ax.get_lines() or ax.get_images()]
  assert len(plotted) == 6
  assert all(ax.get_ylabel() for ax in plotted)
  note = " ".join(t.get_text() for t in fig.texts)
  assert "whole simplex" in note and "from the right" in note
  for ax in plotted:  # rho_1,4 = 1 is a separate point, not joined to the curve by a jump
    for line in ax.get_lines():
      x = np.asarray(line.get_xdata(), float)
      if line.get_label() == "jax.grad":
        assert x.max() < 1


def test_rho_one_derivative_is_the_right_derivative_of_a_constant_tail():
  """The note's claim, numerically: at rho_1,4 = 1 the TV ball around mu_1,4 is the whole
  simplex (the worst case puts all of factor 4's mass on the lowest-value state), V* has slope
  -0.4 just below 1 (||xi||_1 = 0.1) and jax.grad gives 0 at 1."""
  import jax
  import jax.numpy as jnp
  from drjax import planning, robust
  from drjax.envs.linear_mdp import LinearMDP
  env = LinearMDP()
  model = env.model(env.make_params(delta=0.3, p=0.001, xi_norm=0.1))

  def value(r):
    return planning.initial_value(model, planning.robust_dp(
        model, jnp.zeros((3, 4)).at[0, 3].set(r)).v)

  @jax.jit
  def everything(rs):
    v2 = planning.robust_dp(model, jnp.zeros((3, 4)).at[0, 3].set(1.0)).v[1]
    worst = robust.tv_worst_case_distribution(model.mu[0, 3], v2, 1.0)
    v, g = jax.vmap(jax.value_and_grad(value))(rs)
    return v2, worst, v, g

  v2, worst, (v99, v1), (g99, g1) = everything(jnp.asarray([0.99, 1.0]))
  np.testing.assert_allclose(worst, np.eye(v2.shape[0])[int(np.argmin(v2))], atol=1e-12)
  assert (v1 - v99) / 0.01 == pytest.approx(-0.4, abs=1e-9)
  assert float(g1) == 0.0 and float(g99) == pytest.approx(-0.4, abs=1e-9)


def test_one_colour_and_one_name_per_algorithm():
  specs = registry.specs()
  assert len({s.display for s in specs}) == len(specs)
  assert len({s.color for s in specs}) == len(specs)
  for s in specs:
    assert style.color(s.name) == style.color(s.display) == s.color
    assert style.display(s.name) == s.display
  refs = ("robust optimum (exact)", "non-robust optimum (exact)", "Theorem 1 bound")
  assert not {style.color(r) for r in refs} & {s.color for s in specs}


def test_figures_draw_each_algorithm_in_its_registry_colour(figures):
  from matplotlib.colors import to_rgba
  seen = 0
  for name in ("fig1", "fig3", "fig2", "subopt", "drpvi", "train"):
    for ax in figures[name].axes:
      for line in _learned(ax):
        label = line.get_label().split(":")[0]
        spec = [s for s in registry.specs() if s.display == label]
        assert spec, label
        assert np.allclose(to_rgba(line.get_color()), to_rgba(spec[0].color)), (name, label)
        seen += 1
  assert seen > 10


def test_one_y_label_wording(figures):
  for name in ("fig1", "fig3", "fig2", "drpvi", "train"):
    for ax in figures[name].axes:
      if _learned(ax):
        assert ax.get_ylabel() == style.Y_LABEL, name
  r2 = [ax.get_ylabel() for ax in figures["r2pvi"].axes if _learned(ax)]
  assert r2.count(style.Y_LABEL) == 3 and all(s.startswith("expected return") for s in r2)


def test_math_converts_the_labels_drjax_writes():
  assert style.math("||xi||_1 = 0.1, rho_1,4 = 0.5") == r"$\|\xi\|_1$ = 0.1, $\rho_{1,4}$ = 0.5"
  assert style.math("price-up probability p_u of the target") == (
      "price-up probability $p_u$ of the target")
  assert style.math("(d) put option, H = 20, d = 31") == "(d) put option, $H$ = 20, $d$ = 31"
  assert style.math("d-rectangular, $q$ kept") == "d-rectangular, $q$ kept"
  assert style.y_label(OLD_Y) == style.Y_LABEL
