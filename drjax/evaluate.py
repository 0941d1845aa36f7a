"""Evaluating learned policies: exact AveSubopt curves, Theorem 1's bound, target-domain values.

* ``greedy_policy`` turns an agent's ``QFunction`` into a deterministic tabular policy on a finite
  model (the agent's own ``act`` rule, with fail flag ``s == fail_state``).
* ``ave_subopt`` computes ``V_1^{*,rho}(s_1) - V_1^{pi_k,rho}(s_1)`` exactly for every episode's
  policy ``pi_k`` (robust DP, ``drjax.planning``) and the running average ``AveSubopt(k)`` of
  Section 3.1 (eq. AveSubopt), ``k = 1..K``.
* ``theorem1_bound`` evaluates the right-hand side of Theorem 1 (eq. (AveSubopt-th)).
* ``exact_target_values`` / ``mc_evaluate`` value a learned policy in target domains: exactly
  (finite environments with a model) or by Monte Carlo with common random numbers.
* ``put_option_exact_values`` values a policy of the American put option exactly: on the
  recombining price lattice for a fixed initial price, integrated exactly over a uniform initial
  price (between the policy's breakpoints the value is linear in ``s0``);
  ``put_option_optimal_values`` does the same for the exact optimal (robust) stopping policies.
  These live in ``drjax.put_lattice`` and are re-exported here.

Functions are written for one Q-function and one environment-params value; batch seeds (a
leading axis on ``qf``) and targets (a leading axis on params) with ``jax.vmap``.
``exact_target_values`` already maps over a params batch. Host-side checks (``TypeError`` /
``ValueError`` naming the argument) run before anything is traced (values when the arguments are
concrete); the numerical cores are jitted with the environment and agent as static arguments
(one compilation per environment/agent/shape). Steps ``h`` and actions are 0-based.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import chex
import jax
import jax.numpy as jnp

from drjax import _checks, planning
from drjax.agents.base import Agent, QFunction
# episode_key and rollout_return live with the environments: the baselines, below evaluation,
# roll out with them too.
from drjax.envs.base import Environment, FiniteEnvironment, LinearModel, episode_key, rollout_return
from drjax._precision import exact_matmuls
from drjax.protocols import unchecked
# The put-option lattice evaluation lives in drjax.put_lattice; its names stay importable here.
from drjax.put_lattice import (  # noqa: F401  pylint: disable=unused-import
    PutPolicy,
    _check_put_args,
    _policy_node_actions,
    _put_agent_action_fn,
    put_option_agent_policy,
    put_option_exact_values,
    put_option_node_actions,
    put_option_optimal_policy,
    put_option_optimal_values,
    put_option_piecewise_values,
    put_option_policy,
    put_option_policy_values,
)

Array = jax.Array

__all__ = [
    "greedy_policy",
    "policy_values",
    "ave_subopt",
    "theorem1_bound",
    "target_value",
    "exact_target_values",
    "offline_subopt",
    "offline_bound",
    "episode_key",
    "mc_evaluate",
    "put_option_node_actions",
    "PutPolicy",
    "put_option_policy",
    "put_option_piecewise_values",
    "put_option_agent_policy",
    "put_option_optimal_policy",
    "put_option_exact_values",
    "put_option_optimal_values",
    "put_option_policy_values",
]


# ---------------------------------------------------------------------------------------------
# Argument checks.


def _qf_shape(qf, H: int, d: int, stacked: bool) -> None:
  """``qf.w`` must be ``[H, d]`` (one Q-function) or ``[K, H, d]`` (stacked over episodes)."""
  _checks.qfunction("qfs" if stacked else "qf", qf, H, d, stacked=stacked)


def _check_key(key) -> None:
  """``key`` must be a PRNG key (``jax.random.key`` / ``PRNGKey``), not an integer."""
  _checks.key("key", key)


def _check_agent(agent, H: int, d: int, A: int, where: str = "model") -> None:
  """``agent`` a drjax agent whose ``(H, d, A)`` match the model's / environment's."""
  _checks.agent("agent", agent)
  _checks.agent_dims(agent, (H, d, A), f"the {where}'s")


def _model_and_agent(agent, model) -> tuple[int, int, int, int]:
  _checks.model(model)
  H, S, A, d = model.phi.shape
  _check_agent(agent, H, d, A)
  return H, S, A, d


# ---------------------------------------------------------------------------------------------
# Policies of an agent on a finite model.


@exact_matmuls
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
    ``[H, S]`` int32 action indices (row ``h``: 0-based step, column ``s``: state).
  """
  H, S, A, d = _model_and_agent(agent, model)
  _qf_shape(qf, H, d, stacked=False)
  fail = jnp.arange(S) == model.fail_state  # [S]
  # over states: phi_h [S, A, d], fail [S]
  over_states = jax.vmap(unchecked(agent.act), in_axes=(None, None, 0, 0))
  pi = jax.vmap(over_states, in_axes=(None, 0, 0, None))(qf, jnp.arange(H), model.phi, fail)
  chex.assert_shape(pi, (H, S))
  return pi.astype(jnp.int32)


