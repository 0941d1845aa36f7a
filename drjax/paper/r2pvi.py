"""``drjax reproduce r2pvi``: the linear-MDP experiments of the R2PVI paper (Tang, Liu & Xu 2025).

Figure 1(a)-(d) of the paper: (a)-(c) on the simulated linear MDP (delta = 0.3, p = 0.001, K = 100
uniform trajectories per seed, beta = 1, ridge lambda = 0.1, 20 seeds; family note section 3),
evaluated *exactly* (dynamic programming on each target model) instead of by 100 Monte Carlo
episodes:

* ``fig1a`` -- ||xi||_1 = 0.2, regularization weight 0.1: PEVI, R2PVI-TV, R2PVI-KL, R2PVI-chi2
  against the perturbation q in {0, 0.1, ..., 1}, with the exact non-robust optimum and the exact
  TV-regularized optimum (weight 0.1) dashed;
* ``fig1b`` -- ||xi||_1 = 0.3: R2PVI-TV for weights 0.1, 0.2, 0.3, 0.6;
* ``fig1c`` -- ||xi||_1 = 0.2, target q = 0.9: DRPVI with rho on every (h, i) and R2PVI-TV with
  the same value as weight, along rho = weight in linspace(0, 1, 10) (weight 0 is not defined:
  left out), and, exact, the weight at which the TV-regularized value of the exact
  rho-robust-optimal policy equals its constrained value (``planning.weight_for_radius``).

* ``fig1d`` -- the put option (``PutOption(num_anchors=30, horizon=20, variant="notebook")``,
  strike 100, N = 100 trajectories of the always-hold behavior as in the public code, beta = 0.1,
  ridge 1): PEVI, R2PVI-TV for weights 1, 3, 5 and DRPVI for rho 0.1, 0.2, 0.3 against the
  price-up probability p in {0.2, ..., 1.0}, valued exactly on the price lattice (initial price
  uniform on [95, 105], integrated exactly), with the exact optimal stopping rule of the source
  dashed. Independent seeds (the public code reseeds every replication to 1) and strike 100 (the
  public code uses the dataset size as strike). PEVI is the published class (``put_agents``): the
  exercise value ``max(0, 100 - s)`` is known, never regressed nor penalized, and only the hold
  value ``min(w . phi - beta ||phi||_{Lambda^-1}, H - h)`` is learned, from ``V = max(Q_hold,
  payoff)`` (``American_put_opt/algorithm.py``, ``get_action`` and ``PEVI.update_Q``); a PEVI
  that regresses the always-hold data's rewards sees only zeros and never exercises.

Not here (the R2PVI issue): Figure 2 (fit times; ``drjax bench --only offline``).
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np

from drjax import data as data_lib
from drjax import evaluate, planning
from drjax.agents import registry
from drjax.agents.lsvi import NOTEBOOK_PUT_KNOWN
from drjax.envs.linear_mdp import LinearMDP, target_params
from drjax.envs.put_option import PutOption
from drjax.paper.compile_options import _level_name, compiler_options, opt_level_for
from drjax.paper.programs import _exact
from drjax import _programs

FIG_A_AGENTS = ("pevi", "r2pvi-tv", "r2pvi-kl", "r2pvi-chi2")  # registry names
FIG_B_AGENT, FIG_C_AGENTS = "r2pvi-tv", ("drpvi", "r2pvi-tv")
FIG_A_XI, FIG_A_WEIGHT = 0.2, 0.1
FIG_B_XI, FIG_B_WEIGHTS = 0.3, (0.1, 0.2, 0.3, 0.6)
FIG_C_XI, FIG_C_Q = 0.2, 0.9
FIG_C_LEVELS = tuple(np.round(np.linspace(0.0, 1.0, 10), 10))
QS = tuple(np.round(np.linspace(0.0, 1.0, 11), 10))
DEFAULT_SEEDS = 20
BETA, LAM, DELTA, P = 1.0, 0.1, 0.3, 0.001
PUT_ANCHORS, PUT_HORIZON, PUT_BETA, PUT_LAM = 30, 20, 0.1, 1.0
PUT_WEIGHTS, PUT_RHOS = (1.0, 3.0, 5.0), (0.1, 0.2, 0.3)
PUT_PU = (0.2, 0.4, 0.6, 0.8, 1.0)
PUT_DEFAULT_SEEDS = 10
# Figure 1(d)'s agents and their static options. PEVI as the published class
# (American_put_opt/algorithm.py: get_action, PEVI.update_Q, PEVI.get_Q_func): the notebook
# variant's exercise (action 0) has the known value max(0, 100 - s), ties go to hold, no reward is
# regressed (the known theta: theta . phi_hold = 0, so the last step's hold weights are the
# published w_H = 0), and Q_hold is truncated from above only (no floor at 0).
PUT_AGENT_OPTIONS = {"pevi": dict(known=NOTEBOOK_PUT_KNOWN, truncation="upper"),
                     "r2pvi-tv": {}, "drpvi": {}}


def _hp(agent, spec, level, beta=BETA, lam=LAM):
  """The agent's hyperparameters with ``level`` as its rho or reg_weight on every (h, i)."""
  H, d = agent.config.horizon, agent.config.feature_dim
  values = dict(beta=jnp.asarray(beta), lam=jnp.asarray(lam))
  for f in agent.hparams_type._fields:
    if f in ("rho", "reg_weight"):
      values[f] = jnp.full((H, d), level)
    elif f not in values:
      values[f] = jnp.zeros(())
  return agent.hparams_type(**{f: values[f] for f in agent.hparams_type._fields})


