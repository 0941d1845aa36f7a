"""Learned estimates: pathwise derivatives with the data held fixed (``drjax.sensitivity``,
item 3).

``learned_value`` and ``learned_sensitivity``: a finished online run's optimistic ``V_1^K(s_1)``
and ``nu`` re-planned (``drjax.replan``) on the same data, or an offline agent's fitted value
re-fit (``agent.fit``) to the same dataset, differentiated in the agent's traced hyperparameters
(rho, beta, lambda; R2PVI's regularization weight; VA-DRPVI's variance shift).
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from drjax import _checks
from drjax.envs.base import FiniteEnvironment
from drjax.linalg import _max_at_argmax
from drjax.train import replan
from drjax._precision import exact_matmuls

Array = jax.Array


class LearnedSensitivity(NamedTuple):
  """A finished run's optimistic estimate and its pathwise derivatives (data held fixed).

  Attributes:
    value: ``[]`` ``V_1^K(s_1) = max_a Q_1^K(s_1, a)`` of ``agent.plan(state, hparams)`` (an
      offline agent: of ``agent.fit(dataset, hparams)``, its pessimistic estimate).
    nu: ``[H, d]`` the robust regression weights ``nu_h`` of that plan.
    d_value: the hyperparameters' type (``HParams``; an offline agent's ``agent.hparams_type``)
      holding the derivatives of ``value``: ``rho [H, d]``, ``beta []``, ``lam []`` (and
      ``reg_weight [H, d]``, ``var_shift []`` where the agent has them).
    d_nu: the same type holding the Jacobians of ``nu`` (``rho [H, d, H, d]``, ``beta [H, d]``,
      ``lam [H, d]``, ...).
  """

  value: Array
  nu: Array
  d_value: Any
  d_nu: Any


@exact_matmuls
def learned_value(agent, env, env_params, train_state, hparams, key=None, *,
                  pilot=None) -> tuple[Array, Array]:
  """``(V_1(s_1), nu)`` of ``drjax.replan(env, agent, train_state, hparams, env_params)`` at ``s_1 = env.reset(key, ...)``.

  Uses only ``drjax.replan`` (``agent.plan``), ``agent.q_values``, ``env.reset``, ``env.phi_all`` and
  ``env.is_fail``, so it works for any agent state. Pure and differentiable in ``hparams``.

  An offline agent (``kind="offline"``: PEVI, DRPVI, VA-DRPVI, R2PVI-TV/KL/chi2, DRVI-L) is
  re-fit instead: ``agent.fit(train_state, hparams, pilot=pilot, model=...)`` with
  ``train_state`` the ``drjax.data.Dataset`` it learns from and, as ``drjax.make_fit`` does, the
  environment's model for a finite environment (sufficient statistics and the exact
  ``min_s V(s)``); ``hparams`` is then the agent's own type
  (``drjax.agents.offline.make_hparams(agent, ...)``).

  Args:
    agent: the ``Agent`` that produced ``train_state`` (or an offline agent).
    env: the environment.
    env_params: its params.
    train_state: the agent state of a finished run (``TrainOutput.state``); for an offline
      agent, its ``Dataset``.
    hparams: ``HParams`` (rho ``[H, d]``, beta, lam) to plan with; for an offline agent, its
      ``agent.hparams_type`` (no batch axes).
    key: PRNG key for ``env.reset`` (default ``PRNGKey(0)``; the linear MDP starts at x1).
    pilot: VA-DRPVI's independent pilot dataset (offline agents that need one; else None).

  Returns:
    ``(value [], nu [H, d])``.
  """
  _check_learned_args(agent, env, train_state, key, pilot)
  _check_learned_hparams(agent, env, hparams)
  key = jax.random.PRNGKey(0) if key is None else key
  if _is_offline(agent):
    model = env.model(env_params) if isinstance(env, FiniteEnvironment) else None
    qf = agent.fit(train_state, hparams, pilot=pilot, model=model)
  else:
    # Re-plan from the stored Gram matrices / statistics with these hyperparameters (both engine
    # forms; Lambda^-1 recomputed from lam, so the derivative in lambda is the pathwise one).
    qf = replan(env, agent, train_state, hparams, env_params)
  s1 = env.reset(key, env_params)
  q = agent.q_values(qf, 0, env.phi_all(s1, env_params), env.is_fail(s1, env_params))
  return _max_at_argmax(q), qf.nu  # max_a Q; jnp.max's derivative can be NaN under jit (issue 37)


@exact_matmuls
def learned_sensitivity(agent, env, env_params, train_state, hparams, key=None, *,
                        pilot=None) -> LearnedSensitivity:
  """Pathwise derivatives of a finished run's ``V_1^K(s_1)`` and ``nu`` w.r.t. rho, beta, lambda.

  The collected data (``train_state``) are held fixed: this is the derivative of re-planning on
  the same data with other hyperparameters, not of re-running training. Forward mode
  (``jax.jacfwd``; ``H d + 2`` inputs). An offline agent's fitted value is differentiated in
  every field of its hyperparameters (``learned_value``): R2PVI's ``reg_weight``, DRVI-L's KL
  radius ``rho``, DRPVI's TV radius, ``beta``, ``lam`` (and VA-DRPVI's ``var_shift``).

  Args:
    agent, env, env_params, train_state, hparams, key, pilot: as in ``learned_value``;
      ``hparams`` is validated (``drjax.validate_hparams``; an offline agent's by its own
      checks) when concrete, and must have no batch axes (``[H, d]`` rho / reg_weight, scalars
      otherwise).

  Returns:
    ``LearnedSensitivity``.
  """
  _checks.environment("env", env)
  _check_learned_hparams(agent, env, hparams)
  offline = _is_offline(agent)
  fields = hparams._fields if offline else ("rho", "beta", "lam")
  for f in fields:
    want = 2 if f in _HD_FIELDS else 0
    if np.ndim(getattr(hparams, f)) != want and (want or offline):
      raise ValueError(f"hparams.{f} must be one {'[H, d] array' if want else 'scalar'} (no "
                       f"batch axes), got shape {np.shape(getattr(hparams, f))}")
  _check_learned_args(agent, env, train_state, key, pilot)
  hd = [f for f in _HD_FIELDS if f in fields]
  dtype = jnp.result_type(getattr(hparams, hd[0] if hd else fields[0]), float)
  if offline:
    hp = type(hparams)(*(jnp.asarray(x, dtype) for x in hparams))
  else:
    from drjax.agents.base import HParams  # pylint: disable=g-import-not-at-top
    hp = HParams(*(jnp.asarray(x, dtype) for x in hparams))
  key = jax.random.PRNGKey(0) if key is None else key
  return _learned_sensitivity(agent, env, env_params, train_state, hp, key, pilot)


_HD_FIELDS = ("rho", "reg_weight")  # the [H, d] hyperparameters (drjax.agents.offline_types)


def _is_offline(agent) -> bool:
  return getattr(agent, "kind", None) == "offline"


def _check_learned_hparams(agent, env, hparams) -> None:
  """Online (or unknown) agents: an ``HParams``; offline agents: their own ``hparams_type``."""
  if _is_offline(agent):
    from drjax.agents.offline_types import check_hparams  # pylint: disable=g-import-not-at-top
    cls = getattr(agent, "hparams_type", None)
    if cls is None or not isinstance(hparams, cls):
      name = getattr(cls, "__name__", "its hparams_type")
      raise TypeError(f"hparams must be the offline agent's {name} "
                      f"(drjax.agents.offline.make_hparams(agent, ...)), got "
                      f"{type(hparams).__name__}")
    if _checks.is_concrete(hparams):
      check_hparams(agent, hparams)
    return
  if not all(hasattr(hparams, f) for f in ("rho", "beta", "lam")):
    raise TypeError(f"hparams must be an HParams(rho, beta, lam) (drjax.make_hparams), got "
                    f"{type(hparams).__name__}")
  if _checks.is_concrete(hparams):
    from drjax.agents.base import validate_hparams  # pylint: disable=g-import-not-at-top
    validate_hparams(hparams, env.horizon, env.feature_dim)


def _check_learned_args(agent, env, train_state, key, pilot=None) -> None:
  from drjax.agents.state import AgentState, StatsState  # pylint: disable=g-import-not-at-top
  from drjax.data import Dataset  # pylint: disable=g-import-not-at-top
  _checks.agent("agent", agent)
  _checks.environment("env", env)
  _checks.agent_dims(agent, (env.horizon, env.feature_dim, env.num_actions))
  if _is_offline(agent):
    _checks.instance("train_state", train_state, Dataset,
                     f"the Dataset the offline agent {agent.name} is fit to (drjax.data.collect)")
    if getattr(agent, "needs_pilot", False):
      _checks.instance("pilot", pilot, Dataset,
                       f"{agent.name}'s independent pilot Dataset (drjax.data.collect)")
  else:
    _checks.agent("agent", agent, "online")
    _checks.instance("train_state", train_state, (AgentState, StatsState),
                     "an AgentState or StatsState (TrainOutput.state)")
  if key is not None:
    _checks.key("key", key)


@functools.partial(jax.jit, static_argnums=(0, 1))
def _learned_sensitivity(agent, env, env_params, train_state, hp, key, pilot):
  f = lambda h: learned_value(agent, env, env_params, train_state, h, key,  # noqa: E731
                              pilot=pilot)
  (value, nu), (d_value, d_nu) = f(hp), jax.jacfwd(f)(hp)
  return LearnedSensitivity(value=value, nu=nu, d_value=d_value, d_nu=d_nu)
