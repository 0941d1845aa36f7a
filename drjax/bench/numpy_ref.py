"""Fast, vectorized NumPy implementations of drjax's DR-LSVI-UCB: the baselines of the benchmarks.

The same algorithm as ``drjax.dr_lsvi_ucb`` with the paper preset (Liu & Xu 2024, Algorithm 1):
``w_h = theta_h + nu_h`` with the known reward parameter theta,
``nu_{h,i} = max_{alpha in [0, H]} z_{h,i}(alpha) - rho_{h,i} alpha``,
``z_h(alpha) = Lambda_h^-1 sum_n g_n min(V_{h+1}(x_n), alpha)``
(``Lambda_h = lam I + sum phi phi^T``),
bonus ``beta sum_i phi_i sqrt([Lambda_h^-1]_ii)``, ``Q_h = clip(phi (w_h + beta sqrt(diag
Lambda_h^-1)), 0, H - h)`` (0-indexed h), ``Q = 0`` at the fail state, ``V_{H+1} = 0``; greedy
actions with ties among the maximizers of the clipped Q broken by the largest unclipped value, then
the lowest index (drjax's ``tie_break="optimistic"``). Episode k plans on the k stored episodes.

Written to be fast, not as a straw man:

* all N seeds advance together (every array has a seed axis; layout ``[H, N, ...]``), one NumPy
  call per step for all seeds; acting in a finite environment reads a precomputed greedy-action
  table of every (step, state) and samples next states from a precomputed cumulative kernel;
* planning is O(k) in the ``k`` stored episodes (the buffers are preallocated, but every plan
  slices the first ``k`` slots); the last step needs no regression (``V_{H+1} = 0`` gives
  ``nu_H = 0`` exactly);
* ``Lambda_h^-1`` is kept up to date by Sherman-Morrison rank-1 steps, batched over seeds and
  steps (``O(d^2)`` per transition). Measured against rebuilding the Gram matrices and inverting
  the stacked ``[H, N, d, d]`` batch with ``np.linalg.inv`` at every plan (``cholesky`` alone,
  which gives no ``diag(Lambda^-1)``, in brackets): 0.65 vs 7.2 (2.9) ms for H 3, N 1000, d 4;
  31 vs 436 (160) ms for H 10, N 1000, d 21; 105 vs 2244 (602) ms for H 10, N 100, d 128;
* the ridge-operator rows ``Lambda_h^-1 g_t`` of the atoms are kept up to date by rank-1 steps too
  (``update_rows``: ``O(n d)`` per transition, ``ridge="update"``) instead of being recomputed
  at every plan (``O(n d^2)``, ``ridge="solve"``, what drjax does); both give the same numbers
  up to rounding. ``ridge="auto"`` (default) picks by d, as measured (process CPU s, update vs
  solve): d = 128 random DRMDP 100 seeds x 20 episodes 2.3 vs 4.5; put option (d = 21) 1,000 x 20
  0.91 vs 0.97; linear MDP (d = 4) buffer 1,000 x 100 3.4 vs 2.6, 1 x 3,000 3.8 vs 3.6;
* the alpha maximization is exact: ``z(alpha) = sum_t rows_t min(V_t, alpha)`` at every
  candidate ``{0, H} U {V_t}`` (``V_t`` is in ``[0, H]`` by the clipping), for all ``d``
  coordinates at once: one ``argsort`` per seed, one gather of the rows in sorted order
  (atoms-first, ``[n, N, d]``), two prefix sums (row-wise adds: NumPy's ``cumsum`` along an axis
  is a scalar loop, 10-40x slower on wide rows), batched over seeds; for a few atoms
  (``n <= SORT_FREE_MAX_ATOMS``, where it measured as fast or faster) a sort-free broadcast
  evaluation of all ``(n + 1) x n`` terms ``min(V_t, V_j)``;
* finite environments also have the sufficient-statistics form: the atoms are the next states s'
  with weights ``G_h[s'] = sum of phi over stored step-h transitions into s'``, so a plan costs
  ``O(H (S A d + S log S + S d))`` whatever ``k`` (plus ``O(d^2)`` per transition for
  Sherman-Morrison);
* one BLAS thread (``blas_threads``; the ``threads`` option): drjax's XLA runs single-threaded
  Eigen (its loop fusions may still be split over the cores, so the engine benchmark records
  process CPU seconds beside wall seconds), and multithreaded OpenBLAS on the shared 2-core
  machine was erratic (the same batched product took 0.5 ms to 160 ms from one call to the next,
  1-2 ms with one thread; 100 seeds x 20 episodes of the d = 128 random DRMDP: 3.9 vs 2.3 s
  process CPU, and once 127 vs 17 s wall).

Floating point: ``dtype=np.float32`` by default (drjax's benchmarks run in float32, and float32
was measured faster here; process CPU s, float32 vs float64: linear MDP 1,000 seeds x 100
episodes (stats) 0.56 vs 0.72, put option 1,000 x 20 0.91 vs 1.57, d = 128 random DRMDP 100 x 20
2.3 vs 4.1); pass ``np.float64`` for comparisons to rounding (the tests do).

Randomness: ``np.random.default_rng(seed)`` only; all uniforms of a run are drawn up front. The
trajectories differ from drjax's (different random numbers); ``check_agreement`` compares the mean
returns of both with a standard error.

Entry points: ``linear_mdp``, ``random_drmdp``, ``put_option`` (each returns ``[N, K]`` training
returns), ``train_finite`` (any finite linear MDP given as arrays), ``linear_mdp_model``,
``random_model``, ``model_from_drjax``, the building blocks ``alpha_max``, ``sherman_morrison``,
``update_rows``, ``ridge_rows``, ``plan_buffer``, ``plan_stats``, ``q_table``, and
``check_agreement`` / ``drjax_returns``. ``python -m drjax.bench.numpy_ref`` times the benchmark
workloads once. The kernels (the building blocks and ``blas_threads``) live in
``drjax.bench.numpy_ref_kernels`` and are re-exported here; the module constants are read there.
"""

