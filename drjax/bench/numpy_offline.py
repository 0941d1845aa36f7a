"""Vectorized NumPy implementations of drjax's offline algorithms (PEVI, DRPVI, VA-DRPVI,
R2PVI-TV / -KL / -chi2, DRVI-L).

The baselines of ``drjax/bench/offline.py``: the same mathematics as ``drjax/agents/offline.py``
(buffer form: one regression atom per transition) with the options drjax uses by default when a
fit gets no model -- penalty ``"paper"`` (d-rectangular ``beta sum_i phi_i sqrt([Lambda^-1]_ii)``
for DRPVI / VA-DRPVI, the ellipsoid ``beta ||phi||_{Lambda^-1}`` for PEVI), truncation ``"paper"``
(``clip(., 0, H - h)``, 0-indexed h), ``fail_zero=True`` and ``vmin="data"`` (``m`` = the
minimum of ``V_{h+1}`` over the data's next states) -- written as the strongest plain NumPy we
could: every operation is batched over all samples (and over an optional leading seed axis),
the ``H`` ridge inverses are one batched ``np.linalg.inv``, and the exact maximization over alpha
is ONE ``argsort`` of the targets plus prefix sums (``drjax/robust.py::_exact_candidates``): no
Python loop over samples or alpha candidates, only over the ``H`` steps of the backward
induction.

Per step h (``top = H - h``, ``V_{H} = 0``):

* ``V_{h+1}(s') = max_a Q_{h+1}(s', a)`` from ``next_phi`` (0 at fail states, 0 for invalid
  trajectories);
* PEVI: ``w_h = Lambda_h^-1 sum phi (r + V_{h+1})``;
* DRPVI: ``nu_{h,i} = max_{alpha in [0, H]} z_i(alpha) - rho_{h,i} (alpha - min(m, alpha))`` with
  ``z(alpha) = Lambda_h^-1 sum phi min(V_{h+1}, alpha)``, exact over the candidates
  ``{0, H, m} U {clip(V_{h+1}(s'_tau), 0, H)}``; ``w_h = theta_h + nu_h``;
* VA-DRPVI (Alg. 3): DRPVI on the pilot D', ``sigma^2 = max(1, clip(phi^T z2, 0, H^2) -
  clip(phi^T z1, 0, H)^2 - var_shift)`` from the pilot's ridge regressions of ``V'`` and
  ``V'^2``, then DRPVI on D with weights ``1 / sigma^2`` in the Gram matrix and the regression.

The robust *regularized* agents (R2PVI, Tang, Liu & Xu 2025; ``reg_weight`` [H, d] the paper's
lambda) and the KL-constrained DRVI-L (Ma et al. 2022) share the penalty ``"paper"``, the
truncation, ``w_{H-1} = theta_{H-1}`` and ``w_h = theta_h + nu_h`` with, per coordinate i
(``z_i = [Lambda_h^-1 sum_n g_n T_i(v_n)]_i``, a diagonal of ``Lambda^-1 Y``,
``drjax/agents/pieces.py``):

* R2PVI-TV: ``T_i(v) = min(v, m + weight_i)`` (``m`` = data minimum of ``V_{h+1}``);
* R2PVI-KL: ``T_i(v) = exp(-(v - m) / weight_i)`` and ``nu_i = m - weight_i clip(log z_i,
  -(top_{h+1} - m) / weight_i, 0)`` (clipped in the log domain, ``log`` of a nonpositive ``z``
  taken as the lower end; ``log z_i`` with the per-coordinate shift of ``_kl_shift``);
* R2PVI-chi2: ``nu_i = max_{alpha in [0, H]} z_i(alpha) - (z2_i(alpha) - z_i(alpha)^2) / (4
  weight_i)`` (``z``, ``z2`` the ridge estimates of ``[V]_alpha``, ``[V]_alpha^2``): a quadratic in
  alpha between consecutive sorted targets, maximized exactly over every interval (its ends and
  the stationary point of a concave piece) after ONE argsort and prefix sums
  (``drjax/robust.py::chi2_dual_max``);
* DRVI-L: ``nu_i = max_{alpha > 0} -alpha log zhat_i(alpha) - alpha rho_i``, ``zhat_i(alpha) =
  exp(-t_i/alpha) [Lambda^-1 sum_n g_n exp(-(v_n - t_i)/alpha)]_i`` clipped (log domain) to
  ``[-H/alpha, 0]`` (``t_i`` the per-coordinate shift of ``drjax/robust.py::_kl_shift``), by
  the same bounded search as ``drjax/robust.py::kl_dual_search``: 64 log-spaced alphas in
  ``[1e-4, 1e4]``, then golden section in ``log alpha`` on the best grid cell's neighbours
  (bracket clamped to the bounds) for a fixed number of iterations (bracket below
  ``tol = 1e-6``), all ``d`` coordinates (and seeds) at once.

``check_agreement`` fits drjax and these on the same dataset (float64) and returns the largest
``|w_numpy - w_drjax|`` per agent; ``tests/test_bench_offline.py`` requires it below 1e-8 (1e-6
for DRVI-L, whose search compares objective values: a rounding-level difference can send a
golden-section step the other way on a near tie, which moves the result by at most the
objective's variation over the final bracket).

The dataset is given as NumPy arrays (``NpDataset``; ``from_drjax`` converts a
``drjax.data.Dataset``), step-major like drjax's, optionally with a leading batch (seed) axis on
every field: ``phi [(B,) H, N, d]``, ``reward [(B,) H, N]``, ``next_phi [(B,) H, N, A, d]``,
``next_fail [(B,) H, N]``, ``theta [(B,) H, d]``, ``valid [(B,) N]``. Computation runs in the
dataset's float dtype.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

AGENTS = ("pevi", "drpvi", "va-drpvi", "r2pvi-tv", "r2pvi-kl", "r2pvi-chi2", "drvi-l")
R2PVI = {"r2pvi-tv": "tv-reg", "r2pvi-kl": "kl-reg", "r2pvi-chi2": "chi2-reg"}  # name -> oracle
KL_SEARCH_BOUNDS = (1e-4, 1e4)  # robust.KL_SEARCH_BOUNDS
KL_SEARCH_GRID = 64  # robust.KL_SEARCH_GRID


def _kl_support_min(support, v, m):
  """``[B, d]`` the smallest target among the atoms with ``support [B, d, N]`` (``m [B]`` where
  none): ``robust._kl_support_min``, batched."""
  s = np.where(support, v[:, None, :], np.inf).min(axis=-1)
  return np.where(np.isfinite(s), s, m[:, None])


def _kl_shift(s, m, scale):
  """``robust._kl_shift``, batched: the per-coordinate exponent shift ``t = clip(m, s - K a,
  s + K a)`` with ``K = -log(tiny) / 2``, and ``K``. ``s [B, d]`` (``_kl_support_min``),
  ``m [B]``, ``scale [B, d]`` or ``[B, G, d]``; ``t`` has ``scale``'s shape."""
  k = -0.5 * math.log(float(np.finfo(s.dtype).tiny))
  if scale.ndim == 3:
    s = s[:, None, :]
  mm = m.reshape(m.shape + (1,) * (scale.ndim - 1))
  return np.clip(mm, s - k * scale, s + k * scale), k


