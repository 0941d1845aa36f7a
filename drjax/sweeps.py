"""Sweeps as a product: agents x a grid of settings x seeds, in bounded memory, on every device.

A sweep trains every agent on every setting of a grid (rho, beta, lambda and source-environment
parameters) for every seed, then evaluates each run's final greedy policy on a family of target
domains (exactly for finite environments, by Monte Carlo with common random numbers otherwise)
and returns a tidy ``pandas.DataFrame``: one row per agent x setting x seed (x target).

How it runs:

* The runs of one agent (settings x seeds, setting-major) are cut into chunks of ``chunk`` runs
  (given, or chosen from a memory budget). Every chunk is padded to the same shape, so ONE
  compiled program per agent serves all chunks; padded rows are dropped. Peak memory depends on
  the chunk size, not on the number of seeds.
* The run axis of a chunk is sharded over the devices (``jax.sharding.Mesh`` /
  ``NamedSharding``); on CPU, ``XLA_FLAGS=--xla_force_host_platform_device_count=N`` (the CLI's
  ``--devices N``) splits the host into N devices. Under ``jax.distributed.initialize()`` the mesh
  spans every process's devices and process 0 writes the files.
* Seed ``j``'s key is ``fold_in(PRNGKey(seed), j)``: it depends on nothing else (not chunking,
  devices or parts), so any seed can be rerun alone (``seed_ids``) and gives the same numbers.
  Training uses ``fold_in(key_j, 0)``, evaluation ``fold_in(key_j, 1)``: every agent and setting
  of seed ``j`` sees the same random numbers (common random numbers).
* With an output directory, each finished chunk is written atomically (temp file +
  ``os.replace``) with its seeds and settings; a rerun skips finished chunks; ``part=(i, n)``
  runs the i-th of n contiguous slices of the chunks (batch-scheduler job arrays) and ``merge``
  assembles the final files. The results files depend only on the configuration (timings, the
  command line and the devices are in ``sweep.json`` only), so a resumed sweep's files are
  byte-identical to an uninterrupted one's.

Example::

  from drjax import sweeps
  cfg = sweeps.SweepConfig(env="linear-mdp", agents=("dr-lsvi-ucb", "lsvi-ucb"), seeds=100,
                           episodes=100, rho=(0.0, 0.3, 0.5), rho_at=((0, 3),),
                           targets=("q", 0.0, 1.0, 21))
  res = sweeps.run(cfg)                     # in memory; out="DIR" writes files
  res.summary                               # mean, stderr, count per agent x setting x target
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import io
import itertools
import json
import math
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from drjax import evaluate
from drjax import data as data_lib
from drjax.agents import registry
from drjax.agents.base import BONUS_FORMS, CLIP_FORMS, TIE_BREAKS
from drjax.envs import LinearMDP, PutOption, RandomLinearMDP
from drjax.envs.base import FiniteEnvironment
from drjax.train import check_env_features, make_fit, make_train

FORMAT = "drjax-sweep/1"
AGENTS = registry.names()  # every registered agent (drjax.agents.registry)
DEFAULT_AGENTS = registry.names("online")
BEHAVIORS = ("uniform", "fixed:<action>")  # offline agents' data-collection policy
ENVS = ("linear-mdp", "put-option", "random")
# Source parameters that may be swept, per environment, and the target family of each.
ENV_PARAMS = {
    "linear-mdp": ("delta", "p", "xi_norm"),
    "put-option": ("p_u", "init_low", "init_high"),
    "random": ("instance",),
}
TARGETS = {"linear-mdp": "q", "put-option": "p_u"}
ENV_ARGS = {
    "linear-mdp": (),
    "put-option": ("num_anchors", "horizon", "variant"),
    "random": ("num_states", "num_actions", "feature_dim", "horizon"),
}
DEFAULT_MEMORY_MB = 512.0
RESULTS = ("results.parquet", "results.csv", "summary.csv", "sweep.png")
CHUNK_DIR = "chunks"

__all__ = [
    "AGENTS",
    "ENVS",
    "ENV_PARAMS",
    "TARGETS",
    "SweepConfig",
    "SweepResult",
    "Layout",
    "load",
    "load_config",
    "merge",
    "run",
    "summarize",
]


# ---------------------------------------------------------------------------------------------
# Configuration.


@dataclasses.dataclass(frozen=True)
class SweepConfig:
  """The full configuration of a sweep (what ``sweep.json`` stores under ``config``).

  Attributes:
    env: ``"linear-mdp"``, ``"put-option"`` or ``"random"``.
    env_args: static constructor arguments of the environment (put option: ``num_anchors``,
      ``horizon``, ``variant``; random: ``num_states``, ``num_actions``, ``feature_dim``,
      ``horizon``).
    agents: registered agent names (``drjax.agents.registry.names()``); default: the online
      ones. Offline agents (PEVI, DRPVI, VA-DRPVI) fit each run's policy to a dataset collected
      in the source domain under ``behavior``.
    seeds: number of seeds N; seeds are the indices ``0..N-1``.
    seed_ids: optional subset of ``0..N-1`` to run (rerun chosen seeds); ``None``: all.
    episodes: training episodes K.
    rho: uncertainty levels: scalars in [0, 1] placed at the 0-indexed ``rho_at`` positions (all
      positions when ``rho_at`` is None), or full ``[H, d]`` arrays. Used by DR-LSVI-UCB only.
    rho_at: 0-indexed ``(h, i)`` positions for scalar rho (``((0, 3),)`` is the paper's
      rho_{1,4}).
    beta: bonus multipliers (>= 0).
    lam: ridge regularizers (> 0).
    env_params: source-environment parameter name -> values (``ENV_PARAMS``; other parameters
      keep the environment's defaults). ``random``'s ``instance`` is the integer seed of
      ``RandomLinearMDP.sample_params(jax.random.key(instance))``.
    targets: ``(name, start, stop, num)``: evaluate on the targets ``linspace(start, stop, num)``
      of the environment's family (``TARGETS``); ``None``: evaluate in the source domain.
    test_episodes: Monte Carlo episodes per run and target (environments without exact model).
    seed: base PRNG seed.
    chunk: runs per chunk; ``None``: chosen from ``memory_mb``.
    memory_mb: memory budget (MiB) for one chunk when ``chunk`` is None.
    bonus, clip, tie_break: agent options (see ``dr_lsvi_ucb`` / ``lsvi_ucb``).
    dtype: ``"float32"`` or ``"float64"``; ``None`` takes JAX's current default.
    save_returns: also keep every run's ``[K]`` training returns (``returns.npy``).
    trajectories: offline agents: dataset sizes N (a sweep axis, like rho: the largest dataset
      is collected once per seed and each size uses its first N trajectories, so one compiled
      program serves every size and the datasets are nested). VA-DRPVI also collects an
      independent pilot of the same size (2N trajectories in all; the column counts D).
    behavior: offline agents' behavior policy: ``"uniform"`` (the DRPVI paper's) or
      ``"fixed:A"`` (always action A; ``"fixed:1"`` holds the put option, as the R2PVI code).
    reg_weight: regularization weights (> 0) of the robust regularized agents (R2PVI), a sweep
      axis of theirs (every (h, i)).
  """

  env: str = "linear-mdp"
  env_args: dict = dataclasses.field(default_factory=dict)
  agents: tuple = DEFAULT_AGENTS
  seeds: int = 10
  seed_ids: tuple | None = None
  episodes: int = 100
  rho: tuple = (0.0,)
  rho_at: tuple | None = None
  beta: tuple = (1.0,)
  lam: tuple = (0.1,)
  env_params: dict = dataclasses.field(default_factory=dict)
  targets: tuple | None = None
  test_episodes: int = 100
  seed: int = 0
  chunk: int | None = None
  memory_mb: float = DEFAULT_MEMORY_MB
  bonus: str = "paper"
  clip: str = "paper"
  tie_break: str = "optimistic"
  dtype: str | None = None
  save_returns: bool = False
  trajectories: tuple = (100,)
  behavior: str = "uniform"
  reg_weight: tuple = (0.1,)

  # -------------------------------------------------------------- (de)serialization
  def to_dict(self) -> dict:
    """JSON-ready dict (tuples become lists)."""
    return json.loads(json.dumps(dataclasses.asdict(self)))

  @classmethod
  def from_dict(cls, d: dict) -> "SweepConfig":
    """Inverse of ``to_dict``; unknown keys raise ``ValueError``."""
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(d) - names)
    if unknown:
      raise ValueError(f"config: unknown keys {unknown}")
    d = dict(d)

    def tup(x):
      return tuple(tup(v) for v in x) if isinstance(x, (list, tuple)) else x

    for k in ("agents", "seed_ids", "rho", "rho_at", "beta", "lam", "targets", "trajectories",
              "reg_weight"):
      if d.get(k) is not None:
        d[k] = tup(d[k])
    if "env_params" in d:
      d["env_params"] = {k: tuple(v) for k, v in d["env_params"].items()}
    return cls(**d)


class _Error(ValueError):
  """A ``ValueError`` that knows which configuration field (CLI flag) it is about."""

  def __init__(self, field: str, message: str):
    super().__init__(f"{field}: {message}")
    self.field = field
    self.detail = message


def _is_int(x) -> bool:
  return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


def _floats(field: str, values, *, lo=None, hi=None, lo_open=False) -> tuple:
  if isinstance(values, (int, float, np.number)):
    values = (values,)
  try:
    vals = tuple(float(v) for v in values)
  except (TypeError, ValueError):
    raise _Error(field, f"must be a list of numbers, got {values!r}") from None
  if not vals:
    raise _Error(field, "needs at least one value")
  for v in vals:
    bad = not math.isfinite(v) or (lo is not None and (v <= lo if lo_open else v < lo)) or (
        hi is not None and v > hi)
    if bad:
      lo_s = "" if lo is None else (f"> {lo:g}" if lo_open else f">= {lo:g}")
      hi_s = "" if hi is None else f"<= {hi:g}"
      rng = " and ".join(s for s in (lo_s, hi_s) if s) or "finite"
      raise _Error(field, f"values must be {rng}, got {v!r}")
  return vals


def make_env(config: SweepConfig):
  """The environment of ``config`` (``ValueError`` for a bad name or constructor argument)."""
  if config.env not in ENVS:
    raise _Error("env", f"must be one of {', '.join(ENVS)}, got {config.env!r}")
  allowed = ENV_ARGS[config.env]
  for k in config.env_args:
    if k not in allowed:
      raise _Error("env_args", f"unknown argument {k!r} for {config.env} (allowed: "
                               f"{', '.join(allowed) or 'none'})")
  cls = {"linear-mdp": LinearMDP, "put-option": PutOption, "random": RandomLinearMDP}[config.env]
  try:
    return cls(**config.env_args)
  except (TypeError, ValueError) as e:
    raise _Error("env_args", str(e)) from None


def _make_agent(name: str, config: SweepConfig, env):
  """The agent of ``name`` with the config's options: ``bonus`` is the bonus (online) or penalty
  (offline) form, ``clip`` the nominal online agent's clipping, ``tie_break`` for all."""
  spec = registry.get(name)
  opts = {}
  for option, value in (("bonus", config.bonus), ("penalty", config.bonus),
                        ("clip", config.clip), ("tie_break", config.tie_break)):
    if option in spec.options:
      opts[option] = value
  if spec.kind == "online":
    opts["capacity"] = config.episodes
  # registry factories are lru-cached: equal configurations share compiled chunk programs.
  return registry.make(name, env, **opts)


