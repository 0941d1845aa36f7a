"""The docs' tables of measurements, generated from the committed result files.

A page holds a generated table between two markers; everything between them is replaced, the rest
of the page is left as it is::

    <!-- table: engine-cpu -->
    ...
    <!-- /table -->

Run from the repository root (the last step of the command that regenerates the docs' figures,
``docs/reproduce.md``)::

    python -m drjax.bench.doc_tables            # rewrite the tables in place
    python -m drjax.bench.doc_tables --check    # exit 1 naming every stale table

Sources: ``benchmarks/results/*.json`` (timings, each table names its machine) and
``docs/figures-run/*/<figure>/*.json`` (panel files written by ``drjax reproduce``). No JAX, no
dependencies beyond the standard library.
"""

import argparse
import glob
import json
import os
import re
import sys

# A marker is a line of its own (a marker quoted inside a sentence or code is not one).
BEGIN = re.compile(r"^<!--\s*table:\s*([\w-]+)\s*-->[ \t]*$", re.M)
END = re.compile(r"^<!-- /table -->[ \t]*$", re.M)
REGION = re.compile(r"^(<!--\s*table:\s*([\w-]+)\s*-->)[ \t]*\n(.*?)^(<!-- /table -->)[ \t]*$",
                    re.S | re.M)

RESULTS = "benchmarks/results"
# The engine's workloads, in the order of the tables: (key, what).
WORKLOADS = (
    ("linear_20x100", "linear MDP"),
    ("linear_1000x100", "linear MDP"),
    ("linear_1x3000", "linear MDP"),
    ("linear_10000x100", "linear MDP"),
    ("linear_1x10000", "linear MDP"),
    ("put_option_1000x100", "put option (buffer form)"),
    ("random_d128_100x200", "random DRMDP (S 50, A 32, H 10, d 128)"),
)
FIT_AGENTS = (("pevi", "PEVI"), ("r2pvi-tv", "R2PVI-TV"), ("r2pvi-kl", "R2PVI-KL"),
              ("drpvi", "DRPVI"), ("drvi-l", "DRVI-L"))


def _load(root, path):
  with open(os.path.join(root, path), encoding="utf-8") as f:
    return json.load(f)


def _sig(x, digits=2):
  """x with `digits` significant digits (at least one decimal below 10), thousands commas."""
  if x is None:
    return "—"
  x = float(x)
  if x == 0:
    return "0"
  decimals = max(0, digits - 1 - int(f"{abs(x):e}".split("e")[1]))
  return f"{x:,.{decimals}f}"


def _fixed(x, decimals):
  return "—" if x is None or x != x else f"{float(x):,.{decimals}f}"


def _ratio(x, decimals=1):
  return f"{x:.{decimals}f}x"


def _range(xs, fmt):
  xs = [x for x in xs if x is not None]
  lo, hi = fmt(min(xs)), fmt(max(xs))
  return lo if lo == hi else f"{lo}-{hi}"


def _table(header, rows):
  lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
  lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
  return "\n".join(lines)


def _link(path):
  # As the pages write them: docs/hooks/ turns benchmarks/results/ links into repository links.
  return f"[`{os.path.basename(path)}`]({path})"


def _size(w):
  return f"{w['seeds']:,} x {w['episodes']:,}"


# The sittings of `drjax bench --only engine` (three runs each) the engine-entry table shows: the
# latest first (its times), then an earlier one (its ratios, for comparison).
ENGINE_ENTRY = ("amd-epyc-2c-engine-head", "amd-epyc-2c-engine-issue35-before")
# The before runs' code (its bench did not record its commit): the start of issue 35, run from a
# git worktree, interleaved with the current runs (benchmarks/README.md).
ENGINE_BEFORE_COMMIT = "946a5d8"


def _engine_runs(root, prefix):
  # Only `<prefix>-<n>.json`: `amd-epyc-2c-engine-before-rng-hoist-1.json` is another sitting.
  files = sorted(glob.glob(os.path.join(root, RESULTS, f"{prefix}-[0-9].json")))
  return [_load(root, os.path.relpath(f, root)) for f in files]


