"""Vectorized NumPy implementations of drjax's offline algorithms (PEVI, DRPVI, VA-DRPVI).

The baselines of ``benchmarks/offline.py``: the same mathematics as ``drjax/agents/offline.py``
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

``check_agreement`` fits drjax and these on the same dataset (float64) and returns the largest
``|w_numpy - w_drjax|`` per agent; ``tests/test_bench_offline.py`` requires it below 1e-8.

The dataset is given as NumPy arrays (``NpDataset``; ``from_drjax`` converts a
``drjax.data.Dataset``), step-major like drjax's, optionally with a leading batch (seed) axis on
every field: ``phi [(B,) H, N, d]``, ``reward [(B,) H, N]``, ``next_phi [(B,) H, N, A, d]``,
``next_fail [(B,) H, N]``, ``theta [(B,) H, d]``, ``valid [(B,) N]``. Computation runs in the
dataset's float dtype.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

AGENTS = ("pevi", "drpvi", "va-drpvi")


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


def _pass(ds: NpDataset, g, gram, reward_sum, *, beta, lam, rho, robust: bool, width: str,
          moments: bool = False):
  """One backward induction; returns ``(w, pinv, y1, y2)`` with ``y1[h] = g_h^T V_{h+1}``,
  ``y2[h] = g_h^T V_{h+1}^2`` (all ``[B, H, ...]``; computed only with ``moments``, for
  VA-DRPVI's pilot pass)."""
  B, H, N, d = ds.phi.shape
  dtype = ds.phi.dtype
  beta = dtype.type(beta)
  pinv = np.linalg.inv(gram + dtype.type(lam) * np.eye(d, dtype=dtype))  # [B, H, d, d]
  w = np.zeros((B, H, d), dtype)
  y1 = np.zeros((B, H, d), dtype)
  y2 = np.zeros((B, H, d), dtype)
  if robust:
    w[:, H - 1] = ds.theta[:, H - 1]
  else:
    w[:, H - 1] = np.matmul(pinv[:, H - 1], reward_sum[:, H - 1, :, None])[..., 0]
  for h in range(H - 2, -1, -1):
    v = _next_values(w[:, h + 1], pinv[:, h + 1], beta, dtype.type(H - h - 1),
                     ds.next_phi[:, h], ds.next_fail[:, h], ds.valid, width)
    gh = g[:, h]  # [B, N, d]
    if moments:
      y1[:, h] = np.matmul(v[:, None, :], gh)[:, 0]  # [B, d]
      y2[:, h] = np.matmul((v * v)[:, None, :], gh)[:, 0]
    if robust:
      w[:, h] = ds.theta[:, h] + tv_nu(pinv[:, h], gh, v, ds.valid, rho[:, h], H)
    else:
      gv = np.matmul(v[:, None, :], gh)[:, 0]
      w[:, h] = np.matmul(pinv[:, h], (reward_sum[:, h] + gv)[..., None])[..., 0]
  return w, pinv, y1, y2


def _rho(rho, B, H, d, dtype):
  return np.broadcast_to(np.asarray(rho, dtype), (B, H, d))


def pevi(ds: NpDataset, *, beta, lam) -> dict:
  """PEVI: ``{"w": [(B,) H, d], "pinv": [(B,) H, d, d]}``."""
  ds, batched = _batched(ds)
  g, gram, rs = _atoms(ds)
  w, pinv, _, _ = _pass(ds, g, gram, rs, beta=beta, lam=lam, rho=None, robust=False,
                        width="ellipsoid")
  return _out(w, pinv, batched)


def drpvi(ds: NpDataset, *, rho, beta, lam, penalty: str = "paper") -> dict:
  """DRPVI (vmin = data minimum): ``{"w", "pinv"}``; ``rho`` scalar or ``[H, d]``."""
  ds, batched = _batched(ds)
  B, H, _, d = ds.phi.shape
  g, gram, rs = _atoms(ds)
  w, pinv, _, _ = _pass(ds, g, gram, rs, beta=beta, lam=lam,
                        rho=_rho(rho, B, H, d, ds.phi.dtype), robust=True, width=penalty)
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
  _, ppinv, y1, y2 = _pass(pilot, pg, pgram, prs, beta=beta, lam=lam, rho=rho, robust=True,
                           width=penalty, moments=True)
  z1 = np.matmul(ppinv, y1[..., None])  # [B, H, d, 1]
  z2 = np.matmul(ppinv, y2[..., None])
  m1 = np.clip(np.matmul(ds.phi, z1)[..., 0], 0.0, H)  # [B, H, N]
  m2 = np.clip(np.matmul(ds.phi, z2)[..., 0], 0.0, H * H)
  wts = (1.0 / np.maximum(1.0, m2 - m1 * m1 - dtype.type(var_shift))).astype(dtype)
  g, gram, rs = _atoms(ds, wts)
  w, pinv, _, _ = _pass(ds, g, gram, rs, beta=beta, lam=lam, rho=rho, robust=True,
                        width=penalty)
  return _out(w, pinv, batched)


def _out(w, pinv, batched):
  if not batched:
    w, pinv = w[0], pinv[0]
  return {"w": w, "pinv": pinv}


def fit(name: str, ds: NpDataset, *, pilot: NpDataset | None = None, rho=0.0, beta=1.0,
        lam=0.1, var_shift=0.0) -> dict:
  """``fit("pevi" | "drpvi" | "va-drpvi", ds, ...)``: the matching function above."""
  if name == "pevi":
    return pevi(ds, beta=beta, lam=lam)
  if name == "drpvi":
    return drpvi(ds, rho=rho, beta=beta, lam=lam)
  if name == "va-drpvi":
    if pilot is None:
      raise ValueError("va-drpvi needs a pilot dataset")
    return va_drpvi(ds, pilot, rho=rho, beta=beta, lam=lam, var_shift=var_shift)
  raise ValueError(f"unknown agent {name!r}; choose from {AGENTS}")


# ---------------------------------------------------------------------------------------------
# Agreement with drjax.


def check_agreement(env, params, behavior, num_trajectories: int = 40, *, seed: int = 0,
                    agents=AGENTS, rho=0.1, beta=0.1, lam=1.0, var_shift=0.0) -> dict:
  """Largest ``|w_numpy - w_drjax|`` (and of ``Lambda^-1``) per agent on one small dataset.

  Collects a dataset (and a pilot for VA-DRPVI) with drjax, fits each agent with
  ``registry.make(name, env).fit`` (no model: buffer form, ``vmin`` = data minimum) and with the
  NumPy functions above on the same arrays. Run it with ``jax_enable_x64`` on (the comparison is
  meant in float64, where the two agree to rounding, ~1e-12); under float32 it still runs, with
  float32 rounding. Returns ``{agent: {"w": max abs diff, "pinv": ..., "w_scale": max |w|}}`` plus
  ``"dtype"``.
  """
  import jax  # pylint: disable=g-import-not-at-top
  from drjax import data  # pylint: disable=g-import-not-at-top
  from drjax.agents import registry  # pylint: disable=g-import-not-at-top

  key = jax.random.key(seed)
  ds = data.collect(env, params, behavior, jax.random.fold_in(key, 0), num_trajectories)
  pilot = data.collect(env, params, behavior, jax.random.fold_in(key, 1), num_trajectories)
  nds, npilot = from_drjax(ds), from_drjax(pilot)
  H, d = env.horizon, env.feature_dim
  rho_arr = np.broadcast_to(np.asarray(rho, np.float64), (H, d))
  out = {"dtype": str(nds.phi.dtype)}
  for name in agents:
    agent = registry.make(name, env)
    kw = dict(beta=beta, lam=lam)
    if name != "pevi":
      kw["rho"] = rho_arr
    if name == "va-drpvi":
      kw["var_shift"] = var_shift
    hp = registry.make_hparams(name, env, **kw)
    qf = agent.fit(ds, hp, pilot=pilot if agent.needs_pilot else None)
    ref = fit(name, nds, pilot=npilot, **kw)
    w_j, p_j = np.asarray(qf.w), np.asarray(qf.pinv)
    out[name] = {"w": float(np.max(np.abs(ref["w"] - w_j))),
                 "pinv": float(np.max(np.abs(ref["pinv"] - p_j))),
                 "w_scale": float(np.max(np.abs(w_j)))}
  return out
