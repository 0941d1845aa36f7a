"""The grid: every agent's settings (host tables with a leading ``[S]`` axis) and the chunk
``Layout`` (which runs each chunk holds; the chunk size from a memory budget)."""

from __future__ import annotations

import dataclasses
import itertools
import math
from typing import Any, NamedTuple

import jax
import numpy as np

from drjax.agents import registry
from drjax.envs.base import FiniteEnvironment
from drjax.sweeps.config import (ResolvedSweep, SweepConfig, _make_agent, _resolved,  # noqa: F401
                                 make_env, reward_option)  # (re-exported: program, saving)


class _Grid(NamedTuple):
  """The settings of one agent: host tables with a leading ``[S]`` axis.

  Settings are ordered source parameters slowest (then dataset size, rho, regularization weight,
  beta, lambda): the settings that share one source instance (a *group*) are contiguous, and
  ``params`` holds one entry per group (``[G, ...]``; setting ``s`` is in group
  ``s // (S // G)``).
  """

  columns: dict          # name -> [S] numpy column (rho_index, rho, beta, lam, env params)
  rho: np.ndarray        # [S, H, d]
  beta: np.ndarray       # [S]
  lam: np.ndarray        # [S]
  params: Any            # source env params pytree, leaves [G, ...]: one per source group
  size: np.ndarray       # [S] dataset size N of offline settings (0 for online agents)
  reg_weight: np.ndarray  # [S, H, d] regularization weights (1 for agents without one)
  hparams: dict = {}     # name -> [S] values of the agent's ``SweepConfig.hparams`` axes


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


def _extra_axes(config: SweepConfig, spec) -> list[str]:
  """The ``hparams`` axes that apply to the agent of ``spec`` (those it declares)."""
  return [n for n in config.hparams if n in spec.hparams]


def _grid(config: SweepConfig, env, agent_name: str) -> _Grid:
  """The settings of ``agent_name`` in a validated ``config`` (``_settings`` of its resolved
  value; a sweep resolves once and calls ``_settings``)."""
  return _settings(_resolved(config, env), agent_name)


def _settings(rs: ResolvedSweep, agent_name: str) -> _Grid:
  """The settings tables of one agent of a resolved sweep (its axes, the source grid)."""
  config, env = rs.config, rs.env
  H, d = env.horizon, env.feature_dim
  spec = rs.specs[agent_name]
  extra = _extra_axes(config, spec)
  rho_ids = list(range(len(config.rho))) if spec.robust else [-1]
  sizes = list(config.trajectories) if spec.kind == "offline" else [0]
  regs = list(config.reg_weight) if "reg_weight" in spec.hparams else [np.nan]
  names = list(rs.source_names)
  # Source parameters vary slowest: the runs of one source instance are contiguous, so a chunk
  # never mixes instances (the chunk program builds the instance's model once, unbatched).
  envs = list(rs.sources)
  # Each row: (size, rho index, reg weight, beta, lambda, *extra axes, *source params).
  axes = [config.hparams[n] for n in extra]
  betas, lams = rs.axes[agent_name]["beta"], rs.axes[agent_name]["lam"]
  rows = [(*rest, *e) for e in envs
          for rest in itertools.product(sizes, rho_ids, regs, betas, lams, *axes)]
  ne = len(extra)
  scalar_rho = all(np.ndim(r) == 0 for r in config.rho)
  cols = {"rho_index": np.array([r[1] for r in rows], np.int64),
          "rho": np.array([float(config.rho[r[1]]) if (r[1] >= 0 and scalar_rho) else np.nan
                           for r in rows], np.float64)}
  if any("reg_weight" in s.hparams for s in rs.specs.values()):
    cols["reg_weight"] = np.array([r[2] for r in rows], np.float64)
  cols["beta"] = np.array([r[3] for r in rows], np.float64)
  cols["lam"] = np.array([r[4] for r in rows], np.float64)
  for name in config.hparams:  # a column per axis; NaN for agents that do not declare it
    k = extra.index(name) if name in extra else None
    cols[name] = np.array([r[5 + k] if k is not None else np.nan for r in rows], np.float64)
  if rs.offline:
    cols["trajectories"] = np.array([r[0] if r[0] else np.nan for r in rows], np.float64)
  params = rs.source_params
  # Setting columns hold the values as typed (float64), not the params the computation uses
  # (rounded to its dtype): the swept values, else the environment's defaults.
  defaults = rs.source_defaults
  for field in rs.source_columns:
    vals = [dict(zip(names, r[5 + ne:])).get(field, defaults.get(field, 0)) for r in rows]
    cols[field] = np.array(vals, np.int64 if rs.sampled else np.float64)
  rho = np.stack([_rho_array(config, H, d, config.rho[r[1]]) if r[1] >= 0 else np.zeros((H, d))
                  for r in rows])
  reg = np.stack([np.full((H, d), 1.0 if np.isnan(r[2]) else r[2]) for r in rows])
  stacked = jax.tree_util.tree_map(lambda *x: np.stack([np.asarray(v) for v in x]), *params)
  return _Grid(cols, rho, cols["beta"], cols["lam"], stacked,
               np.array([r[0] for r in rows], np.int32), reg,
               {n: cols[n] for n in extra})


