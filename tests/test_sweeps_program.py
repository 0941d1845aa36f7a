"""drjax.sweeps: the compiled chunk program (issue 18, item 1).

When no source parameter is swept, the chunk program takes the source params unbatched (the model
and the target domains are built once per chunk, as in ``drjax.sweep``); its numbers equal
independent runs, and they are identical for every chunk size, one run per chunk included (a
batch of one is padded to two runs per device: XLA compiles size-1 batches differently).
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import drjax
from drjax import _xla
from drjax import evaluate, sweeps
from drjax.envs.linear_mdp import LinearMDP, target_params

import sweep_cli  # tests/sweep_cli.py

K = 6
SMALL = dict(env="linear-mdp", agents=("dr-lsvi-ucb", "lsvi-ucb"), seeds=3, episodes=K,
             rho=(0.0, 0.5), rho_at=((0, 3),), targets=("q", 0.0, 1.0, 5))




@functools.lru_cache(maxsize=None)
def _train(name):
  agent = {"dr-lsvi-ucb": drjax.dr_lsvi_ucb, "lsvi-ucb": drjax.lsvi_ucb}[name](3, 4, 16, K)
  return agent, jax.jit(drjax.make_train(LinearMDP(), agent, K))


def test_shared_params_program_equals_independent_runs():
  res = sweeps.run(sweeps.SweepConfig(**SMALL, seed=3))
  df = res.df
  env = LinearMDP()
  params = env.make_params()
  q = sweeps.target_values(SMALL["targets"])
  for name, rho in (("dr-lsvi-ucb", 0.5), ("dr-lsvi-ucb", 0.0), ("lsvi-ucb", None)):
    agent, train = _train(name)
    hp = drjax.make_hparams(3, 4, rho=drjax.rho_array(3, 4, rho or 0.0, at=[(0, 3)]), beta=1.0,
                            lam=0.1)
    for seed in range(3):
      key = jax.random.fold_in(jax.random.fold_in(jax.random.PRNGKey(3), seed), 0)
      out = train(key, hp, params)
      want = np.asarray(evaluate.exact_target_values(env, agent, out.final_qf,
                                                     target_params(params, jnp.asarray(q))))
      rows = df[(df.agent == name) & (df.seed == seed)
                & ((df.rho == rho) if rho is not None else df.rho.isna())]
      assert len(rows) == 5
      np.testing.assert_allclose(rows.value.to_numpy(), want, rtol=0, atol=1e-12)
      np.testing.assert_allclose(rows.train_return.to_numpy(), float(out.returns.mean()),
                                 rtol=0, atol=1e-12)


@pytest.mark.parametrize("dtype, env_params, min_runs", [
    (dt, ep, mr) for dt in ("float32", "float64")
    for ep, mr in (({}, None), ({"xi_norm": (0.1, 0.2)}, None), ({"xi_norm": (0.1, 0.2)}, 1))
    # float32 (its last bits are the risk) in every mode; float64 only where the sweep tests do
    # not check it (test_sweeps.py: one source instance, chunked = unchunked = 4 devices)
    if dt == "float32" or (ep and mr is None)],
    ids=["float32-shared", "float32-gathered", "float32-grouped", "float64-gathered"])
def test_numbers_identical_for_every_chunk_size(dtype, env_params, min_runs, monkeypatch):
  """Chunks of 1, 2, 4 and all runs: the same bits (float32 too), with one source instance, with
  two whose runs gather their own params (small groups), and with two grouped (one per chunk)."""
  if min_runs is not None:
    monkeypatch.setattr(sweeps.grid, "GROUP_MIN_RUNS", min_runs)
  got = {}
  with sweep_cli.x64(dtype == "float64"):
    for chunk in (1, 2, 4, None):
      cfg = sweeps.SweepConfig(**{**SMALL, "agents": ("dr-lsvi-ucb",)}, env_params=env_params,
                               chunk=chunk, dtype=dtype)
      res = sweeps.run(cfg)
      df = res.df
      assert df.value.dtype == np.dtype(dtype)
      assert res.info["layout"]["grouped"] == {"dr-lsvi-ucb": min_runs is not None or not env_params}
      got[chunk] = df[["train_return", "value", "value_stderr"]].to_numpy().tobytes()
  assert len(set(got.values())) == 1, {k: hash(v) for k, v in got.items()}


_SEED17 = """
import hashlib, json
from drjax import sweeps
out = {}
for chunk in (1, 2, 3):
  cfg = sweeps.SweepConfig(env="linear-mdp", agents=("dr-lsvi-ucb",), seeds=18, seed_ids=(16, 17),
                           episodes=100, rho=(0.5,), rho_at=((0, 3),), targets=("q", 0.0, 1.0, 21),
                           chunk=chunk, dtype="float32")
  df = sweeps.run(cfg).df
  out[chunk] = hashlib.sha256(df[["train_return", "value"]].to_numpy().tobytes()).hexdigest()
print(json.dumps(out))
"""


def test_one_run_per_chunk_is_identical_at_the_production_optimization_level():
  """Float32, K = 100, seed 17 at rho_1,4 = 0.5: compiled for a batch of one (XLA's default -O
  level, as the command runs; the tests' -O0 hides it), its numbers differed in the last bit."""
  env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
  env.update(XLA_FLAGS=" ".join(_xla.flags_for_this_jaxlib()), JAX_PLATFORMS="cpu")
  res = subprocess.run([sys.executable, "-c", _SEED17], capture_output=True, text=True, env=env,
                       timeout=300)
  assert res.returncode == 0, res.stderr[-3000:]
  hashes = json.loads(res.stdout.strip().splitlines()[-1])
  assert len(set(hashes.values())) == 1, hashes


def test_grouped_chunks_give_the_values_of_runs_gathering_their_own_params(monkeypatch):
  """One source instance per chunk (its index a scalar) vs each run gathering its instance's
  params (checked against independent runs in test_sweeps.py): the same values up to float64
  rounding (the products are batched differently), for every instance."""
  cfg = sweeps.SweepConfig(**{**SMALL, "agents": ("dr-lsvi-ucb",)}, chunk=4,
                           env_params={"xi_norm": (0.1, 0.2), "delta": (0.25, 0.3)},
                           dtype="float64")
  with sweep_cli.x64(True):
    gathered = sweeps.run(cfg)
    monkeypatch.setattr(sweeps.grid, "GROUP_MIN_RUNS", 1)
    grouped = sweeps.run(cfg)
  assert gathered.info["layout"]["grouped"] == {"dr-lsvi-ucb": False}
  assert grouped.info["layout"]["grouped"] == {"dr-lsvi-ucb": True}
  a, b = gathered.df, grouped.df
  assert a[["agent", "setting", "seed", "xi_norm", "delta", "target_q"]].equals(
      b[["agent", "setting", "seed", "xi_norm", "delta", "target_q"]])
  for col in ("train_return", "value"):
    np.testing.assert_allclose(b[col], a[col], rtol=1e-9, atol=1e-12)
  # the instances differ (a wrong instance would show)
  assert a.groupby(["xi_norm", "delta"]).value.mean().nunique() == 4
