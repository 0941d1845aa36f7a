"""drjax.paper.adversarial (issue 29, item 5): the bonus-ratio surrogate against brute force and
NumPy loops written from its equations, its bounds, its gradient and the ascent."""

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from drjax.paper import adversarial as adv

H, S, A, D = 3, 4, 2, 3


@pytest.fixture(scope="module")
def tiny():
  z = adv.sample_logits(jax.random.key(1), H, S, A, D, scale=1.5)
  phi, mu, init = (np.asarray(x, np.float64) for x in adv.model_arrays(z))
  return z, phi, mu, init


def _policy(key):
  p = np.asarray(jax.random.uniform(key, (H, S, A)), np.float64) + 0.1
  return p / p.sum(-1, keepdims=True)


def _brute_occupancy(phi, mu, init, pi):
  """Marginal state law per step: the probability of every prefix (s_1, a_1, ..., s_h)."""
  occ = np.zeros((H, S))
  for h in range(H):
    for prefix in itertools.product(range(S), range(A), repeat=h):
      for s_last in range(S):
        s = list(prefix[0::2]) + [s_last]
        a = prefix[1::2]
        p = init[s[0]]
        for t in range(h):
          p *= pi[t, s[t], a[t]] * (phi[s[t], a[t]] @ mu[t][:, s[t + 1]])
        occ[h, s_last] += p
  return occ


def test_the_fail_state_extension(tiny):
  _, phi, mu, init = tiny
  np.testing.assert_allclose(phi.sum(-1), 1, atol=1e-12)
  np.testing.assert_array_equal(phi[0], np.eye(D)[[0] * A])  # phi(s_f, a) = e_0
  assert np.all(phi[1:, :, 0] == 0)
  np.testing.assert_array_equal(mu[:, 0], np.eye(S)[[0] * H])  # mu_{h,0} = delta_{s_f}
  assert init[0] == 0 and abs(init.sum() - 1) < 1e-12


def test_occupancy_against_enumeration(tiny):
  z, phi, mu, init = tiny
  pi = _policy(jax.random.key(2))
  got = np.asarray(adv.occupancy(jnp.asarray(phi), jnp.asarray(mu), jnp.asarray(init),
                                 jnp.asarray(pi)))
  want = _brute_occupancy(phi, mu, init, pi)
  np.testing.assert_allclose(want.sum(-1), 1, atol=1e-12)
  np.testing.assert_allclose(got, want, atol=1e-12)


def test_occupancy_against_monte_carlo(tiny):
  _, phi, mu, init = tiny
  pi = _policy(jax.random.key(3))
  n = 20000
  ks, ka = jax.random.split(jax.random.key(4))
  u_s = np.asarray(jax.random.uniform(ks, (n, H)))
  u_a = np.asarray(jax.random.uniform(ka, (n, H)))
  counts = np.zeros((H, S))
  s = np.searchsorted(np.cumsum(init), u_s[:, 0], side="right")
  for h in range(H):
    np.add.at(counts[h], s, 1)
    a = (u_a[:, h:h + 1] > np.cumsum(pi[h, s], axis=1)).sum(1)
    if h + 1 < H:
      p_next = np.einsum("nd,dt->nt", phi[s, a], mu[h])
      s = (u_s[:, h + 1:h + 2] > np.cumsum(p_next, axis=1)).sum(1)
      s = np.minimum(s, S - 1)
  got = np.asarray(adv.occupancy(jnp.asarray(phi), jnp.asarray(mu), jnp.asarray(init),
                                 jnp.asarray(pi)))
  np.testing.assert_allclose(got, counts / n, atol=4 * 0.5 / math.sqrt(n))


def _numpy_widths(phi, mu, init, pi, lam, K):
  occ = _brute_occupancy(phi, mu, init, pi)
  rect, ellip = np.zeros(H), np.zeros(H)
  for h in range(H):
    M = np.zeros((D, D))
    for s in range(S):
      for a in range(A):
        M += occ[h, s] * pi[h, s, a] * np.outer(phi[s, a], phi[s, a])
    for k in range(1, K + 1):
      inv = np.linalg.inv(lam * np.eye(D) + (k - 1) * M)
      for s in range(S):
        for a in range(A):
          w = occ[h, s] * pi[h, s, a]
          rect[h] += w * sum(phi[s, a, i] * math.sqrt(inv[i, i]) for i in range(D))
          ellip[h] += w * math.sqrt(phi[s, a] @ inv @ phi[s, a])
  return rect, ellip


