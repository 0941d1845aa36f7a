"""An independent loop-based NumPy version of We-DRIVE-U (drjax/agents/wedriveu.py), written from
the equations of its docstring and docs/agents.md, not from the code: plain loops over steps,
states, actions and coordinates, the TV dual by brute force over alpha at its breakpoints, the
switching rule from determinants (``numpy.linalg.slogdet``), not from rank-one log-determinant
updates. It does not import drjax.

Teacher forcing: ``run(model, hp, states, next_last, ...)`` replays the states a drjax run visited
(``TrainOutput.states``), acts greedily with its own Q-functions (the actions are returned, to be
compared with the run's) and returns every episode's weights, ``Sigma^-1`` of the plan, actions,
``sigma_bar^2`` and policy count.
"""

from __future__ import annotations

import math

import numpy as np


def plan(model, snap_gram, snap_G, hp, snap_phir=None):
  """DR-LSVI-UCB's backward induction on the snapshot's weighted statistics.

  Returns ``(w [H, d], pinv [H, d, d])``: ``w_h = theta_h + nu_h`` (or, given ``snap_phir``, the
  regressed reward ``Sigma_h^-1 phir_w[h] + nu_h``), ``pinv_h = Sigma_h^-1``.
  """
  phi, theta, fail = model["phi"], model["theta"], model["fail_state"]
  H, S, A, d = phi.shape
  lam, beta, rho = hp["lam"], hp["beta"], hp["rho"]
  pinv = np.zeros((H, d, d))
  for h in range(H):
    pinv[h] = np.linalg.inv(lam * np.eye(d) + snap_gram[h])
  w = np.zeros((H, d))
  base = theta if snap_phir is None else np.array([pinv[h] @ snap_phir[h] for h in range(H)])
  w[H - 1] = base[H - 1]
  for h in range(H - 2, -1, -1):
    v = np.array([value(phi[h + 1, s], w[h + 1], pinv[h + 1], beta, H - (h + 1), s == fail)
                  for s in range(S)])
    for i in range(d):
      best = -np.inf
      for alpha in [0.0, float(H)] + [min(max(x, 0.0), H) for x in v]:
        target = np.minimum(v, alpha)
        z = pinv[h] @ (snap_G[h].T @ target)
        best = max(best, z[i] - rho[h, i] * alpha)
      w[h, i] = base[h, i] + best
  return w, pinv


def q_row(phi_sa, w, pinv, beta):
  """The untruncated optimistic Q: ``phi . w + beta sum_i phi_i sqrt([Sigma^-1]_ii)``."""
  bonus = 0.0
  for i in range(len(phi_sa)):
    bonus += phi_sa[i] * math.sqrt(max(pinv[i, i], 0.0))
  return float(phi_sa @ w) + beta * bonus


def value(phi_s, w, pinv, beta, top, is_fail):
  """``V(s) = max_a clip(Q(s, a), 0, top)``, 0 at the fail state."""
  if is_fail:
    return 0.0
  return max(min(max(q_row(phi_s[a], w, pinv, beta), 0.0), top) for a in range(len(phi_s)))


def greedy(phi_s, w, pinv, beta, is_fail, played=None, tol=1e-9):
  """The optimistic tie-break: argmax of the untruncated Q (lowest index among ties); 0 at the
  fail state (all zero). ``played``: the run's action, taken instead when its Q ties the maximum
  within ``tol`` (exact ties, e.g. every action's Q equal to its bonus before any reward is
  regressed, are decided by rounding)."""
  if is_fail:
    return 0
  q = [q_row(phi_s[a], w, pinv, beta) for a in range(len(phi_s))]
  best = int(np.argmax(q))
  if played is not None and q[played] >= q[best] - tol * (1.0 + abs(q[best])):
    return int(played)
  return best


