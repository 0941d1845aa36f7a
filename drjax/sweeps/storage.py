"""Storage and resume: chunk files, ``sweep.json``, the output directory's checks, provenance.

Every file is written atomically (``drjax._io``); a chunk file records its sweep's config hash
and its runs, so a rerun skips finished chunks and refuses damaged or foreign ones.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import platform

import jax
import numpy as np

from drjax import _git, _io
from drjax.sweeps.config import (ResolvedSweep, SweepConfig, _identity_hash, _is_int,
                                 policy_file_hashes)
from drjax.sweeps.errors import SweepError, _Error
from drjax.sweeps.grid import Layout

FORMAT = "drjax-sweep/1"
RESULTS = ("results.parquet", "results.csv", "summary.csv", "sweep.png")
CHUNK_DIR = "chunks"
_atomic_write = _io.atomic_write


def _temp_path(out: str, name: str) -> str:
  """A fresh temporary path in ``out`` for ``name``, not yet created (renamed onto it when
  complete; the caller holds the name before the file exists, see ``_io.temp_name``)."""
  return _io.temp_name(out, prefix=f".tmp-{name}-")


def _chunk_path(out: str, j: int) -> str:
  return os.path.join(out, CHUNK_DIR, f"chunk-{j:06d}.npz")


def config_hash(config: SweepConfig) -> str:
  """The sweep's identity in its chunk files and ``sweep.json``.

  A sweep that varies a source parameter is salted with its settings' order: since the
  source-grouped chunks (CHANGELOG) its settings are ordered source parameters slowest, so a
  directory written before, whose chunk files number the settings the other way, is told apart
  (refused with a clear message by ``check_out_dir``, never resumed with mislabelled rows).
  """
  # A behavior around a saved policy: its file's content (policy_file_hashes). A sweep's
  # resolved value holds its hash (ResolvedSweep.hash, the same function).
  return _identity_hash(config.to_dict(), config.env_params, policy_file_hashes(config))


def code_identity(config: SweepConfig) -> dict:
  """The code a sweep runs, the other half of its identity (recorded in ``sweep.json`` as
  ``code``): drjax's version and the source hash of each plugin (``drjax.plugins.source_hash``)."""
  import drjax  # pylint: disable=g-import-not-at-top
  from drjax import plugins  # pylint: disable=g-import-not-at-top
  return {"drjax_version": drjax.__version__,
          "plugins": {spec: plugins.source_hash(spec) for spec in config.plugins}}


def _code_changes(stored: dict, now: dict) -> list:
  """What differs between the code a sweep ran (``stored``) and ``now``, one phrase each."""
  out = []
  if stored.get("drjax_version") != now["drjax_version"]:
    out.append(f"drjax version {stored.get('drjax_version')} -> {now['drjax_version']}")
  old = stored.get("plugins")
  for spec, h in now["plugins"].items():
    if not isinstance(old, dict) or spec not in old:
      out.append(f"plugin {spec} (its source was not recorded)")
    elif old[spec] != h:
      out.append(f"plugin {spec} (source {old[spec]} -> {h})")
  return out


def check_code(out: str, config: SweepConfig, *, allow_code_change: bool = False) -> None:
  """Refuses (``SweepError`` on ``out``, one line naming what changed) to continue or merge the
  sweep held by ``out`` with other code than it ran: another drjax version, or a plugin whose
  source changed. ``allow_code_change``: continue, and record the change in ``sweep.json``
  (``code_changes``: what changed, the code before and after; ``code`` becomes the new code)."""
  path = os.path.join(out, "sweep.json")
  try:
    meta = _read_json(path)
  except (OSError, json.JSONDecodeError, UnicodeDecodeError):
    return  # no sweep here (yet): nothing ran
  stored = meta.get("code")
  if not isinstance(stored, dict):  # written before drjax recorded it: the version it recorded
    prov = meta.get("provenance")
    stored = {"drjax_version": prov.get("drjax_version") if isinstance(prov, dict) else None}
  now = code_identity(config)
  changes = _code_changes(stored, now)
  if not changes:
    return
  if not allow_code_change:
    raise _Error("out", f"{out!r} was run with other code: {'; '.join(changes)}; its results "
                        "would mix both versions: restore the code, start over with --overwrite "
                        "(overwrite=True), or pass --allow-code-change (allow_code_change=True, "
                        "recorded in sweep.json)")
  meta["code_changes"] = list(meta.get("code_changes") or []) + [
      {"changed": changes, "from": stored, "to": now}]
  meta["code"] = now
  _atomic_write(path, (json.dumps(meta, indent=2) + "\n").encode())


def _data_meta(rs: ResolvedSweep) -> dict:
  """``{"data": ...}``: the offline datasets' provenance (``ResolvedSweep.data``), or ``{}`` for a
  sweep without offline agents."""
  return {} if rs.data is None else {"data": rs.data}


def _git_revision() -> dict:
  st = _git.state(untracked=False)
  if st is None:
    return {"git_revision": None, "git_dirty": None}
  return {"git_revision": st[0], "git_dirty": bool(st[1])}


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
  return _stored_layout(out, config, None)


def _stored_layout(out: str, config: SweepConfig, mine: dict | None) -> SweepConfig:
  """``stored_layout`` with ``config.to_dict()`` at hand (``mine``; None: computed here)."""
  if config.chunk is not None:
    return config
  other = _stored_config(out)
  if other is None:
    return config
  mine = config.to_dict() if mine is None else mine
  if any(other.get(k) != mine.get(k) for k in set(mine) | set(other) if k not in LAYOUT_FIELDS):
    return config
  chunk, memory_mb = other.get("chunk"), other.get("memory_mb")
  if (chunk is not None and (not _is_int(chunk) or chunk < 1)) or not (
      isinstance(memory_mb, (int, float)) and memory_mb > 0):
    return config  # a damaged layout: check_out_dir reports the difference
  return dataclasses.replace(config, chunk=chunk, memory_mb=float(memory_mb))


