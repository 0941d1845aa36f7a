"""DR-LSVI-UCB and LSVI-UCB against the loop-based NumPy oracle, plus jit/vmap/retrace checks."""

import os
import subprocess
import sys
import textwrap
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import oracle
from drjax.agents.base import check_features, make_hparams, rho_array
from drjax.agents.lsvi import dr_lsvi_ucb, lsvi_ucb
from drjax.envs.linear_mdp import LinearMDP
from drjax.envs.random_mdp import random_linear_drmdp
from drjax.train import make_train, sweep

K = 12


def _linear_mdp():
  env = LinearMDP()
  return env, env.make_params(delta=0.3, p=0.001, xi_norm=0.3)


def _random_mdp():
  env, params = random_linear_drmdp(jax.random.PRNGKey(3), 6, 3, 3, 3)
  # Deterministic initial state, so the first action can be checked too.
  init = np.zeros(6)
  init[int(np.argmax(np.asarray(params.init_dist)))] = 1.0
  return env, params._replace(init_dist=jnp.asarray(init))


CASES = [
    ("linear-mdp", "dr", "paper"),
    ("linear-mdp", "dr", "notebook"),
    ("linear-mdp", "lsvi", "paper"),
    ("linear-mdp", "lsvi", "notebook"),
    ("random", "dr", "paper"),
    ("random", "lsvi", "paper"),
]


def _agent(kind, form, env, capacity=K):
  H, d, A = env.horizon, env.feature_dim, env.num_actions
  if kind == "dr":
    return dr_lsvi_ucb(H, d, A, capacity, bonus=form)
  return lsvi_ucb(H, d, A, capacity, clip=form)


@pytest.mark.parametrize("env_name,kind,form", CASES)
def test_matches_numpy_oracle(env_name, kind, form):
  env, params = _linear_mdp() if env_name == "linear-mdp" else _random_mdp()
  H, d = env.horizon, env.feature_dim
  agent = _agent(kind, form, env)
  rho = np.random.default_rng(0).uniform(0.0, 0.6, size=(H, d))
  hp = make_hparams(H, d, rho=rho, beta=0.7, lam=0.3)
  out = jax.jit(make_train(env, agent, K, record_q=True, form="buffer"))(
      jax.random.PRNGKey(7), hp, params)
  buffers = {n: np.asarray(getattr(out.state, n)) for n in ("phi", "reward", "next_phi",
                                                            "next_fail")}
  theta = np.asarray(env.theta(params))
  ref = oracle.replay(buffers, theta, rho, 0.7, 0.3, robust=(kind == "dr"), bonus_form=form,
                      clip_form=form)
  model = env.model(params)
  s0 = int(np.argmax(np.asarray(model.init_dist)))
  fail_state = int(model.fail_state)
  phi_s0 = np.asarray(model.phi[0, s0])
  qf = jax.tree_util.tree_map(np.asarray, out.qf)

  @jax.jit  # episode k's Q-values and bonuses at step h: compiled once, not op by op per (k, h)
  def q_and_bonus(k, h, phi_all, fail):
    qf_k = jax.tree_util.tree_map(lambda x: x[k], out.qf)
    return agent.q_values(qf_k, h, phi_all, fail), agent.bonus(qf_k, h, phi_all)

  for k in range(K):
    r = ref[k]
    np.testing.assert_allclose(qf.w[k], r["w"], atol=1e-5, err_msg=f"w, episode {k}")
    if kind == "dr":
      np.testing.assert_allclose(qf.nu[k], r["nu"], atol=1e-5, err_msg=f"nu, episode {k}")
    for h in range(H):
      # Q-values at every state of step h of this episode, and the action the agent took.
      if h == 0:
        phi_all, fail = phi_s0, s0 == fail_state
      else:
        phi_all, fail = buffers["next_phi"][h - 1, k], bool(buffers["next_fail"][h - 1, k])
      q_ref = oracle.q_row(phi_all, r["w"][h], r["Lam_inv"][h], 0.7, r["top"][h],
                           robust=(kind == "dr"), bonus_form=form, fail=fail)
      q_jax, b_jax = (np.asarray(x) for x in q_and_bonus(k, h, jnp.asarray(phi_all),
                                                          jnp.asarray(fail)))
      np.testing.assert_allclose(q_jax, q_ref, atol=1e-5, err_msg=f"Q, episode {k}, step {h}")
      b_ref = [oracle.q_row(p[None], np.zeros(d), r["Lam_inv"][h], 0.7, np.inf,
                            robust=(kind == "dr"), bonus_form=form, fail=False)[0]
               for p in phi_all]
      np.testing.assert_allclose(b_jax, b_ref, atol=1e-5, err_msg=f"bonus, episode {k}")
      top2 = np.sort(q_ref)[-2:] if len(q_ref) > 1 else q_ref
      if len(q_ref) == 1 or top2[1] - top2[0] > 1e-7:
        assert int(out.actions[k, h]) == int(np.argmax(q_ref)), (k, h)
      elif not fail:
        assert q_ref[int(out.actions[k, h])] == pytest.approx(q_ref.max(), abs=1e-7)