def test_expected_widths_against_numpy_loops(tiny):
  _, phi, mu, init = tiny
  pi = _policy(jax.random.key(5))
  K, lam = 9, 0.7
  nodes, weights = adv.k_nodes(K)
  got = adv.expected_widths(*(jnp.asarray(x) for x in (phi, mu, init, pi)), lam, nodes, weights)
  want = _numpy_widths(phi, mu, init, pi, lam, K)
  np.testing.assert_allclose(got[0], want[0], rtol=1e-10)
  np.testing.assert_allclose(got[1], want[1], rtol=1e-10)


def test_quadrature_in_k():
  nodes, weights = adv.k_nodes(1000, 24)
  assert nodes[0] == 1 and nodes[-1] == 1000 and abs(weights.sum() - 1000) < 1e-9
  for f in (lambda k: 1 / np.sqrt(k), lambda k: 1 / np.sqrt(1 + 0.3 * (k - 1)), np.ones_like):
    exact = f(np.arange(1, 1001.0)).sum()
    assert abs(weights @ f(nodes) - exact) < 0.01 * exact


def test_ratio_bounds_on_random_and_found_instances():
  K, lam = 50, 1.0
  nodes, weights = adv.k_nodes(K)
  # One compiled program per feature dimension (key and scale traced), not op by op per instance.
  ratio_at = jax.jit(lambda key, scale, d: adv.ratio(adv.sample_logits(key, 2, 5, 3, d, scale),
                                                     lam, nodes, weights), static_argnums=2)
  for i, d in enumerate((2, 3, 6)):
    for key in jax.random.split(jax.random.key(10 + i), 3):
      for scale in (0.3, 3.0):
        r = float(ratio_at(key, scale, d))
        assert 1 - 1e-9 <= r <= math.sqrt(d * (1 + (K - 1) / lam))


def test_one_hot_features_give_one():
  nodes, weights = adv.k_nodes(40)

  # The instance and its ratio compiled together, once per feature dimension (not op by op).
  def features_and_ratio(key, d):
    arrays = adv.random_arrays(key, "one-hot", 2, 6, 3, d)
    return arrays[0], adv.ratio_of_arrays(*arrays, 1.0, nodes, weights)

  features_and_ratio = jax.jit(features_and_ratio, static_argnums=1)
  for d in (3, 8):
    phi, r = features_and_ratio(jax.random.key(d), d)
    assert set(np.unique(np.asarray(phi))) == {0.0, 1.0}
    np.testing.assert_allclose(r, 1.0, rtol=1e-12)


def test_one_repeated_feature_keeps_its_rect_width():
  # One non-fail state whose feature is uniform on 4 coordinates, visited every step:
  # Lambda(k) = lam I + (k - 1) phi phi^T, so (Sherman-Morrison) [Lambda^-1]_ii = (1 - (k - 1)
  # phi_i^2 / c) / lam and phi^T Lambda^-1 phi = |phi|^2 / c with c = lam + (k - 1) |phi|^2:
  # the elliptical width decays like 1/sqrt(k), the d-rectangular one tends to sqrt(3/4 / lam).
  d, K, lam = 5, 60, 0.5
  nodes, weights = adv.k_nodes(K)
  phi = np.zeros((2, 1, d))
  phi[0, 0, 0] = 1
  phi[1, 0, 1:] = 0.25
  mu = np.zeros((2, d, 2))
  mu[:, :, 1] = 1
  mu[:, 0] = [1, 0]
  init = np.array([0.0, 1.0])
  k = np.arange(1, K + 1.0)
  c = lam + (k - 1) / 4
  want = np.sum(np.sqrt((1 - (k - 1) / 16 / c) / lam)) / np.sum(np.sqrt(0.25 / c))
  r = float(adv.ratio_of_arrays(jnp.asarray(phi), jnp.asarray(mu), jnp.asarray(init), lam,
                                nodes, weights))
  np.testing.assert_allclose(r, want, rtol=1e-10)
  assert r > math.sqrt(d)