def engine_entry(root):
  """drjax.sweep against the best NumPy, three runs of `drjax bench --only engine` (the latest
  sitting; the ratios of an earlier one beside them)."""
  runs, before = (_engine_runs(root, p) for p in ENGINE_ENTRY)
  rows = []
  all_ws = [r["benchmarks"]["engine"]["workloads"][k] for r in runs for k, _ in WORKLOADS]
  cpu = all("speedup_cpu_vs_best_numpy" in w for w in all_ws)  # recorded since 2026-12-06
  for key, what in WORKLOADS:
    ws = [r["benchmarks"]["engine"]["workloads"][key] for r in runs]
    was = [r["benchmarks"]["engine"]["workloads"][key]["speedup_vs_best_numpy"] for r in before]
    row = [what, _size(ws[0]),
           _range([w["drjax"]["warm_s"] for w in ws], lambda x: _sig(x, 2)),
           _range([w["numpy_best_s"] for w in ws], lambda x: _sig(x, 2)),
           "**" + _range([w["speedup_vs_best_numpy"] for w in ws], _ratio) + "**"]
    if cpu:
      row.append(_range([w["speedup_cpu_vs_best_numpy"] for w in ws], _ratio))
    rows.append(tuple(row + [_range(was, _ratio)]))
  machine, earlier = runs[0]["machine"]["name"], before[0]["machine"]["name"]
  head = ["workload", "seeds x episodes", "drjax warm s", "best NumPy s", "drjax vs best NumPy"]
  head += ["in CPU s"] if cpu else []
  same = earlier == machine
  table = _table(tuple(head + ["earlier" if same else f"earlier, on `{earlier}`"]), rows)
  busy = [r["benchmarks"]["engine"].get("others_cores_busy") for r in runs]
  busy = [b for b in busy if b is not None]
  load = ""
  if busy and max(busy) >= 0.25:  # a disturbed sitting says so
    load = (f" Other processes kept {_range(busy, lambda x: f'{x:.2f}')} of its "
            f"{runs[0]['machine']['cores']} cores busy during these runs (`others_cores_busy`): "
            "the times are upper bounds and the ratios noisy.")
  code = runs[0].get("source_commit")
  code = f" at commit `{code[:7]}`" if code else ""
  was = f" at `{(before[0].get('source_commit') or ENGINE_BEFORE_COMMIT)[:7]}`"
  busy_was = [r["benchmarks"]["engine"].get("others_cores_busy") for r in before]
  quiet = " with no other load" if all(b is not None and b < 0.25 for b in busy_was) else ""
  return (f"{table}\n\nOn `{machine}` (jax {runs[0]['machine']['jax']}){code}, drjax through "
          f"`drjax.sweep`, the range over {len(runs)} runs of `drjax bench --only engine` "
          f"(`{RESULTS}/{ENGINE_ENTRY[0]}-{{1,2,3}}.json`).{load}"
          + (" In CPU s: process CPU seconds (XLA splits some loops over both cores; NumPy "
             "uses one)." if cpu else "")
          + f" Earlier: the ratios of {len(before)} runs"
          + (" on the same machine" if same else f" on `{earlier}`")
          + f"{was}{quiet} (`{ENGINE_ENTRY[1]}-{{1,2,3}}.json`).")


def engine_cpu(root):
  """The engine benchmark of the default `drjax bench` run and its rerun."""
  base = _load(root, f"{RESULTS}/amd-epyc-2c.json")["benchmarks"]["engine"]["workloads"]
  rerun = _load(root, f"{RESULTS}/amd-epyc-2c-rerun.json")["benchmarks"]["engine"]["workloads"]
  rows = []
  for key, what in WORKLOADS:
    w, r = base[key], rerun[key]
    ratio = _ratio(w["speedup_vs_best_numpy"])
    ratio = f"**{ratio}**" if w["speedup_vs_best_numpy"] >= 1 else f"{ratio} (slower)"
    rows.append((what, _size(w), _sig(w["drjax"]["warm_s"], 3), _fixed(w["drjax"]["compile_s"], 1),
                 _sig(w["numpy_best_s"], 3), ratio,
                 f"{_sig(r['drjax']['warm_s'], 2)} / {_sig(r['numpy_best_s'], 3)} = "
                 f"{_ratio(r['speedup_vs_best_numpy'])}"))
  table = _table(("workload", "seeds x episodes", "drjax warm s", "drjax compile s",
                  "best NumPy s", "drjax vs best NumPy", "rerun: drjax s / NumPy s"), rows)
  big = base["linear_10000x100"]["drjax"]
  return (f"{table}\n\nPeak RSS of drjax in a fresh process for 10,000 seeds x 100 episodes: "
          f"{_fixed(big['peak_rss_mb'], 0)} MB ({_fixed(big['peak_rss_mb_per_seed'], 3)} MB per "
          "seed).")


REPRODUCE_RUNS = (
    ("amd-epyc-2c-reproduce-all-plain.json",
     "families one after the other, no interpreter tuning (now; median of 3 runs)"),
    ("amd-epyc-2c-reproduce-all.json",
     "families in threads, figure worker process, GC thresholds, `os._exit` (removed)"),
    ("amd-epyc-2c.json", "default `drjax bench` run"),
    ("amd-epyc-2c-rerun.json", "its rerun, hours later"),
)


