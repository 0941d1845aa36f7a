"""The simulated linear MDP (Section 6.1): Figure 1, the 3 x 3 ablation (Figure 3) and AveSubopt,
from ONE compiled program, and their panels."""

from __future__ import annotations

import math
import time

import jax
import jax.numpy as jnp
import numpy as np

from drjax import evaluate, planning
from drjax.agents.base import HParams, make_hparams, rho_array
from drjax.envs.linear_mdp import LinearMDP, target_params
from drjax.paper.compile_options import _level_name, _stack, compiler_options, opt_level_for
from drjax.paper.critical_point import paper_q_star as paper_critical_q  # eq. (critical point)
from drjax.paper.panels import _curve, _exact, _fit_slope
from drjax.paper.presets import DR, LS, NOMINAL_AGENT, ROBUST_AGENT, Preset, agents_for
from drjax.train import make_train
from drjax import _programs

LINEAR_XI = (0.1, 0.2, 0.3)
LINEAR_RHO = (0.3, 0.4, 0.5)
FIG1_RHO = 0.5  # Figure 1 and the AveSubopt figure
LINEAR_Q = tuple(np.round(np.linspace(0.0, 1.0, 21), 4))
SUBOPT_P = 0.1  # failure probability in the Theorem 1 curve

# ---------------------------------------------------------------------------------------------
# Simulated linear MDP: Figure 1, the 3 x 3 ablation and AveSubopt, from one program.


