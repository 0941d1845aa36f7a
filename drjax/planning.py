"""Exact robust dynamic programming for finite d-rectangular linear DRMDPs (TV uncertainty).

For a finite ``LinearModel`` (``phi [H,S,A,d]``, factors ``mu [H,d,S]``, ``reward [H,S,A]``) and
uncertainty levels ``rho [H,d]`` (heterogeneous, Remark 3 of Liu & Xu 2024), the robust Bellman
equation (Proposition 1, eq. (robust bellman equation)) under the d-rectangular TV set of
Section 3.2 (eq. (factor uncertainty set)) reads

  ``Q_h(s, a) = r_h(s, a) + sum_i phi_i(s, a) * inf_{TV(mu, mu_{h,i}) <= rho_{h,i}} E_mu V_{h+1}``

because the factor balls are independent of ``(s, a)`` and of each other and ``phi >= 0``. Each
inner infimum is the general TV strong duality of Proposition 3 (``duals_tv.tv_worst_case_value``,
the min over *all* states included), so no fail-state assumption (Assumption 2 / Remark 1) is
needed. ``rho = 0`` is ordinary value iteration on ``P_h = phi_h mu_h``.

Every function here handles one model; batch over models / rho / policies with ``jax.vmap``.
They are jit-able (``LinearModel`` and ``rho`` may be traced). Host-side validation (``TypeError``
/ ``ValueError`` naming the argument and its range) runs before any tracing: shapes and kinds
always, values whenever the argument is concrete. Indices are 0-based: ``rho[h, i]`` is step
``h + 1`` and factor ``i + 1`` of the paper, a policy is an integer ``[H, S]`` table of actions in
``[0, A - 1]``.

The second half plans exactly in d-rectangular robust *regularized* MDPs (R2PVI, Tang, Liu & Xu
2025: ``regularized_dp`` / ``regularized_evaluate`` / ``regularized_worst_case_kernel``, TV, KL
and chi-square penalties) and under d-rectangular KL balls (DRVI-L's set: ``kl_constrained_*``,
tolerance-limited); the per-factor kernels are in ``drjax.regularized``.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from drjax import _checks, _programs, duals_tv, regularized
from drjax.envs.base import LinearModel
from drjax._precision import exact_matmuls

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
    "DIVERGENCES",
    "regularized_dp",
    "regularized_evaluate",
    "regularized_worst_case_kernel",
    "kl_constrained_dp",
    "kl_constrained_evaluate",
    "kl_constrained_worst_case_kernel",
    "weight_for_radius",
    "validate_divergence",
    "validate_weight",
    "validate_kl_radius",
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
  """``(H, S, A, d)`` of a model that ``_checks.model`` has validated."""
  return tuple(np.shape(model.phi))


def validate_rho(rho, horizon: int, feature_dim: int) -> None:
  """Raises ``ValueError`` unless ``rho`` has shape ``[H, d]`` (values checked if concrete;
  ``TypeError`` for strings, booleans, None).

  Args:
    rho: uncertainty levels ``rho_{h,i}``; must lie in ``[0, 1]``. Entry ``[h, i]`` is the
      0-based step ``h`` and factor ``i`` (the paper's ``rho_{h+1,i+1}``).
    horizon: H.
    feature_dim: d.
  """
  horizon = _checks.integer("horizon", horizon, 1)
  feature_dim = _checks.integer("feature_dim", feature_dim, 1)
  _checks.rho("rho", rho, (horizon, feature_dim), what="(H, d)")


def validate_policy(policy, horizon: int, num_states: int, num_actions: int) -> None:
  """Raises ``ValueError`` unless ``policy`` is an integer ``[H, S]`` table of 0-based action
  indices in ``[0, A - 1]`` (row ``h``: step ``h``, column ``s``: state ``s``).

  Values are checked only when ``policy`` is concrete.
  """
  horizon = _checks.integer("horizon", horizon, 1)
  num_states = _checks.integer("num_states", num_states, 1)
  num_actions = _checks.integer("num_actions", num_actions, 1)
  _checks.policy("policy", policy, horizon, num_states, num_actions)


def _factor_values(mu_h: Array, v_next: Array, rho_h: Array) -> Array:
  """``[d]`` worst-case factor expectations ``inf_{TV(mu, mu_{h,i}) <= rho_{h,i}} E_mu V``."""
  val, _ = jax.vmap(duals_tv.tv_worst_case_value, in_axes=(0, None, 0))(mu_h, v_next, rho_h)
  return val


def _tie_tol(q: Array, horizon: int) -> Array:
  return 1e3 * jnp.finfo(q.dtype).eps * max(horizon, 1)


@exact_matmuls
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
  return _plan_with(model, _factor_values, jnp.asarray(rho, dtype))


def _take_action(x: Array, policy: Array) -> Array:
  """``x [H, S, A, ...]`` at ``a = policy[h, s]`` -> ``[H, S, ...]``."""
  idx = policy.reshape(policy.shape + (1,) * (x.ndim - 2))
  return jnp.take_along_axis(x, idx, axis=2)[:, :, 0]


@exact_matmuls
def robust_evaluate(model: LinearModel, rho, policy) -> Array:
  """Robust value ``V_h^{pi,rho}`` of a deterministic policy (Proposition 1, eq. (robust
  bellman equation)).

  ``V_h(s) = r_h(s, pi_h(s)) + sum_i phi_{h,i}(s, pi_h(s)) inf_{TV(mu, mu_{h,i}) <= rho_{h,i}}
  E_mu V_{h+1}``, ``V_{H+1} = 0``.

  Args:
    model: finite ``LinearModel``.
    rho: ``[H, d]`` in ``[0, 1]``.
    policy: ``[H, S]`` int action indices, 0-based, in ``[0, A - 1]``.

  Returns:
    ``[H + 1, S]`` robust values (``v[H] = 0``).
  """
  _checks.model(model)
  H, S, A, d = _dims(model)
  validate_rho(rho, H, d)
  validate_policy(policy, H, S, A)
  dtype = jnp.result_type(model.phi, model.mu, model.reward)
  return _evaluate_with(model, _factor_values, jnp.asarray(rho, dtype), policy)


@exact_matmuls
def nominal_evaluate(model: LinearModel, policy, transition=None) -> Array:
  """Value ``V_h^{pi,P}`` of a deterministic policy under a fixed kernel (Section 3.1).

  Args:
    model: finite ``LinearModel`` (rewards; and the kernel ``model.transition`` by default).
    policy: ``[H, S]`` int action indices, 0-based, in ``[0, A - 1]``.
    transition: optional ``[H, S, A, S]`` kernel (e.g. a target domain's, or
      ``worst_case_kernel``'s); defaults to the nominal ``phi_h mu_h``.

  Returns:
    ``[H + 1, S]`` values (``v[H] = 0``).
  """
  _checks.model(model)
  H, S, A, d = _dims(model)
  validate_policy(policy, H, S, A)
  if transition is not None:
    _checks.array("transition", transition, (H, S, A, S), "[H, S, A, S]")
    _checks.distribution("transition", transition, axis=-1)
  P = model.transition if transition is None else transition
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


@exact_matmuls
def worst_case_kernel(model: LinearModel, rho, v_next_per_step) -> tuple[Array, Array]:
  """The adversary's factor distributions and kernel against given next-step values.

  For each ``(h, i)``, ``mu_worst[h, i]`` is the primal minimiser of Proposition 3
  (``duals_tv.tv_worst_case_distribution``) of ``E_mu V_{h+1}`` over the TV ball of radius
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
  _checks.array("v_next_per_step", v_next_per_step, (H, S), "[H, S]")
  _checks.finite("v_next_per_step", v_next_per_step)
  dtype = jnp.result_type(model.phi, model.mu, v_next_per_step)
  rho = jnp.asarray(rho, dtype)
  per_factor = jax.vmap(duals_tv.tv_worst_case_distribution, in_axes=(0, None, 0))
  mu_worst = jax.vmap(per_factor)(model.mu, jnp.asarray(v_next_per_step, dtype), rho)
  kernel = jnp.einsum("hsad,hdt->hsat", model.phi, mu_worst)
  return mu_worst, kernel


@exact_matmuls
def initial_value(model: LinearModel, v) -> Array:
  """``E_{s_1 ~ init_dist} V_1(s_1)`` from a value table ``v [H + 1, S]`` (or ``[S]``)."""
  _checks.model(model)
  H, S = np.shape(model.phi)[:2]
  _checks.numeric("v", v)
  if tuple(np.shape(v)) not in ((S,), (H + 1, S)):
    raise ValueError(f"v must have shape [H + 1, S] = [{H + 1}, {S}] or [S] = [{S}], got "
                     f"{tuple(np.shape(v))}")
  v = jnp.asarray(v)
  v1 = v[0] if v.ndim == 2 else v
  return model.init_dist @ v1


# --------------------------------------------------------------------------------------------
# Robust *regularized* planning (R2PVI's d-rectangular linear RRMDP) and KL-constrained planning.
# --------------------------------------------------------------------------------------------

DIVERGENCES = ("tv", "kl", "chi2")


def validate_divergence(divergence) -> str:
  """Raises ``ValueError`` (``TypeError`` for a non-string) unless ``divergence`` is one of
  ``DIVERGENCES``; returns it."""
  return _checks.choice("divergence", divergence, DIVERGENCES)


def _per_factor(name: str, x, horizon: int, feature_dim: int, positive: bool) -> None:
  """``x`` scalar or ``[H, d]``; concrete values finite and ``> 0`` (``positive``) or ``>= 0``."""
  horizon = _checks.integer("horizon", horizon, 1)
  feature_dim = _checks.integer("feature_dim", feature_dim, 1)
  _checks.rho(name, x, (horizon, feature_dim), what="(H, d)", scalar_ok=True, hi=None,
              lo_open=positive)


def validate_weight(weight, horizon: int, feature_dim: int) -> None:
  """Raises ``ValueError`` unless ``weight`` is a scalar or ``[H, d]`` of finite values ``> 0``
  (values checked if concrete)."""
  _per_factor("weight", weight, horizon, feature_dim, positive=True)


def validate_kl_radius(rho, horizon: int, feature_dim: int) -> None:
  """Raises ``ValueError`` unless the KL radius ``rho`` is a scalar or ``[H, d]`` of finite
  values ``>= 0`` (values checked if concrete; no upper bound, unlike TV's ``[0, 1]``)."""
  _per_factor("rho", rho, horizon, feature_dim, positive=False)


def _regularized_kernel(divergence: str):
  """``(value_fn, worst_fn, divergence_fn)`` per factor for ``divergence``."""
  if divergence == "tv":
    return (regularized.tv_regularized_value, regularized.tv_regularized_worst_case_distribution,
            regularized.tv_distance)
  if divergence == "kl":
    return (regularized.kl_regularized_value, regularized.kl_regularized_worst_case_distribution,
            regularized.kl_divergence)
  return (_chi2_value, regularized.chi2_regularized_worst_case_distribution,
          regularized.chi2_divergence)


def _chi2_value(mu: Array, v: Array, w: Array) -> Array:
  return regularized.chi2_regularized_value(mu, v, w)[0]


def _factor_table(x, horizon: int, feature_dim: int, dtype) -> Array:
  return jnp.broadcast_to(jnp.asarray(x, dtype), (horizon, feature_dim))


# The planners' cores are compiled, ``factor_values`` static (a module function, or one cached
# per divergence and search setting): an eager call is one program, reused by the next call at
# any radius or weight, instead of its operations one by one and its scan compiled anew on every
# call (robust_dp on a 6-state model: 0.6 s of compiling on each later call before). Inside a
# traced caller they are inlined, as before.
@functools.partial(jax.jit, static_argnums=1)
def _plan_with(model: LinearModel, factor_values, param: Array) -> PlanResult:
  """Backward induction ``Q_h = r_h + phi_h @ factor_values(mu_h, V_{h+1}, param_h)``."""
  H, S, A, d = _dims(model)
  dtype = param.dtype

  def backward(v_next, h):
    nu = factor_values(model.mu[h], v_next, param[h])  # [d]
    q = model.reward[h] + model.phi[h] @ nu  # [S, A]
    v = jnp.max(q, axis=-1)
    return v, (q, v)

  v_end = jnp.zeros((S,), dtype)
  _, (q, v) = jax.lax.scan(backward, v_end, jnp.arange(H), reverse=True)
  v = jnp.concatenate([v, v_end[None]], axis=0)
  policy = jnp.argmax(q, axis=-1).astype(jnp.int32)
  ties = (jnp.max(q, axis=-1) - jnp.min(q, axis=-1)) <= _tie_tol(q, H)
  return PlanResult(q=q, v=v, policy=policy, ties=ties)


@functools.partial(jax.jit, static_argnums=1)
def _evaluate_with(model: LinearModel, factor_values, param: Array, policy) -> Array:
  """``V_h = r_h(., pi_h) + phi_h(., pi_h) @ factor_values(mu_h, V_{h+1}, param_h)``."""
  H, S, A, d = _dims(model)
  policy = jnp.asarray(policy)
  phi_pi = _take_action(model.phi, policy)  # [H, S, d]
  r_pi = _take_action(model.reward, policy)  # [H, S]

  def backward(v_next, h):
    v = r_pi[h] + phi_pi[h] @ factor_values(model.mu[h], v_next, param[h])
    return v, v

  v_end = jnp.zeros((S,), param.dtype)
  _, v = jax.lax.scan(backward, v_end, jnp.arange(H), reverse=True)
  return jnp.concatenate([v, v_end[None]], axis=0)


def _regularized_setup(model: LinearModel, weight, divergence):
  validate_divergence(divergence)
  _checks.model(model)
  H, S, A, d = _dims(model)
  validate_weight(weight, H, d)
  dtype = jnp.result_type(model.phi, model.mu, model.reward)
  return _per_factor_fn(_regularized_kernel(divergence)[0]), _factor_table(weight, H, d, dtype)


@_programs.cached
def _per_factor_fn(value_fn):
  """``value_fn(mu, v, x)`` over the d factors (``mu [d, S]``, ``x [d]``), one object per
  ``value_fn``: the compiled planners' static argument."""
  return jax.vmap(value_fn, in_axes=(0, None, 0))


def _kl_constrained_factor_fn(tol, bracket, grid_size):
  """``kl_constrained_value`` over the d factors at one search setting."""
  def value_fn(mu, v, r):
    return regularized.kl_constrained_value(mu, v, r, tol=tol, bracket=bracket,
                                            grid_size=grid_size)[0]
  return jax.vmap(value_fn, in_axes=(0, None, 0))


# One function per hashable setting, so the compiled planner is reused across calls.
_kl_constrained_factor_fn_cached = _programs.cached(_kl_constrained_factor_fn)


@exact_matmuls
def regularized_dp(model: LinearModel, weight, divergence: str) -> PlanResult:
  """Optimal robust *regularized* values by backward induction (R2PVI's d-rectangular RRMDP).

  ``Q_h(s,a) = r_h(s,a) + sum_i phi_{h,i}(s,a) inf_{nu in Delta(S)} { E_nu V_{h+1} +
  w_{h,i} D(nu || mu_{h,i}) }`` and ``V_h = max_a Q_h``, ``V_{H+1} = 0``: the adversary may use
  any factor distribution but pays ``w_{h,i}`` times the divergence ``D`` (small ``w`` = more
  robust; ``w -> inf`` recovers nominal value iteration). Each factor is the exact kernel of
  ``drjax.regularized``: ``"tv"`` ``E_mu min(V, min_s V + w)`` (``TV = 1/2 ||.||_1``, min over all
  states), ``"kl"`` ``-w log E_mu exp(-V / w)``, ``"chi2"`` ``sup_alpha E_mu [V]_alpha -
  Var_mu([V]_alpha) / (4 w)`` (maximised exactly).

  Args:
    model: finite ``LinearModel``.
    weight: ``[H, d]`` (or scalar, broadcast) regularization weights ``w_{h,i} > 0``.
    divergence: static, one of ``DIVERGENCES`` = ``("tv", "kl", "chi2")``.

  Returns:
    ``PlanResult`` (``q [H,S,A]``, ``v [H+1,S]``, ``policy [H,S]``, ``ties [H,S]``).
  """
  factor_values, weight = _regularized_setup(model, weight, divergence)
  return _plan_with(model, factor_values, weight)


@exact_matmuls
def regularized_evaluate(model: LinearModel, weight, divergence: str, policy) -> Array:
  """Robust regularized value ``V_h^{pi,w}`` of a deterministic policy.

  ``V_h(s) = r_h(s, pi_h(s)) + sum_i phi_{h,i}(s, pi_h(s)) inf_nu { E_nu V_{h+1} + w_{h,i}
  D(nu || mu_{h,i}) }``, ``V_{H+1} = 0`` (see ``regularized_dp``).

  Args:
    model: finite ``LinearModel``.
    weight: ``[H, d]`` (or scalar) weights ``> 0``.
    divergence: static, one of ``("tv", "kl", "chi2")``.
    policy: ``[H, S]`` int action indices, 0-based, in ``[0, A - 1]``.

  Returns:
    ``[H + 1, S]`` values (``v[H] = 0``).
  """
  factor_values, weight = _regularized_setup(model, weight, divergence)
  H, S, A, d = _dims(model)
  validate_policy(policy, H, S, A)
  return _evaluate_with(model, factor_values, weight, policy)


@exact_matmuls
def regularized_worst_case_kernel(model: LinearModel, weight, divergence: str,
                                  v_next_per_step) -> tuple[Array, Array, Array]:
  """The regularized adversary's factor distributions, kernel and per-factor penalties.

  For each ``(h, i)``, ``mu_worst[h, i]`` minimises ``E_nu V_{h+1} + w_{h,i} D(nu || mu_{h,i})``
  (the ``*_worst_case_distribution`` kernels of ``drjax.regularized``) and ``penalty[h, i] =
  w_{h,i} D(mu_worst[h, i] || mu_{h,i})``; the kernel is ``P_h(.|s,a) = sum_i phi_{h,i}(s,a)
  mu_worst[h, i]``. The regularized value is ``E_worst V + w D(worst || mu)``, not
  ``E_worst V``, so the kernel alone does not reproduce it. With ``v_next_per_step =
  regularized_evaluate(model, weight, divergence, pi)[1:]``:

  * the kernel together with the penalised rewards ``r_h(s,a) + sum_i phi_{h,i}(s,a)
    penalty[h, i]`` reproduces it: ``nominal_evaluate(model._replace(reward=model.reward +
    jnp.einsum("hsad,hd->hsa", model.phi, penalty)), pi, kernel) == regularized_evaluate(model,
    weight, divergence, pi)``;
  * ``nominal_evaluate(model, pi, kernel)`` alone is the value of ``pi`` in the worst-case
    environment without the adversary's penalty: the regularized value minus the expected
    accumulated penalties (never above the regularized value, which is itself never above the
    nominal value).

  Args:
    model: finite ``LinearModel``.
    weight: ``[H, d]`` (or scalar) weights ``> 0``.
    divergence: static, one of ``("tv", "kl", "chi2")``.
    v_next_per_step: ``[H, S]``, row ``h`` is ``V_{h+1}``.

  Returns:
    ``(mu_worst [H, d, S], kernel [H, S, A, S], penalty [H, d])``.
  """
  validate_divergence(divergence)
  _checks.model(model)
  H, S, A, d = _dims(model)
  validate_weight(weight, H, d)
  _checks.array("v_next_per_step", v_next_per_step, (H, S), "[H, S]")
  _checks.finite("v_next_per_step", v_next_per_step)
  dtype = jnp.result_type(model.phi, model.mu, v_next_per_step)
  weight = _factor_table(weight, H, d, dtype)
  _, worst_fn, div_fn = _regularized_kernel(divergence)
  v_next = jnp.asarray(v_next_per_step, dtype)
  per_factor = jax.vmap(worst_fn, in_axes=(0, None, 0))
  mu_worst = jax.vmap(per_factor)(model.mu.astype(dtype), v_next, weight)
  penalty = weight * jax.vmap(jax.vmap(div_fn))(mu_worst, model.mu.astype(dtype))
  kernel = jnp.einsum("hsad,hdt->hsat", model.phi, mu_worst)
  return mu_worst, kernel, penalty


def _kl_constrained_setup(model: LinearModel, rho, tol, bracket, grid_size):
  _checks.model(model)
  H, S, A, d = _dims(model)
  validate_kl_radius(rho, H, d)
  regularized.kl_constrained_num_iterations(tol, bracket, grid_size)  # validates tol / bracket
  dtype = jnp.result_type(model.phi, model.mu, model.reward)
  bracket = tuple(bracket)
  try:
    fn = _kl_constrained_factor_fn_cached(tol, bracket, grid_size)
  except TypeError:  # an unhashable setting (a JAX array): a function for this call only
    fn = _kl_constrained_factor_fn(tol, bracket, grid_size)
  return fn, _factor_table(rho, H, d, dtype)


@exact_matmuls
def kl_constrained_dp(model: LinearModel, rho, tol: float = 1e-6, *,
                      bracket=regularized.DEFAULT_BRACKET,
                      grid_size: int = regularized.DEFAULT_GRID_SIZE) -> PlanResult:
  """Optimal robust values under d-rectangular KL balls (DRVI-L's set), by backward induction.

  ``Q_h(s,a) = r_h(s,a) + sum_i phi_{h,i}(s,a) inf_{KL(nu || mu_{h,i}) <= rho_{h,i}} E_nu
  V_{h+1}``, ``V_h = max_a Q_h``. Each factor is ``regularized.kl_constrained_value``: the dual
  ``sup_{alpha > 0} -alpha log E_mu exp(-V/alpha) - alpha rho`` by grid + golden-section search,
  so the result is NOT exact: each factor is within the search tolerance below its true value
  (second order in the relative ``alpha`` tolerance ``tol``). ``rho = 0`` is exactly nominal
  value iteration.

  Args:
    model: finite ``LinearModel``.
    rho: ``[H, d]`` (or scalar) KL radii ``>= 0``.
    tol: static relative tolerance on each dual maximiser ``alpha*``.
    bracket: static search range of ``alpha`` in units of ``span(V)``.
    grid_size: static size of the coarse ``log alpha`` grid.

  Returns:
    ``PlanResult``.
  """
  factor_values, rho = _kl_constrained_setup(model, rho, tol, bracket, grid_size)
  return _plan_with(model, factor_values, rho)


@exact_matmuls
def kl_constrained_evaluate(model: LinearModel, rho, policy, tol: float = 1e-6, *,
                            bracket=regularized.DEFAULT_BRACKET,
                            grid_size: int = regularized.DEFAULT_GRID_SIZE) -> Array:
  """KL-constrained robust value of a deterministic policy (see ``kl_constrained_dp``).

  ``V_h(s) = r_h(s, pi_h(s)) + sum_i phi_{h,i}(s, pi_h(s)) inf_{KL(nu || mu_{h,i}) <= rho_{h,i}}
  E_nu V_{h+1}``, ``V_{H+1} = 0``; search-tolerance limited.

  Args:
    model: finite ``LinearModel``.
    rho: ``[H, d]`` (or scalar) KL radii ``>= 0``.
    policy: ``[H, S]`` int action indices, 0-based, in ``[0, A - 1]``.
    tol, bracket, grid_size: as in ``kl_constrained_dp``.

  Returns:
    ``[H + 1, S]`` values (``v[H] = 0``).
  """
  factor_values, rho = _kl_constrained_setup(model, rho, tol, bracket, grid_size)
  H, S, A, d = _dims(model)
  validate_policy(policy, H, S, A)
  return _evaluate_with(model, factor_values, rho, policy)


@exact_matmuls
def kl_constrained_worst_case_kernel(model: LinearModel, rho, v_next_per_step, tol: float = 1e-6,
                                     *, bracket=regularized.DEFAULT_BRACKET,
                                     grid_size: int = regularized.DEFAULT_GRID_SIZE
                                     ) -> tuple[Array, Array]:
  """The KL adversary's factor distributions ``mu_worst[h, i] ∝ mu_{h,i} exp(-V_{h+1} /
  alpha*_{h,i})`` and kernel ``P_h(.|s,a) = sum_i phi_{h,i}(s,a) mu_worst[h, i]``.

  With ``v_next_per_step = kl_constrained_evaluate(model, rho, pi)[1:]``,
  ``nominal_evaluate(model, pi, kernel)`` reproduces ``kl_constrained_evaluate(model, rho, pi)``
  up to the search tolerance (no penalty term: the problem is constrained), and each
  ``KL(mu_worst[h, i] || mu_{h,i}) = rho_{h,i}`` up to that tolerance (see
  ``regularized.kl_constrained_worst_case_distribution``).

  Returns:
    ``(mu_worst [H, d, S], kernel [H, S, A, S])``.
  """
  _checks.model(model)
  H, S, A, d = _dims(model)
  validate_kl_radius(rho, H, d)
  _checks.array("v_next_per_step", v_next_per_step, (H, S), "[H, S]")
  _checks.finite("v_next_per_step", v_next_per_step)
  regularized.kl_constrained_num_iterations(tol, bracket, grid_size)
  dtype = jnp.result_type(model.phi, model.mu, v_next_per_step)
  rho = _factor_table(rho, H, d, dtype)

  def worst(mu, v, r):
    return regularized.kl_constrained_worst_case_distribution(mu, v, r, tol=tol, bracket=bracket,
                                                              grid_size=grid_size)

  per_factor = jax.vmap(worst, in_axes=(0, None, 0))
  mu_worst = jax.vmap(per_factor)(model.mu.astype(dtype), jnp.asarray(v_next_per_step, dtype), rho)
  kernel = jnp.einsum("hsad,hdt->hsat", model.phi, mu_worst)
  return mu_worst, kernel


@exact_matmuls
def weight_for_radius(model: LinearModel, policy, rho, divergence: str = "tv", *,
                      bounds=(1e-8, None), iterations: int = 80):
  """The rho <-> weight correspondence of the R2PVI paper (Figure 1(c)), exactly for a policy.

  For a radius ``rho`` (a scalar applied to every (h, i), as in the paper's figure), returns the
  regularization weight ``w`` (also applied to every (h, i)) at which ``policy``'s regularized
  robust value (``regularized_evaluate``, ``divergence``) equals its TV-constrained robust value
  at ``rho`` (``robust_evaluate``), both weighted by the initial distribution. The regularized
  value is nondecreasing in ``w`` (from the worst state's value to the nominal one), so the
  smallest such ``w`` is found by bisection on ``log w`` within ``bounds`` (upper default: the
  horizon H, beyond which TV-regularization is nominal) to ``iterations`` halvings (80: below
  float64 resolution). Returns ``(w, constrained_value, regularized_value_at_w)``; when the
  constrained value lies outside the regularized range on ``bounds`` the nearer bound is returned
  (compare the two values).

  Args:
    model: finite ``LinearModel``; policy: ``[H, S]`` 0-based actions; rho: ``[]`` TV radius in
    [0, 1]; divergence: of the regularized problem (``"tv"``, ``"kl"``, ``"chi2"``); bounds:
    ``(lower, upper or None)`` with ``0 < lower < upper``; iterations: an integer >= 1.
  """
  _checks.model(model)
  H, S, A, d = _dims(model)
  divergence = validate_divergence(divergence)
  _checks.rho("rho", rho)
  validate_policy(policy, H, S, A)
  iterations = _checks.integer("iterations", iterations, 1)
  if isinstance(bounds, (str, bytes)) or not hasattr(bounds, "__len__") or len(bounds) != 2:
    raise TypeError(f"bounds must be a pair (lower, upper or None), got {bounds!r}")
  lo = _checks.number("bounds[0] (lower)", bounds[0], 0, lo_open=True)
  hi = float(H) if bounds[1] is None else _checks.number("bounds[1] (upper)", bounds[1], 0,
                                                         lo_open=True)
  if not 0 < lo < hi:
    raise ValueError(f"bounds must satisfy 0 < lower < upper, got {bounds!r}")
  dtype = jnp.result_type(model.phi, model.mu, model.reward)
  ones = jnp.ones((H, d), dtype)
  target = initial_value(model, robust_evaluate(model, jnp.asarray(rho, dtype) * ones, policy))

  def reg(logw):
    return initial_value(model, regularized_evaluate(model, jnp.exp(logw) * ones, divergence,
                                                     policy))

  # Bisection on log w: below the target the weight is too small (the lower end moves up).
  _, b = _checks.bisect(lambda logw: jnp.logical_not(reg(logw) >= target),
                        jnp.log(jnp.asarray(lo, dtype)), jnp.log(jnp.asarray(hi, dtype)),
                        iterations)
  w = jnp.exp(b)
  return w, target, reg(b)