def reproduce_all(root):
  """Cold `drjax reproduce all` in a fresh process, against the authors' notebooks."""
  rows = []
  for name, what in REPRODUCE_RUNS:
    d = _load(root, f"{RESULTS}/{name}")
    sub = d["benchmarks"]["reproduce_all"]["subprocess"]
    ref = d["benchmarks"]["reproduce_all"]["reference"]
    rows.append((d["started"][:10], what, _link(f"{RESULTS}/{name}"),
                 _fixed(sub["wall_s"], 1), _fixed(sub["cpu_s"], 1), _fixed(ref["all_s"], 0),
                 f"{ref['all_s'] / sub['wall_s']:.0f}x"))
  machine = d["machine"]["name"]
  table = _table(("date", "the command", "file", "wall s", "CPU s",
                  "notebooks s (quoted)", "notebooks / drjax"), rows)
  return (f"{table}\n\nOn `{machine}` (jax {d['machine']['jax']}), `DRJAX_NO_CACHE=1`; the "
          "notebooks' seconds are the authors' code's timing on a 2-core machine like it, for the "
          "first paper's 12 panels alone, not run here.")


def offline_linear(root):
  """One DRPVI fit program on the linear MDP, 1,000 seeds x 100 trajectories."""
  d = _load(root, f"{RESULTS}/amd-epyc-2c-offline-full.json")
  rows = []
  for r in d["benchmarks"]["offline"]["rows"]:
    if r.get("workload") != "linear_mdp":
      continue
    side = r.get("drjax") or r.get("numpy")
    rows.append((f"`{r['program']}`", r["what"], _sig(side["warm_min_s"], 2),
                 _fixed(side.get("compile_s"), 1)))
  return (_table(("program", "what", "warm s (minimum)", "compile s"), rows)
          + f"\n\nOn `{d['machine']['name']}`, float32 "
          f"({_link(RESULTS + '/amd-epyc-2c-offline-full.json')}).")


def _fit_rows(root):
  cpu = _load(root, f"{RESULTS}/amd-epyc-2c-offline-full.json")
  gpu = _load(root, f"{RESULTS}/nvidia-h200-r2pvi-time.json")
  put = [r for r in cpu["benchmarks"]["offline"]["rows"] if r.get("workload") == "put_option"]
  out = []
  for fig, axis in (("fig2a", "N"), ("fig2b", "d")):
    for agent, name in FIT_AGENTS:
      series = gpu[fig]["series"][agent]
      for i, x in enumerate(gpu[fig]["x"]):
        n, d = (x, 31) if axis == "N" else (1000, x + 1)  # fig2b's x: anchors, d = anchors + 1
        if fig == "fig2b" and d == 31:
          continue
        row = next(r for r in put if r["agent"] == agent and r["N"] == n and r["d"] == d)
        out.append((name, n, d, row, series["drjax_s"][i], series["numpy_over_drjax"][i],
                    series["published_over_drjax"][i]))
  return out


def offline_fit_time(root):
  """The R2PVI paper's Figure 2 grid: one fit, drjax against NumPy and the published seconds."""
  rows = []
  for name, n, d, row, gpu_s, gpu_ratio, _ in _fit_rows(root):
    rows.append((name, f"{n:,}", d, _fixed(row["published_s"], 2),
                 f"{_fixed(row['drjax']['warm_min_s'] * 1000, 1)} "
                 f"({_fixed(row['ratio_numpy_over_drjax'], 2)}x)",
                 f"{_fixed(gpu_s * 1000, 1)} ({_fixed(gpu_ratio, 1)}x)"))
  return _table(("agent", "N", "d", "published s (i5-11300H)",
                 "amd-epyc-2c: drjax ms (NumPy / drjax)", "H200: drjax ms (NumPy / drjax)"), rows)


def offline_fit_ranges(root):
  """The ranges of the fit-time ratios, per machine."""
  fits = _fit_rows(root)
  cpu = _load(root, f"{RESULTS}/amd-epyc-2c-offline-full.json")["benchmarks"]["offline"]["rows"]
  put = [r for r in cpu if r.get("workload") == "put_option"]
  cpu_pub = [r["ratio_published_over_drjax"] for r in put]
  cpu_np = [r["ratio_numpy_over_drjax"] for r in put]
  gpu_pub = [f[6] for f in fits]
  gpu_np = [f[5] for f in fits if not (f[1] == 1000 and f[2] == 31)]
  gpu_base = [f[5] for f in fits if f[1] == 1000 and f[2] == 31]
  rows = [(f"`amd-epyc-2c` (all {len(put)} put-option rows of the file)",
           _range(cpu_pub, lambda x: f"{x:,.0f}x"), _range(cpu_np, lambda x: f"{x:.2f}x"),
           "(included)"),
          ("NVIDIA H200", _range(gpu_pub, lambda x: f"{x:,.0f}x"),
           _range(gpu_np, lambda x: f"{x:.1f}x"), _range(gpu_base, lambda x: f"{x:.1f}x"))]
  table = _table(("machine", "published / drjax", "NumPy / drjax (N, d) != (1,000, 31)",
                  "NumPy / drjax at N = 1,000, d = 31"), rows)
  cost = []
  for agent, name, base in (("r2pvi-tv", "R2PVI-TV", "PEVI"), ("r2pvi-kl", "R2PVI-KL", "PEVI"),
                            ("r2pvi-chi2", "R2PVI-chi2", "DRPVI")):
    ratios = [r["ratio_over_baseline"]["drjax"] for r in put if r["agent"] == agent]
    cost.append((name, base, _range(ratios, lambda x: f"{x:.2f}x")))
  return table + "\n\n" + _table(("agent (`amd-epyc-2c`, drjax)", "baseline",
                                    "time / baseline's time"), cost)