def test_nearly_collinear_features_exceed_sqrt_d():
  # Two states with features (0, 1/2 + e, 1/2 - e) and (0, 1/2 - e, 1/2 + e), visited equally:
  # M = 1/4 11^T + e^2 (1, -1)(1, -1)^T on coordinates 1, 2 (eigenvalues 1/2 and 2 e^2), so with
  # c = lam + (k - 1)/2, c' = lam + 2 (k - 1) e^2: [Lambda^-1]_ii = (1/c + 1/c') / 2 and
  # phi^T Lambda^-1 phi = 1 / (2 c) + 2 e^2 / c'.
  e, lam, K, d = 0.01, 1.0, 400, 3
  phi = np.zeros((3, 1, d))
  phi[0, 0, 0] = 1
  phi[1, 0, 1:] = [0.5 + e, 0.5 - e]
  phi[2, 0, 1:] = [0.5 - e, 0.5 + e]
  mu = np.zeros((2, d, 3))
  mu[:, 0, 0] = 1
  mu[:, 1:, 1:] = 0.5
  init = np.array([0.0, 0.5, 0.5])
  k = np.arange(1, K + 1.0)
  c, c2 = lam + (k - 1) / 2, lam + 2 * (k - 1) * e ** 2
  want = np.sum(np.sqrt((1 / c + 1 / c2) / 2)) / np.sum(np.sqrt(1 / (2 * c) + 2 * e ** 2 / c2))
  nodes, weights = adv.k_nodes(K)
  r = float(adv.ratio_of_arrays(jnp.asarray(phi), jnp.asarray(mu), jnp.asarray(init), lam,
                                nodes, weights))
  np.testing.assert_allclose(r, want, rtol=1e-10)
  assert r > 3 * math.sqrt(d)


def test_gradient_against_finite_differences(tiny):
  z, _, _, _ = tiny
  nodes, weights = adv.k_nodes(20, 8)

  def f(z_):
    return jnp.log(adv.ratio(z_, 0.5, nodes, weights))

  g = jax.jit(jax.grad(f))(z)  # compiled once each (not op by op)
  f_jit = jax.jit(f)
  direction = adv.sample_logits(jax.random.key(7), H, S, A, D)
  eps = 1e-5
  plus = jax.tree_util.tree_map(lambda a, b: a + eps * b, z, direction)
  minus = jax.tree_util.tree_map(lambda a, b: a - eps * b, z, direction)
  fd = (f_jit(plus) - f_jit(minus)) / (2 * eps)
  dot = sum(jnp.vdot(a, b) for a, b in zip(jax.tree_util.tree_leaves(g),
                                            jax.tree_util.tree_leaves(direction)))
  np.testing.assert_allclose(dot, fd, rtol=1e-6)
  assert abs(float(fd)) > 1e-4  # a direction the ratio depends on


def test_a_few_adam_steps_increase_the_ratio():
  res = adv.ascend(jax.random.key(0), horizon=2, num_states=4, num_actions=2, feature_dim=4,
                   num_episodes=100, num_nodes=8, steps=6, restarts=2)
  hist = np.asarray(res.history)
  assert np.all(hist[:, -1] > hist[:, 0] * 1.05)
  assert float(res.ratio) >= hist.max() - 1e-9
  nodes, weights = adv.k_nodes(100, 8)
  np.testing.assert_allclose(adv.ratio(res.logits, 1.0, nodes, weights), res.ratio, rtol=1e-9)


def test_found_instance_is_a_valid_drmdp():
  res = adv.ascend(jax.random.key(1), horizon=2, num_states=3, num_actions=2, feature_dim=3,
                   num_episodes=10, num_nodes=None, steps=2, restarts=1)
  env, params = adv.to_params(res.logits, jax.random.key(2))  # validates
  assert params.phi.shape == (2, 3, 2, 3) and env.feature_dim == 3


def test_bootstrap_slope_of_a_power_law():
  dims = [4, 8, 16, 32]
  samples = [[2 * d ** 0.5 * f for f in (0.9, 1.0, 1.1)] for d in dims]
  fit = adv.bootstrap_slope(dims, samples, jax.random.key(0), num=100)
  assert abs(fit["slope"] - 0.5) < 1e-12
  assert fit["lo"] < 0.5 < fit["hi"] and fit["hi"] - fit["lo"] < 0.2


@pytest.mark.parametrize("kwargs, name", [({"feature_dim": 1}, "feature_dim"),
                                          ({"num_states": 1}, "num_states"),
                                          ({"lam": 0.0}, "lam"), ({"steps": 0}, "steps")])
def test_bad_input_names_the_argument(kwargs, name):
  args = dict(horizon=2, num_states=3, num_actions=2, feature_dim=3, num_episodes=10)
  args.update(kwargs)
  with pytest.raises(ValueError, match=name):
    adv.ascend(jax.random.key(0), **args)
