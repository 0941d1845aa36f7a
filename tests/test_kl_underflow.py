"""The KL duals where every atom of a coordinate lies far above the targets' minimum (issue 28,
item 10).

R2PVI-KL (``pieces.kl_reg_oracle``) and DRVI-L (``robust.kl_dual_search``) need ``log zhat_i`` of
the ridge estimate ``zhat_i = sum_n [Lambda^-1 g_n]_i exp(-v_n / a)``. With one shift for all
coordinates (the minimum of v), a coordinate whose atoms all lie more than ~87 a (float32; ~745 a
in float64) above that minimum underflowed to 0 and took the clip's top value. Checked here
against independent references written from the equations:

* R2PVI-KL: Python ``decimal`` (60 digits, an exponent range far beyond float64), loops over the
  atoms and the features, from the very float32 / float64 numbers drjax gets;
* DRVI-L: a per-coordinate signed log-sum-exp in NumPy float64 (shifted by each term's own
  ``log |c| - v / alpha``) on a dense grid of 4,001 log-spaced alphas, then golden section;
* hand-computed cases (``Lambda^-1 = I``, ``g = I``) and gradients;
* the agents end to end on one-hot features at weights down to 1e-4, against
  ``regularized_oracle.py`` (its per-coordinate log-sum-exp).

Weights down to 1e-4, float32 and float64.
"""

import decimal
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from drjax import data, robust
from drjax.agents import offline, pieces

import regularized_oracle as ro

DTYPES = (jnp.float32, jnp.float64)
WEIGHTS = (1e-4, 3e-4, 1e-3, 6e-4, 1e-2, 0.1, 1.0)
H_SEARCH = 3.0
RHOS = (0.01, 0.1, 0.5, 2.0)


def _eps(dtype):
  return float(jnp.finfo(dtype).eps)


# ---------------------------------------------------------------------------------------------
# Independent references.


def _dec(x):
  return decimal.Decimal(float(x))


def kl_reg_reference(pinv, g, v, mask, m, weight, top):
  """R2PVI-KL written from the equation, in ``decimal``: ``nu_i = clip(-w_i log zhat_i, m, top)``
  (``top`` where the estimate is <= 0), ``zhat_i = sum_n c_in exp(-v_n / w_i)`` with
  ``c_in = sum_j pinv_ij g_nj`` (atoms off ``mask`` read at ``v = m``). Returns ``nu [d]`` and the
  condition number ``sum_n |c_in| exp(-v_n/w_i) / |zhat_i|`` of each sum (its rounding scale)."""
  pinv, g, v = (np.asarray(x, np.float64) for x in (pinv, g, v))
  n, d = g.shape
  nu, cond = np.zeros(d), np.zeros(d)
  with decimal.localcontext() as ctx:
    ctx.prec, ctx.Emin, ctx.Emax = 60, -10 ** 9, 10 ** 9
    for i in range(d):
      w = _dec(weight[i])
      z = zabs = decimal.Decimal(0)
      for k in range(n):
        c = sum((_dec(pinv[i, j]) * _dec(g[k, j]) for j in range(d)), decimal.Decimal(0))
        vk = _dec(v[k]) if mask is None or mask[k] else _dec(m)
        e = (-vk / w).exp()
        z += c * e
        zabs += abs(c) * e
      if z > 0:
        nu[i] = min(max(float(-w * z.ln()), float(m)), float(top))
        cond[i] = float(zabs / z)
      else:
        nu[i], cond[i] = float(top), 1.0
  return nu, cond


