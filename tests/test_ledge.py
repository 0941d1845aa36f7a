"""The cliff-side traverse (drjax.envs.ledge): the finite model against the traverse's rules written
as NumPy loops and against sampled steps, robust_dp against a loop-based robust DP whose TV worst
case is a linear program (scipy), the route switch at the critical rho against the closed form, and
the continuous environment (shapes, absorbing fail, rewards, traced params, features, a sweep)."""

from __future__ import annotations

import numpy as np
import jax
import jax.numpy as jnp
import pytest
from scipy.optimize import linprog

from drjax import envs, features, ledge_routes, planning
from drjax.envs import ledge
from drjax.envs.ledge import Ledge, LedgeGrid

# A second geometry: a two-row rock band, an early split, the start on the top row.
OTHER = dict(horizon=6, num_rows=6, rock_rows=2, split=3, start_row=5)


def _rules(H, N, b, c, wind):
  """``[H, S, A, S]`` written from the module doc's rules (state N: the fail state)."""
  S, F = N + 1, N
  band = lambda r: 1 <= r <= b  # noqa: E731
  P = np.zeros((H, S, 3, S))
  for h in range(H):
    zone = h + 1 >= c
    for r in range(N):
      for a in range(3):
        target = min(r + (a - 1), N - 1)  # 0 toward the edge, 1 straight, 2 away
        # in the zone the rock stops a move that enters or crosses the band from outside it
        if zone and not band(r) and (band(target) or (target > b) != (r > b)):
          target = r
        for pushed, pr in ((False, 1 - wind), (True, wind)):
          end = target - 1 if pushed else target
          if zone and not band(target) and (band(end) or (end > b) != (target > b)):
            end = target
          if end < 0 or (zone and band(end)):  # fell off the edge / flew into the rock
            P[h, r, a, F] += pr
          else:
            P[h, r, a, end] += pr
    P[h, F, :, F] = 1.0
  return P


def _payoff(N, b, safe):
  return np.array([1.0] + [0.0] * b + [safe] * (N - 1 - b) + [0.0])  # [S], fail last


def _tv_lp(mu, V, rho):
  """``min_nu nu . V`` over distributions with ``(1/2) ||nu - mu||_1 <= rho`` (an LP in ``(nu,
  t)``, ``t >= |nu - mu|``)."""
  S = len(mu)
  c = np.concatenate([V, np.zeros(S)])
  eye = np.eye(S)
  A_ub = np.block([[eye, -eye], [-eye, -eye], [np.zeros((1, S)), 0.5 * np.ones((1, S))]])
  b_ub = np.concatenate([mu, -mu, [rho]])
  A_eq = np.concatenate([np.ones(S), np.zeros(S)])[None]
  res = linprog(c, A_ub=A_ub, b_ub=b_ub, A_eq=A_eq, b_eq=[1.0], bounds=[(0, None)] * (2 * S),
                method="highs")
  assert res.status == 0
  return res.fun


def _robust_dp_lp(P, payoff, rho):
  """Loop-based robust DP from the definition (one-hot features: (s, a)-rectangular)."""
  H, S, A, _ = P.shape
  V = np.zeros(S)
  Q = np.zeros((H, S, A))
  for h in reversed(range(H)):
    for s in range(S):
      for a in range(A):
        r = payoff[s] if h == H - 1 else 0.0
        Q[h, s, a] = r + (_tv_lp(P[h, s, a], V, rho) if h < H - 1 else 0.0)
    V = Q[h].max(-1)
  return Q


def _route_of(P, Q, start, N, b):
  """Where the greedy policy of ``Q`` ends (ledge / plateau), run under ``P``."""
  H = P.shape[0]
  p = np.zeros(P.shape[1])
  p[start] = 1.0
  for h in range(H - 1):
    pi = Q[h].argmax(-1)
    p = p @ P[h, np.arange(len(p)), pi]
  return "ledge" if p[0] > p[b + 1:N].sum() else "plateau"


