"""The regression data of the online agents and its updates: the state forms and pure functions.

Two forms of the same regression data (the atoms of ``drjax.agents.pieces``):

* ``AgentState``, the buffer form: every transition seen so far, one slot per episode
  (``init_state``; ``observe`` stores one transition, ``end_episode`` advances the counter,
  ``store_episode`` does both for a whole episode; ``valid_mask`` marks the stored episodes);
* ``StatsState``, the sufficient statistics of a finite environment: one atom per next state
  (``init_stats_state``; ``update_stats`` adds an episode).

Both keep the Gram matrix and ``sum phi r`` by rank-1 steps and, with the Sherman-Morrison solver,
``Lambda^-1`` (and the ridge operator or LSVI-UCB's squared norms where asked). Every function
checks its arguments on the host, as in ``drjax.agents.base`` (which re-exports every name here).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from drjax import _checks

Array = jax.Array

SOLVERS = ("auto", "cholesky", "sherman-morrison")


class AgentState(NamedTuple):
  """Buffer form of the regression data: every transition seen so far (one slot per episode).

  The regression atoms of step h are the stored transitions: weight ``phi[h, k]`` and next state
  given by its features ``next_phi[h, k]`` and fail flag (see docs/engine.md).

  Attributes:
    theta: ``[H, d]`` known reward parameters (DR-LSVI-UCB uses them; LSVI-UCB ignores them).
    gram: ``[H, d, d]`` ``sum_tau phi_tau phi_tau^T`` (without ``lambda I``), updated by rank-1
      steps.
    phir: ``[H, d]`` ``sum_tau phi_tau r_tau`` (LSVI-UCB's reward regression).
    pinv: ``[H, d, d]`` ``(gram + lambda I)^-1`` maintained by Sherman-Morrison steps when the
      agent's ``solver`` is ``"sherman-morrison"``, else ``None``.
    phi: ``[H, K, d]`` features of the action taken at step h of episode k.
    reward: ``[H, K]`` observed rewards.
    next_phi: ``[H, K, A, d]`` features of every action at the next state s_{h+1}.
    next_fail: ``[H, K]`` whether s_{h+1} is the fail state.
    count: ``[]`` int32, number of completed episodes stored.
    quad: ``[H, K, A]`` ``next_phi[h, k, a]^T Lambda_{h+1}^-1 next_phi[h, k, a]`` (row ``H - 1``:
      0), the squared ellipsoid norms LSVI-UCB's bonus needs at the atoms' next states, kept up to
      date by the Sherman-Morrison steps (``O(A d)`` per slot and transition instead of
      ``O(A d^2)`` per slot and plan); ``None`` unless the agent uses the ellipsoid bonus with the
      Sherman-Morrison solver (``init_state(..., quad=True)``, as LSVI-UCB's ``init`` does).
  """

  theta: Array
  gram: Array
  phir: Array
  pinv: Array | None
  phi: Array
  reward: Array
  next_phi: Array
  next_fail: Array
  count: Array
  quad: Array | None = None


class StatsState(NamedTuple):
  """Sufficient-statistics form (finite state spaces): one regression atom per next state.

  ``sum_tau phi_tau min(V(s'_tau), alpha) = sum_{s'} G[h, s'] min(V(s'), alpha)``, so planning
  costs ``O(H (S A d + S^2 d + S d^2))`` per episode whatever the number of stored episodes.

  Attributes:
    theta, gram, phir, pinv, count: as in ``AgentState``.
    G: ``[H, S, d]`` sum of the features of the stored step-h transitions into each state s'.
    M: ``[H, d, S]`` the ridge operator ``Lambda^-1 G^T``, kept up to date by rank-1 steps
      (``O(d S)`` per transition) with the Sherman-Morrison solver, else ``None``.
    quad: ``[H, S, A]`` ``phi_h(s, a)^T Lambda_h^-1 phi_h(s, a)``, LSVI-UCB's squared ellipsoid
      norms at every state (step h's planning reads row h + 1), kept up to date by rank-1
      downdates (``O(S A d)`` per transition instead of ``O(S A d^2)`` per step and plan) when the
      agent uses the ellipsoid bonus with the Sherman-Morrison solver and ``init_stats`` got the
      model's features; else ``None``.
  """

  theta: Array
  gram: Array
  phir: Array
  pinv: Array | None
  G: Array
  count: Array
  M: Array | None = None
  quad: Array | None = None


# ---------------------------------------------------------------------------------------------
# Initialization and updates.


def init_state(theta, horizon, feature_dim, num_actions, capacity, lam=None,
               solver="cholesky", quad: bool = False) -> AgentState:
  """Empty buffer-form state (``lam`` is needed only by the Sherman-Morrison solver).

  ``quad``: also keep ``AgentState.quad`` (Sherman-Morrison solver only).
  """
  horizon, feature_dim, num_actions, capacity = _dims_args(
      horizon=horizon, feature_dim=feature_dim, num_actions=num_actions, capacity=capacity)
  _checks.choice("solver", solver, SOLVERS[1:])
  _checks.boolean("quad", quad)
  dtype = jnp.result_type(float)
  return AgentState(
      **_empty_regression(theta, horizon, feature_dim, lam, solver, dtype),
      phi=jnp.zeros((horizon, capacity, feature_dim), dtype),
      reward=jnp.zeros((horizon, capacity), dtype),
      next_phi=jnp.zeros((horizon, capacity, num_actions, feature_dim), dtype),
      next_fail=jnp.zeros((horizon, capacity), bool),
      count=jnp.zeros((), jnp.int32),
      quad=(jnp.zeros((horizon, capacity, num_actions), dtype)
            if quad and solver == "sherman-morrison" else None))


def init_stats_state(theta, horizon, feature_dim, num_states, lam=None,
                     solver="cholesky", phi_table=None) -> StatsState:
  """Empty sufficient-statistics state for a finite environment with ``num_states`` states.

  ``phi_table [H, S, A, d]`` (the model's features): also keep ``StatsState.quad``
  (Sherman-Morrison solver only).
  """
  horizon, feature_dim, num_states = _dims_args(horizon=horizon, feature_dim=feature_dim,
                                                num_states=num_states)
  _checks.choice("solver", solver, SOLVERS[1:])
  if phi_table is not None:
    _checks.array("phi_table", phi_table, (horizon, num_states, None, feature_dim), "[H, S, A, d]")
  dtype = jnp.result_type(float)
  sm = solver == "sherman-morrison"
  quad = None
  if phi_table is not None and sm:
    tab = jnp.asarray(phi_table, dtype)
    quad = jnp.sum(tab * tab, axis=-1) / jnp.asarray(lam, dtype)  # Lambda^-1 = I / lam
  return StatsState(
      **_empty_regression(theta, horizon, feature_dim, lam, solver, dtype),
      G=jnp.zeros((horizon, num_states, feature_dim), dtype),
      count=jnp.zeros((), jnp.int32),
      M=jnp.zeros((horizon, feature_dim, num_states), dtype) if sm else None,
      quad=quad)


def _dims_args(**dims) -> tuple[int, ...]:
  """Each keyword an integer >= 1 (static dimensions), returned in order."""
  return tuple(_checks.integer(name, x, 1) for name, x in dims.items())


def _empty_regression(theta, horizon, feature_dim, lam, solver, dtype) -> dict:
  """The fields both state forms share: theta, empty Gram / sum phi r, initial Lambda^-1."""
  _checks.array("theta", theta, (horizon, feature_dim), "[H, d]")
  if lam is not None:
    _checks.array("lam", lam, ())
    _checks.in_range("lam", lam, 0, lo_open=True)
  theta = jnp.asarray(theta, dtype)
  return dict(theta=theta, gram=jnp.zeros((horizon, feature_dim, feature_dim), dtype),
              phir=jnp.zeros((horizon, feature_dim), dtype),
              pinv=_init_pinv(horizon, feature_dim, lam, solver, dtype))


def _init_pinv(horizon, feature_dim, lam, solver, dtype):
  if solver != "sherman-morrison":
    return None
  if lam is None:
    raise ValueError("lam is required to initialise the Sherman-Morrison solver's Lambda^-1")
  lam = jnp.asarray(lam, dtype)
  return jnp.broadcast_to(jnp.eye(feature_dim, dtype=dtype) / lam,
                          (horizon, feature_dim, feature_dim))


def _sherman_morrison(pinv, phi):
  """``u = Lambda^-1 phi`` and ``den = 1 + phi . u`` per step (``pinv [H, d, d]``, ``phi [H, d]``):
  ``(Lambda + phi phi^T)^-1 = Lambda^-1 - u u^T / den``."""
  u = jnp.einsum("hde,he->hd", pinv, phi)
  return u, 1.0 + jnp.sum(phi * u, axis=-1)


def _rank_one(state, phi, reward):
  """Adds one transition per step (``phi [H, d]``, ``reward [H]``) to gram / phir / pinv."""
  dtype = state.gram.dtype
  phi = jnp.asarray(phi).astype(dtype)
  reward = jnp.asarray(reward).astype(dtype)
  gram = state.gram + phi[:, :, None] * phi[:, None, :]
  phir = state.phir + phi * reward[:, None]
  pinv = state.pinv
  if pinv is not None:
    u, den = _sherman_morrison(pinv, phi)
    pinv = pinv - u[:, :, None] * (u / den[:, None])[:, None, :]
  return state._replace(gram=gram, phir=phir, pinv=pinv)


def _norm_loss(x, u, den):
  """``[H, n, A]`` ``(x . u)^2 / den``: what ``x^T Lambda^-1 x`` loses in the Sherman-Morrison step
  ``(u, den)`` of its row, for features ``x [H, n, A, d]``."""
  t = jnp.einsum("hnad,hd->hna", x, u)
  return (t * t) / den[:, None, None]


def observe(state: AgentState, h, phi, reward, next_phi_all, next_fail) -> AgentState:
  """Stores transition (s_h, a_h, r_h, s_{h+1}) of the current episode (slot ``state.count``).

  ``h``: the 0-based step in ``[0, H - 1]``; ``phi [d]``, ``reward []``, ``next_phi_all [A, d]``,
  ``next_fail []`` bool.
  """
  _check_buffer_state(state)
  H, K, d = np.shape(state.phi)
  A = np.shape(state.next_phi)[2]
  _checks.index("h", h, H, "(step)")
  _checks.array("phi", phi, (d,), "[d]")
  _checks.array("reward", reward, ())
  _checks.array("next_phi_all", next_phi_all, (A, d), "[A, d]")
  _checks.bool_array("next_fail", next_fail)
  _checks.scalar("next_fail", next_fail)
  _check_room(state, K)
  k = state.count
  onehot = (jnp.arange(H) == h).astype(state.gram.dtype)
  # A rank-1 step at step h only (zero features elsewhere leave gram / phir / pinv unchanged).
  phi_h = onehot[:, None] * jnp.asarray(phi, state.gram.dtype)[None, :]
  quad = _downdate_quad(state, phi_h)
  upd = _rank_one(state, phi_h, onehot * jnp.asarray(reward, state.gram.dtype))
  upd = upd._replace(
      phi=state.phi.at[h, k].set(phi.astype(state.phi.dtype)),
      reward=state.reward.at[h, k].set(jnp.asarray(reward, state.reward.dtype)),
      next_phi=state.next_phi.at[h, k].set(next_phi_all.astype(state.next_phi.dtype)),
      next_fail=state.next_fail.at[h, k].set(next_fail))
  if quad is not None:
    q_new = _quad_of_new(upd.pinv, onehot[:, None, None] * jnp.asarray(
        next_phi_all, state.gram.dtype)[None])  # [H, A], nonzero in row h only
    quad = quad.at[h, k].set(q_new[h])
  return upd._replace(quad=quad)


def _downdate_quad(state: AgentState, phi):
  """``state.quad`` after the Sherman-Morrison steps of ``phi [H, d]`` (rows of zeros: none).

  ``Lambda_{h+1}^-1`` loses ``u u^T / den`` (``u = Lambda_{h+1}^-1 phi_{h+1}``), so every slot's
  ``x^T Lambda_{h+1}^-1 x`` at step h loses ``(x . u)^2 / den``.
  """
  if state.quad is None:
    return None
  dtype = state.gram.dtype
  u, den = _sherman_morrison(state.pinv, jnp.asarray(phi).astype(dtype))
  # Slot row h holds features of step h + 1: pair it with step h + 1's update (row H - 1 with
  # none) by shifting u, not by slicing the atom array, which XLA would copy.
  u_next = jnp.concatenate([u[1:], jnp.zeros_like(u[:1])])
  den_next = jnp.concatenate([den[1:], jnp.ones_like(den[:1])])
  return state.quad - _norm_loss(state.next_phi.astype(dtype), u_next, den_next)


def _quad_of_new(pinv, next_phi):
  """``[H, A]`` ``next_phi[h, a]^T Lambda_{h+1}^-1 next_phi[h, a]`` (row ``H - 1``: 0)."""
  q = jnp.einsum("had,hde,hae->ha", next_phi[:-1], pinv[1:], next_phi[:-1])
  return jnp.concatenate([q, jnp.zeros_like(q[:1])])


def end_episode(state):
  """Advances the episode counter of either state form."""
  if not isinstance(state, (AgentState, StatsState)):
    raise TypeError(f"state must be an AgentState or StatsState (agent.init / agent.init_stats), "
                    f"got {type(state).__name__}")
  return state._replace(count=state.count + 1)


def _check_buffer_state(state, name: str = "state") -> None:
  _checks.instance(name, state, AgentState, "an AgentState (agent.init); a StatsState is "
                   "updated with agent.update / update_stats")


def _check_room(state: AgentState, capacity: int) -> None:
  """A concrete buffer must have a free slot (JAX would drop the write silently)."""
  if _checks.is_concrete(state.count) and int(state.count) >= capacity:
    raise ValueError(f"state is full: count = {int(state.count)} episodes fill its capacity "
                     f"{capacity} (build the agent / init with a larger capacity)")


def store_episode(state: AgentState, k, phi, reward, next_phi, next_fail) -> AgentState:
  """Stores a whole episode in slot ``k`` (normally ``state.count``) and advances the counter.

  Equivalent to ``observe`` for h = 1..H then ``end_episode``, but one slice update per buffer.
  When ``k`` is not batched (e.g. the episode index of a ``lax.scan``) the update stays an
  in-place ``dynamic_update_slice`` under ``vmap`` over seeds; a batched slot index would turn it
  into a scatter that copies every seed's buffers at every step.

  Args:
    state: agent state.
    k: ``[]`` int slot, 0-based, in ``[0, capacity - 1]``.
    phi: ``[H, d]``; reward: ``[H]``; next_phi: ``[H, A, d]``; next_fail: ``[H]``.
  """
  _check_buffer_state(state)
  H, K, d = np.shape(state.phi)
  A = np.shape(state.next_phi)[2]
  _checks.index("k", k, K, "(buffer slot)")
  _checks.array("phi", phi, (H, d), "[H, d]")
  _checks.array("reward", reward, (H,), "[H]")
  _checks.array("next_phi", next_phi, (H, A, d), "[H, A, d]")
  _checks.bool_array("next_fail", next_fail)
  _checks.shape("next_fail", next_fail, (H,), "[H]")
  k = jnp.asarray(k, jnp.int32)
  zero = jnp.zeros((), jnp.int32)

  def put(buf, x):
    x = jnp.expand_dims(jnp.asarray(x).astype(buf.dtype), 1)
    return jax.lax.dynamic_update_slice(buf, x, (zero, k) + (zero,) * (buf.ndim - 2))

  quad = _downdate_quad(state, phi)
  state = _rank_one(state, phi, reward)
  if quad is not None:
    quad = put(quad, _quad_of_new(state.pinv, jnp.asarray(next_phi).astype(state.pinv.dtype)))
  return state._replace(phi=put(state.phi, phi), reward=put(state.reward, reward),
                        next_phi=put(state.next_phi, next_phi),
                        next_fail=put(state.next_fail, next_fail), count=state.count + 1,
                        quad=quad)


def update_stats(state: StatsState, phi, reward, next_state, phi_table=None) -> StatsState:
  """Adds one episode (``phi [H, d]``, ``reward [H]``, ``next_state [H]`` int) to a ``StatsState``.

  ``G[h, s'] += phi_h`` for the state ``s'`` reached at step h (dense one-hot: no scatter).
  ``phi_table``: the model's ``[H, S, A, d]`` features given to ``init_stats_state``; required
  when the state keeps ``quad``. ``next_state`` holds 0-based state indices in ``[0, S - 1]``.
  """
  _checks.instance("state", state, StatsState, "a StatsState (agent.init_stats)")
  H, S, d = np.shape(state.G)
  _checks.array("phi", phi, (H, d), "[H, d]")
  _checks.array("reward", reward, (H,), "[H]")
  _checks.shape("next_state", next_state, (H,), "[H]")
  _checks.indices("next_state", next_state, S, "state indices")
  if phi_table is not None:
    _checks.array("phi_table", phi_table, (H, S, None, d), "[H, S, A, d]")
  S = state.G.shape[1]
  dtype = state.G.dtype
  phi = jnp.asarray(phi, dtype)
  onehot = (jnp.arange(S)[None, :] == jnp.asarray(next_state)[:, None]).astype(dtype)
  M, quad = state.M, state.quad
  if quad is not None and phi_table is None:
    raise ValueError("phi_table (the model's features) is required to update a StatsState that "
                     "keeps quad")
  if state.pinv is not None and (M is not None or quad is not None):
    u, den = _sherman_morrison(state.pinv, phi)
    if M is not None:
      # P' G'^T with P' = P - u u^T / den (u = P phi, den = 1 + phi^T u) and G' = G + e_s' phi^T:
      # M' = M - u (G u)^T / den + (u / den) e_s'^T (P' phi = u / den).
      gu = jnp.einsum("hsd,hd->hs", state.G, u)
      ud = u / den[:, None]
      M = M - ud[:, :, None] * gu[:, None, :] + ud[:, :, None] * onehot[:, None, :]
    if quad is not None:
      quad = quad - _norm_loss(jnp.asarray(phi_table, dtype), u, den)
  state = _rank_one(state, phi, reward)
  G = state.G + onehot[:, :, None] * phi[:, None, :]
  return state._replace(G=G, M=M, count=state.count + 1, quad=quad)


def valid_mask(state: AgentState) -> Array:
  """``[K]`` mask of stored episodes."""
  _check_buffer_state(state)
  return jnp.arange(state.phi.shape[1]) < state.count
