"""Command-line interface: ``drjax <command> [options]`` (console script ``drjax``).

Commands (one ``_cmd_<name>`` function and one ``_add_<name>_parser`` each, so more can be
added next to them):

* ``reproduce`` -- every experiment of the paper (Section 6, Appendix A) and the AveSubopt figure:
  results JSON, PNG/PDF figures and ``results.md`` under ``--out``.
* ``train`` -- one environment, both algorithms, a list of rho values and N seeds.
* ``plan`` -- exact robust planning (``drjax.planning.robust_dp``) in the simulated linear MDP of
  Appendix A: the optimal robust value at the initial state and the optimal action at every step
  and state.
* ``bench`` -- the speed benchmarks of ``drjax.bench`` (machine, compile share, scaling).
* ``sweep`` -- agents x a grid of settings x seeds (``drjax.sweeps``): chunked, sharded over
  devices, resumable, tidy tables (Parquet/CSV), summary and figure.

``drjax`` alone prints the help (the commands above) and exits with code 0; ``drjax --version``
prints the distribution name (``drjax-rl``; the import name is ``drjax``), its version and the JAX
and Python versions. Bad flags print one line ``drjax <command>: error: <message>`` on stderr and
exit with code 2.
"""

# Must run before JAX initializes its CPU backend (see drjax/_xla.py, README "CPU hang").
import drjax._xla  # noqa: E402,I001  isort: skip

drjax._xla.configure()

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import sys  # noqa: E402

import numpy as np  # noqa: E402


ENVS = ("linear-mdp",)


class _Parser(argparse.ArgumentParser):
  """``ArgumentParser`` whose errors are a single line on stderr (exit code 2)."""

  def error(self, message):  # noqa: D102
    message = " ".join(str(message).split())
    self.exit(2, f"{self.prog}: error: {message}\n")


# ---------------------------------------------------------------------------------------------
# plan


def _add_plan_parser(sub) -> None:
  p = sub.add_parser(
      "plan",
      help="exact robust planning in the simulated linear MDP",
      description=(
          "Exact robust dynamic programming (TV, d-rectangular; Liu & Xu 2024, Prop. 1 and 3) "
          "in the simulated linear MDP of Appendix A. Without --q the model is the source "
          "domain; with --q it is the target domain with perturbation level q (eq. A.2), and "
          "the same rho is applied around that target (rho = 0: ordinary planning in the "
          "target). Computed in float64."))
  p.add_argument("--env", default="linear-mdp", choices=ENVS, help="environment")
  p.add_argument("--xi-norm", type=float, default=0.1, help="||xi||_1 (default 0.1)")
  p.add_argument("--delta", type=float, default=0.3, help="delta (default 0.3)")
  p.add_argument("--p", type=float, default=0.001, help="source failure probability p")
  p.add_argument("--rho", type=float, default=None,
                 help="rho_{1,4} in [0, 1] (all other rho_{h,i} = 0); default 0")
  p.add_argument("--rho-array", default=None, metavar="JSON",
                 help="full [H, d] rho as a JSON array (instead of --rho)")
  p.add_argument("--q", type=float, default=None,
                 help="plan in the target domain with perturbation level q in [0, 1]")
  p.add_argument("--json", action="store_true", help="print JSON instead of a table")
  p.set_defaults(func=_cmd_plan, parser=p)


def _finite_in(parser, name: str, value, lo: float, hi: float) -> None:
  if value is not None and not (math.isfinite(value) and lo <= value <= hi):
    parser.error(f"{name} must lie in [{lo:g}, {hi:g}], got {value!r}")


def _plan_rho(parser, args, horizon: int, dim: int) -> np.ndarray:
  if args.rho is not None and args.rho_array is not None:
    parser.error("give either --rho or --rho-array, not both")
  if args.rho_array is not None:
    try:
      rho = np.asarray(json.loads(args.rho_array), dtype=np.float64)
    except (ValueError, TypeError) as e:
      parser.error(f"--rho-array must be a JSON array of numbers of shape [{horizon}, {dim}] "
                   f"({e})")
    if rho.shape != (horizon, dim):
      parser.error(f"--rho-array must have shape [H, d] = [{horizon}, {dim}], got "
                   f"{list(rho.shape)}")
    if not np.all(np.isfinite(rho)) or np.any(rho < 0) or np.any(rho > 1):
      parser.error(f"--rho-array entries must lie in [0, 1], got values in "
                   f"[{np.nanmin(rho):g}, {np.nanmax(rho):g}]")
    return rho
  _finite_in(parser, "--rho", args.rho, 0.0, 1.0)
  rho = np.zeros((horizon, dim))
  rho[0, dim - 1] = 0.0 if args.rho is None else args.rho
  return rho


