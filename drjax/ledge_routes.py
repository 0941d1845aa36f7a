"""The ledge's exact answer (``drjax.envs.ledge``): the route of the robust-optimal policy per rho
and where it switches, by ``drjax.planning.robust_dp`` on ``LedgeGrid``'s exact model.

* ``route_probabilities(env, params, rho, plan_params)``: ``[P(ledge), P(plateau), P(fail)]`` at
  the last step; ``route(env, params, rho)``: ``"ledge"`` / ``"plateau"`` (/ ``"fail"``);
* ``route_table(env, params, rhos)``: ``[(rho, route, robust value at the start)]``;
* ``critical_rho(env, params)``, ``critical_wind(env, params)``: the exact switches (bisection).

Compare ``drjax.envs.ledge.closed_form``. A module of its own above the planner (the planner
imports the environments), so that ``drjax.envs`` stays below ``drjax.planning``.

  >>> from drjax import ledge_routes
  >>> from drjax.envs import ledge
  >>> grid = ledge.LedgeGrid()
  >>> ledge_routes.route_table(grid, grid.make_params(wind=0.05), [0.0, 0.25])
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from drjax import _checks, planning
from drjax.envs.ledge import LedgeGrid, LedgeGridParams, _grid_of, _grid_params

__all__ = ["critical_rho", "critical_wind", "route", "route_probabilities", "route_table"]


@functools.partial(jax.jit, static_argnums=0)
def _route_probs(grid: LedgeGrid, params: LedgeGridParams, rho, plan_params: LedgeGridParams):
  """``([3], [])``: the probabilities (ledge, plateau, fail) at the last step of the robust-optimal
  policy at ``rho`` for ``plan_params``, run in ``params`` (nominal kernel); its robust value at
  the start for ``plan_params``."""
  model = grid.model(params)
  plan = grid.model(plan_params)
  rho_t = jnp.full((grid.horizon, grid.feature_dim), rho, model.mu.dtype)
  res = planning.robust_dp(plan, rho_t)
  pi = res.policy  # [H, S]
  P = model.transition  # [H, S, A, S]
  p = model.init_dist
  for h in range(grid.horizon - 1):
    P_pi = jnp.take_along_axis(P[h], pi[h][:, None, None], axis=1)[:, 0]  # [S, S]
    p = p @ P_pi
  N, b = grid.num_rows, grid.rock_rows
  return (jnp.stack([p[0], jnp.sum(p[b + 1:N]), p[N] + jnp.sum(p[1:b + 1])]),
          res.v[0, grid.start_row])


def route_probabilities(env, params, rho=0.0, plan_params=None) -> np.ndarray:
  """Where the robust-optimal policy of the finite traverse ends: ``[P(ledge), P(plateau),
  P(fail)]`` at the last step.

  The policy is ``drjax.planning.robust_dp(model, rho)``'s (every ``rho_{h,i} = rho``) on the
  ``LedgeGrid`` model of ``plan_params`` (default: ``params``), run under the nominal kernel of
  ``params`` (e.g. plan at the source wind, run in a target).

  Args:
    env: a ``LedgeGrid`` or a ``Ledge`` (its geometry's grid).
    params: ``LedgeGridParams`` or ``LedgeParams`` (only ``wind`` and ``safe_reward`` are used).
    rho: the uncertainty level in [0, 1].
    plan_params: the params the policy is planned for (default ``params``).

  Returns:
    ``[3]`` float64 probabilities.
  """
  grid = _grid_of(env)
  params = _grid_params(grid, params)
  plan_params = params if plan_params is None else _grid_params(grid, plan_params)
  grid.validate(params)
  grid.validate(plan_params)
  rho = _checks.number("rho", rho, 0, 1)
  return np.asarray(_route_probs(grid, params, rho, plan_params)[0], np.float64)


def route(env, params, rho=0.0) -> str:
  """``"ledge"`` or ``"plateau"``: which of the two the robust-optimal policy at ``rho`` more
  likely ends on (``route_probabilities``; ``"fail"`` if it reaches neither)."""
  return _route_name(route_probabilities(env, params, rho))


def _route_name(p) -> str:
  if p[0] == p[1] == 0:
    return "fail"
  return "ledge" if p[0] > p[1] else "plateau"


def route_table(env, params, rhos) -> list[tuple[float, str, float]]:
  """``[(rho, route, robust value at the start)]`` for each ``rho`` in ``rhos`` (exact, by
  ``drjax.planning.robust_dp`` on the ``LedgeGrid`` model)."""
  grid = _grid_of(env)
  params = _grid_params(grid, params)
  grid.validate(params)
  out = []
  for rho in rhos:
    rho = _checks.number("rho", rho, 0, 1)
    p, v = _route_probs(grid, params, rho, params)
    out.append((rho, _route_name(np.asarray(p)), float(v)))
  return out


def _switch(pred, lo: float, hi: float, tol: float) -> float:
  """Bisection: ``pred(lo)`` True, ``pred(hi)`` False; the switch within ``tol``."""
  while hi - lo > tol:
    mid = 0.5 * (lo + hi)
    if pred(mid):
      lo = mid
    else:
      hi = mid
  return 0.5 * (lo + hi)


def critical_rho(env, params, tol: float = 1e-6) -> float | None:
  """The exact ``rho`` at which the robust-optimal route switches from the ledge to the plateau.

  Bisection on ``route(env, params, rho)`` over [0, 1) (``robust_dp`` on the ``LedgeGrid``
  model). ``None`` if the nominal route (``rho = 0``) is already the plateau, or the ledge up to
  ``rho = 1 - tol``. Compare the closed form ``1 - wind / wind_c`` of the module doc.

  Args:
    env: a ``LedgeGrid`` or ``Ledge``.
    params: its params (only ``wind`` and ``safe_reward`` are used).
    tol: the width of the final bracket (> 0).

  Returns:
    The switch (midpoint of the final bracket), or ``None``.
  """
  tol = _checks.number("tol", tol, 0, 0.1, lo_open=True)
  grid = _grid_of(env)
  params = _grid_params(grid, params)
  ledge = lambda r: route(grid, params, r) == "ledge"  # noqa: E731
  if not ledge(0.0) or ledge(1.0 - tol):
    return None
  return _switch(ledge, 0.0, 1.0 - tol, tol)


def critical_wind(env, params, tol: float = 1e-6) -> float | None:
  """The wind at which the nominal-optimal route (``rho = 0``) switches from the ledge to the
  plateau (``params``' ``safe_reward``; its ``wind`` is ignored). ``None`` if there is none in
  [0, 1]."""
  tol = _checks.number("tol", tol, 0, 0.1, lo_open=True)
  grid = _grid_of(env)
  params = _grid_params(grid, params)
  dtype = jnp.result_type(params.wind)
  at = lambda w: params._replace(wind=jnp.asarray(w, dtype))  # noqa: E731
  ledge = lambda w: route(grid, at(w), 0.0) == "ledge"  # noqa: E731
  if not ledge(0.0) or ledge(1.0):
    return None
  return _switch(ledge, 0.0, 1.0, tol)
