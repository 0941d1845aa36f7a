"""Figure 1(d)'s PEVI is the published PEVI (issue 28, item 9).

In the R2PVI paper's put-option code every class, PEVI included, knows the exercise value
``max(0, strike - s)`` (``get_action``) and ``PEVI.update_Q`` regresses ``V = max(Q_hold, payoff)``
with no reward regression. ``put_published_pevi`` ports that class line by line (loop-based
NumPy, independent of drjax); here it runs on the very datasets ``drjax reproduce r2pvi`` collects
(``data`` collection on the notebook put option, always hold, as in ``_put_program``), and the
figure's PEVI (``r2pvi.put_agents``) must give the same weights, ``Lambda^-1``, Q-values and greedy
actions (float64, 1e-9), and the same exact lattice values of its greedy policy.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from drjax import data as data_lib
from drjax import evaluate
from drjax.agents import registry
from drjax.envs.put_option import EXERCISE, HOLD, PutOption, PutOptionState
from drjax.paper import r2pvi

import put_published_pevi as pub

N = 30  # trajectories (the port takes the strike as an argument, so N need not be 100)
ENV = PutOption(num_anchors=r2pvi.PUT_ANCHORS, horizon=r2pvi.PUT_HORIZON, variant="notebook")
ATOL = 1e-9


def _published_arrays(ds, env):
  """The dataset as the published code stores it: ``phi [N, H, d]`` hat features of ``s_h`` and
  ``S [N, H]`` prices ``s_h``, recovered from drjax's features: ``s = 100 - payoff`` in the
  money, else from the first non-zero hat (``s = s_i + Delta (1 - varphi_i)``)."""
  H, d = env.horizon, env.num_anchors
  phi = np.asarray(ds.phi)  # [H, N, d + 1]: the hold row [varphi(s_h), 0] (always hold)
  assert np.all(np.asarray(ds.action) == HOLD) and np.all(phi[..., -1] == 0)
  hats = phi[..., :d].transpose(1, 0, 2)
  pay_next = np.asarray(ds.next_phi)[:, :, EXERCISE, -1].T  # [N, H]: payoff at s_{h+1}
  delta = 100.0 / d
  prices = np.zeros((hats.shape[0], H))
  for n in range(hats.shape[0]):
    for h in range(H):
      pay = pay_next[n, h - 1] if h else 0.0
      if pay > 0:
        prices[n, h] = 100.0 - pay
      else:
        i = int(np.flatnonzero(hats[n, h] > 0)[0])
        prices[n, h] = 80.0 + i * delta + delta * (1.0 - hats[n, h, i])
      # The recovered price has drjax's features under the published env.phi.
      np.testing.assert_allclose(pub.features(prices[n, h], d), hats[n, h], atol=1e-12)
  return hats, prices


@functools.lru_cache(maxsize=None)
def _fit_fn(agent):
  hp = r2pvi._hp(agent, registry.get("pevi"), 0.0, r2pvi.PUT_BETA, r2pvi.PUT_LAM)  # pylint: disable=protected-access
  return jax.jit(lambda ds: agent.fit(ds, hp, form="buffer"))


def _collect(seed):
  params = ENV.make_params()
  return data_lib.collect(ENV, params, data_lib.fixed(HOLD), jax.random.PRNGKey(seed), N)


def _figure_pevi():
  return r2pvi.put_agents(ENV)["pevi"]


def _states(prices, h):
  return PutOptionState(price=jnp.asarray(prices), exited=jnp.zeros(len(prices), bool),
                        h=jnp.full(len(prices), h, jnp.int32))


@pytest.mark.parametrize("seed", [0, 1])
def test_figure_pevi_equals_the_published_class(seed):
  H, d = ENV.horizon, ENV.num_anchors
  ds = _collect(seed)
  hats, prices = _published_arrays(ds, ENV)
  ref = pub.PublishedPEVI(d, r2pvi.PUT_BETA, H, r2pvi.PUT_LAM, hats, prices).update_Q()
  agent = _figure_pevi()
  qf = jax.tree_util.tree_map(np.asarray, _fit_fn(agent)(ds))
  # Weights of the hold (learned) features and Lambda_h^-1; the payoff coordinate only ever meets
  # the exercise row, whose Q is known.
  np.testing.assert_allclose(qf.w[:, :d], ref.w, atol=ATOL, err_msg="w")
  np.testing.assert_allclose(qf.pinv[:, :d, :d], ref.Lambda_inv, atol=ATOL, err_msg="Lambda^-1")
  # Q-values and greedy actions at the data's prices and on a grid across (and beyond) the anchors.
  grid = np.concatenate([prices.ravel(), np.linspace(50.0, 190.0, 141)])
  qf_j = jax.tree_util.tree_map(jnp.asarray, qf)
  n_exercise = 0
  for h in range(H):
    phis = jax.vmap(lambda s: ENV.phi_all(s, None))(_states(grid, h))
    q = np.asarray(agent.q_values(qf_j, h, phis, False))
    acts = np.asarray(jax.vmap(lambda p, h=h: agent.act(qf_j, h, p, False))(phis))
    for g, s in enumerate(grid):
      want = ref.q_values(pub.features(s, d), h, s)  # [Q_hold, Q_exercise]
      np.testing.assert_allclose(q[g, [HOLD, EXERCISE]], want, atol=ATOL,
                                 err_msg=f"Q at h = {h}, s = {s}")
      margin = want[0] - want[1]
      if margin == 0 or abs(margin) > ATOL:  # exact ties go to hold in both
        ref_act = ref.get_action(pub.features(s, d), h, s)
        assert acts[g] == (EXERCISE if ref_act == pub.EXERCISE else HOLD), (h, s, want)
      n_exercise += int(acts[g] == EXERCISE and want[1] > 0)
  assert n_exercise > 0, "the published PEVI exercises in the money: weak test otherwise"


@pytest.mark.parametrize("s0", [99.17022005, 103.0])
def test_figure_pevi_values_equal_the_published_policy_on_the_lattice(s0):
  """The figure's valuation of PEVI's greedy policy (``put_option_agent_policy``, exact lattice
  values) at a fixed initial price against the port's loop over the lattice (99.17: the price
  every published test episode starts from, ``np.random.seed(1)`` in ``env.py``)."""
  H, d = ENV.horizon, ENV.num_anchors
  ds = _collect(2)
  hats, prices = _published_arrays(ds, ENV)
  ref = pub.PublishedPEVI(d, r2pvi.PUT_BETA, H, r2pvi.PUT_LAM, hats, prices).update_Q()
  agent = _figure_pevi()
  qf = _fit_fn(agent)(ds)
  p_us = jnp.asarray(r2pvi.PUT_PU)
  s = jnp.asarray(s0)
  pol = evaluate.put_option_agent_policy(ENV, agent, qf, s, s)
  got = np.asarray(evaluate.put_option_piecewise_values(pol, p_us, s, s))
  want = np.array([pub.lattice_value(ref, s0, float(p)) for p in r2pvi.PUT_PU])
  np.testing.assert_allclose(got, want, atol=ATOL)
  assert want[0] > 1.0, "the published PEVI earns in the money at p = 0.2: weak test otherwise"
