"""Batched NumPy kernels of ``drjax.bench.numpy_ref``: DR-LSVI-UCB's planning, all seeds at once.

Sherman-Morrison updates of ``Lambda^-1`` and of the ridge-operator rows, the exact alpha
maximization over the regression atoms, the bonus and the plans of the buffer and
sufficient-statistics forms, and the OpenBLAS thread setting of the runs. Why each is written the
way it is (and what was measured) is in ``drjax.bench.numpy_ref``'s docstring; that module
re-exports every name here.
"""

from __future__ import annotations

import contextlib
import ctypes

import numpy as np

SORT_FREE_MAX_ATOMS = 6  # sort-free exact alpha-max up to this many atoms (measured crossover)
ROW_ADD_MIN = 256  # prefix sums by row adds when a row has at least this many entries
RIDGE_UPDATE_MIN_D = 9  # ridge="auto": rank-1 row updates from this d on, else re-solve per plan
RIDGE_MODES = ("auto", "update", "solve")
SM_CHUNK_MIN = 1 << 18  # rank-1 updates one step h at a time above this many entries per step


# ---------------------------------------------------------------------------------------------
# BLAS threads


def _openblas():
  """The OpenBLAS library NumPy loaded (``ctypes.CDLL``) or ``None``."""
  try:
    with open("/proc/self/maps") as f:
      paths = {line.split()[-1] for line in f if "openblas" in line.lower()}
  except OSError:
    return None
  for path in sorted(paths):
    try:
      return ctypes.CDLL(path)
    except OSError:
      continue
  return None


_SETTERS = ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads",
            "openblas_set_num_threads64_", "openblas_set_num_threads")
_GETTERS = ("scipy_openblas_get_num_threads64_", "scipy_openblas_get_num_threads",
            "openblas_get_num_threads64_", "openblas_get_num_threads")


@contextlib.contextmanager
def blas_threads(num_threads: int | None):
  """Runs the block with ``num_threads`` OpenBLAS threads (``None``: leave them as they are).

  The entry points default to 1: drjax's XLA runs single-threaded Eigen, and multithreaded
  OpenBLAS on the shared 2-core machine was erratic (the same ``[10, 51, 128] x [10, 128, 128]``
  float32 batched product took 0.5 ms to 160 ms from one call to the next; 1-2 ms with one
  thread). A no-op where NumPy's BLAS is not an OpenBLAS.
  """
  lib = _openblas() if num_threads is not None else None
  setter = next((getattr(lib, n) for n in _SETTERS if lib is not None and hasattr(lib, n)), None)
  getter = next((getattr(lib, n) for n in _GETTERS if lib is not None and hasattr(lib, n)), None)
  if setter is None or getter is None:
    yield
    return
  old = getter()
  setter(int(num_threads))
  try:
    yield
  finally:
    setter(old)


# ---------------------------------------------------------------------------------------------
# Kernels (batched over seeds)
#
# Layouts: arrays are step-major then seed-major (``[H, N, ...]``); the regression atoms of one
# step are ``rows [N, n, d]``. The alpha maximization gathers them, sorted, atoms-first (``[n, N,
# d]``), so that prefix sums and maxima over atoms are adds / maxima of whole contiguous ``[N, d]``
# blocks: NumPy's ``cumsum`` along an axis and its reductions over a short last axis are scalar
# loops, 5-40x slower here than row-wise ufunc calls on wide rows.


def _cumsum0(x: np.ndarray) -> None:
  """In-place prefix sums of ``x [n, ...]`` along axis 0 (row adds when rows are wide)."""
  if x[0].size >= ROW_ADD_MIN:
    for j in range(1, x.shape[0]):
      np.add(x[j - 1], x[j], out=x[j])
  else:
    np.cumsum(x, axis=0, out=x)


