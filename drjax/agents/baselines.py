"""Baseline policies that need no training: the references every learned agent is judged against.

* ``uniform-random``: every step draws an action uniformly from ``[0, A - 1]``;
* ``constant``: always the action ``hparams.action`` (a traced hyperparameter without default:
  ``drjax sweep --agents constant --hparam action=0,1`` runs one setting per action);
* ``zero-torque``: the environment's neutral action (``neutral_action(env)``: Pendulum's zero
  torque, the middle of an odd torque set); an environment without one is an error naming it.

They are registered agents of kind ``"baseline"`` (``drjax.agents.registry``), so a sweep runs them
beside the learned agents (online and offline sweeps alike): no training, no data; the run's
policy is evaluated with the seed's evaluation key, exactly as a learned agent's final policy.

**Common random numbers.** ``mc_returns`` rolls the policy out with ``evaluate.episode_key``'s
draws (``env.reset`` gets ``episode_key(key, n, H)``, ``env.step`` at step ``h`` gets
``episode_key(key, n, h)``), the same numbers a learned agent's evaluation uses; a random
baseline's action at step ``h`` of episode ``n`` draws from ``fold_in(episode_key(key, n, h),
ACTION_STREAM)``, a stream the environment never reads. On a finite environment the value is
exact (``exact_value``: the policy's action probabilities through the model's kernel).
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp

from drjax import _checks

Array = jax.Array

NAMES = ("uniform-random", "constant", "zero-torque")
ACTION_STREAM = 0x5EED  # fold_in tag of a random baseline's action keys (see module docstring)


class NoHParams(NamedTuple):
  """A baseline without hyperparameters."""


class ConstantHParams(NamedTuple):
  """Hyperparameters of ``constant``.

  Attributes:
    action: ``[]`` the action index (a whole number in ``[0, A - 1]``; traced, so one compiled
      program serves every action of a sweep).
  """

  action: Array


class BaselineConfig(NamedTuple):
  """Static structure of a baseline (hashable)."""

  horizon: int
  feature_dim: int
  num_actions: int
  neutral: int = -1  # zero-torque's action (-1: none)


class Baseline(NamedTuple):
  """A fixed policy as pure functions (no training).

  ``probs(hparams, h, phi_all, fail) -> [A]`` is the policy's action distribution at a state;
  ``act(hparams, key, h, phi_all, fail) -> int32`` draws from it (deterministic baselines ignore
  ``key``). ``q_values`` / ``act`` of the learned agents' protocol are not provided: a baseline
  has no Q-function.
  """

  name: str
  config: BaselineConfig
  probs: Callable
  act: Callable
  hparams_type: type = NoHParams
  kind: str = "baseline"
  random: bool = False


def neutral_action(env) -> int | None:
  """The action that applies no force, or None: ``env.neutral_action`` when the environment
  declares it, else Pendulum-v1's zero torque (the middle torque of an odd ``num_torques``)."""
  declared = getattr(env, "neutral_action", None)
  if declared is not None and not callable(declared):
    return int(declared)
  if getattr(env, "env_id", None) == "Pendulum-v1":
    n = int(getattr(env, "num_torques", 0) or 0)
    return (n - 1) // 2 if n % 2 == 1 else None
  return None


def uniform_random(horizon: int, feature_dim: int, num_actions: int) -> Baseline:
  """The uniformly random policy."""
  cfg = BaselineConfig(horizon, feature_dim, num_actions)

  def probs(hparams, h, phi_all, fail):
    del hparams, h, fail
    return jnp.full((num_actions,), 1.0 / num_actions, phi_all.dtype)

  def act(hparams, key, h, phi_all, fail):
    del hparams, h, phi_all, fail
    return jax.random.randint(key, (), 0, num_actions, jnp.int32)

  return Baseline("uniform-random", cfg, probs, act, NoHParams, random=True)


