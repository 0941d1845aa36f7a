"""Tables of ``drjax reproduce``: ``results.md``, regenerated from the panel JSON files.

Markdown helpers (``md_cell``, ``md_table``), the numbers the tables compare (``crossing``,
``area``), the tables of the curve figures (``curve_table``), of ``subopt`` and of
``sensitivity``, and ``write_summary``, which writes them all together with the tables that
figure families own (``drpvi``, ``r2pvi``, ``r2pvi-time``: their ``summary_table``), passed in by
the caller (``drjax.paper.outputs.write_summary``).
"""

from __future__ import annotations

import os

import numpy as np

from drjax._io import atomic_write


def crossing(x, a, b, tol=1e-9):
  """First x where curve ``a - b`` changes sign (linear interpolation).

  Points where the curves coincide (``|a - b| <= tol``) carry no sign; the crossing is between the
  last point with one sign and the next point with the other. Returns None if the sign never
  changes (including identical curves).
  """
  x, diff = np.asarray(x, float), np.asarray(a, float) - np.asarray(b, float)
  last = None
  for i in range(len(x)):
    if abs(diff[i]) <= tol:
      continue
    if last is not None and diff[last] * diff[i] < 0:
      if i == last + 1:
        return float(x[last] + (x[i] - x[last]) * diff[last] / (diff[last] - diff[i]))
      return float(x[last + 1])  # the curves touch in between
    last = i
  return None


def area(x, y):
  """Area under a curve (trapezoid rule)."""
  x, y = np.asarray(x, float), np.asarray(y, float)
  return float(np.sum((x[1:] - x[:-1]) * (y[1:] + y[:-1]) / 2))


def md_cell(value) -> str:
  """``value`` as one Markdown table cell: ``|`` escaped, line breaks flattened."""
  return str(value).replace("\\|", "|").replace("|", "\\|").replace("\n", " ").strip()


def md_table(header, rows) -> list[str]:
  """A Markdown table (header, separator, rows); every row must have the header's length."""
  n = len(header)
  out = ["| " + " | ".join(md_cell(h) for h in header) + " |", "|" + "---|" * n]
  for r in rows:
    if len(r) != n:
      raise ValueError(f"row has {len(r)} cells, header {n}: {r!r}")
    out.append("| " + " | ".join(md_cell(c) for c in r) + " |")
  return out


def _num(v, fmt: str = ".4f") -> str:
  """A number for a table cell; "–" when missing or not finite."""
  if v is None or not np.isfinite(v):
    return "–"
  return format(float(v), fmt)


def seeds_note(panels) -> str:
  """"mean of N seeds" when every panel has the same number of seeds, else a pointer."""
  vals = {p.get("config", {}).get("seeds") for p in panels}
  return f"mean of {vals.pop()} seeds" if len(vals) == 1 else "mean of the row's seeds"


def _settings_cells(name: str, tag: str, p: dict, evaluation: bool = True) -> list:
  c = p.get("config", {})
  ev = c.get("evaluation", "")
  ev = "exact" if ev.startswith("exact") else ("MC" if ev else "")
  return [name, tag, c.get("preset", "?"), c.get("seeds", "?"), c.get("episodes", "?")] + (
      [ev] if evaluation else []) + [c.get("run", "?")]


def _settings_header(evaluation: bool = True) -> list:
  return ["figure", "panel", "preset", "seeds", "K"] + (
      ["evaluation"] if evaluation else []) + ["run"]


def curve_table(name: str, panels: dict) -> list[str]:
  """``results.md`` table of a curve figure (fig1, fig3, fig2, train): one row per panel with the
  settings of the run that produced it, then one column per compared quantity."""
  from drjax.paper.programs import DR, LS  # pylint: disable=g-import-not-at-top
  lines = []
  by_env = {}
  for tag, p in panels.items():
    by_env.setdefault(p.get("config", {}).get("env", "?"), {})[tag] = p
  for env, group in by_env.items():
    put = env == "put-option"
    x, unit = ("p_u", "return × p_u") if put else ("q", "return × q")
    seeds = seeds_note(group.values())
    money = " (price units)" if put else ""
    lines += ["", f"`{name}`, {env}: expected return{money} of each seed's final greedy policy "
              f"in the target domain, {seeds}, against the target's {x}. Crossing: first {x} "
              f"where the two mean curves cross (linear interpolation; `none`: they never do). "
              f"AUC: area under the mean curve over the {x} grid (trapezoid rule), in {unit}."
              + ("" if put else " Critical q: exact (bisection), and the paper's formula "
                 "(Appendix A)."), ""]
    header = _settings_header() + [
        f"curves cross at {x}", f"AUC {LS} ({unit}; {seeds})", f"AUC {DR} ({unit}; {seeds})",
        f"AUC {DR} − {LS} ({unit})"]
    if not put:
      header += ["exact critical q", "critical q, paper's formula"]
    rows = []
    for tag, p in group.items():
      c, xs = p["curves"], p["x"]
      a_ls, a_dr = (area(xs, c[n]["mean"]) if n in c else None for n in (LS, DR))
      if a_ls is None or a_dr is None:
        cross_s, diff = "–", None
      else:
        cross = crossing(xs, c[DR]["mean"], c[LS]["mean"])
        cross_s, diff = "none" if cross is None else _num(cross, ".3f"), a_dr - a_ls
      row = _settings_cells(name, tag, p) + [cross_s, _num(a_ls), _num(a_dr),
                                             _num(diff, "+.4f")]
      if not put:
        row += [_num(p.get("critical_q"), ".5f"), _num(p.get("critical_q_paper_formula"), ".3f")]
      rows.append(row)
    lines += md_table(header, rows)
  return lines


