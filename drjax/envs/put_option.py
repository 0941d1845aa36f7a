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
``fixed_initial_price(key, params)`` (vmap it over seed keys).

**The price lattice.** For a fixed initial price ``s0`` the price at step ``h`` (0-indexed) is
``s0 * UP**j * DOWN**(h - j)`` after ``j`` up-moves, whatever their order: a recombining lattice
with ``h + 1`` nodes at step ``h``. Given ``s0`` the put option is therefore a finite MDP, and
``lattice_prices`` / ``lattice_value`` / ``optimal_stopping_action`` evaluate policies and optimal
(robust) stopping on it exactly (``drjax.put_lattice``, re-exported by ``drjax.evaluate``, values
whole policies with them). Params are traced under ``jit`` and cannot be checked there; build them
with ``make_params`` or call ``validate``. Steps ``h`` and actions (``EXERCISE = 0``, ``HOLD = 1``)
are 0-based; concrete out-of-range values are ``ValueError``s naming the argument.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp
import numpy as np

from drjax import _checks
from drjax.envs.base import Environment
from drjax.envs.linear_mdp import _check, _check_state, _concrete, _float_dtype

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
  _checks.key("key", key)
  _checks.params_type(params, PutOptionParams, "PutOption")
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
  # The features depend on the variant and anchors only: the constructor checks them (>= 0; the
  # paper's rows do not sum to 1, a warning), so no entry point checks them again.
  feature_check = "validate"

  def __post_init__(self):
    _checks.integer("num_anchors", self.num_anchors, 2)
    _checks.integer("horizon", self.horizon, 1)
    _checks.choice("variant", self.variant, VARIANTS)
    self._check_features()

  def _check_features(self) -> None:
    """Assumption 1 on the host (NumPy, microseconds): the rows of ``phi_all`` at every anchor,
    every midpoint between anchors, below and above the anchors and at 0. The features are
    piecewise linear in the price with kinks only at the anchors and the strike, so their range
    is attained at these points; the exit state's rows are zero."""
    a = self.anchors
    prices = np.concatenate([a, a[:-1] + self.spacing / 2, [0.0, a[0] - self.spacing, STRIKE,
                                                             a[-1] + self.spacing]])
    rows = self._rows(self._hats(prices, np, prices.dtype), prices, np)
    _checks.features(rows, "PutOption features", stacklevel=5)

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
    _checks.numbers_(p_u=p_u, init_low=init_low, init_high=init_high)
    dtype = _float_dtype()
    params = PutOptionParams(*(jnp.asarray(x, dtype) for x in (p_u, init_low, init_high)))
    self.validate(params)
    return params

  def target_params(self, source_params: PutOptionParams, p_u) -> PutOptionParams:
    """Target domains with price-up probability ``p_u`` (scalar or array; fields broadcast).

    For ``p_u`` of shape ``[N]`` every field gets shape ``[N]``, ready for ``jax.vmap``;
    ``p_u`` must lie in ``[0, 1]`` (checked when concrete).
    """
    _checks.params_type(source_params, PutOptionParams, "PutOption", "source_params")
    _checks.numbers_(p_u=p_u)
    _checks.in_range("p_u", p_u, 0, 1)
    dtype = _float_dtype()
    p_u = jnp.asarray(p_u, dtype)
    b = lambda x: jnp.broadcast_to(jnp.asarray(x, dtype), p_u.shape)  # noqa: E731
    return PutOptionParams(p_u=p_u, init_low=b(source_params.init_low),
                           init_high=b(source_params.init_high))

  def validate(self, params: PutOptionParams) -> None:
    """Host-side check: ``0 <= p_u <= 1``, ``0 < init_low <= init_high``; raises ``ValueError``."""
    _checks.params_type(params, PutOptionParams, "PutOption")
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
    _checks.numeric("price", price)
    _checks.finite("price", price)
    return self._hats(jnp.asarray(price), jnp, jnp.result_type(price))

  def _hats(self, price, xp, dtype):
    """``[..., d]`` hat features at ``price [...]`` in ``xp`` (``jax.numpy``; NumPy for the
    constructor's check), the anchors in ``dtype``."""
    anchors = xp.asarray(self.anchors, dtype)
    return xp.maximum(0.0, 1.0 - xp.abs(price[..., None] - anchors) / self.spacing)

  def _rows(self, hats, price, xp):
    """``[..., 2, d+1]`` the (exercise, hold) rows from the hat features ``hats [..., d]`` at
    ``price [...]``: the hats with a zero last coordinate, and the payoff in the last coordinate
    (the paper's order; the notebook's swaps them)."""
    hats_row = xp.concatenate([hats, xp.zeros(hats.shape[:-1] + (1,), hats.dtype)], -1)
    pay_row = xp.concatenate([xp.zeros_like(hats), xp.maximum(0.0, STRIKE - price)[..., None]], -1)
    rows = (hats_row, pay_row) if self.variant == "paper" else (pay_row, hats_row)
    return xp.stack(rows, -2)

  def phi_all(self, state: PutOptionState, params: PutOptionParams) -> Array:
    """``[2, d+1]`` features of (exercise, hold) at ``state``; all zero in the exit state."""
    _checks.instance("state", state, PutOptionState, "a PutOptionState (env.reset / env.step)")
    del params
    price = jnp.asarray(state.price)
    return jnp.where(state.exited, 0.0, self._rows(self.hat_features(price), price, jnp))

  def theta(self, params: PutOptionParams) -> Array:
    """``[H, d+1]`` known reward parameters (the same at every step).

    Paper: ``[max(0, 100 - s_1), ..., max(0, 100 - s_d), 0]``, so ``phi(s, exercise) . theta``
    interpolates the payoff linearly between anchors. Notebook: ``e_{d+1}``, exact payoff.
    """
    _checks.params_type(params, PutOptionParams, "PutOption")
    dtype = jnp.result_type(params.p_u)
    if self.variant == "paper":
      row = np.append(np.maximum(0.0, STRIKE - self.anchors), 0.0)
    else:
      row = np.append(np.zeros(self.num_anchors), 1.0)
    return jnp.broadcast_to(jnp.asarray(row, dtype)[None], (self.horizon, self.feature_dim))

  def is_fail(self, state: PutOptionState, params: PutOptionParams) -> Array:
    """The exit state (after exercising) is the fail state: absorbing, reward 0, phi = 0."""
    _checks.instance("state", state, PutOptionState, "a PutOptionState (env.reset / env.step)")
    del params
    return jnp.asarray(state.exited)

  # ---------------------------------------------------------------- dynamics
  def reset(self, key: chex.PRNGKey, params: PutOptionParams) -> PutOptionState:
    """``s_0 ~ U[init_low, init_high]``, not exited, ``h = 0``."""
    _checks.key("key", key)
    _checks.params_type(params, PutOptionParams, "PutOption")
    price = jax.random.uniform(key, (), jnp.result_type(params.init_low),
                               minval=params.init_low, maxval=params.init_high)
    return PutOptionState(price=price, exited=jnp.asarray(False), h=jnp.asarray(0, jnp.int32))

  def step(self, key: chex.PRNGKey, state: PutOptionState, action: Array,
           params: PutOptionParams) -> tuple[PutOptionState, Array, Array]:
    """One trading step (Section 6.2, Bernoulli price model).

    Args:
      key: PRNG key.
      state: current state.
      action: ``0`` (exercise) or ``1`` (hold), a 0-based action index.
      params: ``PutOptionParams``.

    Returns:
      ``(next_state, reward, done)``: exercising pays ``max(0, 100 - s_h)`` and exits; holding
      pays 0 and moves the price by 1.02 (w.p. ``p_u``) or 0.98; the exit state stays put with
      reward 0. ``done = (h + 1 == H)``.
    """
    _checks.key("key", key)
    _check_state(state, PutOptionState, self)
    # In the price's dtype (``step_noise`` takes ``init_low``'s, which ``reset`` gives the price).
    u = jax.random.uniform(key, (), jnp.asarray(state.price).dtype)
    return self.step_given(u, state, action, params)

  def step_noise(self, key: chex.PRNGKey, params: PutOptionParams) -> Array:
    """The uniform draw of ``step`` (in the price's dtype, that of ``params.init_low``)."""
    _checks.key("key", key)
    _checks.params_type(params, PutOptionParams, "PutOption")
    return jax.random.uniform(key, (), jnp.result_type(params.init_low))

  def step_given(self, noise: Array, state: PutOptionState, action: Array,
                 params: PutOptionParams) -> tuple[PutOptionState, Array, Array]:
    """``step`` given its uniform draw ``noise`` (``step_noise(key, params)``; the price moves up
    when ``noise < p_u``)."""
    _check_state(state, PutOptionState, self)
    _checks.index("action", action, 2, "(action: 0 exercise, 1 hold)")
    _checks.params_type(params, PutOptionParams, "PutOption")
    price = jnp.asarray(state.price)
    active = jnp.logical_not(state.exited)
    exercise = jnp.asarray(action) == EXERCISE
    up = noise < params.p_u
    moved = price * jnp.where(up, UP, DOWN)
    next_price = jnp.where(active & jnp.logical_not(exercise), moved, price)
    reward = jnp.where(active & exercise, jnp.maximum(0.0, STRIKE - price), 0.0)
    h_next = (state.h + 1).astype(jnp.int32)
    next_state = PutOptionState(price=next_price, exited=state.exited | exercise, h=h_next)
    return next_state, reward, h_next == self.horizon


