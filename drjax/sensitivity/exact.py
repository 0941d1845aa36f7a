"""Exact robust values and their gradients (``drjax.sensitivity``, item 1).

``robust_value``, ``rho_gradient`` (autodiff beside Danskin's closed form
``-alpha_gap * feature_occupancy``), ``closed_form_rho_gradient`` and ``param_gradient``
(environment parameters).
"""

from __future__ import annotations

import functools
from typing import NamedTuple, Sequence

import jax
import jax.numpy as jnp

from drjax import _checks, duals_tv, planning
from drjax.envs.base import LinearModel
from drjax.sensitivity._common import (_check_policy, _check_rho, _dims, _dtype, _values)
from drjax._precision import exact_matmuls

Array = jax.Array


class RhoGradient(NamedTuple):
  """Value and ``[H, d]`` gradient of an exact robust value with respect to rho.

  Attributes:
    value: ``[]`` ``E_{s_1 ~ init_dist} V_1^{pi,rho}(s_1)`` (``pi`` optimal when no policy given).
    grad: ``[H, d]`` ``jax.grad`` of ``value`` with respect to rho.
    closed_form: ``[H, d]`` Danskin's closed form ``-alpha_gap * feature_occupancy``.
    alpha_gap: ``[H, d]`` ``alpha*_{h,i} - min_s V_{h+1}(s)`` (``-d nu_{h,i} / d rho_{h,i}``).
    feature_occupancy: ``[H, d]`` ``E[phi_i(s_h, a_h)]`` under the policy and the worst-case
      kernel.
    policy: ``[H, S]`` the policy (the optimal one when none was given).
  """

  value: Array
  grad: Array
  closed_form: Array
  alpha_gap: Array
  feature_occupancy: Array
  policy: Array


@jax.jit
def _robust_value(model, rho, policy):
  return planning.initial_value(model, _values(model, rho, policy)[0])


@exact_matmuls
def robust_value(model: LinearModel, rho, policy=None) -> Array:
  """``E_{s_1 ~ init_dist} V_1^{pi,rho}(s_1)``, exact (differentiable in ``model`` and ``rho``).

  Args:
    model: finite ``LinearModel``.
    rho: ``[H, d]`` uncertainty levels in ``[0, 1]``.
    policy: ``None`` for the optimal robust value ``V_1^{*,rho}`` (``planning.robust_dp``), else
      an ``[H, S]`` deterministic policy of 0-based actions (``planning.robust_evaluate``).

  Returns:
    ``[]`` the robust value at the initial distribution.
  """
  _check_rho(rho, model)
  _check_policy(policy, model)
  return _robust_value(model, jnp.asarray(rho, _dtype(model)), policy)


def _alpha_gap(model: LinearModel, rho: Array, v: Array) -> Array:
  """``[H, d]`` ``alpha*_{h,i} - min V_{h+1}``: minus the slope of ``nu_{h,i}`` in ``rho_{h,i}``."""

  def one(mu, v_next, r):
    _, a = duals_tv.tv_worst_case_value(mu, v_next, r)
    return a - jnp.min(v_next)

  per_step = jax.vmap(one, in_axes=(0, None, 0))
  return jax.vmap(per_step)(model.mu, v[1:], rho)


def _feature_occupancy(model: LinearModel, rho: Array, v: Array, policy: Array) -> Array:
  """``[H, d]`` ``E[phi_i(s_h, a_h)]`` from ``init_dist`` under ``policy`` and the worst case."""
  H, S, A, d = _dims(model)
  _, kernel = planning.worst_case_kernel(model, rho, v[1:])
  idx = policy[:, :, None]
  p_pi = jnp.take_along_axis(kernel, idx[..., None], axis=2)[:, :, 0]  # [H, S, S]
  phi_pi = jnp.take_along_axis(model.phi, idx[..., None], axis=2)[:, :, 0]  # [H, S, d]

  def forward(dist, h):
    return dist @ p_pi[h], dist @ phi_pi[h]

  _, occ = jax.lax.scan(forward, model.init_dist.astype(v.dtype), jnp.arange(H))
  return occ


@exact_matmuls
def closed_form_rho_gradient(model: LinearModel, rho, policy=None) -> tuple[Array, Array, Array]:
  """Danskin's closed form of ``d E V_1^{pi,rho}(s_1) / d rho`` (``drjax.sensitivity``, item 1).

  Args:
    model: finite ``LinearModel``.
    rho: ``[H, d]`` in ``[0, 1]``.
    policy: ``None`` (optimal policy of ``planning.robust_dp``) or an ``[H, S]`` policy.

  Returns:
    ``(grad [H, d], alpha_gap [H, d], feature_occupancy [H, d])`` with
    ``grad = -alpha_gap * feature_occupancy``. Valid away from kinks; at a kink it is the
    derivative of the branch ``robust_dp`` selects (lowest-index optimal action, smallest
    maximising alpha).
  """
  _check_rho(rho, model)
  _check_policy(policy, model)
  return _closed_form(model, jnp.asarray(rho, _dtype(model)), policy)


