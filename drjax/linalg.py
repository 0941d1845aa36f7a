"""Dense linear algebra of the ridge regressions, and the small-array primitives of the duals.

Pure, single-instance kernels (callers ``jax.vmap`` over steps / batches):

* Ridge regression (Liu & Xu, AISTATS 2024, Section 4.1): ``gram``, ``ridge_factors`` and
  ``ridge_operator`` build the Cholesky factor of ``Lambda`` and the operator
  ``M = Lambda^{-1} Phi^T`` of the closed form (eq. ``closed form``), so that
  ``z(alpha) = M @ min(v, alpha)`` (``z_of_alpha``); ``cholesky``, ``triangular_inverse`` and
  ``spd_inverse`` are the plain-``jnp`` factorizations they use.
* Primitives of the dual maximizations (``drjax.duals_tv``, ``drjax.duals_kl_chi2``): a stable
  ``rank_argsort`` for short vectors and log-depth prefix sums.

Everything is jit-able, vmap-able and differentiable (no host callbacks, no Python loops over
data). Hyperparameters (``lam``) may be traced. The working dtype is the result dtype of the
*data* arguments (features / operator / values); hyperparameters are cast to it, so float32 data
stays float32 even under ``jax_enable_x64``.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from drjax import _checks
from drjax._precision import exact_matmuls

Array = jax.Array


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


def _small_matmul(a: Array, b: Array) -> Array:
  """``a @ b`` (``jnp.matmul``'s shapes, both at least 1-D), with a contraction of length ``k <=
  UNROLL_MAX_D`` unrolled: one elementwise multiply for the ``k`` products, then their sum in
  order.

  Under ``vmap`` over seeds a tiny product becomes a batched ``dot`` that XLA's CPU backend runs
  as one small matrix product per batch entry (``[16, 4] x [4]`` at batch 10,000: 0.5 ms alone),
  far below its elementwise speed; the unrolled sum is fused into the elementwise work around it.
  Used for the online agents' Q-values in planning (``pieces.linear_q``: ``phi_all @ w``; the greedy
  action asks for a ``dot``, ``linear_q(..., dot=True)``) and the linear MDP's step (``phi @
  mu_h``, ``phi @ theta_h``): DR-LSVI-UCB on the linear MDP (d = 4) through
  ``drjax.sweep``'s program ran 1.22x faster at 10,000 seeds x 100 episodes, 1.07x at 1,000 and
  1.39x at 20 (``intel-xeon-2c``, both programs in one process, medians of 21 calls). Not used
  where it did not pay: the exact dual's ``g^T min(v, c)`` and ``Lambda^-1 y`` (XLA then fused
  and recomputed the sums: 1.2x slower) and the unrolled inverse's ``L^-T L^-1`` (no change).
  The same number up to float rounding (the terms are added in order, ``k = 0`` first); products
  are exact float32 on every backend (no TF32). Longer contractions are ``a @ b``.
  """
  k = a.shape[-1]
  if k != b.shape[-2 if b.ndim >= 2 else -1] or k > UNROLL_MAX_D or k == 0:
    return a @ b
  # All k products in one multiply, then their sum in order (t_0 + t_1 + ...): the same numbers
  # as k separate multiplies, in about half the operations for XLA to compile.
  if b.ndim == 1:  # [..., m, k] @ [k] (or [k] @ [k])
    prods = a * jnp.reshape(b, (1,) * (a.ndim - 1) + (k,))
    terms = [prods[..., i] for i in range(k)]
  elif a.ndim == 1:  # [k] @ [..., k, n]
    prods = jnp.reshape(a, (1,) * (b.ndim - 2) + (k, 1)) * b
    terms = [prods[..., i, :] for i in range(k)]
  else:  # [..., m, k] @ [..., k, n], batch dimensions broadcast
    nd = max(a.ndim, b.ndim)
    a = jnp.reshape(a, (1,) * (nd - a.ndim) + a.shape)
    b = jnp.reshape(b, (1,) * (nd - b.ndim) + b.shape)
    prods = a[..., :, :, None] * b[..., None, :, :]  # [..., m, k, n]
    terms = [prods[..., :, i, :] for i in range(k)]
  out = terms[0]
  for t in terms[1:]:
    out = out + t
  return out


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


# --------------------------------------------------------------------------------------------
# Sorting and prefix sums of short vectors (the dual maximizations' primitives).
# --------------------------------------------------------------------------------------------


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


@functools.partial(jax.custom_jvp, nondiff_argnums=(1,))
def _max_at_argmax(x: Array, axis: int = -1) -> Array:
  """``jnp.max(x, axis)``, differentiated at the argmax: the same value, a derivative without
  comparisons.

  ``jnp.max``'s derivative is ``sum(t * (x == max)) / count(x == max)``. Under ``jit`` XLA may
  compute ``x`` twice (into the max and into the comparison, in different fusions) a rounding
  apart; then no entry equals the max and the derivative is 0 / 0 = NaN (issue 37). Here the
  tangent is read at the first maximiser (``jnp.max`` averages exactly tied ones). The value is a
  plain reduction: a program that does not differentiate pays no argmax (on XLA's CPU a variadic
  argmax reduction plus a gather costs several times a max)."""
  return jnp.max(x, axis=axis)


@_max_at_argmax.defjvp
def _max_at_argmax_jvp(axis, primals, tangents):
  (x,), (t,) = primals, tangents
  j = jnp.expand_dims(jnp.argmax(x, axis=axis), axis)
  return jnp.max(x, axis=axis), jnp.squeeze(jnp.take_along_axis(t, j, axis=axis), axis)


def _min_at_argmin(x: Array, axis: int = -1) -> Array:
  """``jnp.min(x, axis)`` differentiated at the first minimiser (``_max_at_argmax`` of ``-x``):
  ``jnp.min``'s derivative divides by the count of entries equal to the min, 0 / 0 when XLA
  computed ``x`` twice a rounding apart (issue 37)."""
  return -_max_at_argmax(-x, axis)
