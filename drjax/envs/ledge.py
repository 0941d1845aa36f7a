"""A cliff-side traverse where d-rectangular TV robustness changes the route: ``Ledge`` (continuous
state, for the learning agents) and ``LedgeGrid`` (its finite version with an exact model).

**Why this environment.** With an absorbing zero-value fail state, the TV worst case of a factor
moves ``rho`` of its mass from the top-valued next states to the fail state. For a transition that
reaches an alive state surely this only discounts the continuation by ``1 - rho``; for one that
fails with probability ``p`` it gives ``(1 - p - rho) V = (1 - rho)(1 - p / (1 - rho)) V``: the
robust problem is the nominal one with discount ``1 - rho`` *and* failure probabilities inflated
to ``p / (1 - rho)``. The discount favours short routes and early rewards (so in CartPole, or in a
cliff walk where the edge route is the short one, robustness never makes the agent more careful);
the inflation favours safe routes. Here every trajectory has the same length and the payoff comes
at the last step, so the discount hits both routes alike and only the careful effect is left.

**The traverse.** A point mass flies forward at constant speed along a cliff (position ``x = h /
H``) for ``H`` steps and steers laterally: ``y`` is the distance from the edge, the plateau is
``[0, 1]`` cut into ``num_rows`` rows of width ``dy = 1 / num_rows`` (row 0, ``y < dy``, is the
**ledge** along the edge). Actions: ``0`` steer toward the edge (``y - dy``), ``1`` straight,
``2`` steer away (``y + dy``, at most the top row's center). From step ``split`` on (the
*zone*: positions at steps ``h >= split``) a rock band occupies rows ``1..rock_rows`` and splits the
plateau into the ledge (row 0) and the upper plateau (rows above the band): a move or push that
would enter or cross the rock is stopped by it (the mass stays where it was); a mass still inside
the band when the rock begins flies into it (**crash**). Every step a **gust** blows toward the
cliff with probability ``wind``, pushing the mass ``gust`` toward the edge; ``y < 0`` is a **fall**.
A fall or crash is the absorbing fail state (reward 0, zero features, ``is_fail``).

**Payoff** (rewards in [0, 1]): at the last step ``h = H - 1``, ``1`` on the ledge (the goal at the
end of the ledge path), ``safe_reward`` on the upper plateau (the safe landing), 0 elsewhere; 0 at
every earlier step. Returns lie in ``{0, safe_reward, 1}`` (continuous env: the same).

* The **ledge route** enters row 0 at step ``split`` and stays there: ``k = H - split``
  transitions on which a gust means a fall, nominal value ``(1 - wind)^k``.
* The **plateau route** stays above the rock band (the rock stops the gusts there): value
  ``safe_reward``, surely.
* Nominally the ledge is optimal while ``(1 - wind)^k > safe_reward``, i.e. below the critical wind
  ``wind_c ~ 1 - safe_reward^(1/k)``; under TV uncertainty ``rho`` (every factor) while
  ``(1 - wind / (1 - rho))^k > safe_reward``, i.e. below ``rho_c ~ 1 - wind / wind_c``: a robust
  agent at the source wind behaves as a nominal agent at wind ``wind / (1 - rho)``. These closed
  forms ignore the approach to the ledge; ``drjax.ledge_routes.critical_rho`` and
  ``critical_wind`` compute the exact switches with ``drjax.planning.robust_dp`` on ``LedgeGrid``'s
  model (``route_table`` lists the route per rho; in ``drjax.ledge_routes``, above the planner,
  which imports the environments).

``LedgeGrid`` is the same traverse on the rows (``gust`` is one row, no steering noise), a
``FiniteEnvironment`` with one-hot features (``d = num_rows * 3 + 1``: coordinate 0 for the fail
state, ``1 + 3 row + action`` otherwise) and an exact ``model(params)``. ``Ledge`` with ``jitter =
0`` and ``gust = dy`` moves row for row as ``LedgeGrid`` (tested); its default ``jitter`` adds a
small Gaussian steering error, so the state is continuous. ``Ledge``'s features
(``drjax.features``, per action block) read ``y`` only by default (``x`` is the step, which the
agents' per-step weights already see; ``obs_dims=(0, 1)`` reads both).

Params are traced (a batch of target domains is a ``vmap``): ``Ledge``: ``wind``, ``gust``,
``jitter``, ``safe_reward``; ``LedgeGrid``: ``wind``, ``safe_reward``. ``target_params(src, name,
values)`` shifts one family (``TARGETS``), e.g. ``drjax sweep --env ledge --targets
wind=0:0.5:11``.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, Callable, NamedTuple

import chex
import jax
import jax.numpy as jnp
import numpy as np

from drjax import _checks
from drjax import features as features_lib
from drjax.envs.base import Environment, FiniteEnvironment, LinearModel, ObservationFeatures
from drjax.envs.linear_mdp import _check, _check_state, _concrete, _float_dtype

Array = jax.Array

NUM_ACTIONS = 3  # 0: toward the edge, 1: straight, 2: away from the edge
ACTIONS = ("toward", "straight", "away")
# The target families (params a target domain may shift) of each environment.
TARGETS = {"ledge": ("wind", "gust", "jitter"), "ledge-grid": ("wind",)}
ROUTES = ("ledge", "plateau", "fail")


def _geometry(horizon, num_rows, rock_rows, split, start_row) -> tuple:
  """The validated static geometry (``ValueError`` naming the argument and its range)."""
  H = _checks.integer("horizon", horizon, 2)
  N = _checks.integer("num_rows", num_rows, 3)
  b = _checks.integer("rock_rows", rock_rows, 1, N - 2)
  c = _checks.integer("split", split, 1, H - 1)
  s0 = _checks.integer("start_row", start_row, 0, N - 1)
  return H, N, b, c, s0


class _Geometry:
  """The traverse's static structure, shared by ``Ledge`` and ``LedgeGrid``."""

  horizon: int
  num_rows: int
  rock_rows: int
  split: int
  start_row: int

  def _check_geometry(self):
    for k, v in zip(("horizon", "num_rows", "rock_rows", "split", "start_row"),
                    _geometry(self.horizon, self.num_rows, self.rock_rows, self.split,
                              self.start_row)):
      object.__setattr__(self, k, v)

  # The largest return (the payoff comes once, at the last step): what the recommended bonus
  # scale of the online agents is measured against (``drjax.envs.recommend.return_bound``).
  max_return = 1.0

  @property
  def num_actions(self) -> int:
    return NUM_ACTIONS

  @property
  def dy(self) -> float:
    """The row width ``1 / num_rows``."""
    return 1.0 / self.num_rows

  @property
  def ledge_steps(self) -> int:
    """``k = H - split``: the transitions the ledge route spends on the ledge."""
    return self.horizon - self.split

  def _move(self, y, h, action, push, noise):
    """One step of the traverse's physics at position ``y`` (step ``h``): steering ``action``
    with steering noise ``noise``, then a push of ``push`` toward the edge.

    Returns ``(y_next, failed)`` (JAX arrays; ``y_next`` is meaningless where ``failed``)."""
    dy = jnp.asarray(self.dy, y.dtype)
    lo, hi = dy, (1 + self.rock_rows) * dy  # the rock band [lo, hi), from step ``split`` on
    zone = (h + 1) >= self.split

    def side(z):  # -1: ledge side, 0: in the band, 1: upper plateau
      return jnp.where(z < lo, -1, jnp.where(z < hi, 0, 1))

    def stopped(z_from, z_to):  # the rock stops moves that enter or cross it
      s = side(z_from)
      return zone & (s != 0) & (side(z_to) != s)

    a = jnp.asarray(action, jnp.int32)
    ys = y + (a - 1).astype(y.dtype) * dy + noise
    ys = jnp.minimum(ys, (self.num_rows - 0.5) * dy)
    ys = jnp.where(stopped(y, ys), y, ys)
    yg = ys - push
    yg = jnp.where(stopped(ys, yg), ys, yg)
    failed = (yg < 0) | (zone & (side(yg) == 0))
    return yg, failed

  def _payoff(self, y, params) -> Array:
    """The last step's reward at position ``y``: 1 on the ledge, ``safe_reward`` above the rock."""
    dy = self.dy
    sr = jnp.asarray(params.safe_reward, y.dtype)
    return jnp.where(y < dy, jnp.ones_like(sr),
                     jnp.where(y >= (1 + self.rock_rows) * dy, sr, jnp.zeros_like(sr)))