def plan_linear_mdp(*, delta: float, p: float, xi_norm: float, rho: np.ndarray,
                    q: float | None = None) -> dict:
  """Exact robust plan in the linear MDP; the dict the ``plan`` command prints as JSON.

  Args:
    delta, p, xi_norm: the environment (Appendix A); validated by ``LinearMDP.make_params``.
    rho: ``[H, d]`` uncertainty levels.
    q: ``None`` for the source domain, else the target perturbation level.

  Returns:
    dict with ``value`` (``V_1^{*,rho}(x1)``), ``actions`` (``[H][S]`` lists of +-1 entries, or
    ``None`` where all actions tie; ``actions[0]`` is the paper's step 1), ``values``
    (``[H][S]`` optimal robust values ``V_h^{*,rho}(s)``) and ``config``.
  """
  import jax  # pylint: disable=g-import-not-at-top

  from drjax import planning  # pylint: disable=g-import-not-at-top
  from drjax.envs import linear_mdp  # pylint: disable=g-import-not-at-top

  env = linear_mdp.LinearMDP()
  params = env.make_params(delta=delta, p=p, xi_norm=xi_norm, q=q)
  model = env.model(params)
  res = jax.jit(planning.robust_dp)(model, np.asarray(rho, np.float64))
  value = float(planning.initial_value(model, res.v))
  acts = np.asarray(linear_mdp.action_vectors()).astype(int)
  policy, ties, v = np.asarray(res.policy), np.asarray(res.ties), np.asarray(res.v)
  actions = [[None if ties[h, s] else acts[policy[h, s]].tolist()
              for s in range(env.num_states)] for h in range(env.horizon)]
  config = dict(env="linear-mdp", delta=delta, p=p, xi_norm=xi_norm, q=q,
                domain="source" if q is None else "target", rho=np.asarray(rho).tolist(),
                horizon=env.horizon, num_states=env.num_states, feature_dim=env.feature_dim)
  return dict(value=value, actions=actions, values=v[:-1].tolist(), config=config)


def _format_plan(out: dict) -> str:
  cfg = out["config"]
  dom = "source domain" if cfg["q"] is None else f"target domain q={cfg['q']:g}"
  lines = [f"linear-mdp ({dom}; delta={cfg['delta']:g}, p={cfg['p']:g}, "
           f"xi_norm={cfg['xi_norm']:g})",
           "rho (rows h=1..H): " + json.dumps(cfg["rho"]),
           f"optimal robust value V_1*(x1) = {out['value']:.10g}",
           "",
           f"{'h':>2}  {'state':<5}  {'optimal action':<16}  {'V_h*(s)':>12}",
           f"{'--':>2}  {'-----':<5}  {'-' * 16}  {'-' * 12}"]
  for h, (row, vrow) in enumerate(zip(out["actions"], out["values"]), start=1):
    for s, (a, val) in enumerate(zip(row, vrow), start=1):
      txt = "any (all tie)" if a is None else "(" + ",".join(f"{x:+d}" for x in a) + ")"
      lines.append(f"{h:>2}  x{s:<4}  {txt:<16}  {val:>12.8f}")
  return "\n".join(lines)


def _cmd_plan(parser, args) -> int:
  import jax  # pylint: disable=g-import-not-at-top

  jax.config.update("jax_enable_x64", True)  # the command computes in float64
  horizon, dim = 3, 4  # the linear MDP of Appendix A
  rho = _plan_rho(parser, args, horizon, dim)
  _finite_in(parser, "--q", args.q, 0.0, 1.0)
  for name in ("xi_norm", "delta", "p"):
    if not math.isfinite(getattr(args, name)):
      parser.error(f"--{name.replace('_', '-')} must be finite, got {getattr(args, name)!r}")
  try:
    out = plan_linear_mdp(delta=args.delta, p=args.p, xi_norm=args.xi_norm, rho=rho, q=args.q)
  except ValueError as e:
    parser.error(str(e))
  if args.json:
    print(json.dumps(out))
  else:
    print(_format_plan(out))
  return 0


# ---------------------------------------------------------------------------------------------
# reproduce / train / bench

from drjax.paper import (  # noqa: E402  (no JAX import)
    ALL_FIGURES, FIGURES, PRESET_NAMES as PRESETS)


MAX_COUNT = 2**31 - 1  # seeds, episodes, test episodes: int32 indices inside the programs
MAX_SEED = 2**32 - 1  # jax.random.PRNGKey keeps 32 bits without x64 (2**32 would equal seed 0)


def _positive_int(parser, name, value):
  if value is not None and not 1 <= value <= MAX_COUNT:
    parser.error(f"{name} must be an integer in [1, {MAX_COUNT}], got {value}")


def _add_run_flags(p, *, seeds_help):
  p.add_argument("--out", default="results", metavar="DIR",
                 help="output directory (default: results)")
  p.add_argument("--seeds", type=int, default=None, metavar="N", help=seeds_help)
  p.add_argument("--episodes", type=int, default=100, metavar="K",
                 help="training episodes K in the source domain (default: 100)")
  p.add_argument("--preset", default="paper", choices=PRESETS,
                 help="paper: Algorithm 1 and the paper's environment descriptions; notebook: "
                      "the authors' notebook choices (bonus form, LSVI-UCB clipping, put-option "
                      "features and initial price, tie-breaking) (default: paper)")
  p.add_argument("--test-episodes", type=int, default=100, metavar="N",
                 help="Monte Carlo test episodes per seed and target for the put option with "
                      "--evaluation mc (default: 100)")
  p.add_argument("--evaluation", default="exact", choices=("exact", "mc"),
                 help="put option: exact: expected returns on the recombining price lattice, "
                      "averaged exactly over the initial price (no sampling noise); mc: Monte "
                      "Carlo with --test-episodes episodes and common random numbers "
                      "(default: exact)")
  p.add_argument("--seed", type=int, default=0, help="master PRNG seed (default: 0)")
  p.add_argument("--opt-level", default="auto", choices=("auto", "0", "1", "2", "3"),
                 help="XLA (LLVM) optimization level of the compiled programs: 0 compiles ~4x "
                      "faster and runs 1-5x slower; auto: 0 (put option: 1) for small workloads "
                      "(the paper's sizes), XLA's default otherwise (default: auto)")
  p.add_argument("--quiet", action="store_true", help="no progress messages")