def gpu_engine(root):
  """The engine's workloads on the H200."""
  d = _load(root, f"{RESULTS}/nvidia-h200.json")
  rows = []
  for key, what in WORKLOADS:
    if key in d["rows"]:
      w = d["rows"][key]
      rows.append((what, _size(w), _sig(w["warm_s"], 2), _fixed(w["compile_s"], 1)))
  return _table(("workload (DR-LSVI-UCB) on the H200", "seeds x episodes", "warm s", "compile s"),
                rows)


def gpu_sweep(root):
  """`drjax sweep` of 100,000 seeds x 2 agents on the H200, from its `sweep.json`."""
  d = _load(root, f"{RESULTS}/nvidia-h200-sweep.json")
  t, lay = d["timings"], d["layout"]
  compile_s = " + ".join(f"{_fixed(v, 1)} ({k})" for k, v in t["compile_s"].items())
  return _table(("runs", "chunks x runs", "chunk compute s", "compile s", "total s (in the file)"),
                [(f"{t['runs_computed']:,}", f"{lay['num_chunks']} x {lay['chunk_size']:,}",
                  _fixed(t["chunks_s"], 2), compile_s, _fixed(t["total_s"], 1))])


def sweep_timings(root):
  """`drjax sweep` on amd-epyc-2c: the issue's sweep, 100,000 seeds, the chunk program."""
  d = _load(root, f"{RESULTS}/amd-epyc-2c-sweep.json")
  a, b = d["sweep_20k_two_rho"], d["sweep_20k_two_rho_after_rng_hoist"]
  rows = []
  for label, s in (("20,000 seeds x rho {0, 0.5}, six interleaved pairs", a),
                   ("the same, current code, quieter machine, four pairs", b)):
    for dev in ("devices_1", "devices_2"):
      m = s["median"][dev]
      rows.append((label, dev[-1], _fixed(m["wall_s"], 2), _fixed(m.get("compile_s"), 2),
                   _fixed(m["chunks_s"], 2), "—"))
  for i, r in enumerate(d["sweep_100k_two_rho"]["runs"]):
    rows.append(("100,000 seeds x rho {0, 0.5}", r["devices"], _fixed(r["wall_s"], 1),
                 _fixed(r["compile_s"], 2), _fixed(r["chunks_s"], 2), _fixed(r["peak_rss_mb"], 0)))
  r = d["sweep_100k_rho05"]
  rows.append(("100,000 seeds, rho 0.5", r["devices"], _fixed(r["wall_s"], 1),
               _fixed(r["compile_s"], 2), _fixed(r["chunks_s"], 2),
               _fixed(r["peak_rss_mb_max_so_far"], 0)))
  table = _table(("sweep (cold, `--chunk 2000` / default budget)", "devices", "wall s (median)",
                  "compile s", "chunks s", "peak RSS MB"), rows)
  c, p = d["chunk_program_vs_engine"], d["source_parameter_sweep"]
  ratios = _table(("warm, in one process", "ratio"), [
      ("wall, 2 devices over 1 (median of pairs): 20,000 seeds / current code",
       f"{_ratio(a['wall_ratio_median_of_pairs'], 2)} / "
       f"{_ratio(b['wall_ratio_median_of_pairs'], 2)}"),
      ("chunk compute, 2 devices over 1 (medians): 20,000 seeds / current code",
       f"{_ratio(a['compute_ratio_of_medians'], 2)} / {_ratio(b['compute_ratio_of_medians'], 2)}"),
      ("the chunk program / `drjax.sweep` + exact evaluation (8,000 runs)",
       _ratio(c["ratio_chunks_vs_engine"], 2)),
      ("`sweeps.run` in memory / `drjax.sweep` + exact evaluation",
       _ratio(c["ratio_run_vs_engine"], 2)),
      ("two source values / one, chunk s per 4,000 runs (before grouping by source)",
       f"{_fixed(p['before_4cf2e32']['median']['two_source_values'], 3)} / "
       f"{_fixed(p['before_4cf2e32']['median']['one_source_value'], 3)}"),
      ("two source values / one, chunk s per 4,000 runs (now)",
       f"{_fixed(p['after']['median']['two_source_values'], 3)} / "
       f"{_fixed(p['after']['median']['one_source_value'], 3)}"),
      ("100 random DRMDPs x 10 seeds: one chunk per instance / shared chunks, s",
       f"{_fixed(p['small_groups_random_mdp']['grouped_every_source']['100x10'], 3)} / "
       f"{_fixed(p['small_groups_random_mdp']['final_code']['100x10'], 3)}"),
  ])
  return (f"{table}\n\n{ratios}\n\nOn `{d['machine']['name']}` "
          f"({_link(RESULTS + '/amd-epyc-2c-sweep.json')}, with the commands it ran).")


