"""``drjax reproduce sensitivity``: derivatives of the linear MDP's robust value in rho.

For each ``||xi||_1`` of the paper (delta = 0.3, p = 0.001, source domain), along
``rho_{1,4}`` in [0, 1] (all other ``rho_{h,i} = 0``; 101 points):

* ``V_1^{*,rho}(x1)``, its derivative ``dV*/drho_{1,4}`` by ``jax.grad`` and by Danskin's closed
  form (``drjax.sensitivity``), the kinks (where the robust first action at x1 switches, by
  bisection) and the one-sided derivatives there;
* the ``[H, d]`` sensitivity map ``dV*/drho`` at ``rho_{1,4} = 0.5``;
* worst-case targets by projected gradient search (optax) for the robust-optimal policy of
  ``rho = 0.5`` on factor 4 at every step: over the d-rectangular set itself (its exact minimum
  is ``planning.robust_evaluate``), over the s,a-rectangular set of radius ``phi(s, a) . rho_h``
  (which contains it; exact minimum ``sensitivity.sa_rectangular_evaluate``), and over
  Appendix A's perturbation of factor 4 with its own ``q_h <= 0.5`` at every step (inside it).

Everything for all three ``||xi||_1`` is one jitted ``vmap`` (``run``).
"""

from __future__ import annotations

import functools
import math
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

from drjax import planning, sensitivity as sens
from drjax.envs import linear_mdp
from drjax.envs.linear_mdp import LinearMDP, LinearMDPParams

XI_NORMS = (0.1, 0.2, 0.3)
DELTA, P = 0.3, 0.001
NUM_RHO = 101
MAP_RHO = 0.5
SEARCH_RHO = 0.5
KINK_TOL = 1e-9
EPS = 1e-7
FAMILIES = ("d-rectangular", "s,a-rectangular", "factor-4 q at every step")


def _f(x):
  return jnp.asarray(x, jnp.result_type(float))


MAX_KINKS = 4
# XLA's backend optimisations cost more compile time than they save on this small program (on a
# 2-core CPU: compile CPU time about halved, run time 0.06 -> 0.4 s).
_FAST_COMPILE = {"xla_backend_optimization_level": 0}


@functools.partial(jax.jit,
                   static_argnames=("search_rho", "num_rho", "steps", "restarts", "families"),
                   compiler_options=_FAST_COMPILE)
def _program(xi_norms, delta, p, map_rho, key, *, search_rho: float, num_rho: int, steps: int,
             restarts: int, families: tuple[str, ...] = FAMILIES):
  env = LinearMDP()
  H, d = env.horizon, env.feature_dim
  grid = jnp.linspace(0.0, 1.0, num_rho, dtype=delta.dtype)
  e14 = jnp.zeros((H, d), delta.dtype).at[0, 3].set(1.0)
  zero = jnp.zeros((H, d), delta.dtype)

  def one(xi):
    model = env.model(LinearMDPParams(delta, p, xi, 0 * xi, 0 * xi))
    value = lambda rho: planning.initial_value(model, planning.robust_dp(model, rho).v)  # noqa

    def at(r):
      rho = r * e14
      v, g = jax.value_and_grad(value)(rho)
      return v, g, sens.closed_form_rho_gradient(model, rho)[0]

    kinks, found = sens.kink_bracket(model, zero, e14, num_grid=num_rho, tol=KINK_TOL,
                                     by="first_action", max_kinks=MAX_KINKS)
    k = jnp.where(found, kinks, 0.5)
    # One vmapped value-and-gradient for everything: the grid, the map point and, around each
    # kink, the two one-sided slopes (at k -+ EPS; the value is piecewise linear) and jax.grad
    # at the bisected kink itself. d/drho_{1,4} is the (0, 3) entry of the full [H, d] gradient.
    pts = jnp.concatenate([grid, map_rho[None], k - EPS, k + EPS, k])
    values, g, cf = jax.vmap(at)(pts)
    n, m = num_rho, MAX_KINKS
    values, g_ad, g_cf = values[:n], g[:n, 0, 3], cf[:n, 0, 3]
    map_ad, map_cf = g[n], cf[n]
    left, right, at_kink = (g[n + 1 + i * m:n + 1 + (i + 1) * m, 0, 3] for i in range(3))

    rho_c = zero.at[:, 3].set(search_rho)
    policy = planning.robust_dp(model, rho_c).policy
    opt = sens.default_optimizer()
    rho_sa = jnp.einsum("hsad,hd->hsa", model.phi, rho_c)
    fams = {"d-rectangular": sens.d_rectangular_family(model, rho_c),
            "s,a-rectangular": sens.sa_rectangular_family(model, rho_sa),
            "factor-4 q at every step": sens.factor_q_family(model, 3, np.full(H, search_rho))}
    search = sens._search  # pylint: disable=protected-access
    found_v = {n: search(model, policy, fam, key, steps, restarts, opt).value
               for n, fam in fams.items() if n in families}
    exact = {"d-rectangular": planning.initial_value(
                 model, planning.robust_evaluate(model, rho_c, policy)),
             "s,a-rectangular": planning.initial_value(
                 model, sens.sa_rectangular_evaluate(model, rho_sa, policy)),
             "nominal": planning.initial_value(model, planning.nominal_evaluate(model, policy))}
    return dict(value=values, grad_autodiff=g_ad, grad_closed_form=g_cf, kinks=kinks,
                found=found, left=left, right=right, at_kink=at_kink, map_autodiff=map_ad,
                map_closed_form=map_cf, first_action=policy[0, linear_mdp.X1],
                search=found_v, exact=exact)

  return jax.vmap(one)(xi_norms)


