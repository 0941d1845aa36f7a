"""jax.grad through the TV dual, exact planning and a finished run's estimates vs finite differences."""

import jax
import jax.numpy as jnp
import numpy as np

import drjax
from drjax import planning
from drjax.envs.linear_mdp import LinearMDP
from drjax.envs.random_mdp import random_linear_drmdp


def _fd(f, x, eps=1e-6):
  return (f(x + eps) - f(x - eps)) / (2 * eps)


def test_grad_of_robust_value_wrt_rho_and_dynamics():
  env, params = random_linear_drmdp(jax.random.PRNGKey(4), 6, 3, 3, 3)
  model = env.model(params)
  rho0 = jnp.full((3, 3), 0.23)

  @jax.jit
  def value(rho_scale, mu_shift):
    mu = model.mu.at[1, 2].set(model.mu[1, 2] * (1 - mu_shift) + mu_shift * jnp.eye(6)[2])
    m = model._replace(mu=mu)
    return planning.initial_value(m, planning.robust_dp(m, rho0 * rho_scale).v)

  g_rho = jax.jit(jax.grad(value, argnums=0))(1.0, 0.1)
  g_mu = jax.jit(jax.grad(value, argnums=1))(1.0, 0.1)
  np.testing.assert_allclose(g_rho, _fd(lambda s: value(s, 0.1), 1.0), rtol=1e-5, atol=1e-8)
  np.testing.assert_allclose(g_mu, _fd(lambda t: value(1.0, t), 0.1), rtol=1e-5, atol=1e-8)
  assert g_rho < 0  # more uncertainty, lower robust value


def test_grad_through_a_finished_runs_plan_wrt_rho_beta_lam():
  env = LinearMDP()
  params = env.make_params(delta=0.3, p=0.001, xi_norm=0.2)
  agent = drjax.dr_lsvi_ucb(3, 4, 16, 30)
  hp = drjax.make_hparams(3, 4, rho=0.05, beta=0.5, lam=0.2)
  out = jax.jit(drjax.make_train(env, agent, 30))(jax.random.PRNGKey(2), hp, params)
  phi_x1 = env.phi_all(env.reset(jax.random.PRNGKey(0), params), params)

  def q_x1(rho, beta, lam):  # optimistic Q at x1, step 1, for action (1,1,1,1)
    qf = drjax.replan(env, agent, out.state, drjax.HParams(rho=rho, beta=beta, lam=lam), params)
    return agent.q_values(qf, 0, phi_x1, False)[15]

  args = (hp.rho, hp.beta, hp.lam)
  assert 0.0 < q_x1(*args) < 3.0  # not truncated: the gradients are not trivially zero
  g = jax.jit(jax.grad(q_x1, argnums=(0, 1, 2)))(*args)
  q_x1 = jax.jit(q_x1)
  assert g[1] > 0 and g[0][0, 3] < 0
  d_rho = jnp.zeros((3, 4)).at[0, 3].set(1.0)
  np.testing.assert_allclose(jnp.sum(g[0] * d_rho),
                             _fd(lambda e: q_x1(hp.rho + e * d_rho, hp.beta, hp.lam), 0.0),
                             rtol=1e-4, atol=1e-7)
  np.testing.assert_allclose(g[1], _fd(lambda b: q_x1(hp.rho, b, hp.lam), hp.beta), rtol=1e-5)
  np.testing.assert_allclose(g[2], _fd(lambda l: q_x1(hp.rho, hp.beta, l), hp.lam), rtol=1e-4)


