"""``drjax bench``: the speed benchmarks of ``drjax.bench`` (machine, compile share, scaling)."""


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
                      "grid), first_result (import, --help, small sweeps and reproduce all cold: "
                      "per program its size and trace / lower / XLA seconds)")
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
