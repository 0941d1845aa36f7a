"""Kernels for the TV-robust Bellman update of DR-LSVI-UCB (Liu & Xu, AISTATS 2024).

This module re-exports, under their old names, the kernels that now live in three modules
(``from drjax import robust; robust.X`` keeps working):

* ``drjax.linalg``: the ridge regression's linear algebra (``gram``, ``cholesky``,
  ``triangular_inverse``, ``spd_inverse``, ``ridge_factors``, ``ridge_operator``, ``z_of_alpha``)
  and the duals' primitives (``rank_argsort``, prefix sums);
* ``drjax.duals_tv``: the TV duals (``alpha_max_exact``, ``alpha_max_grid``, ``make_grid``,
  ``tv_dual_nu``, ``atom_targets``, ``alpha_max_atoms``, ``tv_worst_case_value``,
  ``tv_worst_case_distribution``);
* ``drjax.duals_kl_chi2``: the chi-square and KL duals over regression atoms (``chi2_dual_max``,
  ``kl_dual_search``, the KL shift).

A module constant (``RANK_SORT_MAX``, ``SORT_FREE_MAX_ATOMS``, ...) is read where it is defined:
to change it, set it on that module, not here.
"""

from __future__ import annotations

# pylint: disable=unused-import
from drjax.duals_kl_chi2 import (
    KL_SEARCH_BOUNDS,
    KL_SEARCH_GRID,
    _kl_shift,
    _kl_shift_margin,
    _kl_support_min,
    _shift_at,
    chi2_dual_max,
    kl_dual_search,
)
from drjax.duals_tv import (
    _METHODS,
    SORT_FREE_MAX_ATOMS,
    _exact_candidates,
    _max_candidates,
    _rho_vector,
    _select,
    _tv_dual,
    _tv_dual_jvp,
    alpha_max_atoms,
    alpha_max_exact,
    alpha_max_grid,
    atom_targets,
    make_grid,
    tv_dual_nu,
    tv_worst_case_distribution,
    tv_worst_case_value,
)
from drjax.linalg import (
    RANK_SORT_MAX,
    UNROLL_MAX_D,
    Array,
    _argsort,
    _float_dtype,
    _prefix_sum,
    _square,
    _unrolled_inverse,
    _use_lapack,
    cholesky,
    gram,
    rank_argsort,
    ridge_factors,
    ridge_operator,
    spd_inverse,
    triangular_inverse,
    z_of_alpha,
)