def _check_run_flags(parser, args):
  _positive_int(parser, "--seeds", args.seeds)
  _positive_int(parser, "--episodes", args.episodes)
  _positive_int(parser, "--test-episodes", args.test_episodes)
  if not 0 <= args.seed <= MAX_SEED:
    parser.error(f"--seed must be an integer in [0, {MAX_SEED}], got {args.seed}")
  from drjax.paper import reproduce as rep  # pylint: disable=g-import-not-at-top
  try:
    rep.check_out_dir(args.out)
  except ValueError as e:
    parser.error(str(e))


def _add_reproduce_parser(sub) -> None:
  p = sub.add_parser(
      "reproduce", help="regenerate the paper's experiments (figures, results files)",
      description=(
          "Regenerates the experiments of Section 6 and Appendix A. NAMEs: fig1 (simulated "
          "linear MDP, rho_1,4 = 0.5), fig3 (ablation over rho_1,4 in {0.3, 0.4, 0.5}), fig2 "
          "(American put option, rho in {0.3, 0.4, 0.5}), subopt (AveSubopt(k) vs k with the "
          "Theorem 1 bound), sensitivity (exact dV*/drho_1,4 by autodiff and Danskin's closed "
          "form, kinks, the [H, d] sensitivity map, worst-case search; --seeds and --episodes do "
          "not apply), drpvi (the offline DRPVI paper's Figure 2: PEVI, DRPVI, VA-DRPVI on K = "
          "--episodes uniform trajectories, ||xi||_1 x rho_1,4 grid, exact evaluation), r2pvi (the "
          "R2PVI paper's Figure 1(a)-(d): robust regularized agents on the linear MDP and the put "
          "option, exact evaluation, the exact rho <-> weight correspondence), r2pvi-time (the R2PVI "
          "paper's Figure 2: one fit's time against N and d on the put option for PEVI, "
          "R2PVI-TV/-KL, DRPVI, DRVI-L, beside the published seconds and a vectorized NumPy timed "
          "in the same process; 1-2 minutes; not part of all), or all. "
          "Writes DIR/<NAME>/<panel>.json, DIR/<NAME>/<NAME>.png/.pdf "
          "and DIR/results.md; each figure directory is written to a temporary directory and "
          "renamed into place."))
  p.add_argument("names", nargs="*", default=["all"], metavar="NAME",
                 help="figures to run: fig1 fig3 fig2 subopt sensitivity drpvi r2pvi r2pvi-time, or "
                      "all (every figure but r2pvi-time; default: all)")
  _add_run_flags(p, seeds_help="seeds per setting (default: the paper's numbers, 20 for the "
                               "linear MDP and 10 for the put option)")
  p.set_defaults(func=_cmd_reproduce, parser=p)


def _cmd_reproduce(parser, args) -> int:
  names = []
  for n in args.names:
    if n == "all":
      names += list(ALL_FIGURES)
    elif n in FIGURES:
      names.append(n)
    else:
      parser.error(f"unknown figure {n!r}; choose from {', '.join(FIGURES)} or all")
  _check_run_flags(parser, args)
  from drjax.paper import reproduce as rep  # pylint: disable=g-import-not-at-top
  try:
    rep.reproduce(names, out=args.out, seeds=args.seeds, episodes=args.episodes,
                  preset=args.preset, test_episodes=args.test_episodes, seed=args.seed,
                  quiet=args.quiet, evaluation=args.evaluation, opt_level=_opt_level(args))
  except KeyboardInterrupt:
    # Ctrl-C: one line and exit code 130. Every figure directory is written atomically, so each
    # one in --out is either the new complete one or the previous one.
    print(f"drjax reproduce: interrupted; the figure directories in {args.out} are complete "
          "(each the new or the previous one); rerun the command to compute the rest",
          file=sys.stderr, flush=True)
    return 130
  return 0


def _opt_level(args):
  return "auto" if args.opt_level == "auto" else int(args.opt_level)


def _add_train_parser(sub) -> None:
  p = sub.add_parser(
      "train", help="train both algorithms on one environment for a list of rho values",
      description=(
          "Trains LSVI-UCB and DR-LSVI-UCB (one compiled program for all rho values and seeds) "
          "on the source domain and evaluates the final policies on the environment's target "
          "family (linear MDP: exact returns for q in [0, 1]; put option: exact returns on the "
          "price lattice, or Monte Carlo with --evaluation mc, for p_u in [0.15, 0.85]). "
          "Writes DIR/train/<env>_<panel>.json, a figure and DIR/results.md (replacing an "
          "earlier DIR/train)."))
  p.add_argument("--env", default="linear-mdp", choices=("linear-mdp", "put-option"),
                 help="environment (default: linear-mdp)")
  p.add_argument("--rho", type=float, nargs="+", default=[0.5], metavar="RHO",
                 help="uncertainty levels in [0, 1]: rho_1,4 for the linear MDP, every rho_h,i "
                      "for the put option (default: 0.5)")
  p.add_argument("--beta", type=float, default=1.0, help="bonus multiplier beta >= 0 (default 1)")
  p.add_argument("--lam", type=float, default=0.1, help="ridge lambda > 0 (default 0.1)")
  p.add_argument("--xi-norm", type=float, default=None,
                 help="||xi||_1 of the linear MDP, in [0, 0.3] with delta = 0.3 (default 0.1); "
                      "--env linear-mdp only")
  _add_run_flags(p, seeds_help="seeds (default: 20 for the linear MDP, 10 for the put option)")
  # its own default directory: a train run never mixes its results.md with `drjax reproduce`'s
  p.set_defaults(func=_cmd_train, parser=p, out="results-train")
  for a in p._actions:  # pylint: disable=protected-access
    if a.dest == "out":
      a.help = "output directory (default: results-train)"


