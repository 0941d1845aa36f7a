"""What the R2PVI public code's bugs change in the R2PVI paper's results, measured with drjax.

    python experiments/r2pvi_published_code.py [--seeds 20] [--json out.json]

1. **chi2 sign** (``Simulated_Linear_MDP/algorithm.py R2PVI_xi2.get_nu_h`` minimizes the dual
   objective over alpha in [0, H] instead of maximizing it). On Figure 1(a)'s setting (linear
   MDP, ||xi||_1 = 0.2, regularization weight 0.1, K = 100 uniform trajectories, beta 1, lambda
   0.1, 11 targets q), R2PVI-chi2 as the paper defines it (drjax: exact maximization) against the
   same agent with the minimum over a 2,001-point alpha grid on [0, H] (the published choice; the
   published code's Nelder-Mead finds a local minimum, the grid the global one), both evaluated
   exactly on every target; also the share of per-coordinate values nu_{h,i} <= 0 and the mean
   over the seeds' learned curves of PEVI for reference.
2. **Reseeded replications** (put option: every replication's dataset is drawn after reseeding
   the global RNG to 1, so replications share their price paths). drjax draws independent
   datasets; here, on Figure 1(d)'s setting (put option, H = 20, 30 anchors, N = 100 always-hold
   trajectories, exact lattice values), the seed-to-seed standard deviation of each learned curve
   is what a band over shared-path replications leaves out.
3. **Strike = dataset size** (put option: ``self.K = len(dataset['S'])`` is used as the strike):
   with N = 100, Figure 1(d)'s size, the strike is 100 and nothing changes; the timing study
   (N = 1,000-10,000) ran with strike N, which changes only values nobody reported (drjax's timing
   figure, ``drjax reproduce r2pvi-time``, uses strike 100; a fit's time does not depend on it).

Each number is printed with the setting that produced it.
"""

import argparse
import json
import time

from drjax import _xla  # noqa: I001  isort: skip

_xla.configure()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from drjax import data as data_lib, evaluate  # noqa: E402
from drjax.agents import offline, registry  # noqa: E402
from drjax.envs.linear_mdp import LinearMDP, target_params  # noqa: E402
from drjax.paper import r2pvi as fig  # noqa: E402

ALPHA_GRID = 2001


def chi2_dual_min_grid(M, v, weight, horizon):
  """The published code's choice: the MINIMUM over alpha in [0, H] (grid) of the chi2 dual."""
  d = M.shape[0]
  alphas = jnp.linspace(0.0, jnp.asarray(horizon, M.dtype), ALPHA_GRID)
  vv = jnp.minimum(v[None, :], alphas[:, None])  # [G, n]
  z, z2 = vv @ M.T, (vv * vv) @ M.T              # [G, d]
  w4 = 4.0 * jnp.broadcast_to(jnp.asarray(weight, M.dtype), (d,))
  return jnp.min(z - (z2 - z * z) / w4, axis=0)


def published_chi2(x, hp):
  """R2PVI-chi2's oracle with the published sign (a composition: ``drjax.agents.compose``)."""
  nu = chi2_dual_min_grid(x.pinv @ x.g.T, x.v, hp.reg_weight[x.h].astype(x.pinv.dtype),
                          x.horizon)
  return nu, jnp.zeros_like(nu)


def _agent(name: str, env, published: bool):
  if not published or name != "r2pvi-chi2":
    return registry.make(name, env)
  return offline.make_agent("R2PVI-chi2 (published sign)", offline.R2PVIHParams, env.horizon,
                            env.feature_dim, env.num_actions, oracle=published_chi2)


def _curves(seeds: int, trajectories: int, key, published: bool = False):
  env = LinearMDP()
  params = env.make_params(delta=fig.DELTA, xi_norm=fig.FIG_A_XI, p=fig.P)
  model = env.model(params)
  behavior = data_lib.uniform(env.num_actions)
  targets = target_params(params, jnp.asarray(fig.QS))
  out = {}
  for name in ("pevi", "r2pvi-chi2"):
    agent = _agent(name, env, published)
    hp = fig._hp(agent, registry.get(name), fig.FIG_A_WEIGHT)  # pylint: disable=protected-access

    def per_seed(k, agent=agent, hp=hp):
      ds = data_lib._collect(env, params, behavior, jax.random.fold_in(k, 0), trajectories)  # pylint: disable=protected-access
      qf = agent.fit(ds, hp, model=model, form="stats")
      vals = jax.vmap(lambda t: evaluate.target_value(env, agent, qf, t))(targets)
      nu = qf.w - ds.theta
      return vals, nu

    keys = jax.random.split(key, seeds)
    out[name] = jax.jit(jax.vmap(per_seed))(keys)
  return out


