"""Time to first result: how long a small experiment waits, and where the wait goes (issue 35).

Every command runs cold in a fresh process, without any compilation cache, ``repeats`` times;
the median of each figure is kept:

* ``import drjax``, ``drjax --help`` and ``drjax sweep --help``: wall and CPU seconds of the
  process (Python's start-up included);
* a small sweep of each agent family (``drjax sweep``: DR-LSVI-UCB on the linear MDP, 4 seeds x
  50 episodes; DRPVI on 50 trajectories; DR-LSVI-UCB on the put option) and ``drjax reproduce
  all``: wall and CPU seconds of the command, and for each compiled program its size (the
  operations of the StableHLO module JAX hands to XLA, each function counted once) and the
  seconds spent tracing it to a jaxpr, lowering it to StableHLO and compiling it with XLA
  (``jax.monitoring`` events; CPU seconds: tracing's and lowering's of the thread that did them,
  XLA's of the process less the other Python threads', and the wall seconds).
  A program's run time is part of the command's remainder (``other``: running, host work,
  files and figures).

``checkouts``: the source trees to measure (each put first on ``PYTHONPATH``; ``None``: the
installed drjax), interleaved, so that the code before and after a change is measured in one
sitting. The child
process only uses ``drjax.cli.main`` and ``jax.monitoring``, so any version of drjax runs in it.

Run: ``drjax bench --only first_result`` (``--quick``: one repeat, no ``reproduce all``), or
``python -m drjax.bench.first_result --checkout before=DIR --checkout after= --json FILE``.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

# The commands, by key: (what, argv after `drjax`). `--out` is added to the sweeps and reproduce.
COMMANDS = {
    "sweep-online": ("DR-LSVI-UCB on the linear MDP, 4 seeds x 50 episodes",
                     ["sweep", "--env", "linear-mdp", "--agents", "dr-lsvi-ucb", "--seeds", "4",
                      "--episodes", "50", "--quiet"]),
    "sweep-offline": ("DRPVI on the linear MDP, 50 trajectories x 4 seeds",
                      ["sweep", "--env", "linear-mdp", "--agents", "drpvi", "--trajectories",
                       "50", "--seeds", "4", "--quiet"]),
    "sweep-put": ("DR-LSVI-UCB on the put option, 4 seeds x 50 episodes",
                  ["sweep", "--env", "put-option", "--agents", "dr-lsvi-ucb", "--seeds", "4",
                   "--episodes", "50", "--quiet"]),
    "reproduce-all": ("drjax reproduce all (every figure of the papers)",
                      ["reproduce", "all", "--quiet"]),
}
STARTUP = {
    "import": ("python -c 'import drjax'", ["-c", "import drjax"]),
    "help": ("drjax --help", ["-m", "drjax.cli", "--help"]),
    "sweep-help": ("drjax sweep --help", ["-m", "drjax.cli", "sweep", "--help"]),
}
QUICK_COMMANDS = ("sweep-online", "sweep-offline", "sweep-put")

# The child: runs `drjax <argv>` and writes, per program, its trace / lower / XLA seconds (the
# outermost events only: a trace inside a lowering, e.g. of a random-number primitive, is the
# lowering's) with the CPU seconds of the thread.
_CHILD = r"""
import json, os, sys, threading, time
out_path, argv = sys.argv[1], sys.argv[2:]
t0 = time.perf_counter(); c0 = time.process_time()
import jax
t_jax = time.perf_counter() - t0
events, local = [], threading.local()
TICK = os.sysconf("SC_CLK_TCK")
def others_cpu():
  # CPU seconds of the other Python threads (the host thread of a sweep): XLA compiles in threads
  # of its own, so a compilation's CPU is the process's less the other Python threads' and ours.
  me, total = threading.get_native_id(), 0.0
  for t in threading.enumerate():
    if t.native_id and t.native_id != me:
      try:
        f = open(f"/proc/self/task/{t.native_id}/stat").read().rsplit(")", 1)[1].split()
        total += (int(f[11]) + int(f[12])) / TICK
      except (OSError, IndexError, ValueError):
        pass
  return total
def stamp():
  return (time.thread_time(), time.process_time(), others_cpu())
KINDS = {"/jax/core/compile/jaxpr_trace_duration": "trace",
         "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower",
         "/jax/core/compile/backend_compile_duration": "xla"}
