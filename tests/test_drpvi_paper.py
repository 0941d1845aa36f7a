"""``drjax reproduce drpvi``'s program against the public API, seed by seed.

The program evaluates every agent's learned policies together and shares the exact plans of each
source instance (``drjax.paper.drpvi._program``); here each seed's dataset is collected, fitted and
evaluated again, one agent and one rho at a time, through ``evaluate.target_value``,
``greedy_policy``, ``offline_subopt``, ``offline_bound`` and ``planning.robust_dp`` (float64).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from drjax import data as data_lib
from drjax import evaluate, planning
from drjax.agents import registry
from drjax.envs.linear_mdp import LinearMDP, target_params
from drjax.paper import drpvi

XI, RHO, QS = (0.1, 0.3), (0.3, 0.5), (0.0, 0.4, 1.0)
O0 = {"xla_backend_optimization_level": 0}  # the references compile fast, run on tiny data
SEEDS, K = 2, 8


def _reference(env, agent, robust: bool):
  """One seed, one agent, one rho through the public functions (jitted once per agent)."""

  @functools.partial(jax.jit, compiler_options=O0)
  def one(ds, pilot, params, rho, beta, lam, qs):
    model = env.model(params)
    values = dict(beta=beta, lam=lam, rho=rho, var_shift=jnp.zeros(()))
    hp = agent.hparams_type(**{f: values[f] for f in agent.hparams_type._fields})
    qf = agent.fit(ds, hp, pilot=pilot, model=model, form="stats")
    curve = jax.vmap(lambda t: evaluate.target_value(env, agent, qf, t))(target_params(params, qs))
    pi = evaluate.greedy_policy(agent, qf, model)
    return dict(curve=curve, policy=pi, first=pi[0, 0], w=qf.w,
                robust_first=planning.robust_dp(model, rho).policy[0, 0],
                subopt=evaluate.offline_subopt(agent, qf, model, rho),
                bound=evaluate.offline_bound(agent, qf, model, rho if robust else 0.0 * rho))

  return one


def test_program_equals_the_public_api_seed_by_seed():
  pre = drpvi.PRESETS["paper"]
  key = jax.random.PRNGKey(11)
  res = drpvi.run(pre, seeds=SEEDS, trajectories=K, key=key, xi_norms=XI, rhos=RHO, qs=QS)
  env = LinearMDP()
  H, d = env.horizon, env.feature_dim
  refs = {n: _reference(env, a, registry.get(n).robust) for n, a in drpvi.agents(pre, env).items()}
  behavior = data_lib.uniform(env.num_actions)
  keys = jax.random.split(key, SEEDS)
  collect = jax.jit(lambda params, k: data_lib._collect(env, params, behavior, k, K))  # pylint: disable=protected-access
  for x_i, xi in enumerate(XI):
    params = env.make_params(delta=pre.delta, p=pre.p, xi_norm=xi)
    for r_i, r in enumerate(RHO):
      rho = jnp.zeros((H, d)).at[0, 3].set(r)
      for s in range(SEEDS):
        ds = collect(params, jax.random.fold_in(keys[s], 0))
        pilot = collect(params, jax.random.fold_in(keys[s], 1))
        for name, ref in refs.items():
          want = ref(ds, pilot, params, rho, jnp.asarray(pre.beta), jnp.asarray(pre.lam),
                     jnp.asarray(QS))
          got = jax.tree_util.tree_map(lambda a: a[x_i, s, r_i], res["agents"][name])
          got["robust_first"] = res["ref"]["robust_first"][x_i, r_i]
          for field, value in want.items():
            np.testing.assert_allclose(got[field], value, rtol=1e-12, atol=1e-12,
                                       err_msg=f"{name} {field} xi {xi} rho {r} seed {s}")
  # -O0 (what "auto" picks here and at the paper's size) and -O1 compute the same figure; the
  # panels say which level ran.
  one = drpvi.run(pre, seeds=SEEDS, trajectories=K, key=key, xi_norms=XI, rhos=RHO, qs=QS,
                  opt_level=1)
  assert res["opt_level"] == 0 and one["opt_level"] == 1
  for name in drpvi.AGENTS:
    for field in ("curve", "subopt", "bound"):
      np.testing.assert_allclose(res["agents"][name][field], one["agents"][name][field],
                                 rtol=1e-9, atol=1e-9)
    np.testing.assert_array_equal(res["agents"][name]["policy"], one["agents"][name]["policy"])
  panel = next(iter(drpvi.panels(res, pre, seeds=SEEDS, trajectories=K).values()))
  assert panel["config"]["xla_backend_optimization_level"] == "O0"
