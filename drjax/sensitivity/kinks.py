"""Kinks of robust values along a direction (``drjax.sensitivity``, item 2).

``one_sided_derivatives`` (both one-sided directional derivatives and what autodiff returns),
``kink_bracket`` (pure, jit/vmap-able grid and bisection) and ``find_kinks`` (its host wrapper).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from drjax import _checks, planning
from drjax.envs.base import LinearModel
from drjax.sensitivity._common import (_check_policy, _check_rho, _check_rho_shape, _dims,
                                       _dtype, _values)
from drjax._precision import exact_matmuls

Array = jax.Array


class OneSided(NamedTuple):
  """Directional derivatives of ``t -> f(x + t u)`` at ``t``.

  Attributes:
    left: ``[]`` left derivative ``lim_{s -> 0-} (f(t + s) - f(t)) / s``.
    right: ``[]`` right derivative.
    autodiff: ``[]`` what ``jax.jvp`` (equivalently ``jax.grad`` contracted with ``u``) returns
      at ``t`` itself.
  """

  left: Array
  right: Array
  autodiff: Array


def _line(model: LinearModel, rho, direction, policy):
  rho = jnp.asarray(rho, _dtype(model))
  direction = jnp.asarray(direction, _dtype(model))

  def f(t):
    return planning.initial_value(model, _values(model, rho + t * direction, policy)[0])

  return f


def _check_direction(direction, model):
  H, _, _, d = _dims(model)
  _checks.numeric("direction", direction)
  if tuple(np.shape(direction)) != (H, d):
    raise ValueError(f"direction must have shape (H, d) = ({H}, {d}), got "
                     f"{tuple(np.shape(direction))}")
  _checks.finite("direction", direction)


@exact_matmuls
def one_sided_derivatives(model: LinearModel, rho, direction, t=0.0, policy=None,
                          eps: float = 1e-7) -> OneSided:
  """One-sided derivatives of ``t -> E V_1^{pi, rho + t direction}(s_1)`` at ``t``.

  The value is piecewise linear in ``t``; the one-sided derivatives are the slopes of the pieces
  on either side, read off by ``jax.jvp`` at ``t -+ eps`` (exact whenever no other kink lies
  within ``eps`` of ``t``; ``find_kinks`` tells you where they are).

  Args:
    model: finite ``LinearModel``.
    rho: ``[H, d]``; ``rho + s * direction`` must stay in ``[0, 1]`` for ``s`` in
      ``[t - eps, t + eps]``.
    direction: ``[H, d]`` direction ``u``.
    t: position along the line.
    policy: ``None`` (``V*``) or an ``[H, S]`` policy.
    eps: offset at which the neighbouring pieces are differentiated (> 0).

  Returns:
    ``OneSided``.
  """
  _check_direction(direction, model)
  eps = _checks.number("eps", eps, 0, lo_open=True)
  _checks.array("t", t, ())
  _checks.finite("t", t)
  _check_rho_shape(rho, model)
  if _checks.is_concrete(rho, direction, t):
    r, u, t0 = np.asarray(rho, float), np.asarray(direction, float), float(t)
    for s in (t0 - eps, t0 + eps):
      _check_rho(r + s * u, model, name="rho + t * direction")
  _check_policy(policy, model)
  dtype = _dtype(model)
  return _one_sided(model, jnp.asarray(rho, dtype), jnp.asarray(direction, dtype),
                    jnp.asarray(t, dtype), policy, jnp.asarray(eps, dtype))


@jax.jit
def _one_sided(model, rho, direction, t, policy, eps):
  f = _line(model, rho, direction, policy)
  slope = lambda s: jax.jvp(f, (s,), (jnp.ones_like(s),))[1]  # noqa: E731
  return OneSided(left=slope(t - eps), right=slope(t + eps), autodiff=slope(t))


def _signature(model: LinearModel, rho: Array, by: str, policy, direction):
  if by == "slope":
    f = lambda r: planning.initial_value(model, _values(model, r, policy)[0])  # noqa: E731
    return jax.jvp(f, (rho,), (direction,))[1]
  pol = planning.robust_dp(model, rho).policy
  if by == "first_action":
    return jnp.where(model.init_dist > 0, pol[0], -1)
  return pol


_BY = ("first_action", "policy", "slope")


@exact_matmuls
def kink_bracket(model: LinearModel, rho, direction, *, t_lo=0.0, t_hi=1.0, num_grid: int = 101,
                 tol: float = 1e-9, by: str = "first_action", policy=None,
                 slope_tol: float = 1e-9, max_kinks: int | None = None) -> tuple[Array, Array]:
  """Pure (jit/vmap-able) kink search along ``rho(t) = rho + t direction``, ``t in [t_lo, t_hi]``.

  The signature (the optimal first action at the initial states, the whole optimal policy, or
  the directional derivative) is evaluated on ``num_grid`` equally spaced points; every grid
  interval whose end points differ is bisected (on "signature equals the left end's") down to
  ``tol``. A switch back and forth inside one grid interval is not seen: refine the grid.

  Args:
    model, rho, direction: as in ``one_sided_derivatives``.
    t_lo, t_hi: the segment (``rho(t)`` must stay in ``[0, 1]``).
    num_grid: static number of grid points (>= 2).
    tol: static bisection tolerance (> 0): the returned kink is within ``tol / 2`` of a switch.
    by: static, ``"first_action"`` (optimal action at the states with ``init_dist > 0``, step 1),
      ``"policy"`` (the whole optimal policy) or ``"slope"`` (kinks of the value itself: jumps of
      the directional derivative of ``V``, of the given ``policy`` if one is given).
    policy: only for ``by="slope"``.
    slope_tol: relative tolerance of the slope comparison (``by="slope"``).
    max_kinks: static; if given, only the first ``max_kinks`` grid intervals with a switch are
      bisected (much less work) and the outputs have that length.

  Returns:
    ``(kinks [n], found [n] bool)`` with ``n = num_grid - 1`` (one entry per grid interval) or
    ``max_kinks``: the bisected switch points, NaN where ``found`` is False.
  """
  _check_kink_args(model, rho, direction, t_lo, t_hi, num_grid, tol, by, policy, slope_tol,
                   max_kinks)
  dtype = _dtype(model)
  rho = jnp.asarray(rho, dtype)
  direction = jnp.asarray(direction, dtype)
  t_lo = jnp.asarray(t_lo, dtype)
  t_hi = jnp.asarray(t_hi, dtype)
  spacing = (t_hi - t_lo) / (num_grid - 1)
  grid = t_lo + spacing * jnp.arange(num_grid, dtype=dtype)
  # The end points are moved inwards by 1e-12 of the segment: exact ties at an end (e.g. every
  # alpha ties at rho = 1) would otherwise show up as a "kink" just inside it.
  inset = 1e-12 * (t_hi - t_lo)
  grid = grid.at[0].add(inset).at[-1].add(-inset)
  sig = lambda t: _signature(model, rho + t * direction, by, policy, direction)  # noqa: E731

  def same(a, b):
    if by == "slope":
      return jnp.abs(a - b) <= slope_tol * (1 + jnp.abs(a) + jnp.abs(b))
    return jnp.all(a == b)

  sigs = jax.vmap(sig)(grid)
  left = jax.tree_util.tree_map(lambda x: x[:-1], sigs)
  right = jax.tree_util.tree_map(lambda x: x[1:], sigs)
  changed = ~jax.vmap(same)(left, right)
  # Static iteration count: enough halvings to bring an interval of length 1 (rho segments lie in
  # [0, 1]) below tol; grid intervals are shorter, so the result is within tol / 2.
  iters = int(math.ceil(math.log2(1.0 / tol))) + 2

  def bisect(lo, hi, s_lo):
    a, b = _checks.bisect(lambda mid: same(sig(mid), s_lo), lo, hi, iters)
    return 0.5 * (a + b)

  if max_kinks is None:
    kinks = jax.vmap(bisect)(grid[:-1], grid[1:], left)
    return jnp.where(changed, kinks, jnp.nan), changed
  # Only the first max_kinks changed intervals are bisected (fixed shape, far less work).
  idx = jnp.nonzero(changed, size=max_kinks, fill_value=0)[0]
  found = jnp.arange(max_kinks) < jnp.sum(changed)
  s_lo = jax.tree_util.tree_map(lambda x: x[idx], left)
  kinks = jax.vmap(bisect)(grid[idx], grid[idx + 1], s_lo)
  return jnp.where(found, kinks, jnp.nan), found


@exact_matmuls
def find_kinks(model: LinearModel, rho, direction, *, t_lo: float = 0.0, t_hi: float = 1.0,
               num_grid: int = 101, tol: float = 1e-9, by: str = "first_action",
               policy=None) -> list[float]:
  """Every switch point along ``rho(t) = rho + t direction`` (host wrapper of ``kink_bracket``).

  Example (the paper's linear MDP: where the robust first action at x1 switches)::

    model = LinearMDP().model(LinearMDP().make_params(xi_norm=0.1))
    e14 = jnp.zeros((3, 4)).at[0, 3].set(1.0)
    find_kinks(model, jnp.zeros((3, 4)), e14)       # [0.48058...]

  Returns:
    sorted list of ``t`` values (floats), each within ``tol / 2`` of a switch.
  """
  _check_kink_args(model, rho, direction, t_lo, t_hi, num_grid, tol, by, policy, 0.0, None)
  t_lo = _checks.number("t_lo", t_lo)
  t_hi = _checks.number("t_hi", t_hi)
  if not t_lo < t_hi:
    raise ValueError(f"t_lo < t_hi must be finite, got t_lo={t_lo}, t_hi={t_hi}")
  for t in (t_lo, t_hi):
    _check_rho(np.asarray(rho, float) + t * np.asarray(direction, float), model,
               name="rho + t * direction")
  kinks, found = _kink_bracket_jit(model, rho, direction, t_lo=t_lo, t_hi=t_hi,
                                   num_grid=num_grid, tol=tol, by=by, policy=policy)
  return sorted(float(k) for k in np.asarray(kinks)[np.asarray(found)])


def _check_kink_args(model, rho, direction, t_lo, t_hi, num_grid, tol, by, policy, slope_tol,
                     max_kinks) -> None:
  """Host-side checks of ``kink_bracket`` / ``find_kinks`` (static arguments always; values of
  ``rho``, ``direction``, ``t_lo``, ``t_hi`` when concrete)."""
  _check_direction(direction, model)
  _check_rho_shape(rho, model)
  _checks.choice("by", by, _BY)
  _checks.integer("num_grid", num_grid, 2)
  _checks.number("tol", tol, 0, lo_open=True)
  _checks.number("slope_tol", slope_tol, 0)
  _checks.optional_integer("max_kinks", max_kinks, 1)
  for name, t in (("t_lo", t_lo), ("t_hi", t_hi)):
    _checks.array(name, t, ())
    _checks.finite(name, t)
  _check_policy(policy, model)


_kink_bracket_jit = jax.jit(kink_bracket, static_argnames=("num_grid", "tol", "by", "max_kinks"))
