"""A loop-based NumPy port of the published PEVI on the put option (R2PVI paper, Figure 1(d)).

Ported line by line from ``panxulab/Robust-Regularized-Pessimistic-Value-Iteration``,
``American_put_opt/algorithm.py`` (classes ``meta_algorithm`` and ``PEVI``) and ``env.py``,
independently of drjax: explicit inverses, Python loops over steps h and trajectories tau, the
published indexing (steps 0-indexed, ``h = 0..H-1``). What each part follows:

* ``features`` -- ``env.py:14-16, 26-29``: hat features ``max(0, 1 - |s - s_i| / Delta)``,
  anchors ``s_i = 80 + i Delta``, ``Delta = (160 - 60) / d`` (no payoff coordinate).
* ``exercise_value`` -- ``algorithm.py:21`` (``get_action``) and ``:80`` (``PEVI.update_Q``):
  ``max(0, strike - s)``, known, never regressed nor penalized.
* ``PublishedPEVI.__init__`` -- ``meta_algorithm.__init__`` (``algorithm.py:8-17``): ridge
  ``Lambda_h = lam I`` before the data, ``w_h = 0``.
* ``PublishedPEVI.update_Q`` -- ``PEVI.update_Q`` (``:62-83``): for ``h = H-1..0``, ``Lambda_h +=
  sum_tau phi_tau,h phi_tau,h^T`` (``:67-69``); ``w_{H-1} = 0`` (nothing regressed at the last
  step, ``:73-74``); otherwise ``w_h = sum_tau Lambda_h^-1 phi_tau,h V_tau,h+1`` with ``V_tau,h+1
  = max(Q_hold,h+1(phi_tau,h+1), max(0, strike - s_tau,h+1))`` (``:76-82``): no reward is
  regressed.
* ``PublishedPEVI.q_hold`` -- ``PEVI.get_Q_func`` (``:85-89``): ``min(w_h . phi - beta
  sqrt(phi^T Lambda_h^-1 phi), H - h)``: the ellipsoid penalty (PEVI's own; the other classes
  use ``meta_algorithm.get_Q_func``'s ``sqrt(phi^T diag(Lambda^-1) phi)``), truncated from above
  only (no floor at 0).
* ``PublishedPEVI.get_action`` -- ``meta_algorithm.get_action`` (``:19-26``), inherited by PEVI:
  ``argmax([Q_hold, Q_exercise])``, index 0 holds and 1 exercises (``env.py:9``); ``np.argmax``
  takes the first maximum, so ties go to hold.

Kept from the published code: all of the above (penalty form, truncation, last-step rule, ties).
Changed: the strike is an argument (default 100; the published code uses ``self.K =
len(dataset['S'])``, the number of trajectories, which is 100 only at N = 100), and the dataset is
given as arrays (no global RNG): ``phi [N, H, d]`` = ``dataset['phi']`` (hat features of the
price at step h) and ``prices [N, H]`` or ``[N, H + 1]`` = ``dataset['S']`` (only the prices at
steps 1..H-1 are read, through their payoff).
"""

from __future__ import annotations

import numpy as np

STRIKE = 100.0
LOWER, UPPER = 60.0, 160.0  # env.py:6-7
FIRST_ANCHOR = 80.0          # env.py:16
HOLD, EXERCISE = 0, 1        # the published action indices (env.py:9)


def features(price, d: int) -> np.ndarray:
  """``[d]`` published hat features of one price (``env.py:26-29``)."""
  delta = (UPPER - LOWER) / d
  anchors = [FIRST_ANCHOR + x * delta for x in range(d)]
  return np.array([max(0.0, 1.0 - abs(float(price) - a) / delta) for a in anchors])


def exercise_value(price, strike: float = STRIKE) -> float:
  """The known exercise value ``max(0, strike - s)`` (``algorithm.py:21, 80``)."""
  return max(0.0, strike - float(price))