def test_max_at_argmax_value_derivative_and_program():
  """``linalg._max_at_argmax``: the value of ``max``, the derivative of the first maximiser
  (hand-computed: a one-hot row; finite differences away from ties; no NaN at an exact tie or
  at XLA's default level), and a forward program with no argmax in it (the engine's speed: on
  XLA's CPU a variadic argmax reduction costs several times a max)."""
  from drjax import linalg  # pylint: disable=g-import-not-at-top
  x = np.array([[0.3, 2.0, 2.0, -1.0], [5.0, -2.0, 1.0, 4.5]], np.float32)
  f = lambda v: jnp.sum(linalg._max_at_argmax(v, axis=-1) * jnp.array([1.0, 3.0]))  # pylint: disable=protected-access
  np.testing.assert_array_equal(linalg._max_at_argmax(jnp.asarray(x), axis=-1), x.max(-1))  # pylint: disable=protected-access
  np.testing.assert_array_equal(linalg._max_at_argmax(jnp.asarray(x), axis=0), x.max(0))  # pylint: disable=protected-access
  want = np.zeros_like(x)
  want[0, 1], want[1, 0] = 1.0, 3.0  # the tie in row 0: the first maximiser only
  jitted = jax.jit(jax.grad(f), compiler_options={"xla_backend_optimization_level": 3})
  for g in (jax.grad(f)(jnp.asarray(x)), jitted(jnp.asarray(x))):
    np.testing.assert_array_equal(g, want)
  y = np.array([0.1, 0.7, -0.4], np.float64)  # no tie: finite differences coordinate by coordinate
  g = jax.grad(lambda v: linalg._max_at_argmax(v))(jnp.asarray(y))  # pylint: disable=protected-access
  fd = [(np.max(y + e) - np.max(y - e)) / 2e-6 for e in np.eye(3) * 1e-6]
  np.testing.assert_allclose(g, fd, atol=1e-6)
  forward = str(jax.make_jaxpr(lambda v: linalg._max_at_argmax(v, axis=-1))(jnp.asarray(x)))  # pylint: disable=protected-access
  assert "argmax[" not in forward and "reduce_max[" in forward, forward


def test_min_at_argmin_and_the_offline_exact_vmin_are_nan_free():
  """``linalg._min_at_argmin``: ``min``'s value, the first minimiser's one-hot derivative at a
  tie; and R2PVI-KL's fitted value (``vmin="exact"``: ``min_s max_a Q``, whose ``jnp.min`` /
  ``jnp.max`` derivative became 0 / 0 at -O0 once the Q-values were fused multiply-adds) has
  derivatives equal to finite differences in every hyperparameter, jitted at -O0."""
  from drjax import data, linalg  # pylint: disable=g-import-not-at-top
  from drjax.agents import offline  # pylint: disable=g-import-not-at-top
  from drjax.envs.random_mdp import random_linear_drmdp  # pylint: disable=g-import-not-at-top
  from drjax import sensitivity as sens  # pylint: disable=g-import-not-at-top
  x = np.array([1.0, -2.0, 3.0, -2.0])
  np.testing.assert_array_equal(linalg._min_at_argmin(jnp.asarray(x), 0), -2.0)  # pylint: disable=protected-access
  np.testing.assert_array_equal(jax.grad(lambda v: linalg._min_at_argmin(v, 0))(jnp.asarray(x)),  # pylint: disable=protected-access
                                [0.0, 1.0, 0.0, 0.0])
  env, params = random_linear_drmdp(jax.random.PRNGKey(3), 5, 3, 3, 3)
  params = params._replace(init_dist=jnp.eye(5)[int(params.fail_state == 0)])
  ds = data.collect(env, params, data.uniform(3), jax.random.key(0), 12)
  agent = offline.r2pvi_kl(3, 3, 3)
  hp = offline.make_hparams(agent, reg_weight=0.5, beta=0.05, lam=0.5)
  f = jax.jit(lambda h: sens.learned_value(agent, env, params, ds, h)[0],
              compiler_options={"xla_backend_optimization_level": 0})
  jac = jax.jit(jax.jacfwd(lambda h: sens.learned_value(agent, env, params, ds, h)[0]),
                compiler_options={"xla_backend_optimization_level": 0})(hp)
  for name in ("beta", "lam"):
    g = lambda t, name=name: float(f(hp._replace(**{name: getattr(hp, name) + t})))  # noqa: E731
    np.testing.assert_allclose(float(getattr(jac, name)), (g(1e-6) - g(-1e-6)) / 2e-6,
                               rtol=1e-5, atol=1e-8, err_msg=name)
  assert np.all(np.isfinite(np.asarray(jac.reg_weight)))
