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

import functools
import math
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from drjax import _checks
from drjax import data as data_lib
from drjax import robust
from drjax._precision import exact_matmuls
from drjax.agents import base, compose, pieces
from drjax.agents.base import QFunction

Array = jax.Array

VMIN_MODES = ("auto", "exact", "data", "zero")
VARIANCES = ("alg3", "alg2")
PENALTIES = ("paper", "notebook")
FORMS = ("auto", "buffer", "stats")


class PEVIHParams(NamedTuple):
  """PEVI's traced hyperparameters: ``beta [...]`` penalty multiplier >= 0, ``lam [...]`` ridge
  > 0."""

  beta: Array = 1.0
  lam: Array = 0.1


class DRPVIHParams(NamedTuple):
  """DRPVI's traced hyperparameters: ``rho [..., H, d]`` in [0, 1], ``beta``, ``lam``."""

  rho: Array = 0.0
  beta: Array = 1.0
  lam: Array = 0.1


class VADRPVIHParams(NamedTuple):
  """VA-DRPVI's traced hyperparameters: as DRPVI's plus ``var_shift [...]`` >= 0, the
  pessimistic shift subtracted from the variance estimate (eq. 5.3's ``O~(d H^3 / sqrt(K
  kappa))`` term; 0 in the authors' code)."""

  rho: Array = 0.0
  beta: Array = 1.0
  lam: Array = 0.1
  var_shift: Array = 0.0


class R2PVIHParams(NamedTuple):
  """R2PVI's traced hyperparameters (Tang, Liu & Xu 2025): ``reg_weight [..., H, d]`` > 0, the
  weight of the divergence penalty in the robust *regularized* Bellman equation (the paper's
  lambda; named apart from the ridge ``lam``), ``beta``, ``lam``."""

  reg_weight: Array = 0.1
  beta: Array = 1.0
  lam: Array = 0.1


class DRVILHParams(NamedTuple):
  """DRVI-L's traced hyperparameters (Ma et al. 2022): ``rho [..., H, d]`` >= 0, the KL radius
  (not bounded by 1), ``beta``, ``lam``."""

  rho: Array = 0.0
  beta: Array = 1.0
  lam: Array = 0.1


_RHO_MAX = {DRVILHParams: np.inf}  # KL radii are unbounded; TV radii lie in [0, 1]


class OfflineConfig(NamedTuple):
  """Static structure of an offline agent (hashable)."""

  horizon: int
  feature_dim: int
  num_actions: int
  penalty: str
  truncation: str
  vmin: str
  fail_zero: bool
  tie_break: str
  variance: str = "alg3"
  grid_size: int = 0
  tol: float = 1e-6
  objective: str = "tv"  # the robust objective its SubOpt is measured in (evaluate.offline_subopt)


class OfflineAgent(NamedTuple):
  """An offline agent as pure functions.

  Attributes:
    name: display name (``"DRPVI"``).
    config: ``OfflineConfig``.
    hparams_type: the agent's hyperparameter ``NamedTuple`` class.
    fit: ``fit(dataset, hparams, *, pilot=None, model=None, form="auto") -> QFunction``.
    q_values: ``q_values(qf, h, phi_all, fail) -> [A]`` (pessimistic, truncated).
    act: ``act(qf, h, phi_all, fail) -> int32`` greedy action.
    width: ``width(qf, h, phi) -> []`` the penalty's width without beta (the uncertainty
      function's summand ``sum_i phi_i sqrt([Lambda^-1]_ii)`` for the d-rectangular form).
    needs_pilot: whether ``fit`` needs an independent ``pilot`` dataset (VA-DRPVI).
    variance_weights: VA-DRPVI (Alg. 3) only: ``variance_weights(ds, hparams, pilot, model=None,
      form="auto") -> [H, N]`` the regression weights ``1 / sigma_h^2(phi_tau)`` of ``ds`` (1
      where the variance estimate is at its floor), a diagnostic.
  """

  name: str
  config: OfflineConfig
  hparams_type: type
  fit: Callable
  q_values: Callable
  act: Callable
  width: Callable
  needs_pilot: bool = False
  kind: str = "offline"
  variance_weights: Callable | None = None


class _Atoms(NamedTuple):
  """Step-major regression atoms of one dataset: what every backward induction consumes."""

  g: Array          # [H, n, d] weighted atom features (w_tau phi_tau, or per-state sums)
  nphi: Array       # [H, n, A, d] features of every action at the atoms' next states
  nfail: Array      # [H, n] fail flags of the atoms' next states
  mask: Array       # [H, n] atoms in use
  gram: Array       # [H, d, d] sum w phi phi^T (no ridge)
  reward_sum: Array  # [H, d] sum w phi r
  all_phi: Array | None   # [H, S, A, d] every state's features at step h + 1 (exact vmin)
  all_fail: Array | None  # [S]


def _next_rows(H: int) -> np.ndarray:
  return np.minimum(np.arange(H) + 1, H - 1)


