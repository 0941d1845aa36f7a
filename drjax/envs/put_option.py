"""The simulated American put option of Section 6.2, in the paper's and the notebook's variants.

The price follows the Bernoulli model of Section 6.2: ``s_{h+1} = 1.02 s_h`` w.p. ``p_u``, else
``0.98 s_h``; the strike is 100. Action 0 exercises (reward ``max(0, 100 - s_h)``, then the
absorbing exit state: the fail state, reward 0 and all-zero features forever); action 1 holds
(reward 0, price moves). Rewards are not scaled (up to about 20), as in the paper and notebook.

Two feature variants (``d = num_anchors`` hat functions ``varphi_i(s) = max(0, 1 - |s - s_i| /
Delta)``, anchors ``s_i = 80 + i Delta``, ``i = 0..d-1``, plus one payoff coordinate):

* ``variant="paper"`` (Section 6.2 text): ``Delta = 60 / d``; ``phi(s, exercise) = [varphi(s), 0]``,
  ``phi(s, hold) = [0, ..., 0, max(0, 100 - s)]``; ``theta_h = [max(0, 100 - s_i)_i, 0]``, so
  ``phi . theta`` is only the piecewise-linear interpolation of the payoff between anchors (and 0
  outside ``[80 - Delta, s_d + Delta]``), not the reward itself. These features violate
  Assumption 1: the rows do not sum to one.
* ``variant="notebook"`` (the authors' notebook, which produced Figure 2): ``Delta = 100 / d``
  (5 for d = 20); the hats are carried by the *hold* action, ``phi(s, hold) = [varphi(s), 0]``,
  ``phi(s, exercise) = [0, ..., 0, max(0, 100 - s)]``, ``theta_h = e_{d+1}``: ``phi . theta`` is
  the payoff exactly.

The notebook draws one initial price per seed and reuses it in every episode; use
``fixed_initial_price(key, params)`` (vmap it over seed keys). Params are traced under ``jit`` and
cannot be checked there; build them with ``make_params`` or call ``validate``.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp
import numpy as np

from drjax.envs.base import Environment
from drjax.envs.linear_mdp import _check, _concrete, _float_dtype

Array = jax.Array

STRIKE = 100.0
UP = 1.02
DOWN = 0.98
FIRST_ANCHOR = 80.0
EXERCISE = 0
HOLD = 1
VARIANTS = ("paper", "notebook")


class PutOptionParams(NamedTuple):
  """Sweepable parameters of ``PutOption`` (float scalars, or arrays of one batch shape).

  Attributes:
    p_u: ``[]`` probability that the price goes up (Bernoulli price model, Section 6.2).
    init_low: ``[]`` the initial price is uniform on ``[init_low, init_high]``.
    init_high: ``[]`` see ``init_low``; equal bounds give a fixed initial price.
  """

  p_u: Array
  init_low: Array
  init_high: Array


class PutOptionState(NamedTuple):
  """State of ``PutOption``.

  Attributes:
    price: ``[]`` float current price ``s_h`` (frozen once exited).
    exited: ``[]`` bool, whether the option was exercised (the absorbing exit / fail state).
    h: ``[]`` int32 step, 0-indexed.
  """

  price: Array
  exited: Array
  h: Array


def fixed_initial_price(key: chex.PRNGKey, params: PutOptionParams) -> PutOptionParams:
  """Draws one initial price ``s_0 ~ U[init_low, init_high]`` and fixes it (notebook protocol).

  Args:
    key: PRNG key (one per seed).
    params: params whose ``init_low``/``init_high`` define the draw.

  Returns:
    ``params`` with ``init_low = init_high = s_0``; every ``reset`` then starts at ``s_0``.
    ``jax.vmap(fixed_initial_price, in_axes=(0, None))(keys, params)`` gives one per seed.
  """
  s0 = jax.random.uniform(key, (), jnp.result_type(params.init_low),
                          minval=params.init_low, maxval=params.init_high)
  return params._replace(init_low=s0, init_high=s0)


@dataclasses.dataclass(frozen=True)
class PutOption(Environment):
  """American put option (Section 6.2) with ``num_anchors + 1`` features and 2 actions.

  Attributes:
    num_anchors: number ``d`` of hat features (the paper uses 20); at least 2.
    horizon: number ``H`` of trading steps (the paper uses 10); at least 1.
    variant: ``"paper"`` (Section 6.2 text) or ``"notebook"`` (authors' code); see module doc.
  """

  num_anchors: int = 20
  horizon: int = 10
  variant: str = "paper"

  def __post_init__(self):
    if not isinstance(self.num_anchors, (int, np.integer)) or isinstance(self.num_anchors, bool) \
        or self.num_anchors < 2:
      raise ValueError(f"num_anchors must be an integer >= 2, got {self.num_anchors!r}")
    if not isinstance(self.horizon, (int, np.integer)) or isinstance(self.horizon, bool) \
        or self.horizon < 1:
      raise ValueError(f"horizon must be an integer >= 1, got {self.horizon!r}")
    if self.variant not in VARIANTS:
      raise ValueError(f"variant must be one of {VARIANTS}, got {self.variant!r}")

  @property
  def num_actions(self) -> int:
    return 2

  @property
  def feature_dim(self) -> int:
    return self.num_anchors + 1

  @property
  def spacing(self) -> float:
    """Anchor spacing ``Delta``: ``60 / d`` (paper) or ``(160 - 60) / d`` (notebook)."""
    return (60.0 if self.variant == "paper" else 100.0) / self.num_anchors

  @property
  def anchors(self) -> np.ndarray:
    """``[d]`` anchor prices ``s_i = 80 + i Delta``, ``i = 0..d-1``."""
    return FIRST_ANCHOR + self.spacing * np.arange(self.num_anchors, dtype=np.float64)

  # ---------------------------------------------------------------- params
  def default_params(self) -> PutOptionParams:
    """Source domain of Section 6.2: ``p_u = 0.5``, ``s_0 ~ U[95, 105]``."""
    return self.make_params()

  def make_params(self, p_u: float = 0.5, init_low: float = 95.0,
                  init_high: float = 105.0) -> PutOptionParams:
    """Builds and validates params eagerly (raises ``ValueError`` before anything is traced)."""
    dtype = _float_dtype()
    params = PutOptionParams(*(jnp.asarray(x, dtype) for x in (p_u, init_low, init_high)))
    self.validate(params)
    return params

  def target_params(self, source_params: PutOptionParams, p_u) -> PutOptionParams:
    """Target domains with price-up probability ``p_u`` (scalar or array; fields broadcast).

    For ``p_u`` of shape ``[N]`` every field gets shape ``[N]``, ready for ``jax.vmap``.
    """
    dtype = _float_dtype()
    p_u = jnp.asarray(p_u, dtype)
    b = lambda x: jnp.broadcast_to(jnp.asarray(x, dtype), p_u.shape)  # noqa: E731
    return PutOptionParams(p_u=p_u, init_low=b(source_params.init_low),
                           init_high=b(source_params.init_high))

  def validate(self, params: PutOptionParams) -> None:
    """Host-side check: ``0 <= p_u <= 1``, ``0 < init_low <= init_high``; raises ``ValueError``."""
    v = {k: _concrete(k, x).astype(np.float64) for k, x in params._asdict().items()}
    for k, x in v.items():
      _check(np.isfinite(x), f"{k} must be finite", **{k: x})
    _check((v["p_u"] >= 0) & (v["p_u"] <= 1), "p_u must satisfy 0 <= p_u <= 1", p_u=v["p_u"])
    _check(v["init_low"] > 0, "init_low must be positive", init_low=v["init_low"])
    _check(v["init_low"] <= v["init_high"], "init_low must satisfy init_low <= init_high",
           init_low=v["init_low"], init_high=v["init_high"])

  # ---------------------------------------------------------------- features and rewards
  def hat_features(self, price: Array) -> Array:
    """``[d]`` hat functions ``varphi_i(s) = max(0, 1 - |s - s_i| / Delta)`` (Section 6.2)."""
    anchors = jnp.asarray(self.anchors, jnp.result_type(price))
    return jnp.maximum(0.0, 1.0 - jnp.abs(price - anchors) / self.spacing)

  def phi_all(self, state: PutOptionState, params: PutOptionParams) -> Array:
    """``[2, d+1]`` features of (exercise, hold) at ``state``; all zero in the exit state."""
    del params
    price = jnp.asarray(state.price)
    payoff = jnp.maximum(0.0, STRIKE - price)
    hats = jnp.concatenate([self.hat_features(price), jnp.zeros((1,), price.dtype)])
    pay = jnp.concatenate([jnp.zeros((self.num_anchors,), price.dtype), payoff[None]])
    rows = (hats, pay) if self.variant == "paper" else (pay, hats)  # (exercise, hold)
    return jnp.where(state.exited, 0.0, jnp.stack(rows))

  def theta(self, params: PutOptionParams) -> Array:
    """``[H, d+1]`` known reward parameters (the same at every step).

    Paper: ``[max(0, 100 - s_1), ..., max(0, 100 - s_d), 0]``, so ``phi(s, exercise) . theta``
    interpolates the payoff linearly between anchors. Notebook: ``e_{d+1}``, exact payoff.
    """
    dtype = jnp.result_type(params.p_u)
    if self.variant == "paper":
      row = np.append(np.maximum(0.0, STRIKE - self.anchors), 0.0)
    else:
      row = np.append(np.zeros(self.num_anchors), 1.0)
    return jnp.broadcast_to(jnp.asarray(row, dtype)[None], (self.horizon, self.feature_dim))

  def is_fail(self, state: PutOptionState, params: PutOptionParams) -> Array:
    """The exit state (after exercising) is the fail state: absorbing, reward 0, phi = 0."""
    del params
    return jnp.asarray(state.exited)

  # ---------------------------------------------------------------- dynamics
  def reset(self, key: chex.PRNGKey, params: PutOptionParams) -> PutOptionState:
    """``s_0 ~ U[init_low, init_high]``, not exited, ``h = 0``."""
    price = jax.random.uniform(key, (), jnp.result_type(params.init_low),
                               minval=params.init_low, maxval=params.init_high)
    return PutOptionState(price=price, exited=jnp.asarray(False), h=jnp.asarray(0, jnp.int32))

  def step(self, key: chex.PRNGKey, state: PutOptionState, action: Array,
           params: PutOptionParams) -> tuple[PutOptionState, Array, Array]:
    """One trading step (Section 6.2, Bernoulli price model).

    Args:
      key: PRNG key.
      state: current state.
      action: ``0`` (exercise) or ``1`` (hold).
      params: ``PutOptionParams``.

    Returns:
      ``(next_state, reward, done)``: exercising pays ``max(0, 100 - s_h)`` and exits; holding
      pays 0 and moves the price by 1.02 (w.p. ``p_u``) or 0.98; the exit state stays put with
      reward 0. ``done = (h + 1 == H)``.
    """
    price = jnp.asarray(state.price)
    active = jnp.logical_not(state.exited)
    exercise = jnp.asarray(action) == EXERCISE
    up = jax.random.uniform(key, (), price.dtype) < params.p_u
    moved = price * jnp.where(up, UP, DOWN)
    next_price = jnp.where(active & jnp.logical_not(exercise), moved, price)
    reward = jnp.where(active & exercise, jnp.maximum(0.0, STRIKE - price), 0.0)
    h_next = (state.h + 1).astype(jnp.int32)
    next_state = PutOptionState(price=next_price, exited=state.exited | exercise, h=h_next)
    return next_state, reward, h_next == self.horizon