def _panel_ends(root, panels):
  rows = []
  for path, label in panels:
    p = _load(root, path)
    x0, x1 = p["x"][0], p["x"][-1]
    for name, c in p["curves"].items():
      rows.append((label, name, f"{_fixed(x0, 2)}: {_fixed(c['mean'][0], 3)}",
                   f"{_fixed(x1, 2)}: {_fixed(c['mean'][-1], 3)}"))
  return _table(("panel", "curve (mean over seeds)", "first x: value", "last x: value"), rows)


def r2pvi_ends(root):
  """The R2PVI paper's Figure 1(a), (c), (d): each curve at its first and last x."""
  run = "docs/figures-run/paper/r2pvi"
  table = _panel_ends(root, ((f"{run}/fig1a.json", "(a) q"), (f"{run}/fig1c.json", "(c) rho"),
                             (f"{run}/fig1d.json", "(d) p")))
  c = _load(root, f"{run}/fig1c.json")
  corr = _table(("rho", "exact weight matching rho"),
                [(_fixed(x, 2), _fixed(w, 2))
                 for x, w in zip(c["x"], c["correspondence_weight_for_rho"])])
  return f"{table}\n\n{corr}"


def fig2_ends(root):
  """The put option's Figure 2, rho = 0.3, both presets: each curve at p_u = 0.15 and 0.85."""
  return _panel_ends(root, (("docs/figures-run/paper/fig2/rho0.3.json", "paper preset"),
                            ("docs/figures-run/notebook/fig2/rho0.3.json", "notebook preset")))


BUFFER_SCALING = f"{RESULTS}/amd-epyc-2c-buffer-scaling.json"


def buffer_scaling(root):
  """One buffer-form run against K, H and d, and the sweep's per-run estimate against the
  compiled chunk program (``benchmarks/buffer_scaling.py``)."""
  res = _load(root, BUFFER_SCALING)
  rows = [(r["K"], r["H"], r["d"], _fixed(r["state_MB"], 2), _fixed(r["run_MB"], 2),
           _fixed(r["ms_per_episode"], 2)) for r in res["runs"]]
  table = _table(("K", "H", "d", "state (MiB)", "compiled run (MiB)", "ms per episode"), rows)
  chunks = _table(("K", "H", "d", "chunk program, per run (MiB)", "bytes_per_run (MiB)"),
                  [(c["K"], c["H"], c["d"], _fixed(c["chunk_MB_per_run"], 2),
                    _fixed(c["estimate_MB"], 2)) for c in res["chunks"]])
  return (f"{table}\n\n{chunks}\n\nOn `{res['machine']['name']}` (jax {res['machine']['jax']}), "
          f"float32, DR-LSVI-UCB on the put option (A = 2, d = num_anchors + 1), warm jitted runs "
          f"(median of 5), chunks of 4 runs with 100 test episodes ({_link(BUFFER_SCALING)}).")


FILLED_SLOTS = f"{RESULTS}/amd-epyc-2c-filled-slots-head.json"
FILLED_SLOTS_NAMES = {"put": "put option", "cartpole": "CartPole (the shift study's)"}


def filled_slots(root):
  """The buffer form planning over its filled slots against the whole capacity and the strongest
  NumPy, one process per workload (``benchmarks/filled_slots.py``)."""
  res = _load(root, FILLED_SLOTS)
  rows = []
  for name, w in res["workloads"].items():
    cfg, med = w["config"], w["median_s"]
    for b in cfg["blocks"]:
      k = str(b)
      plan = "whole capacity (`blocks=0`)" if b == 0 else f"blocks of {b}"
      rows.append((f"{FILLED_SLOTS_NAMES.get(name, name)}, {_size(cfg)}", plan,
                   f"{_sig(med[k]['cpu'])} ({_sig(med[k]['wall'])})",
                   _sig(w["compile_s"][k]["cpu"]),
                   f"{_sig(med['numpy']['cpu'])} ({_sig(med['numpy']['wall'])})",
                   f"**{_ratio(w['numpy_over_drjax'][k]['cpu'], 2)}**",
                   _ratio(w["numpy_over_drjax"][k]["wall"], 2),
                   _ratio(w["over_whole_capacity"][k]["cpu"], 2)))
  table = _table(("workload", "plan", "drjax warm CPU s (wall s)", "compile CPU s",
                  "NumPy CPU s (wall s)", "NumPy / drjax (CPU s)", "NumPy / drjax (wall s)",
                  "vs whole capacity"), rows)
  label = res.get("machine_label", res["machine"]["name"])
  loads = " and ".join(f"{w['load_average_1min']:.0f}" for w in res["workloads"].values())
  reps = " and ".join(str(w["config"]["repeats"]) for w in res["workloads"].values())
  return (f"{table}\n\nOn `{label}` (jax {res['jax']}), float32, `drjax.sweep` with "
          "`drjax.train.PLAN_BLOCK` set to each block size in turn, each compiled without the "
          "persistent cache (compile: first call minus the median warm call), warm calls "
          f"interleaved with the NumPy baseline's, medians of {reps} in one process per "
          f"workload (load average {loads} at the end, the benchmark's own threads included); "
          "the CPU seconds are the figures to compare: XLA splits some loops over both cores, "
          "NumPy runs on one. A compile time is a difference of two calls, within the warm "
          f"calls' spread where a run takes seconds ({_link(FILLED_SLOTS)}).")


