"""The environment interface the agents, planners and sweeps rely on (gymnax style).

An environment is an immutable, hashable object holding only *static* structure (horizon, number
of actions, feature dimension, variant switches). Everything a user may sweep lives in an
``EnvParams`` pytree (a ``NamedTuple`` of scalars / arrays), so a batch of target domains is a
``jax.vmap`` over params. States are ``NamedTuple`` pytrees that carry the step counter ``h``
(0-indexed: ``h = 0`` is the paper's step 1).

Minimal interface for the linear-function-approximation agents (see docs/environments.md,
"Bring your own environment"):

* ``reset(key, params) -> state``
* ``step(key, state, action, params) -> (next_state, reward, done)``
* ``phi_all(state, params) -> [A, d]`` features of every action at ``state``
* ``is_fail(state, params) -> bool[]`` whether ``state`` is the fail state
* ``theta(params) -> [H, d]`` the known reward parameters (used by DR-LSVI-UCB)
* ``validate(params)`` host-side check that raises ``ValueError`` naming the bad parameter

Actions are 0-based indices in ``[0, A - 1]`` and steps ``h`` 0-based in ``[0, H - 1]``; the
built-in environments reject concrete out-of-range actions, states and steps (``ValueError``
naming the argument and the range), wrong keys and params of another environment
(``TypeError``).

Finite environments additionally export their exact model with ``model(params) -> LinearModel``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, NamedTuple

import chex
import jax
import jax.numpy as jnp

from drjax import _checks
from drjax import features as features_lib
from drjax._precision import exact_matmuls

Array = jax.Array


class LinearModel(NamedTuple):
  """Exact model of a finite d-rectangular linear (DR)MDP. Works under ``jit``/``vmap``.

  Attributes:
    phi: ``[H, S, A, d]`` features of every (step, state, action).
    theta: ``[H, d]`` reward parameters; rewards are ``phi @ theta_h``.
    mu: ``[H, d, S]`` nominal factor distributions (each row a distribution over states).
    reward: ``[H, S, A]`` rewards (equal to ``phi[h] @ theta[h]`` for linear rewards).
    fail_state: ``[]`` int, the 0-based index of the fail state in ``[0, S - 1]`` (-1: none).
    init_dist: ``[S]`` initial-state distribution.
  """

  phi: Array
  theta: Array
  mu: Array
  reward: Array
  fail_state: Array
  init_dist: Array

  @property
  def transition(self) -> Array:
    """``[H, S, A, S]`` nominal kernel ``P_h(s'|s,a) = <phi(s,a), mu_h(s')>``."""
    return jax.numpy.einsum("...hsad,...hdt->...hsat", self.phi, self.mu)


@_checks.register
@dataclasses.dataclass(frozen=True)
class Environment:
  """Base class. Subclasses are frozen dataclasses (hashable, usable as static jit arguments).

  ``reward_known``: whether ``theta(params)`` is the true reward parameter (rewards equal to
  ``phi_all(s)[a] @ theta(params)[h]``). An environment whose reward is not linear in its
  features, or not known (gymnax's, ``theta`` returns zeros), sets it to ``False``; the sweeps
  then build every agent that has a ``reward`` option with ``reward="regressed"`` (the ridge
  estimate ``Lambda_h^-1 sum phi r`` instead of ``theta``).
  """

  reward_known: ClassVar[bool] = True
  # How the entry points (``drjax.sweep``, ``drjax.sweeps.run`` and the commands) check the
  # features against Assumption 1 (finite, >= 0: ``ValueError``; rows not summing to 1 warn),
  # never by rebuilding the environment per call:
  #   ``"validate"``: the constructor and ``validate(params)`` guarantee them (the built-in
  #     environments whose features are a function of validated params, of a checked map, or of
  #     the environment only and checked by its constructor: ``PutOption``);
  #   ``"call"`` (the default, for an environment from outside drjax): checked on every call, from
  #     the exact model (one compiled program per environment) or the initial state and one step.
  feature_check: ClassVar[str] = "call"

  @property
  def horizon(self) -> int:
    raise NotImplementedError

  @property
  def num_actions(self) -> int:
    raise NotImplementedError

  @property
  def feature_dim(self) -> int:
    raise NotImplementedError

  def default_params(self) -> Any:
    raise NotImplementedError

  def validate(self, params: Any) -> None:
    """Host-side validation of concrete params; raises ``ValueError`` naming the parameter."""

  def reset(self, key: chex.PRNGKey, params: Any) -> Any:
    raise NotImplementedError

  def step(self, key: chex.PRNGKey, state: Any, action: Array, params: Any):
    raise NotImplementedError

  # Optional: the random numbers of ``step`` apart from its dynamics. An environment whose
  # ``step(key, ...)`` equals ``step_given(step_noise(key, params), ...)`` may define both;
  # training then draws every step's numbers of all episodes before the episode loop, in one
  # vectorized call (the same numbers, so the same results): on CPU each ``jax.random`` call in
  # the loop is a small while loop of its own.
  def step_noise(self, key: chex.PRNGKey, params: Any) -> Any:
    """The random numbers ``step`` draws from ``key`` (a pytree), or ``None`` (the default): not
    separable, ``step`` is called with the key."""
    del key, params
    return None

  def step_given(self, noise: Any, state: Any, action: Array, params: Any):
    """``step`` with its random numbers given (``step_noise(key, params)``)."""
    raise NotImplementedError

  def phi_all(self, state: Any, params: Any) -> Array:
    raise NotImplementedError

  def is_fail(self, state: Any, params: Any) -> Array:
    raise NotImplementedError

  def theta(self, params: Any) -> Array:
    raise NotImplementedError


@_checks.register
@dataclasses.dataclass(frozen=True)
class FiniteEnvironment(Environment):
  """An environment with a finite state space and an exact ``LinearModel``.

  States of a finite environment have integer fields ``s`` (state index) and ``h`` (step).
  """

  @property
  def num_states(self) -> int:
    raise NotImplementedError

  def model(self, params: Any) -> LinearModel:
    raise NotImplementedError


class ObservationFeatures:
  """``phi_all``, ``is_fail`` and ``theta`` of a continuous-state environment whose features are a
  feature map of an observation, one block per action (``drjax.features.action_blocks``), with an
  absorbing zero-value fail state and a regressed reward (``theta = 0``): ``GymnaxEnv``,
  ``Ledge``. A class sets ``state_type`` / ``params_type`` (the NamedTuples its methods take) and
  defines ``feature_map``, ``feature_obs(state)`` (the ``[k]`` input of the map), ``horizon``,
  ``feature_dim`` and ``num_actions``; its states have a boolean ``fail`` field."""

  state_type: ClassVar[type]
  params_type: ClassVar[type]

  def feature_obs(self, state) -> Array:
    raise NotImplementedError

  def _check_state(self, state) -> None:
    name = self.state_type.__name__
    _checks.instance("state", state, self.state_type, f"a {name} (env.reset / env.step)")

  def phi_all(self, state, params) -> Array:
    """``[A, d]`` the features of every action (per action block); all zero in the fail state."""
    self._check_state(state)
    del params
    phi = features_lib.action_blocks(self.feature_map(self.feature_obs(state)), self.num_actions)
    return jnp.where(state.fail, jnp.zeros_like(phi), phi)

  def is_fail(self, state, params) -> Array:
    """The absorbing, zero-value fail state."""
    self._check_state(state)
    del params
    return jnp.asarray(state.fail)

  def theta(self, params) -> Array:
    """``[H, d]`` zeros: no known reward parameters (the agents regress the reward)."""
    _checks.params_type(params, self.params_type, type(self).__name__)
    return jnp.zeros((self.horizon, self.feature_dim), jax.dtypes.canonicalize_dtype(float))


@exact_matmuls
def episode_key(key: chex.PRNGKey, episode, step) -> chex.PRNGKey:
  """The key of draw ``step`` in episode ``episode``: ``fold_in(fold_in(key, episode), step)``.

  ``env.step`` at 0-indexed step ``h`` gets ``episode_key(key, n, h)`` and ``env.reset`` gets
  ``episode_key(key, n, H)``. The draws are a deterministic function of ``(key, episode, step)``
  only, so two policies evaluated with the same key face the same random numbers (common random
  numbers; their difference has a smaller variance than with independent draws). ``episode``
  and ``step`` are 0-based integers (``>= 0``). Re-exported as ``drjax.evaluate.episode_key``.
  """
  _checks.key("key", key)
  for name, x in (("episode", episode), ("step", step)):
    _checks.indices(name, x, 2**31, "counter")
    _checks.scalar(name, x)
  return jax.random.fold_in(jax.random.fold_in(key, episode), step)


def rollout_return(env: Environment, act_fn, params, key: chex.PRNGKey, episode) -> Array:
  """``[]`` the return of episode ``episode``: ``s_1 = env.reset(episode_key(key, episode, H))``,
  then at step ``h`` the action ``act_fn(k, h, phi_all, fail)`` and ``env.step(k, ...)`` with
  ``k = episode_key(key, episode, h)`` (common random numbers: the same draws for every policy);
  rewards after ``done`` are ignored. Pure (one ``lax.scan``); ``vmap`` it over episodes. The
  Monte Carlo evaluation of agents (``drjax.evaluate``) and of baselines
  (``drjax.agents.baselines``) both roll out with it."""
  H = env.horizon
  s0 = env.reset(episode_key(key, episode, H), params)

  def step(carry, h):
    s, alive, ret = carry
    k = episode_key(key, episode, h)
    a = act_fn(k, h, env.phi_all(s, params), env.is_fail(s, params))
    s2, r, done = env.step(k, s, a, params)
    ret = ret + jnp.where(alive, r, 0.0)
    return (s2, jnp.logical_and(alive, jnp.logical_not(done)), ret), None

  dtype = jnp.result_type(float)
  init = (s0, jnp.asarray(True), jnp.zeros((), dtype))
  (_, _, ret), _ = jax.lax.scan(step, init, jnp.arange(H))
  return ret


def sample_categorical(key: chex.PRNGKey, probs: Array) -> Array:
  """``jax.random.choice(key, S, p=probs)`` drawn from the same uniform, without its scan.

  ``choice`` locates the uniform draw in the cumulative probabilities with a sequential
  ``searchsorted`` loop; for the handful of states of drjax's environments, comparing against all
  of them at once is the same index (``side="left"``) and vectorizes under ``vmap``.
  """
  _checks.key("key", key)
  _checks.array("probs", probs, (None,), "[S]")
  return categorical_given(jax.random.uniform(key, (), dtype=jax.numpy.result_type(probs)),
                           probs)


def categorical_given(u: Array, probs: Array) -> Array:
  """``sample_categorical`` given its uniform draw ``u`` in [0, 1) (dtype of ``probs``)."""
  p_cuml = jax.numpy.cumsum(probs)
  r = p_cuml[-1] * (1 - u)
  return jax.numpy.sum(p_cuml < r).astype(jax.numpy.int32)