from __future__ import annotations

import itertools
import math
from typing import NamedTuple

import numpy as np

# The batched kernels, re-exported (this module's names are unchanged).
# pylint: disable=unused-import
from drjax.bench.numpy_ref_kernels import (  # noqa: F401
    RIDGE_MODES, RIDGE_UPDATE_MIN_D, ROW_ADD_MIN, SM_CHUNK_MIN, SORT_FREE_MAX_ATOMS, _GETTERS,
    _SETTERS, _cumsum0, _max_last, _openblas, _ridge_update, alpha_max, blas_threads, plan_buffer,
    plan_stats, q_table, ridge_rows, sherman_morrison, sqrt_diag, update_rows)
# pylint: enable=unused-import

STRIKE, UP, DOWN = 100.0, 1.02, 0.98


class FiniteModel(NamedTuple):
  """A finite linear MDP as NumPy arrays (the fields of drjax's ``LinearModel``).

  Attributes:
    phi: ``[H, S, A, d]`` features.
    mu: ``[H, d, S]`` factor distributions.
    theta: ``[H, d]`` reward parameters (rewards ``phi . theta``).
    init_dist: ``[S]`` initial-state distribution.
    fail_state: int index of the fail state.
  """

  phi: np.ndarray
  mu: np.ndarray
  theta: np.ndarray
  init_dist: np.ndarray
  fail_state: int


# ---------------------------------------------------------------------------------------------
# Finite environments (the paper's linear MDP, random linear DRMDPs)


def _rho_array(rho, H, d, dtype):
  return np.broadcast_to(np.asarray(rho, dtype), (H, d)).copy()


def train_finite(model: FiniteModel, num_seeds: int, num_episodes: int, *, rho, form="stats",
                 beta=1.0, lam=0.1, seed=0, ridge="auto", dtype=np.float32,
                 threads: int | None = 1) -> np.ndarray:
  """DR-LSVI-UCB on a finite linear MDP, all seeds at once.

  Args:
    model: the MDP (``FiniteModel``; every seed runs on the same MDP).
    num_seeds: N.
    num_episodes: K.
    rho: scalar or ``[H, d]`` uncertainty levels.
    form: ``"stats"`` (sufficient statistics) or ``"buffer"`` (one atom per stored transition).
    beta, lam: bonus multiplier and ridge parameter.
    seed: seed of ``np.random.default_rng``.
    ridge: ``"update"`` keeps the ridge-operator rows ``Lambda_h^-1 g_t`` up to date by rank-1
      steps (``update_rows``, ``O(n d)`` per transition); ``"solve"`` recomputes them from the
      atoms at every plan (``O(n d^2)``, what drjax does); ``"auto"`` (default): ``"update"``
      for ``d >= RIDGE_UPDATE_MIN_D``, else ``"solve"`` (measured faster at d = 4). The same
      numbers up to rounding.
    dtype: float dtype of the computation.
    threads: OpenBLAS threads during the run (see ``blas_threads``; ``None``: unchanged).

  Returns:
    ``[N, K]`` return of every training episode.
  """
  if form not in ("stats", "buffer"):
    raise ValueError(f"form must be 'stats' or 'buffer', got {form!r}")
  if ridge not in RIDGE_MODES:
    raise ValueError(f"ridge must be one of {RIDGE_MODES}, got {ridge!r}")
  with blas_threads(threads):
    return _train_finite(model, int(num_seeds), int(num_episodes), rho, form, beta, lam, seed,
                         ridge, dtype)


