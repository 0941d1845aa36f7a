"""The README's test command, timed (issue 35's goal: under 5 minutes on two quiet cores).

Runs ``python -m pytest -q`` (the second Quickstart command, without its ``pip install``) in the
repository, once, with ``--durations=0`` and a plugin (``drjax.bench._suite_events``) that counts
what JAX does in each pytest process: the programs XLA compiled and its seconds, and the seconds
spent tracing to jaxprs and lowering to StableHLO (``jax.monitoring`` events). Commands that the
tests start in a fresh interpreter (the command-line tests, the notebooks, the docs' code blocks)
are not counted there; their time is part of their tests' durations.

Writes ``{"machine", "source", "command", "wall_s", "summary", "failed", "passed", "test_s", "by_file",
"jax", "load_start", "load_end", "created"}``: ``test_s`` is the sum of every test's setup, call
and teardown durations over the workers (``pytest-xdist``'s two by default), ``by_file`` the
files with the largest sums.

Run: ``python -m drjax.bench.suite_time --json benchmarks/results/<machine>-test-suite.json``
(about 8-11 minutes on two cores). The docs' time-to-first-result table shows its row.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

COMMAND = ["-m", "pytest", "-q"]  # the README's test command, after its `pip install`
EXTRA = ["--durations=0", "-p", "drjax.bench._suite_events", "-p", "no:cacheprovider"]
_DURATION = re.compile(r"^([\d.]+)s (setup|call|teardown)\s+(\S+?\.py)::")
_SUMMARY = re.compile(r"^=*\s*((?:\d+ failed, )?\d+ passed.*) in ([\d.]+)s")


def parse_durations(text: str, top: int = 12) -> tuple[float, list]:
  """``(sum of every reported duration, [(file, seconds)] largest first)`` from ``pytest
  --durations=0`` output (pytest leaves out durations under 5 ms)."""
  secs = collections.Counter()
  for line in text.splitlines():
    m = _DURATION.match(line)
    if m:
      secs[m.group(3)] += float(m.group(1))
  rows = [(f, round(s, 2)) for f, s in secs.most_common(top)]
  return round(sum(secs.values()), 2), rows


def parse_summary(text: str) -> tuple[str | None, int | None]:
  """pytest's last summary line (``"4715 passed, 94 warnings"``, ``"1 failed, 4714 passed"``) and
  the number passed."""
  for line in reversed(text.splitlines()):
    m = _SUMMARY.match(line.strip())
    if m:
      return m.group(1), int(re.search(r"(\d+) passed", m.group(1)).group(1))
  return None, None


def merge_events(paths) -> dict:
  """The per-process event files of ``_suite_events``, summed."""
  tot = collections.Counter()
  for p in paths:
    with open(p) as f:
      for k, v in json.load(f).items():
        tot[k] += v
  return {k: round(v, 2) if isinstance(v, float) else v for k, v in sorted(tot.items())}


def _sigint_default() -> None:
  signal.signal(signal.SIGINT, signal.SIG_DFL)


def child_options() -> dict:
  """How the test command is started: as at a terminal, with SIGINT at its default action. A
  command started in the background (``cmd &``) inherits SIGINT ignored, and Python then raises
  no ``KeyboardInterrupt``: the tests of Ctrl-C (``test_sweeps_interrupt.py``,
  ``test_reproduce_interrupt.py``) fail there and nowhere else."""
  return {"preexec_fn": _sigint_default} if os.name == "posix" else {}


def run(repo: str) -> dict:
  from drjax.bench.machine import machine_info, source_info  # pylint: disable=g-import-not-at-top
  with tempfile.TemporaryDirectory(prefix="drjax-suite-events-") as events:
    env = dict(os.environ, DRJAX_SUITE_EVENTS_DIR=events)
    load_start = list(os.getloadavg())
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable] + COMMAND + EXTRA, cwd=repo, env=env,
                          capture_output=True, text=True, check=False, **child_options())
    wall = time.perf_counter() - t0
    load_end = list(os.getloadavg())
    jax_events = merge_events(os.path.join(events, f) for f in sorted(os.listdir(events)))
  out = proc.stdout + proc.stderr
  summary, passed = parse_summary(out)
  test_s, by_file = parse_durations(out)
  return {"machine": machine_info(), "source": source_info(),
          "command": "python " + " ".join(COMMAND), "extra_options": EXTRA,
          "returncode": proc.returncode, "wall_s": round(wall, 1), "summary": summary,
          "failed": [line for line in out.splitlines() if line.startswith(("FAILED", "ERROR"))],
          "passed": passed, "test_s": test_s, "by_file": by_file, "jax": jax_events,
          "load_start": [round(x, 2) for x in load_start],
          "load_end": [round(x, 2) for x in load_end],
          "created": time.strftime("%Y-%m-%d %H:%M:%S +0000", time.gmtime())}


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(prog="python -m drjax.bench.suite_time", description=__doc__)
  ap.add_argument("--json", required=True, help="where to write the result")
  ap.add_argument("--repo", default=os.path.dirname(os.path.dirname(os.path.dirname(
      os.path.abspath(__file__)))), help="the repository to test (default: this checkout)")
  args = ap.parse_args(argv)
  if not os.path.isdir(os.path.join(args.repo, "tests")):
    ap.error(f"--repo must be a drjax checkout with a tests/ folder, got {args.repo!r}")
  res = run(args.repo)
  from drjax import _io  # pylint: disable=g-import-not-at-top
  _io.atomic_write(args.json, json.dumps(res, indent=1))
  print(json.dumps({k: res[k] for k in ("wall_s", "summary", "test_s", "jax")}))
  return 0 if res["returncode"] == 0 else 1


if __name__ == "__main__":
  sys.exit(main())