def _log_zhat(M, v, alpha):
  """``[d, G]`` ``log sum_n M_in exp(-v_n / alpha_g)`` in float64, per coordinate a signed
  log-sum-exp shifted by its largest ``log |M_in| - v_n / alpha`` (-inf where <= 0)."""
  out = np.full((M.shape[0], alpha.size), -np.inf)
  for i in range(M.shape[0]):
    nz = M[i] != 0
    if not nz.any():
      continue
    x = np.log(np.abs(M[i, nz]))[:, None] - v[nz][:, None] / alpha[None, :]  # [k, G]
    top = x.max(axis=0)
    e = np.exp(x - top)
    pos, neg = e[M[i, nz] > 0].sum(axis=0), e[M[i, nz] < 0].sum(axis=0)
    ok = pos > neg
    out[i, ok] = top[ok] + np.log(pos[ok] - neg[ok])
  return out


def kl_con_reference(M, v, rho, horizon):
  """DRVI-L's dual ``max_{alpha in [1e-4, 1e4]} clip(-alpha log zhat_i(alpha), 0, H) - alpha
  rho_i`` (``zhat <= 0``: H), on 4,001 log-spaced alphas then 200 golden-section steps around
  each coordinate's best one (the objective is unimodal for nonnegative ``M``)."""
  M, v = np.asarray(M, np.float64), np.asarray(v, np.float64)

  def obj(i, alpha):
    lz = _log_zhat(M[i:i + 1], v, alpha)[0]
    val = np.where(np.isfinite(lz), np.clip(-alpha * lz, 0.0, horizon), horizon)
    return val - alpha * rho[i]

  la = np.linspace(math.log(1e-4), math.log(1e4), 4001)
  out = np.zeros(M.shape[0])
  for i in range(M.shape[0]):
    vals = obj(i, np.exp(la))
    j = int(np.argmax(vals))
    a, b = la[max(j - 1, 0)], la[min(j + 1, la.size - 1)]
    best = vals[j]
    r = (math.sqrt(5.0) - 1.0) / 2.0
    for _ in range(200):
      x1, x2 = b - r * (b - a), a + r * (b - a)
      f1, f2 = obj(i, np.exp(np.array([x1, x2])))
      best = max(best, f1, f2)
      if f1 >= f2:
        b = x2
      else:
        a = x1
    out[i] = best
  return out


# ---------------------------------------------------------------------------------------------
# Cases: a "fail" coordinate holding the minimum target, main coordinates whose atoms all lie far
# above it (mixed through Lambda^-1 for R2PVI-KL, one-hot for DRVI-L), one coordinate without
# atoms, and masked atoms.


def block_case(key, dtype, *, mixing: bool, lo=0.3, hi=3.0, n_fail=3, n_main=12, d_main=3):
  """``(pinv [d, d], g [n, d], v [n], mask [n])`` in ``dtype``, ``d = d_main + 2``: coordinate 0
  the fail block (targets 0), 1..d_main the main block (targets in [lo, hi]), the last one
  without atoms; two main atoms masked (g = 0, v = 0)."""
  d = d_main + 2
  k1, k2, k3, k4 = jax.random.split(key, 4)
  g = np.zeros((n_fail + n_main, d))
  g[:n_fail, 0] = np.asarray(jax.random.uniform(k1, (n_fail,), minval=0.5, maxval=1.5))
  if mixing:
    feats = np.asarray(jax.random.dirichlet(k2, jnp.ones(d_main), (n_main,)))
  else:
    feats = np.eye(d_main)[np.arange(n_main) % d_main]
  g[n_fail:, 1:1 + d_main] = feats * np.asarray(jax.random.uniform(k3, (n_main, 1), minval=0.5,
                                                                   maxval=1.5))
  v = np.zeros(n_fail + n_main)
  v[n_fail:] = np.asarray(jax.random.uniform(k4, (n_main,), minval=lo, maxval=hi))
  mask = np.ones(n_fail + n_main, bool)
  mask[[n_fail, n_fail + 5]] = False
  g[~mask] = 0.0
  v[~mask] = 0.0
  lam = 0.1
  pinv = np.zeros((d, d))  # block diagonal, as the ridge inverse of these features is
  for blk in (slice(0, 1), slice(1, 1 + d_main), slice(d - 1, d)):
    gb = g[:, blk]
    pinv[blk, blk] = np.linalg.inv(gb.T @ gb + lam * np.eye(gb.shape[1]))
  cast = lambda x: np.asarray(x).astype(dtype)  # noqa: E731
  return cast(pinv), cast(g), cast(v), mask


