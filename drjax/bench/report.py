"""The markdown report of ``drjax bench`` (``format_report``), from ``bench.main``'s result dict."""

from __future__ import annotations

from drjax.bench.reproduce_bench import REFERENCE

def _fmt(x, nd=3):
  if x is None:
    return "-"
  if isinstance(x, bool):
    return "yes" if x else "no"
  if isinstance(x, int):
    return f"{x:,}"
  if isinstance(x, float):
    if x == 0:
      return "0"
    if abs(x) >= 100:
      return f"{x:,.0f}"
    if abs(x) < 1e-3:
      return f"{x:.2e}"
    return f"{x:.{nd}g}" if abs(x) < 1 else f"{x:.{nd + 1}g}"
  return str(x)


def _table(header, rows) -> str:
  lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
  lines += ["| " + " | ".join(_fmt(c) for c in row) + " |" for row in rows]
  return "\n".join(lines)


def _load_line(res) -> str:
  s, e = res.get("load_start", {}), res.get("load_end", {})
  n = len(res.get("attempts", [])) or 1
  return (f"_load average start {s.get('loadavg')} / end {e.get('loadavg')}; cores busy by "
          f"other processes: {_fmt(s.get('cores_busy'))} before, "
          f"{_fmt(res.get('others_cores_busy'))} on average during, "
          f"{_fmt(e.get('cores_busy'))} after; benchmark wall {_fmt(res.get('wall_s'))} s"
          + (f"; kept the least disturbed of {n} attempts" if n > 1 else "") + "_")


def format_report(results: dict) -> str:
  """Markdown report of ``main``'s result dict."""
  m = results["machine"]
  out = [f"# drjax benchmarks ({'quick' if results.get('quick') else 'full'})", "",
         f"Machine `{m['name']}`: {m['cpu_model']}, {m['cores']} cores, {m['memory_gib']} GiB; "
         f"Python {m['python']}, jax {m['jax']}, jaxlib {m['jaxlib']}, numpy {m['numpy']}; "
         f"backend {m['backend']}; default float {m['default_float']}; "
         f"XLA_FLAGS=`{m['XLA_FLAGS']}`. Started {results.get('started')}."]
  b = results["benchmarks"]
  if "engine" in b:
    out += ["", "## engine (drjax vs NumPy, same process, interleaved, median warm)", "",
            b["engine"]["markdown"], "", _load_line(b["engine"])]
  if "offline" in b:
    out += ["", "## offline (drjax agent.fit vs vectorized NumPy, same process, interleaved, "
            "warm min / median)", "", b["offline"]["markdown"], "", _load_line(b["offline"])]
  if "reproduce_all" in b:
    r = b["reproduce_all"]
    c = r["config"]
    out += ["", "## reproduce_all", "",
            f"Sizes: {c['seeds_linear_mdp']} seeds (linear MDP), {c['seeds_put_option']} seeds "
            f"(put option), K = {c['episodes']}, {c['test_episodes']} test episodes, preset "
            f"`{c['preset']}`. Notebooks: {REFERENCE['source']}."]
    sub = r.get("subprocess")
    if sub:
      out += ["", _table(
          ["command (fresh process, no compilation cache)", "ok", "wall s", "CPU s",
           "notebooks s", "speedup"],
          [[f"`{sub['command']}`", sub["ok"], sub["wall_s"], sub["cpu_s"],
            REFERENCE["all_s"] if c["paper_sizes"] else None, sub["speedup_vs_notebooks"]]])]
    rows = [[name, f["cold_s"], f["warm_s"], f["compile_share"], f["compile_s_measured"],
             f["cold_compiles"], f["warm_compiles"], f["reference_s"], f["speedup_cold"],
             f["speedup_warm"]] for name, f in r["families"].items()]
    ip = r["in_process"] or {}
    if ip:
      rows.append(["both", ip["cold_s"], ip["warm_s"], ip["compile_share"], None, None, None,
                   REFERENCE["all_s"] if c["paper_sizes"] else None, ip["speedup_cold"],
                   ip["speedup_warm"]])
    out += ["", _table(["family (in-process)", "cold s", "warm s", "compile share",
                        "compile s (measured)", "compiles cold", "compiles warm",
                        "notebooks s", "speedup cold", "speedup warm"], rows),
            "", _load_line(r)]
  if "seed_scaling" in b:
    r = b["seed_scaling"]
    out += ["", "## seed_scaling", "",
            f"Linear MDP, K = {r['config']['episodes']}, rho_1,4 = 0.5, beta = 1, lambda = 0.1, "
            "exact alpha; "
            "`jit(vmap(make_train))` over seeds, a fresh jit per row. Warm = min over "
            "repeats with new keys. Plan on full buffer: one `vmap(agent.plan)` over the seeds "
            "on the final buffers (a run plans once per episode; K x plan / warm estimates the "
            "planning share of a run).", "",
            _table(["algorithm", "seeds", "first call s", "warm s", "warm median s",
                    "ms / seed", "plan on full buffer ms", "K x plan / warm", "traces",
                    "compiles (first/warm)"],
                   [[x["algorithm"], x["seeds"], x["first_s"], x["warm_s"], x["warm_median_s"],
                     x["ms_per_seed"], x["plan_full_ms"], x["plan_share"], x["traces"],
                     f"{x['first_compiles']}/{x['warm_compiles']}"] for x in r["rows"]]),
            "", _load_line(r)]
  if "alpha_max" in b:
    r = b["alpha_max"]
    c = r["config"]
    out += ["", "## alpha_max", "",
            f"Kernel alone, d = {c['d']}, batch of {c['batch']} (vmap), H = {c['horizon']}, "
            f"{c['dtype']}; warm ms per call (whole batch). Error = exact max - grid max.", "",
            _table(["K", "method", "ms / call", "x exact", "max error", "error bound",
                    "exact+grid vs exact"],
                   [[x["K"], x["method"], x["ms_per_call"], x.get("vs_exact"), x["max_err"],
                     x["err_bound"], x["include_exact_max_diff"]] for x in r["rows"]]),
            "", _load_line(r)]
  if "hyperparameter_grid" in b:
    r = b["hyperparameter_grid"]
    c = r["config"]
    out += ["", "## hyperparameter_grid", "",
            f"`drjax.sweep`: rho_1,4 x beta x lambda = {' x '.join(map(str, c['grid']))} = "
            f"{c['settings']} settings x {c['seeds']} seeds = {c['runs']:,} runs of K = "
            f"{c['episodes']} in one call.", "",
            _table(["call", "s", "traces", "compiles", "compile s"],
                   [["first (new values)", r["first"]["s"], r["first"]["traces"],
                     r["first"]["compiles"], r["first"]["compile_s"]],
                    ["second (other values, same shapes)", r["second"]["s"],
                     r["second"]["traces"], r["second"]["compiles"], r["second"]["compile_s"]]]),
            "", f"Warm: {_fmt(r['ms_per_run_warm'])} ms per (setting, seed) run; no retrace/"
            f"recompile: {_fmt(r['no_recompile'])}; outputs differ: {_fmt(r['outputs_differ'])}.",
            "", _load_line(r)]
  if "first_result" in b:
    out += ["", "## first_result (cold, fresh processes, CPU seconds per program)", "",
            b["first_result"]["markdown"], "", _load_line(b["first_result"])]
  out += ["", f"Total {_fmt(results.get('total_s'))} s."]
  return "\n".join(out)