FIRST_RESULT = f"{RESULTS}/amd-epyc-2c-first-result-4.json"
# The README's test command, timed once (`python -m drjax.bench.suite_time`): the last row.
TEST_SUITE = f"{RESULTS}/amd-epyc-2c-test-suite.json"
TEST_SUITE_GOAL = 300.0
# (key, what, goal s or None): the goals of issue 35, on two quiet cores without a cache.
FIRST_RESULT_ROWS = (
    ("help", "`drjax --help`", 1.0),
    ("sweep-help", "`drjax sweep --help`", 1.0),
    ("import", "`python -c 'import drjax'`", None),
    ("sweep-online", "`drjax sweep --env linear-mdp --agents dr-lsvi-ucb --seeds 4 --episodes 50`",
     5.0),
    ("sweep-offline", "`drjax sweep --env linear-mdp --agents drpvi --trajectories 50 --seeds 4`",
     None),
    ("sweep-put", "`drjax sweep --env put-option --agents dr-lsvi-ucb --seeds 4 --episodes 50`",
     None),
    ("reproduce-all", "`drjax reproduce all`", 30.0),
)
PROGRAM_GOALS = {"sweep-online": 2.0}  # its program traced + lowered + compiled
# Why a goal is missed, where it is (docs/benchmarks.md, under the tables, says more).
MISSED = {"reproduce-all": "compiling its six programs of 4,900-7,000 operations is most of its "
                           "CPU seconds (next table)"}
PROGRAM_NAMES = {
    "chunk": "the chunk program (train + evaluate)",
    "linear_mdp_program": "linear MDP (fig1, fig3, subopt)",
    "put_option_program": "put option (fig2)",
    "drpvi_program": "DRPVI paper (drpvi)",
    "r2pvi_linear_program": "R2PVI paper, linear MDP (r2pvi)",
    "r2pvi_put_program": "R2PVI paper, put option (r2pvi)",
    "_program": "sensitivity",
    "program": "the five paper programs above, together (one name before)",
}
# Programs named apart after the change: before's name -> after's names.
PROGRAM_GROUPS = {"program": ("linear_mdp_program", "put_option_program", "drpvi_program",
                              "r2pvi_linear_program", "r2pvi_put_program")}


def _first_result_entry(label_res, key):
  if key in label_res["startup"]:
    return label_res["startup"][key]
  return label_res["commands"].get(key)


def _goal_status(goal, wall, cpu, why=None):
  if goal is None:
    return "—"
  if wall <= goal:
    return f"met ({wall:.1f} s)"
  if why:
    return f"**missed by {wall - goal:.1f} s**: {why}"
  if cpu <= goal:
    return f"met in CPU s ({cpu:.1f} s); wall {wall:.1f} s on the loaded machine"
  return f"**not shown**: {cpu:.1f} CPU s at this load, {cpu - goal:.1f} s over"


def _runs_text(label_res):
  """'3 runs (start-up: 5)' from the repeats recorded per command."""
  by = {}
  for key, c in label_res["commands"].items():
    by.setdefault(c.get("repeats", 1), []).append(key)
  return "; ".join(f"{n} run{'s' if n > 1 else ''} of {', '.join(keys)}"
                   for n, keys in sorted(by.items(), reverse=True)) + " (start-up: 3 runs)"


