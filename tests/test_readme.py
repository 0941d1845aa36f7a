"""Every ```python example of the README and of the docs pages it moved to runs.

Each block runs as a script in a fresh interpreter (drjax defaults: float32) and must print its
result. It inherits the suite's environment, so it compiles at LLVM -O0 like every other test
(``conftest.py``; a block's own ``compiler_options`` keep their level): the same results to float
rounding, 2-2.5x less compile CPU than XLA's default -O3 (docs/offline.md#0: 12.9 -> 5.5 CPU s).
Blocks that appear on several pages run once. Pages whose python blocks are fragments or
scripts taking command-line arguments (docs/agents.md, docs/planning-and-critical-point.md,
docs/findings/put-option-paper-preset.md) are not listed.
"""

import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGES = (
    "README.md",
    "docs/getting-started.md",
    "docs/offline.md",
    "docs/sweeps.md",
    "docs/environments.md",
    "docs/sensitivity.md",
)


def _blocks(page):
  with open(os.path.join(ROOT, page), encoding="utf-8") as f:
    return re.findall(r"^```python\n(.*?)^```", f.read(), re.S | re.M)


BLOCKS = {}  # block text -> "page#index" of its first appearance
for _page in PAGES:
  for _i, _block in enumerate(_blocks(_page)):
    BLOCKS.setdefault(_block, f"{_page}#{_i}")


def test_readme_has_examples():
  assert len(_blocks("README.md")) >= 2


def test_every_page_has_its_examples():
  for page in PAGES:
    assert _blocks(page), f"{page} has no python example"


@pytest.mark.parametrize("block", list(BLOCKS), ids=list(BLOCKS.values()))
def test_readme_block_runs(block, tmp_path):
  script = tmp_path / "block.py"
  script.write_text(block)
  res = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True,
                       timeout=300)
  assert res.returncode == 0, res.stderr[-3000:]
  assert res.stdout.strip()  # every example prints its result
