"""Offline algorithms of the family: PEVI, DRPVI and VA-DRPVI as compositions of ``pieces``.

An offline agent fits one Q-function to a fixed ``drjax.data.Dataset`` by one backward induction:

  ``qf = agent.fit(dataset, hparams, pilot=None, model=None)``

``fit`` is pure and jit/vmap-able over seeds (datasets with a leading axis), hyperparameter grids
(a leading axis on ``hparams``) and dataset sizes (``data.with_size``): the structure (H, d, A and
the options below) is static, every number users sweep is traced. The returned ``QFunction`` is
acted on exactly like an online agent's (``agent.act``), so evaluation, target values and sweeps
treat both kinds alike.

Algorithms (0-indexed steps h, ``top_h = H - h`` is the papers' ``H - h + 1``):

* ``pevi`` -- PEVI (Jin, Yang & Wang 2021): ``w_h = Lambda_h^-1 sum phi (r + V_{h+1})``,
  ``Q_h = clip(phi^T w_h - beta ||phi||_{Lambda_h^-1}, 0, top_h)``.
* ``drpvi`` -- DRPVI (Liu & Xu 2024b, Alg. 1): ``nu_{h,i} = max_{alpha in [0,H]} z_i(alpha) -
  rho_{h,i} (alpha - min_{s'} [V_{h+1}(s')]_alpha)`` (eq. 4.4) maximized exactly over the kinks,
  ``Q_h = clip(phi^T (theta_h + nu_h) - beta sum_i phi_i sqrt([Lambda_h^-1]_ii), 0, top_h)``.
* ``va_drpvi`` -- VA-DRPVI (Alg. 3 by default: one variance estimate per step from an independent
  pilot dataset D', ``sigma^2 = max(1, [phi^T z2]_{[0,H^2]} - [phi^T z1]_{[0,H]}^2 - shift)``,
  weights ``1 / sigma^2`` in the Gram matrix and the regression; Alg. 2, variance per alpha, as
  ``variance="alg2"``).

Options (static) common to the robust algorithms: ``penalty`` (``"paper"`` d-rectangular or the
public code's ``"notebook"`` form), ``truncation`` (``"paper"`` ``[0, top]`` or ``"upper"``, the
public code's ``min(., top)``), ``vmin`` (how ``m = min_{s'} V_{h+1}(s')`` of the general dual is
obtained: ``"auto"`` -- exact over a finite model's states when ``fit`` gets ``model``, else the
data minimum; ``"exact"``, ``"data"``, or ``"zero"``, the fail-state form of DR-LSVI-UCB),
``fail_zero`` (Q = 0 at the fail state) and ``tie_break``.
"""

from __future__ import annotations

import numpy as np

from drjax import _checks
from drjax.agents import base, compose, pieces
# The types, hyperparameters and the builder, re-exported (this module's API is unchanged).
# pylint: disable=unused-import
from drjax.agents.offline_types import (  # noqa: F401
    EXPERIMENT_DEFAULTS, FORMS, HD_FIELDS, PENALTIES, VARIANCES, VMIN_MODES, DRPVIHParams,
    DRVILHParams, OfflineAgent, OfflineConfig, PEVIHParams, R2PVIHParams, VADRPVIHParams,
    _check_agent, _validate_fields, check_hparams, make_hparams, theory_hparams)
from drjax.agents.offline_core import (  # noqa: F401
    _Atoms, _cast, _check_fit_args, _check_hparam_shapes, _compose, _resolve_form, atoms,
    make_agent)


def _check_options(horizon, feature_dim, num_actions, penalty, truncation, vmin, fail_zero,
                   tie_break, allowed_penalties=PENALTIES):
  H = base.check_int("horizon H", horizon)
  d = base.check_int("feature_dim d", feature_dim)
  A = base.check_int("num_actions A", num_actions)
  _checks.choice("penalty", penalty, allowed_penalties)
  _checks.choice("truncation", truncation, pieces.TRUNCATIONS)
  _checks.choice("vmin", vmin, VMIN_MODES)
  if not isinstance(fail_zero, (bool, np.bool_)):
    raise TypeError(f"fail_zero must be a bool, got {fail_zero!r}")
  _checks.choice("tie_break", tie_break, base.TIE_BREAKS)
  return H, d, A