def _behavior(config: SweepConfig, env):
  """The behavior policy of ``config.behavior`` (``ValueError`` naming ``behavior``)."""
  b = config.behavior
  if b == "uniform":
    return _uniform(env.num_actions)
  if isinstance(b, str) and b.startswith("fixed:"):
    try:
      a = int(b[len("fixed:"):])
    except ValueError:
      a = -1
    if 0 <= a < env.num_actions:
      return _fixed(a)
    raise _Error("behavior", f"fixed:A needs an action A in [0, {env.num_actions - 1}], got {b!r}")
  raise _Error("behavior", f"must be 'uniform' or 'fixed:A' (A an action index), got {b!r}")


@functools.lru_cache(maxsize=None)
def _uniform(num_actions):
  return data_lib.uniform(num_actions)


@functools.lru_cache(maxsize=None)
def _fixed(action):
  return data_lib.fixed(action)


def _source_params(env, config: SweepConfig, values: dict):
  """Validated source params with ``values`` overriding the environment's defaults."""
  if config.env == "random":
    inst = values.get("instance", 0)
    return env.sample_params(jax.random.key(int(inst)))
  return env.make_params(**values)


def validate(config: SweepConfig) -> SweepConfig:
  """Checks every field on the host (nothing is compiled) and returns the resolved config.

  Resolved means: tuples everywhere, ``dtype`` filled in from JAX's current default. Raises
  ``ValueError`` whose message starts with the offending field (``"rho_at: ..."``).
  """
  c = config
  env = make_env(c)
  H, d = env.horizon, env.feature_dim
  if isinstance(c.agents, str):
    raise _Error("agents", f"must be a list of agent names, got the string {c.agents!r} (write "
                           f"agents=({c.agents!r},))")
  if not isinstance(c.agents, (list, tuple)) or not c.agents:
    raise _Error("agents", f"needs at least one of {', '.join(AGENTS)}")
  for a in c.agents:
    if a not in AGENTS:
      raise _Error("agents", f"unknown agent {a!r}; registered agents: {', '.join(AGENTS)}")
  if len(set(c.agents)) != len(c.agents):
    raise _Error("agents", f"duplicate agent in {list(c.agents)}")
  for name in ("seeds", "episodes", "test_episodes"):
    v = getattr(c, name)
    if not _is_int(v) or v < 1:
      raise _Error(name, f"must be an integer >= 1, got {v!r}")
  traj = c.trajectories if isinstance(c.trajectories, (list, tuple)) else (c.trajectories,)
  if not traj or not all(_is_int(n) and n >= 1 for n in traj):
    raise _Error("trajectories", f"must be integers >= 1, got {list(traj)}")
  if len(set(traj)) != len(traj):
    raise _Error("trajectories", f"duplicate value in {list(traj)}")
  _behavior(c, env)
  seed_ids = None
  if c.seed_ids is not None:
    ids = tuple(c.seed_ids) if isinstance(c.seed_ids, (list, tuple)) else (c.seed_ids,)
    if not ids or not all(_is_int(i) and 0 <= i < c.seeds for i in ids):
      raise _Error("seed_ids", f"must be integers in [0, {c.seeds - 1}] (seeds = {c.seeds}), "
                               f"got {list(ids)}")
    if len(set(ids)) != len(ids):
      raise _Error("seed_ids", f"duplicate seed in {list(ids)}")
    seed_ids = tuple(sorted(int(i) for i in ids))
  if not _is_int(c.seed) or not 0 <= c.seed < 2**31:
    raise _Error("seed", f"must be an integer in [0, 2^31), got {c.seed!r}")
  if c.chunk is not None and (not _is_int(c.chunk) or c.chunk < 1):
    raise _Error("chunk", f"must be a positive integer, got {c.chunk!r}")
  _floats("memory_mb", (c.memory_mb,), lo=0, lo_open=True)
  for name, allowed in (("bonus", BONUS_FORMS), ("clip", CLIP_FORMS),
                        ("tie_break", TIE_BREAKS)):
    if getattr(c, name) not in allowed:
      raise _Error(name, f"must be one of {', '.join(allowed)}, got {getattr(c, name)!r}")
  # rho: all scalars or all [H, d] arrays.
  rho_vals = c.rho if isinstance(c.rho, (list, tuple)) else (c.rho,)
  if not rho_vals:
    raise _Error("rho", "needs at least one value")
  arrays = [np.asarray(r, dtype=np.float64) for r in rho_vals]
  if all(a.ndim == 0 for a in arrays):
    rho = _floats("rho", rho_vals, lo=0.0, hi=1.0)
  elif all(a.shape == (H, d) for a in arrays):
    for a in arrays:
      if not np.all(np.isfinite(a)) or a.min() < 0 or a.max() > 1:
        raise _Error("rho", f"array entries must lie in [0, 1], got values in "
                            f"[{np.nanmin(a):g}, {np.nanmax(a):g}]")
    rho = tuple(tuple(tuple(float(x) for x in row) for row in a) for a in arrays)
  else:
    raise _Error("rho", f"give scalars in [0, 1] or [H, d] = [{H}, {d}] arrays, got shapes "
                        f"{[list(a.shape) for a in arrays]}")
  rho_at = None
  if c.rho_at is not None:
    if not all(np.ndim(r) == 0 for r in rho_vals):
      raise _Error("rho_at", "applies to scalar rho values only, not to [H, d] arrays")
    pos = tuple(c.rho_at)
    if not pos:
      raise _Error("rho_at", "needs at least one (h, i) position")
    out = []
    for p in pos:
      if (not isinstance(p, (list, tuple)) or len(p) != 2 or not all(_is_int(x) for x in p)
          or not (0 <= p[0] < H and 0 <= p[1] < d)):
        if isinstance(p, (list, tuple)) and len(p) == 2 and all(_is_int(x) for x in p):
          raise _Error("rho_at", f"rho_{{{p[0] + 1},{p[1] + 1}}} (0-indexed ({p[0]}, {p[1]})) is "
                                 f"outside [1, {H}] x [1, {d}] (1-indexed h in 1..H, i in 1..d)")
        raise _Error("rho_at", f"positions must be (h, i) integer pairs, got {p!r}")
      out.append((int(p[0]), int(p[1])))
    if len(set(out)) != len(out):
      raise _Error("rho_at", f"duplicate position in {out}")
    rho_at = tuple(out)
  beta = _floats("beta", c.beta, lo=0.0)
  reg_weight = _floats("reg_weight", c.reg_weight, lo=0.0, lo_open=True)
  lam = _floats("lam", c.lam, lo=0.0, lo_open=True)
  # Environment parameters.
  if not isinstance(c.env_params, dict):
    raise _Error("env_params", f"must be a dict name -> values, got {c.env_params!r}")
  env_params = {}
  for name, values in c.env_params.items():
    if name not in ENV_PARAMS[c.env]:
      hint = " (a target parameter: use targets)" if name in ("q", "target") else ""
      raise _Error("env_params", f"unknown parameter {name!r} for {c.env}{hint}; sweepable: "
                                 f"{', '.join(ENV_PARAMS[c.env])}")
    vals = _floats(f"env_params {name}", values)
    if name == "instance":
      if not all(v == int(v) and 0 <= v < 2**31 for v in vals):
        raise _Error("env_params instance", f"must be integers in [0, 2^31), got {list(vals)}")
      vals = tuple(int(v) for v in vals)
    env_params[name] = vals
  # Every combination of source values must be valid (checked before anything is compiled).
  combos = list(itertools.product(*env_params.values())) or [()]
  for combo in combos:
    values = dict(zip(env_params, combo))
    try:
      params = _source_params(env, c, values)
    except ValueError as e:
      raise _Error("env_params", f"{values}: {e}") from None
  targets = None
  if c.targets is not None:
    if c.env not in TARGETS:
      raise _Error("targets", f"environment {c.env} has no target family (targets exist for "
                              f"{', '.join(f'{k} ({v})' for k, v in TARGETS.items())})")
    t = tuple(c.targets)
    if len(t) != 4:
      raise _Error("targets", f"must be (name, start, stop, num), got {c.targets!r}")
    name, start, stop, num = t
    if name != TARGETS[c.env]:
      raise _Error("targets", f"unknown target parameter {name!r} for {c.env}; use "
                              f"{TARGETS[c.env]!r}")
    if not _is_int(num) or num < 1:
      raise _Error("targets", f"NUM must be an integer >= 1, got {num!r}")
    start, stop = _floats("targets", (start, stop))
    targets = (name, start, stop, int(num))
    for combo in combos:
      src = _source_params(env, c, dict(zip(env_params, combo)))
      try:
        env.validate(env.target_params(src, np.linspace(start, stop, num)))
      except ValueError as e:
        raise _Error("targets", str(e)) from None
  dtype = c.dtype
  current = "float64" if jax.config.jax_enable_x64 else "float32"
  if dtype is None:
    dtype = current
  if dtype not in ("float32", "float64"):
    raise _Error("dtype", f"must be float32 or float64, got {dtype!r}")
  if dtype != current:
    raise _Error("dtype", f"{dtype} requested but JAX computes in {current} (set "
                          f"jax.config.update('jax_enable_x64', {dtype == 'float64'}) first)")
  resolved = dataclasses.replace(
      c, agents=tuple(c.agents), seed_ids=seed_ids, rho=rho, rho_at=rho_at, beta=beta, lam=lam,
      trajectories=tuple(int(n) for n in traj), reg_weight=reg_weight,
      env_params=env_params, targets=targets, dtype=dtype, env_args=dict(c.env_args),
      memory_mb=float(c.memory_mb), save_returns=bool(c.save_returns))
  return resolved