@_programs.cached
def _program(num_trajectories: int, level: int | None = None):
  env = LinearMDP()
  behavior = data_lib.uniform(env.num_actions)
  agents = {n: registry.make(n, env) for n in set(FIG_A_AGENTS + FIG_C_AGENTS + (FIG_B_AGENT,))}

  def value(model, pi):
    return planning.initial_value(model, planning.nominal_evaluate(model, pi))

  def pair_values(pis, models, pairs):
    """``value(models[m], pis[p])`` for each ``(p, m)`` row of the static ``pairs``: one traced
    evaluation serves every curve of the figure (one per agent and panel compiled ~25 % longer,
    with the same numbers)."""
    pi_idx, m_idx = (np.asarray(c) for c in zip(*pairs))
    return jax.vmap(lambda p, m: value(jax.tree_util.tree_map(lambda x: x[m], models), pis[p]))(
        pi_idx, m_idx)

  n_q, n_b, n_c = len(QS), len(FIG_B_WEIGHTS), len(FIG_C_LEVELS)  # the program's argument sizes

  def policies(name, ds, model, levels):
    """The agent's greedy policies fitted on ``ds`` at each of ``levels`` ([L, H, S])."""
    agent = agents[name]

    def one(lv):
      qf = agent.fit(ds, _hp(agent, registry.get(name), lv), model=model, form="stats")
      return evaluate.greedy_policy(agent, qf, model)

    return jax.vmap(one)(levels)

  # Which policy is valued in which target (models: ta [Q], tb [Q], tc [1]), in the order of the
  # stacked policies: (a)'s agents, (b)'s weights, (c)'s agents by level. The greedy policy on
  # the source's features is the one on each target's (the targets change mu_1 only).
  pairs = ([(i, j) for i in range(4) for j in range(n_q)] +
           [(4 + i, n_q + j) for i in range(n_b) for j in range(n_q)] +
           [(4 + n_b + i, 2 * n_q) for i in range(2 * n_c)])

  def per_seed(key, pa, pb, tmodels, b_weights, c_rho, c_w):
    ma, mb = env.model(pa), env.model(pb)
    da = data_lib._collect(env, pa, behavior, jax.random.fold_in(key, 0), num_trajectories)  # pylint: disable=protected-access
    db = data_lib._collect(env, pb, behavior, jax.random.fold_in(key, 1), num_trajectories)  # pylint: disable=protected-access
    w_a = jnp.full((1,), FIG_A_WEIGHT, c_w.dtype)
    # R2PVI-TV's (a) weight and (c) weights on dataset a: one vmap (one traced fit).
    tv_a = policies("r2pvi-tv", da, ma, jnp.concatenate([w_a, c_w]))
    a = {n: tv_a[:1] if n == "r2pvi-tv" else policies(n, da, ma, w_a) for n in FIG_A_AGENTS}
    c = {"drpvi": policies("drpvi", da, ma, c_rho), "r2pvi-tv": tv_a[1:]}
    stacked = jnp.concatenate([a[n] for n in FIG_A_AGENTS] +
                              [policies(FIG_B_AGENT, db, mb, b_weights)] +
                              [c[n] for n in FIG_C_AGENTS])  # [4 + B + 2C, H, S]
    v = pair_values(stacked, tmodels, pairs)
    out = {f"a/{n}": v[i * n_q:(i + 1) * n_q] for i, n in enumerate(FIG_A_AGENTS)}
    out["b"] = v[4 * n_q:(4 + n_b) * n_q].reshape(n_b, n_q)
    rest = v[(4 + n_b) * n_q:]
    for i, n in enumerate(FIG_C_AGENTS):
      out[f"c/{n}"] = rest[i * n_c:(i + 1) * n_c]
    return out

  def refs(pa, pb, tmodels):
    H, d = env.horizon, env.feature_dim
    models = jax.tree_util.tree_map(lambda *x: jnp.stack(x), env.model(pa), env.model(pb))
    nominal = jax.vmap(lambda m: planning.robust_dp(m, jnp.zeros((H, d), m.theta.dtype)).policy)(
        models)  # [2, H, S]: sources a and b
    reg_a = planning.regularized_dp(env.model(pa), FIG_A_WEIGHT * jnp.ones((H, d)), "tv").policy
    pis = jnp.concatenate([nominal, reg_a[None]])  # nominal a, nominal b, regularized a
    n_q = len(QS)
    v = pair_values(pis, tmodels, [(p, j) for p in (0, 2) for j in range(n_q)] +
                    [(1, n_q + j) for j in range(n_q)])
    return {"a/nominal": v[:n_q], "a/regularized": v[n_q:2 * n_q], "b/nominal": v[2 * n_q:]}

  def r2pvi_linear_program(keys, pa, pb, qs, b_weights, c_rho, c_w):
    targets = jax.tree_util.tree_map(
        lambda *x: jnp.concatenate(x), target_params(pa, qs), target_params(pb, qs),
        target_params(pa, jnp.asarray([FIG_C_Q], qs.dtype)))
    tmodels = jax.vmap(env.model)(targets)  # [2 Q + 1]: ta, tb, tc
    res = jax.vmap(lambda k: per_seed(k, pa, pb, tmodels, b_weights, c_rho, c_w))(keys)
    return res, refs(pa, pb, tmodels)

  return env, jax.jit(r2pvi_linear_program, compiler_options=compiler_options(level))


