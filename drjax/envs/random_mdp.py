"""Random finite d-rectangular linear (DR)MDPs with a fail state, for tests and benchmarks.

``RandomLinearMDP`` is a ``FiniteEnvironment`` whose ``EnvParams`` *are* the model arrays, so any
finite linear MDP (random or hand-built) can be plugged in, and a batch of instances is a
``jax.vmap`` over params. ``random_linear_drmdp`` draws valid instances that follow the paper's
fail-state extension (Section 4.1): ``phi(s_f, a) = e_0``, ``phi(s, a) = [0, phi'(s, a)]``
otherwise, ``mu_{h,0} = delta_{s_f}``, ``theta_h = [0, theta'_h]``.

Params are traced under ``jit`` and cannot be checked there; call ``validate`` (or build them
with ``make_params``) on the host.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp
import numpy as np

from drjax import _checks
from drjax.envs.base import FiniteEnvironment, LinearModel, categorical_given, sample_categorical
from drjax.envs.linear_mdp import _check, _check_state, _concrete, _float_dtype

Array = jax.Array

_ATOL = 1e-6


class RandomMDPParams(NamedTuple):
  """The model of a finite linear DRMDP (Assumptions 1-2), as traced arrays.

  Attributes:
    phi: ``[H, S, A, d]`` features, each ``phi[h, s, a]`` on the simplex.
    theta: ``[H, d]`` reward parameters, ``r_h(s, a) = <phi[h, s, a], theta[h]>``.
    mu: ``[H, d, S]`` factor distributions, each ``mu[h, i]`` a distribution over states.
    fail_state: ``[]`` int32 index of the fail state.
    init_dist: ``[S]`` initial-state distribution.
  """

  phi: Array
  theta: Array
  mu: Array
  fail_state: Array
  init_dist: Array


class RandomMDPState(NamedTuple):
  """State of ``RandomLinearMDP``: ``s`` ``[]`` int32 state index, ``h`` ``[]`` int32 step."""

  s: Array
  h: Array


def _flat_dirichlets(key: chex.PRNGKey, concentration: float, shapes, dtype) -> list[Array]:
  """One array per ``shape`` in ``shapes``, its last axis a ``Dir(concentration)`` draw.

  For ``concentration == 1`` (uniform on the simplex) this normalizes i.i.d. ``Exp(1)`` draws from a
  single exponential sample (exact, one PRNG call: ``jax.random.dirichlet``'s gamma sampler and
  every extra ``threefry`` call cost seconds of XLA compilation on a small CPU). Other values use
  ``jax.random.dirichlet``.
  """
  if isinstance(concentration, (int, float)) and concentration == 1:
    sizes = [int(np.prod(shape)) for shape in shapes]
    e = jax.random.exponential(key, (sum(sizes),), dtype)
    parts = jnp.split(e, np.cumsum(sizes)[:-1])
    return [_normalize(x.reshape(shape)) for x, shape in zip(parts, shapes)]
  keys = jax.random.split(key, len(shapes))
  return [jax.random.dirichlet(k, jnp.full(shape[-1:], concentration, dtype), shape[:-1], dtype)
          for k, shape in zip(keys, shapes)]


def _normalize(x: Array) -> Array:
  return x / jnp.sum(x, axis=-1, keepdims=True)


FEATURES = ("dense", "sparse", "one-hot")
STRUCTURES = ("random", "aliased")


def _choose(key: chex.PRNGKey, shape: tuple, n: int, k: int) -> Array:
  """``shape + (k,)`` int32 indices: for every leading index, ``k`` distinct values of ``range(n)``
  chosen uniformly at random (the positions of the ``k`` largest of ``n`` i.i.d. uniforms)."""
  u = jax.random.uniform(key, shape + (n,))
  return jax.lax.top_k(u, k)[1].astype(jnp.int32)


def _scatter(weights: Array, idx: Array, n: int) -> Array:
  """``weights [..., k]`` placed at the distinct indices ``idx [..., k]`` of a zero ``[..., n]``
  (a scatter: every entry is one weight or zero)."""
  lead, k = weights.shape[:-1], weights.shape[-1]
  rows = int(np.prod(lead))
  out = jnp.zeros((rows, n), weights.dtype).at[jnp.arange(rows)[:, None], idx.reshape(rows, k)]
  return out.set(weights.reshape(rows, k)).reshape(lead + (n,))


@dataclasses.dataclass(frozen=True)
class RandomLinearMDP(FiniteEnvironment):
  """A finite linear MDP whose params hold its model (``phi``, ``theta``, ``mu``, ...).

  The generator knobs (static: one compilation of ``sample_params`` per configuration) set the
  feature family and the transition factors separately; the defaults draw exactly what
  ``sample_params(key)`` drew before the knobs existed (bit for bit).

  Attributes:
    num_states: ``S >= 2`` (one of them is the fail state). Defaults give a small instance.
    num_actions: ``A >= 1``.
    feature_dim: ``d >= 2`` (coordinate 0 is reserved for the fail state by the generator).
    horizon: ``H >= 1``.
    features: ``"dense"`` (``phi'(s, a) ~ Dir(feature_concentration 1_{d-1})``), ``"sparse"``
      (``sparsity`` of the ``d - 1`` coordinates chosen uniformly at random per ``(s, a)``,
      ``Dir(feature_concentration 1_sparsity)`` weights on them) or ``"one-hot"`` (tabular: each
      non-fail ``(s, a)`` puts all its mass on one coordinate; a random balanced assignment that
      uses every coordinate, so it needs ``(S - 1) A >= d - 1``, ``A >= d - 1`` when aliased).
    sparsity: for ``"sparse"`` only (required there): nonzeros per feature, in ``[1, d - 1]``.
    feature_concentration: Dirichlet concentration ``> 0`` of the feature weights (``"dense"``,
      ``"sparse"``); ``None``: ``sample_params``'s ``concentration`` (default 1).
    factor_concentration: Dirichlet concentration ``> 0`` of each factor ``mu_{h,i}`` (``i >= 1``)
      over its support and of ``init_dist``; ``None``: ``sample_params``'s ``concentration``.
    factor_support: number of states, in ``[1, S]``, each factor ``mu_{h,i}`` (``i >= 1``) puts
      mass on, chosen uniformly at random among all ``S`` states (the fail state included);
      ``None``: all ``S`` states (the original generator).
    structure: ``"random"`` or ``"aliased"``: every non-fail state has the same features,
      ``phi(s, a) = [0, psi(a)]`` (``psi`` from the ``features`` family), so all non-fail states are
      equivalent and the robust optimum is known in closed form (``closed_form_robust_values``).
  """

  # Defaults are required, not just convenient: a field without a default would leave the base
  # class's read-only property of the same name visible to the dataclass ``__init__``.
  num_states: int = 8
  num_actions: int = 4
  feature_dim: int = 5
  horizon: int = 4
  features: str = "dense"
  sparsity: int | None = None
  feature_concentration: float | None = None
  factor_concentration: float | None = None
  factor_support: int | None = None
  structure: str = "random"
  # The features are params.phi, which validate(params) keeps on the simplex.
  feature_check = "validate"

  def __post_init__(self):
    for name, lo in (("num_states", 2), ("num_actions", 1), ("feature_dim", 2), ("horizon", 1)):
      _checks.integer(name, getattr(self, name), lo)
    S, A, d = self.num_states, self.num_actions, self.feature_dim
    _checks.choice("features", self.features, FEATURES)
    _checks.choice("structure", self.structure, STRUCTURES)
    for name in ("feature_concentration", "factor_concentration"):
      v = getattr(self, name)
      if isinstance(v, str):  # the CLI's --env-arg passes what is not an integer as a string
        try:
          v = float(v)
        except ValueError:
          raise ValueError(f"{name} must be a number > 0 or None, got {v!r}") from None
      if v is not None:
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.number)):
          raise TypeError(f"{name} must be a number > 0 or None, got {type(v).__name__} {v!r}")
        v = _checks.number(name, v, 0, lo_open=True)  # a Python float: a static cache key
      object.__setattr__(self, name, v)
    if self.features == "sparse":
      if self.sparsity is None:
        raise ValueError(f"sparsity is required for features='sparse': an integer in "
                         f"[1, {d - 1}] (d - 1)")
      object.__setattr__(self, "sparsity", _checks.integer("sparsity", self.sparsity, 1, d - 1))
    elif self.sparsity is not None:
      raise ValueError(f"sparsity applies to features='sparse' only (features={self.features!r}),"
                       f" got sparsity={self.sparsity!r}")
    if self.features == "one-hot":
      if self.feature_concentration is not None:
        raise ValueError("feature_concentration does not apply to features='one-hot' (each "
                         f"feature is one coordinate), got {self.feature_concentration!r}")
      pairs, what = ((A, "num_actions A") if self.structure == "aliased"
                     else ((S - 1) * A, "(num_states - 1) * num_actions"))
      if pairs < d - 1:
        raise ValueError(f"features='one-hot' needs {what} >= feature_dim - 1 so that every "
                         f"coordinate is used, got {pairs} < {d - 1}")
    object.__setattr__(self, "factor_support",
                       _checks.optional_integer("factor_support", self.factor_support, 1, S))

  @property
  def _shapes(self) -> dict[str, tuple[int, ...]]:
    H, S, A, d = self.horizon, self.num_states, self.num_actions, self.feature_dim
    return {"phi": (H, S, A, d), "theta": (H, d), "mu": (H, d, S), "fail_state": (),
            "init_dist": (S,)}

  # ---------------------------------------------------------------- params
  def sample_params(self, key: chex.PRNGKey, concentration: float | None = None
                    ) -> RandomMDPParams:
    """Draws a random valid instance with the fail-state extension of Section 4.1.

    Time-homogeneous features ``phi(s, a) = [0, phi'(s, a)]`` for ``s != s_f`` (``phi'`` from the
    ``features`` family; default ``Dir(concentration 1_{d-1})``) and ``phi(s_f, a) = e_0``;
    factors ``mu_{h,0} = delta_{s_f}`` and ``mu_{h,i}`` for ``i >= 1`` Dirichlet over
    ``factor_support`` random states (default ``Dir(concentration 1_S)``);
    ``theta_h = [0, U[0,1]^{d-1}]`` (so rewards are in ``[0, 1]`` and zero at ``s_f``);
    ``init_dist`` Dirichlet over the non-fail states. The fail state is index 0. Pure JAX:
    ``jax.vmap`` over keys gives a batch. The same key gives the same ``theta`` in every family.

    Args:
      key: PRNG key.
      concentration: Python float Dirichlet concentration of both the features and the factors
        (small values give near-deterministic rows), the original single knob; ``None``: 1, or the
        constructor's ``feature_concentration`` / ``factor_concentration`` (giving both is an
        error). 1 is fast; other values use ``jax.random.dirichlet``, whose gamma sampler takes
        seconds to compile on CPU.

    Returns:
      ``RandomMDPParams``.
    """
    _checks.key("key", key)
    if concentration is not None:
      if isinstance(concentration, (bool, np.bool_)) or not isinstance(
          concentration, (int, float, np.number)):
        raise TypeError(f"concentration must be a Python float > 0, got {concentration!r}")
      _checks.number("concentration (Dirichlet)", concentration, 0, lo_open=True)
      given = [n for n in ("feature_concentration", "factor_concentration")
               if getattr(self, n) is not None]
      if given:
        raise ValueError(f"concentration and the environment's {' and '.join(given)} are both "
                         "given; set the concentrations in one place")
      concentration = float(concentration)
    else:
      concentration = 1.0
    return _sample_params(self, key, concentration)

  def _sample_params(self, key: chex.PRNGKey, concentration: float) -> RandomMDPParams:
    H, S, A, d = self.horizon, self.num_states, self.num_actions, self.feature_dim
    dtype = _float_dtype()
    k_dir, k_theta = jax.random.split(key)
    fail = 0
    c_phi = concentration if self.feature_concentration is None else self.feature_concentration
    c_mu = concentration if self.factor_concentration is None else self.factor_concentration
    if (self.features == "dense" and self.factor_support is None and self.structure == "random"
        and c_phi == c_mu):
      # The original generator (bit for bit): one draw for all three groups.
      phi_rest, mu_rest, init_rest = _flat_dirichlets(
          k_dir, c_phi, [(S, A, d - 1), (H, d - 1, S), (S - 1,)], dtype)
    else:
      k_phi, k_mu, k_init = jax.random.split(k_dir, 3)
      rows = (1 if self.structure == "aliased" else S, A)
      phi_rest = self._features(k_phi, rows, c_phi, dtype)
      if self.structure == "aliased":
        phi_rest = jnp.broadcast_to(phi_rest, (S, A, d - 1))
      mu_rest, init_rest = self._factors(k_mu, k_init, c_mu, dtype)
    phi = jnp.concatenate([jnp.zeros((S, A, 1), dtype), phi_rest], axis=-1)  # [S, A, d]
    phi = phi.at[fail].set(jnp.zeros((A, d), dtype).at[:, 0].set(1))
    phi = jnp.broadcast_to(phi[None], (H, S, A, d))
    mu_fail = jnp.broadcast_to(jax.nn.one_hot(fail, S, dtype=dtype), (H, 1, S))
    mu = jnp.concatenate([mu_fail, mu_rest], axis=1)  # [H, d, S]
    theta = jax.random.uniform(k_theta, (H, d), dtype).at[:, 0].set(0)
    init_dist = jnp.concatenate([jnp.zeros((1,), dtype), init_rest])
    return RandomMDPParams(phi=phi, theta=theta, mu=mu,
                           fail_state=jnp.asarray(fail, jnp.int32), init_dist=init_dist)

  def _features(self, key: chex.PRNGKey, rows: tuple, c: float, dtype) -> Array:
    """``rows + (d - 1,)`` non-fail feature coordinates from the ``features`` family (row 0 of a
    ``[S, A]`` grid is the fail state's and is overwritten)."""
    n = self.feature_dim - 1
    if self.features == "dense":
      return _flat_dirichlets(key, c, [rows + (n,)], dtype)[0]
    if self.features == "sparse":
      k_idx, k_w = jax.random.split(key)
      idx = _choose(k_idx, rows, n, self.sparsity)
      w = _flat_dirichlets(k_w, c, [rows + (self.sparsity,)], dtype)[0]
      return _scatter(w, idx, n)
    # one-hot: the non-fail pairs (all pairs when aliased) get the coordinates j mod n of a random
    # permutation j, relabelled by a random permutation of the coordinates: balanced, all used.
    fail_rows = 0 if rows[0] == 1 else 1
    m = (rows[0] - fail_rows) * rows[1]
    k_pairs, k_coords = jax.random.split(key)
    perm = jax.random.permutation(k_pairs, m)
    relabel = jax.random.permutation(k_coords, n)
    coord = relabel[perm % n].reshape((rows[0] - fail_rows, rows[1]))
    coord = jnp.concatenate([jnp.zeros((fail_rows, rows[1]), coord.dtype), coord], axis=0)
    return jax.nn.one_hot(coord, n, dtype=dtype)

  def _factors(self, k_mu: chex.PRNGKey, k_init: chex.PRNGKey, c: float, dtype):
    """``mu_{h,i}`` for ``i >= 1`` ``[H, d - 1, S]`` and ``init_dist`` over the non-fail states."""
    H, S, d = self.horizon, self.num_states, self.feature_dim
    k = S if self.factor_support is None else self.factor_support
    if k == S:
      mu_rest = _flat_dirichlets(k_mu, c, [(H, d - 1, S)], dtype)[0]
    else:
      k_idx, k_w = jax.random.split(k_mu)
      idx = _choose(k_idx, (H, d - 1), S, k)
      mu_rest = _scatter(_flat_dirichlets(k_w, c, [(H, d - 1, k)], dtype)[0], idx, S)
    init_rest = _flat_dirichlets(k_init, c, [(S - 1,)], dtype)[0]
    return mu_rest, init_rest

  def default_params(self) -> RandomMDPParams:
    """``sample_params(jax.random.key(0))``: a fixed, reproducible instance."""
    return self.sample_params(jax.random.key(0))

  def make_params(self, phi, theta, mu, fail_state, init_dist) -> RandomMDPParams:
    """Wraps hand-built model arrays into params and validates them eagerly (``fail_state``: a
    0-based state index in ``[0, S - 1]``)."""
    _checks.numbers_(phi=phi, theta=theta, mu=mu, init_dist=init_dist)
    _checks.indices("fail_state", fail_state, self.num_states, "state index")
    dtype = _float_dtype()
    params = RandomMDPParams(
        phi=jnp.asarray(phi, dtype), theta=jnp.asarray(theta, dtype), mu=jnp.asarray(mu, dtype),
        fail_state=jnp.asarray(fail_state, jnp.int32), init_dist=jnp.asarray(init_dist, dtype))
    self.validate(params)
    return params

  def validate(self, params: RandomMDPParams) -> None:
    """Host-side check of concrete params (a leading batch axis is allowed).

    Rules (Assumptions 1-2): shapes ``phi [H,S,A,d]``, ``theta [H,d]``, ``mu [H,d,S]``,
    ``fail_state []``, ``init_dist [S]``; every ``phi[h,s,a]``, every factor ``mu[h,i]`` and
    ``init_dist`` on the simplex (nonnegative, sum 1 within 1e-6); ``0 <= fail_state < S``;
    rewards ``phi . theta`` in ``[0, 1]`` and ``||theta_h||_2 <= sqrt(d)``; the fail state is
    absorbing with zero reward at every step and action. Raises ``ValueError`` naming the field.
    """
    _checks.params_type(params, RandomMDPParams, "RandomLinearMDP")
    v = {k: _concrete(k, x) for k, x in params._asdict().items()}
    batch = v["fail_state"].shape
    for k, shape in self._shapes.items():
      if v[k].shape != batch + shape:
        raise ValueError(f"{k} must have shape {batch + shape} (batch {batch} + {shape}), "
                         f"got {v[k].shape}")
    phi, theta, mu = (v[k].astype(np.float64) for k in ("phi", "theta", "mu"))
    init, fail = v["init_dist"].astype(np.float64), v["fail_state"]
    for name, x in (("phi", phi), ("mu", mu), ("init_dist", init)):
      _check(np.all(x >= -_ATOL, axis=-1), f"{name} rows must be nonnegative (on the simplex)",
             **{f"min_{name}": x.min(axis=-1)})
      _check(np.abs(x.sum(axis=-1) - 1) <= _ATOL, f"{name} rows must sum to 1 (on the simplex)",
             **{f"{name}_row_sum": x.sum(axis=-1)})
    _check((fail >= 0) & (fail < self.num_states),
           f"fail_state must satisfy 0 <= fail_state < {self.num_states}", fail_state=fail)
    reward = np.einsum("...hsad,...hd->...hsa", phi, theta)
    _check((reward >= -_ATOL) & (reward <= 1 + _ATOL),
           "theta must give rewards phi . theta in [0, 1]", reward=reward)
    _check(np.linalg.norm(theta, axis=-1) <= np.sqrt(self.feature_dim) + _ATOL,
           "theta must satisfy ||theta_h||_2 <= sqrt(d)",
           theta_norm=np.linalg.norm(theta, axis=-1))
    onehot = np.eye(self.num_states)[fail]  # batch + [S]
    phi_f = np.einsum("...hsad,...s->...had", phi, onehot)
    p_stay = np.einsum("...had,...hds,...s->...ha", phi_f, mu, onehot)
    _check(np.abs(p_stay - 1) <= _ATOL,
           "mu and phi must make the fail state absorbing (P_h(s_f|s_f,a) = 1)", p_stay=p_stay)
    r_fail = np.einsum("...had,...hd->...ha", phi_f, theta)
    _check(np.abs(r_fail) <= _ATOL, "theta must give zero reward at the fail state",
           fail_reward=r_fail)

  # ---------------------------------------------------------------- model and dynamics
  def model(self, params: RandomMDPParams) -> LinearModel:
    """The exact model; ``reward = phi . theta``."""
    _checks.params_type(params, RandomMDPParams, "RandomLinearMDP")
    return LinearModel(
        phi=params.phi, theta=params.theta, mu=params.mu,
        reward=jnp.einsum("hsad,hd->hsa", params.phi, params.theta),
        fail_state=jnp.asarray(params.fail_state, jnp.int32), init_dist=params.init_dist)

  def theta(self, params: RandomMDPParams) -> Array:
    """``[H, d]`` reward parameters."""
    _checks.params_type(params, RandomMDPParams, "RandomLinearMDP")
    return params.theta

  def reset(self, key: chex.PRNGKey, params: RandomMDPParams) -> RandomMDPState:
    """``s_1 ~ init_dist``, ``h = 0``."""
    _checks.key("key", key)
    _checks.params_type(params, RandomMDPParams, "RandomLinearMDP")
    s = sample_categorical(key, params.init_dist)
    return RandomMDPState(s=s, h=jnp.asarray(0, jnp.int32))

  def step(self, key: chex.PRNGKey, state: RandomMDPState, action: Array,
           params: RandomMDPParams) -> tuple[RandomMDPState, Array, Array]:
    """Samples ``s' ~ <phi_h(s, a), mu_h(.)>``; reward ``<phi_h(s, a), theta_h>`` (Assumption 1).

    ``action``: a 0-based action index in ``[0, A - 1]``.

    Returns:
      ``(next_state, reward, done)`` with ``done = (h + 1 == H)``.
    """
    _checks.key("key", key)
    return self.step_given(self.step_noise(key, params), state, action, params)

  def step_noise(self, key: chex.PRNGKey, params: RandomMDPParams) -> Array:
    """The uniform draw of ``step`` (``sample_categorical``'s, in the transition's dtype)."""
    _checks.key("key", key)
    _checks.params_type(params, RandomMDPParams, "RandomLinearMDP")
    dtype = jnp.result_type(params.phi.dtype, params.mu.dtype)
    return jax.random.uniform(key, (), dtype)

  def step_given(self, noise: Array, state: RandomMDPState, action: Array,
                 params: RandomMDPParams) -> tuple[RandomMDPState, Array, Array]:
    """``step`` given its uniform draw ``noise = step_noise(key, params)``."""
    _check_state(state, RandomMDPState, self)
    _checks.index("action", action, self.num_actions, "(action)")
    _checks.params_type(params, RandomMDPParams, "RandomLinearMDP")
    h = jnp.clip(state.h, 0, self.horizon - 1)
    phi = params.phi[h, state.s, action]  # [d]
    probs = phi @ params.mu[h]  # [S]
    reward = phi @ params.theta[h]
    s_next = categorical_given(noise, probs)
    h_next = (state.h + 1).astype(jnp.int32)
    return RandomMDPState(s=s_next, h=h_next), reward, h_next == self.horizon

  def phi_all(self, state: RandomMDPState, params: RandomMDPParams) -> Array:
    """``[A, d]`` features of every action at ``state``."""
    _checks.instance("state", state, RandomMDPState, "a RandomMDPState (env.reset / env.step)")
    _checks.index("state.s", state.s, self.num_states, "(state)")
    _checks.params_type(params, RandomMDPParams, "RandomLinearMDP")
    return params.phi[jnp.clip(state.h, 0, self.horizon - 1), state.s]

  def is_fail(self, state: RandomMDPState, params: RandomMDPParams) -> Array:
    """Whether ``state`` is the fail state."""
    _checks.instance("state", state, RandomMDPState, "a RandomMDPState (env.reset / env.step)")
    _checks.params_type(params, RandomMDPParams, "RandomLinearMDP")
    return state.s == params.fail_state


# One compilation per (environment, concentration): eager op-by-op dispatch of the samplers
# costs seconds of compilation on CPU.
_sample_params = jax.jit(RandomLinearMDP._sample_params, static_argnums=(0, 2))


def closed_form_robust_values(params: RandomMDPParams, rho) -> tuple[np.ndarray, np.ndarray]:
  """The optimal robust values of an ``structure="aliased"`` instance, in closed form (NumPy).

  When every non-fail state has the same features ``phi(s, a) = [0, psi(a)]`` and ``V_{h+1}`` is
  ``v_{h+1} >= 0`` on the non-fail states and 0 at the fail state (its minimum), the TV worst case
  of each factor moves ``rho_{h,i}`` of its non-fail mass to the fail state:
  ``nu_{h,i} = v_{h+1} max(0, 1 - m_{h,i} - rho_{h,i})`` with ``m_{h,i} = mu_{h,i}(s_f)``
  (``nu_{h,0} = 0``). So all non-fail states stay equivalent and, with ``v_{H+1} = 0``,

    ``Q_h(a) = psi(a) . theta_h + v_{h+1} sum_i psi_i(a) max(0, 1 - m_{h,i} - rho_{h,i})``,
    ``v_h = max_a Q_h(a)``;

  for factors without fail mass and ``rho_{h,i} = rho_h`` this is ``v_h = r*_h + (1 - rho_h)
  v_{h+1}`` with ``r*_h = max_a psi(a) . theta_h``. The robust-optimal action may differ from the
  nominal one (``rho = 0``): ``psi`` trades reward against the fail mass of the factors it loads.

  Args:
    params: concrete params of a ``RandomLinearMDP(structure="aliased", ...)`` instance (fail
      state 0; checked: the non-fail features coincide).
    rho: ``[H, d]`` (or scalar) uncertainty levels in ``[0, 1]``.

  Returns:
    ``(v, q)``: ``v [H + 1]`` the optimal robust value of every non-fail state (``v[H] = 0``; the
    fail state's is 0) and ``q [H, A]`` the optimal robust Q of every non-fail state.
  """
  _checks.params_type(params, RandomMDPParams, "RandomLinearMDP")
  phi, theta, mu = (np.asarray(_concrete(k, getattr(params, k)), np.float64)
                    for k in ("phi", "theta", "mu"))
  fail = int(_concrete("fail_state", params.fail_state))
  if phi.ndim != 4 or fail != 0:
    raise ValueError("params must be one unbatched instance with fail_state 0 (shapes "
                     f"phi [H, S, A, d]), got phi {phi.shape}, fail_state {fail}")
  H, S, A, d = phi.shape
  rho = np.broadcast_to(np.asarray(rho, np.float64), (H, d))
  if not np.all((rho >= 0) & (rho <= 1)):
    raise ValueError(f"rho must be in [0, 1], got min {rho.min()}, max {rho.max()}")
  psi = phi[:, 1:]  # [H, S - 1, A, d]
  if not np.array_equal(psi, np.broadcast_to(psi[:, :1], psi.shape)):
    raise ValueError("params must have the same features at every non-fail state "
                     "(RandomLinearMDP(structure='aliased'))")
  psi = psi[:, 0]  # [H, A, d]
  keep = np.maximum(0.0, 1.0 - mu[:, :, fail] - rho)  # [H, d]
  keep[:, 0] = 0.0  # mu_{h,0} = delta_{s_f}: nu_{h,0} = V(s_f) = 0
  v = np.zeros(H + 1)
  q = np.zeros((H, A))
  for h in reversed(range(H)):
    q[h] = psi[h] @ theta[h] + v[h + 1] * (psi[h] @ keep[h])
    v[h] = q[h].max()
  return v, q


def random_linear_drmdp(key: chex.PRNGKey, num_states: int, num_actions: int, feature_dim: int,
                        horizon: int, concentration: float | None = None, **knobs
                        ) -> tuple[RandomLinearMDP, RandomMDPParams]:
  """A random valid d-rectangular linear DRMDP instance (see ``RandomLinearMDP.sample_params``).

  Args:
    key: PRNG key.
    num_states: ``S >= 2``.
    num_actions: ``A >= 1``.
    feature_dim: ``d >= 2``.
    horizon: ``H >= 1``.
    concentration: Dirichlet concentration of the random rows (``None``: 1, or the knobs').
    **knobs: the generator's other constructor fields (``features``, ``sparsity``,
      ``feature_concentration``, ``factor_concentration``, ``factor_support``, ``structure``).

  Returns:
    ``(env, params)``.
  """
  env = RandomLinearMDP(num_states, num_actions, feature_dim, horizon, **knobs)
  return env, env.sample_params(key, concentration)
