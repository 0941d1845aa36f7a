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

Functions are written for one Q-function and one environment-params value; batch seeds (a
leading axis on ``qf``) and targets (a leading axis on params) with ``jax.vmap``.
``exact_target_values`` already maps over a params batch. Host-side checks (``ValueError``) run
when the arguments are concrete, before anything is traced; the numerical cores are jitted with
the environment and agent as static arguments (one compilation per environment/agent/shape).
"""

from __future__ import annotations

import functools
import math
from typing import Any, NamedTuple

import chex
import jax
import jax.numpy as jnp
import numpy as np

from drjax import _checks, planning
from drjax.agents.base import Agent, QFunction
from drjax.envs.base import Environment, FiniteEnvironment, LinearModel
from drjax._precision import exact_matmuls

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


def _concrete_tree(tree) -> bool:
  return not any(isinstance(x, jax.core.Tracer) for x in jax.tree_util.tree_leaves(tree))


# ---------------------------------------------------------------------------------------------
# Policies of an agent on a finite model.


def _qf_shape(qf, H: int, d: int, stacked: bool) -> None:
  """``qf.w`` must be ``[H, d]`` (one Q-function) or ``[K, H, d]`` (stacked over episodes)."""
  if not isinstance(qf, QFunction):
    raise TypeError(f"qf must be a QFunction (agent.plan / TrainOutput.final_qf), got "
                    f"{type(qf).__name__}")
  w = np.shape(qf.w)
  if stacked and len(w) == 2 and w == (H, d):
    raise ValueError("qfs must be the per-episode Q-functions stacked over K episodes, w [K, H, "
                     f"d] = [K, {H}, {d}], got a single Q-function (w {w}); train with "
                     "make_train(..., record_q=True) and pass TrainOutput.qf")
  want = (H, d) if not stacked else (None, H, d)
  if len(w) != len(want) or any(a is not None and a != b for a, b in zip(want, w)):
    shape = "[K, H, d]" if stacked else "[H, d]"
    raise ValueError(f"{'qfs' if stacked else 'qf'}.w must have shape {shape} with (H, d) = "
                     f"({H}, {d}) from the model, got {w}")


def _check_key(key) -> None:
  """``key`` must be a PRNG key (``jax.random.key`` / ``PRNGKey``), not an integer."""
  if isinstance(key, (int, np.integer)) or (np.ndim(key) == 0 and not jax.dtypes.issubdtype(
      getattr(key, "dtype", np.float64), jax.dtypes.prng_key)):
    raise TypeError(f"key must be a PRNG key (jax.random.key(seed) or jax.random.PRNGKey(seed)), "
                    f"got {type(key).__name__} {key!r}")


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
    ``[H, S]`` int32 action indices.
  """
  _checks.model(model)
  H, S, A, d = model.phi.shape
  _qf_shape(qf, H, d, stacked=False)
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
  _checks.model(model)
  H, _, _, d = model.phi.shape
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
  _checks.integer("H", H, 1)
  _checks.integer("d", d, 1)
  _checks.numbers_(p=p, c=c)
  _checks.finite("estimation_error", estimation_error)
  if beta is not None:
    _checks.in_range("beta", beta, 0)
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
    if not (math.isfinite(float(c)) and float(c) > 0):
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
  objective = objective or getattr(agent.config, "objective", "tv")
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
  H = model.phi.shape[0]
  pi_star = planning.robust_dp(model, rho).policy
  u = jax.vmap(lambda h: agent.width(qf, h, model.phi[h]))(jnp.arange(H))  # [H, S, A]
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
  if not isinstance(env, FiniteEnvironment):
    raise ValueError(f"env must be a FiniteEnvironment with an exact model, got {type(env)}")
  if _concrete_tree(target_params_batch):
    env.validate(target_params_batch)
  return _target_values(env, agent, qf, target_params_batch)


# ---------------------------------------------------------------------------------------------
# Monte Carlo with common random numbers.


@exact_matmuls
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
  _checks.integer("num_episodes", num_episodes, 1)
  _check_key(key)
  if _concrete_tree(params):
    env.validate(params)
  return _mc(env, agent, qf, params, key, int(num_episodes))


# ---------------------------------------------------------------------------------------------
# American put option: exact values on the price lattice.


def _put_agent_action_fn(env, agent: Agent, qf: QFunction):
  """``(h, price) -> action`` of the agent's greedy policy (not exited, ``fail = False``)."""
  from drjax.envs.put_option import PutOptionState  # pylint: disable=g-import-not-at-top

  def action(h, price):
    state = PutOptionState(price=price, exited=jnp.asarray(False),
                           h=jnp.asarray(h, jnp.int32))
    return agent.act(qf, h, env.phi_all(state, None), jnp.asarray(False)).astype(jnp.int32)

  return action


