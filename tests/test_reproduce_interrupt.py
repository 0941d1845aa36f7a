"""``drjax reproduce`` stopped by Ctrl-C: exit code 130, one line, only complete figures."""

import os
import signal
import subprocess
import sys

import pytest


def test_ctrl_c_prints_one_line_exits_130_and_leaves_only_complete_figures(tmp_path):
  """SIGINT once the first family has its results (its figure then being drawn): exit code 130,
  one line, every figure directory complete and no temporary directory."""
  out = tmp_path / "out"
  env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
  env.update(PYTHONUNBUFFERED="1", DRJAX_NO_CACHE="1")
  proc = subprocess.Popen([sys.executable, "-m", "drjax.cli", "reproduce", "fig2", "sensitivity",
                           "--seeds", "2", "--episodes", "3", "--test-episodes", "3",
                           "--out", str(out)], stderr=subprocess.PIPE, text=True, env=env)
  lines = []
  for line in proc.stderr:
    lines.append(line)
    if "computed:" in line:
      proc.send_signal(signal.SIGINT)
      break
  _, rest = proc.communicate(timeout=120)
  lines += rest.splitlines(keepends=True)
  assert proc.returncode == 130, "".join(lines)
  assert lines[-1].startswith("drjax reproduce: interrupted;"), "".join(lines[-5:])
  assert not any("Traceback" in x for x in lines), "".join(lines)
  assert not any("sensitivity computed" in x for x in lines), "".join(lines)  # stopped early
  names = sorted(os.listdir(out))
  assert not [n for n in names if n.startswith(".")], names  # no temporary directories
  for n in names:
    if os.path.isdir(out / n):
      assert any(f.endswith(".png") for f in os.listdir(out / n)), n


_INTERRUPTED_IN_STRING_EXEC = """
import sys

import pytest
import {module} as target

def interrupted(*args, **kwargs):
  exec("raise KeyboardInterrupt", {{}})  # as if Ctrl-C came while a dataclass built its methods

target.{name} = interrupted
from drjax.cli import console_main
sys.argv = ["drjax"] + {argv!r}
console_main()
"""


@pytest.mark.parametrize("command", ["reproduce", "sweep"])
def test_ctrl_c_inside_a_string_exec_still_exits_130(tmp_path, command):
  """A KeyboardInterrupt raised inside a string ``exec`` (how dataclasses and namedtuples build
  their methods, so what a Ctrl-C during a lazy import meets) and caught by the command: under
  ``python -m`` CPython would end the process with SIGINT (-2) instead of exit code 130."""
  module, name, argv = {
      "reproduce": ("drjax.paper.reproduce", "reproduce",
                    ["reproduce", "fig2", "--out", str(tmp_path / "out")]),
      "sweep": ("drjax.cli.sweep", "_run_sweep",
                ["sweep", "--env", "linear-mdp", "--agents", "lsvi-ucb", "--seeds", "1",
                 "--episodes", "2", "--out", str(tmp_path / "sweep")]),
  }[command]
  (tmp_path / "interrupted_cli.py").write_text(
      _INTERRUPTED_IN_STRING_EXEC.format(module=module, name=name, argv=argv))
  env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
  env.update(DRJAX_NO_CACHE="1", PYTHONPATH=os.pathsep.join(
      [str(tmp_path)] + [p for p in [env.get("PYTHONPATH")] if p]))
  proc = subprocess.run([sys.executable, "-m", "interrupted_cli"], capture_output=True, text=True,
                        env=env, cwd=tmp_path, timeout=120)
  assert proc.returncode == 130, proc.stderr
  assert f"drjax {command}: interrupted" in proc.stderr.splitlines()[-1], proc.stderr
  assert "Traceback" not in proc.stderr, proc.stderr
