"""`results.md`: tables that render as Markdown, one column per compared quantity.

Written by ``outputs.write_summary`` from small synthetic panels (no training) and parsed back:
every table has a blank line before it, a separator row, and rows with the header's number of
cells (an unescaped ``|`` inside a cell would add one); the quantity columns carry units and the
number of seeds, and their cells hold the numbers computed from the panels.
"""

import re

import numpy as np
import pytest

from drjax.paper import outputs
from drjax.paper import reproduce as rep

from test_figures import (_linear_panel, _offline_panels, _put_panels, _r2pvi_panels,
                          _sensitivity_panels, _subopt_panels)

DR, LS = "DR-LSVI-UCB", "LSVI-UCB"
_PIPE = re.compile(r"(?<!\\)\|")


def _cells(line):
  """The cells of a Markdown table row (split at unescaped ``|``)."""
  parts = _PIPE.split(line.strip())
  assert parts[0] == "" and parts[-1] == "", f"row must start and end with '|': {line!r}"
  return [p.strip() for p in parts[1:-1]]


def parse_tables(text: str) -> list[dict]:
  """Every table of a Markdown text: ``{"header": [...], "rows": [[...], ...]}``.

  Fails (AssertionError) where a table would not render as intended.
  """
  lines = text.split("\n")
  tables, i = [], 0
  while i < len(lines):
    if not lines[i].startswith("|"):
      i += 1
      continue
    assert i > 0 and lines[i - 1].strip() == "", f"no blank line before the table at {i + 1}"
    header = _cells(lines[i])
    sep = _cells(lines[i + 1])
    assert len(sep) == len(header), f"separator of the table at line {i + 1}"
    assert all(re.fullmatch(r":?-{3,}:?", c) for c in sep), lines[i + 1]
    rows, i = [], i + 2
    while i < len(lines) and lines[i].startswith("|"):
      row = _cells(lines[i])
      assert len(row) == len(header), (
          f"line {i + 1}: {len(row)} cells, header {len(header)}: {lines[i]!r}")
      assert all(c for c in row), f"empty cell on line {i + 1}"
      rows.append(row)
      i += 1
    assert rows, "table without rows"
    tables.append({"header": header, "rows": rows})
  return tables


def _write_figures(out, sections):
  """Each figure's panel files (no drawing) under ``out``."""
  for name, panels in sections.items():
    outputs.write_figure(out, name, panels, plot=lambda panels, base: None)


def _write(tmp_path, sections):
  out = str(tmp_path)
  _write_figures(out, sections)
  return open(outputs.write_summary(out, rep.load_results(out), rep._header())).read()


@pytest.fixture(scope="module")
def table_text(tmp_path_factory):
  fig1 = {"xi0.1_rho0.5": _linear_panel(0.1, 0.5), "xi0.3_rho0.5": _linear_panel(0.3, 0.5)}
  train = {"linear-mdp_xi0.1_rho0.5": _linear_panel(0.1, 0.5),
           **{f"put-option_{t}": p for t, p in _put_panels().items()}}
  sens = _sensitivity_panels()
  sens["xi0.1"]["kinks"] = [0.3, 0.48]  # two kinks: two numbers in one cell, not two cells
  sens["xi0.1"]["one_sided"] = 2 * sens["xi0.1"]["one_sided"]
  sections = {"fig1": fig1, "fig2": _put_panels(), "subopt": _subopt_panels(),
              "drpvi": _offline_for_table(), "r2pvi": _r2pvi_panels(), "sensitivity": sens,
              "train": train}
  return _write(tmp_path_factory.mktemp("tables"), sections), sections


def _offline_for_table():
  panels = _offline_panels()
  for p in panels.values():
    p["config"].update(trajectories=5)
    p["robust_optimal_first_action"] = "(-1,-1,-1,-1)"
    p["findings"] = {n: {"robust_optimal_first_action_share": s, "subopt_mean": m,
                         "first_action_counts": {}, "bound_mean": 1.0}
                     for n, s, m in (("PEVI", 0.0, 0.0046), ("DRPVI", 1.0, 0.0),
                                     ("VA-DRPVI", 1.0, 0.0))}
    p["findings"]["VA-DRPVI vs DRPVI"] = {"seeds_with_identical_policy": 3,
                                          "max_abs_w_difference": 0.0}
  return panels


def _table(tables, first_cell):
  found = [t for t in tables if t["rows"][0][0] == first_cell]
  assert found, first_cell
  return found


def _col(table, start):
  hits = [j for j, h in enumerate(table["header"]) if h.startswith(start)]
  assert len(hits) == 1, (start, table["header"])
  return hits[0]


def test_every_table_parses(table_text):
  text, _ = table_text
  tables = parse_tables(text)
  firsts = {t["rows"][0][0] for t in tables}
  assert {"fig1", "fig2", "subopt", "drpvi", "r2pvi", "sensitivity", "train"} <= firsts


