"""The random linear DRMDP generator's knobs (drjax/envs/random_mdp.py): feature families (dense,
sparse, one-hot), factor concentration and support, the aliased family's closed-form robust optimum,
the defaults bit for bit against a copy of the original sampler, and the knobs through a sweep."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest

from drjax import planning
from drjax.envs import RandomLinearMDP, closed_form_robust_values, random_linear_drmdp
from drjax.sweeps import config as config_lib

import sweep_cli  # tests/sweep_cli.py


# ------------------------------------------------------------------ the original sampler, copied
def _old_flat_dirichlets(key, concentration, shapes, dtype):
  if isinstance(concentration, (int, float)) and concentration == 1:
    sizes = [int(np.prod(shape)) for shape in shapes]
    e = jax.random.exponential(key, (sum(sizes),), dtype)
    parts = jnp.split(e, np.cumsum(sizes)[:-1])
    rows = [x.reshape(shape) for x, shape in zip(parts, shapes)]
    return [x / jnp.sum(x, axis=-1, keepdims=True) for x in rows]
  keys = jax.random.split(key, len(shapes))
  return [jax.random.dirichlet(k, jnp.full(shape[-1:], concentration, dtype), shape[:-1], dtype)
          for k, shape in zip(keys, shapes)]


def _old_sample(key, S, A, d, H, concentration=1.0):
  """The generator as it was before the knobs (commit 4b88a7e), in float64."""
  dtype = jnp.float64
  k_dir, k_theta = jax.random.split(key)
  phi_rest, mu_rest, init_rest = _old_flat_dirichlets(
      k_dir, concentration, [(S, A, d - 1), (H, d - 1, S), (S - 1,)], dtype)
  phi = jnp.concatenate([jnp.zeros((S, A, 1), dtype), phi_rest], axis=-1)
  phi = phi.at[0].set(jnp.zeros((A, d), dtype).at[:, 0].set(1))
  phi = jnp.broadcast_to(phi[None], (H, S, A, d))
  mu_fail = jnp.broadcast_to(jax.nn.one_hot(0, S, dtype=dtype), (H, 1, S))
  mu = jnp.concatenate([mu_fail, mu_rest], axis=1)
  theta = jax.random.uniform(k_theta, (H, d), dtype).at[:, 0].set(0)
  init = jnp.concatenate([jnp.zeros((1,), dtype), init_rest])
  return phi, theta, mu, init


def _same(params, old):
  for name, a, b in zip(("phi", "theta", "mu", "init_dist"),
                        (params.phi, params.theta, params.mu, params.init_dist), old):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=name)
  assert int(params.fail_state) == 0


@pytest.mark.parametrize("conc", [None, 1.0, 0.5])
def test_defaults_bit_identical_to_original(conc):
  env = RandomLinearMDP(6, 3, 7, 3)
  for seed in (0, 5):
    key = jax.random.key(seed)
    got = env.sample_params(key) if conc is None else env.sample_params(key, conc)
    _same(got, _old_sample(key, 6, 3, 7, 3, 1.0 if conc is None else conc))
  # The equal concentrations given as knobs take the same path.
  if conc is not None:
    env2 = RandomLinearMDP(6, 3, 7, 3, feature_concentration=conc, factor_concentration=conc)
    _same(env2.sample_params(jax.random.key(5)), _old_sample(jax.random.key(5), 6, 3, 7, 3, conc))
  _same(RandomLinearMDP().default_params(), _old_sample(jax.random.key(0), 8, 4, 5, 4))
  _, p = random_linear_drmdp(jax.random.key(3), 5, 2, 4, 2)
  _same(p, _old_sample(jax.random.key(3), 5, 2, 4, 2))


# ------------------------------------------------------------------ families
FAMILIES = [
    dict(),
    dict(features="sparse", sparsity=1),
    dict(features="sparse", sparsity=3, feature_concentration=0.4),
    dict(features="one-hot"),
    dict(factor_support=1),
    dict(factor_support=3, factor_concentration=0.3),
    dict(feature_concentration=2.0, factor_concentration=0.5),
    dict(structure="aliased"),
    dict(structure="aliased", features="one-hot", factor_support=2),
]


def _np(params):
  return {k: np.asarray(v) for k, v in params._asdict().items()}


@pytest.mark.parametrize("kw", FAMILIES, ids=lambda kw: ",".join(f"{k}={v}" for k, v in kw.items())
                         or "default")
def test_family_valid_and_plannable(kw):
  env = RandomLinearMDP(7, 5, 6, 3, **kw)
  params = jax.vmap(env.sample_params)(jax.random.split(jax.random.key(1), 4))
  env.validate(params)  # simplex rows, absorbing fail state, rewards in [0, 1]
  p = _np(params)
  phi = p["phi"][:, :, 1:]  # non-fail states
  assert np.all(phi >= 0) and np.allclose(phi.sum(-1), 1, atol=1e-12)
  assert np.all(phi[..., 0] == 0)
  assert np.all(p["mu"] >= 0) and np.allclose(p["mu"].sum(-1), 1, atol=1e-12)
  # The features are time-homogeneous and theta is the same in every family (same key).
  assert np.all(phi == phi[:, :1])
  np.testing.assert_array_equal(
      p["theta"], _np(jax.vmap(RandomLinearMDP(7, 5, 6, 3).sample_params)(
          jax.random.split(jax.random.key(1), 4)))["theta"])
  for b in range(4):
    inst = jax.tree.map(lambda x, b=b: x[b], params)
    res = planning.robust_dp(env.model(inst), jnp.full((3, 6), 0.3))
    v = np.asarray(res.v)
    assert np.all(np.isfinite(v)) and np.all(v >= -1e-12) and np.all(v <= 3 + 1e-12)
    assert np.all(v[:, 0] == 0)  # the fail state


def test_sparse_exact_counts():
  for k in (1, 2, 5, 9):
    env = RandomLinearMDP(9, 4, 10, 2, features="sparse", sparsity=k)
    p = _np(jax.vmap(env.sample_params)(jax.random.split(jax.random.key(k), 6)))
    nnz = np.count_nonzero(p["phi"][:, :, 1:, :, 1:], axis=-1)
    assert np.all(nnz == k), (k, np.unique(nnz))
  # The support is uniform over the coordinates: each used with frequency k / (d - 1).
  env = RandomLinearMDP(21, 10, 9, 1, features="sparse", sparsity=3)
  p = _np(jax.vmap(env.sample_params)(jax.random.split(jax.random.key(0), 50)))
  used = (p["phi"][:, 0, 1:, :, 1:] > 0).reshape(-1, 8)  # [n, 8]
  n, q = used.shape[0], 3 / 8
  freq = used.mean(0)
  assert np.all(np.abs(freq - q) < 5 * np.sqrt(q * (1 - q) / n)), freq


def test_one_hot_coverage_and_balance():
  for S, A, d in ((5, 2, 9), (4, 3, 5), (11, 3, 7), (2, 16, 17)):
    env = RandomLinearMDP(S, A, d, 2, features="one-hot")
    for seed in range(3):
      phi = _np(env.sample_params(jax.random.key(seed)))["phi"][0, 1:, :, 1:]  # [S-1, A, d-1]
      assert np.all((phi == 0) | (phi == 1)) and np.all(phi.sum(-1) == 1)
      counts = phi.reshape(-1, d - 1).sum(0)
      m = (S - 1) * A
      assert counts.min() >= 1  # every coordinate used
      assert set(counts.tolist()) <= {m // (d - 1), -(-m // (d - 1))}  # balanced
  # The assignment is random: two keys differ.
  env = RandomLinearMDP(11, 3, 7, 2, features="one-hot")
  a, b = (_np(env.sample_params(jax.random.key(s)))["phi"] for s in (0, 1))
  assert not np.array_equal(a, b)
  with pytest.raises(ValueError, match=r"one-hot.*\(num_states - 1\) \* num_actions.*8 < 9"):
    RandomLinearMDP(5, 2, 10, 2, features="one-hot")
  with pytest.raises(ValueError, match=r"one-hot.*num_actions A.*2 < 4"):
    RandomLinearMDP(9, 2, 5, 2, features="one-hot", structure="aliased")


def test_factor_support_counts():
  S = 12
  for k in (1, 4, 11, 12):
    env = RandomLinearMDP(S, 2, 6, 3, factor_support=k)
    mu = _np(jax.vmap(env.sample_params)(jax.random.split(jax.random.key(k), 5)))["mu"]
    assert np.all(np.count_nonzero(mu[:, :, 1:], axis=-1) == k)
    np.testing.assert_array_equal(mu[:, :, 0], np.eye(S)[0][None, None].repeat(5, 0).repeat(3, 1))
  # Support states uniform over all S states (the fail state included), frequency k / S.
  env = RandomLinearMDP(S, 2, 41, 2, factor_support=3)
  mu = _np(jax.vmap(env.sample_params)(jax.random.split(jax.random.key(9), 40)))["mu"]
  used = (mu[:, :, 1:] > 0).reshape(-1, S)
  n, q = used.shape[0], 3 / S
  assert np.all(np.abs(used.mean(0) - q) < 5 * np.sqrt(q * (1 - q) / n))


def _moment_check(x, n_coords, c):
  """``x [..., n_coords]`` i.i.d. ``Dir(c 1_n)`` rows: coordinate means ``1 / n`` and second moments
  ``(c + 1) / (n (c n + 1))`` within 5 standard errors estimated from the sample."""
  x = x.reshape(-1, n_coords)
  for stat, want in ((x, 1 / n_coords), (x**2, (c + 1) / (n_coords * (c * n_coords + 1)))):
    m, se = stat.mean(0), stat.std(0, ddof=1) / np.sqrt(stat.shape[0])
    assert np.all(np.abs(m - want) < 5 * se + 1e-12), (c, m, want, se)


@pytest.mark.parametrize("c_phi,c_mu", [(1.0, 1.0), (0.3, 3.0), (4.0, 0.5)])
def test_dirichlet_moments(c_phi, c_mu):
  """Mean and second moment of features and factors against the Dirichlet's: the concentrations
  reach the right draws (a swap of the two knobs fails the second moments)."""
  S, A, d = 9, 6, 6
  env = RandomLinearMDP(S, A, d, 2, feature_concentration=c_phi, factor_concentration=c_mu)
  p = _np(jax.vmap(env.sample_params)(jax.random.split(jax.random.key(2), 300)))
  _moment_check(p["phi"][:, 0, 1:, :, 1:], d - 1, c_phi)
  _moment_check(p["mu"][:, :, 1:], S, c_mu)
  # Sparse: the weights on the support are Dir(c_phi 1_k).
  k = 3
  env = RandomLinearMDP(S, A, d, 1, features="sparse", sparsity=k, feature_concentration=c_phi)
  phi = _np(jax.vmap(env.sample_params)(jax.random.split(jax.random.key(3), 300)))["phi"]
  phi = phi[:, 0, 1:, :, 1:].reshape(-1, d - 1)
  # The k nonzeros in coordinate order: a uniformly random support and exchangeable weights keep
  # them Dir(c_phi 1_k).
  pos = np.stack([row[row > 0] for row in phi])
  assert pos.shape == (phi.shape[0], k)
  _moment_check(pos, k, c_phi)


# ------------------------------------------------------------------ the closed form
def _loop_robust_dp(phi, theta, mu, rho):
  """Robust DP written from the Bellman equation with the TV worst case by linear programming
  over the ball's extreme moves: move mass rho from the highest-value states to the lowest."""
  H, S, A, d = phi.shape
  v = np.zeros((H + 1, S))
  for h in reversed(range(H)):
    nu = np.zeros(d)
    order = np.argsort(v[h + 1])  # lowest first
    for i in range(d):
      p = mu[h, i].copy()
      budget = rho[h, i]
      for s in order[::-1]:  # take from the highest
        if s == order[0]:
          break
        t = min(budget, p[s])
        p[s] -= t
        p[order[0]] += t
        budget -= t
      nu[i] = p @ v[h + 1]
    for s in range(S):
      v[h, s] = max(phi[h, s, a] @ theta[h] + phi[h, s, a] @ nu for a in range(A))
  return v