@exact_matmuls
def put_option_node_actions(action_fn, s0, horizon: int) -> Array:
  """``[H, H]`` actions of a Markov policy ``action_fn(h, price)`` at every lattice node.

  Entries with ``j > h`` (not nodes) are set to exercise; ``lattice_value`` never reaches them.
  """
  from drjax.envs import put_option as po  # pylint: disable=g-import-not-at-top

  hs, js = po.lattice_nodes(horizon)
  prices = po.lattice_prices(s0, horizon)
  acts = jax.vmap(action_fn)(jnp.asarray(hs), prices[hs, js])
  return jnp.zeros((horizon, horizon), jnp.int32).at[hs, js].set(acts)


class PutPolicy(NamedTuple):
  """A Markov put-option policy as a piecewise-constant rule in the price, per step.

  At step ``h`` the action at price ``s`` is ``region_action[h, r]`` with ``r`` the number of valid
  breakpoints ``<= s``. Built by ``put_option_policy`` from any ``action_fn(h, price)``.

  Attributes:
    breakpoints: ``[H, M]`` prices where the step-h action changes (ascending where valid).
    valid: ``[H, M]`` bool, which breakpoints are real.
    region_action: ``[H, M + 1]`` int32 action left of the first breakpoint, then right of each.
    count: ``[H]`` number of changes the grid search saw (``> M``: some were dropped).
  """

  breakpoints: Array
  valid: Array
  region_action: Array
  count: Array


@exact_matmuls
def put_option_policy(action_fn, horizon: int, init_low, init_high, *, grid_size: int = 1024,
                      max_changes: int = 8, iters: int = 60) -> PutPolicy:
  """The breakpoints of ``action_fn(h, .)`` over the prices reachable from ``[init_low, init_high]``.

  At step ``h`` the reachable prices are ``[init_low DOWN^h, init_high UP^h]``. A grid of
  ``grid_size`` prices locates the changes of action (at most one per grid cell is assumed: a
  pair of changes closer than the spacing, about 0.05 in price for H = 10, is invisible), and each
  of the first ``max_changes`` is refined by ``iters`` bisection steps to rounding precision.

  Args:
    action_fn: ``(h [] int, price []) -> [] int`` action (``EXERCISE = 0`` / ``HOLD = 1``).
    horizon: static ``H``.
    init_low, init_high: ``[]`` initial-price range.
    grid_size, max_changes, iters: static search settings.

  Returns:
    ``PutPolicy``.
  """
  from drjax.envs.put_option import DOWN, UP  # pylint: disable=g-import-not-at-top

  dtype = jnp.result_type(init_low, init_high, float)
  low = jnp.asarray(init_low, dtype)
  high = jnp.asarray(init_high, dtype)
  frac = jnp.linspace(0.0, 1.0, grid_size, dtype=dtype)

  def per_step(h):
    a = low * jnp.power(DOWN, h.astype(dtype))
    b = high * jnp.power(UP, h.astype(dtype))
    grid = a + (b - a) * frac
    acts = jax.vmap(lambda s: action_fn(h, s))(grid).astype(jnp.int32)
    change = acts[1:] != acts[:-1]
    count = jnp.sum(change)
    (idx,) = jnp.nonzero(change, size=max_changes, fill_value=grid_size - 2)
    left, right, a_left = grid[idx], grid[idx + 1], acts[idx]

    def bisect(_, lr):
      l, r = lr
      mid = 0.5 * (l + r)
      same = jax.vmap(lambda s: action_fn(h, s))(mid) == a_left
      return jnp.where(same, mid, l), jnp.where(same, r, mid)

    left, right = jax.lax.fori_loop(0, iters, bisect, (left, right))
    valid = jnp.arange(max_changes) < count
    region = jnp.concatenate([acts[:1], jnp.where(valid, acts[idx + 1], acts[-1])])
    return 0.5 * (left + right), valid, region, count

  return PutPolicy(*jax.vmap(per_step)(jnp.arange(horizon)))


def _policy_node_actions(policy: PutPolicy, prices: Array) -> Array:
  """``[H, H]`` actions of ``policy`` at node prices ``[H, H]`` (row h uses step h's rule)."""
  above = policy.valid[:, None, :] & (policy.breakpoints[:, None, :] <= prices[:, :, None])
  region = jnp.sum(above, axis=-1)  # [H, H]
  return jnp.take_along_axis(policy.region_action, region, axis=1)