def reg_cases(dtype):
  """R2PVI-KL cases: ``(pinv, g, v, mask, m, weight [d], top)``."""
  cases = []
  eye = np.eye(2, dtype=dtype)
  for w in (6e-4, 1e-4, 1e-2):  # the smallest case: Lambda^-1 = I, g = I, v = [0, 0.5]
    cases.append((eye, eye, np.array([0.0, 0.5], dtype), None, 0.0, np.full(2, w, dtype), 2.0))
  for seed in range(6):
    pinv, g, v, mask = block_case(jax.random.key(seed), dtype, mixing=True)
    d = pinv.shape[0]
    w = np.asarray(jax.random.choice(jax.random.key(100 + seed), jnp.asarray(WEIGHTS), (d,)),
                   dtype)
    # m: the targets' minimum (0); seeds 4, 5: no fail atoms, so every atom lies far above m.
    if seed >= 4:
      g[:3] = 0.0
      v[:3] = 1.0
    cases.append((pinv, g, v, mask, 0.0, w, 3.0))
  return cases


def con_cases(dtype):
  """DRVI-L cases: ``(M [d, n], v, mask, rho [d])`` with ``M = pinv g^T >= 0``."""
  cases = [(np.eye(2, dtype=dtype), np.array([0.0, 0.5], dtype), None,
            np.full(2, 0.5, dtype))]
  for seed in range(4):
    pinv, g, v, mask = block_case(jax.random.key(200 + seed), dtype, mixing=False)
    d = pinv.shape[0]
    rho = np.asarray(jax.random.choice(jax.random.key(300 + seed), jnp.asarray(RHOS), (d,)),
                     dtype)
    cases.append(((pinv.astype(np.float64) @ g.astype(np.float64).T).astype(dtype), v, mask,
                  rho))
  return cases


def reg_errors(fn, dtype):
  """``(|err|, tolerance)`` per coordinate of every R2PVI-KL case, for ``fn`` (the oracle's
  signature) against ``kl_reg_reference``."""
  errs, tols = [], []
  eps = _eps(dtype)
  for pinv, g, v, mask, m, w, top in reg_cases(dtype):
    got = np.asarray(jax.jit(fn)(jnp.asarray(pinv), jnp.asarray(g), jnp.asarray(v),
                        None if mask is None else jnp.asarray(mask), jnp.asarray(m, dtype),
                        jnp.asarray(w), jnp.asarray(top, dtype)))
    want, cond = kl_reg_reference(pinv, g, v, mask, m, w, top)
    assert got.dtype == dtype
    errs.append(np.abs(got - want))
    # Rounding: the targets' and the result's own (|nu| eps), and the sum's, w * cond * n eps.
    tols.append(8 * eps * (1.0 + np.abs(want)) + 4 * eps * len(v) * w * cond)
  return np.concatenate(errs), np.concatenate(tols)


def con_errors(fn, dtype):
  """``(signed err, tolerance above, tolerance below)`` per coordinate of every DRVI-L case
  (``fn`` has ``kl_dual_search``'s signature) against ``kl_con_reference``. The search returns
  objective values, so never more than rounding above the maximum, and at most the objective's
  variation over its final bracket (1e-6 in log alpha, a slope up to ~H at a clip's kink) below
  it."""
  errs, tols = [], []
  for M, v, mask, rho in con_cases(dtype):
    got = np.asarray(fn(jnp.asarray(M), jnp.asarray(v), None if mask is None else
                        jnp.asarray(mask), jnp.asarray(rho), H_SEARCH))
    vr = v if mask is None else np.where(mask, v, v[mask].min())
    want = kl_con_reference(M, vr, rho, H_SEARCH)
    assert got.dtype == dtype
    errs.append(got - want)
  hi = 40 * _eps(dtype) * H_SEARCH
  return np.concatenate(errs), hi, hi + 1e-6 * H_SEARCH


