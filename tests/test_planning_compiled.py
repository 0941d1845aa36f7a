"""The exact planners are compiled once per model shape and divergence (or KL search setting):
an eager call at a new radius or weight compiles nothing (before, the scan was compiled again on
every call: about 0.6 s on a 6-state model), and the values are those of the first call's
program at the new argument."""

import jax
import jax.numpy as jnp
import numpy as np

from drjax import planning
from drjax.bench.compiles import count_compiles
from drjax.envs.random_mdp import random_linear_drmdp


def _model():
  env, params = random_linear_drmdp(jax.random.PRNGKey(0), 6, 2, 3, 3)
  return env.model(params)


def test_eager_planners_compile_once():
  m = _model()
  t = lambda x: jnp.full((3, 3), x)  # noqa: E731
  calls = [
      lambda x: planning.robust_dp(m, t(x)).v,
      lambda x: planning.robust_evaluate(m, t(x), jnp.zeros((3, 6), jnp.int32)),
      lambda x: planning.regularized_dp(m, t(x + 0.2), "kl").v,
      lambda x: planning.regularized_evaluate(m, t(x + 0.2), "chi2", jnp.ones((3, 6), jnp.int32)),
      lambda x: planning.kl_constrained_dp(m, t(x)).v,
  ]
  for call in calls:
    first = np.asarray(call(0.1))
    with count_compiles() as stats:
      second = np.asarray(call(0.3))
    assert stats.traces == 0 and stats.compiles == 0, stats.as_dict()
    assert np.all(np.isfinite(second)) and not np.array_equal(first, second)


def test_robust_dp_at_rho_zero_is_value_iteration():
  """The compiled planner at rho = 0 against a NumPy value iteration on the same model."""
  m = _model()
  res = planning.robust_dp(m, jnp.zeros((3, 3)))
  phi, mu, r = (np.asarray(x, np.float64) for x in (m.phi, m.mu, m.reward))
  H, S = r.shape[0], r.shape[1]
  v = np.zeros(S)
  for h in reversed(range(H)):
    q = r[h] + phi[h] @ (mu[h] @ v)
    v = q.max(-1)
    np.testing.assert_allclose(np.asarray(res.v[h]), v, rtol=1e-10, atol=1e-12)