def atoms(ds: data_lib.Dataset, weights: Array | None = None, model=None,
          form: str = "buffer") -> _Atoms:
  """Regression atoms of a dataset (``weights [H, N]`` multiply each sample; ``None``: 1).

  ``form="buffer"``: one atom per transition. ``form="stats"`` (finite ``model``): one atom per
  next state, ``g[h, s'] = sum_{tau: s'_tau = s'} w_tau phi_tau``, with every state's features
  from the model, so the cost no longer grows with N after aggregation.
  """
  _checks.instance("ds", ds, data_lib.Dataset, "a drjax.data.Dataset (data.collect / data.load)")
  _checks.choice("form", form, ("buffer", "stats"))
  H, N = np.shape(ds.phi)[:2]
  if weights is not None:
    _checks.array("weights", weights, (H, N), "[H, N]")
  if model is not None:
    _checks.model(model)
  elif form == "stats":
    raise ValueError("form='stats' (sufficient statistics) needs model= (the environment's "
                     "LinearModel at the data's params)")
  dtype = ds.phi.dtype
  H = ds.phi.shape[0]
  wv = ds.valid.astype(dtype)[None, :]
  if weights is not None:
    wv = wv * weights.astype(dtype)
  gw = ds.phi * wv[..., None]  # [H, N, d]
  gram = jnp.einsum("hnd,hne->hde", gw, ds.phi)
  reward_sum = jnp.einsum("hnd,hn->hd", gw, ds.reward)
  all_phi = all_fail = None
  if model is not None:
    S = model.phi.shape[1]
    all_phi = model.phi[_next_rows(H)].astype(dtype)
    all_fail = jnp.arange(S) == model.fail_state
  if form == "stats":
    S = model.phi.shape[1]
    onehot = (ds.next_state[..., None] == jnp.arange(S)[None, None, :]).astype(dtype)  # [H,N,S]
    g = jnp.einsum("hns,hnd->hsd", onehot, gw)
    count = jnp.einsum("hns,n->hs", onehot, ds.valid.astype(dtype))
    return _Atoms(g, all_phi, jnp.broadcast_to(all_fail, (H, S)), count > 0, gram, reward_sum,
                  all_phi, all_fail)
  mask = jnp.broadcast_to(ds.valid, ds.phi.shape[:2])
  return _Atoms(gw, ds.next_phi, ds.next_fail, mask, gram, reward_sum, all_phi, all_fail)


def _cast(ds: data_lib.Dataset, dtype) -> data_lib.Dataset:
  """``ds`` with its float fields in ``dtype`` (a pilot loaded from a float32 file under x64)."""
  return ds._replace(**{f: getattr(ds, f).astype(dtype)
                        for f in ("phi", "reward", "next_phi", "theta")})


def _resolve_form(form: str, model, ds) -> str:
  _checks.choice("form", form, FORMS)
  if form == "stats" and model is None:
    raise ValueError("form='stats' (sufficient statistics) needs model= (the environment's "
                     "LinearModel at the data's params)")
  if form == "auto":
    return "stats" if model is not None else "buffer"
  return form


# ---------------------------------------------------------------------------------------------
# Hyperparameters (host side).


def _validate_fields(hp, horizon: int, feature_dim: int, name: str) -> None:
  """Field-by-field checks naming the field (leading batch axes allowed); skipped when traced."""
  if not _checks.is_concrete(hp):
    return
  batch = []
  rho_max = _RHO_MAX.get(type(hp), 1.0)
  for field, x in hp._asdict().items():
    label = f"{name} hparams.{field}"
    a = _checks._values(label, x)  # pylint: disable=protected-access
    if field in HD_FIELDS:
      hi = None if (field == "reg_weight" or rho_max == np.inf) else rho_max
      _checks.rho(label, a, (horizon, feature_dim), what="(..., H, d)", batch=True, hi=hi,
                  lo_open=field == "reg_weight")
      batch.append(a.shape[:-2])
      continue
    lo_open = field == "lam"
    _checks.in_range(label, a, 0, lo_open=lo_open)
    if field == "lam" and not jax.config.jax_enable_x64 and np.any(a < base.MIN_LAM_FLOAT32):
      raise ValueError(f"{label} must be >= {base.MIN_LAM_FLOAT32} in float32, got "
                       f"{a.min()} (the ridge system is singular in float32 below it)")
    batch.append(a.shape)
  try:
    np.broadcast_shapes(*batch)
  except ValueError:
    raise ValueError(f"{name} hparams: batch shapes {batch} of the fields must broadcast") \
        from None


def check_hparams(agent: OfflineAgent, hparams) -> None:
  """``TypeError`` for hyperparameters of another agent, ``ValueError`` naming a bad field."""
  _check_agent(agent)
  cls = agent.hparams_type
  if not isinstance(hparams, cls):
    fields = ", ".join(cls._fields)
    raise TypeError(f"hparams: {agent.name} takes {cls.__name__}({fields}) (agent.make_hparams / "
                    f"drjax.agents.make_hparams), got {type(hparams).__name__}")
  _validate_fields(hparams, agent.config.horizon, agent.config.feature_dim, agent.name)


# The built-in hyperparameters' declared defaults (the NamedTuples' field defaults).
EXPERIMENT_DEFAULTS = {"beta": 1.0, "lam": 0.1, "rho": 0.0, "var_shift": 0.0, "reg_weight": 0.1}
HD_FIELDS = ("rho", "reg_weight")  # [H, d] per-(step, factor) hyperparameters


