"""Adversarial instances for the d-rectangular bonus (issue 29, item 5).

Random instances may hide the worst case of DR-LSVI-UCB's d-rectangular bonus. This module
ascends a differentiable surrogate of the bonus-sum ratio over the instance itself, then checks
the instances it finds with the real agents.

**The surrogate.** With the exploration policy ``pi`` *fixed* (uniform actions by default), the
state occupancy ``d_h`` follows exactly from the model by the forward recursion
``d_1 = init_dist``, ``d_{h+1}(s') = sum_{s,a} d_h(s) pi_h(a|s) <phi(s, a), mu_h(., s')>``, and
the expected Gram matrix after ``k - 1`` episodes is ``Lambda_h(k) = lam I + (k - 1) M_h`` with
``M_h = E_{(s,a) ~ d_h pi_h}[phi phi^T]``. The expected widths at step ``h`` of episode ``k`` are
``E[sum_i phi_i sqrt([Lambda_h(k)^-1]_ii)]`` (d-rectangular) and ``E[sqrt(phi^T Lambda_h(k)^-1
phi)]`` (elliptical), expectations over ``(s, a) ~ d_h pi_h``. Summed over ``h`` and over
``k = 1..K`` (exactly, or by a trapezoid rule on a geometric grid of ``k`` with the
Euler-Maclaurin end corrections: ``k_nodes``) they give ``rect_sum`` and ``ellip_sum``, and
``R = rect_sum / ellip_sum``.

**Bounds on R.** ``R >= 1`` (``|sum_i phi_i b_i| <= sum_i phi_i |b_i|`` for ``Lambda^-1 = B^T
B``, ``phi >= 0``); one-hot features give ``R = 1``. ``R <= sqrt(d)`` (Cauchy-Schwarz) needs a
diagonal ``Lambda`` (one-hot features) and fails in general: ``[Lambda^-1]_ii`` stays of order
``1/lam`` along coordinates the features never separate while the elliptical width shrinks like
``1/sqrt(k)``; one repeated feature uniform on 4 coordinates keeps a d-rectangular width
``sqrt(3/(4 lam))`` (closed forms in ``tests/test_adversarial.py``). In general ``R <= sqrt(d (1
+ (K - 1) / lam))``: R can grow like ``sqrt(K)``.

**What is differentiable.** R, in every logit: the occupancy recursion is polynomial, the widths
go through Cholesky factors of ``Lambda`` (positive definite for ``lam > 0``) and square roots of
positive numbers. Not differentiated, and why: the learned policy (a greedy argmax of a Q
estimate: piecewise constant in the model, so the exploration policy is fixed); the exact TV
dual (a max over breakpoints, differentiable only away from ties; widths do not involve it); and
realized widths (random states, adaptive actions): the surrogate is the expected widths of a
fixed-policy run, and ``realized`` checks the found instances with the real agents.

Entry point: ``python -m drjax.paper.adversarial --out DIR [--quick]`` writes ``adversarial.json``
(configuration, provenance, the ascent per d, the random baselines, the fitted exponents and the
real runs).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import platform
import sys
import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from drjax import _checks

Array = jax.Array

FAIL = 0  # index of the fail state (and of the fail coordinate of phi)


# ---------------------------------------------------------------------------------------------
# The instance: softmax logits, and the model arrays they give.


class Logits(NamedTuple):
  """An instance's free parameters (the fail-state extension of Section 4.1 is fixed).

  Attributes:
    phi: ``[S - 1, A, d - 1]`` logits of the non-fail features: ``phi(s, a) = [0,
      softmax(phi[s - 1, a])]`` for ``s != s_f``, ``phi(s_f, a) = e_0`` (time-homogeneous).
    mu: ``[H, d - 1, S]`` logits of the factors ``mu_{h,i} = softmax(mu[h, i - 1])`` over all
      states, ``i >= 1``; ``mu_{h,0} = delta_{s_f}``.
    init: ``[S - 1]`` logits of the initial distribution over the non-fail states.
  """

  phi: Array
  mu: Array
  init: Array


def dims(z: Logits) -> tuple[int, int, int, int]:
  """``(H, S, A, d)`` of an instance's logits."""
  s1, a, d1 = np.shape(z.phi)
  return np.shape(z.mu)[0], s1 + 1, a, d1 + 1


