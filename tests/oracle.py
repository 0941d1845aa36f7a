"""A slow, loop-based NumPy oracle of DR-LSVI-UCB (Algorithm 1) and LSVI-UCB (Jin et al. 2020).

Written straight from the paper, independently of drjax: explicit inverses, Python loops over
episodes, steps, samples and alpha candidates. It replays the trajectories a drjax agent saw and
recomputes, episode by episode, the ridge regressions, nu (by brute force over every candidate
alpha, see ``brute_nu``), the bonuses and the Q-values.
"""

from __future__ import annotations

import numpy as np


def brute_nu(Phi, V, lam, rho, H):
  """nu_i = max_{alpha in [0,H]} z_i(alpha) - rho_i alpha, trying every breakpoint one by one.

  z(alpha) = (lam I + sum_t phi_t phi_t^T)^-1 sum_t phi_t min(V_t, alpha)  (paper, eq. closed form).
  The objective is piecewise linear in alpha with kinks at the V_t, so its max over [0, H] is at
  0, H or some V_t in [0, H].
  """
  k, d = Phi.shape
  Lam = lam * np.eye(d)
  for t in range(k):
    Lam += np.outer(Phi[t], Phi[t])
  Lam_inv = np.linalg.inv(Lam)
  cands = [0.0, float(H)] + [float(v) for v in V if 0.0 <= v <= H]
  nu = np.full(d, -np.inf)
  arg = np.zeros(d)
  for a in cands:
    b = np.zeros(d)
    for t in range(k):
      b += Phi[t] * min(V[t], a)
    z = Lam_inv @ b
    for i in range(d):
      val = z[i] - rho[i] * a
      if val > nu[i] + 1e-12:
        nu[i], arg[i] = val, a
  return nu, arg


def q_row(phi_all, w, Lam_inv, beta, top, *, robust, bonus_form, fail, fail_zero=True):
  q = np.zeros(len(phi_all))
  for a, phi in enumerate(phi_all):
    if robust:
      if bonus_form == "paper":
        b = beta * sum(phi[i] * np.sqrt(Lam_inv[i, i]) for i in range(len(phi)))
      else:
        b = beta * np.sqrt(sum(phi[i] ** 2 * Lam_inv[i, i] for i in range(len(phi))))
    else:
      b = beta * np.sqrt(phi @ Lam_inv @ phi)
    q[a] = min(max(phi @ w + b, 0.0), top)
    if fail_zero and fail:  # Q = 0 at the fail state (both agents by default)
      q[a] = 0.0
  return q


def replay(buffers, theta, rho, beta, lam, *, robust, bonus_form="paper", clip_form="paper",
           fail_zero=True):
  """Recomputes every episode's Q-function from the trajectories in ``buffers``.

  Args:
    buffers: dict of numpy arrays phi [H,K,d], reward [H,K], next_phi [H,K,A,d], next_fail [H,K].
    theta: [H, d]; rho: [H, d]; beta, lam: floats.

  Returns:
    list over episodes k of dicts with w [H,d], nu [H,d], Lam_inv [H,d,d], top [H].
  """
  phi_b, rew, nphi, nfail = (buffers[n] for n in ("phi", "reward", "next_phi", "next_fail"))
  H, K, d = phi_b.shape
  out = []
  for k in range(K):
    w = np.zeros((H, d))
    nu = np.zeros((H, d))
    Lam_inv = np.zeros((H, d, d))
    top = np.zeros(H)
    for h in reversed(range(H)):  # 0-indexed; paper step h+1
      top[h] = H if (clip_form == "notebook" and not robust) else H - h
      Lam = lam * np.eye(d)
      for t in range(k):
        Lam += np.outer(phi_b[h, t], phi_b[h, t])
      Lam_inv[h] = np.linalg.inv(Lam)
      V = np.zeros(k)
      if h < H - 1:
        for t in range(k):
          V[t] = q_row(nphi[h, t], w[h + 1], Lam_inv[h + 1], beta, top[h + 1], robust=robust,
                       bonus_form=bonus_form, fail=bool(nfail[h, t]),
                       fail_zero=fail_zero).max()
      if robust:
        if h == H - 1:
          nu[h] = 0.0
        else:
          nu[h], _ = brute_nu(phi_b[h, :k], V, lam, rho[h], H)
        w[h] = theta[h] + nu[h]
      else:
        b = np.zeros(d)
        for t in range(k):
          b += phi_b[h, t] * (rew[h, t] + V[t])
        w[h] = Lam_inv[h] @ b
    out.append(dict(w=w, nu=nu, Lam_inv=Lam_inv, top=top))
  return out