class NpDataset(NamedTuple):
  """NumPy offline dataset (see the module docstring for the shapes)."""

  phi: np.ndarray
  reward: np.ndarray
  next_phi: np.ndarray
  next_fail: np.ndarray
  theta: np.ndarray
  valid: np.ndarray


def from_drjax(ds, dtype=None) -> NpDataset:
  """A ``drjax.data.Dataset`` (optionally with a leading batch axis) as an ``NpDataset``."""
  f = lambda x: np.asarray(x, dtype) if dtype is not None else np.asarray(x)  # noqa: E731
  return NpDataset(phi=f(ds.phi), reward=f(ds.reward), next_phi=f(ds.next_phi),
                   next_fail=np.asarray(ds.next_fail, bool), theta=f(ds.theta),
                   valid=np.asarray(ds.valid, bool))


def _batched(ds: NpDataset) -> tuple[NpDataset, bool]:
  """Adds a batch axis of 1 when ``ds`` has none."""
  if ds.valid.ndim == 2:
    return ds, True
  return NpDataset(*(x[None] for x in ds)), False


def _atoms(ds: NpDataset, weights=None):
  """``(g [B, H, N, d], gram [B, H, d, d], reward_sum [B, H, d])``: weighted features, their Gram
  matrices (no ridge) and ``sum w phi r``."""
  dtype = ds.phi.dtype
  wv = ds.valid.astype(dtype)[:, None, :]  # [B, 1, N]
  if weights is not None:
    wv = wv * weights
  g = ds.phi * wv[..., None]
  gram = np.matmul(np.swapaxes(g, -1, -2), ds.phi)
  reward_sum = np.matmul(np.swapaxes(g, -1, -2), ds.reward[..., None])[..., 0]
  return g, gram, reward_sum


def _next_values(w, pinv, beta, top, nphi, nfail, valid, width: str):
  """``[B, N]`` ``V(s') = max_a clip(phi^T w - beta width, 0, top)``, 0 at fail states and for
  invalid trajectories."""
  B, N, A, d = nphi.shape
  flat = nphi.reshape(B, N * A, d)
  if width == "paper":
    sd = np.sqrt(np.maximum(np.diagonal(pinv, axis1=-2, axis2=-1), 0.0))  # [B, d]
    q = np.matmul(flat, (w - beta * sd)[..., None])[..., 0]
  elif width == "ellipsoid":
    quad = np.einsum("bkd,bkd->bk", np.matmul(flat, pinv), flat)
    q = np.matmul(flat, w[..., None])[..., 0] - beta * np.sqrt(np.maximum(quad, 0.0))
  elif width == "notebook":
    diag = np.maximum(np.diagonal(pinv, axis1=-2, axis2=-1), 0.0)
    q = (np.matmul(flat, w[..., None])[..., 0]
         - beta * np.sqrt(np.maximum(np.matmul(flat * flat, diag[..., None])[..., 0], 0.0)))
  else:
    raise ValueError(f"unknown width {width!r}")
  q = np.clip(q, 0.0, top).reshape(B, N, A)
  v = q[..., 0]
  for a in range(1, A):  # a loop over actions: far faster than a reduce over a short last axis
    v = np.maximum(v, q[..., a])
  return np.where(nfail | ~valid, 0.0, v).astype(nphi.dtype)