def chi2_sign(seeds: int, trajectories: int) -> dict:
  key = jax.random.PRNGKey(11)
  t0 = time.perf_counter()
  paper = _curves(seeds, trajectories, key)
  published = _curves(seeds, trajectories, key, published=True)
  mean = lambda x: np.asarray(x).mean(0)  # noqa: E731
  res = {
      "setting": {"env": "linear-mdp", "xi_norm": fig.FIG_A_XI, "delta": fig.DELTA,
                  "reg_weight": fig.FIG_A_WEIGHT, "beta": fig.BETA, "lambda": fig.LAM,
                  "trajectories": trajectories, "seeds": seeds, "q": list(fig.QS),
                  "published_alpha_grid": ALPHA_GRID},
      "pevi": mean(paper["pevi"][0]).tolist(),
      "chi2_max (paper, drjax)": mean(paper["r2pvi-chi2"][0]).tolist(),
      "chi2_min (published code)": mean(published["r2pvi-chi2"][0]).tolist(),
      "share_nu_nonpositive": {
          "max": float((np.asarray(paper["r2pvi-chi2"][1])[:, :-1] <= 0).mean()),
          "min": float((np.asarray(published["r2pvi-chi2"][1])[:, :-1] <= 0).mean())},
      "seconds": time.perf_counter() - t0,
  }
  return res


def put_spread(seeds: int, trajectories: int) -> dict:
  t0 = time.perf_counter()
  res = fig.run_put(seeds=seeds, trajectories=trajectories, key=jax.random.PRNGKey(12))
  a = res["agents"]
  rows = {}
  for name, arr, levels, lab in (("r2pvi-tv", a["r2pvi-tv"], fig.PUT_WEIGHTS, "weight"),
                                 ("drpvi", a["drpvi"], fig.PUT_RHOS, "rho")):
    arr = np.asarray(arr, float)  # [S, levels, p]
    for j, lv in enumerate(levels):
      rows[f"{name} {lab} {lv:g}"] = {"mean": arr[:, j].mean(0).tolist(),
                                      "sd": arr[:, j].std(0, ddof=1).tolist()}
  pe = np.asarray(a["pevi"], float)
  rows["pevi"] = {"mean": pe.mean(0).tolist(), "sd": pe.std(0, ddof=1).tolist()}
  return {"setting": {"env": "put-option", "H": fig.PUT_HORIZON, "anchors": fig.PUT_ANCHORS,
                      "trajectories": trajectories, "seeds": seeds, "p_up": list(fig.PUT_PU),
                      "strike": 100, "behavior": "always hold"},
          "curves": rows, "seconds": time.perf_counter() - t0}


def main():
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--seeds", type=int, default=20)
  ap.add_argument("--json", default=None)
  args = ap.parse_args()
  if args.seeds < 2:
    ap.error("--seeds must be >= 2 (a standard deviation needs two seeds)")
  out = {"chi2_sign": chi2_sign(args.seeds, 100), "put_spread": put_spread(args.seeds, 100)}
  c = out["chi2_sign"]
  print(f"1. chi2 sign, linear MDP ||xi||_1 = {fig.FIG_A_XI}, weight {fig.FIG_A_WEIGHT}, "
        f"{args.seeds} seeds x K = 100, mean exact value at q = 0, 0.5, 1:")
  for k in ("pevi", "chi2_max (paper, drjax)", "chi2_min (published code)"):
    v = c[k]
    print(f"   {k:28s} {v[0]:.3f} {v[5]:.3f} {v[10]:.3f}   (mean over q {np.mean(v):.3f})")
  print(f"   share of nu_h,i <= 0 (h < H): max {c['share_nu_nonpositive']['max']:.3f}, "
        f"min {c['share_nu_nonpositive']['min']:.3f}")
  p = out["put_spread"]
  print(f"2. put option, {args.seeds} independent datasets x N = 100: mean (sd across seeds) at "
        f"p = {fig.PUT_PU[0]} and {fig.PUT_PU[-1]}:")
  for k, r in p["curves"].items():
    print(f"   {k:22s} {r['mean'][0]:.3f} ({r['sd'][0]:.3f})   {r['mean'][-1]:.3f} "
          f"({r['sd'][-1]:.3f})")
  if args.json:
    with open(args.json, "w") as f:
      json.dump(out, f, indent=1)


if __name__ == "__main__":
  main()