def check_out_dir(out: str, config: SweepConfig, *, overwrite: bool = False,
                  allow_code_change: bool = False) -> bool:
  """Refuses (``SweepError`` on ``out``) a directory holding another sweep, or this sweep run
  with other code (``check_code``; ``allow_code_change``: continue, recorded in ``sweep.json``,
  the only thing written).

  Returns True when ``out`` already holds this very sweep (it will be resumed); False for a new
  directory, or with ``overwrite`` (the sweep held there will be deleted and started over).
  """
  return _check_out_dir(out, config, None, overwrite=overwrite,
                        allow_code_change=allow_code_change)


def _check_out_dir(out: str, config: SweepConfig, rs: ResolvedSweep | None, *,
                   overwrite: bool = False, allow_code_change: bool = False) -> bool:
  """``check_out_dir``, reading ``config``'s dict and hash from its resolved value ``rs`` when
  given (None: computed here)."""
  mine = config.to_dict() if rs is None else rs.config_dict
  if os.path.exists(out) and not os.path.isdir(out):
    raise _Error("out", f"{out!r} exists and is not a directory")
  meta_path = os.path.join(out, "sweep.json")
  if os.path.exists(meta_path):
    if overwrite:
      return False
    other = _stored_config(out)
    if other == mine:
      try:
        stored_hash = _read_json(meta_path).get("config_hash")
      except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        stored_hash = None
      if stored_hash not in (None, config_hash(config) if rs is None else rs.hash):
        raise _Error("out", f"{out!r} holds this sweep written by an earlier drjax, whose "
                            "settings were ordered differently (source parameters now vary "
                            "slowest); its chunks cannot be resumed: use --overwrite "
                            "(overwrite=True) to start it over, or another directory")
      check_code(out, config, allow_code_change=allow_code_change)
      return True
    diff = []
    if isinstance(other, dict):
      diff = sorted(k for k in set(other) | set(mine) if other.get(k) != mine.get(k))
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
  for f in RESULTS + ("sweep.json", "returns.npy", "tuned.csv"):
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


def _results_meta(rs: ResolvedSweep, lay: Layout) -> dict:
  """What ``results.parquet`` carries in its schema metadata (key ``drjax.sweep``)."""
  return {"format": FORMAT, "config": rs.config_dict, "config_hash": rs.hash,
          "provenance": provenance(), "layout": lay.describe(), **_data_meta(rs)}


def _read_arrays(out: str, lay: Layout, chash: str) -> dict:
  """A directory sweep's per-run arrays, concatenated from its chunk files."""
  parts: dict[str, list] = {}
  for j in range(len(lay.chunks)):
    r = _read_chunk(_chunk_path(out, j), chash, *lay.chunk_runs(j))
    if r is None:
      raise _Error("out", f"chunk file {_chunk_path(out, j)} is missing")
    for name in ("train_return", "value", "value_stderr", "returns", "value_greedy",
                 "value_greedy_stderr", "source_value", "source_value_greedy") + tuple(
        k for k in r if k.startswith("record_")):
      if name in r:
        parts.setdefault(name, []).append(r[name])
  return {k: np.concatenate(v) for k, v in parts.items()}


def _chunks_done(out: str, lay: Layout, chash: str, chunks) -> set:
  """The chunks of ``chunks`` finished in ``out`` (a damaged file raises, naming it)."""
  return {j for j in chunks if _read_chunk(_chunk_path(out, j), chash, *lay.chunk_runs(j))
          is not None}


def _meta(rs: ResolvedSweep, lay, mesh, command, *, status, timings) -> dict:
  devs = list(mesh.devices.flat)
  return {"format": FORMAT, "status": status, "config": rs.config_dict,
          "config_hash": rs.hash, "code": code_identity(rs.config),
          "command": list(command) if command is not None else None,
          "provenance": provenance(),
          "devices": {"count": len(devs), "kinds": sorted({d.device_kind for d in devs}),
                      "platform": devs[0].platform, "process_count": jax.process_count(),
                      "xla_flags": os.environ.get("XLA_FLAGS", "")},
          "layout": lay.describe(), "timings": dict(timings), **_data_meta(rs)}


def _kept_meta(out: str) -> dict:
  """What a rewrite of ``out/sweep.json`` keeps from the one there: the code changes allowed so
  far (``check_code``'s ``code_changes``)."""
  try:
    changes = _read_json(os.path.join(out, "sweep.json")).get("code_changes")
  except (OSError, json.JSONDecodeError, UnicodeDecodeError, AttributeError):
    changes = None
  return {"code_changes": changes} if changes else {}


def _write_meta(out, rs, lay, mesh, command, *, status, timings) -> None:
  info = {**_meta(rs, lay, mesh, command, status=status, timings=timings), **_kept_meta(out)}
  _atomic_write(os.path.join(out, "sweep.json"), (json.dumps(info, indent=2) + "\n").encode())


def load(out: str):
  """``(df, info)``: the results DataFrame of a finished sweep directory and its ``sweep.json``."""
  import pandas as pd  # pylint: disable=g-import-not-at-top
  df = pd.read_parquet(os.path.join(out, "results.parquet"))
  return df, _read_json(os.path.join(out, "sweep.json"))