def put_agents(env) -> dict:
  """Figure 1(d)'s agents on ``env`` (``PUT_AGENT_OPTIONS``), by registry name."""
  return {n: registry.make(n, env, **opts) for n, opts in PUT_AGENT_OPTIONS.items()}


@_programs.cached
def _put_program(num_trajectories: int, level: int | None = None):
  env = PutOption(num_anchors=PUT_ANCHORS, horizon=PUT_HORIZON, variant="notebook")
  hold = data_lib.fixed(1)  # notebook variant: action 0 exercises, 1 holds
  agents = put_agents(env)

  def policies(name, ds, levels, params):
    """The agent's greedy ``PutPolicy`` fitted on ``ds`` at each of ``levels`` ([L] leaves)."""
    agent = agents[name]

    def one(level):
      qf = agent.fit(ds, _hp(agent, registry.get(name), level, PUT_BETA, PUT_LAM), form="buffer")
      return evaluate.put_option_agent_policy(env, agent, qf, params.init_low, params.init_high)

    return jax.vmap(one)(levels)

  def values(pol, params, p_us):
    return evaluate.put_option_piecewise_values(pol, p_us, params.init_low, params.init_high)

  def per_seed(key, params, p_us, weights, rhos):
    ds = data_lib._collect(env, params, hold, key, num_trajectories)  # pylint: disable=protected-access
    # Every policy of the seed valued by one traced evaluation (vmapped over the stack).
    pols = [policies("pevi", ds, jnp.zeros((1,), weights.dtype), params),
            policies("r2pvi-tv", ds, weights, params), policies("drpvi", ds, rhos, params)]
    stacked = jax.tree_util.tree_map(lambda *x: jnp.concatenate(x), *pols)
    v = jax.vmap(lambda pol: values(pol, params, p_us))(stacked)  # [1 + W + R, P]
    n_w = weights.shape[0]
    return {"pevi": v[0], "r2pvi-tv": v[1:1 + n_w], "drpvi": v[1 + n_w:]}

  def r2pvi_put_program(keys, params, p_us, weights, rhos):
    res = jax.vmap(lambda k: per_seed(k, params, p_us, weights, rhos))(keys)
    opt = evaluate.put_option_optimal_policy(env, params.init_low, params.init_high,
                                             source_p_u=params.p_u)
    return res, values(opt, params, p_us)

  return env, jax.jit(r2pvi_put_program, compiler_options=compiler_options(level))