def test_oracle_detects_a_wrong_bonus():
  """The oracle comparison can fail: the notebook bonus is not the paper's."""
  env, params = _linear_mdp()
  H, d = env.horizon, env.feature_dim
  agent = _agent("dr", "notebook", env)
  hp = make_hparams(H, d, rho=0.3, beta=1.0, lam=0.1)
  out = jax.jit(make_train(env, agent, K, record_q=True, form="buffer"))(
      jax.random.PRNGKey(0), hp, params)
  buffers = {n: np.asarray(getattr(out.state, n)) for n in ("phi", "reward", "next_phi",
                                                            "next_fail")}
  ref = oracle.replay(buffers, np.asarray(env.theta(params)), np.full((H, d), 0.3), 1.0, 0.1,
                      robust=True, bonus_form="paper")
  assert max(np.abs(np.asarray(out.qf.w[k]) - ref[k]["w"]).max() for k in range(K)) > 1e-3


@pytest.mark.parametrize("kind", ["dr", "lsvi"])
def test_vmapped_seeds_equal_single_runs_and_jit_equals_eager(kind):
  env, params = _linear_mdp()
  H, d = env.horizon, env.feature_dim
  agent = _agent(kind, "paper", env, capacity=6)
  train = make_train(env, agent, 6)
  hp = make_hparams(H, d, rho=rho_array(H, d, 0.4, at=[(0, 3)]), beta=1.0, lam=0.1)
  keys = jax.random.split(jax.random.PRNGKey(11), 4)
  batched = jax.jit(jax.vmap(train, in_axes=(0, None, None)))(keys, hp, params)
  for j in range(4):
    single = jax.jit(train)(keys[j], hp, params)
    np.testing.assert_array_equal(batched.actions[j], single.actions)
    np.testing.assert_allclose(batched.final_qf.w[j], single.final_qf.w, rtol=1e-10, atol=1e-12)
  eager = train(keys[0], hp, params)
  np.testing.assert_array_equal(eager.actions, batched.actions[0])
  np.testing.assert_allclose(eager.final_qf.w, batched.final_qf.w[0], rtol=1e-9, atol=1e-12)


def test_new_hyperparameters_do_not_recompile():
  env, params = _linear_mdp()
  H, d = env.horizon, env.feature_dim
  agent = _agent("dr", "paper", env, capacity=5)
  train = make_train(env, agent, 5)
  traces = []

  def counted(key, hp, p):
    traces.append(1)
    return train(key, hp, p)

  f = jax.jit(jax.vmap(counted, in_axes=(None, 0, None)))
  key = jax.random.PRNGKey(0)
  for rho, beta, lam in [(0.1, 1.0, 0.1), (0.5, 0.3, 2.0), (0.9, 0.0, 0.01)]:
    hp = make_hparams(H, d, rho=np.full((3, H, d), rho), beta=np.full(3, beta),
                      lam=np.full(3, lam))
    jax.block_until_ready(f(key, hp, params))
  assert len(traces) == 1
  # And target-domain parameters are traced too.
  g = jax.jit(counted)
  hp = make_hparams(H, d, rho=0.2, beta=1.0, lam=0.1)
  traces.clear()
  for xi in (0.1, 0.2):
    jax.block_until_ready(g(key, hp, env.make_params(delta=0.3, p=0.001, xi_norm=xi)))
  assert len(traces) == 1