def _max_last(x: np.ndarray) -> np.ndarray:
  """``x.max(-1)`` without NumPy's slow reduction over a short contiguous last axis."""
  a = x.shape[-1]
  if a == 1:
    return x[..., 0].copy()
  if a == 2:
    return np.maximum(x[..., 0], x[..., 1])
  axes = (x.ndim - 1,) + tuple(range(x.ndim - 1))
  return np.maximum.reduce(np.ascontiguousarray(x.transpose(axes)), axis=0)


def sherman_morrison(pinv: np.ndarray, phi: np.ndarray) -> np.ndarray:
  """In place ``pinv <- (pinv^-1 + phi phi^T)^-1`` for every leading index.

  Args:
    pinv: ``[..., d, d]`` symmetric inverses.
    phi: ``[..., d]`` one new feature vector each.

  Returns:
    ``[..., d]`` ``new_pinv @ phi = old_pinv @ phi / (1 + phi^T old_pinv phi)``.
  """
  pu = np.matmul(pinv, phi[..., None])  # [..., d, 1]
  u = pu[..., 0] / (1.0 + np.matmul(phi[..., None, :], pu)[..., 0])
  if pinv.ndim > 3 and pinv[0].size >= SM_CHUNK_MIN:  # cache-sized temporaries
    for i in range(pinv.shape[0]):
      pinv[i] -= pu[i] * u[i, ..., None, :]
  else:
    pinv -= pu * u[..., None, :]
  return u


def update_rows(rows: np.ndarray, phi: np.ndarray, new_pinv_phi: np.ndarray) -> None:
  """In place ``rows[t] <- new_pinv g_t`` from ``rows[t] = old_pinv g_t`` after ``+ phi phi^T``.

  ``new_pinv g = old_pinv g - (old_pinv phi)(phi^T old_pinv g) / (1 + phi^T old_pinv phi)
  = rows[t] - (rows[t] . phi) new_pinv_phi`` (``old_pinv`` symmetric): ``O(n d)`` per transition
  instead of ``O(n d^2)`` to recompute the rows.

  Args:
    rows: ``[..., n, d]`` ridge-operator rows of the atoms.
    phi: ``[..., d]`` the new transition's features.
    new_pinv_phi: ``[..., d]`` from ``sherman_morrison``.
  """
  if rows.ndim > 3 and rows[0].size >= SM_CHUNK_MIN:  # cache-sized temporaries
    for i in range(rows.shape[0]):
      update_rows(rows[i], phi[i], new_pinv_phi[i])
    return
  rows -= np.matmul(rows, phi[..., None]) * new_pinv_phi[..., None, :]


def _ridge_update(ridge: str, d: int) -> bool:
  return ridge == "update" or (ridge == "auto" and d >= RIDGE_UPDATE_MIN_D)


def ridge_rows(pinv: np.ndarray, g: np.ndarray) -> np.ndarray:
  """``[..., n, d]`` ridge-operator rows ``Lambda^-1 g_t``.

  Args:
    pinv: ``[..., d, d]``.
    g: ``[..., n, d]`` atom weights.
  """
  return np.matmul(g, np.swapaxes(pinv, -1, -2))


