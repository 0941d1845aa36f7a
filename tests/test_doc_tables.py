"""The docs' generated tables equal what the committed result files give now.

The tables between ``<!-- table: NAME -->`` and ``<!-- /table -->`` are written by
``python -m drjax.bench.doc_tables`` (the last step of the command of docs/reproduce.md). A table
edited by hand, or a result file committed without rerunning the generator, fails here.
"""

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from drjax.bench import doc_tables

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _read(root, page):
  with open(os.path.join(root, page), encoding="utf-8") as f:
    return f.read()


PAGES = [p for p in doc_tables.pages(ROOT) if doc_tables.regions(_read(ROOT, p))]


def test_every_table_is_used_and_the_pages_hold_tables():
  used = {name for p in PAGES for name, _ in doc_tables.regions(_read(ROOT, p))}
  assert set(doc_tables.TABLES) == used, f"unused: {set(doc_tables.TABLES) - used}"
  for page in ("README.md", "docs/benchmarks.md", "docs/gpu.md", "docs/offline.md",
               "docs/sweeps.md"):
    assert page in PAGES, f"{page} holds no generated table"


@pytest.mark.parametrize("page", PAGES)
def test_generated_tables_are_current(page):
  text = _read(ROOT, page)
  stale = [name for name, body in doc_tables.regions(text)
           if body.strip() != doc_tables.render(name, ROOT).strip()]
  assert not stale, (f"{page}: tables {stale} differ from the committed result files; run "
                     "`python -m drjax.bench.doc_tables` and commit the pages")
  assert doc_tables.fill(text, ROOT) == text


def test_a_cell_matches_its_file_read_independently():
  # One cell per kind of source, read straight from the JSON (not through the generator).
  with open(os.path.join(ROOT, "benchmarks/results/amd-epyc-2c.json"), encoding="utf-8") as f:
    w = json.load(f)["benchmarks"]["engine"]["workloads"]["linear_1000x100"]
  body = dict(doc_tables.regions(_read(ROOT, "docs/benchmarks.md")))["engine-cpu"]
  row = next(line for line in body.splitlines() if "| 1,000 x 100 |" in line)
  cells = [c.strip() for c in row.strip("|").split("|")]
  assert float(cells[2]) == pytest.approx(w["drjax"]["warm_s"], abs=5e-4)
  assert float(cells[5].strip("*x")) == pytest.approx(w["speedup_vs_best_numpy"], abs=0.05)
  with open(os.path.join(ROOT, "docs/figures-run/notebook/fig2/rho0.3.json"),
            encoding="utf-8") as f:
    lsvi = json.load(f)["curves"]["LSVI-UCB"]["mean"]
  body = dict(doc_tables.regions(_read(ROOT, "docs/reproduce.md")))["fig2-ends"]
  row = next(line for line in body.splitlines() if "notebook preset | LSVI-UCB |" in line)
  last = float(row.strip("|").split("|")[-1].split(":")[1])
  assert last == pytest.approx(lsvi[-1], abs=5e-4)


def _copy(tmp_path):
  """The pages and their sources, copied: what the generator reads and writes."""
  for rel in ["README.md", "benchmarks/results", "docs"]:
    src, dst = os.path.join(ROOT, rel), os.path.join(tmp_path, rel)
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    if os.path.isdir(src):
      shutil.copytree(src, dst, ignore=shutil.ignore_patterns("*.pdf", "*.png"))
    else:
      shutil.copy(src, dst)
  return str(tmp_path)


def test_a_changed_result_file_makes_the_tables_stale(tmp_path):
  root = _copy(tmp_path)
  path = os.path.join(root, f"benchmarks/results/{doc_tables.ENGINE_ENTRY[0]}-2.json")
  with open(path, encoding="utf-8") as f:
    d = json.load(f)
  d["benchmarks"]["engine"]["workloads"]["linear_1x3000"]["speedup_vs_best_numpy"] = 99.0
  with open(path, "w", encoding="utf-8") as f:
    json.dump(d, f)
  assert doc_tables.regenerate(root, check=True) == ["README.md", "docs/benchmarks.md"]
  cmd = [sys.executable, "-m", "drjax.bench.doc_tables", "--root", root, "--check"]
  r = subprocess.run(cmd, capture_output=True, text=True, check=False)
  assert r.returncode == 1 and "stale: README.md" in r.stdout, r.stdout + r.stderr
  # Regenerating writes the new value into both pages, and then they are current.
  assert doc_tables.regenerate(root) == ["README.md", "docs/benchmarks.md"]
  assert "99.0x" in _read(root, "README.md")
  assert doc_tables.regenerate(root, check=True) == []


def test_the_engine_table_reads_only_its_sittings_numbered_runs(tmp_path):
  """``<prefix>-<n>.json`` only: ``amd-epyc-2c-engine-before-rng-hoist-1.json`` is another sitting
  whose name starts with the ``before`` prefix; it must not widen the table's ranges."""
  root = _copy(tmp_path)
  for prefix in doc_tables.ENGINE_ENTRY:
    with open(os.path.join(root, f"benchmarks/results/{prefix}-1.json"), encoding="utf-8") as f:
      d = json.load(f)
    for w in d["benchmarks"]["engine"]["workloads"].values():
      w["speedup_vs_best_numpy"] = 99.0
    with open(os.path.join(root, f"benchmarks/results/{prefix}-other-sitting-1.json"), "w",
              encoding="utf-8") as f:
      json.dump(d, f)
  assert doc_tables.regenerate(root, check=True) == []


def test_a_table_edited_by_hand_is_stale(tmp_path):
  root = _copy(tmp_path)
  text = _read(root, "docs/gpu.md")
  edited = re.sub(r"(\| linear MDP \| 1,000 x 100 \| )[\d.]+", r"\g<1>0.0001", text, count=1)
  assert edited != text
  with open(os.path.join(root, "docs/gpu.md"), "w", encoding="utf-8") as f:
    f.write(edited)
  assert doc_tables.regenerate(root, check=True) == ["docs/gpu.md"]


def test_bad_markers_are_refused():
  with pytest.raises(KeyError, match="unknown table 'nope'"):
    doc_tables.fill("<!-- table: nope -->\n<!-- /table -->\n", ROOT)
  with pytest.raises(ValueError, match="unbalanced"):
    doc_tables.fill("<!-- table: gpu-engine -->\nno end\n", ROOT)
  # A marker quoted inside a sentence is not a region.
  assert doc_tables.fill("see `<!-- table: NAME -->` ... `<!-- /table -->`\n", ROOT) \
      == "see `<!-- table: NAME -->` ... `<!-- /table -->`\n"


def test_the_first_result_goal_cell_follows_the_measured_time(tmp_path):
  """``reproduce all``'s goal cell says "met" at or under 30 s and "missed by" the excess above
  it, from the file's time (it was a fixed "missed" text whatever the figure)."""
  root = _copy(tmp_path)
  path = os.path.join(root, doc_tables.FIRST_RESULT)

  def cell(wall):
    with open(path, encoding="utf-8") as f:
      d = json.load(f)
    d["labels"]["after"]["commands"]["reproduce-all"]["wall_s"] = wall
    with open(path, "w", encoding="utf-8") as f:
      json.dump(d, f)
    body = doc_tables.render("first-result", root)
    row = next(line for line in body.splitlines() if line.startswith("| `drjax reproduce all`"))
    return row.strip("|").split("|")[-1].strip()

  assert cell(29.0) == "met (29.0 s)"
  assert cell(31.25).startswith("**missed by 1.2 s**: compiling")
