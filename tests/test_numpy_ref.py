"""The NumPy baselines of drjax/bench/numpy_ref.py: the same algorithm as drjax, checked two ways.

1. On identical data (drjax's trajectories replayed), the NumPy planners give drjax's Q-functions
   (``w``, ``Lambda^-1``) to 1e-8 and the same greedy actions at every episode, in both the buffer
   and the sufficient-statistics form (float64; the conftest enables x64). The kernels are also
   checked against the brute-force oracle (tests/oracle.py), and the environments' arrays against
   drjax's.
2. With their own random numbers, the NumPy and drjax runs have the same mean return within 4
   standard errors.
"""


import jax
import jax.numpy as jnp
import numpy as np
import oracle
import pytest

from drjax import robust
from drjax.agents.base import AgentState, StatsState, make_hparams, rho_array
from drjax.agents.lsvi import dr_lsvi_ucb
from drjax.envs.base import LinearModel
from drjax.envs.linear_mdp import LinearMDP
from drjax.envs.put_option import PutOption, PutOptionState
from drjax.envs.random_mdp import RandomLinearMDP
from drjax.train import make_train

from drjax.bench import numpy_ref as ref
from drjax.bench import numpy_ref_kernels

K = 12
TOL = 1e-8
F64 = np.float64


def _drjax_run(env, params, rho, form, k=K, beta=1.0, lam=0.1):
  H, d, A = env.horizon, env.feature_dim, env.num_actions
  agent = dr_lsvi_ucb(H, d, A, k)
  hp = make_hparams(H, d, rho=rho, beta=beta, lam=lam)
  out = jax.jit(make_train(env, agent, k, record_q=True, form=form))(jax.random.PRNGKey(3), hp,
                                                                      params)
  return jax.tree_util.tree_map(np.asarray, out), hp


def _assert_same_greedy(q, action, where):
  """drjax's action maximizes the NumPy Q; the same action unless the top two are within 1e-12.

  The optimistic tie-break compares unclipped values: mathematically tied actions (e.g. every
  action at episode 0, where Q = sum_i phi_i sqrt(1 / lam) and the features sum to 1) are ordered
  by rounding, which depends on the summation order of each implementation.
  """
  q = np.asarray(q)
  best = int(np.argmax(q))
  assert q[action] >= q[best] - 1e-12, (where, q, action)
  second = np.max(np.delete(q, best)) if q.size > 1 else -np.inf
  if q[best] - second > 1e-12:
    assert best == action, (where, q, action)


def _replay(theta, phi, next_phi, next_fail, next_state, rho, beta, lam, form, phi_tab=None,
            fail=None):
  """Plans every episode k on the first k of the given transitions with the NumPy machinery
  (Sherman-Morrison, ridge rows kept up to date by rank-1 steps), one seed.

  Args: phi [H, K, d], next_phi [H, K, A, d], next_fail [H, K], next_state [H, K] (stats form).

  Yields (k, w [H, d], u [H, d], qraw or None).
  """
  H, Kr, d = phi.shape
  S = None if phi_tab is None else phi_tab.shape[1]
  pinv = np.broadcast_to(np.eye(d) / lam, (H, 1, d, d)).copy()
  rows = np.zeros((H, 1, S if form == "stats" else Kr, d))
  nphi = None if next_phi is None else next_phi.transpose(0, 3, 1, 2)[:, None]  # [H,1,d,K,A]
  nfail = None if next_fail is None else next_fail[:, None]
  for k in range(Kr):
    if form == "stats":
      w, qraw = ref.plan_stats(theta, pinv, rows, phi_tab, fail, rho, beta)
      u = w[:, 0] + beta * ref.sqrt_diag(pinv[:, 0])
    else:
      w, u = ref.plan_buffer(theta, pinv, rows, nphi, nfail, k, rho, beta)
      qraw, u = None, u[:, 0]
    yield k, w[:, 0], u, qraw
    new = ref.sherman_morrison(pinv, phi[:, k, None])
    if form == "stats":
      ref.update_rows(rows, phi[:, k, None], new)
      rows[np.arange(H), 0, next_state[:, k]] += new[:, 0]
    else:
      ref.update_rows(rows[:, :, :k], phi[:, k, None], new)
      rows[:, :, k] = new