def _one_hot_policy(name, cfg, action_of, hparams_type) -> Baseline:
  def probs(hparams, h, phi_all, fail):
    del h, fail
    return jax.nn.one_hot(action_of(hparams), cfg.num_actions, dtype=phi_all.dtype)

  def act(hparams, key, h, phi_all, fail):
    del key, h, phi_all, fail
    return action_of(hparams)

  return Baseline(name, cfg, probs, act, hparams_type)


def constant(horizon: int, feature_dim: int, num_actions: int) -> Baseline:
  """Always the action ``hparams.action`` (rounded to the nearest index)."""
  cfg = BaselineConfig(horizon, feature_dim, num_actions)
  return _one_hot_policy(
      "constant", cfg,
      lambda hp: jnp.clip(jnp.round(jnp.asarray(hp.action)), 0, num_actions - 1).astype(
          jnp.int32), ConstantHParams)


def zero_torque(horizon: int, feature_dim: int, num_actions: int, neutral: int = -1) -> Baseline:
  """Always the environment's neutral action ``neutral`` (``neutral_action(env)``)."""
  if not isinstance(neutral, int) or not 0 <= neutral < num_actions:
    raise ValueError(f"zero-torque needs an environment with a neutral action (Pendulum with an "
                     f"odd num_torques); got neutral action {neutral!r} for {num_actions} actions")
  cfg = BaselineConfig(horizon, feature_dim, num_actions, neutral)
  return _one_hot_policy("zero-torque", cfg, lambda hp: jnp.int32(neutral), NoHParams)


def check_hparams(baseline: Baseline, hparams) -> None:
  """Host check of concrete hyperparameters (``constant``: a whole action in ``[0, A - 1]``)."""
  if isinstance(hparams, ConstantHParams) and _checks.is_concrete(hparams):
    import numpy as np  # pylint: disable=g-import-not-at-top
    a = np.asarray(hparams.action, np.float64)
    n = baseline.config.num_actions
    if not np.all((a == np.round(a)) & (a >= 0) & (a <= n - 1)):
      raise ValueError(f"constant: hparams action must be whole numbers in [0, {n - 1}], got "
                       f"{a.tolist()}")


def mc_returns(env, baseline: Baseline, hparams, params, key, num_episodes: int) -> Array:
  """``[N]`` returns of ``num_episodes`` rollouts with common random numbers (module docstring).
  Pure: ``vmap`` over keys, hyperparameters and params."""
  from drjax.envs.base import rollout_return  # pylint: disable=g-import-not-at-top

  def act(k, h, phi_all, fail):
    return baseline.act(hparams, jax.random.fold_in(k, ACTION_STREAM), h, phi_all, fail)

  return jax.vmap(lambda n: rollout_return(env, act, params, key, n))(jnp.arange(num_episodes))


def exact_value(env, baseline: Baseline, hparams, params) -> Array:
  """``[]`` the exact value ``E_{s_1} V_1^pi(s_1)`` of the baseline on a finite environment:
  ``V_h(s) = sum_a pi_h(a|s) (r_h(s, a) + P_h(.|s, a) V_{h+1})``."""
  from drjax import planning  # pylint: disable=g-import-not-at-top
  model = env.model(params)
  H, S, _, _ = model.phi.shape
  fail = jnp.arange(S) == model.fail_state
  over_s = jax.vmap(baseline.probs, in_axes=(None, None, 0, 0))
  pi = jax.vmap(over_s, in_axes=(None, 0, 0, None))(hparams, jnp.arange(H), model.phi, fail)
  P = model.transition  # [H, S, A, S]

  def backward(v_next, h):
    v = jnp.sum(pi[h] * (model.reward[h] + P[h] @ v_next), axis=-1)
    return v, v

  v_end = jnp.zeros((S,), model.reward.dtype)
  _, v = jax.lax.scan(backward, v_end, jnp.arange(H), reverse=True)
  return planning.initial_value(model, jnp.concatenate([v, v_end[None]], axis=0))
