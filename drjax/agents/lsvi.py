"""DR-LSVI-UCB (Liu & Xu 2024, Algorithm 1) and LSVI-UCB (Jin et al. 2020) as pure functions.

Both agents plan by backward induction over *regression atoms*: everything Algorithm 1 needs
from the past at step h is ``Lambda_h`` and ``sum_n g_n min(V_{h+1}(x_n), alpha)`` over atoms n,
each a weight ``g_n in R^d`` and a next state ``x_n`` (given by its features and fail flag):

* buffer form (``AgentState``, any environment): one atom per stored transition, ``g = phi``;
* sufficient-statistics form (``StatsState``, finite environments): one atom per state s',
  ``g = G_h[s']``, the sum of the features of the stored step-h transitions into s'.

One planning kernel (``_plan_atoms``) serves both; ``Lambda_h`` (and ``sum phi r``) are updated
by rank-1 steps as transitions arrive.
"""

from __future__ import annotations

import functools
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from drjax import _checks, linalg
from drjax._precision import exact_matmuls
from drjax.agents import base, compose, pieces
from drjax.agents import state as state_lib
from drjax.agents.base import Agent, HParams, QFunction
from drjax.agents.state import AgentState, StatsState
from drjax import _programs


UNROLL_H = 4  # backward inductions up to this horizon are unrolled (XLA fuses across steps)


class KnownAction(NamedTuple):
  """An action whose value is known exactly (not learned): the notebook put option's exercise.

  Attributes:
    action: index of the known action; its ``Q`` is ``value(phi_all)`` (no regression, bonus or
      truncation).
    learned: index of the other action, whose ``Q = min(w . phi + bonus, top)`` (no floor at 0) is
      learned from regressions on *its* features at every visited state, whatever was played.
    value: ``phi_all [..., A, d] -> [...]`` the known action's value, read off the features.
    last_step_zero: the authors' LSVI-UCB rule at the last step ``h = H``: nothing is regressed
      for the learned action there, its weights are ``w_H = 0``, so ``Q_learned = min(bonus,
      top)`` at ``h = H``. ``False`` (default): LSVI-UCB regresses the last step's observed
      rewards onto the learned action's features (``w_H = Lambda_H^-1 sum phi r``), which,
      whatever was played, include the known action's rewards (the put option's exercise
      payoffs at the last step). Only LSVI-UCB's ridge regression is affected: DR-LSVI-UCB's
      last step is ``w_H = theta_H`` (``nu_H = 0``) either way, and ``theta_H . phi = 0`` on the
      notebook's hold features.
  """

  action: int
  learned: int
  value: Callable
  last_step_zero: bool = False


def _check_known(known, num_actions: int) -> None:
  """``known`` is a ``KnownAction`` over the 2 actions of a 2-action environment (online and
  offline agents alike)."""
  _checks.instance("known", known, KnownAction, "a KnownAction (e.g. NOTEBOOK_PUT_KNOWN) or None")
  _checks.function("known.value", known.value, "phi_all [..., A, d] -> [...]")
  if num_actions != 2 or {known.action, known.learned} != {0, 1}:
    raise ValueError(f"known must be a KnownAction over the 2 actions (0 and 1) of a 2-action "
                     f"environment, got {known!r} with A = {num_actions}")
  if not isinstance(known.last_step_zero, (bool, np.bool_)):
    raise TypeError(f"known.last_step_zero must be a bool, got {known.last_step_zero!r}")


