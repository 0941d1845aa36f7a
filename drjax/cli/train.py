"""``drjax train``: one environment, both algorithms, a list of rho values and N seeds."""

import math

from drjax.cli._common import _finite_in
from drjax.cli.reproduce import _add_run_flags, _check_run_flags, _opt_level


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
