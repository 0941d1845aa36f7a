"""The American put option (Section 6.2): Figure 2 from ONE compiled program, and its panels."""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np

from drjax import evaluate
from drjax.agents.base import make_hparams
from drjax.envs.put_option import PutOption, fixed_initial_price
from drjax._opt_level import plan_blocks_for
from drjax.paper.compile_options import _level_name, compiler_options, opt_level_for
from drjax.paper.panels import _curve, _exact
from drjax.paper.presets import DR, LS, NOMINAL_AGENT, ROBUST_AGENT, Preset, agents_for
from drjax.train import make_train
from drjax import _programs

PUT_RHO = (0.3, 0.4, 0.5)
PUT_PU = tuple(np.round(np.linspace(0.15, 0.85, 29), 4))

# ---------------------------------------------------------------------------------------------
# American put option: Figure 2.


PUT_EVALUATIONS = ("exact", "mc")


@_programs.cached
def _put_program(preset: Preset, episodes: int, test_episodes: int, evaluation: str,
                 level: int | None = None, blocks: int | None = None):
  env = PutOption(variant=preset.put_variant)
  H, d, A = env.horizon, env.feature_dim, env.num_actions
  agents = agents_for(preset, env, episodes)
  dr, ls = agents[ROBUST_AGENT], agents[NOMINAL_AGENT]
  train_dr = make_train(env, dr, episodes, blocks=blocks)
  train_ls = make_train(env, ls, episodes, blocks=blocks)
  fixed = preset.put_fixed_init

  def put_option_program(params, keys, eval_keys, hp_dr, hp_ls, p_us, ref_rhos):
    # params: one source params per seed ([S] leaves).
    S, R = keys.shape[0], hp_dr.beta.shape[0]

    def tile(tree, n):  # [S, ...] -> [n S, ...] (the seeds repeated n times)
      return jax.tree_util.tree_map(lambda x: jnp.tile(x, (n,) + (1,) * (x.ndim - 1)), tree)

    def run(train, agent, hp, n):
      # One flat vmap over (n settings x S seeds): hp [n S] leaves, the seeds' data tiled.
      keys_b, params_b, eval_b = tile(keys, n), tile(params, n), tile(eval_keys, n)
      out = jax.vmap(train)(keys_b, hp, params_b)
      if evaluation == "exact":  # the policies' breakpoints; valued below, all in one batch
        return jax.vmap(lambda qf, prm: evaluate.put_option_agent_policy(
            env, agent, qf, prm.init_low, prm.init_high))(out.final_qf, params_b), out.returns
      curves = jax.vmap(lambda qf, prm, ek: jax.vmap(
          lambda t: evaluate.mc_evaluate(env, agent, qf, t, ek, test_episodes)["mean"])(
              env.target_params(prm, p_us)))(out.final_qf, params_b, eval_b)
      return curves, out.returns

    unflat = lambda tree: jax.tree_util.tree_map(  # noqa: E731  [R S, ...] -> [R, S, ...]
        lambda x: x.reshape((R, S) + x.shape[1:]), tree)
    hp_dr_b = jax.tree_util.tree_map(lambda x: jnp.repeat(x, S, axis=0), hp_dr)
    dr_pol, dr_ret = unflat(run(train_dr, dr, hp_dr_b, R))  # [R, S, ...]
    hp_ls_b = jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (S,) + x.shape), hp_ls)
    ls_pol, ls_ret = run(train_ls, ls, hp_ls_b, 1)  # [S, ...]
    # Exact optimal stopping policies of the source (non-robust: rho = 0; robust per rho), per
    # seed (each seed's initial price range; identical across seeds for the paper preset).
    ref_pol = jax.vmap(lambda prm: jax.vmap(lambda r: evaluate.put_option_optimal_policy(
        env, prm.init_low, prm.init_high, source_p_u=prm.p_u, rho=r))(ref_rhos))(
            params if fixed else jax.tree_util.tree_map(lambda x: x[:1], params))  # [S', 1+R]

    def values(policies, prm):  # one batch of [B] policies, one source params
      return jax.vmap(lambda pol: evaluate.put_option_piecewise_values(
          pol, p_us, prm.init_low, prm.init_high, integrate=not fixed))(policies)

    R = hp_dr.rho.shape[0]
    if evaluation == "exact":
      # One batch per seed: R DR-LSVI-UCB policies, the LSVI-UCB one, 1 + R references.
      nref = ref_pol.count.shape[0]
      per_seed = jax.tree_util.tree_map(
          lambda a, b, c: jnp.concatenate(
              [jnp.swapaxes(a, 0, 1), b[:, None],
               jnp.broadcast_to(c, (b.shape[0],) + c.shape[1:]) if nref == 1 else c], axis=1),
          dr_pol, ls_pol, ref_pol)  # [S, R + 1 + 1 + R, ...]
      vals = jax.vmap(values)(per_seed, params)  # [S, 2R + 2, T]
      dr_curves = jnp.swapaxes(vals[:, :R], 0, 1)
      ls_curves = vals[:, R]
      ref = vals[:, R + 1:] if fixed else vals[:1, R + 1:]
      count = jnp.max(per_seed.count)
    else:
      dr_curves, ls_curves = dr_pol, ls_pol
      ref = jax.vmap(values)(ref_pol, jax.tree_util.tree_map(lambda x: x[:ref_pol.count.shape[0]],
                                                            params))
      count = jnp.max(ref_pol.count)
    return dict(dr=dr_curves, ls=ls_curves, dr_train=dr_ret, ls_train=ls_ret, ref=ref,
                max_count=count)

  return env, jax.jit(put_option_program, compiler_options=compiler_options(level))


