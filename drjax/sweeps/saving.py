"""Stage 1 of the two-stage recipe from a sweep's configuration: ``save_policies``
(``drjax sweep ... --save-policies PATH``) learns the configuration's one agent at its one setting,
one policy per seed with the sweep's keys, and saves the stack as a ``drjax.policies`` file.

Here, in the sweeps package, because it reads a sweep's configuration, grid and agent factory;
``drjax.policies`` (below the sweeps) holds the file format and the behaviors.
"""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np

from drjax import policies
from drjax.sweeps import config as sconf, program
from drjax.sweeps.errors import _Error
from drjax.sweeps.grid import _settings, reward_option


def save_policies(config, path: str | os.PathLike, *, agent: str | None = None) -> dict:
  """Stage 1 from a sweep's configuration: learns ``agent``'s policy (default: the config's only
  agent) at the config's single setting in the source, one per seed, and saves the stack to
  ``path`` (``drjax sweep ... --save-policies PATH``).

  Each seed uses the sweep's own keys (``fold_in(fold_in(PRNGKey(seed), s), 0)``), so policy s is
  the one the sweep's run of seed s learns (up to the rounding of another batch shape). Every
  axis of the grid (rho, beta, lam, source parameters, sizes, ...) must hold one value for the
  agent: a ``SweepError`` naming the field otherwise. Returns the file's metadata.
  """
  policies._check_path(path)  # pylint: disable=protected-access
  rs = sconf.resolve(config)  # validated, the environment and the agents resolved once
  cfg = rs.config
  names = tuple(cfg.agents)
  if agent is None:
    if len(names) != 1:
      raise _Error("agents", f"--save-policies learns one agent's policies; got {len(names)} "
                             f"agents ({', '.join(names)}): name one")
    agent = names[0]
  if agent not in names:
    raise _Error("agents", f"{agent!r} is not one of the sweep's agents ({', '.join(names)})")
  env = rs.env
  grid = _settings(rs, agent)
  if np.shape(grid.beta)[0] != 1:
    raise _Error("rho", f"--save-policies needs one setting for {agent} (one value of rho, "
                        f"beta, lam, the source parameters and the sizes), got "
                        f"{np.shape(grid.beta)[0]}")
  spec = rs.specs[agent]
  ag = rs.agents[agent]
  dtype = jnp.dtype(cfg.dtype)
  tables = {"rho": jnp.asarray(grid.rho, dtype), "beta": jnp.asarray(grid.beta, dtype),
            "lam": jnp.asarray(grid.lam, dtype),
            "reg_weight": jnp.asarray(grid.reg_weight, dtype),
            "hparams": {n: jnp.asarray(v, dtype) for n, v in grid.hparams.items()}}
  hp = program._hparams_of(ag)(0, tables)  # pylint: disable=protected-access
  params = jax.tree_util.tree_map(lambda x: x[0], grid.params)
  params = jax.tree_util.tree_map(
      lambda x: jnp.asarray(x, dtype) if jnp.issubdtype(x.dtype, jnp.floating) else jnp.asarray(x),
      params)
  seeds = list(cfg.seed_ids) if cfg.seed_ids is not None else list(range(cfg.seeds))
  base = jax.random.PRNGKey(cfg.seed)
  keys = jnp.stack([jax.random.fold_in(jax.random.fold_in(base, s), 0) for s in seeds])
  offline = spec.kind == "offline"
  if spec.kind not in ("online", "offline"):
    raise _Error("agents", f"{agent!r} ({spec.kind}) learns no policy")
  qf = policies.learn(env, ag, hp, params, keys, episodes=None if offline else cfg.episodes,
                      trajectories=max(cfg.trajectories) if offline else None,
                      behavior=rs.behavior if offline else None)
  hp_meta = {f: np.asarray(x).tolist() for f, x in hp._asdict().items()}
  options = {k: v for k, v in (("bonus", cfg.bonus), ("penalty", cfg.bonus), ("clip", cfg.clip),
                               ("tie_break", cfg.tie_break)) if k in spec.options}
  reward = reward_option(agent, env, spec)
  if reward is not None:
    options["reward"] = reward
  metadata = {"created_by": "drjax sweep --save-policies", "sweep_config": cfg.to_dict(),
              "agent": agent, "kind": spec.kind, "seeds": seeds, "hparams": hp_meta,
              "source_params": {k: v[0] for k, v in cfg.env_params.items()},
              "episodes": None if offline else cfg.episodes,
              "trajectories": max(cfg.trajectories) if offline else None}
  policies.save(path, qf, env.num_actions, agent=agent, options=options, metadata=metadata)
  return policies.load(path)[1]
