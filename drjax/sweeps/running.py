"""Running and sharding: ``run`` (whole sweeps and parts), ``merge``, the device mesh, the chunk
loop with one chunk in flight while the host thread writes the previous one, and the final files.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import time
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from drjax._opt_level import compiler_options, opt_level_for
from drjax.envs.base import FiniteEnvironment
from drjax.sweeps import storage
from drjax.sweeps.config import SweepConfig, _is_int, resolve
from drjax.sweeps.errors import SweepInterrupted, _Error
from drjax.sweeps.figure import _plot
from drjax.sweeps.grid import _layout, _settings
from drjax.sweeps.pipeline import _Pipeline
from drjax.sweeps.program import _check_features, _program
from drjax.sweeps.storage import (CHUNK_DIR, RESULTS, _atomic_write, _check_out_dir, _chunk_path,
                                  _chunks_done, _clear, _kept_meta, _meta, _read_arrays,
                                  _read_chunk, _read_json, _results_meta, _stored_layout,
                                  _write_meta, check_code, load_config)
from drjax.sweeps.tables import _Tables


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
    info: the ``sweep.json`` content (config, provenance, devices, layout, timings; with
      ``config.tune``, ``tuning``: the grid, the policy and the selected settings).
    tuned: with ``config.tune``, the summary rows of the selected settings (``tuned.csv``;
      ``drjax.sweeps.tuning``), else None.
  """

  def __init__(self, df, summary, arrays, info, *, out: str | None = None, loader=None):
    self._df, self.summary, self._arrays, self.info = df, summary, arrays, info
    self.tuned = None  # SweepConfig.tune: the selected settings' summary rows (tuned.csv)
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


def _warm_imports(csv: bool) -> None:
  """Imports what the end of a sweep needs, in the host thread while the chunks compute."""
  import pandas  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import
  import pyarrow.parquet  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import
  from matplotlib.backends import backend_agg  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import
  from matplotlib import figure  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import
  if csv:
    import pyarrow.csv  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import