def run_put(*, seeds: int, trajectories: int, key, opt_level="auto") -> dict:
  # -O1 when small, as the put-option experiment (its elementwise lattice code runs slowly at -O0).
  level = opt_level_for(opt_level, seeds * trajectories, small=1)
  env, program = _put_program(trajectories, level)
  params = env.make_params()
  dtype = jnp.result_type(float)
  res, ref = jax.device_get(program(jax.random.split(key, seeds), params,
                                    jnp.asarray(PUT_PU, dtype), jnp.asarray(PUT_WEIGHTS, dtype),
                                    jnp.asarray(PUT_RHOS, dtype)))
  return {"agents": jax.tree_util.tree_map(np.asarray, res), "ref": np.asarray(ref),
          "opt_level": level}


@_programs.cached
def _correspondence_program():
  env = LinearMDP()
  H, d = env.horizon, env.feature_dim

  def one(params, rho):
    model = env.model(params)
    pi = planning.robust_dp(model, jnp.full((H, d), rho)).policy
    return planning.weight_for_radius(model, pi, rho)[0]

  # One compiled program for every level (eagerly, each level's DP and bisection dispatched and
  # compiled its scans one by one: ~4 s of a cold ``reproduce r2pvi``).
  return env, jax.jit(jax.vmap(one, in_axes=(None, 0)), compiler_options=compiler_options(0))


def correspondence(levels=FIG_C_LEVELS, xi_norm: float = FIG_C_XI):
  """Exact rho -> weight (``planning.weight_for_radius``) for the rho-robust-optimal policy of each
  positive rho (NaN for rho <= 0; float64 when JAX's x64 mode is on)."""
  env, program = _correspondence_program()
  levels = np.asarray(levels, dtype=np.float64)
  positive = levels > 0
  w = np.asarray(program(env.make_params(delta=DELTA, p=P, xi_norm=xi_norm),
                         jnp.asarray(np.where(positive, levels, 1.0), jnp.result_type(float))))
  return [float(x) if ok else float("nan") for x, ok in zip(w, positive)]


def put_seeds_for(seeds: int) -> int:
  """Figure 1(d)'s seeds: ``seeds`` capped at ``PUT_DEFAULT_SEEDS``."""
  return min(seeds, PUT_DEFAULT_SEEDS)


def put_key(key):
  """Figure 1(d)'s key, derived from ``run``'s."""
  return jax.random.fold_in(key, 3)


