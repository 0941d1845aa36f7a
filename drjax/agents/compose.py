"""Algorithms as compositions: one backward induction over regression atoms, parametrized by
functions.

Every algorithm of the d-rectangular family (DR-LSVI-UCB, LSVI-UCB, PEVI, DRPVI, VA-DRPVI,
R2PVI, DRVI-L) runs the same backward induction ``h = H - 1, ..., 0`` over regression atoms
(``docs/agents.md``); what differs is a handful of functions, each a parameter here:

* the per-coordinate dual **oracle** (``Oracle``): ``oracle(x: StepInputs, hp) -> (nu [d],
  alpha [d])`` -- ``TVConstrained`` (exact over the breakpoints), ``Nominal`` (ridge regression),
  ``TVRegularized``, ``KLRegularized``, ``Chi2Regularized``, ``KLConstrained``, or any callable;
* the **width** of the bonus / penalty: ``width(pinv [d, d], phi [..., d]) -> [...]`` --
  ``"paper"`` (d-rectangular), ``"notebook"``, ``"ellipsoid"`` or any callable
  (``pieces.WIDTH_FNS``);
* the **scale** of the width: ``scale(hp) -> []`` (``pieces.beta_of``: ``hp.beta``; e.g.
  ``lambda hp: hp.kappa * hp.beta`` for a new traced hyperparameter);
* the **truncation**: ``"paper"`` (``[0, H - h + 1]``), ``"upper"`` or ``truncate(q, top)``;
* the **reward source**: ``"theta"`` (known reward parameters, ``w_h = theta_h + nu_h``) or
  ``"regressed"`` (``w_h = Lambda_h^-1 sum phi r + nu_h``);
* the **regression weights** (VA-DRPVI's variance weights enter the atoms, ``offline.atoms``).

``offline.make_agent`` and ``lsvi.make_agent`` build full agents from these; the built-in
algorithms are a few lines each (``offline.drpvi``, ``lsvi.dr_lsvi_ucb``, ...), and so is a
researcher's variant (``experiments/custom_agent.py``).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp

from drjax import duals_tv
from drjax.agents import pieces

Array = jax.Array

REWARDS = ("theta", "regressed")


class StepInputs(NamedTuple):
  """What a dual oracle sees at step ``h``: ``oracle(x: StepInputs, hp) -> (nu [d], alpha [d])``.

  One run, one step (the engine vmaps over runs, so shapes carry no batch axis); array fields
  may be traced. The oracle's second argument ``hp`` is the agent's whole hyperparameter
  ``NamedTuple`` of the run (``hparams_type``): ``hp.rho`` and ``hp.reg_weight`` are ``[H, d]``
  (index the step: ``hp.rho[x.h]``, ``[d]``), ``hp.beta``, ``hp.lam`` and a plugin's own fields
  ``[]``. ``nu[i]`` is the robust adjustment of coordinate i (``w_h = theta_h + nu`` with the
  known reward), ``alpha[i]`` the maximizing dual variable (reported in ``QFunction.alpha``; zeros
  where there is none). docs/agents.md writes one from scratch.

  Attributes:
    h: the 0-based step in ``[0, H - 2]`` (the last step calls no oracle): a Python ``int`` when
      the induction is unrolled (``H - 1 <= 4``), else a traced ``int32``; index with it, never
      branch on it in Python.
    pinv: ``[d, d]`` ``Lambda_h^-1`` (the ridge inverse of step h's Gram matrix).
    g: ``[n, d]`` atom weights: one row per transition of step h (buffer form: its features
      ``phi``, zero at unused slots; VA-DRPVI: scaled by its variance weights) or per next state
      (sufficient statistics: ``sum`` of the features that led to it), so that
      ``Lambda_h^-1 g^T f(v)`` is the ridge regression of ``f(V_{h+1})``.
    v: ``[n]`` ``V_{h+1}`` at the atoms' next states (0 at unused atoms, and at the fail
      state when the agent zeroes it, ``fail_zero``).
    mask: ``[n]`` bool, the atoms in use (buffer slots filled so far), or ``None`` (all).
    vmin: ``[]`` ``m = min_{s'} V_{h+1}(s')`` of the general TV dual, or ``None`` (the fail-state
      form, ``m = 0``); computed only for oracles with ``uses_vmin`` (a plain function: yes).
    reward_sum: ``[d]`` ``sum_tau phi_tau r_tau`` when the reward is regressed and the oracle
      regresses it itself (``regresses_reward``), else zeros.
    top_next: ``[]`` the truncation level of step ``h + 1`` (the largest ``V_{h+1}`` can be).
    horizon: ``H`` (a Python int, static).
    operator: ``[d, n]`` a precomputed ``Lambda_h^-1 g^T`` (the online agents' Sherman-Morrison
      form keeps it up to date) or ``None``: use it in place of ``pinv @ g.T`` when given
      (``pieces.tv_oracle(..., operator=x.operator)``).
  """

  h: Any
  pinv: Array
  g: Array
  v: Array
  mask: Array | None
  vmin: Array | None
  reward_sum: Array
  top_next: Array
  horizon: int
  operator: Array | None = None


# ---------------------------------------------------------------------------------------------
# Oracles. Frozen dataclasses: hashable by value, so equal agents share compiled programs.


@dataclasses.dataclass(frozen=True)
class Nominal:
  """Ridge regression of ``r + V_{h+1}`` (LSVI-UCB, PEVI): ``nu = Lambda^-1 (sum phi r + sum_n
  g_n v_n)``. It consumes the regressed reward itself (``regresses_reward``); its ``nu`` is the
  whole weight vector and is reported as 0 in ``QFunction.nu`` (no robust adjustment)."""

  uses_vmin = False
  regresses_reward = True
  nominal = True
  level = None
  objective = "tv"  # its SubOpt is the TV-robust one at rho = 0 (the nominal one)

  def __call__(self, x: StepInputs, hp) -> tuple[Array, Array]:
    zero = jnp.zeros(x.pinv.shape[-1:], x.pinv.dtype)
    if x.operator is not None:
      return x.pinv @ x.reward_sum + x.operator @ x.v, zero
    return pieces.ridge_oracle(x.pinv, x.g, x.v, x.reward_sum), zero


@dataclasses.dataclass(frozen=True)
class TVConstrained:
  """TV-constrained dual (DR-LSVI-UCB, DRPVI, VA-DRPVI): ``nu_i = max_{alpha in [0, H]}
  z_i(alpha) - rho_i (alpha - min(m, alpha))``, exact over the breakpoints (``method="exact"``)
  or over a grid (``"grid"``, ``"exact+grid"`` with ``grid_size`` points). Reads ``hp.rho[h]``.
  ``monotone=True`` (opt-in, not the paper's): ``z_i`` is replaced by its suffix minimum over the
  sorted candidates before the maximization (``duals_tv.monotone_candidates``)."""

  method: str = "exact"
  grid_size: int = 0
  monotone: bool = False
  uses_vmin = True
  regresses_reward = False
  nominal = False
  level = "rho"
  objective = "tv"

  def __call__(self, x: StepInputs, hp) -> tuple[Array, Array]:
    dtype = x.pinv.dtype
    grid = duals_tv.make_grid(x.horizon, self.grid_size, dtype) if self.method != "exact" else None
    return pieces.tv_oracle(x.pinv, x.g, x.v, hp.rho[x.h].astype(dtype), x.horizon, vmin=x.vmin,
                            operator=x.operator, method=self.method, grid=grid,
                            monotone=bool(self.monotone))


def _zero_alpha(x: StepInputs) -> Array:
  return jnp.zeros(x.pinv.shape[-1:], x.pinv.dtype)


@dataclasses.dataclass(frozen=True)
class TVRegularized:
  """R2PVI-TV: ``nu_i = [Lambda^-1 sum_n g_n min(v_n, m + w_i)]_i``. Reads ``hp.reg_weight[h]``."""

  uses_vmin = True
  regresses_reward = False
  nominal = False
  level = "reg_weight"
  objective = "tv-reg"

  def __call__(self, x: StepInputs, hp) -> tuple[Array, Array]:
    dtype = x.pinv.dtype
    m = jnp.zeros((), dtype) if x.vmin is None else x.vmin
    nu = pieces.tv_reg_oracle(x.pinv, x.g, x.v, m, hp.reg_weight[x.h].astype(dtype))
    return nu, _zero_alpha(x)


@dataclasses.dataclass(frozen=True)
class KLRegularized:
  """R2PVI-KL: ``nu_i = -w_i log [Lambda^-1 sum_n g_n exp(-v_n / w_i)]_i``, stably. Reads
  ``hp.reg_weight[h]``."""

  uses_vmin = True
  regresses_reward = False
  nominal = False
  level = "reg_weight"
  objective = "kl-reg"

  def __call__(self, x: StepInputs, hp) -> tuple[Array, Array]:
    dtype = x.pinv.dtype
    m = jnp.zeros((), dtype) if x.vmin is None else x.vmin
    nu = pieces.kl_reg_oracle(x.pinv, x.g, x.v, x.mask, m, hp.reg_weight[x.h].astype(dtype),
                              x.top_next)
    return nu, _zero_alpha(x)


@dataclasses.dataclass(frozen=True)
class Chi2Regularized:
  """R2PVI-chi2: ``nu_i = max_alpha z_i(alpha) - (z2_i(alpha) - z_i(alpha)^2) / (4 w_i)``,
  exactly. Reads ``hp.reg_weight[h]``."""

  uses_vmin = False
  regresses_reward = False
  nominal = False
  level = "reg_weight"
  objective = "chi2-reg"

  def __call__(self, x: StepInputs, hp) -> tuple[Array, Array]:
    dtype = x.pinv.dtype
    nu = pieces.chi2_reg_oracle(x.pinv, x.g, x.v, hp.reg_weight[x.h].astype(dtype), x.horizon)
    return nu, _zero_alpha(x)


@dataclasses.dataclass(frozen=True)
class KLConstrained:
  """DRVI-L: ``nu_i = max_{alpha > 0} -alpha log zhat_i(alpha) - alpha rho_i`` by a bounded 1-D
  search to ``tol`` in log(alpha) (not exact). Reads ``hp.rho[h]`` (a KL radius)."""

  tol: float = 1e-6
  uses_vmin = False
  regresses_reward = False
  nominal = False
  level = "rho"
  objective = "kl"

  def __call__(self, x: StepInputs, hp) -> tuple[Array, Array]:
    dtype = x.pinv.dtype
    nu = pieces.kl_con_oracle(x.pinv, x.g, x.v, x.mask, hp.rho[x.h].astype(dtype), x.horizon,
                              tol=self.tol)
    return nu, _zero_alpha(x)


def oracle_attr(oracle, name: str, default):
  """An oracle's declared attribute (``uses_vmin``, ``regresses_reward``, ``nominal``, ``level``,
  ``objective``), or ``default`` for a plain function."""
  return getattr(oracle, name, default)


def check_composition(horizon, feature_dim, num_actions, oracle, width, scale, reward):
  """The checks every builder (``offline.make_agent``, ``lsvi.make_agent``) shares, written
  once: ``(H, d, A)`` as integers >= 1, a callable oracle, a known width, a callable scale, a
  reward source of ``REWARDS``."""
  from drjax import _checks  # pylint: disable=g-import-not-at-top
  dims = tuple(_checks.check_int(n, x) for n, x in (
      ("horizon H", horizon), ("feature_dim d", feature_dim), ("num_actions A", num_actions)))
  if not callable(oracle):
    raise TypeError(f"oracle must be a dual oracle (drjax.agents.compose.TVConstrained(), ...) "
                    f"or a function (StepInputs, hp) -> (nu, alpha), got {oracle!r}")
  pieces.width_fn(width)  # ValueError for an unknown name
  _checks.function("scale", scale, "hp -> [] (the bonus or penalty multiplier)")
  _checks.choice("reward", reward, REWARDS)
  return dims


def with_core(public, core, wrap):
  """``wrap(public)`` (which checks its arguments, then calls ``core``) with ``wrap(core)`` as its
  ``.unchecked`` attribute (``drjax.protocols.unchecked``): the engine validates once at its
  boundary and calls the cores inside its traced code."""
  out = wrap(public)
  out.unchecked = wrap(core)
  return out


# ---------------------------------------------------------------------------------------------
# The backward induction.


class Induction(NamedTuple):
  """Outputs of ``backward_induction``, stacked over steps (row h = step h)."""

  w: Array      # [H, d] weights of Q_h = phi^T w_h -/+ scale * width
  nu: Array     # [H, d] the oracle's values (0 for a nominal oracle)
  alpha: Array  # [H, d] the oracle's maximizing alpha (0 where it has none)
  v: Array      # [H, n] V_{h+1} at the atoms (row H - 1: V_{H+1} = 0)


def backward_induction(horizon: int, *, pinv: Array, g: Array, nphi: Array, nfail: Array,
                       mask: Array | None, q_at: Callable, oracle: Callable, hp,
                       beta: Array, tops: Array, reward: str = "theta",
                       theta: Array | None = None, reward_sum: Array | None = None,
                       vmin: Callable | None = None, operators: Array | None = None,
                       quads: Array | None = None, last_w: Array | None = None,
                       unroll_max: int = 4, size: int | None = None) -> Induction:
  """One backward induction ``h = H - 1, ..., 0`` over regression atoms (single instance).

  Args:
    horizon: H (static).
    pinv: ``[H, d, d]`` ``Lambda_h^-1``.
    g: ``[H, n, d]`` atom weights; ``nphi [H, n, A, d]`` / ``nfail [H, n]`` the features and fail
      flags of the atoms' next states (row h: step h + 1).
    mask: ``[H, n]`` or ``[n]`` atoms in use, or ``None``.
    q_at: ``q_at(w, pinv, beta, top, phi_all, fail, quad=None) -> [..., A]`` the Q of a step
      from its weights (``pieces.linear_q`` with the agent's width, sign and truncation).
    oracle: the dual oracle, ``oracle(StepInputs, hp) -> (nu [d], alpha [d])``.
    hp: the agent's hyperparameters (read by the oracle).
    beta: ``[]`` the width's scale; ``tops [H]`` the truncation level per step.
    reward: ``"theta"`` (``w_h = theta_h + nu_h``; ``theta [H, d]``) or ``"regressed"``
      (``w_h = Lambda_h^-1 reward_sum_h + nu_h``; ``reward_sum [H, d]`` = ``sum phi r``).
    vmin: ``vmin(v, mask_h, h, q_next) -> []`` the minimum ``m`` of the general dual, or ``None``
      (the fail-state form); only called for oracles that use it.
    operators: ``[H, d, n]`` precomputed ``Lambda_h^-1 g_h^T`` or ``None``.
    quads: ``[H, n, A]`` precomputed next-state ``phi^T Lambda^-1 phi`` or ``None``.
    last_w: ``[d]`` the last step's weights, overriding the reward source's (``V_{H+1} = 0``, so
      the oracle is not called there: every built-in oracle gives ``nu_H = 0``).
    size: plan over the first ``size`` atoms of ``g``, ``nphi``, ``nfail`` and ``quads`` (static;
      ``None``: all). Each step reads its own rows ``[h, :size]`` (one dynamic slice), so a
      buffer is never copied whole to be cut to size (``make_train``'s filled-slot plans).
  """
  H = horizon
  d = pinv.shape[-1]
  dtype = pinv.dtype
  n = g.shape[1] if size is None else size
  zero = jnp.zeros((d,), dtype)
  rows = (lambda x, h: x[h]) if size is None else (lambda x, h: x[h, :size])
  uses_vmin = oracle_attr(oracle, "uses_vmin", True)
  own_reward = oracle_attr(oracle, "regresses_reward", False)
  nominal = oracle_attr(oracle, "nominal", False)
  regressed = reward == "regressed"
  if reward not in REWARDS:
    raise ValueError(f"reward must be one of {REWARDS}, got {reward!r}")

  def step(nxt, h):
    w_next = nxt[0]
    quad = None if quads is None else rows(quads, h)
    q_next = lambda phi, fail: q_at(w_next, pinv[h + 1], beta, tops[h + 1], phi, fail)  # noqa
    q_atoms = lambda phi, fail: q_at(w_next, pinv[h + 1], beta, tops[h + 1], phi, fail,  # noqa
                                     quad=quad)
    mask_h = None if mask is None else (mask if mask.ndim == 1 else mask[h])
    v = pieces.next_values(q_atoms, rows(nphi, h), rows(nfail, h), mask_h)
    m = vmin(v, mask_h, h, q_next) if (uses_vmin and vmin is not None) else None
    rsum = reward_sum[h] if (regressed and own_reward) else zero
    x = StepInputs(h, pinv[h], rows(g, h), v, mask_h, m, rsum, tops[h + 1], H,
                   None if operators is None else operators[h])
    nu, alpha = oracle(x, hp)
    if regressed and own_reward:
      w = nu
    elif regressed:
      w = pinv[h] @ reward_sum[h] + nu
    else:
      w = theta[h] + nu
    return w, (zero if nominal else nu), alpha, v

  if last_w is None:
    last_w = pinv[H - 1] @ reward_sum[H - 1] if regressed else theta[H - 1]
  last = (last_w, zero, zero, jnp.zeros((n,), dtype))
  return Induction(*pieces.backward(H, step, last, unroll_max=unroll_max))
