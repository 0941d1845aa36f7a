"""The shared pieces every algorithm of the d-rectangular family is composed from.

Each algorithm of the family (Liu & Xu 2024, 2024b; Jin et al. 2020, 2021) computes, at every step
h of a backward induction, the same five things (``docs/agents.md``, family note section 0):

1. regression atoms ``(g_n, x_n)``: a weight vector and a next state (buffer form: one per
   transition, ``g = w_tau phi_tau``; sufficient statistics: one per state) -- ``atoms_*``;
2. the ridge operator ``Lambda^-1`` of ``Lambda = sum w phi phi^T + lambda I`` -- ``ridge_inverse``;
3. the next-step value at the atoms, ``V_{h+1}(x) = max_a Q_{h+1}(x, a)`` -- ``next_values``;
4. a per-coordinate dual *oracle* turning the regression into the step's weights ``nu_h``:
   ``tv_oracle`` (TV-constrained, exact over the breakpoints) or ``ridge_oracle`` (nominal);
5. a bonus (online, +) or penalty (offline, -) -- ``width`` -- and a truncation -- ``truncate``.

All functions are single-instance and pure (``jax.vmap`` them); static choices are Python strings.
"""

from __future__ import annotations

import os
import sys
from typing import Callable

import jax
import jax.numpy as jnp

import numpy as np

from drjax import _checks, duals_kl_chi2, duals_tv, linalg

Array = jax.Array

WIDTHS = ("paper", "notebook", "ellipsoid")
TRUNCATIONS = ("paper", "upper")
ELLIPSOID_UNROLL_MAX_D = 8


def check_pinv(pinv) -> None:
  """``ValueError`` unless ``pinv`` is a numeric ``[..., d, d]`` array (host side; shapes only
  when traced)."""
  _checks.numeric("pinv", pinv)
  if np.ndim(pinv) < 2 or np.shape(pinv)[-1] != np.shape(pinv)[-2]:
    raise ValueError(f"pinv must be [..., d, d] (Lambda^-1), got shape {tuple(np.shape(pinv))}")


def sqrt_diag(pinv):
  """``[..., d]`` ``sqrt([Lambda^-1]_ii)`` (clamped at 0 against rounding)."""
  check_pinv(pinv)
  return jnp.sqrt(jnp.maximum(jnp.diagonal(pinv, axis1=-2, axis2=-1), 0.0))


def ridge_inverse(gram: Array, lam) -> Array:
  """``(gram + lambda I)^-1`` for one ``[d, d]`` Gram matrix (``gram`` without the ridge)."""
  d = gram.shape[-1]
  return linalg.spd_inverse(gram + jnp.asarray(lam, gram.dtype) * jnp.eye(d, dtype=gram.dtype))


def d_rectangular(pinv: Array, phi: Array) -> Array:
  """The d-rectangular width ``sum_i phi_i sqrt([Lambda^-1]_ii)`` (DR-LSVI-UCB Alg. 1 line 12,
  DRPVI Alg. 1, VA-DRPVI, R2PVI)."""
  return phi @ sqrt_diag(pinv)


def notebook(pinv: Array, phi: Array) -> Array:
  """``sqrt(sum_i phi_i^2 [Lambda^-1]_ii)`` (every public panxulab notebook; never larger than
  the d-rectangular width)."""
  diag = jnp.maximum(jnp.diagonal(pinv, axis1=-2, axis2=-1), 0.0)
  return jnp.sqrt(jnp.maximum((phi * phi) @ diag, 0.0))


def ellipsoid(pinv: Array, phi: Array) -> Array:
  """The elliptical width ``sqrt(phi^T Lambda^-1 phi)`` (LSVI-UCB, PEVI)."""
  # One product and an elementwise reduction: XLA's CPU lowering of the equivalent 3-operand
  # einsum (a batched dot per row) took 0.86 ms against 0.54 ms for [10,000, 2, 31] features.
  return jnp.sqrt(jnp.maximum(jnp.sum((phi @ pinv) * phi, axis=-1), 0.0))