def theory_hparams(agent: OfflineAgent, num_trajectories: int, delta: float = 0.1) -> dict:
  """The papers' theoretical constants for ``agent`` (a dict for ``make_hparams``).

  * PEVI (Jin et al. 2021, Thm. 4.4): ``lambda = 1``, ``beta = d H sqrt(log(2 d H K / delta))``
    (the theorem's absolute constant c taken as 1);
  * DRPVI (Liu & Xu 2024b, proof of Thm. 4.4): ``lambda = 1``,
    ``beta = 4 sqrt(d) H sqrt(iota)``, ``iota = log(2 d H^2 K / delta)``;
  * VA-DRPVI (Thm. 5.2): ``lambda = 1 / H^2``, ``beta = sqrt(d)`` (``O~(sqrt d)``; the log factor
    is left out).
  """
  _check_agent(agent)
  H, d = agent.config.horizon, agent.config.feature_dim
  K = base.check_int("num_trajectories", num_trajectories)
  delta = _checks.number("delta", delta, 0, 1, lo_open=True, hi_open=True)
  if agent.hparams_type is PEVIHParams:
    return {"beta": d * H * math.sqrt(math.log(2 * d * H * K / delta)), "lam": 1.0}
  if agent.hparams_type is DRPVIHParams:
    return {"beta": 4 * math.sqrt(d) * H * math.sqrt(math.log(2 * d * H * H * K / delta)),
            "lam": 1.0}
  if agent.hparams_type is VADRPVIHParams:
    return {"beta": math.sqrt(d), "lam": 1.0 / H**2}
  raise ValueError(f"no theoretical constants recorded for {agent.name} (the R2PVI paper's are "
                   "not verified here; pass beta and lam explicitly)")


def make_hparams(agent: OfflineAgent, *, dtype=None, **values):
  """Validated hyperparameters of ``agent`` (defaults: the hyperparameter NamedTuple's field
  defaults, for the built-in agents the experiments' ``beta = 1``, ``lam = 0.1``, ``rho = 0``,
  ``var_shift = 0``, ``reg_weight = 0.1``; ``theory_hparams`` gives the papers' constants). A
  field without a default and without a value is a ``ValueError`` naming it.

  ``rho`` may be a scalar (every (h, i)) or an ``[..., H, d]`` array; leading batch axes of the
  fields are broadcast to one common batch shape, so ``jax.vmap`` over the result (``in_axes=0``)
  sweeps the grid with one compilation. A name the agent does
  not have (e.g. ``rho`` for PEVI) is a ``ValueError`` listing its hyperparameters; a string,
  boolean, None or NaN value a ``TypeError``/``ValueError`` naming the field.
  """
  _check_agent(agent)
  _checks.dtype("dtype", dtype)
  cls = agent.hparams_type
  unknown = sorted(set(values) - set(cls._fields))
  if unknown:
    raise ValueError(f"{agent.name} has no hyperparameter {', '.join(map(repr, unknown))} (its "
                     f"hyperparameters: {', '.join(cls._fields)})")
  H, d = agent.config.horizon, agent.config.feature_dim
  defaults = cls._field_defaults
  missing = [f for f in cls._fields if f not in values and f not in defaults]
  if missing:
    raise ValueError(f"{agent.name}: hyperparameter {', '.join(map(repr, missing))} has no "
                     f"default; give a value ({', '.join(f'{m}=...' for m in missing)})")
  out = {}
  for f in cls._fields:
    x = values[f] if f in values else defaults[f]
    _checks.require_concrete(f, x, "make_hparams validates its values on the host")
    x = _checks._values(f"{agent.name} hparams.{f}", x)  # pylint: disable=protected-access
    if f in HD_FIELDS and x.ndim == 0:
      x = np.full((H, d), float(x))
    out[f] = x
  hp = cls(**out)
  _validate_fields(hp, H, d, agent.name)
  batch = np.broadcast_shapes(*[x.shape[:-2] if f in HD_FIELDS else x.shape
                                for f, x in hp._asdict().items()])
  hp = cls(**{f: np.broadcast_to(x, batch + ((H, d) if f in HD_FIELDS else ()))
              for f, x in hp._asdict().items()})
  dtype = dtype or jnp.result_type(float)
  return cls(*(jnp.asarray(x, dtype) for x in hp))


# ---------------------------------------------------------------------------------------------
# Algorithms.


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


def _check_agent(agent) -> None:
  _checks.instance("agent", agent, OfflineAgent, "an offline agent (drjax.drpvi(...), "
                   "drjax.agents.offline.pevi(...), registry.make(...))")