def run(config: SweepConfig, *, out: str | None = None, devices: int | None = None,
        part: tuple[int, int] | None = None, overwrite: bool = False, quiet: bool = True,
        command: Sequence[str] | None = None, csv: bool = False,
        allow_code_change: bool = False) -> SweepResult:
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
    allow_code_change: resume a sweep in ``out`` that ran with other code (another drjax
      version, a plugin whose source changed), recorded in ``sweep.json`` (``code_changes``);
      without it, that is a ``SweepError`` naming what changed (``storage.check_code``).

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

  The configuration is resolved once (``config.resolve``: validated, its environment built, its
  agents and grid looked up) into the ``ResolvedSweep`` that everything below reads.
  """
  t_start = time.perf_counter()
  rs = resolve(config)
  config = rs.config
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
    stored = _stored_layout(out, config, rs.config_dict)
    if stored is not config and not overwrite:
      rs = rs.with_layout(stored)
      config = stored
      _log(quiet, f"resuming {out} with its stored layout (chunk {config.chunk}, memory_mb "
                  f"{config.memory_mb:g})")
    resuming = _check_out_dir(out, config, rs, overwrite=overwrite,
                              allow_code_change=allow_code_change)
  lay = _layout(rs)
  chash = rs.hash
  todo = list(range(len(lay.chunks))) if part is None else lay.part(*part)
  done: set = set()
  if out is not None and not overwrite:
    # Before anything is written: a damaged chunk file is an error naming it (nothing lost).
    done = _chunks_done(out, lay, chash, todo)
  try:
    return _run(rs, lay, chash, todo, done, out=out, mesh=mesh, part=part,
                overwrite=overwrite, resuming=resuming, quiet=quiet, command=command,
                t_start=t_start, csv=bool(csv))
  except KeyboardInterrupt:
    saved = 0
    if out is not None:
      saved = sum(os.path.exists(_chunk_path(out, j)) for j in range(len(lay.chunks)))
    raise SweepInterrupted(out, saved, len(lay.chunks), part) from None


def _run(rs, lay, chash, todo, done, *, out, mesh, part, overwrite, resuming, quiet,
         command, t_start, csv):
  config, env = rs.config, rs.env
  ndev = mesh.devices.size
  writer = jax.process_index() == 0
  # Host-side feature checks (negative features raise) once per source instance.
  grids = {a: _settings(rs, a) for a, _ in lay.agents}
  _check_features(env, jax.tree_util.tree_map(lambda x: x[0], grids[lay.agents[0][0]].params))
  if out is not None and writer:
    if overwrite:
      _clear(out)
    os.makedirs(os.path.join(out, CHUNK_DIR), exist_ok=True)
    if not resuming:
      _write_meta(out, rs, lay, mesh, command, status="running", timings={})
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
    sink["tables"] = _Tables(rs, lay, grids, out=out, csv=csv,
                             meta=_results_meta(rs, lay) if out is not None else None)

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

  def host_work(j, setting, seed, res, secs):
    """Chunk ``j``'s host work (in the host thread): its file, then its rows."""
    if out is not None and writer:
      storage._write_chunk(_chunk_path(out, j), chash, j, setting, seed, res, secs)
    if stream and not pipe.aborted.is_set():
      ready[j] = {**res, "seconds": secs}
      advance()

  timings = {"compile_s": {}, "chunks_s": 0.0, "runs_computed": 0}
  bar = None
  try:
    if stream:
      pipe.put(open_sink)
      pipe.put(advance)  # chunks finished before, while the programs compile
    programs = _compile(rs, lay, grids, pending, mesh, timings, quiet)

    def launch(j):
      compiled, C, runs_sh, rep_sh, key, tables = programs[lay.chunks[j][0]]
      setting, seed = lay.chunk_runs(j)
      pad = C - len(seed)
      s_in = np.concatenate([seed, np.zeros(pad, np.int64)]).astype(np.int32)
      g_in = np.concatenate([setting, np.zeros(pad, np.int64)]).astype(np.int32)
      group = _put(np.asarray(lay.chunk_group(j), np.int32), rep_sh)
      return (j, compiled(_put(s_in, runs_sh), _put(g_in, runs_sh), group, key, tables), setting,
              seed)

    bar = _progress(total_runs, runs_before, quiet, "sweep")
    # One chunk in flight on the devices while the previous one is fetched here and written by
    # the host thread (asynchronous dispatch).
    inflight = None
    finished = len(done & set(todo))
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
        pipe.put(host_work, j, setting, seed, res, secs)
        finished += 1
        if bar is not None:
          bar.update(n)
          bar.set_postfix_str(f"chunks {finished}/{len(todo)}")
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
      return _finish(rs, lay, tables, out, mesh, command, timings, quiet, t_start)
    tables.abort()  # cannot happen for a whole sweep (every chunk is done or computed)
  timings["total_s"] = round(time.perf_counter() - t_start, 3)
  if out is None or not writer:  # a non-writing process of a multi-process sweep
    return SweepResult(None, None, {}, _meta(rs, lay, mesh, command, status="worker",
                                             timings=timings))
  # A part: the sweep is complete if the other parts have finished meanwhile.
  rest = [j for j in range(len(lay.chunks)) if j not in set(todo)]
  if len(_chunks_done(out, lay, chash, rest)) == len(rest):
    return _assemble(rs, lay, grids, out, mesh, command, timings, quiet, t_start, csv=False)
  info = _meta(rs, lay, mesh, command, status=f"part {part[0]}/{part[1]} done",
               timings=timings)
  _log(quiet, f"part {part[0]}/{part[1]} done; run `drjax sweep --merge --out {out}` when "
              "every part has finished")
  return SweepResult(None, None, {}, info)


