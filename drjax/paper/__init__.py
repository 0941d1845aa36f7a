"""drjax's paper programs: the figures, presets and results files of `drjax reproduce`.

The names below are importable without JAX, so the command line can validate flags cheaply.
"""

# the NAMEs of `drjax reproduce` (drpvi: the offline DRPVI paper's Figure 2, drjax.paper.drpvi)
FIGURES = ("fig1", "fig3", "fig2", "subopt", "sensitivity", "drpvi", "r2pvi", "r2pvi-time",
           "dimension", "shifts")
# what `drjax reproduce all` runs: every figure but the timing study (r2pvi-time, 1-2 minutes of
# repeated timed fits; it measures the machine, not the algorithms) and the dimension study
# (minutes: drjax.paper.dimension) and the gymnax shift study (minutes: drjax.paper.shifts)
LONG_FIGURES = ("r2pvi-time", "dimension", "shifts")
ALL_FIGURES = tuple(f for f in FIGURES if f not in LONG_FIGURES)
DIMENSION_GRIDS = ("smoke", "quick", "default", "full")  # keys of drjax.paper.dimension.GRIDS
PRESET_NAMES = ("paper", "notebook")  # keys of drjax.paper.programs.PRESETS


def setup(preset: str = "paper", experiment: str = "linear-mdp", **kwargs):
  """The environment, params and both agents of a preset (see ``drjax.paper.programs.setup``)."""
  from drjax.paper import programs  # pylint: disable=g-import-not-at-top  (imports JAX)
  return programs.setup(preset, experiment, **kwargs)