def alpha_max(rows: np.ndarray, v: np.ndarray, rho, horizon: float,
              sort: bool | None = None) -> np.ndarray:
  """Exact ``nu_i = max_{alpha in [0, H]} z_i(alpha) - rho_i alpha`` for every seed.

  ``z(alpha) = Lambda^-1 sum_t g_t min(v_t, alpha) = sum_t rows_t min(v_t, alpha)`` is piecewise
  linear in alpha with kinks at the ``v_t``, so the maximum is on ``{0, H} U {v_t}``; ``alpha =
  0`` gives exactly 0. Requires ``0 <= v <= H`` (true of clipped Q-values).

  Args:
    rows: ``[N, m, d]`` ``Lambda^-1 g_t`` for the atoms (``ridge_rows``); the first ``n`` are used
      (``m >= n``: a buffer of capacity m holding n atoms).
    v: ``[N, n]`` atom values in ``[0, H]``.
    rho: ``[d]`` or ``[N, d]``.
    horizon: H.
    sort: ``False`` evaluates each candidate directly (``O(n^2 d)``), ``True`` by one
      ``argsort`` and prefix sums (``O(n log n + n d)``); ``None``: sort-free for
      ``n <= SORT_FREE_MAX_ATOMS``.

  Returns:
    ``[N, d]`` nu.
  """
  N, m, d = rows.shape
  n = v.shape[1]
  if n == 0:
    return np.zeros((N, d), rows.dtype)
  rho = np.asarray(rho, rows.dtype)
  if sort is None:
    sort = n > SORT_FREE_MAX_ATOMS
  if not sort:
    c = np.empty((n + 1, N, 1), rows.dtype)  # candidates v_0 .. v_{n-1}, H
    c[:n, :, 0] = v.T
    c[n] = horizon
    z = np.einsum("jnt,ntd->jnd", np.minimum(v[None], c), rows[:, :n])
    z -= c * rho
    best = np.maximum.reduce(z, axis=0)
    return np.maximum(best, 0.0, out=best)
  rows = np.ascontiguousarray(rows)
  v = np.ascontiguousarray(v)
  order = np.argsort(v, axis=1)
  order += (m * np.arange(N))[:, None]
  wide = N * d >= ROW_ADD_MIN
  flat = order.T.ravel() if wide else order.ravel()
  vs = v.ravel().take(flat - (m - n) * (flat // m) if m != n else flat)  # ascending per seed
  cm = rows.reshape(N * m, d).take(flat, axis=0)  # the rows, sorted by v
  if wide:  # atoms first [n, N, d]: prefix sums by adds of whole [N, d] rows
    vs = vs.reshape(n, N, 1)
    cm = cm.reshape(n, N, d)
    cmv = cm * vs
    _cumsum0(cm)
    _cumsum0(cmv)
    tot, axis = cm[-1], 0
  else:  # few seeds: [N, d, n], prefix sums and maxima along contiguous rows
    vs = vs.reshape(N, 1, n)
    cm = np.ascontiguousarray(cm.reshape(N, n, d).transpose(0, 2, 1))
    cmv = cm * vs
    np.cumsum(cm, axis=2, out=cm)
    np.cumsum(cmv, axis=2, out=cmv)
    tot, axis, rho = cm[:, :, -1], 2, rho[..., None]
  # alpha = H (v <= H): z = sum_t m_t v_t. alpha = vs_j: z = sum_{t <= j} m_t vs_t +
  # vs_j sum_{t > j} m_t (exact under ties too); minus rho alpha.
  best = (cmv[-1] if wide else cmv[:, :, -1]) - rho.reshape(-1, d) * horizon
  np.subtract(tot[None] - rho if wide else tot[..., None] - rho, cm, out=cm)
  cm *= vs
  cm += cmv
  np.maximum(best, np.maximum.reduce(cm, axis=axis), out=best)
  return np.maximum(best, 0.0, out=best)


def sqrt_diag(pinv: np.ndarray) -> np.ndarray:
  """``[..., d]`` ``sqrt([Lambda^-1]_ii)`` (clamped at 0)."""
  return np.sqrt(np.maximum(np.diagonal(pinv, axis1=-2, axis2=-1), 0.0))


def plan_buffer(theta, pinv, rows, next_phi, next_fail, k: int, rho, beta: float):
  """Backward induction over the first ``k`` stored episodes (buffer form).

  Args:
    theta: ``[H, d]``.
    pinv: ``[H, N, d, d]`` ``Lambda_h^-1`` (with ``lam I``).
    rows: ``[H, N, K, d]`` ``Lambda_h^-1 phi`` of the stored transitions (``ridge_rows``, or kept
      up to date by ``update_rows``; slots ``>= k`` unused).
    next_phi: ``[H, N, d, K, A]`` features of every action at the next state, feature-major
      (so that the Q-values of the k stored next states are one ``[1, d] x [d, k A]`` product
      per seed: 2-6x faster than ``[k A, d] x [d, 1]`` at d = 4, as fast at d = 21).
    next_fail: ``[H, N, K]`` whether the next state is the fail state.
    k: number of stored episodes.
    rho: ``[H, d]``.
    beta: bonus multiplier.

  Returns:
    ``(w [H, N, d], u [H, N, d])`` with ``u = w + beta sqrt(diag Lambda^-1)``, so that the
    unclipped optimistic Q is ``phi @ u[h]``.
  """
  H, N, _, d = pinv.shape
  A = next_phi.shape[4]
  u = beta * sqrt_diag(pinv)
  w = np.empty((H, N, d), pinv.dtype)
  w[H - 1] = theta[H - 1]  # V_{H+1} = 0: nu_H = 0
  u[H - 1] += theta[H - 1]
  for h in range(H - 2, -1, -1):
    if k == 0:
      w[h] = theta[h]
    else:
      q = np.matmul(u[h + 1][:, None, :], next_phi[h, :, :, :k].reshape(N, d, k * A))
      # V = max_a clip(Q) = clip(max_a Q) (clipping is monotone); top_{h+1} = H - (h + 1).
      v = _max_last(q.reshape(N, k, A))
      np.maximum(v, 0.0, out=v)
      np.minimum(v, H - h - 1, out=v)
      v[next_fail[h, :, :k]] = 0.0
      np.add(theta[h], alpha_max(rows[h], v, rho[h], H), out=w[h])
    u[h] += w[h]
  return w, u


def plan_stats(theta, pinv, rows, phi_tab, fail_state: int, rho, beta: float):
  """Backward induction on sufficient statistics (finite state space; cost independent of k).

  Args:
    theta: ``[H, d]``.
    pinv: ``[H, N, d, d]`` ``Lambda_h^-1``.
    rows: ``[H, N, S, d]`` ``Lambda_h^-1 G_h[s']``, ``G_h[s']`` the sum of the features of the
      seed's stored step-h transitions into ``s'``.
    phi_tab: ``[H, S, A, d]`` features of every (step, state, action).
    fail_state: index of the fail state.
    rho: ``[H, d]``.
    beta: bonus multiplier.

  Returns:
    ``(w [H, N, d], qraw [H, S, A, N])``: the weights and the unclipped optimistic Q-values of
    every state at every step (0 at the fail state): the greedy action at ``s`` is
    ``argmax qraw[h, s, :, n]``.
  """
  H, N, _, d = pinv.shape
  _, S, A, _ = phi_tab.shape
  u = beta * sqrt_diag(pinv)
  w = np.empty((H, N, d), pinv.dtype)
  qraw = np.empty((H, S, A, N), pinv.dtype)
  tab = phi_tab.reshape(H, S * A, d)
  w[H - 1] = theta[H - 1]  # V_{H+1} = 0: nu_H = 0
  for h in range(H - 1, -1, -1):
    u[h] += w[h]
    q = qraw[h]
    np.matmul(tab[h], u[h].T, out=q.reshape(S * A, N))
    q[fail_state] = 0.0
    if h > 0:  # regression of step h - 1 on V_h (0 at the fail state: its Q row is 0)
      v = np.maximum.reduce(q, axis=1)  # [S, N]; clip(max_a Q) = max_a clip(Q)
      np.maximum(v, 0.0, out=v)
      np.minimum(v, H - h, out=v)
      np.add(theta[h - 1], alpha_max(rows[h - 1], v.T, rho[h - 1], H), out=w[h - 1])
  return w, qraw


def q_table(phi_tab, u, fail_state: int):
  """``[H, S, A, N]`` unclipped optimistic Q of every (step, state, action), 0 at the fail state.

  Args:
    phi_tab: ``[H, S, A, d]``.
    u: ``[H, N, d]`` ``w + beta sqrt(diag Lambda^-1)`` (``plan_buffer``).
    fail_state: index of the fail state.
  """
  H, S, A, d = phi_tab.shape
  q = np.matmul(phi_tab.reshape(H, S * A, d), np.swapaxes(u, 1, 2)).reshape(H, S, A, -1)
  q[:, fail_state] = 0.0
  return q