@functools.partial(jax.jit, static_argnums=(0,))
def _policy_values(agent: Agent, qfs: QFunction, model: LinearModel, rho) -> Array:
  def one(qf):
    pi = greedy_policy(agent, qf, model)
    return planning.initial_value(model, planning.robust_evaluate(model, rho, pi))

  return jax.vmap(one)(qfs)


@exact_matmuls
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
  H, _, _, d = _model_and_agent(agent, model)
  planning.validate_rho(rho, H, d)
  _qf_shape(qf=qfs, H=H, d=d, stacked=True)
  return _policy_values(agent, qfs, model, jnp.asarray(rho, model.phi.dtype))


@exact_matmuls
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


@exact_matmuls
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
  H = _checks.integer("H", H, 1)
  d = _checks.integer("d", d, 1)
  _checks.numbers_(p=p, c=c, estimation_error=estimation_error)
  _checks.finite("estimation_error", estimation_error)
  if beta is not None:
    _checks.numeric("beta", beta)
    _checks.in_range("beta", beta, 0)
  p = _checks.number("p", p, 0, 1, lo_open=True, hi_open=True)
  err = jnp.asarray(estimation_error)
  if err.ndim < 1 or err.shape[-1] < 1:
    raise ValueError(f"estimation_error must have shape [..., K] with K >= 1, got {err.shape}")
  K = err.shape[-1]
  if beta is None:
    c = _checks.number("c", c, 0, lo_open=True)
    beta = float(c) * d * H * math.sqrt(math.log(3 * d * K * H / p))
  dtype = jnp.result_type(err.dtype, float)
  k = jnp.arange(1, K + 1, dtype=dtype)
  term1 = jnp.sqrt(2.0 * H**3 * math.log(3.0 / p) / k)
  cs = jnp.cumsum(err.astype(dtype), axis=-1)
  b = jnp.asarray(beta, dtype)[..., None]
  shape = jnp.broadcast_shapes(b.shape, cs.shape)
  bc = lambda x: jnp.broadcast_to(x, shape)  # noqa: E731
  term2 = 2.0 * bc(b) * bc(cs) / bc(k)
  return dict(term1=term1, term2=term2, total=bc(term1) + term2, beta=jnp.asarray(beta, dtype))


OBJECTIVES = ("tv", "tv-reg", "kl-reg", "chi2-reg", "kl")


def _optimal_and_policy_values(model, objective: str, level, pi):
  if objective == "tv":
    return planning.robust_dp(model, level).v, planning.robust_evaluate(model, level, pi)
  if objective == "kl":
    return (planning.kl_constrained_dp(model, level).v,
            planning.kl_constrained_evaluate(model, level, pi))
  if objective in ("tv-reg", "kl-reg", "chi2-reg"):
    div = objective[:-len("-reg")]
    return (planning.regularized_dp(model, level, div).v,
            planning.regularized_evaluate(model, level, div, pi))
  raise ValueError(f"objective must be one of {OBJECTIVES}, got {objective!r}")


@exact_matmuls
def offline_subopt(agent, qf: QFunction, model: LinearModel, level, objective: str | None = None
                   ) -> Array:
  """``SubOpt(pi_hat) = V*_1 - V^{pi_hat}_1`` under the agent's robust objective, exactly.

  The learned greedy policy (``agent.act``) is evaluated by exact planning on the finite model
  (``drjax.planning``): ``objective="tv"`` (DR-LSVI-UCB, DRPVI, VA-DRPVI, PEVI: the TV-constrained
  robust value at radius ``level = rho [H, d]``; ``rho = 0`` is the nominal suboptimality),
  ``"tv-reg"`` / ``"kl-reg"`` / ``"chi2-reg"`` (R2PVI: the regularized robust value with weight
  ``level``), ``"kl"`` (DRVI-L: KL-constrained, a tolerance-limited search). Default: the agent's
  own (``agent.config.objective``). Values at step 1 are weighted by the model's initial
  distribution. Pure (vmap over seeds).
  """
  _checks.agent("agent", agent)
  objective = objective if objective is not None else getattr(agent.config, "objective", "tv")
  _checks.choice("objective", objective, OBJECTIVES)
  H, _, _, d = _model_and_agent(agent, model)
  if objective == "tv":
    planning.validate_rho(level, H, d)
  elif objective == "kl":
    planning.validate_kl_radius(level, H, d)
  else:
    planning.validate_weight(level, H, d)
  pi = greedy_policy(agent, qf, model)
  v_star, v_pi = _optimal_and_policy_values(model, objective, level, pi)
  return planning.initial_value(model, v_star) - planning.initial_value(model, v_pi)


