"""Exact values of American put-option policies on the recombining price lattice.

For a fixed initial price ``s0`` the put option of ``drjax.envs.put_option`` is a finite MDP on
the lattice of prices ``s0 UP**j DOWN**(h - j)`` (``lattice_prices`` / ``lattice_value`` /
``optimal_stopping_action`` there). This module values whole policies on it, exactly:

* ``put_option_policy`` turns any Markov rule ``action_fn(h, price)`` into a ``PutPolicy``: per
  step, the prices where the action changes (a grid search refined by bisection);
* ``put_option_piecewise_values`` values a ``PutPolicy`` in target up-probabilities ``p_us``,
  averaged exactly over a uniform initial price (between the policy's breakpoints and the payoff
  kinks the value is linear in ``s0``, so the midpoint rule on those pieces is exact);
* ``put_option_agent_policy`` / ``put_option_exact_values``: the same for an agent's greedy policy;
  ``put_option_optimal_policy`` / ``put_option_optimal_values``: for the exact optimal (robust)
  stopping rule of the source domain.

Every function is fixed-shape JAX (jit/vmap over Q-functions, params and rho); host-side checks
(``TypeError``/``ValueError`` naming the argument) run on concrete arguments before anything is
traced. Steps ``h`` are 0-based (``h = 0`` is the first trading step); actions are
``EXERCISE = 0`` / ``HOLD = 1``. The functions are also importable from ``drjax.evaluate``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from drjax import _checks
from drjax._precision import exact_matmuls
from drjax.agents.base import Agent, QFunction

Array = jax.Array

__all__ = [
    "PutPolicy",
    "put_option_node_actions",
    "put_option_policy",
    "put_option_piecewise_values",
    "put_option_policy_values",
    "put_option_agent_policy",
    "put_option_optimal_policy",
    "put_option_exact_values",
    "put_option_optimal_values",
]


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

  Entry ``[h, j]`` is node ``(h, j)``: 0-based step ``h``, ``j`` up-moves. Entries with ``j > h``
  (not nodes) are set to exercise; ``lattice_value`` never reaches them.
  """
  from drjax.envs import put_option as po  # pylint: disable=g-import-not-at-top

  _check_action_fn(action_fn)
  horizon = _checks.integer("horizon", horizon, 1)
  _check_price("s0", s0)

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

  _check_action_fn(action_fn)
  horizon = _checks.integer("horizon", horizon, 1)
  _check_init(init_low, init_high)
  grid_size, max_changes, iters = _search_settings(grid_size, max_changes, iters)

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

    left, right = _checks.bisect(lambda mid: jax.vmap(lambda s: action_fn(h, s))(mid) == a_left,
                                 left, right, iters)
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

  _check_policy(policy)
  _check_p_us(p_us)
  _check_init(init_low, init_high)
  _check_unit("rho", rho)
  integrate = _checks.boolean("integrate", integrate)
  H, M = policy.breakpoints.shape
  dtype = jnp.result_type(policy.breakpoints, init_low, init_high)
  low = jnp.asarray(init_low, dtype)
  high = jnp.asarray(init_high, dtype)
  p_us = jnp.asarray(p_us, dtype)

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
  _check_p_us(p_us)
  _check_unit("rho", rho)
  policy = put_option_policy(action_fn, horizon, init_low, init_high, grid_size=grid_size,
                             max_changes=max_changes, iters=iters)
  values = put_option_piecewise_values(policy, p_us, init_low, init_high, rho)
  return dict(values=values, max_count=jnp.max(policy.count))


# ---------------------------------------------------------------------------------------------
# Argument checks (host side; values only when concrete).


def _check_action_fn(action_fn) -> None:
  _checks.function("action_fn", action_fn, "(h [] int, price []) -> [] int action")


def _check_price(name: str, x) -> None:
  _checks.array(name, x, ())
  _checks.in_range(name, x, 0, lo_open=True)


def _check_unit(name: str, x) -> None:
  """A scalar in [0, 1] (a probability or a TV radius)."""
  _checks.array(name, x, ())
  _checks.in_range(name, x, 0, 1)


def _check_p_us(p_us) -> None:
  _checks.numeric("p_us", p_us)
  if np.ndim(p_us) != 1:
    raise ValueError(f"p_us must be a 1-d array of probabilities in [0, 1], got shape "
                     f"{tuple(np.shape(p_us))}")
  _checks.in_range("p_us", p_us, 0, 1)


def _check_init(init_low, init_high) -> None:
  """Scalars with ``0 < init_low <= init_high`` (the initial-price range)."""
  _check_price("init_low", init_low)
  _check_price("init_high", init_high)
  if _checks.is_concrete(init_low, init_high) and float(init_low) > float(init_high):
    raise ValueError(f"init_low must satisfy 0 < init_low <= init_high, got init_low="
                     f"{float(init_low)!r}, init_high={float(init_high)!r}")


def _search_settings(grid_size, max_changes, iters) -> tuple[int, int, int]:
  return (_checks.integer("grid_size", grid_size, 2),
          _checks.integer("max_changes", max_changes, 1),
          _checks.integer("iters", iters, 0))


def _check_policy(policy) -> None:
  _checks.instance("policy", policy, PutPolicy, "a PutPolicy (put_option_policy, "
                   "put_option_agent_policy, put_option_optimal_policy)")
  if np.ndim(policy.breakpoints) != 2:
    raise ValueError(f"policy.breakpoints must have shape [H, M], got "
                     f"{tuple(np.shape(policy.breakpoints))}")
  H, M = np.shape(policy.breakpoints)
  _checks.shape("policy.valid", policy.valid, (H, M), "[H, M]")
  _checks.shape("policy.region_action", policy.region_action, (H, M + 1), "[H, M + 1]")


def _check_put_args(env, p_us, init_low, init_high) -> None:
  from drjax.envs.put_option import PutOption  # pylint: disable=g-import-not-at-top

  _checks.instance("env", env, PutOption, "a PutOption (drjax.PutOption(...))")
  if p_us is not None:
    _check_p_us(p_us)
  _check_init(init_low, init_high)


def _check_agent_args(env, agent, qf) -> None:
  _checks.agent("agent", agent)
  _checks.agent_dims(agent, (env.horizon, env.feature_dim, env.num_actions))
  _checks.qfunction("qf", qf, env.horizon, env.feature_dim)


@exact_matmuls
def put_option_agent_policy(env, agent: Agent, qf: QFunction, init_low, init_high,
                            **kwargs) -> PutPolicy:
  """``PutPolicy`` of an agent's greedy policy ``agent.act(qf, h, env.phi_all(s), fail=False)``.

  The exit state after exercising pays nothing whatever the policy does there, so the policy
  only matters at the lattice nodes. ``**kwargs``: search settings of ``put_option_policy``.
  """
  _check_put_args(env, None, init_low, init_high)
  _check_agent_args(env, agent, qf)
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
  _check_unit("source_p_u", source_p_u)
  _check_unit("rho", rho)
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
  _check_agent_args(env, agent, qf)
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