def make_agent(name: str, horizon: int, feature_dim: int, num_actions: int, capacity: int, *,
               oracle: Callable, width="paper", scale: Callable = pieces.beta_of,
               reward: str = "theta", clip: str = "paper", tie_break: str = "optimistic",
               fail_zero: bool = True, solver: str = "auto",
               known: KnownAction | None = None) -> Agent:
  """An online agent composed of pieces (``drjax.agents.compose``): DR-LSVI-UCB and LSVI-UCB are
  each one call of this, and so is a researcher's variant.

  Args:
    name: display name.
    horizon, feature_dim, num_actions, capacity: H, d, A and the number of episodes stored.
    oracle: the per-coordinate dual oracle (``compose.TVConstrained(method, grid_size)``,
      ``compose.Nominal()``, ... or a callable ``(StepInputs, hp) -> (nu, alpha)``); the online
      engine plans with the fail-state form of the TV dual (``m = 0``).
    width: the bonus's width: ``"paper"`` (d-rectangular), ``"notebook"``, ``"ellipsoid"``, or a
      function ``(pinv, phi) -> width``.
    scale: ``scale(hp) -> []`` the bonus multiplier (default ``hp.beta``).
    reward: ``"theta"`` (known reward parameters, ``w_h = theta_h + nu_h``) or ``"regressed"``.
    clip: ``"paper"`` (``[0, H - h + 1]``) or ``"notebook"`` (at H for every step; nominal
      oracles only, the authors' LSVI-UCB baseline).
    tie_break, fail_zero, solver, known: as for ``dr_lsvi_ucb``.
  """
  H, d, A = compose.check_composition(horizon, feature_dim, num_actions, oracle, width, scale,
                                      reward)
  K = base.check_int("capacity K", capacity)
  _checks.choice("clip", clip, base.CLIP_FORMS)
  _checks.choice("tie_break", tie_break, base.TIE_BREAKS)
  _checks.boolean("fail_zero", fail_zero)
  _checks.choice("solver", solver, state_lib.SOLVERS)
  if solver == "auto":
    solver = "cholesky" if d <= linalg.UNROLL_MAX_D else "sherman-morrison"
  if known is not None:
    _check_known(known, A)
  return _build(name, oracle, width, scale, reward, H, d, A, K, clip, tie_break,
                bool(fail_zero), solver, known)


def _make(name, *, oracle, width, horizon, feature_dim, num_actions, capacity,
          bonus: str = "paper", clip: str = "paper", alpha: str = "exact", grid_size=0,
          tie_break: str = "optimistic", fail_zero: bool = True,
          solver: str = "auto", known: KnownAction | None = None,
          reward: str | None = None) -> Agent:
  """The built-in online agents' options (strings) resolved into a composition (``reward``
  ``None``: the paper's, known theta for the TV oracle and regressed for the nominal one)."""
  _checks.choice("bonus", bonus, base.BONUS_FORMS)
  _checks.choice("alpha", alpha, base.ALPHA_METHODS)
  if alpha != "exact":
    grid_size = base.check_int(f"grid_size (for alpha={alpha!r})", grid_size, 2)
  else:
    grid_size = base.check_int("grid_size", grid_size, 0)
  if oracle == "tv":
    orc = compose.TVConstrained(alpha, int(grid_size))
  else:
    orc = compose.Nominal()
  if reward is None:
    reward = "theta" if oracle == "tv" else "regressed"
  return make_agent(name, horizon, feature_dim, num_actions, capacity, oracle=orc, width=width,
                    reward=reward, clip=clip,
                    tie_break=tie_break, fail_zero=fail_zero, solver=solver, known=known)