def model_arrays(z: Logits) -> tuple[Array, Array, Array]:
  """``(phi [S, A, d], mu [H, d, S], init_dist [S])`` of the logits (fail state 0)."""
  H, S, A, d = dims(z)
  dtype = z.phi.dtype
  rest = jax.nn.softmax(z.phi, axis=-1)
  phi = jnp.concatenate([jnp.zeros((S - 1, A, 1), dtype), rest], axis=-1)
  phi = jnp.concatenate([jnp.zeros((1, A, d), dtype).at[..., FAIL].set(1), phi], axis=0)
  mu_fail = jnp.broadcast_to(jax.nn.one_hot(FAIL, S, dtype=dtype), (H, 1, S))
  mu = jnp.concatenate([mu_fail, jax.nn.softmax(z.mu, axis=-1)], axis=1)
  init = jnp.concatenate([jnp.zeros((1,), dtype), jax.nn.softmax(z.init)])
  return phi, mu, init


def sample_logits(key, horizon: int, num_states: int, num_actions: int, feature_dim: int,
                  scale: float = 1.0, dtype=None) -> Logits:
  """Gaussian logits ``N(0, scale^2)``: a random start of the ascent."""
  dtype = dtype or jnp.result_type(float)
  k1, k2, k3 = jax.random.split(key, 3)
  H, S, A, d = horizon, num_states, num_actions, feature_dim
  return Logits(phi=scale * jax.random.normal(k1, (S - 1, A, d - 1), dtype),
                mu=scale * jax.random.normal(k2, (H, d - 1, S), dtype),
                init=scale * jax.random.normal(k3, (S - 1,), dtype))


def uniform_policy(horizon: int, num_states: int, num_actions: int, dtype=None) -> Array:
  """``[H, S, A]`` uniform action probabilities (the default exploration policy)."""
  dtype = dtype or jnp.result_type(float)
  return jnp.full((horizon, num_states, num_actions), 1.0 / num_actions, dtype)


# ---------------------------------------------------------------------------------------------
# The surrogate.


def occupancy(phi: Array, mu: Array, init: Array, policy: Array) -> Array:
  """``[H, S]`` state occupancy ``d_h`` of a fixed stochastic policy (exact forward recursion).

  Args:
    phi: ``[S, A, d]`` or ``[H, S, A, d]`` features.
    mu: ``[H, d, S]`` factors.
    init: ``[S]`` initial distribution.
    policy: ``[H, S, A]`` action probabilities.
  """
  H = mu.shape[0]
  phi = jnp.broadcast_to(phi, (H,) + phi.shape[-3:])

  def forward(dist, h):
    sa = dist[:, None] * policy[h]  # [S, A]
    nxt = jnp.einsum("sa,sad,dt->t", sa, phi[h], mu[h])
    return nxt, dist

  _, occ = jax.lax.scan(forward, init, jnp.arange(H))
  return occ


def k_nodes(num_episodes: int, num_nodes: int | None = None) -> tuple[np.ndarray, np.ndarray]:
  """Nodes ``k`` and weights ``w`` with ``sum_j w_j f(k_j) ~ sum_{k=1}^K f(k)``.

  ``num_nodes=None`` or ``>= K``: every ``k`` with weight 1 (exact). Otherwise the distinct
  integers of a geometric grid from 1 to K, trapezoid weights (the integral from 1 to K) plus 1/2
  at both ends (Euler-Maclaurin), so the weights sum to K.
  """
  K = _checks.integer("num_episodes", num_episodes, 1)
  n = None if num_nodes is None else _checks.integer("num_nodes", num_nodes, 2)
  if n is None or n >= K:
    return np.arange(1, K + 1, dtype=np.float64), np.ones(K)
  k = np.unique(np.round(np.geomspace(1, K, n))).astype(np.float64)
  gaps = np.diff(k)
  w = np.zeros_like(k)
  w[:-1] += gaps / 2
  w[1:] += gaps / 2
  w[0] += 0.5
  w[-1] += 0.5
  return k, w