def pevi(horizon: int, feature_dim: int, num_actions: int, *, truncation: str = "paper",
         fail_zero: bool = True, tie_break: str = "optimistic", known=None) -> OfflineAgent:
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
  """
  _check_options(horizon, feature_dim, num_actions, "paper", truncation, "zero", fail_zero,
                 tie_break)
  return make_agent("PEVI", PEVIHParams, horizon, feature_dim, num_actions,
                    oracle=compose.Nominal(), width="ellipsoid", truncation=truncation,
                    reward="theta" if known is not None else "regressed", vmin="zero",
                    fail_zero=fail_zero, tie_break=tie_break, known=known)


def drpvi(horizon: int, feature_dim: int, num_actions: int, *, penalty: str = "paper",
          truncation: str = "paper", vmin: str = "auto", fail_zero: bool = True,
          tie_break: str = "optimistic", known=None) -> OfflineAgent:
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
  """
  _check_options(horizon, feature_dim, num_actions, penalty, truncation, vmin, fail_zero,
                 tie_break)
  return make_agent("DRPVI", DRPVIHParams, horizon, feature_dim, num_actions,
                    oracle=compose.TVConstrained(), width=penalty, truncation=truncation,
                    vmin=vmin, fail_zero=fail_zero, tie_break=tie_break, known=known)