def test_sweep_grid_matches_individual_runs():
  env, params = _linear_mdp()
  H, d = env.horizon, env.feature_dim
  agent = _agent("dr", "paper", env, capacity=8)
  rhos = np.stack([rho_array(H, d, r, at=[(0, 3)]) for r in (0.0, 0.5)])
  hp = make_hparams(H, d, rho=rhos[:, None], beta=np.array([0.5, 1.0]), lam=0.1)  # [2, 2]
  out = sweep(env, params, agent, jax.random.PRNGKey(5), num_seeds=3, num_episodes=8, hparams=hp)
  assert out.returns.shape == (2, 2, 3, 8)
  keys = jax.random.split(jax.random.PRNGKey(5), 3)
  train = jax.jit(make_train(env, agent, 8))
  one = train(keys[2], make_hparams(H, d, rho=rhos[1], beta=0.5, lam=0.1), params)
  np.testing.assert_array_equal(out.actions[1, 0, 2], one.actions)


def test_rho_zero_robust_agent_regresses_next_values():
  """rho = 0: nu_h = max_alpha z(alpha) >= z(H), the plain regression of V_{h+1}; equal to it when
  the ridge weights are nonnegative (orthogonal features, e.g. tabular one-hot ones)."""
  env, params = _linear_mdp()
  H, d = env.horizon, env.feature_dim
  agent = _agent("dr", "paper", env, capacity=10)
  hp = make_hparams(H, d, rho=0.0, beta=0.5, lam=0.2)
  out = jax.jit(make_train(env, agent, 10, form="buffer"))(jax.random.PRNGKey(1), hp, params)
  st = jax.tree_util.tree_map(np.asarray, out.state)
  qf = jax.tree_util.tree_map(np.asarray, out.final_qf)
  h = 1
  lam_mat = 0.2 * np.eye(d) + st.phi[h].T @ st.phi[h]
  v = np.array([0.0 if st.next_fail[h, t] else np.asarray(agent.q_values(
      out.final_qf, h + 1, jnp.asarray(st.next_phi[h, t]), False)).max() for t in range(10)])
  z_h = np.linalg.solve(lam_mat, st.phi[h].T @ v)
  assert np.all(qf.nu[h] >= z_h - 1e-10)
  # Orthogonal (one-hot) features: Lambda is diagonal, the weights are >= 0, nu = z(H) exactly.
  phi = np.eye(d)[np.arange(10) % d]
  nu, _ = oracle.brute_nu(phi, v, 0.2, np.zeros(d), H)
  from drjax import robust
  _, M = robust.ridge_operator(jnp.asarray(phi), jnp.ones(10, bool), 0.2)
  nu_jax, _ = robust.alpha_max_exact(M, jnp.asarray(v), jnp.zeros(d), jnp.asarray(float(H)))
  z = np.linalg.solve(0.2 * np.eye(d) + phi.T @ phi, phi.T @ np.minimum(v, H))
  np.testing.assert_allclose(nu_jax, z, atol=1e-10)
  np.testing.assert_allclose(nu, z, atol=1e-10)


def test_bad_hyperparameters_raise_before_tracing():
  with pytest.raises(ValueError, match=r"rho must lie in \[0, 1\]"):
    make_hparams(3, 4, rho=1.5)
  with pytest.raises(ValueError, match=r"rho must lie in \[0, 1\]"):
    make_hparams(3, 4, rho=-0.1)
  with pytest.raises(ValueError, match="lam .* must be > 0"):
    make_hparams(3, 4, lam=0.0)
  with pytest.raises(ValueError, match="beta must be >= 0"):
    make_hparams(3, 4, beta=-1.0)
  with pytest.raises(ValueError, match=r"rho must have shape \(\.\.\., H, d\)"):
    make_hparams(3, 4, rho=np.zeros((2, 4)))
  with pytest.raises(ValueError, match=r"H \(horizon\) must be an integer >= 1"):
    make_hparams(0, 4)
  with pytest.raises(ValueError, match="capacity K must be an integer >= 1"):
    dr_lsvi_ucb(3, 4, 16, 0)
  with pytest.raises(ValueError, match="horizon H must be an integer >= 1"):
    lsvi_ucb(0, 4, 16, 10)
  env, params = _linear_mdp()
  with pytest.raises(ValueError, match="num_episodes .* >= 1"):
    make_train(env, dr_lsvi_ucb(3, 4, 16, 10), 0)
  hp = make_hparams(3, 4)
  with pytest.raises(ValueError, match="capacity 10 must be >= num_episodes 20"):
    sweep(env, params, dr_lsvi_ucb(3, 4, 16, 10), jax.random.PRNGKey(0), num_seeds=1,
          num_episodes=20, hparams=hp)
  with pytest.raises(ValueError, match="does not match env"):
    sweep(env, params, dr_lsvi_ucb(3, 5, 16, 10), jax.random.PRNGKey(0), num_seeds=1,
          num_episodes=5, hparams=make_hparams(3, 5))


