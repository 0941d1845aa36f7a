"""Chi-square and KL duals over regression atoms: R2PVI-chi2's and DRVI-L's inner problems.

Pure, single-instance kernels (callers ``jax.vmap`` over steps / batches), with
``M = Lambda^-1 g^T`` the ridge operator of the atoms (``drjax.linalg``):

* ``chi2_dual_max``: the regularized chi-square dual
  ``max_{alpha in [0, H]} z_i(alpha) - (z2_i(alpha) - z_i(alpha)^2) / (4 w_i)``, exactly;
* ``kl_dual_search``: the KL-constrained dual ``max_{alpha > 0} -alpha log zhat_i(alpha) -
  alpha rho_i`` of DRVI-L, by a bounded one-dimensional search (not exact);
* ``_kl_shift``: the per-coordinate shift of the KL duals' exponents, which keeps
  ``log zhat_i`` exact whenever it is representable (also used by R2PVI-KL,
  ``drjax.agents.pieces.kl_reg_oracle``).

The finite-state counterparts (one factor ``mu`` at a time) are in ``drjax.regularized``. The
working dtype is the result dtype of ``M`` and ``v``; hyperparameters may be traced.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from drjax import _checks
from drjax._precision import exact_matmuls
from drjax.linalg import _argsort, _float_dtype, _prefix_sum

Array = jax.Array


@exact_matmuls
def chi2_dual_max(M: Array, v: Array, weight, horizon) -> Array:
  """Exact ``max_{alpha in [0, H]} z_i(alpha) - (z2_i(alpha) - z_i(alpha)^2) / (4 w_i)``.

  ``z(alpha) = M @ min(v, alpha)`` and ``z2(alpha) = M @ min(v, alpha)^2`` (ridge estimates of
  ``E[V]_alpha`` and ``E[V]_alpha^2``, ``M = Lambda^-1 g^T``). Between consecutive sorted targets
  ``z_i = A + alpha B`` and ``z2_i = C + alpha^2 B``, so the objective is a quadratic in alpha on
  every interval: its maximum over ``[0, H]`` is at an interval's end or at the stationary point
  of a concave piece. All intervals are evaluated at once after one sort and prefix sums
  (``O(n log n + n d)``), exact up to rounding.

  Args:
    M: ``[d, n]`` ridge operator.
    v: ``[n]`` targets.
    weight: ``[d]`` or ``[]`` regularization weights > 0.
    horizon: ``[]`` H.

  Returns:
    ``[d]`` maxima.
  """
  _checks.array("M", M)
  _checks.rank("M", M, 2)
  _checks.array("v", v, (np.shape(M)[1],), "[n]")
  _checks.rho("weight", weight, (np.shape(M)[0],), what="[d]", scalar_ok=True, hi=None,
              lo_open=True)
  _checks.array("horizon", horizon, ())
  _checks.in_range("horizon", horizon, 0)
  dtype = _float_dtype(M, v)
  d, n = M.shape
  w4 = 4.0 * jnp.broadcast_to(jnp.asarray(weight, dtype), (d,))[:, None]
  horizon = jnp.asarray(horizon, dtype)
  v = jnp.asarray(v, dtype)
  order = _argsort(v)
  vs = v[order]
  ms = M.astype(dtype)[:, order]
  zero_col = jnp.zeros((d, 1), dtype)
  cm = jnp.concatenate([zero_col, _prefix_sum(ms)], axis=1)  # [d, n + 1]
  cmv = jnp.concatenate([zero_col, _prefix_sum(ms * vs[None, :])], axis=1)
  cmv2 = jnp.concatenate([zero_col, _prefix_sum(ms * (vs * vs)[None, :])], axis=1)
  c = jnp.concatenate([jnp.zeros((1,), dtype), jnp.clip(vs, 0, horizon), horizon[None]])
  lo, hi = c[:-1], c[1:]  # n + 1 intervals
  p = jnp.searchsorted(vs, lo, side="right")  # targets at or below the interval's left end
  A, C = cmv[:, p], cmv2[:, p]
  B = cm[:, n:] - cm[:, p]

  def f(alpha):
    z = A + alpha * B
    return z - (C + alpha * alpha * B - z * z) / w4

  a1 = B + 2.0 * A * B / w4
  a2 = (B * B - B) / w4
  concave = a2 < 0
  stat = jnp.where(concave, -a1 / (2.0 * jnp.where(concave, a2, -1.0)), lo[None, :])
  stat = jnp.clip(stat, lo[None, :], hi[None, :])
  vals = jnp.maximum(jnp.maximum(f(lo[None, :]), f(hi[None, :])), f(stat))
  return jnp.max(vals, axis=1)


KL_SEARCH_BOUNDS = (1e-4, 1e4)  # alpha range of the KL-constrained dual's search
KL_SEARCH_GRID = 64


def _kl_shift_margin(dtype) -> float:
  """``K = -log(tiny) / 2`` of ``dtype`` (43.7 in float32, 354.2 in float64): half the exponent
  range below 1 (see ``_kl_shift``)."""
  return -0.5 * math.log(float(jnp.finfo(dtype).tiny))


def _kl_shift(support: Array, v: Array, m, scale) -> Array:
  """Per-coordinate shift ``t_i`` of the exponents of the KL duals' ridge estimates.

  The KL duals need ``zhat_i = sum_n M_in exp(-v_n / a)`` (``M = Lambda^-1 g^T``, ``a`` the
  regularization weight or the dual's alpha), which leaves the floating-point range as soon as
  ``v / a`` is large. They compute ``zhat_i = exp(-t_i / a) S_i`` with
  ``S_i = sum_n M_in exp(-(v_n - t_i) / a)`` and take ``log zhat_i = -t_i / a + log S_i``. A
  single shift for all coordinates (the minimum ``m`` of v) is not enough: when every atom that
  carries coordinate i's weight lies more than ``~87 a`` (float32; ``~745 a`` in float64) above
  ``m``, every term of ``S_i`` underflows to 0 and ``log S_i`` is lost. So ``t`` is chosen per
  coordinate, from ``s_i = min {v_n : support_in}``, the smallest target among the atoms that
  carry weight in coordinate i, as ``t_i = clip(m, s_i - K a, s_i + K a)`` with
  ``K = _kl_shift_margin(dtype)``:

  * every supported term's exponent ``-(v_n - t_i) / a`` is at most ``-(s_i - t_i) / a <= K``
    (no overflow: ``exp(K) = 1 / sqrt(tiny)``), and the largest one, at the atom of ``s_i``, is
    at least ``-K`` (``exp(-K) = sqrt(tiny)``, a normal number). A term that underflows is below
    ``tiny``, so below ``sqrt(tiny)`` (1e-19 in float32) times the leading term, scaled by the
    ratio of the two ``|M_in|``: far below rounding, so ``S_i`` (hence ``log zhat_i``) is exact to
    rounding whenever it is representable at all, i.e. unless its signed terms cancel (a ridge
    estimate with negative weights), which no shift can undo;
  * ``t_i = m`` (the old global shift) wherever ``s_i`` lies within ``K a`` of ``m``, so results
    are bit-identical to the single shift there (all dense-feature fits: there ``s_i = m``).

  ``support`` must hold every pair (i, n) whose term enters ``S_i`` with a nonzero factor (the
  callers clamp the other atoms' exponents at ``K``, so that their zero factors never meet an
  infinite exponential). A coordinate with no supported atom keeps ``t_i = m``.

  Args:
    support: ``[d, n]`` bool, the atoms that carry each coordinate's weight.
    v: ``[n]`` targets (the callers put atoms off their mask at ``m``).
    m: ``[]`` the global shift.
    scale: the weights ``a``, ``[d]``, or ``[G, d]`` for G of them (``[G, 1]`` broadcasts).

  Returns:
    ``t``, the broadcast shape of ``scale`` and ``[d]``.
  """
  return _shift_at(_kl_support_min(support, v, m), m, scale)


def _kl_support_min(support: Array, v: Array, m) -> Array:
  """``[d]`` ``s_i = min {v_n : support_in}`` (``m`` where coordinate i has no supported atom)."""
  s = jnp.min(jnp.where(support, v[None, :], jnp.inf), axis=1)
  return jnp.where(jnp.isfinite(s), s, m)


def _shift_at(s: Array, m, scale) -> Array:
  """``_kl_shift`` from ``s = _kl_support_min(...)``."""
  k = _kl_shift_margin(s.dtype)
  s = jnp.broadcast_to(s, jnp.broadcast_shapes(jnp.shape(s), jnp.shape(scale)))
  return jnp.clip(m, s - k * scale, s + k * scale)


@exact_matmuls
def kl_dual_search(M: Array, v: Array, mask, rho, horizon, *, tol: float = 1e-6,
                   bounds=KL_SEARCH_BOUNDS, grid_size: int = KL_SEARCH_GRID) -> Array:
  """``max_{alpha > 0} -alpha log zhat_i(alpha) - alpha rho_i`` by a bounded 1-D search (NOT exact).

  ``zhat(alpha) = M @ exp(-v / alpha)`` (a ridge estimate of ``E exp(-V / alpha)``), clipped to
  ``[exp(-H/alpha), 1]`` as the public DRVI-L code does below (it clips at 1e-6) and the valid range
  requires; computed in the log domain as ``-t_i/alpha + log sum_n M_in exp(-(v_n - t_i)/alpha)``
  with a shift ``t_i`` per coordinate and alpha (``_kl_shift`` over the atoms with ``M_in != 0``),
  so that small alpha neither overflows nor underflows, exact whenever the estimate is
  representable. The search: ``grid_size`` log-spaced alphas in ``bounds``, then golden-section
  refinement of the best grid cell in ``log alpha`` until the bracket is narrower than ``tol`` (a
  fixed iteration count, so it traces once). The result is a lower bound of the maximum, within
  the objective's variation over a ``tol``-wide bracket.

  Args:
    M: ``[d, n]`` ridge operator; v: ``[n]`` targets; mask: ``[n]`` atoms in use or None (an
    atom off the mask is read at the minimum target); rho: ``[d]`` or ``[]`` radii >= 0;
    horizon: H; tol: bracket width in log(alpha), > 0.

  Returns:
    ``[d]``.
  """
  _checks.array("M", M)
  _checks.rank("M", M, 2)
  _checks.array("v", v, (np.shape(M)[1],), "[n]")
  if mask is not None:
    _checks.bool_array("mask", mask)
    _checks.shape("mask", mask, (np.shape(M)[1],), "[n]")
  _checks.rho("rho", rho, (np.shape(M)[0],), what="[d]", scalar_ok=True, hi=None)
  _checks.array("horizon", horizon, ())
  _checks.in_range("horizon", horizon, 0)
  tol = _checks.number("tol", tol, 0, lo_open=True)
  grid_size = _checks.integer("grid_size", grid_size, 2)
  if isinstance(bounds, (str, bytes)) or np.shape(bounds) != (2,):
    raise ValueError(f"bounds must be a pair (lo, hi) with 0 < lo < hi, got {bounds!r}")
  _checks.in_range("bounds", bounds, 0, lo_open=True)
  if not float(bounds[0]) < float(bounds[1]):
    raise ValueError(f"bounds must satisfy 0 < lo < hi, got {bounds!r}")
  dtype = _float_dtype(M, v)
  d, n = M.shape
  M = M.astype(dtype)
  v = jnp.asarray(v, dtype)
  rho = jnp.broadcast_to(jnp.asarray(rho, dtype), (d,))
  horizon = jnp.asarray(horizon, dtype)
  m = jnp.min(v if mask is None else jnp.where(mask, v, jnp.inf))
  m = jnp.where(jnp.isfinite(m), m, 0.0)
  vm = v if mask is None else jnp.where(mask, v, m)
  excess = vm - m  # >= 0
  s_min = _kl_support_min(M != 0, vm, m)
  big = _kl_shift_margin(dtype)  # the exponents' cap: reached only by atoms outside the support

  def shift(alpha):
    return _shift_at(s_min, m, alpha)

  def zu_of(alpha, t):  # ``[d]`` sum_n M_in exp(-(v_n - t_i)/alpha_i)
    e = -(vm[None, :] - t[:, None]) / alpha[:, None]
    return jnp.sum(M * jnp.exp(jnp.minimum(e, big)), axis=1)

  def value(alpha, t, zu):
    tiny = jnp.finfo(dtype).tiny
    logz = jnp.where(zu > 0, -t / alpha + jnp.log(jnp.maximum(zu, tiny)), -jnp.inf)
    logz = jnp.clip(logz, -horizon / alpha, 0.0)
    return -alpha * logz - alpha * rho

  la = jnp.linspace(math.log(bounds[0]), math.log(bounds[1]), grid_size, dtype=dtype)
  alphas = jnp.exp(la)
  t_grid = shift(jnp.broadcast_to(alphas[:, None], (grid_size, d)))  # [G, d]
  # The grid's sums: one product shares the exponentials of all coordinates (the single shift m:
  # the bits of the search before the per-coordinate shift), kept where t = m; a grid point where
  # some coordinate needs its own shift computes the sums again with it (one grid point at a
  # time, and only those: small alphas, and none in most fits).
  u = jnp.exp(-excess[None, :] / alphas[:, None])  # [G, n]
  zu_shared = (M @ u.T).T  # [G, d]

  def own(x):
    a, t, z = x
    return jax.lax.cond(jnp.all(t == m), lambda: z, lambda: zu_of(jnp.broadcast_to(a, (d,)), t))

  zu_grid = jnp.where(t_grid == m, zu_shared, jax.lax.map(own, (alphas, t_grid, zu_shared)))
  grid_vals = jax.vmap(lambda a, t, z: value(a, t, z), out_axes=1)(alphas, t_grid, zu_grid)
  j = jnp.argmax(grid_vals, axis=1)
  step = la[1] - la[0]
  a = jnp.maximum(la[j] - step, la[0])  # the search stays inside ``bounds``
  b = jnp.minimum(la[j] + step, la[-1])

  def f(x):  # x [d] log alpha per coordinate
    alpha = jnp.exp(x)
    t = shift(alpha)
    return value(alpha, t, zu_of(alpha, t))

  invphi = (math.sqrt(5.0) - 1.0) / 2.0
  iters = max(1, int(math.ceil(math.log(tol / (2.0 * (math.log(bounds[1]) - math.log(bounds[0])) /
                                                  (grid_size - 1))) / math.log(invphi))))

  def body(_, st):
    a, b, x1, x2, f1, f2 = st
    left = f1 >= f2
    b = jnp.where(left, x2, b)
    a = jnp.where(left, a, x1)
    x2n = jnp.where(left, x1, a + invphi * (b - a))
    x1n = jnp.where(left, b - invphi * (b - a), x2)
    fn = f(jnp.where(left, x1n, x2n))
    f1n = jnp.where(left, fn, f2)
    f2n = jnp.where(left, f1, fn)
    return a, b, x1n, x2n, f1n, f2n

  x1 = b - invphi * (b - a)
  x2 = a + invphi * (b - a)
  st = jax.lax.fori_loop(0, iters, body, (a, b, x1, x2, f(x1), f(x2)))
  # The grid's best value read at its argmax ``j``, not as ``jnp.max(grid_vals)``: the same number,
  # but ``jnp.max``'s derivative is ``sum(t * (x == max)) / count(x == max)``, and XLA may compute
  # ``grid_vals`` twice (once into the max, once into the comparison, in different fusions) with
  # results a rounding apart, so that no entry equals the max and the derivative is 0 / 0 = NaN
  # (issue 37: ``jit(grad)`` in rho was NaN at some optimization levels). The gather's derivative
  # has no such comparison.
  grid_best = jnp.take_along_axis(grid_vals, j[:, None], axis=1)[:, 0]
  return jnp.maximum(grid_best, jnp.maximum(st[4], st[5]))