def ellipsoid_unrolled(pinv: Array, phi: Array) -> Array:
  """``ellipsoid`` with the quadratic form unrolled into ``d (d + 1) / 2`` elementwise terms for
  ``d <= ELLIPSOID_UNROLL_MAX_D`` and one ``[d, d]`` matrix: XLA's CPU backend runs many tiny
  ``[n, d] x [d, d]`` products far below its elementwise speed (LSVI-UCB on the linear MDP,
  d = 4, 400 seeds x 100 episodes: 0.21 s -> 0.08 s). The online agents' form; the same number
  up to float rounding."""
  d = phi.shape[-1]
  if d <= ELLIPSOID_UNROLL_MAX_D and jnp.ndim(pinv) == 2:
    x = [phi[..., i] for i in range(d)]
    q = sum(pinv[..., i, i] * x[i] * x[i] for i in range(d))
    q = q + 2.0 * sum(pinv[..., i, j] * x[i] * x[j] for i in range(d) for j in range(i + 1, d))
    return jnp.sqrt(jnp.maximum(q, 0.0))
  u = phi @ pinv
  return jnp.sqrt(jnp.maximum(jnp.sum(u * phi, axis=-1), 0.0))


WIDTH_FNS = {"paper": d_rectangular, "notebook": notebook, "ellipsoid": ellipsoid}
ELLIPTICAL = (ellipsoid, ellipsoid_unrolled)  # widths a precomputed phi^T Lambda^-1 phi replaces


def width_name(form) -> str:
  """The name a width is recorded under (``AgentConfig.bonus``, ``OfflineConfig.penalty`` in
  ``sweep.json``): ``"paper"``, ``"notebook"`` or ``"ellipsoid"`` for the built-in forms (given by
  name or as their functions, ``ellipsoid_unrolled`` included), ``"module.qualname"`` for any
  other function (a file plugin's functions under the file's name: ``my_widths.double`` for
  ``my_widths.py``, not the module name ``drjax.plugins`` gives it)."""
  if isinstance(form, str):
    return form
  for name, fn in (*WIDTH_FNS.items(), ("ellipsoid", ellipsoid_unrolled)):
    if form is fn:
      return name
  module = getattr(form, "__module__", "?")
  path = getattr(sys.modules.get(module), "__drjax_plugin_file__", None)
  if path:
    module = os.path.splitext(os.path.basename(path))[0]
  return f"{module}.{getattr(form, '__qualname__', repr(form))}"


def width_fn(form) -> Callable:
  """The width function of ``form``: a name of ``WIDTH_FNS`` or a callable ``(pinv, phi) ->
  [...]`` (returned as is)."""
  if callable(form):
    return form
  if not isinstance(form, str):
    raise TypeError(f"width must be one of {WIDTHS} or a function (pinv, phi) -> width, got "
                    f"{type(form).__name__} {form!r}")
  if form not in WIDTH_FNS:
    raise ValueError(f"width form must be one of {WIDTHS} or a function (pinv, phi) -> width, "
                     f"got {form!r}")
  return WIDTH_FNS[form]


def width(pinv: Array, phi: Array, form) -> Array:
  """The uncertainty width at features ``phi [..., d]`` (bonus or penalty before ``beta``).

  * ``"paper"``: the d-rectangular ``sum_i phi_i sqrt([Lambda^-1]_ii)`` (``d_rectangular``);
  * ``"notebook"``: ``sqrt(sum_i phi_i^2 [Lambda^-1]_ii)`` (``notebook``);
  * ``"ellipsoid"``: ``sqrt(phi^T Lambda^-1 phi)`` (``ellipsoid``);
  * a callable ``(pinv, phi) -> [...]``.
  """
  return width_fn(form)(pinv, phi)


def beta_of(hp) -> Array:
  """The default scale of the width: ``hp.beta``."""
  return hp.beta


def truncate(q: Array, top, form) -> Array:
  """``"paper"``: ``clip(q, 0, top)`` (``top = H - h + 1``); ``"upper"``: ``min(q, top)`` (the
  public offline code, which never floors pessimistic values at 0); or a callable
  ``(q, top) -> q``."""
  if callable(form):
    return form(q, top)
  if form == "paper":
    return jnp.clip(q, 0.0, top)
  if form == "upper":
    return jnp.minimum(q, top)
  raise ValueError(f"truncation must be one of {TRUNCATIONS} or a function (q, top) -> q, got "
                   f"{form!r}")