# ---------------------------------------------------------------------------------------------
# Settings grid and chunk layout.


class _Grid(NamedTuple):
  """The settings of one agent: host tables with a leading ``[S]`` axis."""

  columns: dict          # name -> [S] numpy column (rho_index, rho, beta, lam, env params)
  rho: np.ndarray        # [S, H, d]
  beta: np.ndarray       # [S]
  lam: np.ndarray        # [S]
  params: Any            # source env params pytree, leaves [S, ...]
  size: np.ndarray       # [S] dataset size N of offline settings (0 for online agents)
  reg_weight: np.ndarray  # [S, H, d] regularization weights (1 for agents without one)


def _rho_array(config: SweepConfig, H: int, d: int, r) -> np.ndarray:
  a = np.asarray(r, dtype=np.float64)
  if a.ndim == 2:
    return a
  out = np.zeros((H, d))
  if config.rho_at is None:
    out[...] = float(a)
  else:
    for h, i in config.rho_at:
      out[h, i] = float(a)
  return out


def _has_offline(config: SweepConfig) -> bool:
  return any(registry.get(a).kind == "offline" for a in config.agents)


def _has_reg(config: SweepConfig) -> bool:
  return any("reg_weight" in registry.get(a).hparams for a in config.agents)


def _grid(config: SweepConfig, env, agent_name: str) -> _Grid:
  H, d = env.horizon, env.feature_dim
  spec = registry.get(agent_name)
  rho_ids = list(range(len(config.rho))) if spec.robust else [-1]
  sizes = list(config.trajectories) if spec.kind == "offline" else [0]
  regs = list(config.reg_weight) if "reg_weight" in spec.hparams else [np.nan]
  names = list(config.env_params)
  rows = list(itertools.product(sizes, rho_ids, regs, config.beta, config.lam,
                                *[config.env_params[n] for n in names]))
  scalar_rho = all(np.ndim(r) == 0 for r in config.rho)
  cols = {"rho_index": np.array([r[1] for r in rows], np.int64),
          "rho": np.array([float(config.rho[r[1]]) if (r[1] >= 0 and scalar_rho) else np.nan
                           for r in rows], np.float64)}
  if _has_reg(config):
    cols["reg_weight"] = np.array([r[2] for r in rows], np.float64)
  cols["beta"] = np.array([r[3] for r in rows], np.float64)
  cols["lam"] = np.array([r[4] for r in rows], np.float64)
  if _has_offline(config):
    cols["trajectories"] = np.array([r[0] if r[0] else np.nan for r in rows], np.float64)
  params = []
  for r in rows:
    params.append(_source_params(env, config, dict(zip(names, r[5:]))))
  for field in ENV_PARAMS[config.env]:
    if config.env == "random":
      vals = [dict(zip(names, r[5:])).get("instance", 0) for r in rows]
      cols[field] = np.array(vals, np.int64)
    else:
      cols[field] = np.array([float(getattr(p, field)) for p in params], np.float64)
  rho = np.stack([_rho_array(config, H, d, config.rho[r[1]]) if r[1] >= 0 else np.zeros((H, d))
                  for r in rows])
  reg = np.stack([np.full((H, d), 1.0 if np.isnan(r[2]) else r[2]) for r in rows])
  stacked = jax.tree_util.tree_map(lambda *x: np.stack([np.asarray(v) for v in x]), *params)
  return _Grid(cols, rho, cols["beta"], cols["lam"], stacked,
               np.array([r[0] for r in rows], np.int32), reg)


