"""``drjax reproduce r2pvi``'s programs against the public API, seed by seed.

The programs fit and evaluate the figure's policies in shared, stacked computations
(``drjax.paper.r2pvi``); here each seed's datasets are collected, and every curve point fitted and
valued again, one agent and one level at a time, through ``agent.fit`` and
``evaluate.target_value`` (Figure 1(a)-(c)) and the references through ``planning`` (float64).
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
from drjax.paper import r2pvi

O0 = {"xla_backend_optimization_level": 0}  # the references compile fast, run on tiny data
SEEDS, K = 2, 8


def _curve_fn(env, name):
  agent = registry.make(name, env)

  @functools.partial(jax.jit, compiler_options=O0)
  def curve(ds, params, level, qs):
    model = env.model(params)
    qf = agent.fit(ds, r2pvi._hp(agent, registry.get(name), level), model=model, form="stats")  # pylint: disable=protected-access
    return jax.vmap(lambda t: evaluate.target_value(env, agent, qf, t))(target_params(params, qs))

  return curve


def test_linear_mdp_program_equals_the_public_api_seed_by_seed():
  key = jax.random.PRNGKey(5)
  res = r2pvi.run(seeds=SEEDS, trajectories=K, key=key, put=False)
  A, R = res["agents"], res["ref"]
  env = LinearMDP()
  H, d = env.horizon, env.feature_dim
  pa = env.make_params(delta=r2pvi.DELTA, p=r2pvi.P, xi_norm=r2pvi.FIG_A_XI)
  pb = env.make_params(delta=r2pvi.DELTA, p=r2pvi.P, xi_norm=r2pvi.FIG_B_XI)
  qs, qc = jnp.asarray(r2pvi.QS), jnp.asarray([r2pvi.FIG_C_Q])
  curves = {n: _curve_fn(env, n) for n in set(r2pvi.FIG_A_AGENTS + r2pvi.FIG_C_AGENTS)}
  behavior = data_lib.uniform(env.num_actions)
  collect = jax.jit(lambda params, k: data_lib._collect(env, params, behavior, k, K))  # pylint: disable=protected-access
  close = lambda got, want, what: np.testing.assert_allclose(  # noqa: E731
      got, want, rtol=1e-12, atol=1e-12, err_msg=what)
  for s, k in enumerate(jax.random.split(key, SEEDS)):
    da, db = collect(pa, jax.random.fold_in(k, 0)), collect(pb, jax.random.fold_in(k, 1))
    for n in r2pvi.FIG_A_AGENTS:
      close(A[f"a/{n}"][s], curves[n](da, pa, r2pvi.FIG_A_WEIGHT, qs), f"(a) {n} seed {s}")
    for j, w in enumerate(r2pvi.FIG_B_WEIGHTS):
      close(A["b"][s, j], curves[r2pvi.FIG_B_AGENT](db, pb, w, qs), f"(b) weight {w} seed {s}")
    for n in r2pvi.FIG_C_AGENTS:
      for j, lv in enumerate(r2pvi.FIG_C_LEVELS):
        got = A[f"c/{n}"][s, j]
        if registry.get(n).uncertainty == "regularized" and lv == 0:
          assert np.isnan(got)  # weight 0 is undefined
        else:
          close(got, curves[n](da, pa, lv, qc)[0], f"(c) {n} level {lv} seed {s}")

  @functools.partial(jax.jit, compiler_options=O0)
  def refs(pa, pb):
    def values(params, pi):  # one target at a time
      def one(q):
        m = env.model(target_params(params, q))
        return planning.initial_value(m, planning.nominal_evaluate(m, pi))
      return jax.lax.map(one, qs)

    zero = jnp.zeros((H, d))
    reg = planning.regularized_dp(env.model(pa), r2pvi.FIG_A_WEIGHT + zero, "tv").policy
    return {"a/nominal": values(pa, planning.robust_dp(env.model(pa), zero).policy),
            "b/nominal": values(pb, planning.robust_dp(env.model(pb), zero).policy),
            "a/regularized": values(pa, reg)}

  for name, want in refs(pa, pb).items():
    close(R[name], want, name)


def test_put_option_program_equals_the_public_api_seed_by_seed():
  """Figure 1(d): every agent's policy at every level, fitted and valued on the price lattice
  one at a time (``put_option_agent_policy``, ``put_option_piecewise_values``)."""
  from drjax.envs.put_option import PutOption  # pylint: disable=g-import-not-at-top
  key = jax.random.PRNGKey(9)
  res = r2pvi.run_put(seeds=SEEDS, trajectories=K, key=key, opt_level=0)
  env = PutOption(num_anchors=r2pvi.PUT_ANCHORS, horizon=r2pvi.PUT_HORIZON, variant="notebook")
  params = env.make_params()
  p_us = jnp.asarray(r2pvi.PUT_PU)
  agents = r2pvi.put_agents(env)  # the figure's agents (PEVI knows the exercise value)

  @functools.partial(jax.jit, compiler_options=O0)
  def values(ds, levels):
    out = {}
    for n, agent in agents.items():
      def one(lv, n=n, agent=agent):
        hp = r2pvi._hp(agent, registry.get(n), lv, r2pvi.PUT_BETA, r2pvi.PUT_LAM)  # pylint: disable=protected-access
        qf = agent.fit(ds, hp, form="buffer")
        pol = evaluate.put_option_agent_policy(env, agent, qf, params.init_low, params.init_high)
        return evaluate.put_option_piecewise_values(pol, p_us, params.init_low, params.init_high)
      out[n] = jax.lax.map(one, levels[n])  # one level at a time
    opt = evaluate.put_option_optimal_policy(env, params.init_low, params.init_high,
                                             source_p_u=params.p_u)
    out["ref"] = evaluate.put_option_piecewise_values(opt, p_us, params.init_low, params.init_high)
    return out

  levels = {"pevi": jnp.zeros(1), "r2pvi-tv": jnp.asarray(r2pvi.PUT_WEIGHTS),
            "drpvi": jnp.asarray(r2pvi.PUT_RHOS)}
  collect = jax.jit(lambda k: data_lib._collect(env, params, data_lib.fixed(1), k, K))  # pylint: disable=protected-access
  for s, k in enumerate(jax.random.split(key, SEEDS)):
    ds = collect(k)
    want = values(ds, levels)
    np.testing.assert_allclose(res["agents"]["pevi"][s], want["pevi"][0], rtol=1e-12, atol=1e-12)
    for n in ("r2pvi-tv", "drpvi"):
      np.testing.assert_allclose(res["agents"][n][s], want[n], rtol=1e-12, atol=1e-12,
                                 err_msg=f"{n} seed {s}")
  np.testing.assert_allclose(res["ref"], want["ref"], rtol=1e-12, atol=1e-12)
