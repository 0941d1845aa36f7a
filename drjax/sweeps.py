"""Sweeps as a product: agents x a grid of settings x seeds, in bounded memory, on every device.

A sweep trains every agent on every setting of a grid (rho, beta, lambda and source-environment
parameters) for every seed, then evaluates each run's final greedy policy on a family of target
domains (exactly for finite environments, by Monte Carlo with common random numbers otherwise)
and returns a tidy ``pandas.DataFrame``: one row per agent x setting x seed (x target).

How it runs:

* The runs of one agent (settings x seeds, setting-major) are cut into chunks of ``chunk`` runs
  (given, or chosen from a memory budget). Every chunk is padded to the same shape, so ONE
  compiled program per agent serves all chunks; padded rows are dropped. Peak memory depends on
  the chunk size, not on the number of seeds. Unless a source parameter is swept, the program
  takes the source params unbatched, so a chunk costs what ``drjax.sweep`` plus the exact
  evaluation of the same runs cost.
* The run axis of a chunk is sharded over the devices (``jax.sharding.Mesh`` /
  ``NamedSharding``); on CPU, ``XLA_FLAGS=--xla_force_host_platform_device_count=N`` (the CLI's
  ``--devices N``) splits the host into N devices. Under ``jax.distributed.initialize()`` the mesh
  spans every process's devices and process 0 writes the files.
* Seed ``j``'s key is ``fold_in(PRNGKey(seed), j)``: it depends on nothing else (not chunking,
  devices or parts), so any seed can be rerun alone (``seed_ids``) and gives the same numbers.
  Training uses ``fold_in(key_j, 0)``, evaluation ``fold_in(key_j, 1)``: every agent and setting
  of seed ``j`` sees the same random numbers (common random numbers).
* Host work is off the critical path: while the devices compute chunk ``j + 1``, a host thread
  writes chunk ``j`` and streams its rows into ``results.parquet`` (the primary output; fixed row
  groups of ``ROW_GROUP`` rows), ``results.csv`` (only with ``csv=True`` / ``--csv``; pyarrow's
  CSV writer) and the summary's running sums. No step holds every row, so peak memory does not
  grow with the number of seeds; the files are the same bytes with or without the overlap.
* With an output directory, each finished chunk is written atomically (temp file +
  ``os.replace``) with its seeds and settings; a rerun skips finished chunks; ``part=(i, n)``
  runs the i-th of n contiguous slices of the chunks (batch-scheduler job arrays) and ``merge``
  assembles the final files. The results files depend only on the configuration (timings, the
  command line and the devices are in ``sweep.json`` only), so a resumed sweep's files are
  byte-identical to an uninterrupted one's. A rerun with no chunk size resumes with the stored
  layout; a damaged or foreign chunk file is an error naming it (``overwrite`` starts over).
* Ctrl-C raises ``SweepInterrupted`` (the command: one line saying how many chunks are saved and
  the command that resumes, exit code 130); nothing is half-written.
* Bad input raises ``SweepError``, a ``ValueError`` whose ``field`` names the configuration field
  (``SweepTypeError``, also a ``TypeError``, for a string where a tuple is expected).

Column types: setting and target columns (``rho``, ``beta``, ``lam``, ``reg_weight``,
``trajectories``, the source parameters, ``target_*``) are float64 holding the values exactly as
typed, whatever precision the computation ran in (``df.xi_norm == 0.1`` and ``df.target_q ==
0.15`` select rows; the target grid is ``target_values``); ``random``'s ``instance``, ``setting``,
``seed`` and ``rho_index`` are int64. The computed columns ``train_return``, ``value`` and
``value_stderr`` keep the computation's dtype (``config.dtype``: float32 unless float64 was asked
for); the summary's statistics are float64.

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
import decimal
import fractions
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

from drjax._precision import exact_matmuls
from drjax import evaluate
from drjax import data as data_lib
from drjax.agents import registry
from drjax.agents.base import BONUS_FORMS, CLIP_FORMS, TIE_BREAKS, check_features
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
    "SweepError",
    "SweepInterrupted",
    "SweepResult",
    "SweepTypeError",
    "Layout",
    "load",
    "load_config",
    "merge",
    "run",
    "summarize",
    "target_values",
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


class SweepError(ValueError):
  """Bad sweep input: a ``ValueError`` that knows which configuration field it is about.

  Raised by ``validate``, ``run``, ``merge``, ``load_config`` and ``check_out_dir`` before
  anything is compiled or written. ``str(e)`` is ``"<field>: <detail>"``.

  Attributes:
    field: the ``SweepConfig`` field or ``run`` argument (``"rho_at"``, ``"env_params"``,
      ``"out"``, ``"devices"``, ...); the command maps it to its flag.
    detail: the message without the field.
  """

  def __init__(self, field: str, message: str):
    super().__init__(f"{field}: {message}")
    self.field = field
    self.detail = message


class SweepTypeError(SweepError, TypeError):
  """A field of the wrong type, e.g. the string ``agents="dr-lsvi-ucb"`` where a tuple of names
  is expected: both a ``TypeError`` and a ``SweepError`` (so a ``ValueError``)."""


class SweepInterrupted(KeyboardInterrupt):
  """``run`` was interrupted (Ctrl-C): the finished chunks are saved, nothing is half-written.

  Attributes:
    out: the output directory (None in memory).
    saved: chunks of the sweep saved in ``out`` (including those of earlier runs).
    total: chunks of the whole sweep.
    part: the ``(i, n)`` part that was running, or None.
  """

  def __init__(self, out, saved: int, total: int, part=None):
    where = (f"{saved} of {total} chunks saved in {out}; rerun to resume" if out is not None
             else "in memory, nothing saved")
    super().__init__(f"sweep interrupted: {where}")
    self.out, self.saved, self.total, self.part = out, saved, total, part


_Error = SweepError  # the name used throughout this module


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


def target_values(targets) -> np.ndarray:
  """The float64 target grid of ``targets = (name, start, stop, num)``, exactly as typed.

  Entry ``i`` is the float64 nearest to the exact decimal ``start + (stop - start) * i / (num -
  1)`` of the typed ``start`` and ``stop`` (their shortest decimal representations), so
  ``q=0:1:21`` gives ``0.15`` and ``0.85``, not ``np.linspace``'s ``0.15000000000000002`` and
  ``0.8500000000000001``: ``df.target_q == 0.15`` selects rows. The computation uses these
  values rounded once to its dtype.
  """
  _, start, stop, num = targets
  a = fractions.Fraction(decimal.Decimal(repr(float(start))))
  b = fractions.Fraction(decimal.Decimal(repr(float(stop))))
  if num == 1:
    return np.array([float(a)])
  return np.array([float(a + (b - a) * i / (num - 1)) for i in range(num)], np.float64)


def _source_defaults(env) -> dict:
  """The environment's default source parameters as float64, exactly as its code types them."""
  with jax.enable_x64(True):
    p = env.make_params()
  return {k: float(np.asarray(v)) for k, v in p._asdict().items()}