@dataclasses.dataclass(frozen=True)
class Layout:
  """Which runs each chunk holds: per agent, runs ``(setting, seed)`` setting-major.

  Attributes:
    chunk: runs per chunk (the compiled chunk shape, before padding to the device count).
    agents: per agent ``(name, num_settings)``.
    seed_ids: the seed indices run, ascending.
    chunks: global list of ``(agent_index, first_run, num_runs)``.
  """

  chunk: int
  agents: tuple
  seed_ids: tuple
  chunks: tuple

  def runs(self, agent_index: int) -> int:
    return self.agents[agent_index][1] * len(self.seed_ids)

  def chunk_runs(self, j: int) -> tuple[np.ndarray, np.ndarray]:
    """``(setting, seed)`` index arrays of chunk ``j``."""
    _, first, n = self.chunks[j]
    idx = np.arange(first, first + n)
    ns = len(self.seed_ids)
    return idx // ns, np.asarray(self.seed_ids, np.int64)[idx % ns]

  def part(self, i: int, n: int) -> list[int]:
    """Chunk indices of the i-th (1-indexed) of n contiguous slices."""
    return [int(j) for j in np.array_split(np.arange(len(self.chunks)), n)[i - 1]]

  def describe(self) -> dict:
    return {"chunk_size": self.chunk, "num_chunks": len(self.chunks),
            "agents": {a: {"settings": s, "runs": s * len(self.seed_ids),
                           "chunks": sum(1 for c in self.chunks if c[0] == k)}
                       for k, (a, s) in enumerate(self.agents)},
            "seeds_run": len(self.seed_ids)}


def bytes_per_run(config: SweepConfig, env) -> int:
  """Rough peak bytes of one run inside a chunk (buffers, planning temporaries, evaluation).

  Calibrated on the linear MDP and the put option (see README, "Sweeps"): about four copies of
  the agent's buffers (scan carry, planning temporaries) plus the evaluation's per-target work.
  """
  H, d, A, K = env.horizon, env.feature_dim, env.num_actions, config.episodes
  item = 8 if config.dtype == "float64" else 4
  buffers = H * K * (A * d + d + 3)
  if _has_offline(config):  # dataset + pilot + the alpha maximization's sorted prefix sums
    buffers = max(buffers, H * max(config.trajectories) * (A * d + 3 * d + 8) * 2)
  T = config.targets[3] if config.targets else 1
  if isinstance(env, FiniteEnvironment):
    S = getattr(env, "num_states", 8)
    ev = T * H * S * A * (d + 2) * 2
  else:
    ev = T * config.test_episodes * (A * d + 8) * 2
  return int(item * (4 * buffers + ev) + 4096)


