"""The paper's experiments (Section 6, Appendix A) as a few compiled programs.

Each experiment family is ONE jitted program: training of both algorithms for every seed,
uncertainty level and source instance (``vmap``), then the evaluation on the whole grid of target
domains (``vmap``), and, for the linear MDP, the exact AveSubopt curves. The functions here return
plain dicts of NumPy arrays ("panels"); ``drjax.paper.outputs`` writes them.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from drjax import evaluate, planning
from drjax.agents.base import HParams, make_hparams, rho_array
from drjax.agents import registry
from drjax.agents.lsvi import NOTEBOOK_PUT_KNOWN
from drjax.envs.linear_mdp import LinearMDP, target_params
from drjax.envs.put_option import PutOption, fixed_initial_price
from drjax.train import make_train
from drjax.paper import FIGURES, PRESET_NAMES  # noqa: F401  (FIGURES re-exported)
from drjax.paper.critical_point import paper_q_star as paper_critical_q  # eq. (critical point)



@dataclasses.dataclass(frozen=True)
class Preset:
  """Settings of a reproduction. Both presets use the authors' hyperparameters."""

  name: str
  beta: float = 1.0
  lam: float = 0.1
  episodes: int = 100
  delta: float = 0.3
  p: float = 0.001
  bonus: str = "paper"          # DR-LSVI-UCB bonus form
  clip: str = "paper"           # LSVI-UCB truncation form
  put_variant: str = "paper"    # put-option features
  put_fixed_init: bool = False  # one initial price per seed (notebook) vs per episode (paper)
  tie_break: str = "optimistic"  # greedy ties: largest untruncated value / lowest index
  put_known: bool = False       # put option: exercise value known, only hold learned, and
                                # LSVI-UCB's last-step hold weights w_H = 0 (notebook:
                                # NOTEBOOK_PUT_KNOWN, last_step_zero=True)
  lsvi_fail_zero: bool = True   # LSVI-UCB's backup knows the fail state (V = 0 there)


PRESETS = {
    "paper": Preset("paper"),
    "notebook": Preset("notebook", bonus="notebook", clip="notebook", put_variant="notebook",
                       put_fixed_init=True, tie_break="first", put_known=True),
}


class Setup(NamedTuple):
  """What ``drjax reproduce`` trains for one preset and experiment (see ``setup``)."""

  env: object
  params: object
  agents: dict
  beta: float
  lam: float


EXPERIMENTS = ("linear-mdp", "put-option")


# The paper compares one robust agent with its nominal baseline (registry names; display names,
# colors and hyperparameters come from drjax.agents.registry).
ROBUST_AGENT, NOMINAL_AGENT = "dr-lsvi-ucb", "lsvi-ucb"
DR, LS = registry.get(ROBUST_AGENT).display, registry.get(NOMINAL_AGENT).display


def agents_for(preset: Preset, env, capacity: int) -> dict:
  """``{ROBUST_AGENT: Agent, NOMINAL_AGENT: Agent}`` exactly as the paper programs build them."""
  known = NOTEBOOK_PUT_KNOWN if (preset.put_known and isinstance(env, PutOption)) else None
  return {
      ROBUST_AGENT: registry.make(ROBUST_AGENT, env, capacity=capacity, bonus=preset.bonus,
                                  tie_break=preset.tie_break, known=known),
      NOMINAL_AGENT: registry.make(NOMINAL_AGENT, env, capacity=capacity, clip=preset.clip,
                                   tie_break=preset.tie_break, fail_zero=preset.lsvi_fail_zero,
                                   known=known),
  }


def setup(preset: str = "paper", experiment: str = "linear-mdp", *, episodes: int = 100,
          xi_norm: float = 0.1) -> Setup:
  """The environment, source params and both agents of a preset, as ``drjax reproduce`` builds
  them, to train the authors' (or the paper's) configuration in your own script::

    s = drjax.paper.setup("notebook", "put-option")
    train = drjax.make_train(s.env, s.agents["dr-lsvi-ucb"], 100)

  Args:
    preset: ``"paper"`` or ``"notebook"``.
    experiment: ``"linear-mdp"`` (source params with ``xi_norm``) or ``"put-option"`` (p_u 0.5;
      the notebook preset draws one initial price per seed: ``fixed_initial_price``).
    episodes: K (the agents' capacity).
    xi_norm: linear MDP only.
  """
  if preset not in PRESETS:
    raise ValueError(f"preset must be one of {tuple(PRESETS)}, got {preset!r}")
  if experiment not in EXPERIMENTS:
    raise ValueError(f"experiment must be one of {EXPERIMENTS}, got {experiment!r}")
  pre = PRESETS[preset]
  if experiment == "linear-mdp":
    env = LinearMDP()
    params = env.make_params(delta=pre.delta, p=pre.p, xi_norm=xi_norm)
  else:
    env = PutOption(variant=pre.put_variant)
    params = env.make_params(p_u=0.5)
  return Setup(env=env, params=params, agents=agents_for(pre, env, episodes), beta=pre.beta,
               lam=pre.lam)
