"""Rewards learned from data (issue 30, item 4): every built-in agent's ``reward`` option.

* DR-LSVI-UCB with ``reward="regressed"`` is Algorithm 1 with ``r_h`` replaced by its ridge
  estimate, ``w_h = Lambda_h^-1 sum phi r + nu_h``: checked against a loop-based NumPy backward
  induction written from the paper's equations, on teacher-forced episodes;
* every agent, online and offline: the regressed agent equals the known-reward agent given the
  NumPy ridge estimate ``theta_hat_h = (sum phi phi^T + lambda I)^-1 sum phi r`` as its theta
  (VA-DRPVI: the variance-weighted estimate, its Algorithm 2: the unweighted one);
* with rewards exactly linear in the features, the regressed agent converges to the known-theta
  agent as the data grow;
* the sweeps build agents with ``reward="regressed"`` for an environment with
  ``reward_known = False`` and record the reward source of each agent.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from drjax import data as data_lib
from drjax.agents import offline, registry
from drjax.envs.random_mdp import RandomLinearMDP

H, D, A = 3, 3, 2
LAM, BETA = 0.3, 0.7


def _episodes(key, k: int):
  """``k`` random teacher-forced episodes: features on the simplex, rewards in [0, 1], a few
  fail next states."""
  k1, k2, k3, k4 = jax.random.split(key, 4)
  phi = np.asarray(jax.random.dirichlet(k1, jnp.ones(D), (k, H)))
  nphi = np.asarray(jax.random.dirichlet(k2, jnp.ones(D), (k, H, A)))
  reward = np.asarray(jax.random.uniform(k3, (k, H)))
  fail = np.asarray(jax.random.uniform(k4, (k, H)) < 0.2)
  return phi, reward, nphi, fail


def _numpy_dr_lsvi_ucb(phi, reward, nphi, fail, rho):
  """Algorithm 1 (Liu & Xu 2024) with the ridge reward, loop by loop: ``[H, d]`` weights w_h.

  Fail-state form of the TV dual (``m = 0``): ``nu_i = max_{alpha in [0, H]} [Lambda^-1 sum_k
  phi_k min(V_{h+1}(s'_k), alpha)]_i - rho_{h,i} alpha``, piecewise linear in alpha with kinks at
  the V's, so its maximum over [0, H] is at a kink or an end.
  """
  K = phi.shape[0]
  w = np.zeros((H, D))
  pinv = np.zeros((H, D, D))
  for h in range(H):
    lam_h = LAM * np.eye(D)
    for k in range(K):
      lam_h += np.outer(phi[k, h], phi[k, h])
    pinv[h] = np.linalg.inv(lam_h)
  for h in reversed(range(H)):
    rsum = np.zeros(D)
    for k in range(K):
      rsum += phi[k, h] * reward[k, h]
    r_hat = pinv[h] @ rsum
    if h == H - 1:
      w[h] = r_hat
      continue
    top = H - (h + 1)  # the paper's H - h + 1 for 1-indexed step h + 2
    v = np.zeros(K)
    for k in range(K):
      if fail[k, h]:
        continue
      best = -np.inf
      for a in range(A):
        x = nphi[k, h, a]
        bonus = BETA * sum(x[i] * np.sqrt(pinv[h + 1][i, i]) for i in range(D))
        best = max(best, min(max(x @ w[h + 1] + bonus, 0.0), top))
      v[k] = best
    nu = np.zeros(D)
    for i in range(D):
      best = -np.inf
      for alpha in [0.0, float(H)] + list(v):
        z = pinv[h] @ sum(phi[k, h] * min(v[k], alpha) for k in range(K))
        best = max(best, z[i] - rho[h, i] * alpha)
      nu[i] = best
    w[h] = r_hat + nu
  return w


def _teacher_forced(agent, phi, reward, nphi, fail, theta):
  state = agent.init(jnp.asarray(theta), LAM, capacity=phi.shape[0])
  for k in range(phi.shape[0]):
    state = agent.update(state, jnp.asarray(phi[k]), jnp.asarray(reward[k]),
                         jnp.asarray(nphi[k]), jnp.asarray(fail[k]),
                         jnp.zeros((H,), jnp.int32))
  return state


def _ridge_theta(phi, reward, weights=None):
  """``[H, d]`` ``(sum w phi phi^T + lambda I)^-1 sum w phi r`` in NumPy (``phi [N, H, d]``)."""
  w = np.ones(reward.shape) if weights is None else weights
  return np.stack([np.linalg.solve(
      np.einsum("n,nd,ne->de", w[:, h], phi[:, h], phi[:, h]) + LAM * np.eye(D),
      np.einsum("n,nd,n->d", w[:, h], phi[:, h], reward[:, h])) for h in range(H)])


@pytest.mark.parametrize("solver", ["cholesky", "sherman-morrison"])
def test_dr_lsvi_ucb_regressed_is_algorithm_1_with_the_ridge_reward(solver):
  phi, reward, nphi, fail = _episodes(jax.random.PRNGKey(0), 7)
  rho = np.asarray(jax.random.uniform(jax.random.PRNGKey(1), (H, D), maxval=0.5))
  agent = registry.make("dr-lsvi-ucb", (H, D, A), capacity=7, reward="regressed", solver=solver)
  # theta is ignored by the regressed agent: give it garbage
  state = _teacher_forced(agent, phi, reward, nphi, fail, np.full((H, D), 5.0))
  hp = registry.make_hparams("dr-lsvi-ucb", (H, D, A), rho=rho, beta=BETA, lam=LAM)
  qf = agent.plan(state, hp)
  want = _numpy_dr_lsvi_ucb(phi, reward, nphi, fail, rho)
  np.testing.assert_allclose(np.asarray(qf.w), want, rtol=1e-9, atol=1e-10)
  # and the known-theta agent is not that (the test can tell them apart)
  known = registry.make("dr-lsvi-ucb", (H, D, A), capacity=7, solver=solver)
  qf_t = known.plan(_teacher_forced(known, phi, reward, nphi, fail, np.zeros((H, D))), hp)
  assert np.max(np.abs(np.asarray(qf_t.w) - want)) > 1e-2


@pytest.mark.parametrize("name", ["dr-lsvi-ucb", "lsvi-ucb"])
def test_online_regressed_equals_theta_agent_given_the_ridge_estimate(name):
  phi, reward, nphi, fail = _episodes(jax.random.PRNGKey(2), 9)
  theta_hat = _ridge_theta(phi, reward)
  reg = registry.make(name, (H, D, A), capacity=9, reward="regressed")
  known = registry.make(name, (H, D, A), capacity=9, reward="theta")
  hp = registry.make_hparams(name, (H, D, A), beta=BETA, lam=LAM,
                             **({"rho": 0.2} if name == "dr-lsvi-ucb" else {}))
  qf_r = reg.plan(_teacher_forced(reg, phi, reward, nphi, fail, np.zeros((H, D))), hp)
  qf_t = known.plan(_teacher_forced(known, phi, reward, nphi, fail, theta_hat), hp)
  np.testing.assert_allclose(np.asarray(qf_r.w), np.asarray(qf_t.w), rtol=1e-9, atol=1e-10)


def _dataset(key, n):
  phi, reward, nphi, fail = _episodes(key, n)
  sw = lambda x: jnp.asarray(np.swapaxes(x, 0, 1))  # noqa: E731  [N, H, ...] -> [H, N, ...]
  return data_lib.Dataset(phi=sw(phi), action=jnp.zeros((H, n), jnp.int32), reward=sw(reward),
                          next_phi=sw(nphi), next_fail=sw(fail),
                          state=jnp.zeros((H, n), jnp.int32),
                          next_state=jnp.zeros((H, n), jnp.int32),
                          theta=jnp.zeros((H, D)), valid=jnp.ones((n,), bool)), (phi, reward)


OFFLINE = ("pevi", "drpvi", "va-drpvi", "r2pvi-tv", "r2pvi-kl", "r2pvi-chi2", "drvi-l")


@pytest.mark.parametrize("name", OFFLINE + ("va-drpvi:alg2",))
def test_offline_regressed_equals_theta_agent_given_the_ridge_estimate(name):
  name, _, variance = name.partition(":")
  opts = {"variance": variance} if variance else {}
  ds, (phi, reward) = _dataset(jax.random.PRNGKey(3), 11)
  pilot, (pphi, preward) = _dataset(jax.random.PRNGKey(4), 11)
  reg = registry.make(name, (H, D, A), reward="regressed", **opts)
  known = registry.make(name, (H, D, A), reward="theta", **opts)
  spec = registry.get(name)
  level = {"rho": 0.2} if "rho" in spec.hparams else (
      {"reg_weight": 0.5} if "reg_weight" in spec.hparams else {})
  hp = registry.make_hparams(name, (H, D, A), beta=BETA, lam=LAM, **level)
  if not reg.needs_pilot:
    theta_hat = _ridge_theta(phi, reward)
    qf_r = reg.fit(ds, hp)
    qf_t = known.fit(ds._replace(theta=jnp.asarray(theta_hat)), hp)
  else:
    # VA-DRPVI: its pilot pass regresses the pilot's rewards (the theta agent: the pilot's ridge
    # estimate), Alg. 3's weighted pass the weighted estimate with the variance weights, Alg. 2
    # the unweighted one. fit's check that the pilot's theta is the dataset's is skipped (core).
    pilot_theta = jnp.asarray(_ridge_theta(pphi, preward))
    weights = None
    if variance != "alg2":
      w_reg = np.asarray(reg.variance_weights(ds, hp, pilot))
      w_known = np.asarray(known.variance_weights(ds._replace(theta=pilot_theta), hp,
                                                  pilot._replace(theta=pilot_theta)))
      np.testing.assert_allclose(w_reg, w_known, rtol=1e-8, atol=1e-10)
      weights = np.swapaxes(w_reg, 0, 1)
    theta_hat = _ridge_theta(phi, reward, weights)
    qf_r = reg.fit(ds, hp, pilot=pilot)
    qf_t = known.fit.unchecked(ds._replace(theta=jnp.asarray(theta_hat)), hp,
                               pilot=pilot._replace(theta=pilot_theta))
  np.testing.assert_allclose(np.asarray(qf_r.w), np.asarray(qf_t.w), rtol=1e-8, atol=1e-9)
  # the datasets' theta (zeros) gives another agent: the test can tell them apart
  kw = {"pilot": pilot} if reg.needs_pilot else {}
  assert np.max(np.abs(np.asarray(known.fit(ds, hp, **kw).w) - np.asarray(qf_r.w))) > 1e-3


def _buffer_state(agent, ds, theta):
  """The online buffer-form state holding every trajectory of ``ds`` (teacher forcing)."""
  n = ds.phi.shape[1]
  st = agent.init(theta, LAM, capacity=n)
  return st._replace(gram=jnp.einsum("hnd,hne->hde", ds.phi, ds.phi),
                     phir=jnp.einsum("hnd,hn->hd", ds.phi, ds.reward), phi=ds.phi,
                     reward=ds.reward, next_phi=ds.next_phi, next_fail=ds.next_fail,
                     count=jnp.asarray(n, jnp.int32))


def test_regressed_converges_to_known_theta_with_linear_rewards():
  """Rewards exactly ``phi @ theta_h`` (a random linear DRMDP): the regressed agent's Q at the
  visited states approaches the known-theta agent's as the data grow (ridge bias ~ lambda / N)."""
  env = RandomLinearMDP()
  params = env.sample_params(jax.random.PRNGKey(5))
  model = env.model(params)
  np.testing.assert_allclose(np.asarray(model.reward),  # the premise: rewards linear in phi
                             np.einsum("hsad,hd->hsa", model.phi, model.theta), atol=1e-12)
  Hh, d, Aa = env.horizon, env.feature_dim, env.num_actions
  hp = registry.make_hparams("dr-lsvi-ucb", env, rho=0.1, beta=BETA, lam=LAM)
  gaps = []
  sizes = (20, 200, 2000)
  big = data_lib.collect(env, params, data_lib.uniform(Aa), jax.random.PRNGKey(6), sizes[-1])

  @jax.jit  # one program per data size (op by op it compiled about 1,100 small programs)
  def max_gap(ds):
    n = ds.phi.shape[1]
    reg = registry.make("dr-lsvi-ucb", env, capacity=n, reward="regressed")
    known = registry.make("dr-lsvi-ucb", env, capacity=n)
    qr = reg.plan(_buffer_state(reg, ds, model.theta), hp)
    qt = known.plan(_buffer_state(known, ds, model.theta), hp)
    # Q at every action of the states visited at each step (the span the data cover)
    phi_all = model.phi[jnp.arange(Hh)[:, None], ds.state]  # [H, n, A, d]
    fail = ds.state == model.fail_state
    return jnp.stack([jnp.max(jnp.abs(reg.q_values(qr, h, phi_all[h], fail[h])
                                      - known.q_values(qt, h, phi_all[h], fail[h])))
                      for h in range(Hh)])

  for n in sizes:
    ds = data_lib.with_size(big, n)
    ds = jax.tree_util.tree_map(lambda x: x[:, :n] if x.ndim >= 2 and x.shape[1] == sizes[-1]
                                else x, ds)
    ds = ds._replace(valid=ds.valid[:n])
    gaps.append(float(np.max(np.asarray(max_gap(ds)))))
  print("max |Q_regressed - Q_theta| at visited states, N =", sizes, ":", gaps)
  assert gaps[0] > gaps[1] > gaps[2], gaps
  assert gaps[2] < 0.02 and gaps[2] < gaps[0] / 10, gaps
  del d


def test_sweeps_build_regressed_agents_when_the_reward_is_unknown():
  from drjax.sweeps import config as config_lib
  from drjax.sweeps import grid, program

  @dataclasses.dataclass(frozen=True)
  class NoReward(RandomLinearMDP):
    reward_known = False

  agents = ("dr-lsvi-ucb", "lsvi-ucb", "pevi", "drpvi", "r2pvi-kl")
  cfg = config_lib.validate(config_lib.SweepConfig(env="random", agents=agents, seeds=2,
                                                   episodes=5))
  known_env, unknown_env = RandomLinearMDP(), NoReward()
  assert RandomLinearMDP.reward_known and not unknown_env.reward_known
  assert "reward_known" not in {f.name for f in dataclasses.fields(unknown_env)}  # not a field
  for name in agents:
    opts = {"capacity": 5} if registry.get(name).kind == "online" else {}
    assert program._make_agent(name, cfg, unknown_env) is registry.make(
        name, unknown_env, reward="regressed", **opts)
    assert program._make_agent(name, cfg, known_env) is registry.make(name, known_env, **opts)
  assert grid.layout(cfg, known_env).describe()["reward"] == {
      "dr-lsvi-ucb": "theta", "lsvi-ucb": "regressed", "pevi": "regressed", "drpvi": "theta",
      "r2pvi-kl": "theta"}
  assert grid.layout(cfg, unknown_env).describe()["reward"] == {a: "regressed" for a in agents}


def test_reward_option_errors():
  with pytest.raises(ValueError, match="reward"):
    registry.make("drpvi", (H, D, A), reward="learned")
  with pytest.raises(ValueError, match="reward"):
    registry.make("dr-lsvi-ucb", (H, D, A), capacity=3, reward="known")
  for name in registry.names():
    if name in registry.BUILTIN_REWARDS:
      assert "reward" in registry.get(name).options
      assert registry.reward_source(name) == registry.BUILTIN_REWARDS[name]
  assert offline.pevi(H, D, A, reward="theta") is not offline.pevi(H, D, A)


@pytest.mark.parametrize("name", ["dr-lsvi-ucb", "lsvi-ucb"])
def test_regressed_online_agents_same_in_both_state_forms(name):
  """The sufficient-statistics form keeps ``sum phi r`` too: the regressed agents learn the same
  Q-function in both forms on the same random numbers."""
  from drjax.train import make_train  # pylint: disable=g-import-not-at-top
  env = RandomLinearMDP()
  params = env.sample_params(jax.random.PRNGKey(8))
  agent = registry.make(name, env, capacity=12, reward="regressed")
  hp = registry.make_hparams(name, env, beta=BETA, lam=LAM,
                             **({"rho": 0.2} if name == "dr-lsvi-ucb" else {}))
  key = jax.random.PRNGKey(9)
  out = {form: make_train(env, agent, 12, form=form)(key, hp, params) for form in ("stats",
                                                                                   "buffer")}
  np.testing.assert_array_equal(np.asarray(out["stats"].actions), np.asarray(out["buffer"].actions))
  np.testing.assert_allclose(np.asarray(out["stats"].final_qf.w),
                             np.asarray(out["buffer"].final_qf.w), rtol=1e-9, atol=1e-10)
