"""Behaviors for offline data collection (issue 30, item 4): epsilon-greedy around a policy the
library learned (``make_train``'s ``final_qf``) and a user policy, then an offline fit on the data.

The actions are checked against the policy recomputed at the recorded states from the
environment's model (the greedy action in NumPy from the agent's weights), and epsilon's share of
non-greedy actions against its expectation ``epsilon (A - 1) / A``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from drjax import data as data_lib
from drjax.agents import registry
from drjax.envs.random_mdp import RandomLinearMDP
from drjax.train import make_train

N = 400


@pytest.fixture(scope="module")
def learned():
  env = RandomLinearMDP()
  params = env.sample_params(jax.random.PRNGKey(1))
  agent = registry.make("dr-lsvi-ucb", env, capacity=30)
  hp = registry.make_hparams("dr-lsvi-ucb", env, rho=0.1)
  qf = make_train(env, agent, 30)(jax.random.PRNGKey(2), hp, params).final_qf
  return env, params, agent, qf


def _greedy_numpy(env, params, agent, qf, ds):
  """``[H, N]`` the agent's greedy action at each recorded state, from the model's features and
  the Q-function's arrays: ``argmax_a min(phi^T w_h + beta sum_i phi_i sqrt([Lambda_h^-1]_ii),
  H - h)``, ties to the largest untruncated value, then the lowest index."""
  phi = np.asarray(env.model(params).phi)  # [H, S, A, d]
  w, pinv, beta = np.asarray(qf.w), np.asarray(qf.pinv), float(qf.beta)
  H = env.horizon
  out = np.zeros(ds.state.shape, np.int64)
  for h in range(H):
    bonus = beta * np.sqrt(np.diagonal(pinv[h]))
    for n in range(ds.state.shape[1]):
      x = phi[h, int(ds.state[h, n])]  # [A, d]
      raw = x @ w[h] + x @ bonus
      q = np.clip(raw, 0, H - h)
      best = np.flatnonzero(q == q.max())
      out[h, n] = best[np.argmax(raw[best])]
  return out


def test_epsilon_zero_is_the_learned_policy(learned):
  env, params, agent, qf = learned
  ds = data_lib.collect(env, params, data_lib.epsilon_greedy(agent, qf, 0.0),
                        jax.random.PRNGKey(3), N)
  greedy = _greedy_numpy(env, params, agent, qf, ds)
  assert len(np.unique(greedy)) > 1  # a policy that depends on the state
  np.testing.assert_array_equal(np.asarray(ds.action), greedy)


@pytest.mark.parametrize("eps", [0.3, 1.0])
def test_epsilon_share_of_exploration(learned, eps):
  env, params, agent, qf = learned
  ds = data_lib.collect(env, params, data_lib.epsilon_greedy(agent, qf, eps),
                        jax.random.PRNGKey(4), N)
  greedy = _greedy_numpy(env, params, agent, qf, ds)
  A = env.num_actions
  off = np.mean(np.asarray(ds.action) != greedy)
  p = eps * (A - 1) / A
  sd = np.sqrt(p * (1 - p) / ds.action.size)
  assert abs(off - p) < 4 * sd + 1e-12, (off, p, sd)
  if eps == 1.0:  # uniform: every action about 1 / A of the time
    counts = np.bincount(np.asarray(ds.action).ravel(), minlength=A) / ds.action.size
    assert np.all(np.abs(counts - 1 / A) < 4 * np.sqrt((1 / A) * (1 - 1 / A) / ds.action.size))


def test_user_policy_and_offline_fit(learned):
  env, params, _, qf = learned
  del qf

  def largest_first_feature(key, phi_all, h):  # a user policy: any pure JAX function
    del key, h
    return jnp.argmax(phi_all[:, 1]).astype(jnp.int32)

  ds = data_lib.collect(env, params, largest_first_feature, jax.random.PRNGKey(5), 50)
  phi = np.asarray(env.model(params).phi)
  want = np.array([[np.argmax(phi[h, int(s), :, 1]) for s in row]
                   for h, row in enumerate(np.asarray(ds.state))])
  np.testing.assert_array_equal(np.asarray(ds.action), want)
  # an offline agent fits the data of either behavior
  drpvi = registry.make("drpvi", env)
  fitted = drpvi.fit(ds, registry.make_hparams("drpvi", env, rho=0.1))
  assert np.all(np.isfinite(np.asarray(fitted.w)))


def test_epsilon_greedy_rejects_bad_epsilon(learned):
  _, _, agent, qf = learned
  for bad in (-0.1, 1.5):
    with pytest.raises(ValueError, match="epsilon"):
      data_lib.epsilon_greedy(agent, qf, bad)