def _check_fields(v: dict) -> None:
  """Shared ranges (``ValueError`` naming the field)."""
  for k, x in v.items():
    _check(np.isfinite(x), f"{k} must be finite", **{k: x})
  _check((v["wind"] >= 0) & (v["wind"] <= 1), "wind (gust probability per step) must be in "
         "[0, 1]", wind=v["wind"])
  _check((v["safe_reward"] >= 0) & (v["safe_reward"] <= 1), "safe_reward must be in [0, 1]",
         safe_reward=v["safe_reward"])


# ------------------------------------------------------------------------------------------------
# The continuous traverse.


class LedgeParams(NamedTuple):
  """Params of ``Ledge`` (float scalars, or arrays of one batch shape).

  Attributes:
    wind: ``[]`` gust probability per step, in [0, 1].
    gust: ``[]`` how far a gust pushes toward the edge (``y`` units, > 0; default one row).
    jitter: ``[]`` standard deviation of the Gaussian steering error (>= 0), also of the start.
    safe_reward: ``[]`` payoff of the upper plateau at the last step, in [0, 1] (the ledge's: 1).
  """

  wind: Array
  gust: Array
  jitter: Array
  safe_reward: Array


class LedgeState(NamedTuple):
  """State of ``Ledge``.

  Attributes:
    y: ``[]`` distance from the edge (frozen once failed).
    fail: ``[]`` bool: fell or crashed (the absorbing fail state).
    h: ``[]`` int32 step, 0-indexed.
  """

  y: Array
  fail: Array
  h: Array


