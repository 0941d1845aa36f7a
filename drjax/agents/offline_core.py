"""The offline builder: regression atoms of a dataset (``atoms``) and ``make_agent``, which
composes an ``OfflineAgent`` from the pieces (``drjax.agents.compose``): every offline algorithm
of ``drjax.agents.offline`` is one call of it. ``drjax.agents.offline`` re-exports both."""

from __future__ import annotations

import functools
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from drjax import _checks
from drjax import data as data_lib
from drjax import duals_tv, linalg
from drjax._precision import exact_matmuls
from drjax.agents import base, compose, pieces
from drjax.agents.base import QFunction
from drjax.agents.offline_types import (HD_FIELDS, VARIANCES, VMIN_MODES, FORMS, OfflineAgent,
                                         OfflineConfig, check_hparams)
from drjax import _programs

Array = jax.Array


class _Atoms(NamedTuple):
  """Step-major regression atoms of one dataset: what every backward induction consumes."""

  g: Array          # [H, n, d] weighted atom features (w_tau phi_tau, or per-state sums)
  nphi: Array       # [H, n, A, d] features of every action at the atoms' next states
  nfail: Array      # [H, n] fail flags of the atoms' next states
  mask: Array       # [H, n] atoms in use
  gram: Array       # [H, d, d] sum w phi phi^T (no ridge)
  reward_sum: Array  # [H, d] sum w phi r
  all_phi: Array | None   # [H, S, A, d] every state's features at step h + 1 (exact vmin)
  all_fail: Array | None  # [S]


def _next_rows(H: int) -> np.ndarray:
  return np.minimum(np.arange(H) + 1, H - 1)


def atoms(ds: data_lib.Dataset, weights: Array | None = None, model=None,
          form: str = "buffer") -> _Atoms:
  """Regression atoms of a dataset (``weights [H, N]`` multiply each sample; ``None``: 1).

  ``form="buffer"``: one atom per transition. ``form="stats"`` (finite ``model``): one atom per
  next state, ``g[h, s'] = sum_{tau: s'_tau = s'} w_tau phi_tau``, with every state's features
  from the model, so the cost no longer grows with N after aggregation.
  """
  _checks.instance("ds", ds, data_lib.Dataset, "a drjax.data.Dataset (data.collect / data.load)")
  _checks.choice("form", form, ("buffer", "stats"))
  H, N = np.shape(ds.phi)[:2]
  if weights is not None:
    _checks.array("weights", weights, (H, N), "[H, N]")
  if model is not None:
    _checks.model(model)
  elif form == "stats":
    raise ValueError("form='stats' (sufficient statistics) needs model= (the environment's "
                     "LinearModel at the data's params)")
  dtype = ds.phi.dtype
  H = ds.phi.shape[0]
  wv = ds.valid.astype(dtype)[None, :]
  if weights is not None:
    wv = wv * weights.astype(dtype)
  gw = ds.phi * wv[..., None]  # [H, N, d]
  gram = jnp.einsum("hnd,hne->hde", gw, ds.phi)
  reward_sum = jnp.einsum("hnd,hn->hd", gw, ds.reward)
  all_phi = all_fail = None
  if model is not None:
    S = model.phi.shape[1]
    all_phi = model.phi[_next_rows(H)].astype(dtype)
    all_fail = jnp.arange(S) == model.fail_state
  if form == "stats":
    S = model.phi.shape[1]
    onehot = (ds.next_state[..., None] == jnp.arange(S)[None, None, :]).astype(dtype)  # [H,N,S]
    g = jnp.einsum("hns,hnd->hsd", onehot, gw)
    count = jnp.einsum("hns,n->hs", onehot, ds.valid.astype(dtype))
    return _Atoms(g, all_phi, jnp.broadcast_to(all_fail, (H, S)), count > 0, gram, reward_sum,
                  all_phi, all_fail)
  mask = jnp.broadcast_to(ds.valid, ds.phi.shape[:2])
  return _Atoms(gw, ds.next_phi, ds.next_fail, mask, gram, reward_sum, all_phi, all_fail)


def _cast(ds: data_lib.Dataset, dtype) -> data_lib.Dataset:
  """``ds`` with its float fields in ``dtype`` (a pilot loaded from a float32 file under x64)."""
  return ds._replace(**{f: getattr(ds, f).astype(dtype)
                        for f in ("phi", "reward", "next_phi", "theta")})


