"""Learned estimates: pathwise derivatives with the data held fixed (``drjax.sensitivity``,
item 3).

``learned_value`` and ``learned_sensitivity``: a finished run's optimistic ``V_1^K(s_1)`` and
``nu`` re-planned (``drjax.replan``) on the same data, differentiated in rho, beta and lambda.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from drjax import _checks
from drjax.train import replan
from drjax._precision import exact_matmuls

Array = jax.Array


class LearnedSensitivity(NamedTuple):
  """A finished run's optimistic estimate and its pathwise derivatives (data held fixed).

  Attributes:
    value: ``[]`` ``V_1^K(s_1) = max_a Q_1^K(s_1, a)`` of ``agent.plan(state, hparams)``.
    nu: ``[H, d]`` the robust regression weights ``nu_h`` of that plan.
    d_value: ``HParams`` of derivatives of ``value`` (``rho [H, d]``, ``beta []``, ``lam []``).
    d_nu: ``HParams`` of Jacobians of ``nu`` (``rho [H, d, H, d]``, ``beta [H, d]``,
      ``lam [H, d]``).
  """

  value: Array
  nu: Array
  d_value: Any
  d_nu: Any


@exact_matmuls
def learned_value(agent, env, env_params, train_state, hparams, key=None) -> tuple[Array, Array]:
  """``(V_1(s_1), nu)`` of ``drjax.replan(env, agent, train_state, hparams, env_params)`` at ``s_1 = env.reset(key, ...)``.

  Uses only ``drjax.replan`` (``agent.plan``), ``agent.q_values``, ``env.reset``, ``env.phi_all`` and
  ``env.is_fail``, so it works for any agent state. Pure and differentiable in ``hparams``.

  Args:
    agent: the ``Agent`` that produced ``train_state``.
    env: the environment.
    env_params: its params.
    train_state: the agent state of a finished run (``TrainOutput.state``).
    hparams: ``HParams`` (rho ``[H, d]``, beta, lam) to plan with.
    key: PRNG key for ``env.reset`` (default ``PRNGKey(0)``; the linear MDP starts at x1).

  Returns:
    ``(value [], nu [H, d])``.
  """
  _check_learned_args(agent, env, train_state, key)
  if not all(hasattr(hparams, f) for f in ("rho", "beta", "lam")):
    raise TypeError(f"hparams must be an HParams(rho, beta, lam) (drjax.make_hparams), got "
                    f"{type(hparams).__name__}")
  if _checks.is_concrete(hparams):
    from drjax.agents.base import validate_hparams  # pylint: disable=g-import-not-at-top
    validate_hparams(hparams, env.horizon, env.feature_dim)
  key = jax.random.PRNGKey(0) if key is None else key
  # Re-plan from the stored Gram matrices / statistics with these hyperparameters (both engine
  # forms; Lambda^-1 recomputed from lam, so the derivative in lambda is the pathwise one).
  qf = replan(env, agent, train_state, hparams, env_params)
  s1 = env.reset(key, env_params)
  q = agent.q_values(qf, 0, env.phi_all(s1, env_params), env.is_fail(s1, env_params))
  return jnp.max(q), qf.nu


@exact_matmuls
def learned_sensitivity(agent, env, env_params, train_state, hparams, key=None
                        ) -> LearnedSensitivity:
  """Pathwise derivatives of a finished run's ``V_1^K(s_1)`` and ``nu`` w.r.t. rho, beta, lambda.

  The collected data (``train_state``) are held fixed: this is the derivative of re-planning on
  the same data with other hyperparameters, not of re-running training. Forward mode
  (``jax.jacfwd``; ``H d + 2`` inputs).

  Args:
    agent, env, env_params, train_state, hparams, key: as in ``learned_value``; ``hparams`` is
      validated (``drjax.validate_hparams``) when concrete.

  Returns:
    ``LearnedSensitivity``.
  """
  from drjax.agents.base import HParams, validate_hparams  # pylint: disable=g-import-not-at-top

  _checks.environment("env", env)
  if not all(hasattr(hparams, f) for f in ("rho", "beta", "lam")):
    raise TypeError(f"hparams must be an HParams(rho, beta, lam) (drjax.make_hparams), got "
                    f"{type(hparams).__name__}")
  if _checks.is_concrete(hparams):
    validate_hparams(hparams, env.horizon, env.feature_dim)
  if np.ndim(hparams.rho) != 2:
    raise ValueError(f"hparams.rho must be one [H, d] array (no batch axes), got shape "
                     f"{np.shape(hparams.rho)}")
  _check_learned_args(agent, env, train_state, key)
  dtype = jnp.result_type(hparams.rho, float)
  hp = HParams(*(jnp.asarray(x, dtype) for x in hparams))
  key = jax.random.PRNGKey(0) if key is None else key
  return _learned_sensitivity(agent, env, env_params, train_state, hp, key)


def _check_learned_args(agent, env, train_state, key) -> None:
  from drjax.agents.state import AgentState, StatsState  # pylint: disable=g-import-not-at-top
  _checks.agent("agent", agent, "online")
  _checks.environment("env", env)
  _checks.agent_dims(agent, (env.horizon, env.feature_dim, env.num_actions))
  _checks.instance("train_state", train_state, (AgentState, StatsState),
                   "an AgentState or StatsState (TrainOutput.state)")
  if key is not None:
    _checks.key("key", key)


@functools.partial(jax.jit, static_argnums=(0, 1))
def _learned_sensitivity(agent, env, env_params, train_state, hp, key):
  f = lambda h: learned_value(agent, env, env_params, train_state, h, key)  # noqa: E731
  (value, nu), (d_value, d_nu) = f(hp), jax.jacfwd(f)(hp)
  return LearnedSensitivity(value=value, nu=nu, d_value=d_value, d_nu=d_nu)