def layout(config: SweepConfig, env=None) -> Layout:
  """The chunk layout of a validated config (a function of the config only)."""
  env = env or make_env(config)
  nsettings = []
  for a in config.agents:
    n = len(config.beta) * len(config.lam) * math.prod(len(v) for v in config.env_params.values())
    spec = registry.get(a)
    n *= len(config.trajectories) if spec.kind == "offline" else 1
    n *= len(config.reg_weight) if "reg_weight" in spec.hparams else 1
    nsettings.append((a, n * (len(config.rho) if spec.robust else 1)))
  seed_ids = config.seed_ids if config.seed_ids is not None else tuple(range(config.seeds))
  max_runs = max(s for _, s in nsettings) * len(seed_ids)
  if config.chunk is not None:
    chunk = config.chunk  # the compiled shape, even for fewer runs (one program per chunk size)
  else:
    chunk = min(max(1, int(config.memory_mb * 2**20 // bytes_per_run(config, env))), max_runs)
  chunks = []
  for k, (_, s) in enumerate(nsettings):
    total = s * len(seed_ids)
    for first in range(0, total, chunk):
      chunks.append((k, first, min(chunk, total - first)))
  return Layout(chunk, tuple(nsettings), tuple(seed_ids), tuple(chunks))


# ---------------------------------------------------------------------------------------------
# The compiled chunk program.


def _mesh(devices: int | None):
  devs = jax.devices()
  if devices is not None:
    if not _is_int(devices) or devices < 1:
      raise _Error("devices", f"must be a positive integer, got {devices!r}")
    if devices > len(devs):
      raise _Error("devices", f"{devices} requested but only {len(devs)} "
                              f"{devs[0].platform} device(s) available")
    devs = devs[:devices]
  return jax.sharding.Mesh(np.array(devs), ("runs",))


def ordered_sum(x):
  """Sum over the last axis in index order (a loop, not a tree reduction).

  Under ``vmap`` every run's sum is computed in the same order whatever the batch size, so a
  run's numbers do not depend on the chunk size or the number of devices (XLA's vectorized
  reductions sum in an order that depends on the batch shape: float32 means differed in the last
  bit between chunk sizes).
  """
  return jax.lax.fori_loop(0, x.shape[-1], lambda i, acc: acc + x[..., i],
                           jnp.zeros(x.shape[:-1], x.dtype))


@functools.lru_cache(maxsize=None)
def _program(env, agent, episodes: int, target_mode: str, test_episodes: int, save_returns: bool,
             mesh, num_runs: int, behavior=None, num_trajectories: int = 0):
  """Jitted ``f(seed_idx [C], setting_idx [C], base_key, tables) -> outputs``, sharded on runs.

  Online agents train for ``episodes``; offline agents collect ``num_trajectories`` (the largest
  size; each setting uses its first ``tables["size"]``) under ``behavior`` and fit once. The
  ``train_return`` of an offline run is the mean return of its dataset (the behavior policy's).
  """
  offline = agent.kind == "offline"
  if offline:
    fit = make_fit(env, agent, num_trajectories, behavior)
  else:
    train = make_train(env, agent, episodes, outputs=("returns", "final_qf"))
  finite = isinstance(env, FiniteEnvironment)

  def value_in(qf, params, key):
    if finite:
      return evaluate.target_value(env, agent, qf, params), jnp.zeros((), qf.w.dtype)
    r = evaluate.mc_evaluate(env, agent, qf, params, key, test_episodes)["returns"]
    mean = ordered_sum(r) / test_episodes
    var = ordered_sum((r - mean) ** 2) / max(test_episodes - 1, 1)
    return mean, jnp.sqrt(var / test_episodes) if test_episodes > 1 else jnp.zeros_like(mean)

  def one(seed_idx, setting_idx, base_key, tables):
    cls = agent.hparams_type  # the agent's own hyperparameters; others (var_shift) at default 0
    hp = cls(**{f: (tables[f][setting_idx] if f in tables
                    else jnp.zeros((), tables["beta"].dtype)) for f in cls._fields})
    params = jax.tree_util.tree_map(lambda x: x[setting_idx], tables["params"])
    key = jax.random.fold_in(base_key, seed_idx)
    if offline:
      fo = fit(jax.random.fold_in(key, 0), hp, params, tables["size"][setting_idx])
      out = fo._replace(dataset=None)
      returns = None
    else:
      out = train(jax.random.fold_in(key, 0), hp, params)
      returns = out.returns
    k_eval = jax.random.fold_in(key, 1)
    if target_mode == "targets":
      tps = env.target_params(params, tables["targets"])
      val, err = jax.vmap(lambda t: value_in(out.final_qf, t, k_eval))(tps)
    else:
      val, err = value_in(out.final_qf, params, k_eval)
      val, err = val[None], err[None]
    train_return = out.data_return if offline else ordered_sum(returns) / episodes
    res = {"train_return": train_return, "value": val, "value_stderr": err}
    if save_returns:
      res["returns"] = (jnp.full((episodes,), jnp.nan, val.dtype) if offline else returns)
    return res

  batched = jax.vmap(one, in_axes=(0, 0, None, None))
  P = jax.sharding.PartitionSpec
  runs = jax.sharding.NamedSharding(mesh, P("runs"))
  rep = jax.sharding.NamedSharding(mesh, P())
  return jax.jit(batched, in_shardings=(runs, runs, rep, rep), out_shardings=runs), runs, rep


def _put(x, sharding):
  """Host array -> (possibly multi-process) global array with ``sharding``."""
  x = np.asarray(x)
  if jax.process_count() == 1:
    return jax.device_put(x, sharding)
  return jax.make_array_from_callback(x.shape, sharding, lambda idx: x[idx])


def _get(tree):
  if jax.process_count() == 1:
    return jax.device_get(tree)
  from jax.experimental import multihost_utils  # pylint: disable=g-import-not-at-top
  return jax.tree_util.tree_map(np.asarray, multihost_utils.process_allgather(tree, tiled=True))


# ---------------------------------------------------------------------------------------------
# Files.


def _umask() -> int:
  mask = os.umask(0o022)
  os.umask(mask)
  return mask


_UMASK = _umask()


def _atomic_write(path: str, data: bytes) -> None:
  """Writes ``path`` all at once: a temporary file in the same directory, then ``os.replace``."""
  d = os.path.dirname(path) or "."
  fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=d)
  try:
    os.fchmod(fd, 0o666 & ~_UMASK)
    with os.fdopen(fd, "wb") as f:
      f.write(data)
      f.flush()
      os.fsync(f.fileno())
    os.replace(tmp, path)
  except BaseException:
    if os.path.exists(tmp):
      os.unlink(tmp)
    raise


@contextlib.contextmanager
def _atomic_path(path: str):
  """Yields a temporary path next to ``path``; renamed onto ``path`` when the block succeeds.

  For large files written by a library (CSV, Parquet) straight to disk, without holding the
  whole file in memory.
  """
  fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=os.path.dirname(path) or ".")
  os.close(fd)
  try:
    yield tmp
    os.chmod(tmp, 0o666 & ~_UMASK)
    os.replace(tmp, path)
  finally:
    if os.path.exists(tmp):
      os.unlink(tmp)


def _chunk_path(out: str, j: int) -> str:
  return os.path.join(out, CHUNK_DIR, f"chunk-{j:06d}.npz")


def config_hash(config: SweepConfig) -> str:
  return hashlib.sha256(_canonical(config.to_dict()).encode()).hexdigest()[:16]


def _canonical(obj) -> str:
  return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def _git_revision() -> dict:
  here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  if not os.path.exists(os.path.join(here, ".git")):
    return {"git_revision": None, "git_dirty": None}
  try:
    rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True,
                         timeout=10, check=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here,
                           capture_output=True, text=True, timeout=10).stdout.strip() != ""
    return {"git_revision": rev, "git_dirty": dirty}
  except (OSError, subprocess.SubprocessError):
    return {"git_revision": None, "git_dirty": None}


def provenance() -> dict:
  """Versions and source revision (deterministic for one installation; no devices or times)."""
  import drjax  # pylint: disable=g-import-not-at-top
  import jaxlib  # pylint: disable=g-import-not-at-top
  return {"drjax_version": drjax.__version__, **_git_revision(), "jax_version": jax.__version__,
          "jaxlib_version": jaxlib.__version__, "python": platform.python_version(),
          "backend": jax.default_backend()}


def _read_json(path: str) -> dict:
  with open(path, encoding="utf-8") as f:
    return json.load(f)


def load_config(path: str) -> SweepConfig:
  """The ``SweepConfig`` stored in a ``sweep.json`` (a file or the directory holding it)."""
  if os.path.isdir(path):
    path = os.path.join(path, "sweep.json")
  try:
    meta = _read_json(path)
  except (OSError, json.JSONDecodeError) as e:
    raise _Error("from", f"cannot read a sweep.json at {path!r} ({e})") from None
  if meta.get("format") != FORMAT or "config" not in meta:
    raise _Error("from", f"{path!r} is not a drjax sweep.json (format {FORMAT})")
  return SweepConfig.from_dict(meta["config"])


def check_out_dir(out: str, config: SweepConfig, *, overwrite: bool = False) -> bool:
  """Refuses (``ValueError`` on ``out``) a directory holding another sweep; writes nothing.

  Returns True when ``out`` already holds this very sweep (it will be resumed).
  """
  if os.path.exists(out) and not os.path.isdir(out):
    raise _Error("out", f"{out!r} exists and is not a directory")
  meta_path = os.path.join(out, "sweep.json")
  if os.path.exists(meta_path):
    try:
      meta = _read_json(meta_path)
      other = meta.get("config")
    except (OSError, json.JSONDecodeError):
      other = None
    if other == config.to_dict():
      return True
    if not overwrite:
      diff = []
      if isinstance(other, dict):
        diff = sorted(k for k in set(other) | set(config.to_dict())
                      if other.get(k) != config.to_dict().get(k))
      raise _Error("out", f"{out!r} holds a different sweep (differs in: "
                          f"{', '.join(diff) or 'unreadable sweep.json'}); use --overwrite "
                          "(overwrite=True) to replace it or another directory")
    return False
  probe = out
  while not os.path.exists(probe):
    parent = os.path.dirname(os.path.abspath(probe))
    if parent == probe:
      break
    probe = parent
  if not os.access(probe, os.W_OK | os.X_OK):
    raise _Error("out", f"{out!r} is not writable")
  return False


