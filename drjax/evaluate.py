"""Evaluating learned policies: exact AveSubopt curves, Theorem 1's bound, target-domain values.

* ``greedy_policy`` turns an agent's ``QFunction`` into a deterministic tabular policy on a finite
  model (the agent's own ``act`` rule, with fail flag ``s == fail_state``).
* ``ave_subopt`` computes ``V_1^{*,rho}(s_1) - V_1^{pi_k,rho}(s_1)`` exactly for every episode's
  policy ``pi_k`` (robust DP, ``drjax.planning``) and the running average ``AveSubopt(k)`` of
  Section 3.1 (eq. AveSubopt), ``k = 1..K``.
* ``theorem1_bound`` evaluates the right-hand side of Theorem 1 (eq. (AveSubopt-th)).
* ``exact_target_values`` / ``mc_evaluate`` value a learned policy in target domains: exactly
  (finite environments with a model) or by Monte Carlo with common random numbers.

Functions are written for one Q-function and one environment-params value; batch seeds (a
leading axis on ``qf``) and targets (a leading axis on params) with ``jax.vmap``.
``exact_target_values`` already maps over a params batch. Host-side checks (``ValueError``) run
when the arguments are concrete, before anything is traced; the numerical cores are jitted with
the environment and agent as static arguments (one compilation per environment/agent/shape).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import chex
import jax
import jax.numpy as jnp
import numpy as np

from drjax import planning
from drjax.agents.base import Agent, QFunction
from drjax.envs.base import Environment, FiniteEnvironment, LinearModel

Array = jax.Array

__all__ = [
    "greedy_policy",
    "policy_values",
    "ave_subopt",
    "theorem1_bound",
    "target_value",
    "exact_target_values",
    "episode_key",
    "mc_evaluate",
]


def _concrete_tree(tree) -> bool:
  return not any(isinstance(x, jax.core.Tracer) for x in jax.tree_util.tree_leaves(tree))


# ---------------------------------------------------------------------------------------------
# Policies of an agent on a finite model.


def greedy_policy(agent: Agent, qf: QFunction, model: LinearModel) -> Array:
  """The agent's greedy policy on every (step, state) of a finite model (Algorithm 1, line 14).

  ``pi_h(s) = agent.act(qf, h, phi_h(s, .), s == fail_state)``, vmapped over all ``(h, s)``: the
  very rule the agent acts by during training (argmax of its Q-values, with the agent's own
  tie-breaking).

  Args:
    agent: an ``Agent`` (``dr_lsvi_ucb`` / ``lsvi_ucb``).
    qf: one ``QFunction`` (no batch axis; ``vmap`` for seeds/episodes).
    model: ``LinearModel`` with ``phi [H, S, A, d]``.

  Returns:
    ``[H, S]`` int32 action indices.
  """
  chex.assert_rank(model.phi, 4)
  H, S, A, d = model.phi.shape
  chex.assert_shape(qf.w, (H, d))
  fail = jnp.arange(S) == model.fail_state  # [S]
  over_states = jax.vmap(agent.act, in_axes=(None, None, 0, 0))  # phi_h [S, A, d], fail [S]
  pi = jax.vmap(over_states, in_axes=(None, 0, 0, None))(qf, jnp.arange(H), model.phi, fail)
  chex.assert_shape(pi, (H, S))
  return pi.astype(jnp.int32)


@functools.partial(jax.jit, static_argnums=(0,))
def _policy_values(agent: Agent, qfs: QFunction, model: LinearModel, rho) -> Array:
  def one(qf):
    pi = greedy_policy(agent, qf, model)
    return planning.initial_value(model, planning.robust_evaluate(model, rho, pi))

  return jax.vmap(one)(qfs)


def policy_values(agent: Agent, qfs: QFunction, model: LinearModel, rho) -> Array:
  """``[K]`` robust values ``E_{s_1} V_1^{pi_k,rho}(s_1)`` of the greedy policies of ``qfs``.

  Args:
    agent: the agent that produced ``qfs``.
    qfs: ``QFunction`` with a leading axis ``K`` on every array leaf (``TrainOutput.qf``).
    model: finite ``LinearModel`` (the source domain / nominal model).
    rho: ``[H, d]`` uncertainty levels in ``[0, 1]`` (zeros: nominal values).

  Returns:
    ``[K]``.
  """
  H, _, _, d = model.phi.shape
  planning.validate_rho(rho, H, d)
  return _policy_values(agent, qfs, model, jnp.asarray(rho, model.phi.dtype))


def ave_subopt(agent: Agent, qfs: QFunction, model: LinearModel, rho) -> dict[str, Array]:
  """Exact per-episode suboptimality and the running ``AveSubopt(k)`` (Section 3.1).

  ``subopt_k = V_1^{*,rho}(s_1) - V_1^{pi_k,rho}(s_1)`` with both terms computed exactly by
  robust DP (``planning.robust_dp`` / ``planning.robust_evaluate``) and ``pi_k`` the greedy policy
  of episode ``k``'s Q-function; ``AveSubopt(k) = (1/k) sum_{j <= k} subopt_j``. The initial
  state is averaged over ``model.init_dist`` (the paper's ``s_1^k``; deterministic ``x1`` for the
  simulated linear MDP).

  Args:
    agent: the agent that produced ``qfs``.
    qfs: per-episode ``QFunction`` stacked over ``K`` (``make_train(..., record_q=True)``).
    model: finite source-domain ``LinearModel``.
    rho: ``[H, d]`` uncertainty levels in ``[0, 1]``, the ones the agent was trained with.

  Returns:
    dict with ``value_k [K]`` (robust value of ``pi_k``), ``subopt_k [K]``, ``ave_subopt [K]``
    and ``v_star []``.
  """
  values = policy_values(agent, qfs, model, rho)
  v_star = planning.initial_value(model, planning.robust_dp(model, rho).v)
  subopt = v_star - values
  k = jnp.arange(1, subopt.shape[-1] + 1, dtype=subopt.dtype)
  return dict(value_k=values, subopt_k=subopt, ave_subopt=jnp.cumsum(subopt, axis=-1) / k,
              v_star=v_star)


def theorem1_bound(estimation_error, H: int, d: int, p: float, c: float = 1.0,
                   beta=None) -> dict[str, Array]:
  """Right-hand side of Theorem 1 (eq. (AveSubopt-th)) as a curve over ``k = 1..K``.

  ``term1(k) = sqrt(2 H^3 log(3/p) / k)`` and ``term2(k) = (2 beta / k) sum_{j <= k} err_j``
  where ``err_j = sum_h sum_i phi_{h,i}^j sqrt([(Lambda_h^j)^{-1}]_ii)`` is the d-rectangular
  estimation error of episode ``j`` (``TrainOutput.estimation_error``). ``beta`` defaults to the
  theorem's ``c d H sqrt(iota)``, ``iota = log(3 d K H / p)`` with ``K = len(estimation_error)``
  (one fixed beta for the whole run, as in Algorithm 1). Pass the ``beta`` the agent actually
  used to get the bound for that run.

  Args:
    estimation_error: ``[K]`` per-episode estimation errors (leading batch axes allowed).
    H: horizon.
    d: feature dimension.
    p: failure probability in ``(0, 1)``.
    c: the absolute constant ``c > 0`` of Theorem 1 (unknown; 1 by default).
    beta: optional bonus multiplier ``>= 0`` overriding the theorem's choice.

  Returns:
    dict with ``term1 [K]``, ``term2 [..., K]``, ``total [..., K]`` and ``beta []``.
  """
  try:
    p = float(p)
  except (TypeError, ValueError):
    raise ValueError(f"p must be a number in (0, 1), got {p!r}") from None
  if not 0.0 < p < 1.0:
    raise ValueError(f"p must lie in (0, 1), got {p!r}")
  if int(H) < 1 or int(d) < 1:
    raise ValueError(f"H and d must be integers >= 1, got H={H!r}, d={d!r}")
  err = jnp.asarray(estimation_error)
  if err.ndim < 1 or err.shape[-1] < 1:
    raise ValueError(f"estimation_error must have shape [..., K] with K >= 1, got {err.shape}")
  K = err.shape[-1]
  if beta is None:
    if not float(c) > 0:
      raise ValueError(f"c must be > 0, got {c!r}")
    beta = float(c) * d * H * math.sqrt(math.log(3 * d * K * H / p))
  elif _concrete_tree(beta) and not np.all(np.asarray(beta) >= 0):
    raise ValueError(f"beta must be >= 0, got {beta!r}")
  dtype = jnp.result_type(err.dtype, float)
  k = jnp.arange(1, K + 1, dtype=dtype)
  term1 = jnp.sqrt(2.0 * H**3 * math.log(3.0 / p) / k)
  cs = jnp.cumsum(err.astype(dtype), axis=-1)
  b = jnp.asarray(beta, dtype)[..., None]
  shape = jnp.broadcast_shapes(b.shape, cs.shape)
  bc = lambda x: jnp.broadcast_to(x, shape)  # noqa: E731
  term2 = 2.0 * bc(b) * bc(cs) / bc(k)
  return dict(term1=term1, term2=term2, total=bc(term1) + term2, beta=jnp.asarray(beta, dtype))


# ---------------------------------------------------------------------------------------------
# Target domains: exact values.


def target_value(env: FiniteEnvironment, agent: Agent, qf: QFunction, params) -> Array:
  """Exact value ``E_{s_1} V_1^{pi, P_target}(s_1)`` of the agent's greedy policy in one domain.

  The policy acts on the target's features (``env.model(params).phi``); its value is the nominal
  (non-robust) value under the target kernel, i.e. the expected return the agent earns there.
  Pure and jit/vmap friendly (no validation).

  Args:
    env: a ``FiniteEnvironment``.
    agent: the agent.
    qf: one ``QFunction``.
    params: one environment-params value (e.g. ``target_params(source, q)``).

  Returns:
    ``[]`` value.
  """
  model = env.model(params)
  pi = greedy_policy(agent, qf, model)
  return planning.initial_value(model, planning.nominal_evaluate(model, pi))


@functools.partial(jax.jit, static_argnums=(0, 1))
def _target_values(env, agent, qf, params_batch):
  return jax.vmap(lambda prm: target_value(env, agent, qf, prm))(params_batch)


def exact_target_values(env: FiniteEnvironment, agent: Agent, qf: QFunction,
                        target_params_batch) -> Array:
  """Exact target-domain values of one learned policy, ``vmap``-ed over a params batch.

  No sampling: ``target_value`` for every entry of ``target_params_batch`` (leading axis ``N``
  on every leaf, e.g. ``linear_mdp.target_params(source, jnp.linspace(0, 1, 21))``). ``vmap``
  this over a leading seed axis of ``qf`` for a ``[seeds, N]`` table.

  Returns:
    ``[N]`` values.
  """
  if not isinstance(env, FiniteEnvironment):
    raise ValueError(f"env must be a FiniteEnvironment with an exact model, got {type(env)}")
  if _concrete_tree(target_params_batch):
    env.validate(target_params_batch)
  return _target_values(env, agent, qf, target_params_batch)


# ---------------------------------------------------------------------------------------------
# Monte Carlo with common random numbers.


def episode_key(key: chex.PRNGKey, episode, step) -> chex.PRNGKey:
  """The key of draw ``step`` in episode ``episode``: ``fold_in(fold_in(key, episode), step)``.

  ``env.step`` at 0-indexed step ``h`` gets ``episode_key(key, n, h)`` and ``env.reset`` gets
  ``episode_key(key, n, H)``. The draws are a deterministic function of ``(key, episode, step)``
  only, so two policies evaluated with the same key face the same random numbers (common random
  numbers; their difference has a smaller variance than with independent draws).
  """
  return jax.random.fold_in(jax.random.fold_in(key, episode), step)


def _rollout(env: Environment, act_fn, params, key, episode) -> Array:
  """Return of one episode; rewards after ``done`` are ignored."""
  H = env.horizon
  s0 = env.reset(episode_key(key, episode, H), params)

  def step(carry, h):
    s, alive, ret = carry
    phi_all = env.phi_all(s, params)
    fail = env.is_fail(s, params)
    a = act_fn(h, phi_all, fail)
    s2, r, done = env.step(episode_key(key, episode, h), s, a, params)
    ret = ret + jnp.where(alive, r, 0.0)
    return (s2, jnp.logical_and(alive, jnp.logical_not(done)), ret), None

  dtype = jnp.result_type(float)
  (_, _, ret), _ = jax.lax.scan(step, (s0, jnp.asarray(True), jnp.zeros((), dtype)),
                                jnp.arange(H))
  return ret


@functools.partial(jax.jit, static_argnums=(0, 1, 5))
def _mc(env, agent, qf, params, key, num_episodes):
  act_fn = lambda h, phi_all, fail: agent.act(qf, h, phi_all, fail)  # noqa: E731
  returns = jax.vmap(lambda n: _rollout(env, act_fn, params, key, n))(jnp.arange(num_episodes))
  mean = jnp.mean(returns)
  stderr = jnp.std(returns, ddof=1) / jnp.sqrt(num_episodes) if num_episodes > 1 else (
      jnp.zeros_like(mean))
  return dict(mean=mean, stderr=stderr, returns=returns)


def mc_evaluate(env: Environment, agent: Agent, qf: QFunction, params: Any, key: chex.PRNGKey,
                num_episodes: int) -> dict[str, Array]:
  """Monte Carlo value of the agent's greedy policy in one domain, with common random numbers.

  Runs ``num_episodes`` rollouts (``vmap``-ed) of ``agent.act`` in ``env`` with ``params``; the
  randomness of episode ``n``, step ``h`` is ``episode_key(key, n, h)`` (see there), so two
  policies evaluated with the same ``key`` see the same draws. Works for any ``Environment``
  (e.g. the American put option, which has no finite model). Jitted with ``env``, ``agent`` and
  ``num_episodes`` static; ``vmap`` over ``qf`` (seeds) and ``params`` (targets) at the call site.

  Args:
    env: an ``Environment``.
    agent: the agent.
    qf: one ``QFunction``.
    params: one environment-params value.
    key: PRNG key.
    num_episodes: number of rollouts ``N >= 1`` (static).

  Returns:
    dict with ``mean []``, ``stderr []`` (``std(ddof=1) / sqrt(N)``) and ``returns [N]``.
  """
  if not isinstance(num_episodes, (int, np.integer)) or num_episodes < 1:
    raise ValueError(f"num_episodes must be an integer >= 1, got {num_episodes!r}")
  if _concrete_tree(params):
    env.validate(params)
  return _mc(env, agent, qf, params, key, int(num_episodes))