def _resolve_form(form: str, model, ds) -> str:
  _checks.choice("form", form, FORMS)
  if form == "stats" and model is None:
    raise ValueError("form='stats' (sufficient statistics) needs model= (the environment's "
                     "LinearModel at the data's params)")
  if form == "auto":
    return "stats" if model is not None else "buffer"
  return form


def make_agent(name: str, hparams_type: type, horizon: int, feature_dim: int, num_actions: int,
               *, oracle: Callable, width="paper", scale: Callable = pieces.beta_of,
               truncation="paper", reward: str = "theta", vmin: str = "auto",
               fail_zero: bool = True, tie_break: str = "optimistic", known=None,
               variance: str | None = None, grid_size: int = 0) -> OfflineAgent:
  """An offline agent composed of pieces (``drjax.agents.compose``): PEVI, DRPVI, R2PVI, ...
  are each one call of this, and so is a researcher's variant.

  Args:
    name: display name (``"DRPVI"``).
    hparams_type: the agent's hyperparameter ``NamedTuple`` (its fields are the traced
      hyperparameters; the oracle and ``scale`` read them).
    horizon, feature_dim, num_actions: H, d, A.
    oracle: the per-coordinate dual oracle (``compose.TVConstrained()``, ``compose.Nominal()``,
      ``compose.TVRegularized()``, ... or a callable ``(StepInputs, hp) -> (nu, alpha)``).
    width: the penalty's width: ``"paper"`` (d-rectangular), ``"notebook"``, ``"ellipsoid"`` or a
      function ``(pinv, phi) -> width``.
    scale: ``scale(hp) -> []`` the penalty multiplier (default ``hp.beta``).
    truncation: ``"paper"`` (``[0, H - h + 1]``), ``"upper"`` or a function ``(q, top) -> q``.
    reward: ``"theta"`` (known reward parameters, the datasets' ``theta``) or ``"regressed"``
      (ridge regression of the observed rewards).
    vmin: how ``m = min_{s'} V_{h+1}(s')`` is obtained for oracles that use it: ``"auto"``,
      ``"exact"`` (needs ``fit(..., model=...)``), ``"data"`` or ``"zero"`` (fail-state form).
    fail_zero: Q = 0 at the fail state. tie_break: ``"optimistic"`` or ``"first"``.
    known: a ``drjax.agents.lsvi.KnownAction`` (2-action environments): that action's Q is known
      exactly, read off its features (no regression, penalty or truncation); the other action's
      Q is learned. The R2PVI put-option code's exercise.
    variance: ``"alg3"`` / ``"alg2"``: VA-DRPVI's variance-weighted regression from a pilot
      dataset (``fit(..., pilot=...)``); ``None``: unweighted.
    grid_size: ``variance="alg2"``'s extra alpha grid.
  """
  H, d, A = compose.check_composition(horizon, feature_dim, num_actions, oracle, width, scale,
                                      reward)
  if not callable(truncation):
    _checks.choice("truncation", truncation, pieces.TRUNCATIONS)
  _checks.choice("vmin", vmin, VMIN_MODES)
  _checks.boolean("fail_zero", fail_zero)
  _checks.choice("tie_break", tie_break, base.TIE_BREAKS)
  if not (isinstance(hparams_type, type) and issubclass(hparams_type, tuple)
          and hasattr(hparams_type, "_fields")):
    raise TypeError(f"hparams_type must be a NamedTuple class, got {hparams_type!r}")
  if known is not None:
    _check_known(known, A)
  if variance is not None:
    _checks.choice("variance", variance, VARIANCES)
  grid_size = base.check_int("grid_size", grid_size, 0)
  objective = compose.oracle_attr(oracle, "objective", "tv")
  cfg = OfflineConfig(H, d, A, width, truncation, vmin, bool(fail_zero), tie_break,
                      variance or "alg3", int(grid_size),
                      float(getattr(oracle, "tol", 1e-6)), objective)
  return _compose(name, hparams_type, cfg, oracle, scale, reward, known, variance is not None)