@exact_matmuls
def offline_bound(agent, qf: QFunction, model: LinearModel, rho, beta=None) -> Array:
  """Theorem 4.4's data-dependent bound of DRPVI (Liu & Xu 2024b), computed exactly:

  ``beta * sup_{P in U^rho(P0)} sum_h E_{pi*, P}[ sum_i ||phi_i(s_h, a_h) 1_i||_{Lambda_h^-1} ]``

  with ``pi*`` the robust-optimal policy at ``rho`` and the summand the agent's own width
  (``agent.width``: the d-rectangular ``sum_i phi_i sqrt([Lambda_h^-1]_ii)`` for DRPVI and
  VA-DRPVI, where VA-DRPVI's ``Lambda`` is its weighted ``Sigma``; the ellipsoid norm for PEVI,
  whose own bound, Jin et al. 2021 Thm 4.4, is twice this at ``rho = 0``). The supremum of an
  expected cumulative cost over the d-rectangular TV set is a robust evaluation of the negated
  cost (the set is rectangular, so dynamic programming is exact). ``beta`` defaults to
  ``qf.beta``. Compare it with ``offline_subopt`` to see how tight the bound is.
  """
  H, _, _, d = _model_and_agent(agent, model)
  if not callable(getattr(agent, "width", None)):
    raise TypeError(f"agent must be an offline agent (with width: PEVI, DRPVI, VA-DRPVI, ...), "
                    f"got {getattr(agent, 'name', type(agent).__name__)!r}")
  _qf_shape(qf, H, d, stacked=False)
  planning.validate_rho(rho, H, d)
  if beta is not None:
    _checks.array("beta", beta, ())
    _checks.in_range("beta", beta, 0)
  pi_star = planning.robust_dp(model, rho).policy
  width = unchecked(agent.width)
  u = jax.vmap(lambda h: width(qf, h, model.phi[h]))(jnp.arange(H))  # [H, S, A]
  cost = model._replace(reward=-u.astype(model.reward.dtype))
  sup = -planning.initial_value(cost, planning.robust_evaluate(cost, rho, pi_star))
  return (qf.beta if beta is None else beta) * sup


# ---------------------------------------------------------------------------------------------
# Target domains: exact values.


@exact_matmuls
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
  _checks.environment("env", env, finite_=True)
  _check_agent(agent, env.horizon, env.feature_dim, env.num_actions, "environment")
  model = env.model(params)
  pi = greedy_policy(agent, qf, model)
  return planning.initial_value(model, planning.nominal_evaluate(model, pi))


@functools.partial(jax.jit, static_argnums=(0, 1))
def _target_values(env, agent, qf, params_batch):
  return jax.vmap(lambda prm: target_value(env, agent, qf, prm))(params_batch)


@exact_matmuls
def exact_target_values(env: FiniteEnvironment, agent: Agent, qf: QFunction,
                        target_params_batch) -> Array:
  """Exact target-domain values of one learned policy, ``vmap``-ed over a params batch.

  No sampling: ``target_value`` for every entry of ``target_params_batch`` (leading axis ``N``
  on every leaf, e.g. ``linear_mdp.target_params(source, jnp.linspace(0, 1, 21))``). ``vmap``
  this over a leading seed axis of ``qf`` for a ``[seeds, N]`` table.

  Returns:
    ``[N]`` values.
  """
  _checks.environment("env", env, finite_=True)
  _check_agent(agent, env.horizon, env.feature_dim, env.num_actions, "environment")
  _qf_shape(qf, env.horizon, env.feature_dim, stacked=False)
  _checks.env_params(env, target_params_batch, "target_params_batch")
  return _target_values(env, agent, qf, target_params_batch)


# ---------------------------------------------------------------------------------------------
# Monte Carlo with common random numbers.


@functools.partial(jax.jit, static_argnums=(0, 1, 5))
def _mc(env, agent, qf, params, key, num_episodes):
  act_fn = lambda k, h, phi_all, fail: unchecked(agent.act)(qf, h, phi_all, fail)  # noqa: E731
  returns = jax.vmap(lambda n: rollout_return(env, act_fn, params, key, n))(
      jnp.arange(num_episodes))
  mean, stderr = _checks.mean_stderr(returns, xp=jnp)
  return dict(mean=mean, stderr=stderr, returns=returns)


@exact_matmuls
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
  _checks.environment("env", env)
  _check_agent(agent, env.horizon, env.feature_dim, env.num_actions, "environment")
  _qf_shape(qf, env.horizon, env.feature_dim, stacked=False)
  _checks.integer("num_episodes", num_episodes, 1)
  _check_key(key)
  if _checks.is_concrete(params):
    env.validate(params)
  return _mc(env, agent, qf, params, key, int(num_episodes))