def test_linear_mdp_planning_and_actions_equal_drjax_in_both_forms():
  """drjax's buffer-form run, replayed by the NumPy buffer and sufficient-statistics planners."""
  env = LinearMDP()
  params = env.make_params(delta=0.3, p=0.001, xi_norm=0.2)
  out, hp = _drjax_run(env, params, rho_array(3, 4, 0.5, at=[(0, 3)]), "buffer")
  rho = np.asarray(hp.rho)
  model = ref.linear_mdp_model(xi_norm=0.2)
  theta, tab, fail = model.theta, model.phi, model.fail_state
  states, actions, st = out.states, out.actions, out.state  # [K, H]
  H = env.horizon
  # The transitions, rebuilt from the visited states and actions, equal drjax's buffers.
  phi = np.stack([tab[h][states[:, h], actions[:, h]] for h in range(H)])  # [H, K, d]
  nxt = np.zeros((H, K), int)  # the last step's next states never enter a plan (V_{H+1} = 0)
  nxt[:H - 1] = states[:, 1:].T
  np.testing.assert_array_equal(st.phi, phi)
  for h in range(H - 1):
    np.testing.assert_array_equal(st.next_phi[h], tab[h + 1][nxt[h]])
  for form in ("buffer", "stats"):
    replay = _replay(theta, phi, st.next_phi, st.next_fail, nxt, rho, 1.0, 0.1, form,
                     phi_tab=tab, fail=fail)
    for k, w, u, qraw in replay:
      np.testing.assert_allclose(w, out.qf.w[k], atol=TOL, rtol=0, err_msg=f"{form}, {k}")
      sd = np.sqrt(np.diagonal(out.qf.pinv[k], axis1=-2, axis2=-1))
      np.testing.assert_allclose(u, out.qf.w[k] + sd, atol=TOL, rtol=0)
      for h in range(H):  # the NumPy greedy action at drjax's state = drjax's action
        s = states[k, h]
        q = qraw[h, s, :, 0] if form == "stats" else tab[h][s] @ u[h] * (s != fail)
        _assert_same_greedy(q, actions[k, h], (form, k, h))
  # The final plan on all K episodes from drjax's stored Gram matrices and buffers.
  pinv = np.linalg.inv(st.gram + 0.1 * np.eye(4))[:, None]
  w, _ = ref.plan_buffer(theta, pinv, ref.ridge_rows(pinv, st.phi[:, None]),
                         st.next_phi.transpose(0, 3, 1, 2)[:, None], st.next_fail[:, None],
                         K, rho, 1.0)
  np.testing.assert_allclose(w[:, 0], out.final_qf.w, atol=TOL, rtol=0)


def test_random_drmdp_stats_planning_equals_drjax_plan():
  """drjax's ``agent.plan`` on a ``StatsState`` built from NumPy data == ``plan_stats``."""
  H, S, A, d = 4, 7, 3, 5
  m = ref.random_model(S=S, A=A, d=d, H=H, seed=3)
  agent = dr_lsvi_ucb(H, d, A, 50)
  rho = np.random.default_rng(0).uniform(0.0, 0.7, size=(H, d))
  hp = make_hparams(H, d, rho=rho, beta=0.8, lam=0.4)
  model = LinearModel(phi=jnp.asarray(m.phi), theta=jnp.asarray(m.theta), mu=jnp.asarray(m.mu),
                      reward=jnp.einsum("hsad,hd->hsa", m.phi, m.theta),
                      fail_state=jnp.asarray(m.fail_state, jnp.int32),
                      init_dist=jnp.asarray(m.init_dist))
  plan = jax.jit(agent.plan)
  rng = np.random.default_rng(1)
  for n in (0, 3, 40):  # stored transitions per step
    s, a, s2 = (rng.integers(0, S, (H, n)), rng.integers(0, A, (H, n)),
                rng.integers(0, S, (H, n)))
    phi = m.phi[np.arange(H)[:, None], s, a]  # [H, n, d]
    gram = np.einsum("hti,htj->hij", phi, phi)
    G = np.zeros((H, S, d))
    for h in range(H):
      np.add.at(G[h], s2[h], phi[h])
    st = StatsState(theta=jnp.asarray(m.theta), gram=jnp.asarray(gram), phir=jnp.zeros((H, d)),
                    pinv=None, G=jnp.asarray(G), count=jnp.asarray(n, jnp.int32))
    want = plan(st, hp, model)
    pinv = np.linalg.inv(gram + 0.4 * np.eye(d))[:, None]
    w, qraw = ref.plan_stats(m.theta, pinv, ref.ridge_rows(pinv, G[:, None]), m.phi,
                             m.fail_state, rho, 0.8)
    np.testing.assert_allclose(w[:, 0], np.asarray(want.w), atol=TOL, rtol=0, err_msg=str(n))
    for h in range(H):
      for x in range(S):  # the NumPy greedy action at every state == drjax's act
        fail = jnp.asarray(x == m.fail_state)
        a_dr = int(agent.act(want, h, jnp.asarray(m.phi[h, x]), fail))
        _assert_same_greedy(qraw[h, x, :, 0], a_dr, (n, h, x))