@pytest.mark.parametrize("geom", [{}, OTHER], ids=["default", "other"])
@pytest.mark.parametrize("wind", [0.1, 0.37])
def test_model_against_the_rules(geom, wind):
  env = LedgeGrid(**geom)
  params = env.make_params(wind=wind, safe_reward=0.4)
  m = env.model(params)
  want = _rules(env.horizon, env.num_rows, env.rock_rows, env.split, wind)
  np.testing.assert_allclose(np.asarray(m.transition), want, atol=1e-12)
  r = _payoff(env.num_rows, env.rock_rows, 0.4)
  np.testing.assert_allclose(np.asarray(m.reward[-1]), np.repeat(r[:, None], 3, 1), atol=1e-12)
  np.testing.assert_array_equal(np.asarray(m.reward[:-1]), 0.0)
  assert int(m.fail_state) == env.num_rows
  assert float(m.init_dist[env.start_row]) == 1.0
  # one-hot features (coordinate 0 at the fail state)
  phi = np.asarray(m.phi)
  assert phi.shape == (env.horizon, env.num_states, 3, 3 * env.num_rows + 1)
  assert ((phi == 0) | (phi == 1)).all() and (phi.sum(-1) == 1).all()


@pytest.mark.parametrize("geom", [{}, OTHER], ids=["default", "other"])
def test_step_frequencies_match_the_model(geom):
  env = LedgeGrid(**geom)
  params = env.make_params(wind=0.3)
  P = np.asarray(env.model(params).transition)
  H, N = env.horizon, env.num_rows
  hs, ss, aa = np.meshgrid(np.arange(H), np.arange(N + 1), np.arange(3), indexing="ij")
  hs, ss, aa = hs.ravel(), ss.ravel(), aa.ravel()
  M = 2000
  keys = jax.random.split(jax.random.key(7), M)

  def one(h, s, a, k):
    st = ledge.LedgeGridState(s=s.astype(jnp.int32), h=h.astype(jnp.int32))
    return env.step(k, st, a, params)[0].s

  nxt = jax.jit(jax.vmap(jax.vmap(one, (None, None, None, 0)), (0, 0, 0, None)))(
      jnp.asarray(hs), jnp.asarray(ss), jnp.asarray(aa), keys)  # [pairs, M]
  freq = np.stack([(np.asarray(nxt) == t).mean(1) for t in range(N + 1)], -1)
  p = P[hs, ss, aa]
  tol = 5 * np.sqrt(p * (1 - p) / M) + 1e-12  # 5 standard errors; exact where p is 0 or 1
  assert (np.abs(freq - p) <= tol).all(), np.abs(freq - p).max()
  # a chi-square statistic over the random rows (two outcomes), against its 0.999 quantile
  rand = (p > 0).sum(-1) == 2
  chi2 = (((freq - p) ** 2 / np.where(p > 0, p, 1)) * M)[rand].sum()
  dof = int(rand.sum())
  assert chi2 < dof + 3.1 * np.sqrt(2 * dof) + 10


@pytest.mark.parametrize("geom", [{}, OTHER], ids=["default", "other"])
def test_continuous_env_moves_row_for_row_as_the_grid(geom):
  cont, grid = Ledge(**geom), LedgeGrid(**geom)
  cp = cont.make_params(wind=0.2, jitter=0.0)
  gp = grid.make_params(wind=0.2)
  H, N = grid.horizon, grid.num_rows
  us, hs, rs, aa = (x.ravel() for x in np.meshgrid([0.05, 0.9], np.arange(H), np.arange(N),
                                                   np.arange(3), indexing="ij"))

  def both(u, h, r, a):  # u < wind: a gust
    h = h.astype(jnp.int32)
    cs = ledge.LedgeState(y=(r + 0.5) * cont.dy, fail=jnp.asarray(False), h=h)
    c2, cr, _ = cont.step_given(jnp.stack([u, jnp.zeros(())]), cs, a, cp)
    g2, gr, _ = grid.step_given(u, ledge.LedgeGridState(s=r.astype(jnp.int32), h=h), a, gp)
    row = jnp.where(c2.fail, N, jnp.floor(c2.y / cont.dy).astype(jnp.int32))
    return row, g2.s, cr, gr

  row, s2, cr, gr = jax.jit(jax.vmap(both))(*(jnp.asarray(x) for x in (us, hs, rs, aa)))
  np.testing.assert_array_equal(np.asarray(row), np.asarray(s2))
  np.testing.assert_array_equal(np.asarray(cr), np.asarray(gr))
  assert (np.asarray(s2) == N).any() and (np.asarray(gr) > 0).any()  # falls and payoffs occur