@pytest.mark.parametrize("kw", [dict(), dict(features="one-hot"),
                                dict(features="sparse", sparsity=2, factor_support=3)])
def test_closed_form_matches_robust_dp(kw):
  H, S, A, d = 4, 6, 5, 5
  env = RandomLinearMDP(S, A, d, H, structure="aliased", **kw)
  for seed in range(3):
    params = env.sample_params(jax.random.key(seed))
    p = _np(params)
    for rho in (np.zeros((H, d)), np.full((H, d), 0.25),
                np.asarray(jax.random.uniform(jax.random.key(seed + 7), (H, d), jnp.float64))):
      v, q = closed_form_robust_values(params, rho)
      res = planning.robust_dp(env.model(params), jnp.asarray(rho))
      rv = np.asarray(res.v)
      np.testing.assert_allclose(rv[:, 1:], np.repeat(v[:, None], S - 1, 1), atol=1e-12)
      np.testing.assert_allclose(np.asarray(res.q)[:, 1:], np.repeat(q[:, None], S - 1, 1),
                                 atol=1e-12)
      np.testing.assert_allclose(rv, _loop_robust_dp(p["phi"], p["theta"], p["mu"], rho),
                                 atol=1e-12)


def test_closed_form_simple_recursion():
  """Factors without fail mass and one rho per step: ``v_h = r*_h + (1 - rho_h) v_{h+1}``."""
  H, S, A, d = 5, 4, 3, 6
  env = RandomLinearMDP(S, A, d, H, structure="aliased")
  params = env.sample_params(jax.random.key(4))
  mu = np.asarray(params.mu).copy()
  mu[:, 1:, 0] = 0
  mu[:, 1:] /= mu[:, 1:].sum(-1, keepdims=True)
  params = env.make_params(params.phi, params.theta, mu, 0, params.init_dist)
  rho_h = np.array([0.1, 0.0, 0.5, 0.9, 0.3])
  rho = np.repeat(rho_h[:, None], d, 1)
  phi, theta = np.asarray(params.phi), np.asarray(params.theta)
  want = np.zeros(H + 1)
  for h in reversed(range(H)):
    r_star = max(phi[h, 1, a] @ theta[h] for a in range(A))
    want[h] = r_star + (1 - rho_h[h]) * want[h + 1]
  v, _ = closed_form_robust_values(params, rho)
  np.testing.assert_allclose(v, want, atol=1e-12)
  np.testing.assert_allclose(np.asarray(planning.robust_dp(env.model(params), rho).v)[:, 2], want,
                             atol=1e-12)