def first_result(root):
  """Time to first result (issue 35): the goals, before and after, from one sitting."""
  d = _load(root, FIRST_RESULT)
  before, after = d["labels"]["before"], d["labels"]["after"]
  rows = []
  for key, what, goal in FIRST_RESULT_ROWS:
    b, a = _first_result_entry(before, key), _first_result_entry(after, key)
    if a is None:
      continue
    rows.append((what, "—" if goal is None else f"< {goal:g} s",
                 "—" if b is None else f"{_fixed(b['wall_s'], 2)} ({_fixed(b['cpu_s'], 2)})",
                 f"{_fixed(a['wall_s'], 2)} ({_fixed(a['cpu_s'], 2)})",
                 _goal_status(goal, a["wall_s"], a["cpu_s"], MISSED.get(key))))
    if key in before["commands"] or key in after["commands"]:
      bc = b["compile_cpu_s"] if b else None
      goal_p = PROGRAM_GOALS.get(key)
      ac = a["compile_cpu_s"]
      rows.append(("  its programs: trace + lower + XLA, CPU s",
                   "—" if goal_p is None else f"< {goal_p:g} s", _fixed(bc, 2), _fixed(ac, 2),
                   "—" if goal_p is None else (f"met ({ac:.2f} s)" if ac <= goal_p else
                                               f"**missed by {ac - goal_p:.2f} s**")))
  suite = _test_suite_row(root)
  rows += [suite[0]] if suite else []
  table = _table(("cold, no compilation cache", "goal", "before: wall s (CPU s)",
                  "after: wall s (CPU s)", "goal met?"), rows)
  lo, hi = d.get("load_start"), d.get("load_end")
  cores = d["machine"].get("cores", 2)
  if lo and hi and max(lo[0], hi[0]) <= cores + 0.5:  # only the benchmark's own processes
    five = f"; the 5-minute average {lo[1]} at the start" if len(lo) > 1 else ""
    load = (f"quiet by the 1-minute load average ({lo[0]} at the start, {hi[0]} at the end, on "
            f"{cores} cores: about the benchmark's own processes{five})")
  else:
    load = ("the machine was loaded by other jobs "
            f"(load average {lo[0] if lo else '?'} at the start, {hi[0] if hi else '?'} at the "
            f"end, on {cores} cores): the wall seconds are several times what quiet cores take, "
            "and even the CPU seconds are inflated; they are upper bounds of the quiet figures")
  note = f" {d['note']}" if d.get("note") else ""
  return (f"{table}\n\nOn `{d['machine']['name']}` (jax {d['machine']['jax']}), "
          f"before and after interleaved, medians of {_runs_text(after)}; {load}. Before: "
          f"`{before.get('commit', 'the code before issue 35')}`; after: "
          f"`{after.get('commit', 'now')}` ({_link(FIRST_RESULT)}; `drjax bench --only "
          f"first_result`).{note}" + (suite[1] if suite else ""))


def _test_suite_row(root):
  """The test command's row and its sentence, from ``TEST_SUITE`` (None if there is none)."""
  if not os.path.exists(os.path.join(root, TEST_SUITE)):
    return None
  t = _load(root, TEST_SUITE)
  j, wall, goal = t["jax"], t["wall_s"], TEST_SUITE_GOAL
  why = (f"the tests take {t['test_s']:,.0f} s of the two workers' time, of which XLA compiling "
         f"{j['xla_count']:,} programs {j['xla_s']:,.0f} s, tracing {j['trace_s']:,.0f} s and "
         f"lowering {j['lower_s']:,.0f} s (in the pytest processes; commands the tests start are "
         f"not counted)")
  row = (f"the README's test command, `{t['command']}` ({t['passed']:,} tests)", f"< {goal:g} s",
         "—", f"{wall:.0f}", _goal_status(goal, wall, wall, why))
  commit = t.get("source", {}).get("source_commit")
  text = (f" The test command: one run on `{t['machine']['name']}`"
          + (f" at `{commit[:7]}`" if commit else "") + f", {t['created'][:16]} UTC, with the "
          "suite's own compilation cache (empty at the start, shared by its processes) "
          f"({_link(TEST_SUITE)}; `python -m drjax.bench.suite_time`).")
  return row, text