PREFIX_BLOCK = 16  # prefix sums as a blocked triangular product: 3-4x faster than np.cumsum here
PREFIX_MIN_N = 128  # below this np.cumsum is faster


def prefix_sums(x):
  """Inclusive prefix sums of ``x [B, N, k]`` along axis 1.

  ``np.cumsum`` along the sample axis is a sequential loop (~3 ns per element); for long axes a
  blocked form is several times faster (and no less accurate): within blocks of
  ``PREFIX_BLOCK`` rows one batched product with a lower-triangular ones matrix, then the block
  totals' exclusive prefix added to each block.
  """
  B, N, k = x.shape
  if N < PREFIX_MIN_N:
    return np.cumsum(x, axis=1)
  b = PREFIX_BLOCK
  nb = -(-N // b)
  if nb * b != N:
    x = np.concatenate([x, np.zeros((B, nb * b - N, k), x.dtype)], axis=1)
  tri = np.tril(np.ones((b, b), x.dtype))
  w = np.matmul(tri, x.reshape(B, nb, b, k))  # [B, nb, b, k]
  off = np.zeros((B, nb, k), x.dtype)
  np.cumsum(w[:, :-1, -1, :], axis=1, out=off[:, 1:])
  w += off[:, :, None, :]
  return w.reshape(B, nb * b, k)[:, :N]


def _gather_rows(x, order):
  """``x[b, order[b]]`` for ``x [B, N, k]``, ``order [B, N]`` (one flat fancy index: much faster
  than ``np.take_along_axis``)."""
  B, N, k = x.shape
  if B == 1:
    return np.take(x[0], order[0], axis=0)[None]
  flat = order + (np.arange(B) * N)[:, None]
  return x.reshape(B * N, k)[flat]


def tv_nu(pinv, g, v, valid, rho, horizon):
  """Exact ``nu_i = max_{alpha in [0, H]} z_i(alpha) - rho_i (alpha - min(m, alpha))``.

  ``z(alpha) = pinv @ sum_n g_n min(v_n, alpha)``, ``m = min`` of ``v`` over valid samples. The
  objective is piecewise linear in alpha with kinks at the ``v_n``, ``m``, 0 and H, so the
  maximum is attained at one of the candidates ``{0, H, m} U {clip(v_n, 0, H)}``. One argsort
  of ``v`` and prefix sums give every candidate at once (``drjax/robust.py::_exact_candidates``):
  with ``vs`` sorted and ``p`` = number of ``vs <= alpha``, ``z(alpha) = sum_{n < p} gp_n vs_n +
  alpha sum_{n >= p} gp_n`` where ``gp_n = pinv g_n`` (ties are harmless: a later entry equal to
  alpha adds ``gp_n alpha = gp_n vs_n`` either way). Batched: ``pinv [B, d, d]``, ``g [B, N, d]``,
  ``v [B, N]``, ``valid [B, N]``, ``rho [B, d]``; returns ``nu [B, d]``.
  """
  B, N, d = g.shape
  dtype = g.dtype
  H = dtype.type(horizon)
  order = np.argsort(v, axis=-1)  # ties in any order: the prefix formula is exact for ties
  vs = np.take_along_axis(v, order, axis=-1)  # [B, N]
  gp = np.matmul(_gather_rows(g, order), np.swapaxes(pinv, -1, -2))  # [B, N, d] rows pinv g_n
  pre = prefix_sums(np.concatenate([gp, gp * vs[..., None]], axis=-1))  # [B, N, 2d]
  cm, cmv = pre[..., :d], pre[..., d:]  # cm[:, j] = sum_{n <= j} gp_n
  tot = cm[:, -1:]  # [B, 1, d]
  m = np.where(valid, v, np.inf).min(axis=-1)  # [B]: the data minimum of V_{h+1}

  def z_at(alpha):
    """``z`` at levels ``alpha [B, K]`` in ``[0, H]`` (``p = #{vs <= alpha}``): [B, K, d]."""
    if alpha.shape[1] <= 8:  # a few levels: O(K N) comparisons, batched
      p = np.sum(vs[:, None, :] <= alpha[..., None], axis=-1)
    else:  # the general path's N levels (targets outside [0, H] only)
      p = np.stack([np.searchsorted(vs[b], alpha[b], side="right") for b in range(B)])
    pi = np.maximum(p - 1, 0)[..., None]
    cm_p = np.where(p[..., None] > 0, np.take_along_axis(cm, pi, axis=1), 0)
    cmv_p = np.where(p[..., None] > 0, np.take_along_axis(cmv, pi, axis=1), 0)
    return cmv_p + alpha[..., None] * (tot - cm_p)

  if np.all(vs[:, 0] >= 0) and np.all(vs[:, -1] <= H):
    # Every target in [0, H] (always so for clipped values): the candidate vs_j has p = j + 1,
    # so z there is a slice of the prefix sums, no gather.
    z = cmv + vs[..., None] * (tot - cm)  # [B, N, d]
    c = vs
  else:
    c = np.clip(vs, 0, H)
    z = z_at(c)
  extra = np.concatenate([np.zeros((B, 1), dtype), np.full((B, 1), H, dtype),
                          np.clip(m, 0, H)[:, None]], axis=1)  # 0, H, m
  z_extra = z_at(extra)
  nu = np.maximum((z - rho[:, None, :] * (c - np.minimum(m[:, None], c))[..., None]).max(axis=1),
                  (z_extra - rho[:, None, :]
                   * (extra - np.minimum(m[:, None], extra))[..., None]).max(axis=1))
  return nu


def _diag_of_product(pinv, y):
  """``diag(pinv @ y)`` for ``pinv, y [B, d, d]``: ``[B, d]`` without the full product."""
  return np.sum(pinv * np.swapaxes(y, -1, -2), axis=-1)


def tv_reg_nu(pinv, g, v, m, weight):
  """R2PVI-TV: ``nu_i = [pinv sum_n g_n min(v_n, m + weight_i)]_i``. Batched: ``pinv [B, d, d]``,
  ``g [B, N, d]``, ``v [B, N]``, ``m [B]``, ``weight [B, d]``; returns ``[B, d]``."""
  t = np.minimum(v[..., None], (m[:, None] + weight)[:, None, :])  # [B, N, d]
  return _diag_of_product(pinv, np.matmul(np.swapaxes(g, -1, -2), t))


def kl_reg_nu(pinv, g, v, valid, m, weight, top):
  """R2PVI-KL: ``nu_i = m - weight_i clip(log z_i, -(top - m)/weight_i, 0)``, ``z_i = [pinv sum_n
  g_n exp(-(v_n - m)/weight_i)]_i`` (``v`` replaced by ``m`` off ``valid``; ``log`` of a
  nonpositive ``z`` is the lower end), as ``pieces.kl_reg_oracle``: ``log z_i`` taken with the
  per-coordinate shift ``t_i`` (``_kl_shift``), so it never underflows. Shapes as ``tv_reg_nu``,
  ``valid [B, N]``, ``top`` a scalar."""
  dtype = g.dtype
  vm = np.where(valid, v, m[:, None])
  support = np.matmul((pinv != 0).astype(dtype), np.swapaxes(g != 0, -1, -2).astype(dtype)) > 0
  t, k = _kl_shift(_kl_support_min(support, vm, m), m, weight)  # [B, d]
  e = -(vm[..., None] - t[:, None, :]) / weight[:, None, :]  # [B, N, d]
  u = np.exp(np.minimum(e, k))
  z = _diag_of_product(pinv, np.matmul(np.swapaxes(g, -1, -2), u))
  log_lo = -(dtype.type(top) - m[:, None]) / weight
  tiny = np.finfo(dtype).tiny
  logz = np.where(z > 0, -(t - m[:, None]) / weight + np.log(np.maximum(z, tiny)), log_lo)
  return m[:, None] - weight * np.clip(logz, log_lo, 0.0)


def chi2_reg_nu(pinv, g, v, weight, horizon):
  """R2PVI-chi2: exact ``nu_i = max_{alpha in [0, H]} z_i(alpha) - (z2_i(alpha) - z_i(alpha)^2) /
  (4 weight_i)`` with ``z(alpha) = pinv sum_n g_n min(v_n, alpha)``, ``z2`` the same of
  ``min(v_n, alpha)^2`` (``robust.chi2_dual_max``).

  After one argsort of ``v`` (``vs``) and prefix sums of ``gp_n = pinv g_n``, ``gp_n vs_n`` and
  ``gp_n vs_n^2``: on the interval ``[c_k, c_{k+1}]`` of ``c = [0, clip(vs, 0, H), H]`` with ``p``
  targets at or below ``c_k``, ``z = A + alpha B`` and ``z2 = C + alpha^2 B`` (``A``, ``C`` the
  prefix sums of ``gp vs``, ``gp vs^2`` over those ``p``, ``B`` the sum of ``gp`` over the rest),
  so the objective is a quadratic in alpha there: its maximum is at an end or at the stationary
  point of a concave piece. With every target in ``[0, H]`` (always so for clipped values)
  ``p = k`` on the interval ``[vs_{k-1}, vs_k]`` (also with ties: a tied interval is a point,
  where both splits give the same value), so the prefix sums are used as they are, no gather.
  Batched: ``pinv [B, d, d]``, ``g [B, N, d]``, ``v [B, N]``, ``weight [B, d]``; returns
  ``[B, d]``.
  """
  B, N, d = g.shape
  dtype = g.dtype
  H = dtype.type(horizon)
  order = np.argsort(v, axis=-1)
  vs = np.take_along_axis(v, order, axis=-1)  # [B, N]
  gp = np.matmul(_gather_rows(g, order), np.swapaxes(pinv, -1, -2))  # [B, N, d]
  pre = prefix_sums(np.concatenate([gp, gp * vs[..., None], gp * (vs * vs)[..., None]], axis=-1))
  pre = np.concatenate([np.zeros((B, 1, 3 * d), dtype), pre], axis=1)  # exclusive: [B, N + 1, 3d]
  cm, cmv, cmv2 = pre[..., :d], pre[..., d:2 * d], pre[..., 2 * d:]
  tot = cm[:, -1:]  # [B, 1, d]
  c = np.concatenate([np.zeros((B, 1), dtype), np.clip(vs, 0, H), np.full((B, 1), H, dtype)],
                     axis=1)  # [B, N + 2]
  lo, hi = c[:, :-1, None], c[:, 1:, None]  # [B, N + 1, 1]
  if np.all(vs[:, 0] >= 0) and np.all(vs[:, -1] <= H):
    A, C, Bc = cmv, cmv2, tot - cm  # p = k on interval k
  else:  # the general path: p = #{vs <= c_k} (targets outside [0, H] only)
    p = np.stack([np.searchsorted(vs[b], c[b, :-1], side="right") for b in range(B)])[..., None]
    A = np.take_along_axis(cmv, p, axis=1)
    C = np.take_along_axis(cmv2, p, axis=1)
    Bc = tot - np.take_along_axis(cm, p, axis=1)
  w4 = 4.0 * weight[:, None, :]  # [B, 1, d]

  def f(alpha):
    z = A + alpha * Bc
    return z - (C + alpha * alpha * Bc - z * z) / w4

  a1 = Bc + 2.0 * A * Bc / w4
  a2 = (Bc * Bc - Bc) / w4
  concave = a2 < 0
  stat = np.where(concave, -a1 / (2.0 * np.where(concave, a2, -1.0)), lo)
  stat = np.clip(stat, lo, hi)
  vals = np.maximum(np.maximum(f(lo), f(hi)), f(stat))  # [B, N + 1, d]
  return vals.max(axis=1)


def _kl_search_iters(tol: float, bounds=KL_SEARCH_BOUNDS, grid_size: int = KL_SEARCH_GRID) -> int:
  """Golden-section iterations of ``robust.kl_dual_search`` (the same formula)."""
  invphi = (math.sqrt(5.0) - 1.0) / 2.0
  return max(1, int(math.ceil(math.log(tol / (2.0 * (math.log(bounds[1]) - math.log(bounds[0]))
                                              / (grid_size - 1))) / math.log(invphi))))


def kl_con_nu(pinv, g, v, valid, rho, horizon, *, tol: float = 1e-6,
              bounds=KL_SEARCH_BOUNDS, grid_size: int = KL_SEARCH_GRID):
  """DRVI-L: ``nu_i = max_{alpha > 0} -alpha log zhat_i(alpha) - alpha rho_i`` by
  ``robust.kl_dual_search``'s bounded search (NOT exact; the same grid, bracket and iterations).

  ``zhat_i(alpha) = exp(-t_i/alpha) [M exp(-(v - t_i)/alpha)]_i`` (``M = pinv g^T``, ``t`` the
  per-coordinate shift of ``_kl_shift``, ``m`` the minimum of ``v`` over ``valid`` wherever
  that is safe), its log clipped to ``[-H/alpha, 0]`` (``-inf``, hence the lower end, where the
  estimate is nonpositive). ``grid_size`` log-spaced alphas in ``bounds`` (one ``[d, N] x
  [N, G]`` product, the grid points where a coordinate needs its own shift again per
  coordinate), then golden section in ``log alpha`` on ``[la_j - step, la_j + step]``
  (clamped to the bounds) around each coordinate's best grid point, every coordinate at once;
  the result is the best value seen. Batched: ``pinv [B, d, d]``, ``g [B, N, d]``, ``v [B, N]``,
  ``valid [B, N]``, ``rho [B, d]``; returns ``[B, d]``.
  """
  B, N, d = g.shape
  dtype = g.dtype
  H = dtype.type(horizon)
  M = np.matmul(pinv, np.swapaxes(g, -1, -2))  # [B, d, N]
  m = np.where(valid, v, np.inf).min(axis=-1)  # [B]
  m = np.where(np.isfinite(m), m, 0.0).astype(dtype)
  vm = np.where(valid, v, m[:, None])
  excess = vm - m[:, None]  # [B, N] >= 0
  s_min = _kl_support_min(M != 0, vm, m)  # [B, d]
  tiny = np.finfo(dtype).tiny

  def value(alpha, zu, t, rho_):
    logz = np.where(zu > 0, -t / alpha + np.log(np.maximum(zu, tiny)), -np.inf)
    logz = np.clip(logz, -H / alpha, 0.0)
    return -alpha * logz - alpha * rho_

  la = np.linspace(math.log(bounds[0]), math.log(bounds[1]), grid_size, dtype=dtype)
  ga = np.exp(la)  # [G]
  u = np.exp(-excess[:, None, :] / ga[None, :, None])  # [B, G, N]
  zu = np.matmul(M, np.swapaxes(u, -1, -2))  # [B, d, G]: one shift m for every coordinate
  t_grid, k = _kl_shift(s_min, m, np.broadcast_to(ga[None, :, None], (B, grid_size, d)))
  own = t_grid != m[:, None, None]  # [B, G, d]: coordinates that need their own shift
  bi, gi = np.nonzero(own.any(axis=-1))
  if bi.size:  # those grid points' sums again, with the per-coordinate shift
    e = -(vm[bi, None, :] - t_grid[bi, gi, :, None]) / ga[gi, None, None]  # [K, d, N]
    zc = np.einsum("kdn,kdn->kd", M[bi], np.exp(np.minimum(e, k)))
    zu[bi, :, gi] = np.where(own[bi, gi], zc, zu[bi, :, gi])
  grid_vals = value(ga[None, None, :], zu, np.swapaxes(t_grid, -1, -2), rho[..., None])  # [B,d,G]
  j = np.argmax(grid_vals, axis=-1)  # [B, d]
  step = la[1] - la[0]
  a = np.maximum(la[j] - step, la[0])
  b = np.minimum(la[j] + step, la[-1])

  def f(x):  # x [B, d] log alpha per coordinate
    alpha = np.exp(x)
    t, _ = _kl_shift(s_min, m, alpha)
    e = -(vm[:, None, :] - t[..., None]) / alpha[..., None]  # [B, d, N]
    np.minimum(e, k, out=e)
    np.exp(e, out=e)
    zu = np.einsum("bdn,bdn->bd", M, e)
    return value(alpha, zu, t, rho)

  invphi = (math.sqrt(5.0) - 1.0) / 2.0
  x1 = b - invphi * (b - a)
  x2 = a + invphi * (b - a)
  f1, f2 = f(x1), f(x2)
  for _ in range(_kl_search_iters(tol, bounds, grid_size)):
    left = f1 >= f2
    b = np.where(left, x2, b)
    a = np.where(left, a, x1)
    x2n = np.where(left, x1, a + invphi * (b - a))
    x1n = np.where(left, b - invphi * (b - a), x2)
    fn = f(np.where(left, x1n, x2n))
    f1, f2 = np.where(left, fn, f2), np.where(left, f1, fn)
    x1, x2 = x1n, x2n
  return np.maximum(grid_vals.max(axis=-1), np.maximum(f1, f2))


def _pass(ds: NpDataset, g, gram, reward_sum, *, beta, lam, oracle: str, width: str, rho=None,
          weight=None, moments: bool = False, tol: float = 1e-6):
  """One backward induction; returns ``(w, pinv, y1, y2)`` with ``y1[h] = g_h^T V_{h+1}``,
  ``y2[h] = g_h^T V_{h+1}^2`` (all ``[B, H, ...]``; computed only with ``moments``, for
  VA-DRPVI's pilot pass). ``oracle``: ``"ridge"`` (PEVI), ``"tv"`` (DRPVI, ``rho``), ``"tv-reg"``,
  ``"kl-reg"``, ``"chi2-reg"`` (R2PVI, ``weight``) or ``"kl-con"`` (DRVI-L, ``rho``); ``rho`` and
  ``weight`` are ``[B, H, d]``."""
  B, H, N, d = ds.phi.shape
  dtype = ds.phi.dtype
  beta = dtype.type(beta)
  pinv = np.linalg.inv(gram + dtype.type(lam) * np.eye(d, dtype=dtype))  # [B, H, d, d]
  w = np.zeros((B, H, d), dtype)
  y1 = np.zeros((B, H, d), dtype)
  y2 = np.zeros((B, H, d), dtype)
  if oracle == "ridge":
    w[:, H - 1] = np.matmul(pinv[:, H - 1], reward_sum[:, H - 1, :, None])[..., 0]
  else:
    w[:, H - 1] = ds.theta[:, H - 1]
  for h in range(H - 2, -1, -1):
    top = dtype.type(H - h - 1)
    v = _next_values(w[:, h + 1], pinv[:, h + 1], beta, top, ds.next_phi[:, h],
                     ds.next_fail[:, h], ds.valid, width)
    gh = g[:, h]  # [B, N, d]
    if moments:
      y1[:, h] = np.matmul(v[:, None, :], gh)[:, 0]  # [B, d]
      y2[:, h] = np.matmul((v * v)[:, None, :], gh)[:, 0]
    if oracle == "ridge":
      gv = np.matmul(v[:, None, :], gh)[:, 0]
      w[:, h] = np.matmul(pinv[:, h], (reward_sum[:, h] + gv)[..., None])[..., 0]
      continue
    if oracle == "tv":
      nu = tv_nu(pinv[:, h], gh, v, ds.valid, rho[:, h], H)
    elif oracle == "tv-reg":
      nu = tv_reg_nu(pinv[:, h], gh, v, np.where(ds.valid, v, np.inf).min(axis=-1), weight[:, h])
    elif oracle == "kl-reg":
      nu = kl_reg_nu(pinv[:, h], gh, v, ds.valid, np.where(ds.valid, v, np.inf).min(axis=-1),
                     weight[:, h], top)
    elif oracle == "chi2-reg":
      nu = chi2_reg_nu(pinv[:, h], gh, v, weight[:, h], H)
    elif oracle == "kl-con":
      nu = kl_con_nu(pinv[:, h], gh, v, ds.valid, rho[:, h], H, tol=tol)
    else:
      raise ValueError(f"unknown oracle {oracle!r}")
    w[:, h] = ds.theta[:, h] + nu
  return w, pinv, y1, y2


def _rho(rho, B, H, d, dtype):
  return np.broadcast_to(np.asarray(rho, dtype), (B, H, d))


def pevi(ds: NpDataset, *, beta, lam) -> dict:
  """PEVI: ``{"w": [(B,) H, d], "pinv": [(B,) H, d, d]}``."""
  ds, batched = _batched(ds)
  g, gram, rs = _atoms(ds)
  w, pinv, _, _ = _pass(ds, g, gram, rs, beta=beta, lam=lam, oracle="ridge", width="ellipsoid")
  return _out(w, pinv, batched)


def drpvi(ds: NpDataset, *, rho, beta, lam, penalty: str = "paper") -> dict:
  """DRPVI (vmin = data minimum): ``{"w", "pinv"}``; ``rho`` scalar or ``[H, d]``."""
  ds, batched = _batched(ds)
  B, H, _, d = ds.phi.shape
  g, gram, rs = _atoms(ds)
  w, pinv, _, _ = _pass(ds, g, gram, rs, beta=beta, lam=lam, oracle="tv", width=penalty,
                        rho=_rho(rho, B, H, d, ds.phi.dtype))
  return _out(w, pinv, batched)


def va_drpvi(ds: NpDataset, pilot: NpDataset, *, rho, beta, lam, var_shift=0.0,
             penalty: str = "paper") -> dict:
  """VA-DRPVI, Alg. 3 (one variance estimate per step from the pilot ``D'``): ``{"w", "pinv"}``."""
  ds, batched = _batched(ds)
  pilot, _ = _batched(pilot)
  B, H, _, d = ds.phi.shape
  dtype = ds.phi.dtype
  rho = _rho(rho, B, H, d, dtype)
  pg, pgram, prs = _atoms(pilot)
  _, ppinv, y1, y2 = _pass(pilot, pg, pgram, prs, beta=beta, lam=lam, oracle="tv", width=penalty,
                           rho=rho, moments=True)
  z1 = np.matmul(ppinv, y1[..., None])  # [B, H, d, 1]
  z2 = np.matmul(ppinv, y2[..., None])
  m1 = np.clip(np.matmul(ds.phi, z1)[..., 0], 0.0, H)  # [B, H, N]
  m2 = np.clip(np.matmul(ds.phi, z2)[..., 0], 0.0, H * H)
  wts = (1.0 / np.maximum(1.0, m2 - m1 * m1 - dtype.type(var_shift))).astype(dtype)
  g, gram, rs = _atoms(ds, wts)
  w, pinv, _, _ = _pass(ds, g, gram, rs, beta=beta, lam=lam, oracle="tv", width=penalty, rho=rho)
  return _out(w, pinv, batched)


def r2pvi(ds: NpDataset, *, divergence: str = "tv", reg_weight, beta, lam,
          penalty: str = "paper") -> dict:
  """R2PVI (``divergence`` ``"tv"``, ``"kl"`` or ``"chi2"``; vmin = data minimum):
  ``{"w", "pinv"}``; ``reg_weight`` > 0, scalar or ``[H, d]``."""
  oracle = R2PVI.get(f"r2pvi-{divergence}")
  if oracle is None:
    raise ValueError(f"unknown divergence {divergence!r}; choose from tv, kl, chi2")
  ds, batched = _batched(ds)
  B, H, _, d = ds.phi.shape
  g, gram, rs = _atoms(ds)
  w, pinv, _, _ = _pass(ds, g, gram, rs, beta=beta, lam=lam, oracle=oracle, width=penalty,
                        weight=_rho(reg_weight, B, H, d, ds.phi.dtype))
  return _out(w, pinv, batched)


def drvi_l(ds: NpDataset, *, rho, beta, lam, penalty: str = "paper", tol: float = 1e-6) -> dict:
  """DRVI-L (KL radius ``rho`` >= 0, scalar or ``[H, d]``): ``{"w", "pinv"}``."""
  ds, batched = _batched(ds)
  B, H, _, d = ds.phi.shape
  g, gram, rs = _atoms(ds)
  w, pinv, _, _ = _pass(ds, g, gram, rs, beta=beta, lam=lam, oracle="kl-con", width=penalty,
                        rho=_rho(rho, B, H, d, ds.phi.dtype), tol=tol)
  return _out(w, pinv, batched)


def _out(w, pinv, batched):
  if not batched:
    w, pinv = w[0], pinv[0]
  return {"w": w, "pinv": pinv}


def fit(name: str, ds: NpDataset, *, pilot: NpDataset | None = None, rho=0.0, beta=1.0,
        lam=0.1, var_shift=0.0, reg_weight=0.1) -> dict:
  """``fit(name, ds, ...)`` for a name of ``AGENTS``: the matching function above (``rho``: TV
  radius for DRPVI / VA-DRPVI, KL radius for DRVI-L; ``reg_weight``: R2PVI's)."""
  if name == "pevi":
    return pevi(ds, beta=beta, lam=lam)
  if name == "drpvi":
    return drpvi(ds, rho=rho, beta=beta, lam=lam)
  if name == "va-drpvi":
    if pilot is None:
      raise ValueError("va-drpvi needs a pilot dataset")
    return va_drpvi(ds, pilot, rho=rho, beta=beta, lam=lam, var_shift=var_shift)
  if name in R2PVI:
    return r2pvi(ds, divergence=name[len("r2pvi-"):], reg_weight=reg_weight, beta=beta, lam=lam)
  if name == "drvi-l":
    return drvi_l(ds, rho=rho, beta=beta, lam=lam)
  raise ValueError(f"unknown agent {name!r}; choose from {AGENTS}")


HPARAMS = {"pevi": ("beta", "lam"), "drpvi": ("rho", "beta", "lam"),
           "va-drpvi": ("rho", "beta", "lam", "var_shift"),
           "r2pvi-tv": ("reg_weight", "beta", "lam"), "r2pvi-kl": ("reg_weight", "beta", "lam"),
           "r2pvi-chi2": ("reg_weight", "beta", "lam"),
           "drvi-l": ("rho", "beta", "lam")}  # as the registry's AgentSpec.hparams


def hparams_for(name: str, values: dict) -> dict:
  """The entries of ``values`` that agent ``name`` takes (for ``fit`` and
  ``registry.make_hparams``)."""
  return {k: values[k] for k in HPARAMS[name] if k in values}


# ---------------------------------------------------------------------------------------------
# Agreement with drjax.


def check_agreement(env, params, behavior, num_trajectories: int = 40, *, seed: int = 0,
                    agents=AGENTS, rho=0.1, beta=0.1, lam=1.0, var_shift=0.0,
                    reg_weight=1.0) -> dict:
  """Largest ``|w_numpy - w_drjax|`` (and of ``Lambda^-1``) per agent on one small dataset.

  Collects a dataset (and a pilot for VA-DRPVI) with drjax, fits each agent with
  ``registry.make(name, env).fit`` (no model: buffer form, ``vmin`` = data minimum) and with the
  NumPy functions above on the same arrays (``rho``: the TV radius of DRPVI / VA-DRPVI and the KL
  radius of DRVI-L; ``reg_weight``: R2PVI's). Run it with ``jax_enable_x64`` on (the comparison is
  meant in float64, where the two agree to rounding, ~1e-12; DRVI-L's search to within its
  tolerance); under float32 it still runs, with float32 rounding. Returns ``{agent: {"w": max abs
  diff, "pinv": ..., "w_scale": max |w|}}`` plus ``"dtype"``.
  """
  import jax  # pylint: disable=g-import-not-at-top
  from drjax import data  # pylint: disable=g-import-not-at-top
  from drjax.agents import registry  # pylint: disable=g-import-not-at-top

  key = jax.random.key(seed)
  ds = data.collect(env, params, behavior, jax.random.fold_in(key, 0), num_trajectories)
  pilot = data.collect(env, params, behavior, jax.random.fold_in(key, 1), num_trajectories)
  nds, npilot = from_drjax(ds), from_drjax(pilot)
  H, d = env.horizon, env.feature_dim
  hd = lambda x: np.broadcast_to(np.asarray(x, np.float64), (H, d))  # noqa: E731
  values = {"beta": beta, "lam": lam, "rho": hd(rho), "var_shift": var_shift,
            "reg_weight": hd(reg_weight)}
  out = {"dtype": str(nds.phi.dtype)}
  for name in agents:
    agent = registry.make(name, env)
    kw = hparams_for(name, values)
    hp = registry.make_hparams(name, env, **kw)
    qf = agent.fit(ds, hp, pilot=pilot if agent.needs_pilot else None)
    ref = fit(name, nds, pilot=npilot, **kw)
    w_j, p_j = np.asarray(qf.w), np.asarray(qf.pinv)
    out[name] = {"w": float(np.max(np.abs(ref["w"] - w_j))),
                 "pinv": float(np.max(np.abs(ref["pinv"] - p_j))),
                 "w_scale": float(np.max(np.abs(w_j)))}
  return out