def sigma2(gram, G, lam, phi_h, v_next, hp, h, H, cap="horizon", weights="variance"):
  """``sigma_bar^2`` of one transition at step h (current statistics, before it is added)."""
  if weights == "unit":
    return 1.0
  d = len(phi_h)
  pinv = np.linalg.inv(lam * np.eye(d) + gram)
  w1 = pinv @ (G.T @ v_next)
  w2 = pinv @ (G.T @ (v_next ** 2))
  m1 = min(max(float(phi_h @ w1), 0.0), H)
  m2 = min(max(float(phi_h @ w2), 0.0), H * H)
  var_hat = max(m2 - m1 * m1, 0.0)
  e = min(H * H, hp["beta_var"] * math.sqrt(max(float(phi_h @ pinv @ phi_h), 0.0)))
  if cap == "horizon":
    top = H * H
  else:
    rmin = min(hp["rho"][h])
    top = min(1.0 / rmin if rmin > 0 else math.inf, H) ** 2
  return max(hp["var_floor"], min(var_hat + e, top))


def run(model, hp, states, switch="any-step", cap="horizon", weights="variance",
        reward="theta", played=None):
  """Replays ``states [K, H]`` (the visited states of a run; ``played [K, H]``: its actions,
  followed only where the Q-values tie, see ``greedy``). Returns a dict of per-episode
  ``w [K, H, d]``, ``pinv [K, H, d, d]``, ``actions [K, H]``, ``sigma2 [K, H]``,
  ``policies [K]`` (policies computed up to episode k's plan) and the final statistics."""
  phi, fail, rewards = model["phi"], model["fail_state"], model["reward"]
  H, S, A, d = phi.shape
  K = states.shape[0]
  lam, beta = hp["lam"], hp["beta"]
  gram, G = np.zeros((H, d, d)), np.zeros((H, S, d))
  phir = np.zeros((H, d))
  snap_gram, snap_G, snap_phir = gram.copy(), G.copy(), phir.copy()
  policies = 1
  out = {k: [] for k in ("w", "pinv", "actions", "sigma2", "policies")}
  for k in range(K):
    w, pinv = plan(model, snap_gram, snap_G, hp, snap_phir if reward == "regressed" else None)
    out["w"].append(w)
    out["pinv"].append(pinv)
    out["policies"].append(policies)
    acts, sig = [], []
    for h in range(H):
      s = int(states[k, h])
      a = greedy(phi[h, s], w[h], pinv[h], beta, s == fail,
                 None if played is None else int(played[k, h]))
      acts.append(a)
      if h < H - 1:
        v_next = np.array([value(phi[h + 1, x], w[h + 1], pinv[h + 1], beta, H - (h + 1),
                                 x == fail) for x in range(S)])
      else:
        v_next = np.zeros(S)
      sig.append(sigma2(gram[h], G[h], lam, phi[h, s, a], v_next, hp, h, H, cap, weights))
    # Add the episode with weights 1 / sigma_bar^2 (step H - 1's next state is not recorded:
    # its atoms are never used, V_H = 0).
    for h in range(H):
      s, a = int(states[k, h]), acts[h]
      x = phi[h, s, a]
      wt = 1.0 / sig[h]
      gram[h] += wt * np.outer(x, x)
      phir[h] += wt * rewards[h, s, a] * x
      if h < H - 1:
        G[h, int(states[k, h + 1])] += wt * x
    out["actions"].append(acts)
    out["sigma2"].append(sig)
    # The switching rule, from determinants.
    ratio = [np.linalg.slogdet(lam * np.eye(d) + gram[h])[1]
             - np.linalg.slogdet(lam * np.eye(d) + snap_gram[h])[1] for h in range(H)]
    if switch == "every":
      fire = True
    elif switch == "any-step":
      fire = any(r >= math.log(2.0) for r in ratio)
    else:
      fire = sum(ratio) >= math.log(2.0)
    if fire:
      snap_gram, snap_G, snap_phir = gram.copy(), G.copy(), phir.copy()
      policies += 1
  res = {k: np.asarray(v) for k, v in out.items()}
  res.update(gram=gram, G=G, phir=phir, final_policies=policies)
  return res
