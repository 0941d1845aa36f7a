"""A slow, loop-based NumPy oracle of PEVI, DRPVI and VA-DRPVI (offline RL in linear MDPs).

Written straight from the papers (PEVI: Jin, Yang, Wang 2021; DRPVI and VA-DRPVI: Liu & Xu,
NeurIPS 2024), independently of drjax: explicit inverses, Python loops over steps h, samples tau,
coordinates i and alpha candidates. Steps are 0-indexed (h = 0..H-1), so the paper's truncation
level H-h+1 is ``H - h`` here, and V_H = 0.

Datasets are dicts or objects with phi [H,N,d], reward [H,N], next_phi [H,N,A,d],
next_fail [H,N] (bool), theta [H,d] and valid [N] (bool; invalid trajectories are ignored).

Every function returns a dict:
  w [H,d]             PEVI: the ridge solution; DR algorithms: theta_h + nu_h.
  nu [H,d]            the dual values (zeros for PEVI).
  alpha [H,d]         the smallest maximizing alpha per coordinate (zeros for PEVI).
  lam_inv [H,d,d]     Lambda_h^-1 (VA-DRPVI: Sigma_h^-1; alg2: Sigma_h(alpha = H)^-1).
  penalty_diag [H,d]  sqrt of the diagonal the d-rectangular penalty uses.
  v_next [H,N]        the targets V_{h+1}(s'_tau) used at step h (0 for invalid trajectories).
  q(h, phi_all, fail=False) -> [A]   Q_h at the features phi_all [A,d].
"""

from __future__ import annotations

import numpy as np

_FLOATS = ("phi", "reward", "next_phi", "theta")


def _get(ds, name):
  """ds[name] for dicts, getattr otherwise; float arrays as float64, flags as bool."""
  try:
    x = ds[name] if isinstance(ds, dict) else getattr(ds, name)
  except (KeyError, AttributeError):
    if name != "valid":
      raise
    x = np.ones(np.shape(_get(ds, "phi"))[1], dtype=bool)  # no mask: every trajectory is used
  return np.asarray(x, dtype=np.float64 if name in _FLOATS else bool)


def _clip(x, top, clip):
  """Truncation of Q_h: [0, top] ("paper") or only above ("upper", the public offline code)."""
  if clip == "paper":
    return min(max(x, 0.0), top)
  if clip == "upper":
    return min(x, top)
  raise ValueError(f"unknown clip {clip!r}")


def _penalty(phi, lam_inv, pdiag, beta, form):
  """Pessimism penalty: ellipsoid (PEVI) or d-rectangular ("paper" / "notebook") from pdiag."""
  d = len(phi)
  if form == "ellipsoid":
    return beta * np.sqrt(phi @ lam_inv @ phi)
  if form == "paper":
    return beta * sum(phi[i] * pdiag[i] for i in range(d))
  if form == "notebook":
    return beta * np.sqrt(sum(phi[i] ** 2 * pdiag[i] ** 2 for i in range(d)))
  raise ValueError(f"unknown penalty {form!r}")


def _gram(rows, weights, lam):
  """lam I + sum_t weights_t rows_t rows_t^T."""
  d = rows.shape[1]
  G = lam * np.eye(d)
  for t in range(len(rows)):
    G += weights[t] * np.outer(rows[t], rows[t])
  return G


def _vmin(vmin, h, v, idx):
  """m in the TV dual: min of the valid targets, 0 (fail state), or a given value (row h)."""
  if isinstance(vmin, str):
    if vmin == "data":
      return min((float(v[t]) for t in idx), default=0.0)
    if vmin == "zero":
      return 0.0
    raise ValueError(f"unknown vmin {vmin!r}")
  vm = np.asarray(vmin, dtype=np.float64)
  return float(vm) if vm.ndim == 0 else float(vm[h])


def _cands(H, v, idx, m, extra=()):
  """Kinks of the piecewise-linear dual objective: 0, H, every target in [0,H], m if in [0,H]."""
  c = [0.0, float(H)] + [float(v[t]) for t in idx if 0.0 <= v[t] <= H]
  if 0.0 <= m <= H:
    c.append(float(m))
  c += [float(x) for x in extra]
  return sorted(set(c))


