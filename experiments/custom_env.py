"""Bring your own environment: a minimal user-defined environment trained with DR-LSVI-UCB.

A 3-state "cliff walk": from ``start`` the agent picks a risk level; risky moves reach the goal
more often in the source domain but also slip into the fail state. Run
``python -m experiments.custom_env``.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp

import drjax


class CliffParams(NamedTuple):
  slip: jax.Array  # probability mass factor 0 sends to the fail state (sweepable)


class CliffState(NamedTuple):
  s: jax.Array  # 0 = start, 1 = goal, 2 = fail
  h: jax.Array


@dataclasses.dataclass(frozen=True)
class Cliff(drjax.Environment):
  """States 0 = start, 1 = goal, 2 = fail; d = 4 factors: risky, safe, goal, fail.

  ``phi(start, a) = (r_a, 1 - r_a, 0, 0)`` for the action's risk level ``r_a``; the risky factor
  leads to the goal w.p. ``1 - slip`` and to the fail state otherwise, the safe one back to start.
  ``theta_h = (0, 0.3, 1, 0)``: playing safe pays a little, every step at the goal pays 1.
  """

  horizon: int = 4
  num_actions: int = 3
  feature_dim: int = 4

  def default_params(self):
    return CliffParams(slip=jnp.asarray(0.1))

  def validate(self, params):
    if not 0.0 <= float(params.slip) <= 1.0:
      raise ValueError(f"slip must lie in [0, 1], got {float(params.slip)}")

  def reset(self, key, params):
    return CliffState(s=jnp.int32(0), h=jnp.int32(0))

  def phi_all(self, state, params):
    risk = jnp.array([0.0, 0.5, 1.0])  # three actions = three risk levels
    zeros = jnp.zeros(3)
    start = jnp.stack([risk, 1 - risk, zeros, zeros], axis=-1)  # [A, d]
    absorbing = jnp.tile(jax.nn.one_hot(state.s + 1, 4), (3, 1))  # goal -> e_2, fail -> e_3
    return jnp.where(state.s == 0, start, absorbing)

  def is_fail(self, state, params):
    return state.s == 2

  def theta(self, params):
    return jnp.tile(jnp.array([0.0, 0.3, 1.0, 0.0]), (self.horizon, 1))

  def step(self, key, state, action, params):
    phi = self.phi_all(state, params)[action]
    mu = jnp.array([[0.0, 1.0 - params.slip, params.slip],  # risky
                    [1.0, 0.0, 0.0],                          # safe
                    [0.0, 1.0, 0.0],                          # goal (absorbing)
                    [0.0, 0.0, 1.0]])                         # fail (absorbing)
    s2 = jax.random.choice(key, 3, p=phi @ mu).astype(jnp.int32)
    reward = phi @ self.theta(params)[state.h]
    return CliffState(s=s2, h=state.h + 1), reward, state.h + 1 == self.horizon


def main():
  env = Cliff()
  H, d, A, K = env.horizon, env.feature_dim, env.num_actions, 100
  agent = drjax.dr_lsvi_ucb(H, d, A, capacity=K)
  hp = drjax.make_hparams(H, d, rho=jnp.array([0.0, 0.6])[:, None, None] * jnp.ones((H, d)), beta=1.0, lam=0.1)
  out = drjax.sweep(env, env.default_params(), agent, jax.random.PRNGKey(0), num_seeds=4,
                    num_episodes=K, hparams=hp)
  print("mean return of the last 20 episodes, per rho:", out.returns[..., -20:].mean((1, 2)))
  print("first action of the last episode per rho and seed (2 = riskiest):", out.actions[..., -1, 0])


if __name__ == "__main__":
  main()
