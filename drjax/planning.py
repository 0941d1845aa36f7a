"""Exact robust dynamic programming for finite d-rectangular linear DRMDPs (TV uncertainty).

For a finite ``LinearModel`` (``phi [H,S,A,d]``, factors ``mu [H,d,S]``, ``reward [H,S,A]``) and
uncertainty levels ``rho [H,d]`` (heterogeneous, Remark 3 of Liu & Xu 2024), the robust Bellman
equation (Proposition 1, eq. (robust bellman equation)) under the d-rectangular TV set of
Section 3.2 (eq. (factor uncertainty set)) reads

  ``Q_h(s, a) = r_h(s, a) + sum_i phi_i(s, a) * inf_{TV(mu, mu_{h,i}) <= rho_{h,i}} E_mu V_{h+1}``

because the factor balls are independent of ``(s, a)`` and of each other and ``phi >= 0``. Each
inner infimum is the general TV strong duality of Proposition 3 (``robust.tv_worst_case_value``,
the min over *all* states included), so no fail-state assumption (Assumption 2 / Remark 1) is
needed. ``rho = 0`` is ordinary value iteration on ``P_h = phi_h mu_h``.

Every function here handles one model; batch over models / rho / policies with ``jax.vmap``.
They are jit-able (``LinearModel`` and ``rho`` may be traced). Host-side validation (``ValueError``
naming ``rho`` / ``policy``) runs whenever the argument is concrete, i.e. before any tracing.
"""

from __future__ import annotations

from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp
import numpy as np

from drjax import _checks, robust
from drjax.envs.base import LinearModel

Array = jax.Array

__all__ = [
    "PlanResult",
    "robust_dp",
    "robust_evaluate",
    "nominal_evaluate",
    "worst_case_kernel",
    "initial_value",
    "validate_rho",
    "validate_policy",
]


class PlanResult(NamedTuple):
  """Output of ``robust_dp`` (step ``h`` is 0-indexed: ``h = 0`` is the paper's step 1).

  Attributes:
    q: ``[H, S, A]`` optimal robust Q-function ``Q_h^{*,rho}``.
    v: ``[H + 1, S]`` optimal robust values ``V_h^{*,rho}`` with ``v[H] = 0``.
    policy: ``[H, S]`` int32 greedy action (lowest index among maximisers).
    ties: ``[H, S]`` bool, True where *all* actions attain the max (up to rounding; then any
      action is optimal and ``policy`` is 0).
  """

  q: Array
  v: Array
  policy: Array
  ties: Array


def _dims(model: LinearModel) -> tuple[int, int, int, int]:
  chex.assert_rank(model.phi, 4)
  H, S, A, d = model.phi.shape
  chex.assert_shape(model.mu, (H, d, S))
  chex.assert_shape(model.reward, (H, S, A))
  chex.assert_shape(model.init_dist, (S,))
  return H, S, A, d


def _is_concrete(x) -> bool:
  return not isinstance(x, jax.core.Tracer)


def validate_rho(rho, horizon: int, feature_dim: int) -> None:
  """Raises ``ValueError`` unless ``rho`` has shape ``[H, d]`` (values checked if concrete).

  Args:
    rho: uncertainty levels ``rho_{h,i}``; must lie in ``[0, 1]``.
    horizon: H.
    feature_dim: d.
  """
  shape = tuple(np.shape(rho))
  if shape != (horizon, feature_dim):
    raise ValueError(f"rho must have shape (H, d) = ({horizon}, {feature_dim}), got {shape}")
  if _is_concrete(rho):
    r = np.asarray(rho, dtype=np.float64)
    if not np.all(np.isfinite(r)) or np.any(r < 0) or np.any(r > 1):
      raise ValueError(f"rho must lie in [0, 1], got values in [{r.min()}, {r.max()}]")


def validate_policy(policy, horizon: int, num_states: int, num_actions: int) -> None:
  """Raises ``ValueError`` unless ``policy`` is an integer ``[H, S]`` table of actions in [0, A).

  Values are checked only when ``policy`` is concrete.
  """
  shape = tuple(np.shape(policy))
  if shape != (horizon, num_states):
    raise ValueError(
        f"policy must have shape (H, S) = ({horizon}, {num_states}), got {shape}")
  concrete = _is_concrete(policy)
  dtype = np.asarray(policy).dtype if concrete else policy.dtype
  if not jnp.issubdtype(dtype, jnp.integer):
    raise ValueError(f"policy must hold integer action indices, got dtype {dtype}")
  if concrete:
    p = np.asarray(policy)
    if p.size and (p.min() < 0 or p.max() >= num_actions):
      raise ValueError(f"policy actions must lie in [0, {num_actions - 1}], got values in "
                       f"[{p.min()}, {p.max()}]")


