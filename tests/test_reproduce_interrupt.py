"""``drjax reproduce`` stopped by Ctrl-C: exit code 130, one line, only complete figures."""

import os
import signal
import subprocess
import sys


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