def _check_known(known, num_actions: int) -> None:
  from drjax.agents import lsvi  # pylint: disable=g-import-not-at-top  (lsvi defines KnownAction)
  lsvi._check_known(known, num_actions)  # pylint: disable=protected-access


@_programs.cached
def _compose(name: str, hp_type: type, cfg: OfflineConfig, oracle, scale, reward: str, known,
             weighted: bool) -> OfflineAgent:
  """The agent's pure functions (cached: equal compositions share their compiled programs)."""
  H, d, A = cfg.horizon, cfg.feature_dim, cfg.num_actions
  q_at = functools.partial(pieces.linear_q, sign=-1.0, width_form=cfg.penalty,
                           truncation=cfg.truncation, fail_zero=cfg.fail_zero, known=known)

  def _check_q_args(qf, h, phi_all, fail, lead: bool) -> None:
    _checks.q_args(qf, h, phi_all, fail, H=H, d=d, A=A, lead=lead, scalar_fail=True)

  def q_values(qf: QFunction, h, phi_all, fail, clip: bool = True):
    """``[..., A]`` pessimistic Q_h at ``phi_all [..., A, d]`` (``h``: 0-based step in
    ``[0, H - 1]``; ``fail``: bool)."""
    _check_q_args(qf, h, phi_all, fail, lead=True)
    _checks.boolean("clip", clip)
    return _q_values(qf, h, phi_all, fail, clip)

  def _q_values(qf: QFunction, h, phi_all, fail, clip: bool = True):
    return q_at(qf.w[h], qf.pinv[h], qf.beta, qf.top[h], phi_all, fail, clip=clip)

  def act(qf: QFunction, h, phi_all, fail):
    """Greedy action; ties after truncation go to the largest untruncated value
    (``tie_break="optimistic"``) or the lowest index (``"first"``); with a known action, ties go
    to the learned one. ``h``: 0-based step in ``[0, H - 1]``; ``phi_all [A, d]``."""
    _check_q_args(qf, h, phi_all, fail, lead=False)
    return _act(qf, h, phi_all, fail)

  def _act(qf, h, phi_all, fail):
    if known is not None:
      q = _q_values(qf, h, phi_all, fail)
      return jnp.where(q[known.learned] >= q[known.action], known.learned,
                       known.action).astype(jnp.int32)
    q = _q_values(qf, h, phi_all, fail, clip=cfg.tie_break == "first")
    return jnp.argmax(q).astype(jnp.int32)

  def width_fn(qf: QFunction, h, phi):
    """The penalty's width at ``phi [..., d]`` of step ``h`` (0-based, ``[0, H - 1]``)."""
    _checks.qfunction("qf", qf, H, d)
    _checks.index("h", h, H, "(step)")
    _checks.numeric("phi", phi)
    if np.ndim(phi) < 1 or np.shape(phi)[-1] != d:
      raise ValueError(f"phi must have shape [..., d] = [..., {d}], got {tuple(np.shape(phi))}")
    return _width(qf, h, phi)

  def _width(qf, h, phi):
    return pieces.width(qf.pinv[h], phi, cfg.penalty)

  def vmin_fn(mode, at):
    """``m = min_{s'} V_{h+1}(s')`` of the general dual (None: fail-state form)."""
    if mode == "zero":
      return None
    if mode == "data":
      return lambda v, mask, h, q_next: pieces.data_min(v, mask)
    if at.all_phi is None:
      raise ValueError("vmin='exact' needs fit(..., model=...) (a finite environment's model)")
    # jnp.min / jnp.max divide their derivative by the count of entries equal to the extremum:
    # 0 / 0 when XLA computes Q twice a rounding apart (issue 37; R2PVI-KL's fitted value in
    # reg_weight, float64, -O0, once the Q-values became fused multiply-adds).
    return lambda v, mask, h, q_next: linalg._min_at_argmin(
        linalg._max_at_argmax(q_next(at.all_phi[h], at.all_fail), -1), 0)

  def pass_(at: _Atoms, theta, hp, orc, vmin_mode: str):
    """One backward induction over atoms; returns the QFunction and the targets ``v [H, n]``
    (row h: ``V_{h+1}`` at the atoms)."""
    dtype = at.gram.dtype
    beta = jnp.asarray(scale(hp), dtype)
    lam = jnp.asarray(hp.lam, dtype)
    pinv = jax.vmap(lambda g: pieces.ridge_inverse(g, lam))(at.gram)
    tops = (H - jnp.arange(H)).astype(dtype)
    out = compose.backward_induction(
        H, pinv=pinv, g=at.g, nphi=at.nphi, nfail=at.nfail, mask=at.mask, q_at=q_at,
        oracle=orc, hp=hp, beta=beta, tops=tops, reward=reward, theta=theta,
        reward_sum=at.reward_sum, vmin=vmin_fn(vmin_mode, at))
    qf = QFunction(w=out.w, pinv=pinv, beta=beta, top=tops, nu=out.nu, alpha=out.alpha)
    return qf, out.v

  def variance_weights(ds, pilot_at, pilot_pinv, pilot_v, shift):
    """``[H, N]`` ``1 / sigma_h^2(phi_tau)`` from ridge regressions on the pilot of its targets
    ``V'_{h+1}`` and ``V'^2_{h+1}`` (Alg. 3)."""
    z1 = jnp.einsum("hed,hnd,hn->he", pilot_pinv, pilot_at.g, pilot_v)
    z2 = jnp.einsum("hed,hnd,hn->he", pilot_pinv, pilot_at.g, pilot_v * pilot_v)
    m1 = jnp.clip(jnp.einsum("hnd,hd->hn", ds.phi, z1), 0.0, H)
    m2 = jnp.clip(jnp.einsum("hnd,hd->hn", ds.phi, z2), 0.0, H * H)
    return 1.0 / jnp.maximum(1.0, m2 - m1 * m1 - shift)

  def fit(ds: data_lib.Dataset, hparams, *, pilot=None, model=None, form: str = "auto"):
    """Fits the Q-function to ``ds`` by one backward induction (see the module docstring).

    Args:
      ds: a ``drjax.data.Dataset`` (no batch axis; ``vmap`` for several).
      hparams: the agent's hyperparameters (``make_hparams``).
      pilot: VA-DRPVI's independent pilot dataset D' (required there, ignored elsewhere).
      model: the environment's ``LinearModel`` at the data's params: enables the
        sufficient-statistics form and the exact ``m = min_{s'} V(s')``.
      form: ``"auto"`` (sufficient statistics when ``model`` is given), ``"buffer"``, ``"stats"``.

    Returns:
      the ``QFunction`` (``w = theta + nu`` for the robust algorithms, the ridge solution for
      PEVI; ``pinv`` the (weighted) ``Lambda_h^-1``).
    """
    _checks.instance("ds", ds, data_lib.Dataset, "a drjax.data.Dataset (data.collect / "
                     "data.load)")
    if model is not None:
      _checks.model(model)
    if form == "auto" and agent.needs_pilot and cfg.variance == "alg2":
      form = "buffer"
    form = _resolve_form(form, model, ds)
    _check_hparam_shapes(agent, hparams)
    if agent.needs_pilot and cfg.variance == "alg2" and form == "stats":
      raise ValueError("variance='alg2' runs in the buffer form only: fit(..., form='buffer')")
    if _checks.is_concrete(ds, hparams, pilot, model):
      _check_fit_args(agent, ds, hparams, pilot, model, form)
    return _fit_jit(ds, hparams, pilot, model, form)

  def _fit(ds, hparams, *, pilot=None, model=None, form: str = "auto"):
    """``fit`` without its checks (the engine's core: ``make_fit`` checks once)."""
    if form == "auto":
      form = "stats" if (model is not None and not (weighted and cfg.variance == "alg2")) \
          else "buffer"
    return _fit_jit(ds, hparams, pilot, model, form)

  def _vmin_mode(model):
    if cfg.vmin == "auto":
      return "exact" if model is not None else "data"
    return cfg.vmin

  def _pilot_pass(hparams, pilot, model, form, dtype):
    """VA-DRPVI's first stage: the agent's robust pass on the pilot D', unweighted."""
    pilot = _cast(pilot, dtype)
    p_at = atoms(pilot, None, model, form)
    p_qf, p_v = pass_(p_at, pilot.theta.astype(dtype), hparams, oracle, _vmin_mode(model))
    return p_at, p_qf, p_v

  def fit_core(ds, hparams, pilot, model, form):
    dtype = ds.phi.dtype
    theta = ds.theta.astype(dtype)
    if not weighted:
      return pass_(atoms(ds, None, model, form), theta, hparams, oracle, _vmin_mode(model))[0]
    # VA-DRPVI: the pass on the pilot, then the weighted pass on ds.
    p_at, p_qf, p_v = _pilot_pass(hparams, pilot, model, form, dtype)
    if cfg.variance == "alg3":
      wts = variance_weights(ds, p_at, p_qf.pinv, p_v, jnp.asarray(hparams.var_shift, dtype))
      return pass_(atoms(ds, wts, model, form), theta, hparams, oracle, _vmin_mode(model))[0]
    return _alg2(ds, p_at, p_qf, p_v, theta, hparams, _vmin_mode(model), model)

  def _alg2(ds, p_at, p_qf, p_v, theta, hp, vmin_mode, model):
    """Algorithm 2: variance, Gram and regression per candidate alpha (buffer form)."""
    dtype = ds.phi.dtype
    beta = jnp.asarray(scale(hp), dtype)
    lam = jnp.asarray(hp.lam, dtype)
    shift = jnp.asarray(hp.var_shift, dtype)
    at = atoms(ds, None, model, "buffer")
    valid = ds.valid.astype(dtype)
    tops = (H - jnp.arange(H)).astype(dtype)
    eye = jnp.eye(d, dtype=dtype)
    grid = (duals_tv.make_grid(H, cfg.grid_size, dtype) if cfg.grid_size
            else jnp.zeros((0,), dtype))
    vmin_of = vmin_fn(vmin_mode, at)
    if reward == "regressed":  # the reward's (unweighted) ridge estimate in place of theta
      theta = jnp.einsum("hde,he->hd",
                         jax.vmap(lambda g: pieces.ridge_inverse(g, lam))(at.gram), at.reward_sum)

    def step(nxt, h):
      w_next, pinv_next = nxt[0], nxt[1]
      q_next = lambda phi, fail: q_at(w_next, pinv_next, beta, tops[h + 1], phi, fail)  # noqa
      v = pieces.next_values(q_next, at.nphi[h], at.nfail[h], at.mask[h])
      m = None if vmin_of is None else vmin_of(v, at.mask[h], h, q_next)
      return solve(h, v, m)

    def solve(h, v, m):
      c = jnp.concatenate([jnp.zeros((1,), dtype), jnp.full((1,), H, dtype), jnp.clip(v, 0, H),
                           jnp.clip(p_v[h], 0, H), jnp.clip(grid, 0, H)]
                          + ([] if m is None else [jnp.clip(m, 0, H)[None]]))
      t1 = jnp.minimum(p_v[h][:, None], c[None, :])  # [n', C]
      z1 = p_qf.pinv[h] @ (p_at.g[h].T @ t1)  # [d, C]
      z2 = p_qf.pinv[h] @ (p_at.g[h].T @ (t1 * t1))
      m1 = jnp.clip(ds.phi[h] @ z1, 0.0, H)  # [n, C]
      m2 = jnp.clip(ds.phi[h] @ z2, 0.0, H * H)
      wts = valid[:, None] / jnp.maximum(1.0, m2 - m1 * m1 - shift)
      sig = jnp.einsum("nc,nd,ne->cde", wts, ds.phi[h], ds.phi[h]) + (lam * eye)[None]
      sinv = jax.vmap(linalg.spd_inverse)(sig)  # [C, d, d]
      b = jnp.einsum("nc,nd,nc->cd", wts, ds.phi[h], jnp.minimum(v[:, None], c[None, :]))
      z = jnp.einsum("cde,ce->dc", sinv, b)  # [d, C]
      pen = c if m is None else c - jnp.minimum(m, c)
      vals = z - hp.rho[h].astype(dtype)[:, None] * pen[None, :]
      nu = linalg._max_at_argmax(vals, axis=1)  # not jnp.max (issue 37)
      j = jnp.argmin(jnp.where(vals >= nu[:, None], c[None, :], jnp.inf), axis=1)  # [d]
      diag = jnp.diagonal(sinv, axis1=-2, axis2=-1)  # [C, d]
      pinv_h = jnp.diag(diag[j, jnp.arange(d)])
      return theta[h] + nu, pinv_h, nu, c[j]

    n = ds.phi.shape[1]
    v_end = jnp.zeros((n,), dtype)  # V_{H+1} = 0
    last = solve(H - 1, v_end, None if vmin_mode == "zero" else jnp.zeros((), dtype))
    w, pinv, nu, alpha = pieces.backward(H, step, last)
    return QFunction(w=w, pinv=pinv, beta=beta, top=tops, nu=nu, alpha=alpha)

  def weights_core(ds, hparams, pilot, model, form):
    p_at, p_qf, p_v = _pilot_pass(hparams, pilot, model, form, ds.phi.dtype)
    return variance_weights(ds, p_at, p_qf.pinv, p_v,
                            jnp.asarray(hparams.var_shift, ds.phi.dtype))

  def weights(ds, hparams, pilot, model=None, form: str = "auto"):
    _checks.instance("ds", ds, data_lib.Dataset, "a drjax.data.Dataset")
    if model is not None:
      _checks.model(model)
    form = _resolve_form(form, model, ds)
    _check_hparam_shapes(agent, hparams)
    if _checks.is_concrete(ds, hparams, pilot, model):
      _check_fit_args(agent, ds, hparams, pilot, model, form)
    return _weights_jit(ds, hparams, pilot, model, form)

  _fit_jit = jax.jit(exact_matmuls(fit_core), static_argnums=(4,))
  _weights_jit = jax.jit(exact_matmuls(weights_core), static_argnums=(4,))
  def checked(public, core):
    return compose.with_core(public, core, exact_matmuls)

  fit.unchecked = _fit
  agent = OfflineAgent(name=name, config=cfg, hparams_type=hp_type, fit=fit,
                       q_values=exact_matmuls(q_values), act=checked(act, _act),
                       width=checked(width_fn, _width), needs_pilot=weighted,
                       variance_weights=weights if weighted else None)
  return agent