def linear_q(w: Array, pinv: Array, beta, top, phi_all: Array, fail, *, sign: float,
             width_form, truncation="paper", fail_zero: bool = True, clip: bool = True,
             known=None, quad: Array | None = None, dot: bool = False) -> Array:
  """``[..., A]`` ``Q_h = truncate(phi^T w + sign * beta * width(phi))``, 0 at the fail state.

  ``sign = +1``: optimism (online bonus); ``-1``: pessimism (offline penalty). ``width_form``: a
  name of ``WIDTH_FNS`` or a function ``(pinv, phi) -> width``. ``clip=False``: no truncation
  (the untruncated value that breaks ties). ``quad [..., A]``: a precomputed ``phi^T Lambda^-1
  phi`` that replaces an elliptical width. ``known``: a ``KnownAction`` (``drjax.agents.lsvi``):
  its action's Q is ``known.value(phi_all)`` (no regression, width or truncation), the other
  action's Q is computed from its own features.
  ``dot=True``: the d-rectangular contraction ``phi_all @ (w + sign beta sqrt(diag Lambda^-1))``
  is one ``dot`` rather than ``linalg._small_matmul``'s unrolled sum (the same number up to float
  rounding). The greedy action asks for it (``lsvi._act``): unrolled, the sum is fused into the
  argmax, a variadic reduction whose loop XLA's CPU backend does not vectorize; as a ``dot`` the
  argmax reads a computed ``[A]`` row. DR-LSVI-UCB on the linear MDP through ``drjax.sweep``,
  ``amd-epyc-2c``, alternating processes of 21 calls each (eight pairs at 1,000 seeds, three at
  10,000, six at 20 and at one seed): 1,000 seeds x 100 episodes
  0.057 s -> 0.047 s (1.22x), 10,000 x 100 0.564 -> 0.542 s, 20 x 100 unchanged (1.6 ms), one seed
  x 3,000 episodes 7.4 -> 7.6 ms. Planning keeps the unrolled sum.
  """
  wf = width_fn(width_form)

  def width_at(phi, a):
    if quad is not None and wf in ELLIPTICAL:
      return jnp.sqrt(jnp.maximum(quad if a is None else quad[..., a], 0.0))
    return wf(pinv, phi)

  if known is not None:
    phi_l = phi_all[..., known.learned, :]
    q_l = linalg._small_matmul(phi_l, w) + sign * beta * width_at(phi_l, known.learned)
    if clip:
      q_l = truncate(q_l, top, truncation)
    q_k = known.value(phi_all).astype(q_l.dtype)
    parts = [None, None]
    parts[known.learned], parts[known.action] = q_l, q_k
    q = jnp.stack(parts, axis=-1)
  else:
    if wf is d_rectangular:  # linear in phi: one contraction
      v = w + sign * beta * sqrt_diag(pinv)
      q = phi_all @ v if dot else linalg._small_matmul(phi_all, v)
    else:
      q = linalg._small_matmul(phi_all, w) + sign * beta * width_at(phi_all, None)
    if clip:
      q = truncate(q, top, truncation)
  if fail_zero:
    q = jnp.where(jnp.expand_dims(fail, -1), 0.0, q)
  return q


def next_values(q_fn: Callable, nphi: Array, nfail: Array, mask: Array | None = None) -> Array:
  """``[n]`` ``V_{h+1}(x_n) = max_a Q_{h+1}(x_n, a)`` at atoms (0 where ``mask`` is False).

  ``linalg._max_at_argmax``: a plain max whose derivative is the first maximiser's, not
  ``jnp.max``'s, which divides by the count of entries equal to the max: XLA may compute ``Q``
  twice a rounding apart, and then the count is 0 and the gradient NaN (issue 37: PEVI's fitted
  value in float32 at level 0)."""
  v = linalg._max_at_argmax(q_fn(nphi, nfail), axis=-1)
  return v if mask is None else jnp.where(mask, v, 0.0)


def data_min(v: Array, mask: Array | None) -> Array:
  """``min_n v_n`` over the atoms in use: the data minimum of the next-step value."""
  # Differentiated at the first minimiser: jnp.min's derivative can be 0 / 0 (issue 37).
  x = v if mask is None else jnp.where(mask, v, jnp.inf)
  return linalg._min_at_argmin(jnp.ravel(x), 0)