def _factor_values(mu_h: Array, v_next: Array, rho_h: Array) -> Array:
  """``[d]`` worst-case factor expectations ``inf_{TV(mu, mu_{h,i}) <= rho_{h,i}} E_mu V``."""
  val, _ = jax.vmap(robust.tv_worst_case_value, in_axes=(0, None, 0))(mu_h, v_next, rho_h)
  return val


def _tie_tol(q: Array, horizon: int) -> Array:
  return 1e3 * jnp.finfo(q.dtype).eps * max(horizon, 1)


def robust_dp(model: LinearModel, rho) -> PlanResult:
  """Optimal robust values by backward induction (eq. (optimal robust bellman equation)).

  ``Q_h(s,a) = r_h(s,a) + sum_i phi_{h,i}(s,a) nu_{h,i}`` with
  ``nu_{h,i} = inf_{TV(mu, mu_{h,i}) <= rho_{h,i}} E_mu V_{h+1}`` (Proposition 3, exact general
  dual) and ``V_h = max_a Q_h``, ``V_{H+1} = 0``. With ``rho = 0`` this is nominal value iteration.

  Args:
    model: finite ``LinearModel``.
    rho: ``[H, d]`` uncertainty levels in ``[0, 1]``.

  Returns:
    ``PlanResult``.

  Example::

    env = LinearMDP(); model = env.model(env.make_params(xi_norm=0.1))
    rho = jnp.zeros((3, 4)).at[0, 3].set(0.5)
    res = robust_dp(model, rho)   # res.v[0, 0]: V_1^{*,rho}(x1)
  """
  _checks.model(model)
  H, S, A, d = _dims(model)
  validate_rho(rho, H, d)
  dtype = jnp.result_type(model.phi, model.mu, model.reward)
  rho = jnp.asarray(rho, dtype)

  def backward(v_next, h):
    nu = _factor_values(model.mu[h], v_next, rho[h])  # [d]
    q = model.reward[h] + model.phi[h] @ nu  # [S, A]
    v = jnp.max(q, axis=-1)
    return v, (q, v)

  v_end = jnp.zeros((S,), dtype)
  _, (q, v) = jax.lax.scan(backward, v_end, jnp.arange(H), reverse=True)
  v = jnp.concatenate([v, v_end[None]], axis=0)
  policy = jnp.argmax(q, axis=-1).astype(jnp.int32)
  ties = (jnp.max(q, axis=-1) - jnp.min(q, axis=-1)) <= _tie_tol(q, H)
  return PlanResult(q=q, v=v, policy=policy, ties=ties)


def _take_action(x: Array, policy: Array) -> Array:
  """``x [H, S, A, ...]`` at ``a = policy[h, s]`` -> ``[H, S, ...]``."""
  idx = policy.reshape(policy.shape + (1,) * (x.ndim - 2))
  return jnp.take_along_axis(x, idx, axis=2)[:, :, 0]


def robust_evaluate(model: LinearModel, rho, policy) -> Array:
  """Robust value ``V_h^{pi,rho}`` of a deterministic policy (Proposition 1, eq. (robust
  bellman equation)).

  ``V_h(s) = r_h(s, pi_h(s)) + sum_i phi_{h,i}(s, pi_h(s)) inf_{TV(mu, mu_{h,i}) <= rho_{h,i}}
  E_mu V_{h+1}``, ``V_{H+1} = 0``.

  Args:
    model: finite ``LinearModel``.
    rho: ``[H, d]`` in ``[0, 1]``.
    policy: ``[H, S]`` int action indices in ``[0, A)``.

  Returns:
    ``[H + 1, S]`` robust values (``v[H] = 0``).
  """
  _checks.model(model)
  H, S, A, d = _dims(model)
  validate_rho(rho, H, d)
  validate_policy(policy, H, S, A)
  dtype = jnp.result_type(model.phi, model.mu, model.reward)
  rho = jnp.asarray(rho, dtype)
  policy = jnp.asarray(policy)
  phi_pi = _take_action(model.phi, policy)  # [H, S, d]
  r_pi = _take_action(model.reward, policy)  # [H, S]

  def backward(v_next, h):
    nu = _factor_values(model.mu[h], v_next, rho[h])
    v = r_pi[h] + phi_pi[h] @ nu
    return v, v

  v_end = jnp.zeros((S,), dtype)
  _, v = jax.lax.scan(backward, v_end, jnp.arange(H), reverse=True)
  return jnp.concatenate([v, v_end[None]], axis=0)