def _clear(out: str) -> None:
  cdir = os.path.join(out, CHUNK_DIR)
  if os.path.isdir(cdir):
    for f in os.listdir(cdir):
      os.unlink(os.path.join(cdir, f))
  for f in RESULTS + ("sweep.json", "returns.npy"):
    p = os.path.join(out, f)
    if os.path.exists(p):
      os.unlink(p)


def _write_chunk(path: str, chash: str, j: int, setting, seed, res: dict, seconds: float) -> None:
  buf = io.BytesIO()
  np.savez(buf, config_hash=np.array(chash), chunk=np.array(j), setting=setting, seed=seed,
           seconds=np.array(seconds), **res)
  _atomic_write(path, buf.getvalue())


def _read_chunk(path: str, chash: str, setting, seed) -> dict | None:
  """A finished chunk's arrays, or None if missing, foreign or damaged."""
  try:
    with np.load(path) as z:
      d = {k: z[k] for k in z.files}
  except Exception:  # pylint: disable=broad-except  (missing, torn or foreign file: recompute)
    return None
  ok = (str(d.get("config_hash")) == chash and np.array_equal(d.get("setting"), setting)
        and np.array_equal(d.get("seed"), seed))
  return d if ok else None


# ---------------------------------------------------------------------------------------------
# Tables.


def _frame(config: SweepConfig, env, lay: Layout, chunk_results: dict):
  """The tidy DataFrame from every chunk's arrays (rows in layout order: agent, setting, seed)."""
  import pandas as pd  # pylint: disable=g-import-not-at-top

  T = config.targets[3] if config.targets else 1
  parts = []
  for k, (agent, _) in enumerate(lay.agents):
    grid = _grid(config, env, agent)
    js = [j for j, c in enumerate(lay.chunks) if c[0] == k]
    setting = np.concatenate([lay.chunk_runs(j)[0] for j in js])
    seed = np.concatenate([lay.chunk_runs(j)[1] for j in js])
    get = lambda name: np.concatenate([chunk_results[j][name] for j in js])  # noqa: E731
    train_ret = get("train_return").astype(np.float64)
    value = get("value").astype(np.float64).reshape(-1, T)
    stderr = get("value_stderr").astype(np.float64).reshape(-1, T)
    n = len(setting)
    cols = {"agent": np.full(n * T, agent, dtype=object),
            "setting": np.repeat(setting, T), "seed": np.repeat(seed, T)}
    for name, col in grid.columns.items():
      cols[name] = np.repeat(col[setting], T)
    if config.targets:
      name, start, stop, num = config.targets
      cols[f"target_{name}"] = np.tile(np.linspace(start, stop, num), n)
    cols["train_return"] = np.repeat(train_ret, T)
    cols["value"] = value.reshape(-1)
    cols["value_stderr"] = stderr.reshape(-1)
    parts.append(pd.DataFrame(cols))
  df = pd.concat(parts, ignore_index=True)
  df["agent"] = pd.Categorical(df["agent"], categories=list(config.agents))
  return df


def setting_columns(df) -> list[str]:
  """The columns that identify a setting (everything between ``seed`` and the metrics)."""
  cols = list(df.columns)
  start = cols.index("seed") + 1
  end = cols.index("train_return")
  return [c for c in cols[start:end] if not c.startswith("target_")]


def summarize(df):
  """Mean, standard error (ddof=1; NaN for one seed) and count per agent x setting x target.

  Equal to ``df.groupby(["agent", "setting", <setting columns>, <target>], dropna=False,
  observed=True)[["value", "train_return"]].agg(["mean", "sem", "count"])`` (flattened as
  ``value_mean``, ``value_stderr``, ``value_count``, ...).
  """
  keys = ["agent", "setting"] + setting_columns(df) + [c for c in df.columns
                                                      if c.startswith("target_")]
  g = df.groupby(keys, dropna=False, observed=True, sort=False)
  out = g[["value", "train_return"]].agg(["mean", "sem", "count"])
  out.columns = [f"{m}_{'stderr' if s == 'sem' else s}" for m, s in out.columns]
  return out.reset_index()


def _plot(df, summary, config: SweepConfig, path: str) -> None:
  # The object-oriented API with the Agg canvas: no pyplot state, the user's backend is untouched.
  from matplotlib.backends.backend_agg import FigureCanvasAgg  # pylint: disable=g-import-not-at-top
  from matplotlib.figure import Figure  # pylint: disable=g-import-not-at-top

  fig = Figure(figsize=(7, 4.5))
  FigureCanvasAgg(fig)
  ax = fig.subplots()
  tcols = [c for c in summary.columns if c.startswith("target_")]
  scols = setting_columns(df)
  varying = [c for c in scols if c not in ("rho_index",) and summary[c].nunique(dropna=True) > 1]
  if tcols:
    x, label = tcols[0], tcols[0][len("target_"):]
    groups = ["agent", "setting"]
  else:
    x = varying[0] if varying else "setting"
    label = x
    groups = ["agent"] + [c for c in varying[1:]]
  shown = 0
  for key, g in summary.groupby(groups, dropna=False, observed=True, sort=False):
    key = key if isinstance(key, tuple) else (key,)
    if g[x].isna().all():  # e.g. LSVI-UCB against rho: a horizontal band
      m, s = g["value_mean"].mean(), g["value_stderr"].fillna(0).mean()
      ax.axhline(m, ls="--", lw=1, label=f"{key[0]}")
      ax.axhspan(m - 1.96 * s, m + 1.96 * s, alpha=0.1)
      continue
    g = g.sort_values(x)
    desc = [str(key[0])]
    if tcols:
      row = g.iloc[0]
      desc += [f"{c}={row[c]:g}" for c in varying if not np.isnan(row[c])]
    else:
      desc += [f"{c}={v:g}" for c, v in zip(groups[1:], key[1:]) if not np.isnan(v)]
    m = g["value_mean"].to_numpy()
    s = g["value_stderr"].fillna(0).to_numpy()
    xs = g[x].to_numpy()
    ax.plot(xs, m, marker="o" if len(xs) < 30 else None, ms=3, label=", ".join(desc))
    ax.fill_between(xs, m - 1.96 * s, m + 1.96 * s, alpha=0.2)
    shown += 1
  ax.set_xlabel(label)
  ax.set_ylabel("return of the final policy" + (" in the target" if tcols else " (source)"))
  ax.set_title(f"drjax sweep: {config.env}, {len(config.seed_ids or range(config.seeds))} seeds,"
               f" K = {config.episodes} (mean, 95% band)", fontsize=10)
  if shown <= 12:
    ax.legend(fontsize=7)
  fig.tight_layout()
  buf = io.BytesIO()
  fig.savefig(buf, format="png", dpi=110, metadata={"Software": None})
  _atomic_write(path, buf.getvalue())