def test_closed_form_rejects_non_aliased():
  env = RandomLinearMDP(5, 2, 4, 2)
  with pytest.raises(ValueError, match="same features at every non-fail state"):
    closed_form_robust_values(env.sample_params(jax.random.key(0)), 0.1)
  env = RandomLinearMDP(5, 2, 4, 2, structure="aliased")
  with pytest.raises(ValueError, match=r"rho must be in \[0, 1\]"):
    closed_form_robust_values(env.sample_params(jax.random.key(0)), 1.5)


# ------------------------------------------------------------------ validation
@pytest.mark.parametrize("kw,exc,msg", [
    (dict(features="tabular"), ValueError, r"features must be one of \('dense', 'sparse'"),
    (dict(features="sparse"), ValueError, r"sparsity is required.*\[1, 4\]"),
    (dict(features="sparse", sparsity=5), ValueError, r"sparsity must be an integer in \[1, 4\]"),
    (dict(features="sparse", sparsity=0), ValueError, r"sparsity must be an integer in \[1, 4\]"),
    (dict(features="sparse", sparsity=2.0), TypeError, "sparsity must be an integer"),
    (dict(sparsity=2), ValueError, "sparsity applies to features='sparse' only"),
    (dict(feature_concentration=0.0), ValueError, "feature_concentration must be > 0"),
    (dict(feature_concentration="abc"), ValueError, "feature_concentration must be a number > 0"),
    (dict(factor_concentration=-1), ValueError, "factor_concentration must be > 0"),
    (dict(factor_concentration=float("inf")), ValueError, "factor_concentration must be > 0"),
    (dict(factor_concentration=True), TypeError, "factor_concentration must be a number"),
    (dict(features="one-hot", feature_concentration=2.0), ValueError,
     "feature_concentration does not apply to features='one-hot'"),
    (dict(factor_support=0), ValueError, r"factor_support must be an integer in \[1, 6\]"),
    (dict(factor_support=7), ValueError, r"factor_support must be an integer in \[1, 6\]"),
    (dict(structure="tabular"), ValueError, r"structure must be one of \('random', 'aliased'\)"),
])
def test_knob_errors(kw, exc, msg):
  with pytest.raises(exc, match=msg):
    RandomLinearMDP(6, 3, 5, 2, **kw)