assert tuple(PRESETS) == PRESET_NAMES

LINEAR_XI = (0.1, 0.2, 0.3)
LINEAR_RHO = (0.3, 0.4, 0.5)
FIG1_RHO = 0.5  # Figure 1 and the AveSubopt figure
LINEAR_Q = tuple(np.round(np.linspace(0.0, 1.0, 21), 4))
PUT_RHO = (0.3, 0.4, 0.5)
PUT_PU = tuple(np.round(np.linspace(0.15, 0.85, 29), 4))
DEFAULT_SEEDS = {"linear-mdp": 20, "put-option": 10}  # the paper's numbers
SUBOPT_P = 0.1  # failure probability in the Theorem 1 curve

# Compilation. At the paper's sizes these programs spend ~95% of a cold run compiling (XLA CPU,
# LLVM -O3 by default) and well under a second running. LLVM -O0 compiles them ~4x faster and runs
# them 1-5x slower; "auto" uses it (-O1 for the put option) when the workload is small (seeds x
# episodes x runs up to FAST_COMPILE_MAX_WORK), where the trade is a net gain. Results agree to
# float rounding.
OPT_LEVELS = ("auto", 0, 1, 2, 3)
FAST_COMPILE_MAX_WORK = 50_000


def opt_level_for(opt_level, work: int, small: int = 0) -> int | None:
  """The XLA backend optimization level to compile with (``None``: XLA's default).

  ``"auto"``: ``small`` for workloads up to ``FAST_COMPILE_MAX_WORK``, else XLA's default. The
  put-option program passes ``small=1``: at -O0 its unvectorized elementwise code ran 8.4 s
  against 3.0 s of compile saved (-O1: 7.3 s compile, ~2 s run; measured on 2 cores).
  """
  if isinstance(opt_level, bool) or opt_level not in OPT_LEVELS:
    raise ValueError(f"opt_level must be one of {OPT_LEVELS}, got {opt_level!r}")
  if opt_level == "auto":
    return small if work <= FAST_COMPILE_MAX_WORK else None
  return int(opt_level)


def _level_name(level) -> str:
  return "XLA default" if level is None else f"O{int(level)}"


def compiler_options(level: int | None) -> dict | None:
  return None if level is None else {"xla_backend_optimization_level": int(level)}


def _stack(trees):
  return jax.tree_util.tree_map(lambda *x: jnp.stack(x), *trees)


# ---------------------------------------------------------------------------------------------
# Simulated linear MDP: Figure 1, the 3 x 3 ablation and AveSubopt, from one program.