@pytest.mark.parametrize("geom", [{}, OTHER], ids=["default", "other"])
def test_robust_dp_against_an_lp_robust_dp(geom):
  env = LedgeGrid(**geom)
  params = env.make_params(wind=0.15, safe_reward=0.45)
  model = env.model(params)
  P = _rules(env.horizon, env.num_rows, env.rock_rows, env.split, 0.15)
  pay = _payoff(env.num_rows, env.rock_rows, 0.45)
  dp = jax.jit(planning.robust_dp)
  for rho in (0.0, 0.08, 0.3):
    want = _robust_dp_lp(P, pay, rho)
    got = dp(model, jnp.full((env.horizon, env.feature_dim), rho))
    np.testing.assert_allclose(np.asarray(got.q), want, atol=1e-7)
    assert ledge_routes.route(env, params, rho) == _route_of(P, want, env.start_row, env.num_rows,
                                                      env.rock_rows)


def test_route_switch_at_the_critical_rho():
  env = LedgeGrid()
  params = env.default_params()  # wind 0.1, safe_reward 0.5
  rc = ledge_routes.critical_rho(env, params, tol=1e-7)
  # Hand formula (the module doc): the ledge route spends k = H - split transitions on the ledge,
  # each (1 - wind - rho); the plateau route is safe; every transition loses rho of the mass.
  k, H, w, sr = env.horizon - env.split, env.horizon, 0.1, 0.5
  assert rc == pytest.approx(1 - w / (1 - sr ** (1 / k)), abs=1e-6)
  P = _rules(H, env.num_rows, env.rock_rows, env.split, w)
  pay = _payoff(env.num_rows, env.rock_rows, sr)
  for rho, want in ((rc - 2e-3, "ledge"), (rc + 2e-3, "plateau")):
    Q = _robust_dp_lp(P, pay, rho)
    assert _route_of(P, Q, env.start_row, env.num_rows, env.rock_rows) == want
    assert ledge_routes.route(env, params, rho) == want
    v_ledge = (1 - rho) ** (H - 1 - k) * (1 - w - rho) ** k
    v_plateau = (1 - rho) ** (H - 1) * sr
    assert Q[0, env.start_row].max() == pytest.approx(max(v_ledge, v_plateau), abs=1e-9)
  # the route is monotone in rho: ledge below the switch, plateau above
  table = ledge_routes.route_table(env, params, np.linspace(0, 0.6, 25))
  assert [r for rho, r, _ in table] == ["ledge" if rho < rc else "plateau" for rho, _, _ in table]
  # nominal route per wind: the ledge below wind_c = 1 - sr^(1/k), the plateau above
  wc = ledge_routes.critical_wind(env, params, tol=1e-7)
  assert wc == pytest.approx(1 - sr ** (1 / k), abs=1e-6)
  assert ledge_routes.route(env, env.make_params(wind=wc - 1e-3), 0.0) == "ledge"
  assert ledge_routes.route(env, env.make_params(wind=wc + 1e-3), 0.0) == "plateau"
  # planned at the source wind, run in a stronger one: the robust policy keeps to the plateau
  strong = env.make_params(wind=0.3)
  np.testing.assert_allclose(ledge_routes.route_probabilities(env, strong, rc + 1e-3, params),
                             [0, 1, 0], atol=1e-12)
  np.testing.assert_allclose(ledge_routes.route_probabilities(env, strong, 0.0, params),
                             [0.7 ** k, 0, 1 - 0.7 ** k], atol=1e-9)


