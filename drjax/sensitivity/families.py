"""Families of target kernels for the worst-case search (``drjax.sensitivity``, item 4).

``Family`` (sample, project, kernel), the families ``d_rectangular_family``,
``sa_rectangular_family`` and ``factor_q_family``, the exact projection ``project_tv_simplex``
onto a TV ball in the simplex, and ``sa_rectangular_evaluate`` (the exact value over the
s,a-rectangular set, the reference of ``sa_rectangular_family``).
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from drjax import _checks, duals_tv
from drjax.envs.base import LinearModel
from drjax.sensitivity._common import _check_rho, _dims, _dtype
from drjax._precision import exact_matmuls

Array = jax.Array


def _threshold_above(d: Array, target: Array) -> Array:
  """The ``a`` with ``sum_s max(d_s - a, 0) = target`` (``target > 0``), exactly (one sort).

  Sorted decreasingly with prefix sums ``c_k``, ``a = (c_k - target) / k`` for the largest ``k``
  with ``d_(k) > (c_k - target) / k`` (the simplex-projection threshold when ``target = 1``).
  """
  ds = -jnp.sort(-d)
  k = jnp.arange(1, d.shape[0] + 1, dtype=d.dtype)
  cand = (jnp.cumsum(ds) - target) / k
  last = jnp.sum(ds > cand) - 1  # the condition holds on a prefix
  return cand[jnp.maximum(last, 0)]


def _threshold_below(d: Array, cap: Array, target: Array) -> Array:
  """A ``b`` with ``sum_s min(cap_s, max(b - d_s, 0)) = target``, ``0 <= target <= sum cap``.

  The left side is nondecreasing and piecewise linear in ``b`` with breakpoints ``d`` and
  ``d + cap``: evaluated at all ``2 S`` of them at once (no loop), bracketed and interpolated.
  """
  g = lambda b: jnp.sum(jnp.minimum(cap, jnp.maximum(b - d, 0.0)))  # noqa: E731
  bps = jnp.concatenate([d, d + cap])
  vals = jax.vmap(g)(bps)
  inf = jnp.asarray(jnp.inf, d.dtype)
  lo_mask = vals <= target
  k0 = jnp.argmax(jnp.where(lo_mask, bps, -inf))  # min(d) has g = 0 <= target: never empty
  k1 = jnp.argmin(jnp.where(vals >= target, bps, inf))  # max(d + cap) has g = sum cap
  b0, b1, g0, g1 = bps[k0], bps[k1], vals[k0], vals[k1]
  gap = jnp.where(g1 > g0, g1 - g0, 1.0)
  return jnp.where(g1 > g0, b0 + (target - g0) / gap * (b1 - b0), b0)


@exact_matmuls
def project_tv_simplex(y: Array, mu: Array, rho) -> Array:
  """Euclidean projection of ``y`` onto ``{nu in simplex : TV(nu, mu) <= rho}``, exactly.

  With ``u = nu - mu`` the set is ``{sum u = 0, u >= -mu, sum max(u, 0) <= rho}``. If the plain
  simplex projection satisfies the TV bound it is the answer. Otherwise the bound is active and
  KKT (multipliers ``tau`` of ``sum nu = 1`` and ``lam > 0`` of ``||u||_1 <= 2 rho``) gives
  ``u_s = max(d_s - a, 0) - min(mu_s, max(b - d_s, 0))`` with ``d = y - mu``, ``a = tau + lam``,
  ``b = tau - lam``: the increases sum to ``rho`` and so do the decreases, which fixes ``a`` and
  ``b`` separately (two monotone piecewise-linear equations, solved exactly without loops). The
  result is renormalised onto ``sum = 1`` (a rounding-level correction).

  Args:
    y: ``[S]`` point to project.
    mu: ``[S]`` centre (a distribution).
    rho: ``[]`` radius in ``[0, 1]``.

  Returns:
    ``[S]`` the projection.
  """
  _checks.array("y", y)
  _checks.rank("y", y, 1)
  _checks.finite("y", y)
  _checks.array("mu", mu, np.shape(y), "[S]")
  _checks.distribution("mu", mu)
  _checks.rho("rho", rho)
  dtype = jnp.result_type(y, mu, float)
  y, mu = jnp.asarray(y, dtype), jnp.asarray(mu, dtype)
  rho = jnp.asarray(rho, dtype)
  simplex = jnp.maximum(y - _threshold_above(y, jnp.ones((), dtype)), 0.0)
  inside = jnp.sum(jnp.maximum(simplex - mu, 0.0)) <= rho
  d = y - mu
  a = jnp.where(rho > 0, _threshold_above(d, jnp.maximum(rho, 1e-300)), jnp.max(d))
  b = _threshold_below(d, mu, rho)
  u = jnp.maximum(d - a, 0.0) - jnp.minimum(mu, jnp.maximum(b - d, 0.0))
  x = jnp.where(inside, simplex, jnp.maximum(mu + u, 0.0))
  return x / jnp.sum(x)


@exact_matmuls
def sa_rectangular_evaluate(model: LinearModel, rho_sa, policy) -> Array:
  """``[H + 1, S]`` robust values of ``policy`` under an s,a-rectangular TV set.

  The set is a TV ball of radius ``rho_sa[h, s, a]`` around every nominal row ``P_h(.|s, a)``,
  chosen independently (Iyengar 2005); each backup is the exact TV dual
  (``duals_tv.tv_worst_case_value``). With ``rho_sa[h, s, a] = phi(s, a) . rho_h`` the set contains
  the d-rectangular set of radius ``rho`` (TV is convex), so this value is never above
  ``planning.robust_evaluate``.

  Args:
    model: finite ``LinearModel``.
    rho_sa: ``[H, S, A]`` radii in ``[0, 1]``.
    policy: ``[H, S]`` policy (0-based actions in ``[0, A - 1]``).

  Returns:
    ``[H + 1, S]`` values (``v[H] = 0``).
  """
  H, S, A, _ = _dims(model)
  _check_sa(rho_sa, model)
  _checks.policy("policy", policy, H, S, A)
  dtype = _dtype(model)
  policy = jnp.asarray(policy)
  P = model.transition
  idx = policy[:, :, None, None]
  p_pi = jnp.take_along_axis(P, idx, axis=2)[:, :, 0]  # [H, S, S]
  r_pi = jnp.take_along_axis(model.reward, policy[..., None], axis=2)[..., 0]
  rho_pi = jnp.take_along_axis(jnp.asarray(rho_sa, dtype), policy[..., None], axis=2)[..., 0]

  def backward(v_next, h):
    worst = jax.vmap(duals_tv.tv_worst_case_value, in_axes=(0, None, 0))(p_pi[h], v_next,
                                                                         rho_pi[h])[0]
    v = r_pi[h] + worst
    return v, v

  v_end = jnp.zeros((S,), dtype)
  _, v = jax.lax.scan(backward, v_end, jnp.arange(H), reverse=True)
  return jnp.concatenate([v, v_end[None]], axis=0)


def _check_sa(rho_sa, model):
  H, S, A, _ = _dims(model)
  _checks.rho("rho_sa", rho_sa, (H, S, A), what="(H, S, A)")


class Family(NamedTuple):
  """A differentiable family of target kernels for ``worst_case_search``.

  Attributes:
    sample: ``key -> z`` a random feasible parameter (a restart's starting point); ``key`` is a
      ``jax.random`` key split from the one given to ``worst_case_search``.
    project: ``z -> z`` the nearest feasible parameter (identity if the family is unconstrained).
    kernel: ``z -> [H, S, A, S]`` the target kernel (rows must be distributions).
    name: a label.
  """

  sample: Callable
  project: Callable
  kernel: Callable
  name: str = "family"


def _uniform_in_balls(key, centres: Array, radii: Array) -> Array:
  """Random points ``c + t (u - c)``, ``u ~ Dir(1)``, ``t ~ U[0, r]``: inside each TV ball."""
  k_dir, k_t = jax.random.split(key)
  e = jax.random.exponential(k_dir, centres.shape, centres.dtype)  # normalised: Dir(1)
  u = e / jnp.sum(e, axis=-1, keepdims=True)
  t = radii * jax.random.uniform(k_t, centres.shape[:-1], centres.dtype)
  return centres + t[..., None] * (u - centres)


@exact_matmuls
def d_rectangular_family(model: LinearModel, rho) -> Family:
  """The d-rectangular TV set of Section 3.2: factors ``mu'_{h,i}`` with TV ``<= rho_{h,i}``.

  ``z`` is ``[H, d, S]`` (the perturbed factors), ``kernel(z) = phi_h z_h``; projection is
  ``project_tv_simplex`` per factor. The minimum of a policy's value over it is
  ``planning.robust_evaluate`` (rectangularity), which validates ``worst_case_search``.
  """
  _check_rho(rho, model)
  dtype = _dtype(model)
  rho = jnp.asarray(rho, dtype)
  proj = jax.vmap(jax.vmap(project_tv_simplex))
  return Family(
      sample=lambda key: _uniform_in_balls(key, model.mu.astype(dtype), rho),
      project=lambda z: proj(z, model.mu, rho),
      kernel=lambda z: jnp.einsum("hsad,hdt->hsat", model.phi, z),
      name="d-rectangular TV")


@exact_matmuls
def sa_rectangular_family(model: LinearModel, rho_sa) -> Family:
  """A TV ball of radius ``rho_sa[h, s, a]`` around every nominal row ``P_h(.|s, a)``.

  ``z`` is the whole kernel ``[H, S, A, S]``; its exact minimum for a policy is
  ``sa_rectangular_evaluate``.
  """
  _check_sa(rho_sa, model)
  dtype = _dtype(model)
  P = model.transition.astype(dtype)
  r = jnp.asarray(rho_sa, dtype)
  proj = jax.vmap(jax.vmap(jax.vmap(project_tv_simplex)))
  return Family(sample=lambda key: _uniform_in_balls(key, P, r),
                project=lambda z: proj(z, P, r), kernel=lambda z: z,
                name="s,a-rectangular TV")


@exact_matmuls
def factor_q_family(model: LinearModel, factor: int, q_max) -> Family:
  """Appendix A's perturbation of one factor, with its own level at every step.

  ``mu'_{h,factor} = (1 - q_h) mu_{h,factor} + q_h delta_{fail_state}`` with ``q_h`` in
  ``[0, q_max[h]]``; the other factors stay nominal. In the linear MDP with ``factor = 3``
  (the paper's factor 4, ``mu = delta_x5``) step 1 is the target of Figure 1 (except that
  factors 1-2 keep ``p``). ``TV(mu', mu) = q_h (1 - mu_{h,factor}(s_f)) <= q_h``, so the family
  lies in the d-rectangular set whose ``rho_{h,factor} = q_max[h]``.

  Args:
    model: finite ``LinearModel``.
    factor: 0-based factor index ``i`` in ``[0, d - 1]`` (the paper's factor ``i + 1``).
    q_max: ``[H]`` upper levels in ``[0, 1]``.
  """
  H, S, _, d = _dims(model)
  _checks.index("factor", factor, d, "(factor i)")
  _checks.require_concrete("q_max", q_max)
  _checks.rho("q_max", q_max, (H,), what="(H,)")
  qm = np.asarray(q_max, float)
  dtype = _dtype(model)
  qm = jnp.asarray(qm, dtype)
  fail = jax.nn.one_hot(model.fail_state, S, dtype=dtype)

  def kernel(q):
    mu_f = (1 - q)[:, None] * model.mu[:, factor] + q[:, None] * fail[None]
    mu = model.mu.at[:, factor].set(mu_f)
    return jnp.einsum("hsad,hdt->hsat", model.phi, mu)

  return Family(sample=lambda key: qm * jax.random.uniform(key, (H,), dtype),
                project=lambda q: jnp.clip(q, 0.0, qm), kernel=kernel,
                name=f"factor {factor + 1} perturbed at every step")