def step_moments(phi: Array, occ: Array, policy: Array) -> tuple[Array, Array]:
  """``(weights [H, S, A], M [H, d, d])``: the (s, a) occupancy and ``E[phi phi^T]`` per step."""
  H = occ.shape[0]
  phi = jnp.broadcast_to(phi, (H,) + phi.shape[-3:])
  w = occ[:, :, None] * policy
  M = jnp.einsum("hsa,hsad,hsae->hde", w, phi, phi)
  return w, M


def expected_widths(phi: Array, mu: Array, init: Array, policy: Array, lam, nodes,
                    weights) -> tuple[Array, Array]:
  """``(rect [H], ellip [H])``: expected widths per step, summed over the nodes ``k``.

  ``rect[h] = sum_j w_j E_{d_h pi}[sum_i phi_i sqrt([Lambda_h(k_j)^-1]_ii)]`` and ``ellip[h] =
  sum_j w_j E_{d_h pi}[sqrt(phi^T Lambda_h(k_j)^-1 phi)]``, ``Lambda_h(k) = lam I + (k - 1)
  M_h``.
  """
  H = mu.shape[0]
  d = mu.shape[1]
  phi_h = jnp.broadcast_to(phi, (H,) + phi.shape[-3:])
  occ = occupancy(phi, mu, init, policy)
  w_sa, M = step_moments(phi, occ, policy)
  nodes = jnp.asarray(nodes, M.dtype)
  weights = jnp.asarray(weights, M.dtype)
  eye = jnp.eye(d, dtype=M.dtype)

  def at(M_h, feats, k):
    L = jnp.linalg.cholesky(lam * eye + (k - 1) * M_h)
    Linv = jax.scipy.linalg.solve_triangular(L, eye, lower=True)  # Lambda^-1 = Linv^T Linv
    diag = jnp.sum(Linv * Linv, axis=0)
    flat = feats.reshape(-1, d)
    rect = flat @ jnp.sqrt(diag)
    ellip = jnp.sqrt(jnp.sum((flat @ Linv.T) ** 2, axis=-1))
    return rect, ellip  # [S A] each

  def per_step(M_h, feats, w_h):
    rect, ellip = jax.vmap(at, in_axes=(None, None, 0))(M_h, feats, nodes)  # [n, S A]
    flat_w = w_h.reshape(-1)
    return weights @ (rect @ flat_w), weights @ (ellip @ flat_w)

  return jax.vmap(per_step)(M, phi_h, w_sa)


def surrogate(z: Logits, lam, nodes, weights, policy=None) -> tuple[Array, Array]:
  """``(rect_sum, ellip_sum)`` of the instance ``z`` (sums over steps and nodes)."""
  H, S, A, _ = dims(z)
  phi, mu, init = model_arrays(z)
  policy = uniform_policy(H, S, A, phi.dtype) if policy is None else policy
  rect, ellip = expected_widths(phi, mu, init, policy, lam, nodes, weights)
  return jnp.sum(rect), jnp.sum(ellip)


def ratio(z: Logits, lam, nodes, weights, policy=None) -> Array:
  """The surrogate bonus-sum ratio ``R = rect_sum / ellip_sum`` (>= 1)."""
  rect, ellip = surrogate(z, lam, nodes, weights, policy)
  return rect / ellip


def ratio_of_arrays(phi, mu, init, lam, nodes, weights, policy=None) -> Array:
  """``R`` of explicit model arrays (``phi [S, A, d]``, e.g. random or one-hot instances)."""
  H, S, A = mu.shape[0], mu.shape[2], phi.shape[-2]
  policy = uniform_policy(H, S, A, phi.dtype) if policy is None else policy
  rect, ellip = expected_widths(phi, mu, init, policy, lam, nodes, weights)
  return jnp.sum(rect) / jnp.sum(ellip)


