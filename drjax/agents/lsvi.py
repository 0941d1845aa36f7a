"""DR-LSVI-UCB (Liu & Xu 2024, Algorithm 1) and LSVI-UCB (Jin et al. 2020) as pure functions."""

from __future__ import annotations

import functools

import chex
import jax
import jax.numpy as jnp

from drjax import robust
from drjax.agents import base
from drjax.agents.base import Agent, AgentState, HParams, QFunction


def _q_values(qf: QFunction, h, phi_all, fail, *, robust_bonus: str | None, fail_zero: bool,
              clip: bool = True):
  """``[..., A]`` Q_h at features ``phi_all [..., A, d]`` (Algorithm 1, line 13).

  With ``clip=False`` the optimistic value before truncation (used to break ties, see ``act``).
  """
  w = qf.w[h]
  linv = qf.linv[h]
  if robust_bonus == "paper":
    # The paper's bonus is linear in phi: one contraction with w + beta sqrt(diag Lambda^-1).
    q = phi_all @ (w + qf.beta * base.sqrt_diag_inverse(linv))
  else:
    if robust_bonus is None:
      bonus = base.ellipsoid_bonus(linv, phi_all, qf.beta)
    else:
      bonus = base.diag_bonus(linv, phi_all, qf.beta, robust_bonus)
    q = phi_all @ w + bonus
  if clip:
    q = jnp.clip(q, 0.0, qf.top[h])
  if fail_zero:
    q = jnp.where(jnp.expand_dims(fail, -1), 0.0, q)
  return q


@functools.lru_cache(maxsize=None)
def _make(name, *, robust_agent: bool, horizon: int, feature_dim: int, num_actions: int,
          capacity: int, bonus: str = "paper", clip: str = "paper", alpha: str = "exact",
          grid_size: int = 0, tie_break: str = "optimistic") -> Agent:
  base.check_static(horizon, feature_dim, num_actions, capacity)
  if bonus not in base.BONUS_FORMS:
    raise ValueError(f"bonus must be one of {base.BONUS_FORMS}, got {bonus!r}")
  if clip not in base.CLIP_FORMS:
    raise ValueError(f"clip must be one of {base.CLIP_FORMS}, got {clip!r}")
  if alpha not in base.ALPHA_METHODS:
    raise ValueError(f"alpha must be one of {base.ALPHA_METHODS}, got {alpha!r}")
  if alpha != "exact" and (not isinstance(grid_size, int) or grid_size < 2):
    raise ValueError(f"grid_size must be an integer >= 2 for alpha={alpha!r}, got {grid_size!r}")
  if tie_break not in base.TIE_BREAKS:
    raise ValueError(f"tie_break must be one of {base.TIE_BREAKS}, got {tie_break!r}")
  H, d, A, K = horizon, feature_dim, num_actions, capacity
  fail_zero = robust_agent
  q_fn = functools.partial(_q_values, robust_bonus=bonus if robust_agent else None,
                           fail_zero=fail_zero)

  def init(theta) -> AgentState:
    return base.init_state(theta, H, d, A, K)

  def plan(state: AgentState, hp: HParams) -> QFunction:
    """Backward induction h = H..1 on the stored episodes (Algorithm 1, lines 3-14)."""
    chex.assert_shape(state.phi, (H, K, d))
    chex.assert_shape(hp.rho, (H, d))
    dtype = state.phi.dtype
    mask = base.valid_mask(state)
    tops = base.clip_tops(H, clip, robust_agent, dtype)
    beta = jnp.asarray(hp.beta, dtype)
    lam = jnp.asarray(hp.lam, dtype)
    grid = robust.make_grid(H, grid_size) if alpha != "exact" else None

    def backward(carry, h):
      w_next, linv_next = carry
      _, linv, M = robust.ridge_factors(state.phi[h], mask, lam)
      h_next = jnp.minimum(h + 1, H - 1)
      qf_next = QFunction(w=w_next[None], linv=linv_next[None], beta=beta,
                          top=tops[h_next][None], nu=None, alpha=None)
      q_next = q_fn(qf_next, 0, state.next_phi[h], state.next_fail[h])  # [K, A]
      v_next = jnp.where(h == H - 1, 0.0, jnp.max(q_next, axis=-1))  # V_{H+1} = 0
      if robust_agent:
        if alpha == "exact":
          nu, a_star = robust.alpha_max_exact(M, v_next, hp.rho[h].astype(dtype), H)
        else:
          nu, a_star = robust.alpha_max_grid(M, v_next, hp.rho[h].astype(dtype), H, grid,
                                             include_exact=(alpha == "exact+grid"))
        w = state.theta[h] + nu
      else:
        w = M @ (state.reward[h] + v_next)
        nu = jnp.zeros((d,), dtype)
        a_star = jnp.zeros((d,), dtype)
      return (w, linv), (w, linv, nu, a_star)

    init_carry = (jnp.zeros((d,), dtype), jnp.eye(d, dtype=dtype))
    _, (w, linv, nu, a_star) = jax.lax.scan(backward, init_carry, jnp.arange(H), reverse=True)
    return QFunction(w=w, linv=linv, beta=beta, top=tops, nu=nu, alpha=a_star)

  def q_values(qf: QFunction, h, phi_all, fail):
    return q_fn(qf, h, phi_all, fail)

  def act(qf: QFunction, h, phi_all, fail):
    """Greedy action (Algorithm 1, line 14).

    Truncation makes many actions tie at ``Q = H - h + 1`` early in training; among the maximizers
    of the truncated Q we pick the one with the largest untruncated optimistic value (truncation
    is monotone, so this is always an argmax of Q), then the lowest index. Breaking such ties by
    index alone (``tie_break="first"``, what ``np.argmax`` in the authors' notebooks does) favours
    action 0 for as long as every action's bonus exceeds the clip.
    """
    chex.assert_shape(phi_all, (A, d))
    q = q_fn(qf, h, phi_all, fail, clip=(tie_break == "first"))
    return jnp.argmax(q).astype(jnp.int32)

  def bonus_fn(qf: QFunction, h, phi):
    if robust_agent:
      return base.diag_bonus(qf.linv[h], phi, qf.beta, bonus)
    return base.ellipsoid_bonus(qf.linv[h], phi, qf.beta)

  config = base.AgentConfig(H, d, A, K, bonus, clip, alpha, grid_size, tie_break)
  return Agent(name=name, config=config, init=init, plan=plan, q_values=q_values, act=act,
               observe=base.observe, end_episode=base.end_episode,
               store_episode=base.store_episode, bonus=bonus_fn)