def run_put_option(preset: Preset, *, seeds: int, episodes: int, key, test_episodes: int = 100,
                   rhos=PUT_RHO, p_us=PUT_PU, evaluation: str = "exact",
                   opt_level="auto") -> dict:
  """Figure 2: both algorithms on the put option, returns of the final policies on every target.

  ``evaluation="exact"`` (default): each seed's final greedy policy is valued exactly on the
  recombining price lattice (``evaluate.put_option_exact_values``), averaged exactly over the
  initial price ``s0 ~ U[95, 105]`` (paper preset) or at the seed's fixed ``s0`` (notebook
  preset). ``evaluation="mc"``: Monte Carlo over ``test_episodes`` episodes per seed and target,
  both algorithms facing the same random draws (common random numbers, ``evaluate.episode_key``).

  Returns:
    ``dr [R, S, T]``, ``ls [S, T]`` (value per seed and target), ``ref [S', 1 + R, T]`` exact
    target values of the source-optimal stopping policy (index 0) and of the robust-optimal one
    for each rho (``S' = S`` with a per-seed initial price, else 1), ``max_count`` (largest number
    of policy changes per step found by the breakpoint search), timings and ``opt_level`` (as in
    ``run_linear_mdp``).
  """
  if evaluation not in PUT_EVALUATIONS:
    raise ValueError(f"evaluation must be one of {PUT_EVALUATIONS}, got {evaluation!r}")
  work = seeds * episodes * (len(rhos) + 1)
  level = opt_level_for(opt_level, work, small=1)
  blocks = plan_blocks_for(work)
  env, program = _put_program(preset, episodes, test_episodes if evaluation == "mc" else 0,
                              evaluation, level, blocks)
  H, d = env.horizon, env.feature_dim
  k_train, k_init, k_eval = jax.random.split(key, 3)
  source = env.make_params(p_u=0.5)
  if preset.put_fixed_init:
    params = jax.vmap(fixed_initial_price, in_axes=(0, None))(
        jax.random.split(k_init, seeds), source)
  else:
    params = jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (seeds,)), source)
  hp_dr = make_hparams(H, d, rho=np.stack([np.full((H, d), r) for r in rhos]),
                       beta=np.full(len(rhos), preset.beta), lam=np.full(len(rhos), preset.lam))
  hp_ls = make_hparams(H, d, rho=0.0, beta=preset.beta, lam=preset.lam)
  ref_rhos = jnp.asarray((0.0,) + tuple(rhos), hp_ls.lam.dtype)
  t0 = time.perf_counter()
  out = jax.device_get(program(params, jax.random.split(k_train, seeds),
                               jax.random.split(k_eval, seeds), hp_dr, hp_ls,
                               jnp.asarray(p_us, hp_ls.lam.dtype), ref_rhos))
  res = {k: np.asarray(v) for k, v in out.items()}
  res["seconds"] = time.perf_counter() - t0
  res.update(rhos=np.asarray(rhos), p_us=np.asarray(p_us), evaluation=evaluation,
             opt_level=level, plan_blocks=blocks)
  return res