# ---------------------------------------------------------------------------------------------
# The ascent.


class AscentResult(NamedTuple):
  """Output of ``ascend``.

  Attributes:
    ratio: ``[]`` the best R found (over restarts and steps).
    logits: the ``Logits`` attaining it.
    ratios: ``[restarts]`` the best R of each restart.
    history: ``[restarts, steps]`` R at every step.
    best: the best ``Logits`` of every restart (leading axis ``restarts``).
  """

  ratio: Array
  logits: Logits
  ratios: Array
  history: Array
  best: Logits


def _ascend(key, shape, lam, nodes, weights, steps, restarts, learning_rate, scale):
  H, S, A, d = shape
  optimizer = optax.adam(learning_rate)

  def objective(z):
    return jnp.log(ratio(z, lam, nodes, weights))

  def one(k):
    z0 = sample_logits(k, H, S, A, d, scale)

    def step(carry, _):
      z, opt_state, best_v, best_z = carry
      v, g = jax.value_and_grad(objective)(z)
      better = v > best_v
      best_v = jnp.where(better, v, best_v)
      best_z = jax.tree_util.tree_map(lambda a, b: jnp.where(better, a, b), z, best_z)
      updates, opt_state = optimizer.update(jax.tree_util.tree_map(jnp.negative, g), opt_state)
      return (optax.apply_updates(z, updates), opt_state, best_v, best_z), v

    carry = (z0, optimizer.init(z0), objective(z0), z0)
    (z, _, best_v, best_z), hist = jax.lax.scan(step, carry, None, length=steps)
    v_last = objective(z)
    better = v_last > best_v
    best_z = jax.tree_util.tree_map(lambda a, b: jnp.where(better, a, b), z, best_z)
    return jnp.exp(jnp.maximum(v_last, best_v)), best_z, jnp.exp(hist)

  vals, zs, hist = jax.vmap(one)(jax.random.split(key, restarts))
  i = jnp.argmax(vals)
  return AscentResult(ratio=vals[i], logits=jax.tree_util.tree_map(lambda x: x[i], zs),
                      ratios=vals, history=hist, best=zs)


_ascend_jit = jax.jit(_ascend, static_argnums=(1, 5, 6, 7, 8))


def ascend(key, *, horizon: int, num_states: int, num_actions: int, feature_dim: int,
           num_episodes: int, lam: float = 1.0, num_nodes: int | None = 32, steps: int = 200,
           restarts: int = 8, learning_rate: float = 0.1, scale: float = 1.0) -> AscentResult:
  """Maximises the surrogate ratio ``R`` over instances (adam on ``log R``, restarts vmapped).

  Args:
    key: PRNG key of the random starts (``sample_logits``).
    horizon, num_states, num_actions, feature_dim: ``H >= 1``, ``S >= 2``, ``A >= 1``,
      ``d >= 2``.
    num_episodes: K >= 1, the episodes the sums run over.
    lam: ridge parameter > 0.
    num_nodes: quadrature nodes in k (``k_nodes``); ``None``: every k.
    steps: adam steps per restart (>= 1).
    restarts: random starts (>= 1).
    learning_rate: adam's step size (> 0).
    scale: standard deviation of the starting logits (> 0).

  Returns:
    ``AscentResult``; every iterate is a valid instance, so the ratio found is attained.
  """
  _checks.key("key", key)
  H = _checks.integer("horizon", horizon, 1)
  S = _checks.integer("num_states", num_states, 2)
  A = _checks.integer("num_actions", num_actions, 1)
  d = _checks.integer("feature_dim", feature_dim, 2)
  K = _checks.integer("num_episodes", num_episodes, 1)
  lam = _checks.number("lam", lam, 0, lo_open=True)
  steps = _checks.integer("steps", steps, 1)
  restarts = _checks.integer("restarts", restarts, 1)
  learning_rate = _checks.number("learning_rate", learning_rate, 0, lo_open=True)
  scale = _checks.number("scale", scale, 0, lo_open=True)
  nodes, weights = k_nodes(K, num_nodes)
  return _ascend_jit(key, (H, S, A, d), lam, nodes, weights, steps, restarts, learning_rate,
                     scale)


