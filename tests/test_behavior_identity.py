"""``data.uniform`` / ``data.fixed`` give equal behaviors for equal arguments, so ``data.collect``
(whose behavior is a static argument) traces and compiles once for a new ``uniform(A)`` (before,
every call returned a new closure: a second ``collect`` traced and compiled its program again)."""

import jax
import jax.numpy as jnp
import numpy as np

from drjax import data
from drjax.bench.compiles import count_compiles
from drjax.envs.linear_mdp import LinearMDP


def test_equal_arguments_equal_behaviors():
  assert data.uniform(4) == data.uniform(4) and hash(data.uniform(4)) == hash(data.uniform(4))
  assert data.uniform(4) != data.uniform(3)
  assert data.fixed(1) == data.fixed(1) and hash(data.fixed(1)) == hash(data.fixed(1))
  assert data.fixed(1) != data.fixed(0) and data.fixed(1) != data.uniform(1)
  assert data.uniform(4).num_actions == 4 and data.fixed(2).action == 2  # attributes kept


def test_collect_traces_once_for_a_new_uniform_and_matches_a_plain_function():
  env = LinearMDP()
  params = env.make_params()
  A = env.num_actions
  key = jax.random.PRNGKey(3)
  behavior = data.uniform(A)
  first = data.collect(env, params, behavior, key, 7)
  with count_compiles() as same:  # the same object: only the behavior's shape check traces
    data.collect(env, params, behavior, key, 7)
  with count_compiles() as stats:
    again = data.collect(env, params, data.uniform(A), key, 7)
  assert stats.compiles == 0 and stats.traces == same.traces, (stats.as_dict(), same.as_dict())

  def plain(k, phi_all, h):  # the behavior written as a user would, a new function
    del phi_all, h
    return jax.random.randint(k, (), 0, A, dtype=jnp.int32)
  with count_compiles() as stats:
    ref = data.collect(env, params, plain, key, 7)
  assert stats.traces >= 1  # a new function object is a new program
  for a, b, c in zip(first, again, ref):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    np.testing.assert_array_equal(np.asarray(a), np.asarray(c))
  assert len(set(np.asarray(first.action).ravel().tolist())) > 1  # not a constant policy


def test_fixed_behavior_holds_its_action():
  env = LinearMDP()
  ds = data.collect(env, env.make_params(), data.fixed(1), jax.random.PRNGKey(0), 5)
  assert (np.asarray(ds.action) == 1).all()