@_programs.cached
def _linear_program(preset: Preset, episodes: int, level: int | None = None):
  env = LinearMDP()
  H, d, A = env.horizon, env.feature_dim, env.num_actions
  agents = agents_for(preset, env, episodes)
  dr, ls = agents[ROBUST_AGENT], agents[NOMINAL_AGENT]
  train_dr = make_train(env, dr, episodes, record_q=True)
  train_ls = make_train(env, ls, episodes, record_q=True)
  zero_rho = jnp.zeros((H, d))

  def per_instance(params, out_dr, out_ls, hp_dr: HParams, qs, fine_qs):
    """One source instance (xi_norm): evaluation for all rho and seeds of its training runs.

    Each agent's greedy policies (every episode's and the final one, all seeds and rho) come from
    one traced ``greedy_policy``; they are then valued together: one traced robust evaluation for
    every AveSubopt term (DR-LSVI-UCB at its rho, LSVI-UCB at 0) and one traced evaluation in the
    targets for every final policy and exact reference (the greedy policy on the source's features
    is the one on each target's: the targets change mu_1 only). The same numbers as one
    evaluation per agent and quantity, in a program a third smaller."""
    model = env.model(params)
    targets = target_params(params, qs)  # [Q]
    target_models = jax.vmap(env.model)(targets)
    R, K = hp_dr.rho.shape[0], episodes
    rhos = jnp.concatenate([hp_dr.rho, zero_rho[None].astype(hp_dr.rho.dtype)])  # [R + 1]: 0 last
    star = jax.vmap(lambda r: planning.robust_dp(model, r))(rhos)
    v_star = jax.vmap(lambda v: planning.initial_value(model, v))(star.v)  # [R + 1]

    def greedy(agent, out, lead):  # every episode's policy, then the final one: [*lead, K + 1]
      qfs = jax.tree_util.tree_map(
          lambda e, f: jnp.concatenate([e, jnp.expand_dims(f, len(lead))], axis=len(lead)),
          out.qf, out.final_qf)
      flat = jax.tree_util.tree_map(lambda x: x.reshape((-1,) + x.shape[len(lead) + 1:]), qfs)
      pis = jax.vmap(lambda qf: evaluate.greedy_policy(agent, qf, model))(flat)
      return pis.reshape(tuple(lead) + (K + 1,) + pis.shape[1:])

    S = out_ls.final_qf.w.shape[0]
    pi_dr, pi_ls = greedy(dr, out_dr, (R, S)), greedy(ls, out_ls, (S,))
    # AveSubopt: V*_1 - V^pi_1 of every episode's policy, robust at the run's rho (index R: 0).
    ep = jnp.concatenate([pi_dr[:, :, :K].reshape((-1,) + pi_dr.shape[3:]),
                          pi_ls[:, :K].reshape((-1,) + pi_ls.shape[2:])])
    r_idx = np.concatenate([np.repeat(np.arange(R), S * K), np.full(S * K, R)])
    v_pi = jax.vmap(lambda pi, r: planning.initial_value(
        model, planning.robust_evaluate(model, rhos[r], pi)))(ep, r_idx)
    gap = v_star[r_idx] - v_pi
    ave = lambda g: (jnp.cumsum(g, axis=-1) /  # noqa: E731
                     jnp.arange(1, K + 1).reshape((1,) * (g.ndim - 1) + (K,)))
    dr_sub = ave(gap[:R * S * K].reshape(R, S, K))
    ls_sub = ave(gap[R * S * K:].reshape(S, K))
    # Target returns of the final policies and of the exact (robust) optimal ones.
    final = jnp.concatenate([pi_dr[:, :, K].reshape((-1,) + pi_dr.shape[3:]), pi_ls[:, K],
                             star.policy])
    vals = jax.vmap(lambda pi: jax.vmap(
        lambda m: planning.initial_value(m, planning.nominal_evaluate(m, pi)))(target_models))(
            final)
    dr_curves = vals[:R * S].reshape(R, S, -1)
    ls_curves = vals[R * S:R * S + S]
    robust_ref, nonrobust_ref = vals[R * S + S:R * S + S + R], vals[R * S + S + R]
    dr_err = out_dr.estimation_error
    # Exact critical q: where the target-optimal first action at x1 switches. A grid brackets
    # the first switch; bisection then narrows the bracket to rounding precision.
    def first_action(q):
      return planning.robust_dp(env.model(target_params(params, q)), zero_rho).policy[0, 0]

    first = jax.vmap(first_action)(fine_qs)
    change = first[1:] != first[:-1]
    i = jnp.argmax(change)

    def bisect(_, lr):
      lo, hi = lr
      mid = 0.5 * (lo + hi)
      same = first_action(mid) == first[i]
      return jnp.where(same, mid, lo), jnp.where(same, hi, mid)

    lo, hi = jax.lax.fori_loop(0, 60, bisect, (fine_qs[i], fine_qs[i + 1]))
    critical = jnp.where(jnp.any(change), 0.5 * (lo + hi), jnp.nan)
    # Theorem 1's curve with each rho's beta and the seed-mean estimation error, computed here
    # rather than eagerly on the host, where its dozen small ops compiled one by one while the
    # other families' threads held both cores (11 s of the figure-writing thread's time).
    bound = evaluate.theorem1_bound(dr_err.mean(axis=1), H=H, d=d, p=SUBOPT_P,
                                    beta=hp_dr.beta)["total"]  # [R, K]
    return dict(dr=dr_curves, ls=ls_curves, dr_sub=dr_sub, ls_sub=ls_sub, dr_err=dr_err,
                theorem1_bound=bound,
                ls_err=out_ls.estimation_error, robust_ref=robust_ref, nonrobust_ref=nonrobust_ref,
                critical_q=critical)

  def linear_mdp_program(params, keys, hp_dr: HParams, hp_ls: HParams, qs, fine_qs):
    # Training: one flat vmap per agent over (xi_norm, rho, seed), the seeds' keys shared by every
    # setting (one level of batching traces and lowers much faster than three nested ones).
    X, R, S = params.delta.shape[0], hp_dr.beta.shape[0], keys.shape[0]

    def expand(tree, axis_sizes, axis):  # [n_axis, ...] leaves -> [prod(axis_sizes), ...]
      def one(x):
        shape = [1] * len(axis_sizes)
        shape[axis] = axis_sizes[axis]
        x = x.reshape(tuple(shape) + x.shape[1:])
        x = jnp.broadcast_to(x, tuple(axis_sizes) + x.shape[len(axis_sizes):])
        return x.reshape((-1,) + x.shape[len(axis_sizes):])
      return jax.tree_util.tree_map(one, tree)
    unflat = lambda tree, sizes: jax.tree_util.tree_map(  # noqa: E731
        lambda x: x.reshape(tuple(sizes) + x.shape[1:]), tree)
    out_dr = jax.vmap(train_dr)(expand(keys, (X, R, S), 2), expand(hp_dr, (X, R, S), 1),
                                expand(params, (X, R, S), 0))
    hp_ls_b = jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (X * S,) + x.shape), hp_ls)
    out_ls = jax.vmap(train_ls)(expand(keys, (X, S), 1), hp_ls_b, expand(params, (X, S), 0))
    return jax.vmap(per_instance, in_axes=(0, 0, 0, None, None, None))(
        params, unflat(out_dr, (X, R, S)), unflat(out_ls, (X, S)), hp_dr, qs, fine_qs)

  return env, jax.jit(linear_mdp_program, compiler_options=compiler_options(level))