def _dual_max(z_of, cands, rho_h, m):
  """nu_i = max_{alpha in cands} z_i(alpha) - rho_i (alpha - min(m, alpha)), by brute force.

  z_of(alpha) recomputes z(alpha) from scratch. Candidates are visited in increasing order and a
  later one only wins if strictly larger (1e-12), so ``arg`` is the smallest maximizer.
  """
  d = len(rho_h)
  nu = np.full(d, -np.inf)
  arg = np.zeros(d)
  for a in cands:
    z = z_of(a)
    for i in range(d):
      val = z[i] - rho_h[i] * (a - min(m, a))
      if val > nu[i] + 1e-12:
        nu[i], arg[i] = val, a
  return nu, arg


def _backward(ds, beta, fail_zero, clip, form, step):
  """Shared backward pass: targets V_{h+1}(s'_tau) = max_a Q_{h+1}, then step(h, idx, out)."""
  phi, nphi, nfail, valid = (_get(ds, n) for n in ("phi", "next_phi", "next_fail", "valid"))
  H, N, d = phi.shape
  out = dict(w=np.zeros((H, d)), nu=np.zeros((H, d)), alpha=np.zeros((H, d)),
             lam_inv=np.zeros((H, d, d)), penalty_diag=np.zeros((H, d)), v_next=np.zeros((H, N)))

  def q(h, phi_all, fail=False):
    phi_all = np.asarray(phi_all, dtype=np.float64)
    qs = np.zeros(len(phi_all))
    if fail and fail_zero:  # Q = 0 at the fail state
      return qs
    for a, x in enumerate(phi_all):
      pen = _penalty(x, out["lam_inv"][h], out["penalty_diag"][h], beta, form)
      qs[a] = _clip(x @ out["w"][h] - pen, H - h, clip)
    return qs

  idx = [tau for tau in range(N) if valid[tau]]
  for h in reversed(range(H)):
    if h < H - 1:  # V_H = 0
      for tau in idx:
        out["v_next"][h, tau] = q(h + 1, nphi[h, tau], fail=bool(nfail[h, tau])).max()
    step(h, idx, out)
  out["q"] = q
  return out


def pevi(ds, beta, lam, *, fail_zero=True, clip="paper"):
  """PEVI: w_h = Lambda_h^-1 sum phi (r + V_{h+1}), Q_h = clip(phi.w_h - beta ||phi||_{Lambda_h^-1})."""
  phi, rew = _get(ds, "phi"), _get(ds, "reward")
  d = phi.shape[2]

  def step(h, idx, out):
    lam_inv = np.linalg.inv(_gram(phi[h, idx], np.ones(len(idx)), lam))
    b = np.zeros(d)
    for tau in idx:
      b += phi[h, tau] * (rew[h, tau] + out["v_next"][h, tau])
    out["w"][h] = lam_inv @ b
    out["lam_inv"][h] = lam_inv
    out["penalty_diag"][h] = np.sqrt(np.diag(lam_inv))

  return _backward(ds, beta, fail_zero, clip, "ellipsoid", step)


def drpvi(ds, rho, beta, lam, *, vmin="data", fail_zero=True, clip="paper", penalty="paper"):
  """DRPVI (Liu & Xu 2024, Alg. 1): nu_h from the exact TV dual, Q_h = clip(phi.(theta_h+nu_h) - Gamma_h)."""
  phi, theta = _get(ds, "phi"), _get(ds, "theta")
  H, _, d = phi.shape
  rho = np.broadcast_to(np.asarray(rho, dtype=np.float64), (H, d))

  def step(h, idx, out):
    lam_inv = np.linalg.inv(_gram(phi[h, idx], np.ones(len(idx)), lam))
    v = out["v_next"][h]
    m = _vmin(vmin, h, v, idx)

    def z_of(a):
      b = np.zeros(d)
      for tau in idx:
        b += phi[h, tau] * min(v[tau], a)
      return lam_inv @ b

    out["nu"][h], out["alpha"][h] = _dual_max(z_of, _cands(H, v, idx, m), rho[h], m)
    out["w"][h] = theta[h] + out["nu"][h]
    out["lam_inv"][h] = lam_inv
    out["penalty_diag"][h] = np.sqrt(np.diag(lam_inv))

  return _backward(ds, beta, fail_zero, clip, penalty, step)


