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

The package's modules, one job each: ``config`` (``SweepConfig``, ``validate``, what a
configuration names; ``resolve``: the configuration resolved once into the ``ResolvedSweep`` the
other modules read), ``errors``, ``grid`` (settings tables, chunk ``Layout``), ``program`` (the
compiled chunk program), ``running`` (``run``, ``merge``, devices and the chunk loop),
``pipeline`` (the host thread), ``storage`` (chunk files, ``sweep.json``, resume), ``tables``
(streamed results files, ``summarize``), ``figure`` (``sweep.png``) and ``saving``
(``save_policies``, ``--save-policies``). Atomic writes are
``drjax._io``'s, shared with ``drjax reproduce``.
"""

from __future__ import annotations

# The names of the former single module, re-exported (the package's API is unchanged).
# pylint: disable=unused-import
from drjax.sweeps.errors import SweepError, SweepInterrupted, SweepTypeError
from drjax.sweeps.config import (ACCELERATOR_MEMORY_FRACTION, BEHAVIORS, DEFAULT_AGENTS,
                                 DEFAULT_MEMORY_MB, ResolvedSweep, SweepConfig, agent_names,
                                 auto_memory_mb, env_names, make_env, resolve, target_values,
                                 validate)
from drjax.sweeps.grid import Layout, bytes_per_run, layout
from drjax.sweeps.program import ordered_sum
from drjax.sweeps.storage import (CHUNK_DIR, FORMAT, LAYOUT_FIELDS, RESULTS, _write_chunk,
                                  check_out_dir, config_hash, load, load_config, provenance,
                                  stored_layout)
from drjax.sweeps.tables import ROW_GROUP, STATS, setting_columns, summarize
from drjax.sweeps.running import SweepResult, merge, run
from drjax.sweeps.tuning import select_best, tuned_rows
from drjax.sweeps.saving import save_policies

def __getattr__(name):
  """``AGENTS``, ``ENVS``, ``ENV_PARAMS``, ``TARGETS``, ``ENV_ARGS``: the registries now."""
  if name in ("AGENTS", "ENVS", "ENV_PARAMS", "TARGETS", "ENV_ARGS"):
    from drjax.sweeps import config  # pylint: disable=g-import-not-at-top
    return getattr(config, name)
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "AGENTS",
    "ENVS",
    "ENV_PARAMS",
    "TARGETS",
    "ResolvedSweep",
    "SweepConfig",
    "SweepError",
    "SweepInterrupted",
    "SweepResult",
    "SweepTypeError",
    "Layout",
    "load",
    "load_config",
    "merge",
    "resolve",
    "run",
    "save_policies",
    "select_best",
    "summarize",
    "target_values",
    "tuned_rows",
]
