"""Every ```python block of the README runs (fresh interpreter, drjax defaults: float32)."""

import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BLOCKS = re.findall(r"```python\n(.*?)```", open(os.path.join(ROOT, "README.md")).read(), re.S)


def test_readme_has_examples():
  assert len(BLOCKS) >= 2


@pytest.mark.parametrize("i", range(len(BLOCKS)))
def test_readme_block_runs(i, tmp_path):
  script = tmp_path / f"block{i}.py"
  script.write_text(BLOCKS[i])
  env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
  res = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True,
                       timeout=300, env=env)
  assert res.returncode == 0, res.stderr[-3000:]
  assert res.stdout.strip()  # every example prints its result