def test_curve_tables_have_a_column_per_quantity_with_units_and_seeds(table_text):
  text, sections = table_text
  tables = parse_tables(text)
  for name, unit, seeds in (("fig1", "return × q", 3), ("fig2", "return × p_u", 4)):
    (t,) = _table(tables, name)
    cross = _col(t, "curves cross at")
    a_ls, a_dr = _col(t, f"AUC {LS} ("), _col(t, f"AUC {DR} (")
    for j in (a_ls, a_dr):
      assert unit in t["header"][j] and f"mean of {seeds} seeds" in t["header"][j]
    for row in t["rows"]:
      p = sections[name][row[1]]
      c = p["curves"]
      x = outputs.crossing(p["x"], c[DR]["mean"], c[LS]["mean"])
      assert row[cross] == ("none" if x is None else f"{x:.3f}")
      assert float(row[a_ls]) == pytest.approx(outputs.area(p["x"], c[LS]["mean"]), abs=1e-4)
      assert float(row[a_dr]) == pytest.approx(outputs.area(p["x"], c[DR]["mean"]), abs=1e-4)
      if name == "fig1":
        assert float(row[_col(t, "exact critical q")]) == pytest.approx(p["critical_q"])
  # drjax train: one table per environment (the x variable and its units differ).
  train = _table(tables, "train")
  assert len(train) == 2
  assert sorted(len(t["rows"]) for t in train) == [1, 2]


def test_subopt_table_has_slopes_and_final_values(table_text):
  text, sections = table_text
  (t,) = _table(parse_tables(text), "subopt")
  s_dr, s_ls = _col(t, f"slope {DR}"), _col(t, f"slope {LS}")
  v_dr, v_ls = _col(t, f"AveSubopt(K) {DR}"), _col(t, f"AveSubopt(K) {LS}")
  assert "robust optimum" in t["header"][v_dr] and "non-robust" in t["header"][v_ls]
  assert "mean of 3 seeds" in t["header"][v_dr]
  for row in t["rows"]:
    p = sections["subopt"][row[1]]
    assert float(row[s_dr]) == pytest.approx(p["slopes"][DR], abs=1e-3)
    assert float(row[s_ls]) == pytest.approx(p["slopes"][LS], abs=1e-3)
    assert float(row[v_dr]) == pytest.approx(p["curves"][DR]["mean"][-1], abs=1e-4)
    assert float(row[v_ls]) == pytest.approx(p["curves"][LS]["mean"][-1], abs=1e-4)


def test_sensitivity_and_offline_tables(table_text):
  text, _ = table_text
  tables = parse_tables(text)
  (t,) = _table(tables, "sensitivity")
  assert any("\\|autodiff - closed form\\|" in h for h in t["header"])  # escaped, one column
  row = [r for r in t["rows"] if r[1] == "xi0.1"][0]
  assert row[_col(t, "kink rho_1,4")] == "0.300000, 0.480000"
  (t,) = _table(tables, "drpvi")
  assert len([h for h in t["header"] if h.startswith("share of seeds")]) == 3
  assert len([h for h in t["header"] if h.startswith("mean SubOpt")]) == 3
  r2 = _table(tables, "r2pvi")
  assert len(r2) == 2  # curves, and the exact rho -> weight map
  assert len(r2[0]["rows"]) == sum(
      1 for p in _r2pvi_panels().values() for n in p["curves"] if "exact" not in n)


def test_md_table_escapes_pipes_and_rejects_ragged_rows():
  lines = outputs.md_table(["a | b", "c"], [["x|y", "1"], ["\\|z", 2]])
  tables = parse_tables("\n" + "\n".join(lines))
  assert tables[0]["header"] == ["a \\| b", "c"]
  assert [r[0] for r in tables[0]["rows"]] == ["x\\|y", "\\|z"]
  with pytest.raises(ValueError):
    outputs.md_table(["a", "b"], [["only one"]])


def test_parser_catches_a_raw_pipe_in_a_cell():
  with pytest.raises(AssertionError):
    parse_tables("\n| a | b |\n|---|---|\n| max |x| | 1 |\n")
  with pytest.raises(AssertionError):
    parse_tables("text\n| a |\n|---|\n| 1 |\n")  # no blank line before the table


def test_results_md_imports_only_the_table_modules_of_its_figures(tmp_path):
  """``results.md`` of the paper's figures does not import the table modules of figures it does
  not show: ``dimension`` and ``shifts`` pull in pandas (0.3 s of every ``drjax reproduce``).
  Checked in a fresh interpreter, writing the synthetic fig1 / subopt / drpvi panels."""
  import subprocess  # pylint: disable=g-import-not-at-top
  import sys  # pylint: disable=g-import-not-at-top
  code = (
      "import sys\n"
      "from drjax.paper import outputs, reproduce as rep\n"
      "out = sys.argv[1]\n"
      "sections = rep.load_results(out)\n"
      "names = [n for n in outputs.OWN_TABLES if n in sections]\n"
      "text = open(outputs.write_summary(out, sections, rep._header())).read()\n"
      "assert 'PEVI' in text and 'AveSubopt' in text, text\n"
      "print(sorted(names), sorted(m for m in ('pandas', 'drjax.paper.dimension',\n"
      "                                        'drjax.paper.shifts') if m in sys.modules))\n")
  out = str(tmp_path)
  _write_figures(out, {"fig1": {"xi0.1_rho0.5": _linear_panel(0.1, 0.5)},
                       "subopt": _subopt_panels(), "drpvi": _offline_for_table()})
  res = subprocess.run([sys.executable, "-c", code, out], capture_output=True, text=True,
                       check=True)
  assert res.stdout.strip().splitlines()[-1] == "['drpvi', 'subopt'] []", res.stdout
  # All of them when the directory holds a figure of each (the dimension study's table).
  assert list(outputs.own_tables()) == list(outputs.OWN_TABLES)
  assert set(outputs.own_tables(["dimension", "fig1"])) == {"dimension"}