def subopt_table(panels: dict) -> list[str]:
  """``results.md`` table of ``subopt``: fitted slopes and AveSubopt(K), one column each."""
  from drjax.paper.programs import DR, LS  # pylint: disable=g-import-not-at-top
  seeds = seeds_note(panels.values())
  lines = ["", f"`subopt`: AveSubopt(k), the mean suboptimality of the first k policies "
           f"({seeds}; return units). {DR} is measured against the exact robust optimum (its "
           f"rho), {LS} against the exact non-robust one. Slope: least-squares line of "
           f"log AveSubopt(k) on log k for k ≥ 10 (Theorem 1: at most −1/2 up to its "
           f"estimation-error term).", ""]
  header = _settings_header(evaluation=False) + [
      f"slope {DR}", f"slope {LS}", f"AveSubopt(K) {DR}, vs robust optimum ({seeds})",
      f"AveSubopt(K) {LS}, vs non-robust optimum ({seeds})", "Theorem 1 bound at K"]
  rows = []
  for tag, p in panels.items():
    c, s = p["curves"], p.get("slopes", {})
    bound = c.get("Theorem 1 bound", {}).get("mean", [None])[-1]
    rows.append(_settings_cells("subopt", tag, p, evaluation=False) + [
        _num(s.get(DR), ".3f"), _num(s.get(LS), ".3f"), _num(c[DR]["mean"][-1]),
        _num(c[LS]["mean"][-1]), _num(bound, ".3f")])
  return lines + md_table(header, rows)


def sensitivity_table(panels: dict) -> list[str]:
  """``results.md`` table of ``drjax reproduce sensitivity`` (one row per ||xi||_1)."""
  lines = ["", "`sensitivity` (exact, float64, source domain): kinks of the robust first action "
           "at x1 along rho_1,4 (bisection, and the closed form `rho* = 1 - (1-p) V_2(x2)/2`), "
           "the one-sided derivatives `dV*/drho_1,4` there, the largest difference between "
           "autodiff and the closed form over the 101-point curve, the largest entry of "
           "`|dV*/drho_h,i|` at rho_1,4 = 0.5, and the worst-case values (return) of the policy "
           "robust-optimal for rho_h,4 = 0.5, found by gradient search and exact.", ""]
  header = ["figure", "panel", "kink rho_1,4 (bisection)", "kink, closed form",
            "`dV*/drho_1,4` left of kink", "right of kink",
            "max `|autodiff - closed form|`", "largest `|dV*/drho_h,i|` at (h, i)",
            "its value", "nominal value", "d-rectangular: found", "d-rectangular: exact",
            "s,a-rectangular: found", "s,a-rectangular: exact", "factor-4 q per step: found"]
  rows = []
  for tag, p in panels.items():
    g = np.asarray(p["sensitivity_map"]["autodiff"])
    h, i = np.unravel_index(np.argmax(np.abs(g)), g.shape)
    diff = float(np.max(np.abs(np.asarray(p["grad_autodiff"]) -
                               np.asarray(p["grad_closed_form"]))))
    f = p["worst_case"]["families"]

    def fam(n, key):
      return _num(f.get(n, {}).get(key), ".6f")

    join = lambda vals, fmt: ", ".join(_num(v, fmt) for v in vals) or "none"  # noqa: E731
    rows.append(["sensitivity", tag, join(p["kinks"], ".6f"),
                 _num(p["rho_star_closed_form"], ".6f"),
                 join([o["left"] for o in p["one_sided"]], ".4f"),
                 join([o["right"] for o in p["one_sided"]], ".4f"), f"{diff:.1e}",
                 f"({h + 1}, {i + 1})", _num(g[h, i]), _num(p["worst_case"]["nominal_value"],
                                                            ".6f"),
                 fam("d-rectangular", "found"), fam("d-rectangular", "exact"),
                 fam("s,a-rectangular", "found"), fam("s,a-rectangular", "exact"),
                 fam("factor-4 q at every step", "found")])
  return lines + md_table(header, rows)


def write_summary(out_dir: str, sections: dict, header: str, own_tables: dict) -> str:
  """Writes ``out_dir/results.md`` (atomically) for all figures in ``sections`` {name: panels}.

  The tables are regenerated from the panel JSON files, one row per panel, with the preset,
  seeds, K, evaluation and run (start time and process) each row came from: figures written by
  different runs into one directory are never merged silently. One column per compared
  quantity, units and seeds in the headers; cells escape ``|`` (``md_table``).

  Args:
    out_dir: the results directory.
    sections: ``{figure name: panels}``.
    header: the first lines of the file.
    own_tables: ``{figure name: panels -> lines}`` of the figures with a table of their own,
      written in this order after the curve tables (``curve_table``) of every other figure.

  Returns:
    the path of ``results.md``.
  """
  runs = sorted({p.get("config", {}).get("run", "?") for ps in sections.values()
                 for p in ps.values()})
  note = (f"Rows come from {len(runs)} different runs (column `run`): compare their settings "
          "before comparing their numbers." if len(runs) > 1 else
          "All rows come from one run.")
  lines = [header, "", note]
  for name, panels in sections.items():
    if name not in own_tables:
      lines += curve_table(name, panels)
  for name, table in own_tables.items():
    if name in sections:
      lines += table(sections[name])
  path = os.path.join(out_dir, "results.md")
  atomic_write(path, "\n".join(lines) + "\n")
  return path
