"""The notebook preset's put option is the authors' algorithm: an independent loop-based
re-implementation of the notebook's update (written from its description in
shared/notes/reference-implementation.md and issue 11, not from drjax's code) replays the same
stored histories and must give the same Q-values (1e-10, float64) and greedy actions."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import drjax.paper as P
from drjax.agents.base import make_hparams
from oracle import brute_nu

K = 8


def notebook_replay(hold, reward, next_hold, next_payoff, next_exit, rho, beta, lam, robust):
  """Per episode k: the hold Q weights w [H, d] and Lambda^-1 [H, d, d] of the notebook.

  Q_hold(s) = min(w_h . phi(s) + bonus, top) (no floor), top = H - h (DR) or H (LSVI);
  V_{h+1}(s') = max(Q_hold(s'), payoff(s')), 0 in the exit state and after the last step;
  regressions on the hold features of every stored step-h state, whatever was played, except at
  the last step h = H, where neither algorithm regresses anything for hold: DR-LSVI-UCB's w_H is
  nu_H = 0 (hold pays nothing) and the authors' LSVI-UCB sets w_H = 0 (issue 20), so there
  Q_hold = min(bonus, top).
  """
  H, _, d = hold.shape
  out = []
  for k in range(K):
    w = np.zeros((H, d))
    linv = np.zeros((H, d, d))
    for h in reversed(range(H)):
      lam_mat = lam * np.eye(d)
      for t in range(k):
        lam_mat += np.outer(hold[h, t], hold[h, t])
      linv[h] = np.linalg.inv(lam_mat)
      v = np.zeros(k)
      for t in range(k):
        if h == H - 1 or next_exit[h, t]:
          continue
        x = next_hold[h, t]
        if robust:
          bonus = beta * np.sqrt(sum(x[i] ** 2 * linv[h + 1][i, i] for i in range(d)))
          top = H - (h + 1)
        else:
          bonus = beta * np.sqrt(x @ linv[h + 1] @ x)
          top = H
        q_hold = min(w[h + 1] @ x + bonus, top)
        v[t] = max(q_hold, next_payoff[h, t])
      if robust:
        nu = np.zeros(d) if h == H - 1 else brute_nu(hold[h, :k], v, lam, rho[h], H)[0]
        w[h] = nu  # theta of the hold action is 0: holding pays nothing
      elif h == H - 1:
        w[h] = 0.0  # the authors' LSVI-UCB: no regression at the last step, w_H = 0
      else:
        b = np.zeros(d)
        for t in range(k):
          b += hold[h, t] * (reward[h, t] + v[t])
        w[h] = linv[h] @ b
    out.append((w, linv))
  return out


@pytest.mark.parametrize("seed", [1, 0])
@pytest.mark.parametrize("agent_name", ["dr-lsvi-ucb", "lsvi-ucb"])
def test_notebook_put_option_equals_the_notebook_algorithm(agent_name, seed):
  """Seed 0's history exercises at the last step (LSVI-UCB: episode 2 of 8), so the later
  episodes' Q depend on the last-step rule (w_H = 0 vs a regression of the payoffs)."""
  s = P.setup("notebook", "put-option", episodes=K)
  env, agent = s.env, s.agents[agent_name]
  H, d = env.horizon, env.feature_dim
  robust = agent_name == "dr-lsvi-ucb"
  rho = np.full((H, d), 0.3)
  hp = make_hparams(H, d, rho=rho, beta=s.beta, lam=s.lam)
  params = s.params._replace(init_low=jnp.asarray(88.0), init_high=jnp.asarray(100.0))
  out = jax.jit(drjax_make_train(env, agent))(jax.random.PRNGKey(seed), hp, params)
  st = jax.tree_util.tree_map(np.asarray, out.state)
  hold = st.phi  # regression rows: the hold action's features at s_h
  next_hold, next_payoff = st.next_phi[:, :, 1], st.next_phi[:, :, 0, -1]
  # The regression rows really are the hold features (exercised steps included).
  assert np.all(hold[..., -1] == 0)
  assert (np.asarray(out.actions) == 0).any(), "no exercise in this history: weak test"
  if seed == 0:  # an exercise at the last step before the last episode: the rule matters
    assert (st.reward[H - 1, :K - 1] > 0).any(), "no last-step exercise: weak test"
  ref = notebook_replay(hold, st.reward, next_hold, next_payoff, st.next_fail, rho, s.beta,
                        s.lam, robust)
  s0 = env.reset(jax.random.PRNGKey(0), params)  # only used for its structure
  del s0
  for k in range(K):
    w_ref, linv_ref = ref[k]
    qf = jax.tree_util.tree_map(lambda x: np.asarray(x)[k], out.qf)
    np.testing.assert_allclose(qf.w[:, :-1], w_ref[:, :-1], atol=1e-10, err_msg=f"w, ep {k}")
    np.testing.assert_allclose(qf.pinv[:, :-1, :-1], linv_ref[:, :-1, :-1], atol=1e-10)
    for h in range(1, H):
      x = next_hold[h - 1, k]
      pay = next_payoff[h - 1, k]
      if robust:
        bonus = s.beta * np.sqrt(np.sum(x ** 2 * np.diag(linv_ref[h])))
        top = H - h
      else:
        bonus = s.beta * np.sqrt(x @ linv_ref[h] @ x)
        top = H
      q_hold = min(w_ref[h] @ x + bonus, top)
      exited = bool(st.next_fail[h - 1, k])
      q_ref = np.array([0.0, 0.0]) if exited else np.array([pay, q_hold])
      q = np.asarray(agent.q_values(jax.tree_util.tree_map(jnp.asarray, qf), h,
                                    jnp.asarray(st.next_phi[h - 1, k]), exited))
      np.testing.assert_allclose(q, q_ref, atol=1e-10, err_msg=f"Q, ep {k}, step {h}")
      if not exited:  # argmax([Q_hold, payoff]): ties go to hold (action 1)
        assert int(out.actions[k, h]) == (1 if q_hold >= pay else 0), (k, h)


def drjax_make_train(env, agent):
  from drjax.train import make_train
  return make_train(env, agent, K, record_q=True, form="buffer")


def test_presets_are_public_and_validated():
  s = P.setup("paper", "linear-mdp", episodes=10, xi_norm=0.2)
  assert set(s.agents) == {"dr-lsvi-ucb", "lsvi-ucb"} and float(s.params.xi_norm) == 0.2
  assert s.agents["lsvi-ucb"].config.fail_zero and s.agents["dr-lsvi-ucb"].config.known is None
  with pytest.raises(ValueError, match="preset must be one of"):
    P.setup("authors", "linear-mdp")
  with pytest.raises(ValueError, match="experiment must be one of"):
    P.setup("paper", "cartpole")


@pytest.mark.parametrize("agent_name", ["dr-lsvi-ucb", "lsvi-ucb"])
def test_notebook_put_ties_go_to_hold(agent_name):
  """argmax([Q_hold, payoff]) of the notebook picks hold on an exact tie, exercise just above.

  Hand-built Q-functions (no regression): hold features ``e_0``, weight ``w[h, 0] = q`` and
  ``beta = 0``, so ``Q_hold = min(q, top) = q`` exactly; the exercise row's payoff coordinate is
  set to ``q`` (a tie: hold), to the next float above ``q`` (exercise) and below it (hold). Learned histories
  never produce exact ties, so only this pins the rule.
  """
  s = P.setup("notebook", "put-option", episodes=K)
  env, agent = s.env, s.agents[agent_name]
  H, d = env.horizon, env.feature_dim
  EXERCISE, HOLD = 0, 1
  for q in (0.0, 0.5, 2.0, 3.25):
    w = np.zeros((H, d))
    w[:, 0] = q
    qf = drjax_qfunction(H, d, w)
    for h in (0, 1, H // 2):  # top = H - h >= 5 > q: no truncation
      above = np.nextafter(q, np.inf) if q > 0 else 1e-300  # (XLA flushes subnormals to 0)
      for payoff, want in ((q, HOLD), (above, EXERCISE),
                           (np.nextafter(q, -np.inf) if q > 0 else None, HOLD)):
        if payoff is None:
          continue
        phi_all = np.zeros((2, d))
        phi_all[HOLD, 0] = 1.0
        phi_all[EXERCISE, -1] = payoff
        qv = np.asarray(agent.q_values(qf, h, jnp.asarray(phi_all), False))
        assert qv[HOLD] == q and qv[EXERCISE] == payoff, (qv, q, payoff)
        a = int(agent.act(qf, h, jnp.asarray(phi_all), False))
        assert a == want, (agent_name, q, payoff, h, a)


def drjax_qfunction(H, d, w):
  from drjax.agents.base import QFunction
  return QFunction(w=jnp.asarray(w), pinv=jnp.broadcast_to(jnp.eye(d), (H, d, d)),
                   beta=jnp.asarray(0.0), top=jnp.arange(H, 0, -1).astype(jnp.float64),
                   nu=jnp.zeros((H, d)), alpha=jnp.zeros((H, d)))
