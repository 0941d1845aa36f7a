#!/usr/bin/env python
"""Runs drjax's speed benchmarks: ``python benchmarks/run.py [--quick] [--json FILE] [--only ...]``.

The same as ``drjax bench [--quick] [--json FILE]``; see benchmarks/README.md and
drjax/bench/bench.py.
"""

from __future__ import annotations

import argparse
import os
import sys

# Run from a checkout without installing: make the repository root importable.
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _ROOT not in sys.path:
  sys.path.insert(0, _ROOT)

from drjax.bench import bench  # noqa: E402  (sets drjax's XLA flags before JAX starts)


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description="drjax speed benchmarks (see benchmarks/README.md)")
  ap.add_argument("--quick", action="store_true", help="smaller sizes (a smoke run)")
  ap.add_argument("--full", action="store_true", help="every benchmark at full size")
  ap.add_argument("--json", default=None, metavar="FILE", help="also write the results as JSON")
  ap.add_argument("--only", nargs="+", default=None, choices=list(bench.BENCHMARKS),
                  metavar="NAME", help=f"run only these ({', '.join(bench.BENCHMARKS)})")
  ap.add_argument("--quiet-wait", type=float, default=None, metavar="S",
                  help="before each benchmark wait up to S seconds for other processes to use "
                       "less than half a core (default: 120, quick: 0)")
  args = ap.parse_args(argv)
  bench.main(quick=args.quick, json_path=args.json, only=args.only, quiet_wait_s=args.quiet_wait,
             full=args.full)
  return 0


if __name__ == "__main__":
  sys.exit(main())