# ---------------------------------------------------------------------------------------------
# The recombining price lattice: exact values for a fixed initial price.


def lattice_nodes(horizon: int) -> tuple[np.ndarray, np.ndarray]:
  """Static ``(h, j)`` index arrays of the ``H (H + 1) / 2`` lattice nodes (``0 <= j <= h < H``)."""
  horizon = _checks.integer("horizon", horizon, 1)
  hs, js = np.tril_indices(horizon)
  return hs.astype(np.int32), js.astype(np.int32)


def lattice_prices(s0, horizon: int) -> Array:
  """``[H, H]`` prices ``s0 * UP**j * DOWN**(h - j)`` of node ``(h, j)`` (``j`` up-moves).

  Entries with ``j > h`` are not nodes of the lattice (they hold finite filler values).

  Args:
    s0: ``[]`` initial price.
    horizon: static ``H``.

  Returns:
    ``[H, H]`` prices.
  """
  horizon = _checks.integer("horizon", horizon, 1)
  _checks.numeric("s0", s0)
  _checks.scalar("s0", s0)
  _checks.in_range("s0", s0, 0, lo_open=True)
  s0 = jnp.asarray(s0)
  dtype = jnp.result_type(s0, float)
  h = jnp.arange(horizon, dtype=dtype)[:, None]
  j = jnp.arange(horizon, dtype=dtype)[None, :]
  return s0.astype(dtype) * jnp.power(UP, j) * jnp.power(DOWN, h - j)