@exact_matmuls
def put_option_piecewise_values(policy: PutPolicy, p_us, init_low, init_high, rho=0.0, *,
                                integrate: bool = True) -> Array:
  """Exact values ``[N]`` of a ``PutPolicy`` in the targets ``p_us``, averaged over ``s0``.

  For a fixed ``s0`` the value is a backward induction on the lattice (``lattice_value``). The
  policy at node ``(h, j)`` changes with ``s0`` only where a step-h breakpoint ``b`` meets the
  node price, ``s0 = b / (UP^j DOWN^(h-j))``; between those points and the payoff kinks
  ``s0 = 100 / (UP^j DOWN^(h-j))`` the value is linear in ``s0``, so the midpoint rule on those
  pieces is the exact average over ``s0 ~ U[init_low, init_high]``.

  Args:
    policy: ``PutPolicy`` (``put_option_policy``), built for the same ``[init_low, init_high]``.
    p_us: ``[N]`` target up-probabilities.
    init_low, init_high: ``[]`` initial-price range.
    rho: ``[]`` TV radius of a robust evaluation (0: expected return; see ``lattice_value``).
    integrate: static; ``False`` values the policy at ``s0 = init_low`` only (a fixed price).

  Returns:
    ``[N]`` values.
  """
  from drjax.envs import put_option as po  # pylint: disable=g-import-not-at-top

  H, M = policy.breakpoints.shape
  dtype = jnp.result_type(policy.breakpoints, init_low, init_high)
  low = jnp.asarray(init_low, dtype)
  high = jnp.asarray(init_high, dtype)
  p_us = jnp.asarray(p_us, dtype)
  chex.assert_rank(p_us, 1)

  def values_at(s0):  # [N]
    prices = po.lattice_prices(s0, H)
    acts = _policy_node_actions(policy, prices)
    return jax.vmap(lambda p: po.lattice_value(acts, prices, p, rho))(p_us)

  if not integrate:
    return values_at(low)
  hs, js = po.lattice_nodes(H)
  scale = jnp.power(po.UP, js.astype(dtype)) * jnp.power(po.DOWN, (hs - js).astype(dtype))
  cand = jnp.where(policy.valid[hs], policy.breakpoints[hs] / scale[:, None], low)  # [n, M]
  pts = jnp.sort(jnp.clip(jnp.concatenate([low[None], high[None], cand.ravel(),
                                           po.STRIKE / scale]), low, high))
  mids = 0.5 * (pts[1:] + pts[:-1])
  widths = pts[1:] - pts[:-1]
  span = high - low
  integral = jnp.sum(widths[:, None] * jax.vmap(values_at)(mids), axis=0)
  return jnp.where(span > 0, integral / jnp.where(span > 0, span, 1.0), values_at(low))


@exact_matmuls
def put_option_policy_values(action_fn, horizon: int, p_us, init_low, init_high, *,
                             rho=0.0, grid_size: int = 1024, max_changes: int = 8,
                             iters: int = 60) -> dict[str, Array]:
  """Exact values of a Markov put-option policy ``action_fn(h, price) -> action``.

  ``put_option_policy`` (breakpoints of the rule, per step) then ``put_option_piecewise_values``
  (exact lattice values, integrated exactly over a uniform initial price). Fixed-shape JAX:
  jit/vmap it over policies and params.

  Args:
    action_fn: ``(h [] int, price []) -> [] int`` action (``EXERCISE = 0`` / ``HOLD = 1``).
    horizon: static ``H``.
    p_us: ``[N]`` target up-probabilities.
    init_low, init_high: ``[]`` initial-price range (equal: a fixed initial price).
    rho: ``[]`` TV radius of a robust evaluation (0: expected return).
    grid_size, max_changes, iters: static breakpoint-search settings (``put_option_policy``).

  Returns:
    dict with ``values [N]`` and ``max_count []``, the largest number of changes per step the
    grid search saw (at most ``max_changes`` for an exact result).
  """
  policy = put_option_policy(action_fn, horizon, init_low, init_high, grid_size=grid_size,
                             max_changes=max_changes, iters=iters)
  values = put_option_piecewise_values(policy, p_us, init_low, init_high, rho)
  return dict(values=values, max_count=jnp.max(policy.count))