def run(xi_norms=XI_NORMS, *, delta: float = DELTA, p: float = P, num_rho: int = NUM_RHO,
        map_rho: float = MAP_RHO, search_rho: float = SEARCH_RHO, steps: int = 30,
        restarts: int = 2, seed: int = 0) -> dict:
  """Runs the sensitivity program (one jit) and returns ``{tag: panel}`` plus timing.

  Computes in float64 (inside ``jax.enable_x64(True)``; the process's setting is left alone).

  Returns:
    ``(panels, seconds)``; ``panels[f"xi{xi:g}"]`` holds the JSON content of one ``||xi||_1``.
  """
  for name, v in (("steps", steps), ("restarts", restarts), ("num_rho", num_rho)):
    if not (isinstance(v, int) and v >= (2 if name == "num_rho" else 1)):
      raise ValueError(f"{name} must be an integer >= {2 if name == 'num_rho' else 1}, got {v!r}")
  with jax.enable_x64(True):  # exact planning in float64, for this call only
    return _run(xi_norms, delta=delta, p=p, num_rho=num_rho, map_rho=map_rho,
                search_rho=search_rho, steps=steps, restarts=restarts, seed=seed)


def _run(xi_norms, *, delta, p, num_rho, map_rho, search_rho, steps, restarts, seed):
  env = LinearMDP()
  for xi in xi_norms:
    env.make_params(delta=delta, p=p, xi_norm=xi)  # validates
  for name, v in (("map_rho", map_rho), ("search_rho", search_rho)):
    if not (math.isfinite(v) and 0 <= v <= 1):
      raise ValueError(f"{name} must lie in [0, 1], got {v!r}")
  t0 = time.perf_counter()
  out = _program(_f(list(xi_norms)), _f(delta), _f(p), _f(map_rho),
                 jax.random.PRNGKey(seed), search_rho=float(search_rho), num_rho=num_rho,
                 steps=steps, restarts=restarts)
  out = jax.tree_util.tree_map(np.asarray, jax.block_until_ready(out))
  seconds = time.perf_counter() - t0
  acts = np.asarray(linear_mdp.action_vectors()).astype(int)
  grid = np.linspace(0.0, 1.0, num_rho)
  panels = {}
  for j, xi in enumerate(xi_norms):
    o = {k: (v[j] if not isinstance(v, dict) else {n: float(x[j]) for n, x in v.items()})
         for k, v in out.items()}
    found = o["found"].astype(bool)
    kinks = [float(k) for k in o["kinks"][found]]
    one_sided = [dict(rho=float(k), left=float(l), right=float(r), jax_grad=float(a))
                 for k, l, r, a in zip(o["kinks"][found], o["left"][found], o["right"][found],
                                       o["at_kink"][found])]
    m = delta + xi
    rho_star = 1 - (1 - p) * (2 * m + (1 - m) * (1 - p) * m) / 2
    search = {n: dict(found=o["search"][n], exact=o["exact"].get(n)) for n in o["search"]}
    panels[f"xi{xi:g}"] = dict(
        rho=grid.tolist(), value=o["value"].tolist(), grad_autodiff=o["grad_autodiff"].tolist(),
        grad_closed_form=o["grad_closed_form"].tolist(), kinks=kinks, one_sided=one_sided,
        rho_star_closed_form=rho_star,
        sensitivity_map=dict(rho_14=map_rho, autodiff=o["map_autodiff"].tolist(),
                             closed_form=o["map_closed_form"].tolist()),
        worst_case=dict(policy_first_action=acts[int(o["first_action"])].tolist(),
                        nominal_value=o["exact"]["nominal"], families=search),
        config=dict(env="linear-mdp", domain="source", delta=delta, p=p, xi_norm=xi,
                    direction="rho_{1,4} (all other rho_{h,i} = 0)", num_rho=num_rho,
                    kinks_by="first action at x1 (bisection)", kink_tol=KINK_TOL,
                    one_sided_eps=EPS, map_rho_14=map_rho,
                    search=dict(rho="rho_{h,4} = %g at every step, others 0" % search_rho,
                                policy="robust-optimal for that rho", optimizer="optax.sgd(100.0)",
                                steps=steps, restarts=restarts, seed=seed,
                                sa_radius="phi(s,a) . rho_h",
                                q_family="mu_{h,4} -> (1-q_h) mu_{h,4} + q_h delta_x4, "
                                         "q_h in [0, %g]" % search_rho),
                    dtype="float64"))
  return panels, seconds


