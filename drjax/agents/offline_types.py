"""The offline agents' types and hyperparameters: ``OfflineAgent``, ``OfflineConfig``, each
algorithm's hyperparameter ``NamedTuple`` (its fields the traced hyperparameters, its field
defaults the declared defaults) and their host-side validation (``make_hparams``,
``check_hparams``, ``theory_hparams``). ``drjax.agents.offline`` re-exports everything."""

from __future__ import annotations

import math
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from drjax import _checks
from drjax.agents import base
from drjax.agents import bounds as bounds_lib

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
    if field in ("beta", "lam"):
      _checks.in_range(label, a, 0, lo_open=field == "lam")
    else:  # declared bounds (hparams_type.bounds, registry.BUILTIN_BOUNDS; default [0, inf)),
      # with registry.check_hparam's message (the agent's name as the agent object knows it)
      bounds_lib.bounds(type(hp), field).check(name, field, a)
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



def _check_agent(agent) -> None:
  _checks.instance("agent", agent, OfflineAgent, "an offline agent (drjax.drpvi(...), "
                   "drjax.agents.offline.pevi(...), registry.make(...))")