@dataclasses.dataclass(frozen=True)
class Layout:
  """Which runs each chunk holds: per agent, runs ``(setting, seed)`` setting-major.

  For a *grouped* agent a chunk never mixes source groups (settings with different source
  parameters; see ``_Grid``): every chunk's runs train on one source instance, built once per
  chunk. An agent whose source groups are small (fewer than ``GROUP_MIN_RUNS`` runs each, counted
  with the config's ``seeds``, so a rerun of chosen seeds computes the same way) is not grouped:
  its chunks run across groups, each run taking its own instance's params.

  Attributes:
    chunk: runs per chunk (the compiled chunk shape, before padding to the device count).
    agents: per agent ``(name, num_settings)``.
    seed_ids: the seed indices run, ascending.
    chunks: global list of ``(agent_index, first_run, num_runs)``.
    groups: the number of source groups (swept source-parameter combinations; 1 when none).
    grouped: per agent, whether its chunks are cut at source-group boundaries.
    rewards: per agent ``(name, reward source)`` (``ResolvedSweep.rewards``): ``"regressed"`` where the
      environment's reward is unknown (``env.reward_known`` False) or the agent's default is.
    widths: per agent ``(name, width)`` (``ResolvedSweep.widths``): the bonus / penalty width it ran.
  """

  chunk: int
  agents: tuple
  seed_ids: tuple
  chunks: tuple
  groups: int = 1
  grouped: tuple = ()
  rewards: tuple = ()
  widths: tuple = ()

  def runs(self, agent_index: int) -> int:
    return self.agents[agent_index][1] * len(self.seed_ids)

  def group_runs(self, agent_index: int) -> int:
    """Runs of one source group of agent ``agent_index`` (its settings per group x seeds)."""
    return self.runs(agent_index) // self.groups

  def chunk_group(self, j: int) -> int:
    """The source group of chunk ``j``'s runs (0 for an agent that is not grouped)."""
    k, first, _ = self.chunks[j]
    return first // self.group_runs(k) if self.grouped[k] else 0

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
            "seeds_run": len(self.seed_ids), "source_groups": self.groups,
            "grouped": {a: g for (a, _), g in zip(self.agents, self.grouped)},
            "reward": dict(self.rewards), "width": dict(self.widths)}


def bytes_per_run(config: SweepConfig, env) -> int:
  """Rough peak bytes of one run inside a chunk (buffers, planning temporaries, evaluation).

  Calibrated on the linear MDP and the put option (see README, "Sweeps"): about four copies of
  the agent's buffers (scan carry, planning temporaries) plus the evaluation's per-target work,
  plus two ``[H, d, d]`` matrices (the Gram matrices and ``Lambda^-1``), which dominate for
  large d: the put option's compiled chunk program measured 19.0 MiB per run at K = 20, H = 10,
  d = 641 (this estimate: 38.2 MiB; without the matrices it was 6.9 MiB, an underestimate), and
  0.30 MiB at K = 100, H = 10, d = 21 (estimate 1.08 MiB; ``benchmarks/buffer_scaling.py``,
  docs/engine.md).
  """
  return _bytes_per_run(config, env, _has_offline(config))