def plot(panels: dict, path_base: str) -> None:
  """Writes the figure of ``figure(panels)`` to ``path_base.png`` and ``.pdf`` (Agg, no pyplot)."""
  from drjax.paper import plotting  # pylint: disable=g-import-not-at-top

  plotting.save_figure(agg_figure(panels), path_base)


def agg_figure(panels: dict):
  """``figure(panels)`` on its own Agg canvas (no pyplot): what ``plot`` saves."""
  from drjax.paper import plotting  # pylint: disable=g-import-not-at-top

  fig = plotting.new_figure(_figsize(panels))
  _draw(fig, panels)
  return fig


def figure(panels: dict):
  """Three rows (value, derivative, ``[H, d]`` map) x one column per ``||xi||_1``.

  A pyplot figure (for notebooks: ``plt.show()`` displays it); ``plot`` writes the same figure
  without pyplot.
  """
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top

  fig = plt.figure(figsize=_figsize(panels))
  _draw(fig, panels)
  return fig


def _figsize(panels: dict):
  return (4.3 * len(panels), 10.0)


def _luminance(rgb) -> float:
  """WCAG relative luminance of an sRGB colour."""
  c = np.asarray(rgb[:3], float)
  c = np.where(c <= 0.03928, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
  return float(0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2])


def contrast(a, b) -> float:
  """WCAG contrast ratio of two colours (1 to 21)."""
  from matplotlib.colors import to_rgba  # pylint: disable=g-import-not-at-top

  la, lb = sorted((_luminance(to_rgba(a)), _luminance(to_rgba(b))), reverse=True)
  return (la + 0.05) / (lb + 0.05)


def text_color(background) -> str:
  """Black or white, whichever contrasts more with ``background``."""
  return "black" if contrast("black", background) >= contrast("white", background) else "white"


def _map_colors(g):
  """``(cmap, vmin, vmax)``: a sequential map over the data's range when it has one sign (0 at
  the light end), a diverging one centred on 0 otherwise."""
  lo, hi = float(np.min(g)), float(np.max(g))
  if hi <= 0:
    return "Reds_r", min(lo, -1e-12), 0.0
  if lo >= 0:
    return "Reds", 0.0, max(hi, 1e-12)
  lim = max(-lo, hi)
  return "RdBu", -lim, lim


RHO_ONE_NOTE = (
    r"At $\rho_{1,4}$ = 1 the TV ball around $\mu_{1,4}$ is the whole simplex (no two "
    r"distributions are more than 1 apart), so the adversary already moves all of factor 4's mass "
    r"to the worst state and $V^*$ stays constant beyond: $\rho_{1,4}$ = 1 is a kink, with slope "
    r"{left} from the left and 0 from the right. jax.grad and the closed form both give 0 there "
    r"(the TV dual's smallest maximiser $\alpha^*$ = min $V$), drawn as a separate point.")


