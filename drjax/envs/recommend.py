"""Recommended hyperparameters of the online agents per environment (``SweepSpec.hparams``).

Exploration needs a never-tried action to look better than a well-tried one. With ``Lambda =
lambda I + n phi phi^T`` (one state visited n times), a never-tried action's optimistic value is
its bonus, ``beta w_0 / sqrt(lambda)``, and the tried one's is its estimate (up to the return
``H``) plus a bonus that tends to ``beta w_inf / sqrt(lambda)``:

* LSVI-UCB (elliptical bonus ``sqrt(phi^T Lambda^-1 phi)``): ``w_0 = ||phi||_2``, ``w_inf = 0``;
* the d-rectangular agents (DR-LSVI-UCB, We-DRIVE-U: ``sum_i phi_i sqrt([Lambda^-1]_ii)``):
  ``w_0 = sum_i phi_i = 1`` on simplex features, and ``w_inf = sum_i phi_i sqrt(1 - phi_i^2 /
  ||phi||^2)``: the diagonal of ``Lambda^-1`` hardly shrinks along one repeated direction when
  the features spread over many coordinates (soft state aggregation), so ``w_inf`` is close to
  ``w_0`` (CartPole 0.77, Acrobot 0.94).

The other action is tried once ``beta (w_0 - w_inf) / sqrt(lambda) > R``, ``R`` the largest
return (``H`` on CartPole and Pendulum, 1 on Acrobot and MountainCar, which pay once, at the
goal). The recommendation sets ``beta / sqrt(lambda) = SCALE * R / (w_0 - w_inf)`` with the widths measured as medians over
``RESET_SAMPLES`` reset states, and ``lambda = LAM``, small against ``||phi||^2`` (0.06-0.34 on
the gymnax environments) so that one visit already takes the tried action's bonus near its
limit. ``SCALE`` and ``LAM`` come from the measurements in docs/environments.md ("Recommended
hyperparameters"): at beta 10, lambda 1 on CartPole the bonus was about 5 against about 9.4 steps
of survival (issue 34), and both agents pushed one way, worse than uniform random.
"""

from __future__ import annotations

import numpy as np

from drjax import _programs

SCALE = 4.0  # (untried - tried-limit) optimistic value / H
LAM = 0.01  # ridge regularizer
ELLIPTICAL = ("lsvi-ucb",)  # the agents whose bonus is sqrt(phi^T Lambda^-1 phi)
RESET_SAMPLES = 64
MIN_GAP = 1e-3
# The largest return where it is not the horizon H (rewards in [0, 1] per step): Acrobot and
# MountainCar pay 1 once, on reaching the goal (drjax.envs.gymnax_env).
RETURN_BOUND = {"Acrobot-v1": 1.0, "MountainCar-v0": 1.0}


@_programs.cached
def widths(env) -> tuple[float, float]:
  """``(||phi||_2, 1 - w_inf)``: the medians over ``RESET_SAMPLES`` reset states (fixed key) and
  actions of the elliptical and the d-rectangular width gap (module docstring)."""
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top

  params = env.default_params()

  @jax.jit
  def measure(key):
    s = jax.vmap(lambda k: env.reset(k, params))(jax.random.split(key, RESET_SAMPLES))
    phi = jax.vmap(lambda x: env.phi_all(x, params))(s)  # [N, A, d]
    n2 = jnp.sum(phi * phi, axis=-1, keepdims=True)
    w_inf = jnp.sum(phi * jnp.sqrt(jnp.maximum(1.0 - phi * phi / n2, 0.0)), axis=-1)
    return jnp.sqrt(n2[..., 0]), jnp.sum(phi, axis=-1) - w_inf

  norm, gap = measure(jax.random.PRNGKey(0))
  return float(np.median(np.asarray(norm))), float(np.median(np.asarray(gap)))


def return_bound(env) -> float:
  """The largest return: the environment's ``max_return`` attribute if it has one (``ledge``: 1,
  its payoff comes once), else ``RETURN_BOUND[env.env_id]``, else the horizon ``H`` (rewards in
  [0, 1])."""
  own = getattr(env, "max_return", None)
  if own is not None:
    return float(own)
  return float(RETURN_BOUND.get(getattr(env, "env_id", None), env.horizon))


def online_hparams(env) -> dict:
  """``{agent or kind: {"beta": b, "lam": l}}`` for an environment with rewards in [0, 1]:
  ``beta = SCALE R sqrt(LAM) / gap``, ``R = return_bound(env)`` (``H``, or 1 where only the goal
  pays) and the width gap of the agent's bonus (``widths``), rounded to 3 significant digits."""
  H = return_bound(env)
  norm, gap = widths(env)
  # (a gap below MIN_GAP, e.g. all-zero features at reset, is taken as MIN_GAP: a finite beta)
  beta = lambda g: float(f"{SCALE * H * np.sqrt(LAM) / max(g, MIN_GAP):.3g}")  # noqa: E731
  out = {"online": {"beta": beta(gap), "lam": LAM}}
  for a in ELLIPTICAL:
    out[a] = {"beta": beta(norm), "lam": LAM}
  return out
