"""Scaling benchmarks of ``drjax bench``: seeds (``seed_scaling``), the alpha maximization kernel
alone (``alpha_max``) and one compiled hyperparameter grid (``hyperparameter_grid``)."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from drjax.bench.compiles import count_compiles
from drjax.bench.timing import _benchmark, _block, _r, _ratio, _repeat, _timed

# ---------------------------------------------------------------------------------------------
# Seed scaling


def _linear_setup(agent_name: str, episodes: int):
  from drjax.agents.base import make_hparams, rho_array  # pylint: disable=g-import-not-at-top
  from drjax.agents.lsvi import dr_lsvi_ucb, lsvi_ucb  # pylint: disable=g-import-not-at-top
  from drjax.envs.linear_mdp import LinearMDP  # pylint: disable=g-import-not-at-top

  env = LinearMDP()
  H, d, A = env.horizon, env.feature_dim, env.num_actions
  params = env.make_params(delta=0.3, p=0.001, xi_norm=0.1)
  if agent_name == "DR-LSVI-UCB":
    agent = dr_lsvi_ucb(H, d, A, episodes)
    hp = make_hparams(H, d, rho=rho_array(H, d, 0.5, at=[(0, 3)]), beta=1.0, lam=0.1)
  else:
    agent = lsvi_ucb(H, d, A, episodes)
    hp = make_hparams(H, d, rho=0.0, beta=1.0, lam=0.1)
  return env, params, agent, hp


def _linear_setup_model(params):
  from drjax.envs.linear_mdp import LinearMDP  # pylint: disable=g-import-not-at-top
  return LinearMDP().model(params)


def _seed_row(agent_name: str, num_seeds: int, episodes: int, warm_reps: int) -> dict:
  from drjax.train import make_train  # pylint: disable=g-import-not-at-top

  env, params, agent, hp = _linear_setup(agent_name, episodes)
  train = make_train(env, agent, episodes)
  traces = [0]

  def counted(key, hparams, env_params):
    traces[0] += 1
    return train(key, hparams, env_params)

  fn = jax.jit(jax.vmap(counted, in_axes=(0, None, None)))
  keys = [jax.random.split(jax.random.PRNGKey(100 + i), num_seeds) for i in range(warm_reps + 1)]
  _block(keys)
  with count_compiles() as first_stats:
    first, out = _timed(fn, keys[0], hp, params)
  returns = np.asarray(out.returns)
  with count_compiles() as warm_stats:
    warm, warm_med, reps = _repeat(fn, [(k, hp, params) for k in keys[1:]], min_reps=warm_reps,
                                   max_reps=max(warm_reps, 10), min_time_s=1.0)
  # One re-planning on the final (full) buffers, for all seeds: a run plans once per episode.
  model = params and _linear_setup_model(params)
  plan = jax.jit(jax.vmap(lambda st, hp: agent.plan(st, hp, model), in_axes=(0, None)))
  _block(plan(out.state, hp))
  plan_s, _, _ = _repeat(plan, [(out.state, hp)], min_reps=3, max_reps=20, min_time_s=0.3)
  return {
      "algorithm": agent_name,
      "seeds": num_seeds,
      "episodes": episodes,
      "first_s": _r(first),
      "warm_s": _r(warm),
      "warm_median_s": _r(warm_med),
      "warm_reps": reps,
      "ms_per_seed": _r(1e3 * warm / num_seeds),
      "plan_full_ms": _r(1e3 * plan_s),
      "plan_share": _ratio(episodes * plan_s, warm, 3),
      "traces": traces[0],
      "first_compiles": first_stats.compiles,
      "warm_compiles": warm_stats.compiles,
      "mean_return": _r(returns.mean()),
      "finite": bool(np.all(np.isfinite(returns))),
  }


@_benchmark
def seed_scaling(quick: bool = False, *, seeds=None, lsvi_seeds=None, episodes: int = 100,
                 warm_reps: int = 3) -> dict:
  """``jit(vmap(make_train))`` over seeds: first call (compile + run) and warm time per seed count.

  DR-LSVI-UCB on the linear MDP (xi_norm = 0.1, rho_{1,4} = 0.5, beta = 1, lambda = 0.1) for each
  count in ``seeds``, LSVI-UCB (beta = 1, lambda = 0.1) at ``lsvi_seeds``. Each row uses a fresh
  ``jax.jit``, so its first call traces and compiles. Each row also times one vmapped
  ``agent.plan`` on the final (full) buffers: a run re-plans on its whole buffer once per episode,
  so ``episodes x plan / warm`` estimates the planning share of a run.
  """
  if seeds is None:
    seeds = (20, 100) if quick else (20, 100, 400, 2000)
  if lsvi_seeds is None:
    lsvi_seeds = 100 if quick else 400
  rows = [_seed_row("DR-LSVI-UCB", int(n), episodes, warm_reps) for n in seeds]
  if lsvi_seeds:
    rows.append(_seed_row("LSVI-UCB", int(lsvi_seeds), episodes, warm_reps))
  return {"config": {"env": "linear-mdp", "xi_norm": 0.1, "rho_1_4": 0.5, "beta": 1.0,
                     "lambda": 0.1, "episodes": episodes, "alpha": "exact",
                     "program": "jax.jit(jax.vmap(make_train(...), in_axes=(0, None, None)))"},
          "rows": rows}


# ---------------------------------------------------------------------------------------------
# Alpha maximization


def _alpha_problems(key, batch: int, num_samples: int, d: int, horizon: float, lam: float):
  """A batch of realistic problems: ridge operators of random simplex features, v in [0, H]."""
  return _block(_alpha_problems_jit(key, batch, num_samples, d, horizon, lam))


@functools.partial(jax.jit, static_argnums=(1, 2, 3))
def _alpha_problems_jit(key, batch, num_samples, d, horizon, lam):
  from drjax import linalg  # pylint: disable=g-import-not-at-top

  k1, k2, k3 = jax.random.split(key, 3)
  e = jax.random.exponential(k1, (batch, num_samples, d))
  phi = e / jnp.sum(e, axis=-1, keepdims=True)  # Dirichlet(1, ..., 1) rows
  mask = jnp.ones((batch, num_samples), bool)
  _, M = jax.vmap(linalg.ridge_operator, in_axes=(0, 0, None))(phi, mask, lam)
  v = jax.random.uniform(k2, (batch, num_samples), M.dtype, 0.0, horizon)
  rho = jax.random.uniform(k3, (batch, d), M.dtype)
  return M, v, rho


@_benchmark
def alpha_max(quick: bool = False, *, sizes=None, grids=(100, 1000), d: int = 20,
              batch: int = 64, horizon: float = 10.0, lam: float = 0.1) -> dict:
  """Exact vs grid maximization of ``z_i(alpha) - rho_i alpha`` over ``[0, H]`` (kernel alone).

  For each K in ``sizes``: ``jit(vmap(alpha_max_exact))`` and ``jit(vmap(alpha_max_grid))`` for
  each G in ``grids`` on the same batch; warm milliseconds per call (the whole batch), the
  largest shortfall of the grid maximum below the exact one (>= 0 up to rounding), its
  Lipschitz bound ``(H / (G - 1) / 2) * (sum_tau |M_i,tau| + rho_i)``, and the largest
  difference between ``alpha_max_grid(..., include_exact=True)`` and the exact maximum.
  """
  from drjax import duals_tv  # pylint: disable=g-import-not-at-top

  if sizes is None:
    sizes = (100, 1000) if quick else (100, 1000, 10000)
  rows = []
  for K in sizes:
    M, v, rho = _alpha_problems(jax.random.PRNGKey(K), batch, int(K), d, horizon, lam)
    M2, v2, rho2 = _alpha_problems(jax.random.PRNGKey(K + 1), batch, int(K), d, horizon, lam)
    exact = jax.jit(jax.vmap(lambda m, vv, r: duals_tv.alpha_max_exact(m, vv, r, horizon)))
    first, (nu_exact, _) = _timed(exact, M, v, rho)
    warm, warm_med, reps = _repeat(exact, [(M, v, rho), (M2, v2, rho2)])
    rows.append({"K": int(K), "method": "exact", "G": None, "first_s": _r(first),
                 "ms_per_call": _r(1e3 * warm), "ms_median": _r(1e3 * warm_med),
                 "reps": reps, "max_err": 0.0, "min_err": 0.0, "err_bound": 0.0,
                 "include_exact_max_diff": None})
    nu_exact = np.asarray(nu_exact, np.float64)
    lip = np.asarray(jnp.sum(jnp.abs(M), axis=-1) + rho, np.float64)  # [B, d]
    scale = max(1.0, float(np.abs(nu_exact).max()))
    for G in grids:
      pts = duals_tv.make_grid(horizon, int(G), dtype=M.dtype)
      grid = jax.jit(jax.vmap(
          lambda m, vv, r, pts=pts: duals_tv.alpha_max_grid(m, vv, r, horizon, pts)))
      both = jax.jit(jax.vmap(
          lambda m, vv, r, pts=pts: duals_tv.alpha_max_grid(m, vv, r, horizon, pts,
                                                            include_exact=True)))
      first, (nu_grid, _) = _timed(grid, M, v, rho)
      warm, warm_med, reps = _repeat(grid, [(M, v, rho), (M2, v2, rho2)])
      nu_both = np.asarray(both(M, v, rho)[0], np.float64)
      err = nu_exact - np.asarray(nu_grid, np.float64)
      bound = (horizon / (G - 1) / 2) * lip
      eps = 1e-4 * scale if M.dtype == jnp.float32 else 1e-10 * scale  # rounding
      rows.append({
          "K": int(K), "method": f"grid G={G}", "G": int(G), "first_s": _r(first),
          "ms_per_call": _r(1e3 * warm), "ms_median": _r(1e3 * warm_med), "reps": reps,
          "max_err": float(err.max()), "min_err": float(err.min()),
          "err_bound": float(bound.max()),
          "within_bound": bool(np.all(err <= bound + eps)),
          "include_exact_max_diff": float(np.abs(nu_both - nu_exact).max()),
      })
    exact_ms = rows[-1 - len(grids)]["ms_per_call"]
    for row in rows[-len(grids):]:
      row["vs_exact"] = _ratio(row["ms_per_call"], exact_ms, 3)
  return {"config": {"d": d, "batch": batch, "horizon": horizon, "lambda": lam,
                     "dtype": str(jnp.result_type(float)),
                     "data": "M = ridge_operator(Dirichlet(1, ..., 1) features, lambda); v ~ U[0, H]; "
                             "rho ~ U[0, 1]^d"},
          "rows": rows}


# ---------------------------------------------------------------------------------------------
# Hyperparameter grid


def _grid_hparams(H, d, rhos, betas, lams):
  from drjax.agents.base import make_hparams, rho_array  # pylint: disable=g-import-not-at-top

  rho = np.stack([rho_array(H, d, r, at=[(0, 3)]) for r in rhos])[:, None, None]  # [R,1,1,H,d]
  beta = np.asarray(betas, np.float64)[None, :, None]  # [1, B, 1]
  lam = np.asarray(lams, np.float64)[None, None, :]  # [1, 1, L]
  return make_hparams(H, d, rho=rho, beta=beta, lam=lam)


@_benchmark
def hyperparameter_grid(quick: bool = False, *, shape=None, seeds: int | None = None,
                        episodes: int = 100) -> dict:
  """``drjax.sweep`` over rho_{1,4} x beta x lambda x seeds: one compilation for the whole grid.

  The second call uses different values of every hyperparameter (and another key) with the same
  shapes; it must neither retrace nor recompile (counted with ``jax.monitoring`` events).
  """
  import drjax  # pylint: disable=g-import-not-at-top

  if shape is None:
    shape = (3, 2, 2) if quick else (5, 4, 3)
  if seeds is None:
    seeds = 10 if quick else 20
  n_rho, n_beta, n_lam = shape
  env, params, agent, _ = _linear_setup("DR-LSVI-UCB", episodes)
  H, d = env.horizon, env.feature_dim
  values = [
      (np.linspace(0.1, 0.5, n_rho), np.linspace(0.5, 2.0, n_beta), np.geomspace(0.05, 1.0, n_lam)),
      (np.linspace(0.15, 0.6, n_rho), np.linspace(0.25, 1.5, n_beta), np.geomspace(0.1, 2.0, n_lam)),
  ]
  calls = []
  outs = []
  for i, (rhos, betas, lams) in enumerate(values):
    hp = _grid_hparams(H, d, rhos, betas, lams)
    key = jax.random.PRNGKey(1000 + i)
    with count_compiles() as stats:
      dt, out = _timed(lambda hp=hp, key=key: drjax.sweep(
          env, params, agent, key, num_seeds=seeds, num_episodes=episodes, hparams=hp))
    outs.append(np.asarray(out.returns))
    calls.append({"s": _r(dt), **stats.as_dict(),
                  "rho_1_4": [float(x) for x in rhos], "beta": [float(x) for x in betas],
                  "lambda": [float(x) for x in lams]})
  settings = n_rho * n_beta * n_lam
  runs = settings * seeds
  first, second = calls
  return {
      "config": {"env": "linear-mdp", "grid": list(shape), "settings": settings, "seeds": seeds,
                 "runs": runs, "episodes": episodes, "alpha": "exact"},
      "first": first,
      "second": second,
      "returns_shape": list(outs[0].shape),
      "outputs_differ": bool(not np.array_equal(outs[0], outs[1])),
      "finite": bool(np.all(np.isfinite(outs[0])) and np.all(np.isfinite(outs[1]))),
      "ms_per_run_warm": _r(1e3 * second["s"] / runs),
      "no_recompile": second["traces"] == 0 and second["compiles"] == 0,
  }