def va_drpvi(ds, pilot, rho, beta, lam, *, vmin="data", fail_zero=True, clip="paper",
             penalty="paper", variance="alg3", var_shift=0.0, grid=None):
  """VA-DRPVI (Liu & Xu 2024, Alg. 3 by default; Alg. 2 with variance="alg2").

  The variance sigma2_h is estimated on ``pilot`` from the value functions of DRPVI run on the
  pilot; the weighted regression, the dual and the penalty use ``ds``. The result also holds
  ``pilot_out``, the pilot DRPVI's result.
  """
  if variance not in ("alg2", "alg3"):
    raise ValueError(f"unknown variance {variance!r}")
  ref = drpvi(pilot, rho, beta, lam, vmin=vmin, fail_zero=fail_zero, clip=clip, penalty=penalty)
  phi, theta = _get(ds, "phi"), _get(ds, "theta")
  pphi, pvalid = _get(pilot, "phi"), _get(pilot, "valid")
  H, _, d = phi.shape
  rho = np.broadcast_to(np.asarray(rho, dtype=np.float64), (H, d))
  pidx = [t for t in range(pphi.shape[1]) if pvalid[t]]
  vp = ref["v_next"]  # V'_{h+1} at the pilot's next states

  def sigma2_fn(h, targ):
    """sigma2_h(x) from pilot ridge regressions of targ^2 and targ (targ listed over pidx)."""
    linv = np.linalg.inv(_gram(pphi[h, pidx], np.ones(len(pidx)), lam))
    b1, b2 = np.zeros(d), np.zeros(d)
    for j, t in enumerate(pidx):
      b1 += pphi[h, t] * targ[j]
      b2 += pphi[h, t] * targ[j] ** 2
    z1, z2 = linv @ b1, linv @ b2

    def sigma2(x):
      return max(1.0, min(max(x @ z2, 0.0), H * H) - min(max(x @ z1, 0.0), H) ** 2 - var_shift)

    return sigma2

  def weighted(h, idx, v, sigma2, a):
    """(Sigma_h^-1, z_h(a)) of the sigma2-weighted ridge regression of min(v, a) on ds."""
    wts = [1.0 / sigma2(phi[h, tau]) for tau in idx]
    s_inv = np.linalg.inv(_gram(phi[h, idx], wts, lam))
    b = np.zeros(d)
    for j, tau in enumerate(idx):
      b += wts[j] * phi[h, tau] * min(v[tau], a)
    return s_inv, s_inv @ b

  def step(h, idx, out):
    v = out["v_next"][h]
    m = _vmin(vmin, h, v, idx)
    if variance == "alg3":
      sigma2 = sigma2_fn(h, [vp[h, t] for t in pidx])
      s_inv = weighted(h, idx, v, sigma2, float(H))[0]
      nu, arg = _dual_max(lambda a: weighted(h, idx, v, sigma2, a)[1],
                          _cands(H, v, idx, m), rho[h], m)
      pdiag = np.sqrt(np.diag(s_inv))
    else:
      extra = [vp[h, t] for t in pidx if 0.0 <= vp[h, t] <= H]
      if grid is not None:
        extra += [min(max(float(g), 0.0), float(H)) for g in np.ravel(grid)]
      solved = {}  # alpha -> (Sigma_h(alpha)^-1, z_h(alpha)), each computed from scratch once

      def solve(a):
        if a not in solved:
          sigma2 = sigma2_fn(h, [min(vp[h, t], a) for t in pidx])
          solved[a] = weighted(h, idx, v, sigma2, a)
        return solved[a]

      nu, arg = _dual_max(lambda a: solve(a)[1], _cands(H, v, idx, m, extra), rho[h], m)
      s_inv = solve(float(H))[0]
      pdiag = np.array([np.sqrt(solve(float(arg[i]))[0][i, i]) for i in range(d)])
    out["nu"][h], out["alpha"][h] = nu, arg
    out["w"][h] = theta[h] + nu
    out["lam_inv"][h] = s_inv
    out["penalty_diag"][h] = pdiag

  out = _backward(ds, beta, fail_zero, clip, penalty, step)
  out["pilot_out"] = ref
  return out


