"""The test-command benchmark (``drjax.bench.suite_time``) and its row in the first-result table."""

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from drjax.bench import doc_tables, suite_time

OUTPUT = textwrap.dedent("""\
    ........                                                                 [100%]
    ============================= slowest durations ==============================
    12.50s call     tests/test_a.py::test_one[x]
    1.25s setup    tests/test_b.py::test_two
    0.75s call     tests/test_a.py::test_three
    0.01s teardown tests/test_b.py::test_two

    (13 durations < 0.005s hidden.  Use -vv to show these durations.)
    8 passed, 2 warnings in 9.87s
    """)


def test_durations_and_summary_are_read_from_pytest_output():
  total, rows = suite_time.parse_durations(OUTPUT)
  assert total == pytest.approx(12.5 + 1.25 + 0.75 + 0.01)
  assert rows == [("tests/test_a.py", 13.25), ("tests/test_b.py", 1.26)]
  assert suite_time.parse_summary(OUTPUT) == ("8 passed, 2 warnings", 8)
  assert suite_time.parse_summary("= 1 failed, 3 passed in 2.00s =") == ("1 failed, 3 passed", 3)
  assert suite_time.parse_summary("no summary here") == (None, None)


def test_the_plugin_counts_each_processs_compilations(tmp_path):
  """A pytest run of one test that compiles two programs: the plugin's file says two."""
  (tmp_path / "test_two.py").write_text(textwrap.dedent("""\
      import jax, numpy as np
      def test_two_programs():
        jax.jit(lambda x: x + 1)(np.ones(3)).block_until_ready()
        jax.jit(lambda x: x * 2.5)(np.ones(4)).block_until_ready()
      """))
  events = tmp_path / "events"
  events.mkdir()
  env = dict(os.environ, DRJAX_SUITE_EVENTS_DIR=str(events), JAX_PLATFORMS="cpu")
  env.pop("PYTEST_XDIST_WORKER", None)
  r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "drjax.bench._suite_events",
                      "-p", "no:cacheprovider", "-p", "no:xdist", "test_two.py"],
                     cwd=tmp_path, env=env, capture_output=True, text=True, check=False)
  assert r.returncode == 0, r.stdout + r.stderr
  got = suite_time.merge_events(events / f for f in os.listdir(events))
  assert got["xla_count"] == 2 and got["xla_s"] > 0
  assert got["trace_count"] >= 2 and got["lower_count"] == 2


def test_merge_sums_the_workers(tmp_path):
  for name, d in (("gw0", {"xla_s": 1.5, "xla_count": 3}), ("gw1", {"xla_s": 2.25, "xla_count": 4})):
    (tmp_path / f"{name}.json").write_text(json.dumps(d))
  got = suite_time.merge_events(sorted(tmp_path / f for f in os.listdir(tmp_path)))
  assert got == {"xla_count": 7, "xla_s": 3.75}


def test_a_bad_repo_is_refused_before_anything_runs(tmp_path, capsys):
  with pytest.raises(SystemExit) as e:
    suite_time.main(["--json", str(tmp_path / "out.json"), "--repo", str(tmp_path)])
  assert e.value.code == 2 and "--repo" in capsys.readouterr().err
  assert not os.listdir(tmp_path)


def test_the_table_row_says_by_how_much_and_why(tmp_path):
  res = {"machine": {"name": "m-2c"}, "source": {"source_commit": "abcdef0123"},
         "command": "python -m pytest -q", "wall_s": 480.4, "passed": 4715, "test_s": 924.45,
         "jax": {"xla_count": 10523, "xla_s": 371.2, "trace_s": 127.0, "lower_s": 128.4},
         "created": "2026-12-07 06:00:00 +0000"}
  os.makedirs(tmp_path / os.path.dirname(doc_tables.TEST_SUITE))
  (tmp_path / doc_tables.TEST_SUITE).write_text(json.dumps(res))
  row, text = doc_tables._test_suite_row(str(tmp_path))
  assert row[1] == "< 300 s" and row[3] == "480"
  assert row[4].startswith("**missed by 180.4 s**")  # 480.4 - 300
  for part in ("924 s", "10,523 programs 371 s", "tracing 127 s", "lowering 128 s"):
    assert part in row[4]
  assert "`abcdef0`" in text and "2026-12-07 06:00 UTC" in text
  res["wall_s"] = 299.0
  (tmp_path / doc_tables.TEST_SUITE).write_text(json.dumps(res))
  assert doc_tables._test_suite_row(str(tmp_path))[0][4] == "met (299.0 s)"
  os.remove(tmp_path / doc_tables.TEST_SUITE)
  assert doc_tables._test_suite_row(str(tmp_path)) is None


def test_the_test_command_gets_sigint_even_when_the_benchmark_runs_in_the_background():
  """Started with ``&``, the benchmark has SIGINT ignored; its pytest must not inherit that (the
  Ctrl-C tests failed so in a background run)."""
  code = "import signal; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"
  old = signal.signal(signal.SIGINT, signal.SIG_IGN)
  try:
    plain = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True)
    bench = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True, **suite_time.child_options())
  finally:
    signal.signal(signal.SIGINT, old)
  assert plain.stdout.strip() == "False"  # what the benchmark's pytest got before
  assert bench.stdout.strip() == "True"