def test_continuous_env_basics():
  env = Ledge()
  params = env.default_params()
  step, step_given, phi_all = (jax.jit(f) for f in (env.step, env.step_given, env.phi_all))
  assert env.num_actions == 3 and env.feature_dim == 3 * 11
  s = env.reset(jax.random.key(0), params)
  assert s.y.shape == () and int(s.h) == 0 and not bool(s.fail)
  phi = phi_all(s, params)
  assert phi.shape == (3, env.feature_dim)
  np.testing.assert_allclose(np.asarray(phi.sum(-1)), 1.0, rtol=1e-6)
  # features valid on the whole box, x and y read too
  ys = np.linspace(-0.2, 1.2, 57)[:, None]
  features.check_feature_map(env.feature_map, ys, 3)
  env2 = Ledge(obs_dims=(0, 1))
  grid = np.stack(np.meshgrid(np.linspace(0, 1, 9), np.linspace(0, 1, 9)), -1).reshape(-1, 2)
  features.check_feature_map(lambda o: env2.phi_all(
      ledge.LedgeState(y=o[1], fail=jnp.asarray(False), h=(o[0] * 10).astype(jnp.int32)),
      env2.default_params()), grid, 3)
  # steering toward the edge from the ledge is a fall; the fail state is absorbing, zero-valued
  st = ledge.LedgeState(y=jnp.asarray(0.1), fail=jnp.asarray(False), h=jnp.asarray(2, jnp.int32))
  s1, r1, _ = step_given(jnp.asarray([0.9, 0.0]), st, 0, params)
  assert bool(s1.fail) and float(r1) == 0.0 and bool(env.is_fail(s1, params))
  s2, r2, _ = step(jax.random.key(1), s1._replace(h=jnp.asarray(9, jnp.int32)), 2, params)
  assert bool(s2.fail) and float(r2) == 0.0 and float(s2.y) == float(s1.y)
  np.testing.assert_array_equal(np.asarray(phi_all(s2, params)), 0.0)
  # rewards: the payoff at the last step only, in {0, safe_reward, 1}
  for y, want in ((0.1, 1.0), (0.3, 0.0), (0.7, 0.5)):
    for h, w in ((9, want), (8, 0.0)):
      st = ledge.LedgeState(y=jnp.asarray(y), fail=jnp.asarray(False), h=jnp.asarray(h, jnp.int32))
      _, r, done = step_given(jnp.asarray([0.9, 0.0]), st, 1, params)
      assert float(r) == w and bool(done) == (h == 9)


def _policy(kind, env):
  """Hand policies of the continuous traverse on rows: the ledge route and the plateau route."""
  def act(h, y):
    row = jnp.floor(y / env.dy)
    if kind == "ledge":
      tgt = jnp.where(h + 1 < env.split - 1, 2, jnp.where(h + 1 == env.split - 1, 1, 0))
    else:
      tgt = jnp.asarray(3)
    return jnp.where(row > tgt, 0, jnp.where(row < tgt, 2, 1)).astype(jnp.int32)
  return act


def test_params_are_traced_a_vmap_over_wind():
  env = Ledge()
  src = env.make_params(jitter=0.0)
  winds = jnp.asarray([0.0, 0.1, 0.3, 1.0])
  targets = env.target_params(src, "wind", winds)
  assert targets.wind.shape == (4,) and targets.gust.shape == (4,)

  def ret(params, key):  # the returns of the ledge route and of the plateau route
    def one(act):
      def body(s, h):
        s, r, _ = env.step(jax.random.fold_in(key, h), s, act(s.h, s.y), params)
        return s, r
      return jax.lax.scan(body, env.reset(key, params), jnp.arange(env.horizon))[1].sum()
    return jnp.stack([one(_policy("ledge", env)), one(_policy("plateau", env))])

  keys = jax.random.split(jax.random.key(3), 3000)
  R = np.asarray(jax.jit(jax.vmap(jax.vmap(ret, (None, 0)), (0, None)))(targets, keys))
  assert set(np.unique(R)) <= {0.0, 0.5, 1.0}  # [4 winds, 3000 keys, 2 routes]
  want = np.stack([(1 - np.asarray(winds)) ** 5, np.full(4, 0.5)], -1)
  np.testing.assert_allclose(R.mean(1), want, atol=4 * np.sqrt(0.25 / 3000) + 1e-12)


def test_bad_inputs_name_the_argument():
  with pytest.raises(ValueError, match="split"):
    LedgeGrid(split=10)
  with pytest.raises(ValueError, match="rock_rows"):
    Ledge(num_rows=4, rock_rows=3)
  with pytest.raises(ValueError, match="wind"):
    LedgeGrid().make_params(wind=1.5)
  with pytest.raises(ValueError, match="gust"):
    Ledge().make_params(gust=0.0)
  with pytest.raises(ValueError, match="jitter"):
    Ledge().target_params(Ledge().default_params(), "jitter", [0.1, -1.0])
  with pytest.raises(ValueError, match="target family"):
    Ledge().target_params(Ledge().default_params(), "mass", 1.0)
  with pytest.raises(TypeError, match="LedgeParams"):
    Ledge().reset(jax.random.key(0), LedgeGrid().default_params())