def _to_tuple(name: str, v, cast):
  """The CLI's ``--env-arg`` passes strings: ``"2,3"`` -> ``(2, 3)``."""
  if isinstance(v, str):
    try:
      return tuple(cast(x) for x in v.split(","))
    except ValueError:
      raise ValueError(f"{name} must be a number or numbers separated by commas, got {v!r}"
                       ) from None
  if isinstance(v, (list, np.ndarray)):
    return tuple(np.asarray(v).tolist())
  return v


@dataclasses.dataclass(frozen=True)
class Ledge(_Geometry, ObservationFeatures, Environment):
  """The cliff-side traverse with continuous lateral position (see the module doc).

  Attributes:
    horizon: ``H >= 2`` steps (the payoff is the last step's reward).
    num_rows: rows of the plateau (>= 3; ``dy = 1 / num_rows``).
    rock_rows: rows of the rock band (in ``[1, num_rows - 2]``).
    split: the first step of the zone with the rock band (in ``[1, H - 1]``).
    start_row: the row whose center is the start (``y_0 = (start_row + 0.5) dy`` plus the
      steering error).
    features: ``"rbf"`` (default), ``"tiles"``, a ``drjax.features.FeatureMap`` or a hashable
      pure function ``obs [len(obs_dims)] -> [m]`` on the simplex.
    centers_per_dim, width: the RBF grid (``None``: ``2 num_rows + 1`` centers over ``y``, 5
      over ``x``).
    tiles_per_dim, num_tilings: the tile coding (``None``: ``2 num_rows`` tiles over ``y``, 4
      over ``x``).
    obs_dims: the observation coordinates ``(x, y)`` the features read: ``(1,)`` (default: ``y``)
      or ``(0, 1)``.
  """

  # Rewards are a step function of y: not linear in the features; agents regress them.
  reward_known = False
  feature_check = "validate"  # the constructor checks the map on the whole box
  state_type = LedgeState  # (ObservationFeatures: phi_all, is_fail, theta)
  params_type = LedgeParams

  horizon: int = 10
  num_rows: int = 5
  rock_rows: int = 1
  split: int = 5
  start_row: int = 2
  features: Any = "rbf"
  centers_per_dim: Any = None
  width: float = 0.5
  tiles_per_dim: Any = None
  num_tilings: int = 4
  obs_dims: Any = (1,)

  def __post_init__(self):
    self._check_geometry()
    set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731
    if isinstance(self.width, str):
      try:
        set_("width", float(self.width))
      except ValueError:
        raise ValueError(f"width must be a number > 0, got {self.width!r}") from None
    for k in ("centers_per_dim", "tiles_per_dim", "obs_dims"):
      set_(k, _to_tuple(k, getattr(self, k), int))
    if isinstance(self.obs_dims, int) and not isinstance(self.obs_dims, bool):
      set_("obs_dims", (self.obs_dims,))
    if self.obs_dims not in ((1,), (0, 1), (0,)):
      raise ValueError(f"obs_dims must be (1,) (y), (0, 1) (x and y) or (0,) (x), got "
                       f"{self.obs_dims!r}")
    fm = self.features
    if isinstance(fm, str):
      _checks.choice("features", fm, features_lib.KINDS)
    elif not callable(fm):
      raise TypeError(f"features must be 'rbf', 'tiles', a FeatureMap or a function obs -> [m], "
                      f"got {type(fm).__name__}")
    fmap = self.feature_map  # builds (and checks) the map
    lo, hi = self._box
    grid = np.stack(np.meshgrid(*(np.linspace(a, b, 41) for a, b in zip(lo, hi)),
                                indexing="ij"), -1).reshape(-1, len(lo))
    features_lib.check_feature_map(fmap, grid.astype(np.float32), self.num_actions)

  # ---------------------------------------------------------------- features
  @property
  def _box(self) -> tuple:
    full = ((0.0, 0.0), (1.0, 1.0))
    return (tuple(full[0][i] for i in self.obs_dims), tuple(full[1][i] for i in self.obs_dims))

  @functools.cached_property
  def feature_map(self) -> Callable:
    """The state feature map ``obs[obs_dims] -> [m]``."""
    fm = self.features
    n = {0: 5, 1: 2 * self.num_rows + 1}
    if fm == "rbf":
      c = self.centers_per_dim if self.centers_per_dim is not None else tuple(
          n[i] for i in self.obs_dims)
      return features_lib.rbf(*self._box, c, self.width)
    if fm == "tiles":
      t = self.tiles_per_dim if self.tiles_per_dim is not None else tuple(
          {0: 4, 1: 2 * self.num_rows}[i] for i in self.obs_dims)
      return features_lib.tile_coding(*self._box, t, self.num_tilings)
    return fm

  @functools.cached_property
  def num_state_features(self) -> int:
    fm = self.feature_map
    if isinstance(fm, features_lib.FeatureMap):
      return fm.num_features
    out = jax.eval_shape(fm, jax.ShapeDtypeStruct((len(self.obs_dims),), jnp.float32))
    if len(out.shape) != 1:
      raise ValueError(f"features: a user map must return the state features [m] of one "
                       f"observation, got shape {out.shape}")
    return int(out.shape[0])

  @property
  def feature_dim(self) -> int:
    return self.num_actions * self.num_state_features

  @property
  def targets(self) -> tuple:
    """The target families (``target_params`` names)."""
    return TARGETS["ledge"]

  def observation(self, state: LedgeState) -> Array:
    """``[2]`` the observation ``(x, y)`` with ``x = h / H``."""
    x = state.h.astype(state.y.dtype) / self.horizon
    return jnp.stack([x, state.y])

  def feature_obs(self, state: LedgeState) -> Array:
    """The feature map's input at ``state``: the observation's ``obs_dims``."""
    return self.observation(state)[np.asarray(self.obs_dims)]

  # ---------------------------------------------------------------- params
  def default_params(self) -> LedgeParams:
    """``wind = 0.1``, ``gust = dy`` (one row), ``jitter = dy / 20``, ``safe_reward = 0.5``."""
    return self.make_params()

  def make_params(self, wind: float = 0.1, gust: float | None = None,
                  jitter: float | None = None, safe_reward: float = 0.5) -> LedgeParams:
    """Params validated eagerly (``ValueError`` naming the field); ``gust`` ``None``: one row
    (``dy``); ``jitter`` ``None``: ``dy / 20`` (0.01 for 5 rows)."""
    gust = 1.0 / self.num_rows if gust is None else gust  # dy
    jitter = 1.0 / (20 * self.num_rows) if jitter is None else jitter  # dy / 20
    _checks.numbers_(wind=wind, gust=gust, jitter=jitter, safe_reward=safe_reward)
    for k, v in (("wind", wind), ("gust", gust), ("jitter", jitter), ("safe_reward", safe_reward)):
      _checks.scalar(k, v)
    f = lambda x: jnp.asarray(x, _float_dtype())  # noqa: E731
    params = LedgeParams(wind=f(wind), gust=f(gust), jitter=f(jitter), safe_reward=f(safe_reward))
    self.validate(params)
    return params

  def target_params(self, source_params: LedgeParams, name: str, value) -> LedgeParams:
    """Target domains: ``source_params`` with the field ``name`` (``TARGETS["ledge"]``: ``"wind"``,
    ``"gust"``, ``"jitter"``) set to ``value`` (a scalar or ``[N]``: every field then gets a
    leading ``[N]``, ready for ``jax.vmap``); checked by ``validate`` when concrete."""
    _checks.params_type(source_params, LedgeParams, "Ledge", "source_params")
    return _shift(self, source_params, name, value, TARGETS["ledge"])

  def validate(self, params: LedgeParams) -> None:
    """Host-side check: finite fields; ``wind``, ``safe_reward`` in [0, 1]; ``gust > 0``;
    ``jitter >= 0``. ``ValueError`` naming the field."""
    _checks.params_type(params, LedgeParams, "Ledge")
    v = {k: _concrete(k, x).astype(np.float64) for k, x in params._asdict().items()}
    _check_fields(v)
    _check(v["gust"] > 0, "gust must be > 0", gust=v["gust"])
    _check(v["jitter"] >= 0, "jitter must be >= 0", jitter=v["jitter"])

  # ---------------------------------------------------------------- dynamics
  def reset(self, key: chex.PRNGKey, params: LedgeParams) -> LedgeState:
    """``y_0 = (start_row + 0.5) dy + jitter * N(0, 1)`` (clipped into the plateau), ``h = 0``."""
    _checks.key("key", key)
    _checks.params_type(params, LedgeParams, "Ledge")
    dtype = jnp.result_type(params.jitter)
    eps = jax.random.normal(key, (), dtype)
    y0 = (self.start_row + 0.5) * self.dy + params.jitter * eps
    y0 = jnp.clip(y0, 0.0, (self.num_rows - 0.5) * self.dy).astype(dtype)
    return LedgeState(y=y0, fail=jnp.asarray(False), h=jnp.asarray(0, jnp.int32))

  def step(self, key: chex.PRNGKey, state: LedgeState, action: Array,
           params: LedgeParams) -> tuple[LedgeState, Array, Array]:
    """One step (see the module doc).

    Returns:
      ``(next_state, reward, done)``: the reward is the payoff at ``h = H - 1`` (0 before and in
      the fail state); a fall or crash makes the next state the fail state, which stays put;
      ``done = (h + 1 == H)``.
    """
    _checks.key("key", key)
    return self.step_given(self.step_noise(key, params), state, action, params)

  def step_noise(self, key: chex.PRNGKey, params: LedgeParams) -> Array:
    """``[2]`` ``(u, eps)``: the gust's uniform draw (a gust iff ``u < wind``) and the standard
    normal steering error (scaled by ``jitter``). One array, not a pair: the training loop slices
    the noise of all episodes along its leading axis."""
    _checks.key("key", key)
    _checks.params_type(params, LedgeParams, "Ledge")
    dtype = jnp.result_type(params.wind, params.jitter)
    k_u, k_e = jax.random.split(key)
    return jnp.stack([jax.random.uniform(k_u, (), dtype), jax.random.normal(k_e, (), dtype)])

  def step_given(self, noise, state: LedgeState, action: Array,
                 params: LedgeParams) -> tuple[LedgeState, Array, Array]:
    """``step`` given its random numbers ``noise = step_noise(key, params)`` (``[2]``: ``u``,
    ``eps``)."""
    _check_state(state, LedgeState, self)
    _checks.index("action", action, self.num_actions, "(action)")
    _checks.params_type(params, LedgeParams, "Ledge")
    _checks.array("noise", noise, (2,), "[2] (u, eps) from step_noise")
    u, eps = noise[0], noise[1]
    y = state.y
    push = jnp.where(u < params.wind, params.gust, jnp.zeros_like(params.gust)).astype(y.dtype)
    y2, failed = self._move(y, state.h, action, push, (params.jitter * eps).astype(y.dtype))
    alive = jnp.logical_not(state.fail)
    last = state.h == self.horizon - 1
    reward = jnp.where(alive & last, self._payoff(y, params), 0.0).astype(y.dtype)
    fail = state.fail | (alive & failed)
    h_next = (state.h + 1).astype(jnp.int32)
    return (LedgeState(y=jnp.where(alive & ~failed, y2, y).astype(y.dtype), fail=fail, h=h_next),
            reward, h_next == self.horizon)


