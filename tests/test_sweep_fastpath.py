"""drjax.sweep's repeated calls: every call is validated, a repeated call gives the same numbers,
and the key split and reshape inside the program match the eager ones."""

import warnings

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
  real = drjax.LinearMDP.validate
  monkeypatch.setattr(drjax.LinearMDP, "validate",
                      lambda self, p: calls.append(p) or real(self, p))
  second = _sweep()
  assert len(calls) == 1  # the same values: validated again
  for a, b in zip(jax.tree_util.tree_leaves(first), jax.tree_util.tree_leaves(second)):
    np.testing.assert_array_equal(a, b)
  third = _sweep(key=jax.random.PRNGKey(5))  # another key: other numbers
  assert len(calls) == 2
  assert not np.array_equal(third.returns, first.returns)


def test_a_warm_call_builds_no_model(monkeypatch):
  """The linear MDP's features are guaranteed by ``validate`` (``feature_check = "validate"``):
  a warm call neither rebuilds the model (some 1,100 eager operations) nor checks features."""
  _sweep()
  built = []
  monkeypatch.setattr(drjax.LinearMDP, "model", lambda self, p: built.append(p))
  monkeypatch.setattr(train, "check_env_features", lambda *a: built.append(a))
  _sweep()
  _sweep(key=jax.random.PRNGKey(3))
  assert built == []


def test_validate_guarantees_the_linear_mdp_features():
  """What ``feature_check = "validate"`` relies on: every params value ``validate`` accepts gives
  features >= 0 whose rows sum to 1 (the corners of the allowed (delta, xi_norm) region
  included); one outside is rejected by ``validate`` itself."""
  for delta, xi in ((0.0, 0.0), (1.0, 0.0), (0.5, 0.5), (0.3, 0.3), (0.7, 0.3), (0.3, 0.1)):
    phi = np.asarray(ENV.model(ENV.make_params(delta=delta, xi_norm=xi)).phi, np.float64)
    assert phi.min() >= 0
    np.testing.assert_allclose(phi.sum(-1), 1.0, atol=1e-6)
  with pytest.raises(ValueError, match="xi_norm"):
    ENV.make_params(delta=0.3, xi_norm=0.4)  # delta - xi_norm < 0: phi(x1, a) < 0 for some a


class _NegativeFeatures(drjax.LinearMDP):
  """An environment from outside drjax (``feature_check = "call"``) whose features are < 0."""

  feature_check = "call"

  def _phi_table(self, params):
    return -super()._phi_table(params)


def test_an_outside_environment_is_checked_on_every_call():
  env = _NegativeFeatures()
  for _ in range(2):
    with pytest.raises(ValueError, match="features must be >= 0"):
      _sweep(env=env)


def test_the_put_option_is_checked_when_constructed_and_never_per_call(monkeypatch):
  """``PutOption``'s features depend on the environment only: its constructor checks them (the
  paper's rows do not sum to 1: a warning), no sweep call does."""
  from drjax import _checks
  seen = []
  real_check = _checks.features
  monkeypatch.setattr(_checks, "features", lambda phi, *a, **k: seen.append(np.asarray(phi))
                      or real_check(phi, *a, **k))
  with pytest.warns(UserWarning, match="do not sum to 1"):  # the paper's features, on purpose
    env = drjax.PutOption(num_anchors=3, horizon=2)
  assert len(seen) == 1
  # what it checked are phi_all's rows, computed here by the environment itself
  prices = np.concatenate([env.anchors, [0.0, 50.0, 97.5, 100.0, 150.0]])
  rows = jax.vmap(lambda p: env.phi_all(env.reset(jax.random.PRNGKey(0), env.make_params(
      init_low=1.0, init_high=1.0))._replace(price=p), None))(jnp.asarray(prices))
  assert float(rows.min()) >= 0.0 and np.asarray(rows).max() <= seen[0].max() + 1e-12
  with warnings.catch_warnings():
    warnings.simplefilter("error")  # not per call
    drjax.PutOption.validate(env, env.default_params())
  params = env.default_params()
  agent = drjax.dr_lsvi_ucb(env.horizon, env.feature_dim, env.num_actions, 2)
  hp = make_hparams(env.horizon, env.feature_dim, rho=0.1, lam=0.1)
  calls = []
  monkeypatch.setattr(train, "check_env_features", lambda *a: calls.append(a))
  for _ in range(2):
    drjax.sweep(env, params, agent, jax.random.PRNGKey(0), num_seeds=1, num_episodes=2,
                hparams=hp)
  assert not calls


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