def test_registered_for_make_and_sweeps():
  assert isinstance(envs.make("ledge"), Ledge)
  assert isinstance(envs.make("ledge-grid", horizon=8, split=4), LedgeGrid)
  assert envs.SWEEP_SPECS["ledge"].targets == ("wind", "gust", "jitter")
  assert envs.SWEEP_SPECS["ledge-grid"].target == "wind"
  # the recommended online beta / lambda measure the bonus against the largest return, 1
  from drjax.envs import recommend  # pylint: disable=g-import-not-at-top
  assert recommend.return_bound(envs.make("ledge")) == 1.0
  assert envs.SWEEP_SPECS["ledge"].hparams(envs.make("ledge-grid"))["online"] == {
      "beta": 0.4, "lam": 0.01}  # one-hot features: the width gap is 1; 4 * 1 * sqrt(0.01) / 1


def test_a_learned_agent_runs_through_the_sweep():
  from drjax import sweeps  # pylint: disable=g-import-not-at-top
  res = sweeps.run(sweeps.SweepConfig(
      env="ledge", agents=("lsvi-ucb",), seeds=2, episodes=3, beta=(1.0,), lam=(0.1,),
      targets=("wind", 0.0, 0.5, 3), test_episodes=8))
  df = res.df  # the played (optimistic) and the greedy (bonus-free) policy: the spec's modes
  assert len(df) == 2 * 3 * 2 and sorted(df.policy.unique()) == ["greedy", "played"]
  assert sorted(df.target_wind.unique()) == [0.0, 0.25, 0.5]
  assert df.value.between(0, 1).all() and df.train_return.between(0, 1).all()


def test_the_docs_quote_the_exact_answer():
  import os  # pylint: disable=g-import-not-at-top
  import re  # pylint: disable=g-import-not-at-top
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  with open(os.path.join(root, "docs", "environments.md"), encoding="utf-8") as f:
    text = f.read()
  env = LedgeGrid()
  src = env.default_params()
  rows = re.findall(r"^\| ([0-9.]+) \| (ledge|plateau) \| ([0-9.]+) \|$", text, re.M)
  assert len(rows) >= 5
  for (rho, route, value), (_, got_route, got_value) in zip(
      rows, ledge_routes.route_table(env, src, [float(r[0]) for r in rows])):
    assert route == got_route and float(value) == round(got_value, 4), rho
  rc, wc = ledge_routes.critical_rho(env, src), ledge_routes.critical_wind(env, src)
  assert f"`rho < {rc:.4f}`" in text and f"`rho_c = 1 - wind / wind_c = {rc:.4f}`" in text
  assert f"safe_reward^(1/k) = {wc:.4f}`" in text
  routes = [ledge_routes.route(env, env.make_params(wind=w)) for w in (0.1, 0.15)]
  assert routes == ["ledge", "plateau"]
  for sr, quoted in ((0.4, "`rho_c =\n0.4028` (`wind_c = 0.1674`)"), (0.6, "(`wind_c = 0.0971`)")):
    p = env.make_params(safe_reward=sr)
    assert quoted in text
    nums = [float(x) for x in re.findall(r"0\.\d{4}", quoted)]
    got = ([ledge_routes.critical_wind(env, p)] if len(nums) == 1
           else [ledge_routes.critical_rho(env, p), ledge_routes.critical_wind(env, p)])
    assert nums == [round(x, 4) for x in got]
  assert ledge_routes.critical_rho(env, env.make_params(safe_reward=0.6)) is None


@pytest.mark.parametrize("which", ["ledge", "ledge-grid"])
def test_step_equals_step_given_its_noise(which):
  env = envs.make(which)
  params = env.default_params()

  def both(key, y, h, a):
    if which == "ledge":
      s = ledge.LedgeState(y=y, fail=jnp.asarray(False), h=h)
    else:
      s = ledge.LedgeGridState(s=(y * 5).astype(jnp.int32), h=h)
    return env.step(key, s, a, params), env.step_given(env.step_noise(key, params), s, a, params)

  n = 64
  keys = jax.random.split(jax.random.key(5), n)
  ys = jax.random.uniform(jax.random.key(6), (n,))
  hs = jnp.arange(n, dtype=jnp.int32) % env.horizon
  a_s = jnp.arange(n, dtype=jnp.int32) % 3
  one, two = jax.jit(jax.vmap(both))(keys, ys, hs, a_s)
  for x, y in zip(jax.tree_util.tree_leaves(one), jax.tree_util.tree_leaves(two)):
    np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
