"""Environments' separable step randomness (``step_noise`` / ``step_given``).

Training draws every step's random numbers before the episode loop when the environment separates
them; the numbers, and so every result, must be those of ``step(key, ...)``, bit for bit.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import drjax
from drjax.envs.base import categorical_given
from drjax.envs.linear_mdp import LinearMDP
from drjax.envs.put_option import PutOption
from drjax.envs.random_mdp import random_linear_drmdp

import sweep_cli  # tests/sweep_cli.py  (x64 context manager)


def _envs():
  rnd, rnd_params = random_linear_drmdp(jax.random.PRNGKey(1), 6, 3, 4, 3)
  return [(LinearMDP(), LinearMDP().make_params(xi_norm=0.2)),
          (PutOption(), PutOption().default_params()), (rnd, rnd_params)]


@pytest.mark.parametrize("x64", [False, True])
@pytest.mark.parametrize("which", [0, 1, 2], ids=["linear", "put", "random"])
def test_step_equals_step_given_its_noise_on_random_states(which, x64):
  with sweep_cli.x64(x64):
    env, params = _envs()[which]
    n = 64

    @jax.jit
    def rollout(keys):  # n episodes of random actions: both steps at every visited state
      def one(k):
        def body(s, h):
          a = jax.random.randint(jax.random.fold_in(k, 100 + h), (), 0, env.num_actions)
          kh = jax.random.fold_in(k, 10 + h)
          want = env.step(kh, s, a, params)
          got = env.step_given(env.step_noise(kh, params), s, a, params)
          return want[0], (want, got)
        return jax.lax.scan(body, env.reset(jax.random.fold_in(k, 1), params),
                            jnp.arange(env.horizon))[1]
      return jax.vmap(one)(keys)

    want, got = rollout(jax.random.split(jax.random.PRNGKey(7), n))
    for x, y in zip(jax.tree_util.tree_leaves(want), jax.tree_util.tree_leaves(got)):
      assert x.dtype == y.dtype and x.shape[:2] == (n, env.horizon)
      np.testing.assert_array_equal(x, y)
    states = jax.tree_util.tree_leaves(want[0])[0]
    assert len(np.unique(np.asarray(states))) > 2  # the episodes went different ways


def test_categorical_given_inverts_the_cumulative_probabilities():
  probs = jnp.array([0.2, 0.0, 0.5, 0.3])
  # u in [0, 1): r = 1 - u; index = #{cumulative < r}: hand-computed buckets
  for u, want in ((0.0, 3), (0.29, 3), (0.31, 2), (0.79, 2), (0.81, 0), (0.999, 0)):
    assert int(categorical_given(jnp.float32(u), probs)) == want


def _key_only(cls):
  """``cls`` without separable noise (``step_noise`` None): training calls ``step`` with keys."""

  @dataclasses.dataclass(frozen=True)
  class KeyOnly(cls):
    def step_noise(self, key, params):
      return None

    def step(self, key, state, action, params):
      return cls.step_given(self, cls.step_noise(self, key, params), state, action, params)

  return KeyOnly()


@pytest.mark.parametrize("env, params, keyonly", [
    (LinearMDP(), LinearMDP().make_params(xi_norm=0.3), _key_only(LinearMDP)),
    (PutOption(), PutOption().default_params(), _key_only(PutOption)),
], ids=["linear", "put"])
def test_training_with_pre_drawn_noise_equals_training_with_keys(env, params, keyonly):
  H, d, A = env.horizon, env.feature_dim, env.num_actions
  hp = drjax.make_hparams(H, d, rho=0.2, beta=1.0, lam=0.1)
  outs = []
  # DR-LSVI-UCB on the linear MDP (sufficient statistics), LSVI-UCB on the put option (buffer)
  makes = (drjax.dr_lsvi_ucb,) if isinstance(env, LinearMDP) else (drjax.lsvi_ucb,)
  for e in (env, keyonly):
    for make in makes:
      agent = make(H, d, A, 12)
      o = drjax.sweep(e, params, agent, jax.random.PRNGKey(4), num_seeds=3, num_episodes=12,
                      hparams=hp, outputs=("returns", "actions", "final_qf"))
      outs.append([np.asarray(o.returns), np.asarray(o.actions), np.asarray(o.final_qf.w)])
  n = len(outs) // 2
  for a, b in zip(outs[:n], outs[n:]):
    for x, y in zip(a, b):
      np.testing.assert_array_equal(x, y)