def first_result_programs(root):
  """Every program the commands compile: size and trace / lower / XLA CPU seconds, before and
  after (a program of the same name)."""
  d = _load(root, FIRST_RESULT)
  before, after = d["labels"]["before"], d["labels"]["after"]
  rows = []
  for key, what, _ in FIRST_RESULT_ROWS:
    a = after["commands"].get(key)
    if a is None:
      continue
    b = {p["name"]: p for p in before["commands"].get(key, {"programs": []})["programs"]}
    label = what
    for p in a["programs"]:
      if p["total_cpu_s"] < 0.1:
        continue
      q = b.get(p["name"])
      ba = (lambda f, q=q: "" if q is None else f"{_fixed(q[f], 2)} -> ")  # noqa: E731
      rows.append((label, PROGRAM_NAMES.get(p["name"], p["name"]),
                   ("" if q is None else f"{q['ops']:,} -> ") + f"{p['ops']:,}",
                   p["traces"], ba("trace_cpu_s") + _fixed(p["trace_cpu_s"], 2),
                   ba("lower_cpu_s") + _fixed(p["lower_cpu_s"], 2),
                   ba("xla_cpu_s") + _fixed(p["xla_cpu_s"], 2)))
      label = ""
    for old_name, names in PROGRAM_GROUPS.items():  # renamed programs, summed
      q = b.get(old_name)
      ps = [p for p in a["programs"] if p["name"] in names]
      if q is None or not ps:
        continue
      tot = lambda f, ps=ps: sum(p[f] for p in ps)  # noqa: E731
      rows.append((label, PROGRAM_NAMES[old_name], f"{q['ops']:,} -> {tot('ops'):,}",
                   f"{q['traces']} -> {tot('traces')}",
                   f"{_fixed(q['trace_cpu_s'], 2)} -> {_fixed(tot('trace_cpu_s'), 2)}",
                   f"{_fixed(q['lower_cpu_s'], 2)} -> {_fixed(tot('lower_cpu_s'), 2)}",
                   f"{_fixed(q['xla_cpu_s'], 2)} -> {_fixed(tot('xla_cpu_s'), 2)}"))
      label = ""
    others = [p for p in a["programs"] if p["total_cpu_s"] < 0.1]
    if others:
      rows.append((label, f"{len(others)} small programs", f"{sum(p['ops'] for p in others):,}",
                   sum(p["traces"] for p in others),
                   _fixed(sum(p["trace_cpu_s"] for p in others), 2),
                   _fixed(sum(p["lower_cpu_s"] for p in others), 2),
                   _fixed(sum(p["xla_cpu_s"] for p in others), 2)))
      label = ""
  table = _table(("command", "program", "StableHLO ops", "traces", "trace CPU s", "lower CPU s",
                  "XLA CPU s"), rows)
  return (f"{table}\n\nAfter the change, with the value before it where a program of the same "
          "name existed (`before -> after`); medians of the same runs as above. Ops: the "
          "operations of the StableHLO module JAX hands to XLA (each function counted once).")


TABLES = {
    "first-result": first_result,
    "first-result-programs": first_result_programs,
    "buffer-scaling": buffer_scaling,
    "filled-slots": filled_slots,
    "engine-entry": engine_entry,
    "engine-cpu": engine_cpu,
    "reproduce-all": reproduce_all,
    "offline-linear": offline_linear,
    "offline-fit-time": offline_fit_time,
    "offline-fit-ranges": offline_fit_ranges,
    "gpu-engine": gpu_engine,
    "gpu-sweep": gpu_sweep,
    "sweep-timings": sweep_timings,
    "r2pvi-ends": r2pvi_ends,
    "fig2-ends": fig2_ends,
}


def pages(root):
  """The pages that may hold generated tables (docs/figures-run/ is written by reproduce)."""
  out = ["README.md", os.path.join("benchmarks", "README.md")]
  out += sorted(os.path.relpath(p, root)
                for p in glob.glob(os.path.join(root, "docs", "**", "*.md"), recursive=True))
  return [p for p in out if os.path.exists(os.path.join(root, p))
          and not p.startswith(os.path.join("docs", "figures-run"))]


def render(name, root):
  """The Markdown of table `name` from the result files under `root`."""
  if name not in TABLES:
    raise KeyError(f"unknown table {name!r}; known: {', '.join(sorted(TABLES))}")
  return TABLES[name](root)


def regions(text):
  """(name, current content) of every generated region of a page."""
  return [(m.group(2), m.group(3)) for m in REGION.finditer(text)]


def fill(text, root):
  """The page with every generated region replaced by what the result files give now."""
  if len(BEGIN.findall(text)) != len(END.findall(text)):
    raise ValueError("unbalanced <!-- table: NAME --> / <!-- /table --> markers")
  return REGION.sub(lambda m: f"{m.group(1)}\n{render(m.group(2), root)}\n{m.group(4)}", text)


def regenerate(root=".", check=False):
  """Rewrites (or, with check, only compares) every page; returns the pages that changed."""
  changed = []
  for page in pages(root):
    path = os.path.join(root, page)
    with open(path, encoding="utf-8") as f:
      text = f.read()
    if not BEGIN.search(text):
      continue
    new = fill(text, root)
    if new != text:
      changed.append(page)
      if not check:
        with open(path, "w", encoding="utf-8") as f:
          f.write(new)
  return changed


def main(argv=None):
  parser = argparse.ArgumentParser(prog="python -m drjax.bench.doc_tables", description=__doc__
                                   .split("\n\n")[0])
  parser.add_argument("--root", default=".", help="the repository root (default: .)")
  parser.add_argument("--check", action="store_true",
                      help="change nothing; exit 1 if a page's tables are stale")
  args = parser.parse_args(argv)
  changed = regenerate(args.root, check=args.check)
  for page in changed:
    print(f"{'stale' if args.check else 'rewrote'}: {page}")
  return 1 if (args.check and changed) else 0


if __name__ == "__main__":
  sys.exit(main())
