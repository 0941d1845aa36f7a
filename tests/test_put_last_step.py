"""The last-step rule of the known-action agent (issue 20): the authors' put-option LSVI-UCB
regresses nothing for hold at the last step (``w_H = 0``, so ``Q_hold = min(bonus, top)``);
``KnownAction.last_step_zero`` turns it on, and the notebook preset's put option uses it.

A hand-built history of one episode that exercised at price 90 at the last step: its last-step
regression row is the hold features there, the hat ``e_2`` (anchor 90 of the notebook's anchors
80, 85, 90, ...; spacing 5), with reward 10 (the payoff). At every other step the row is 0. Then
``Lambda_H = lam I + e_2 e_2^T`` and, at the hold features ``e_2`` of the last step:

* authors' rule (``w_H = 0``): ``Q_hold = min(beta / sqrt(lam + 1), H)``;
* regressing the payoff: ``w_H = e_2 * 10 / (lam + 1)``, so ``Q_hold = min(10 / (lam + 1) +
  beta / sqrt(lam + 1), H)`` (= H = 10 for lam = 0.1, beta = 1: a tie with the payoff 10, which
  goes to hold, where the authors' rule exercises).
"""

import math

import jax.numpy as jnp
import numpy as np
import pytest

import drjax.paper as P
from drjax.agents import lsvi
from drjax.agents.base import make_hparams

H, NA = 10, 20  # the notebook put option: horizon, hat features (d = NA + 1)
D = NA + 1
EXERCISE, HOLD = 0, 1
LAM, BETA = 0.1, 1.0


def _e(i):
  x = np.zeros(D)
  x[i] = 1.0
  return x


def _phi_all(hold_row, payoff):
  """``[2, d]``: exercise row ``[0, ..., 0, payoff]``, hold row ``hold_row``."""
  out = np.zeros((2, D))
  out[EXERCISE, -1] = payoff
  out[HOLD] = hold_row
  return jnp.asarray(out)


def _planned(agent, theta):
  """The agent's Q-function after the hand-built episode (last step: row e_2, reward 10)."""
  hp = make_hparams(H, D, rho=0.3, beta=BETA, lam=LAM)
  state = agent.init(jnp.asarray(theta), hp.lam, capacity=2)
  phi = np.zeros((H, D))
  phi[H - 1] = _e(2)
  reward = np.zeros(H)
  reward[H - 1] = 10.0
  next_phi = np.zeros((H, 2, D))  # after the last step: the exit state (all-zero features)
  next_fail = np.zeros(H, bool)
  next_fail[H - 1] = True
  state = agent.update(state, jnp.asarray(phi), jnp.asarray(reward), jnp.asarray(next_phi),
                       jnp.asarray(next_fail), None)
  return agent.plan(state, hp)


def _theta():
  theta = np.zeros((H, D))
  theta[:, -1] = 1.0  # notebook: phi . theta is the payoff (exercise row)
  return theta


@pytest.mark.parametrize("solver", ["cholesky", "sherman-morrison"])
@pytest.mark.parametrize("last_step_zero", [True, False])
def test_lsvi_last_step_hold_value_hand_computed(solver, last_step_zero):
  known = lsvi.NOTEBOOK_PUT_KNOWN._replace(last_step_zero=last_step_zero)
  agent = lsvi.lsvi_ucb(H, D, 2, 2, clip="notebook", tie_break="first", solver=solver,
                        known=known)
  qf = _planned(agent, _theta())
  bonus_seen = BETA / math.sqrt(LAM + 1.0)  # e_2 was seen once at the last step
  bonus_unseen = BETA / math.sqrt(LAM)      # e_3 never
  top = H  # the notebook's LSVI-UCB clips at H at every step
  if last_step_zero:
    want_q = min(bonus_seen, top)
    want_action = EXERCISE  # 0.953 < 10
  else:
    want_q = min(10.0 / (LAM + 1.0) + bonus_seen, top)
    want_action = HOLD  # min(10.04, 10) = 10 ties with the payoff 10: hold
  q = np.asarray(agent.q_values(qf, H - 1, _phi_all(_e(2), 10.0), False))
  np.testing.assert_allclose(q, [10.0, want_q], rtol=1e-12, atol=1e-12)
  assert int(agent.act(qf, H - 1, _phi_all(_e(2), 10.0), False)) == want_action
  # Unseen hold features: no regression term under either rule.
  q = np.asarray(agent.q_values(qf, H - 1, _phi_all(_e(3), 5.0), False))
  np.testing.assert_allclose(q, [5.0, min(bonus_unseen, top)], rtol=1e-12, atol=1e-12)
  # The last-step weights themselves.
  want_w = np.zeros(D) if last_step_zero else _e(2) * 10.0 / (LAM + 1.0)
  np.testing.assert_allclose(np.asarray(qf.w[H - 1]), want_w, atol=1e-12)


@pytest.mark.parametrize("last_step_zero", [True, False])
def test_dr_lsvi_last_step_is_unaffected(last_step_zero):
  """DR-LSVI-UCB's last step is theta_H (0 on hold features) under either setting."""
  known = lsvi.NOTEBOOK_PUT_KNOWN._replace(last_step_zero=last_step_zero)
  agent = lsvi.dr_lsvi_ucb(H, D, 2, 2, bonus="notebook", tie_break="first", known=known)
  qf = _planned(agent, _theta())
  top = 1.0  # H - h + 1 at the last step (1-indexed h = H)
  q = np.asarray(agent.q_values(qf, H - 1, _phi_all(_e(2), 10.0), False))
  # notebook bonus beta sqrt(sum_i x_i^2 [Lambda^-1]_ii) with x = e_2: beta / sqrt(lam + 1)
  np.testing.assert_allclose(q, [10.0, min(BETA / math.sqrt(LAM + 1.0), top)], rtol=1e-12)
  np.testing.assert_allclose(np.asarray(qf.w[H - 1]), _theta()[H - 1], atol=0)


def test_presets_turn_the_rule_on_for_the_notebook_put_option_only():
  nb = P.setup("notebook", "put-option", episodes=2).agents
  assert nb["lsvi-ucb"].config.known.last_step_zero
  assert nb["dr-lsvi-ucb"].config.known.last_step_zero  # no effect on DR-LSVI-UCB (see above)
  for preset, experiment in (("paper", "put-option"), ("notebook", "linear-mdp"),
                             ("paper", "linear-mdp")):
    agents = P.setup(preset, experiment, episodes=2).agents
    assert all(a.config.known is None for a in agents.values()), (preset, experiment)
  assert not lsvi.KnownAction(0, 1, lambda phi: phi[..., 0, -1]).last_step_zero  # default off


def test_last_step_zero_must_be_a_bool():
  bad = lsvi.NOTEBOOK_PUT_KNOWN._replace(last_step_zero="yes")
  with pytest.raises(TypeError, match="last_step_zero must be a bool"):
    lsvi.lsvi_ucb(H, D, 2, 2, known=bad)