def _cmd_train(parser, args) -> int:
  for r in args.rho:
    _finite_in(parser, "--rho", r, 0.0, 1.0)
  if not (math.isfinite(args.beta) and args.beta >= 0):
    parser.error(f"--beta must be >= 0, got {args.beta!r}")
  if not (math.isfinite(args.lam) and args.lam > 0):
    parser.error(f"--lam must be > 0, got {args.lam!r}")
  if args.env != "linear-mdp":
    if args.xi_norm is not None:
      parser.error(f"--xi-norm applies to --env linear-mdp only, not {args.env}")
  else:
    if args.evaluation != "exact":
      parser.error("--evaluation mc applies to --env put-option only (the linear MDP is "
                   "evaluated exactly)")
    if "--test-episodes" in getattr(args, "argv", []) or any(
        a.startswith("--test-episodes=") for a in getattr(args, "argv", [])):
      parser.error("--test-episodes applies to --env put-option with --evaluation mc only")
    args.xi_norm = 0.1 if args.xi_norm is None else args.xi_norm
    _finite_in(parser, "--xi-norm", args.xi_norm, 0.0, 0.3)
  _check_run_flags(parser, args)
  from drjax.paper import programs as paper, reproduce as rep  # pylint: disable=g-import-not-at-top
  seeds = args.seeds or paper.DEFAULT_SEEDS[args.env]
  rep.train(env=args.env, out=args.out, rhos=args.rho, seeds=seeds, episodes=args.episodes,
            preset=args.preset, beta=args.beta, lam=args.lam, xi_norm=args.xi_norm,
            test_episodes=args.test_episodes, seed=args.seed, quiet=args.quiet,
            evaluation=args.evaluation, opt_level=_opt_level(args))
  return 0


def _add_bench_parser(sub) -> None:
  p = sub.add_parser(
      "bench", help="run the speed benchmarks",
      description="Speed benchmarks (see benchmarks/README.md): reproduce-all wall time with "
                  "its compile share, seed-sweep scaling, exact vs grid alpha maximization.")
  p.add_argument("--quick", action="store_true", help="smaller sizes (a smoke run)")
  p.add_argument("--full", action="store_true",
                 help="every benchmark at the issue's sizes (longer than the default 3 minutes)")
  p.add_argument("--json", default=None, metavar="FILE", help="also write the results as JSON")
  p.add_argument("--only", nargs="+", default=None, metavar="NAME",
                 help="run only these benchmarks: engine, reproduce_all, seed_scaling, "
                      "alpha_max, hyperparameter_grid, offline (offline: PEVI, DRPVI, VA-DRPVI, "
                      "R2PVI-TV/KL/chi2, DRVI-L fits vs vectorized NumPy; with --full its whole "
                      "grid)")
  p.set_defaults(func=_cmd_bench, parser=p)


def _cmd_bench(parser, args) -> int:
  from drjax.bench import bench  # pylint: disable=g-import-not-at-top  (part of the package)
  if args.only:
    unknown = [n for n in args.only if n not in bench.BENCHMARKS]
    if unknown:
      parser.error(f"--only: unknown benchmark {unknown[0]!r}; choose from "
                   f"{', '.join(bench.BENCHMARKS)}")
  bench.main(quick=args.quick, json_path=args.json, full=args.full, only=args.only)
  return 0


# ---------------------------------------------------------------------------------------------
# sweep

# Agent options of the presets (bonus form, LSVI-UCB clipping, tie-breaking).
SWEEP_PRESETS = {"paper": ("paper", "paper", "optimistic"),
                 "notebook": ("notebook", "notebook", "first")}
# Flags that define the sweep (not allowed with --from / --merge; --resume reads them from
# DIR/sweep.json when none is given).
_CONFIG_FLAGS = ("env", "env_arg", "agents", "seeds", "episodes", "rho", "rho_at", "beta", "lam",
                 "env_param", "targets", "test_episodes", "seed", "preset", "x64", "save_returns",
                 "trajectories", "behavior", "reg_weight", "hparam")
_EXEC_CONFIG_FLAGS = ("chunk", "memory_mb", "seed_ids")  # also allowed with --from
_FIELD_FLAGS = {"env": "--env", "env_args": "--env-arg", "agents": "--agents", "seeds": "--seeds",
                "seed_ids": "--seed-ids", "episodes": "--episodes", "rho": "--rho",
                "rho_at": "--rho-at", "beta": "--beta", "lam": "--lam",
                "env_params": "--env-param", "targets": "--targets",
                "test_episodes": "--test-episodes", "seed": "--seed", "chunk": "--chunk",
                "memory_mb": "--memory-mb", "dtype": "--x64", "devices": "--devices",
                "part": "--part", "out": "--out", "from": "--from", "bonus": "--preset",
                "clip": "--preset", "tie_break": "--preset", "trajectories": "--trajectories",
                "behavior": "--behavior", "reg_weight": "--reg-weight", "hparams": "--hparam",
                "plugins": "--plugin"}


def _sweep_envs():
  from drjax.sweeps.config import env_names  # pylint: disable=g-import-not-at-top
  return env_names()


def _agent_names(kind=None):
  from drjax.agents import registry  # pylint: disable=g-import-not-at-top
  return registry.names(kind)


