"""The linear-MDP paper program (Figure 1, Figure 3, AveSubopt) against the public API, run by run.

The program values every agent's greedy policies together (``drjax.paper.linear_mdp_experiment``);
here each (xi_norm, rho, seed) run is trained again with ``make_train`` and evaluated through
``evaluate.target_value``, ``evaluate.ave_subopt`` and ``planning`` one run at a time (float64).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from drjax import evaluate, planning
from drjax.agents.base import make_hparams, rho_array
from drjax.envs.linear_mdp import LinearMDP, target_params
from drjax.paper import programs as paper
from drjax.paper.presets import NOMINAL_AGENT, ROBUST_AGENT, agents_for
from drjax.train import make_train

O0 = {"xla_backend_optimization_level": 0}  # the references compile fast, run on tiny data
XI, RHO, QS = (0.1, 0.3), (0.3, 0.5), (0.0, 0.5, 1.0)
SEEDS, K = 2, 4


def test_program_equals_the_public_api_run_by_run():
  pre = paper.PRESETS["paper"]
  key = jax.random.PRNGKey(4)
  res = paper.run_linear_mdp(pre, seeds=SEEDS, episodes=K, key=key, xi_norms=XI, rhos=RHO, qs=QS,
                             fine_q=11)
  env = LinearMDP()
  H, d = env.horizon, env.feature_dim
  agents = agents_for(pre, env, K)

  def reference(agent):
    train = make_train(env, agent, K, record_q=True)

    @functools.partial(jax.jit, compiler_options=O0)
    def run(k, hp, params):
      out = train(k, hp, params)
      model = env.model(params)
      curve = jax.vmap(lambda t: evaluate.target_value(env, agent, out.final_qf, t))(
          target_params(params, jnp.asarray(QS)))
      sub = evaluate.ave_subopt(agent, out.qf, model, hp.rho)["ave_subopt"]
      return curve, sub, out.estimation_error

    return run

  refs = {name: reference(a) for name, a in agents.items()}

  @functools.partial(jax.jit, compiler_options=O0)
  def optimum(params, rho):  # the exact (robust) optimal policy's returns in the targets
    pi = planning.robust_dp(env.model(params), rho).policy

    def value(q):
      m = env.model(target_params(params, q))
      return planning.initial_value(m, planning.nominal_evaluate(m, pi))

    return jax.vmap(value)(jnp.asarray(QS))

  close = lambda got, want, what: np.testing.assert_allclose(  # noqa: E731
      got, want, rtol=1e-12, atol=1e-12, err_msg=what)
  keys = jax.random.split(key, SEEDS)
  for x_i, xi in enumerate(XI):
    params = env.make_params(delta=pre.delta, p=pre.p, xi_norm=xi)
    zero = jnp.zeros((H, d))
    close(res["nonrobust_ref"][x_i], optimum(params, zero), f"non-robust optimum xi {xi}")
    hp_ls = make_hparams(H, d, rho=0.0, beta=pre.beta, lam=pre.lam)
    for s in range(SEEDS):
      curve, sub, err = refs[NOMINAL_AGENT](keys[s], hp_ls, params)
      close(res["ls"][x_i, s], curve, f"LSVI-UCB curve xi {xi} seed {s}")
      close(res["ls_sub"][x_i, s], sub, f"LSVI-UCB AveSubopt xi {xi} seed {s}")
      close(res["ls_err"][x_i, s], err, f"LSVI-UCB estimation error xi {xi} seed {s}")
    for r_i, r in enumerate(RHO):
      rho = jnp.asarray(rho_array(H, d, r, at=[(0, 3)]))
      close(res["robust_ref"][x_i, r_i], optimum(params, rho), f"robust optimum xi {xi} rho {r}")
      hp = make_hparams(H, d, rho=rho, beta=pre.beta, lam=pre.lam)
      for s in range(SEEDS):
        curve, sub, err = refs[ROBUST_AGENT](keys[s], hp, params)
        what = f"xi {xi} rho {r} seed {s}"
        close(res["dr"][x_i, r_i, s], curve, f"DR-LSVI-UCB curve {what}")
        close(res["dr_sub"][x_i, r_i, s], sub, f"DR-LSVI-UCB AveSubopt {what}")
        close(res["dr_err"][x_i, r_i, s], err, f"DR-LSVI-UCB estimation error {what}")