def test_put_option_buffer_planning_equals_drjax_plan():
  """drjax's ``agent.plan`` on an ``AgentState`` (buffer, count k of K slots) == ``plan_buffer``."""
  env = PutOption(num_anchors=6, horizon=5)  # small, to compile fast; same code paths
  H, d, A, Kc = env.horizon, env.feature_dim, env.num_actions, 30
  theta = np.asarray(env.theta(env.default_params()))
  rng = np.random.default_rng(2)
  price = rng.uniform(85.0, 115.0, (H, Kc))
  exited = rng.random((H, Kc)) < 0.2
  act = rng.integers(0, 2, (H, Kc))
  f = ref.put_features(price.ravel(), exited.ravel(), env.anchors, env.spacing)
  phi = f[np.arange(H * Kc), act.ravel()].reshape(H, Kc, d)
  ex2 = exited | (act == 0)
  p2 = np.where(ex2, price, price * np.where(rng.random((H, Kc)) < 0.5, 1.02, 0.98))
  nphi = ref.put_features(p2.ravel(), ex2.ravel(), env.anchors, env.spacing).reshape(H, Kc, A, d)
  agent = dr_lsvi_ucb(H, d, A, Kc)
  hp = make_hparams(H, d, rho=0.3, beta=1.0, lam=0.1)
  plan = jax.jit(agent.plan)
  for k in (0, 1, 17, Kc):
    gram = np.einsum("hti,htj->hij", phi[:, :k], phi[:, :k])
    st = AgentState(theta=jnp.asarray(theta), gram=jnp.asarray(gram), phir=jnp.zeros((H, d)),
                    pinv=None, phi=jnp.asarray(phi), reward=jnp.zeros((H, Kc)),
                    next_phi=jnp.asarray(nphi), next_fail=jnp.asarray(ex2),
                    count=jnp.asarray(k, jnp.int32))
    want = plan(st, hp)
    pinv = np.linalg.inv(gram + 0.1 * np.eye(d))[:, None]
    w, _ = ref.plan_buffer(theta, pinv, ref.ridge_rows(pinv, phi[:, None]),
                           nphi.transpose(0, 3, 1, 2)[:, None], ex2[:, None], k,
                           np.asarray(hp.rho), 1.0)
    np.testing.assert_allclose(w[:, 0], np.asarray(want.w), atol=TOL, rtol=0, err_msg=str(k))


def test_put_features_equal_drjax():
  env = PutOption()
  prices = np.linspace(60.0, 150.0, 181)
  exited = np.arange(prices.size) % 7 == 0
  mine = ref.put_features(prices, exited, env.anchors, env.spacing)
  st = PutOptionState(price=jnp.asarray(prices), exited=jnp.asarray(exited),
                      h=jnp.zeros(prices.shape, jnp.int32))
  want = jax.jit(jax.vmap(env.phi_all, in_axes=(0, None)))(st, env.default_params())
  np.testing.assert_allclose(mine, np.asarray(want), atol=1e-12)


def test_linear_mdp_model_equals_drjax():
  env = LinearMDP()
  m = jax.jit(env.model)(env.make_params(delta=0.3, p=0.01, xi_norm=0.2))
  mine = ref.linear_mdp_model(delta=0.3, p=0.01, xi_norm=0.2)
  for f in ("phi", "mu", "theta", "init_dist"):
    np.testing.assert_allclose(getattr(mine, f), np.asarray(getattr(m, f)), atol=1e-15)
  assert mine.fail_state == int(m.fail_state)


def test_random_model_is_a_valid_drmdp():
  m = ref.random_model(S=6, A=3, d=5, H=4, seed=1)
  RandomLinearMDP(6, 3, 5, 4).make_params(m.phi, m.theta, m.mu, m.fail_state, m.init_dist)


