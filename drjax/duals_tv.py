"""TV duals: the inner maximizations of the TV-robust Bellman updates (DR-LSVI-UCB, DRPVI).

Pure, single-instance kernels (callers ``jax.vmap`` over steps / batches):

* Over a ridge operator (Liu & Xu, AISTATS 2024, Algorithm 1, line ``update_nu``):
  ``nu_i = max_{alpha in [0, H]} z_i(alpha) - rho_i * alpha`` with ``z(alpha) = M @ min(v, alpha)``
  (``M`` from ``drjax.linalg.ridge_operator``), exactly (``alpha_max_exact``) or on a grid
  (``alpha_max_grid``, ``make_grid``); ``tv_dual_nu`` chains the regression and the dual.
* Over regression atoms (the engine's kernel, buffer and sufficient-statistics forms alike):
  ``atom_targets`` and ``alpha_max_atoms``, also the general dual without a fail state (DRPVI).
* Finite-state side (Proposition 3, the general TV strong duality, with the min over *all* states
  rather than the fail-state shortcut of Remark 1): ``tv_worst_case_value`` (dual) and
  ``tv_worst_case_distribution`` (primal, closed form), used for exact planning.

Everything is jit-able, vmap-able and differentiable (no host callbacks, no Python loops over
data). Hyperparameters (``rho``, ``horizon``) may be traced. The working dtype is the result dtype
of the *data* arguments (operator / atoms / values); hyperparameters are cast to it, so float32
data stays float32 even under ``jax_enable_x64``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from drjax import _checks
from drjax._precision import exact_matmuls
from drjax.linalg import _argsort, _float_dtype, _max_at_argmax, _prefix_sum, ridge_operator

Array = jax.Array

_METHODS = ("exact", "grid", "exact+grid")


def _rho_vector(rho, d: int, dtype) -> Array:
  rho = jnp.asarray(rho, dtype)
  return jnp.broadcast_to(rho, (d,))


# --------------------------------------------------------------------------------------------
# Over a ridge operator (Algorithm 1, line update_nu).
# --------------------------------------------------------------------------------------------


def _exact_candidates(M: Array, v: Array, horizon: Array) -> tuple[Array, Array]:
  """All candidate ``alpha`` (ascending) and ``z_i(alpha)`` there, by one sort + prefix sums.

  Candidates are ``[0, clip(v_(1), 0, H), ..., clip(v_(K), 0, H), H]`` (``v`` sorted ascending).
  With ``vs`` sorted and ``p`` = number of ``vs <= alpha``,
  ``z(alpha) = sum_{tau < p} m_tau vs_tau + alpha * sum_{tau >= p} m_tau``. For the candidate
  ``vs_j`` in ``[0, H]`` we use ``p = j + 1``: this is valid even with ties, because a later entry
  equal to ``vs_j`` contributes ``m_tau * alpha == m_tau * vs_tau``. Entries of ``v`` outside
  ``[0, H]`` are clipped onto 0 or H and evaluated with ``p = #{v <= 0}`` / ``#{v <= H}``.
  Cost ``O(K log K + K d)`` time and ``O(K d)`` memory.

  Returns:
    ``(c, z)``: ``c`` ``[K + 2]`` ascending candidates, ``z`` ``[d, K + 2]`` with ``z[i, j] =
    z_i(c_j)``.
  """
  d, k = M.shape
  dtype = M.dtype
  order = _argsort(v)
  vs = v[order]
  ms = M[:, order]
  zero_col = jnp.zeros((d, 1), dtype)
  cm = jnp.concatenate([zero_col, _prefix_sum(ms)], axis=1)  # [d, K+1]
  cmv = jnp.concatenate([zero_col, _prefix_sum(ms * vs[None, :])], axis=1)  # [d, K+1]

  p0 = jnp.sum(vs <= 0)
  ph = jnp.sum(vs <= horizon)
  pj = jnp.where(vs < 0, p0, jnp.where(vs > horizon, ph, jnp.arange(1, k + 1)))
  zero = jnp.zeros((1,), dtype)
  c = jnp.concatenate([zero, jnp.clip(vs, 0, horizon), horizon[None]])  # [K+2]
  p = jnp.concatenate([p0[None], pj, ph[None]])  # [K+2]
  z = cmv[:, p] + c[None, :] * (cm[:, k:] - cm[:, p])
  return c, z


def _select(values: Array, c: Array) -> tuple[Array, Array]:
  """Row-wise max of ``values`` [d, C] and the matching ``c`` (first, i.e. smallest, on ties)."""
  idx = jnp.argmax(values, axis=1)
  nu = jnp.take_along_axis(values, idx[:, None], axis=1)[:, 0]
  return nu, c[idx]


@exact_matmuls
def alpha_max_exact(M: Array, v: Array, rho, horizon) -> tuple[Array, Array]:
  """Exact ``nu_i = max_{alpha in [0, H]} z_i(alpha) - rho_i * alpha`` (Alg. 1, line update_nu).

  ``z_i(alpha) = sum_tau M[i, tau] min(v_tau, alpha)`` is piecewise linear in ``alpha`` with kinks
  at the ``v_tau``, so (for any sign of the weights ``M``) the maximum over ``[0, H]`` is attained
  on ``{0, H} U {clip(v_tau, 0, H)}``. All ``K + 2`` candidates are evaluated for all ``d``
  coordinates at once with a single argsort of ``v`` and prefix sums: ``O(K log K + K d)``.

  Note that ``rho = 0`` gives ``nu = z(H)`` only when ``z`` is nondecreasing (e.g. nonnegative
  ``M`` and ``v <= H``); ridge operators can have negative weights, and then ``nu >= z(H)``.

  By the envelope theorem (``nu_i`` is a max of functions affine in ``rho_i``),
  ``d nu_i / d rho_i = -alpha_star_i`` wherever the maximiser is unique; ``jax.grad`` returns
  exactly this (the gradient flows through the selected candidate only).

  Args:
    M: ``[d, K]`` ridge operator.
    v: ``[K]`` targets ``V_{h+1}(s_{h+1}^tau)`` (normally in ``[0, H]``; others are fine).
    rho: ``[d]`` or ``[]`` uncertainty levels in ``[0, 1]``.
    horizon: ``[]`` ``H >= 0``, the upper end of the ``alpha`` range.

  Returns:
    ``(nu, alpha_star)``, both ``[d]``. Among (numerically) tied maximisers the smallest
    ``alpha`` is returned.
  """
  _checks.alpha_args(M, v, rho, horizon)
  dtype = _float_dtype(M, v)
  M = jnp.asarray(M, dtype)
  v = jnp.asarray(v, dtype)
  rho = _rho_vector(rho, M.shape[0], dtype)
  horizon = jnp.asarray(horizon, dtype)
  c, z = _exact_candidates(M, v, horizon)
  return _select(z - rho[:, None] * c[None, :], c)


@exact_matmuls
def make_grid(horizon, num_points: int, dtype=None) -> Array:
  """Uniform grid ``[0, H/(G-1), ..., H]`` on ``[0, H]`` (``horizon`` may be traced).

  Args:
    horizon: ``[]`` ``H``.
    num_points: static ``G >= 2``.
    dtype: optional float dtype; defaults to ``horizon``'s float dtype (or JAX's default float).

  Returns:
    ``[G]``; the spacing is ``H / (G - 1)``.
  """
  _checks.grid_args(horizon, num_points)
  _checks.dtype("dtype", dtype)
  if dtype is None:
    dtype = _float_dtype(horizon)
  horizon = jnp.asarray(horizon, dtype)
  return horizon * (jnp.arange(num_points, dtype=dtype) / (num_points - 1))


@exact_matmuls
def alpha_max_grid(
    M: Array, v: Array, rho, horizon, grid: Array, include_exact: bool = False
) -> tuple[Array, Array]:
  """Grid-search version of ``alpha_max_exact``: the max over ``alpha`` in ``grid``.

  Evaluates ``z(alpha) = M @ min(v, alpha)`` at each grid point (one ``[d, K] x [K, G]`` matmul,
  ``O(K d G)``). Grid points are clipped to ``[0, H]``, so the result never exceeds the exact
  ``nu``; for a grid with maximal gap ``delta`` covering ``[0, H]`` it is at most
  ``(delta / 2) * (sum_tau |M[i, tau]| + rho_i)`` below it, the Lipschitz constant of
  ``z_i(alpha) - rho_i alpha``.

  Args:
    M: ``[d, K]`` ridge operator.
    v: ``[K]`` targets.
    rho: ``[d]`` or ``[]`` uncertainty levels.
    horizon: ``[]`` ``H``.
    grid: ``[G]`` points in ``[0, H]`` (e.g. ``make_grid``).
    include_exact: static bool; also evaluate the exact candidates and maximise over the union
      (the result then equals ``alpha_max_exact`` up to rounding).

  Returns:
    ``(nu, alpha_star)``, both ``[d]``; ties go to the smallest grid point.
  """
  _checks.alpha_args(M, v, rho, horizon)
  _checks.array("grid", grid, (None,), "[G]")
  _checks.finite("grid", grid)
  _checks.boolean("include_exact", include_exact)
  dtype = _float_dtype(M, v)
  M = jnp.asarray(M, dtype)
  v = jnp.asarray(v, dtype)
  rho = _rho_vector(rho, M.shape[0], dtype)
  horizon = jnp.asarray(horizon, dtype)
  g = jnp.clip(jnp.asarray(grid, dtype), 0, horizon)
  z = M @ jnp.minimum(v[:, None], g[None, :])  # [d, G]
  nu, alpha = _select(z - rho[:, None] * g[None, :], g)
  if include_exact:
    nu_e, alpha_e = alpha_max_exact(M, v, rho, horizon)
    use_grid = nu > nu_e
    nu = jnp.where(use_grid, nu, nu_e)
    alpha = jnp.where(use_grid, alpha, alpha_e)
  return nu, alpha


@exact_matmuls
def tv_dual_nu(
    phi: Array, mask: Array, v: Array, lam, rho, horizon, method: str = "exact", grid=None
) -> tuple[Array, Array, Array]:
  """Ridge regression + TV dual: ``nu_i = max_{alpha in [0,H]} hat z_i(alpha) - rho_i alpha``.

  Alg. 1 lines update_z / update_nu: ``ridge_operator`` (eq. closed form) followed by
  ``alpha_max_exact`` / ``alpha_max_grid``. Targets of masked rows are ignored.

  Args:
    phi: ``[K, d]`` features.
    mask: ``[K]`` bool validity mask.
    v: ``[K]`` targets.
    lam: ``[]`` ridge parameter.
    rho: ``[d]`` or ``[]`` uncertainty levels.
    horizon: ``[]`` ``H``.
    method: static, one of ``"exact"``, ``"grid"``, ``"exact+grid"``.
    grid: ``[G]`` grid, required for the grid methods.

  Returns:
    ``(nu, alpha_star, chol)``: ``[d]``, ``[d]`` and the ``[d, d]`` lower Cholesky factor of
    ``Lambda`` (for the UCB bonus).
  """
  _checks.choice("method", method, _METHODS)
  if method != "exact" and grid is None:
    raise ValueError(f"method={method!r} needs a grid (see make_grid)")
  _checks.ridge_args(phi, mask, lam)
  _checks.array("v", v, (np.shape(phi)[0],), "[K]")
  _checks.rho("rho", rho, (np.shape(phi)[1],), what="[d]", scalar_ok=True)
  _checks.numeric("horizon", horizon)
  _checks.scalar("horizon", horizon)
  _checks.in_range("horizon", horizon, 0)
  chol, M = ridge_operator(phi, mask, lam)
  v = jnp.where(mask, v, 0).astype(M.dtype)  # masked targets: no NaN, no spurious candidates
  if method == "exact":
    nu, alpha = alpha_max_exact(M, v, rho, horizon)
  else:
    nu, alpha = alpha_max_grid(M, v, rho, horizon, grid, include_exact=method == "exact+grid")
  return nu, alpha, chol


# --------------------------------------------------------------------------------------------
# Finite-state TV worst case (Proposition 3, general form).
# --------------------------------------------------------------------------------------------


@jax.custom_jvp
def _tv_dual(mu: Array, V: Array, rho: Array) -> tuple[Array, Array]:
  order = jnp.argsort(V)
  vs = V[order]
  ms = mu[order]
  cm = jnp.cumsum(ms)
  cmv = jnp.cumsum(ms * vs)
  vals = cmv + vs * (cm[-1] - cm) - rho * (vs - vs[0])
  idx = jnp.argmax(vals)
  return vals[idx], vs[idx]


@_tv_dual.defjvp
def _tv_dual_jvp(primals, tangents):
  """Danskin: ``d value = <nu*, dV> + <min(V, alpha*), dmu> - (alpha* - Vmin) drho``.

  ``nu*`` is the primal minimiser (``tv_worst_case_distribution``). Differentiating the sorted
  candidate formula instead gives the right value but, when ``V`` ties at ``alpha*`` across states
  with different ``mu`` (structural in the paper's linear MDP), the gradient lands on the wrong
  state of the tie.
  """
  mu, V, rho = primals
  dmu, dV, drho = tangents
  value, alpha = _tv_dual(mu, V, rho)
  nu = tv_worst_case_distribution(mu, V, rho)
  vmin = jnp.min(V)
  dvalue = nu @ dV + jnp.minimum(V, alpha) @ dmu - (alpha - vmin) * drho
  dalpha = dV[jnp.argmin(jnp.abs(V - alpha))]  # alpha* = V(s*) moves with V(s*)
  return (value, alpha), (dvalue, dalpha)


@exact_matmuls
def tv_worst_case_value(mu: Array, V: Array, rho) -> tuple[Array, Array]:
  """``inf_{nu in Delta(S), TV(nu, mu) <= rho} E_nu V`` via the dual of Proposition 3.

  Evaluates, exactly,
  ``max_{alpha in [Vmin, Vmax]} E_mu[min(V, alpha)] - rho * (alpha - min_s min(V(s), alpha))``
  where the min runs over *all* states (also those with ``mu(s) = 0``), so no fail state is
  needed. On ``[Vmin, Vmax]`` the inner min is ``Vmin`` and the objective is concave piecewise
  linear with kinks at the ``V(s)``; all ``S`` candidates ``alpha = V(s)`` are evaluated with one
  sort and prefix sums (ties in ``V`` are handled: the prefix formula is exact at any position of
  a tied value). ``TV`` is ``1/2 ||nu - mu||_1``.

  By the envelope theorem ``d value / d rho = -(alpha_star - Vmin)``. Derivatives follow
  Danskin's theorem (a custom JVP): ``d value / d V`` is the worst-case distribution (also where
  ``V`` has ties) and ``d value / d mu = min(V, alpha_star)``.

  Args:
    mu: ``[S]`` nominal distribution.
    V: ``[S]`` values (any reals).
    rho: ``[]`` uncertainty level in ``[0, 1]``.

  Returns:
    ``(value, alpha_star)``, both ``[]``; ``alpha_star`` is the smallest maximiser.
  """
  _checks.tv_args(mu, V, rho)
  dtype = _float_dtype(mu, V)
  mu = jnp.asarray(mu, dtype)
  V = jnp.asarray(V, dtype)
  rho = jnp.asarray(rho, dtype)
  return _tv_dual(mu, V, rho)


@exact_matmuls
def tv_worst_case_distribution(mu: Array, V: Array, rho) -> Array:
  """Primal minimiser of Proposition 3: the worst-case ``nu`` in the TV ball around ``mu``.

  Moves ``min(rho, 1 - mu(s_min))`` probability mass, greedily from the highest-value states
  downwards, onto the single lowest-value state ``s_min = argmin_s V(s)`` (over all states, even
  one with ``mu(s_min) = 0``). Vectorised with a sort and a cumulative sum.
  ``E_nu V == tv_worst_case_value(mu, V, rho)[0]`` and ``TV(nu, mu) <= rho``.

  Args:
    mu: ``[S]`` nominal distribution.
    V: ``[S]`` values.
    rho: ``[]`` uncertainty level in ``[0, 1]``.

  Returns:
    ``[S]`` distribution ``nu``.
  """
  _checks.tv_args(mu, V, rho)
  dtype = _float_dtype(mu, V)
  mu = jnp.asarray(mu, dtype)
  V = jnp.asarray(V, dtype)
  rho = jnp.asarray(rho, dtype)
  target = jnp.argmin(V)
  order = jnp.argsort(-V)  # descending values
  ms = jnp.where(order == target, 0, mu[order])  # the target state gives nothing away
  before = jnp.cumsum(ms) - ms  # mass strictly above in the removal order
  removed = jnp.clip(rho - before, 0, ms)
  nu = mu.at[order].add(-removed)
  return nu.at[target].add(jnp.sum(removed))


# --------------------------------------------------------------------------------------------
# Regression atoms: the engine's kernel (buffer and sufficient-statistics forms alike).
# --------------------------------------------------------------------------------------------

# Exact alpha-max by one product (no sort) up to this many atoms, one sort + prefix sums above:
# for d = 20 and a batch of 64 (2-core CPU, float32) the product took 2.7 / 7.5 / 12.4 / 28 / 137
# ms at 100 / 200 / 300 / 400 / 1,000 atoms, the sort path 3.9 / 7.8 / 13.3 / 17 / 43 ms
# (2026-11-26; it was 142 ms at 1,000 with a pairwise-rank sort and JAX's CPU cumsum).
SORT_FREE_MAX_ATOMS = 256


@exact_matmuls
def atom_targets(g: Array, v: Array, c: Array) -> Array:
  """``Y[:, j] = sum_n g_n min(v_n, c_j)``: the ridge right-hand side at truncation levels ``c``.

  Sort-free: one ``[d, n] x [n, m]`` product. Cost ``O(n m d)``.

  Args:
    g: ``[n, d]`` atom weights (features of stored transitions, or per-state feature sums).
    v: ``[n]`` atom values ``V_{h+1}(x_n)``.
    c: ``[m]`` truncation levels.

  Returns:
    ``[d, m]``.
  """
  _checks.array("g", g)
  _checks.rank("g", g, 2)
  _checks.array("v", v, (np.shape(g)[0],), "[n]")
  _checks.array("c", c, (None,), "[m]")
  return g.T @ jnp.minimum(v[:, None], c[None, :])


@exact_matmuls
def alpha_max_atoms(pinv: Array, g: Array, v: Array, rho, horizon, *, method: str = "exact",
                    grid: Array | None = None, sort: bool | None = None,
                    operator: Array | None = None, vmin=None,
                    monotone: bool = False) -> tuple[Array, Array]:
  """Exact ``nu_i = max_{alpha in [0,H]} z_i(alpha) - rho_i alpha`` over regression atoms.

  With ``vmin = m`` (a ``[]`` value, possibly traced) the general TV dual of environments without
  a fail state (DRPVI, Liu & Xu 2024b, eq. 4.4) is maximized instead:
  ``nu_i = max_{alpha in [0,H]} z_i(alpha) - rho_i (alpha - min(m, alpha))``, where ``m`` is the
  minimum of the next-step value over the states; ``m`` is one more kink, so it joins the
  candidates. ``vmin=None`` is the fail-state form above (``m = 0``), computed exactly as before.

  ``z(alpha) = Lambda^-1 sum_n g_n min(v_n, alpha)`` (Section 4.1, eq. closed form, with the
  stored transitions or the per-state sufficient statistics as atoms). ``z`` is piecewise linear
  with kinks at the ``v_n``, so the maximum over ``[0, H]`` is attained on ``{0, H} U
  {clip(v_n, 0, H)}``: every candidate is evaluated for all ``d`` coordinates at once, as
  ``Z = Lambda^-1 Y`` with ``Y`` from ``atom_targets`` (sort-free, ``O(n^2 d)``, the faster choice
  for few atoms) or from one sort and prefix sums (``O(n log n + n d)``). Either way
  ``O(d^2 n)`` for ``Lambda^-1 Y``. Ties go to the smallest maximizing alpha.

  Args:
    pinv: ``[d, d]`` ``Lambda^-1``.
    g: ``[n, d]`` atom weights.
    v: ``[n]`` atom values.
    rho: ``[d]`` or ``[]`` uncertainty levels.
    horizon: ``[]`` ``H``.
    method: ``"exact"``, ``"grid"`` or ``"exact+grid"`` (static).
    grid: ``[G]`` grid for the grid methods.
    sort: static; ``None`` picks the sort-free evaluation for ``n <= SORT_FREE_MAX_ATOMS``.
    operator: optional ``[d, n]`` ridge operator ``Lambda^-1 g^T`` (kept up to date by the
      caller); then ``Z = operator @ min(v, c)`` directly (sort-free), ``O(n^2 d)`` instead of
      ``O(n^2 d + n d^2)``.
    monotone: static; ``True`` replaces ``z_i`` on the sorted candidates by its suffix minimum
      ``min_{c_k >= c_j} z_i(c_k)`` (the largest nondecreasing function below it on the
      candidates) before the maximization (``monotone_candidates``): a deviation from the paper
      (opt-in) that removes the upward bias of the per-coordinate max when ``Lambda^-1`` has
      negative entries; at ``rho = 0`` it returns ``z(H)``, the plain ridge regression of ``V``.

  Returns:
    ``(nu, alpha_star)``, both ``[d]``.
  """
  _checks.array("g", g)
  _checks.rank("g", g, 2)
  n_, d_ = np.shape(g)
  _checks.array("pinv", pinv, (d_, d_), "[d, d]")
  _checks.array("v", v, (n_,), "[n]")
  _checks.rho("rho", rho, (d_,), what="[d]", scalar_ok=True)
  _checks.array("horizon", horizon, ())
  _checks.in_range("horizon", horizon, 0)
  _checks.choice("method", method, _METHODS)
  if grid is not None:
    _checks.array("grid", grid, (None,), "[G]")
  if sort is not None:
    _checks.boolean("sort", sort)
  if operator is not None:
    _checks.array("operator", operator, (d_, n_), "[d, n]")
  if vmin is not None:
    _checks.array("vmin", vmin, ())
  monotone = _checks.boolean("monotone", monotone)
  dtype = _float_dtype(g, v)
  n, d = g.shape
  rho = _rho_vector(rho, d, dtype)
  horizon = jnp.asarray(horizon, dtype)
  v = jnp.asarray(v, dtype)
  if operator is not None:
    c_parts = []
    if method != "grid":
      c_parts.append(jnp.concatenate([jnp.zeros((1,), dtype), jnp.clip(v, 0, horizon),
                                      horizon[None]]))
    if method != "exact":
      if grid is None:
        raise ValueError(f"method={method!r} needs a grid (see make_grid)")
      c_parts.append(jnp.clip(jnp.asarray(grid, dtype), 0, horizon))
    if vmin is not None:
      c_parts.append(jnp.clip(jnp.asarray(vmin, dtype), 0, horizon)[None])
    c = jnp.concatenate(c_parts) if len(c_parts) > 1 else c_parts[0]
    return _max_candidates(operator.astype(dtype) @ jnp.minimum(v[:, None], c[None, :]), c, rho,
                           vmin, monotone)
  parts_c, parts_y = [], []
  if method != "grid":
    if sort is None:
      sort = n > SORT_FREE_MAX_ATOMS
    if sort:
      # One sort + prefix sums over the atom weights (``_exact_candidates`` with ``g^T``).
      c, y = _exact_candidates(g.T, v, horizon)
    else:
      c = jnp.concatenate([jnp.zeros((1,), dtype), jnp.clip(v, 0, horizon), horizon[None]])
      y = atom_targets(g, v, c)
    parts_c.append(c)
    parts_y.append(y)
  if method != "exact":
    if grid is None:
      raise ValueError(f"method={method!r} needs a grid (see make_grid)")
    c = jnp.clip(jnp.asarray(grid, dtype), 0, horizon)
    parts_c.append(c)
    parts_y.append(atom_targets(g, v, c))
  if vmin is not None:
    c = jnp.clip(jnp.asarray(vmin, dtype), 0, horizon)[None]
    parts_c.append(c)
    parts_y.append(atom_targets(g, v, c))
  c = jnp.concatenate(parts_c) if len(parts_c) > 1 else parts_c[0]
  y = jnp.concatenate(parts_y, axis=1) if len(parts_y) > 1 else parts_y[0]
  return _max_candidates(pinv.astype(dtype) @ y, c, rho, vmin, monotone)


def monotone_candidates(z: Array, c: Array) -> tuple[Array, Array]:
  """``(z_mono, c_sorted)``: the candidates sorted ascending and ``z [d, C]`` replaced by its
  suffix minimum over them, ``z_mono[i, j] = min_{k >= j} z[i, k]``.

  The population ``E[min(V, alpha)]`` is nondecreasing in alpha; its ridge estimate ``z_i`` is not
  when ``Lambda^-1`` has negative entries. ``z_mono`` is the largest nondecreasing function below
  ``z`` on the candidates, so its maximum at ``rho = 0`` is ``z(H)`` (the last candidate).

  Args:
    z: ``[d, C]`` values ``z_i(c_j)``.
    c: ``[C]`` candidates (any order).
  """
  _checks.array("z", z)
  _checks.rank("z", z, 2)
  _checks.array("c", c, (np.shape(z)[1],), "[C]")
  order = jnp.argsort(c)
  cs = c[order]
  zs = z[:, order]
  return jax.lax.cummin(zs, axis=1, reverse=True), cs


def _max_candidates(z: Array, c: Array, rho: Array, vmin,
                    monotone: bool = False) -> tuple[Array, Array]:
  """``max_j z[:, j] - rho (c_j - min(m, c_j))`` per row and the smallest maximizing ``c_j``
  (``m = 0`` when ``vmin`` is None: the fail-state form ``z - rho c`` for ``c >= 0``);
  ``monotone``: ``z`` first replaced by its suffix minimum (``monotone_candidates``)."""
  if monotone:
    z, c = monotone_candidates(z, c)
  pen = c if vmin is None else c - jnp.minimum(jnp.asarray(vmin, c.dtype), c)
  vals = z - rho[:, None] * pen[None, :]
  nu = _max_at_argmax(vals, axis=1)  # not jnp.max: a NaN-free derivative under jit (issue 37)
  alpha = jnp.min(jnp.where(vals >= nu[:, None], c[None, :], jnp.inf), axis=1)
  return nu, alpha
