"""``drjax.clear_caches``: drjax's built agents and programs and JAX's caches are dropped, results
are unchanged after recompiling, and the executables' memory mappings are returned (Linux)."""

import gc
import os

import jax
import numpy as np
import pytest

import drjax
from drjax import _programs, train
from drjax.agents import lsvi


def _run(num_episodes=4):
  env = drjax.LinearMDP()
  agent = drjax.dr_lsvi_ucb(env.horizon, env.feature_dim, env.num_actions, num_episodes)
  hp = drjax.make_hparams(env.horizon, env.feature_dim, rho=0.1)
  out = drjax.sweep(env, env.make_params(), agent, jax.random.PRNGKey(3), num_seeds=2,
                    num_episodes=num_episodes, hparams=hp)
  return np.asarray(out.returns)


def test_every_registered_cache_is_emptied_and_results_do_not_change():
  before = _run()
  assert train._compiled_sweep.cache_info().currsize >= 1  # pylint: disable=protected-access
  assert lsvi._build.cache_info().currsize >= 1  # pylint: disable=protected-access
  assert train._compiled_sweep in _programs._CACHES  # pylint: disable=protected-access
  f = jax.jit(lambda x: x + 1)
  f(np.float64(1.0))
  assert f._cache_size() == 1  # pylint: disable=protected-access
  drjax.clear_caches()
  assert all(c.cache_info().currsize == 0 for c in _programs._CACHES)  # pylint: disable=protected-access
  assert f._cache_size() == 0  # pylint: disable=protected-access
  np.testing.assert_array_equal(_run(), before)  # rebuilt and recompiled: the same numbers


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="Linux memory maps only")
def test_the_executables_memory_mappings_are_returned():
  def maps():
    with open("/proc/self/maps") as f:
      return sum(1 for _ in f)

  drjax.clear_caches()
  gc.collect()
  start = maps()
  for k in (2, 3, 5, 6):  # four distinct programs (K is a static size)
    _run(k)
  grown = maps()
  drjax.clear_caches()
  gc.collect()
  after = maps()
  assert grown > start  # compiling mapped code pages
  assert after - start < (grown - start) / 2, (start, grown, after)
