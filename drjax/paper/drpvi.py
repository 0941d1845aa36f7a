"""``drjax reproduce drpvi``: Figure 2 of Liu & Xu (NeurIPS 2024), DRPVI and VA-DRPVI, exactly.

The offline linear-MDP experiment of the DRPVI paper (Appendix C): the simulated linear MDP of
DR-LSVI-UCB, ``||xi||_1`` in {0.1, 0.2, 0.3} x ``rho_{1,4}`` in {0.3, 0.4, 0.5} (all other
``rho_{h,i} = 0``), K = 100 trajectories of the uniform behavior policy per seed (and, for
VA-DRPVI, an independent pilot dataset of the same size), 20 seeds, beta = 1, lambda = 0.1; the
learned policies of the agents in ``AGENTS`` (registry names) are evaluated *exactly* in the
targets q in {0, 0.05, ..., 1}, beside the exact robust-optimal and non-robust-optimal policies.

ONE jitted program: data collection (vmap over xi_norm x seeds), every agent's fit (vmap over
rho), exact target values, exact robust suboptimality ``V*_1 - V^pi_1`` at the panel's rho and
Theorem 4.4's data-dependent bound (``evaluate.offline_bound``). It also records what settles the
questions the published notebook leaves open (docs/findings/drpvi-paper-grid.md): each seed's learned first
action at x1, and whether VA-DRPVI's policy differs from DRPVI's.
"""

from __future__ import annotations

import dataclasses
import time

import jax
import jax.numpy as jnp
import numpy as np

from drjax import data as data_lib
from drjax import evaluate, planning
from drjax.agents import registry
from drjax.envs.linear_mdp import LinearMDP, action_vectors, target_params
from drjax.paper.compile_options import _level_name, compiler_options, opt_level_for
from drjax.paper.programs import _curve, _exact  # the panels' mean / stderr convention
from drjax import _programs

AGENTS = ("pevi", "drpvi", "va-drpvi")  # registry names, in legend order
XI = (0.1, 0.2, 0.3)
RHO = (0.3, 0.4, 0.5)
QS = tuple(np.round(np.linspace(0.0, 1.0, 21), 10))
DEFAULT_SEEDS = 20


@dataclasses.dataclass(frozen=True)
class OfflinePreset:
  """Options of the offline agents in a reproduction (the papers' choices by default)."""

  name: str
  beta: float = 1.0
  lam: float = 0.1
  delta: float = 0.3
  p: float = 0.001
  penalty: str = "paper"      # d-rectangular penalty form
  truncation: str = "paper"   # [0, H - h + 1]; "upper": min(., H - h + 1) (public code)
  vmin: str = "auto"          # exact min_s V(s) on the finite model; "zero": fail-state form
  pilot: str = "independent"  # VA-DRPVI pilot: an independent dataset; "same": D' = D (code)


PRESETS = {
    "paper": OfflinePreset("paper"),
    # The published notebook's choices, without its bugs (docs/presets.md).
    "notebook": OfflinePreset("notebook", penalty="notebook", truncation="upper", vmin="zero",
                              pilot="same"),
}


def agents(preset: OfflinePreset, env) -> dict:
  """``{name: agent}`` for ``AGENTS`` with the preset's options (only those each agent takes)."""
  out = {}
  for name in AGENTS:
    spec = registry.get(name)
    opts = {k: getattr(preset, k) for k in ("penalty", "truncation", "vmin")
            if k in spec.options}
    out[name] = registry.make(name, env, **opts)
  return out