@_programs.cached
def _build(name, oracle, width, scale, reward, H, d, A, K, clip, tie_break, fail_zero, solver,
           known) -> Agent:
  """The agent's pure functions (cached: equal compositions share their compiled programs)."""
  robust_oracle = not compose.oracle_attr(oracle, "nominal", False)
  wf = pieces.width_fn(width)
  last_step_zero = known is not None and bool(known.last_step_zero)
  q_at = functools.partial(pieces.linear_q, sign=1.0, width_form=wf,
                           truncation="upper" if known is not None else "paper",
                           fail_zero=fail_zero, known=known)
  method = getattr(oracle, "method", "exact")
  grid_size = getattr(oracle, "grid_size", 0)
  bonus = pieces.width_name(width)  # the agent's own width, recorded as it is

  def q_fn(qf: QFunction, h, phi_all, fail, clip: bool = True, dot: bool = False):
    return q_at(qf.w[h], qf.pinv[h], qf.beta, qf.top[h], phi_all, fail, clip=clip, dot=dot)

  def _check_model_dims(model, name: str) -> None:
    _checks.model(model, name)
    _, _, a_, d_ = np.shape(model.phi)
    if (np.shape(model.phi)[0], a_, d_) != (H, A, d):
      raise ValueError(f"{name}.phi must have (H, A, d) = {(H, A, d)} (the agent's), got shape "
                       f"{tuple(np.shape(model.phi))}")

  def _check_phi(phi) -> None:
    _checks.numeric("phi", phi)
    if np.ndim(phi) < 1 or np.shape(phi)[-1] != d:
      raise ValueError(f"phi must have shape [..., d] = [..., {d}], got {tuple(np.shape(phi))}")

  def _check_plan_args(state, hp, model, size, refactor) -> None:
    """Host-side checks of ``plan`` (shapes always; values when concrete)."""
    if not isinstance(state, (AgentState, StatsState)):
      raise TypeError(f"state must be an AgentState (agent.init) or StatsState "
                      f"(agent.init_stats), got {type(state).__name__}")
    if not all(hasattr(hp, f) for f in ("rho", "beta", "lam")):
      raise TypeError(f"hparams must be an HParams(rho, beta, lam) (drjax.make_hparams), got "
                      f"{type(hp).__name__}")
    for f, want in (("rho", (H, d)), ("beta", ()), ("lam", ())):
      _checks.array(f"hparams.{f}", getattr(hp, f), want,
                    "[H, d] (one setting: jax.vmap plan over a batch)" if f == "rho" else "")
    if _checks.is_concrete(hp):
      base.validate_hparams(hp, H, d)
    _checks.boolean("refactor", refactor)
    if isinstance(state, StatsState):
      if model is None:
        raise ValueError("model is required to plan from a StatsState (sufficient statistics)")
      _check_model_dims(model, "model")
      if np.shape(model.phi)[1] != np.shape(state.G)[1]:
        raise ValueError(f"model has {np.shape(model.phi)[1]} states but the state's statistics "
                         f"have {np.shape(state.G)[1]}")
      return
    cap = np.shape(state.phi)[1]
    size = _checks.optional_integer("size", size, 1, cap)
    if size is not None and _checks.is_concrete(state.count) and int(state.count) > size:
      raise ValueError(f"size must cover the {int(state.count)} stored episodes (state.count), "
                       f"got {size}")

  def init(theta, lam=None, capacity: int | None = None) -> AgentState:
    """Empty buffer-form state (``lam``: needed by the Sherman-Morrison solver only) with
    ``capacity`` slots (default: the agent's). LSVI-UCB with the Sherman-Morrison solver also
    keeps the ellipsoid norms of its stored next states (``AgentState.quad``)."""
    _checks.optional_integer("capacity", capacity, 1)
    if lam is None and solver == "sherman-morrison":
      raise ValueError("lam is required to initialise the Sherman-Morrison solver's Lambda^-1 "
                       "(init(theta, lam))")
    return state_lib.init_state(theta, H, d, A, K if capacity is None else capacity, lam,
                                solver, quad=wf in pieces.ELLIPTICAL)

  def init_stats(theta, num_states: int, lam=None, model=None) -> StatsState:
    """Empty sufficient-statistics state for a finite environment with ``num_states`` states.

    ``model`` (the environment's ``LinearModel``): LSVI-UCB with the Sherman-Morrison solver then
    also keeps the ellipsoid norms of every next state (``StatsState.quad``); updates must then
    pass the model too (``update(..., model=model)``).
    """
    if model is not None:
      _check_model_dims(model, "model")
    if lam is None and solver == "sherman-morrison":
      raise ValueError("lam is required to initialise the Sherman-Morrison solver's Lambda^-1 "
                       "(init_stats(theta, num_states, lam))")
    tab = model.phi if (model is not None and wf in pieces.ELLIPTICAL) else None
    return state_lib.init_stats_state(theta, H, d, num_states, lam, solver, phi_table=tab)

  def _plan_atoms(theta, gram, phir, pinv, g, nphi, nfail, mask, hp: HParams,
                  refactor: bool, ops=None, quad=None, size=None) -> QFunction:
    """Backward induction h = H..1 over atoms (Algorithm 1, lines 3-14).

    ``g [H, n, d]`` atom weights, ``nphi [H, n, A, d]`` features of the atoms' next states,
    ``nfail [H, n]`` their fail flags, ``mask [n]`` or ``None`` (buffer slots in use),
    ``quad [H, n, A]`` or ``None``: the atoms' next-state ellipsoid norms (``AgentState.quad``);
    ``size``: plan over the first ``size`` atoms only, the arrays holding more (the whole
    buffers: each step reads its own rows; ``compose.backward_induction``).
    """
    dtype = gram.dtype
    tops = base.clip_tops(H, clip, robust_oracle, dtype)
    beta = jnp.asarray(scale(hp), dtype)
    lam = jnp.asarray(hp.lam, dtype)
    if pinv is None or refactor:
      pinv = jax.vmap(linalg.spd_inverse)(gram + lam * jnp.eye(d, dtype=dtype)[None])
      ops = quad = None  # incrementally kept operators / norms belong to the training lambda
    # Step H: V_{H+1} = 0, so every oracle gives nu_H = 0: w_H = theta_H (known reward),
    # Lambda_H^-1 sum phi r (regressed), or 0 with ``known.last_step_zero`` (the authors'
    # put-option LSVI-UCB).
    last_w = jnp.zeros((d,), dtype) if (last_step_zero and reward == "regressed") else None
    out = compose.backward_induction(
        H, pinv=pinv, g=g, nphi=nphi, nfail=nfail, mask=mask, q_at=q_at, oracle=oracle, hp=hp,
        beta=beta, tops=tops, reward=reward, theta=theta.astype(dtype), reward_sum=phir,
        vmin=None, operators=ops, quads=quad, last_w=last_w, unroll_max=UNROLL_H, size=size)
    return QFunction(w=out.w, pinv=pinv, beta=beta, top=tops, nu=out.nu, alpha=out.alpha)

  def plan(state, hparams: HParams, model=None, *, size: int | None = None,
           refactor: bool = False) -> QFunction:
    """Backward induction h = H..1 on the regression data (Algorithm 1, lines 3-14).

    Args:
      state: ``AgentState`` (buffer form) or ``StatsState`` (sufficient statistics).
      hparams: the agent's hyperparameters (``HParams``).
      model: for a ``StatsState``, the environment's ``LinearModel`` (the features and fail flag
        of every next state); ignored for the buffer form.
      size: buffer form only: plan over the first ``size`` slots (static; must cover
        ``state.count``). ``None`` uses the whole capacity.
      refactor: recompute ``Lambda^-1`` from ``gram`` and ``hp.lam`` even when the state carries
        a Sherman-Morrison inverse (for derivatives with respect to lambda, or another lambda).

    Returns:
      The ``QFunction`` of this episode.
    """
    _check_plan_args(state, hparams, model, size, refactor)
    return _plan(state, hparams, model, size=size, refactor=refactor)

  def _plan(state, hparams, model=None, *, size=None, refactor=False):
    if isinstance(state, StatsState):
      S = state.G.shape[1]
      nphi, nfail = stats_atoms(model, H, S)
      return _plan_atoms(state.theta, state.gram, state.phir, state.pinv, state.G, nphi,
                         jnp.broadcast_to(nfail, (H, S)), None, hparams, refactor, ops=state.M,
                         quad=None if state.quad is None else state.quad[_next_rows(H)])
    n = state.phi.shape[1] if size is None else size
    mask = jnp.arange(n) < state.count
    # The whole buffers: each induction step reads its own first n rows (no copy of all H).
    return _plan_atoms(state.theta, state.gram, state.phir, state.pinv, state.phi,
                       state.next_phi, state.next_fail, mask, hparams, refactor,
                       quad=state.quad, size=n)

  def _check_q_args(qf, h, phi_all, fail, lead: bool) -> None:
    _checks.q_args(qf, h, phi_all, fail, H=H, d=d, A=A, lead=lead)

  def q_values(qf: QFunction, h, phi_all, fail):
    """``[..., A]`` Q_h at features ``phi_all [..., A, d]`` (``h``: 0-based step in
    ``[0, H - 1]``; ``fail``: whether the state is the fail state)."""
    _check_q_args(qf, h, phi_all, fail, lead=True)
    return q_fn(qf, h, phi_all, fail)

  def act(qf: QFunction, h, phi_all, fail):
    """Greedy action (Algorithm 1, line 14).

    Truncation makes many actions tie at ``Q = H - h + 1`` early in training; among the maximizers
    of the truncated Q we pick the one with the largest untruncated optimistic value (truncation
    is monotone, so this is always an argmax of Q), then the lowest index. Breaking such ties by
    index alone (``tie_break="first"``, what ``np.argmax`` in the authors' notebooks does) favours
    action 0 for as long as every action's bonus exceeds the clip. ``h``: the 0-based step in
    ``[0, H - 1]``; ``phi_all [A, d]``; ``fail``: a bool.
    """
    _check_q_args(qf, h, phi_all, fail, lead=False)
    _checks.scalar("fail", fail)
    return _act(qf, h, phi_all, fail)

  def _act(qf, h, phi_all, fail):
    if known is not None:  # argmax([Q_learned, Q_known]): ties go to the learned action
      q = q_fn(qf, h, phi_all, fail)
      return jnp.where(q[known.learned] >= q[known.action], known.learned,
                       known.action).astype(jnp.int32)
    # ``dot``: the Q-values as one contraction the argmax reads (why: ``pieces.linear_q``).
    q = q_fn(qf, h, phi_all, fail, clip=(tie_break == "first"), dot=True)
    return jnp.argmax(q).astype(jnp.int32)

  def regression_features(phi_all, a):
    """The regression row of a transition: the taken action's features, or (with a known
    action) the learned action's features at the visited state, whatever was played.
    ``phi_all [A, d]``; ``a``: the 0-based action index in ``[0, A - 1]``."""
    _checks.array("phi_all", phi_all, (A, d), "[A, d]")
    _checks.index("a", a, A, "(action)")
    return _regression_features(phi_all, a)

  def _regression_features(phi_all, a):
    if known is not None:
      return phi_all[known.learned]
    return phi_all[a]

  def bonus_fn(qf: QFunction, h, phi):
    """The bonus at features ``phi [..., d]`` of step ``h`` (0-based, ``[0, H - 1]``)."""
    _checks.qfunction("qf", qf, H, d)
    _checks.index("h", h, H, "(step)")
    _check_phi(phi)
    if known is not None:
      phi = phi[..., known.learned, :] if phi.ndim >= 2 and phi.shape[-2] == A else phi
    return qf.beta * wf(qf.pinv[h], phi)

  def update(state, phi, reward, next_phi, next_fail, next_state, model=None, slot=None):
    """Adds one finished episode (``[H, ...]`` per step) to either form of the state
    (``model``: for a ``StatsState`` made by ``init_stats(..., model=model)``; ``slot``: the
    buffer slot, default ``state.count``; pass the unbatched episode index under ``vmap`` so the
    store stays an in-place slice update)."""
    if not isinstance(state, (AgentState, StatsState)):
      raise TypeError(f"state must be an AgentState (agent.init) or StatsState "
                      f"(agent.init_stats), got {type(state).__name__}")
    if model is not None:
      _check_model_dims(model, "model")
    if slot is not None and isinstance(state, AgentState):
      _checks.index("slot", slot, np.shape(state.phi)[1], "(buffer slot)")
    return _update(state, phi, reward, next_phi, next_fail, next_state, model, slot)

  def _update(state, phi, reward, next_phi, next_fail, next_state, model=None, slot=None):
    if isinstance(state, StatsState):
      return state_lib.update_stats(state, phi, reward, next_state,
                                    phi_table=None if model is None else model.phi)
    return state_lib.store_episode(state, state.count if slot is None else slot, phi, reward,
                                   next_phi, next_fail)

  def uncertainty(qf: QFunction, h, phi):
    """The agent's own width at ``phi [..., d]`` (its bonus with beta = 1; ``h``: 0-based step
    in ``[0, H - 1]``): DR-LSVI-UCB's d-rectangular ``sum_i phi_i sqrt([Lambda_h^-1]_ii)`` (Theorem
    1), the notebook form, LSVI-UCB's ``sqrt(phi^T Lambda_h^-1 phi)`` or a custom ``width``."""
    _checks.qfunction("qf", qf, H, d)
    _checks.index("h", h, H, "(step)")
    _check_phi(phi)
    return _uncertainty(qf, h, phi)

  def _uncertainty(qf, h, phi):
    return wf(qf.pinv[h], phi)

  config = base.AgentConfig(H, d, A, K, bonus, clip, method, grid_size, tie_break, fail_zero,
                            solver, known)
  x = exact_matmuls  # float32 products at full precision on every backend (drjax/_precision.py)

  def checked(public, core):
    return compose.with_core(public, core, x)

  return Agent(name=name, config=config, init=init, plan=checked(plan, _plan),
               q_values=x(q_values), act=checked(act, _act), observe=state_lib.observe,
               end_episode=x(state_lib.end_episode), store_episode=x(state_lib.store_episode),
               bonus=x(bonus_fn), init_stats=init_stats, update=checked(update, _update),
               regression_features=checked(regression_features, _regression_features),
               uncertainty=checked(uncertainty, _uncertainty),
               duals_per_plan=(H - 1) * d if robust_oracle else 0)