def _add_sweep_parser(sub) -> None:
  p = sub.add_parser(
      "sweep", help="agents x a grid of settings x seeds: chunked, sharded, resumable, tidy",
      description=(
          "Trains every agent on every setting of the grid (rho x beta x lambda x source "
          "parameters) for every seed, evaluates each final policy on the target family (exact "
          "for finite environments, Monte Carlo with common random numbers otherwise) and "
          "writes DIR/results.parquet (one row per agent x setting x seed x target; "
          "results.csv too with --csv), summary.csv (mean, stderr, count), sweep.json and "
          "sweep.png, streamed while the chunks compute. Chunks are "
          "written atomically as they finish; rerunning the same command resumes (without "
          "--chunk: with the stored chunk layout). Ctrl-C stops with exit code 130 and prints "
          "the command that resumes."))
  g = p.add_argument_group("the sweep (stored in DIR/sweep.json)")
  g.add_argument("--env", default=None, help="linear-mdp, put-option or random "
                                             "(default: linear-mdp)")
  g.add_argument("--env-arg", action="append", default=None, metavar="NAME=VALUE",
                 help="static environment argument, repeatable (put-option: num_anchors, "
                      "horizon, variant; random: num_states, num_actions, feature_dim, horizon)")
  g.add_argument("--agents", nargs="+", default=None, metavar="AGENT",
                 help=f"registered agents: {', '.join(_agent_names())} (default: the online "
                      f"ones, {', '.join(_agent_names('online'))})")
  g.add_argument("--seeds", type=int, default=None, metavar="N", help="seeds (default: 10)")
  g.add_argument("--episodes", type=int, default=None, metavar="K",
                 help="training episodes K (default: 100)")
  g.add_argument("--rho", type=float, nargs="+", default=None, metavar="R",
                 help="rho values in [0, 1], robust agents only (default: 0)")
  g.add_argument("--trajectories", type=int, nargs="+", default=None, metavar="N",
                 help="offline agents: dataset sizes N, a sweep axis (default: 100)")
  g.add_argument("--reg-weight", type=float, nargs="+", default=None, metavar="W",
                 help="regularization weights > 0 of the robust regularized agents (r2pvi-*), "
                      "a sweep axis (default: 0.1)")
  g.add_argument("--hparam", action="append", default=None, metavar="NAME=V1,V2,...",
                 help="sweep any other declared hyperparameter of the agents, repeatable (e.g. "
                      "var_shift=0,1 for va-drpvi, or a plugin agent's own): an axis of the "
                      "agents that declare it; the others ignore it. A declared hyperparameter "
                      "without a default must be given here")
  g.add_argument("--behavior", default=None, metavar="POLICY",
                 help="offline agents' behavior policy: uniform (default) or fixed:A (always "
                      "action A; fixed:1 holds the put option)")
  g.add_argument("--rho-at", nargs="+", default=None, metavar="H,I",
                 help="1-indexed positions (h, i) that get the rho value, e.g. 1,4 for the "
                      "paper's rho_1,4 (default: every position)")
  g.add_argument("--beta", type=float, nargs="+", default=None, metavar="B",
                 help="bonus multipliers >= 0 (default: 1)")
  g.add_argument("--lam", type=float, nargs="+", default=None, metavar="L",
                 help="ridge lambdas > 0 (default: 0.1)")
  g.add_argument("--env-param", action="append", default=None, metavar="NAME=V1,V2,...",
                 help="sweep a source parameter, repeatable (linear-mdp: delta, p, xi_norm; "
                      "put-option: p_u, init_low, init_high; random: instance)")
  g.add_argument("--targets", default=None, metavar="NAME=START:STOP:NUM",
                 help="evaluate on linspace(START, STOP, NUM) targets: q=0:1:21 (linear-mdp), "
                      "p_u=0.15:0.85:29 (put-option); default: evaluate in the source domain")
  g.add_argument("--test-episodes", type=int, default=None, metavar="N",
                 help="Monte Carlo episodes per run and target (put-option; default: 100)")
  g.add_argument("--seed", type=int, default=None, help="base PRNG seed (default: 0)")
  g.add_argument("--preset", default=None, choices=tuple(SWEEP_PRESETS),
                 help="agent options: paper (default) or notebook (bonus form, LSVI-UCB "
                      "clipping, tie-breaking)")
  g.add_argument("--x64", action="store_true", default=None, help="compute in float64")
  g.add_argument("--save-returns", action="store_true", default=None,
                 help="also write every run's training returns (DIR/returns.npy, [runs, K])")
  e = p.add_argument_group("execution")
  e.add_argument("--out", default=None, metavar="DIR", help="output directory (required)")
  e.add_argument("--csv", action="store_true",
                 help="also write DIR/results.csv (the rows of results.parquet, the primary "
                      "output); with parts, give it to --merge")
  e.add_argument("--chunk", type=int, default=None, metavar="C",
                 help="runs per chunk (default: from --memory-mb)")
  e.add_argument("--memory-mb", type=float, default=None, metavar="MB",
                 help="memory budget of one chunk in MiB when --chunk is not given (default: 512 "
                      "on CPU, a quarter of the memory limit of a GPU/TPU)")
  e.add_argument("--devices", type=int, default=None, metavar="N",
                 help="devices to shard over (default: all; on CPU, N host devices, at most the "
                      "number of cores)")
  e.add_argument("--part", default=None, metavar="I/N",
                 help="run only the I-th of N slices of the chunks (job arrays); then --merge")
  e.add_argument("--merge", action="store_true", help="assemble DIR's finished parts")
  e.add_argument("--from", dest="from_", default=None, metavar="SWEEP.JSON",
                 help="rerun the sweep stored in a sweep.json (with --out DIR2)")
  e.add_argument("--seed-ids", nargs="+", default=None, metavar="J",
                 help="run only these seed indices (e.g. 3 17 or 3,17)")
  e.add_argument("--resume", action="store_true",
                 help="continue the sweep stored in DIR/sweep.json (no other sweep flags needed)")
  e.add_argument("--overwrite", action="store_true",
                 help="start over: delete the sweep DIR holds (its chunks and results) first; "
                      "not with --part, --resume or --merge")
  e.add_argument("--quiet", action="store_true", help="no progress bar")
  e.add_argument("--distributed", action="store_true",
                 help="call jax.distributed.initialize() (auto-detected cluster, or the three "
                      "flags below) and shard over every process's devices")
  e.add_argument("--coordinator", default=None, metavar="HOST:PORT")
  e.add_argument("--num-processes", type=int, default=None, metavar="N")
  e.add_argument("--process-id", type=int, default=None, metavar="I")
  p.set_defaults(func=_cmd_sweep, parser=p)