def _train_finite(model, N, K, rho, form, beta, lam, seed, ridge, dtype):
  phi_tab = np.asarray(model.phi, dtype)
  H, S, A, d = phi_tab.shape
  theta = np.asarray(model.theta, dtype)
  fail = int(model.fail_state)
  rho = _rho_array(rho, H, d, dtype)
  trans = np.matmul(np.asarray(model.phi, np.float64).reshape(H, S * A, d),
                    np.asarray(model.mu, np.float64)).reshape(H, S, A, S)
  cum_p = _cdf(trans).astype(dtype)  # [H, S, A, S]
  rew = np.einsum("hsad,hd->hsa", phi_tab, theta)  # [H, S, A]
  cum_init = _cdf(np.asarray(model.init_dist, np.float64)).astype(dtype)

  rng = np.random.default_rng(seed)
  # Uniforms for inverse-CDF sampling: [:, h] for step h, [:, H] for the initial state.
  unif = rng.random((K, H + 1, N, 1), dtype=np.float32).astype(dtype)
  ar, hs = np.arange(N), np.arange(H)[:, None]
  update = _ridge_update(ridge, d)
  pinv = np.broadcast_to(np.eye(d, dtype=dtype) / dtype(lam), (H, N, d, d)).copy()
  stats = form == "stats"
  n_atoms = S if stats else K
  rows = np.zeros((H, N, n_atoms, d), dtype)  # Lambda^-1 g per atom ("update")
  atoms = None if update else np.zeros((H, N, n_atoms, d), dtype)  # g per atom ("solve")
  if not stats:
    buf_nphi = np.zeros((H, N, d, K, A), dtype)  # feature-major (see plan_buffer)
    buf_nfail = np.zeros((H, N, K), bool)
    # Features at step h + 1 of every state, feature-major: [H, S, d, A].
    next_tab = np.ascontiguousarray(
        phi_tab[np.minimum(np.arange(H) + 1, H - 1)].transpose(0, 1, 3, 2))
  returns = np.zeros((K, N), dtype)
  ep_s = np.empty((H, N), np.intp)
  ep_a = np.empty((H, N), np.intp)
  ep_next = np.empty((H, N), np.intp)

  for k in range(K):
    if not update:
      rows = ridge_rows(pinv, atoms[:, :, :(S if stats else k)])
    if stats:
      _, qraw = plan_stats(theta, pinv, rows, phi_tab, fail, rho, beta)
    else:
      _, u = plan_buffer(theta, pinv, rows, buf_nphi, buf_nfail, k, rho, beta)
      qraw = q_table(phi_tab, u, fail)
    # Greedy action of every (step, state, seed): the largest unclipped value (the maximizers of
    # the clipped Q include it), then the lowest index; all actions tie at 0 in the fail state.
    greedy = qraw.argmax(axis=2)  # [H, S, N]
    uk = unif[k]
    s = (cum_init < uk[H]).sum(axis=1)
    for h in range(H):
      a = greedy[h][s, ar]
      ep_s[h] = s
      ep_a[h] = a
      s = (cum_p[h][s, a] < uk[h]).sum(axis=1)
      ep_next[h] = s
    ep_phi = phi_tab[hs, ep_s, ep_a]  # [H, N, d]
    np.add.reduce(rew[hs, ep_s, ep_a], axis=0, out=returns[k])
    new_rows = sherman_morrison(pinv, ep_phi)  # [H, N, d] Lambda^-1 phi after the update
    if update:
      update_rows(rows if stats else rows[:, :, :k], ep_phi, new_rows)
      if stats:
        rows[hs, ar, ep_next] += new_rows
      else:
        rows[:, :, k] = new_rows
    elif stats:
      atoms[hs, ar, ep_next] += ep_phi
    else:
      atoms[:, :, k] = ep_phi
    if not stats:
      buf_nphi[:, :, :, k] = next_tab[hs, ep_next]
      buf_nfail[:, :, k] = ep_next == fail
  return returns.T.copy()