# ---------------------------------------------------------------------------------------------
# Instances for the real runs, and the baselines.


def to_params(z: Logits, key):
  """The ``(RandomLinearMDP, RandomMDPParams)`` of logits ``z``; ``theta_h = [0, U[0, 1]^{d-1}]``
  drawn from ``key`` (rewards do not enter the surrogate)."""
  from drjax.envs import RandomLinearMDP  # pylint: disable=g-import-not-at-top
  from drjax.envs.random_mdp import RandomMDPParams  # pylint: disable=g-import-not-at-top
  H, S, A, d = dims(z)
  phi, mu, init = model_arrays(z)
  env = RandomLinearMDP(num_states=S, num_actions=A, feature_dim=d, horizon=H)
  theta = jax.random.uniform(key, (H, d), phi.dtype).at[:, FAIL].set(0)
  params = RandomMDPParams(phi=jnp.broadcast_to(phi[None], (H, S, A, d)), theta=theta, mu=mu,
                           fail_state=jnp.asarray(FAIL, jnp.int32), init_dist=init)
  env.validate(params)
  return env, params


def random_arrays(key, family: str, horizon: int, num_states: int, num_actions: int,
                  feature_dim: int) -> tuple[Array, Array, Array]:
  """``(phi [S, A, d], mu, init)`` of a random instance: ``dense`` (the generator's Dirichlet(1)
  rows) or ``one-hot`` (each non-fail ``phi(s, a)`` a uniformly drawn coordinate ``e_i``, i >= 1;
  mu and init as ``dense``)."""
  _checks.choice("family", family, ("dense", "one-hot"))
  H, S, A, d = horizon, num_states, num_actions, feature_dim
  k_phi, k_mu, k_init, k_hot = jax.random.split(key, 4)
  dtype = jnp.result_type(float)
  if family == "dense":
    rest = jax.random.dirichlet(k_phi, jnp.ones(d - 1, dtype), (S - 1, A), dtype)
  else:
    rest = jax.nn.one_hot(jax.random.randint(k_hot, (S - 1, A), 0, d - 1), d - 1, dtype=dtype)
  z = Logits(phi=jnp.zeros((S - 1, A, d - 1), dtype), mu=jnp.zeros((H, d - 1, S), dtype),
             init=jnp.zeros((S - 1,), dtype))
  phi, _, _ = model_arrays(z)
  phi = phi.at[1:, :, 1:].set(rest)
  mu_rest = jax.random.dirichlet(k_mu, jnp.ones(S, dtype), (H, d - 1), dtype)
  mu = jnp.concatenate([jnp.broadcast_to(jax.nn.one_hot(FAIL, S, dtype=dtype), (H, 1, S)),
                        mu_rest], axis=1)
  init = jnp.concatenate([jnp.zeros((1,), dtype),
                          jax.random.dirichlet(k_init, jnp.ones(S - 1, dtype), (), dtype)])
  return phi, mu, init


def slope(x, y) -> float:
  """Least-squares slope of ``log y`` against ``log x``."""
  lx, ly = np.log(np.asarray(x, np.float64)), np.log(np.asarray(y, np.float64))
  lx = lx - lx.mean()
  return float(np.sum(lx * (ly - ly.mean())) / np.sum(lx * lx))


