"""A whole K-episode training run as one ``lax.scan`` (act, step, observe; plan per episode).

``make_train(env, agent, num_episodes)`` returns ``train(key, hparams, env_params)``, a pure
function of one seed and one hyperparameter setting; batch seeds, rho/beta/lambda and environment
params with ``jax.vmap`` (``sweep`` does it for the common grid) — one compilation serves all.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from drjax.agents import base
from drjax.agents.base import (Agent, AgentState, HParams, QFunction, check_features,
                               validate_hparams)


class TrainOutput(NamedTuple):
  """Everything a training run returns (leading axes added by ``vmap``).

  Attributes:
    state: final ``AgentState`` (the buffers: the trajectories the agent saw).
    returns: ``[K]`` undiscounted return of each training episode in the source domain.
    actions: ``[K, H]`` actions taken.
    states: ``[K, H]`` integer state index visited at each step (``-1`` for environments whose
      state has no ``s`` field).
    estimation_error: ``[K]`` the d-rectangular estimation error of each episode,
      ``sum_h sum_i phi_{h,i}^k sqrt([Lambda_h^k]^-1_ii)`` (Theorem 1).
    qf: the per-episode ``QFunction`` (leading axis K) when ``record_q=True``, else ``None``; the
      last entry is the Q-function after training is ``final_qf``.
    final_qf: the ``QFunction`` planned on all K episodes (the learned policy).
  """

  state: AgentState
  returns: jax.Array
  actions: jax.Array
  states: jax.Array
  estimation_error: jax.Array
  qf: QFunction | None
  final_qf: QFunction


def make_train(env, agent: Agent, num_episodes: int, *, record_q: bool = False):
  """Builds ``train(key, hparams, env_params) -> TrainOutput`` for one seed.

  Args:
    env: an ``Environment`` (source domain structure).
    agent: an ``Agent`` from ``dr_lsvi_ucb`` / ``lsvi_ucb`` with capacity >= ``num_episodes``.
    num_episodes: K (static).
    record_q: also return the Q-function of every episode (for exact AveSubopt curves).
  """
  H = env.horizon
  if not isinstance(num_episodes, int) or num_episodes < 1:
    raise ValueError(f"num_episodes (K) must be an integer >= 1, got {num_episodes!r}")

  def train(key, hparams: HParams, env_params) -> TrainOutput:
    theta = env.theta(env_params)
    state0 = agent.init(theta)

    def episode(agent_state, xs):
      k, key = xs
      qf = agent.plan(agent_state, hparams)
      k_reset, k_steps = jax.random.split(key)
      s0 = env.reset(k_reset, env_params)

      def step(carry, xs):
        s, phi_all, fail = carry  # features and fail flag of s, computed once per state
        h, key_h = xs
        a = agent.act(qf, h, phi_all, fail)
        s2, r, _ = env.step(key_h, s, a, env_params)
        phi = phi_all[a]
        phi2, fail2 = env.phi_all(s2, env_params), env.is_fail(s2, env_params)
        sidx = getattr(s, "s", jnp.asarray(-1))
        # Theorem 1's d-rectangular estimation error: the paper's bonus with beta = 1.
        err = base.diag_bonus(qf.linv[h], phi, 1.0, "paper")
        ys = (phi, r, phi2, fail2, a, jnp.asarray(sidx, jnp.int32), err)
        return (s2, phi2, fail2), ys

      carry0 = (s0, env.phi_all(s0, env_params), env.is_fail(s0, env_params))
      _, (phi, r, next_phi, next_fail, a, sidx, err) = jax.lax.scan(
          step, carry0, (jnp.arange(H), jax.random.split(k_steps, H)))
      # The episode index k is not batched under vmap over seeds: one in-place slice update.
      agent_state = agent.store_episode(agent_state, k, phi, r, next_phi, next_fail)
      out = (jnp.sum(r), a, sidx, jnp.sum(err))
      return agent_state, (out, qf if record_q else None)

    keys = jax.random.split(key, num_episodes)
    final, ((ret, acts, sidx, err), qfs) = jax.lax.scan(
        episode, state0, (jnp.arange(num_episodes, dtype=jnp.int32), keys))
    final_qf = agent.plan(final, hparams)
    return TrainOutput(state=final, returns=ret, actions=acts, states=sidx,
                       estimation_error=err, qf=qfs, final_qf=final_qf)

  return train


def broadcast_hparams(hparams: HParams, horizon: int, feature_dim: int) -> tuple[HParams, tuple]:
  """Broadcasts the batch axes of rho ``[..., H, d]``, beta ``[...]`` and lam ``[...]``.

  Returns the hyperparameters flattened to one leading batch axis and the batch shape.
  """
  rho = jnp.asarray(hparams.rho)
  beta = jnp.asarray(hparams.beta)
  lam = jnp.asarray(hparams.lam)
  batch = jnp.broadcast_shapes(rho.shape[:-2], beta.shape, lam.shape)
  n = 1
  for b in batch:
    n *= b
  rho = jnp.broadcast_to(rho, batch + (horizon, feature_dim)).reshape((n, horizon, feature_dim))
  beta = jnp.broadcast_to(beta, batch).reshape((n,))
  lam = jnp.broadcast_to(lam, batch).reshape((n,))
  return HParams(rho=rho, beta=beta, lam=lam), batch


@functools.lru_cache(maxsize=None)
def _compiled_sweep(env, agent: Agent, num_episodes: int, record_q: bool, params_batched: bool):
  train = make_train(env, agent, num_episodes, record_q=record_q)
  over_seeds = jax.vmap(train, in_axes=(0, None, 0 if params_batched else None))
  over_hp = jax.vmap(over_seeds, in_axes=(None, 0, None))
  return jax.jit(over_hp)


def sweep(env, env_params, agent: Agent, key, *, num_seeds: int, num_episodes: int,
          hparams: HParams, record_q: bool = False, params_per_seed: bool = False) -> TrainOutput:
  """Trains ``agent`` for every hyperparameter setting x seed in ONE compiled call.

  Validates everything on the host first (``ValueError`` naming the argument), then runs
  ``jit(vmap_hparams(vmap_seeds(train)))``. Calling it again with other rho/beta/lambda values of
  the same batch shape reuses the compiled program.

  Args:
    env: the source ``Environment``.
    env_params: its params (validated with ``env.validate``); with ``params_per_seed`` a batch
      with leading axis ``num_seeds`` (e.g. one fixed initial price per seed).
    agent: ``dr_lsvi_ucb(...)`` or ``lsvi_ucb(...)``.
    key: a JAX PRNG key; seed j uses ``jax.random.split(key, num_seeds)[j]`` for every
      hyperparameter setting (common random numbers across the grid).
    num_seeds: number of independent runs per setting.
    num_episodes: K.
    hparams: ``HParams`` with optional leading batch axes (see ``make_hparams``).
    record_q: also return every episode's Q-function.

  Returns:
    ``TrainOutput`` whose arrays have leading axes ``batch_shape + (num_seeds,)``.
  """
  if not isinstance(num_seeds, int) or num_seeds < 1:
    raise ValueError(f"num_seeds must be an integer >= 1, got {num_seeds!r}")
  if not isinstance(num_episodes, int) or num_episodes < 1:
    raise ValueError(f"num_episodes (K) must be an integer >= 1, got {num_episodes!r}")
  capacity = agent.config.capacity
  if capacity < num_episodes:
    raise ValueError(f"agent capacity {capacity} must be >= num_episodes {num_episodes}")
  H, d = env.horizon, env.feature_dim
  cfg = agent.config
  if (cfg.horizon, cfg.feature_dim, cfg.num_actions) != (H, d, env.num_actions):
    raise ValueError(f"agent (H, d, A) = {(cfg.horizon, cfg.feature_dim, cfg.num_actions)} does "
                     f"not match env (H, d, A) = {(H, d, env.num_actions)}")
  validate_hparams(hparams, H, d)
  if params_per_seed:
    leaves = jax.tree_util.tree_leaves(env_params)
    if any(jnp.shape(x)[:1] != (num_seeds,) for x in leaves):
      raise ValueError(f"env_params must have leading axis num_seeds={num_seeds} when "
                       "params_per_seed=True")
    one = jax.tree_util.tree_map(lambda x: x[0], env_params)
  else:
    one = env_params
  env.validate(one)
  check_env_features(env, one, key)
  flat, batch = broadcast_hparams(hparams, H, d)
  fn = _compiled_sweep(env, agent, num_episodes, record_q, params_per_seed)
  out = fn(jax.random.split(key, num_seeds), flat, env_params)
  return jax.tree_util.tree_map(lambda x: x.reshape(batch + x.shape[1:]), out)


def check_env_features(env, params, key) -> None:
  """Checks the features an environment produces (negative: ValueError; rows not summing to 1:
  warning). Uses the exact model when there is one, else the initial state and one random step."""
  try:
    if not hasattr(env, "model"):
      raise NotImplementedError
    phi = env.model(params).phi
  except NotImplementedError:
    s = env.reset(key, params)
    phi = env.phi_all(s, params)
    s2, _, _ = env.step(key, s, jnp.zeros((), jnp.int32), params)
    phi = jnp.concatenate([phi, env.phi_all(s2, params)])
  check_features(phi, name=f"{type(env).__name__} features")
