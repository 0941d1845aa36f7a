"""gymnax environments as drjax environments: finite horizon, rewards in [0, 1], d-rectangular
features, and physics shifts as target domains.

``GymnaxEnv(env_id, horizon, ...)`` wraps a gymnax environment with discrete actions (CartPole-v1,
Acrobot-v1, MountainCar-v0; Pendulum-v1 with a discretized torque set) in drjax's
``Environment`` interface. gymnax is an optional dependency (``pip install -e ".[gymnax]"``),
imported when an environment is built; ``drjax.envs.make("cartpole")`` etc. build these.

**Episodes.** ``reset`` is gymnax's ``reset_env(key, physics)``; ``step(key, ...)`` is gymnax's
``step_env(split(key)[0], ...)`` (the key gymnax's own ``step`` gives ``step_env``, so the same keys
give the same observations), without gymnax's auto-reset and time limit: an episode has exactly
``H = horizon`` steps (``done`` at step ``H``). A gymnax termination (the pole fell, the goal was
reached) turns the next state into the **fail state**: absorbing (it never moves again), reward 0,
all-zero features, ``is_fail`` true; the agents' ``fail_zero`` (the default) gives it value 0,
which is also the minimum the TV dual's fail-state form (``m = 0``) assumes. The transition *into*
the terminal state keeps its reward.

**Rewards in [0, 1]** (per step; ``H`` steps, so returns lie in ``[0, H]``):

* CartPole-v1: 1 per step taken while the pole is up (gymnax's reward), 0 in the fail state:
  the return is the number of steps survived, up to ``H``.
* Acrobot-v1: gymnax's ``-1`` per step and ``0`` on the step that lifts the tip above the bar,
  plus 1: 1 on reaching the goal, else 0. The return is 1 if the goal is reached within ``H``
  steps, else 0 (reaching it early is not rewarded more; the episode ends there).
* MountainCar-v0: gymnax pays ``-1`` on every step, the goal step included (``-1 + 1 = 0``
  carries no signal), so the map is 1 on the step that reaches the goal (gymnax's termination),
  else 0: as for Acrobot, the return is whether the goal was reached within ``H``.
* Pendulum-v1: ``(r - r_min) / (-r_min)`` with ``r_min = -(pi^2 + 0.1 max_speed^2 + 0.001
  max_torque^2)`` (gymnax's smallest reward, ``-16.27`` by default): 1 upright and still, 0 at the
  worst. Never terminates. The action ``a`` applies the torque ``linspace(-max_torque,
  max_torque, num_torques)[a]`` (``num_torques = 5`` by default).
* Other gymnax ids with discrete actions: ``reward_range=(lo, hi)`` maps ``(r - lo) / (hi - lo)``
  clipped to [0, 1] (and ``obs_low`` / ``obs_high`` give the feature box).

**No known theta.** ``theta(params)`` is all zeros: the reward is not linear in known parameters;
agents must regress it from the observed rewards (``reward="regressed"``), with the same features.

**Features** (``drjax.features``): ``features="rbf"`` (default; soft state aggregation),
``"tiles"`` (normalized tile coding) or a ``FeatureMap`` / any hashable pure function ``obs ->
[m]`` on the simplex (checked by ``check_feature_map`` on observations of the box when the
environment is built), placed per action block: ``d = A m``. The default box of each environment
is ``OBS_BOXES[env_id]`` (CartPole's velocities, unbounded in gymnax, are cut at the range a
balancing policy visits; observations outside the box are clipped).

**Params and targets.** ``GymnaxParams(physics)`` carries gymnax's ``EnvParams`` with every leaf
a JAX array, so a batch of target physics is a ``vmap`` over params. ``make_params(**physics)``
sets fields of the gymnax defaults; ``target_params(src, name_or_names, value)`` shifts one (or
several) of the family's fields (``TARGETS[env_id]``). Derived fields follow: CartPole's
``total_mass = masscart + masspole`` and ``polemass_length = masspole * length`` are always
recomputed (setting them directly is an error); Acrobot's ``link_com_pos_i`` keeps its position
relative to ``link_length_i`` (``0.5 * length`` by default; gymnax's dynamics read the second
link's length only through ``link_com_pos_2``).
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
from drjax.envs.base import Environment, ObservationFeatures
from drjax.envs.linear_mdp import _check, _check_state, _concrete, _float_dtype

Array = jax.Array

INSTALL_HINT = 'pip install -e ".[gymnax]"  (or: pip install "gymnax>=1.0.1,<2" six)'

# The registered names (drjax.envs.make) of the gymnax ids.
NAMES = {"cartpole": "CartPole-v1", "acrobot": "Acrobot-v1", "mountain-car": "MountainCar-v0",
         "pendulum": "Pendulum-v1"}

# The target families (physical fields a target domain may shift) of each environment, and
# aliases shifting several fields at once.
TARGETS = {
    "CartPole-v1": ("length", "gravity", "masspole", "masscart", "force_mag"),
    "Acrobot-v1": ("link_length_1", "link_length_2", "link_mass_1", "link_mass_2"),
    "MountainCar-v0": ("force", "gravity"),
    "Pendulum-v1": ("g", "m", "l"),
}
ALIASES = {
    "Acrobot-v1": {"link_length": ("link_length_1", "link_length_2"),
                   "link_mass": ("link_mass_1", "link_mass_2")},
}

_PI = math.pi
# The feature box of each known environment: (low, high) per observation coordinate.
OBS_BOXES = {
    # x, x_dot, theta, theta_dot (x and theta at gymnax's termination thresholds)
    "CartPole-v1": ((-2.4, -3.0, -0.2095, -3.5), (2.4, 3.0, 0.2095, 3.5)),
    # cos/sin of both joint angles, both joint velocities (gymnax's max_vel_1/2)
    "Acrobot-v1": ((-1.0, -1.0, -1.0, -1.0, -4 * _PI, -9 * _PI),
                   (1.0, 1.0, 1.0, 1.0, 4 * _PI, 9 * _PI)),
    # position, velocity
    "MountainCar-v0": ((-1.2, -0.07), (0.6, 0.07)),
    # cos theta, sin theta, theta_dot
    "Pendulum-v1": ((-1.0, -1.0, -8.0), (1.0, 1.0, 8.0)),
}
# Default feature sizes (d = A * prod(centers)): CartPole 2 * 81, Acrobot 3 * 144,
# MountainCar 3 * 49, Pendulum 5 * 45.
DEFAULT_CENTERS = {"CartPole-v1": 3, "Acrobot-v1": (2, 2, 2, 2, 3, 3), "MountainCar-v0": 7,
                   "Pendulum-v1": (3, 3, 5)}
# Tiles per dimension (d = A * num_tilings * prod(tiles + 1); 4 tilings: CartPole 648, Acrobot
# 1728, MountainCar 588, Pendulum 900).
DEFAULT_TILES = {"CartPole-v1": 2, "Acrobot-v1": (1, 1, 1, 1, 2, 2), "MountainCar-v0": 6,
                 "Pendulum-v1": (2, 2, 4)}
DEFAULT_HORIZONS = {"CartPole-v1": 100, "Acrobot-v1": 200, "MountainCar-v0": 200,
                    "Pendulum-v1": 100}

# Fields that must be > 0 (or >= 0) when present.
_POSITIVE = ("masscart", "masspole", "length", "force_mag", "tau", "link_length_1",
             "link_length_2", "link_mass_1", "link_mass_2", "link_moi", "dt", "force", "m", "l",
             "max_speed", "max_torque", "max_vel_1", "max_vel_2", "x_threshold",
             "theta_threshold_radians")
_NONNEGATIVE = ("gravity", "g", "torque_noise_max", "link_com_pos_1", "link_com_pos_2")
_CARTPOLE_DERIVED = ("total_mass", "polemass_length")


def gymnax_module():
  """The ``gymnax`` module, or an ``ImportError`` saying how to install it."""
  try:
    import gymnax  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    raise ImportError(f"the gymnax environments need the optional dependency gymnax: "
                      f"{INSTALL_HINT} ({e})") from None
  return gymnax


@functools.lru_cache(maxsize=None)
def _gym(env_id: str):
  """``(gymnax environment, its default EnvParams)`` of ``env_id`` (built once)."""
  return gymnax_module().make(env_id)


class GymnaxParams(NamedTuple):
  """Params of ``GymnaxEnv``: the gymnax ``EnvParams`` (every leaf a JAX array).

  Attributes:
    physics: gymnax's ``EnvParams`` of the environment (fields as in gymnax; float leaves in the
      computation's dtype, integer leaves int32); batched along leading axes for a batch of
      domains (``target_params``).
  """

  physics: Any


class GymnaxState(NamedTuple):
  """State of ``GymnaxEnv``.

  Attributes:
    env_state: gymnax's ``EnvState`` (frozen once failed).
    obs: ``[D]`` the observation of ``env_state`` (what the features read).
    fail: ``[]`` bool: the episode terminated (the absorbing fail state).
    h: ``[]`` int32 step, 0-indexed.
  """

  env_state: Any
  obs: Array
  fail: Array
  h: Array


def _fields(physics) -> dict:
  return {f.name: getattr(physics, f.name) for f in dataclasses.fields(physics)}


def _leaf(x, dtype):
  """A field as a JAX array: integers int32, everything else ``dtype``."""
  a = np.asarray(x) if not isinstance(x, jax.Array) else x
  if jnp.issubdtype(a.dtype, jnp.integer) or jnp.issubdtype(a.dtype, jnp.bool_):
    return jnp.asarray(a, jnp.int32)
  return jnp.asarray(a, dtype)


@dataclasses.dataclass(frozen=True)
class GymnaxEnv(ObservationFeatures, Environment):
  """A gymnax environment with discrete actions, cut at ``horizon`` steps (see module doc).

  Attributes:
    env_id: the gymnax id (``"CartPole-v1"``, ``"Acrobot-v1"``, ``"MountainCar-v0"``,
      ``"Pendulum-v1"``, or another gymnax id with discrete actions given ``reward_range``).
    horizon: episode length ``H`` (>= 1); ``None``: ``DEFAULT_HORIZONS[env_id]``.
    features: ``"rbf"``, ``"tiles"``, a ``drjax.features.FeatureMap``, or a hashable pure
      function ``obs [D] -> [m]`` with values on the simplex.
    centers_per_dim, width: the RBF grid (``features="rbf"``); ``None``: the defaults.
    tiles_per_dim, num_tilings: the tile coding (``features="tiles"``); ``None``: the defaults.
    num_torques: Pendulum-v1 only: the torque set ``linspace(-max_torque, max_torque, n)``
      (an integer >= 2).
    obs_low, obs_high: the feature box (``None``: ``OBS_BOXES[env_id]``).
    obs_dims: the observation coordinates the features read (0-based; ``None``: all), e.g.
      ``(2, 3)``: CartPole's pole angle and angular velocity only (``d = A prod(centers)`` over
      those coordinates).
    reward_range: ``(lo, hi)`` of gymnax's reward for ids without a built-in map.
  """

  # No known reward parameters: agents regress the reward (``reward="regressed"``).
  reward_known = False
  # The constructor checks the feature map (built-in maps are on the simplex by construction).
  feature_check = "validate"
  state_type = GymnaxState  # (ObservationFeatures: phi_all, is_fail, theta)
  params_type = GymnaxParams

  env_id: str = "CartPole-v1"
  horizon: int | None = None
  features: Any = "rbf"
  centers_per_dim: Any = None
  width: float = 0.5
  tiles_per_dim: Any = None
  num_tilings: int = 4
  num_torques: int = 5
  obs_low: tuple | None = None
  obs_high: tuple | None = None
  obs_dims: tuple | None = None
  reward_range: tuple | None = None

  def __post_init__(self):
    if not isinstance(self.env_id, str) or not self.env_id:
      raise TypeError(f"env_id must be a gymnax id (a string), got {self.env_id!r}")
    known = self.env_id in TARGETS
    set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731
    # The CLI's --env-arg passes strings for what is not an integer: "0.5", "2,2,3".
    if isinstance(self.width, str):
      try:
        set_("width", float(self.width))
      except ValueError:
        raise ValueError(f"width must be a number > 0, got {self.width!r}") from None
    for k in ("centers_per_dim", "tiles_per_dim", "obs_dims"):
      v = getattr(self, k)
      if isinstance(v, str):
        try:
          set_(k, tuple(int(x) for x in v.split(",")))
        except ValueError:
          raise ValueError(f"{k} must be an integer or integers separated by commas, got "
                           f"{v!r}") from None
    if isinstance(self.obs_dims, int) and not isinstance(self.obs_dims, bool):
      set_("obs_dims", (self.obs_dims,))
    for k in ("centers_per_dim", "tiles_per_dim", "obs_low", "obs_high", "reward_range",
              "obs_dims"):
      if isinstance(getattr(self, k), (list, np.ndarray)):  # hashable (a static jit argument)
        set_(k, tuple(np.asarray(getattr(self, k)).tolist()))
    if self.horizon is None:
      if not known:
        raise ValueError(f"horizon: give the episode length H for {self.env_id} (no default)")
      set_("horizon", DEFAULT_HORIZONS[self.env_id])
    _checks.integer("horizon", self.horizon, 1)
    _checks.integer("num_torques", self.num_torques, 2)
    gym, _ = _gym(self.env_id)
    if self.env_id != "Pendulum-v1":
      import gymnax.environments.spaces as spaces  # pylint: disable=g-import-not-at-top
      space = gym.action_space(gym.default_params)
      if not isinstance(space, spaces.Discrete):
        raise ValueError(f"env_id: {self.env_id} has a continuous action space "
                         f"({type(space).__name__}); only Pendulum-v1 is discretized here")
    if not known:
      if self.reward_range is None or len(tuple(self.reward_range)) != 2:
        raise ValueError(f"reward_range: give (lo, hi) of {self.env_id}'s reward (no built-in "
                         f"map to [0, 1] for it)")
      lo, hi = (float(v) for v in self.reward_range)
      if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise ValueError(f"reward_range must be finite (lo, hi) with lo < hi, got "
                         f"{self.reward_range!r}")
      set_("reward_range", (lo, hi))
    box = OBS_BOXES.get(self.env_id, (None, None))
    low = box[0] if self.obs_low is None else tuple(float(v) for v in self.obs_low)
    high = box[1] if self.obs_high is None else tuple(float(v) for v in self.obs_high)
    if low is None or high is None:
      raise ValueError(f"obs_low, obs_high: give the feature box of {self.env_id}'s "
                       f"observations (no default)")
    set_("obs_low", tuple(low))
    set_("obs_high", tuple(high))
    if self.obs_dims is not None:
      D = len(self.obs_low)
      dims = self.obs_dims
      if (not isinstance(dims, tuple) or not dims or len(set(dims)) != len(dims) or not all(
          isinstance(i, int) and not isinstance(i, bool) and 0 <= i < D for i in dims)):
        raise ValueError(f"obs_dims must be distinct observation indices in [0, {D - 1}], got "
                         f"{self.obs_dims!r}")
    fm = self.features
    if isinstance(fm, str):
      _checks.choice("features", fm, features_lib.KINDS)
    elif not callable(fm):
      raise TypeError(f"features must be 'rbf', 'tiles', a FeatureMap or a function obs -> [m], "
                      f"got {type(fm).__name__}")
    fmap = self.feature_map  # builds (and checks) the map
    if not isinstance(fmap, features_lib.FeatureMap):
      rng = np.random.default_rng(0)  # fixed sample points of the box, not a random stream
      lo, hi = self._box
      samples = rng.uniform(np.asarray(lo), np.asarray(hi), (64, len(lo)))
      features_lib.check_feature_map(fmap, samples.astype(np.float32), self.num_actions)

  # ---------------------------------------------------------------- structure
  @property
  def gym(self):
    """The gymnax environment object."""
    return _gym(self.env_id)[0]

  @property
  def num_actions(self) -> int:
    return self.num_torques if self.env_id == "Pendulum-v1" else int(self.gym.num_actions)

  @functools.cached_property
  def feature_map(self) -> Callable:
    """The state feature map ``obs [D] -> [m]``."""
    fm = self.features
    if fm == "rbf":
      c = self.centers_per_dim if self.centers_per_dim is not None else self._default(
          DEFAULT_CENTERS)
      return features_lib.rbf(*self._box, c, self.width)
    if fm == "tiles":
      t = self.tiles_per_dim if self.tiles_per_dim is not None else self._default(DEFAULT_TILES)
      return features_lib.tile_coding(*self._box, t, self.num_tilings)
    return fm

  def _default(self, table: dict):
    """The environment's default sizes, restricted to ``obs_dims``."""
    n = table.get(self.env_id, 3)
    if isinstance(n, tuple) and self.obs_dims is not None:
      n = tuple(n[i] for i in self.obs_dims)
    return n

  @property
  def _box(self) -> tuple:
    """``(low, high)`` of the coordinates the features read (``obs_dims``)."""
    if self.obs_dims is None:
      return self.obs_low, self.obs_high
    return (tuple(self.obs_low[i] for i in self.obs_dims),
            tuple(self.obs_high[i] for i in self.obs_dims))

  def feature_input(self, obs) -> Array:
    """The observation coordinates the features read (``obs_dims``; all by default)."""
    obs = jnp.asarray(obs)
    return obs if self.obs_dims is None else obs[np.asarray(self.obs_dims)]

  @functools.cached_property
  def num_state_features(self) -> int:
    fm = self.feature_map
    if isinstance(fm, features_lib.FeatureMap):
      return fm.num_features
    out = jax.eval_shape(fm, jax.ShapeDtypeStruct((len(self._box[0]),), jnp.float32))
    if len(out.shape) != 1:
      raise ValueError(f"features: a user map must return the state features [m] of one "
                       f"observation, got shape {out.shape}")
    return int(out.shape[0])

  @property
  def feature_dim(self) -> int:
    return self.num_actions * self.num_state_features

  @property
  def targets(self) -> tuple:
    """The target families (``target_params`` names) of this environment."""
    return TARGETS.get(self.env_id, ()) + tuple(ALIASES.get(self.env_id, {}))

  # ---------------------------------------------------------------- params
  def default_params(self) -> GymnaxParams:
    """gymnax's default physics of the environment."""
    return self.make_params()

  def make_params(self, **physics) -> GymnaxParams:
    """gymnax's default ``EnvParams`` with the given fields set (derived fields follow; see the
    module doc), as ``GymnaxParams``; validated eagerly (``ValueError`` naming the field)."""
    _, default = _gym(self.env_id)
    allowed = _fields(default)
    for k in physics:
      if k not in allowed:
        raise ValueError(f"unknown physics field {k!r} for {self.env_id}; its fields: "
                         f"{', '.join(f for f in allowed if f not in _CARTPOLE_DERIVED)}")
      if self.env_id == "CartPole-v1" and k in _CARTPOLE_DERIVED:
        raise ValueError(f"{k} is derived (total_mass = masscart + masspole, polemass_length = "
                         f"masspole * length): set masscart / masspole / length instead")
      if k != "available_torque":
        _checks.numbers_(**{k: physics[k]})
        _checks.scalar(k, physics[k])
    dtype = _float_dtype()
    src = {k: _leaf(v, dtype) for k, v in allowed.items()}
    new = {k: _leaf(v, dtype) for k, v in physics.items()}
    params = GymnaxParams(default.replace(**self._derive(src, new)))
    self.validate(params)
    return params

  def _derive(self, src: dict, new: dict) -> dict:
    """The fields ``new`` over ``src`` with the derived fields recomputed (all JAX arrays)."""
    out = dict(src)
    out.update(new)
    if self.env_id == "CartPole-v1":
      out["total_mass"] = out["masspole"] + out["masscart"]
      out["polemass_length"] = out["masspole"] * out["length"]
    elif self.env_id == "Acrobot-v1":
      for i in (1, 2):
        ln, com = f"link_length_{i}", f"link_com_pos_{i}"
        if ln in new and com not in new:
          out[com] = src[com] * out[ln] / src[ln]
    return out

  def _target_names(self, name_or_names) -> tuple:
    names = (name_or_names,) if isinstance(name_or_names, str) else tuple(name_or_names)
    if not names or not all(isinstance(n, str) for n in names):
      raise TypeError(f"name_or_names must be a target field name or a sequence of them, got "
                      f"{name_or_names!r}")
    out = []
    for n in names:
      if n in ALIASES.get(self.env_id, {}):
        out.extend(ALIASES[self.env_id][n])
      elif n in TARGETS.get(self.env_id, ()) or (self.env_id not in TARGETS and n in _fields(
          _gym(self.env_id)[1]) and n != "max_steps_in_episode"):
        out.append(n)
      else:
        raise ValueError(f"unknown target field {n!r} for {self.env_id}; its target families: "
                         f"{', '.join(self.targets)}")
    if len(set(out)) != len(out):
      raise ValueError(f"name_or_names: a field is named twice in {names!r}")
    return tuple(out)

  def target_params(self, source_params: GymnaxParams, name_or_names, value) -> GymnaxParams:
    """Target domains: ``source_params`` with the field(s) ``name_or_names`` set to ``value``.

    Args:
      source_params: the source ``GymnaxParams`` (unbatched).
      name_or_names: a target family (``self.targets``: e.g. ``"length"``; Acrobot's
        ``"link_length"`` sets both links) or a sequence of field names.
      value: the new value: a scalar or an array ``[N]`` (every leaf then gets a leading ``[N]``,
        ready for ``jax.vmap``); with several names, the same value for each, or a tuple of one
        value per name (broadcast together).

    Returns:
      ``GymnaxParams`` with the derived fields recomputed; checked by ``validate`` when concrete.
    """
    _checks.params_type(source_params, GymnaxParams, "GymnaxEnv", "source_params")
    names = self._target_names(name_or_names)
    values = (tuple(value) if isinstance(value, tuple) and len(names) > 1 else
              (value,) * len(names))
    if len(values) != len(names):
      raise ValueError(f"value: give one value or {len(names)} (one per name), got "
                       f"{len(values)}")
    for n, v in zip(names, values):
      _checks.numbers_(**{n: v})
    dtype = _float_dtype()
    values = [jnp.asarray(v, dtype) for v in values]
    shape = jnp.broadcast_shapes(*(v.shape for v in values))
    src = {k: jnp.broadcast_to(_leaf(v, dtype), shape + jnp.shape(v))
           for k, v in _fields(source_params.physics).items()}
    new = {n: jnp.broadcast_to(v, shape) for n, v in zip(names, values)}
    params = GymnaxParams(source_params.physics.replace(**self._derive(src, new)))
    if _checks.is_concrete(params):
      self.validate(params)
    return params

  def validate(self, params: GymnaxParams) -> None:
    """Host-side check: finite fields; masses, lengths, forces, time steps > 0; gravity >= 0;
    CartPole's derived fields consistent. ``ValueError`` naming the field."""
    _checks.params_type(params, GymnaxParams, "GymnaxEnv")
    _, default = _gym(self.env_id)
    if type(params.physics) is not type(default):
      raise TypeError(f"params.physics must be {self.env_id}'s gymnax EnvParams, got "
                      f"{type(params.physics).__name__}")
    v = {k: _concrete(k, x).astype(np.float64) for k, x in _fields(params.physics).items()}
    for k, x in v.items():
      _check(np.isfinite(x), f"{k} must be finite", **{k: x})
    for k in _POSITIVE:
      if k in v:
        _check(v[k] > 0, f"{k} must be > 0", **{k: v[k]})
    for k in _NONNEGATIVE:
      if k in v:
        _check(v[k] >= 0, f"{k} must be >= 0", **{k: v[k]})
    if self.env_id == "CartPole-v1":
      tol = 1e-5 * (1 + np.abs(v["total_mass"]))
      _check(np.abs(v["total_mass"] - v["masscart"] - v["masspole"]) <= tol,
             "total_mass must equal masscart + masspole (build params with make_params / "
             "target_params)", total_mass=v["total_mass"], masscart=v["masscart"],
             masspole=v["masspole"])
      tol = 1e-5 * (1 + np.abs(v["polemass_length"]))
      _check(np.abs(v["polemass_length"] - v["masspole"] * v["length"]) <= tol,
             "polemass_length must equal masspole * length (build params with make_params / "
             "target_params)", polemass_length=v["polemass_length"], masspole=v["masspole"],
             length=v["length"])

  # ---------------------------------------------------------------- rewards and features
  def torques(self, params: GymnaxParams) -> Array:
    """Pendulum-v1: ``[A]`` the torque of each action, ``linspace(-max_torque, max_torque, A)``."""
    mt = jnp.asarray(params.physics.max_torque)
    return jnp.linspace(-1.0, 1.0, self.num_torques, dtype=mt.dtype) * mt

  def _gym_action(self, action, params: GymnaxParams):
    a = jnp.asarray(action, jnp.int32)
    return self.torques(params)[a] if self.env_id == "Pendulum-v1" else a

  def reward01(self, reward, terminated, params: GymnaxParams) -> Array:
    """gymnax's reward of a transition mapped into [0, 1] (see the module doc)."""
    r = jnp.asarray(reward)
    p = params.physics
    if self.env_id == "CartPole-v1":
      out = r
    elif self.env_id == "Acrobot-v1":
      out = r + 1.0
    elif self.env_id == "MountainCar-v0":
      out = jnp.asarray(terminated, r.dtype)
    elif self.env_id == "Pendulum-v1":
      r_min = -(jnp.pi**2 + 0.1 * p.max_speed**2 + 0.001 * p.max_torque**2)
      out = (r - r_min) / (-r_min)
    else:
      lo, hi = self.reward_range
      out = jnp.clip((r - lo) / (hi - lo), 0.0, 1.0)
    return out

  def feature_obs(self, state: GymnaxState) -> Array:
    """The feature map's input at ``state``: ``feature_input(state.obs)``."""
    return self.feature_input(state.obs)

  # ---------------------------------------------------------------- dynamics
  def _norm(self, env_state):
    """gymnax's state with every leaf a JAX array of a fixed dtype (a scan carry's types)."""
    dtype = _float_dtype()
    return jax.tree_util.tree_map(lambda x: _leaf(x, dtype), env_state)

  def reset(self, key: chex.PRNGKey, params: GymnaxParams) -> GymnaxState:
    """gymnax's ``reset_env(key, physics)``; not failed, ``h = 0``."""
    _checks.key("key", key)
    _checks.params_type(params, GymnaxParams, "GymnaxEnv")
    obs, es = self.gym.reset_env(key, params.physics)
    return GymnaxState(env_state=self._norm(es), obs=jnp.asarray(obs, _float_dtype()),
                       fail=jnp.asarray(False), h=jnp.asarray(0, jnp.int32))

  def step(self, key: chex.PRNGKey, state: GymnaxState, action: Array,
           params: GymnaxParams) -> tuple[GymnaxState, Array, Array]:
    """One step: gymnax's ``step_env(split(key)[0], ...)`` (the key gymnax's ``step`` passes).

    Returns:
      ``(next_state, reward, done)``: the reward mapped into [0, 1]; a termination makes the next
      state the fail state; the fail state stays put with reward 0; ``done = (h + 1 == H)``.
    """
    _checks.key("key", key)
    _check_state(state, GymnaxState, self)
    return self.step_given(jax.random.split(key)[0], state, action, params)

  def step_noise(self, key: chex.PRNGKey, params: GymnaxParams) -> Array:
    """The key ``step`` hands gymnax's ``step_env`` (``split(key)[0]``)."""
    _checks.key("key", key)
    _checks.params_type(params, GymnaxParams, "GymnaxEnv")
    return jax.random.split(key)[0]

  def step_given(self, noise: Array, state: GymnaxState, action: Array,
                 params: GymnaxParams) -> tuple[GymnaxState, Array, Array]:
    """``step`` given the key of gymnax's ``step_env`` (``step_noise(key, params)``)."""
    _check_state(state, GymnaxState, self)
    _checks.index("action", action, self.num_actions, "(action)")
    _checks.params_type(params, GymnaxParams, "GymnaxEnv")
    obs2, es2, r, term, _ = self.gym.step_env(noise, state.env_state,
                                              self._gym_action(action, params), params.physics)
    dtype = _float_dtype()
    es2 = self._norm(es2)
    alive = jnp.logical_not(state.fail)
    keep = lambda new, old: jnp.where(alive, new, old)  # noqa: E731
    next_es = jax.tree_util.tree_map(keep, es2, state.env_state)
    next_obs = keep(jnp.asarray(obs2, dtype), state.obs)
    reward = jnp.where(alive, self.reward01(jnp.asarray(r, dtype), term, params), 0.0)
    fail = jnp.logical_or(state.fail, jnp.logical_and(alive, jnp.asarray(term, bool)))
    h_next = (state.h + 1).astype(jnp.int32)
    return (GymnaxState(env_state=next_es, obs=next_obs, fail=fail, h=h_next),
            reward.astype(dtype), h_next == self.horizon)


def make(name: str, **kwargs) -> GymnaxEnv:
  """``GymnaxEnv`` of the registered ``name`` (``NAMES``) with constructor ``kwargs``."""
  return GymnaxEnv(env_id=NAMES[name], **kwargs)


__all__ = ["ALIASES", "GymnaxEnv", "GymnaxParams", "GymnaxState", "NAMES", "OBS_BOXES",
           "TARGETS", "gymnax_module", "make"]
