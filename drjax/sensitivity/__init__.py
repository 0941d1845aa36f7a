"""Differentiable sensitivity studies of robust values (TV, d-rectangular; Liu & Xu 2024).

Everything here is plain JAX on top of ``drjax.planning`` and ``drjax.robust``: values are
differentiated by ``jax.grad`` and checked against closed forms.

1. **Exact robust values and their gradients** with respect to the full ``rho [H, d]``
   (``rho_gradient``) and to environment parameters (``param_gradient``), for the optimal robust
   value ``V_1^{*,rho}(s_1)`` (``policy=None``) or the robust value of a fixed policy.
   ``rho_gradient`` also returns the **closed form** of Danskin's theorem: each
   ``nu_{h,i} = max_alpha E_{mu_{h,i}}[min(V_{h+1}, alpha)] - rho_{h,i} (alpha - min V_{h+1})``
   (Proposition 3) is a maximum of functions affine in ``rho_{h,i}``, and ``V_1`` depends on
   ``nu_{h,i}`` through the expected feature ``phi_i`` at step ``h`` (the derivative of each inner
   infimum with respect to ``V_{h+1}`` is the adversary's distribution), so::

     dV_1(s_1) / d rho_{h,i} = -(alpha*_{h,i} - min_s V_{h+1}(s)) * E[phi_i(s_h, a_h)]

   with the expectation over ``s_1 ~ init_dist``, actions of the (optimal) policy and transitions
   of the worst-case kernel (``planning.worst_case_kernel``) at steps ``1..h-1``. With the fail
   state of Remark 1 (``min V = 0``) the slope is ``-alpha*_{h,i}`` as in Algorithm 1.
2. **Kinks.** ``V`` is piecewise linear in ``rho`` (kinks where the optimal policy or a maximising
   alpha changes). ``one_sided_derivatives`` returns both one-sided directional derivatives;
   ``find_kinks`` locates every switch along a segment by a grid and bisection. **What
   ``jax.grad`` returns at a kink:** the gradient of the branch the forward pass selected:
   ``jnp.max`` over actions gives the *average* of the gradients of all actions that tie exactly
   (in floating point; JAX's rule for ``max``), and the TV dual takes the *smallest* maximising
   alpha (``duals_tv.tv_worst_case_value``), i.e. the right derivative of that ``nu_{h,i}`` in
   ``rho_{h,i}``. Where a tie is not exact in floating point, ``jax.grad`` is the derivative of
   whichever branch wins by rounding: one of the one-sided derivatives.
3. **Learned estimates.** ``learned_sensitivity``: the pathwise derivative of a finished run's
   optimistic ``V_1^K(s_1) = max_a Q_1^K(s_1, a)`` and of ``nu`` with respect to rho, beta and
   lambda, holding the collected data (``TrainOutput.state``) fixed (the data themselves depend
   on the hyperparameters through the actions taken; that dependence is not differentiated).
4. **Worst-case targets by gradient search** (optax): ``worst_case_search`` minimises the exact
   value of a fixed policy over a differentiable family of target kernels by projected gradient
   steps with restarts. Families: ``d_rectangular_family`` (the TV ball of each factor, whose
   minimum is ``planning.robust_evaluate``), ``sa_rectangular_family`` (a TV ball around each
   ``P_h(.|s, a)``, exact value ``sa_rectangular_evaluate``) and ``factor_q_family`` (Appendix
   A's perturbation of one factor, with its own level ``q_h`` at every step).
   ``project_tv_simplex`` is the exact Euclidean projection onto
   ``{nu in simplex : TV(nu, mu) <= rho}``.

Step ``h`` is 0-indexed (``h = 0`` is the paper's step 1), and so are factors ``i`` (``rho[h, i]``,
``factor``) and the actions of a policy (an integer ``[H, S]`` table of actions in
``[0, A - 1]``). Functions taking a ``LinearModel`` are pure and jit/vmap-able; host-side checks
raise ``TypeError`` / ``ValueError`` naming the argument and its range before anything is traced
(values whenever the argument is concrete).

Modules, one job each (everything public is importable from ``drjax.sensitivity``): ``exact``
(item 1), ``kinks`` (item 2), ``learned`` (item 3), ``families`` (the kernel families of item 4
and ``project_tv_simplex``) and ``search`` (``worst_case_search``); ``_common`` holds the shared
host-side checks and exact values.
"""

from drjax.sensitivity.exact import (RhoGradient, closed_form_rho_gradient, param_gradient,
                                     rho_gradient, robust_value)
from drjax.sensitivity.families import (Family, d_rectangular_family, factor_q_family,
                                        project_tv_simplex, sa_rectangular_evaluate,
                                        sa_rectangular_family)
from drjax.sensitivity.kinks import OneSided, find_kinks, kink_bracket, one_sided_derivatives
from drjax.sensitivity.learned import LearnedSensitivity, learned_sensitivity, learned_value
from drjax.sensitivity.search import SearchResult, default_optimizer, worst_case_search
# Private names other modules use: the search program inside drjax.paper.sensitivity's jit, and
# the tests' feasible starting points.
from drjax.sensitivity.families import _uniform_in_balls  # noqa: F401
from drjax.sensitivity.search import _search  # noqa: F401

__all__ = [
    "RhoGradient",
    "OneSided",
    "LearnedSensitivity",
    "Family",
    "SearchResult",
    "robust_value",
    "rho_gradient",
    "closed_form_rho_gradient",
    "param_gradient",
    "one_sided_derivatives",
    "kink_bracket",
    "find_kinks",
    "learned_value",
    "learned_sensitivity",
    "project_tv_simplex",
    "sa_rectangular_evaluate",
    "d_rectangular_family",
    "sa_rectangular_family",
    "factor_q_family",
    "worst_case_search",
    "default_optimizer",
]