@pytest.mark.parametrize("sort,row_add_min", [(False, 256), (True, 256), (True, 0)])
def test_alpha_max_equals_brute_force_and_drjax(sort, row_add_min, monkeypatch):
  # row_add_min = 0: the wide layout (atoms first, prefix sums by row adds) even for N d = 12.
  monkeypatch.setattr(numpy_ref_kernels, "ROW_ADD_MIN", row_add_min)  # read where alpha_max is
  rng = np.random.default_rng(5)
  N, n, d, H, lam = 3, 9, 4, 3.0, 0.3
  g = rng.uniform(0, 1, (N, n, d))
  v = rng.choice([0.0, 0.5, 1.25, 2.0, 3.0], size=(N, n))  # ties and both ends of [0, H]
  rho = rng.uniform(0, 1, (N, d))
  pinv = np.linalg.inv(lam * np.eye(d) + np.einsum("nti,ntj->nij", g, g))
  rows = ref.ridge_rows(pinv, g)
  nu = ref.alpha_max(rows, v, rho, H, sort=sort)
  part = ref.alpha_max(rows, v[:, :5], rho, H, sort=sort)  # the first 5 atoms of a larger buffer
  for i in range(N):  # brute force with the full buffer's Lambda^-1 and only 5 atoms
    cands = [0.0, H] + list(v[i, :5])
    want = [max(pinv[i][j] @ sum(g[i, t] * min(v[i, t], a) for t in range(5)) - rho[i, j] * a
                for a in cands) for j in range(d)]
    np.testing.assert_allclose(part[i], want, atol=1e-12)
  got, _ = jax.jit(jax.vmap(robust.alpha_max_atoms, in_axes=(0, 0, 0, 0, None)))(
      jnp.asarray(pinv), jnp.asarray(g), jnp.asarray(v), jnp.asarray(rho), jnp.asarray(H))
  np.testing.assert_allclose(nu, np.asarray(got), atol=1e-12)
  for i in range(N):
    want, _ = oracle.brute_nu(g[i], v[i], lam, rho[i], H)
    np.testing.assert_allclose(nu[i], want, atol=1e-12)


def test_sherman_morrison_and_row_updates_equal_direct_solves():
  rng = np.random.default_rng(6)
  H, N, n, d, lam = 2, 3, 5, 4, 0.2
  pinv = np.broadcast_to(np.eye(d) / lam, (H, N, d, d)).copy()
  g = rng.uniform(0, 1, (H, N, n, d))
  rows = ref.ridge_rows(pinv, g)
  gram = np.zeros((H, N, d, d))
  for _ in range(6):
    phi = rng.uniform(0, 1, (H, N, d))
    gram += phi[..., :, None] * phi[..., None, :]
    ref.update_rows(rows, phi, ref.sherman_morrison(pinv, phi))
  direct = np.linalg.inv(gram + lam * np.eye(d))
  np.testing.assert_allclose(pinv, direct, atol=1e-10)
  np.testing.assert_allclose(rows, ref.ridge_rows(direct, g), atol=1e-10)


def test_forms_and_ridge_variants_give_identical_runs():
  runs = {(f, r): ref.linear_mdp(10, 25, form=f, ridge=r, seed=1, dtype=F64)
          for f in ("stats", "buffer") for r in ("update", "solve")}
  base = runs["stats", "update"]
  for key, ret in runs.items():
    np.testing.assert_allclose(ret, base, atol=1e-12, err_msg=str(key))
  m = ref.random_model(S=6, A=3, d=5, H=4, seed=2)
  a = ref.random_drmdp(5, 15, model=m, rho=0.2, form="stats", dtype=F64)
  b = ref.random_drmdp(5, 15, model=m, rho=0.2, form="buffer", ridge="solve", dtype=F64)
  np.testing.assert_allclose(a, b, atol=1e-12)
  c = ref.put_option(4, 6, ridge="update", dtype=F64)
  e = ref.put_option(4, 6, ridge="solve", dtype=F64)
  np.testing.assert_allclose(c, e, atol=1e-10)


def test_mean_return_agrees_with_drjax():
  res = ref.check_agreement("linear_mdp", 200, 30, form="stats", seed=0, dtype=F64)
  assert res["numpy_se"] > 0 and res["drjax_se"] > 0
  assert abs(res["z"]) < 4, res


def test_bad_options_raise():
  with pytest.raises(ValueError, match="form"):
    ref.linear_mdp(2, 2, form="dense")
  with pytest.raises(ValueError, match="ridge"):
    ref.put_option(2, 2, ridge="qr")
  with pytest.raises(ValueError, match="workload"):
    ref.check_agreement("cartpole", 2, 2)