def _write_results(out: str, df, summary, config: SweepConfig, lay: Layout, returns) -> None:
  import pyarrow as pa  # pylint: disable=g-import-not-at-top
  import pyarrow.parquet as pq  # pylint: disable=g-import-not-at-top

  meta = {"format": FORMAT, "config": config.to_dict(), "config_hash": config_hash(config),
          "provenance": provenance(), "layout": lay.describe()}
  table = pa.Table.from_pandas(df, preserve_index=False)
  table = table.replace_schema_metadata({**(table.schema.metadata or {}),
                                         b"drjax.sweep": _canonical(meta).encode()})
  with _atomic_path(os.path.join(out, "results.parquet")) as tmp:
    pq.write_table(table, tmp)
  del table
  with _atomic_path(os.path.join(out, "results.csv")) as tmp:
    df.to_csv(tmp, index=False, chunksize=200_000)
  _atomic_write(os.path.join(out, "summary.csv"), summary.to_csv(index=False).encode())
  if returns is not None:
    b = io.BytesIO()
    np.save(b, returns)
    _atomic_write(os.path.join(out, "returns.npy"), b.getvalue())
  _plot(df, summary, config, os.path.join(out, "sweep.png"))


# ---------------------------------------------------------------------------------------------
# Running.


@dataclasses.dataclass
class SweepResult:
  """What ``run`` / ``merge`` return.

  Attributes:
    df: tidy rows (see README, "Sweeps"), or None for a ``part`` that did not assemble.
    summary: ``summarize(df)``.
    arrays: dict of per-run arrays in row order of (agent, setting, seed):
      ``train_return [R]``, ``value [R, T]``, ``value_stderr [R, T]`` and, with
      ``save_returns``, ``returns [R, K]``.
    info: the ``sweep.json`` content (config, provenance, devices, layout, timings).
  """

  df: Any
  summary: Any
  arrays: dict
  info: dict


def _progress(total: int, initial: int, quiet: bool, desc: str):
  if quiet:
    return None
  from tqdm import tqdm  # pylint: disable=g-import-not-at-top
  return tqdm(total=total, initial=initial, unit="run", desc=desc, file=sys.stderr,
              dynamic_ncols=True, smoothing=0.1, mininterval=0.5)


def _log(quiet: bool, msg: str) -> None:
  if not quiet:
    print(f"[drjax sweep] {msg}", file=sys.stderr, flush=True)