def run(*, seeds: int, trajectories: int, key, opt_level="auto", put=None) -> dict:
  """Figure 1(a)-(d).

  ``put``: Figure 1(d)'s ``run_put`` result when computed elsewhere (with
  ``put_seeds_for(seeds)`` and ``put_key(key)``); ``None`` computes it here, ``False`` leaves it
  to the caller. ``opt_level``: XLA backend optimization level
  (``"auto"``, 0-3; ``compile_options.opt_level_for``; at the paper's size "auto" compiles the
  linear-MDP program at -O0, 1.1 s instead of 4.3 s, and the put-option program at -O1).
  """
  # Work as for the online programs, with a dataset's collection and fits in place of a run
  # (two datasets per seed).
  level = opt_level_for(opt_level, seeds * trajectories * 2)
  env, program = _program(trajectories, level)
  pa = env.make_params(delta=DELTA, p=P, xi_norm=FIG_A_XI)
  pb = env.make_params(delta=DELTA, p=P, xi_norm=FIG_B_XI)
  dtype = jnp.result_type(float)
  levels = np.asarray(FIG_C_LEVELS)
  c_levels = np.where(levels > 0, levels, np.nan)  # weight 0 is undefined (DRPVI too: NaN)
  t0 = time.perf_counter()
  res, ref = jax.device_get(program(
      jax.random.split(key, seeds), pa, pb, jnp.asarray(QS, dtype),
      jnp.asarray(FIG_B_WEIGHTS, dtype), jnp.asarray(levels, dtype),
      jnp.asarray(np.where(levels > 0, levels, 1.0), dtype)))
  res = jax.tree_util.tree_map(np.asarray, res)
  for name in FIG_C_AGENTS:  # level 0: DRPVI is defined (rho = 0), R2PVI's weight is not
    if registry.get(name).uncertainty == "regularized":
      res[f"c/{name}"] = np.where(np.isnan(c_levels)[None, :], np.nan, res[f"c/{name}"])
  put_seeds = put_seeds_for(seeds)
  if put is None:
    put = run_put(seeds=put_seeds, trajectories=trajectories, key=put_key(key),
                  opt_level=opt_level)
  return {"agents": res, "ref": jax.tree_util.tree_map(np.asarray, ref),
          "correspondence": correspondence(), "seconds": time.perf_counter() - t0,
          "put": put, "put_seeds": put_seeds, "opt_level": level}


def _curve(values):
  """Mean and standard error across seeds; NaN where a point is undefined (weight 0)."""
  values = np.asarray(values, dtype=np.float64)
  n = values.shape[0]
  defined = ~np.all(np.isnan(values), axis=0)
  safe = np.where(defined[None], values, 0.0)
  mean = np.where(defined, safe.mean(axis=0), np.nan)
  se = safe.std(axis=0, ddof=1) / np.sqrt(n) if n > 1 else np.zeros(values.shape[1:])
  return {"mean": mean.tolist(), "stderr": np.where(defined, se, 0.0).tolist()}


