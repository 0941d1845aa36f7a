"""drjax/bench/offline.py on tiny sizes, and its NumPy baselines (drjax/bench/numpy_offline.py)
against drjax's offline agents.

No timing assertions: the machine is shared. The structure of ``offline(quick=True)`` is checked
(rows, keys, positive times, ratios consistent with the times, markdown), and the NumPy
implementations of PEVI, DRPVI, VA-DRPVI and R2PVI-TV / -KL / -chi2 must agree with ``agent.fit``
to 1e-8 in float64 (conftest enables x64) on small put-option and linear-MDP datasets, DRVI-L
(a bounded search, not exact) to 1e-6; their kernels agree with drjax's oracles also off the
fast paths (targets outside [0, H], ties, invalid samples, small weights).
"""

import json
import math

import jax
import numpy as np
import pytest

import drjax
from drjax import data, robust
from drjax.agents import pieces

from drjax.bench import numpy_offline, offline  # noqa: E402

TOL = 1e-8
TOL_SEARCH = 1e-6  # DRVI-L: a bounded search (robust.kl_dual_search), within its tolerance
NEW = ("r2pvi-tv", "r2pvi-kl", "r2pvi-chi2", "drvi-l")


def _tol(agent):
  return TOL_SEARCH if agent == "drvi-l" else TOL


def _pos(x):
  return isinstance(x, (int, float)) and math.isfinite(x) and x > 0


def _check_timing(t, first=False):
  assert _pos(t["warm_min_s"]) and _pos(t["warm_median_s"])
  assert t["warm_min_s"] <= t["warm_median_s"]
  assert isinstance(t["reps"], int) and t["reps"] >= 2
  if first:
    assert _pos(t["first_s"])


def test_offline_quick_structure():
  assert jax.config.jax_enable_x64  # conftest: the agreement below is a float64 one
  rows = offline.offline(quick=True, log=lambda m: None)
  json.dumps(rows)  # JSON-able (bench.main writes it)
  put = [r for r in rows if r["workload"] == "put_option"]
  lin = [r for r in rows if r["workload"] == "linear_mdp"]
  assert len(put) + len(lin) == len(rows)

  assert [r["agent"] for r in put] == list(numpy_offline.AGENTS)
  for r in put:
    assert (r["N"], r["anchors"], r["d"], r["H"]) == (50, 30, 31, 20)
    assert r["dtype"] == "float64"
    for k in ("drjax", "drjax_jit"):
      _check_timing(r[k], first=True)
      # >= 0, not >= 1: another test in this worker may have compiled the same program already.
      assert r[k]["compile_s"] >= 0 and r[k]["compiles"] >= 0
    for k in ("numpy", "numpy_1thread", "numpy_default"):
      _check_timing(r[k], first=k == "numpy")
    assert r["numpy"]["warm_min_s"] == min(r["numpy_1thread"]["warm_min_s"],
                                           r["numpy_default"]["warm_min_s"])
    assert r["ratio_numpy_over_drjax"] == pytest.approx(
        r["numpy"]["warm_min_s"] / r["drjax"]["warm_min_s"])
    assert r["published_s"] is None and r["ratio_published_over_drjax"] is None  # N = 50
    assert r["max_abs_w_diff"] < _tol(r["agent"]) * max(1.0, r["w_scale"])
    b = r["ratio_over_baseline"]
    if r["agent"] not in offline.BASELINE:
      assert b is None
      continue
    base = next(x for x in put if x["agent"] == offline.BASELINE[r["agent"]])
    assert b["baseline"] == base["agent"]
    for k in ("drjax", "drjax_jit", "numpy"):
      assert b[k] == pytest.approx(r[k]["warm_min_s"] / base[k]["warm_min_s"])
  assert {offline.BASELINE[a] for a in NEW} == {"pevi", "drpvi"}
  assert offline.BASELINE["r2pvi-tv"] == offline.BASELINE["r2pvi-kl"] == "pevi"
  assert offline.BASELINE["r2pvi-chi2"] == "drpvi"

  assert [r["program"] for r in lin] == ["pipeline", "fit_buffer", "fit_stats", "numpy_loop",
                                         "numpy_batched"]
  for r in lin:
    assert (r["seeds"], r["N"], r["d"], r["H"]) == (offline.LINEAR_QUICK_SEEDS, 100, 4, 3)
    t = r.get("drjax") or r.get("numpy")
    _check_timing(t, first=True)
    if "drjax" in r:
      assert r["drjax"]["compile_s"] >= 0
    else:
      assert r["max_abs_w_diff"] < TOL
    assert r["ratio_over_drjax_fit_buffer"] == pytest.approx(
        t["warm_min_s"] / lin[1]["drjax"]["warm_min_s"])
  assert isinstance(lin[0]["under_1s"], bool)
  assert math.isfinite(lin[0]["value_mean"])

  md = offline.markdown(rows)
  for a in numpy_offline.AGENTS:
    assert f"| {a} | 50 | 30 (31) |" in md
  assert "| pevi: " in md and "| drpvi: " in md  # the vs-baseline column
  for r in lin:
    assert f"| {r['program']}: " in md
  assert offline.markdown(put).count("\n|") == 2 + len(put)  # header, rule, one line per row


