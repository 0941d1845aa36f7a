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

OWN_TABLES = ("subopt", "sensitivity", "drpvi", "r2pvi", "r2pvi-time", "dimension",
              "shifts")  # not curve tables


def own_tables() -> dict:
  """``{figure name: panels -> results.md lines}`` of the figures with a table of their own, in
  the order ``results.md`` shows them."""
  # pylint: disable-next=g-import-not-at-top
  from drjax.paper import dimension, drpvi, r2pvi, r2pvi_time, shifts
  return {"drpvi": drpvi.summary_table, "r2pvi": r2pvi.summary_table,
          "r2pvi-time": r2pvi_time.summary_table, "subopt": tables.subopt_table,
          "sensitivity": tables.sensitivity_table, "dimension": dimension.summary_table,
          "shifts": shifts.summary_table}


def write_summary(out_dir: str, sections: dict, header: str) -> str:
  """Writes ``out_dir/results.md`` (atomically) for all figures in ``sections`` {name: panels}:
  ``tables.write_summary`` with ``own_tables()``."""
  return tables.write_summary(out_dir, sections, header, own_tables())