def bootstrap_slope(xs, samples, key, num: int = 1000, stat=np.mean) -> dict:
  """Slope of ``log stat(samples[j])`` against ``log xs[j]`` with a 95% percentile interval;
  each cell's samples (restarts, instances or seeds) are resampled with ``jax.random`` keys."""
  xs = list(xs)
  est = [stat(np.asarray(s, np.float64)) for s in samples]
  if len(xs) < 2 or min(est) <= 0:
    return {"slope": float("nan"), "lo": float("nan"), "hi": float("nan")}
  boots = []
  for s, k in zip(samples, jax.random.split(key, len(samples))):
    s = np.asarray(s, np.float64)
    idx = np.asarray(jax.random.randint(k, (num, len(s)), 0, len(s)))
    boots.append(np.array([stat(s[i]) for i in idx]))
  boots = np.stack(boots, axis=1)
  ok = np.all(boots > 0, axis=1)
  slopes = np.array([slope(xs, b) for b in boots[ok]])
  lo, hi = np.percentile(slopes, [2.5, 97.5]) if len(slopes) else (np.nan, np.nan)
  return {"slope": slope(xs, est), "lo": float(lo), "hi": float(hi)}


_random_arrays_jit = jax.jit(random_arrays, static_argnums=(1, 2, 3, 4, 5))
_ratio_of_arrays_jit = jax.jit(ratio_of_arrays)
_ratio_jit = jax.jit(ratio)


# ---------------------------------------------------------------------------------------------
# The real agents on the instances found.


def realized(env, params, key, *, num_episodes: int, seeds: int, rho: float = 0.1,
             beta: float = 1.0, lam: float = 1.0, agents=("dr-lsvi-ucb", "lsvi-ucb")) -> dict:
  """Runs each agent ``seeds`` times on one instance (``make_train`` with the study outputs).

  Returns, per agent, per seed: ``ratio`` (realized ``sum width_rect / sum width_ellip`` over
  episodes and steps), ``rect`` and ``ellip`` (the sums) and ``ave_subopt`` (``V*(rho) - mean_k
  robust value of episode k's policy``, both exact at ``rho``; ``V*`` from
  ``planning.robust_dp``).
  """
  from drjax import planning  # pylint: disable=g-import-not-at-top
  from drjax import train as train_lib  # pylint: disable=g-import-not-at-top
  from drjax.agents import base, registry  # pylint: disable=g-import-not-at-top
  K = _checks.integer("num_episodes", num_episodes, 1)
  n = _checks.integer("seeds", seeds, 1)
  H, d = env.horizon, env.feature_dim
  model = env.model(params)
  rho_arr = jnp.full((H, d), rho, model.phi.dtype)
  plan = planning.robust_dp(model, rho_arr)
  v_star = float(planning.initial_value(model, plan.v))
  q = np.asarray(plan.q, np.float64)[:, 1:]  # non-fail states
  # How much the action matters: the mean over steps and non-fail states of max_a Q* - min_a Q*.
  out = {"v_star": v_star, "action_gap": float(np.mean(q.max(-1) - q.min(-1)))}
  keys = jax.random.split(key, n)
  for name in agents:
    agent = registry.make(name, env, capacity=K)
    hp = base.make_hparams(H, d, rho=rho, beta=beta, lam=lam)  # LSVI-UCB's plan ignores rho
    train = train_lib.make_train(env, agent, K,
                                 outputs=("width_rect", "width_ellip", "robust_value"))
    res = jax.jit(jax.vmap(train, in_axes=(0, None, None)))(keys, hp, params)
    rect = np.asarray(res.width_rect, np.float64).sum(axis=(1, 2))
    ellip = np.asarray(res.width_ellip, np.float64).sum(axis=(1, 2))
    sub = v_star - np.asarray(res.robust_value, np.float64).mean(axis=1)
    out[name] = {"ratio": (rect / ellip).tolist(), "rect": rect.tolist(),
                 "ellip": ellip.tolist(), "ave_subopt": sub.tolist()}
  return out


# ---------------------------------------------------------------------------------------------
# The study.


@dataclasses.dataclass(frozen=True)
class Config:
  """One run of the study (every field is recorded in the output's ``config``)."""

  dims: tuple = (4, 8, 16, 32, 64)
  horizon: int = 3
  num_states: int = 16
  num_actions: int = 4
  episodes: int = 1000  # K of the surrogate and of the real runs
  lam: float = 1.0
  num_nodes: int = 16
  steps: int = 80
  restarts: int = 4
  learning_rate: float = 0.1
  random_instances: int = 8  # dense random instances per d (surrogate baseline)
  seeds: int = 4  # real runs per agent and instance
  rho: float = 0.1
  beta: float = 1.0
  real_random: bool = True  # also run the agents on one dense random instance per d
  bootstrap: int = 1000
  seed: int = 0