def _next_rows(horizon: int) -> np.ndarray:
  """Row h of the atoms holds step h + 1 (row H - 1 repeats step H - 1; it is never used)."""
  return np.minimum(np.arange(horizon) + 1, horizon - 1)


def stats_atoms(model, horizon: int, num_states: int):
  """Next-state atoms of the sufficient-statistics form from a finite ``LinearModel``.

  Returns ``(nphi [H, S, A, d], nfail [S])``: row h holds the features of every state at step
  h + 1 (row H - 1 is unused: ``V_{H+1} = 0``), and whether each state is the fail state.
  """
  _checks.model(model)
  horizon = _checks.integer("horizon", horizon, 1)
  num_states = _checks.integer("num_states", num_states, 1)
  if tuple(np.shape(model.phi)[:2]) != (horizon, num_states):
    raise ValueError(f"model.phi must have (H, S) = ({horizon}, {num_states}) leading, got shape "
                     f"{tuple(np.shape(model.phi))}")
  nphi = model.phi[_next_rows(horizon)]
  nfail = jnp.arange(num_states) == model.fail_state
  return nphi, nfail


def dr_lsvi_ucb(horizon: int, feature_dim: int, num_actions: int, capacity: int, *,
                bonus: str = "paper", alpha: str = "exact", grid_size: int = 0,
                tie_break: str = "optimistic", solver: str = "auto",
                known: KnownAction | None = None, reward: str = "theta") -> Agent:
  """DR-LSVI-UCB (Algorithm 1) with heterogeneous rho ``[H, d]`` and known theta.

  Args:
    horizon: H.
    feature_dim: d.
    num_actions: A (actions are given as their features ``phi_all [A, d]``).
    capacity: maximal number of episodes stored (>= the number of training episodes K).
    bonus: ``"paper"`` — ``beta * sum_i phi_i sqrt([Lambda^-1]_ii)`` (Algorithm 1, line 12);
      ``"notebook"`` — ``beta * sqrt(phi^T diag(Lambda^-1) phi)`` (the authors' code).
    alpha: ``"exact"`` maximization over the breakpoints, ``"grid"`` over ``grid_size`` uniform
      points of [0, H], or ``"exact+grid"`` (both).
    grid_size: number of grid points (static).
    tie_break: among actions tied at the truncated maximum, ``"optimistic"`` takes the largest
      untruncated value, ``"first"`` the lowest index (the authors' ``np.argmax``).
    solver: how ``Lambda_h^-1`` is obtained: ``"cholesky"`` refactorizes the rank-1-updated Gram
      matrix at every plan (unrolled for d <= 8), ``"sherman-morrison"`` keeps ``Lambda_h^-1`` up
      to date by rank-1 inverse updates (O(d^2) per transition, no factorization), ``"auto"``
      (default) picks Cholesky for d <= 8 and Sherman-Morrison above.
    known: a ``KnownAction`` (2-action environments): one action's value is known exactly and
      only the other's Q is learned (the authors' put-option notebook; see
      ``NOTEBOOK_PUT_KNOWN``).
    reward: ``"theta"`` (default, the paper's: the environment's known reward parameters,
      ``w_h = theta_h + nu_h``) or ``"regressed"`` (Algorithm 1 with ``r_h`` replaced by its ridge
      estimate: ``w_h = Lambda_h^-1 sum_tau phi_tau r_tau + nu_h``, for environments whose reward
      is unknown, ``env.reward_known = False``).

  Returns:
    An ``Agent``. Q is clipped to ``[0, H - h + 1]`` and set to 0 at the fail state.
  """
  return _make("DR-LSVI-UCB", oracle="tv", width=bonus, horizon=horizon, feature_dim=feature_dim,
               num_actions=num_actions, capacity=capacity, bonus=bonus, clip="paper",
               alpha=alpha, grid_size=grid_size, tie_break=tie_break, fail_zero=True,
               solver=solver, known=known, reward=reward)


