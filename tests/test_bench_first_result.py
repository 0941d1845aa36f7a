"""drjax.bench.first_result: the structure of its measurements (never a timing)."""

import os

from drjax.bench import doc_tables, first_result


def test_child_measures_each_program():
  # `drjax plan` in a fresh process: one jitted robust DP, traced, lowered and compiled once.
  res = first_result.run_argv(["plan", "--json"])
  assert res["wall_s"] > 0 and res["cpu_s"] > 0 and res["jax_import_s"] > 0
  progs = {p["name"]: p for p in res["programs"]}
  dp = progs["robust_dp"]
  assert dp["traces"] == 1 and dp["compiles"] == 1 and dp["ops"] > 10
  for k in ("trace", "lower", "xla"):
    assert dp[k + "_s"] > 0 and dp[k + "_cpu_s"] >= 0
  assert abs(dp["total_cpu_s"] - dp["trace_cpu_s"] - dp["lower_cpu_s"] - dp["xla_cpu_s"]) < 1e-9
  assert res["compile_cpu_s"] >= dp["total_cpu_s"]


def test_programs_aggregate_outermost_events(tmp_path):
  child = {"events": [("trace", "f", 0.5, 0.4), ("lower", "jit(f)", 0.2, 0.1),
                      ("xla", "jit(f)", 1.0, 0.9), ("trace", "f", 0.1, 0.1),
                      ("xla", "jit(<lambda>)", 0.3, 0.2)]}
  (tmp_path / "jax_ir0000_jit_f_compile.mlir").write_text(
      "module {\n  func.func public @main(%a: tensor<f32>) {\n"
      "    %0 = stablehlo.add %a, %a : tensor<f32>\n    return %0\n  }\n}\n")
  (tmp_path / "jax_ir0001_jit__lambda_compile.mlir").write_text(
      "%0 = stablehlo.sine %a\n%1 = stablehlo.cosine %0\n")
  programs = first_result._programs(child, str(tmp_path))  # pylint: disable=protected-access
  progs = {p["name"]: p for p in programs}
  f, lam = progs["f"], progs["<lambda>"]
  assert (f["traces"], f["compiles"], f["ops"]) == (2, 1, 2)  # func.func and stablehlo.add
  assert abs(f["trace_cpu_s"] - 0.5) < 1e-12 and abs(f["total_s"] - 1.8) < 1e-12
  assert (lam["traces"], lam["compiles"], lam["ops"]) == (0, 1, 2)


def test_doc_table_renders_from_the_results_file():
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  text = doc_tables.render("first-result", root)
  assert "drjax --help" in text and "reproduce all" in text