def panels(res: dict, *, seeds: int, trajectories: int) -> dict:
  disp = lambda n: registry.get(n).display  # noqa: E731
  base = dict(env="linear-mdp", seeds=seeds, episodes=trajectories, trajectories=trajectories,
              behavior="uniform", preset="paper", beta=BETA, **{"lambda": LAM}, delta=DELTA,
              p=P, H=3, d=4, evaluation="exact expected return of each seed's greedy policy",
              paper="Tang, Liu & Xu, ICML 2025 (R2PVI), Figure 1",
              xla_backend_optimization_level=_level_name(res.get("opt_level")))
  A, R = res["agents"], res["ref"]
  x = list(QS)
  a = {disp(n): _curve(A[f"a/{n}"]) for n in FIG_A_AGENTS}
  a["non-robust optimum (exact)"] = _exact(R["a/nominal"])
  a["TV-regularized optimum, weight 0.1 (exact)"] = _exact(R["a/regularized"])
  b = {f"{disp(FIG_B_AGENT)}, weight {w:g}": _curve(A["b"][:, j])
       for j, w in enumerate(FIG_B_WEIGHTS)}
  b["non-robust optimum (exact)"] = _exact(R["b/nominal"])
  c = {disp(n): _curve(A[f"c/{n}"]) for n in FIG_C_AGENTS}
  corr = res["correspondence"]
  P_ = res["put"]
  d = {disp("pevi"): _curve(P_["agents"]["pevi"])}
  for j, w in enumerate(PUT_WEIGHTS):
    d[f"{disp('r2pvi-tv')}, weight {w:g}"] = _curve(P_["agents"]["r2pvi-tv"][:, j])
  for j, r in enumerate(PUT_RHOS):
    d[f"{disp('drpvi')}, rho {r:g}"] = _curve(P_["agents"]["drpvi"][:, j])
  d["optimal stopping of the source (exact)"] = _exact(P_["ref"])
  return {
      "fig1d": {"x": list(PUT_PU), "x_label": "price-up probability p",
                "y_label": "average reward in the target domain", "curves": d,
                "title": f"(d) put option, H = {PUT_HORIZON}, d = {PUT_ANCHORS + 1}",
                "config": dict(base, env="put-option", seeds=res["put_seeds"], beta=PUT_BETA,
                               **{"lambda": PUT_LAM}, delta=None, p=None, H=PUT_HORIZON,
                               d=PUT_ANCHORS + 1, behavior="fixed:1 (always hold)",
                               reg_weights=list(PUT_WEIGHTS), rhos=list(PUT_RHOS),
                               agents=["pevi", "r2pvi-tv", "drpvi"], strike=100,
                               pevi=("the published class: exercise value max(0, 100 - s) known "
                                     "(never regressed nor penalized), hold Q truncated from "
                                     "above only, ties to hold"),
                               xla_backend_optimization_level=_level_name(P_.get("opt_level")),
                               evaluation="exact expected return on the price lattice, s0 ~ "
                                          "U[95, 105] integrated exactly")},
      "fig1a": {"x": x, "x_label": "perturbation level q",
                "y_label": "average reward in the target domain", "curves": a,
                "title": f"(a) ||xi||_1 = {FIG_A_XI:g}, regularization weight {FIG_A_WEIGHT:g}",
                "config": dict(base, xi_norm=FIG_A_XI, reg_weight=FIG_A_WEIGHT,
                               agents=list(FIG_A_AGENTS))},
      "fig1b": {"x": x, "x_label": "perturbation level q",
                "y_label": "average reward in the target domain", "curves": b,
                "title": f"(b) ||xi||_1 = {FIG_B_XI:g}, R2PVI-TV by weight",
                "config": dict(base, xi_norm=FIG_B_XI, reg_weights=list(FIG_B_WEIGHTS),
                               agents=[FIG_B_AGENT])},
      "fig1c": {"x": list(FIG_C_LEVELS), "x_label": "rho (DRPVI) = weight (R2PVI-TV)",
                "y_label": f"average reward at q = {FIG_C_Q:g}", "curves": c,
                "correspondence_weight_for_rho": corr,
                "title": f"(c) ||xi||_1 = {FIG_C_XI:g}, q = {FIG_C_Q:g}",
                "config": dict(base, xi_norm=FIG_C_XI, q=FIG_C_Q, agents=list(FIG_C_AGENTS),
                               rho_note="rho on every (h, i); weight 0 undefined (no point)",
                               correspondence=("weight at which the TV-regularized value of the "
                                               "exact rho-robust-optimal policy equals its "
                                               "TV-constrained value at rho "
                                               "(planning.weight_for_radius)"))},
  }