def _cdf(p: np.ndarray) -> np.ndarray:
  """Cumulative sums over the last axis, exactly 1 from the last state with positive mass on.

  Sampling is ``#{j : cdf_j < u}`` for ``u ~ U[0, 1)``: states after the last one with positive
  mass can never be drawn (rounding could otherwise leave ``cdf < 1`` there).
  """
  cdf = np.cumsum(p, axis=-1)
  tail = np.cumsum(p[..., ::-1], axis=-1)[..., ::-1]  # mass of states >= j
  after = np.concatenate([tail[..., 1:], np.zeros_like(tail[..., :1])], axis=-1)
  cdf[after <= 0] = 1.0
  return cdf


def linear_mdp_model(*, xi_norm=0.1, delta=0.3, p=0.001) -> FiniteModel:
  """The source domain of the paper's simulated linear MDP (Appendix A), as drjax's ``LinearMDP``.

  Five states (x4 = index 3 is the fail state, x5 the goal), H = 3, d = 4, actions ``{-1, 1}^4``
  in ``itertools.product`` order, ``g(a) = delta + <xi, a>`` with ``xi = xi_norm / 4 (1,1,1,1)``.
  """
  acts = np.array(list(itertools.product((-1.0, 1.0), repeat=4)))
  g = delta + xi_norm / 4 * acts.sum(axis=1)  # [16]
  z, o = np.zeros_like(g), np.ones_like(g)
  rows = [(1 - g, z, z, g), (z, 1 - g, z, g), (z, z, 1 - g, g), (z, z, o, z), (z, z, z, o)]
  tab = np.stack([np.stack(r, axis=-1) for r in rows])  # [S, A, d]
  e = np.eye(5)
  src = np.stack([(1 - p) * e[1] + p * e[3], (1 - p) * e[2] + p * e[3], e[3], e[4]])
  theta = np.array([[0, 0, 0, 0], [0, 0, 0, 1], [0, 0, 0, 1]], np.float64)
  return FiniteModel(phi=np.broadcast_to(tab, (3, 5, 16, 4)).copy(), mu=np.stack([src] * 3),
                     theta=theta, init_dist=e[0], fail_state=3)


def linear_mdp(num_seeds, num_episodes, *, form="stats", rho14=0.5, xi_norm=0.1, delta=0.3,
               p=0.001, beta=1.0, lam=0.1, seed=0, ridge="auto", dtype=np.float32,
               threads: int | None = 1) -> np.ndarray:
  """DR-LSVI-UCB on the paper's linear MDP (source domain): ``[N, K]`` training returns.

  ``rho`` is 0 except ``rho_{1,4} = rho14`` (0-indexed ``[0, 3]``), as in Figure 1.
  """
  rho = np.zeros((3, 4))
  rho[0, 3] = rho14
  return train_finite(linear_mdp_model(xi_norm=xi_norm, delta=delta, p=p), num_seeds,
                      num_episodes, rho=rho, form=form, beta=beta, lam=lam, seed=seed,
                      ridge=ridge, dtype=dtype, threads=threads)


def model_from_drjax(model) -> FiniteModel:
  """A drjax ``LinearModel`` (``env.model(params)``) or ``RandomMDPParams`` as NumPy arrays."""
  return FiniteModel(phi=np.asarray(model.phi, np.float64), mu=np.asarray(model.mu, np.float64),
                     theta=np.asarray(model.theta, np.float64),
                     init_dist=np.asarray(model.init_dist, np.float64),
                     fail_state=int(np.asarray(model.fail_state)))