def _record_rho(config, env, grid) -> np.ndarray:
  """``[S, H, d]`` the rho at which ``record=("ave_subopt",)`` measures each setting: its own
  (robust agents) or the config's single rho (nominal agents, whose rows hold zeros)."""
  if "ave_subopt" not in config.record or np.any(grid.columns["rho_index"] >= 0):
    return grid.rho
  from drjax.sweeps.grid import _rho_array  # pylint: disable=g-import-not-at-top
  one = _rho_array(config, env.horizon, env.feature_dim, config.rho[0])
  return np.broadcast_to(one, grid.rho.shape).copy()


def _host_key(seed: int) -> np.ndarray:
  """``jax.random.PRNGKey(seed)`` as a host array, without an eager dispatch (two small
  compilations in a fresh process) for JAX's default threefry keys: ``[0, seed]``."""
  if jax.config.jax_default_prng_impl == "threefry2x32" and 0 <= seed < 2**31:
    return np.array([0, seed], np.uint32)
  return np.asarray(jax.device_get(jax.random.PRNGKey(seed)))


# The buffer form's put option at -O0 runs its unvectorized code ~5x slower than at -O1 (4 seeds x
# 50 episodes: compile 0.8 / 2.0 / 11.7 CPU s at -O0 / -O1 / -O3, run 0.07 / 0.015 / 0.014 s):
# -O0 only up to this many run-episodes, then -O1 (as drjax reproduce's put-option program).
BUFFER_O0_MAX_WORK = 2_000


def _plan_blocks(config, env, agent, runs: int) -> int | None:
  """``make_train``'s ``blocks`` for an agent's chunk program, from the sweep's size alone: ``0``
  (one plan over the whole capacity) for a buffer-form sweep small enough to compile at -O0
  (runs x episodes up to ``BUFFER_O0_MAX_WORK``), where compiling is the wait: 4 seeds x 50
  put-option episodes compiled in 0.9-1.2 CPU s with one plan and 1.7-1.8 s with four, and ran
  in 0.09 s either way. Else ``None``: ``make_train``'s default (the filled slots)."""
  if (agent.kind == "online" and not isinstance(env, FiniteEnvironment)
      and runs * config.episodes <= BUFFER_O0_MAX_WORK):
    return 0
  return None


def _opt_level(config, env, agent, runs: int) -> int | None:
  """The XLA optimization level of an agent's chunk program, from the sweep's size alone (the
  same for every chunk, part and resumed run): ``drjax._opt_level.opt_level_for("auto", work)``
  with work = runs x episodes (online) or runs x the largest dataset (offline)."""
  if agent.kind == "online":
    work = runs * config.episodes
  elif agent.kind == "offline":
    work = runs * max(config.trajectories)
  else:
    work = runs
  small = 0
  if agent.kind == "online" and not isinstance(env, FiniteEnvironment):
    small = 0 if work <= BUFFER_O0_MAX_WORK else 1
  return opt_level_for("auto", work, small)