def _check_hparam_shapes(agent: OfflineAgent, hparams) -> None:
  """One setting per fit (shapes are static, so this runs on traced values too): rho ``[H, d]``,
  every other field a scalar; a batch is ``jax.vmap``-ed over, not passed in."""
  if not isinstance(hparams, agent.hparams_type):
    check_hparams(agent, hparams)  # the TypeError naming the expected type
  H, d = agent.config.horizon, agent.config.feature_dim
  for f, x in hparams._asdict().items():
    want = (H, d) if f in HD_FIELDS else ()
    if tuple(np.shape(x)) != want:
      raise ValueError(f"{agent.name}.fit takes one hyperparameter setting: hparams.{f} must have "
                       f"shape {want}, got {tuple(np.shape(x))} (jax.vmap fit over a batch of "
                       "settings)")


def _check_fit_args(agent: OfflineAgent, ds, hparams, pilot, model, form) -> None:
  """Host-side checks before anything is traced (``TypeError``/``ValueError`` naming the
  argument)."""
  cfg = agent.config
  dims = (cfg.horizon, cfg.feature_dim, cfg.num_actions)
  data_lib.check_dataset(ds, *dims, name="dataset")
  check_hparams(agent, hparams)
  if agent.needs_pilot:
    if pilot is None:
      raise ValueError(f"{agent.name} needs an independent pilot dataset: fit(dataset, hparams, "
                       "pilot=...) (a second drjax.data.collect, or drjax.data.split)")
    data_lib.check_dataset(pilot, *dims, name="pilot")
    if not np.allclose(np.asarray(pilot.theta), np.asarray(ds.theta)):
      raise ValueError("pilot: its reward parameters theta differ from the dataset's (a pilot "
                       "dataset of a different environment or params)")
  if cfg.vmin == "exact" and model is None:
    raise ValueError(f"{agent.name} with vmin='exact' needs model= (a finite environment's "
                     "LinearModel)")
  if model is not None:
    H, S, A, d = np.shape(model.phi)
    if (H, d, A) != dims:
      raise ValueError(f"model: (H, d, A) = {(H, d, A)} does not match the agent's {dims}")
    if form == "stats":
      data_lib._state_range(ds, S, "dataset")  # pylint: disable=protected-access
      if pilot is not None and agent.needs_pilot:
        data_lib._state_range(pilot, S, "pilot")  # pylint: disable=protected-access