def random_model(S=50, A=32, d=128, H=10, seed=0) -> FiniteModel:
  """A random linear DRMDP drawn like drjax's ``RandomLinearMDP.sample_params`` (concentration 1).

  Fail state 0 with ``phi(s_f, a) = e_0``; other features ``[0, Dir(1_{d-1})]``, the same at every
  step; ``mu_{h,0} = delta_{s_f}``, ``mu_{h,i} ~ Dir(1_S)``; ``theta_h = [0, U[0,1]^{d-1}]``.
  """
  rng = np.random.default_rng(seed)
  phi = np.zeros((S, A, d))
  phi[1:, :, 1:] = rng.dirichlet(np.ones(d - 1), (S - 1, A))
  phi[0, :, 0] = 1.0
  mu = np.zeros((H, d, S))
  mu[:, 0, 0] = 1.0
  mu[:, 1:] = rng.dirichlet(np.ones(S), (H, d - 1))
  theta = rng.random((H, d))
  theta[:, 0] = 0.0
  init = np.zeros(S)
  init[1:] = rng.dirichlet(np.ones(S - 1))
  return FiniteModel(phi=np.broadcast_to(phi, (H, S, A, d)).copy(), mu=mu, theta=theta,
                     init_dist=init, fail_state=0)


def random_drmdp(num_seeds, num_episodes, *, model: FiniteModel | None = None, S=50, A=32, d=128,
                 H=10, rho=0.1, beta=1.0, lam=0.1, form="stats", seed=0, ridge="auto",
                 dtype=np.float32, threads: int | None = 1) -> np.ndarray:
  """DR-LSVI-UCB (sufficient statistics) on a random linear DRMDP: ``[N, K]`` training returns.

  Args:
    model: the MDP (e.g. ``model_from_drjax(env.model(params))`` to run on drjax's instance);
      ``None`` draws ``random_model(S, A, d, H, seed)``.
    rho: scalar (every (h, i)) or ``[H, d]``.
  """
  if model is None:
    model = random_model(S, A, d, H, seed)
  return train_finite(model, num_seeds, num_episodes, rho=rho, form=form, beta=beta, lam=lam,
                      seed=seed, ridge=ridge, dtype=dtype, threads=threads)


# ---------------------------------------------------------------------------------------------
# American put option (buffer form, continuous prices)


def put_features(price, exited, anchors, spacing):
  """``[N, 2, d+1]`` features of (exercise, hold), drjax's ``PutOption(variant="paper")``.

  ``phi(s, exercise) = [hats(s), 0]``, ``phi(s, hold) = [0, ..., 0, max(0, 100 - s)]``, all zero
  in the exit state.
  """
  N, na = price.shape[0], anchors.shape[0]
  f = np.zeros((N, 2, na + 1), price.dtype)
  np.maximum(0.0, 1.0 - np.abs(price[:, None] - anchors) / spacing, out=f[:, 0, :na])
  np.maximum(0.0, STRIKE - price, out=f[:, 1, na])
  f[exited] = 0.0
  return f


def put_option(num_seeds, num_episodes, *, rho=0.3, beta=1.0, lam=0.1, p_u=0.5, init_low=95.0,
               init_high=105.0, num_anchors=20, horizon=10, seed=0, ridge="auto",
               dtype=np.float32, threads: int | None = 1) -> np.ndarray:
  """DR-LSVI-UCB (buffer form) on the paper-variant American put option: ``[N, K]`` returns.

  As drjax's ``PutOption(num_anchors, horizon, variant="paper")`` with its default params
  (``p_u = 0.5``, a fresh initial price ``U[95, 105]`` every episode): ``d = num_anchors + 1``,
  anchors ``80 + i 60/num_anchors``, ``theta_h = [max(0, 100 - anchors), 0]``; action 0
  exercises (reward ``max(0, 100 - s)``, then the exit state: fail, zero features), action 1 holds
  (price x1.02 w.p. ``p_u``, else x0.98). ``rho`` is a scalar (every (h, i)) or ``[H, d]``;
  ``ridge``, ``dtype`` and ``threads`` as in ``train_finite``.
  """
  if ridge not in RIDGE_MODES:
    raise ValueError(f"ridge must be one of {RIDGE_MODES}, got {ridge!r}")
  with blas_threads(threads):
    return _put_option(int(num_seeds), int(num_episodes), rho, beta, lam, p_u, init_low,
                       init_high, int(num_anchors), int(horizon), seed, ridge, dtype)