def lsvi_ucb(horizon: int, feature_dim: int, num_actions: int, capacity: int, *,
             clip: str = "paper", tie_break: str = "optimistic", fail_zero: bool = True,
             solver: str = "auto", known: KnownAction | None = None,
             reward: str = "regressed") -> Agent:
  """LSVI-UCB (Jin et al. 2020): ridge regression on ``r + V_{h+1}``, bonus ``beta ||phi||``.

  Args:
    clip: ``"paper"`` clips Q to ``[0, H - h + 1]`` like DR-LSVI-UCB; ``"notebook"`` clips at H
      for every step (the authors' baseline).
    tie_break: as for ``dr_lsvi_ucb``.
    fail_zero: set ``Q = 0`` (so ``V_{h+1} = 0`` in the backup) at the fail state, as
      DR-LSVI-UCB does. Default ``True``: the paper's experiments (and the authors' code) give
      LSVI-UCB this knowledge, so the comparison isolates robustness; ``False`` is Jin et al.'s
      LSVI-UCB, which knows nothing of fail states.
    solver, known: as for ``dr_lsvi_ucb``; with ``known.last_step_zero`` the learned action's
      last-step weights are ``w_H = 0`` (the authors' put-option LSVI-UCB) instead of the
      regression ``Lambda_H^-1 sum phi r``.
    reward: ``"regressed"`` (default, Jin et al.'s: the observed rewards are regressed) or
      ``"theta"`` (the environment's known reward parameters: ``w_h = theta_h + Lambda_h^-1
      sum phi V_{h+1}``).
  """
  return _make("LSVI-UCB", oracle="ridge", width=pieces.ellipsoid_unrolled, horizon=horizon, feature_dim=feature_dim,
               num_actions=num_actions, capacity=capacity, clip=clip, tie_break=tie_break,
               fail_zero=fail_zero, solver=solver, known=known, reward=reward)


def _exercise_payoff(phi_all):
  """The notebook put option's exercise value: the payoff coordinate of the exercise row."""
  return phi_all[..., 0, -1]


# The authors' put-option notebook: exercise (action 0) has the known value max(0, 100 - s), read
# off the notebook variant's features; only hold (action 1) is learned, on the hat features; their
# LSVI-UCB regresses nothing at the last step (w_H = 0: Q_hold = min(bonus, top) there).
# ``NOTEBOOK_PUT_KNOWN._replace(last_step_zero=False)`` regresses the last step's rewards instead.
NOTEBOOK_PUT_KNOWN = KnownAction(action=0, learned=1, value=_exercise_payoff, last_step_zero=True)