def run_linear_mdp(preset: Preset, *, seeds: int, episodes: int, key,
                   xi_norms=LINEAR_XI, rhos=LINEAR_RHO, qs=LINEAR_Q, fine_q: int = 401,
                   opt_level="auto") -> dict:
  """Trains and evaluates both algorithms on every (xi_norm, rho_{1,4}) of Figure 1 / the ablation.

  Returns:
    dict of NumPy arrays: ``dr [X, R, S, Q]``, ``ls [X, S, Q]`` exact target returns of the final
    policies; ``dr_sub [X, R, S, K]`` / ``ls_sub [X, S, K]`` AveSubopt(k) (robust with the run's
    rho for DR-LSVI-UCB, nominal for LSVI-UCB); ``dr_err``/``ls_err`` estimation errors;
    ``robust_ref [X, R, Q]`` / ``nonrobust_ref [X, Q]`` exact returns of the exact optimal robust
    and non-robust policies; ``critical_q [X]``, the exact critical perturbation (the first q where
    the target-optimal action at x1, step 1 switches: bracketed on a ``fine_q`` grid, then bisected
    to rounding precision; NaN if it never switches); timings; ``opt_level`` (XLA backend
    optimization level used, ``None`` = XLA's default; see ``opt_level_for``).
  """
  level = opt_level_for(opt_level, seeds * episodes * len(xi_norms) * (len(rhos) + 1))
  env, program = _linear_program(preset, episodes, level)
  H, d = env.horizon, env.feature_dim
  params = _stack([env.make_params(delta=preset.delta, p=preset.p, xi_norm=x) for x in xi_norms])
  hp_dr = make_hparams(H, d, rho=np.stack([rho_array(H, d, r, at=[(0, 3)]) for r in rhos]),
                       beta=np.full(len(rhos), preset.beta), lam=np.full(len(rhos), preset.lam))
  hp_ls = make_hparams(H, d, rho=0.0, beta=preset.beta, lam=preset.lam)
  keys = jax.random.split(key, seeds)
  fine = np.linspace(0.0, 1.0, fine_q)  # q grid for the exact critical point
  t0 = time.perf_counter()
  out = jax.device_get(program(params, keys, hp_dr, hp_ls, jnp.asarray(qs),
                               jnp.asarray(fine)))
  elapsed = time.perf_counter() - t0
  res = {k: np.asarray(v) for k, v in out.items()}
  res["seconds"] = elapsed
  res.update(xi_norms=np.asarray(xi_norms), rhos=np.asarray(rhos), qs=np.asarray(qs),
             opt_level=level)
  return res


def linear_panels(res: dict, preset: Preset, *, seeds: int, episodes: int, names) -> dict:
  """Panels of fig1 (rho = 0.5), fig3 (all rho) and subopt (rho = 0.5) from ``run_linear_mdp``."""
  panels = {n: {} for n in names}
  base = dict(env="linear-mdp", seeds=seeds, episodes=episodes, preset=preset.name,
              beta=preset.beta, **{"lambda": preset.lam}, delta=preset.delta, p=preset.p,
              bonus=preset.bonus, clip=preset.clip, tie_break=preset.tie_break, H=3, d=4,
              evaluation="exact expected return of each seed's final greedy policy",
              xla_backend_optimization_level=_level_name(res.get("opt_level")),
              rho_note="rho_{1,4} = rho, all other rho_{h,i} = 0 (DR-LSVI-UCB only)")
  for xi_i, xi in enumerate(res["xi_norms"]):
    for r_i, rho in enumerate(res["rhos"]):
      panel = {
          "x": res["qs"].tolist(),
          "x_label": "perturbation level q",
          "y_label": "average reward in the target domain",
          "curves": {
              LS: _curve(res["ls"][xi_i]),
              DR: _curve(res["dr"][xi_i, r_i]),
              "robust optimum (exact)": _exact(res["robust_ref"][xi_i, r_i]),
              "non-robust optimum (exact)": _exact(res["nonrobust_ref"][xi_i]),
          },
          "critical_q": float(res["critical_q"][xi_i]),
          "critical_q_paper_formula": paper_critical_q(preset.delta, float(xi)),
          "title": f"||xi||_1 = {xi:g}, rho_1,4 = {rho:g}",
          "config": dict(base, xi_norm=float(xi), rho=float(rho)),
      }
      tag = f"xi{xi:g}_rho{rho:g}"
      if "fig3" in panels:
        panels["fig3"][tag] = panel
      if "fig1" in panels and math.isclose(rho, FIG1_RHO):
        panels["fig1"][tag] = panel
      if "subopt" in panels and math.isclose(rho, FIG1_RHO):
        k = np.arange(1, episodes + 1, dtype=np.float64)
        dr_sub, ls_sub = res["dr_sub"][xi_i, r_i], res["ls_sub"][xi_i]
        slopes = {DR: _fit_slope(k, dr_sub.mean(0)),
                  LS: _fit_slope(k, ls_sub.mean(0))}
        panels["subopt"][f"xi{xi:g}"] = {
            "x": k.tolist(),
            "x_label": "episode k",
            "y_label": "AveSubopt(k)",
            "curves": {
                DR: _curve(dr_sub),
                LS: _curve(ls_sub),
                "Theorem 1 bound": _exact(res["theorem1_bound"][xi_i, r_i]),
            },
            "slopes": slopes,
            "title": f"||xi||_1 = {xi:g}, rho_1,4 = {rho:g}",
            "config": dict(base, xi_norm=float(xi), rho=float(rho), theorem1_p=SUBOPT_P,
                           theorem1_beta=preset.beta,
                           subopt_note=("DR-LSVI-UCB: robust AveSubopt with its rho; LSVI-UCB: "
                                        "nominal AveSubopt (rho = 0), each against its own exact "
                                        "optimum; Theorem 1 bound with the run's beta and the "
                                        "seed-mean estimation error"),
                           slope_fit="least squares of log AveSubopt on log k, k >= 10"),
        }
  return panels