def run(config: SweepConfig, *, out: str | None = None, devices: int | None = None,
        part: tuple[int, int] | None = None, overwrite: bool = False, quiet: bool = True,
        command: Sequence[str] | None = None) -> SweepResult:
  """Runs a sweep (all of it, or one part) and returns / writes the tidy tables.

  Args:
    config: a ``SweepConfig`` (validated here; ``ValueError`` names the field).
    out: output directory; ``None`` runs in memory and writes nothing. With a directory, finished
      chunks are skipped, a directory holding a different sweep is refused unless
      ``overwrite``, and ``results.parquet``, ``results.csv``, ``summary.csv``, ``sweep.json``,
      ``sweep.png`` are written when every chunk is done.
    devices: use the first N of ``jax.devices()`` (default: all).
    part: ``(i, n)``: run only the i-th (1-indexed) of n contiguous slices of the chunks; needs
      ``out``. The final files are written by ``merge(out)`` (or by a part that finds every
      chunk done).
    overwrite: replace a different sweep in ``out``.
    quiet: no progress bar / messages on stderr.
    command: the command line to record in ``sweep.json``.

  Returns:
    ``SweepResult`` (``df`` is None for a part whose sweep is not complete yet).
  """
  t_start = time.perf_counter()
  config = validate(config)
  if part is not None:
    if out is None:
      raise _Error("part", "needs an output directory (out)")
    if (not isinstance(part, (tuple, list)) or len(part) != 2 or not all(_is_int(x) for x in part)
        or not 1 <= part[0] <= part[1]):
      raise _Error("part", f"must be (i, n) with 1 <= i <= n, got {part!r}")
  mesh = _mesh(devices)
  resuming = False
  if out is not None:
    resuming = check_out_dir(out, config, overwrite=overwrite)
  env = make_env(config)
  lay = layout(config, env)
  H, d = env.horizon, env.feature_dim
  chash = config_hash(config)
  ndev = mesh.devices.size
  writer = jax.process_index() == 0
  # Host-side feature checks (negative features raise) once per source instance.
  grids = {a: _grid(config, env, a) for a, _ in lay.agents}
  check_env_features(env, jax.tree_util.tree_map(lambda x: x[0], grids[lay.agents[0][0]].params),
                     jax.random.PRNGKey(0))
  if out is not None and writer:
    if overwrite and not resuming:
      _clear(out)
    os.makedirs(os.path.join(out, CHUNK_DIR), exist_ok=True)
    if not resuming:
      _write_meta(out, config, lay, mesh, command, status="running", timings={})
  todo = list(range(len(lay.chunks))) if part is None else lay.part(*part)
  results: dict[int, dict] = {}
  done_before = 0
  if out is not None:
    for j in todo:
      setting, seed = lay.chunk_runs(j)
      r = _read_chunk(_chunk_path(out, j), chash, setting, seed)
      if r is not None:
        results[j] = r
        done_before += 1
  if jax.process_count() > 1:
    # Every process must run the same chunks (collectives): process 0's view of the finished
    # chunks decides (other hosts may not share its filesystem).
    from jax.experimental import multihost_utils  # pylint: disable=g-import-not-at-top
    done = np.asarray(multihost_utils.broadcast_one_to_all(
        np.array([j in results for j in todo], np.int32)))
    pending = [j for j, f in zip(todo, done) if not f]
  else:
    pending = [j for j in todo if j not in results]
  total_runs = sum(lay.chunks[j][2] for j in todo)
  runs_before = sum(lay.chunks[j][2] for j in todo if j in results)
  runs_desc = ", ".join(f"{a} {lay.runs(k)} runs" for k, (a, _) in enumerate(lay.agents))
  _log(quiet, f"{config.env}: {runs_desc}"
              f"; {len(todo)} chunk(s) of <= {lay.chunk} runs on {ndev} {jax.default_backend()} "
              f"device(s)" + (f"; {done_before} already done" if done_before else ""))
  base_key = jax.random.PRNGKey(config.seed)
  targets = (np.linspace(config.targets[1], config.targets[2], config.targets[3])
             if config.targets else np.zeros((1,)))
  dtype = jnp.dtype(config.dtype)
  timings = {"compile_s": {}, "chunks_s": 0.0, "runs_computed": 0}
  by_agent: dict[int, list[int]] = {}
  for j in pending:
    by_agent.setdefault(lay.chunks[j][0], []).append(j)
  # Compile every needed program first (one per agent: all its chunks share one padded shape).
  programs = {}
  for k in by_agent:
    agent_name = lay.agents[k][0]
    agent = _make_agent(agent_name, config, env)
    grid = grids[agent_name]
    C = lay.chunk if config.chunk is not None else min(lay.chunk, lay.runs(k))
    C = -(-C // ndev) * ndev  # padded to a multiple of the device count
    offline = agent.kind == "offline"
    prog, runs_sh, rep_sh = _program(env, agent, config.episodes,
                                     "targets" if config.targets else "source",
                                     config.test_episodes, config.save_returns, mesh, C,
                                     _behavior(config, env) if offline else None,
                                     max(config.trajectories) if offline else 0)
    tables = {"rho": grid.rho.astype(dtype), "beta": grid.beta.astype(dtype),
              "lam": grid.lam.astype(dtype), "targets": targets.astype(dtype),
              "size": grid.size, "reg_weight": grid.reg_weight.astype(dtype),
              "params": jax.tree_util.tree_map(
                  lambda x: x.astype(dtype) if np.issubdtype(x.dtype, np.floating) else x,
                  grid.params)}
    tables = jax.tree_util.tree_map(lambda x: _put(x, rep_sh), tables)
    key = _put(np.asarray(jax.device_get(base_key)), rep_sh)
    _log(quiet, f"compiling {agent_name} (chunk shape {C}) ...")
    t0 = time.perf_counter()
    example = (jax.ShapeDtypeStruct((C,), jnp.int32, sharding=runs_sh),) * 2
    compiled = prog.lower(*example, key, tables).compile()
    timings["compile_s"][agent_name] = round(time.perf_counter() - t0, 3)
    programs[k] = (compiled, C, runs_sh, key, tables)

  def launch(j):
    compiled, C, runs_sh, key, tables = programs[lay.chunks[j][0]]
    setting, seed = lay.chunk_runs(j)
    pad = C - len(seed)
    s_in = np.concatenate([seed, np.zeros(pad, np.int64)]).astype(np.int32)
    g_in = np.concatenate([setting, np.zeros(pad, np.int64)]).astype(np.int32)
    return j, compiled(_put(s_in, runs_sh), _put(g_in, runs_sh), key, tables), setting, seed

  # Testing aid: DRJAX_SWEEP_KILL_AFTER=N kills this process (SIGKILL) after N written chunks.
  kill_after = os.environ.get("DRJAX_SWEEP_KILL_AFTER")
  kill_after = int(kill_after) if kill_after else None
  written = 0
  bar = _progress(total_runs, runs_before, quiet, "sweep")
  try:
    # One chunk in flight while the previous one is fetched and written (asynchronous dispatch).
    inflight = None
    t_prev = time.perf_counter()
    for idx in range(len(pending) + 1):
      nxt = launch(pending[idx]) if idx < len(pending) else None
      if inflight is not None:
        j, dev_out, setting, seed = inflight
        host = _get(dev_out)
        n = len(seed)
        res = {name: np.asarray(v)[:n] for name, v in host.items()}
        now = time.perf_counter()
        secs, t_prev = now - t_prev, now
        timings["chunks_s"] += secs
        timings["runs_computed"] += n
        if out is not None and writer:
          _write_chunk(_chunk_path(out, j), chash, j, setting, seed, res, secs)
          written += 1
          if kill_after is not None and written >= kill_after:  # fault injection (tests)
            os.kill(os.getpid(), signal.SIGKILL)
        results[j] = {"setting": setting, "seed": seed, **res}
        if bar is not None:
          bar.update(n)
          bar.set_postfix_str(f"chunks {sum(i in results for i in todo)}/{len(todo)}")
      inflight = nxt
  finally:
    if bar is not None:
      bar.close()
  timings["total_s"] = round(time.perf_counter() - t_start, 3)
  timings["chunks_s"] = round(timings["chunks_s"], 3)
  if timings["chunks_s"] > 0:
    timings["runs_per_s"] = round(timings["runs_computed"] / timings["chunks_s"], 2)
  complete = all(j in results for j in range(len(lay.chunks)))
  if not complete and out is not None:
    # A part: other parts may have finished meanwhile.
    for j in range(len(lay.chunks)):
      if j not in results:
        setting, seed = lay.chunk_runs(j)
        r = _read_chunk(_chunk_path(out, j), chash, setting, seed)
        if r is not None:
          results[j] = r
    complete = all(j in results for j in range(len(lay.chunks)))
  if not complete and part is None:  # a non-writing process of a resumed multi-process sweep
    return SweepResult(None, None, {}, _meta(config, lay, mesh, command, status="worker",
                                             timings=timings))
  if not complete:
    info = _meta(config, lay, mesh, command, status=f"part {part[0]}/{part[1]} done",
                 timings=timings)
    _log(quiet, f"part {part[0]}/{part[1]} done; run `drjax sweep --merge --out {out}` when "
                "every part has finished")
    return SweepResult(None, None, {}, info)
  return _finish(config, env, lay, results, out, mesh, command, timings, quiet, writer)


def _assemble_arrays(lay: Layout, results: dict) -> dict:
  names = [n for n in ("train_return", "value", "value_stderr", "returns") if n in results[0]]
  return {n: np.concatenate([results[j][n] for j in range(len(lay.chunks))]) for n in names}


def _finish(config, env, lay, results, out, mesh, command, timings, quiet, writer):
  df = _frame(config, env, lay, results)
  summary = summarize(df)
  arrays = _assemble_arrays(lay, results)
  info = _meta(config, lay, mesh, command, status="complete", timings=timings)
  if out is not None and writer:
    t0 = time.perf_counter()
    _write_results(out, df, summary, config, lay, arrays.get("returns"))
    timings["write_s"] = round(time.perf_counter() - t0, 3)
    info["timings"]["chunk_seconds_total"] = round(float(sum(
        float(results[j].get("seconds", 0.0)) for j in range(len(lay.chunks)))), 3)
    info["outputs"] = [f for f in RESULTS + ("returns.npy",)
                       if os.path.exists(os.path.join(out, f))]
    _atomic_write(os.path.join(out, "sweep.json"),
                  (json.dumps(info, indent=2) + "\n").encode())
    _log(quiet, f"wrote {out}/ ({len(df)} rows)")
  return SweepResult(df, summary, arrays, info)


def _meta(config, lay, mesh, command, *, status, timings) -> dict:
  devs = list(mesh.devices.flat)
  return {"format": FORMAT, "status": status, "config": config.to_dict(),
          "config_hash": config_hash(config),
          "command": list(command) if command is not None else None,
          "provenance": provenance(),
          "devices": {"count": len(devs), "kinds": sorted({d.device_kind for d in devs}),
                      "platform": devs[0].platform, "process_count": jax.process_count(),
                      "xla_flags": os.environ.get("XLA_FLAGS", "")},
          "layout": lay.describe(), "timings": dict(timings)}


def _write_meta(out, config, lay, mesh, command, *, status, timings) -> None:
  info = _meta(config, lay, mesh, command, status=status, timings=timings)
  _atomic_write(os.path.join(out, "sweep.json"), (json.dumps(info, indent=2) + "\n").encode())


def merge(out: str, *, quiet: bool = True, command: Sequence[str] | None = None) -> SweepResult:
  """Assembles the final files of a sweep whose chunks were run by parts (``run(part=...)``).

  Raises ``ValueError`` (on ``out``) if ``out`` holds no sweep or some chunks are missing.
  """
  meta_path = os.path.join(out, "sweep.json")
  if not os.path.isfile(meta_path):
    raise _Error("out", f"{out!r} holds no sweep.json to merge")
  config = validate(load_config(meta_path))
  env = make_env(config)
  lay = layout(config, env)
  chash = config_hash(config)
  results, missing = {}, []
  for j in range(len(lay.chunks)):
    setting, seed = lay.chunk_runs(j)
    r = _read_chunk(_chunk_path(out, j), chash, setting, seed)
    if r is None:
      missing.append(j)
    else:
      results[j] = r
  if missing:
    raise _Error("out", f"{len(missing)} of {len(lay.chunks)} chunks are not finished yet "
                        f"(first missing: chunk {missing[0]}); run the remaining parts first")
  mesh = _mesh(None)
  prev = _read_json(meta_path).get("timings", {})
  return _finish(config, env, lay, results, out, mesh, command, {"merged": True, **prev}, quiet,
                 jax.process_index() == 0)


def load(out: str):
  """``(df, info)``: the results DataFrame of a finished sweep directory and its ``sweep.json``."""
  import pandas as pd  # pylint: disable=g-import-not-at-top
  df = pd.read_parquet(os.path.join(out, "results.parquet"))
  return df, _read_json(os.path.join(out, "sweep.json"))