def tv_oracle(pinv: Array, g: Array, v: Array, rho: Array, horizon, *, vmin=None,
              operator: Array | None = None, method: str = "exact",
              grid: Array | None = None, monotone: bool = False) -> tuple[Array, Array]:
  """TV-constrained dual oracle: ``nu_i = max_{alpha in [0,H]} z_i(alpha) - rho_i (alpha -
  min(m, alpha))``, ``z(alpha) = Lambda^-1 sum_n g_n min(v_n, alpha)``; exact over the kinks
  (``duals_tv.alpha_max_atoms``).

  Args:
    pinv: ``[d, d]`` ``Lambda_h^-1`` (``StepInputs.pinv``).
    g: ``[n, d]`` atom weights; v: ``[n]`` ``V_{h+1}`` at the atoms (``StepInputs.g``, ``.v``).
    rho: ``[d]`` the step's radii (``hp.rho[x.h]``).
    horizon: H, the upper end of alpha's range.
    vmin: ``[]`` ``m`` of the general dual, or ``None``: the fail-state form ``m = 0``.
    operator: ``[d, n]`` a precomputed ``Lambda_h^-1 g^T`` (``StepInputs.operator``, the online
      Sherman-Morrison form), used in place of ``pinv @ g.T``; ``None``: computed from them.
    method: ``"exact"`` (over the breakpoints), ``"grid"`` or ``"exact+grid"`` (with ``grid``,
      ``duals_tv.make_grid``).
    monotone: ``z_i`` made nondecreasing in alpha first (``duals_tv.monotone_candidates``;
      opt-in).

  Returns:
    ``(nu [d], alpha [d])``, an oracle's output.
  """
  return duals_tv.alpha_max_atoms(pinv, g, v, rho, horizon, method=method, grid=grid,
                                  operator=operator, vmin=vmin, monotone=monotone)


def ridge_oracle(pinv: Array, g: Array, v: Array, reward_sum: Array) -> Array:
  """Nominal (non-robust) oracle: ``w = Lambda^-1 (sum_n g_n v_n + sum phi r)``."""
  return pinv @ (reward_sum + g.T @ v)


def backward(horizon: int, step: Callable, last, *, unroll_max: int = 4):
  """Backward induction ``h = H - 2, ..., 0`` from ``last`` (the step-``H - 1`` output).

  ``step(next_out, h) -> out`` where outputs are pytrees; returns the outputs stacked over the
  ``H`` steps (row h = step h). Short horizons are unrolled (static indices, fused by XLA).
  """
  if horizon - 1 <= unroll_max:
    outs = [last]
    for h in range(horizon - 2, -1, -1):
      outs.insert(0, step(outs[0], h))
    return jax.tree_util.tree_map(lambda *x: jnp.stack(x), *outs)

  def body(nxt, h):
    out = step(nxt, h)
    return out, out

  _, outs = jax.lax.scan(body, last, jnp.arange(horizon - 1), reverse=True)
  return jax.tree_util.tree_map(lambda a, b: jnp.concatenate([a, b[None]]), outs, last)


# ---------------------------------------------------------------------------------------------
# Oracles of the regularized and KL-constrained duals (R2PVI, Tang, Liu & Xu 2025; DRVI-L, Ma et
# al. 2022). Per coordinate i the regression target is a transform of V with coordinate i's own
# weight, so ``Y[:, i] = sum_n g_n T_i(v_n)`` and ``z_i = (Lambda^-1 Y)_ii``.


def _diag_of_product(pinv: Array, y: Array) -> Array:
  """``diag(pinv @ y)`` without the full product."""
  return jnp.sum(pinv * y.T, axis=1)


def tv_reg_oracle(pinv: Array, g: Array, v: Array, m, weight: Array) -> Array:
  """R2PVI-TV: ``w_i = [Lambda^-1 sum_n g_n min(v_n, m + weight_i)]_i``, the ridge estimate of the
  closed form ``E min(V, min V + weight)`` of ``inf_mu E_mu V + weight TV(mu, mu0)``."""
  t = jnp.minimum(v[:, None], (m + weight)[None, :])  # [n, d]
  return _diag_of_product(pinv, g.T @ t)


