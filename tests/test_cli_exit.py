"""The console script's quick exit (``cli.console_main``): exit codes and buffered output kept."""

import json
import os
import subprocess
import sys

import pytest


def _drjax(*args, **env):
  base = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # buffered, as usual
  return subprocess.run([sys.executable, "-m", "drjax.cli", *args], capture_output=True, text=True,
                        env={**base, **env}, timeout=120)


@pytest.mark.parametrize("slow", ["", "1"])
def test_piped_output_is_flushed_and_codes_kept(slow, tmp_path):
  res = _drjax("--version", DRJAX_SLOW_EXIT=slow)
  assert res.returncode == 0 and res.stdout.startswith("drjax-rl "), res
  res = _drjax(DRJAX_SLOW_EXIT=slow)  # the command list, printed without a flush of its own
  assert res.returncode == 0 and "reproduce" in res.stdout and "sweep" in res.stdout, res
  res = _drjax("sweep", "--seeds", "0", "--out", str(tmp_path / "o"), DRJAX_SLOW_EXIT=slow)
  assert res.returncode == 2, res
  assert "--seeds" in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
  assert not (tmp_path / "o").exists()


def test_exit_handlers_still_run(tmp_path):
  """Handlers registered with ``atexit`` (JAX's, logging's, a user's) run before the process
  ends: here one that writes a file."""
  flag = tmp_path / "ran"
  code = ("import atexit, sys; from drjax import cli; "
          f"atexit.register(lambda: open({str(flag)!r}, 'w').write('x')); "
          "sys.argv = ['drjax', '--version']; cli.console_main()")
  res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
  assert res.returncode == 0 and res.stdout.startswith("drjax-rl "), res
  assert flag.read_text() == "x"


def test_a_profiler_still_gets_its_results(tmp_path):
  """Under ``python -m cProfile`` the exit is the usual one, so the profile is written."""
  prof = tmp_path / "p.prof"
  res = subprocess.run([sys.executable, "-m", "cProfile", "-o", str(prof), "-m", "drjax.cli",
                        "--version"], capture_output=True, text=True, timeout=120)
  assert res.returncode == 0, res
  assert prof.stat().st_size > 0


@pytest.mark.parametrize("default", ["", "1"])
def test_the_command_sets_the_gc_thresholds_unless_told_not_to(default):
  """``drjax`` runs its command with ``cli.GC_THRESHOLDS`` (fewer full collections while JAX
  traces); ``DRJAX_DEFAULT_GC=1`` keeps Python's."""
  code = ("import gc, json; from drjax import cli; default = gc.get_threshold(); "
          "cli.main = lambda: print(json.dumps([gc.get_threshold(), default, cli.GC_THRESHOLDS])); "
          "cli.console_main()")
  env = {k: v for k, v in os.environ.items() if k != "DRJAX_DEFAULT_GC"}
  if default:
    env["DRJAX_DEFAULT_GC"] = default
  res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env=env)
  assert res.returncode == 0, res
  now, python_default, ours = json.loads(res.stdout)
  assert ours != python_default
  assert now == (python_default if default else ours)