def test_published_reference_covers_the_grid():
  for n, anchors in offline.PUT_GRID_FULL:
    for a in ("pevi", "drpvi", "r2pvi-tv", "r2pvi-kl", "drvi-l"):
      assert _pos(offline.PUBLISHED[(a, n, anchors)])
  for a in ("va-drpvi", "r2pvi-chi2"):
    assert not any(k[0] == a for k in offline.PUBLISHED)  # none published
  assert {k[0] for k in offline.PUBLISHED} <= set(numpy_offline.AGENTS)
  assert set(offline.PUT_GRID_DEFAULT) <= set(offline.PUT_GRID_FULL)
  # the paper's table: R2PVI-TV at N = 10k, DRVI-L at d = 120
  assert offline.PUBLISHED[("r2pvi-tv", 10000, 30)] == 8.99
  assert offline.PUBLISHED[("drvi-l", 1000, 120)] == 16.19
  assert offline.PUT_HP["reg_weight"] == 1.0


def test_hparams_match_the_registry():
  from drjax.agents import registry  # pylint: disable=g-import-not-at-top
  for a in numpy_offline.AGENTS:
    assert numpy_offline.HPARAMS[a] == tuple(registry.get(a).hparams), a


def _assert_agree(res):
  assert res["dtype"] == "float64"
  for a in numpy_offline.AGENTS:
    assert res[a]["w"] < _tol(a), (a, res[a])
    assert res[a]["pinv"] < TOL, (a, res[a])


@pytest.mark.parametrize("behavior,n,weight", [("fixed", 50, 1.0), ("uniform", 300, 0.05)])
def test_numpy_agrees_with_drjax_put_option(behavior, n, weight):
  # n = 300 > robust.SORT_FREE_MAX_ATOMS (and > robust.RANK_SORT_MAX): drjax's sort +
  # prefix-sum paths; 50: its product path and rank sort, at offline(quick=True)'s put-option
  # sizes (N = 50, 30 anchors, H = 20), so the agents' fit programs are the ones that test
  # compiled. Weight 0.05: R2PVI-KL's log-domain clipping (exp(-20 / 0.05) underflows).
  env = drjax.PutOption(num_anchors=30, horizon=20, variant="notebook")
  b = data.fixed(1) if behavior == "fixed" else data.uniform(env.num_actions)
  res = numpy_offline.check_agreement(env, env.make_params(), b, n, rho=0.1, beta=0.1, lam=1.0,
                                      reg_weight=weight)
  _assert_agree(res)
  for a in ("drpvi", "va-drpvi") + NEW:
    assert res[a]["w_scale"] > 0, a
  if behavior == "uniform":  # exercised options: nonzero rewards for PEVI's regression
    assert res["pevi"]["w_scale"] > 0