# ---------------------------------------------------------------------------------------------
# Tests.


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_smallest_case(dtype):
  """``Lambda^-1 = I``, ``g = I``, ``v = [0, 0.5]``: each coordinate has one atom, so its value
  is that atom's target (R2PVI-KL), minus ``1e-4 rho`` for DRVI-L (the search's smallest alpha:
  the supremum is approached as alpha -> 0)."""
  eye = jnp.eye(2, dtype=dtype)
  v = jnp.asarray([0.0, 0.5], dtype)
  for w in (6e-4, 1e-4):
    got = pieces.kl_reg_oracle(eye, eye, v, None, jnp.asarray(0.0, dtype), jnp.full(2, w, dtype),
                               jnp.asarray(2.0, dtype))
    np.testing.assert_allclose(np.asarray(got), [0.0, 0.5], atol=4 * _eps(dtype))
  got = robust.kl_dual_search(eye, v, None, jnp.asarray(0.5, dtype), 3.0)
  np.testing.assert_allclose(np.asarray(got), [-0.5e-4, 0.5 - 0.5e-4], atol=8 * _eps(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_kl_regularized_matches_decimal_reference(dtype):
  err, tol = reg_errors(pieces.kl_reg_oracle, dtype)
  assert np.all(err <= tol), (err.max(), err[err > tol], tol[err > tol])


@pytest.mark.parametrize("dtype", DTYPES)
def test_kl_constrained_matches_log_sum_exp_reference(dtype):
  err, hi, lo = con_errors(robust.kl_dual_search, dtype)
  assert np.all((err <= hi) & (err >= -lo)), err[(err > hi) | (err < -lo)]


def test_jit_vmap_and_gradients():
  """vmap over cases equals the single calls; the gradient of a one-atom coordinate's value with
  respect to its target is 1 (R2PVI-KL: ``nu = v``; DRVI-L: ``v - 1e-4 rho``), also where the
  single shift underflowed (its clip gave 0)."""
  dtype = jnp.float64
  pinv, g, v, mask = block_case(jax.random.key(7), dtype, mixing=True)
  vs = jnp.stack([jnp.asarray(v), jnp.asarray(v) + 0.25])
  w = jnp.full(pinv.shape[0], 1e-3, dtype)
  M = pinv @ g.T
  eye = jnp.eye(2, dtype=dtype)
  fns = {
      "reg": lambda vv: pieces.kl_reg_oracle(pinv, g, vv, mask, jnp.zeros((), dtype), w,
                                             jnp.asarray(4.0, dtype)),
      "con": lambda vv: robust.kl_dual_search(M, vv, mask, 0.3, 4.0),
  }
  for fn in fns.values():
    batched = jax.jit(jax.vmap(fn))(vs)
    single = jax.jit(fn)
    for b in range(2):
      np.testing.assert_allclose(np.asarray(batched[b]), np.asarray(single(vs[b])), atol=1e-12)
  grad = jax.jit(jax.grad(lambda vv: jnp.sum(fns["reg"](vv))))(vs[0])
  assert np.all(np.isfinite(np.asarray(grad)))
  for weight in (1e-4, 1e-2):
    grad = jax.jit(jax.grad(lambda vv, a=weight: pieces.kl_reg_oracle(
        eye, eye, vv, None, jnp.zeros((), dtype), jnp.full(2, a, dtype),
        jnp.asarray(2.0, dtype))[1]))(jnp.asarray([0.0, 0.5]))
    np.testing.assert_allclose(np.asarray(grad), [0.0, 1.0], atol=1e-9)
  # Not jitted: jit(grad(kl_dual_search)) under the suite's XLA backend level 0 (conftest) gives
  # NaN at some inputs, with or without the per-coordinate shift (level 2, the default: exact).
  grad = jax.grad(lambda vv: robust.kl_dual_search(eye, vv, None, 0.5, 3.0, tol=1e-3,
                                                   grid_size=8)[1])(jnp.asarray([0.0, 0.5]))
  np.testing.assert_allclose(np.asarray(grad), [0.0, 1.0], atol=1e-6)


def tabular_dataset(key, dtype, S=4, A=2, H=3, N=80):
  """One-hot features ``e_{s A + a}`` (every ridge inverse diagonal, so each coordinate's atoms
  are its own (s, a)'s transitions), rewards ``theta_h`` in [0, 1], transitions from (s, a) to
  ``s + a`` or ``s + a + 1`` (mod S) only, so that half the coordinates never see the state of
  the smallest value; a few invalid trajectories."""
  d = S * A
  ks = jax.random.split(key, 6)
  s, a = (np.asarray(jax.random.randint(k, (H, N), 0, n)) for k, n in zip(ks, (S, A)))
  s2 = (s + a + np.asarray(jax.random.bernoulli(ks[2], 0.3, (H, N)))) % S
  theta = np.asarray(jax.random.uniform(ks[3], (H, d)))
  onehot = np.eye(d)
  phi = onehot[s * A + a]
  next_phi = np.stack([onehot[s2 * A + b] for b in range(A)], axis=2)
  valid = np.asarray(jax.random.uniform(ks[5], (N,))) > 0.05
  return data.Dataset(
      phi=jnp.asarray(phi, dtype), action=jnp.asarray(a, jnp.int32),
      reward=jnp.asarray(np.einsum("hnd,hd->hn", phi, theta), dtype),
      next_phi=jnp.asarray(next_phi, dtype), next_fail=jnp.zeros((H, N), bool),
      state=jnp.asarray(s, jnp.int32), next_state=jnp.asarray(s2, jnp.int32),
      theta=jnp.asarray(theta, dtype), valid=jnp.asarray(valid))


def _np(ds):
  return {f: np.asarray(getattr(ds, f)) for f in ds._fields}


E2E_ATOL = {jnp.float32: 2e-5, jnp.float64: 1e-7}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("weight", [1e-4, 1e-3, 1e-2])
def test_r2pvi_kl_fit_end_to_end(dtype, weight):
  """Every (s, a) coordinate whose next states all lie above the step's smallest target by more
  than ~87 weight (float32) / ~745 weight (float64) took the top value before."""
  ds = tabular_dataset(jax.random.key(11), dtype)
  H, _, d = ds.phi.shape
  agent = offline.r2pvi_kl(H, d, ds.next_phi.shape[2])
  qf = agent.fit(ds, offline.make_hparams(agent, reg_weight=weight, beta=0.05, lam=0.1))
  assert qf.w.dtype == dtype
  ref = ro.r2pvi_kl(_np(ds), weight, 0.05, 0.1)
  np.testing.assert_allclose(np.asarray(qf.w), ref["w"], atol=E2E_ATOL[dtype], rtol=0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_drvi_l_fit_end_to_end(dtype):
  """DRVI-L: at the search's small alphas every coordinate without the smallest target
  underflowed, and the search then returned ``H - 1e-4 rho``, the most optimistic value."""
  ds = tabular_dataset(jax.random.key(12), dtype)
  H, _, d = ds.phi.shape
  agent = offline.drvi_l(H, d, ds.next_phi.shape[2], tol=1e-8)
  rho = np.full((H, d), 0.3)
  qf = agent.fit(ds, offline.make_hparams(agent, rho=rho, beta=0.05, lam=0.1))
  assert qf.w.dtype == dtype
  ref = ro.drvi_l(_np(ds), rho, 0.05, 0.1, grid=np.logspace(-4, 4, 4001))
  atol = {jnp.float32: 5e-5, jnp.float64: 1e-6}[dtype]
  np.testing.assert_allclose(np.asarray(qf.w), ref["w"], atol=atol, rtol=0)