def _check_probabilities(p_u, rho) -> None:
  """``p_u`` and ``rho`` scalars in ``[0, 1]`` (values checked when concrete)."""
  for name, x in (("p_u", p_u), ("rho", rho)):
    _checks.array(name, x, ())
    _checks.in_range(name, x, 0, 1)


def _hold_value(v_up: Array, v_down: Array, p_u, rho) -> Array:
  """Worst case of ``p v_up + (1 - p) v_down`` over ``|p - p_u| <= rho``, ``p`` in [0, 1].

  The TV distance between two price moves Bernoulli(p) and Bernoulli(p_u) is ``|p - p_u|``; the
  objective is linear in ``p``, so the minimum is at an end of the interval (``rho = 0``: the
  nominal expectation).
  """
  lo = jnp.clip(p_u - rho, 0.0, 1.0)
  hi = jnp.clip(p_u + rho, 0.0, 1.0)
  return jnp.minimum(lo * v_up + (1 - lo) * v_down, hi * v_up + (1 - hi) * v_down)


def lattice_value(actions: Array, prices: Array, p_u, rho=0.0) -> Array:
  """Exact (robust) value at the root of a node policy on the price lattice.

  Backward induction ``V_H = 0``; at node ``(h, j)``: exercise pays ``max(0, 100 - s_{h,j})`` and
  ends in the exit state (value 0 from then on); hold pays 0 and moves to ``(h+1, j+1)`` w.p.
  ``p_u`` or ``(h+1, j)``. With ``rho > 0`` the up-probability of every hold is chosen adversarially
  in ``[p_u - rho, p_u + rho]`` (an (s, a)-rectangular TV ball around the price move).

  Args:
    actions: ``[H, H]`` int actions (``EXERCISE``/``HOLD``) at node ``(h, j)``; ``j > h`` ignored.
    prices: ``[H, H]`` node prices (``lattice_prices``).
    p_u: ``[]`` up-probability of the domain.
    rho: ``[]`` TV radius (0: the plain expected return).

  Returns:
    ``[]`` value ``V_0(s0)``.
  """
  if np.ndim(actions) != 2 or np.shape(actions)[0] != np.shape(actions)[1]:
    raise ValueError(f"actions must have shape [H, H], got {tuple(np.shape(actions))}")
  _checks.indices("actions", actions, 2, "actions (0 exercise, 1 hold)")
  _checks.array("prices", prices, np.shape(actions), "[H, H]")
  _checks.finite("prices", prices)
  _check_probabilities(p_u, rho)
  H = actions.shape[0]
  dtype = jnp.result_type(prices, float)
  payoff = jnp.maximum(0.0, STRIKE - prices)

  def backward(v_next, h):  # v_next: [H + 1] values at step h + 1
    hold = _hold_value(v_next[1:], v_next[:-1], p_u, rho)  # [H]
    v = jnp.where(actions[h] == EXERCISE, payoff[h], hold)
    return jnp.concatenate([v, jnp.zeros((1,), dtype)]), None

  v0, _ = jax.lax.scan(backward, jnp.zeros((H + 1,), dtype), jnp.arange(H), reverse=True)
  return v0[0]