def on_start(event, value, **kw):
  if event in KINDS:
    stack = getattr(local, "stack", None)
    if stack is None:
      stack = local.stack = []
    stack.append(stamp())
def on_end(event, secs, **kw):
  if event not in KINDS:
    return
  stack = getattr(local, "stack", None) or [stamp()]
  (t0, p0, o0), (t1, p1, o1) = stack.pop(), stamp()
  # tracing and lowering run in this thread; XLA in its own: the process's CPU less the other
  # Python threads'
  cpu = (p1 - p0) - (o1 - o0) if KINDS[event] == "xla" else t1 - t0
  if not stack:  # outermost
    events.append((KINDS[event], kw.get("fun_name") or "?", secs, cpu))
jax.monitoring.register_scalar_listener(on_start)
jax.monitoring.register_event_duration_secs_listener(on_end)
from drjax import cli
rc = 1
try:
  rc = cli.main(argv)
finally:
  json.dump({"rc": rc, "events": events, "jax_import_s": t_jax,
             "child_wall_s": time.perf_counter() - t0, "child_cpu_s": time.process_time() - c0},
            open(out_path, "w"))
"""

_OP = re.compile(r"\b(stablehlo|chlo|mhlo|func|sdy)\.[a-z_]+")


def _env(checkout: str | None, extra: dict | None = None) -> dict:
  env = dict(os.environ)
  for k in ("JAX_COMPILATION_CACHE_DIR", "DRJAX_CACHE_DIR"):
    env.pop(k, None)
  env["DRJAX_NO_CACHE"] = "1"
  env["JAX_ENABLE_COMPILATION_CACHE"] = "false"
  env["PYTHONUNBUFFERED"] = "1"
  if checkout:
    env["PYTHONPATH"] = os.path.abspath(checkout) + (
        os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
  env.update(extra or {})
  return env


def _timed(cmd, env, cwd, timeout_s=1800.0):
  """Wall and CPU (children's user + system) seconds of one subprocess."""
  before = os.times()
  t0 = time.perf_counter()
  res = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout_s)
  wall = time.perf_counter() - t0
  after = os.times()
  cpu = (after.children_user - before.children_user) + (after.children_system -
                                                         before.children_system)
  if res.returncode != 0:
    raise RuntimeError(f"{' '.join(cmd)} failed ({res.returncode}): {res.stderr[-2000:]}")
  return wall, cpu


def _module_ops(text: str) -> int:
  return sum(1 for line in text.splitlines() if _OP.search(line))


def _sanitize(name: str) -> str:
  return re.sub(r"[^A-Za-z0-9_]", "_", name)


def _programs(child: dict, dump_dir: str | None) -> list[dict]:
  """Per program (in order of first appearance): traces, trace / lower / XLA seconds and ops."""
  progs: dict[str, dict] = {}
  for kind, fun, secs, cpu in child["events"]:
    name = fun[4:-1] if fun.startswith("jit(") and fun.endswith(")") else fun
    p = progs.setdefault(name, {"name": name, "traces": 0, "compiles": 0, "ops": 0,
                                "trace_s": 0.0, "lower_s": 0.0, "xla_s": 0.0,
                                "trace_cpu_s": 0.0, "lower_cpu_s": 0.0, "xla_cpu_s": 0.0})
    p[kind + "_s"] += secs
    p[kind + "_cpu_s"] += cpu
    p["traces"] += kind == "trace"
    p["compiles"] += kind == "xla"
  if dump_dir and os.path.isdir(dump_dir):
    for f in sorted(os.listdir(dump_dir)):
      m = re.match(r"jax_ir\d+_jit_(.*)_compile\.mlir$", f)
      if not m:
        continue
      with open(os.path.join(dump_dir, f), encoding="utf-8") as fh:
        ops = _module_ops(fh.read())
      # JAX names the module jit_<name> with <name> sanitized ("<lambda>" -> "_lambda"): an exact
      # match first ("_program" and "program" are different programs), then without the
      # trailing underscores.
      match = ([p for p in progs.values() if _sanitize(p["name"]) == m.group(1)] or
               [p for p in progs.values() if _sanitize(p["name"]).rstrip("_") == m.group(1)])
      if match:
        match[0]["ops"] += ops
  for p in progs.values():
    p["total_cpu_s"] = p["trace_cpu_s"] + p["lower_cpu_s"] + p["xla_cpu_s"]
    p["total_s"] = p["trace_s"] + p["lower_s"] + p["xla_s"]
  return sorted(progs.values(), key=lambda p: -p["total_cpu_s"])


