"""DRPVI's rho = 0 gap to PEVI (issue 34, docs/findings/drpvi-gap.md): its cause, isolated on
tiny instances, and the opt-in ``monotone`` estimator that removes it.

* a hand instance (2 overlapping features, 3 atoms) where ``Lambda^-1`` has a negative entry, so
  ``z_1(alpha)`` decreases in alpha: the paper's max is 0, the regression ``z_1(H)`` is
  ``2 [Lambda^-1]_12 < 0`` (computed by hand), and ``monotone=True`` returns the regression;
* ``monotone`` against an independent NumPy loop (candidates, sort, suffix minimum, max) on random
  atoms with and without ``m`` and on the sort, sort-free and operator paths;
* whole fits: DRPVI(rho = 0, beta = 0, regressed reward) differs from PEVI(beta = 0) with
  overlapping features, equals it with one-hot features, and equals it with ``monotone=True``.
"""

import jax.numpy as jnp
import numpy as np
import pytest

from drjax import data, duals_tv
from drjax.agents import offline


def test_hand_instance_negative_inverse_entry_biases_the_rho0_max():
  g = jnp.asarray([[1.0, 0.0], [0.5, 0.5], [0.0, 1.0]])
  v = jnp.asarray([0.0, 0.0, 2.0])  # only the atom on feature 2 has value
  lam, H = 0.1, 3.0
  # Lambda = [[1.35, 0.25], [0.25, 1.35]] by hand; det = 1.76; [Lambda^-1]_12 = -0.25 / 1.76.
  pinv = jnp.asarray([[1.35, -0.25], [-0.25, 1.35]]) / 1.76
  np.testing.assert_allclose(np.asarray(jnp.linalg.inv(g.T @ g + lam * jnp.eye(2))),
                             np.asarray(pinv), rtol=1e-12)
  # z_1(alpha) = [Lambda^-1]_12 * min(2, alpha): decreasing, so max_alpha z_1 = z_1(0) = 0.
  z1_reg = 2 * (-0.25 / 1.76)
  nu, alpha = duals_tv.alpha_max_atoms(pinv, g, v, 0.0, H)
  assert float(nu[0]) == pytest.approx(0.0, abs=1e-12) and float(alpha[0]) == 0.0
  reg = np.asarray(pinv @ (g.T @ v))  # the plain ridge regression of V (PEVI's)
  assert reg[0] == pytest.approx(z1_reg, rel=1e-12)
  assert float(nu[0]) - reg[0] == pytest.approx(0.5 / 1.76, rel=1e-9)  # the bias, 0.284
  mono, _ = duals_tv.alpha_max_atoms(pinv, g, v, 0.0, H, monotone=True)
  np.testing.assert_allclose(np.asarray(mono), reg, atol=1e-12)
  # Coordinate 2 (z_2 increasing): both estimators agree.
  assert float(nu[1]) == pytest.approx(reg[1], abs=1e-12)


def _numpy_monotone(pinv, g, v, rho, H, vmin):
  """Independent loop: candidates {0, H, clip(v_n), clip(m)}, z_i by sums over atoms, sorted,
  suffix minimum, then max_j z_mono - rho (c - min(m, c)); ties to the smallest c."""
  n, d = g.shape
  cands = [0.0, H] + [min(max(x, 0.0), H) for x in v]
  if vmin is not None:
    cands.append(min(max(vmin, 0.0), H))
  cands = sorted(cands)
  m = 0.0 if vmin is None else vmin
  nu, al = np.zeros(d), np.zeros(d)
  for i in range(d):
    z = []
    for c in cands:
      y = np.zeros(d)
      for k in range(n):
        y += g[k] * min(v[k], c)
      z.append(float(pinv[i] @ y))
    zm = [min(z[j:]) for j in range(len(z))]
    obj = [zm[j] - rho[i] * (cands[j] - min(m, cands[j])) for j in range(len(z))]
    best = max(obj)
    nu[i] = best
    al[i] = min(c for c, o in zip(cands, obj) if o >= best - 1e-12)
  return nu, al


@pytest.mark.parametrize("n,vmin,path", [(9, None, "auto"), (9, 0.4, "auto"), (12, 0.7, "sort"),
                                         (8, None, "operator")])