def test_concentration_given_twice_and_strings():
  env = RandomLinearMDP(6, 3, 5, 2, factor_concentration=0.5)
  with pytest.raises(ValueError, match="concentration and the environment's factor_concentration"):
    env.sample_params(jax.random.key(0), 0.5)
  # CLI strings become floats (hashable static config, equal to the float-built one).
  assert RandomLinearMDP(6, 3, 5, 2, factor_concentration="0.5") == env
  assert RandomLinearMDP(6, 3, 5, 2, feature_concentration="2").feature_concentration == 2.0


# ------------------------------------------------------------------ sweeps and the CLI
ENV_ARGS = dict(num_states=5, num_actions=3, feature_dim=6, horizon=3, features="sparse",
                sparsity=2, feature_concentration="0.5", factor_support=3)


def test_knobs_reach_the_sweep(tmp_path):
  cfg = config_lib.SweepConfig(env="random", env_args=ENV_ARGS, agents=("dr-lsvi-ucb",), seeds=2,
                               episodes=3, rho=(0.0, 0.2), env_params={"instance": (0, 1)})
  env = config_lib.make_env(cfg)
  assert env == RandomLinearMDP(5, 3, 6, 3, features="sparse", sparsity=2,
                                feature_concentration=0.5, factor_support=3)
  with pytest.raises(ValueError, match="unknown argument 'sparse'"):
    config_lib.make_env(config_lib.SweepConfig(env="random", env_args={"sparse": 2}))
  with pytest.raises(ValueError, match="env_args.*sparsity is required"):
    config_lib.make_env(config_lib.SweepConfig(env="random", env_args={"features": "sparse"}))
  # The CLI: --env-arg strings and integers, in this process.
  flags = ["--env", "random", "--agents", "dr-lsvi-ucb", "--seeds", "2", "--episodes", "3",
           "--rho", "0", "0.2", "--x64", "--quiet", "--out", str(tmp_path / "cli")]
  for k, v in ENV_ARGS.items():
    flags += ["--env-arg", f"{k}={v}"]
  code, err = sweep_cli.run(flags)
  assert code == 0, err
  rows = pd.read_parquet(tmp_path / "cli" / "results.parquet")
  assert len(rows) > 0 and np.all(np.isfinite(rows.select_dtypes("number").to_numpy(float)))
  recorded = json.load(open(tmp_path / "cli" / "sweep.json"))["config"]["env_args"]
  assert recorded["features"] == "sparse" and recorded["sparsity"] == 2
  assert config_lib.make_env(config_lib.SweepConfig(env="random", env_args=recorded)) == env