@_programs.cached
def _program(preset: OfflinePreset, num_trajectories: int, level: int | None = None):
  """The figure's jitted program; beta and lambda are traced arguments (a preset's other
  fields are static), so other beta / lambda values reuse the compilation. ``level``: XLA backend
  optimization level (``compile_options.opt_level_for``)."""
  env = LinearMDP()
  H, d = env.horizon, env.feature_dim
  ags = agents(preset, env)
  behavior = data_lib.uniform(env.num_actions)

  def fits(params, model, key, rhos, beta, lam):
    """Every agent's fit at every rho: greedy policy, width table, weights ([R, ...] each)."""
    ds = data_lib._collect(env, params, behavior, jax.random.fold_in(key, 0), num_trajectories)  # pylint: disable=protected-access
    pilot = ds if preset.pilot == "same" else data_lib._collect(  # pylint: disable=protected-access
        env, params, behavior, jax.random.fold_in(key, 1), num_trajectories)
    out = {}
    for name, agent in ags.items():
      spec = registry.get(name)

      def one(rho):
        values = dict(beta=beta, lam=lam)
        if spec.robust:
          values["rho"] = rho
        if "var_shift" in spec.hparams:
          values["var_shift"] = jnp.zeros(())
        hp = agent.hparams_type(**{f: values[f] for f in agent.hparams_type._fields})
        qf = agent.fit(ds, hp, pilot=pilot, model=model, form="stats")
        pi = evaluate.greedy_policy(agent, qf, model)
        u = jax.vmap(lambda h: agent.width(qf, h, model.phi[h]))(jnp.arange(H))  # [H, S, A]
        return dict(policy=pi, width=u, w=qf.w, beta=qf.beta)

      out[name] = jax.vmap(one)(rhos)  # [R, ...]
    return out

  def per_instance(params, keys, rhos, qs, beta, lam):
    # What every agent, seed and rho share is computed once per source instance: the target
    # models, the exact robust-optimal plans at each rho and the non-robust one. The learned
    # policies of all agents are then evaluated together (one traced evaluation, vmapped over
    # agents, seeds and rho, instead of one per agent: half the traced and compiled program).
    # The evaluation is that of evaluate.target_value / offline_subopt / offline_bound
    # (tests/test_drpvi_paper.py checks it against them): the greedy policy on the source
    # model's features is the one on every target's (the targets change mu_1 only).
    model = env.model(params)
    tmodels = jax.vmap(env.model)(target_params(params, qs))  # [Q]
    star = jax.vmap(lambda r: planning.robust_dp(model, r))(rhos)  # [R, ...]
    nominal = planning.robust_dp(model, jnp.zeros((H, d), rhos.dtype))
    v0 = planning.initial_value
    f = jax.vmap(lambda k: fits(params, model, k, rhos, beta, lam))(keys)  # {name: [S, R, ...]}
    pis = jnp.stack([f[n]["policy"] for n in AGENTS])  # [N, S, R, H, S_states]
    widths = jnp.stack([f[n]["width"] for n in AGENTS])
    betas = jnp.stack([f[n]["beta"] for n in AGENTS])
    robust = jnp.asarray([registry.get(n).robust for n in AGENTS])  # [N]

    def evaluate_one(pi, u, b, is_robust, rho, v_star, pi_star):
      curve = jax.vmap(lambda m: v0(m, planning.nominal_evaluate(m, pi)))(tmodels)
      subopt = v_star - v0(model, planning.robust_evaluate(model, rho, pi))
      # Theorem 4.4's bound: at rho for the robust agents, at 0 for PEVI (its own objective).
      b_rho = jnp.where(is_robust, rho, 0.0 * rho)
      b_pi = jnp.where(is_robust, pi_star, nominal.policy)
      cost = model._replace(reward=-u.astype(model.reward.dtype))
      bound = b * -v0(cost, planning.robust_evaluate(cost, b_rho, b_pi))
      return dict(curve=curve, subopt=subopt, bound=bound)

    v_star = jax.vmap(lambda v: v0(model, v))(star.v)  # [R]
    over_rho = jax.vmap(evaluate_one, in_axes=(0, 0, 0, None, 0, 0, 0))
    over_seeds = jax.vmap(over_rho, in_axes=(0, 0, 0, None, None, None, None))
    over_agents = jax.vmap(over_seeds, in_axes=(0, 0, 0, 0, None, None, None))
    ev = over_agents(pis, widths, betas, robust, rhos, v_star, star.policy)
    res = {n: dict(curve=ev["curve"][i], subopt=ev["subopt"][i], bound=ev["bound"][i],
                   first=pis[i, :, :, 0, 0], policy=pis[i], w=f[n]["w"])
           for i, n in enumerate(AGENTS)}

    def values(pi):
      return jax.vmap(lambda m: v0(m, planning.nominal_evaluate(m, pi)))(tmodels)

    ref = dict(robust=jax.vmap(values)(star.policy), nonrobust=values(nominal.policy),
               robust_first=star.policy[:, 0, 0])
    return res, ref

  def drpvi_program(params, keys, rhos, qs, beta, lam):
    return jax.vmap(lambda p: per_instance(p, keys, rhos, qs, beta, lam))(params)

  return env, jax.jit(drpvi_program, compiler_options=compiler_options(level))


