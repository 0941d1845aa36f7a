"""Where the test suite's compile time goes, by program: a pytest plugin and its report.

The plugin listens to JAX's own timing log (``jax._src.dispatch``: "Finished XLA compilation of
jit(NAME) in T sec", "Finished jaxpr to MLIR module conversion ...") in every pytest process and
writes, per process, the lowering and XLA seconds and counts by program name and by test file.
Programs compiled in subprocesses (the CLI, notebook and README tests) are not seen.

  python -m pytest -q -p suite_programs -p no:cacheprovider   # with benchmarks/ on PYTHONPATH
  python benchmarks/suite_programs.py --json FILE              # merge the processes' files

(``PYTHONPATH=benchmarks``; the per-process files go to ``$SUITE_PROGRAMS_DIR``, default
``/tmp/suite-programs``.) The report: totals, the programs costing 30 ms or more each against the
rest, the costliest program names and test files.
"""

from __future__ import annotations

import argparse
import collections
import glob
import json
import logging
import os
import re
import sys
import time

_PAT = re.compile(r"Finished (XLA compilation of|jaxpr to MLIR module conversion) (.*?) in "
                  r"([0-9.e-]+) sec")
_DIR = os.environ.get("SUITE_PROGRAMS_DIR", "/tmp/suite-programs")
_TEST = {"id": "?"}
_BY_FILE = collections.defaultdict(collections.Counter)
_BY_NAME = collections.defaultdict(collections.Counter)
CHEAP_S = 0.03


class _Handler(logging.Handler):
  def emit(self, record):
    m = _PAT.search(record.getMessage())
    if m:
      kind = "xla" if m.group(1).startswith("XLA") else "lower"
      t = float(m.group(3))
      for table, key in ((_BY_FILE, _TEST["id"].split("::")[0]), (_BY_NAME, m.group(2))):
        table[key][kind + "_s"] += t
        table[key][kind + "_n"] += 1


def pytest_configure(config):
  del config
  log = logging.getLogger("jax._src.dispatch")
  log.setLevel(logging.DEBUG)
  log.addHandler(_Handler())
  log.propagate = False


def pytest_runtest_setup(item):
  _TEST["id"] = item.nodeid


def pytest_unconfigure(config):
  del config
  os.makedirs(_DIR, exist_ok=True)
  worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
  with open(os.path.join(_DIR, f"{worker}.json"), "w", encoding="utf-8") as f:
    json.dump({"by_file": _BY_FILE, "by_name": _BY_NAME}, f)


def _cost(v):
  return v["xla_s"] + v["lower_s"]


def main(argv=None) -> int:
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  p.add_argument("--json", required=True)
  p.add_argument("--dir", default=_DIR)
  p.add_argument("--top", type=int, default=25)
  a = p.parse_args(argv)
  files = sorted(glob.glob(os.path.join(a.dir, "*.json")))
  if not files:
    p.error(f"--dir: no per-process files in {a.dir} (run the suite with -p suite_programs)")
  by_file, by_name = collections.defaultdict(collections.Counter), collections.defaultdict(
      collections.Counter)
  for path in files:
    with open(path, encoding="utf-8") as f:
      d = json.load(f)
    for table, part in ((by_file, d["by_file"]), (by_name, d["by_name"])):
      for k, v in part.items():
        table[k].update(v)
  total = collections.Counter()
  for v in by_name.values():
    total.update(v)
  cheap = [v for v in by_name.values() if _cost(v) / max(v["xla_n"], 1) < CHEAP_S]
  rnd = lambda x: round(x, 2)  # noqa: E731
  sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  from drjax.bench import machine  # pylint: disable=g-import-not-at-top
  res = {
      "what": "lowering and XLA compile seconds of the test suite's in-process programs",
      "total": {k: rnd(v) for k, v in total.items()},
      "cheap_programs": {"under_s_each": CHEAP_S, "programs": sum(v["xla_n"] for v in cheap),
                         "seconds": rnd(sum(_cost(v) for v in cheap))},
      "by_name": [[k, v["xla_n"], rnd(_cost(v))] for k, v in
                  sorted(by_name.items(), key=lambda kv: -_cost(kv[1]))[:a.top]],
      "by_file": [[k, v["xla_n"], rnd(_cost(v))] for k, v in
                  sorted(by_file.items(), key=lambda kv: -_cost(kv[1]))[:a.top]],
      "processes": len(files), "machine": machine.machine_info(), **machine.source_info(),
      "created": time.strftime("%Y-%m-%d %H:%M:%S %z")}
  with open(a.json, "w", encoding="utf-8") as f:
    json.dump(res, f, indent=1)
  print(json.dumps({k: res[k] for k in ("total", "cheap_programs")}))
  return 0


if __name__ == "__main__":
  raise SystemExit(main())