def _name_values(parser, flag, items, *, single=False) -> dict:
  out = {}
  for item in items or ():
    name, sep, vals = item.partition("=")
    if not sep or not name or not vals:
      parser.error(f"{flag} must look like NAME=" + ("VALUE" if single else "V1,V2,...") +
                   f", got {item!r}")
    if name in out:
      parser.error(f"{flag}: {name!r} given twice")
    out[name] = vals
  return out


def _sweep_config_kwargs(parser, args) -> dict:
  """SweepConfig keyword arguments from the flags that were given (plain parsing, no JAX)."""
  kw = {}
  if args.env is not None:
    if args.env not in _sweep_envs():
      parser.error(f"--env: unknown environment {args.env!r}; choose from "
                   f"{', '.join(_sweep_envs())}")
    kw["env"] = args.env
  if args.env_arg is not None:
    env_args = {}
    for k, v in _name_values(parser, "--env-arg", args.env_arg, single=True).items():
      try:
        env_args[k] = int(v)
      except ValueError:
        env_args[k] = v
    kw["env_args"] = env_args
  if args.agents is not None:
    for a in args.agents:
      if a not in _agent_names():
        parser.error(f"--agents: unknown agent {a!r}; registered agents: "
                     f"{', '.join(_agent_names())}")
    kw["agents"] = tuple(args.agents)
  if args.trajectories is not None:
    for n in args.trajectories:
      _positive_int(parser, "--trajectories", n)
    kw["trajectories"] = tuple(args.trajectories)
  if args.behavior is not None:
    kw["behavior"] = args.behavior
  if args.reg_weight is not None:
    kw["reg_weight"] = tuple(args.reg_weight)
  if args.hparam is not None:
    hparams = {}
    for k, v in _name_values(parser, "--hparam", args.hparam).items():
      try:
        hparams[k] = tuple(float(x) for x in v.split(","))
      except ValueError:
        parser.error(f"--hparam {k}: values must be numbers separated by commas, got {v!r}")
    kw["hparams"] = hparams
  if kw and args.plugin:  # recorded in sweep.json: --resume and --merge load them again
    from drjax import plugins  # pylint: disable=g-import-not-at-top
    kw["plugins"] = tuple(plugins.resolve(x) for x in args.plugin)
  for name in ("seeds", "episodes", "test_episodes"):
    v = getattr(args, name)
    if v is not None:
      _positive_int(parser, "--" + name.replace("_", "-"), v)
      kw[name] = v
  if args.seed is not None:
    if not 0 <= args.seed < 2**31:
      parser.error(f"--seed must be an integer in [0, 2^31), got {args.seed}")
    kw["seed"] = args.seed
  for name in ("rho", "beta", "lam"):
    if getattr(args, name) is not None:
      kw[name] = tuple(getattr(args, name))
  if args.rho_at is not None:
    pos = []
    for item in args.rho_at:
      try:
        h, i = (int(x) for x in item.split(","))
      except ValueError:
        parser.error(f"--rho-at positions must look like H,I (1-indexed integers), got {item!r}")
      pos.append((h - 1, i - 1))
    kw["rho_at"] = tuple(pos)
  if args.env_param is not None:
    env_params = {}
    for k, v in _name_values(parser, "--env-param", args.env_param).items():
      try:
        env_params[k] = tuple(float(x) for x in v.split(","))
      except ValueError:
        parser.error(f"--env-param {k}: values must be numbers separated by commas, got {v!r}")
    kw["env_params"] = env_params
  if args.targets is not None:
    name, sep, rng = args.targets.partition("=")
    parts = rng.split(":")
    try:
      if not sep or len(parts) != 3:
        raise ValueError
      kw["targets"] = (name, float(parts[0]), float(parts[1]), int(parts[2]))
    except ValueError:
      parser.error(f"--targets must look like NAME=START:STOP:NUM (e.g. q=0:1:21), got "
                   f"{args.targets!r}")
  if args.preset is not None:
    kw["bonus"], kw["clip"], kw["tie_break"] = SWEEP_PRESETS[args.preset]
  if args.x64:
    kw["dtype"] = "float64"
  if args.save_returns:
    kw["save_returns"] = True
  return kw


def _sweep_exec_kwargs(parser, args) -> dict:
  kw = {}
  if args.chunk is not None:
    if args.chunk < 1:
      parser.error(f"--chunk must be a positive integer, got {args.chunk}")
    kw["chunk"] = args.chunk
  if args.memory_mb is not None:
    if not (math.isfinite(args.memory_mb) and args.memory_mb > 0):
      parser.error(f"--memory-mb must be > 0, got {args.memory_mb!r}")
    kw["memory_mb"] = args.memory_mb
  if args.seed_ids is not None:
    ids = []
    for item in args.seed_ids:
      for x in item.split(","):
        try:
          ids.append(int(x))
        except ValueError:
          parser.error(f"--seed-ids must be integers (e.g. 3 17 or 3,17), got {item!r}")
    kw["seed_ids"] = tuple(ids)
  return kw