def va_drpvi(horizon: int, feature_dim: int, num_actions: int, *, penalty: str = "paper",
             truncation: str = "paper", vmin: str = "auto", fail_zero: bool = True,
             tie_break: str = "optimistic", variance: str = "alg3",
             grid_size: int = 0, known=None) -> OfflineAgent:
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

  Args: as ``drpvi``, plus ``variance`` and ``grid_size`` (Alg. 2's extra grid, static).
  """
  H, d, A = _check_options(horizon, feature_dim, num_actions, penalty, truncation, vmin,
                           fail_zero, tie_break)
  _checks.choice("variance", variance, VARIANCES)
  if grid_size and variance != "alg2":
    raise ValueError("grid_size applies to variance='alg2' only")
  return make_agent("VA-DRPVI", VADRPVIHParams, H, d, A, oracle=compose.TVConstrained(),
                    width=penalty, truncation=truncation, vmin=vmin, fail_zero=fail_zero,
                    tie_break=tie_break, variance=variance, grid_size=grid_size, known=known)


R2PVI_DIVERGENCES = ("tv", "kl", "chi2")


def r2pvi(horizon: int, feature_dim: int, num_actions: int, *, divergence: str = "tv",
          penalty: str = "paper", truncation: str = "paper", vmin: str = "auto",
          fail_zero: bool = True, tie_break: str = "optimistic", known=None) -> OfflineAgent:
  """R2PVI (Tang, Liu & Xu, ICML 2025): pessimistic value iteration for the d-rectangular robust
  *regularized* MDP, ``Q_h = r_h + sum_i phi_i inf_mu { E_mu V_{h+1} + reg_weight D(mu, mu0_{h,i}) }``.

  Per factor, the regularized value of the divergence (``divergence``):

  * ``"tv"``: the closed form ``E min(V, m + reg_weight)``, ``m = min_{s'} V(s')`` (``vmin``: exact
    over a finite model's states, the data minimum, or 0 under a fail state; as DRPVI's);
  * ``"kl"``: ``-reg_weight log E exp(-V / reg_weight)``, stably (``pieces.kl_reg_oracle``);
  * ``"chi2"``: ``max_alpha E[V]_alpha - Var([V]_alpha) / (4 reg_weight)`` from two regressions,
    maximized exactly over alpha in [0, H] (``robust.chi2_dual_max``).

  Each is a ridge estimate per coordinate; penalty ``beta sum_i phi_i sqrt([Lambda^-1]_ii)``
  (``penalty="notebook"``: the public code's form), ``Q = clip(phi^T (theta + w) - penalty, 0,
  H - h + 1)``. Hyperparameters: ``R2PVIHParams(reg_weight, beta, lam)``.
  """
  _checks.choice("divergence", divergence, R2PVI_DIVERGENCES)
  _check_options(horizon, feature_dim, num_actions, penalty, truncation, vmin, fail_zero,
                 tie_break)
  names = {"tv": "R2PVI-TV", "kl": "R2PVI-KL", "chi2": "R2PVI-chi2"}
  oracles = {"tv": compose.TVRegularized(), "kl": compose.KLRegularized(),
             "chi2": compose.Chi2Regularized()}
  return make_agent(names[divergence], R2PVIHParams, horizon, feature_dim, num_actions,
                    oracle=oracles[divergence], width=penalty, truncation=truncation, vmin=vmin,
                    fail_zero=fail_zero, tie_break=tie_break, known=known)


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
           tol: float = 1e-6, known=None) -> OfflineAgent:
  """DRVI-L (Ma et al. 2022; the KL-constrained d-rectangular baseline of the R2PVI paper).

  ``w_{h,i} = max_{alpha > 0} -alpha log zhat_i(alpha) - alpha rho_{h,i}`` with the ridge estimate
  ``zhat(alpha)`` of ``E exp(-V / alpha)`` clipped to ``[exp(-H/alpha), 1]``, by a bounded 1-D
  search (``robust.kl_dual_search``: a log-spaced grid, then golden section to ``tol`` in
  log(alpha)): **not exact**, tolerance-limited. ``rho`` is the KL radius (>= 0, not bounded by
  1). Hyperparameters: ``DRVILHParams(rho, beta, lam)``.
  """
  _check_options(horizon, feature_dim, num_actions, penalty, truncation, "zero", fail_zero,
                 tie_break)
  tol = _checks.number("tol (the search tolerance in log alpha)", tol, 0, 1, lo_open=True,
                       hi_open=True)
  return make_agent("DRVI-L", DRVILHParams, horizon, feature_dim, num_actions,
                    oracle=compose.KLConstrained(float(tol)), width=penalty,
                    truncation=truncation, vmin="zero", fail_zero=fail_zero,
                    tie_break=tie_break, known=known)


def make_agent(name: str, hparams_type: type, horizon: int, feature_dim: int, num_actions: int,
               *, oracle: Callable, width="paper", scale: Callable = pieces.beta_of,
               truncation="paper", reward: str = "theta", vmin: str = "auto",
               fail_zero: bool = True, tie_break: str = "optimistic", known=None,
               variance: str | None = None, grid_size: int = 0) -> OfflineAgent:
  """An offline agent composed of pieces (``drjax.agents.compose``): PEVI, DRPVI, R2PVI, ...
  are each one call of this, and so is a researcher's variant.

  Args:
    name: display name (``"DRPVI"``).
    hparams_type: the agent's hyperparameter ``NamedTuple`` (its fields are the traced
      hyperparameters; the oracle and ``scale`` read them).
    horizon, feature_dim, num_actions: H, d, A.
    oracle: the per-coordinate dual oracle (``compose.TVConstrained()``, ``compose.Nominal()``,
      ``compose.TVRegularized()``, ... or a callable ``(StepInputs, hp) -> (nu, alpha)``).
    width: the penalty's width: ``"paper"`` (d-rectangular), ``"notebook"``, ``"ellipsoid"`` or a
      function ``(pinv, phi) -> width``.
    scale: ``scale(hp) -> []`` the penalty multiplier (default ``hp.beta``).
    truncation: ``"paper"`` (``[0, H - h + 1]``), ``"upper"`` or a function ``(q, top) -> q``.
    reward: ``"theta"`` (known reward parameters, the datasets' ``theta``) or ``"regressed"``
      (ridge regression of the observed rewards).
    vmin: how ``m = min_{s'} V_{h+1}(s')`` is obtained for oracles that use it: ``"auto"``,
      ``"exact"`` (needs ``fit(..., model=...)``), ``"data"`` or ``"zero"`` (fail-state form).
    fail_zero: Q = 0 at the fail state. tie_break: ``"optimistic"`` or ``"first"``.
    known: a ``drjax.agents.lsvi.KnownAction`` (2-action environments): that action's Q is known
      exactly, read off its features (no regression, penalty or truncation); the other action's
      Q is learned. The R2PVI put-option code's exercise.
    variance: ``"alg3"`` / ``"alg2"``: VA-DRPVI's variance-weighted regression from a pilot
      dataset (``fit(..., pilot=...)``); ``None``: unweighted.
    grid_size: ``variance="alg2"``'s extra alpha grid.
  """
  H = base.check_int("horizon H", horizon)
  d = base.check_int("feature_dim d", feature_dim)
  A = base.check_int("num_actions A", num_actions)
  if not callable(oracle):
    raise TypeError(f"oracle must be a dual oracle (drjax.agents.compose.TVConstrained(), ...) "
                    f"or a function (StepInputs, hp) -> (nu, alpha), got {oracle!r}")
  pieces.width_fn(width)  # ValueError for an unknown name
  if not callable(truncation):
    _checks.choice("truncation", truncation, pieces.TRUNCATIONS)
  _checks.function("scale", scale, "hp -> [] (the penalty multiplier)")
  _checks.choice("reward", reward, compose.REWARDS)
  _checks.choice("vmin", vmin, VMIN_MODES)
  _checks.boolean("fail_zero", fail_zero)
  _checks.choice("tie_break", tie_break, base.TIE_BREAKS)
  if not (isinstance(hparams_type, type) and issubclass(hparams_type, tuple)
          and hasattr(hparams_type, "_fields")):
    raise TypeError(f"hparams_type must be a NamedTuple class, got {hparams_type!r}")
  if known is not None:
    _check_known(known, A)
  if variance is not None:
    _checks.choice("variance", variance, VARIANCES)
  grid_size = base.check_int("grid_size", grid_size, 0)
  objective = compose.oracle_attr(oracle, "objective", "tv")
  cfg = OfflineConfig(H, d, A, width, truncation, vmin, bool(fail_zero), tie_break,
                      variance or "alg3", int(grid_size),
                      float(getattr(oracle, "tol", 1e-6)), objective)
  return _compose(name, hparams_type, cfg, oracle, scale, reward, known, variance is not None)


def _check_known(known, num_actions: int) -> None:
  from drjax.agents.lsvi import KnownAction  # pylint: disable=g-import-not-at-top
  _checks.instance("known", known, KnownAction, "a KnownAction (e.g. NOTEBOOK_PUT_KNOWN) or None")
  _checks.function("known.value", known.value, "phi_all [..., A, d] -> [...]")
  if num_actions != 2 or {known.action, known.learned} != {0, 1}:
    raise ValueError(f"known must be a KnownAction over the 2 actions (0 and 1) of a 2-action "
                     f"environment, got {known!r} with A = {num_actions}")


@functools.lru_cache(maxsize=None)
def _compose(name: str, hp_type: type, cfg: OfflineConfig, oracle, scale, reward: str, known,
             weighted: bool) -> OfflineAgent:
  """The agent's pure functions (cached: equal compositions share their compiled programs)."""
  H, d, A = cfg.horizon, cfg.feature_dim, cfg.num_actions
  q_at = functools.partial(pieces.linear_q, sign=-1.0, width_form=cfg.penalty,
                           truncation=cfg.truncation, fail_zero=cfg.fail_zero, known=known)

  def _check_q_args(qf, h, phi_all, fail, lead: bool) -> None:
    _checks.q_args(qf, h, phi_all, fail, H=H, d=d, A=A, lead=lead, scalar_fail=True)

  def q_values(qf: QFunction, h, phi_all, fail, clip: bool = True):
    """``[..., A]`` pessimistic Q_h at ``phi_all [..., A, d]`` (``h``: 0-based step in
    ``[0, H - 1]``; ``fail``: bool)."""
    _check_q_args(qf, h, phi_all, fail, lead=True)
    _checks.boolean("clip", clip)
    return _q_values(qf, h, phi_all, fail, clip)

  def _q_values(qf: QFunction, h, phi_all, fail, clip: bool = True):
    return q_at(qf.w[h], qf.pinv[h], qf.beta, qf.top[h], phi_all, fail, clip=clip)

  def act(qf: QFunction, h, phi_all, fail):
    """Greedy action; ties after truncation go to the largest untruncated value
    (``tie_break="optimistic"``) or the lowest index (``"first"``); with a known action, ties go
    to the learned one. ``h``: 0-based step in ``[0, H - 1]``; ``phi_all [A, d]``."""
    _check_q_args(qf, h, phi_all, fail, lead=False)
    if known is not None:
      q = _q_values(qf, h, phi_all, fail)
      return jnp.where(q[known.learned] >= q[known.action], known.learned,
                       known.action).astype(jnp.int32)
    q = _q_values(qf, h, phi_all, fail, clip=cfg.tie_break == "first")
    return jnp.argmax(q).astype(jnp.int32)

  def width_fn(qf: QFunction, h, phi):
    """The penalty's width at ``phi [..., d]`` of step ``h`` (0-based, ``[0, H - 1]``)."""
    _checks.qfunction("qf", qf, H, d)
    _checks.index("h", h, H, "(step)")
    _checks.numeric("phi", phi)
    if np.ndim(phi) < 1 or np.shape(phi)[-1] != d:
      raise ValueError(f"phi must have shape [..., d] = [..., {d}], got {tuple(np.shape(phi))}")
    return pieces.width(qf.pinv[h], phi, cfg.penalty)

  def vmin_fn(mode, at):
    """``m = min_{s'} V_{h+1}(s')`` of the general dual (None: fail-state form)."""
    if mode == "zero":
      return None
    if mode == "data":
      return lambda v, mask, h, q_next: pieces.data_min(v, mask)
    if at.all_phi is None:
      raise ValueError("vmin='exact' needs fit(..., model=...) (a finite environment's model)")
    return lambda v, mask, h, q_next: jnp.min(jnp.max(q_next(at.all_phi[h], at.all_fail), -1))

  def pass_(at: _Atoms, theta, hp, orc, vmin_mode: str):
    """One backward induction over atoms; returns the QFunction and the targets ``v [H, n]``
    (row h: ``V_{h+1}`` at the atoms)."""
    dtype = at.gram.dtype
    beta = jnp.asarray(scale(hp), dtype)
    lam = jnp.asarray(hp.lam, dtype)
    pinv = jax.vmap(lambda g: pieces.ridge_inverse(g, lam))(at.gram)
    tops = (H - jnp.arange(H)).astype(dtype)
    out = compose.backward_induction(
        H, pinv=pinv, g=at.g, nphi=at.nphi, nfail=at.nfail, mask=at.mask, q_at=q_at,
        oracle=orc, hp=hp, beta=beta, tops=tops, reward=reward, theta=theta,
        reward_sum=at.reward_sum, vmin=vmin_fn(vmin_mode, at))
    qf = QFunction(w=out.w, pinv=pinv, beta=beta, top=tops, nu=out.nu, alpha=out.alpha)
    return qf, out.v

  def variance_weights(ds, pilot_at, pilot_pinv, pilot_v, shift):
    """``[H, N]`` ``1 / sigma_h^2(phi_tau)`` from ridge regressions on the pilot of its targets
    ``V'_{h+1}`` and ``V'^2_{h+1}`` (Alg. 3)."""
    z1 = jnp.einsum("hed,hnd,hn->he", pilot_pinv, pilot_at.g, pilot_v)
    z2 = jnp.einsum("hed,hnd,hn->he", pilot_pinv, pilot_at.g, pilot_v * pilot_v)
    m1 = jnp.clip(jnp.einsum("hnd,hd->hn", ds.phi, z1), 0.0, H)
    m2 = jnp.clip(jnp.einsum("hnd,hd->hn", ds.phi, z2), 0.0, H * H)
    return 1.0 / jnp.maximum(1.0, m2 - m1 * m1 - shift)

  def fit(ds: data_lib.Dataset, hparams, *, pilot=None, model=None, form: str = "auto"):
    """Fits the Q-function to ``ds`` by one backward induction (see the module docstring).

    Args:
      ds: a ``drjax.data.Dataset`` (no batch axis; ``vmap`` for several).
      hparams: the agent's hyperparameters (``make_hparams``).
      pilot: VA-DRPVI's independent pilot dataset D' (required there, ignored elsewhere).
      model: the environment's ``LinearModel`` at the data's params: enables the
        sufficient-statistics form and the exact ``m = min_{s'} V(s')``.
      form: ``"auto"`` (sufficient statistics when ``model`` is given), ``"buffer"``, ``"stats"``.

    Returns:
      the ``QFunction`` (``w = theta + nu`` for the robust algorithms, the ridge solution for
      PEVI; ``pinv`` the (weighted) ``Lambda_h^-1``).
    """
    _checks.instance("ds", ds, data_lib.Dataset, "a drjax.data.Dataset (data.collect / "
                     "data.load)")
    if model is not None:
      _checks.model(model)
    if form == "auto" and agent.needs_pilot and cfg.variance == "alg2":
      form = "buffer"
    form = _resolve_form(form, model, ds)
    _check_hparam_shapes(agent, hparams)
    if agent.needs_pilot and cfg.variance == "alg2" and form == "stats":
      raise ValueError("variance='alg2' runs in the buffer form only: fit(..., form='buffer')")
    if _checks.is_concrete(ds, hparams, pilot, model):
      _check_fit_args(agent, ds, hparams, pilot, model, form)
    return _fit_jit(ds, hparams, pilot, model, form)

  def _vmin_mode(model):
    if cfg.vmin == "auto":
      return "exact" if model is not None else "data"
    return cfg.vmin

  def _pilot_pass(hparams, pilot, model, form, dtype):
    """VA-DRPVI's first stage: the agent's robust pass on the pilot D', unweighted."""
    pilot = _cast(pilot, dtype)
    p_at = atoms(pilot, None, model, form)
    p_qf, p_v = pass_(p_at, pilot.theta.astype(dtype), hparams, oracle, _vmin_mode(model))
    return p_at, p_qf, p_v

  def fit_core(ds, hparams, pilot, model, form):
    dtype = ds.phi.dtype
    theta = ds.theta.astype(dtype)
    if not weighted:
      return pass_(atoms(ds, None, model, form), theta, hparams, oracle, _vmin_mode(model))[0]
    # VA-DRPVI: the pass on the pilot, then the weighted pass on ds.
    p_at, p_qf, p_v = _pilot_pass(hparams, pilot, model, form, dtype)
    if cfg.variance == "alg3":
      wts = variance_weights(ds, p_at, p_qf.pinv, p_v, jnp.asarray(hparams.var_shift, dtype))
      return pass_(atoms(ds, wts, model, form), theta, hparams, oracle, _vmin_mode(model))[0]
    return _alg2(ds, p_at, p_qf, p_v, theta, hparams, _vmin_mode(model), model)

  def _alg2(ds, p_at, p_qf, p_v, theta, hp, vmin_mode, model):
    """Algorithm 2: variance, Gram and regression per candidate alpha (buffer form)."""
    dtype = ds.phi.dtype
    beta = jnp.asarray(scale(hp), dtype)
    lam = jnp.asarray(hp.lam, dtype)
    shift = jnp.asarray(hp.var_shift, dtype)
    at = atoms(ds, None, model, "buffer")
    valid = ds.valid.astype(dtype)
    tops = (H - jnp.arange(H)).astype(dtype)
    eye = jnp.eye(d, dtype=dtype)
    grid = (robust.make_grid(H, cfg.grid_size, dtype) if cfg.grid_size
            else jnp.zeros((0,), dtype))
    vmin_of = vmin_fn(vmin_mode, at)

    def step(nxt, h):
      w_next, pinv_next = nxt[0], nxt[1]
      q_next = lambda phi, fail: q_at(w_next, pinv_next, beta, tops[h + 1], phi, fail)  # noqa
      v = pieces.next_values(q_next, at.nphi[h], at.nfail[h], at.mask[h])
      m = None if vmin_of is None else vmin_of(v, at.mask[h], h, q_next)
      return solve(h, v, m)

    def solve(h, v, m):
      c = jnp.concatenate([jnp.zeros((1,), dtype), jnp.full((1,), H, dtype), jnp.clip(v, 0, H),
                           jnp.clip(p_v[h], 0, H), jnp.clip(grid, 0, H)]
                          + ([] if m is None else [jnp.clip(m, 0, H)[None]]))
      t1 = jnp.minimum(p_v[h][:, None], c[None, :])  # [n', C]
      z1 = p_qf.pinv[h] @ (p_at.g[h].T @ t1)  # [d, C]
      z2 = p_qf.pinv[h] @ (p_at.g[h].T @ (t1 * t1))
      m1 = jnp.clip(ds.phi[h] @ z1, 0.0, H)  # [n, C]
      m2 = jnp.clip(ds.phi[h] @ z2, 0.0, H * H)
      wts = valid[:, None] / jnp.maximum(1.0, m2 - m1 * m1 - shift)
      sig = jnp.einsum("nc,nd,ne->cde", wts, ds.phi[h], ds.phi[h]) + (lam * eye)[None]
      sinv = jax.vmap(robust.spd_inverse)(sig)  # [C, d, d]
      b = jnp.einsum("nc,nd,nc->cd", wts, ds.phi[h], jnp.minimum(v[:, None], c[None, :]))
      z = jnp.einsum("cde,ce->dc", sinv, b)  # [d, C]
      pen = c if m is None else c - jnp.minimum(m, c)
      vals = z - hp.rho[h].astype(dtype)[:, None] * pen[None, :]
      nu = jnp.max(vals, axis=1)
      j = jnp.argmin(jnp.where(vals >= nu[:, None], c[None, :], jnp.inf), axis=1)  # [d]
      diag = jnp.diagonal(sinv, axis1=-2, axis2=-1)  # [C, d]
      pinv_h = jnp.diag(diag[j, jnp.arange(d)])
      return theta[h] + nu, pinv_h, nu, c[j]

    n = ds.phi.shape[1]
    v_end = jnp.zeros((n,), dtype)  # V_{H+1} = 0
    last = solve(H - 1, v_end, None if vmin_mode == "zero" else jnp.zeros((), dtype))
    w, pinv, nu, alpha = pieces.backward(H, step, last)
    return QFunction(w=w, pinv=pinv, beta=beta, top=tops, nu=nu, alpha=alpha)

  def weights_core(ds, hparams, pilot, model, form):
    p_at, p_qf, p_v = _pilot_pass(hparams, pilot, model, form, ds.phi.dtype)
    return variance_weights(ds, p_at, p_qf.pinv, p_v,
                            jnp.asarray(hparams.var_shift, ds.phi.dtype))

  def weights(ds, hparams, pilot, model=None, form: str = "auto"):
    _checks.instance("ds", ds, data_lib.Dataset, "a drjax.data.Dataset")
    if model is not None:
      _checks.model(model)
    form = _resolve_form(form, model, ds)
    _check_hparam_shapes(agent, hparams)
    if _checks.is_concrete(ds, hparams, pilot, model):
      _check_fit_args(agent, ds, hparams, pilot, model, form)
    return _weights_jit(ds, hparams, pilot, model, form)

  _fit_jit = jax.jit(exact_matmuls(fit_core), static_argnums=(4,))
  _weights_jit = jax.jit(exact_matmuls(weights_core), static_argnums=(4,))
  agent = OfflineAgent(name=name, config=cfg, hparams_type=hp_type, fit=fit,
                       q_values=exact_matmuls(q_values), act=exact_matmuls(act),
                       width=exact_matmuls(width_fn), needs_pilot=weighted,
                       variance_weights=weights if weighted else None)
  return agent


def _check_hparam_shapes(agent: OfflineAgent, hparams) -> None:
  """One setting per fit (shapes are static, so this runs on traced values too): rho ``[H, d]``,
  every other field a scalar; a batch is ``jax.vmap``-ed over, not passed in."""
  if not isinstance(hparams, agent.hparams_type):
    check_hparams(agent, hparams)  # the TypeError naming the expected type
  H, d = agent.config.horizon, agent.config.feature_dim
  for f, x in hparams._asdict().items():
    want = (H, d) if f in HD_FIELDS else ()
    if tuple(np.shape(x)) != want:
      raise ValueError(f"{agent.name}.fit takes one hyperparameter setting: hparams.{f} must have "
                       f"shape {want}, got {tuple(np.shape(x))} (jax.vmap fit over a batch of "
                       "settings)")


def _check_fit_args(agent: OfflineAgent, ds, hparams, pilot, model, form) -> None:
  """Host-side checks before anything is traced (``TypeError``/``ValueError`` naming the
  argument)."""
  cfg = agent.config
  dims = (cfg.horizon, cfg.feature_dim, cfg.num_actions)
  data_lib.check_dataset(ds, *dims, name="dataset")
  check_hparams(agent, hparams)
  if agent.needs_pilot:
    if pilot is None:
      raise ValueError(f"{agent.name} needs an independent pilot dataset: fit(dataset, hparams, "
                       "pilot=...) (a second drjax.data.collect, or drjax.data.split)")
    data_lib.check_dataset(pilot, *dims, name="pilot")
    if not np.allclose(np.asarray(pilot.theta), np.asarray(ds.theta)):
      raise ValueError("pilot: its reward parameters theta differ from the dataset's (a pilot "
                       "dataset of a different environment or params)")
  if cfg.vmin == "exact" and model is None:
    raise ValueError(f"{agent.name} with vmin='exact' needs model= (a finite environment's "
                     "LinearModel)")
  if model is not None:
    H, S, A, d = np.shape(model.phi)
    if (H, d, A) != dims:
      raise ValueError(f"model: (H, d, A) = {(H, d, A)} does not match the agent's {dims}")
    if form == "stats":
      data_lib._state_range(ds, S, "dataset")  # pylint: disable=protected-access
      if pilot is not None and agent.needs_pilot:
        data_lib._state_range(pilot, S, "pilot")  # pylint: disable=protected-access