def optimal_stopping_action(h, price, horizon: int, p_u, rho=0.0) -> Array:
  """Optimal (robust) action at step ``h`` and ``price``: exercise iff payoff > continuation.

  The continuation value is the optimal (robust, see ``lattice_value``) value of holding, computed
  by backward induction on the lattice rooted at ``price`` (``O(H^2)``). Ties go to hold (as in
  the authors' notebook), with a rounding tolerance ``8 eps 100 H``: with ``p_u = 0.5`` and no
  discounting the price is a martingale, holding is weakly optimal everywhere (Jensen) and, deep
  in the money, exactly as good as exercising. The rule depends on ``(h, price)`` only, so it is a Markov policy that
  can be evaluated in any target domain.

  Args:
    h: ``[]`` int step (0-indexed).
    price: ``[]`` price.
    horizon: static ``H``.
    p_u: ``[]`` up-probability the policy is optimal for.
    rho: ``[]`` TV radius of the robust version (0: non-robust optimal stopping).

  Returns:
    ``[]`` int32 action.
  """
  H = _checks.integer("horizon", horizon, 1)
  _checks.index("h", h, H, "(step)")
  _checks.array("price", price, ())
  _checks.in_range("price", price, 0, lo_open=True)
  _check_probabilities(p_u, rho)
  price = jnp.asarray(price)
  dtype = jnp.result_type(price, float)
  j = jnp.arange(H + 1, dtype=dtype)

  def backward(v_next, t):  # absolute step t, relative depth t - h
    depth = (t - h).astype(dtype)
    prices = price * jnp.power(UP, j) * jnp.power(DOWN, depth - j)
    hold = jnp.concatenate([_hold_value(v_next[1:], v_next[:-1], p_u, rho),
                            jnp.zeros((1,), dtype)])
    v = jnp.maximum(jnp.maximum(0.0, STRIKE - prices), hold)
    return jnp.where(t > h, v, v_next), None

  v_after, _ = jax.lax.scan(backward, jnp.zeros((H + 1,), dtype), jnp.arange(H), reverse=True)
  cont = jnp.where(h >= H - 1, 0.0, _hold_value(v_after[1], v_after[0], p_u, rho))
  payoff = jnp.maximum(0.0, STRIKE - price)
  # With p_u = 0.5 the price is a martingale and, deep in the money, holding is worth exactly the
  # payoff: rounding must not turn these ties into exercises.
  tol = 8 * jnp.finfo(dtype).eps * STRIKE * H
  return jnp.where(payoff > cont + tol, EXERCISE, HOLD).astype(jnp.int32)
