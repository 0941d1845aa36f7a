"""The console script (``cli.console_main``): exit codes, buffered output and exit handlers."""

import os
import subprocess
import sys


def _drjax(*args):
  env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # buffered, as usual
  return subprocess.run([sys.executable, "-m", "drjax.cli", *args], capture_output=True, text=True,
                        env=env, timeout=120)


def test_piped_output_is_flushed_and_codes_kept(tmp_path):
  res = _drjax("--version")
  assert res.returncode == 0 and res.stdout.startswith("drjax-rl "), res
  res = _drjax()  # the command list, printed without a flush of its own
  assert res.returncode == 0 and "reproduce" in res.stdout and "sweep" in res.stdout, res
  res = _drjax("sweep", "--seeds", "0", "--out", str(tmp_path / "o"))
  assert res.returncode == 2, res
  assert "--seeds" in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
  assert not (tmp_path / "o").exists()


def test_exit_handlers_still_run(tmp_path):
  """Handlers registered with ``atexit`` (a user's here: it writes a file) run before the
  process ends."""
  flag = tmp_path / "ran"
  code = ("import atexit, sys; from drjax import cli; "
          f"atexit.register(lambda: open({str(flag)!r}, 'w').write('x')); "
          "sys.argv = ['drjax', '--version']; cli.console_main()")
  res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
  assert res.returncode == 0 and res.stdout.startswith("drjax-rl "), res
  assert flag.read_text() == "x"