def _shift(env, source_params, name, value, allowed):
  """``source_params`` with field ``name`` set to ``value`` (broadcast), validated if concrete."""
  if not isinstance(name, str) or name not in allowed:
    raise ValueError(f"name must be a target family of {type(env).__name__}: one of "
                     f"{allowed}, got {name!r}")
  _checks.numbers_(**{name: value})
  dtype = _float_dtype()
  value = jnp.asarray(value, dtype)
  fields = {k: jnp.broadcast_to(jnp.asarray(v, dtype), value.shape)
            for k, v in source_params._asdict().items()}
  fields[name] = value
  params = type(source_params)(**fields)
  if _checks.is_concrete(params):
    env.validate(params)
  return params


# ------------------------------------------------------------------------------------------------
# The finite version.


class LedgeGridParams(NamedTuple):
  """Params of ``LedgeGrid``: ``wind`` ``[]`` gust probability per step in [0, 1];
  ``safe_reward`` ``[]`` the upper plateau's payoff in [0, 1]."""

  wind: Array
  safe_reward: Array


class LedgeGridState(NamedTuple):
  """State of ``LedgeGrid``: ``s`` ``[]`` int32 (the row ``0..num_rows - 1``, or ``num_rows``:
  the fail state), ``h`` ``[]`` int32 step."""

  s: Array
  h: Array


