"""Saved policies and sweep-level behaviors (issue 34, item 3): the policy file's round trip,
epsilon-greedy around a saved policy (the actions against the policy recomputed in NumPy at the
recorded states, epsilon's share against its expectation), mixtures (one component per
trajectory, fractions against the weights), the sweep's behavior strings and the dataset's
provenance in ``sweep.json``.
"""

from __future__ import annotations

import json
import os

import jax
import numpy as np
import pytest

from drjax import data as data_lib
from drjax import policies, sweeps
from drjax.agents import registry
from drjax.envs.random_mdp import RandomLinearMDP
from drjax.sweeps.errors import SweepError
from drjax.train import make_train

N = 400


@pytest.fixture(scope="module")
def learned(tmp_path_factory):
  env = RandomLinearMDP()
  params = env.sample_params(jax.random.PRNGKey(1))
  agent = registry.make("dr-lsvi-ucb", env, capacity=30)
  hp = registry.make_hparams("dr-lsvi-ucb", env, rho=0.1)
  qf = policies.learn(env, agent, hp, params, jax.random.PRNGKey(2), episodes=30)
  path = str(tmp_path_factory.mktemp("pol") / "policy.npz")
  policies.save(path, qf, env.num_actions, agent="dr-lsvi-ucb", options={},
                metadata={"env": "random", "episodes": 30})
  return env, params, agent, qf, path


def _greedy_numpy(env, params, qf, ds, played: bool):
  """``[H, N]`` the policy's action at each recorded state, from the model's features: played:
  ``argmax_a min(phi^T w + beta sum_i phi_i sqrt([Lambda^-1]_ii), H - h)`` (ties to the largest
  untruncated value); greedy: ``argmax_a phi^T w`` (ties to the lowest index)."""
  phi = np.asarray(env.model(params).phi)  # [H, S, A, d]
  w, pinv, beta = np.asarray(qf.w), np.asarray(qf.pinv), float(qf.beta)
  H = env.horizon
  out = np.zeros(ds.state.shape, np.int64)
  for h in range(H):
    bonus = beta * np.sqrt(np.diagonal(pinv[h])) if played else 0.0
    for n in range(ds.state.shape[1]):
      x = phi[h, int(ds.state[h, n])]
      raw = x @ w[h] + x @ bonus if played else x @ w[h]
      q = np.clip(raw, 0, H - h) if played else raw
      best = np.flatnonzero(q == q.max())
      out[h, n] = best[np.argmax(raw[best])] if played else best[0]
  return out


def test_file_round_trip_and_checks(learned, tmp_path):
  env, params, agent, qf, path = learned
  back, meta = policies.load(path, env=env)
  for f in policies.FIELDS:
    np.testing.assert_array_equal(np.asarray(getattr(back, f)), np.asarray(getattr(qf, f)))
  assert meta["format"] == "drjax-policy/1" and meta["agent"] == "dr-lsvi-ucb"
  assert (meta["horizon"], meta["feature_dim"], meta["num_actions"]) == (
      env.horizon, env.feature_dim, env.num_actions)
  assert meta["metadata"] == {"env": "random", "episodes": 30}
  # a stack of policies (one per key) and index=
  hp = registry.make_hparams("dr-lsvi-ucb", env, rho=0.1)
  stack = policies.learn(env, agent, hp, params, jax.random.split(jax.random.PRNGKey(2), 2),
                         episodes=30)
  p2 = str(tmp_path / "two.npz")
  policies.save(p2, stack, env.num_actions)
  one, meta2 = policies.load(p2, index=1)
  assert meta2["num_policies"] == 2
  np.testing.assert_array_equal(np.asarray(one.w), np.asarray(stack.w[1]))
  with pytest.raises(ValueError, match="index must lie in"):
    policies.load(p2, index=2)
  with pytest.raises(ValueError, match="does not match"):
    policies.load(path, env=RandomLinearMDP(num_actions=3))
  with pytest.raises(ValueError, match="does not exist"):
    policies.load(str(tmp_path / "none.npz"))