def run(preset: OfflinePreset, *, seeds: int, trajectories: int, key, xi_norms=XI, rhos=RHO,
        qs=QS, opt_level="auto") -> dict:
  """Runs the whole figure; returns NumPy arrays (leading axes ``[X, S, R]`` for the agents).

  ``opt_level``: XLA backend optimization level (``"auto"``, 0-3; ``opt_level_for``; at the
  paper's size "auto" is -O0: 1.2 s of compile instead of 4.9 s, a few ms more to run)."""
  # Work as for the online programs, with a dataset's collection and fits in place of a run.
  level = opt_level_for(opt_level, seeds * trajectories * len(xi_norms))
  env, program = _program(dataclasses.replace(preset, name="", beta=0.0, lam=0.0), trajectories,
                          level)
  H, d = env.horizon, env.feature_dim
  params = jax.tree_util.tree_map(
      lambda *x: jnp.stack(x), *[env.make_params(delta=preset.delta, p=preset.p, xi_norm=x)
                                 for x in xi_norms])
  rho = np.zeros((len(rhos), H, d))
  rho[:, 0, 3] = rhos
  keys = jax.random.split(key, seeds)
  t0 = time.perf_counter()
  dtype = jnp.result_type(float)
  res, ref = jax.device_get(program(params, keys, jnp.asarray(rho, dtype),
                                    jnp.asarray(qs, dtype), jnp.asarray(preset.beta, dtype),
                                    jnp.asarray(preset.lam, dtype)))
  return {"agents": jax.tree_util.tree_map(np.asarray, res),
          "ref": jax.tree_util.tree_map(np.asarray, ref), "seconds": time.perf_counter() - t0,
          "opt_level": level,
          "xi_norms": np.asarray(xi_norms), "rhos": np.asarray(rhos), "qs": np.asarray(qs)}


@_programs.cached
def _action_table() -> np.ndarray:
  # Once: an eager JAX call per label (1,089 of them) cost 2 s of the figure-writing thread
  # while the other families' compilations held both cores.
  return np.asarray(action_vectors())


def _action_label(a: int) -> str:
  v = _action_table()[int(a)]
  return "(" + ",".join("+1" if x > 0 else "-1" for x in v) + ")"


