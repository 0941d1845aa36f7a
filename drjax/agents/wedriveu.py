"""We-DRIVE-U: variance-weighted, rare-switching DR-LSVI-UCB (finite environments).

Liu, Wang & Xu (arXiv 2409.20521) describe We-DRIVE-U only in an abstract and summaries: a
variance-weighted ridge regression, an optimistic variance estimator, rare policy switching with
``O(dH log(1 + H^2 K))`` switches and ``O(d^2 H log(1 + H^2 K))`` dual-oracle calls, and the bound
``O~(d H min{1/rho, H} / sqrt(K))``. The equations below are a reconstruction from those parts,
LSVI-UCB++ (He et al. 2023: weighted regression, variance estimator, determinant-doubling switches)
and VA-DRPVI's estimator (``offline_core.variance_weights``); ``docs/agents.md`` says which part
comes from where. Every constant that is not certain is a hyperparameter or an option.

Indices are 0-based: step ``h`` in ``[0, H - 1]``, ``V_H = 0``. For each step ``h`` and every
episode ``tau`` added so far, with ``phi_tau`` its step-h regression features, ``s'_tau`` its next
state and ``w_tau = sigma_bar_tau^-2`` its weight:

* weighted statistics: ``Sigma_h = lam I + sum_tau w_tau phi_tau phi_tau^T``,
  ``G_w[h, s'] = sum_tau w_tau phi_tau 1{s'_tau = s'}``, ``phir_w[h] = sum_tau w_tau r_tau phi_tau``
  (the reward is the known ``theta``, as DR-LSVI-UCB's, or with ``reward="regressed"`` the
  weighted ridge estimate ``Sigma_h^-1 phir_w[h]``);
* planning (DR-LSVI-UCB's backward induction, ``compose.backward_induction``, on the weighted
  statistics): ``Q_h = clip(phi^T (theta_h + nu_h) + beta sum_i phi_i sqrt([Sigma_h^-1]_ii), 0,
  H - h)``, ``nu_{h,i} = max_{alpha in [0, H]} [Sigma_h^-1 G_w[h]^T min(V_{h+1}, alpha)]_i -
  rho_{h,i} alpha`` (the TV dual of the fail-state form, exact over the breakpoints), ``Q = 0`` at
  the fail state;
* variance of the episode's transition at step h, from ``V_{h+1}(s') = max_a Q_{h+1}(s', a)`` of the
  Q-function the episode acted with, regressed with the weighted statistics *before* the episode is
  added: ``w1 = Sigma_h^-1 G_w[h]^T V_{h+1}``, ``w2 = Sigma_h^-1 G_w[h]^T V_{h+1}^2``,
  ``var_hat = max(0, clip(phi.w2, 0, H^2) - clip(phi.w1, 0, H)^2)``, the optimistic term
  ``E = min(H^2, beta_var ||phi||_{Sigma_h^-1})`` and
  ``sigma_bar^2 = max(var_floor, min(var_hat + E, cap_h))``, ``cap_h = H^2`` (``cap="horizon"``) or
  ``min(1 / min_i rho_{h,i}, H)^2`` (``cap="robust"``); ``weights="unit"`` sets
  ``sigma_bar = 1`` (the ablation without variance weights);
* rare switching: ``log det Sigma_h`` is tracked by rank-one steps
  (``+= log(1 + w phi^T Sigma_h^-1 phi)``); after an episode is added the policy is recomputed when
  ``det Sigma_h >= 2 det Sigma_h^{last switch}`` for some h (``switch="any-step"``, He et al.'s
  rule), when ``prod_h det Sigma_h`` has doubled (``"global"``), or always (``"every"``).

The state keeps the current weighted statistics and a snapshot taken at the last switch; ``plan``
plans from the snapshot, so the policy (and every dual problem in it) changes only at switches.
``plan`` is still *run* every episode: under ``vmap`` a ``lax.cond`` computes both branches, so a
cached plan would save nothing; ``counters`` counts the distinct policies and their dual problems.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from drjax import _checks, linalg, protocols
from drjax._precision import exact_matmuls
from drjax.agents import base, compose, lsvi, pieces
from drjax.agents import state as state_lib
from drjax.agents.base import Agent
from drjax.agents.state import StatsState
from drjax import _programs

Array = jax.Array

SWITCHES = ("any-step", "global", "every")
CAPS = ("horizon", "robust")
WEIGHTS = ("variance", "unit")
LOG2 = math.log(2.0)

FORM_ERROR = (
    "we-drive-u runs in the sufficient-statistics form only (a finite environment with an exact "
    "model: make_train(env, agent, K) with form='auto' or 'stats'); the buffer form "
    "(make_train(..., form='buffer'), or an environment without a finite model) is not supported")


class WeDriveHParams(NamedTuple):
  """We-DRIVE-U's traced hyperparameters (``jax.vmap`` over a batch: one compilation per grid).

  Attributes:
    rho: ``[H, d]`` TV uncertainty levels in [0, 1].
    beta: ``[]`` bonus multiplier, >= 0.
    lam: ``[]`` ridge regularizer lambda, > 0.
    beta_var: ``[]`` multiplier of the optimistic variance term
      ``min(H^2, beta_var ||phi||_{Sigma^-1})``, >= 0.
    var_floor: ``[]`` the floor of ``sigma_bar^2``, > 0 (weights are at most ``1 / var_floor``).

  Defaults: the experiments' rho 0, beta 1, lambda 0.1; beta_var 1 and var_floor 1 (reconstructed:
  the abstract gives no constants).
  """

  rho: Array = 0.0
  beta: Array = 1.0
  lam: Array = 0.1
  beta_var: Array = 1.0
  var_floor: Array = 1.0


class WeDriveState(NamedTuple):
  """The agent's state: the current weighted statistics and the snapshot of the last switch.

  Attributes:
    theta: ``[H, d]`` reward parameters.
    lam: ``[]`` the ridge lambda of ``Sigma`` (``init_stats``'s; the update's ``Sigma^-1``).
    gram: ``[H, d, d]`` ``sum w phi phi^T`` (without ``lam I``).
    phir: ``[H, d]`` ``sum w r phi``.
    G: ``[H, S, d]`` ``sum w phi 1{s' = s}``.
    pinv: ``[H, d, d]`` ``Sigma^-1`` kept by Sherman-Morrison steps (``solver="sherman-morrison"``),
      else ``None`` (refactorized from ``gram`` when needed).
    M: ``[H, d, S]`` the ridge operator ``Sigma^-1 G_w^T`` kept by rank-one steps
      (Sherman-Morrison solver; the dual's regression then costs ``O(d S)`` per candidate, not
      ``O(d^2 S)``), else ``None``.
    logdet: ``[H]`` ``log det(Sigma_h / lam)``, by rank-one steps.
    snap_gram, snap_phir, snap_G, snap_pinv, snap_M, snap_logdet: the same at the last switch
      (the data ``plan`` uses).
    sigma2: ``[H]`` ``sigma_bar^2`` of the last episode added (0 before any).
    count: ``[]`` int32, episodes added.
    policies: ``[]`` int32, distinct policies computed so far (the initial one counts 1).
  """

  theta: Array
  lam: Array
  gram: Array
  phir: Array
  G: Array
  pinv: Array | None
  M: Array | None
  logdet: Array
  snap_gram: Array
  snap_phir: Array
  snap_G: Array
  snap_pinv: Array | None
  snap_M: Array | None
  snap_logdet: Array
  sigma2: Array
  count: Array
  policies: Array


class WeDriveConfig(NamedTuple):
  """Static structure (``base.AgentConfig``'s fields and We-DRIVE-U's options)."""

  horizon: int
  feature_dim: int
  num_actions: int
  capacity: int
  bonus: str
  clip: str
  alpha: str
  grid_size: int
  tie_break: str
  fail_zero: bool
  solver: str
  known: object = None
  switch: str = "any-step"
  cap: str = "horizon"
  weights: str = "variance"
  reward: str = "theta"


def validate_hparams(hparams, horizon: int, feature_dim: int) -> None:
  """``base.validate_hparams`` (rho, beta, lam) plus beta_var >= 0 and var_floor > 0, all finite
  (``ValueError`` naming the field; ``TypeError`` for another kind of hyperparameters)."""
  if not all(hasattr(hparams, f) for f in WeDriveHParams._fields):
    raise TypeError(f"hparams must be a WeDriveHParams(rho, beta, lam, beta_var, var_floor) "
                    f"(registry.make_hparams('we-drive-u', env)), got {type(hparams).__name__}")
  base.validate_hparams(hparams, horizon, feature_dim)
  # pylint: disable-next=protected-access
  bv, vf = base._hparam_values(hparams, ("beta_var", "var_floor"))
  _checks.in_range("beta_var", bv, 0)
  _checks.in_range("var_floor", vf, 0, lo_open=True)


def make_hparams(horizon: int, feature_dim: int, *, rho=0.0, beta=1.0, lam=0.1, beta_var=1.0,
                 var_floor=1.0, dtype=None) -> WeDriveHParams:
  """Validated ``WeDriveHParams`` (``rho``: a scalar or ``[..., H, d]``; batch axes broadcast)."""
  hp = base.make_hparams(horizon, feature_dim, rho=rho, beta=beta, lam=lam, dtype=dtype)
  extra = {}
  for name, x in (("beta_var", beta_var), ("var_floor", var_floor)):
    _checks.require_concrete(name, x, "make_hparams validates its values on the host")
    values = _checks._values(name, x)  # pylint: disable=protected-access
    extra[name] = jnp.asarray(values, hp.beta.dtype)
  out = WeDriveHParams(*hp, **extra)
  validate_hparams(out, horizon, feature_dim)
  return out


def registry_hparams(spec, H, d, A, dtype=None, **values) -> WeDriveHParams:
  """``registry.make_hparams("we-drive-u", env, ...)`` (``spec`` and ``A`` unused)."""
  del spec, A
  return make_hparams(H, d, dtype=dtype, **values)


def we_drive_u(horizon: int, feature_dim: int, num_actions: int, capacity: int, *,
               switch: str = "any-step", cap: str = "horizon", weights: str = "variance",
               alpha: str = "exact", grid_size: int = 0, tie_break: str = "optimistic",
               solver: str = "auto", reward: str = "theta") -> Agent:
  """We-DRIVE-U (reconstructed; see the module docstring and ``docs/agents.md``).

  Args:
    horizon, feature_dim, num_actions, capacity: H, d, A and the number of training episodes.
    switch: ``"any-step"`` (recompute the policy when ``det Sigma_h`` has doubled for some h since
      the last switch), ``"global"`` (when ``prod_h det Sigma_h`` has doubled) or ``"every"``
      (every episode: the ablation without rare switching).
    cap: the cap of ``sigma_bar^2``: ``"horizon"`` (``H^2``) or ``"robust"``
      (``min(1 / min_i rho_{h,i}, H)^2``).
    weights: ``"variance"`` (``1 / sigma_bar^2``) or ``"unit"`` (all 1: DR-LSVI-UCB with rare
      switching).
    alpha, grid_size, tie_break: as for ``dr_lsvi_ucb``.
    solver: ``Sigma^-1``: ``"cholesky"`` refactorizes the snapshot at every plan and ``Sigma`` at
      every update, ``"sherman-morrison"`` keeps both by rank-one steps, ``"auto"`` picks Cholesky
      for d <= 8 (``linalg.UNROLL_MAX_D``).
    reward: ``"theta"`` (the known reward parameters, ``w_h = theta_h + nu_h``; default, as
      DR-LSVI-UCB) or ``"regressed"`` (``w_h = Sigma_h^-1 phir_w[h] + nu_h``, the weighted ridge
      estimate).

  Returns:
    An online ``Agent`` (``update_takes_qf``, ``counters``); finite environments only.
  """
  H, d, A = compose.check_composition(horizon, feature_dim, num_actions,
                                      compose.TVConstrained(), "paper", pieces.beta_of, reward)
  K = base.check_int("capacity K", capacity)
  _checks.choice("switch", switch, SWITCHES)
  _checks.choice("cap", cap, CAPS)
  _checks.choice("weights", weights, WEIGHTS)
  _checks.choice("alpha", alpha, base.ALPHA_METHODS)
  if alpha != "exact":
    grid_size = base.check_int(f"grid_size (for alpha={alpha!r})", grid_size, 2)
  else:
    grid_size = base.check_int("grid_size", grid_size, 0)
  _checks.choice("tie_break", tie_break, base.TIE_BREAKS)
  _checks.choice("solver", solver, state_lib.SOLVERS)
  if solver == "auto":
    solver = "cholesky" if d <= linalg.UNROLL_MAX_D else "sherman-morrison"
  return _build(H, d, A, K, switch, cap, weights, alpha, int(grid_size), tie_break, solver, reward)


@_programs.cached
def _build(H, d, A, K, switch, cap, weights, alpha, grid_size, tie_break, solver, reward) -> Agent:
  """The agent's functions (cached: equal options share compiled programs)."""
  # DR-LSVI-UCB's composition plans, acts and measures widths; it is given the weighted statistics.
  inner = lsvi.make_agent("We-DRIVE-U", H, d, A, K,
                          oracle=compose.TVConstrained(alpha, grid_size), width="paper",
                          reward=reward, clip="paper", tie_break=tie_break, fail_zero=True,
                          solver="cholesky")
  inner_plan = protocols.unchecked(inner.plan)
  sm = solver == "sherman-morrison"
  duals = (H - 1) * d

  def _form_error():
    raise ValueError(FORM_ERROR)

  def init(theta, lam=None, capacity: int | None = None):
    """Not supported: the buffer form (``ValueError`` naming it)."""
    del theta, lam, capacity
    _form_error()

  def observe(state, h, phi, reward, next_phi_all, next_fail):
    """Not supported: the buffer form (``ValueError`` naming it)."""
    del state, h, phi, reward, next_phi_all, next_fail
    _form_error()

  def store_episode(state, k, phi, reward, next_phi, next_fail):
    """Not supported: the buffer form (``ValueError`` naming it)."""
    del state, k, phi, reward, next_phi, next_fail
    _form_error()

  def _check_model(model, name="model"):
    if model is None:
      raise ValueError(f"{name} (the environment's LinearModel) is required: {FORM_ERROR}")
    _checks.model(model, name)
    if (np.shape(model.phi)[0], np.shape(model.phi)[2], np.shape(model.phi)[3]) != (H, A, d):
      raise ValueError(f"{name}.phi must have (H, A, d) = {(H, A, d)} (the agent's), got shape "
                       f"{tuple(np.shape(model.phi))}")

  def init_stats(theta, num_states: int, lam=None, model=None) -> WeDriveState:
    """Empty state for a finite environment with ``num_states`` states (``lam``: required)."""
    S = _checks.integer("num_states", num_states, 1)
    _checks.array("theta", theta, (H, d), "[H, d]")
    if lam is None:
      raise ValueError("lam is required: init_stats(theta, num_states, lam) (Sigma = lam I + ...)")
    _checks.array("lam", lam, ())
    _checks.in_range("lam", lam, 0, lo_open=True)
    if model is not None:
      _check_model(model)
    dtype = jnp.result_type(float)
    lam = jnp.asarray(lam, dtype)
    gram = jnp.zeros((H, d, d), dtype)
    pinv = jnp.broadcast_to(jnp.eye(d, dtype=dtype) / lam, (H, d, d)) if sm else None
    zeros_h = jnp.zeros((H,), dtype)
    phir, G = jnp.zeros((H, d), dtype), jnp.zeros((H, S, d), dtype)
    M = jnp.zeros((H, d, S), dtype) if sm else None
    return WeDriveState(theta=jnp.asarray(theta, dtype), lam=lam, gram=gram, phir=phir, G=G,
                        pinv=pinv, M=M, logdet=zeros_h, snap_gram=gram, snap_phir=phir,
                        snap_G=G, snap_pinv=pinv, snap_M=M, snap_logdet=zeros_h, sigma2=zeros_h,
                        count=jnp.zeros((), jnp.int32), policies=jnp.ones((), jnp.int32))

  def _check_state(state):
    _checks.instance("state", state, WeDriveState,
                     "a WeDriveState (agent.init_stats; we-drive-u has no buffer form)")

  def _check_hparams(hparams):
    if not all(hasattr(hparams, f) for f in WeDriveHParams._fields):
      raise TypeError(f"hparams must be a WeDriveHParams(rho, beta, lam, beta_var, var_floor) "
                      f"(registry.make_hparams('we-drive-u', env)), got {type(hparams).__name__}")
    for f, want in (("rho", (H, d)), ("beta", ()), ("lam", ()), ("beta_var", ()),
                    ("var_floor", ())):
      _checks.array(f"hparams.{f}", getattr(hparams, f), want,
                    "[H, d] (one setting: jax.vmap over a batch)" if f == "rho" else "")
    if _checks.is_concrete(hparams):
      validate_hparams(hparams, H, d)

  def _snapshot(state) -> StatsState:
    return StatsState(theta=state.theta, gram=state.snap_gram, phir=state.snap_phir,
                      pinv=state.snap_pinv, G=state.snap_G, count=state.count, M=state.snap_M)

  def plan(state, hparams, model=None, *, size: int | None = None, refactor: bool = False):
    """The ``QFunction`` of the policy in use: DR-LSVI-UCB's backward induction on the snapshot
    of the weighted statistics taken at the last switch (``pinv`` = the snapshot's
    ``Sigma^-1``). ``size`` is ignored (no buffer); ``refactor`` recomputes ``Sigma^-1`` from the
    snapshot's Gram matrix and ``hparams.lam``."""
    _check_state(state)
    _check_hparams(hparams)
    _check_model(model)
    if np.shape(model.phi)[1] != np.shape(state.G)[1]:
      raise ValueError(f"model has {np.shape(model.phi)[1]} states but the state's statistics "
                       f"have {np.shape(state.G)[1]}")
    _checks.boolean("refactor", refactor)
    return _plan(state, hparams, model, size=size, refactor=refactor)

  def _plan(state, hparams, model=None, *, size=None, refactor=False):
    del size
    return inner_plan(_snapshot(state), hparams, model, refactor=refactor)

  def _next_values(qf, model):
    """``[H, S]`` ``V_{h+1}(s') = max_a Q_{h+1}(s', a)`` of ``qf`` (row ``H - 1``: 0)."""
    S = model.phi.shape[1]
    fail = jnp.arange(S) == model.fail_state
    q = jax.vmap(lambda w, p, top, phi: pieces.linear_q(
        w, p, qf.beta, top, phi, fail, sign=1.0, width_form=pieces.d_rectangular))(
            qf.w[1:], qf.pinv[1:], qf.top[1:], model.phi[1:].astype(qf.w.dtype))
    v = jnp.max(q, axis=-1)  # [H - 1, S]
    return jnp.concatenate([v, jnp.zeros((1, S), v.dtype)])

  def _sigma2(state, u, quad, v, hparams):
    """``[H]`` ``sigma_bar^2`` of the episode's transitions from ``u = Sigma^-1 phi [H, d]``,
    ``quad = phi^T Sigma^-1 phi [H]`` and ``v = V_{h+1} [H, S]``: ``phi . w1 = u . (G_w^T V)``
    (``O(S d)`` per step, no ``[d, S]`` operator)."""
    dtype = u.dtype
    if weights == "unit":
      return jnp.ones((H,), dtype)
    hh = float(H)
    m1 = jnp.clip(jnp.sum(u * jnp.einsum("hsd,hs->hd", state.G, v), -1), 0.0, hh)
    m2 = jnp.clip(jnp.sum(u * jnp.einsum("hsd,hs->hd", state.G, v * v), -1), 0.0, hh * hh)
    var_hat = jnp.maximum(m2 - m1 * m1, 0.0)
    norm = jnp.sqrt(jnp.maximum(quad, 0.0))
    bonus = jnp.minimum(hh * hh, jnp.asarray(hparams.beta_var, dtype) * norm)
    if cap == "horizon":
      top = jnp.full((H,), hh * hh, dtype)
    else:
      rho_min = jnp.min(jnp.asarray(hparams.rho, dtype), axis=-1)
      inv = jnp.where(rho_min > 0, 1.0 / jnp.where(rho_min > 0, rho_min, 1.0), jnp.inf)
      top = jnp.minimum(inv, hh) ** 2
    return jnp.maximum(jnp.asarray(hparams.var_floor, dtype),
                       jnp.minimum(var_hat + bonus, top))

  def update(state, phi, reward, next_phi=None, next_fail=None, next_state=None, model=None,
             slot=None, *, qf=None, hparams=None):
    """Adds one finished episode (``phi [H, d]``, ``reward [H]``, ``next_state [H]`` state
    indices) with weights ``1 / sigma_bar^2`` computed from ``qf`` (the Q-function the episode
    acted with), ``model`` and ``hparams``; then applies the switching rule. ``next_phi``,
    ``next_fail`` and ``slot`` (buffer form) are ignored."""
    _check_state(state)
    S = np.shape(state.G)[1]
    _checks.array("phi", phi, (H, d), "[H, d]")
    _checks.array("reward", reward, (H,), "[H]")
    if next_state is None:
      raise ValueError("next_state (the [H] next-state indices) is required")
    _checks.shape("next_state", next_state, (H,), "[H]")
    _checks.indices("next_state", next_state, S, "state indices")
    _check_model(model)
    if qf is None:
      raise ValueError("qf (the QFunction the episode acted with) is required: update(..., qf=qf, "
                       "hparams=hparams)")
    _checks.qfunction("qf", qf, H, d)
    if hparams is None:
      raise ValueError("hparams (the WeDriveHParams of the run) is required: update(..., qf=qf, "
                       "hparams=hparams); the variance weights depend on beta_var, var_floor "
                       "and rho")
    _check_hparams(hparams)
    return _update(state, phi, reward, next_phi, next_fail, next_state, model, slot, qf=qf,
                   hparams=hparams)

  def _update(state, phi, reward, next_phi=None, next_fail=None, next_state=None, model=None,
              slot=None, *, qf=None, hparams=None):
    del next_phi, next_fail, slot
    if hparams is None or not all(hasattr(hparams, f) for f in WeDriveHParams._fields):
      # Structural, at trace time (free): make_train checks only rho, beta and lam.
      raise TypeError(f"hparams must be a WeDriveHParams(rho, beta, lam, beta_var, var_floor) "
                      f"(registry.make_hparams('we-drive-u', env)), got "
                      f"{type(hparams).__name__}")
    dtype = state.gram.dtype
    phi = jnp.asarray(phi).astype(dtype)
    reward = jnp.asarray(reward).astype(dtype)
    S = state.G.shape[1]
    if sm:
      pinv = state.pinv
    else:
      pinv = jax.vmap(linalg.spd_inverse)(state.gram + state.lam * jnp.eye(d, dtype=dtype)[None])
    v = _next_values(qf, model).astype(dtype)
    u = jnp.einsum("hde,he->hd", pinv, phi)  # Sigma^-1 phi
    quad = jnp.sum(phi * u, -1)
    sigma2 = _sigma2(state, u, quad, v, hparams)
    wt = 1.0 / sigma2  # [H]
    logdet = state.logdet + jnp.log1p(wt * quad)
    gram = state.gram + wt[:, None, None] * phi[:, :, None] * phi[:, None, :]
    phir = state.phir + (wt * reward)[:, None] * phi
    onehot = (jnp.arange(S)[None, :] == jnp.asarray(next_state)[:, None]).astype(dtype)
    G = state.G + onehot[:, :, None] * (wt[:, None] * phi)[:, None, :]
    new_pinv = M = None
    if sm:
      # Sigma' = Sigma + w phi phi^T, G_w' = G_w + w e_s' phi^T: with ud = w u / (1 + w quad),
      # Sigma'^-1 = Sigma^-1 - ud u^T and M' = Sigma'^-1 G_w'^T = M - ud (G_w u)^T + ud e_s'^T.
      ud = (wt / (1.0 + wt * quad))[:, None] * u
      new_pinv = pinv - ud[:, :, None] * u[:, None, :]
      gu = jnp.einsum("hsd,hd->hs", state.G, u)
      M = state.M + ud[:, :, None] * (onehot - gu)[:, None, :]
    gain = logdet - state.snap_logdet
    if switch == "every":
      fire = jnp.ones((), bool)
    elif switch == "any-step":
      fire = jnp.any(gain >= LOG2)
    else:
      fire = jnp.sum(gain) >= LOG2
    pick = lambda new, old: jnp.where(fire, new, old)  # noqa: E731
    return state._replace(
        gram=gram, phir=phir, G=G, pinv=new_pinv, M=M, logdet=logdet,
        snap_gram=pick(gram, state.snap_gram), snap_phir=pick(phir, state.snap_phir),
        snap_G=pick(G, state.snap_G),
        snap_pinv=None if new_pinv is None else pick(new_pinv, state.snap_pinv),
        snap_M=None if M is None else pick(M, state.snap_M),
        snap_logdet=pick(logdet, state.snap_logdet), sigma2=sigma2, count=state.count + 1,
        policies=state.policies + fire.astype(jnp.int32))

  def end_episode(state):
    """Advances the episode counter (``update`` already does)."""
    _check_state(state)
    return state._replace(count=state.count + 1)

  def counters(state):
    """``(policies, dual_calls)``: int32 counts of the distinct policies computed so far (the
    initial one counts 1) and of their dual problems (``(H - 1) d`` per policy)."""
    return state.policies, state.policies * jnp.int32(duals)

  x = exact_matmuls
  config = WeDriveConfig(H, d, A, K, "paper", "paper", alpha, grid_size, tie_break, True, solver,
                         None, switch, cap, weights, reward)
  return Agent(name="We-DRIVE-U", config=config, init=init,
               plan=compose.with_core(plan, _plan, x), q_values=inner.q_values, act=inner.act,
               observe=observe, end_episode=end_episode, store_episode=store_episode,
               bonus=inner.bonus, init_stats=init_stats,
               update=compose.with_core(update, _update, x),
               regression_features=inner.regression_features, uncertainty=inner.uncertainty,
               hparams_type=WeDriveHParams, update_takes_qf=True, counters=counters,
               duals_per_plan=duals)