def _set_host_devices(n: int) -> None:
  """Before JAX starts: N host (CPU) devices in XLA_FLAGS, replacing any earlier count."""
  import os  # pylint: disable=g-import-not-at-top

  flags = [f for f in os.environ.get("XLA_FLAGS", "").split()
           if not f.startswith("--xla_force_host_platform_device_count")]
  os.environ["XLA_FLAGS"] = " ".join(flags + [f"--xla_force_host_platform_device_count={n}"])


def _cmd_sweep(parser, args) -> int:
  import os  # pylint: disable=g-import-not-at-top

  given = [f for f in _CONFIG_FLAGS if getattr(args, f) is not None]
  flag = lambda f: "--" + f.replace("_", "-")  # noqa: E731
  if args.out is None:
    parser.error("--out DIR is required")
  modes = [m for m, on in (("--merge", args.merge), ("--from", args.from_ is not None),
                           ("--resume", args.resume and not given)) if on]
  if len(modes) > 1:
    parser.error(f"give only one of {', '.join(modes)}")
  if (args.merge or args.from_ is not None) and given:
    parser.error(f"{modes[0]}: the sweep comes from a sweep.json; do not combine it with "
                 f"{', '.join(flag(f) for f in given)}")
  if args.merge and (args.part or _sweep_exec_kwargs(parser, args)):
    parser.error("--merge takes only --out (and --csv, --quiet)")
  if args.csv and args.part is not None:
    parser.error("--csv: the final files of a sweep run in parts are written by --merge; give "
                 "--csv to --merge, not to --part")
  if args.overwrite:
    for other, on in (("--merge", args.merge), ("--resume", args.resume),
                      ("--part", args.part is not None)):
      if on:
        parser.error(f"--overwrite starts the sweep over; it cannot be combined with {other}" + (
            " (each part would delete the others' chunks: clear DIR once before the parts)"
            if other == "--part" else ""))
  part = None
  if args.part is not None:
    try:
      i, n = (int(x) for x in args.part.split("/"))
      if not 1 <= i <= n:
        raise ValueError
    except ValueError:
      parser.error(f"--part must be I/N with integers 1 <= I <= N, got {args.part!r}")
    part = (i, n)
  if args.devices is not None:
    if args.devices < 1:
      parser.error(f"--devices must be a positive integer, got {args.devices}")
    _set_host_devices(args.devices)  # before JAX starts; affects only the CPU platform
  dist = (args.coordinator, args.num_processes, args.process_id)
  if any(x is not None for x in dist) and not args.distributed:
    parser.error("--coordinator/--num-processes/--process-id need --distributed")
  config_kw = _sweep_config_kwargs(parser, args)
  exec_kw = _sweep_exec_kwargs(parser, args)
  # JAX starts here.
  import jax  # pylint: disable=g-import-not-at-top

  if args.distributed:
    try:
      jax.config.update("jax_cpu_collectives_implementation", "gloo")
      kw = {k: v for k, v in zip(("coordinator_address", "num_processes", "process_id"), dist)
            if v is not None}
      jax.distributed.initialize(**kw)
    except (RuntimeError, ValueError) as e:
      parser.error(f"--distributed: {' '.join(str(e).split())}")
  enable_compilation_cache()
  from drjax import sweeps  # pylint: disable=g-import-not-at-top

  def fail(e):
    field = getattr(e, "field", "")
    name = _FIELD_FLAGS.get(field.split(" ")[0], field)
    parser.error(f"{name}: {getattr(e, 'detail', str(e))}" if name else str(e))

  if args.devices is not None and jax.default_backend() == "cpu":
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    if args.devices > cores:
      parser.error(f"--devices: {args.devices} CPU devices requested but only {cores} cores are "
                   "available")
  command = ["drjax"] + list(args.argv)
  try:
    return _run_sweep(parser, args, sweeps, jax, given, config_kw, exec_kw, part, command, fail)
  except KeyboardInterrupt as e:
    # Ctrl-C: one line (what is saved, the command that resumes), exit code 130; every file is
    # written atomically, so nothing is half-written.
    print(_interrupted_message(args, part, e), file=sys.stderr, flush=True)
    return 130


def _interrupted_message(args, part, e) -> str:
  import shlex  # pylint: disable=g-import-not-at-top

  saved = getattr(e, "saved", None)
  if saved is None:
    return "drjax sweep: interrupted before the sweep started; nothing was written"
  if args.merge:
    return (f"drjax sweep: interrupted while merging {args.out} (its chunks are intact); resume "
            f"with: {shlex.join(['drjax', 'sweep', '--merge', '--out', args.out] + (['--csv'] if args.csv else []))}")
  resume = ["drjax", "sweep", "--resume", "--out", args.out]
  if part is not None:
    resume += ["--part", f"{part[0]}/{part[1]}"]
  if args.devices is not None:
    resume += ["--devices", str(args.devices)]
  if args.csv:
    resume += ["--csv"]
  if args.distributed:
    return (f"drjax sweep: interrupted; {saved} of {e.total} chunks saved in {args.out}; rerun "
            "the same command on every process to resume")
  return (f"drjax sweep: interrupted; {saved} of {e.total} chunks saved in {args.out}; resume "
          f"with: {shlex.join(resume)}")