def _compile(rs, lay, grids, pending, mesh, timings, quiet) -> dict:
  """One compiled chunk program per agent with pending chunks (all its chunks share one shape)."""
  config, env = rs.config, rs.env
  ndev = mesh.devices.size
  base_key = _host_key(config.seed)
  targets = rs.targets if rs.targets is not None else np.zeros((1,))
  dtype = jnp.dtype(config.dtype)
  programs = {}
  for k in sorted({lay.chunks[j][0] for j in pending}):
    agent_name = lay.agents[k][0]
    agent = rs.agents[agent_name]
    grid = grids[agent_name]
    span = lay.group_runs(k) if lay.grouped[k] else lay.runs(k)
    C = lay.chunk if config.chunk is not None else min(lay.chunk, span)
    # Padded to a multiple of the device count, and to at least 2 runs per device: XLA compiles
    # a batch of one differently (size-1 dimensions folded away), and its float32 numbers
    # differed in the last bit from every other batch size's.
    C = max(-(-C // ndev), 2) * ndev
    offline = agent.kind == "offline"
    prog, runs_sh, rep_sh = _program(env, agent, config.episodes,
                                     rs.target_mode,
                                     config.test_episodes, config.save_returns, mesh, C,
                                     rs.behavior if offline else None,
                                     max(config.trajectories) if offline else 0,
                                     0 if lay.grouped[k] else lay.agents[k][1] // lay.groups,
                                     tuple(config.record), tuple(config.record_at or ()),
                                     tuple(config.eval_modes or ("played",)),
                                     bool(config.tune) and config.targets is not None,
                                     _plan_blocks(config, env, agent, lay.runs(k)))
    params = grid.params  # [G, ...]: one per source group; a chunk uses its group's
    tables = {"rho": grid.rho.astype(dtype), "beta": grid.beta.astype(dtype),
              "lam": grid.lam.astype(dtype), "targets": targets.astype(dtype),
              "size": grid.size, "reg_weight": grid.reg_weight.astype(dtype),
              "hparams": {n: v.astype(dtype) for n, v in grid.hparams.items()},
              "record_rho": _record_rho(config, env, grid).astype(dtype),
              "params": jax.tree_util.tree_map(
                  lambda x: x.astype(dtype) if np.issubdtype(x.dtype, np.floating) else x,
                  params)}
    tables = jax.tree_util.tree_map(lambda x: _put(x, rep_sh), tables)
    key = _put(base_key, rep_sh)
    _log(quiet, f"compiling {agent_name} (chunk shape {C}) ...")
    t0 = time.perf_counter()
    example = (jax.ShapeDtypeStruct((C,), jnp.int32, sharding=runs_sh),) * 2 + (
        jax.ShapeDtypeStruct((), jnp.int32, sharding=rep_sh),)
    # XLA's default level (LLVM -O3) for large sweeps: -O2 gave the same bits and 25 % less
    # compile time, but its chunks ran 39 % slower (0.70 vs 0.50 s for 4,000 runs, amd-epyc-2c).
    # Small sweeps compile at -O0 (_opt_level): 4 seeds x 50 episodes of the linear MDP, 4.9 ->
    # 1.0 CPU s of XLA for a run 3 ms either way.
    compiled = prog.lower(*example, key, tables).compile(
        compiler_options(_opt_level(config, env, agent, lay.runs(k))))
    timings["compile_s"][agent_name] = round(time.perf_counter() - t0, 3)
    programs[k] = (compiled, C, runs_sh, rep_sh, key, tables)
  return programs


def _assemble(rs, lay, grids, out, mesh, command, timings, quiet, t_start, *, csv):
  """The final files from the chunk files on disk, streamed in layout order (parts, merge)."""
  chash = rs.hash
  tables = _Tables(rs, lay, grids, out=out, csv=csv, meta=_results_meta(rs, lay))
  try:
    for j in range(len(lay.chunks)):
      r = _read_chunk(_chunk_path(out, j), chash, *lay.chunk_runs(j))
      if r is None:
        raise _Error("out", f"chunk file {_chunk_path(out, j)} is missing")
      tables.add(j, r)
  except BaseException:
    tables.abort()
    raise
  return _finish(rs, lay, tables, out, mesh, command, timings, quiet, t_start)


def _finish(rs, lay, tables, out, mesh, command, timings, quiet, t_start):
  """Closes the streamed tables; writes summary.csv, sweep.png and sweep.json (complete)."""
  import pandas as pd  # pylint: disable=g-import-not-at-top

  config = rs.config
  t0 = time.perf_counter()
  try:
    tables.close()
  except BaseException:
    tables.abort()
    raise
  summary = tables.summary()
  tuning = tuned = None
  if config.tune:  # the source-only tuning protocol (drjax.sweeps.tuning)
    from drjax.sweeps import tuning as tuning_lib  # pylint: disable=g-import-not-at-top
    tuning, tuned = tuning_lib.record(config, summary, resolved=rs)
  if out is None:
    df = tables.frame()
    arrays = {k: np.concatenate(v) for k, v in tables.arrays.items()}
    timings["finish_s"] = round(time.perf_counter() - t0, 3)
    timings["total_s"] = round(time.perf_counter() - t_start, 3)
    info = _meta(rs, lay, mesh, command, status="complete", timings=timings)
    if tuning is not None:
      info["tuning"] = tuning
    res = SweepResult(df, summary, arrays, info)
    res.tuned = tuned
    return res
  _atomic_write(os.path.join(out, "summary.csv"), summary.to_csv(index=False).encode())
  if tuned is not None:
    _atomic_write(os.path.join(out, "tuned.csv"), tuned.to_csv(index=False).encode())
  # The figure needs the table's columns only (setting_columns), not its rows.
  _plot(pd.DataFrame(columns=tables.names), summary, config, os.path.join(out, "sweep.png"),
        kinds={a: s.kind for a, s in rs.specs.items()})
  timings["finish_s"] = round(time.perf_counter() - t0, 3)
  timings["total_s"] = round(time.perf_counter() - t_start, 3)
  timings["chunk_seconds_total"] = round(tables.chunk_seconds, 3)
  info = {**_meta(rs, lay, mesh, command, status="complete", timings=timings),
          **_kept_meta(out)}
  if tuning is not None:
    info["tuning"] = tuning
  info["outputs"] = [f for f in RESULTS + ("returns.npy", "tuned.csv")
                     if os.path.exists(os.path.join(out, f))]
  _atomic_write(os.path.join(out, "sweep.json"), (json.dumps(info, indent=2) + "\n").encode())
  _log(quiet, f"wrote {out}/ ({tables.rows} rows)")
  chash = rs.hash
  res = SweepResult(None, summary, None, info, out=out,
                    loader=functools.partial(_read_arrays, out, lay, chash))
  res.tuned = tuned
  return res


def merge(out: str, *, quiet: bool = True, command: Sequence[str] | None = None,
          csv: bool = False, allow_code_change: bool = False) -> SweepResult:
  """Assembles the final files of a sweep whose chunks were run by parts (``run(part=...)``).

  Code other than the sweep ran (another drjax version, a changed plugin source) is a
  ``SweepError`` naming it, unless ``allow_code_change`` (recorded in ``sweep.json``).

  The chunk files are streamed in order into the results files (as ``run`` does; ``csv`` also
  writes ``results.csv``). Raises ``SweepError`` (on ``out``) if ``out`` holds no sweep, some
  chunks are missing or a chunk file is damaged (naming it); ``SweepInterrupted`` on Ctrl-C
  (nothing is half-written).
  """
  t_start = time.perf_counter()
  meta_path = os.path.join(out, "sweep.json")
  if not os.path.isfile(meta_path):
    raise _Error("out", f"{out!r} holds no sweep.json to merge")
  rs = resolve(load_config(meta_path))
  check_code(out, rs.config, allow_code_change=allow_code_change)
  lay = _layout(rs)
  chash = rs.hash
  done = _chunks_done(out, lay, chash, range(len(lay.chunks)))
  missing = [j for j in range(len(lay.chunks)) if j not in done]
  if missing:
    raise _Error("out", f"{len(missing)} of {len(lay.chunks)} chunks are not finished yet "
                        f"(first missing: chunk {missing[0]}); run the remaining parts first")
  mesh = _mesh(None)
  prev = _read_json(meta_path).get("timings", {})
  grids = {a: _settings(rs, a) for a, _ in lay.agents}
  try:
    return _assemble(rs, lay, grids, out, mesh, command, {"merged": True, **prev}, quiet,
                     t_start, csv=bool(csv))
  except KeyboardInterrupt:
    raise SweepInterrupted(out, len(lay.chunks), len(lay.chunks)) from None