@jax.jit
def _closed_form(model, rho, policy):
  v, pol = _values(model, rho, policy)
  gap = _alpha_gap(model, rho, v)
  occ = _feature_occupancy(model, rho, v, pol)
  return -gap * occ, gap, occ


@exact_matmuls
def rho_gradient(model: LinearModel, rho, policy=None) -> RhoGradient:
  """Value, autodiff gradient and Danskin closed form with respect to the full ``rho [H, d]``.

  Validates on the host, then runs one cached jitted program (also callable inside ``jit`` /
  ``vmap``; ``policy`` may be traced).

  Args:
    model: finite ``LinearModel``.
    rho: ``[H, d]`` in ``[0, 1]``.
    policy: ``None`` for ``V_1^{*,rho}``, else an ``[H, S]`` policy.

  Returns:
    ``RhoGradient``.
  """
  _check_rho(rho, model)
  _check_policy(policy, model)
  return _rho_gradient(model, jnp.asarray(rho, _dtype(model)), policy)


@jax.jit
def _rho_gradient(model, rho, policy):
  value, grad = jax.value_and_grad(
      lambda r: planning.initial_value(model, _values(model, r, policy)[0]))(rho)
  cf, gap, occ = _closed_form(model, rho, policy)
  pol = planning.robust_dp(model, rho).policy if policy is None else jnp.asarray(policy)
  return RhoGradient(value=value, grad=grad, closed_form=cf, alpha_gap=gap,
                     feature_occupancy=occ, policy=pol)


def _float_fields(params) -> tuple[str, ...]:
  if not hasattr(params, "_fields"):
    raise TypeError("params must be a NamedTuple of arrays (an environment's EnvParams), got "
                     f"{type(params).__name__}")
  return tuple(f for f in params._fields
               if jnp.issubdtype(jnp.result_type(getattr(params, f)), jnp.floating))


def _check_wrt(params, wrt) -> tuple[str, ...]:
  if not isinstance(wrt, str) and not (isinstance(wrt, (list, tuple))
                                       and all(isinstance(n, str) for n in wrt)):
    raise TypeError(f"wrt must be a parameter name or a sequence of names, got {wrt!r}")
  names = (wrt,) if isinstance(wrt, str) else tuple(wrt)
  if not names:
    raise ValueError("wrt must name at least one parameter")
  floats = _float_fields(params)
  for n in names:
    if n not in floats:
      have = "" if n not in params._fields else " (it is not a float array)"
      raise ValueError(f"wrt: the environment params have no differentiable parameter {n!r}"
                       f"{have}; choose from {', '.join(floats)}")
  return names


@exact_matmuls
def param_gradient(env, params, rho, wrt: str | Sequence[str], policy=None
                   ) -> tuple[Array, dict[str, Array]]:
  """Value and gradient of the exact robust value with respect to environment parameters.

  Works for any ``FiniteEnvironment`` whose params are a NamedTuple of arrays (linear MDP:
  ``delta``, ``xi_norm``, ``p``, ``q`` (target domains only, ``target = 1``); random linear
  DRMDPs: ``mu``, ``theta``, ``phi``, ``init_dist``). Gradients of array parameters are
  unconstrained (e.g. not projected onto the simplex): contract them with a feasible direction.
  Validates on the host, then runs a cached jitted program (one per env and ``wrt``).

  Args:
    env: a finite environment (``env.model(params)``).
    params: its params; validated with ``env.validate`` when concrete.
    rho: ``[H, d]`` in ``[0, 1]``.
    wrt: a parameter name or a sequence of names (fields of ``params``).
    policy: ``None`` for ``V_1^{*,rho}``, else an ``[H, S]`` policy.

  Returns:
    ``(value [], {name: gradient shaped like params.<name>})``.
  """
  _checks.environment("env", env, finite_=True)
  names = _check_wrt(params, wrt)
  if _checks.is_concrete(params):
    env.validate(params)
  H, d = env.horizon, env.feature_dim
  planning.validate_rho(rho, H, d)
  if policy is not None:
    _checks.policy("policy", policy, H, env.num_states, env.num_actions)

  return _param_gradient(env, names, params, jnp.asarray(rho), policy)


@functools.partial(jax.jit, static_argnums=(0, 1))
def _param_gradient(env, names, params, rho, policy):
  def value(sub):
    p = params._replace(**sub)
    model = env.model(p)
    r = jnp.asarray(rho, _dtype(model))
    return planning.initial_value(model, _values(model, r, policy)[0])

  sub = {n: getattr(params, n) for n in names}
  return jax.value_and_grad(value)(sub)
