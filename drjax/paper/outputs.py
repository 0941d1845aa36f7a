"""Results files of ``drjax reproduce``: every figure's directory and ``results.md``.

The work is done by ``drjax.paper.plotting`` (figures), ``drjax.paper.files`` (atomic figure
directories) and ``drjax.paper.tables`` (``results.md``); the figure families (``drpvi``,
``r2pvi``, ``r2pvi_time``, ``sensitivity``) draw on those three and never import this module.
Here ``write_summary`` puts every figure's table into ``results.md``, the families' own tables
included, and the names notebooks and scripts use are re-exported.
"""

from __future__ import annotations

from drjax.paper.files import recover, write_figure  # noqa: F401  (re-exported)
from drjax.paper.plotting import (COLORS, LEARNED_MARGIN, PNG_DPI, TITLES,  # noqa: F401
                                  draw_curves, figure, figure_legend, fit_layout, new_figure,
                                  save_curve_figure, save_figure, wrap_text, x_symbol)
from drjax.paper import tables
from drjax.paper.tables import (area, crossing, curve_table, md_cell, md_table,  # noqa: F401
                                seeds_note, sensitivity_table, subopt_table)

# Figures with a table of their own (not a curve table), in the order ``results.md`` shows them:
# figure name -> (module of ``drjax.paper``, its table function).
_OWN_TABLE_SOURCES = {"drpvi": ("drpvi", "summary_table"), "r2pvi": ("r2pvi", "summary_table"),
                      "r2pvi-time": ("r2pvi_time", "summary_table"),
                      "subopt": ("tables", "subopt_table"),
                      "sensitivity": ("tables", "sensitivity_table"),
                      "dimension": ("dimension", "summary_table"),
                      "shifts": ("shifts", "summary_table")}
OWN_TABLES = tuple(_OWN_TABLE_SOURCES)


def own_tables(names=None) -> dict:
  """``{figure name: panels -> results.md lines}`` of the figures with a table of their own, in
  the order ``results.md`` shows them; ``names``: only these figures' (a figure's module is
  imported only when asked for: ``dimension`` and ``shifts`` import the sweeps' pandas, 0.3 s
  that ``drjax reproduce all``, which writes neither, does not pay)."""
  import importlib  # pylint: disable=g-import-not-at-top
  return {name: getattr(importlib.import_module(f"drjax.paper.{module}"), fn)
          for name, (module, fn) in _OWN_TABLE_SOURCES.items() if names is None or name in names}


def write_summary(out_dir: str, sections: dict, header: str) -> str:
  """Writes ``out_dir/results.md`` (atomically) for all figures in ``sections`` {name: panels}:
  ``tables.write_summary`` with ``own_tables(sections)``."""
  return tables.write_summary(out_dir, sections, header, own_tables(sections))