def summary_table(panels_: dict) -> list[str]:
  """``results.md`` lines: the mean of each learned curve over its x values (one row per panel
  and curve), and the exact weight matching each rho of fig1c."""
  from drjax.paper import tables  # pylint: disable=g-import-not-at-top
  seeds = tables.seeds_note(panels_.values())
  lines = ["", "`r2pvi` (R2PVI paper, Figure 1(a)-(d); exact evaluation): the mean of each "
           "learned curve over its x values (expected return in the target domain; "
           f"{seeds}).", ""]
  rows = []
  for tag, p in panels_.items():
    c = p["config"]
    for name, cur in p["curves"].items():
      if "exact" in name:
        continue
      m = np.asarray(cur["mean"], float)
      rows.append(["r2pvi", tag, c["seeds"], c["trajectories"], name,
                   f"{np.nanmean(m):.3f}", c.get("run", "?")])
  lines += tables.md_table(["figure", "panel", "seeds", "K", "curve",
                            f"mean over x (return; {seeds})", "run"], rows)
  corr = [(tag, r, w) for tag, p in panels_.items()
          for r, w in zip(p["x"], p.get("correspondence_weight_for_rho", [])) if np.isfinite(w)]
  if corr:
    lines += ["", "`r2pvi`, fig1c: the exact regularization weight at which the TV-regularized "
              "value of the exact rho-robust-optimal policy equals its TV-constrained value at "
              "rho (`planning.weight_for_radius`).", ""]
    lines += tables.md_table(["figure", "panel", "rho", "exact weight"],
                             [["r2pvi", t, f"{r:.3f}", f"{w:.4f}"] for t, r, w in corr])
  return lines


def plot(panels_: dict, path_base: str) -> None:
  """Writes ``figure(panels_)`` to ``path_base.png`` and ``.pdf``."""
  from drjax.paper import plotting  # pylint: disable=g-import-not-at-top
  plotting.save_figure(figure(panels_), path_base)


def figure(panels_: dict):
  """Five panels: (a), (b), (c) with their own legends, the exact rho -> weight map, and (d).

  Learned curves in their algorithm's colour (variants of one algorithm in shades of it),
  exact references thin and above them, each y axis scaled to the learned curves (``drjax.style``,
  ``plotting.draw_curves``). A ``matplotlib.figure.Figure`` on an Agg canvas (no pyplot).
  """
  from drjax import style  # pylint: disable=g-import-not-at-top
  from drjax.paper import plotting  # pylint: disable=g-import-not-at-top
  fig = plotting.new_figure((21.0, 4.8))
  axes = fig.subplots(1, 5)
  for ax, tag in zip(list(axes[:3]) + [axes[4]], ("fig1a", "fig1b", "fig1c", "fig1d")):
    p = panels_[tag]
    info = plotting.draw_curves(ax, p, False, plotting.x_symbol(p))
    ax.set_title(style.math(p["title"]), fontsize=9)
    ax.set_xlabel(style.math(p["x_label"]), fontsize=8)
    ax.set_ylabel(style.y_label(p["y_label"]), fontsize=8)
    ax.tick_params(labelsize=7)
    ax.legend(list(info["handles"].values()), list(info["handles"]), fontsize=6.5, loc="best")
  p = panels_["fig1c"]
  w = np.asarray(p["correspondence_weight_for_rho"], float)
  axes[3].plot(np.asarray(p["x"], float), w, "o-", color="k", ms=3, gid="reference")
  axes[3].set_title("exact weight at which the TV-regularized value equals\nthe constrained "
                    r"value at $\rho$ ($\rho$-robust-optimal policy)", fontsize=8)
  axes[3].set_xlabel(r"$\rho$", fontsize=8)
  axes[3].set_ylabel("regularization weight", fontsize=8)
  axes[3].tick_params(labelsize=7)
  c, cd = p["config"], panels_["fig1d"]["config"]
  seeds = f"{c['seeds']} seeds" + (f" ((d): {cd['seeds']})" if cd["seeds"] != c["seeds"] else "")
  title = (f"R2PVI paper (Tang, Liu & Xu 2025), Figure 1(a)-(d), exact evaluation — {seeds}, "
           f"$K$ = {c['trajectories']} trajectories; mean and 95% band across seeds")
  if any("off scale" in t.get_text() for ax in axes for t in ax.texts):
    title += ("\nThe y axis shows the learned curves; exact references beyond it are cut at the "
              "edge (thick mark) with the value they reach written beside it.")
  plotting.fit_layout(fig, fig.suptitle(title, fontsize=9))
  return fig