# ---------------------------------------------------------------------------------------------


PUT_REFERENCE_NOTE = (
    "exact target returns of the optimal stopping policies of the source (p_u = 0.5): "
    "non-robust = optimal in the source (with no discounting the price is a martingale, so it "
    "holds to the last step); robust = optimal against every up-probability within TV distance "
    "rho of 0.5 at each hold (an (s, a)-rectangular TV ball around the price move, worst case "
    "p_u = 0.5 + rho). The paper's d-rectangular robust optimum is not defined for the put option: "
    "its features are not a linear MDP (no factor distributions mu_h,i exist)")


def put_panels(res: dict, preset: Preset, *, seeds: int, episodes: int,
               test_episodes: int) -> dict:
  """Panels of fig2 (one per rho) from ``run_put_option``."""
  evaluation = str(res.get("evaluation", "exact"))
  if evaluation == "exact":
    how = ("exact expected return of each seed's final greedy policy, by backward induction on "
           "the recombining price lattice, " + (
               "at the seed's fixed initial price" if preset.put_fixed_init else
               "integrated exactly over s0 ~ U[95, 105] (piecewise linear between the policy's "
               "breakpoints)"))
  else:
    how = ("Monte Carlo mean return of each seed's final greedy policy over test_episodes "
           "episodes, common random numbers across algorithms")
  base = dict(env="put-option", seeds=seeds, episodes=episodes, preset=preset.name,
              beta=preset.beta, **{"lambda": preset.lam}, bonus=preset.bonus, clip=preset.clip,
              tie_break=preset.tie_break, variant=preset.put_variant,
              fixed_initial_price=preset.put_fixed_init, H=10, num_anchors=20, source_p_u=0.5,
              evaluation=how, reference_note=PUT_REFERENCE_NOTE,
              breakpoint_max_changes_per_step=int(res.get("max_count", 0)),
              xla_backend_optimization_level=_level_name(res.get("opt_level")),
              buffer_plan=("whole capacity (blocks=0)" if res.get("plan_blocks") == 0
                           else "filled slots (make_train's default blocks)"))
  if evaluation == "mc":
    base["test_episodes"] = test_episodes
  if preset.put_fixed_init:
    base["reference_average"] = "mean over the seeds' fixed initial prices"
  ref = np.asarray(res["ref"])  # [S', 1 + R, T]
  ref_mean = ref.mean(axis=0)
  panels = {}
  for r_i, rho in enumerate(res["rhos"]):
    panels[f"rho{rho:g}"] = {
        "x": res["p_us"].tolist(),
        "x_label": "price-up probability p_u of the target",
        "y_label": "average reward in the target domain",
        "curves": {LS: _curve(res["ls"]), DR: _curve(res["dr"][r_i]),
                   "robust optimum (exact)": _exact(ref_mean[1 + r_i]),
                   "non-robust optimum (exact)": _exact(ref_mean[0])},
        "title": f"rho = {rho:g}",
        "config": dict(base, rho=float(rho), rho_note="rho_{h,i} = rho for all h, i"),
    }
  return {"fig2": panels}
