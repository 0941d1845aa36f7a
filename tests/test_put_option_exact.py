"""Exact put-option evaluation on the price lattice against brute force, dense sampling and MC."""

import functools
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from drjax import evaluate
from drjax.agents.base import QFunction
from drjax.agents.lsvi import dr_lsvi_ucb, lsvi_ucb
from drjax.envs import put_option as po
from drjax.envs.put_option import PutOption, PutOptionState

H = 4


def random_qf(key, d, beta=0.5) -> QFunction:
  """A QFunction with random weights: mixed exercise/hold decisions across prices and steps."""
  k1, k2 = jax.random.split(key)
  w = 2.0 * jax.random.normal(k1, (H, d))
  linv = jnp.broadcast_to(0.3 * jnp.eye(d), (H, d, d)) + 0.05 * jax.random.uniform(k2, (H, d, d))
  pinv = jnp.einsum("hji,hjk->hik", linv, linv)  # Lambda^-1 = L^-T L^-1, PSD
  return QFunction(w=w, pinv=pinv, beta=jnp.asarray(beta), top=jnp.arange(H, 0, -1.0) * 5,
                   nu=jnp.zeros((H, d)), alpha=jnp.zeros((H, d)))


CASES = [("paper", "dr", 0), ("notebook", "ls", 1), ("notebook", "dr", 2), ("paper", "ls", 3)]


def make_case(variant, which, seed):
  env = PutOption(num_anchors=6, horizon=H, variant=variant)
  d = env.feature_dim
  agent = (dr_lsvi_ucb if which == "dr" else lsvi_ucb)(H, d, 2, 8)
  return env, agent, random_qf(jax.random.PRNGKey(seed), d)


def act_fn(env, agent, qf):
  f = jax.jit(lambda h, s: agent.act(qf, h, env.phi_all(
      PutOptionState(s, jnp.asarray(False), jnp.asarray(h, jnp.int32)), None), False))
  return functools.lru_cache(maxsize=None)(lambda h, s: int(f(h, s)))


def brute_force(act, s0, p_u):
  """Expected return by enumerating all 2^H up/down sequences (prices by repeated products)."""
  total = 0.0
  for moves in itertools.product((True, False), repeat=H):
    prob = float(np.prod([p_u if up else 1 - p_u for up in moves]))
    price, ret = s0, 0.0
    for h, up in enumerate(moves):
      if act(h, price) == po.EXERCISE:
        ret = max(0.0, 100.0 - price)
        break
      price = price * (1.02 if up else 0.98)
    total += prob * ret
  return total


@pytest.mark.parametrize("variant,which,seed", CASES[1:3])
def test_lattice_value_equals_brute_force_over_all_paths(variant, which, seed):
  env, agent, qf = make_case(variant, which, seed)
  act = act_fn(env, agent, qf)
  raw = evaluate._put_agent_action_fn(env, agent, qf)
  p_us = jnp.asarray([0.1, 0.5, 0.83])
  exact_fixed = jax.jit(lambda s0: evaluate.put_option_exact_values(
      env, agent, qf, p_us, s0, s0)["values"])
  direct = jax.jit(lambda s0: jax.vmap(lambda p: po.lattice_value(
      evaluate.put_option_node_actions(raw, s0, H), po.lattice_prices(s0, H), p))(p_us))
  decisions = set()
  for s0 in (91.3, 96.0, 99.1, 101.7, 104.2):
    want = [brute_force(act, s0, float(p)) for p in p_us]
    np.testing.assert_allclose(direct(s0), want, rtol=0, atol=1e-10)
    np.testing.assert_allclose(exact_fixed(s0), want, rtol=0, atol=1e-10)
    decisions |= {act(h, s0 * 1.02**j * 0.98**(h - j)) for h in range(H) for j in range(h + 1)}
  assert decisions == {0, 1}  # the policies exercise somewhere and hold somewhere


@pytest.mark.parametrize("variant,which,seed", CASES[:2])
def test_integral_over_s0_equals_dense_average(variant, which, seed):
  env, agent, qf = make_case(variant, which, seed)
  raw = evaluate._put_agent_action_fn(env, agent, qf)
  p_us = jnp.asarray([0.2, 0.5, 0.8])
  res = jax.jit(lambda: evaluate.put_option_exact_values(env, agent, qf, p_us, 95.0, 105.0))()
  assert int(res["max_count"]) <= 8
  pointwise = jax.jit(jax.vmap(lambda s0: jax.vmap(lambda p: po.lattice_value(
      evaluate.put_option_node_actions(raw, s0, H), po.lattice_prices(s0, H), p))(p_us)))
  n = 20000
  mids = 95.0 + 10.0 * (np.arange(n) + 0.5) / n
  dense = np.asarray(pointwise(jnp.asarray(mids))).mean(0)
  # The value jumps where the policy changes: the dense midpoint rule is off by <= jumps * h.
  np.testing.assert_allclose(res["values"], dense, atol=4e-4)
  # Gauss-Legendre converges slowly on a discontinuous integrand; the exact value is its limit.
  errs = []
  for nodes in (8, 512):
    x, w = np.polynomial.legendre.leggauss(nodes)
    gl = (w[:, None] * np.asarray(pointwise(jnp.asarray(100 + 5 * x)))).sum(0) / 2
    errs.append(np.abs(gl - np.asarray(res["values"])).max())
  assert errs[1] < 5e-3