QUICK = Config(dims=(4, 8, 16), episodes=300, steps=40, restarts=3, random_instances=4,
               seeds=2, bootstrap=200, real_random=False)


def _provenance() -> dict:
  from drjax import sweeps  # pylint: disable=g-import-not-at-top
  return {**sweeps.provenance(), "cores": len(os.sched_getaffinity(0))
          if hasattr(os, "sched_getaffinity") else os.cpu_count(),
          "platform": platform.platform()}


def study(cfg: Config = Config(), log=None) -> dict:
  """Ascent, baselines, real runs and fits for every d of ``cfg``; a JSON-ready dict."""
  log = log or (lambda m: None)
  t_all = time.perf_counter()
  H, S, A, K = cfg.horizon, cfg.num_states, cfg.num_actions, cfg.episodes
  nodes, weights = k_nodes(K, cfg.num_nodes)
  exact_nodes, exact_weights = k_nodes(K)
  key = jax.random.key(cfg.seed)
  per_d = []
  for d in cfg.dims:
    t0 = time.perf_counter()
    key, k_asc, k_rand, k_theta, k_real, k_hot = jax.random.split(key, 6)
    res = ascend(k_asc, horizon=H, num_states=S, num_actions=A, feature_dim=d,
                 num_episodes=K, lam=cfg.lam, num_nodes=cfg.num_nodes, steps=cfg.steps,
                 restarts=cfg.restarts, learning_rate=cfg.learning_rate)
    # Every restart's best instance, re-scored with the exact sum over k = 1..K.
    exact = [float(_ratio_jit(jax.tree_util.tree_map(lambda x, i=i: x[i], res.best), cfg.lam,
                         exact_nodes, exact_weights)) for i in range(cfg.restarts)]
    best = int(np.argmax(exact))
    z = jax.tree_util.tree_map(lambda x: x[best], res.best)
    phi, _, _ = model_arrays(z)
    dense = [float(_ratio_of_arrays_jit(*_random_arrays_jit(k, "dense", H, S, A, d), cfg.lam,
                                        nodes, weights))
             for k in jax.random.split(k_rand, cfg.random_instances)]
    onehot = float(_ratio_of_arrays_jit(*_random_arrays_jit(k_hot, "one-hot", H, S, A, d),
                                        cfg.lam, nodes, weights))
    row = {"d": d, "surrogate": {
        "adversarial_quadrature": np.asarray(res.ratios).tolist(),
        "adversarial_exact": exact, "best_exact": exact[best],
        "history_best_restart": np.asarray(res.history[best]).tolist(),
        "dense_random": dense, "one_hot": onehot, "sqrt_d": math.sqrt(d),
        "bound": math.sqrt(d * (1 + (K - 1) / cfg.lam)),
        "best_phi_pairwise_cos_median": _median_cos(np.asarray(phi)[1:].reshape(-1, d)),
        "best_logits": {f: np.asarray(x, np.float64).round(6).tolist()
                        for f, x in z._asdict().items()}}}
    log(f"[adversarial] d={d}: R adversarial {exact[best]:.3f} (restarts "
        f"{', '.join(f'{r:.3f}' for r in exact)}), dense random {np.mean(dense):.3f}, one-hot "
        f"{onehot:.3f}, sqrt(d) {math.sqrt(d):.3f} ({time.perf_counter() - t0:.1f} s)")
    t1 = time.perf_counter()
    env, params = to_params(z, k_theta)
    real = {"adversarial": realized(env, params, k_real, num_episodes=K, seeds=cfg.seeds,
                                    rho=cfg.rho, beta=cfg.beta, lam=cfg.lam)}
    if cfg.real_random:
      from drjax.envs import random_linear_drmdp  # pylint: disable=g-import-not-at-top
      env_r, params_r = random_linear_drmdp(k_theta, S, A, d, H)
      real["dense_random"] = realized(env_r, params_r, k_real, num_episodes=K, seeds=cfg.seeds,
                                      rho=cfg.rho, beta=cfg.beta, lam=cfg.lam)
    row["real"] = real
    for inst, r in real.items():
      log(f"[adversarial]   {inst} instance (V* {r['v_star']:.4f}, action gap "
          f"{r['action_gap']:.4f}): " + "; ".join(
          f"{a} ratio {np.mean(r[a]['ratio']):.3f} AveSubopt {np.mean(r[a]['ave_subopt']):.4f}"
          for a in r if isinstance(r[a], dict)))
    log(f"[adversarial]   real runs: {time.perf_counter() - t1:.1f} s")
    per_d.append(row)
  return {"config": dataclasses.asdict(cfg), "provenance": _provenance(),
          "seconds": round(time.perf_counter() - t_all, 1), "per_d": per_d,
          "exponents": fits(per_d, cfg)}