@dataclasses.dataclass(frozen=True)
class LedgeGrid(_Geometry, FiniteEnvironment):
  """The traverse on the rows: a finite linear MDP with one-hot features and an exact model.

  States ``0..num_rows - 1`` are the rows, ``num_rows`` is the fail state; features one-hot per
  (row, action) (coordinate ``1 + 3 row + action``) and coordinate 0 at the fail state, so ``d =
  3 num_rows + 1`` and the d-rectangular TV set is the (s, a)-rectangular one. A gust moves the
  mass one row toward the edge. See the module doc and ``Ledge``.
  """

  feature_check = "validate"  # one-hot features, fixed

  horizon: int = 10
  num_rows: int = 5
  rock_rows: int = 1
  split: int = 5
  start_row: int = 2

  def __post_init__(self):
    self._check_geometry()

  @property
  def num_states(self) -> int:
    return self.num_rows + 1

  @property
  def fail_state(self) -> int:
    return self.num_rows

  @property
  def feature_dim(self) -> int:
    return NUM_ACTIONS * self.num_rows + 1

  @property
  def targets(self) -> tuple:
    return TARGETS["ledge-grid"]

  # ---------------------------------------------------------------- params
  def default_params(self) -> LedgeGridParams:
    """``wind = 0.1``, ``safe_reward = 0.5``."""
    return self.make_params()

  def make_params(self, wind: float = 0.1, safe_reward: float = 0.5) -> LedgeGridParams:
    """Params validated eagerly (``ValueError`` naming the field)."""
    _checks.numbers_(wind=wind, safe_reward=safe_reward)
    _checks.scalar("wind", wind)
    _checks.scalar("safe_reward", safe_reward)
    f = lambda x: jnp.asarray(x, _float_dtype())  # noqa: E731
    params = LedgeGridParams(wind=f(wind), safe_reward=f(safe_reward))
    self.validate(params)
    return params

  def target_params(self, source_params: LedgeGridParams, name: str, value) -> LedgeGridParams:
    """Target domains: ``source_params`` with ``name`` (``"wind"``) set to ``value`` (scalar or
    ``[N]``, every field broadcast to it)."""
    _checks.params_type(source_params, LedgeGridParams, "LedgeGrid", "source_params")
    return _shift(self, source_params, name, value, TARGETS["ledge-grid"])

  def validate(self, params: LedgeGridParams) -> None:
    """Host-side check: ``wind`` and ``safe_reward`` finite, in [0, 1] (``ValueError``)."""
    _checks.params_type(params, LedgeGridParams, "LedgeGrid")
    _check_fields({k: _concrete(k, x).astype(np.float64) for k, x in params._asdict().items()})

  # ---------------------------------------------------------------- model
  @functools.cached_property
  def _next_rows(self) -> np.ndarray:
    """``[H, N, A, 2]`` int: the next state without / with a gust (``num_rows``: fail), from the
    traverse's rules written on the rows (NumPy, host side, once per environment)."""
    H, N, b, c = self.horizon, self.num_rows, self.rock_rows, self.split
    side = lambda r: -1 if r < 1 else (0 if r <= b else 1)  # noqa: E731
    out = np.zeros((H, N, NUM_ACTIONS, 2), np.int32)
    for h in range(H):
      zone = h + 1 >= c
      for r in range(N):
        for a in range(NUM_ACTIONS):
          rs = min(r + a - 1, N - 1)
          if zone and side(r) != 0 and side(rs) != side(r):
            rs = r  # the rock stops the move
          for g in (0, 1):
            rg = rs - g
            if zone and side(rs) != 0 and side(rg) != side(rs):
              rg = rs  # the rock stops the gust
            fell = rg < 0 or (zone and side(rg) == 0)
            out[h, r, a, g] = N if fell else rg
    return out

  def _phi_table(self, dtype) -> Array:
    """``[S, A, d]`` one-hot features."""
    N = self.num_rows
    idx = np.zeros((N + 1, NUM_ACTIONS), np.int32)
    idx[:N] = 1 + NUM_ACTIONS * np.arange(N)[:, None] + np.arange(NUM_ACTIONS)[None, :]
    return jax.nn.one_hot(jnp.asarray(idx), self.feature_dim, dtype=dtype)

  def theta(self, params: LedgeGridParams) -> Array:
    """``[H, d]``: the payoff of each (row, action) at the last step, 0 before."""
    _checks.params_type(params, LedgeGridParams, "LedgeGrid")
    dtype = jnp.result_type(params.safe_reward)
    N, b = self.num_rows, self.rock_rows
    rows = np.arange(N)
    pay = jnp.where(jnp.asarray(rows == 0), 1.0,
                    jnp.where(jnp.asarray(rows > b), params.safe_reward, 0.0)).astype(dtype)
    last = jnp.concatenate([jnp.zeros((1,), dtype), jnp.repeat(pay, NUM_ACTIONS)])
    return jnp.zeros((self.horizon, self.feature_dim), dtype).at[-1].set(last)

  def model(self, params: LedgeGridParams) -> LinearModel:
    """The exact ``LinearModel``: ``P_h(.|row, a) = (1 - wind) e_{n0} + wind e_{n1}`` with ``n0``,
    ``n1`` the next states without / with a gust; the fail state absorbing. jit/vmap friendly."""
    _checks.params_type(params, LedgeGridParams, "LedgeGrid")
    dtype = jnp.result_type(params.wind, params.safe_reward)
    H, N, S, d = self.horizon, self.num_rows, self.num_states, self.feature_dim
    w = jnp.asarray(params.wind, dtype)
    nxt = self._next_rows  # [H, N, A, 2]
    rows = ((1 - w) * jax.nn.one_hot(jnp.asarray(nxt[..., 0]), S, dtype=dtype)
            + w * jax.nn.one_hot(jnp.asarray(nxt[..., 1]), S, dtype=dtype))  # [H, N, A, S]
    fail_row = jax.nn.one_hot(self.fail_state, S, dtype=dtype)
    mu = jnp.concatenate([jnp.broadcast_to(fail_row, (H, 1, S)),
                          rows.reshape(H, N * NUM_ACTIONS, S)], axis=1)  # [H, d, S]
    phi = jnp.broadcast_to(self._phi_table(dtype)[None], (H, S, NUM_ACTIONS, d))
    theta = self.theta(params)
    return LinearModel(
        phi=phi, theta=theta, mu=mu, reward=jnp.einsum("hsad,hd->hsa", phi, theta),
        fail_state=jnp.asarray(self.fail_state, jnp.int32),
        init_dist=jax.nn.one_hot(self.start_row, S, dtype=dtype))

  # ---------------------------------------------------------------- dynamics
  def reset(self, key: chex.PRNGKey, params: LedgeGridParams) -> LedgeGridState:
    """The start row at ``h = 0`` (``key`` is unused: a PRNG key or None)."""
    if key is not None:
      _checks.key("key", key)
    _checks.params_type(params, LedgeGridParams, "LedgeGrid")
    return LedgeGridState(s=jnp.asarray(self.start_row, jnp.int32), h=jnp.asarray(0, jnp.int32))

  def step(self, key: chex.PRNGKey, state: LedgeGridState, action: Array,
           params: LedgeGridParams) -> tuple[LedgeGridState, Array, Array]:
    """One step: the continuous traverse's physics (``Ledge``) at the row's center, with a gust
    of one row when ``u < wind`` and no steering error. Returns ``(next_state, reward, done)``."""
    _checks.key("key", key)
    return self.step_given(self.step_noise(key, params), state, action, params)

  def step_noise(self, key: chex.PRNGKey, params: LedgeGridParams) -> Array:
    """The gust's uniform draw ``u`` (a gust iff ``u < wind``)."""
    _checks.key("key", key)
    _checks.params_type(params, LedgeGridParams, "LedgeGrid")
    return jax.random.uniform(key, (), jnp.result_type(params.wind))

  def step_given(self, noise: Array, state: LedgeGridState, action: Array,
                 params: LedgeGridParams) -> tuple[LedgeGridState, Array, Array]:
    """``step`` given its uniform draw ``noise = step_noise(key, params)``."""
    _check_state(state, LedgeGridState, self)
    _checks.index("action", action, self.num_actions, "(action)")
    _checks.params_type(params, LedgeGridParams, "LedgeGrid")
    dtype = jnp.result_type(params.wind)
    alive = state.s != self.fail_state
    dy = self.dy
    y = (state.s.astype(dtype) + 0.5) * dy
    push = jnp.where(noise < params.wind, dy, 0.0).astype(dtype)
    y2, failed = self._move(y, state.h, action, push, jnp.zeros((), dtype))
    row = jnp.clip(jnp.floor(y2 / dy), 0, self.num_rows - 1).astype(jnp.int32)
    s_next = jnp.where(alive & ~failed, row, self.fail_state).astype(jnp.int32)
    last = state.h == self.horizon - 1
    reward = jnp.where(alive & last, self._payoff(y, params), 0.0).astype(dtype)
    h_next = (state.h + 1).astype(jnp.int32)
    return LedgeGridState(s=s_next, h=h_next), reward, h_next == self.horizon

  def phi_all(self, state: LedgeGridState, params: LedgeGridParams) -> Array:
    """``[A, d]`` one-hot features of every action at ``state``."""
    _checks.instance("state", state, LedgeGridState, "a LedgeGridState (env.reset / env.step)")
    _checks.index("state.s", state.s, self.num_states, "(state)")
    _checks.params_type(params, LedgeGridParams, "LedgeGrid")
    return self._phi_table(jnp.result_type(params.wind))[state.s]

  def is_fail(self, state: LedgeGridState, params: LedgeGridParams) -> Array:
    """Whether ``state`` is the fail state (a fall or a crash)."""
    _checks.instance("state", state, LedgeGridState, "a LedgeGridState (env.reset / env.step)")
    _checks.params_type(params, LedgeGridParams, "LedgeGrid")
    return state.s == self.fail_state


