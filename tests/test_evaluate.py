"""AveSubopt curves, Theorem 1's bound, exact and Monte Carlo target-domain values."""

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from drjax import evaluate, planning
from drjax.agents.base import QFunction, make_hparams
from drjax.agents.lsvi import dr_lsvi_ucb
from drjax.envs.linear_mdp import LinearMDP, LinearMDPParams, target_params
from drjax.train import make_train

ENV = LinearMDP()
SOURCE = ENV.make_params(delta=0.3, p=0.001, xi_norm=0.1)
MODEL = ENV.model(SOURCE)
RHO = np.zeros((3, 4))
RHO[0, 3] = 0.5
K = 100
SEEDS = 100
AGENT = dr_lsvi_ucb(3, 4, 16, K)
M = 0.4  # delta + xi_norm
V2X2 = 2 * M + (1 - M) * (1 - 0.001) * M  # V_2*(x2) = 1.03976


@pytest.fixture(scope="module")
def trained():
  hp = make_hparams(3, 4, rho=RHO, beta=1.0, lam=0.1)
  train = jax.jit(jax.vmap(make_train(ENV, AGENT, K, record_q=True), in_axes=(0, None, None)))
  return train(jax.random.split(jax.random.key(0), SEEDS), hp, SOURCE)


@pytest.fixture(scope="module")
def subopt(trained):
  return jax.vmap(lambda qf: evaluate.ave_subopt(AGENT, qf, MODEL, RHO))(trained.qf)


GREEDY = jax.jit(evaluate.greedy_policy, static_argnums=0)
REVAL = jax.jit(planning.robust_evaluate)


def hand_qf(first_step_w, last_step_w=(0, 0, 0, 1.0)) -> QFunction:
  """A QFunction without bonus: weights ``first_step_w`` at step 1, ``last_step_w`` at step 3,
  and ``e_4`` (prefer the goal: action (1,1,1,1)) at step 2."""
  w = jnp.asarray([first_step_w, [0, 0, 0, 1.0], last_step_w])
  return QFunction(w=w, pinv=jnp.broadcast_to(jnp.eye(4), (3, 4, 4)), beta=jnp.asarray(0.0),
                   top=jnp.asarray([3.0, 2.0, 1.0]), nu=jnp.zeros((3, 4)),
                   alpha=jnp.zeros((3, 4)))


QF_PLUS = hand_qf([0.0, 0.0, 0.0, 1.0])  # (1,1,1,1) everywhere
QF_MINUS = hand_qf([1.0, 0.0, 0.0, 0.5])  # (-1,-1,-1,-1) at x1 in step 1, (1,1,1,1) elsewhere
QF_LAST = hand_qf([0.0, 0.0, 0.0, 1.0], [1.0, 1.0, 1.0, 0.0])  # QF_PLUS but -1 at step 3


def _at(tree, *idx):
  return jax.tree_util.tree_map(lambda x: x[idx], tree)


# ---------------------------------------------------------------------------------------------
# Greedy policies and AveSubopt.


@jax.jit
def _act_everywhere(qf):
  """``agent.act`` at every (h, s) through the environment's own interface: ``[H, S]``."""

  def one(h, s):
    state = ENV.reset(None, SOURCE)._replace(s=s, h=h)
    return AGENT.act(qf, h, ENV.phi_all(state, SOURCE), ENV.is_fail(state, SOURCE))

  hs = jnp.arange(3, dtype=jnp.int32)
  ss = jnp.arange(5, dtype=jnp.int32)
  return jax.vmap(lambda h: jax.vmap(lambda s: one(h, s))(ss))(hs)


def test_greedy_policy_is_agent_act(trained):
  for seed, k in [(0, 0), (3, 5), (7, 40), (11, 99), (19, 70)]:
    qf = _at(trained.qf, seed, k)
    np.testing.assert_array_equal(np.asarray(GREEDY(AGENT, qf, MODEL)),
                                  np.asarray(_act_everywhere(qf)))
  np.testing.assert_array_equal(np.asarray(GREEDY(AGENT, QF_MINUS, MODEL)),
                                [[0, 15, 15, 0, 0], [15, 15, 15, 0, 0], [15, 15, 15, 0, 0]])
  np.testing.assert_array_equal(np.asarray(GREEDY(AGENT, QF_LAST, MODEL))[2], [0, 0, 0, 0, 0])


def test_ave_subopt_decreases_with_k(subopt):
  res = subopt
  ave = np.asarray(res["ave_subopt"])  # [SEEDS, K]
  sub = np.asarray(res["subopt_k"])
  # V_1^{*,rho}(x1) by hand: (1 - c)(1 - p) V_2(x2) + 2 c (1 - rho) at c = 0.2 (action -1).
  np.testing.assert_allclose(np.asarray(res["v_star"]), 0.8 * 0.999 * V2X2 + 0.4 * 0.5,
                             atol=1e-12)
  assert sub.min() >= -1e-12  # nothing beats the optimal robust policy
  np.testing.assert_allclose(ave, np.cumsum(sub, 1) / np.arange(1, K + 1), atol=1e-12)
  diff = ave[:, 9] - ave[:, 99]  # AveSubopt(10) - AveSubopt(100), paired over seeds
  se = diff.std(ddof=1) / math.sqrt(SEEDS)
  a10, a100 = ave[:, 9].mean(), ave[:, 99].mean()
  assert a100 < 0.5 * a10 and a100 < a10 - 0.005, (a10, a100)
  assert diff.mean() > 4 * se, (diff.mean(), se)