def brute_force_optimum(s0, p_u, rho, horizon):
  """max over all node policies of min over all adversarial up-probabilities per node."""
  nodes = [(h, j) for h in range(horizon) for j in range(h + 1)]
  ends = sorted({min(1.0, max(0.0, p_u - rho)), min(1.0, max(0.0, p_u + rho))})

  def value(policy, adversary):
    total = 0.0
    for moves in itertools.product((True, False), repeat=horizon):
      prob, ret, j, done = 1.0, 0.0, 0, False
      for h, up in enumerate(moves):
        if done:  # moves after exercising: any fixed probabilities (they sum to one)
          prob *= p_u if up else 1 - p_u
          continue
        price = s0 * 1.02**j * 0.98**(h - j)
        if policy[(h, j)] == po.EXERCISE:
          ret, done = max(0.0, 100.0 - price), True
          prob *= p_u if up else 1 - p_u
          continue
        p = adversary[(h, j)]
        prob *= p if up else 1 - p
        j += up
      total += prob * ret
    return total

  best = -np.inf
  for acts in itertools.product((0, 1), repeat=len(nodes)):
    policy = dict(zip(nodes, acts))
    worst = min(value(policy, dict(zip(nodes, adv)))
                for adv in itertools.product(ends, repeat=len(nodes)))
    best = max(best, worst)
  return best


@pytest.mark.parametrize("s0,p_u,rho", [(99.0, 0.5, 0.0), (99.0, 0.5, 0.3), (100.5, 0.3, 0.2),
                                        (97.0, 0.7, 0.0)])
def test_optimal_stopping_equals_brute_force_over_all_policies(s0, p_u, rho):
  horizon = 3
  env = PutOption(num_anchors=4, horizon=horizon)
  want = brute_force_optimum(s0, p_u, rho, horizon)

  @jax.jit
  def exact(s0, p_u, rho):
    fn = lambda h, s: po.optimal_stopping_action(h, s, horizon, p_u, rho)  # noqa: E731
    acts = evaluate.put_option_node_actions(fn, s0, horizon)
    direct = po.lattice_value(acts, po.lattice_prices(s0, horizon), p_u, rho)
    # The same through the PutPolicy representation (fixed initial price), robust evaluation.
    policy = evaluate.put_option_optimal_policy(env, s0, s0, source_p_u=p_u, rho=rho)
    return direct, evaluate.put_option_piecewise_values(policy, p_u[None], s0, s0, rho)[0]

  direct, via_policy = exact(jnp.asarray(s0), jnp.asarray(p_u), jnp.asarray(rho))
  np.testing.assert_allclose([direct, via_policy], [want, want], atol=1e-10)


def test_nonrobust_optimum_holds_to_maturity_robust_one_exercises_earlier():
  # p_u = 0.5, no discounting: the price is a martingale, so holding is (weakly) optimal; the
  # source-optimal policy's value in any target is then E[max(0, 100 - s_{H-1})].
  env = PutOption()
  p_us = jnp.asarray([0.2, 0.5, 0.8])
  opt = jax.jit(lambda rho: evaluate.put_option_optimal_values(env, p_us, 100.0, 100.0,
                                                               rho=rho)["values"])
  got = opt(0.0)
  k = np.arange(10)
  from math import comb
  for p, g in zip(np.asarray(p_us), np.asarray(got)):
    want = sum(comb(9, j) * p**j * (1 - p)**(9 - j) * max(0, 100 - 100 * 1.02**j * 0.98**(9 - j))
               for j in k)
    assert g == pytest.approx(want, abs=1e-9)
  robust = opt(0.3)
  assert robust[2] > got[2] and robust[0] < got[0]  # better when prices rise, worse when they fall


def test_monte_carlo_with_crn_agrees_with_exact_within_4_standard_errors():
  env = PutOption(variant="notebook")
  d = env.feature_dim
  agent = lsvi_ucb(env.horizon, d, 2, 8)
  key = jax.random.PRNGKey(7)
  w = jnp.concatenate([3.0 * jax.random.uniform(key, (env.horizon, d - 1)),
                       jnp.ones((env.horizon, 1))], axis=1)
  qf = QFunction(w=w, pinv=jnp.zeros((env.horizon, d, d)), beta=jnp.asarray(0.0),
                 top=jnp.full((env.horizon,), 30.0), nu=jnp.zeros_like(w), alpha=jnp.zeros_like(w))
  src = env.make_params()
  p_us = jnp.asarray([0.3, 0.6])
  exact = jax.jit(lambda qf: evaluate.put_option_exact_values(env, agent, qf, p_us, 95.0,
                                                               105.0)["values"])(qf)
  for p, e in zip(p_us, exact):
    mc = evaluate.mc_evaluate(env, agent, qf, env.target_params(src, p), jax.random.PRNGKey(3),
                              4000)
    assert abs(float(mc["mean"]) - float(e)) <= 4 * float(mc["stderr"]), (p, mc["mean"], e)
    assert float(mc["stderr"]) > 0


@pytest.mark.parametrize("kwargs,msg", [
    (dict(p_us=[1.5]), "p_us"),
    (dict(init_low=0.0), "init_low"),
    (dict(init_low=106.0), "init_low"),
])
def test_bad_put_option_evaluation_arguments(kwargs, msg):
  env = PutOption(num_anchors=4, horizon=H)
  agent = lsvi_ucb(H, 5, 2, 4)
  args = dict(p_us=[0.5], init_low=95.0, init_high=105.0) | kwargs
  with pytest.raises(ValueError, match=msg):
    evaluate.put_option_exact_values(env, agent, random_qf(jax.random.PRNGKey(0), 5), **args)
