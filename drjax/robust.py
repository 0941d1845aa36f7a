"""Kernels for the TV-robust Bellman update of DR-LSVI-UCB (Liu & Xu, AISTATS 2024).

Two families of pure, single-instance kernels (callers ``jax.vmap`` over steps / batches):

* Ridge-regression side (Section 4.1): ``gram``, ``ridge_operator`` build the operator
  ``M = Lambda^{-1} Phi^T`` of the closed form (eq. ``closed form``), so that
  ``z(alpha) = M @ min(v, alpha)``. ``alpha_max_exact`` / ``alpha_max_grid`` then solve
  Algorithm 1, line ``update_nu``: ``nu_i = max_{alpha in [0, H]} z_i(alpha) - rho_i * alpha``.
  ``tv_dual_nu`` chains the two.
* Finite-state side (Proposition 3, the general TV strong duality, with the min over *all* states
  rather than the fail-state shortcut of Remark 1): ``tv_worst_case_value`` (dual) and
  ``tv_worst_case_distribution`` (primal, closed form), used for exact planning.

Everything is jit-able, vmap-able and differentiable (no host callbacks, no Python loops over
data). Hyperparameters (``lam``, ``rho``, ``horizon``) may be traced. The working dtype is the
result dtype of the *data* arguments (features / operator / values); hyperparameters are cast to
it, so float32 data stays float32 even under ``jax_enable_x64``.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from drjax import _checks
from drjax._precision import exact_matmuls

Array = jax.Array

_METHODS = ("exact", "grid", "exact+grid")


def _float_dtype(*xs) -> jnp.dtype:
  dtype = jnp.result_type(*xs)
  if not jnp.issubdtype(dtype, jnp.floating):
    dtype = jnp.result_type(dtype, jnp.float32)
  return dtype


# --------------------------------------------------------------------------------------------
# Ridge regression (Section 4.1, eq. "closed form").
# --------------------------------------------------------------------------------------------


@exact_matmuls
def gram(phi: Array, mask: Array, lam) -> Array:
  """Regularised Gram matrix ``Lambda = sum_{tau valid} phi_tau phi_tau^T + lam I``.

  This is ``Lambda_h^k`` of eq. (closed form). Rows with ``mask == False`` are ignored entirely
  (they may hold garbage, even NaN).

  Args:
    phi: ``[K, d]`` features ``phi(s_h^tau, a_h^tau)``.
    mask: ``[K]`` bool, which rows are real samples.
    lam: ``[]`` ridge parameter ``lambda > 0``.

  Returns:
    ``[d, d]`` symmetric positive definite ``Lambda``.
  """
  _checks.ridge_args(phi, mask, lam)
  dtype = _float_dtype(phi)
  d = phi.shape[1]
  phi_m = jnp.where(mask[:, None], phi, 0).astype(dtype)
  lam = jnp.asarray(lam, dtype)
  return phi_m.T @ phi_m + lam * jnp.eye(d, dtype=dtype)


@exact_matmuls
def cholesky(a: Array) -> Array:
  """Lower Cholesky factor of a small SPD matrix ``a [d, d]`` in plain ``jnp`` ops.

  A ``fori_loop`` over the ``d`` columns (``O(d^3)``), instead of XLA's LAPACK custom call. On
  multi-core CPUs the custom-call triangular solves of jax 0.10 stalled for 8 ms at a time on some
  shapes (e.g. a ``[21, 100]`` right-hand side, or a batch of 100 vectors) — measured in
  ``benchmarks/``; plain ops have no such stalls, batch cleanly under ``vmap`` on CPU and GPU and
  are differentiable.
  """
  _square("a", a)
  d = a.shape[-1]
  idx = jnp.arange(d)

  def column(j, low):
    col = a[:, j] - low @ low[j, :]
    diag = jnp.sqrt(col[j])
    return low.at[:, j].set(jnp.where(idx > j, col / diag, jnp.where(idx == j, diag, 0.0)))

  return jax.lax.fori_loop(0, d, column, jnp.zeros_like(a))


@exact_matmuls
def triangular_inverse(low: Array) -> Array:
  """``L^{-1}`` of a lower-triangular ``L [d, d]`` by forward substitution (plain ``jnp`` ops)."""
  _square("low", low)
  d = low.shape[-1]
  eye = jnp.eye(d, dtype=low.dtype)

  def row(i, x):
    return x.at[i].set((eye[i] - low[i] @ x) / low[i, i])

  return jax.lax.fori_loop(0, d, row, jnp.zeros_like(low))


UNROLL_MAX_D = 8  # d up to this: Cholesky and its inverse unrolled into one fused elementwise program


def _use_lapack() -> bool:
  """On GPU, the vendor Cholesky / triangular solves; on CPU the plain-jnp versions (see below)."""
  return jax.default_backend() == "gpu"


def _unrolled_inverse(a: Array) -> Array:
  """``a^-1`` of a tiny SPD ``a [d, d]`` through its Cholesky factor, unrolled over entries.

  For ``d <= UNROLL_MAX_D`` every entry is a scalar expression, so under ``vmap`` the whole
  factorization is a handful of elementwise ops over the batch (no loops, no custom calls).
  """
  d = a.shape[-1]
  low = [[None] * d for _ in range(d)]
  for j in range(d):
    s = a[j, j]
    for k in range(j):
      s = s - low[j][k] * low[j][k]
    low[j][j] = jnp.sqrt(s)
    for i in range(j + 1, d):
      s = a[i, j]
      for k in range(j):
        s = s - low[i][k] * low[j][k]
      low[i][j] = s / low[j][j]
  # Forward substitution for X = L^-1 (lower triangular).
  inv = [[None] * d for _ in range(d)]
  for i in range(d):
    inv[i][i] = 1.0 / low[i][i]
    for j in range(i):
      s = 0.0
      for k in range(j, i):
        s = s + low[i][k] * inv[k][j]
      inv[i][j] = -s / low[i][i]
  zero = jnp.zeros_like(a[0, 0])
  linv = jnp.stack([jnp.stack([inv[i][j] if j <= i else zero for j in range(d)])
                    for i in range(d)])
  return linv.T @ linv


@exact_matmuls
def spd_inverse(a: Array) -> Array:
  """``a^-1`` of a small symmetric positive definite ``a [d, d]`` via its Cholesky factor.

  Unrolled for ``d <= UNROLL_MAX_D``; otherwise ``cholesky`` + ``triangular_inverse`` (plain-jnp
  loops) on CPU and the vendor Cholesky + triangular solve on GPU. Differentiable.
  """
  _square("a", a)
  d = a.shape[-1]
  if d <= UNROLL_MAX_D:
    return _unrolled_inverse(a)
  if _use_lapack():
    low = jnp.linalg.cholesky(a)
    linv = jax.scipy.linalg.solve_triangular(low, jnp.eye(d, dtype=a.dtype), lower=True)
  else:
    linv = triangular_inverse(cholesky(a))
  return linv.T @ linv


@exact_matmuls
def ridge_factors(phi: Array, mask: Array, lam) -> tuple[Array, Array, Array]:
  """``(chol, linv, M)``: the Cholesky factor ``L`` of ``Lambda``, ``L^{-1}`` and ``M``.

  ``Lambda`` is factorized once; ``Lambda^{-1} = L^{-T} L^{-1}`` is never formed: ``M =
  L^{-T} (L^{-1} Phi^T)`` (two triangular products), ``diag(Lambda^{-1})_i = ||L^{-1}[:, i]||^2``
  and ``||phi||^2_{Lambda^{-1}} = ||L^{-1} phi||^2`` for the bonuses.
  """
  _checks.ridge_args(phi, mask, lam)
  dtype = _float_dtype(phi)
  chol = cholesky(gram(phi, mask, lam))
  linv = triangular_inverse(chol)
  phi_m = jnp.where(mask[:, None], phi, 0).astype(dtype)
  m = linv.T @ (linv @ phi_m.T)
  return chol, linv, m


@exact_matmuls
def ridge_operator(phi: Array, mask: Array, lam) -> tuple[Array, Array]:
  """Cholesky factor of ``Lambda`` and the ridge operator ``M = Lambda^{-1} Phi_masked^T``.

  For targets ``y`` (``[K]``) the ridge solution of eq. (ridge regression) is ``z = M @ y``
  (eq. closed form); with ``y = min(v, alpha)`` this is ``hat z_h(alpha)``. ``M`` is obtained
  from the Cholesky factor (never an explicit inverse of ``Lambda``, see ``ridge_factors``);
  columns of masked rows are exactly zero.

  Args:
    phi: ``[K, d]`` features.
    mask: ``[K]`` bool validity mask.
    lam: ``[]`` ridge parameter ``lambda > 0``.

  Returns:
    ``(chol, M)``: ``chol`` ``[d, d]`` lower-triangular with ``chol @ chol.T == Lambda``;
    ``M`` ``[d, K]``.
  """
  chol, _, m = ridge_factors(phi, mask, lam)
  return chol, m


@exact_matmuls
def z_of_alpha(M: Array, v: Array, alpha) -> Array:
  """``z(alpha) = M @ min(v, alpha)``, the ridge estimate of eq. (closed form).

  Args:
    M: ``[d, K]`` ridge operator (see ``ridge_operator``).
    v: ``[K]`` regression targets ``V_{h+1}(s_{h+1}^tau)``.
    alpha: ``[]`` truncation level, or ``[d]`` one level per coordinate, in which case the result
      is ``(z_1(alpha_1), ..., z_d(alpha_d))``.

  Returns:
    ``[d]``.
  """
  _checks.array("M", M)
  _checks.rank("M", M, 2)
  _checks.array("v", v, (np.shape(M)[1],), "[K]")
  _checks.array("alpha", alpha)
  _checks.rank("alpha", alpha, {0, 1})
  if np.ndim(alpha) == 1:
    _checks.shape("alpha", alpha, (np.shape(M)[0],), "[d]")
  dtype = _float_dtype(M, v)
  M = jnp.asarray(M, dtype)
  v = jnp.asarray(v, dtype)
  alpha = jnp.asarray(alpha, dtype)
  if alpha.ndim == 0:
    return M @ jnp.minimum(v, alpha)
  return jnp.sum(M * jnp.minimum(v[None, :], alpha[:, None]), axis=1)


def _square(name: str, a) -> None:
  _checks.numeric(name, a)
  if np.ndim(a) != 2 or np.shape(a)[0] != np.shape(a)[1]:
    raise ValueError(f"{name} must be a square [d, d] matrix, got shape {tuple(np.shape(a))}")


def _rho_vector(rho, d: int, dtype) -> Array:
  rho = jnp.asarray(rho, dtype)
  return jnp.broadcast_to(rho, (d,))


@exact_matmuls
def rank_argsort(v: Array) -> Array:
  """Stable ``argsort`` of a short vector ``v [n]`` by pairwise comparisons (``O(n^2)``).

  ``rank_j = #{v_m < v_j} + #{m < j : v_m == v_j}``, then one scatter inverts the ranks. On CPU,
  XLA's comparator sort is several times slower than this for the buffer sizes drjax plans over
  (measured in ``benchmarks/``), and the comparisons batch cleanly under ``vmap``.
  """
  _checks.array("v", v)
  _checks.rank("v", v, 1)
  n = v.shape[0]
  idx = jnp.arange(n)
  less = v[None, :] < v[:, None]  # [j, m]: v_m < v_j
  tie = (v[None, :] == v[:, None]) & (idx[None, :] < idx[:, None])
  rank = jnp.sum(less | tie, axis=1)
  return jnp.zeros((n,), jnp.int32).at[rank].set(idx.astype(jnp.int32))


RANK_SORT_MAX = 256  # up to this length rank_argsort (O(n^2)), above it XLA's sort (2x at 400)


def _argsort(v: Array) -> Array:
  return rank_argsort(v) if v.shape[0] <= RANK_SORT_MAX else jnp.argsort(v)


def _prefix_sum(x: Array) -> Array:
  """Cumulative sums along axis 1 by a log-depth scan: JAX lowers ``cumsum`` on CPU to a
  reduce-window that costs ``O(K^2)`` for ``K`` up to about 1,000 (XLA rewrites longer ones)."""
  return jax.lax.associative_scan(jnp.add, x, axis=1)


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
                    operator: Array | None = None, vmin=None) -> tuple[Array, Array]:
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
                           vmin)
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
  return _max_candidates(pinv.astype(dtype) @ y, c, rho, vmin)


def _max_candidates(z: Array, c: Array, rho: Array, vmin) -> tuple[Array, Array]:
  """``max_j z[:, j] - rho (c_j - min(m, c_j))`` per row and the smallest maximizing ``c_j``
  (``m = 0`` when ``vmin`` is None: the fail-state form ``z - rho c`` for ``c >= 0``)."""
  pen = c if vmin is None else c - jnp.minimum(jnp.asarray(vmin, c.dtype), c)
  vals = z - rho[:, None] * pen[None, :]
  nu = jnp.max(vals, axis=1)
  alpha = jnp.min(jnp.where(vals >= nu[:, None], c[None, :], jnp.inf), axis=1)
  return nu, alpha


# --------------------------------------------------------------------------------------------
# Regularized chi-square dual and KL-constrained dual over regression atoms (R2PVI, DRVI-L).
# --------------------------------------------------------------------------------------------


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
  best = jnp.maximum(jnp.max(grid_vals, axis=1), jnp.maximum(st[4], st[5]))
  return best