def _check_source(env, c: SweepConfig, values: dict, targets, dtype: str) -> None:
  """``env.validate`` of one combination of source values (and the targets), on the host.

  Typed values are checked in float64 first, so that a message shows them as typed
  (``delta=0.9``, not float32's ``0.8999999761581421``), then in the computation's dtype: a value
  valid as typed but not once rounded to float32 is refused too, naming the typed values.
  """
  field = "env_params" if targets is None else "targets"

  def check():
    src = _source_params(env, c, values)
    if targets is not None:
      env.validate(env.target_params(src, targets))

  typed = c.env != "random"  # random instances are sampled, not typed: checked as computed
  try:
    with jax.enable_x64(True) if typed else contextlib.nullcontext():
      check()
  except ValueError as e:
    raise _Error(field, f"{values}: {e}" if targets is None else str(e)) from None
  if typed and dtype != "float64":
    try:
      check()
    except ValueError:
      what = f"{values}" if values else "the default source parameters"
      raise _Error(field, f"{what}{' with these targets' if targets is not None else ''}: valid "
                          f"as typed but not once rounded to {dtype}, the computation's dtype "
                          "(compute in float64: --x64 / dtype='float64')") from None


# Fields holding a tuple (of names, numbers or pairs): a string there is a type error.
_TUPLE_FIELDS = {"agents": "a list of agent names", "rho": "a list of numbers or [H, d] arrays",
                 "rho_at": "a list of (h, i) pairs", "beta": "a list of numbers",
                 "lam": "a list of numbers", "reg_weight": "a list of numbers",
                 "trajectories": "a list of integers", "seed_ids": "a list of integers",
                 "targets": "(name, start, stop, num)"}


def _check_types(c: SweepConfig) -> None:
  """``SweepTypeError`` naming the field for a string (or other non-sequence) where a tuple is
  expected, and for ``env_args`` / ``env_params`` that are not dicts."""
  for name, what in _TUPLE_FIELDS.items():
    v = getattr(c, name)
    if isinstance(v, (str, bytes)):
      example = f"{name}=({v!r},)" if name in ("agents",) else None
      raise SweepTypeError(name, f"must be {what}, got the string {v!r}"
                                 + (f" (write {example})" if example else ""))
    scalar_ok = name in ("rho", "beta", "lam", "reg_weight", "trajectories", "seed_ids")
    if v is not None and not isinstance(v, (list, tuple)) and not (
        scalar_ok and (isinstance(v, (int, float, np.number)) or
                       (name == "rho" and isinstance(v, np.ndarray)))):
      raise SweepTypeError(name, f"must be {what}, got {type(v).__name__} {v!r}")
  if c.agents is None:
    raise SweepTypeError("agents", "must be a list of agent names, got None")
  for name in ("env_args", "env_params"):
    if not isinstance(getattr(c, name), dict):
      raise SweepTypeError(name, f"must be a dict, got {type(getattr(c, name)).__name__} "
                                 f"{getattr(c, name)!r}")
  for k, v in c.env_params.items():
    if isinstance(v, (str, bytes)):
      raise SweepTypeError("env_params", f"{k}: must be a list of numbers, got the string {v!r}")