def run_command(key: str, checkout: str | None = None, *, ops: bool = True) -> dict:
  """One cold run of ``COMMANDS[key]``: wall / CPU of the process and its programs."""
  return run_argv(list(COMMANDS[key][1]), checkout, ops=ops, out_dir=True)


def run_argv(argv, checkout: str | None = None, *, ops: bool = True,
             out_dir: bool = False) -> dict:
  """One cold run of ``drjax ARGV`` (``out_dir``: with ``--out`` a fresh directory): wall / CPU
  of the process, ``jax_import_s`` and ``programs`` (see ``_programs``)."""
  argv = list(argv)
  with tempfile.TemporaryDirectory(prefix="drjax-first-") as tmp:
    out = os.path.join(tmp, "child.json")
    dump = os.path.join(tmp, "ir") if ops else None
    if out_dir:
      argv += ["--out", os.path.join(tmp, "out")]
    cmd = [sys.executable, "-c", _CHILD, out] + argv
    wall, cpu = _timed(cmd, _env(checkout, {"JAX_DUMP_IR_TO": dump} if dump else None), tmp)
    with open(out, encoding="utf-8") as f:
      child = json.load(f)
    timings = None
    sweep_json = os.path.join(tmp, "out", "sweep.json")
    if os.path.exists(sweep_json):
      with open(sweep_json, encoding="utf-8") as f:
        timings = json.load(f).get("timings")
    progs = _programs(child, dump)
  compile_cpu = sum(p["total_cpu_s"] for p in progs)
  return {"wall_s": wall, "cpu_s": cpu, "jax_import_s": child["jax_import_s"],
          "compile_cpu_s": compile_cpu, "programs": progs, "sweep_timings": timings}


