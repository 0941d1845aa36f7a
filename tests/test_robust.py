"""Numerical tests for drjax.robust (TV duality kernels of DR-LSVI-UCB)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize
from hypothesis import given, settings
from hypothesis import strategies as st

from drjax import robust

KERNELS = pytest.mark.parametrize("wrap", [jax.jit, lambda f: f], ids=["jit", "eager"])
ATOL = 1e-10
_jit_exact = jax.jit(robust.alpha_max_exact)


# ------------------------------------------------------------------ independent references


def _obj(m_row, v, rho_i, alpha):
  """z_i(alpha) - rho_i alpha, with plain Python loops."""
  return sum(float(m_row[t]) * min(float(v[t]), alpha) for t in range(len(v))) - rho_i * alpha


def _obj_vec(M, v, rho, alpha):
  """(z_i(alpha_i) - rho_i alpha_i)_i in numpy."""
  return (M * np.minimum(v[None, :], alpha[:, None])).sum(1) - rho * alpha


def _brute_nu(M, v, rho, H):
  """max over every candidate {0, H} U clip(v, 0, H), one coordinate at a time."""
  cands = [0.0, float(H)] + [min(max(float(x), 0.0), float(H)) for x in v]
  out = []
  for i in range(M.shape[0]):
    out.append(max(_obj(M[i], v, float(rho[i]), c) for c in cands))
  return np.array(out)


def _lp_worst(mu, V, rho):
  """min_{nu in simplex, 1/2 ||nu - mu||_1 <= rho} <nu, V>, by linprog over (nu, t)."""
  S = len(mu)
  c = np.concatenate([V, np.zeros(S)])
  eye = np.eye(S)
  A_ub = np.block([[eye, -eye], [-eye, -eye], [np.zeros((1, S)), np.ones((1, S))]])
  b_ub = np.concatenate([mu, -mu, [2 * rho]])
  A_eq = np.concatenate([np.ones(S), np.zeros(S)])[None]
  res = scipy.optimize.linprog(c, A_ub=A_ub, b_ub=b_ub, A_eq=A_eq, b_eq=[1.0],
                               bounds=[(0, None)] * (2 * S), method="highs")
  assert res.status == 0
  return res.fun


def _ridge_instances(seed, n=24, K=9, d=4):
  """Random (M, v, rho, H): negative weights, ties, all-equal v, rho in {0, 1}, v outside [0,H]."""
  rng = np.random.default_rng(seed)
  out = []
  for j in range(n):
    H = float(rng.uniform(1.0, 5.0))
    M = rng.normal(size=(d, K))
    kind = j % 6
    if kind == 0:
      v = rng.uniform(0, H, size=K)
    elif kind == 1:  # many ties
      v = rng.integers(0, 4, size=K) * H / 3
    elif kind == 2:  # all equal
      v = np.full(K, rng.uniform(0, H))
    elif kind == 3:  # outside [0, H]
      v = rng.uniform(-1.0, H + 2.0, size=K)
    elif kind == 4:  # contains 0 and H exactly
      v = rng.uniform(0, H, size=K)
      v[0], v[-1] = 0.0, H
    else:
      v = rng.uniform(0, H, size=K)
      M = np.abs(M) / np.abs(M).sum(1, keepdims=True)  # distributions
    rho = [rng.uniform(0, 1, size=d), np.zeros(d), np.ones(d),
           np.array([0.0, 1.0, 0.3, 0.7])[:d]][(j // 6) % 4]  # all 24 (kind, rho) pairs
    out.append((M, v, rho, H))
  return out


# ------------------------------------------------------------------ ridge operator


@KERNELS
def test_ridge_operator_matches_numpy_and_ignores_masked_rows(wrap):
  rng = np.random.default_rng(0)
  K, d, lam = 9, 4, 0.7
  phi = rng.normal(size=(K, d))
  mask = rng.uniform(size=K) < 0.6
  mask[0] = True
  Lam_np = phi[mask].T @ phi[mask] + lam * np.eye(d)
  M_np = np.linalg.solve(Lam_np, np.where(mask[:, None], phi, 0).T)

  np.testing.assert_allclose(wrap(robust.gram)(phi, mask, lam), Lam_np, rtol=1e-12)
  chol, M = wrap(robust.ridge_operator)(phi, mask, lam)
  chol, M = np.asarray(chol), np.asarray(M)
  np.testing.assert_allclose(chol, np.tril(chol))
  np.testing.assert_allclose(chol @ chol.T, Lam_np, rtol=1e-12)
  np.testing.assert_allclose(M, M_np, rtol=1e-10, atol=1e-12)
  assert np.all(M[:, ~mask] == 0)

  # Garbage (even NaN) in masked rows changes nothing, for features and targets.
  phi2 = phi.copy()
  phi2[~mask] = np.nan
  chol2, M2 = wrap(robust.ridge_operator)(phi2, mask, lam)
  np.testing.assert_array_equal(M2, M)
  np.testing.assert_array_equal(chol2, chol)
  v = rng.uniform(0, 3, size=K)
  v2 = np.where(mask, v, np.nan)
  dual = wrap(functools.partial(robust.tv_dual_nu, method="exact"))
  nu, a, _ = dual(phi2, mask, v2, lam, 0.2, 3.0)
  M_sub = np.linalg.solve(Lam_np, phi[mask].T)  # regression on the valid rows only
  np.testing.assert_allclose(nu, _brute_nu(M_sub, v[mask], np.full(d, 0.2), 3.0), atol=1e-12)
  np.testing.assert_allclose(_obj_vec(M_sub, v[mask], np.full(d, 0.2), np.asarray(a)), nu,
                             atol=1e-12)
  # And the ridge solution is the regression: z(alpha) = M @ min(v, alpha).
  z = wrap(robust.z_of_alpha)(M, np.where(mask, v, 0), 1.5)
  np.testing.assert_allclose(z, M_np @ np.minimum(np.where(mask, v, 0), 1.5), atol=1e-12)


# ------------------------------------------------------------------ exact alpha max


@KERNELS
def test_exact_matches_bruteforce(wrap):
  f = wrap(robust.alpha_max_exact)
  for M, v, rho, H in _ridge_instances(1) + _ridge_instances(2, n=6, K=1, d=2):
    # (K = 1 only under jit: in eager mode every new shape recompiles every primitive.)
    nu, a = map(np.asarray, (f if M.shape[1] > 1 else _jit_exact)(M, v, rho, H))
    np.testing.assert_allclose(nu, _brute_nu(M, v, rho, H), atol=ATOL, rtol=0)
    assert np.all((a >= 0) & (a <= H))
    # alpha_star is a maximiser, and nu = z_i(alpha_i) - rho_i alpha_i.
    for i in range(M.shape[0]):
      assert abs(_obj(M[i], v, rho[i], a[i]) - nu[i]) < ATOL
    np.testing.assert_allclose(_obj_vec(M, v, rho, a), nu, atol=ATOL)
  np.testing.assert_allclose(wrap(robust.z_of_alpha)(M, v, a), _obj_vec(M, v, 0 * rho, a))


@settings(max_examples=60, deadline=None)
@given(
    v=st.lists(st.integers(0, 3), min_size=6, max_size=6),
    m=st.lists(st.integers(-3, 3), min_size=12, max_size=12),
    rho=st.sampled_from([0.0, 0.25, 0.5, 1.0]),
)
def test_exact_with_ties_hypothesis(v, m, rho):
  # Small integers: many exact ties in v and between candidate values.
  v = np.array(v, float)
  M = np.array(m, float).reshape(2, 6) / 4
  rho = np.full(2, rho)
  nu, a = _jit_exact(M, v, rho, 3.0)
  np.testing.assert_allclose(nu, _brute_nu(M, v, rho, 3.0), atol=ATOL)
  for i in range(2):
    assert abs(_obj(M[i], v, rho[i], float(a[i])) - nu[i]) < ATOL



def test_exact_tie_breaking_smallest_alpha():
  f = _jit_exact
  # Nonnegative weights, rho = 0: z is flat on [max v, H]; the smallest maximiser is max v.
  M = np.array([[0.2, 0.3, 0.5], [0.0, 0.0, 1.0]])
  v = np.array([1.0, 2.0, 2.0])
  nu, a = f(M, v, np.zeros(2), 5.0)
  np.testing.assert_array_equal(a, [2.0, 2.0])
  np.testing.assert_allclose(nu, M @ v)
  # All-equal v, positive weights, 0 < rho < 1: maximiser is exactly that value.
  nu, a = f(M, np.full(3, 1.5), np.full(2, 0.5), 5.0)
  np.testing.assert_array_equal(a, [1.5, 1.5])
  np.testing.assert_allclose(nu, [0.75, 0.75])
  # rho = 1 with distribution rows: alpha = 0 is optimal (z_i(alpha) <= alpha), ties -> 0.
  nu, a = f(M, np.array([0.0, 1.0, 2.0]), np.ones(2), 5.0)
  np.testing.assert_array_equal(a, [0.0, 0.0])
  np.testing.assert_allclose(nu, [0.0, 0.0])


@KERNELS
def test_exact_equals_tv_primal_lp_with_fail_state(wrap):
  """Remark 1: with a zero-value state, max_a E_mu[min(v,a)] - rho a is the TV worst case."""
  f = wrap(robust.alpha_max_exact)
  rng = np.random.default_rng(3)
  K, d = 9, 4
  for j in range(8):
    M = rng.dirichlet(np.ones(K), size=d)
    if j % 2:
      M[:, 1] = 0.0  # the fail state carries no nominal mass
      M /= M.sum(1, keepdims=True)
    v = rng.uniform(0, 4, size=K)
    v[1] = 0.0
    if j % 3 == 0:
      v[3:6] = v[2]  # ties
    rho = np.array([0.0, rng.uniform(), 1.0, 0.5]) if j % 4 == 0 else rng.uniform(size=d)
    nu, _ = f(M, v, rho, 4.0)
    lp = [_lp_worst(M[i], v, rho[i]) for i in range(d)]
    np.testing.assert_allclose(nu, lp, atol=1e-8)


# ------------------------------------------------------------------ grid


@KERNELS
def test_grid_within_lipschitz_bound_and_never_above(wrap):
  fe = wrap(robust.alpha_max_exact)
  fg = wrap(functools.partial(robust.alpha_max_grid, include_exact=False))
  fu = wrap(functools.partial(robust.alpha_max_grid, include_exact=True))
  worst_ratio = 0.0
  for M, v, rho, H in _ridge_instances(4):
    grid = np.linspace(0, H, 7)
    delta = H / 6
    nu_e, a_e = fe(M, v, rho, H)
    nu_g, a_g = fg(M, v, rho, H, grid)
    # |d/dalpha (z_i(alpha) - rho_i alpha)| <= sum_tau |m_i,tau| + rho_i; the optimum is at most
    # delta/2 from a grid point.
    bound = delta / 2 * (np.abs(M).sum(1) + rho)
    gap = np.asarray(nu_e - nu_g)
    assert np.all(gap >= -ATOL)
    assert np.all(gap <= bound + ATOL)
    worst_ratio = max(worst_ratio, float(np.max(gap / bound)))
    assert np.all(np.isin(np.asarray(a_g), np.asarray(grid)))
    np.testing.assert_allclose(_obj_vec(M, v, rho, np.asarray(a_g)), nu_g, atol=ATOL)
    # The union with the exact candidates is the exact answer.
    nu_u, a_u = fu(M, v, rho, H, grid)
    np.testing.assert_allclose(nu_u, nu_e, atol=ATOL)
    np.testing.assert_allclose(_obj_vec(M, v, rho, np.asarray(a_u)), nu_e, atol=ATOL)
  assert worst_ratio > 0.05  # the grid really is coarse here: the checks above have teeth


def test_make_grid_traced_horizon():
  g = jax.jit(robust.make_grid, static_argnums=1)(jnp.asarray(2.5), 6)
  np.testing.assert_allclose(g, np.linspace(0, 2.5, 6), rtol=1e-15)
  assert g[0] == 0.0 and g[-1] == 2.5
  with pytest.raises(ValueError):
    robust.make_grid(1.0, 1)


def test_tv_dual_nu_methods():
  rng = np.random.default_rng(5)
  phi = rng.uniform(size=(20, 3))
  mask = np.ones(20, bool)
  v = rng.uniform(0, 2, size=20)
  grid = robust.make_grid(2.0, 5)

  @jax.jit
  def all_methods(phi, v, grid):
    return [robust.tv_dual_nu(phi, mask, v, 1.0, 0.3, 2.0, m, grid)[0] for m in
            ("exact", "grid", "exact+grid")]

  nu_e, nu_g, nu_u = all_methods(phi, v, grid)
  M = np.linalg.solve(phi.T @ phi + np.eye(3), phi.T)
  np.testing.assert_allclose(nu_e, _brute_nu(M, v, np.full(3, 0.3), 2.0), atol=ATOL)
  assert np.all(nu_g <= nu_e + ATOL)
  np.testing.assert_allclose(nu_u, nu_e, atol=ATOL)
  with pytest.raises(ValueError):
    robust.tv_dual_nu(phi, mask, v, 1.0, 0.3, 2.0, "bisect")
  with pytest.raises(ValueError):
    robust.tv_dual_nu(phi, mask, v, 1.0, 0.3, 2.0, "grid")


# ------------------------------------------------------------------ rho = 0 and monotonicity


@KERNELS
def test_rho_zero_is_nonrobust_regression_for_monotone_z(wrap):
  f = wrap(robust.alpha_max_exact)
  rng = np.random.default_rng(6)
  # Tabular (one-hot) features: M = Lambda^{-1} Phi^T is nonnegative, z nondecreasing.
  K, d, H = 9, 4, 3.0
  phi = np.eye(d)[rng.integers(0, d, size=K)]
  M = np.linalg.solve(phi.T @ phi + 0.5 * np.eye(d), phi.T)
  assert np.all(M >= 0)
  for v in [rng.uniform(0, H, size=K), np.full(K, H), rng.integers(0, 3, size=K) * 1.5]:
    nu, _ = f(M, v, np.zeros(d), H)
    np.testing.assert_allclose(nu, M @ np.minimum(v, H), rtol=1e-13, atol=1e-13)
  # With negative ridge weights, rho = 0 can beat z(H): z(a) = min(1, a) - min(2, a).
  nu, a = _jit_exact(np.array([[1.0, -1.0]]), np.array([1.0, 2.0]), np.zeros(1), 2.0)
  np.testing.assert_allclose(nu, [0.0])  # attained at alpha = 0, while z(H) = -1
  assert a[0] == 0.0


@KERNELS
def test_nu_nonincreasing_in_rho(wrap):
  f = wrap(robust.alpha_max_exact)
  rhos = np.linspace(0, 1, 21)
  for M, v, _, H in _ridge_instances(7, n=6):
    prev_nu, prev_a = None, None
    for r in rhos:
      nu, a = map(np.asarray, f(M, v, np.full(M.shape[0], r), H))
      if prev_nu is not None:
        assert np.all(nu <= prev_nu + ATOL)
        assert np.all(a <= prev_a + ATOL)  # smallest maximiser is monotone too
      prev_nu, prev_a = nu, a


# ------------------------------------------------------------------ derivatives


@jax.jit
def _derivatives(M, v, rho, H, phi, lam, mu, eps):
  """Autodiff derivatives and central finite differences, all in one compiled function."""
  nu_fn = lambda r: robust.alpha_max_exact(M, v, r, H)[0]
  _, a = robust.alpha_max_exact(M, v, rho, H)
  jac = jax.jacobian(nu_fn)(rho)
  # Every nu_i depends on rho_i only, so one shifted evaluation differentiates all coordinates.
  fd = (nu_fn(rho + eps) - nu_fn(rho - eps)) / (2 * eps)
  g_m = jax.grad(lambda m: robust.alpha_max_exact(m, v, rho, H)[0].sum())(M)
  mask = jnp.ones(v.shape, bool)
  g = lambda lam: robust.tv_dual_nu(phi, mask, v, lam, rho, H)[0].sum()
  g_lam, fd_lam = jax.grad(g)(lam), (g(lam + eps) - g(lam - eps)) / (2 * eps)
  val_fn = lambda r: robust.tv_worst_case_value(mu, v, r)[0]
  _, a_tv = robust.tv_worst_case_value(mu, v, rho[0])
  g_tv = jax.grad(val_fn)(rho[0])
  fd_tv = (val_fn(rho[0] + eps) - val_fn(rho[0] - eps)) / (2 * eps)
  return a, jac, fd, g_m, g_lam, fd_lam, a_tv, g_tv, fd_tv


def test_envelope_gradient_matches_finite_differences():
  rng = np.random.default_rng(8)
  K, d, H = 15, 4, 3.0
  for _ in range(5):
    M = rng.normal(size=(d, K)) / 3
    v = rng.uniform(0, H, size=K)
    rho = rng.uniform(0.05, 0.95, size=d)
    phi = rng.uniform(size=(K, d))
    mu = rng.dirichlet(np.ones(K))
    a, jac, fd, g_m, g_lam, fd_lam, a_tv, g_tv, fd_tv = map(
        np.asarray, _derivatives(M, v, rho, H, phi, 0.5, mu, 1e-6))
    # Envelope theorem: d nu_i / d rho_j = -alpha_star_i [i == j].
    np.testing.assert_allclose(jac, -np.diag(a), atol=1e-12)
    np.testing.assert_allclose(fd, -a, atol=1e-6)
    assert np.any(a > 0)
    # d nu_i / d M_{i,tau} = min(v_tau, alpha_i) (and 0 off row i).
    np.testing.assert_allclose(g_m, np.minimum(v[None, :], a[:, None]), atol=1e-12)
    # End to end through the ridge regression: d sum(nu) / d lam.
    np.testing.assert_allclose(g_lam, fd_lam, rtol=1e-5, atol=1e-8)
    # Finite-state dual: d value / d rho = -(alpha_star - Vmin).
    np.testing.assert_allclose(g_tv, -(a_tv - v.min()), atol=1e-12)
    np.testing.assert_allclose(fd_tv, -(a_tv - v.min()), atol=1e-6)


# ------------------------------------------------------------------ finite-state TV worst case


def _tv_instances(seed):
  rng = np.random.default_rng(seed)
  out = []
  for j in range(16):
    S = 9
    mu = rng.dirichlet(np.ones(S) * 0.7)
    kind = j % 4
    if kind == 0:  # has a zero-value (fail) state
      V = rng.uniform(0, 5, size=S)
      V[2] = 0.0
    elif kind == 1:  # no zero-value state
      V = rng.uniform(1, 5, size=S)
    elif kind == 2:  # lowest value sits on a state with zero nominal mass
      V = rng.uniform(1, 5, size=S)
      V[4] = 0.5
      mu[4] = 0.0
      mu /= mu.sum()
    else:  # ties, including a tie at the minimum
      V = rng.integers(1, 4, size=S).astype(float)
    rho = [0.0, 1.0, rng.uniform(0, 0.5), rng.uniform(0.5, 1.0), 0.05][j % 5]
    out.append((mu, V, rho))
  out.append((np.full(9, 1 / 9), np.full(9, 2.0), 0.4))  # all equal
  return out


@KERNELS
def test_tv_worst_case_value_and_distribution_match_lp(wrap):
  fv = wrap(robust.tv_worst_case_value)
  fd = wrap(robust.tv_worst_case_distribution)
  shortcut_differs = False
  for mu, V, rho in _tv_instances(9):
    lp = _lp_worst(mu, V, rho)
    value, a = fv(mu, V, rho)
    nu = np.asarray(fd(mu, V, rho))
    np.testing.assert_allclose(value, lp, atol=1e-9)
    assert V.min() - ATOL <= a <= V.max() + ATOL
    np.testing.assert_allclose(nu @ V, value, atol=1e-12)
    assert np.all(nu >= -1e-15)
    np.testing.assert_allclose(nu.sum(), 1.0, atol=1e-12)
    assert 0.5 * np.abs(nu - mu).sum() <= rho + 1e-12
    # The fail-state shortcut (Remark 1) is wrong without a zero-value state.
    short, _ = _jit_exact(mu[None], V, np.array([rho]), V.max())
    shortcut_differs |= bool(abs(float(short[0]) - lp) > 1e-3)
  assert shortcut_differs


def test_tv_worst_case_distribution_moves_mass_to_argmin_over_all_states():
  mu = np.array([0.5, 0.3, 0.2, 0.0])
  V = np.array([3.0, 2.0, 1.0, 0.5])  # the minimum is on the zero-mass state 3
  batch_nu = jax.jit(jax.vmap(robust.tv_worst_case_distribution, in_axes=(None, None, 0)))
  batch_val = jax.jit(jax.vmap(robust.tv_worst_case_value, in_axes=(None, None, 0)))
  rhos = jnp.array([0.0, 0.6, 1.0])
  expected = [mu, [0.0, 0.2, 0.2, 0.6], [0.0, 0.0, 0.0, 1.0]]
  np.testing.assert_allclose(batch_nu(mu, V, rhos), expected, atol=1e-15)
  np.testing.assert_allclose(batch_val(mu, V, rhos)[0], np.array(expected) @ V, atol=1e-15)


# ------------------------------------------------------------------ dtypes, vmap, scale


def test_float32_in_float32_out():
  rng = np.random.default_rng(10)
  f32 = lambda x: jnp.asarray(x, jnp.float32)
  phi, v = f32(rng.uniform(size=(10, 3))), f32(rng.uniform(0, 2, size=10))
  mask = np.ones(10, bool)
  rho = f32([0.1, 0.2, 0.3])
  mu = f32(np.full(10, 0.1))
  M = f32(rng.normal(size=(3, 10)))
  grid = robust.make_grid(f32(2.0), 5)

  def everything(phi, v, rho, mu, M, grid):
    return [
        robust.gram(phi, mask, 1.0),
        *robust.ridge_operator(phi, mask, 1.0),
        robust.z_of_alpha(M, v, 1.0),
        *robust.alpha_max_exact(M, v, rho, 2.0),
        *robust.alpha_max_grid(M, v, rho, 2.0, grid),
        *robust.alpha_max_grid(M, v, rho, 2.0, grid, include_exact=True),
        *robust.tv_dual_nu(phi, mask, v, 1.0, rho, 2.0),
        *robust.tv_worst_case_value(mu, v, 0.2),
        robust.tv_worst_case_distribution(mu, v, 0.2),
    ]

  outs = jax.jit(everything)(phi, v, rho, mu, M, grid)
  assert grid.dtype == jnp.float32
  assert all(o.dtype == jnp.float32 for o in outs), [o.dtype for o in outs]
  as64 = lambda x: np.asarray(x, np.float64)
  shapes64 = jax.eval_shape(everything, *map(as64, (phi, v, rho, mu, M, grid)))
  assert all(o.dtype == jnp.float64 for o in shapes64)
  # Numbers agree with the float64 brute force to float32 accuracy.
  nu_ref = _brute_nu(as64(M), as64(v), as64(rho), 2.0)
  np.testing.assert_allclose(outs[4], nu_ref, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(outs[8], nu_ref, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(outs[13], _lp_worst(as64(mu), as64(v), 0.2), rtol=1e-5)


def test_vmap_and_large_K_is_not_quadratic():
  rng = np.random.default_rng(11)
  B, K, d, H = 3, 6, 2, 2.0
  Ms, vs = rng.normal(size=(B, d, K)), rng.uniform(0, H, size=(B, K))
  rhos = rng.uniform(size=(B, d))
  nu_b, _ = jax.jit(jax.vmap(robust.alpha_max_exact, in_axes=(0, 0, 0, None)))(Ms, vs, rhos, H)
  for b in range(B):
    np.testing.assert_allclose(nu_b[b], _brute_nu(Ms[b], vs[b], rhos[b], H), atol=ATOL)
  # K = 100k: an O(K^2 d) evaluation would need ~10^11 floats.
  K, d = 100_000, 8
  M = rng.normal(size=(d, K)) / K
  v = rng.uniform(0, H, size=K)
  rho = rng.uniform(size=d)
  nu, a = jax.jit(robust.alpha_max_exact)(M, v, rho, H)
  np.testing.assert_allclose(_obj_vec(M, v, rho, np.asarray(a)), nu, atol=1e-10)
  nu_g, _ = jax.jit(robust.alpha_max_grid)(M, v, rho, H, np.linspace(0, H, 33))
  assert np.all(np.asarray(nu_g) <= np.asarray(nu) + 1e-10)