if __name__ == "__main__":
  rng = np.random.default_rng(0)

  def random_ds(N, H=3, d=3, A=2):
    def simplex(*shape):
      x = rng.random(shape + (d,))
      return x / x.sum(-1, keepdims=True)
    return dict(phi=simplex(H, N), reward=rng.random((H, N)), next_phi=simplex(H, N, A),
                next_fail=rng.random((H, N)) < 0.25, theta=rng.random((H, d)),
                valid=np.arange(N) != 2)

  ds, pilot = random_ds(7), random_ds(9)
  H, N, d = ds["phi"].shape
  lam = 0.1

  # PEVI with beta = 0 against a vectorized least-squares value iteration.
  out = pevi(ds, 0.0, lam)
  w = np.zeros((H, d))
  m = ds["valid"]
  for h in reversed(range(H)):
    V = np.zeros(N)
    if h < H - 1:
      V = np.clip(ds["next_phi"][h] @ w[h + 1], 0.0, H - h - 1).max(-1)
      V[ds["next_fail"][h]] = 0.0
    X = ds["phi"][h][m]
    w[h] = np.linalg.solve(X.T @ X + lam * np.eye(d), X.T @ (ds["reward"][h][m] + V[m]))
  print("PEVI(beta=0) == LSVI:", np.allclose(out["w"], w, atol=1e-12))

  # DRPVI with rho = 0: nu against the plain ridge regression z(H) of V (nu >= z(H) always).
  out = drpvi(ds, np.zeros((H, d)), 0.05, lam)
  for h in range(H):
    X = ds["phi"][h][m]
    zH = np.linalg.solve(X.T @ X + lam * np.eye(d), X.T @ out["v_next"][h][m])
    print(f"h={h} rho=0 nu={np.round(out['nu'][h], 6)} z(H)={np.round(zH, 6)}",
          "nu >= z(H):", bool(np.all(out["nu"][h] >= zH - 1e-12)))

  # VA-DRPVI with a huge variance shift (sigma2 = 1 everywhere) equals DRPVI, both forms.
  class Obj:  # the oracle also accepts objects with attributes
    def __init__(self, dd):
      self.__dict__.update(dd)

  rho = rng.random((H, d)) * 0.6
  for kw in (dict(), dict(penalty="notebook", clip="upper"), dict(vmin="zero", fail_zero=False),
             dict(vmin=np.array([0.1, 0.2, 0.0]))):
    ref = drpvi(ds, rho, 0.05, lam, **kw)
    for variance in ("alg3", "alg2"):
      va = va_drpvi(Obj(ds), pilot, rho, 0.05, lam, variance=variance, var_shift=1e9,
                    grid=np.linspace(0, H, 7), **kw)
      same = all(np.allclose(va[k], ref[k], atol=1e-10)
                 for k in ("w", "nu", "lam_inv", "penalty_diag", "v_next"))
      same &= all(np.allclose(va["q"](h, ds["next_phi"][h, t]), ref["q"](h, ds["next_phi"][h, t]))
                  for h in range(H) for t in range(N))
      print(f"VA-DRPVI {variance} (var_shift=1e9) == DRPVI {kw}:", same,
            "nu[0] =", np.round(ref["nu"][0], 4))

  # A negative shift makes sigma2 > 1 and sample-dependent, to exercise the weighted paths.
  for variance in ("alg3", "alg2"):
    va = va_drpvi(ds, pilot, rho, 0.05, lam, variance=variance, var_shift=-2.0)
    print(f"VA-DRPVI {variance}: nu[0] = {np.round(va['nu'][0], 6)} alpha[0] = {va['alpha'][0]}",
          f"penalty_diag[0] = {np.round(va['penalty_diag'][0], 6)}")
