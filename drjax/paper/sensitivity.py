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
  out = _program(_f(list(xi_norms)), _f(delta), _f(p), _f(map_rho), jax.random.PRNGKey(seed),
                 search_rho=float(search_rho), num_rho=num_rho, steps=steps, restarts=restarts)
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
  from drjax.paper import outputs  # pylint: disable=g-import-not-at-top

  fig = outputs.new_figure(_figsize(panels))
  _draw(fig, panels)
  outputs.save_figure(fig, path_base)


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
  return (4.2 * len(panels), 9.0)


def _draw(fig, panels: dict) -> None:
  """Draws ``figure``'s panels into the empty figure ``fig`` and lays it out."""
  from drjax.paper import outputs  # pylint: disable=g-import-not-at-top

  tags = list(panels)
  axes = fig.subplots(3, len(tags), squeeze=False)
  for j, tag in enumerate(tags):
    p = panels[tag]
    x = np.asarray(p["rho"])
    ax = axes[0, j]
    ax.plot(x, p["value"], color="tab:red", lw=1.8)
    for k in p["kinks"]:
      ax.axvline(k, color="k", ls=":", lw=1)
    ax.set_title(f"||xi||_1 = {p['config']['xi_norm']:g}: V*(x1) vs rho_1,4", fontsize=9)
    ax.set_xlabel("rho_1,4", fontsize=8)
    ax = axes[1, j]
    ax.plot(x, p["grad_autodiff"], color="tab:red", lw=1.8, label="jax.grad")
    ax.plot(x[::5], p["grad_closed_form"][::5], "o", ms=3.5, mfc="none", color="k",
            label="closed form (Danskin)")
    for k in p["kinks"]:
      ax.axvline(k, color="k", ls=":", lw=1, label="kink (first action switches)")
    ax.set_title("dV*/drho_1,4", fontsize=9)
    ax.set_xlabel("rho_1,4", fontsize=8)
    if j == 0:
      ax.legend(fontsize=6.5, loc="best")
    ax = axes[2, j]
    g = np.asarray(p["sensitivity_map"]["autodiff"])
    lim = max(np.abs(g).max(), 1e-12)
    im = ax.imshow(g, cmap="RdBu", vmin=-lim, vmax=lim, aspect="auto")
    for (h, i), val in np.ndenumerate(g):
      ax.text(i, h, f"{val:.3f}", ha="center", va="center", fontsize=7)
    ax.set_xticks(range(g.shape[1]), [f"i={i + 1}" for i in range(g.shape[1])], fontsize=7)
    ax.set_yticks(range(g.shape[0]), [f"h={h + 1}" for h in range(g.shape[0])], fontsize=7)
    ax.set_title(f"dV*/drho_h,i at rho_1,4 = {p['sensitivity_map']['rho_14']:g}", fontsize=9)
    fig.colorbar(im, ax=ax, fraction=0.046)
    for a in axes[:2, j]:
      a.tick_params(labelsize=7)
  outputs.fit_layout(fig, fig.suptitle(
      "Sensitivity of the optimal robust value to rho (linear MDP, exact)", fontsize=10))