def pevi(horizon: int, feature_dim: int, num_actions: int, *, truncation: str = "paper",
         fail_zero: bool = True, tie_break: str = "optimistic", known=None,
         reward: str | None = None) -> OfflineAgent:
  """PEVI (Jin, Yang & Wang 2021): pessimistic least-squares value iteration.

  ``w_h = Lambda_h^-1 sum_tau phi_tau (r_tau + V_{h+1}(s'_tau))`` (observed rewards regressed),
  ``Q_h = clip(phi^T w_h - beta sqrt(phi^T Lambda_h^-1 phi), 0, H - h + 1)``, greedy policy.

  Args:
    horizon, feature_dim, num_actions: H, d, A.
    truncation: ``"paper"`` clips to ``[0, H - h + 1]``; ``"upper"`` only from above (public code).
    fail_zero: Q = 0 at the fail state (as the family's code and drjax's LSVI-UCB; ``False``:
      PEVI knows nothing of fail states).
    known: a ``KnownAction`` (2-action environments): that action's Q is known exactly
      (no regression, penalty or truncation) and the reward is the known ``theta`` instead of a
      regression: the R2PVI put-option code's PEVI, which knows the exercise payoff.
    tie_break: among actions tied after truncation, ``"optimistic"`` takes the largest
      untruncated value, ``"first"`` the lowest index.
    reward: ``"regressed"`` (the observed rewards, Jin et al.'s), ``"theta"`` (the datasets'
      known reward parameters) or ``None`` (default): ``"theta"`` with ``known``, else
      ``"regressed"``.
  """
  _check_options(horizon, feature_dim, num_actions, "paper", truncation, "zero", fail_zero,
                 tie_break)
  if reward is None:
    reward = "theta" if known is not None else "regressed"
  return make_agent("PEVI", PEVIHParams, horizon, feature_dim, num_actions,
                    oracle=compose.Nominal(), width="ellipsoid", truncation=truncation,
                    reward=reward, vmin="zero",
                    fail_zero=fail_zero, tie_break=tie_break, known=known)


def drpvi(horizon: int, feature_dim: int, num_actions: int, *, penalty: str = "paper",
          truncation: str = "paper", vmin: str = "auto", fail_zero: bool = True,
          tie_break: str = "optimistic", known=None, reward: str = "theta",
          monotone: bool = False) -> OfflineAgent:
  """DRPVI (Liu & Xu, NeurIPS 2024, Algorithm 1) with heterogeneous rho ``[H, d]``, known theta.

  ``nu_{h,i} = max_{alpha in [0, H]} { z_{h,i}(alpha) - rho_{h,i} (alpha - min_{s'}
  [V_{h+1}(s')]_alpha) }`` with ``z_h(alpha) = Lambda_h^-1 sum_tau phi_tau [V_{h+1}(s'_tau)]_alpha``
  (eqs. 4.2, 4.4), maximized exactly: the objective is piecewise linear in alpha with kinks at
  the targets, at ``m = min_{s'} V_{h+1}(s')`` and at 0, H. Penalty ``beta sum_i phi_i
  sqrt([Lambda_h^-1]_ii)``; ``Q_h = clip(phi^T (theta_h + nu_h) - penalty, 0, H - h + 1)``.

  Args:
    penalty: ``"paper"`` or ``"notebook"`` (``beta sqrt(sum_i phi_i^2 [Lambda^-1]_ii)``).
    truncation: ``"paper"`` or ``"upper"`` (public code: never floored at 0).
    vmin: ``m``: ``"auto"`` (exact over the model's states when ``fit`` gets ``model``, else the
      minimum over the data's next states), ``"exact"`` (needs ``model``), ``"data"``, or
      ``"zero"`` (the fail-state form ``max_alpha z_i(alpha) - rho alpha``).
    fail_zero, tie_break: as for ``pevi``.
    reward: ``"theta"`` (default, the paper's: the datasets' known reward parameters,
      ``w_h = theta_h + nu_h``) or ``"regressed"`` (``w_h = Lambda_h^-1 sum phi r + nu_h``, the
      ridge estimate of the reward, for environments without a known reward). The same option
      (same default) for VA-DRPVI, R2PVI and DRVI-L.
    monotone: ``False`` (default, the paper's estimator) or ``True`` (a deviation, opt-in):
      ``z_i(alpha)`` is replaced by its suffix minimum over the sorted breakpoints (the largest
      nondecreasing function below it) before the maximization. With overlapping features
      ``Lambda^-1`` has negative entries, ``z_i`` is not monotone in alpha and the paper's
      per-coordinate max exceeds the plain regression even at ``rho = 0``; with ``monotone`` rho 0
      gives exactly ``z(H)``, the nominal (PEVI) regression of ``V`` (docs/findings/drpvi-gap.md).
  """
  _check_options(horizon, feature_dim, num_actions, penalty, truncation, vmin, fail_zero,
                 tie_break)
  monotone = _checks.boolean("monotone", monotone)
  return make_agent("DRPVI-mono" if monotone else "DRPVI", DRPVIHParams, horizon, feature_dim,
                    num_actions,
                    oracle=compose.TVConstrained(monotone=monotone), width=penalty, truncation=truncation,
                    reward=reward, vmin=vmin, fail_zero=fail_zero, tie_break=tie_break,
                    known=known)