def validate(config: SweepConfig) -> SweepConfig:
  """Checks every field on the host (nothing is compiled) and returns the resolved config.

  Resolved means: tuples everywhere, ``dtype`` filled in from JAX's current default. Raises
  ``SweepError`` (a ``ValueError``) whose message starts with the offending field (``"rho_at:
  ..."``); a string where a tuple is expected (``agents="dr-lsvi-ucb"``) is a
  ``SweepTypeError``, also a ``TypeError``.
  """
  c = config
  _check_types(c)
  env = make_env(c)
  H, d = env.horizon, env.feature_dim
  if not c.agents:
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
  dtype = c.dtype
  current = "float64" if jax.config.jax_enable_x64 else "float32"
  if dtype is None:
    dtype = current
  if dtype not in ("float32", "float64"):
    raise _Error("dtype", f"must be float32 or float64, got {dtype!r}")
  if dtype != current:
    raise _Error("dtype", f"{dtype} requested but JAX computes in {current} (set "
                          f"jax.config.update('jax_enable_x64', {dtype == 'float64'}) first)")
  # Every combination of source values must be valid (checked before anything is compiled).
  combos = list(itertools.product(*env_params.values())) or [()]
  for combo in combos:
    _check_source(env, c, dict(zip(env_params, combo)), None, dtype)
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
    grid = target_values(targets)
    for combo in combos:
      _check_source(env, c, dict(zip(env_params, combo)), grid, dtype)
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
  # Setting columns hold the values as typed (float64), not the params the computation uses
  # (rounded to its dtype): the swept values, else the environment's defaults.
  defaults = _source_defaults(env) if config.env != "random" else {}
  for field in ENV_PARAMS[config.env]:
    vals = [dict(zip(names, r[5:])).get(field, defaults.get(field, 0)) for r in rows]
    cols[field] = np.array(vals, np.int64 if config.env == "random" else np.float64)
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
             mesh, num_runs: int, behavior=None, num_trajectories: int = 0,
             shared_params: bool = False):
  """Jitted ``f(seed_idx [C], setting_idx [C], base_key, tables) -> outputs``, sharded on runs.

  Online agents train for ``episodes``; offline agents collect ``num_trajectories`` (the largest
  size; each setting uses its first ``tables["size"]``) under ``behavior`` and fit once. The
  ``train_return`` of an offline run is the mean return of its dataset (the behavior policy's).

  ``shared_params``: every setting has the same source params (no source parameter is swept), so
  ``tables["params"]`` is one unbatched value and everything derived from it alone (the finite
  model, features, the target domains and their models) is computed once per chunk, not once per
  run as when the params are gathered per run from a ``[S]`` table: the chunk then costs what
  ``drjax.sweep`` plus the exact evaluation cost (about 3x less on the linear MDP).
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
    params = tables["params"] if shared_params else jax.tree_util.tree_map(
        lambda x: x[setting_idx], tables["params"])
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
  return (jax.jit(exact_matmuls(batched), in_shardings=(runs, runs, rep, rep), out_shardings=runs),
          runs, rep)


@functools.lru_cache(maxsize=None)
def _model_features(env):
  return jax.jit(exact_matmuls(lambda params: env.model(params).phi))


def _check_features(env, params) -> None:
  """``train.check_env_features`` (negative features raise, rows not summing to 1 warn), with a
  finite model's features computed by one jitted call: built eagerly, the model costs some 40
  small compilations (0.5 s of a cold sweep's start)."""
  if isinstance(env, FiniteEnvironment):
    try:
      phi = _model_features(env)(params)
    except NotImplementedError:
      pass
    else:
      check_features(phi, name=f"{type(env).__name__} features")
      return
  check_env_features(env, params, jax.random.PRNGKey(0))


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


def _temp_path(out: str, name: str) -> str:
  """A new empty temporary file in ``out`` for ``name`` (renamed onto it when complete)."""
  fd, tmp = tempfile.mkstemp(prefix=f".tmp-{name}-", dir=out)
  os.close(fd)
  return tmp


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


def _stored_config(out: str) -> dict | None:
  """The ``config`` dict of ``out/sweep.json``, or None if there is none (or it is unreadable)."""
  try:
    meta = _read_json(os.path.join(out, "sweep.json"))
  except (OSError, json.JSONDecodeError, UnicodeDecodeError):
    return None
  other = meta.get("config") if isinstance(meta, dict) else None
  return other if isinstance(other, dict) else None


LAYOUT_FIELDS = ("chunk", "memory_mb")  # what decides the chunk layout


def stored_layout(out: str, config: SweepConfig) -> SweepConfig:
  """``config`` with the chunk layout of the same sweep stored in ``out``, if no ``chunk`` is set.

  A rerun without an explicit chunk size into a directory holding a sweep that equals ``config``
  in every field but the layout (``chunk``, ``memory_mb``) resumes with the stored layout rather
  than being refused as a different sweep. Otherwise ``config`` is returned unchanged.
  """
  if config.chunk is not None:
    return config
  other = _stored_config(out)
  if other is None:
    return config
  mine = config.to_dict()
  if any(other.get(k) != mine.get(k) for k in set(mine) | set(other) if k not in LAYOUT_FIELDS):
    return config
  chunk, memory_mb = other.get("chunk"), other.get("memory_mb")
  if (chunk is not None and (not _is_int(chunk) or chunk < 1)) or not (
      isinstance(memory_mb, (int, float)) and memory_mb > 0):
    return config  # a damaged layout: check_out_dir reports the difference
  return dataclasses.replace(config, chunk=chunk, memory_mb=float(memory_mb))


def check_out_dir(out: str, config: SweepConfig, *, overwrite: bool = False) -> bool:
  """Refuses (``SweepError`` on ``out``) a directory holding another sweep; writes nothing.

  Returns True when ``out`` already holds this very sweep (it will be resumed); False for a new
  directory, or with ``overwrite`` (the sweep held there will be deleted and started over).
  """
  if os.path.exists(out) and not os.path.isdir(out):
    raise _Error("out", f"{out!r} exists and is not a directory")
  meta_path = os.path.join(out, "sweep.json")
  if os.path.exists(meta_path):
    if overwrite:
      return False
    other = _stored_config(out)
    if other == config.to_dict():
      return True
    diff = []
    if isinstance(other, dict):
      diff = sorted(k for k in set(other) | set(config.to_dict())
                    if other.get(k) != config.to_dict().get(k))
    raise _Error("out", f"{out!r} holds a different sweep (differs in: "
                        f"{', '.join(diff) or 'unreadable sweep.json'}); use --overwrite "
                        "(overwrite=True) to replace it or another directory")
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
  """A finished chunk's arrays, or None if the file does not exist.

  A file that exists but cannot be read, or holds another sweep's or another layout's runs, is a
  ``SweepError`` on ``out`` naming the file: nothing is recomputed over it (writes are atomic, so
  such a file was damaged or put there from outside); delete it to recompute that chunk, or start
  over with ``overwrite``.
  """
  try:
    with np.load(path) as z:
      d = {k: z[k] for k in z.files}
  except FileNotFoundError:
    return None
  except Exception as e:  # pylint: disable=broad-except  (torn, truncated or not an npz)
    raise _damaged(path, f"cannot be read: {type(e).__name__}: {' '.join(str(e).split())}"
                   ) from None
  if str(d.get("config_hash")) != chash:
    raise _damaged(path, f"belongs to another sweep (config hash {d.get('config_hash')}, this "
                         f"sweep's is {chash})")
  if not (np.array_equal(d.get("setting"), setting) and np.array_equal(d.get("seed"), seed)):
    raise _damaged(path, "holds other runs than this chunk's (another layout)")
  return d


def _damaged(path: str, why: str) -> SweepError:
  return _Error("out", f"chunk file {path} {why}; delete it to recompute that chunk, or start the "
                       "sweep over with --overwrite (overwrite=True)")


# ---------------------------------------------------------------------------------------------
# Tables.


# Rows per Parquet row group (and CSV write): fixed, so the files do not depend on the chunking.
ROW_GROUP = 1 << 18


class _Stats:
  """Mean, standard error (ddof=1) and count of ``[S, T]`` groups, fed rows in row order.

  Each group's values are shifted by its first value and summed in row order (``np.cumsum``, a
  sequential sum), so the result is the same bits however the rows are split into blocks (chunks)
  and equal to ``summarize`` on the whole table. NaN values are left out (as pandas does).
  """

  def __init__(self, num_groups: int, num_cols: int):
    shape = (num_groups, num_cols)
    self.n = np.zeros(shape, np.int64)
    self.shift = np.full(shape, np.nan)
    self.s1 = np.zeros(shape)
    self.s2 = np.zeros(shape)

  def add(self, g: int, x) -> None:
    """Rows ``x [m, T]`` (row order) of group ``g``."""
    x = np.asarray(x, np.float64)
    valid = ~np.isnan(x)
    sh = self.shift[g]
    fresh = np.isnan(sh) & valid.any(0)
    if fresh.any():
      first = x[np.argmax(valid, axis=0), np.arange(x.shape[1])]
      sh = np.where(fresh, first, sh)
      self.shift[g] = sh
    dev = np.where(valid, x - sh, 0.0)
    self.s1[g] = np.cumsum(np.concatenate([self.s1[g][None], dev]), axis=0)[-1]
    self.s2[g] = np.cumsum(np.concatenate([self.s2[g][None], dev * dev]), axis=0)[-1]
    self.n[g] += valid.sum(0)

  def result(self):
    """``(mean, stderr, count)``, each ``[S, T]`` (NaN mean for no value, NaN stderr for one)."""
    with np.errstate(invalid="ignore", divide="ignore"):
      n = self.n.astype(np.float64)
      mean = np.where(self.n > 0, self.shift + self.s1 / n, np.nan)
      var = np.maximum((self.s2 - self.s1 * self.s1 / n) / (n - 1), 0.0)
      stderr = np.where(self.n > 1, np.sqrt(var / n), np.nan)
    return mean, stderr, self.n.copy()


STATS = ("value", "train_return")  # the summarized columns


def _summary_frame(head: dict, stats: dict):
  """The summary DataFrame: key columns ``head`` then ``<metric>_{mean,stderr,count}``."""
  import pandas as pd  # pylint: disable=g-import-not-at-top

  cols = dict(head)
  for m in STATS:
    mean, se, n = stats[m]
    cols[f"{m}_mean"], cols[f"{m}_stderr"], cols[f"{m}_count"] = mean, se, n
  return pd.DataFrame(cols)


def setting_columns(df) -> list[str]:
  """The columns that identify a setting (everything between ``seed`` and the metrics)."""
  cols = list(df.columns)
  start = cols.index("seed") + 1
  end = cols.index("train_return")
  return [c for c in cols[start:end] if not c.startswith("target_")]


def summarize(df):
  """Mean, standard error (ddof=1; NaN for one seed) and count per agent x setting x target.

  The same groups and columns as ``df.groupby(["agent", "setting", <setting columns>,
  <target>], dropna=False, observed=True, sort=False)[["value", "train_return"]].agg(["mean",
  "sem", "count"])`` (flattened as ``value_mean``, ``value_stderr``, ``value_count``, ...),
  equal to it up to rounding (tested to 1e-12): each group is summed in row order after
  subtracting its first value, in float64 whatever the values' dtype, so that a sweep can
  accumulate its summary chunk by chunk and get exactly this. Setting and target columns are
  copied as they are (the typed values).
  """
  keys = ["agent", "setting"] + setting_columns(df) + [c for c in df.columns
                                                      if c.startswith("target_")]
  gid = df.groupby(keys, dropna=False, observed=True, sort=False).ngroup().to_numpy()
  order = np.argsort(gid, kind="stable")
  bounds = np.flatnonzero(np.diff(gid[order])) + 1
  starts = np.concatenate([[0], bounds]) if len(order) else np.zeros(0, np.int64)
  groups = np.split(order, bounds) if len(order) else []
  stats = {}
  for m in STATS:
    acc = _Stats(len(groups), 1)
    x = df[m].to_numpy(np.float64)
    for g, rows in enumerate(groups):
      acc.add(g, x[rows, None])
    stats[m] = tuple(a[:, 0] for a in acc.result())
  first = order[starts] if len(order) else np.zeros(0, np.int64)
  head = {k: df[k].iloc[first].reset_index(drop=True) for k in keys}
  return _summary_frame(head, stats)


class _Tables:
  """The tidy rows of every chunk, fed in layout order, streamed to the results files.

  ``add(j, res)`` turns chunk ``j``'s arrays into one Arrow record batch (one row per run x
  target), writes it on (Parquet row groups of ``ROW_GROUP`` rows, the CSV, ``returns.npy``) and
  accumulates the summary; nothing holds more than a row group and the summary's ``[settings,
  targets]`` sums, so memory does not grow with the number of seeds. With ``out=None`` the
  batches are kept instead (an in-memory sweep returns its DataFrame). ``close()`` renames the
  temporary files onto their names (atomic) and returns the summary; ``abort()`` deletes them.
  """

  def __init__(self, config: SweepConfig, lay: Layout, grids: dict, *, out: str | None = None,
               csv: bool = False, meta: dict | None = None):
    import pyarrow as pa  # pylint: disable=g-import-not-at-top

    self.pa = pa
    self.config, self.lay, self.out = config, lay, out
    self.T = config.targets[3] if config.targets else 1
    self.target = (f"target_{config.targets[0]}", target_values(config.targets)) \
        if config.targets else None
    self.columns = [grids[a].columns for a, _ in lay.agents]
    self.dictionary = pa.array(list(config.agents), pa.string())
    self.stats = [{m: _Stats(s, self.T if m == "value" else 1) for m in STATS}
                  for _, s in lay.agents]
    self.next = 0
    self.rows = 0
    self.runs = 0
    self.chunk_seconds = 0.0
    dtype = np.dtype(config.dtype)
    fields = [("agent", pa.dictionary(pa.int8(), pa.string())), ("setting", pa.int64()),
              ("seed", pa.int64())]
    fields += [(c, pa.from_numpy_dtype(v.dtype)) for c, v in self.columns[0].items()]
    if self.target:
      fields.append((self.target[0], pa.float64()))
    fields += [(c, pa.from_numpy_dtype(dtype)) for c in ("train_return", "value",
                                                         "value_stderr")]
    self.schema = pa.schema(fields, metadata=(
        {b"drjax.sweep": _canonical(meta).encode()} if meta is not None else None))
    self.names = [f for f, _ in fields]
    self.pending, self.pending_rows = [], 0
    self.batches, self.arrays = [], {}
    self.tmp = {}
    self.pq_writer = self.csv_writer = self.returns = None
    if out is None:
      return
    import pyarrow.parquet as pq  # pylint: disable=g-import-not-at-top

    try:
      self.tmp["results.parquet"] = _temp_path(out, "results.parquet")
      self.pq_writer = pq.ParquetWriter(self.tmp["results.parquet"], self.schema)
      if csv:
        import pyarrow.csv as pacsv  # pylint: disable=g-import-not-at-top
        self.tmp["results.csv"] = _temp_path(out, "results.csv")
        self.csv_file = open(self.tmp["results.csv"], "wb")  # pylint: disable=consider-using-with
        self.csv_file.write((",".join(self.names) + "\n").encode())
        self.csv_writer = pacsv.CSVWriter(self.csv_file, self.schema.remove_metadata(),
                                          write_options=pacsv.WriteOptions(
                                              include_header=False, quoting_style="none"))
      if config.save_returns:
        self.tmp["returns.npy"] = _temp_path(out, "returns.npy")
        total = sum(c[2] for c in lay.chunks)
        self.returns = np.lib.format.open_memmap(self.tmp["returns.npy"], mode="w+", dtype=dtype,
                                                 shape=(total, config.episodes))
    except BaseException:
      self.abort()
      raise

  def add(self, j: int, res: dict) -> None:
    """Chunk ``j``'s arrays (``train_return [n]``, ``value [n, T]``, ...); ``j`` in order."""
    pa = self.pa
    if j != self.next:
      raise RuntimeError(f"chunk {j} fed before chunk {self.next}")  # a bug, not user input
    k = self.lay.chunks[j][0]
    setting, seed = self.lay.chunk_runs(j)
    n, T = len(seed), self.T
    tr = np.asarray(res["train_return"])[:n]
    value = np.asarray(res["value"])[:n].reshape(n, T)
    stderr = np.asarray(res["value_stderr"])[:n].reshape(n, T)
    rows = np.repeat(setting, T)
    arrays = [pa.DictionaryArray.from_arrays(pa.array(np.full(n * T, k, np.int8)),
                                             self.dictionary),
              pa.array(rows), pa.array(np.repeat(seed, T))]
    arrays += [pa.array(col[rows], from_pandas=True) for col in self.columns[k].values()]
    if self.target:
      arrays.append(pa.array(np.tile(self.target[1], n)))
    arrays += [pa.array(np.repeat(tr, T), from_pandas=True),
               pa.array(value.reshape(-1), from_pandas=True),
               pa.array(stderr.reshape(-1), from_pandas=True)]
    self._emit(pa.RecordBatch.from_arrays(arrays, schema=self.schema.remove_metadata()))
    # Summary: the chunk's runs are setting-major, so each setting is one block of rows.
    cuts = np.flatnonzero(np.diff(setting)) + 1
    for a, b in zip(np.concatenate([[0], cuts]), np.concatenate([cuts, [n]])):
      s = int(setting[a])
      self.stats[k]["value"].add(s, value[a:b])
      self.stats[k]["train_return"].add(s, tr[a:b, None])
    if self.returns is not None:
      self.returns[self.runs:self.runs + n] = np.asarray(res["returns"])[:n]
    if self.out is None:
      for name in ("train_return", "value", "value_stderr", "returns"):
        if name in res:
          self.arrays.setdefault(name, []).append(np.asarray(res[name])[:n])
    self.chunk_seconds += float(res.get("seconds", 0.0))
    self.runs += n
    self.rows += n * T
    self.next += 1

  def _emit(self, batch) -> None:
    if self.out is None:
      self.batches.append(batch)
      return
    self.pending.append(batch)
    self.pending_rows += batch.num_rows
    while self.pending_rows >= ROW_GROUP:
      self._flush(ROW_GROUP)

  def _flush(self, rows: int) -> None:
    table = self.pa.Table.from_batches(self.pending, schema=self.schema.remove_metadata())
    head, rest = table.slice(0, rows), table.slice(rows)
    self.pq_writer.write_table(head.replace_schema_metadata(self.schema.metadata),
                               row_group_size=ROW_GROUP)
    if self.csv_writer is not None:  # NaN are nulls (from_pandas): empty fields, as pandas
      self.csv_writer.write_table(head)
    self.pending = rest.to_batches()
    self.pending_rows = rest.num_rows

  def summary(self):
    import pandas as pd  # pylint: disable=g-import-not-at-top

    head = {"agent": [], "setting": []}
    for c in self.columns[0]:
      head[c] = []
    if self.target:
      head[self.target[0]] = []
    stats = {m: ([], [], []) for m in STATS}
    for k, (_, S) in enumerate(self.lay.agents):
      ids = np.repeat(np.arange(S), self.T)
      head["agent"].append(np.full(S * self.T, k))
      head["setting"].append(ids)
      for c, v in self.columns[k].items():
        head[c].append(v[ids])
      if self.target:
        head[self.target[0]].append(np.tile(self.target[1], S))
      for m in STATS:
        res = self.stats[k][m].result()
        for acc, r in zip(stats[m], res):
          acc.append(np.repeat(r[:, 0], self.T) if m != "value" else r.reshape(-1))
    head = {c: np.concatenate(v) for c, v in head.items()}
    head["agent"] = pd.Categorical.from_codes(head["agent"], categories=list(self.config.agents))
    return _summary_frame(head, {m: tuple(np.concatenate(a) for a in stats[m]) for m in STATS})

  def frame(self):
    """The in-memory DataFrame (``out=None`` only)."""
    return self.pa.Table.from_batches(self.batches, schema=self.schema.remove_metadata()
                                      ).to_pandas()

  def close(self) -> None:
    """Flushes and closes the files and renames them onto their names (atomic each)."""
    if self.next != len(self.lay.chunks):
      raise RuntimeError(f"closing after {self.next} of {len(self.lay.chunks)} chunks")  # a bug
    if self.out is None:
      return
    if self.pending_rows:
      self._flush(self.pending_rows)
    self.pq_writer.close()
    self.pq_writer = None
    if self.csv_writer is not None:
      self.csv_writer.close()
      self.csv_file.close()
      self.csv_writer = None
    if self.returns is not None:
      self.returns.flush()
      self.returns = None
    for name, tmp in list(self.tmp.items()):
      os.chmod(tmp, 0o666 & ~_UMASK)
      os.replace(tmp, os.path.join(self.out, name))
      del self.tmp[name]

  def abort(self) -> None:
    """Closes and deletes the temporary files (an interrupted or failed sweep)."""
    for closer in (lambda: self.pq_writer and self.pq_writer.close(),
                   lambda: self.csv_writer and self.csv_writer.close(),
                   lambda: getattr(self, "csv_file", None) and self.csv_file.close()):
      try:
        closer()
      except Exception:  # pylint: disable=broad-except  (already failing; delete what is left)
        pass
    self.pq_writer = self.csv_writer = self.returns = None
    for tmp in self.tmp.values():
      if os.path.exists(tmp):
        os.unlink(tmp)
    self.tmp.clear()


def _plot(df, summary, config: SweepConfig, path: str) -> None:
  # The object-oriented API with the Agg canvas: no pyplot state, the user's backend is untouched.
  from matplotlib.backends.backend_agg import FigureCanvasAgg  # pylint: disable=g-import-not-at-top
  from matplotlib.figure import Figure  # pylint: disable=g-import-not-at-top

  from drjax import style  # pylint: disable=g-import-not-at-top

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
  grouped = list(summary.groupby(groups, dropna=False, observed=True, sort=False))
  # One colour per algorithm (drjax.style, from the registry); its settings in shades of it.
  per_agent = {}
  for key, _ in grouped:
    key = key if isinstance(key, tuple) else (key,)
    per_agent.setdefault(key[0], []).append(key)
  colors = {}
  for agent, keys in per_agent.items():
    base = style.color(str(agent)) or "0.3"
    colors.update(zip(keys, style.shades(base, len(keys)) if len(keys) > 1 else [base]))
  sym = lambda c, v: style.math(f"{ {'lam': 'lambda'}.get(c, c)} = {v:g}")  # noqa: E731
  shown = 0
  for key, g in grouped:
    key = key if isinstance(key, tuple) else (key,)
    color, name = colors[key], style.display(str(key[0]))
    if g[x].isna().all():  # e.g. LSVI-UCB against rho: a horizontal band
      m, s = g["value_mean"].mean(), g["value_stderr"].fillna(0).mean()
      ax.axhline(m, ls="--", lw=1, color=color, label=name)
      ax.axhspan(m - 1.96 * s, m + 1.96 * s, color=color, alpha=0.1)
      continue
    g = g.sort_values(x)
    desc = [name]
    if tcols:
      row = g.iloc[0]
      desc += [sym(c, row[c]) for c in varying if not np.isnan(row[c])]
    else:
      desc += [sym(c, v) for c, v in zip(groups[1:], key[1:]) if not np.isnan(v)]
    m = g["value_mean"].to_numpy()
    s = g["value_stderr"].fillna(0).to_numpy()
    xs = g[x].to_numpy()
    ax.plot(xs, m, marker="o" if len(xs) < 30 else None, ms=3, color=color,
            label=", ".join(desc))
    ax.fill_between(xs, m - 1.96 * s, m + 1.96 * s, color=color, alpha=0.2, lw=0)
    shown += 1
  ax.set_xlabel(style.math({"lam": "lambda"}.get(label, label)))
  ax.set_ylabel(style.Y_LABEL if tcols else style.Y_LABEL_SOURCE)
  ax.set_title(f"drjax sweep: {config.env}, {len(config.seed_ids or range(config.seeds))} seeds, "
               f"$K$ = {config.episodes} (mean, 95% band)", fontsize=10)
  if shown <= 12:
    ax.legend(fontsize=7)
  fig.tight_layout()
  buf = io.BytesIO()
  fig.savefig(buf, format="png", dpi=110, metadata={"Software": None})
  _atomic_write(path, buf.getvalue())


# ---------------------------------------------------------------------------------------------
# Running.


class SweepResult:
  """What ``run`` / ``merge`` return.

  Attributes:
    df: tidy rows (see README, "Sweeps"; column types in the module docstring), or None for a
      ``part`` that did not assemble. For a sweep written to a directory it is read from
      ``results.parquet`` on first access (the sweep itself never holds all rows in memory).
    summary: per agent x setting x target statistics, equal to ``summarize(df)``.
    arrays: dict of per-run arrays in row order of (agent, setting, seed):
      ``train_return [R]``, ``value [R, T]``, ``value_stderr [R, T]`` and, with
      ``save_returns``, ``returns [R, K]`` (for a directory: read from its chunk files on first
      access).
    info: the ``sweep.json`` content (config, provenance, devices, layout, timings).
  """

  def __init__(self, df, summary, arrays, info, *, out: str | None = None, loader=None):
    self._df, self.summary, self._arrays, self.info = df, summary, arrays, info
    self._out, self._loader = out, loader

  @property
  def df(self):
    if self._df is None and self._out is not None:
      import pandas as pd  # pylint: disable=g-import-not-at-top
      self._df = pd.read_parquet(os.path.join(self._out, "results.parquet"))
    return self._df

  @property
  def arrays(self) -> dict:
    if self._arrays is None:
      self._arrays = self._loader() if self._loader is not None else {}
    return self._arrays

  def __repr__(self):
    return (f"SweepResult(status={self.info.get('status')!r}, out={self._out!r}, "
            f"summary={None if self.summary is None else self.summary.shape})")


def _progress(total: int, initial: int, quiet: bool, desc: str):
  if quiet:
    return None
  from tqdm import tqdm  # pylint: disable=g-import-not-at-top
  return tqdm(total=total, initial=initial, unit="run", desc=desc, file=sys.stderr,
              dynamic_ncols=True, smoothing=0.1, mininterval=0.5)


def _log(quiet: bool, msg: str) -> None:
  if not quiet:
    print(f"[drjax sweep] {msg}", file=sys.stderr, flush=True)


class _Pipeline:
  """Host work (chunk files, tables) done in order by one background thread.

  The main thread dispatches chunk ``j + 1`` (JAX runs it asynchronously), fetches chunk ``j``
  and hands its host arrays over with ``put``; this thread writes chunk ``j`` and streams its
  rows meanwhile, so the host work is off the critical path. ``put`` blocks while ``depth`` items
  wait (bounded memory); an exception in the thread is raised by the next ``put`` / ``close``.
  ``abort()`` makes the remaining items skip everything but their chunk files (Ctrl-C: the
  computed chunks are still saved).
  """

  def __init__(self, depth: int = 2):
    import queue  # pylint: disable=g-import-not-at-top
    import threading  # pylint: disable=g-import-not-at-top

    self.queue = queue.Queue(maxsize=depth)
    self.error: BaseException | None = None
    self.aborted = threading.Event()
    self.busy_s = 0.0
    self.wait_s = 0.0
    self.thread = threading.Thread(target=self._loop, name="drjax-sweep-host", daemon=True)
    self.thread.start()

  def _loop(self) -> None:
    while True:
      item = self.queue.get()
      if item is None:
        self.queue.task_done()
        return
      if self.error is not None:
        self.queue.task_done()
        continue
      t0 = time.perf_counter()
      try:
        item[0](*item[1:])
      except BaseException as e:  # pylint: disable=broad-except  (re-raised in the main thread)
        self.error = e
      self.busy_s += time.perf_counter() - t0
      self.queue.task_done()

  def _check(self) -> None:
    if self.error is not None:
      raise self.error

  def put(self, fn, *args) -> None:
    self._check()
    t0 = time.perf_counter()
    self.queue.put((fn, *args))
    self.wait_s += time.perf_counter() - t0

  def drain(self) -> None:
    """Waits until every item put so far is done."""
    t0 = time.perf_counter()
    self.queue.join()
    self.wait_s += time.perf_counter() - t0
    self._check()

  def close(self) -> None:
    t0 = time.perf_counter()
    self.queue.put(None)
    self.thread.join()
    self.wait_s += time.perf_counter() - t0
    self._check()


def _warm_imports(csv: bool) -> None:
  """Imports what the end of a sweep needs, in the host thread while the chunks compute."""
  import pandas  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import
  import pyarrow.parquet  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import
  from matplotlib.backends import backend_agg  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import
  from matplotlib import figure  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import
  if csv:
    import pyarrow.csv  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import


def _results_meta(config: SweepConfig, lay: Layout) -> dict:
  """What ``results.parquet`` carries in its schema metadata (key ``drjax.sweep``)."""
  return {"format": FORMAT, "config": config.to_dict(), "config_hash": config_hash(config),
          "provenance": provenance(), "layout": lay.describe()}


def _read_arrays(out: str, lay: Layout, chash: str) -> dict:
  """A directory sweep's per-run arrays, concatenated from its chunk files."""
  parts: dict[str, list] = {}
  for j in range(len(lay.chunks)):
    r = _read_chunk(_chunk_path(out, j), chash, *lay.chunk_runs(j))
    if r is None:
      raise _Error("out", f"chunk file {_chunk_path(out, j)} is missing")
    for name in ("train_return", "value", "value_stderr", "returns"):
      if name in r:
        parts.setdefault(name, []).append(r[name])
  return {k: np.concatenate(v) for k, v in parts.items()}


def _chunks_done(out: str, lay: Layout, chash: str, chunks) -> set:
  """The chunks of ``chunks`` finished in ``out`` (a damaged file raises, naming it)."""
  return {j for j in chunks if _read_chunk(_chunk_path(out, j), chash, *lay.chunk_runs(j))
          is not None}


def run(config: SweepConfig, *, out: str | None = None, devices: int | None = None,
        part: tuple[int, int] | None = None, overwrite: bool = False, quiet: bool = True,
        command: Sequence[str] | None = None, csv: bool = False) -> SweepResult:
  """Runs a sweep (all of it, or one part) and returns / writes the tidy tables.

  Args:
    config: a ``SweepConfig`` (validated here; ``ValueError`` names the field).
    out: output directory; ``None`` runs in memory and writes nothing. With a directory, finished
      chunks are skipped, a directory holding a different sweep is refused unless
      ``overwrite``, and ``results.parquet``, ``summary.csv``, ``sweep.json``, ``sweep.png``
      (and ``results.csv`` with ``csv``) are complete when every chunk is done.
    devices: use the first N of ``jax.devices()`` (default: all).
    part: ``(i, n)``: run only the i-th (1-indexed) of n contiguous slices of the chunks; needs
      ``out``. The final files are written by ``merge(out)`` (or by a part that finds every
      chunk done).
    overwrite: start over: delete the sweep held by ``out`` (its chunks and results), whatever
      it is, then run. Not with ``part`` (it would delete the other parts' chunks).
    quiet: no progress bar / messages on stderr.
    command: the command line to record in ``sweep.json``.
    csv: also write ``results.csv`` (the same rows as ``results.parquet``; pyarrow's CSV writer:
      shortest round-trip floats, NaN as an empty field). Parquet is the primary output: about
      100x smaller and faster to write and read. Not with ``part`` (give it to ``merge``).

  Host work: while the devices compute chunk ``j + 1``, a host thread writes chunk ``j``'s file
  and streams its rows into the results files (Parquet row groups of ``ROW_GROUP`` rows, fixed,
  so the bytes do not depend on the chunking or on the overlap) and the summary's running sums.
  Nothing holds all rows: peak memory does not grow with the number of seeds. A part (or
  ``merge``) streams the chunk files from disk at the end instead.

  Resuming: with ``config.chunk`` None, a directory holding the same sweep with another chunk
  layout (an explicit chunk size, another ``memory_mb``) is resumed with its stored layout. A
  chunk file that exists but is damaged or foreign is a ``SweepError`` naming the file (nothing is
  written); delete it, or start over with ``overwrite``.

  Interrupts: Ctrl-C (``KeyboardInterrupt``) raises ``SweepInterrupted`` (a
  ``KeyboardInterrupt``) saying how many chunks are saved; every file is written atomically
  (temporary file + ``os.replace``), so nothing is half-written and a rerun resumes.

  Returns:
    ``SweepResult`` (``df`` is None for a part whose sweep is not complete yet).

  Raises:
    SweepError: bad input (a ``ValueError``; ``SweepTypeError`` for a wrong type).
    SweepInterrupted: Ctrl-C.
  """
  t_start = time.perf_counter()
  config = validate(config)
  if part is not None:
    if out is None:
      raise _Error("part", "needs an output directory (out)")
    if (not isinstance(part, (tuple, list)) or len(part) != 2 or not all(_is_int(x) for x in part)
        or not 1 <= part[0] <= part[1]):
      raise _Error("part", f"must be (i, n) with 1 <= i <= n, got {part!r}")
    if overwrite:
      raise _Error("overwrite", "starts the whole sweep over, which would delete the other "
                                "parts' chunks: clear the directory once before the parts")
    if csv:
      raise _Error("csv", "the final files are written by merge: give csv to merge, not to a "
                          "part")
  mesh = _mesh(devices)
  resuming = False
  if out is not None:
    stored = stored_layout(out, config)
    if stored is not config and not overwrite:
      config = stored
      _log(quiet, f"resuming {out} with its stored layout (chunk {config.chunk}, memory_mb "
                  f"{config.memory_mb:g})")
    resuming = check_out_dir(out, config, overwrite=overwrite)
  env = make_env(config)
  lay = layout(config, env)
  chash = config_hash(config)
  todo = list(range(len(lay.chunks))) if part is None else lay.part(*part)
  done: set = set()
  if out is not None and not overwrite:
    # Before anything is written: a damaged chunk file is an error naming it (nothing lost).
    done = _chunks_done(out, lay, chash, todo)
  try:
    return _run(config, env, lay, chash, todo, done, out=out, mesh=mesh, part=part,
                overwrite=overwrite, resuming=resuming, quiet=quiet, command=command,
                t_start=t_start, csv=bool(csv))
  except KeyboardInterrupt:
    saved = 0
    if out is not None:
      saved = sum(os.path.exists(_chunk_path(out, j)) for j in range(len(lay.chunks)))
    raise SweepInterrupted(out, saved, len(lay.chunks), part) from None


def _run(config, env, lay, chash, todo, done, *, out, mesh, part, overwrite, resuming, quiet,
         command, t_start, csv):
  ndev = mesh.devices.size
  writer = jax.process_index() == 0
  # Host-side feature checks (negative features raise) once per source instance.
  grids = {a: _grid(config, env, a) for a, _ in lay.agents}
  _check_features(env, jax.tree_util.tree_map(lambda x: x[0], grids[lay.agents[0][0]].params))
  if out is not None and writer:
    if overwrite:
      _clear(out)
    os.makedirs(os.path.join(out, CHUNK_DIR), exist_ok=True)
    if not resuming:
      _write_meta(out, config, lay, mesh, command, status="running", timings={})
  if jax.process_count() > 1:
    # Every process must run the same chunks (collectives): process 0's view of the finished
    # chunks decides (other hosts may not share its filesystem).
    from jax.experimental import multihost_utils  # pylint: disable=g-import-not-at-top
    flags = np.asarray(multihost_utils.broadcast_one_to_all(
        np.array([j in done for j in todo], np.int32)))
    done = {j for j, f in zip(todo, flags) if f}
  pending = [j for j in todo if j not in done]
  total_runs = sum(lay.chunks[j][2] for j in todo)
  runs_before = sum(lay.chunks[j][2] for j in todo if j in done)
  runs_desc = ", ".join(f"{a} {lay.runs(k)} runs" for k, (a, _) in enumerate(lay.agents))
  _log(quiet, f"{config.env}: {runs_desc}"
              f"; {len(todo)} chunk(s) of <= {lay.chunk} runs on {ndev} {jax.default_backend()} "
              f"device(s)" + (f"; {len(done)} already done" if done else ""))
  # The tables are streamed while the sweep runs when this process sees every chunk in order:
  # a whole sweep (not a part), in memory or written by process 0.
  stream = part is None and (out is None or writer)
  pipe = _Pipeline()
  sink: dict = {}
  ready: dict[int, dict] = {}

  def open_sink():
    _warm_imports(csv)
    sink["tables"] = _Tables(config, lay, grids, out=out, csv=csv,
                             meta=_results_meta(config, lay) if out is not None else None)

  def advance():
    """Feeds the tables every chunk available in order (computed, or finished before)."""
    tables = sink["tables"]
    while tables.next < len(lay.chunks) and not pipe.aborted.is_set():
      j = tables.next
      if j in ready:
        tables.add(j, ready.pop(j))
      elif j in done and out is not None:
        tables.add(j, _read_chunk(_chunk_path(out, j), chash, *lay.chunk_runs(j)))
      else:
        return

  # Testing aids: DRJAX_SWEEP_KILL_AFTER=N kills this process (SIGKILL) after N written chunks;
  # DRJAX_SWEEP_TEST_DELAY_S=T sleeps T seconds after each chunk (time to send a SIGINT);
  # DRJAX_SWEEP_NO_OVERLAP=1 does the host work of each chunk before the next one is dispatched
  # (the tests check that the files are the same bytes either way).
  kill_after = os.environ.get("DRJAX_SWEEP_KILL_AFTER")
  kill_after = int(kill_after) if kill_after else None
  test_delay = float(os.environ.get("DRJAX_SWEEP_TEST_DELAY_S") or 0)
  overlap = not os.environ.get("DRJAX_SWEEP_NO_OVERLAP")
  written = [0]

  def host_work(j, setting, seed, res, secs):
    """Chunk ``j``'s host work (in the host thread): its file, then its rows."""
    if out is not None and writer:
      _write_chunk(_chunk_path(out, j), chash, j, setting, seed, res, secs)
      written[0] += 1
      if kill_after is not None and written[0] >= kill_after:  # fault injection (tests)
        os.kill(os.getpid(), signal.SIGKILL)
    if stream and not pipe.aborted.is_set():
      ready[j] = {**res, "seconds": secs}
      advance()

  timings = {"compile_s": {}, "chunks_s": 0.0, "runs_computed": 0}
  bar = None
  try:
    if stream:
      pipe.put(open_sink)
      pipe.put(advance)  # chunks finished before, while the programs compile
    programs = _compile(config, env, lay, grids, pending, mesh, timings, quiet)

    def launch(j):
      compiled, C, runs_sh, key, tables = programs[lay.chunks[j][0]]
      setting, seed = lay.chunk_runs(j)
      pad = C - len(seed)
      s_in = np.concatenate([seed, np.zeros(pad, np.int64)]).astype(np.int32)
      g_in = np.concatenate([setting, np.zeros(pad, np.int64)]).astype(np.int32)
      return j, compiled(_put(s_in, runs_sh), _put(g_in, runs_sh), key, tables), setting, seed

    bar = _progress(total_runs, runs_before, quiet, "sweep")
    # One chunk in flight on the devices while the previous one is fetched here and written by
    # the host thread (asynchronous dispatch).
    inflight = None
    finished = len(done & set(todo))
    t_prev = time.perf_counter()
    for idx in range(len(pending) + 1):
      nxt = launch(pending[idx]) if (idx < len(pending) and overlap) else None
      if inflight is not None:
        j, dev_out, setting, seed = inflight
        host = _get(dev_out)
        n = len(seed)
        res = {name: np.asarray(v)[:n] for name, v in host.items()}
        now = time.perf_counter()
        secs, t_prev = now - t_prev, now
        timings["chunks_s"] += secs
        timings["runs_computed"] += n
        pipe.put(host_work, j, setting, seed, res, secs)
        if not overlap:
          pipe.drain()
        finished += 1
        if bar is not None:
          bar.update(n)
          bar.set_postfix_str(f"chunks {finished}/{len(todo)}")
        if test_delay:
          time.sleep(test_delay)
      if not overlap and idx < len(pending):
        t_prev = time.perf_counter()
        nxt = launch(pending[idx])
      inflight = nxt
    pipe.close()
  except BaseException:
    pipe.aborted.set()  # queued chunk files are still written, no more rows
    try:
      pipe.close()
    except BaseException:  # pylint: disable=broad-except  (the first error is the one raised)
      pass
    if "tables" in sink:
      sink["tables"].abort()
    raise
  finally:
    if bar is not None:
      bar.close()
  timings["chunks_s"] = round(timings["chunks_s"], 3)
  if timings["chunks_s"] > 0:
    timings["runs_per_s"] = round(timings["runs_computed"] / timings["chunks_s"], 2)
  timings["host_busy_s"] = round(pipe.busy_s, 3)  # host work, mostly overlapped
  timings["host_wait_s"] = round(pipe.wait_s, 3)  # of which the devices waited for
  if stream:
    tables = sink["tables"]
    if tables.next == len(lay.chunks):
      return _finish(config, lay, tables, out, mesh, command, timings, quiet, t_start)
    tables.abort()  # cannot happen for a whole sweep (every chunk is done or computed)
  timings["total_s"] = round(time.perf_counter() - t_start, 3)
  if out is None or not writer:  # a non-writing process of a multi-process sweep
    return SweepResult(None, None, {}, _meta(config, lay, mesh, command, status="worker",
                                             timings=timings))
  # A part: the sweep is complete if the other parts have finished meanwhile.
  rest = [j for j in range(len(lay.chunks)) if j not in set(todo)]
  if len(_chunks_done(out, lay, chash, rest)) == len(rest):
    return _assemble(config, lay, grids, out, mesh, command, timings, quiet, t_start, csv=False)
  info = _meta(config, lay, mesh, command, status=f"part {part[0]}/{part[1]} done",
               timings=timings)
  _log(quiet, f"part {part[0]}/{part[1]} done; run `drjax sweep --merge --out {out}` when "
              "every part has finished")
  return SweepResult(None, None, {}, info)


def _compile(config, env, lay, grids, pending, mesh, timings, quiet) -> dict:
  """One compiled chunk program per agent with pending chunks (all its chunks share one shape)."""
  ndev = mesh.devices.size
  base_key = jax.random.PRNGKey(config.seed)
  targets = target_values(config.targets) if config.targets else np.zeros((1,))
  dtype = jnp.dtype(config.dtype)
  programs = {}
  for k in sorted({lay.chunks[j][0] for j in pending}):
    agent_name = lay.agents[k][0]
    agent = _make_agent(agent_name, config, env)
    grid = grids[agent_name]
    C = lay.chunk if config.chunk is not None else min(lay.chunk, lay.runs(k))
    # Padded to a multiple of the device count, and to at least 2 runs per device: XLA compiles
    # a batch of one differently (size-1 dimensions folded away), and its float32 numbers
    # differed in the last bit from every other batch size's.
    C = max(-(-C // ndev), 2) * ndev
    offline = agent.kind == "offline"
    # One source-params value for all settings (nothing of the environment swept): pass it
    # unbatched, so that the model and the target domains are built once per chunk.
    shared = all(bool(np.all(x == x[:1])) for x in jax.tree_util.tree_leaves(grid.params))
    prog, runs_sh, rep_sh = _program(env, agent, config.episodes,
                                     "targets" if config.targets else "source",
                                     config.test_episodes, config.save_returns, mesh, C,
                                     _behavior(config, env) if offline else None,
                                     max(config.trajectories) if offline else 0, shared)
    params = jax.tree_util.tree_map(lambda x: x[0], grid.params) if shared else grid.params
    tables = {"rho": grid.rho.astype(dtype), "beta": grid.beta.astype(dtype),
              "lam": grid.lam.astype(dtype), "targets": targets.astype(dtype),
              "size": grid.size, "reg_weight": grid.reg_weight.astype(dtype),
              "params": jax.tree_util.tree_map(
                  lambda x: x.astype(dtype) if np.issubdtype(x.dtype, np.floating) else x,
                  params)}
    tables = jax.tree_util.tree_map(lambda x: _put(x, rep_sh), tables)
    key = _put(np.asarray(jax.device_get(base_key)), rep_sh)
    _log(quiet, f"compiling {agent_name} (chunk shape {C}) ...")
    t0 = time.perf_counter()
    example = (jax.ShapeDtypeStruct((C,), jnp.int32, sharding=runs_sh),) * 2
    compiled = prog.lower(*example, key, tables).compile()
    timings["compile_s"][agent_name] = round(time.perf_counter() - t0, 3)
    programs[k] = (compiled, C, runs_sh, key, tables)
  return programs


def _assemble(config, lay, grids, out, mesh, command, timings, quiet, t_start, *, csv):
  """The final files from the chunk files on disk, streamed in layout order (parts, merge)."""
  chash = config_hash(config)
  tables = _Tables(config, lay, grids, out=out, csv=csv, meta=_results_meta(config, lay))
  try:
    for j in range(len(lay.chunks)):
      r = _read_chunk(_chunk_path(out, j), chash, *lay.chunk_runs(j))
      if r is None:
        raise _Error("out", f"chunk file {_chunk_path(out, j)} is missing")
      tables.add(j, r)
  except BaseException:
    tables.abort()
    raise
  return _finish(config, lay, tables, out, mesh, command, timings, quiet, t_start)


def _finish(config, lay, tables, out, mesh, command, timings, quiet, t_start):
  """Closes the streamed tables; writes summary.csv, sweep.png and sweep.json (complete)."""
  import pandas as pd  # pylint: disable=g-import-not-at-top

  t0 = time.perf_counter()
  try:
    tables.close()
  except BaseException:
    tables.abort()
    raise
  summary = tables.summary()
  if out is None:
    df = tables.frame()
    arrays = {k: np.concatenate(v) for k, v in tables.arrays.items()}
    timings["finish_s"] = round(time.perf_counter() - t0, 3)
    timings["total_s"] = round(time.perf_counter() - t_start, 3)
    info = _meta(config, lay, mesh, command, status="complete", timings=timings)
    return SweepResult(df, summary, arrays, info)
  _atomic_write(os.path.join(out, "summary.csv"), summary.to_csv(index=False).encode())
  # The figure needs the table's columns only (setting_columns), not its rows.
  _plot(pd.DataFrame(columns=tables.names), summary, config, os.path.join(out, "sweep.png"))
  timings["finish_s"] = round(time.perf_counter() - t0, 3)
  timings["total_s"] = round(time.perf_counter() - t_start, 3)
  timings["chunk_seconds_total"] = round(tables.chunk_seconds, 3)
  info = _meta(config, lay, mesh, command, status="complete", timings=timings)
  info["outputs"] = [f for f in RESULTS + ("returns.npy",) if os.path.exists(os.path.join(out, f))]
  _atomic_write(os.path.join(out, "sweep.json"), (json.dumps(info, indent=2) + "\n").encode())
  _log(quiet, f"wrote {out}/ ({tables.rows} rows)")
  chash = config_hash(config)
  return SweepResult(None, summary, None, info, out=out,
                     loader=functools.partial(_read_arrays, out, lay, chash))


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


def merge(out: str, *, quiet: bool = True, command: Sequence[str] | None = None,
          csv: bool = False) -> SweepResult:
  """Assembles the final files of a sweep whose chunks were run by parts (``run(part=...)``).

  The chunk files are streamed in order into the results files (as ``run`` does; ``csv`` also
  writes ``results.csv``). Raises ``SweepError`` (on ``out``) if ``out`` holds no sweep, some
  chunks are missing or a chunk file is damaged (naming it); ``SweepInterrupted`` on Ctrl-C
  (nothing is half-written).
  """
  t_start = time.perf_counter()
  meta_path = os.path.join(out, "sweep.json")
  if not os.path.isfile(meta_path):
    raise _Error("out", f"{out!r} holds no sweep.json to merge")
  config = validate(load_config(meta_path))
  env = make_env(config)
  lay = layout(config, env)
  chash = config_hash(config)
  done = _chunks_done(out, lay, chash, range(len(lay.chunks)))
  missing = [j for j in range(len(lay.chunks)) if j not in done]
  if missing:
    raise _Error("out", f"{len(missing)} of {len(lay.chunks)} chunks are not finished yet "
                        f"(first missing: chunk {missing[0]}); run the remaining parts first")
  mesh = _mesh(None)
  prev = _read_json(meta_path).get("timings", {})
  grids = {a: _grid(config, env, a) for a, _ in lay.agents}
  try:
    return _assemble(config, lay, grids, out, mesh, command, {"merged": True, **prev}, quiet,
                     t_start, csv=bool(csv))
  except KeyboardInterrupt:
    raise SweepInterrupted(out, len(lay.chunks), len(lay.chunks)) from None


def load(out: str):
  """``(df, info)``: the results DataFrame of a finished sweep directory and its ``sweep.json``."""
  import pandas as pd  # pylint: disable=g-import-not-at-top
  df = pd.read_parquet(os.path.join(out, "results.parquet"))
  return df, _read_json(os.path.join(out, "sweep.json"))