def dr_lsvi_ucb(horizon: int, feature_dim: int, num_actions: int, capacity: int, *,
                bonus: str = "paper", alpha: str = "exact", grid_size: int = 0,
                tie_break: str = "optimistic") -> Agent:
  """DR-LSVI-UCB (Algorithm 1) with heterogeneous rho ``[H, d]`` and known theta.

  Args:
    horizon: H.
    feature_dim: d.
    num_actions: A (actions are given as their features ``phi_all [A, d]``).
    capacity: maximal number of episodes stored (>= the number of training episodes K).
    bonus: ``"paper"`` — ``beta * sum_i phi_i sqrt([Lambda^-1]_ii)`` (Algorithm 1, line 12);
      ``"notebook"`` — ``beta * sqrt(phi^T diag(Lambda^-1) phi)`` (the authors' code).
    alpha: ``"exact"`` maximization over the breakpoints, ``"grid"`` over ``grid_size`` uniform
      points of [0, H], or ``"exact+grid"`` (both).
    grid_size: number of grid points (static).
    tie_break: among actions tied at the truncated maximum, ``"optimistic"`` takes the largest
      untruncated value, ``"first"`` the lowest index (the authors' ``np.argmax``).

  Returns:
    An ``Agent``. Q is clipped to ``[0, H - h + 1]`` and set to 0 at the fail state.
  """
  return _make("DR-LSVI-UCB", robust_agent=True, horizon=horizon, feature_dim=feature_dim,
               num_actions=num_actions, capacity=capacity, bonus=bonus, clip="paper",
               alpha=alpha, grid_size=grid_size, tie_break=tie_break)


def lsvi_ucb(horizon: int, feature_dim: int, num_actions: int, capacity: int, *,
             clip: str = "paper", tie_break: str = "optimistic") -> Agent:
  """LSVI-UCB (Jin et al. 2020): ridge regression on ``r + V_{h+1}``, bonus ``beta ||phi||``.

  Args:
    clip: ``"paper"`` clips Q to ``[0, H - h + 1]`` like DR-LSVI-UCB; ``"notebook"`` clips at H
      for every step (the authors' baseline).
    tie_break: as for ``dr_lsvi_ucb``.
  """
  return _make("LSVI-UCB", robust_agent=False, horizon=horizon, feature_dim=feature_dim,
               num_actions=num_actions, capacity=capacity, clip=clip, tie_break=tie_break)
