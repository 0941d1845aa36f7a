"""make_train's opt-in study outputs (issue 29, item 1): per-step widths, policy/dual counters and
per-episode exact robust values, checked against NumPy computations from the recorded run."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import linprog

import drjax
from drjax import train as train_lib
from drjax.agents import registry
from drjax.envs import random_linear_drmdp

H, S, A, D, K = 3, 6, 3, 4, 12


@pytest.fixture(scope="module")
def setup():
  env, params = random_linear_drmdp(jax.random.key(3), S, A, D, H)
  return env, params


def _run(env, params, name, outputs, record_q=False, form="auto"):
  agent = registry.make(name, env, capacity=K)
  hp = drjax.make_hparams(H, D, rho=0.2, beta=0.7, lam=0.5)  # LSVI-UCB ignores rho
  train = jax.jit(drjax.make_train(env, agent, K, record_q=record_q, outputs=outputs, form=form))
  return agent, hp, train(jax.random.key(0), hp, params)


def _tv_inf_lp(mu, v, rho):
  """inf_{q in simplex, (1/2)|q - mu|_1 <= rho} q . v as a linear program over (q, t)."""
  n = len(mu)
  c = np.concatenate([v, np.zeros(n)])
  # |q - mu| <= t  ->  q - t <= mu, -q - t <= -mu; sum t <= 2 rho
  a_ub = np.block([[np.eye(n), -np.eye(n)], [-np.eye(n), -np.eye(n)],
                   [np.zeros((1, n)), np.ones((1, n))]])
  b_ub = np.concatenate([mu, -mu, [2 * rho]])
  a_eq = np.concatenate([np.ones(n), np.zeros(n)])[None]
  res = linprog(c, A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=[1.0], bounds=[(0, None)] * (2 * n))
  assert res.status == 0
  return res.fun


@pytest.mark.parametrize("form", ["stats", "buffer"])
def test_widths_match_numpy(setup, form):
  env, params = setup
  outs = ("actions", "states", "estimation_error", "width_rect", "width_ellip")
  _, _, out = _run(env, params, "dr-lsvi-ucb", outs, record_q=True, form=form)
  phi_tab = np.asarray(env.model(params).phi, np.float64)
  pinv = np.asarray(out.qf.pinv, np.float64)
  s, a = np.asarray(out.states), np.asarray(out.actions)
  rect = np.zeros((K, H))
  ellip = np.zeros((K, H))
  for k in range(K):
    for h in range(H):
      phi = phi_tab[h, s[k, h], a[k, h]]
      rect[k, h] = sum(phi[i] * np.sqrt(pinv[k, h, i, i]) for i in range(D))
      ellip[k, h] = np.sqrt(phi @ pinv[k, h] @ phi)
  np.testing.assert_allclose(out.width_rect, rect, rtol=2e-5, atol=1e-6)
  np.testing.assert_allclose(out.width_ellip, ellip, rtol=2e-5, atol=1e-6)
  np.testing.assert_allclose(np.sum(out.width_rect, 1), out.estimation_error, rtol=1e-5)
  # Cauchy-Schwarz per coordinate: the elliptical width never exceeds the d-rectangular one.
  assert np.all(ellip <= rect + 1e-6)


def test_counters_every_episode_planners(setup):
  env, params = setup
  for name, per in (("dr-lsvi-ucb", (H - 1) * D), ("lsvi-ucb", 0)):
    _, _, out = _run(env, params, name, ("switches", "dual_calls"))
    np.testing.assert_array_equal(out.switches, np.arange(1, K + 1))
    np.testing.assert_array_equal(out.dual_calls, np.arange(1, K + 1) * per)
    assert out.returns is None and out.final_qf is None  # only what was asked


def test_robust_value_against_linear_programs(setup):
  env, params = setup
  agent, hp, out = _run(env, params, "dr-lsvi-ucb", ("robust_value",), record_q=True)
  model = env.model(params)
  phi, mu = np.asarray(model.phi, np.float64), np.asarray(model.mu, np.float64)
  reward, init = np.asarray(model.reward, np.float64), np.asarray(model.init_dist, np.float64)
  rho = np.asarray(hp.rho, np.float64)
  fail = int(model.fail_state)
  for k in (0, K // 2, K - 1):
    qf = jax.tree_util.tree_map(lambda x: x[k], out.qf)
    v = np.zeros(S)
    for h in reversed(range(H)):
      v_new = np.zeros(S)
      for s in range(S):
        a = int(agent.act(qf, h, model.phi[h, s], s == fail))  # the policy; its value below
        worst = [_tv_inf_lp(mu[h, i], v, rho[h, i]) for i in range(D)]
        v_new[s] = reward[h, s, a] + phi[h, s, a] @ np.array(worst)
      v = v_new
    np.testing.assert_allclose(out.robust_value[k], init @ v, rtol=1e-4, atol=1e-5)


def test_study_outputs_are_opt_in_and_checked(setup):
  env, params = setup
  agent = registry.make("dr-lsvi-ucb", env, capacity=K)
  out = jax.jit(drjax.make_train(env, agent, K))(
      jax.random.key(0), registry.make_hparams("dr-lsvi-ucb", env), params)
  assert all(getattr(out, f) is None for f in train_lib.STUDY_OUTPUTS)
  with pytest.raises(ValueError, match="outputs must be a subset"):
    drjax.make_train(env, agent, K, outputs=("width",))
  put = drjax.envs.make("put-option")
  pagent = registry.make("dr-lsvi-ucb", put, capacity=K)
  with pytest.raises(ValueError, match="robust_value.*finite"):
    drjax.make_train(put, pagent, K, outputs=("robust_value",))


def test_study_outputs_do_not_change_the_run(setup):
  env, params = setup
  _, _, a = _run(env, params, "dr-lsvi-ucb", ("returns", "actions"))
  _, _, b = _run(env, params, "dr-lsvi-ucb", ("returns", "actions") + train_lib.STUDY_OUTPUTS)
  np.testing.assert_array_equal(a.actions, b.actions)
  np.testing.assert_array_equal(a.returns, b.returns)
