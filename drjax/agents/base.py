"""Shared pieces of the LSVI-type agents: hyperparameters, agent state, Q-functions.

An agent is a ``NamedTuple`` of pure functions over an explicit state (optax's
``GradientTransformation`` pattern):

* ``init(theta, lam) -> AgentState`` (buffer form: empty fixed-capacity buffers) and
  ``init_stats(theta, S, lam) -> StatsState`` (sufficient statistics of a finite environment);
* ``plan(state, hparams, model=None) -> QFunction``: backward induction h = H..1 over the
  regression atoms (Algorithm 1, lines 3-13); ``update`` adds a finished episode to either form;
* ``q_values(qf, h, phi_all, fail) -> [A]`` and ``act(qf, h, phi_all, fail) -> int``;
* ``observe(state, h, phi, reward, next_phi_all, next_fail) -> AgentState`` stores one transition of
  the current episode; ``end_episode(state)`` advances the episode counter;
  ``store_episode(state, k, phi, reward, next_phi, next_fail)`` does both for a whole episode
  (the state forms and these updates live in ``drjax.agents.state``, re-exported here).

Hyperparameters users sweep (rho, beta, lambda) are a traced pytree (``HParams``); structure
(H, d, A, capacity, variants) is static, so one compilation serves a whole grid.

Indices are 0-based everywhere: step ``h`` in ``[0, H - 1]`` (``h = 0`` is the paper's step 1),
factor ``i`` in ``[0, d - 1]``, action ``a`` in ``[0, A - 1]``, buffer slot ``k`` in
``[0, capacity - 1]``. Every function and agent method checks its arguments on the host
(``TypeError`` for a wrong kind, ``ValueError`` naming the argument and its range; values only
when concrete, so the checks cost nothing inside ``jit``).
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from drjax import _checks
from drjax.agents import pieces
from drjax.agents.pieces import sqrt_diag  # noqa: F401  (re-exported)
# The state forms and their updates, re-exported (this module's names are unchanged).
# pylint: disable=unused-import
from drjax.agents.state import (  # noqa: F401
    SOLVERS, AgentState, StatsState, _check_buffer_state, _check_room, _dims_args,
    _downdate_quad, _empty_regression, _init_pinv, _norm_loss, _quad_of_new, _rank_one,
    _sherman_morrison, end_episode, init_state, init_stats_state, observe, store_episode,
    update_stats, valid_mask)
# pylint: enable=unused-import

Array = jax.Array

BONUS_FORMS = ("paper", "notebook")
CLIP_FORMS = ("paper", "notebook")
ALPHA_METHODS = ("exact", "grid", "exact+grid")
TIE_BREAKS = ("optimistic", "first")  # SOLVERS: in drjax.agents.state
MIN_LAM_FLOAT32 = 1e-5  # below this, float32 ridge factorizations of rank-deficient Grams fail


class HParams(NamedTuple):
  """Traced hyperparameters; batch them with ``jax.vmap`` (or ``stack_hparams``).

  Attributes:
    rho: ``[H, d]`` uncertainty levels rho_{h,i} in [0, 1] (ignored by LSVI-UCB).
    beta: ``[]`` bonus multiplier, >= 0.
    lam: ``[]`` ridge regularizer lambda, > 0.

  The field defaults are the declared defaults of the registry and the sweeps (the
  experiments' rho 0, beta 1, lambda 0.1).
  """

  rho: Array = 0.0
  beta: Array = 1.0
  lam: Array = 0.1


@_checks.register
class QFunction(NamedTuple):
  """The optimistic Q-functions of one episode, for all steps.

  ``Q_h(s, a) = clip(phi(s,a) @ w[h] + bonus_h(phi), 0, top[h])`` (0 at the fail state when the
  agent zeroes it).

  Attributes:
    w: ``[H, d]`` linear weights (theta_h + nu_h for DR-LSVI-UCB, the ridge solution for LSVI-UCB).
    pinv: ``[H, d, d]`` ``Lambda_h^-1``.
    beta: ``[]`` bonus multiplier.
    top: ``[H]`` upper clipping level per step.
    nu: ``[H, d]`` the robust regression weights nu_h (zeros for LSVI-UCB).
    alpha: ``[H, d]`` maximizing alpha of the TV dual per (h, i) (zeros for LSVI-UCB).
  """

  w: Array
  pinv: Array
  beta: Array
  top: Array
  nu: Array
  alpha: Array


class AgentConfig(NamedTuple):
  """Static structure of an agent (hashable)."""

  horizon: int
  feature_dim: int
  num_actions: int
  capacity: int
  bonus: str
  clip: str
  alpha: str
  grid_size: int
  tie_break: str
  fail_zero: bool
  solver: str
  known: object = None


class Agent(NamedTuple):
  """An online linear-function-approximation agent as pure functions (see module docstring and
  ``drjax.agents.registry`` for the protocol the engine, evaluation and sweeps rely on).

  ``uncertainty(qf, h, phi) -> []`` is the agent's own width (its bonus with beta = 1:
  DR-LSVI-UCB's d-rectangular ``sum_i phi_i sqrt([Lambda_h^-1]_ii)``, LSVI-UCB's elliptical
  ``sqrt(phi^T Lambda_h^-1 phi)``, a custom width's value; ``config.bonus`` names it);
  ``make_train``'s ``estimation_error`` is Theorem 1's d-rectangular width for every agent;
  ``update(state, ..., slot=k)`` stores a finished episode (``slot``: an unbatched
  buffer slot, kept in place under ``vmap``).
  """

  name: str
  config: AgentConfig
  init: Callable
  plan: Callable
  q_values: Callable
  act: Callable
  observe: Callable
  end_episode: Callable
  store_episode: Callable
  bonus: Callable
  init_stats: Callable
  update: Callable
  regression_features: Callable
  uncertainty: Callable | None = None
  hparams_type: type = HParams
  kind: str = "online"
  # Optional engine hooks (``make_train``): ``update_takes_qf`` -- ``update`` also gets the
  # episode's ``qf=`` and the run's ``hparams=`` (a variance-weighted agent weights the
  # episode's data with its value function and its estimator's hyperparameters);
  # ``counters(state) -> (policies, dual_calls)`` -- int32 counts of the policies computed and
  # of the dual problems solved so far (rare-switching agents); ``duals_per_plan`` -- the dual
  # problems one ``plan`` solves (``(H - 1) d`` for a robust agent, 0 for a nominal one), from
  # which ``make_train`` counts for agents that plan every episode.
  update_takes_qf: bool = False
  counters: Callable | None = None
  duals_per_plan: int | None = None


# ---------------------------------------------------------------------------------------------
# Hyperparameters: construction and validation (host side, before anything is traced).


def _hparam_values(hparams, names=("rho", "beta", "lam")) -> list[np.ndarray]:
  """The concrete fields as float64 arrays (``TypeError`` naming a field that is traced, a
  string, a boolean or None)."""
  out = []
  for f in names:
    x = getattr(hparams, f)
    _checks.require_concrete(f, x, "validation reads its values")
    out.append(_checks._values(f, x))  # pylint: disable=protected-access
  return out


def validate_hparams(hparams: HParams, horizon: int, feature_dim: int) -> None:
  """Raises ``ValueError``/``TypeError`` naming the argument and the allowed range: rho
  ``[..., H, d]`` in [0, 1], beta >= 0, lam > 0 (``>= MIN_LAM_FLOAT32`` in float32), all finite,
  batch shapes broadcasting. Accepts leading batch axes."""
  if not all(hasattr(hparams, f) for f in ("rho", "beta", "lam")):
    raise TypeError(f"hparams must be an HParams(rho, beta, lam) (drjax.make_hparams), got "
                    f"{type(hparams).__name__}")
  H = _checks.integer("horizon", horizon, 1)
  d = _checks.integer("feature_dim", feature_dim, 1)
  rho, beta, lam = _hparam_values(hparams)
  _checks.rho("rho", rho, (H, d), what="(..., H, d)", batch=True)
  _checks.in_range("beta", beta, 0)
  _checks.in_range("lam (lambda)", lam, 0, lo_open=True)
  if not jax.config.jax_enable_x64 and np.any(lam < MIN_LAM_FLOAT32):
    raise ValueError(
        f"lam (lambda) must be >= {MIN_LAM_FLOAT32} in float32, got {lam.min()}: Lambda = "
        "sum phi phi^T + lam I is numerically singular in float32 until the features span R^d, "
        "which gives NaN Q-functions; use a larger lam or float64 (jax_enable_x64)")
  batch = [rho.shape[:-2], beta.shape, lam.shape]
  try:
    _checks.broadcast_shapes(*batch)
  except ValueError:
    raise ValueError(f"rho batch shape {batch[0]}, beta shape {batch[1]} and lam shape {batch[2]} "
                     "must broadcast") from None


def rho_array(horizon: int, feature_dim: int, value=0.0, at=None) -> np.ndarray:
  """An ``[H, d]`` rho array: ``value`` everywhere, or only at the 0-indexed (h, i) pairs ``at``.

  ``rho_array(3, 4, 0.5, at=[(0, 3)])`` is the paper's rho_{1,4} = 0.5, all others 0.

  Args:
    horizon: H >= 1.
    feature_dim: d >= 1.
    value: a finite number >= 0 (or, without ``at``, an array broadcasting to ``[H, d]``).
    at: ``None`` (every entry) or a sequence of 0-based ``(h, i)`` pairs, ``h`` in ``[0, H - 1]``
      (step ``h + 1`` of the paper) and ``i`` in ``[0, d - 1]`` (factor ``i + 1``).
  """
  H = _checks.integer("horizon", horizon, 1)
  d = _checks.integer("feature_dim", feature_dim, 1)
  _checks.require_concrete("value", value)
  _checks.in_range("value", value, 0)
  rho = np.zeros((H, d))
  if at is None:
    try:
      rho[...] = np.asarray(value, np.float64)
    except ValueError:
      raise ValueError(f"value must be a number or broadcast to (H, d) = ({H}, {d}), got shape "
                       f"{np.shape(value)}") from None
    return rho
  if np.ndim(value) != 0:
    raise ValueError(f"value must be a number when at is given, got shape {np.shape(value)}")
  pairs = _pairs("at", at)
  for k, (h, i) in enumerate(pairs):
    _checks.index(f"at[{k}][0] (step h)", h, H)
    _checks.index(f"at[{k}][1] (factor i)", i, d)
    rho[h, i] = value
  return rho


def _pairs(name: str, at) -> list:
  """``at`` as a list of (h, i) pairs; ``TypeError`` (with the fix) otherwise."""
  hint = f"{name} must be a sequence of 0-based (h, i) pairs, e.g. [(0, 3)]"
  if isinstance(at, (str, bytes)) or not hasattr(at, "__iter__"):
    raise TypeError(f"{hint}, got {type(at).__name__} {at!r}")
  pairs = list(at)
  for p in pairs:
    if isinstance(p, (str, bytes)) or not hasattr(p, "__len__") or len(p) != 2:
      one = " (one pair needs its own brackets: [(h, i)])" if not hasattr(p, "__len__") else ""
      raise TypeError(f"{hint}{one}, got {at!r}")
  return pairs


def make_hparams(horizon: int, feature_dim: int, *, rho=0.0, beta=1.0, lam=1.0,
                 dtype=None) -> HParams:
  """Validated ``HParams``. ``rho`` is a scalar (all (h, i)) or an ``[..., H, d]`` array.

  The default ``lam = 1`` is Theorem 1's choice (the regret bound is stated for lambda = 1); the
  paper's experiments and ``drjax reproduce`` use the authors' 0.1 (``drjax.paper.setup``).

  Leading batch axes of rho / beta / lam are allowed and broadcast against each other; use
  ``jax.vmap`` over the result (``in_axes=0``) to sweep them with a single compilation. Every
  argument is checked on the host first: ``TypeError`` for strings, booleans, None or non-integer
  dimensions, ``ValueError`` (naming the argument and its range) for values outside rho in
  [0, 1], beta >= 0, lam > 0 or for NaN. rho's entry ``[h, i]`` is step ``h + 1`` and factor
  ``i + 1`` of the paper (0-based indices, see ``rho_array``).

  Why ``lam = 1`` by default: it is the value Theorem 1 is proved for (Algorithm 1's input
  lambda = 1), so a call without arguments is the analysed algorithm. The paper's experiments,
  the authors' notebooks, ``drjax reproduce`` and ``drjax train`` use ``lam = 0.1`` (the notebooks'
  value; a smaller ridge term lets the first episodes' data dominate sooner): pass it explicitly
  to reproduce them. ``beta = 1`` is the experiments' value (Theorem 1's ``c d H sqrt(iota)`` is far
  larger; see ``evaluate.theorem1_bound``).
  """
  H = _checks.integer("H (horizon)", horizon, 1)
  d = _checks.integer("d (feature_dim)", feature_dim, 1)
  _checks.dtype("dtype", dtype)
  for name, x in (("rho", rho), ("beta", beta), ("lam", lam)):
    _checks.require_concrete(name, x, "make_hparams validates its values on the host")
  rho_np = _checks._values("rho", rho)  # pylint: disable=protected-access
  if rho_np.ndim == 0:
    rho_np = np.full((H, d), float(rho_np))
  hp = HParams(rho=rho_np, beta=_checks._values("beta", beta),  # pylint: disable=protected-access
               lam=_checks._values("lam", lam))  # pylint: disable=protected-access
  validate_hparams(hp, H, d)
  dtype = dtype or jnp.result_type(float)
  return HParams(*(jnp.asarray(x, dtype) for x in hp))


def check_features(phi, name: str = "phi", atol: float = 1e-6) -> None:
  """Features must be >= 0 (ValueError); rows that do not sum to 1 (Assumption 1) only warn."""
  _checks.features(phi, name, atol, stacklevel=4)


check_int = _checks.check_int  # defined with the other checks (drjax.data uses it too)


# ---------------------------------------------------------------------------------------------
# Bonuses and truncation (the state's updates are in ``drjax.agents.state``).


def diag_bonus(pinv, phi, beta, form: str):
  """DR-LSVI-UCB's robust bonus (Algorithm 1, line 12) on ``phi [..., d]``.

  ``paper``: ``beta * sum_i phi_i sqrt([Lambda^-1]_ii)``; ``notebook``:
  ``beta * sqrt(sum_i phi_i^2 [Lambda^-1]_ii)`` (the authors' code; never larger).
  """
  _checks.choice("form", form, BONUS_FORMS)
  _check_bonus_args(pinv, phi, beta)
  return beta * pieces.width_fn(form)(pinv, phi)


def _check_bonus_args(pinv, phi, beta) -> None:
  pieces.check_pinv(pinv)
  _checks.numeric("phi", phi)
  if np.ndim(phi) < 1 or np.shape(phi)[-1] != np.shape(pinv)[-1]:
    raise ValueError(f"phi must be [..., d] with d = {np.shape(pinv)[-1]} (pinv's), got shape "
                     f"{tuple(np.shape(phi))}")
  _checks.numeric("beta", beta)


ELEMENTWISE_QUAD_MAX_D = pieces.ELLIPSOID_UNROLL_MAX_D


def ellipsoid_bonus(pinv, phi, beta):
  """LSVI-UCB's bonus ``beta * ||phi||_{Lambda^-1} = beta * sqrt(phi^T Lambda^-1 phi)``
  (``pieces.ellipsoid_unrolled``: the quadratic form unrolled for ``d <= 8``)."""
  _check_bonus_args(pinv, phi, beta)
  return beta * pieces.ellipsoid_unrolled(pinv, phi)


def clip_tops(horizon: int, form: str, robust: bool, dtype) -> Array:
  """Upper truncation per 0-indexed step h: the paper's H - h + 1 (1-indexed) = H - h here.

  ``notebook`` clips LSVI-UCB at H for every step (the authors' baseline); DR-LSVI-UCB keeps
  H - h in both forms.
  """
  horizon = _checks.integer("horizon", horizon, 1)
  _checks.choice("form", form, CLIP_FORMS)
  _checks.boolean("robust", robust)
  h = jnp.arange(horizon)
  if form == "notebook" and not robust:
    return jnp.full((horizon,), float(horizon), dtype)
  return (horizon - h).astype(dtype)
