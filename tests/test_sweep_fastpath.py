"""drjax.sweep's repeated calls: every call is validated, a repeated call gives the same numbers,
and the key split and reshape inside the program match the eager ones."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import drjax
from drjax import train
from drjax.agents.base import HParams, make_hparams

ENV = drjax.LinearMDP()
PARAMS = ENV.make_params(xi_norm=0.2)
AGENT = drjax.dr_lsvi_ucb(ENV.horizon, ENV.feature_dim, ENV.num_actions, 6)
HP = make_hparams(ENV.horizon, ENV.feature_dim, rho=0.3, lam=0.1)


def _sweep(**kw):
  args = dict(env=ENV, env_params=PARAMS, agent=AGENT, key=jax.random.PRNGKey(0), num_seeds=3,
              num_episodes=6, hparams=HP)
  args.update(kw)
  return drjax.sweep(args.pop("env"), args.pop("env_params"), args.pop("agent"), args.pop("key"),
                     **args)


def test_every_call_is_validated_and_a_repeated_call_gives_identical_numbers(monkeypatch):
  first = _sweep()
  calls = []
  real = train.check_env_features
  monkeypatch.setattr(train, "check_env_features", lambda *a: calls.append(a) or real(*a))
  second = _sweep()
  assert len(calls) == 1  # the same values: validated again
  for a, b in zip(jax.tree_util.tree_leaves(first), jax.tree_util.tree_leaves(second)):
    np.testing.assert_array_equal(a, b)
  third = _sweep(key=jax.random.PRNGKey(5))  # another key: other numbers
  assert len(calls) == 2
  assert not np.array_equal(third.returns, first.returns)


def test_changed_values_are_validated_again():
  _sweep()
  bad = HP._replace(rho=jnp.full_like(HP.rho, 1.5))  # built without make_hparams
  with pytest.raises(ValueError, match="rho"):
    _sweep(hparams=bad)
  with pytest.raises(ValueError):
    _sweep(env_params=PARAMS._replace(delta=jnp.asarray(2.0)))
  with pytest.raises(TypeError, match="key"):
    _sweep(key=0)  # same other values, a bad key
  assert isinstance(HP, HParams)


def test_split_and_reshape_inside_the_program_match_the_eager_ones():
  rho = jnp.stack([jnp.full((ENV.horizon, ENV.feature_dim), r) for r in (0.0, 0.4)])
  out = _sweep(hparams=make_hparams(ENV.horizon, ENV.feature_dim, rho=rho, lam=0.1))
  assert out.returns.shape[:2] == (2, 3)
  keys = jax.random.split(jax.random.PRNGKey(0), 3)
  run = jax.jit(train.make_train(ENV, AGENT, 6))
  one = run(keys[1], make_hparams(ENV.horizon, ENV.feature_dim, rho=0.4, lam=0.1), PARAMS)
  np.testing.assert_allclose(out.returns[1, 1], one.returns, rtol=1e-6)