def _put_option(N, K, rho, beta, lam, p_u, init_low, init_high, num_anchors, horizon, seed,
                ridge, dtype):
  H, na = horizon, num_anchors
  d, A = na + 1, 2
  spacing = 60.0 / na
  anchors_f64 = 80.0 + spacing * np.arange(na)
  anchors = anchors_f64.astype(dtype)
  theta = np.broadcast_to(np.append(np.maximum(0.0, STRIKE - anchors_f64), 0.0).astype(dtype),
                          (H, d))
  rho = _rho_array(rho, H, d, dtype)
  rng = np.random.default_rng(seed)
  init = rng.uniform(init_low, init_high, (K, N)).astype(dtype)
  up = rng.random((K, H, N), dtype=np.float32) < p_u
  move = np.where(up, dtype(UP), dtype(DOWN))
  ar = np.arange(N)
  update = _ridge_update(ridge, d)
  pinv = np.broadcast_to(np.eye(d, dtype=dtype) / dtype(lam), (H, N, d, d)).copy()
  rows = np.zeros((H, N, K, d), dtype)  # Lambda^-1 phi per stored transition ("update")
  atoms = None if update else np.zeros((H, N, K, d), dtype)  # phi per transition ("solve")
  buf_nphi = np.zeros((H, N, d, K, A), dtype)  # feature-major (see plan_buffer)
  buf_nfail = np.zeros((H, N, K), bool)
  returns = np.zeros((N, K), dtype)
  ep_phi = np.empty((H, N, d), dtype)
  for k in range(K):
    if not update:
      rows = ridge_rows(pinv, atoms[:, :, :k])
    _, u = plan_buffer(theta, pinv, rows, buf_nphi, buf_nfail, k, rho, beta)
    price = init[k].copy()
    exited = np.zeros(N, bool)
    feats = put_features(price, exited, anchors, spacing)
    ret = returns[:, k]
    for h in range(H):
      q = np.matmul(feats, u[h][:, :, None])[:, :, 0]  # zero features when exited: Q = 0
      a = q.argmax(axis=1)
      ep_phi[h] = feats[ar, a]
      exercise = a == 0
      ret += np.where(exercise & ~exited, np.maximum(0.0, STRIKE - price), 0.0)
      price = np.where(exercise | exited, price, price * move[k, h])
      exited |= exercise
      feats = put_features(price, exited, anchors, spacing)
      buf_nphi[h, :, :, k] = feats.transpose(0, 2, 1)
      buf_nfail[h, :, k] = exited
    new_rows = sherman_morrison(pinv, ep_phi)
    if update:
      update_rows(rows[:, :, :k], ep_phi, new_rows)
      rows[:, :, k] = new_rows
    else:
      atoms[:, :, k] = ep_phi
  return returns


# ---------------------------------------------------------------------------------------------
# Agreement with drjax (mean returns with a standard error)


def _mean_se(returns):
  per_seed = np.asarray(returns, np.float64).mean(axis=-1)
  n = per_seed.shape[0]
  se = per_seed.std(ddof=1) / math.sqrt(n) if n > 1 else float("nan")
  return float(per_seed.mean()), float(se)


def drjax_returns(workload: str, num_seeds: int, num_episodes: int, *, form="stats", key=0,
                  model_key=0, S=50, A=32, d=128, H=10, **kw) -> tuple[np.ndarray, object]:
  """drjax's ``[N, K]`` training returns for one workload (``drjax.sweep``, one compiled call).

  Returns ``(returns, model)``: ``model`` is the ``FiniteModel`` drjax ran on for
  ``"random_drmdp"`` (``None`` otherwise), so NumPy can run on the same MDP.
  """
  import jax  # pylint: disable=import-outside-toplevel

  import drjax  # pylint: disable=import-outside-toplevel

  beta, lam = kw.get("beta", 1.0), kw.get("lam", 0.1)
  model = None
  if workload == "linear_mdp":
    env = drjax.LinearMDP()
    params = env.make_params(delta=kw.get("delta", 0.3), p=kw.get("p", 0.001),
                             xi_norm=kw.get("xi_norm", 0.1))
    rho = drjax.rho_array(3, 4, kw.get("rho14", 0.5), at=[(0, 3)])
  elif workload == "random_drmdp":
    env, params = drjax.random_linear_drmdp(jax.random.key(model_key), S, A, d, H)
    model = model_from_drjax(env.model(params))
    rho = kw.get("rho", 0.1)
  elif workload == "put_option":
    env = drjax.PutOption(num_anchors=kw.get("num_anchors", 20), horizon=kw.get("horizon", 10))
    params = env.make_params(p_u=kw.get("p_u", 0.5))
    rho = kw.get("rho", 0.3)
    form = "buffer"
  else:
    raise ValueError(f"workload must be 'linear_mdp', 'random_drmdp' or 'put_option', "
                     f"got {workload!r}")
  agent = drjax.dr_lsvi_ucb(env.horizon, env.feature_dim, env.num_actions, num_episodes)
  hp = drjax.make_hparams(env.horizon, env.feature_dim, rho=rho, beta=beta, lam=lam)
  out = drjax.sweep(env, params, agent, jax.random.key(key), num_seeds=num_seeds,
                    num_episodes=num_episodes, hparams=hp, form=form, outputs=("returns",))
  return np.asarray(out.returns), model