def _bytes_per_run(config: SweepConfig, env, offline: bool) -> int:
  """``bytes_per_run``, whether an agent is offline given."""
  H, d, A, K = env.horizon, env.feature_dim, env.num_actions, config.episodes
  item = 8 if config.dtype == "float64" else 4
  buffers = H * K * (A * d + d + 3)
  matrices = 2 * H * d * d  # gram and Lambda^-1 (the Sherman-Morrison state, the plan's inverse)
  if offline:  # dataset + pilot + the alpha maximization's sorted prefix sums
    buffers = max(buffers, H * max(config.trajectories) * (A * d + 3 * d + 8) * 2)
  T = config.targets[3] if config.targets else 1
  if isinstance(env, FiniteEnvironment):
    S = getattr(env, "num_states", 8)
    ev = T * H * S * A * (d + 2) * 2
  else:
    ev = T * config.test_episodes * (A * d + 8) * 2
  rec = H * K * 4 if getattr(config, "record", ()) else 0  # the recorded per-step outputs
  return int(item * (4 * buffers + matrices + ev + rec) + 4096)


# Source groups of fewer runs than this (settings per group x seeds) are not given chunks of
# their own: on amd-epyc-2c a chunk costs about 1.5 ms more than its runs, and runs that gather
# their own instance's params cost 0.05 (random DRMDP) to 0.2 ms (linear MDP) against 0.04-0.06
# ms in a grouped chunk, so below ~100 runs per group many small chunks cost more.
GROUP_MIN_RUNS = 128


def layout(config: SweepConfig, env=None) -> Layout:
  """The chunk layout of a validated config (a function of the config only)."""
  return _layout(_resolved(config, env or make_env(config)))


def _layout(rs: ResolvedSweep) -> Layout:
  """``layout`` of a resolved sweep."""
  config, env = rs.config, rs.env
  nsettings = []
  groups = math.prod(len(v) for v in config.env_params.values())
  for a in config.agents:
    n = len(rs.axes[a]["beta"]) * len(rs.axes[a]["lam"]) * groups
    spec = rs.specs[a]
    n *= len(config.trajectories) if spec.kind == "offline" else 1
    n *= len(config.reg_weight) if "reg_weight" in spec.hparams else 1
    n *= math.prod(len(config.hparams[x]) for x in _extra_axes(config, spec))
    nsettings.append((a, n * (len(config.rho) if spec.robust else 1)))
  seed_ids = config.seed_ids if config.seed_ids is not None else tuple(range(config.seeds))
  grouped = tuple(groups == 1 or s // groups * config.seeds >= GROUP_MIN_RUNS
                  for _, s in nsettings)
  max_runs = max(s * len(seed_ids) // (groups if g else 1)  # of one chunk's span
                 for (_, s), g in zip(nsettings, grouped))
  if config.chunk is not None:
    chunk = config.chunk  # the compiled shape, even for fewer runs (one program per chunk size)
  else:
    chunk = min(max(1, int(config.memory_mb * 2**20 // _bytes_per_run(config, env, rs.offline))),
                max_runs)
  chunks = []
  for k, (_, s) in enumerate(nsettings):
    spans = groups if grouped[k] else 1  # grouped: chunks cut at source-group boundaries
    per_span = s * len(seed_ids) // spans
    for g in range(spans):
      end = (g + 1) * per_span
      for first in range(g * per_span, end, chunk):
        chunks.append((k, first, min(chunk, end - first)))
  return Layout(chunk, tuple(nsettings), tuple(seed_ids), tuple(chunks), groups, grouped,
                rs.rewards, rs.widths)
