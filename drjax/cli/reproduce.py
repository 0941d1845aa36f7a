"""``drjax reproduce``: every experiment of the paper (Section 6, Appendix A) and the AveSubopt
figure: results JSON, PNG/PDF figures and ``results.md`` under ``--out``. Also the run flags that
``drjax train`` shares (``_add_run_flags``, ``_check_run_flags``, ``_opt_level``)."""

import sys

from drjax.cli._common import MAX_SEED, _positive_int
from drjax.paper import (ALL_FIGURES, DIMENSION_GRIDS, FIGURES,  # (no JAX import)
                         PRESET_NAMES as PRESETS)


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
          "in the same process; 1-2 minutes; not part of all), dimension (the paper's open "
          "question: the d-rectangular and elliptical bonus sums, exact AveSubopt, switches and "
          "dual calls of DR-LSVI-UCB, LSVI-UCB and we-drive-u on random DRMDPs against d and K, "
          "with fitted exponents; --grid; minutes; not part of all), shifts (gymnax CartPole: pole "
          "length, gravity, force; and the ledge: wind; online agents tuned on the source, offline "
          "agents, baselines and rho = 0 controls, return against the physics shift with 95% bands "
          "over 16 seeds; --grid; minutes; not part of all), or all. "
          "Writes DIR/<NAME>/<panel>.json, DIR/<NAME>/<NAME>.png/.pdf "
          "and DIR/results.md; each figure directory is written to a temporary directory and "
          "renamed into place."))
  p.add_argument("names", nargs="*", default=["all"], metavar="NAME",
                 help="figures to run: fig1 fig3 fig2 subopt sensitivity drpvi r2pvi r2pvi-time "
                      "dimension shifts, or all (every figure but r2pvi-time, dimension and "
                      "shifts; default: all)")
  _add_run_flags(p, seeds_help="seeds per setting (default: the paper's numbers, 20 for the "
                               "linear MDP and 10 for the put option)")
  p.add_argument("--grid", default="default", choices=DIMENSION_GRIDS,
                 help="dimension study: default (d 4-128, K 2000; 15 minutes on 2 loaded CPU "
                      "cores), quick (d 4-64, K 1000; 4 minutes), full (d 4-256, K 10^4, more "
                      "instances: a GPU job) or smoke (default: default); shifts study: default "
                      "(16 seeds), quick (8 seeds, fewer targets, half K and N), full (80 seeds, "
                      "3x K and N: a GPU job) or smoke")
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
                  quiet=args.quiet, evaluation=args.evaluation, opt_level=_opt_level(args),
                  grid=args.grid)
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
