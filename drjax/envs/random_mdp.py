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


@dataclasses.dataclass(frozen=True)
class RandomLinearMDP(FiniteEnvironment):
  """A finite linear MDP whose params hold its model (``phi``, ``theta``, ``mu``, ...).

  Attributes:
    num_states: ``S >= 2`` (one of them is the fail state). Defaults give a small instance.
    num_actions: ``A >= 1``.
    feature_dim: ``d >= 2`` (coordinate 0 is reserved for the fail state by the generator).
    horizon: ``H >= 1``.
  """

  # Defaults are required, not just convenient: a field without a default would leave the base
  # class's read-only property of the same name visible to the dataclass ``__init__``.
  num_states: int = 8
  num_actions: int = 4
  feature_dim: int = 5
  horizon: int = 4

  def __post_init__(self):
    for name, lo in (("num_states", 2), ("num_actions", 1), ("feature_dim", 2), ("horizon", 1)):
      _checks.integer(name, getattr(self, name), lo)

  @property
  def _shapes(self) -> dict[str, tuple[int, ...]]:
    H, S, A, d = self.horizon, self.num_states, self.num_actions, self.feature_dim
    return {"phi": (H, S, A, d), "theta": (H, d), "mu": (H, d, S), "fail_state": (),
            "init_dist": (S,)}

  # ---------------------------------------------------------------- params
  def sample_params(self, key: chex.PRNGKey, concentration: float = 1.0) -> RandomMDPParams:
    """Draws a random valid instance with the fail-state extension of Section 4.1.

    Time-homogeneous features ``phi(s, a) = [0, Dir(concentration 1_{d-1})]`` for ``s != s_f``
    and ``phi(s_f, a) = e_0``; factors ``mu_{h,0} = delta_{s_f}`` and
    ``mu_{h,i} ~ Dir(concentration 1_S)`` for ``i >= 1``; ``theta_h = [0, U[0,1]^{d-1}]`` (so
    rewards are in ``[0, 1]`` and zero at ``s_f``); ``init_dist`` Dirichlet over the non-fail
    states. The fail state is index 0. Pure JAX: ``jax.vmap`` over keys gives a batch.

    Args:
      key: PRNG key.
      concentration: Python float Dirichlet concentration (small values give near-deterministic
        rows). 1 (the default) is fast; other values use ``jax.random.dirichlet``, whose
        gamma sampler takes seconds to compile on CPU.

    Returns:
      ``RandomMDPParams``.
    """
    _checks.key("key", key)
    if isinstance(concentration, (bool, np.bool_)) or not isinstance(
        concentration, (int, float, np.number)):
      raise TypeError(f"concentration must be a Python float > 0, got {concentration!r}")
    _checks.number("concentration (Dirichlet)", concentration, 0, lo_open=True)
    return _sample_params(self, key, concentration)

  def _sample_params(self, key: chex.PRNGKey, concentration: float) -> RandomMDPParams:
    H, S, A, d = self.horizon, self.num_states, self.num_actions, self.feature_dim
    dtype = _float_dtype()
    k_dir, k_theta = jax.random.split(key)
    fail = 0
    phi_rest, mu_rest, init_rest = _flat_dirichlets(
        k_dir, concentration, [(S, A, d - 1), (H, d - 1, S), (S - 1,)], dtype)
    phi = jnp.concatenate([jnp.zeros((S, A, 1), dtype), phi_rest], axis=-1)  # [S, A, d]
    phi = phi.at[fail].set(jnp.zeros((A, d), dtype).at[:, 0].set(1))
    phi = jnp.broadcast_to(phi[None], (H, S, A, d))
    mu_fail = jnp.broadcast_to(jax.nn.one_hot(fail, S, dtype=dtype), (H, 1, S))
    mu = jnp.concatenate([mu_fail, mu_rest], axis=1)  # [H, d, S]
    theta = jax.random.uniform(k_theta, (H, d), dtype).at[:, 0].set(0)
    init_dist = jnp.concatenate([jnp.zeros((1,), dtype), init_rest])
    return RandomMDPParams(phi=phi, theta=theta, mu=mu,
                           fail_state=jnp.asarray(fail, jnp.int32), init_dist=init_dist)

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


def random_linear_drmdp(key: chex.PRNGKey, num_states: int, num_actions: int, feature_dim: int,
                        horizon: int, concentration: float = 1.0
                        ) -> tuple[RandomLinearMDP, RandomMDPParams]:
  """A random valid d-rectangular linear DRMDP instance (see ``RandomLinearMDP.sample_params``).

  Args:
    key: PRNG key.
    num_states: ``S >= 2``.
    num_actions: ``A >= 1``.
    feature_dim: ``d >= 2``.
    horizon: ``H >= 1``.
    concentration: Dirichlet concentration of the random rows.

  Returns:
    ``(env, params)``.
  """
  env = RandomLinearMDP(num_states, num_actions, feature_dim, horizon)
  return env, env.sample_params(key, concentration)