def _draw(fig, panels: dict) -> None:
  """Draws ``figure``'s panels into the empty figure ``fig`` and lays it out."""
  from drjax import style  # pylint: disable=g-import-not-at-top
  from drjax.paper import plotting  # pylint: disable=g-import-not-at-top

  tags = list(panels)
  axes = fig.subplots(3, len(tags), squeeze=False)
  handles = {}
  labels = {"value": r"$V^*_1(x_1)$ (exact robust DP)",
            "kink": "kink: the robust first action at $x_1$ switches",
            "grad": "jax.grad", "closed": "closed form (Danskin)",
            "end": r"at $\rho_{1,4}$ = 1: slope from the right (note below)"}
  rho_label = r"$\rho_{1,4}$ (all other $\rho_{h,i}$ = 0)"
  lefts = []
  for j, tag in enumerate(tags):
    p = panels[tag]
    x = np.asarray(p["rho"])
    xi = p["config"]["xi_norm"]
    ax = axes[0, j]
    line = ax.plot(x, p["value"], color="black", lw=1.8, label=labels["value"])[0]
    handles.setdefault(line.get_label(), line)
    for k in p["kinks"]:
      line = ax.axvline(k, color="0.3", ls=":", lw=1, label=labels["kink"])
      handles.setdefault(line.get_label(), line)
    ax.set_title(style.math(f"||xi||_1 = {xi:g}") + r": optimal robust value", fontsize=9)
    ax.set_ylabel(r"$V^{*}_1(x_1)$", fontsize=8)
    ax.set_xlabel(rho_label, fontsize=8)
    ax = axes[1, j]
    grad, cf = np.asarray(p["grad_autodiff"]), np.asarray(p["grad_closed_form"])
    end = x >= 1.0 - 1e-12  # rho_1,4 = 1: the right derivative (note below)
    line = ax.plot(x[~end], grad[~end], color="0.6", lw=2.6, label=labels["grad"])[0]
    handles.setdefault(line.get_label(), line)
    pick = np.zeros_like(end)
    pick[::5] = True
    line = ax.plot(x[pick & ~end], cf[pick & ~end], "o", ms=3.5, mfc="none", mec="black",
                   mew=1, label=labels["closed"])[0]
    handles.setdefault(line.get_label(), line)
    if end.any():
      line = ax.plot(x[end], grad[end], "D", ms=4.5, color="black", mfc="white", mew=1.2,
                     label=labels["end"])[0]
      handles.setdefault(line.get_label(), line)
      lefts.append((xi, float(grad[~end][-1]) if (~end).any() else float("nan")))
    for k in p["kinks"]:
      ax.axvline(k, color="0.3", ls=":", lw=1, label=labels["kink"])
    lo, hi = float(np.min(grad)), float(np.max(grad))
    pad = 0.08 * max(hi - lo, 0.1)
    ax.set_ylim(lo - pad, hi + pad)
    ax.set_title(r"its derivative in $\rho_{1,4}$", fontsize=9)
    ax.set_ylabel(r"$\partial V^{*}_1(x_1) / \partial \rho_{1,4}$", fontsize=8)
    ax.set_xlabel(rho_label, fontsize=8)
    ax = axes[2, j]
    g = np.asarray(p["sensitivity_map"]["autodiff"])
    cmap, vmin, vmax = _map_colors(g)
    im = ax.imshow(g, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
    for (h, i), val in np.ndenumerate(g):
      ax.text(i, h, f"{val:.3f}".replace("-", "\N{MINUS SIGN}"), ha="center", va="center",
              fontsize=7, color=text_color(im.cmap(im.norm(val))))
    ax.set_xticks(range(g.shape[1]), [f"$i$ = {i + 1}" for i in range(g.shape[1])], fontsize=7)
    ax.set_yticks(range(g.shape[0]), [f"$h$ = {h + 1}" for h in range(g.shape[0])], fontsize=7)
    ax.set_xlabel(r"factor $i$", fontsize=8)
    ax.set_ylabel(r"step $h$", fontsize=8)
    ax.set_title(r"$\partial V^{*}_1(x_1) / \partial \rho_{h,i}$ at $\rho_{1,4}$ = "
                 f"{p['sensitivity_map']['rho_14']:g}", fontsize=9)
    cb = fig.colorbar(im, ax=ax, fraction=0.046)
    cb.ax.tick_params(labelsize=7)
    for a in axes[:2, j]:
      a.tick_params(labelsize=7)
  legend = plotting.figure_legend(fig, handles)
  footer = None
  if lefts:
    left = ", ".join(f"{v:.2g}".replace("-", "\N{MINUS SIGN}") for _, v in lefts)
    if len(lefts) > 1:
      xis = ", ".join(f"{xi:g}" for xi, _ in lefts)
      left += r" (for $\|\xi\|_1$ = " + xis + ")"
    note = RHO_ONE_NOTE.replace("{left}", left)
    footer = fig.text(0.5, 0, plotting.wrap_text(note, int(fig.get_figwidth() * 14)),
                      ha="center", va="bottom", fontsize=7.5)
  plotting.fit_layout(fig, fig.suptitle(
      "Sensitivity of the optimal robust value to $\\rho$ (linear MDP, source domain, exact)",
      fontsize=10), legend=legend, footer=footer)
