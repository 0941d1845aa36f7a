"""The simulated off-dynamics linear MDP of Section 6.1 and Appendix A (Figure 4).

Five states ``x1..x5`` (indices ``0..4``), horizon ``H = 3``, sixteen actions ``{-1, 1}^4`` and
``d = 4`` features. ``x4`` (index 3) is the fail state, ``x5`` (index 4) the absorbing goal with
reward 1. Source and target domains are the *same* environment with different ``EnvParams``:
``target = 0`` uses the source factors ``mu_1 = mu_2`` of Appendix A, ``target = 1`` replaces the
step-1 factors by Appendix A's ``mu_1^perturbed`` with perturbation level ``q``. A batch of target
domains is therefore a ``jax.vmap`` over params::

  env = LinearMDP()
  source = env.make_params(delta=0.3, p=0.001, xi_norm=0.1)       # validated eagerly
  targets = target_params(source, jnp.linspace(0.0, 1.0, 1000))   # every leaf has shape [1000]
  kernels = jax.vmap(env.model)(targets).transition                # [1000, H, S, A, S]

Params passed to jitted code are traced and cannot be checked there: invalid values (e.g.
``delta + xi_norm > 1``) silently produce invalid probabilities. Build params with ``make_params``
/ ``target_params`` or call ``env.validate(params)`` on the host first.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp
import numpy as np

from drjax import _checks
from drjax.linalg import _small_matmul
from drjax.envs.base import FiniteEnvironment, LinearModel, categorical_given

Array = jax.Array

NUM_STATES = 5
NUM_ACTIONS = 16
FEATURE_DIM = 4
HORIZON = 3
X1, X2, X3, X4, X5 = range(NUM_STATES)
FAIL_STATE = X4
GOAL_STATE = X5

# [16, 4]; itertools.product order: index 0 = (-1,-1,-1,-1), index 15 = (1,1,1,1).
_ACTIONS = np.array(list(itertools.product((-1.0, 1.0), repeat=FEATURE_DIM)), dtype=np.float64)
_ACTION_SUMS = _ACTIONS.sum(axis=-1)  # [16] integers: sum_j a_j (exact in any float)
# The model as constants, so that a program builds it in a few operations (not a stack of
# stacks per use): phi(s, a) = _PHI_BASE[s] + g(a) _PHI_SLOPE[s] with g(a) = delta + <xi, a>
# (rows x1, x2, x3: (1 - g) e_s + g e_4; x4: e_3; x5: e_4), and the step factors
# [d, S] = base + level * slope with level p (source) or q (target step 1).
_E = np.eye(NUM_STATES)
_PHI_BASE = np.array([[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 1, 0], [0, 0, 0, 1]],
                     np.float64)
_PHI_SLOPE = np.array([[-1, 0, 0, 1], [0, -1, 0, 1], [0, 0, -1, 1], [0, 0, 0, 0], [0, 0, 0, 0]],
                      np.float64)
_MU_BASE = np.stack([_E[X2], _E[X3], _E[X4], _E[X5]])  # source and target alike
_MU_SOURCE_SLOPE = np.stack([_E[X4] - _E[X2], _E[X4] - _E[X3], 0 * _E[X4], 0 * _E[X5]])
_MU_TARGET_SLOPE = np.stack([0 * _E[X2], 0 * _E[X3], 0 * _E[X4], _E[X4] - _E[X5]])


def _float_dtype():
  return jax.dtypes.canonicalize_dtype(np.float64)


def action_vectors() -> Array:
  """The action set ``A = {-1, 1}^4`` as a ``[16, 4]`` array.

  Rows are in ``itertools.product([-1, 1], repeat=4)`` order, so action index 0 is
  ``(-1, -1, -1, -1)`` and index 15 is ``(1, 1, 1, 1)``; action ``i`` has ``+1`` in coordinate
  ``j`` iff bit ``3 - j`` of ``i`` is set.
  """
  return jnp.asarray(_ACTIONS, dtype=_float_dtype())


class LinearMDPParams(NamedTuple):
  """Sweepable parameters of ``LinearMDP`` (all float scalars, or arrays of one batch shape).

  Attributes:
    delta: ``[]`` base probability of moving to the goal, ``delta`` in Appendix A.
    p: ``[]`` source probability of failing via factors 1-2 (Appendix A, source factors).
    xi_norm: ``[]`` ``||xi||_1``; ``xi = xi_norm / 4 * (1, 1, 1, 1)``.
    q: ``[]`` perturbation level of target step-1 factor 4 (Appendix A, ``mu_1^perturbed``);
      unused by the source domain.
    target: ``[]`` 0. for the source domain, 1. for the target domain with level ``q``.
  """

  delta: Array
  p: Array
  xi_norm: Array
  q: Array
  target: Array


class LinearMDPState(NamedTuple):
  """State of ``LinearMDP``.

  Attributes:
    s: ``[]`` int32 state index (``x1..x5`` are ``0..4``).
    h: ``[]`` int32 step, 0-indexed (``h = 0`` is the paper's step 1).
  """

  s: Array
  h: Array


def _concrete(name: str, x) -> np.ndarray:
  """``x`` as a NumPy array of real numbers; ``TypeError`` if ``x`` is traced (inside jit/vmap:
  validate() needs concrete params) or is not numeric (a string, a boolean, None)."""
  _checks.require_concrete(name, x, "validate() reads the params' values")
  if isinstance(x, (jax.Array, np.ndarray)) and x.dtype.kind in "fiu":  # the common case
    return np.asarray(x)
  if not isinstance(x, (str, bytes, bool, np.bool_)) and x is not None:
    try:
      a = np.asarray(x)
    except Exception:  # pylint: disable=broad-except
      a = None
    if a is not None and np.issubdtype(a.dtype, np.integer):
      return a
  return _checks._values(name, x)  # pylint: disable=protected-access


def _check_state(state, cls, env) -> None:
  """``state`` an instance of ``cls`` whose concrete step ``h`` lies in ``[0, H - 1]`` (and state
  index ``s`` in ``[0, S - 1]`` for finite environments)."""
  _checks.instance("state", state, cls, f"a {cls.__name__} (env.reset / env.step)")
  _checks.index("state.h", state.h, env.horizon, "(step)")
  if hasattr(state, "s"):
    _checks.index("state.s", state.s, env.num_states, "(state)")


def _check(ok, msg: str, **values) -> None:
  """Raises ``ValueError(msg + offending values)`` unless ``ok`` holds everywhere (batch-aware)."""
  if ok.all() if hasattr(ok, "all") else np.all(ok):  # the common case: nothing to show
    return
  shape = np.broadcast_shapes(np.shape(ok), *(np.shape(v) for v in values.values()))
  bad = ~np.broadcast_to(np.asarray(ok, dtype=bool), shape)
  if not bad.any():
    return
  shown = []
  for k, v in values.items():
    vals = np.broadcast_to(np.asarray(v), shape)[bad]
    shown.append(f"{k}={vals[0].item()!r}" if vals.size == 1 else
                 f"{k}={vals[:5].tolist()}{' ...' if vals.size > 5 else ''}")
  where = f" (at {int(bad.sum())} of {bad.size} entries)" if shape else ""
  raise ValueError(f"{msg}, got {', '.join(shown)}{where}")


def target_params(source_params: LinearMDPParams, q) -> LinearMDPParams:
  """Target-domain params with step-1 factors ``mu_1^perturbed`` (Appendix A, perturbed factors).

  Works for scalar or array ``q``: every field is broadcast to ``jnp.shape(q)``, so the result
  for ``q`` of shape ``[N]`` is a batch of ``N`` target domains ready for ``jax.vmap``. Pure
  ``jnp``, so it also works under ``jit``; call ``LinearMDP().validate`` on the host to check.

  Args:
    source_params: source-domain params (``delta``, ``p``, ``xi_norm`` are kept).
    q: perturbation level(s) in ``[0, 1]`` (checked when concrete).

  Returns:
    ``LinearMDPParams`` with ``target = 1`` and the given ``q``.
  """
  _checks.params_type(source_params, LinearMDPParams, "LinearMDP", "source_params")
  _checks.numbers_(q=q)
  _checks.in_range("q", q, 0, 1)
  dtype = _float_dtype()
  q = jnp.asarray(q, dtype=dtype)
  shape = q.shape
  b = lambda x: jnp.broadcast_to(jnp.asarray(x, dtype=dtype), shape)  # noqa: E731
  return LinearMDPParams(
      delta=b(source_params.delta),
      p=b(source_params.p),
      xi_norm=b(source_params.xi_norm),
      q=q,
      target=jnp.ones(shape, dtype),
  )


@dataclasses.dataclass(frozen=True)
class LinearMDP(FiniteEnvironment):
  """The simulated linear MDP of Appendix A (Figure 4); source and targets via ``EnvParams``.

  Features (Appendix A), with ``g(a) = delta + <xi, a>``::

    phi(x1, a) = (1 - g(a), 0, 0, g(a))      phi(x4, a) = (0, 0, 1, 0)
    phi(x2, a) = (0, 1 - g(a), 0, g(a))      phi(x5, a) = (0, 0, 0, 1)
    phi(x3, a) = (0, 0, 1 - g(a), g(a))

  Rewards ``r_h(s, a) = <phi(s, a), theta_h>`` with ``theta_1 = 0``, ``theta_2 = theta_3 = e_4``;
  kernels ``P_h(.|s, a) = <phi(s, a), mu_h(.)>`` with source factors (Appendix A)
  ``mu_1 = mu_2 = ((1-p) d_x2 + p d_x4, (1-p) d_x3 + p d_x4, d_x4, d_x5)`` (``mu_3`` is never
  reached by a value backup; it is set equal to ``mu_2``) and target step-1 factors (Appendix A)
  ``mu_1^perturbed = (d_x2, d_x3, d_x4, (1-q) d_x5 + q d_x4)``. The initial state is always
  ``x1``.

  Inside ``jit`` the params are traced and cannot be validated: use ``make_params`` or
  ``validate``.
  """

  # validate(params) keeps delta +- xi_norm in [0, 1]: every phi(s, a) is on the simplex.
  feature_check = "validate"

  @property
  def horizon(self) -> int:
    return HORIZON

  @property
  def num_actions(self) -> int:
    return NUM_ACTIONS

  @property
  def feature_dim(self) -> int:
    return FEATURE_DIM

  @property
  def num_states(self) -> int:
    return NUM_STATES

  # ---------------------------------------------------------------- params
  def default_params(self) -> LinearMDPParams:
    """Source domain of the paper's Figure 1(a): ``delta = 0.3, p = 0.001, xi_norm = 0.1``."""
    return self.make_params()

  def make_params(
      self, delta: float = 0.3, p: float = 0.001, xi_norm: float = 0.1, q: float | None = None
  ) -> LinearMDPParams:
    """Builds and validates params eagerly (raises ``ValueError`` before anything is traced).

    Args:
      delta: ``delta`` of Appendix A.
      p: source failure probability ``p`` of Appendix A's source factors.
      xi_norm: ``||xi||_1``.
      q: ``None`` for the source domain, else the target perturbation level of
        Appendix A's ``mu_1^perturbed``.

    Returns:
      ``LinearMDPParams`` (float scalars, not weakly typed, so jitted code does not retrace).
    """
    _checks.numbers_(delta=delta, p=p, xi_norm=xi_norm, **({} if q is None else {"q": q}))
    dtype = _float_dtype()
    f = lambda x: jnp.asarray(x, dtype=dtype)  # noqa: E731
    params = LinearMDPParams(
        delta=f(delta), p=f(p), xi_norm=f(xi_norm), q=f(0.0 if q is None else q),
        target=f(0.0 if q is None else 1.0))
    self.validate(params)
    return params

  def target_params(self, source_params: LinearMDPParams, q) -> LinearMDPParams:
    """Same as the module-level ``target_params``."""
    return target_params(source_params, q)

  def validate(self, params: LinearMDPParams) -> None:
    """Host-side check of concrete (possibly batched) params; raises ``ValueError``.

    Rules: ``0 <= p <= 1``; ``xi_norm >= 0``; ``delta - xi_norm >= 0`` and
    ``delta + xi_norm <= 1`` (so every ``phi(s, a)`` is on the simplex, Assumption 1);
    ``0 <= q <= 1``; ``target`` in ``{0, 1}``.
    """
    _checks.params_type(params, LinearMDPParams, "LinearMDP")
    v = {k: _concrete(k, x).astype(np.float64) for k, x in params._asdict().items()}
    d, p, xi, q, t = v["delta"], v["p"], v["xi_norm"], v["q"], v["target"]
    try:  # every rule at once (the common case); on failure, rule by rule to name it
      with np.errstate(all="ignore"):
        if np.all((p >= 0) & (p <= 1) & (xi >= 0) & (d - xi >= 0) & (d + xi <= 1) & (q >= 0)
                  & (q <= 1) & ((t == 0) | (t == 1))):  # (NaN fails a comparison)
          return
    except ValueError:  # fields that do not broadcast: the rules below report them
      pass
    for k, x in v.items():
      _check(np.isfinite(x), f"{k} must be finite", **{k: x})
    _check((v["p"] >= 0) & (v["p"] <= 1), "p must satisfy 0 <= p <= 1", p=v["p"])
    _check(v["xi_norm"] >= 0, "xi_norm must satisfy xi_norm >= 0", xi_norm=v["xi_norm"])
    _check(
        (v["delta"] - v["xi_norm"] >= 0) & (v["delta"] + v["xi_norm"] <= 1),
        "xi_norm must satisfy delta - xi_norm >= 0 and delta + xi_norm <= 1",
        delta=v["delta"], xi_norm=v["xi_norm"])
    _check((v["q"] >= 0) & (v["q"] <= 1), "q must satisfy 0 <= q <= 1", q=v["q"])
    _check((v["target"] == 0) | (v["target"] == 1), "target must be 0 or 1", target=v["target"])

  # ---------------------------------------------------------------- model pieces
  def _g(self, params: LinearMDPParams) -> Array:
    """``[A]`` ``delta + <xi, a>`` of every action (the features' free coordinate)."""
    dtype = jnp.result_type(params.delta)
    return params.delta + (params.xi_norm / FEATURE_DIM) * jnp.asarray(_ACTION_SUMS, dtype)

  def _phi_rows(self, params: LinearMDPParams, s: Array, g: Array) -> Array:
    """``phi(s, a) = base[s] + g(a) * slope[s]`` (Appendix A), ``[..., d]`` for ``s`` and ``g``
    of one (broadcast) shape: the entries ``1 - g``, ``g``, 0 and 1 of the table, bit for bit."""
    dtype = jnp.result_type(params.delta)
    base, slope = jnp.asarray(_PHI_BASE, dtype)[s], jnp.asarray(_PHI_SLOPE, dtype)[s]
    return base + g[..., None] * slope

  def _phi_table(self, params: LinearMDPParams) -> Array:
    """``[S, A, d]`` features ``phi(s, a)`` of Appendix A (independent of the step)."""
    return self._phi_rows(params, np.arange(NUM_STATES)[:, None], self._g(params)[None, :])

  def _mu_parts(self, params: LinearMDPParams) -> tuple[Array, Array]:
    """``([d, S], [d, S])``: Appendix A's source factors ``mu_h`` and target step 1's
    ``mu_1^perturbed``, each entry ``base + level * slope``: bit for bit ``1 - p``, ``p``, 0 or 1
    (``q`` for the target)."""
    dtype = jnp.result_type(params.delta)
    base = jnp.asarray(_MU_BASE, dtype)
    source = base + params.p * jnp.asarray(_MU_SOURCE_SLOPE, dtype)
    perturbed = base + params.q * jnp.asarray(_MU_TARGET_SLOPE, dtype)
    return source, perturbed

  def _mu_at(self, params: LinearMDPParams, h: Array) -> Array:
    """``[d, S]`` factors of step ``h`` (0-based): ``mu_1^perturbed`` at ``h = 0`` in the target,
    the source ``mu_h`` otherwise."""
    source, perturbed = self._mu_parts(params)
    return jnp.where((h == 0) & (jnp.asarray(params.target) != 0), perturbed, source)

  def _mu(self, params: LinearMDPParams) -> Array:
    """``[H, d, S]`` factors: Appendix A's source ``mu_h``; ``mu_1^perturbed`` if target."""
    source, perturbed = self._mu_parts(params)
    mu1 = jnp.where(jnp.asarray(params.target) != 0, perturbed, source)
    return jnp.stack([mu1] + [source] * (HORIZON - 1))

  def theta(self, params: LinearMDPParams) -> Array:
    """``[H, d]`` reward parameters ``theta_1 = 0``, ``theta_2 = theta_3 = (0, 0, 0, 1)``."""
    _checks.params_type(params, LinearMDPParams, "LinearMDP")
    dtype = jnp.result_type(params.delta)
    return jnp.asarray([[0, 0, 0, 0], [0, 0, 0, 1], [0, 0, 0, 1]], dtype=dtype)

  def model(self, params: LinearMDPParams) -> LinearModel:
    """Exact ``LinearModel`` (phi ``[H,S,A,d]``, mu ``[H,d,S]``, ...); jit/vmap friendly."""
    _checks.params_type(params, LinearMDPParams, "LinearMDP")
    phi = jnp.broadcast_to(self._phi_table(params)[None],
                           (HORIZON, NUM_STATES, NUM_ACTIONS, FEATURE_DIM))
    theta = self.theta(params)
    return LinearModel(
        phi=phi,
        theta=theta,
        mu=self._mu(params),
        reward=jnp.einsum("hsad,hd->hsa", phi, theta),
        fail_state=jnp.asarray(FAIL_STATE, jnp.int32),
        init_dist=jnp.zeros(NUM_STATES, theta.dtype).at[X1].set(1),
    )

  # ---------------------------------------------------------------- dynamics
  def reset(self, key: chex.PRNGKey, params: LinearMDPParams) -> LinearMDPState:
    """The initial state is always ``x1`` at step ``h = 0`` (``key`` is unused: a PRNG key or
    None)."""
    if key is not None:
      _checks.key("key", key)
    _checks.params_type(params, LinearMDPParams, "LinearMDP")
    del key, params
    return LinearMDPState(s=jnp.asarray(X1, jnp.int32), h=jnp.asarray(0, jnp.int32))

  def step(self, key: chex.PRNGKey, state: LinearMDPState, action: Array,
           params: LinearMDPParams) -> tuple[LinearMDPState, Array, Array]:
    """Samples ``s' ~ <phi(s, a), mu_h(.)>`` and returns ``r_h(s, a) = <phi(s, a), theta_h>``.

    Args:
      key: PRNG key.
      state: current state (``h < H``).
      action: 0-based int index into ``action_vectors()``, in ``[0, 15]``.
      params: ``LinearMDPParams``.

    Returns:
      ``(next_state, reward, done)`` with ``done = (h + 1 == H)``.
    """
    _checks.key("key", key)
    return self.step_given(self.step_noise(key, params), state, action, params)

  def step_noise(self, key: chex.PRNGKey, params: LinearMDPParams) -> Array:
    """The uniform draw of ``step`` (``sample_categorical``'s, in the transition's dtype)."""
    _checks.key("key", key)
    _checks.params_type(params, LinearMDPParams, "LinearMDP")
    dtype = jax.eval_shape(lambda p: self._phi_table(p)[0, 0] @ self._mu(p)[0], params).dtype
    return jax.random.uniform(key, (), dtype)

  def step_given(self, noise: Array, state: LinearMDPState, action: Array,
                 params: LinearMDPParams) -> tuple[LinearMDPState, Array, Array]:
    """``step`` given its uniform draw ``noise = step_noise(key, params)``."""
    _check_state(state, LinearMDPState, self)
    _checks.index("action", action, NUM_ACTIONS, "(action)")
    _checks.params_type(params, LinearMDPParams, "LinearMDP")
    h = jnp.clip(state.h, 0, HORIZON - 1)
    phi = self._phi_rows(params, state.s, self._g(params)[action])  # [d]
    probs = _small_matmul(phi, self._mu_at(params, h))  # [S]
    reward = _small_matmul(phi, self.theta(params)[h])
    s_next = categorical_given(noise, probs)
    h_next = (state.h + 1).astype(jnp.int32)
    return LinearMDPState(s=s_next, h=h_next), reward, h_next == HORIZON

  def phi_all(self, state: LinearMDPState, params: LinearMDPParams) -> Array:
    """``[A, d]`` features of every action at ``state``."""
    _checks.instance("state", state, LinearMDPState, "a LinearMDPState (env.reset / env.step)")
    _checks.index("state.s", state.s, NUM_STATES, "(state)")
    _checks.params_type(params, LinearMDPParams, "LinearMDP")
    s = jnp.asarray(state.s)
    g = jnp.reshape(self._g(params), (1,) * s.ndim + (NUM_ACTIONS,))
    return self._phi_rows(params, s[..., None], g)  # s.shape + [A, d]

  def is_fail(self, state: LinearMDPState, params: LinearMDPParams) -> Array:
    """Whether ``state`` is the fail state ``x4``."""
    _checks.instance("state", state, LinearMDPState, "a LinearMDPState (env.reset / env.step)")
    del params
    return state.s == FAIL_STATE