def test_features_negative_error_and_unnormalized_warning():
  with pytest.raises(ValueError, match="features must be >= 0"):
    check_features(np.array([[0.5, -0.1, 0.6]]))
  with pytest.warns(UserWarning, match="do not sum to 1"):
    check_features(np.array([[0.5, 0.2, 0.6]]))
  with warnings.catch_warnings():
    warnings.simplefilter("error")
    check_features(np.array([[0.5, 0.2, 0.3]]))


def _run_script(code, timeout):
  env = dict(os.environ)
  env.pop("XLA_FLAGS", None)
  return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                        text=True, timeout=timeout, env=env)


def test_large_seed_batch_does_not_hang():
  """400 vmapped seeds: hung in XLA's multi-threaded Eigen pool without drjax's XLA flag. In the
  same fresh interpreter (no jax_enable_x64): the Q-function weights are float32 by default."""
  res = _run_script("""
      import jax, drjax, os
      assert "xla_cpu_multi_thread_eigen=false" in os.environ["XLA_FLAGS"]
      from drjax.agents.base import make_hparams, rho_array
      from drjax.agents.lsvi import dr_lsvi_ucb
      from drjax.envs.linear_mdp import LinearMDP
      from drjax.train import make_train
      env = LinearMDP(); p = env.make_params(delta=0.3, p=0.001, xi_norm=0.1)
      train = make_train(env, dr_lsvi_ucb(3, 4, 16, 100), 100)
      keys = jax.random.split(jax.random.PRNGKey(0), 400)
      hp = make_hparams(3, 4, rho=rho_array(3, 4, 0.5, at=[(0, 3)]), beta=1.0, lam=0.1)
      out = jax.jit(jax.vmap(train, in_axes=(0, None, None)))(keys, hp, p)
      print(float(out.returns.mean()), out.final_qf.w.dtype)
  """, timeout=240)
  assert res.returncode == 0, res.stderr
  mean, dtype = res.stdout.split()
  assert 0.0 < float(mean) <= 3.0
  assert dtype == "float32"


def test_store_episode_equals_observe_per_step():
  H, d, A, K = 3, 4, 5, 6
  agent = dr_lsvi_ucb(H, d, A, K)
  rng = np.random.default_rng(0)
  st = agent.init(jnp.zeros((H, d)))
  st = st._replace(count=jnp.int32(2))
  phi, r = rng.uniform(size=(H, d)), rng.uniform(size=H)
  nphi, nfail = rng.uniform(size=(H, A, d)), rng.uniform(size=H) < 0.5
  a = st
  for h in range(H):
    a = agent.observe(a, h, jnp.asarray(phi[h]), r[h], jnp.asarray(nphi[h]), nfail[h])
  a = agent.end_episode(a)
  b = jax.jit(agent.store_episode)(st, 2, phi, r, nphi, nfail)
  for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
    np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
  assert int(b.count) == 3 and np.asarray(b.phi)[:, 2].tolist() == phi.tolist()


@pytest.mark.parametrize("d", [1, 3, 4, 8, 9])
def test_ellipsoid_bonus_equals_the_quadratic_form(d):
  """beta sqrt(phi^T P phi) for a batch of phi [5, 3, d]: unrolled elementwise (d <= 8) or a
  matrix product (d > 8), against NumPy's x @ P @ x per row (float64)."""
  from drjax.agents.base import ellipsoid_bonus  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(d)
  x = rng.normal(size=(3 * d, d))
  pinv = np.linalg.inv(x.T @ x + 0.5 * np.eye(d))
  phi = rng.uniform(0, 1, size=(5, 3, d))
  want = 0.7 * np.sqrt(np.einsum("nad,de,nae->na", phi, pinv, phi))
  got = np.asarray(ellipsoid_bonus(jnp.asarray(pinv), jnp.asarray(phi), 0.7))
  np.testing.assert_allclose(got, want, rtol=1e-12)