@pytest.mark.parametrize("mode", ["greedy", "played"])
def test_eps_greedy_from_file_frequencies(learned, mode):
  env, params, _, qf, path = learned
  A = env.num_actions
  for eps in (0.0, 0.3):
    b, prov = policies.parse(f"eps-greedy:file={path},eps={eps},mode={mode}", env)
    assert prov["eps"] == eps and prov["mode"] == mode
    assert prov["sha256"] == policies.file_hash(path)
    ds = data_lib.collect(env, params, b, jax.random.PRNGKey(3), N)
    greedy = _greedy_numpy(env, params, qf, ds, played=mode == "played")
    assert len(np.unique(greedy)) > 1
    off = np.mean(np.asarray(ds.action) != greedy)
    want = eps * (A - 1) / A
    sd = np.sqrt(want * (1 - want) / greedy.size)
    assert abs(off - want) <= 4 * sd + 1e-12, (eps, off, want)
  # the two modes are different policies (the bonus changes actions)
  ds = data_lib.collect(env, params, policies.parse(f"eps-greedy:file={path},eps=0", env)[0],
                        jax.random.PRNGKey(3), 50)
  assert np.any(_greedy_numpy(env, params, qf, ds, True) != _greedy_numpy(env, params, qf, ds,
                                                                           False))


def test_mixture_one_component_per_trajectory_and_fractions():
  env = RandomLinearMDP()
  params = env.sample_params(jax.random.PRNGKey(1))
  b, prov = policies.parse("mix:1*fixed:0+3*fixed:2", env)
  assert [c["weight"] for c in prov["components"]] == [0.25, 0.75]
  ds = data_lib.collect(env, params, b, jax.random.PRNGKey(4), 2000)
  a = np.asarray(ds.action)  # [H, N]
  assert np.all(a == a[:1])  # each trajectory follows one component
  frac = np.mean(a[0] == 0)
  assert set(np.unique(a)) == {0, 2}
  assert abs(frac - 0.25) <= 4 * np.sqrt(0.25 * 0.75 / 2000)
  # nested datasets: the first n trajectories of a larger collection are the collection of n
  small = data_lib.collect(env, params, b, jax.random.PRNGKey(4), 100)
  np.testing.assert_array_equal(np.asarray(small.action), a[:, :100])
  # a uniform + fixed mixture: fixed:1's share = w + (1 - w) / A per step
  b2, _ = policies.parse("mix:0.5*uniform+0.5*fixed:1", env)
  a2 = np.asarray(data_lib.collect(env, params, b2, jax.random.PRNGKey(5), 1000).action)
  want = 0.5 + 0.5 / env.num_actions
  assert abs(np.mean(a2 == 1) - want) < 0.06


def test_behavior_strings_bad_input(learned, tmp_path):
  env, _, _, _, path = learned
  for spec, msg in [("greedy", "must be"), ("fixed:99", r"\[0, "),
                    ("eps-greedy:file=x.npz", "needs file=PATH and eps"),
                    (f"eps-greedy:file={path},eps=2", r"eps must lie in \[0, 1\]"),
                    (f"eps-greedy:file={path},eps=0.1,mode=x", "mode must be"),
                    (f"eps-greedy:file={path},eps=0.1,foo=1", "unknown key"),
                    ("eps-greedy:file=/nonexistent.npz,eps=0.1", "does not exist"),
                    ("mix:uniform", "WEIGHT\\*SPEC"), ("mix:0*uniform", "> 0"),
                    ("mix:1*mix:1*uniform", "cannot be mixtures")]:
    with pytest.raises(ValueError, match=msg) as e:
      policies.parse(spec, env)
    assert "behavior" in str(e.value)


def test_sweep_provenance_and_resume_identity(learned, tmp_path):
  env, _, _, _, path = learned
  spec = f"mix:0.5*uniform+0.5*eps-greedy:file={path},eps=0.3"
  cfg = sweeps.SweepConfig(env="random", agents=("pevi",), seeds=2, trajectories=(10, 20),
                           behavior=spec, beta=(0.1,), lam=(1.0,))
  out = str(tmp_path / "sw")
  res = sweeps.run(cfg, out=out)
  with open(os.path.join(out, "sweep.json")) as f:
    info = json.load(f)
  d = info["data"]
  assert d["trajectories"] == [10, 20] and d["collected_per_seed"] == 20 and d["seeds"] == 2
  b = d["behavior"]
  assert b["spec"] == spec and b["kind"] == "mix"
  assert [c["kind"] for c in b["components"]] == ["uniform", "eps-greedy"]
  assert [c["weight"] for c in b["components"]] == [0.5, 0.5]
  eg = b["components"][1]
  assert eg["eps"] == 0.3 and eg["sha256"] == policies.file_hash(path)
  assert eg["file"] == os.path.abspath(path) and eg["policy_metadata"]["episodes"] == 30
  assert len(res.summary) > 0
  # the same sweep with another file content has another identity (never resumed with it)
  h0 = sweeps.config_hash(cfg)
  other = str(tmp_path / "copy.npz")
  qf, _ = policies.load(path)
  policies.save(other, qf._replace(w=qf.w + 1), env.num_actions)
  cfg2 = sweeps.SweepConfig(**{**cfg.__dict__, "behavior": spec.replace(path, other)})
  assert sweeps.config_hash(cfg2) != h0
  with pytest.raises(SweepError, match="behavior"):
    sweeps.validate(sweeps.SweepConfig(**{**cfg.__dict__, "behavior": "mix:2*uniform+x"}))