def drpvi_monotone(horizon: int, feature_dim: int, num_actions: int, **options) -> OfflineAgent:
  """``drpvi(..., monotone=True)``: DRPVI with ``z_i`` made nondecreasing in alpha before the
  maximization (an opt-in deviation; registry name ``drpvi-mono``, display ``DRPVI-mono``)."""
  if "monotone" in options:
    raise ValueError("drpvi_monotone is drpvi(monotone=True); do not pass monotone")
  return drpvi(horizon, feature_dim, num_actions, monotone=True, **options)


def va_drpvi_monotone(horizon: int, feature_dim: int, num_actions: int, **options
                      ) -> OfflineAgent:
  """``va_drpvi(..., monotone=True)`` (Alg. 3): VA-DRPVI with ``z_i`` made nondecreasing in alpha
  before the maximization (opt-in deviation; registry name ``va-drpvi-mono``)."""
  if "monotone" in options:
    raise ValueError("va_drpvi_monotone is va_drpvi(monotone=True); do not pass monotone")
  return va_drpvi(horizon, feature_dim, num_actions, monotone=True, **options)


def va_drpvi(horizon: int, feature_dim: int, num_actions: int, *, penalty: str = "paper",
             truncation: str = "paper", vmin: str = "auto", fail_zero: bool = True,
             tie_break: str = "optimistic", variance: str = "alg3",
             grid_size: int = 0, known=None, reward: str = "theta",
             monotone: bool = False) -> OfflineAgent:
  """VA-DRPVI (Liu & Xu, NeurIPS 2024): variance-weighted DRPVI with a pilot dataset D'.

  1. DRPVI on the pilot D' gives ``V'_{h+1}`` (with VA-DRPVI's own rho, beta and lambda and
     options; the paper does not fix the pilot's hyperparameters).
  2. ``variance="alg3"`` (Appendix B, the default): ``z1, z2`` ridge regressions (on D') of
     ``V'_{h+1}`` and ``V'^2_{h+1}``; ``sigma_h^2(phi) = max{1, clip(phi^T z2, 0, H^2) -
     clip(phi^T z1, 0, H)^2 - var_shift}``, once per step.
  3. On D: ``Sigma_h = sum_tau phi phi^T / sigma^2 + lambda I``, ``z_h(alpha) = Sigma_h^-1
     sum_tau phi [V_{h+1}]_alpha / sigma^2``, nu by the exact TV dual as DRPVI, penalty
     ``beta sum_i phi_i sqrt([Sigma_h^-1]_ii)``.

  ``variance="alg2"`` (Algorithm 2): the variance, ``Sigma_h(alpha)`` and ``z_h(alpha)`` depend
  on alpha (targets ``[V']_alpha``); the objective is then not piecewise linear, so nu is the
  maximum over a finite candidate set -- the targets of D and D', m, 0, H and ``grid_size``
  uniform points -- not an exact maximum; the penalty uses ``Sigma_h(alpha_i)^-1`` per
  coordinate. Buffer form only; ``O(n d^3)`` per step.

  Args: as ``drpvi`` (``reward`` and ``monotone`` included; ``monotone`` with
  ``variance="alg3"`` only), plus ``variance`` and ``grid_size`` (Alg. 2's extra grid, static).
  """
  H, d, A = _check_options(horizon, feature_dim, num_actions, penalty, truncation, vmin,
                           fail_zero, tie_break)
  _checks.choice("variance", variance, VARIANCES)
  if grid_size and variance != "alg2":
    raise ValueError("grid_size applies to variance='alg2' only")
  monotone = _checks.boolean("monotone", monotone)
  if monotone and variance != "alg3":
    raise ValueError("monotone=True applies to variance='alg3' only (Alg. 2's objective is not "
                     "a ridge estimate at fixed weights)")
  return make_agent("VA-DRPVI-mono" if monotone else "VA-DRPVI", VADRPVIHParams, H, d, A,
                    oracle=compose.TVConstrained(monotone=monotone),
                    width=penalty, truncation=truncation, reward=reward, vmin=vmin,
                    fail_zero=fail_zero, tie_break=tie_break, variance=variance,
                    grid_size=grid_size, known=known)


R2PVI_DIVERGENCES = ("tv", "kl", "chi2")


