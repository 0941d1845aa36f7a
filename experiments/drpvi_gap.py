"""DRPVI's rho = 0 gap to PEVI on CartPole (issue 34): measurement and controls.

Every agent is fitted to the *same* datasets (N uniform-behavior trajectories per seed, source pole
length 0.5) and evaluated by Monte Carlo at the source with common random numbers:

* ``pevi``: ridge regression of r + V (the nominal backup);
* ``drpvi``: rho = 0, the paper's estimator (per-coordinate max over alpha of the ridge z_i(alpha));
* ``drpvi-mono``: rho = 0 with ``monotone=True`` (z_i made nondecreasing in alpha by a suffix
  minimum over the sorted breakpoints before the maximization; equals PEVI's regression at rho 0);
* the same three with one-hot (tile, one tiling) features: the tabular control.

Diagnostics per step: the share of negative entries of Lambda^-1 and the mean of
nu_i - z_i(H) (DRPVI's upward bias over the plain regression at rho = 0).

  python experiments/drpvi_gap.py --trajectories 1000 --seeds 8 --beta 0 --out gap.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from drjax import data, envs, evaluate
from drjax.agents import offline
from drjax.bench import machine


def make_env(features: str, horizon: int):
  if features == "rbf":  # the shifts study's CartPole (docs/findings/shifts.md)
    return envs.make("cartpole", horizon=horizon, obs_dims=(2, 3), centers_per_dim=4)
  # one-hot: tile coding with one tiling (each (state, action) lights one coordinate)
  return envs.make("cartpole", horizon=horizon, obs_dims=(2, 3), features="tiles",
                   tiles_per_dim=3, num_tilings=1)


def run(features, n, seeds, beta, lam, test_episodes, horizon, targets, rhos=(), length=0.5,
        va=False):
  env = make_env(features, horizon)
  H, d, A = env.horizon, env.feature_dim, env.num_actions
  params = env.make_params(length=length)
  agents = {"pevi": offline.pevi(H, d, A),
            "drpvi": offline.drpvi(H, d, A, reward="regressed"),
            "drpvi-mono": offline.drpvi(H, d, A, reward="regressed", monotone=True)}
  hp = {"pevi": offline.PEVIHParams(beta=jnp.asarray(beta), lam=jnp.asarray(lam))}
  for k in ("drpvi", "drpvi-mono"):
    hp[k] = offline.DRPVIHParams(rho=jnp.zeros((H, d)), beta=jnp.asarray(beta),
                                 lam=jnp.asarray(lam))
  if va:  # VA-DRPVI (Alg. 3) with an independent pilot of N trajectories, both estimators
    agents["va-drpvi"] = offline.va_drpvi(H, d, A, reward="regressed")
    agents["va-drpvi-mono"] = offline.va_drpvi(H, d, A, reward="regressed", monotone=True)
    for k in ("va-drpvi", "va-drpvi-mono"):
      hp[k] = offline.VADRPVIHParams(rho=jnp.zeros((H, d)), beta=jnp.asarray(beta),
                                     lam=jnp.asarray(lam), var_shift=jnp.asarray(0.0))
  for r in rhos:  # the robust agents at rho > 0, both estimators
    for k in ("drpvi", "drpvi-mono"):
      agents[f"{k}@{r:g}"] = agents[k]
      hp[f"{k}@{r:g}"] = hp[k]._replace(rho=jnp.full((H, d), r))
  behavior = data.uniform(A)
  base = jax.random.PRNGKey(0)
  keys = jnp.stack([jax.random.fold_in(base, s) for s in range(seeds)])
  t0 = time.perf_counter()
  ds = jax.jit(jax.vmap(lambda k: data._collect(env, params, behavior, jax.random.fold_in(k, 0),
                                                n)))(keys)
  pilots = None
  if va:
    pilots = jax.jit(jax.vmap(lambda k: data._collect(env, params, behavior,
                                                      jax.random.fold_in(k, 2), n)))(keys)
  out = {"features": features, "d": d, "N": n, "seeds": seeds, "beta": beta, "lam": lam,
         "H": H, "test_episodes": test_episodes, "source_length": length,
         "targets": list(targets), "values": {}, "diag": {}}
  tps = [env.make_params(length=t) for t in targets]
  for name, agent in agents.items():
    if agent.needs_pilot:
      fit = jax.jit(jax.vmap(lambda D, Pd, a=agent, h=hp[name]: a.fit.unchecked(
          D, h, pilot=Pd, form="buffer")))
      qf = fit(ds, pilots)
    else:
      fit = jax.jit(jax.vmap(lambda D, a=agent, h=hp[name]: a.fit.unchecked(D, h, form="buffer")))
      qf = fit(ds)
    vals = []
    for tp in tps:  # [targets][seeds]; common random numbers across agents
      ev = jax.jit(jax.vmap(lambda q, k, a=agent, p=tp: evaluate.mc_evaluate(
          env, a, q, p, jax.random.fold_in(k, 1), test_episodes)["mean"]))
      vals.append(np.asarray(ev(qf, keys)).tolist())
    out["values"][name] = vals
    if name == "drpvi":
      pinv = np.asarray(qf.pinv)
      off = ~np.eye(d, dtype=bool)
      out["diag"]["neg_share_offdiag_pinv"] = float(np.mean(pinv[..., off] < 0))
    if name == "drpvi-mono":  # one-step bias of the paper's oracle on the nominal targets
      out["diag"].update(_bias(agent, qf, ds, H, hp[name]))
  out["seconds"] = round(time.perf_counter() - t0, 1)
  return out


def _bias(agent, qf, ds, H, hp):
  """With the nominal targets V_{h+1} (the monotone fit's, = PEVI's at rho 0), the paper's
  oracle nu_i = max_alpha z_i(alpha) against the plain regression z_i(H), and the mean
  over the data of phi^T (nu - z(H)) (the Q-value inflation of one backup), steps 0..H-2."""
  from drjax import duals_tv

  def one(q, D):
    def step(h):
      qn = agent.q_values(q, h + 1, D.next_phi[h], D.next_fail[h])
      v = jnp.where(D.next_fail[h], 0.0, jnp.max(qn, -1))
      g = D.phi[h]
      nu, _ = duals_tv.alpha_max_atoms(q.pinv[h], g, v, 0.0, float(H))
      zH = q.pinv[h] @ (g.T @ v)
      return nu - zH, jnp.mean(g @ (nu - zH))
    return jax.vmap(step)(jnp.arange(H - 1))

  dnu, dq = jax.jit(jax.vmap(one))(qf, ds)
  return {"nu_minus_zH_mean": float(jnp.mean(dnu)), "nu_minus_zH_max": float(jnp.max(dnu)),
          "nu_minus_zH_min": float(jnp.min(dnu)), "q_inflation_per_step": float(jnp.mean(dq))}


def summary(out, t):
  v = {k: np.asarray(x[t]) for k, x in out["values"].items()}
  n = len(v["pevi"])
  se = lambda x: float(np.std(x, ddof=1) / np.sqrt(n)) if n > 1 else float("nan")  # noqa: E731
  rows = {k: (float(x.mean()), se(x)) for k, x in v.items()}
  rows["pevi - drpvi"] = (float((v["pevi"] - v["drpvi"]).mean()), se(v["pevi"] - v["drpvi"]))
  rows["pevi - drpvi-mono"] = (float((v["pevi"] - v["drpvi-mono"]).mean()),
                               se(v["pevi"] - v["drpvi-mono"]))
  return rows


def sweep_rows(out_dir):
  """The summary of a ``drjax sweep`` of PEVI / DRPVI / DRPVI-mono (``--sweep DIR``)."""
  import csv
  with open(f"{out_dir}/summary.csv") as fh:
    rows = list(csv.DictReader(fh))
  return [{"agent": r["agent"], "rho": float(r["rho"]) if r["rho"] else None,
           "target": float(r["target_length"]), "mean": float(r["value_mean"]),
           "stderr": float(r["value_stderr"]), "seeds": int(r["value_count"])} for r in rows]


def findings(paths, out, commands, sweep=None):
  """Merges result files of this script into one findings JSON (docs/findings/drpvi_gap.json):
  ``rows`` of (features, beta, target, agent, mean, stderr, seeds, N) and ``diag``."""
  rows, diag = [], []
  for path in paths:
    with open(path) as fh:
      for o in json.load(fh):
        for t, summ in o["summary"].items():
          for agent, (m, se) in summ.items():
            if any(r["features"] == o["features"] and r["beta"] == o["beta"] and
                   r["target"] == float(t) and r["agent"] == agent.replace("@", " rho=") for r in rows):
              continue  # the same run in two files (same keys): keep the first
            rows.append({"features": o["features"], "beta": o["beta"], "lam": o["lam"],
                         "target": float(t), "agent": agent.replace("@", " rho="), "mean": m,
                         "stderr": se, "seeds": o["seeds"], "N": o["N"]})
        if any(x["features"] == o["features"] and x["beta"] == o["beta"] for x in diag):
          continue
        diag.append({"features": o["features"], "beta": o["beta"],
                     **{k: round(v, 4) for k, v in o["diag"].items()}, "seconds": o["seconds"]})
  with open(out, "w") as fh:
    json.dump({"machine": machine.short_machine_name(), "commands": commands, "env": "cartpole H=30 "
               "obs_dims=(2,3); rbf centers_per_dim=4 (d=32) or tiles 3 per dim, 1 tiling "
               "(one-hot, d=32); source length 0.5; uniform behavior; 500 test episodes",
               "rows": rows, "diag": diag,
               "sweep": sweep_rows(sweep) if sweep else []}, fh, indent=1)


def main():
  if len(sys.argv) > 1 and sys.argv[1] == "--findings":  # --findings OUT IN.json... -- CMD...
    args = sys.argv[2:]
    sweep = None
    if "--sweep" in args:  # --sweep DIR: a drjax sweep's summary.csv
      i = args.index("--sweep")
      sweep = args[i + 1]
      del args[i:i + 2]
    cut = args.index("--") if "--" in args else len(args)
    findings(args[1:cut], args[0], args[cut + 1:], sweep)
    return
  p = argparse.ArgumentParser()
  p.add_argument("--trajectories", type=int, default=1000)
  p.add_argument("--seeds", type=int, default=8)
  p.add_argument("--beta", type=float, default=0.0)
  p.add_argument("--lam", type=float, default=1.0)
  p.add_argument("--test-episodes", type=int, default=500)
  p.add_argument("--horizon", type=int, default=30)
  p.add_argument("--features", nargs="+", default=["rbf", "onehot"])
  p.add_argument("--targets", type=float, nargs="+", default=[0.05, 0.25, 0.5, 2.0],
                 help="pole lengths to evaluate at (source 0.5)")
  p.add_argument("--va", action="store_true", help="also VA-DRPVI (Alg. 3) with a pilot of N")
  p.add_argument("--rhos", type=float, nargs="*", default=[],
                 help="also DRPVI (both estimators) at these rho > 0")
  p.add_argument("--out", default=None)
  a = p.parse_args()
  res = []
  for f in a.features:
    o = run(f, a.trajectories, a.seeds, a.beta, a.lam, a.test_episodes, a.horizon, a.targets,
            a.rhos, va=a.va)
    o["summary"] = {str(t): summary(o, i) for i, t in enumerate(a.targets)}
    res.append(o)
    print(f"{f} (d={o['d']}, N={a.trajectories}, seeds={a.seeds}, beta={a.beta}, "
          f"lam={a.lam}; {o['seconds']} s) diag={o['diag']}", flush=True)
    for t, rows in o["summary"].items():
      print(f" length {t}:")
      for k, (m, s) in rows.items():
        print(f"  {k:18s} {m:7.2f} +- {s:.2f}")
  if a.out:
    with open(a.out, "w") as fh:
      json.dump(res, fh, indent=1)


if __name__ == "__main__":
  main()