def test_ave_subopt_values_are_robust_values_of_greedy_policies(trained, subopt):
  seed = 2
  for k in (0, 1, 17, 99):
    pi = GREEDY(AGENT, _at(trained.qf, seed, k), MODEL)
    v = REVAL(MODEL, RHO, pi)
    np.testing.assert_allclose(float(subopt["value_k"][seed, k]), float(v[0, 0]), atol=1e-12)
  # Hand-made policies: (1,1,1,1) at x1 is worth (0.6)(0.999) V2(x2) + 2 (0.4)(0.5) robustly,
  # (-1,-1,-1,-1) is worth (0.8)(0.999) V2(x2) + 2 (0.2)(0.5) = V_1^{*,rho}(x1).
  for qf, want in ((QF_PLUS, 0.6 * 0.999 * V2X2 + 0.4), (QF_MINUS, 0.8 * 0.999 * V2X2 + 0.2)):
    v = REVAL(MODEL, RHO, GREEDY(AGENT, qf, MODEL))
    np.testing.assert_allclose(float(v[0, 0]), want, atol=1e-12)
  with pytest.raises(ValueError, match="rho"):
    evaluate.ave_subopt(AGENT, _at(trained.qf, seed), MODEL, np.full((3, 4), 2.0))


def test_theorem1_bound_numbers(trained, subopt):
  err = np.asarray(trained.estimation_error)  # [SEEDS, K]
  H, d, p = 3, 4, 0.01
  b = evaluate.theorem1_bound(err, H, d, p, c=0.5)
  beta = 0.5 * d * H * math.sqrt(math.log(3 * d * K * H / p))
  k = np.arange(1, K + 1)
  np.testing.assert_allclose(float(b["beta"]), beta, rtol=1e-12)
  np.testing.assert_allclose(np.asarray(b["term1"]), np.sqrt(2 * H**3 * math.log(3 / p) / k),
                             rtol=1e-12)
  np.testing.assert_allclose(np.asarray(b["term2"]), 2 * beta * np.cumsum(err, 1) / k,
                             rtol=1e-12)
  np.testing.assert_allclose(np.asarray(b["total"]), np.asarray(b["term1"])[None]
                             + np.asarray(b["term2"]), rtol=1e-12)
  # With the beta the agent used, the bound is (very) loose but holds on every curve.
  ave = np.asarray(subopt["ave_subopt"])
  one = evaluate.theorem1_bound(err[0], H, d, 0.001, beta=1.0)
  assert np.asarray(one["total"]).shape == (K,)
  assert np.all(np.asarray(evaluate.theorem1_bound(err, H, d, 0.001, beta=1.0)["total"]) > ave)
  # Estimation errors shrink, so term2 / term1 is not constant: term2(k) = O(sqrt(log k / k)).
  assert err[:, -10:].mean() < 0.5 * err[:, :10].mean()
  for bad in (0.0, 1.0, -0.5):
    with pytest.raises(ValueError, match="p must lie in"):
      evaluate.theorem1_bound(err, H, d, bad)
  with pytest.raises(ValueError, match="c must be"):
    evaluate.theorem1_bound(err, H, d, 0.1, c=0.0)


# ---------------------------------------------------------------------------------------------
# Target domains: exact and Monte Carlo.


QS = jnp.asarray([0.0, 0.25, 0.5, 0.9, 1.0])


def test_exact_target_values_hand_computed(trained):
  targets = target_params(SOURCE, QS)
  plus = np.asarray(evaluate.exact_target_values(ENV, AGENT, QF_PLUS, targets))
  minus = np.asarray(evaluate.exact_target_values(ENV, AGENT, QF_MINUS, targets))
  q = np.asarray(QS)
  # Target step-1 factors (eq. A.2): x1 -> x2 w.p. 1 - c, -> x5 w.p. c (1 - q), -> x4 w.p. c q.
  np.testing.assert_allclose(plus, 0.6 * V2X2 + 0.8 * (1 - q), atol=1e-12)
  np.testing.assert_allclose(minus, 0.8 * V2X2 + 0.4 * (1 - q), atol=1e-12)
  # Batched over seeds (vmap over qf) == one at a time.
  many = np.asarray(jax.vmap(lambda qf: evaluate.exact_target_values(ENV, AGENT, qf, targets))(
      trained.final_qf))
  assert many.shape == (SEEDS, len(QS))
  for seed in (0, 13):
    one = evaluate.exact_target_values(ENV, AGENT, _at(trained.final_qf, seed), targets)
    np.testing.assert_allclose(many[seed], np.asarray(one), atol=1e-12)
  # The second call with other targets of the same shape reuses the compiled program.
  n0 = evaluate._target_values._cache_size()  # pylint: disable=protected-access
  evaluate.exact_target_values(ENV, AGENT, QF_PLUS, target_params(SOURCE, QS * 0.5))
  assert evaluate._target_values._cache_size() == n0  # pylint: disable=protected-access
  bad = SOURCE._replace(q=jnp.asarray(1.5), target=jnp.asarray(1.0))
  with pytest.raises(ValueError, match="q must satisfy"):
    evaluate.exact_target_values(ENV, AGENT, QF_PLUS, jax.tree_util.tree_map(
        lambda x: x[None], bad))