def nominal_evaluate(model: LinearModel, policy, transition=None) -> Array:
  """Value ``V_h^{pi,P}`` of a deterministic policy under a fixed kernel (Section 3.1).

  Args:
    model: finite ``LinearModel`` (rewards; and the kernel ``model.transition`` by default).
    policy: ``[H, S]`` int action indices in ``[0, A)``.
    transition: optional ``[H, S, A, S]`` kernel (e.g. a target domain's, or
      ``worst_case_kernel``'s); defaults to the nominal ``phi_h mu_h``.

  Returns:
    ``[H + 1, S]`` values (``v[H] = 0``).
  """
  _checks.model(model)
  H, S, A, d = _dims(model)
  validate_policy(policy, H, S, A)
  P = model.transition if transition is None else transition
  chex.assert_shape(P, (H, S, A, S))
  dtype = jnp.result_type(model.reward, P)
  policy = jnp.asarray(policy)
  P_pi = _take_action(P, policy)  # [H, S, S]
  r_pi = _take_action(model.reward, policy)  # [H, S]

  def backward(v_next, h):
    v = r_pi[h] + P_pi[h] @ v_next
    return v, v

  v_end = jnp.zeros((S,), dtype)
  _, v = jax.lax.scan(backward, v_end, jnp.arange(H), reverse=True)
  return jnp.concatenate([v, v_end[None]], axis=0)


def worst_case_kernel(model: LinearModel, rho, v_next_per_step) -> tuple[Array, Array]:
  """The adversary's factor distributions and kernel against given next-step values.

  For each ``(h, i)``, ``mu_worst[h, i]`` is the primal minimiser of Proposition 3
  (``robust.tv_worst_case_distribution``) of ``E_mu V_{h+1}`` over the TV ball of radius
  ``rho_{h,i}`` around ``mu_{h,i}``; the kernel is ``P_h(.|s,a) = sum_i phi_{h,i}(s,a)
  mu_worst[h,i]``, a member of the d-rectangular set of Section 3.2. With
  ``v_next_per_step = robust_evaluate(model, rho, pi)[1:]`` it attains the robust value of ``pi``
  (``nominal_evaluate(model, pi, kernel) == robust_evaluate(model, rho, pi)``).

  Args:
    model: finite ``LinearModel``.
    rho: ``[H, d]`` in ``[0, 1]``.
    v_next_per_step: ``[H, S]``, row ``h`` is ``V_{h+1}`` (e.g. ``v[1:]`` of a value table).

  Returns:
    ``(mu_worst [H, d, S], kernel [H, S, A, S])``.
  """
  _checks.model(model)
  H, S, A, d = _dims(model)
  validate_rho(rho, H, d)
  chex.assert_shape(v_next_per_step, (H, S))
  dtype = jnp.result_type(model.phi, model.mu, v_next_per_step)
  rho = jnp.asarray(rho, dtype)
  per_factor = jax.vmap(robust.tv_worst_case_distribution, in_axes=(0, None, 0))
  mu_worst = jax.vmap(per_factor)(model.mu, jnp.asarray(v_next_per_step, dtype), rho)
  kernel = jnp.einsum("hsad,hdt->hsat", model.phi, mu_worst)
  return mu_worst, kernel


def initial_value(model: LinearModel, v) -> Array:
  """``E_{s_1 ~ init_dist} V_1(s_1)`` from a value table ``v [H + 1, S]`` (or ``[S]``)."""
  v = jnp.asarray(v)
  v1 = v[0] if v.ndim == 2 else v
  chex.assert_shape(v1, model.init_dist.shape)
  return model.init_dist @ v1