def test_monotone_matches_a_numpy_loop(n, vmin, path):
  rng = np.random.default_rng(n)  # local generator: test data only
  d, H = 4, 3.0
  for trial in range(4):
    g = rng.dirichlet(np.ones(d) * 0.7, n)
    v = rng.uniform(-0.2, H + 0.2, n)
    v[: n // 3] = v[n // 3]  # ties
    pinv = np.linalg.inv(g.T @ g + 0.05 * np.eye(d))
    assert (pinv < 0).any()  # overlapping features: negative entries
    rho = rng.uniform(0, 0.6, d) if trial else np.zeros(d)
    kw = {"vmin": None if vmin is None else jnp.asarray(vmin)}
    if path == "sort":
      kw["sort"] = True
    if path == "operator":
      kw["operator"] = jnp.asarray(pinv @ g.T)
    nu, alpha = duals_tv.alpha_max_atoms(jnp.asarray(pinv), jnp.asarray(g), jnp.asarray(v),
                                         jnp.asarray(rho), H, monotone=True, **kw)
    ref_nu, ref_alpha = _numpy_monotone(pinv, g, v, rho, H, vmin)
    np.testing.assert_allclose(np.asarray(nu), ref_nu, atol=1e-10)
    np.testing.assert_allclose(np.asarray(alpha), ref_alpha, atol=1e-10)
    if not trial:  # rho = 0: the regression z(H) (v clipped to [0, H] as the candidates are)
      reg = pinv @ (g.T @ np.minimum(v, H))
      np.testing.assert_allclose(np.asarray(nu), reg, atol=1e-10)


def _dataset(features: str, seed: int = 0):
  """H = 3, 2 actions, N = 30 transitions on 3 hidden states; overlapping or one-hot features."""
  H, A, S, N = 3, 2, 3, 30
  rng = np.random.default_rng(seed)  # local generator: test data only
  if features == "onehot":
    table = np.eye(S * A).reshape(S, A, S * A)
  else:
    table = rng.dirichlet(np.ones(4) * 0.8, (S, A))
  s = rng.integers(0, S, (H, N))
  a = rng.integers(0, A, (H, N))
  s2 = rng.integers(0, S, (H, N))
  r = rng.uniform(0, 1, (S, A))[s, a]
  d = table.shape[-1]
  return data.Dataset(phi=jnp.asarray(table[s, a]), action=jnp.asarray(a, jnp.int32),
                      reward=jnp.asarray(r), next_phi=jnp.asarray(table[s2]),
                      next_fail=jnp.zeros((H, N), bool), state=jnp.asarray(s, jnp.int32),
                      next_state=jnp.asarray(s2, jnp.int32), theta=jnp.zeros((H, d)),
                      valid=jnp.ones((N,), bool)), H, d, A


@pytest.mark.parametrize("features", ["overlap", "onehot"])
def test_rho0_drpvi_vs_pevi_the_cause_isolated(features):
  ds, H, d, A = _dataset(features)
  pevi = offline.pevi(H, d, A)
  w_pevi = np.asarray(pevi.fit(ds, offline.PEVIHParams(beta=0.0, lam=0.1)).w)
  hp = offline.DRPVIHParams(rho=jnp.zeros((H, d)), beta=0.0, lam=0.1)
  paper = offline.drpvi(H, d, A, reward="regressed")
  mono = offline.drpvi(H, d, A, reward="regressed", monotone=True)
  w_paper = np.asarray(paper.fit(ds, hp).w)
  w_mono = np.asarray(mono.fit(ds, hp).w)
  np.testing.assert_allclose(w_mono, w_pevi, atol=1e-10)  # the option removes the gap
  if features == "onehot":  # no negative entries in Lambda^-1: no gap in the first place
    np.testing.assert_allclose(w_paper, w_pevi, atol=1e-10)
  else:  # the last step has V = 0 (equal); earlier steps are biased upward
    np.testing.assert_allclose(w_paper[-1], w_pevi[-1], atol=1e-10)
    assert np.max(w_paper[:-1] - w_pevi[:-1]) > 1e-3


def test_monotone_is_opt_in_and_checked():
  assert offline.drpvi(2, 2, 2).fit is not offline.drpvi(2, 2, 2, monotone=True).fit
  with pytest.raises(TypeError, match="monotone"):
    offline.drpvi(2, 2, 2, monotone=1)
  with pytest.raises(ValueError, match="monotone"):
    offline.va_drpvi(2, 2, 2, variance="alg2", monotone=True)
  with pytest.raises(TypeError, match="monotone"):
    duals_tv.alpha_max_atoms(jnp.eye(2), jnp.eye(2), jnp.ones(2), 0.0, 1.0, monotone="yes")


def test_registry_names_the_option():
  from drjax.agents import registry
  mono = registry.make("drpvi-mono", (3, 4, 2))
  assert mono.name == "DRPVI-mono" and mono.fit is registry.make("drpvi", (3, 4, 2),
                                                                  monotone=True).fit
  assert registry.make("drpvi", (3, 4, 2)).name == "DRPVI"  # the paper's estimator by default
  assert registry.NOMINAL["drpvi-mono"] == registry.NOMINAL["va-drpvi-mono"] == "pevi"
  va = registry.make("va-drpvi-mono", (3, 4, 2))
  assert va.name == "VA-DRPVI-mono" and va.needs_pilot
  assert va.fit is registry.make("va-drpvi", (3, 4, 2), monotone=True).fit