def check_agreement(workload: str = "linear_mdp", num_seeds: int = 200, num_episodes: int = 30,
                    *, form: str = "stats", seed: int = 0, dtype=np.float32, **kw) -> dict:
  """Mean training return of NumPy vs drjax (independent random numbers) with standard errors.

  Each side's mean is over seeds of the per-seed mean return over the K episodes; its standard
  error is the sample standard deviation over seeds / sqrt(N). ``z`` is the difference over its
  standard error ``sqrt(se_numpy^2 + se_drjax^2)``; ``agree`` is ``|z| < 4``.

  Args:
    workload: ``"linear_mdp"``, ``"random_drmdp"`` (NumPy runs on drjax's instance) or
      ``"put_option"`` (buffer form).
    num_seeds, num_episodes: N and K for both.
    form: ``"stats"`` or ``"buffer"`` for the finite workloads (both sides).
    seed: NumPy seed; drjax uses ``jax.random.key(seed)``.
    dtype: NumPy float dtype.
    **kw: the workload's keyword arguments (``rho14``, ``xi_norm``, ``rho``, ``S``, ``d``...).

  Returns:
    dict with ``numpy_mean, numpy_se, drjax_mean, drjax_se, diff, diff_se, z, agree``.
  """
  if workload == "put_option":
    form = "buffer"  # continuous prices: no finite model
  dr, model = drjax_returns(workload, num_seeds, num_episodes, form=form, key=seed, **kw)
  common = {k: kw[k] for k in ("beta", "lam") if k in kw}
  if workload == "linear_mdp":
    extra = {k: kw[k] for k in ("rho14", "xi_norm", "delta", "p") if k in kw}
    mine = linear_mdp(num_seeds, num_episodes, form=form, seed=seed, dtype=dtype, **common,
                      **extra)
  elif workload == "random_drmdp":
    mine = random_drmdp(num_seeds, num_episodes, model=model, rho=kw.get("rho", 0.1), form=form,
                        seed=seed, dtype=dtype, **common)
  else:
    extra = {k: kw[k] for k in ("rho", "p_u", "num_anchors", "horizon") if k in kw}
    mine = put_option(num_seeds, num_episodes, seed=seed, dtype=dtype, **common, **extra)
  m1, s1 = _mean_se(mine)
  m2, s2 = _mean_se(dr)
  diff_se = math.hypot(s1, s2)
  z = (m1 - m2) / diff_se if diff_se > 0 else (0.0 if m1 == m2 else math.inf)
  return {"workload": workload, "num_seeds": num_seeds, "num_episodes": num_episodes,
          "form": form, "numpy_mean": m1, "numpy_se": s1, "drjax_mean": m2, "drjax_se": s2,
          "diff": m1 - m2, "diff_se": diff_se, "z": z, "agree": bool(abs(z) < 4)}


def _timings():  # pragma: no cover - a manual helper: python -m drjax.bench.numpy_ref
  import time  # pylint: disable=import-outside-toplevel

  cases = [
      ("linear_mdp 20x100 stats", lambda: linear_mdp(20, 100)),
      ("linear_mdp 20x100 buffer", lambda: linear_mdp(20, 100, form="buffer")),
      ("linear_mdp 1000x100 stats", lambda: linear_mdp(1000, 100)),
      ("linear_mdp 1000x100 buffer", lambda: linear_mdp(1000, 100, form="buffer")),
      ("linear_mdp 1x3000 stats", lambda: linear_mdp(1, 3000)),
      ("linear_mdp 1x3000 buffer", lambda: linear_mdp(1, 3000, form="buffer")),
      ("put_option 1000x100", lambda: put_option(1000, 100)),
      ("random_drmdp d128 100x200", lambda: random_drmdp(100, 200)),
  ]
  for name, fn in cases:
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(f"{name}: wall {wall:.3f} s, process CPU {cpu:.3f} s", flush=True)


if __name__ == "__main__":  # pragma: no cover
  _timings()
