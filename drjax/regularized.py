"""Kernels for robust *regularized* Bellman updates (R2PVI) and the KL-constrained one (DRVI-L).

In a d-rectangular linear robust regularized MDP (Tang, Liu & Xu, ICML 2025, "R2PVI") the
adversary is not confined to a ball: it picks any factor distribution ``nu`` and pays a penalty
``w * D(nu || mu)`` for moving away from the nominal factor ``mu``. Each factor of the robust
regularized Bellman equation is then

  ``inf_{nu in Delta(S)} { E_nu V + w D(nu || mu) }``,

a scalar problem with a closed form (TV, KL) or a one-dimensional dual (chi-square). The
KL-*constrained* problem ``inf_{KL(nu || mu) <= rho} E_nu V`` of DRVI-L (Ma et al. 2022, a
baseline of the same papers) has a one-dimensional dual with no closed form and is solved by a
bounded search.

Conventions (all divergences are between distributions on the same finite state space):

* ``TV(nu, mu) = 1/2 ||nu - mu||_1`` (as in ``drjax.duals_tv``). This is the normalization under
  which R2PVI's closed form ``E_mu [V]_{min V + w}`` is exact (moving mass ``delta`` costs
  ``w * delta``); with ``||nu - mu||_1`` instead the truncation level would be ``min V + 2 w``.
* ``KL(nu || mu) = sum_s nu(s) log(nu(s) / mu(s))`` (``+inf`` unless ``nu << mu``).
* ``chi2(nu || mu) = sum_s (nu(s) - mu(s))^2 / mu(s)`` (``+inf`` unless ``nu << mu``).

So the KL and chi-square adversaries only reweight the support of ``mu``: their minima involve
``m = min {V(s) : mu(s) > 0}``, and ``V`` on states outside the support is ignored. The TV
adversary may move mass to *any* state, so its ``m`` is the minimum over all states (no fail-state
assumption needed, as in ``duals_tv.tv_worst_case_value``).

Every kernel handles one factor: ``mu [S]`` (a distribution, zeros allowed), ``V [S]`` (any
finite reals, ties allowed) and a scalar weight ``w > 0`` / radius ``rho >= 0`` that may be
traced. They are jit- and vmap-able (no host callbacks, no Python loops over states); the working
dtype is the result dtype of ``mu`` and ``V`` (float32 stays float32 under ``jax_enable_x64``).
Host-side validation (``ValueError`` naming the argument) runs whenever the arguments are
concrete. The KL kernels use ``mu / sum(mu)`` (a rounding-level ``sum(mu) - 1`` would otherwise be
amplified by a large ``w`` or ``alpha``).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from drjax import _checks
from drjax.linalg import _float_dtype
from drjax._precision import exact_matmuls

Array = jax.Array

__all__ = [
    "tv_regularized_value",
    "tv_regularized_worst_case_distribution",
    "kl_regularized_value",
    "kl_regularized_worst_case_distribution",
    "chi2_regularized_value",
    "chi2_regularized_worst_case_distribution",
    "chi2_dual_objective",
    "kl_constrained_value",
    "kl_constrained_worst_case_distribution",
    "kl_constrained_dual_objective",
    "kl_constrained_num_iterations",
    "tv_distance",
    "kl_divergence",
    "chi2_divergence",
    "DEFAULT_BRACKET",
    "DEFAULT_GRID_SIZE",
]

DEFAULT_BRACKET = (1e-6, 1e6)  # alpha range of the KL-constrained search, in units of span(V)
DEFAULT_GRID_SIZE = 64  # log-spaced coarse grid points of the KL-constrained search
_INV_PHI = (math.sqrt(5.0) - 1.0) / 2.0  # golden-section ratio 0.618...


# --------------------------------------------------------------------------------------------
# Argument checks (host side; values only when concrete).
# --------------------------------------------------------------------------------------------


def _factor_args(mu, V, w, name: str, lo_open: bool = True) -> None:
  """``mu [S]`` a distribution, ``V [S]`` finite, scalar ``name`` finite and > 0 (>= 0)."""
  _checks.numbers_(mu=mu, V=V, **{name: w})
  _checks.rank("mu", mu, 1)
  _checks.shape("V", V, np.shape(mu), "[S]")
  _checks.scalar(name, w)
  _checks.distribution("mu", mu)
  _checks.finite("V", V)
  _checks.finite(name, w)
  _checks.in_range(name, w, 0, lo_open=lo_open)


def _pair_args(nu, mu) -> None:
  """``nu [S]`` and ``mu [S]`` numeric vectors of one shape (values: any, see each function)."""
  _checks.array("nu", nu)
  _checks.rank("nu", nu, 1)
  _checks.array("mu", mu, np.shape(nu), "[S]")


def _cast(mu, V, w) -> tuple[Array, Array, Array]:
  dtype = _float_dtype(mu, V)
  return jnp.asarray(mu, dtype), jnp.asarray(V, dtype), jnp.asarray(w, dtype)


def _support_shift(mu: Array, V: Array) -> tuple[Array, Array]:
  """``m = min {V(s) : mu(s) > 0}`` and ``U = V - m`` on the support, ``0`` off it (``U >= 0``)."""
  pos = mu > 0
  m = jnp.min(jnp.where(pos, V, jnp.inf))
  return m, jnp.where(pos, V - m, 0)


def _neg_log_mgf(mu: Array, U: Array, t: Array) -> Array:
  """``-t log sum_s mu(s) exp(-U(s) / t)`` for ``U >= 0`` with a zero on the support, ``t > 0``.

  ``mu`` is normalised by its sum first: a rounding-level ``sum mu - 1`` would otherwise add
  ``-t (sum mu - 1)``, amplified by large ``t``. The sum ``Z`` lies in ``[mu(argmin), 1]``: it
  never underflows (the ``U = 0`` term is exactly ``mu(argmin)``). For ``Z`` near 1 (large ``t``)
  ``log Z`` is taken as ``log1p(Z - 1)`` with ``Z - 1 = sum mu expm1(-U/t)``, which keeps the
  digits that ``log`` of a number near 1 loses (float32, large ``w``); for small ``Z`` the plain
  ``log`` (a sum of nonnegative terms, no cancellation).
  """
  x = -U / t
  total = jnp.sum(mu)
  z = jnp.sum(mu * jnp.exp(x)) / total
  zm1 = jnp.sum(mu * jnp.expm1(x)) / total
  near_one = z > 0.5
  log_z = jnp.where(near_one, jnp.log1p(jnp.where(near_one, zm1, 0.0)),
                    jnp.log(jnp.where(near_one, 1.0, z)))
  return -t * log_z


# --------------------------------------------------------------------------------------------
# Divergences (for penalties and checks).
# --------------------------------------------------------------------------------------------


@exact_matmuls
def tv_distance(nu: Array, mu: Array) -> Array:
  """``TV(nu, mu) = 1/2 ||nu - mu||_1`` (the convention of every kernel here)."""
  _pair_args(nu, mu)
  return 0.5 * jnp.sum(jnp.abs(jnp.asarray(nu) - jnp.asarray(mu)))


@exact_matmuls
def kl_divergence(nu: Array, mu: Array) -> Array:
  """``KL(nu || mu) = sum_s nu(s) log(nu(s) / mu(s))`` with ``0 log 0 = 0``; ``inf`` unless
  ``nu << mu``."""
  _pair_args(nu, mu)
  nu = jnp.asarray(nu)
  mu = jnp.asarray(mu)
  pos = nu > 0
  nu_s = jnp.where(pos, nu, 1)
  mu_s = jnp.where(mu > 0, mu, 1)
  term = jnp.where(mu > 0, nu_s * (jnp.log(nu_s) - jnp.log(mu_s)), jnp.inf)
  return jnp.sum(jnp.where(pos, term, 0))


@exact_matmuls
def chi2_divergence(nu: Array, mu: Array) -> Array:
  """``chi2(nu || mu) = sum_s (nu(s) - mu(s))^2 / mu(s)``; ``inf`` unless ``nu << mu``."""
  _pair_args(nu, mu)
  nu = jnp.asarray(nu)
  mu = jnp.asarray(mu)
  pos = mu > 0
  mu_s = jnp.where(pos, mu, 1)
  term = jnp.where(pos, (nu - mu) ** 2 / mu_s, jnp.where(nu > 0, jnp.inf, 0))
  return jnp.sum(term)


# --------------------------------------------------------------------------------------------
# TV-regularized (R2PVI-TV).
# --------------------------------------------------------------------------------------------


@exact_matmuls
def tv_regularized_value(mu: Array, V: Array, w) -> Array:
  """``inf_{nu in Delta(S)} { E_nu V + w TV(nu, mu) }`` in closed form, ``TV = 1/2 ||nu - mu||_1``.

  ``= E_mu [V]_{m + w} = E_mu min(V, m + w)`` with ``m = min_s V(s)`` over *all* states (also
  those with ``mu(s) = 0``): moving mass ``delta`` from a state ``s`` onto ``argmin V`` changes
  ``E_nu V`` by ``-delta (V(s) - m)`` and the penalty by ``+w delta``, so exactly the mass on
  ``{V > m + w}`` moves. (R2PVI's closed form; with ``TV = ||nu - mu||_1`` the level would be
  ``m + 2 w``.) ``w >= max V - min V`` gives ``E_mu V``.

  Args:
    mu: ``[S]`` nominal distribution.
    V: ``[S]`` values (any reals).
    w: ``[]`` regularization weight ``> 0``.

  Returns:
    ``[]`` the regularized value.
  """
  _factor_args(mu, V, w, "w")
  mu, V, w = _cast(mu, V, w)
  return mu @ jnp.minimum(V, jnp.min(V) + w)


@exact_matmuls
def tv_regularized_worst_case_distribution(mu: Array, V: Array, w) -> Array:
  """Minimiser of ``E_nu V + w TV(nu, mu)``: the mass of ``{s : V(s) > m + w}`` moved onto
  ``argmin_s V`` (first index on ties; ``m`` over all states).

  ``E_nu V + w TV(nu, mu) == tv_regularized_value(mu, V, w)``, ``TV(nu, mu)`` is the moved mass.

  Args:
    mu: ``[S]`` nominal distribution.
    V: ``[S]`` values.
    w: ``[]`` weight ``> 0``.

  Returns:
    ``[S]`` distribution ``nu``.
  """
  _factor_args(mu, V, w, "w")
  mu, V, w = _cast(mu, V, w)
  target = jnp.argmin(V)
  removed = jnp.where(V > jnp.min(V) + w, mu, 0)
  return (mu - removed).at[target].add(jnp.sum(removed))


# --------------------------------------------------------------------------------------------
# KL-regularized (R2PVI-KL).
# --------------------------------------------------------------------------------------------


@exact_matmuls
def kl_regularized_value(mu: Array, V: Array, w) -> Array:
  """``inf_{nu} { E_nu V + w KL(nu || mu) } = -w log E_mu exp(-V / w)`` (Gibbs variational form).

  Computed as the log-sum-exp ``m - w log E_mu exp(-(V - m) / w)`` with ``m = min {V(s) :
  mu(s) > 0}``: the sum is at least ``mu(argmin) > 0``, so small ``w`` (``w = 0.01`` with ``V``
  up to 20, in float32 too) does not underflow; large ``w`` uses ``log1p`` (see module notes).
  Increases from ``m`` (``w -> 0``) to ``E_mu V`` (``w -> inf``).

  Args:
    mu: ``[S]`` nominal distribution (zeros allowed; ``V`` there is ignored).
    V: ``[S]`` values.
    w: ``[]`` weight ``> 0``.

  Returns:
    ``[]`` the regularized value.
  """
  _factor_args(mu, V, w, "w")
  mu, V, w = _cast(mu, V, w)
  m, U = _support_shift(mu, V)
  return m + _neg_log_mgf(mu, U, w)


@exact_matmuls
def kl_regularized_worst_case_distribution(mu: Array, V: Array, w) -> Array:
  """Minimiser ``nu(s) = mu(s) exp(-V(s) / w) / E_mu exp(-V / w)`` (shifted by ``m``; stable).

  ``E_nu V + w KL(nu || mu) == kl_regularized_value(mu, V, w)``.

  Args:
    mu: ``[S]`` nominal distribution.
    V: ``[S]`` values.
    w: ``[]`` weight ``> 0``.

  Returns:
    ``[S]`` distribution ``nu`` (zero where ``mu`` is).
  """
  _factor_args(mu, V, w, "w")
  mu, V, w = _cast(mu, V, w)
  _, U = _support_shift(mu, V)
  p = mu * jnp.exp(-U / w)
  return p / jnp.sum(p)


# --------------------------------------------------------------------------------------------
# chi-square-regularized (R2PVI-chi2).
# --------------------------------------------------------------------------------------------


@exact_matmuls
def chi2_dual_objective(mu: Array, V: Array, w, alpha) -> Array:
  """``g(alpha) = E_mu [V]_alpha - Var_mu([V]_alpha) / (4 w)``, ``[V]_alpha = min(V, alpha)``.

  The dual objective of ``chi2_regularized_value``; every ``g(alpha)`` is a lower bound of the
  regularized value (weak duality). Evaluated directly (centred variance), for checks.

  Args:
    mu: ``[S]`` nominal distribution.
    V: ``[S]`` values.
    w: ``[]`` weight ``> 0``.
    alpha: ``[]`` truncation level (any real).

  Returns:
    ``[]``.
  """
  _factor_args(mu, V, w, "w")
  _checks.scalar("alpha", alpha)
  _checks.finite("alpha", alpha)
  mu, V, w = _cast(mu, V, w)
  x = jnp.minimum(V, jnp.asarray(alpha, V.dtype))
  mean = mu @ x
  return mean - (mu @ (x - mean) ** 2) / (4 * w)


def _chi2_level(mu: Array, U: Array, w: Array) -> Array:
  """The dual maximiser ``beta*`` (in the shifted coordinates ``U = V - m``): the root of
  ``f(beta) = E_mu (beta - U)_+ = 2 w``, by one sort and prefix sums.

  With ``U`` sorted and ``P_k``, ``A_k`` the prefix sums of ``mu`` and ``mu U``, on the interval
  ``[u_(k), u_(k+1)]`` the dual objective is the concave quadratic ``A_k + beta (1 - P_k) -
  (B_k + beta^2 (1 - P_k) - (A_k + beta (1 - P_k))^2) / (4 w)`` (``B_k`` the prefix sum of
  ``mu U^2``), with stationary point ``(A_k + 2 w) / P_k``. Its derivative is ``g'(beta) =
  P(U > beta) (1 - f(beta) / (2 w))``, and ``f`` is nondecreasing, so ``g`` increases while
  ``f < 2 w`` and is nonincreasing after: among all interval endpoints and stationary points the
  maximum is the stationary point of the interval ``k`` where ``f`` crosses ``2 w``, i.e. the last
  ``k`` with ``f(u_(k)) = u_(k) P_k - A_k <= 2 w`` (the last interval is unbounded above). Ties
  need no care: ``u_(k) P_k - A_k`` is the same at every position of a tied value.
  """
  S = U.shape[0]
  order = jnp.argsort(U)
  us = U[order]
  ms = mu[order]
  P = jnp.cumsum(ms)
  A = jnp.cumsum(ms * us)
  f = us * P - A
  k = jnp.max(jnp.where(f <= 2 * w, jnp.arange(S), 0))
  pk = P[k]
  return (A[k] + 2 * w) / jnp.where(pk > 0, pk, 1)


@exact_matmuls
def chi2_regularized_value(mu: Array, V: Array, w) -> tuple[Array, Array]:
  """``inf_{nu} { E_nu V + w chi2(nu || mu) }`` exactly, via its dual.

  ``= sup_alpha { E_mu [V]_alpha - Var_mu([V]_alpha) / (4 w) }`` (R2PVI's chi-square dual: a
  *supremum*; ``alpha = m`` gives ``m``, a lower bound). From the KKT conditions of the primal,
  the minimiser is ``nu(s) = mu(s) (alpha* - V(s))_+ / (2 w)`` with ``alpha*`` the root of
  ``E_mu (alpha - V)_+ = 2 w``, which is also the dual maximiser. The maximisation is exact: one
  sort and prefix sums locate the interval between consecutive sorted values where the piecewise
  quadratic dual peaks and its stationary point (see ``_chi2_level``); the dual is then evaluated
  there with a centred variance (no ``E X^2 - (E X)^2`` cancellation, which ``1 / (4 w)`` would
  amplify for small ``w``). ``m = min {V : mu > 0}``; ``V`` off the support of ``mu`` is ignored.
  If ``alpha* >= max V`` (large ``w``) the value is ``E_mu V - Var_mu(V) / (4 w)``; the value
  increases from ``m`` (``w -> 0``) to ``E_mu V`` (``w -> inf``).

  Args:
    mu: ``[S]`` nominal distribution (zeros allowed).
    V: ``[S]`` values.
    w: ``[]`` weight ``> 0``.

  Returns:
    ``(value, alpha_star)``, both ``[]``; ``alpha_star`` is the dual maximiser (possibly above
    ``max V``, where the dual is flat).
  """
  _factor_args(mu, V, w, "w")
  mu, V, w = _cast(mu, V, w)
  m, U = _support_shift(mu, V)
  beta = _chi2_level(mu, U, w)
  x = jnp.minimum(U, beta)
  mean = mu @ x
  value = m + mean - (mu @ (x - mean) ** 2) / (4 * w)
  return value, m + beta


@exact_matmuls
def chi2_regularized_worst_case_distribution(mu: Array, V: Array, w) -> Array:
  """Minimiser ``nu(s) = mu(s) (alpha* - V(s))_+ / (2 w)`` of ``E_nu V + w chi2(nu || mu)``.

  ``alpha*`` as in ``chi2_regularized_value`` (the root of ``E_mu (alpha - V)_+ = 2 w``, so ``nu``
  sums to one; it is renormalised against rounding). ``nu = mu (1 + (E_mu[V]_{alpha*} -
  [V]_{alpha*}) / (2 w))``. ``E_nu V + w chi2(nu || mu) == chi2_regularized_value(mu, V, w)[0]``.

  Args:
    mu: ``[S]`` nominal distribution.
    V: ``[S]`` values.
    w: ``[]`` weight ``> 0``.

  Returns:
    ``[S]`` distribution ``nu`` (zero where ``mu`` is).
  """
  _factor_args(mu, V, w, "w")
  mu, V, w = _cast(mu, V, w)
  _, U = _support_shift(mu, V)
  beta = _chi2_level(mu, U, w)
  p = mu * jnp.maximum(beta - U, 0)
  return p / jnp.sum(p)


# --------------------------------------------------------------------------------------------
# KL-constrained (DRVI-L): a bounded 1-D search.
# --------------------------------------------------------------------------------------------


def _check_search(tol, bracket, grid_size) -> tuple[float, float, float, int]:
  if not _checks.is_concrete(tol):
    raise TypeError("tol must be a concrete number (it fixes the number of search iterations), "
                    "got a traced value")
  _checks.scalar("tol", tol)
  _checks.in_range("tol", tol, 0, lo_open=True)
  grid_size = _checks.integer("grid_size", grid_size, 3)
  if isinstance(bracket, (str, bytes)) or np.shape(bracket) != (2,):
    raise ValueError(f"bracket must be a pair (lo, hi) of multiples of span(V), got {bracket!r}")
  _checks.in_range("bracket", bracket, 0, lo_open=True)
  lo, hi = (float(b) for b in bracket)
  if not lo < hi:
    raise ValueError(f"bracket must satisfy 0 < lo < hi, got {bracket!r}")
  return float(tol), lo, hi, grid_size


@exact_matmuls
def kl_constrained_num_iterations(tol: float = 1e-6, bracket=DEFAULT_BRACKET,
                                  grid_size: int = DEFAULT_GRID_SIZE) -> int:
  """Golden-section iterations after the grid: the bracket of ``log alpha`` starts at two grid
  spacings, ``2 log(hi / lo) / (grid_size - 1)``, shrinks by ``0.618`` per step, and stops at
  width ``<= tol``."""
  tol, lo, hi, grid_size = _check_search(tol, bracket, grid_size)
  width = 2 * math.log(hi / lo) / (grid_size - 1)
  return max(0, math.ceil(math.log(width / tol) / math.log(1 / _INV_PHI)))


@exact_matmuls
def kl_constrained_dual_objective(mu: Array, V: Array, rho, alpha) -> Array:
  """``h(alpha) = -alpha log E_mu exp(-V / alpha) - alpha rho`` for ``alpha > 0`` (stable).

  Concave in ``alpha``, ``h'(alpha) = KL(nu_alpha || mu) - rho`` with ``nu_alpha ∝ mu exp(-V /
  alpha)``; every ``h(alpha)`` is a lower bound of the constrained value. ``alpha`` may be an
  array (evaluated elementwise).
  """
  _factor_args(mu, V, rho, "rho", lo_open=False)
  _checks.numeric("alpha", alpha)
  _checks.in_range("alpha", alpha, 0, lo_open=True)
  mu, V, rho = _cast(mu, V, rho)
  m, U = _support_shift(mu, V)
  alpha = jnp.asarray(alpha, V.dtype)

  def h(a):
    return m + _neg_log_mgf(mu, U, a) - a * rho

  return jnp.vectorize(h)(alpha)


def _kl_constrained_search(mu, U, rho, n_iter, lo, hi, grid_size):
  """``(sup - m, alpha*)``: the best of the limits ``alpha -> 0`` / ``inf`` and the search."""
  dtype = U.dtype
  span = jnp.max(U)
  scale = jnp.where(span > 0, span, 1)

  def h(t):  # t = log alpha
    return _neg_log_mgf(mu, U, jnp.exp(t)) - jnp.exp(t) * rho

  t_grid = jnp.log(scale) + jnp.linspace(math.log(lo), math.log(hi), grid_size, dtype=dtype)
  h_grid = jax.vmap(h)(t_grid)
  j = jnp.argmax(h_grid)
  a = t_grid[jnp.maximum(j - 1, 0)]
  b = t_grid[jnp.minimum(j + 1, grid_size - 1)]
  c = b - _INV_PHI * (b - a)
  d = a + _INV_PHI * (b - a)

  def golden(_, carry):
    a, b, c, d, hc, hd = carry
    left = hc >= hd  # the maximum of the unimodal h lies in [a, d]
    a2 = jnp.where(left, a, c)
    b2 = jnp.where(left, d, b)
    c2 = jnp.where(left, b2 - _INV_PHI * (b2 - a2), d)
    d2 = jnp.where(left, c, a2 + _INV_PHI * (b2 - a2))
    new = jnp.where(left, c2, d2)
    hn = h(new)
    hc2 = jnp.where(left, hn, hd)
    hd2 = jnp.where(left, hc, hn)
    return a2, b2, c2, d2, hc2, hd2

  a, b, c, d, hc, hd = jax.lax.fori_loop(0, n_iter, golden, (a, b, c, d, h(c), h(d)))
  cand_t = jnp.stack([t_grid[j], c, d])
  cand_h = jnp.stack([h_grid[j], hc, hd])
  i = jnp.argmax(cand_h)
  best_h, best_alpha = cand_h[i], jnp.exp(cand_t[i])
  # Limits: alpha -> 0 gives m (exactly the value when rho >= -log mu(argmin set)); alpha -> inf
  # gives E_mu V when rho = 0 (the nominal value) and -inf otherwise.
  zero = jnp.zeros((), dtype)
  inf = jnp.asarray(jnp.inf, dtype)
  lim_inf = jnp.where(rho == 0, mu @ U, -inf)
  use_inf = lim_inf >= best_h
  best_h, best_alpha = jnp.where(use_inf, lim_inf, best_h), jnp.where(use_inf, inf, best_alpha)
  use_zero = zero > best_h
  return jnp.where(use_zero, zero, best_h), jnp.where(use_zero, zero, best_alpha)


@exact_matmuls
def kl_constrained_value(mu: Array, V: Array, rho, *, tol: float = 1e-6,
                         bracket=DEFAULT_BRACKET,
                         grid_size: int = DEFAULT_GRID_SIZE) -> tuple[Array, Array]:
  """``inf_{KL(nu || mu) <= rho} E_nu V = sup_{alpha > 0} { -alpha log E_mu exp(-V/alpha) -
  alpha rho }`` by a bounded one-dimensional search. NOT exact: tolerance-limited.

  The dual objective ``h`` (``kl_constrained_dual_objective``, computed as a log-sum-exp shifted
  by ``m = min {V : mu > 0}``) is concave in ``alpha``. It is evaluated on a log-spaced grid of
  ``grid_size`` points ``alpha in span(V) * [bracket[0], bracket[1]]`` (``span(V) = max - min``
  over the support of ``mu``; the problem is scale-equivariant), then refined by golden-section
  search on ``log alpha`` around the best grid point, for a fixed number of iterations
  (``kl_constrained_num_iterations``) after which the ``log alpha`` bracket is ``<= tol`` wide: a
  ``lax.fori_loop``, jit/vmap-able. The two limits are candidates too: ``alpha -> 0`` gives ``m``
  (the exact value when ``rho >= -log mu({V = m})``: all the mass fits on the minimisers) and
  ``alpha -> inf`` gives ``E_mu V`` when ``rho = 0`` (exact). The result is the largest candidate,
  hence never above the true value (weak duality); its error is second order in the ``alpha``
  error (``h'(alpha*) = 0``), plus the loss when ``alpha*`` lies outside the bracket (only for
  ``0 < rho < ~1e-12``).

  Args:
    mu: ``[S]`` nominal distribution (zeros allowed; ``V`` there is ignored).
    V: ``[S]`` values.
    rho: ``[]`` KL radius ``>= 0``.
    tol: static relative tolerance on ``alpha*`` (width of the final ``log alpha`` bracket).
    bracket: static ``(lo, hi)``, the search range of ``alpha`` in units of ``span(V)``.
    grid_size: static number of coarse grid points (``>= 3``).

  Returns:
    ``(value, alpha_star)``, both ``[]``; ``alpha_star`` is ``0`` or ``inf`` when a limit wins.
  """
  _factor_args(mu, V, rho, "rho", lo_open=False)
  n_iter = kl_constrained_num_iterations(tol, bracket, grid_size)
  _, lo, hi, grid_size = _check_search(tol, bracket, grid_size)
  mu, V, rho = _cast(mu, V, rho)
  m, U = _support_shift(mu, V)
  best, alpha = _kl_constrained_search(mu, U, rho, n_iter, lo, hi, grid_size)
  return m + best, alpha


@exact_matmuls
def kl_constrained_worst_case_distribution(mu: Array, V: Array, rho, *, tol: float = 1e-6,
                                           bracket=DEFAULT_BRACKET,
                                           grid_size: int = DEFAULT_GRID_SIZE) -> Array:
  """The adversary's ``nu ∝ mu exp(-V / alpha*)`` at the searched dual maximiser ``alpha*``.

  Limits: ``alpha* = 0`` gives ``mu`` restricted to ``{V = m}`` (renormalised), ``alpha* = inf``
  gives ``mu``. ``E_nu V`` equals ``kl_constrained_value`` and ``KL(nu || mu) = rho`` (or less, at
  ``alpha* = 0``) up to the search tolerance: ``nu`` may violate the constraint by about
  ``tol``-sized amounts.

  Args:
    mu: ``[S]`` nominal distribution.
    V: ``[S]`` values.
    rho: ``[]`` KL radius ``>= 0``.
    tol, bracket, grid_size: as in ``kl_constrained_value``.

  Returns:
    ``[S]`` distribution ``nu``.
  """
  _factor_args(mu, V, rho, "rho", lo_open=False)
  n_iter = kl_constrained_num_iterations(tol, bracket, grid_size)
  _, lo, hi, grid_size = _check_search(tol, bracket, grid_size)
  mu, V, rho = _cast(mu, V, rho)
  _, U = _support_shift(mu, V)
  _, alpha = _kl_constrained_search(mu, U, rho, n_iter, lo, hi, grid_size)
  positive = alpha > 0
  safe = jnp.where(positive, alpha, 1)
  p = jnp.where(positive, mu * jnp.exp(-U / safe), jnp.where(U == 0, mu, 0))
  return p / jnp.sum(p)