N_MC = 4000


def mc_over_targets(qf, key, env=ENV, targets=None):
  """``mc_evaluate`` vmapped over the QS target domains (one compilation for every qf/key)."""
  targets = target_params(SOURCE, QS) if targets is None else targets
  return jax.vmap(lambda prm: evaluate.mc_evaluate(env, AGENT, qf, prm, key, N_MC))(targets)


def test_mc_agrees_with_exact_within_4_standard_errors(trained):
  targets = target_params(SOURCE, QS)
  key = jax.random.key(42)
  for qf in (QF_PLUS, QF_MINUS, _at(trained.final_qf, 0)):
    out = mc_over_targets(qf, key)
    exact = np.asarray(evaluate.exact_target_values(ENV, AGENT, qf, targets))
    mean, se = np.asarray(out["mean"]), np.asarray(out["stderr"])
    assert mean.shape == (len(QS),) and np.all(se > 0)
    np.testing.assert_array_less(np.abs(mean - exact), 4 * se)
    np.testing.assert_allclose(se, np.asarray(out["returns"]).std(-1, ddof=1) / math.sqrt(N_MC),
                               rtol=1e-10)
    np.testing.assert_allclose(mean, np.asarray(out["returns"]).mean(-1), rtol=1e-12)


@dataclasses.dataclass(frozen=True)
class NoiseRewardMDP(LinearMDP):
  """The linear MDP with reward = a uniform draw from the step's key (ignores the action)."""

  def step(self, key, state, action, params):
    s2, _, done = super().step(key, state, action, params)
    return s2, jax.random.uniform(jax.random.fold_in(key, 7)), done


def test_common_random_numbers():
  env = NoiseRewardMDP()
  prm = target_params(SOURCE, 0.5)
  k1, k2 = jax.random.key(1), jax.random.key(2)
  a = np.asarray(evaluate.mc_evaluate(env, AGENT, QF_PLUS, prm, k1, N_MC)["returns"])
  b = np.asarray(evaluate.mc_evaluate(env, AGENT, QF_MINUS, prm, k1, N_MC)["returns"])
  c = np.asarray(evaluate.mc_evaluate(env, AGENT, QF_PLUS, prm, k2, N_MC)["returns"])
  np.testing.assert_array_equal(a, b)  # same key, other policy: the same draws
  assert np.mean(a != c) > 0.99  # other key, other draws
  # The draws are a function of (key, episode, step) only: episode_key(key, n, h).
  for n in (0, 1, 1234, N_MC - 1):
    want = sum(float(jax.random.uniform(jax.random.fold_in(evaluate.episode_key(k1, n, h), 7)))
               for h in range(3))
    np.testing.assert_allclose(a[n], want, rtol=1e-12)
  # On the real MDP: two policies that differ only at step 3 (reward c(a), no draw). With CRN
  # their trajectories coincide and the return difference is 0.2 * 1{s_3 in x1..x3}; with
  # independent draws it carries the whole variance of both returns.
  plus = np.asarray(mc_over_targets(QF_PLUS, k1)["returns"])
  last_same = np.asarray(mc_over_targets(QF_LAST, k1)["returns"])
  last_other = np.asarray(mc_over_targets(QF_LAST, k2)["returns"])
  diff = plus - last_same
  assert np.all(np.isin(np.round(diff, 12), [0.0, 0.2]))
  var_crn, var_ind = diff.var(-1), (plus - last_other).var(-1)
  assert np.all(var_crn < 0.1 * var_ind), (var_crn, var_ind)


def test_mc_validation():
  prm = target_params(SOURCE, 0.5)
  with pytest.raises(ValueError, match="num_episodes"):
    evaluate.mc_evaluate(ENV, AGENT, QF_PLUS, prm, jax.random.key(0), 0)
  bad = LinearMDPParams(delta=jnp.asarray(0.3), p=jnp.asarray(0.001), xi_norm=jnp.asarray(0.5),
                        q=jnp.asarray(0.0), target=jnp.asarray(0.0))
  with pytest.raises(ValueError, match="xi_norm"):
    evaluate.mc_evaluate(ENV, AGENT, QF_PLUS, bad, jax.random.key(0), 10)