def kl_reg_oracle(pinv: Array, g: Array, v: Array, mask, m, weight: Array, top) -> Array:
  """R2PVI-KL: ``w_i = -weight_i log E exp(-V / weight_i)`` by ridge regression, stably:
  ``w_i = m - weight_i log zhat_i`` with ``zhat = [Lambda^-1 sum_n g_n exp(-(v_n - m)/weight_i)]_i``
  clipped to its valid range ``[exp(-(top - m)/weight_i), 1]`` (``m`` the minimum of V, ``top``
  its maximum, so ``w`` lies in ``[m, top]``).

  ``log zhat_i`` is computed in the log domain with a shift ``t_i`` per coordinate
  (``duals_kl_chi2._kl_shift``): ``log zhat_i = -(t_i - m)/weight_i + log [Lambda^-1 sum_n g_n
  exp(-(v_n - t_i)/weight_i)]_i``, ``t_i`` near the smallest target among the atoms that carry
  coordinate i's weight (``[Lambda^-1 g_n]_i`` structurally nonzero), so no exponential overflows
  and the leading one does not underflow: exact whenever the estimate is representable, for any
  weight > 0 (with the single shift ``m``, a coordinate whose atoms all lie more than ~87 weight
  above ``m`` in float32, ~745 in float64, underflowed to 0 and took the top value). ``t_i = m``
  wherever that was safe, so the results there are those of the single shift, bit for bit."""
  vm = v if mask is None else jnp.where(mask, v, m)
  # The atoms whose term reaches coordinate i through Lambda^-1 g_n: a product of the nonzero
  # patterns (exact counts), so an atom with no path to i never sets its shift.
  nz = lambda x: (x != 0).astype(g.dtype)  # noqa: E731
  support = jnp.dot(nz(pinv), nz(g).T, precision=jax.lax.Precision.HIGHEST) > 0  # [d, n]
  t = duals_kl_chi2._kl_shift(support, vm, m, weight)  # [d]
  # Exponents <= 0 on the supported atoms, capped for the others (their factors are zero).
  e = -(vm[:, None] - t[None, :]) / weight[None, :]  # [n, d]
  u = jnp.exp(jnp.minimum(e, duals_kl_chi2._kl_shift_margin(e.dtype)))
  z = _diag_of_product(pinv, g.T @ u)
  # log z clipped to [-(top - m)/weight, 0] in the log domain: exp(-(top - m)/weight) underflows
  # to 0 for small weights (0.01 with values up to 20), and log(0) would give inf / NaN.
  log_lo = -(top - m) / weight
  tiny = jnp.finfo(z.dtype).tiny
  logz = jnp.where(z > 0, -(t - m) / weight + jnp.log(jnp.maximum(z, tiny)), log_lo)
  return m - weight * jnp.clip(logz, log_lo, 0.0)


def chi2_reg_oracle(pinv: Array, g: Array, v: Array, weight: Array, horizon):
  """R2PVI-chi2: ``w_i = max_{alpha in [0, H]} z_i(alpha) - (z2_i(alpha) - z_i(alpha)^2) / (4
  weight_i)`` with ridge estimates ``z`` of ``[V]_alpha`` and ``z2`` of ``[V]_alpha^2``, exactly
  (``duals_kl_chi2.chi2_dual_max``)."""
  return duals_kl_chi2.chi2_dual_max(pinv @ g.T, v, weight, horizon)


def kl_con_oracle(pinv: Array, g: Array, v: Array, mask, rho: Array, horizon, *,
                  tol: float = 1e-6):
  """DRVI-L (KL-constrained): ``w_i = max_{alpha > 0} -alpha log zhat_i(alpha) - alpha rho_i``,
  ``zhat(alpha) = Lambda^-1 sum_n g_n exp(-v_n / alpha)`` clipped to ``[exp(-H/alpha), 1]``, by a
  bounded 1-D search (``duals_kl_chi2.kl_dual_search``): NOT exact, within ``tol`` in log(alpha)."""
  return duals_kl_chi2.kl_dual_search(pinv @ g.T, v, mask, rho, horizon, tol=tol)