def r2pvi(horizon: int, feature_dim: int, num_actions: int, *, divergence: str = "tv",
          penalty: str = "paper", truncation: str = "paper", vmin: str = "auto",
          fail_zero: bool = True, tie_break: str = "optimistic", known=None,
          reward: str = "theta") -> OfflineAgent:
  """R2PVI (Tang, Liu & Xu, ICML 2025): pessimistic value iteration for the d-rectangular robust
  *regularized* MDP, ``Q_h = r_h + sum_i phi_i inf_mu { E_mu V_{h+1} + reg_weight D(mu, mu0_{h,i}) }``.

  Per factor, the regularized value of the divergence (``divergence``):

  * ``"tv"``: the closed form ``E min(V, m + reg_weight)``, ``m = min_{s'} V(s')`` (``vmin``: exact
    over a finite model's states, the data minimum, or 0 under a fail state; as DRPVI's);
  * ``"kl"``: ``-reg_weight log E exp(-V / reg_weight)``, stably (``pieces.kl_reg_oracle``);
  * ``"chi2"``: ``max_alpha E[V]_alpha - Var([V]_alpha) / (4 reg_weight)`` from two regressions,
    maximized exactly over alpha in [0, H] (``duals_kl_chi2.chi2_dual_max``).

  Each is a ridge estimate per coordinate; penalty ``beta sum_i phi_i sqrt([Lambda^-1]_ii)``
  (``penalty="notebook"``: the public code's form), ``Q = clip(phi^T (theta + w) - penalty, 0,
  H - h + 1)``. Hyperparameters: ``R2PVIHParams(reg_weight, beta, lam)``. ``reward``: as for
  ``drpvi`` (``"regressed"``: ``theta`` replaced by ``Lambda^-1 sum phi r``).
  """
  _checks.choice("divergence", divergence, R2PVI_DIVERGENCES)
  _check_options(horizon, feature_dim, num_actions, penalty, truncation, vmin, fail_zero,
                 tie_break)
  names = {"tv": "R2PVI-TV", "kl": "R2PVI-KL", "chi2": "R2PVI-chi2"}
  oracles = {"tv": compose.TVRegularized(), "kl": compose.KLRegularized(),
             "chi2": compose.Chi2Regularized()}
  return make_agent(names[divergence], R2PVIHParams, horizon, feature_dim, num_actions,
                    oracle=oracles[divergence], width=penalty, truncation=truncation,
                    reward=reward, vmin=vmin, fail_zero=fail_zero, tie_break=tie_break,
                    known=known)


def r2pvi_tv(horizon, feature_dim, num_actions, **options) -> OfflineAgent:
  """``r2pvi(..., divergence="tv")``."""
  return r2pvi(horizon, feature_dim, num_actions, divergence="tv", **options)


def r2pvi_kl(horizon, feature_dim, num_actions, **options) -> OfflineAgent:
  """``r2pvi(..., divergence="kl")``."""
  return r2pvi(horizon, feature_dim, num_actions, divergence="kl", **options)


def r2pvi_chi2(horizon, feature_dim, num_actions, **options) -> OfflineAgent:
  """``r2pvi(..., divergence="chi2")``."""
  return r2pvi(horizon, feature_dim, num_actions, divergence="chi2", **options)


def drvi_l(horizon: int, feature_dim: int, num_actions: int, *, penalty: str = "paper",
           truncation: str = "paper", fail_zero: bool = True, tie_break: str = "optimistic",
           tol: float = 1e-6, known=None, reward: str = "theta") -> OfflineAgent:
  """DRVI-L (Ma et al. 2022; the KL-constrained d-rectangular baseline of the R2PVI paper).

  ``w_{h,i} = max_{alpha > 0} -alpha log zhat_i(alpha) - alpha rho_{h,i}`` with the ridge estimate
  ``zhat(alpha)`` of ``E exp(-V / alpha)`` clipped to ``[exp(-H/alpha), 1]``, by a bounded 1-D
  search (``duals_kl_chi2.kl_dual_search``: a log-spaced grid, then golden section to ``tol`` in
  log(alpha)): **not exact**, tolerance-limited. ``rho`` is the KL radius (>= 0, not bounded by
  1). Hyperparameters: ``DRVILHParams(rho, beta, lam)``. ``reward``: as for ``drpvi``.
  """
  _check_options(horizon, feature_dim, num_actions, penalty, truncation, "zero", fail_zero,
                 tie_break)
  tol = _checks.number("tol (the search tolerance in log alpha)", tol, 0, 1, lo_open=True,
                       hi_open=True)
  return make_agent("DRVI-L", DRVILHParams, horizon, feature_dim, num_actions,
                    oracle=compose.KLConstrained(float(tol)), width=penalty,
                    truncation=truncation, reward=reward, vmin="zero", fail_zero=fail_zero,
                    tie_break=tie_break, known=known)