def _run_sweep(parser, args, sweeps, jax, given, config_kw, exec_kw, part, command, fail) -> int:
  import os  # pylint: disable=g-import-not-at-top

  try:
    if args.merge:
      if os.path.isfile(os.path.join(args.out, "sweep.json")):
        stored = sweeps.load_config(args.out)
        jax.config.update("jax_enable_x64", stored.dtype == "float64")
      sweeps.merge(args.out, quiet=args.quiet, command=command, csv=args.csv)
      return 0
    if args.from_ is not None:
      base = sweeps.load_config(args.from_).to_dict()
    elif args.resume and not given:
      if not os.path.isfile(os.path.join(args.out, "sweep.json")):
        parser.error(f"--resume: {args.out!r} holds no sweep.json to resume")
      base = sweeps.load_config(args.out).to_dict()
    else:
      base = {}
    cfg = dict(base, **config_kw, **exec_kw)
    cfg.setdefault("dtype", "float32")  # the command computes in float32 unless --x64
    jax.config.update("jax_enable_x64", cfg["dtype"] == "float64")
    config = sweeps.SweepConfig.from_dict(cfg)
    sweeps.run(config, out=args.out, devices=args.devices, part=part, overwrite=args.overwrite,
               quiet=args.quiet, command=command, csv=args.csv)
  except ValueError as e:
    if not hasattr(e, "field"):
      raise
    fail(e)
  return 0


# ---------------------------------------------------------------------------------------------
# entry point


DISTRIBUTION = "drjax-rl"  # the pip name (pyproject.toml); PyPI's `drjax` is Google's DrJAX


def version_string() -> str:
  """What ``drjax --version`` prints: the pip name and version, the import name, JAX and Python."""
  import platform  # pylint: disable=g-import-not-at-top
  from importlib import metadata  # pylint: disable=g-import-not-at-top

  import drjax  # pylint: disable=g-import-not-at-top

  def installed(name):
    try:
      return metadata.version(name)
    except metadata.PackageNotFoundError:
      return "not installed"

  return (f"{DISTRIBUTION} {drjax.__version__} (import name drjax; jax {installed('jax')}, "
          f"jaxlib {installed('jaxlib')}, Python {platform.python_version()})")


class _VersionAction(argparse.Action):
  """``--version``: prints ``version_string()`` unwrapped (argparse's own action wraps it)."""

  def __call__(self, parser, namespace, values, option_string=None):
    print(version_string())
    parser.exit(0)


def build_parser() -> argparse.ArgumentParser:
  """The top-level parser with one subparser per command."""
  parser = _Parser(prog="drjax", description="Distributionally robust off-dynamics RL in JAX "
                   "(DR-LSVI-UCB, Liu & Xu, AISTATS 2024).",
                   epilog="Run 'drjax <command> --help' for a command's options.")
  parser.add_argument("--version", action=_VersionAction, nargs=0,
                      help="print the distribution name (drjax-rl), its version, and the JAX "
                           "and Python versions, and exit")
  sub = parser.add_subparsers(dest="command", metavar="command", parser_class=_Parser)
  sub.required = True
  _add_reproduce_parser(sub)
  _add_train_parser(sub)
  _add_plan_parser(sub)
  _add_bench_parser(sub)
  _add_sweep_parser(sub)
  for p in sub.choices.values():
    p.add_argument("--plugin", action="append", default=None, metavar="MODULE_OR_FILE",
                   help="load a plugin first (a module name or a .py file that registers agents "
                        "or environments; repeatable; drjax sweep records it in sweep.json)")
  return parser


def _plugin_args(argv) -> list[str]:
  """The values of ``--plugin X`` / ``--plugin=X`` in ``argv`` (before parsing: a plugin's
  agents must be registered when the parser lists and checks agent names)."""
  out = []
  for i, a in enumerate(argv):
    if a == "--plugin" and i + 1 < len(argv):
      out.append(argv[i + 1])
    elif a.startswith("--plugin="):
      out.append(a.split("=", 1)[1])
  return out


def _load_plugins(argv) -> None:
  specs = _plugin_args(argv)
  if not specs:
    return
  from drjax import plugins  # pylint: disable=g-import-not-at-top
  for spec in specs:
    try:
      plugins.load(spec)
    except (plugins.PluginError, TypeError) as e:
      print(f"drjax: error: --plugin: {e}", file=sys.stderr)
      raise SystemExit(2) from None


def enable_compilation_cache() -> str | None:
  """Turns on JAX's persistent compilation cache for the commands (a second run skips compiling).

  Directory: ``$DRJAX_CACHE_DIR``, else ``~/.cache/drjax/jax``. ``DRJAX_NO_CACHE=1`` disables it
  (the benchmarks do, to measure cold starts). Returns the directory, or None when disabled.
  """
  import os  # pylint: disable=g-import-not-at-top

  if os.environ.get("DRJAX_NO_CACHE"):
    return None
  path = os.environ.get("DRJAX_CACHE_DIR") or os.path.join(
      os.path.expanduser("~"), ".cache", "drjax", "jax")
  try:
    os.makedirs(path, exist_ok=True)
  except OSError:
    return None
  import jax  # pylint: disable=g-import-not-at-top

  jax.config.update("jax_compilation_cache_dir", path)
  jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
  return path


def main(argv=None) -> int:
  """Entry point of the ``drjax`` console script; returns the exit code (errors: SystemExit 2).

  ``drjax`` with no arguments prints the help (the list of commands) on stdout and returns 0;
  ``drjax --version`` prints the distribution name and version and exits with 0.
  """
  argv = sys.argv[1:] if argv is None else list(argv)
  _load_plugins(argv)
  parser = build_parser()
  if not argv:
    parser.print_help()
    return 0
  args = parser.parse_args(argv)
  args.argv = argv
  if args.command in ("reproduce", "train"):
    enable_compilation_cache()
  return args.func(args.parser, args)


def console_main() -> None:
  """The ``drjax`` console script (and ``python -m drjax.cli``): ``sys.exit(main())``."""
  sys.exit(main())


if __name__ == "__main__":
  console_main()
