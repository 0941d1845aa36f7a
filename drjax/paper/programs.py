"""The paper's experiments (Section 6, Appendix A) as a few compiled programs.

Each experiment family is ONE jitted program: training of both algorithms for every seed,
uncertainty level and source instance (``vmap``), then the evaluation on the whole grid of target
domains (``vmap``), and, for the linear MDP, the exact AveSubopt curves. The functions here return
plain dicts of NumPy arrays ("panels"); ``drjax.paper.outputs`` writes them.

This module is the facade: the code lives in ``drjax.paper.presets`` (presets, setup),
``drjax.paper.compile_options`` (XLA optimization levels), ``drjax.paper.linear_mdp_experiment``
(Figure 1, Figure 3, AveSubopt), ``drjax.paper.put_option_experiment`` (Figure 2) and
``drjax.paper.panels`` (means, bands, references); every name is importable from here.
"""

from __future__ import annotations

from drjax.paper import FIGURES, PRESET_NAMES  # noqa: F401  (FIGURES re-exported)
from drjax.paper.compile_options import *  # noqa: F401,F403
from drjax.paper.compile_options import _level_name, _stack  # noqa: F401
from drjax.paper.linear_mdp_experiment import *  # noqa: F401,F403
from drjax.paper.linear_mdp_experiment import _linear_program, paper_critical_q  # noqa: F401
from drjax.paper.panels import _curve, _exact, _fit_slope  # noqa: F401
from drjax.paper.presets import *  # noqa: F401,F403
from drjax.paper.put_option_experiment import *  # noqa: F401,F403
from drjax.paper.put_option_experiment import _put_program  # noqa: F401