def test_save_policies_uses_the_sweeps_keys(tmp_path):
  env = RandomLinearMDP()
  cfg = sweeps.SweepConfig(env="random", agents=("lsvi-ucb",), seeds=2, episodes=12,
                           beta=(0.5,), lam=(0.2,), dtype="float64")
  path = str(tmp_path / "stage1.npz")
  meta = sweeps.save_policies(cfg, path)
  assert meta["num_policies"] == 2 and meta["agent"] == "lsvi-ucb"
  assert meta["metadata"]["created_by"] == "drjax sweep --save-policies"
  assert meta["metadata"]["hparams"]["beta"] == 0.5 and meta["metadata"]["episodes"] == 12
  # policy s is make_train's with the sweep's key of seed s (an independent call)
  params = env.sample_params(jax.random.key(0))
  agent = registry.make("lsvi-ucb", env, capacity=12)
  hp = registry.make_hparams("lsvi-ucb", env, beta=0.5, lam=0.2)
  for s in (0, 1):
    key = jax.random.fold_in(jax.random.fold_in(jax.random.PRNGKey(0), s), 0)
    want = make_train(env, agent, 12)(key, hp, params).final_qf
    got, _ = policies.load(path, index=s)
    np.testing.assert_allclose(np.asarray(got.w), np.asarray(want.w), rtol=1e-9, atol=1e-9)
  with pytest.raises(SweepError, match="one setting"):
    sweeps.save_policies(sweeps.SweepConfig(env="random", agents=("lsvi-ucb",), seeds=1,
                                                episodes=5, beta=(0.5, 1.0)), path)
  with pytest.raises(SweepError, match="agents"):
    sweeps.save_policies(sweeps.SweepConfig(env="random", agents=("lsvi-ucb", "pevi"),
                                                seeds=1, episodes=5), path)


def test_index_all_draws_one_saved_policy_per_trajectory(learned, tmp_path):
  env, params, agent, _, _ = learned
  hp = registry.make_hparams("dr-lsvi-ucb", env, rho=0.1)
  keys = jax.random.split(jax.random.PRNGKey(7), 2)
  stack = policies.learn(env, agent, hp, params, keys, episodes=30)
  path = str(tmp_path / "pop.npz")
  policies.save(path, stack, env.num_actions)
  b, prov = policies.parse(f"mix:1*uniform+3*eps-greedy:file={path},eps=0,index=all", env)
  assert prov["components"][1]["index"] == "all" and prov["components"][1]["num_policies"] == 2
  assert [c["weight"] for c in prov["components"]] == [0.25, 0.75]
  assert b.weights == pytest.approx((0.25, 0.375, 0.375))  # flattened: 3 components
  b, _ = policies.parse(f"eps-greedy:file={path},eps=0,index=all", env)
  ds = data_lib.collect(env, params, b, jax.random.PRNGKey(8), 300)
  a = np.asarray(ds.action)
  g = [_greedy_numpy(env, params, policies.load(path, index=i)[0], ds, played=False)
       for i in (0, 1)]
  assert np.any(g[0] != g[1])  # two different policies
  whole = [np.all(a == gi, axis=0) for gi in g]  # [N] trajectory follows policy i throughout
  assert np.all(whole[0] | whole[1])
  only = [np.mean(w & ~whole[1 - i]) for i, w in enumerate(whole)]
  assert min(only) > 0.1  # both policies' trajectories occur (each ~1/2 when they differ)