@functools.lru_cache(maxsize=None)
def _linear_program(preset: Preset, episodes: int, level: int | None = None):
  env = LinearMDP()
  H, d, A = env.horizon, env.feature_dim, env.num_actions
  agents = agents_for(preset, env, episodes)
  dr, ls = agents[ROBUST_AGENT], agents[NOMINAL_AGENT]
  train_dr = make_train(env, dr, episodes, record_q=True)
  train_ls = make_train(env, ls, episodes, record_q=True)
  zero_rho = jnp.zeros((H, d))

  def per_instance(params, out_dr, out_ls, hp_dr: HParams, qs, fine_qs):
    """One source instance (xi_norm): evaluation for all rho and seeds of its training runs."""
    model = env.model(params)
    targets = target_params(params, qs)  # [Q]
    target_models = jax.vmap(env.model)(targets)

    def values_in_targets(pi):  # [H, S] policy -> [Q] exact returns
      return jax.vmap(lambda m: planning.initial_value(m, planning.nominal_evaluate(m, pi)))(
          target_models)

    def learned_in_targets(agent, qf):
      return jax.vmap(lambda t: evaluate.target_value(env, agent, qf, t))(targets)

    def subopt(agent, qfs, rho):
      def value(qf):
        pi = evaluate.greedy_policy(agent, qf, model)
        return planning.initial_value(model, planning.robust_evaluate(model, rho, pi))
      v_star = planning.initial_value(model, planning.robust_dp(model, rho).v)
      gap = v_star - jax.vmap(value)(qfs)
      return jnp.cumsum(gap) / jnp.arange(1, gap.shape[0] + 1)

    def run_dr(hp, out):
      curves = jax.vmap(lambda qf: learned_in_targets(dr, qf))(out.final_qf)  # [S, Q]
      sub = jax.vmap(lambda qfs: subopt(dr, qfs, hp.rho))(out.qf)  # [S, K]
      ref = values_in_targets(planning.robust_dp(model, hp.rho).policy)
      return curves, sub, out.estimation_error, ref

    dr_curves, dr_sub, dr_err, robust_ref = jax.vmap(run_dr)(hp_dr, out_dr)  # [R, S, Q], ...
    out = out_ls
    ls_curves = jax.vmap(lambda qf: learned_in_targets(ls, qf))(out.final_qf)
    ls_sub = jax.vmap(lambda qfs: subopt(ls, qfs, zero_rho))(out.qf)
    nonrobust_ref = values_in_targets(planning.robust_dp(model, zero_rho).policy)
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
    return dict(dr=dr_curves, ls=ls_curves, dr_sub=dr_sub, ls_sub=ls_sub, dr_err=dr_err,
                ls_err=out.estimation_error, robust_ref=robust_ref, nonrobust_ref=nonrobust_ref,
                critical_q=critical)

  def program(params, keys, hp_dr: HParams, hp_ls: HParams, qs, fine_qs):
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

  return env, jax.jit(program, compiler_options=compiler_options(level))


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
  out = jax.device_get(program(params, keys, hp_dr, hp_ls, jnp.asarray(qs), jnp.asarray(fine)))
  elapsed = time.perf_counter() - t0
  res = {k: np.asarray(v) for k, v in out.items()}
  res["seconds"] = elapsed
  res.update(xi_norms=np.asarray(xi_norms), rhos=np.asarray(rhos), qs=np.asarray(qs),
             opt_level=level)
  return res


# ---------------------------------------------------------------------------------------------
# American put option: Figure 2.


PUT_EVALUATIONS = ("exact", "mc")


@functools.lru_cache(maxsize=None)
def _put_program(preset: Preset, episodes: int, test_episodes: int, evaluation: str,
                 level: int | None = None):
  env = PutOption(variant=preset.put_variant)
  H, d, A = env.horizon, env.feature_dim, env.num_actions
  agents = agents_for(preset, env, episodes)
  dr, ls = agents[ROBUST_AGENT], agents[NOMINAL_AGENT]
  train_dr = make_train(env, dr, episodes)
  train_ls = make_train(env, ls, episodes)
  fixed = preset.put_fixed_init

  def program(params, keys, eval_keys, hp_dr, hp_ls, p_us, ref_rhos):
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

  return env, jax.jit(program, compiler_options=compiler_options(level))


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
  level = opt_level_for(opt_level, seeds * episodes * (len(rhos) + 1), small=1)
  env, program = _put_program(preset, episodes, test_episodes if evaluation == "mc" else 0,
                              evaluation, level)
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
             opt_level=level)
  return res


# ---------------------------------------------------------------------------------------------
# Panels: the results files' content.


def _curve(values):
  """Mean and standard error across seeds (axis 0)."""
  values = np.asarray(values, dtype=np.float64)
  n = values.shape[0]
  stderr = values.std(axis=0, ddof=1) / math.sqrt(n) if n > 1 else np.zeros(values.shape[1:])
  return {"mean": values.mean(axis=0).tolist(), "stderr": stderr.tolist()}


def _exact(values):
  values = np.asarray(values, dtype=np.float64)
  return {"mean": values.tolist(), "stderr": np.zeros_like(values).tolist()}


def _fit_slope(k, y, k_min=10):
  sel = (k >= k_min) & (y > 0)
  if sel.sum() < 2:
    return float("nan")
  return float(np.polyfit(np.log(k[sel]), np.log(y[sel]), 1)[0])


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
        bound = evaluate.theorem1_bound(res["dr_err"][xi_i, r_i].mean(0), H=3, d=4, p=SUBOPT_P,
                                        beta=preset.beta)
        slopes = {DR: _fit_slope(k, dr_sub.mean(0)),
                  LS: _fit_slope(k, ls_sub.mean(0))}
        panels["subopt"][f"xi{xi:g}"] = {
            "x": k.tolist(),
            "x_label": "episode k",
            "y_label": "AveSubopt(k)",
            "curves": {
                DR: _curve(dr_sub),
                LS: _curve(ls_sub),
                "Theorem 1 bound": _exact(np.asarray(bound["total"])),
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
              xla_backend_optimization_level=_level_name(res.get("opt_level")))
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