class PublishedPEVI:
  """The published ``PEVI`` class on given arrays (see the module docstring).

  Attributes after ``update_Q``:
    w: ``[H, d]`` the hold weights ``w_h``.
    Lambda: ``[H, d, d]`` ``lam I + sum_tau phi phi^T``.
    Lambda_inv: ``[H, d, d]`` its inverse (``np.linalg.inv``, as the published code).
  """

  def __init__(self, d, beta, H, lam, phi, prices, strike: float = STRIKE):
    phi = np.asarray(phi, dtype=np.float64)
    prices = np.asarray(prices, dtype=np.float64)
    if phi.ndim != 3 or phi.shape[1:] != (H, d):
      raise ValueError(f"phi must have shape [N, H, d] = [N, {H}, {d}], got {phi.shape}")
    if prices.ndim != 2 or prices.shape[0] != phi.shape[0] or prices.shape[1] not in (H, H + 1):
      raise ValueError(f"prices must have shape [N, H] or [N, H + 1] with N = {phi.shape[0]}, "
                       f"got {prices.shape}")
    self.d, self.beta, self.H, self.lam, self.strike = d, float(beta), H, float(lam), strike
    self.phi, self.prices = phi, prices
    self.N = phi.shape[0]
    self.w = np.zeros((H, d))
    self.Lambda = np.stack([self.lam * np.eye(d) for _ in range(H)])
    self.Lambda_inv = np.zeros((H, d, d))

  def q_hold(self, phi, h: int) -> float:
    """``PEVI.get_Q_func``: ``min(w_h . phi - beta sqrt(phi^T Lambda_h^-1 phi), H - h)``."""
    phi = np.asarray(phi, dtype=np.float64)
    lam_inv = np.linalg.inv(self.Lambda[h])
    penalty = self.beta * np.sqrt(phi @ lam_inv @ phi)
    return min(self.w[h] @ phi - penalty, self.H - h)

  def q_values(self, phi, h: int, price) -> np.ndarray:
    """``[Q_hold, Q_exercise]`` in the published action order (``get_action``'s list)."""
    return np.array([self.q_hold(phi, h), exercise_value(price, self.strike)])

  def get_action(self, phi, h: int, price) -> int:
    """``meta_algorithm.get_action``: 0 (hold) or 1 (exercise); ties go to hold."""
    return int(np.argmax(self.q_values(phi, h, price)))

  def update_Q(self) -> "PublishedPEVI":
    """``PEVI.update_Q``: one backward induction (call once, as the published code does)."""
    for h in range(self.H - 1, -1, -1):
      for n in range(self.N):
        self.Lambda[h] += np.outer(self.phi[n, h], self.phi[n, h])
      lam_inv = np.linalg.inv(self.Lambda[h])
      self.Lambda_inv[h] = lam_inv
      w_h = np.zeros(self.d)
      if h < self.H - 1:
        for tau in range(self.N):
          s_next = self.prices[tau, h + 1]
          v_next = max(self.q_hold(self.phi[tau, h + 1], h + 1),
                       exercise_value(s_next, self.strike))
          w_h += lam_inv @ (self.phi[tau, h] * v_next)
      self.w[h] = w_h
    return self


def lattice_value(agent: PublishedPEVI, s0: float, p_u: float) -> float:
  """Exact expected return of ``agent.get_action`` from price ``s0`` when the price goes up (x1.02)
  w.p. ``p_u`` and down (x0.98) otherwise (``env.py:12, 35-38``), by backward induction over the
  recombining price tree (node ``(h, j)``: ``j`` up-moves); exercising pays the payoff and ends
  the episode's rewards (``env.py:40-60``)."""
  H, d = agent.H, agent.d
  v_next = [0.0] * (H + 1)
  for h in range(H - 1, -1, -1):
    v = [0.0] * (h + 1)
    for j in range(h + 1):
      s = s0 * 1.02 ** j * 0.98 ** (h - j)
      if agent.get_action(features(s, d), h, s) == EXERCISE:
        v[j] = exercise_value(s, agent.strike)
      else:
        v[j] = p_u * v_next[j + 1] + (1.0 - p_u) * v_next[j]
    v_next = v
  return v_next[0]