def panels(res: dict, preset: OfflinePreset, *, seeds: int, trajectories: int) -> dict:
  """One panel per (xi_norm, rho) with the curves, references and the findings' numbers."""
  out = {}
  base = dict(env="linear-mdp", seeds=seeds, episodes=trajectories, trajectories=trajectories,
              behavior="uniform", preset=preset.name, beta=preset.beta,
              **{"lambda": preset.lam}, delta=preset.delta, p=preset.p,
              penalty=preset.penalty, truncation=preset.truncation, vmin=preset.vmin,
              pilot=preset.pilot, agents=list(AGENTS), H=3, d=4,
              evaluation="exact expected return of each seed's greedy policy",
              rho_note="rho_{1,4} = rho, all other rho_{h,i} = 0 (robust agents only)",
              paper="Liu & Xu, NeurIPS 2024, Figure 2",
              xla_backend_optimization_level=_level_name(res.get("opt_level")))
  A = res["agents"]
  for xi_i, xi in enumerate(res["xi_norms"]):
    for r_i, rho in enumerate(res["rhos"]):
      curves, findings = {}, {}
      for name in AGENTS:
        disp = registry.get(name).display
        a = A[name]
        curves[disp] = _curve(a["curve"][xi_i, :, r_i])
        firsts = a["first"][xi_i, :, r_i]
        counts = {}
        for x in firsts:
          counts[_action_label(x)] = counts.get(_action_label(x), 0) + 1
        findings[disp] = {
            "first_action_counts": counts,
            "robust_optimal_first_action_share": float(np.mean(
                firsts == res["ref"]["robust_first"][xi_i, r_i])),
            "subopt_mean": float(a["subopt"][xi_i, :, r_i].mean()),
            "bound_mean": float(a["bound"][xi_i, :, r_i].mean()),
        }
      dr, va = A["drpvi"], A["va-drpvi"]
      same = np.all(dr["policy"][xi_i, :, r_i] == va["policy"][xi_i, :, r_i], axis=(-2, -1))
      findings["VA-DRPVI vs DRPVI"] = {
          "seeds_with_identical_policy": int(same.sum()),
          "max_abs_w_difference": float(np.abs(dr["w"][xi_i, :, r_i] -
                                               va["w"][xi_i, :, r_i]).max())}
      curves["robust optimum (exact)"] = _exact(res["ref"]["robust"][xi_i, r_i])
      curves["non-robust optimum (exact)"] = _exact(res["ref"]["nonrobust"][xi_i])
      out[f"xi{xi:g}_rho{rho:g}"] = {
          "x": res["qs"].tolist(), "x_label": "perturbation level q",
          "y_label": "average reward in the target domain", "curves": curves,
          "findings": findings,
          "robust_optimal_first_action": _action_label(res["ref"]["robust_first"][xi_i, r_i]),
          "title": f"||xi||_1 = {xi:g}, rho_1,4 = {rho:g}",
          "config": dict(base, xi_norm=float(xi), rho=float(rho),
                         seconds_all_panels=round(float(res["seconds"]), 3)),
      }
  return out


def summary_table(panels_: dict) -> list[str]:
  """``results.md`` lines: a caption and a table with one row per panel and one column per agent
  and quantity: the share of seeds whose learned first action at x1 is the robust-optimal one,
  the mean exact robust SubOpt, and the seeds where VA-DRPVI's policy equals DRPVI's."""
  from drjax.paper import tables  # pylint: disable=g-import-not-at-top
  names = [registry.get(n).display for n in AGENTS]
  seeds = tables.seeds_note(panels_.values())
  lines = ["", "`drpvi` (DRPVI paper, Figure 2; offline, exact evaluation): the exact "
           "robust-optimal first action at x1 (step 1); per agent, the share of seeds whose "
           "learned first action is it and the mean exact robust suboptimality "
           f"`V*_1 - V^pi_1` at the panel's rho (return; {seeds}); and the seeds where "
           "VA-DRPVI's greedy policy equals DRPVI's.", ""]
  header = (["figure", "panel", "preset", "seeds", "K", "robust-optimal first action"] +
            [f"share of seeds choosing it: {n}" for n in names] +
            [f"mean SubOpt {n} ({seeds})" for n in names] +
            ["seeds with VA-DRPVI policy = DRPVI policy", "run"])
  rows = []
  for tag, p in panels_.items():
    f, c = p["findings"], p["config"]
    vs = f["VA-DRPVI vs DRPVI"]
    rows.append(["drpvi", tag, c["preset"], c["seeds"], c["trajectories"],
                 p["robust_optimal_first_action"]] +
                [f"{f[n]['robust_optimal_first_action_share']:.2f}" for n in names] +
                [f"{f[n]['subopt_mean']:.4f}" for n in names] +
                [f"{vs['seeds_with_identical_policy']}/{c['seeds']}", c.get("run", "?")])
  return lines + tables.md_table(header, rows)