def _median_cos(x) -> float:
  """Median cosine between distinct feature vectors (near 1: nearly collinear features)."""
  x = x / np.linalg.norm(x, axis=1, keepdims=True)
  c = x @ x.T
  return float(np.median(c[np.triu_indices(len(x), 1)]))


def fits(per_d, cfg: Config) -> dict:
  """Log-log slopes in d with 95% bootstrap intervals."""
  key = jax.random.key(cfg.seed + 1)
  dims_ = [r["d"] for r in per_d]
  out = {}

  def fit(name, samples, stat=np.mean):
    nonlocal key
    key, sub = jax.random.split(key)
    out[name] = bootstrap_slope(dims_, samples, sub, cfg.bootstrap, stat)

  fit("surrogate_adversarial_best_over_restarts",
      [r["surrogate"]["adversarial_exact"] for r in per_d], np.max)
  fit("surrogate_adversarial_median_over_restarts",
      [r["surrogate"]["adversarial_exact"] for r in per_d], np.median)
  fit("surrogate_dense_random", [r["surrogate"]["dense_random"] for r in per_d])
  for inst in per_d[0]["real"]:
    for agent in ("dr-lsvi-ucb", "lsvi-ucb"):
      for q in ("ratio", "rect", "ave_subopt"):
        fit(f"real_{inst}_{agent}_{q}", [r["real"][inst][agent][q] for r in per_d])
  return out


def main(argv=None) -> int:
  """``python -m drjax.paper.adversarial --out DIR [--quick]``."""
  p = argparse.ArgumentParser(prog="python -m drjax.paper.adversarial", description=__doc__
                              .split("\n\n")[0])
  p.add_argument("--out", required=True, help="directory for adversarial.json")
  p.add_argument("--quick", action="store_true", help="d = 4, 8, 16, K = 300 (about 2 minutes)")
  p.add_argument("--dims", type=str, default=None, help="comma-separated d values")
  p.add_argument("--episodes", type=int, default=None, help="K")
  args = p.parse_args(argv)
  cfg = QUICK if args.quick else Config()
  if args.dims:
    dims_ = tuple(int(x) for x in args.dims.split(","))
    for x in dims_:
      _checks.integer("--dims", x, 2)
    cfg = dataclasses.replace(cfg, dims=dims_)
  if args.episodes is not None:
    cfg = dataclasses.replace(cfg, episodes=_checks.integer("--episodes", args.episodes, 1))
  os.makedirs(args.out, exist_ok=True)
  res = study(cfg, log=lambda m: print(m, flush=True))
  path = os.path.join(args.out, "adversarial.json")
  with open(path, "w", encoding="utf-8") as f:
    json.dump(res, f, indent=1)
  for name, e in res["exponents"].items():
    print(f"[adversarial] exponent in d, {name}: {e['slope']:.3f} [{e['lo']:.3f}, {e['hi']:.3f}]")
  print(f"[adversarial] wrote {path} ({res['seconds']} s)")
  return 0


if __name__ == "__main__":
  sys.exit(main())