# ------------------------------------------------------------------------------------------------
# The exact answer's pieces here (the grid of a geometry, the closed form); the routes by robust_dp
# and their switches are drjax.ledge_routes's (above drjax.planning).


def _grid_of(env) -> LedgeGrid:
  """``LedgeGrid`` with the geometry of ``env`` (a ``Ledge`` or a ``LedgeGrid``)."""
  if isinstance(env, LedgeGrid):
    return env
  if isinstance(env, Ledge):
    return LedgeGrid(env.horizon, env.num_rows, env.rock_rows, env.split, env.start_row)
  raise TypeError(f"env must be a Ledge or a LedgeGrid, got {type(env).__name__}")


def _grid_params(env, params) -> LedgeGridParams:
  if isinstance(params, LedgeGridParams):
    return params
  if isinstance(params, LedgeParams):
    return LedgeGridParams(wind=params.wind, safe_reward=params.safe_reward)
  raise TypeError(f"params must be LedgeParams or LedgeGridParams, got {type(params).__name__}")


def closed_form(env, params) -> tuple[float, float]:
  """``(wind_c, rho_c)`` of the module doc's approximation: ``wind_c = 1 - safe_reward^(1/k)``,
  ``rho_c = 1 - wind / wind_c`` (``k = H - split``; ignores the approach to the ledge)."""
  grid = _grid_of(env)
  params = _grid_params(grid, params)
  k = grid.ledge_steps
  sr = float(_concrete("safe_reward", params.safe_reward))
  wind = float(_concrete("wind", params.wind))
  wc = 1.0 - sr ** (1.0 / k)
  return wc, (1.0 - wind / wc if wc > 0 else math.nan)


__all__ = ["ACTIONS", "Ledge", "LedgeGrid", "LedgeGridParams", "LedgeGridState", "LedgeParams",
           "LedgeState", "ROUTES", "TARGETS", "closed_form"]
