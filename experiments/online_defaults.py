"""The measurements behind the online agents' recommended hyperparameters (issue 34, item 1).

Writes ``experiments/results/online_defaults.json``: the bonus widths of every gymnax environment
(``drjax.envs.recommend.widths``) and the recommended beta / lambda; then, on CartPole at the
source (rho 0.05), the played and greedy returns of LSVI-UCB and DR-LSVI-UCB over a beta x lambda
grid and with the defaults, beside a uniformly random policy. docs/environments.md
("Recommended hyperparameters") quotes it.

  python experiments/online_defaults.py [--horizon 100] [--episodes 100] [--seeds 2] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import time


def main(argv=None) -> dict:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--horizon", type=int, default=100)
  p.add_argument("--episodes", type=int, default=100)
  p.add_argument("--seeds", type=int, default=2)
  p.add_argument("--test-episodes", type=int, default=32)
  p.add_argument("--quick", action="store_true", help="the defaults only (no grid)")
  p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results",
                                               "online_defaults.json"))
  a = p.parse_args(argv)
  from drjax import envs, sweeps
  from drjax.envs import recommend
  from drjax.sweeps.storage import provenance

  out = {"provenance": provenance(), "scale": recommend.SCALE, "lam": recommend.LAM,
         "widths": {}, "runs": []}
  for name in ("cartpole", "pendulum", "acrobot", "mountain-car"):
    env = envs.make(name)
    norm, gap = recommend.widths(env)
    out["widths"][name] = {"horizon": env.horizon, "return_bound": recommend.return_bound(env),
                           "phi_norm": norm, "rect_gap": gap,
                           "recommended": recommend.online_hparams(env)}

  def sweep(agent_hparams, lam=None):
    cfg = sweeps.SweepConfig(
        env="cartpole", env_args={"horizon": a.horizon},
        agents=tuple(agent_hparams or ("lsvi-ucb", "dr-lsvi-ucb")) + ("uniform-random",),
        rho=(0.05,), seeds=a.seeds, episodes=a.episodes, test_episodes=a.test_episodes,
        agent_hparams=agent_hparams or {}, lam=lam)
    t0 = time.perf_counter()
    res = sweeps.run(cfg)
    s = res.summary
    rows = [{k: (None if v != v else v) if isinstance(v, float) else v
             for k, v in r.items()} for r in s[["agent", "beta", "lam", "policy", "value_mean",
                                                "value_stderr", "value_count"]].astype(
                                                    {"agent": str, "policy": str}).to_dict(
                                                        "records")]
    out["runs"].append({"config": res.info["config"], "seconds": time.perf_counter() - t0,
                        "summary": rows})

  sweep(None)  # the defaults
  if not a.quick:
    for lam in (1.0, 0.1, 0.01):
      sweep({"lsvi-ucb": {"beta": (10.0, 30.0, 100.0, 300.0), "lam": (lam,)},
             "dr-lsvi-ucb": {"beta": (10.0, 30.0, 100.0, 300.0), "lam": (lam,)}}, lam=(lam,))
  os.makedirs(os.path.dirname(a.out), exist_ok=True)
  with open(a.out, "w", encoding="utf-8") as f:
    json.dump(out, f, indent=1)
  print(f"wrote {a.out}")
  return out


if __name__ == "__main__":
  main()