def _check_put_args(env, p_us, init_low, init_high) -> None:
  from drjax.envs.put_option import PutOption  # pylint: disable=g-import-not-at-top

  if not isinstance(env, PutOption):
    raise TypeError(f"env must be a PutOption, got {type(env).__name__}")
  if p_us is not None and _concrete_tree(p_us):
    p = np.asarray(p_us, np.float64)
    if p.ndim != 1 or not np.all((p >= 0) & (p <= 1)):
      raise ValueError(f"p_us must be a 1-d array of probabilities in [0, 1], got {p_us!r}")
  if _concrete_tree((init_low, init_high)):
    lo, hi = np.asarray(init_low, np.float64), np.asarray(init_high, np.float64)
    if lo.shape or hi.shape or not (np.isfinite(lo) and np.isfinite(hi) and 0 < lo <= hi):
      raise ValueError(f"init_low, init_high must be scalars with 0 < init_low <= init_high, "
                       f"got init_low={init_low!r}, init_high={init_high!r}")


@exact_matmuls
def put_option_agent_policy(env, agent: Agent, qf: QFunction, init_low, init_high,
                            **kwargs) -> PutPolicy:
  """``PutPolicy`` of an agent's greedy policy ``agent.act(qf, h, env.phi_all(s), fail=False)``.

  The exit state after exercising pays nothing whatever the policy does there, so the policy
  only matters at the lattice nodes. ``**kwargs``: search settings of ``put_option_policy``.
  """
  _check_put_args(env, None, init_low, init_high)
  return put_option_policy(_put_agent_action_fn(env, agent, qf), env.horizon, init_low,
                           init_high, **kwargs)


@exact_matmuls
def put_option_optimal_policy(env, init_low, init_high, *, source_p_u=0.5, rho=0.0,
                              **kwargs) -> PutPolicy:
  """``PutPolicy`` of the optimal (``rho = 0``) or robust-optimal stopping rule of the source.

  The rule is ``put_option.optimal_stopping_action(h, s, H, source_p_u, rho)``: robust against
  every up-probability within TV distance ``rho`` of ``source_p_u`` at each hold (an (s, a)-
  rectangular TV ball around the price move; for a put the worst case is ``source_p_u + rho``).
  """
  from drjax.envs.put_option import optimal_stopping_action  # pylint: disable=g-import-not-at-top

  _check_put_args(env, None, init_low, init_high)
  H = env.horizon
  fn = lambda h, s: optimal_stopping_action(h, s, H, source_p_u, rho)  # noqa: E731
  return put_option_policy(fn, H, init_low, init_high, **kwargs)


@exact_matmuls
def put_option_exact_values(env, agent: Agent, qf: QFunction, p_us, init_low, init_high,
                            **kwargs) -> dict[str, Array]:
  """Exact expected returns of an agent's greedy policy in put-option targets ``p_us``.

  The initial price is uniform on ``[init_low, init_high]`` (the paper's per-episode draw; equal
  bounds: a fixed ``s0``, the notebook's per-seed draw). No sampling noise: the lattice values are
  exact and the average over ``s0`` is integrated exactly between the policy's breakpoints
  (``put_option_policy_values``). Pure JAX; vmap over ``qf`` (seeds) at the call site.

  Args:
    env: a ``PutOption``.
    agent: the agent that produced ``qf``.
    qf: one ``QFunction``.
    p_us: ``[N]`` target up-probabilities.
    init_low, init_high: ``[]`` initial-price range (e.g. the source params' fields).
    **kwargs: breakpoint-search settings of ``put_option_policy``.

  Returns:
    dict with ``values [N]`` and ``max_count []``.
  """
  _check_put_args(env, p_us, init_low, init_high)
  return put_option_policy_values(_put_agent_action_fn(env, agent, qf), env.horizon, p_us,
                                  init_low, init_high, **kwargs)


@exact_matmuls
def put_option_optimal_values(env, p_us, init_low, init_high, *, source_p_u=0.5, rho=0.0,
                              **kwargs) -> dict[str, Array]:
  """Exact target returns of the optimal (robust) stopping policy of the source domain.

  See ``put_option_optimal_policy``; the policy is evaluated exactly in each target ``p_u`` like
  a learned policy (``put_option_piecewise_values``).

  Returns:
    dict with ``values [N]`` and ``max_count []``.
  """
  _check_put_args(env, p_us, init_low, init_high)
  policy = put_option_optimal_policy(env, init_low, init_high, source_p_u=source_p_u, rho=rho,
                                     **kwargs)
  return dict(values=put_option_piecewise_values(policy, p_us, init_low, init_high),
              max_count=jnp.max(policy.count))
