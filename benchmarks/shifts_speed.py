"""One configuration of the shift study, timed three ways in one process (interleaved, median):

* drjax: ``drjax.sweep`` (``jit(vmap_hparams(vmap_seeds(train)))``, the entry point a user
  calls) of DR-LSVI-UCB (regressed reward, buffer form, exact TV dual) on CartPole-v1 (H = 30,
  RBF features on the pole angle and angular velocity, 4 x 4 centers, d = 32, A = 2), K episodes
  x N seeds, compiled once before timing;
* NumPy: the same algorithm vectorized over seeds: gymnax's CartPole dynamics written in NumPy
  (every seed at once), the same RBF features, and DR-LSVI-UCB's backward induction in buffer
  form with the exact TV dual (``drjax.bench.numpy_ref_kernels``: Sherman-Morrison ``Lambda^-1``
  and ridge rows, ``plan_buffer``'s sorted exact alpha-max), the reward regressed with the ridge
  rows; one OpenBLAS thread per the kernels' default (``blas_threads(1)``);
* gymnax's own CartPole step rate for the same number of environment steps (N x K x H random
  actions, ``vmap`` over N, ``lax.scan`` over K H), to say how far each trainer is from the
  environment's bound.

Agreement: given drjax's stored buffers after K episodes (phi, rewards, next-state features,
fail flags), the NumPy plan computes the final Q weights ``w [H, d]`` of every seed; their largest
difference to drjax's ``final_qf.w`` is reported (float32 both).

  python benchmarks/shifts_speed.py [--seeds 8] [--episodes 150] [--repeats 3] [--out FILE]

Writes ``benchmarks/results/<machine>-shifts-speed.json`` (machine info, versions, git revision).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from drjax import envs, train  # noqa: E402
from drjax.agents import base, registry  # noqa: E402
from drjax.bench import machine  # noqa: E402
from drjax.bench import numpy_ref_kernels as nk  # noqa: E402

H, RHO, BETA, LAM = 30, 0.2, 10.0, 1.0
ENV_ARGS = dict(horizon=H, obs_dims=(2, 3), centers_per_dim=4)


def make_env():
  return envs.make("cartpole", **ENV_ARGS)


# ---------------------------------------------------------------------------------------------
# NumPy: CartPole (gymnax's CartPole-v1 equations), features, DR-LSVI-UCB


def _features(obs, fm, dims, A):
  """[N, A, d] action-block RBF features of observations [N, 4] (as drjax.features.rbf)."""
  x = obs[:, dims]
  lo, hi = np.asarray(fm.low, np.float32), np.asarray(fm.high, np.float32)
  u = np.clip((x - lo) / (hi - lo), 0.0, 1.0)
  out = None
  for j, n in enumerate(fm.sizes):
    c = np.linspace(0.0, 1.0, n, dtype=np.float32)
    sigma = fm.width / (n - 1)
    z = -((u[:, j:j + 1] - c) ** 2) / (2.0 * sigma**2)
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    out = p if out is None else (out[:, :, None] * p[:, None, :]).reshape(len(x), -1)
  N, m = out.shape
  phi = np.zeros((N, A, A * m), np.float32)
  for a in range(A):
    phi[:, a, a * m:(a + 1) * m] = out
  return phi


def _cartpole_step(s, a, p):
  x, x_dot, th, th_dot = s.T
  force = p["force_mag"] * (2.0 * a - 1.0)
  ct, st = np.cos(th), np.sin(th)
  total, pml = p["masscart"] + p["masspole"], p["masspole"] * p["length"]
  temp = (force + pml * th_dot**2 * st) / total
  thacc = (p["gravity"] * st - ct * temp) / (p["length"] * (4.0 / 3.0 - p["masspole"] * ct**2
                                                             / total))
  xacc = temp - pml * thacc * ct / total
  tau = p["tau"]
  s2 = np.stack([x + tau * x_dot, x_dot + tau * xacc, th + tau * th_dot, th_dot + tau * thacc],
                axis=1).astype(np.float32)
  done = (np.abs(s2[:, 0]) > p["x_threshold"]) | (np.abs(s2[:, 2]) > p["theta_threshold_radians"])
  return s2, done


def numpy_train(N, K, env, *, seed=0):
  """DR-LSVI-UCB (regressed reward, buffer form, exact TV dual) on NumPy CartPole: [N, K]."""
  fm, dims, A, d = env.feature_map, np.asarray(env.obs_dims), env.num_actions, env.feature_dim
  gp = env.default_params().physics
  p = {k: float(getattr(gp, k)) for k in ("force_mag", "masscart", "masspole", "length",
                                          "gravity", "tau", "x_threshold",
                                          "theta_threshold_radians")}
  rng = np.random.default_rng(seed)
  rho = np.full((H, d), RHO, np.float32)
  pinv = np.broadcast_to(np.eye(d, dtype=np.float32) / LAM, (H, N, d, d)).copy()
  rows = np.zeros((H, N, K, d), np.float32)
  rew = np.zeros((H, N, K), np.float32)
  nphi = np.zeros((H, N, d, K, A), np.float32)
  nfail = np.zeros((H, N, K), bool)
  returns = np.zeros((N, K), np.float32)
  ar = np.arange(N)
  for k in range(K):
    theta = np.einsum("hntd,hnt->hnd", rows[:, :, :k], rew[:, :, :k])  # regressed reward
    _, u = nk.plan_buffer(theta, pinv, rows, nphi, nfail, k, rho, BETA)
    s = rng.uniform(-0.05, 0.05, (N, 4)).astype(np.float32)
    fail = np.zeros(N, bool)
    feats = _features(s, fm, dims, A)
    ep_phi = np.empty((H, N, d), np.float32)
    for h in range(H):
      q = np.matmul(feats, u[h][:, :, None])[:, :, 0]
      a = q.argmax(axis=1)  # the optimistic tie-break = argmax of the unclipped Q
      ep_phi[h] = np.where(fail[:, None], 0.0, feats[ar, a])
      s2, done = _cartpole_step(s, a, p)
      r = np.where(fail, 0.0, 1.0).astype(np.float32)
      rew[h, :, k] = r
      returns[:, k] += r
      fail = fail | done
      s = np.where(fail[:, None], s, s2)
      feats = np.where(fail[:, None, None], 0.0, _features(s, fm, dims, A))
      nphi[h, :, :, k] = feats.transpose(0, 2, 1)
      nfail[h, :, k] = fail
    new_rows = nk.sherman_morrison(pinv, ep_phi)
    nk.update_rows(rows[:, :, :k], ep_phi, new_rows)
    rows[:, :, k] = new_rows
  return returns


def numpy_plan_from_state(state, K):
  """The NumPy plan's w [N, H, d] from drjax's stored buffers (one plan over K episodes)."""
  phi = np.asarray(state.phi, np.float64)  # [N, H, K, d]
  N, _, _, d = phi.shape
  pinv = np.linalg.inv(np.einsum("nhkd,nhke->nhde", phi, phi) + LAM * np.eye(d))
  rows = np.einsum("nhde,nhke->nhkd", pinv, phi)
  rew = np.asarray(state.reward, np.float64)
  theta = np.einsum("nhkd,nhk->hnd", rows, rew)
  nphi = np.asarray(state.next_phi, np.float64).transpose(1, 0, 4, 2, 3)  # [H, N, d, K, A]
  w, _ = nk.plan_buffer(theta, pinv.transpose(1, 0, 2, 3).copy(), rows.transpose(1, 0, 2, 3),
                        nphi, np.asarray(state.next_fail).transpose(1, 0, 2), K,
                        np.full((H, d), RHO), BETA)
  return w.transpose(1, 0, 2)


# ---------------------------------------------------------------------------------------------


def main(argv=None) -> dict:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--seeds", type=int, default=8)
  ap.add_argument("--episodes", type=int, default=150)
  ap.add_argument("--repeats", type=int, default=3)
  ap.add_argument("--out", default=None)
  a = ap.parse_args(argv)
  N, K = a.seeds, a.episodes
  import gymnax  # pylint: disable=g-import-not-at-top
  env = make_env()
  params = env.default_params()
  d = env.feature_dim
  agent = registry.make("dr-lsvi-ucb", env, capacity=K, reward="regressed")
  hp = base.HParams(rho=jnp.full((H, d), RHO, jnp.float32), beta=jnp.float32(BETA),
                    lam=jnp.float32(LAM))
  key = jax.random.PRNGKey(0)

  def drjax_run(outputs=("returns",)):
    return train.sweep(env, params, agent, key, num_seeds=N, num_episodes=K, hparams=hp,
                       outputs=outputs)

  gym, gparams = gymnax.make("CartPole-v1")

  @jax.jit
  def gymnax_rollout(keys):
    def one(k0):
      _, s = gym.reset(k0, gparams)

      def step(carry, k):
        s, tot = carry
        act = jax.random.bernoulli(k).astype(jnp.int32)
        _, s2, r, _, _, _ = gym.step(k, s, act, gparams)
        return (s2, tot + r), None
      (_, tot), _ = jax.lax.scan(step, (s, jnp.zeros(())), jax.random.split(k0, K * H))
      return tot
    return jax.vmap(one)(keys)

  gkeys = jax.random.split(jax.random.PRNGKey(1), N)
  t0 = time.perf_counter()
  jax.block_until_ready(drjax_run().returns)
  compile_s = time.perf_counter() - t0
  jax.block_until_ready(gymnax_rollout(gkeys))
  times = {"drjax": [], "numpy": [], "gymnax": []}
  np_returns = None
  with nk.blas_threads(1):
    for _ in range(a.repeats):
      t0 = time.perf_counter()
      out = drjax_run()
      jax.block_until_ready(out.returns)
      times["drjax"].append(time.perf_counter() - t0)
      t0 = time.perf_counter()
      np_returns = numpy_train(N, K, env)
      times["numpy"].append(time.perf_counter() - t0)
      t0 = time.perf_counter()
      jax.block_until_ready(gymnax_rollout(gkeys))
      times["gymnax"].append(time.perf_counter() - t0)
  med = {k: statistics.median(v) for k, v in times.items()}
  # agreement: the NumPy plan on drjax's buffers against drjax's final Q weights
  full = drjax_run(outputs=("returns", "state", "final_qf"))
  w_np = numpy_plan_from_state(full.state, K)
  w_dj = np.asarray(full.final_qf.w, np.float64)
  agree = float(np.max(np.abs(w_np - w_dj)))
  steps = N * K * H
  res = {
      "config": {"env": "cartpole", "env_args": {k: list(v) if isinstance(v, tuple) else v
                                                 for k, v in ENV_ARGS.items()},
                 "agent": "dr-lsvi-ucb", "reward": "regressed", "form": "buffer", "d": d,
                 "A": env.num_actions, "H": H, "K": K, "seeds": N, "rho": RHO, "beta": BETA,
                 "lam": LAM, "repeats": a.repeats, "entry_point": "drjax.sweep"},
      "machine": machine.machine_info(), "jax": jax.__version__, "numpy": np.__version__,
      "gymnax": __import__("importlib.metadata").metadata.version("gymnax"),
      **machine.source_info(), "device": str(jax.devices()[0]),
      "seconds": times, "median_s": med, "drjax_compile_s": compile_s,
      "numpy_over_drjax": med["numpy"] / med["drjax"],
      "drjax_over_gymnax": med["drjax"] / med["gymnax"],
      "numpy_over_gymnax": med["numpy"] / med["gymnax"],
      "env_steps": steps, "gymnax_steps_per_s": steps / med["gymnax"],
      "drjax_train_steps_per_s": steps / med["drjax"],
      "numpy_train_steps_per_s": steps / med["numpy"],
      "agreement_max_abs_w_diff": agree, "w_scale": float(np.max(np.abs(w_dj))),
      "mean_return_last_10": {"drjax": float(np.asarray(out.returns)[..., -10:].mean()),
                              "numpy": float(np_returns[:, -10:].mean())},
      "load_average_1min": os.getloadavg()[0],
  }
  print(json.dumps(res, indent=1))
  path = a.out or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                               f"{machine.short_machine_name()}-shifts-speed.json")
  with open(path, "w", encoding="utf-8") as f:
    json.dump(res, f, indent=1)
  print(f"wrote {path}")
  return res


if __name__ == "__main__":
  main()