def _median_run(runs: list[dict]) -> dict:
  """The run of median wall time, with the medians of every figure over the runs."""
  keep = sorted(runs, key=lambda r: r["wall_s"])[len(runs) // 2]
  out = dict(keep)
  for k in ("wall_s", "cpu_s", "jax_import_s", "compile_cpu_s"):
    out[k] = statistics.median(r[k] for r in runs)
    out[k + "_all"] = [round(r[k], 3) for r in runs]
  by_name = {}
  for r in runs:
    for p in r["programs"]:
      by_name.setdefault(p["name"], []).append(p)
  progs = []
  for p in keep["programs"]:
    ps = by_name[p["name"]]
    q = dict(p)
    for k in ("trace_s", "lower_s", "xla_s", "trace_cpu_s", "lower_cpu_s", "xla_cpu_s",
              "total_s", "total_cpu_s"):
      q[k] = statistics.median(x[k] for x in ps)
    progs.append(q)
  out["programs"] = progs
  out["repeats"] = len(runs)
  return out


def startup(checkout: str | None = None, repeats: int = 5) -> dict:
  """``import drjax``, ``drjax --help``, ``drjax sweep --help``: median wall / CPU seconds."""
  res = {}
  with tempfile.TemporaryDirectory(prefix="drjax-first-") as tmp:
    for key, (what, args) in STARTUP.items():
      runs = [_timed([sys.executable] + args, _env(checkout), tmp) for _ in range(repeats)]
      res[key] = {"what": what, "wall_s": statistics.median(w for w, _ in runs),
                  "cpu_s": statistics.median(c for _, c in runs),
                  "wall_s_all": [round(w, 3) for w, _ in runs]}
  return res


def _load_avg() -> list[float] | None:
  try:
    return [round(x, 2) for x in os.getloadavg()]
  except OSError:
    return None


def first_result(quick: bool = False, *, checkouts: dict | None = None,
                 repeats: int | None = None, commands=None, log=None) -> dict:
  """The benchmark: start-up and the commands' programs, cold, median of ``repeats`` runs.

  ``checkouts``: ``{label: source tree or None (the installed drjax)}``, measured interleaved
  (each repeat of each command runs every label in turn, so that they share the machine's load);
  default ``{"now": None}``. Returns ``{"machine", "repeats", "load_start", "load_end",
  "labels": {label: {"checkout", "startup", "commands"}}}``.
  """
  from drjax.bench.machine import machine_info  # pylint: disable=g-import-not-at-top
  repeats = repeats or (1 if quick else 3)
  commands = tuple(commands or (QUICK_COMMANDS if quick else tuple(COMMANDS)))
  checkouts = dict(checkouts or {"now": None})
  say = log or (lambda m: None)
  t0 = time.perf_counter()
  res = {"machine": machine_info(), "repeats": repeats, "load_start": _load_avg(),
         "started": time.strftime("%Y-%m-%d %H:%M:%S %z"),
         "labels": {k: {"checkout": v, "commands": {}} for k, v in checkouts.items()}}
  for label, checkout in checkouts.items():
    git = subprocess.run(["git", "-C", checkout or os.path.dirname(os.path.abspath(__file__)),
                          "log", "-1", "--format=%h %ad", "--date=short"],
                         capture_output=True, text=True)
    res["labels"][label]["commit"] = git.stdout.strip() if git.returncode == 0 else None
    say(f"start-up ({label}) ...")
    res["labels"][label]["startup"] = startup(checkout, max(repeats, 3))
  for key in commands:
    runs = {label: [] for label in checkouts}
    for i in range(repeats):
      for label, checkout in checkouts.items():
        say(f"{key} ({label}, {i + 1}/{repeats}) ...")
        runs[label].append(run_command(key, checkout))
    for label in checkouts:
      res["labels"][label]["commands"][key] = {"what": COMMANDS[key][0], "argv": COMMANDS[key][1],
                                               **_median_run(runs[label])}
  res["load_end"] = _load_avg()
  res["wall_s"] = round(time.perf_counter() - t0, 1)
  return res


def markdown(res: dict) -> str:
  """The result as Markdown tables, one set per label (the docs' table: ``doc_tables``)."""
  lines = []
  for label, r in res["labels"].items():
    lines += [f"### {label}", "", "| start-up | wall s | CPU s |", "|---|---|---|"]
    for v in r["startup"].values():
      lines.append(f"| `{v['what']}` | {v['wall_s']:.2f} | {v['cpu_s']:.2f} |")
    lines += ["", "| command / program | ops | traces | trace s | lower s | XLA s | wall s | "
              "CPU s |", "|---|---|---|---|---|---|---|---|"]
    for c in r["commands"].values():
      lines.append(f"| **{c['what']}** | | | | | | {c['wall_s']:.1f} | {c['cpu_s']:.1f} |")
      for p in c["programs"]:
        if p["total_cpu_s"] >= 0.05:
          lines.append(f"| {p['name']} | {p['ops']:,} | {p['traces']} | {p['trace_cpu_s']:.2f} | "
                       f"{p['lower_cpu_s']:.2f} | {p['xla_cpu_s']:.2f} | | |")
    lines.append("")
  return "\n".join(lines)


def main(argv=None) -> int:
  import argparse  # pylint: disable=g-import-not-at-top
  ap = argparse.ArgumentParser(prog="python -m drjax.bench.first_result",
                               description=__doc__.splitlines()[0])
  ap.add_argument("--checkout", action="append", default=None, metavar="LABEL=DIR",
                  help="a source tree to measure, repeatable (LABEL=DIR; LABEL= alone: the "
                       "installed drjax); default: the installed drjax, labelled 'now'")
  ap.add_argument("--repeats", type=int, default=None)
  ap.add_argument("--only", nargs="+", default=None, choices=tuple(COMMANDS))
  ap.add_argument("--quick", action="store_true")
  ap.add_argument("--json", default=None, help="write the result here")
  ns = ap.parse_args(argv)
  checkouts = None
  if ns.checkout:
    checkouts = {}
    for item in ns.checkout:
      label, _, path = item.partition("=")
      checkouts[label] = path or None
  res = first_result(ns.quick, checkouts=checkouts, repeats=ns.repeats, commands=ns.only,
                     log=lambda m: print(f"[first_result] {m}", file=sys.stderr, flush=True))
  print(markdown(res))
  if ns.json:
    with open(ns.json, "w", encoding="utf-8") as f:
      json.dump(res, f, indent=1)
      f.write("\n")
  return 0


if __name__ == "__main__":
  sys.exit(main())
