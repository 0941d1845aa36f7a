"""Step rates, in one process: gymnax's own CartPole step (vmapped, jitted) against drjax's adapter
(``drjax.envs.gymnax_env``: the same step plus the fail-state bookkeeping, the [0, 1] reward and
the features of every action), on the same device.

  python -m benchmarks.gymnax_step_rate [--envs 4096] [--steps 200] [--repeats 5]
      [--features rbf|tiles] [--out FILE.json]

Each variant is a ``lax.scan`` of ``--steps`` steps over a batch of ``--envs`` environments
(``vmap``), actions from a fixed key; gymnax's variant is ``env.step`` (with its auto-reset), the
adapter's is ``GymnaxEnv.step`` followed by ``phi_all`` (``[A, d]``, d = 162 with RBF), the
played action's row folded into the carried sum so that XLA cannot drop it (and once without
the features). Timed after one warm-up call: the best of ``--repeats``.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import time

import jax
import jax.numpy as jnp


def _time(fn, *args, repeats: int) -> float:
  jax.block_until_ready(fn(*args))  # compile + warm up
  best = float("inf")
  for _ in range(repeats):
    t0 = time.perf_counter()
    jax.block_until_ready(fn(*args))
    best = min(best, time.perf_counter() - t0)
  return best


def main(argv=None) -> dict:
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  p.add_argument("--envs", type=int, default=4096)
  p.add_argument("--steps", type=int, default=200)
  p.add_argument("--repeats", type=int, default=5)
  p.add_argument("--features", default="rbf", choices=("rbf", "tiles"))
  p.add_argument("--out", default=None)
  a = p.parse_args(argv)
  import gymnax  # pylint: disable=g-import-not-at-top
  from drjax.envs.gymnax_env import GymnaxEnv  # pylint: disable=g-import-not-at-top

  N, T = a.envs, a.steps
  gym, gparams = gymnax.make("CartPole-v1")
  env = GymnaxEnv("CartPole-v1", horizon=T, features=a.features)
  params = env.default_params()
  keys = jax.random.split(jax.random.PRNGKey(0), N)

  @jax.jit
  def gymnax_rollout(keys):
    def one(key):
      _, s = gym.reset(key, gparams)

      def step(carry, k):
        s, tot = carry
        a_ = jax.random.bernoulli(k).astype(jnp.int32)
        _, s2, r, _, _, _ = gym.step(k, s, a_, gparams)
        return (s2, tot + r), None

      (_, tot), _ = jax.lax.scan(step, (s, jnp.zeros(())), jax.random.split(key, T))
      return tot
    return jax.vmap(one)(keys)

  def adapter(features: bool):
    @jax.jit
    def rollout(keys):
      def one(key):
        s = env.reset(key, params)

        def step(carry, k):
          s, tot = carry
          a_ = jax.random.bernoulli(k).astype(jnp.int32)
          s2, r, _ = env.step(k, s, a_, params)
          if features:
            r = r + jnp.sum(env.phi_all(s2, params)[a_] * jnp.arange(env.feature_dim))
          return (s2, tot + r), None

        (_, tot), _ = jax.lax.scan(step, (s, jnp.zeros(())), jax.random.split(key, T))
        return tot
      return jax.vmap(one)(keys)
    return rollout

  t_gym = _time(gymnax_rollout, keys, repeats=a.repeats)
  t_ad = _time(adapter(True), keys, repeats=a.repeats)
  t_nofeat = _time(adapter(False), keys, repeats=a.repeats)
  out = {
      "device": str(jax.devices()[0]), "platform": platform.processor() or platform.machine(),
      "jax": jax.__version__, "gymnax": importlib.metadata.version("gymnax"), "envs": N,
      "steps": T, "features": a.features, "feature_dim": env.feature_dim,
      "gymnax_steps_per_s": N * T / t_gym, "adapter_steps_per_s": N * T / t_ad,
      "adapter_without_features_steps_per_s": N * T / t_nofeat,
      "gymnax_s": t_gym, "adapter_s": t_ad, "adapter_without_features_s": t_nofeat,
      "adapter_over_gymnax_time": t_ad / t_gym,
      "load_average_1min": os.getloadavg()[0],  # other processes on the machine meanwhile
  }
  print(json.dumps(out, indent=1))
  if a.out:
    with open(a.out, "w", encoding="utf-8") as f:
      json.dump(out, f, indent=1)
  return out


if __name__ == "__main__":
  main()