@pytest.mark.parametrize("n,rho,weight", [(100, "paper", 1.0), (300, 0.3, 0.2)])
def test_numpy_agrees_with_drjax_linear_mdp(n, rho, weight):
  env = drjax.LinearMDP()
  if rho == "paper":
    rho = np.zeros((env.horizon, env.feature_dim))
    rho[0, 3] = 0.4
  res = numpy_offline.check_agreement(env, env.make_params(xi_norm=0.2),
                                      data.uniform(env.num_actions), n, rho=rho, beta=1.0,
                                      lam=0.1, reg_weight=weight)
  _assert_agree(res)
  for a in numpy_offline.AGENTS:
    assert res[a]["w_scale"] > 0


@pytest.mark.parametrize("n", [50, 300])
def test_tv_nu_matches_drjax_kernel(n):
  """The exact alpha maximization, also off the fast path (targets outside [0, H], invalid
  samples), against ``robust.alpha_max_atoms`` with ``vmin`` = the data minimum."""
  rng = np.random.default_rng(n)
  d, H = 5, 10.0
  # drjax's kernel compiled once for both cases (not op by op).
  alpha_max = jax.jit(lambda pinv, g, v, rho, m: robust.alpha_max_atoms(pinv, g, v, rho, H,
                                                                        vmin=m))
  for lo, hi in ((-2.0, 12.0), (0.0, H)):
    g = rng.standard_normal((n, d))
    v = rng.uniform(lo, hi, n)
    v[: n // 5] = v[n // 5: 2 * (n // 5)]  # ties
    valid = rng.uniform(size=n) > 0.1
    v = np.where(valid, v, 0.0)
    g = g * valid[:, None]
    a = rng.standard_normal((d, d))
    pinv = np.linalg.inv(a @ a.T + np.eye(d))
    rho = rng.uniform(0, 1, d)
    m = v[valid].min()
    want, _ = alpha_max(pinv, g, v, rho, m)
    got = numpy_offline.tv_nu(pinv[None], g[None], v[None], valid[None], rho[None], H)[0]
    np.testing.assert_allclose(got, np.asarray(want), rtol=0, atol=1e-10)


def _kernel_case(rng, n, d, lo, hi):
  """Random atoms: ``g [n, d]`` (0 on invalid samples), targets in ``[lo, hi]`` with ties (0 on
  invalid samples), ``pinv`` SPD."""
  g = rng.standard_normal((n, d))
  v = rng.uniform(lo, hi, n)
  v[: n // 5] = v[n // 5: 2 * (n // 5)]  # ties
  valid = rng.uniform(size=n) > 0.1
  v = np.where(valid, v, 0.0)
  g = g * valid[:, None]
  a = rng.standard_normal((d, d))
  return g, v, valid, np.linalg.inv(a @ a.T + np.eye(d))


def test_regularized_kernels_match_drjax_oracles():
  """R2PVI's three oracles against ``pieces`` (chi2: also targets outside [0, H] -- the general
  path -- and concave and convex pieces; KL: weights small enough that exp underflows)."""
  n = 300  # > robust.RANK_SORT_MAX: drjax's argsort (ties ordered differently from NumPy's)
  rng = np.random.default_rng(n + 1)
  d, H = 5, 10.0
  # drjax's oracles, each compiled once for all its cases (not op by op).
  chi2 = jax.jit(lambda pinv, g, v, weight: pieces.chi2_reg_oracle(pinv, g, v, weight, H))
  tv = jax.jit(pieces.tv_reg_oracle)
  kl = jax.jit(lambda pinv, g, v, valid, m, weight: pieces.kl_reg_oracle(pinv, g, v, valid, m,
                                                                          weight, H))
  for lo, hi in ((-2.0, 12.0), (0.0, H)):
    g, v, valid, pinv = _kernel_case(rng, n, d, lo, hi)
    m = v[valid].min()
    for weight in (rng.uniform(0.5, 3.0, d), np.array([0.01, 0.05, 0.3, 5.0, 50.0])):
      args = (pinv[None], g[None], v[None])
      want = chi2(pinv, g, v, weight)
      got = numpy_offline.chi2_reg_nu(*args, weight[None], H)[0]
      np.testing.assert_allclose(got, np.asarray(want), rtol=1e-12, atol=1e-10)
      if lo < 0:
        continue  # TV / KL: R2PVI's targets are truncated values in [0, top]
      want = tv(pinv, g, v, m, weight)
      got = numpy_offline.tv_reg_nu(*args, np.array([m]), weight[None])[0]
      np.testing.assert_allclose(got, np.asarray(want), rtol=0, atol=1e-10)
      want = kl(pinv, g, v, valid, m, weight)
      got = numpy_offline.kl_reg_nu(*args, valid[None], np.array([m]), weight[None], H)[0]
      assert np.all(np.isfinite(got))
      np.testing.assert_allclose(got, np.asarray(want), rtol=0, atol=1e-10)


def test_kl_search_matches_drjax():
  """DRVI-L's search against ``robust.kl_dual_search``: the same grid, bracket and golden-section
  steps, so the same value to rounding here (radii from 0 to large: optima inside the range and
  at its ends)."""
  n = 200
  rng = np.random.default_rng(n + 2)
  d, H = 6, 10.0
  g, v, valid, pinv = _kernel_case(rng, n, d, 0.0, H)
  g = np.abs(g)  # a nonnegative operator: zhat > 0, the search's interior optima
  rho = np.array([0.0, 0.01, 0.1, 0.5, 2.0, 50.0])
  search = jax.jit(lambda M, v, valid, rho: robust.kl_dual_search(M, v, valid, rho, H))
  for gg in (g, _kernel_case(rng, n, d, 0.0, H)[0]):  # and one with nonpositive zhat
    pinv_ = np.linalg.inv(gg.T @ gg + np.eye(d))
    want = search(pinv_ @ gg.T, v, valid, rho)
    got = numpy_offline.kl_con_nu(pinv_[None], gg[None], v[None], valid[None], rho[None], H)[0]
    np.testing.assert_allclose(got, np.asarray(want), rtol=0, atol=1e-9)
  assert numpy_offline._kl_search_iters(1e-6) == 28  # pylint: disable=protected-access


def test_batched_equals_per_seed_and_prefix_sums():
  env = drjax.LinearMDP()
  params = env.make_params(xi_norm=0.2)
  keys = jax.random.split(jax.random.key(3), 4)
  dss = [numpy_offline.from_drjax(data.collect(env, params, data.uniform(env.num_actions), k,
                                               30)) for k in keys]
  batch = numpy_offline.NpDataset(*(np.stack(x) for x in zip(*dss)))
  kw = dict(rho=0.2, beta=1.0, lam=0.1)
  w_b = numpy_offline.drpvi(batch, **kw)["w"]
  pilot = numpy_offline.NpDataset(*(x[::-1].copy() for x in batch))
  w_vb = numpy_offline.va_drpvi(batch, pilot, **kw)["w"]
  kw_r = dict(reg_weight=0.5, beta=1.0, lam=0.1)
  w_r = {a: numpy_offline.fit(a, batch, **kw_r)["w"] for a in numpy_offline.R2PVI}
  w_l = numpy_offline.drvi_l(batch, **kw)["w"]
  for i, ds in enumerate(dss):
    np.testing.assert_allclose(w_b[i], numpy_offline.drpvi(ds, **kw)["w"], atol=1e-12)
    p = numpy_offline.NpDataset(*(x[len(dss) - 1 - i] for x in batch))
    np.testing.assert_allclose(w_vb[i], numpy_offline.va_drpvi(ds, p, **kw)["w"], atol=1e-12)
    for a, w in w_r.items():
      np.testing.assert_allclose(w[i], numpy_offline.fit(a, ds, **kw_r)["w"], atol=1e-12)
    np.testing.assert_allclose(w_l[i], numpy_offline.drvi_l(ds, **kw)["w"], atol=1e-12)
  x = np.random.default_rng(0).standard_normal((2, 1000 + 7, 3))
  np.testing.assert_allclose(numpy_offline.prefix_sums(x), np.cumsum(x, axis=1), atol=1e-10)
