"""drjax.sweeps: host work off the critical path, streamed tables (issue 18, item 2).

Chunk ``j`` is written (its file, its rows into the Parquet row groups, the CSV, returns.npy, the
summary's sums) by a host thread while chunk ``j + 1`` computes. With that thread replaced by
``_Serial`` (each chunk's host work done at once, in the main thread) the files must be the same
bytes, for every chunk size and device count. K = 6, 5 seeds x 2 rho; float64 (conftest).
"""

from __future__ import annotations

import inspect
import io
import json
import os
import subprocess
import sys
import threading

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from drjax import _xla
from drjax import sweeps

import sweep_cli  # tests/sweep_cli.py

K = 6
SMALL = dict(env="linear-mdp", agents=("dr-lsvi-ucb", "lsvi-ucb"), seeds=5, episodes=K,
             rho=(0.0, 0.5), rho_at=((0, 3),), targets=("q", 0.0, 1.0, 3), save_returns=True)
FLAGS = ["--env", "linear-mdp", "--agents", "dr-lsvi-ucb", "--seeds", "5", "--episodes", str(K),
         "--rho", "0", "0.5", "--rho-at", "1,4", "--targets", "q=0:1:3", "--x64", "--quiet"]
FILES = ("results.parquet", "results.csv", "summary.csv", "returns.npy", "sweep.png")


def _cfg(**kw):
  return sweeps.SweepConfig(**{**SMALL, **kw})


def _bytes(d, files=FILES):
  return {f: (d / f).read_bytes() for f in files}


_cli = sweep_cli.run  # drjax sweep ARGS in this process: (exit code, stderr)


class _Serial:
  """``drjax.sweeps.running._Pipeline`` without its thread: each chunk's host work at once."""

  def __init__(self):
    self.aborted, self.busy_s, self.wait_s = threading.Event(), 0.0, 0.0

  def put(self, fn, *args):
    fn(*args)

  def close(self):
    pass


def _run(out, overlap, **kw):
  with pytest.MonkeyPatch.context() as mp:
    if not overlap:
      mp.setattr(sweeps.running, "_Pipeline", _Serial)
    return sweeps.run(_cfg(**kw), out=str(out), csv=True)


@pytest.fixture(scope="module")
def written(tmp_path_factory):
  """chunk size -> {overlap: directory} for chunks of 1, 3 and all 10 runs of an agent."""
  base = tmp_path_factory.mktemp("pipeline")
  dirs = {}
  for chunk in (1, 3, None):
    for overlap in (True, False):
      d = base / f"c{chunk}-{'on' if overlap else 'off'}"
      res = _run(d, overlap, chunk=chunk)
      assert res.info["status"] == "complete"
      dirs.setdefault(chunk, {})[overlap] = d
  return dirs


@pytest.mark.parametrize("chunk", [1, 3, None])
def test_files_identical_with_and_without_overlap(written, chunk):
  on, off = written[chunk][True], written[chunk][False]
  assert _bytes(on) == _bytes(off)


def test_files_identical_across_chunk_sizes(written):
  """The data files; results.parquet's metadata records the layout, so its rows are compared."""
  ref = written[None][True]
  for chunk in (1, 3):
    d = written[chunk][True]
    assert _bytes(d, ("results.csv", "summary.csv", "returns.npy", "sweep.png")) == _bytes(
        ref, ("results.csv", "summary.csv", "returns.npy", "sweep.png"))
    assert pq.read_table(d / "results.parquet").equals(pq.read_table(ref / "results.parquet"))


_FOUR_DEVICES = "import threading\n" + inspect.getsource(_Serial) + """
import os, sys
import jax
jax.config.update("jax_enable_x64", True)
from drjax import sweeps
assert len(jax.devices()) == 4
cfg = sweeps.SweepConfig(env="linear-mdp", agents=("dr-lsvi-ucb", "lsvi-ucb"), seeds=5,
                         episodes=6, rho=(0.0, 0.5), rho_at=((0, 3),), targets=("q", 0.0, 1.0, 3),
                         save_returns=True, chunk=3)
for name, overlap in (("on", True), ("off", False)):
  if not overlap:
    sweeps.running._Pipeline = _Serial
  r = sweeps.run(cfg, out=os.path.join(sys.argv[1], name), csv=True)
  assert r.info["devices"]["count"] == 4
"""


def test_four_devices_same_bytes_with_and_without_overlap(written, tmp_path):
  env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
  env.update(XLA_FLAGS=" ".join(("--xla_force_host_platform_device_count=4",)
                                + _xla.flags_for_this_jaxlib()), JAX_PLATFORMS="cpu",
             DRJAX_NO_CACHE="1")
  res = subprocess.run([sys.executable, "-c", _FOUR_DEVICES, str(tmp_path)], env=env,
                       capture_output=True, text=True, timeout=300)
  assert res.returncode == 0, res.stderr[-3000:]
  want = _bytes(written[3][True])
  assert _bytes(tmp_path / "on") == want and _bytes(tmp_path / "off") == want


def test_streamed_tables_equal_the_in_memory_ones(written):
  d = written[3][True]
  mem = sweeps.run(_cfg(chunk=3))
  df, info = sweeps.load(str(d))
  pd.testing.assert_frame_equal(df, mem.df, check_exact=True, check_categorical=False)
  csv = pd.read_csv(d / "results.csv")
  np.testing.assert_array_equal(csv.value.to_numpy(), mem.df.value.to_numpy())
  assert csv.rho.isna().sum() == mem.df.rho.isna().sum() > 0  # LSVI-UCB: empty fields
  # The summary accumulated chunk by chunk is summarize(df), bit for bit.
  pd.testing.assert_frame_equal(mem.summary, sweeps.summarize(mem.df), check_exact=True)
  got = pd.read_csv(d / "summary.csv")
  pd.testing.assert_frame_equal(got, mem.summary.assign(agent=mem.summary.agent.astype(str)),
                                check_exact=True, check_dtype=False)
  # returns.npy is np.save of the per-run training returns in row order.
  buf = io.BytesIO()
  np.save(buf, mem.arrays["returns"])
  assert (d / "returns.npy").read_bytes() == buf.getvalue()
  # A directory's result reads its rows and arrays on demand.
  res = sweeps.run(_cfg(chunk=3), out=str(d))
  assert res.info["timings"]["runs_computed"] == 0
  pd.testing.assert_frame_equal(res.df, df, check_exact=True)
  for k, v in mem.arrays.items():
    np.testing.assert_array_equal(res.arrays[k], v)
  assert info["outputs"] == ["results.parquet", "results.csv", "summary.csv", "sweep.png",
                             "returns.npy"]
  assert set(info["timings"]) >= {"host_busy_s", "host_wait_s", "finish_s", "chunks_s"}


def test_fixed_row_groups_bound_the_memory(tmp_path, monkeypatch):
  """Rows are written in row groups of ROW_GROUP rows whatever the chunking (7 here): chunks of
  1 and of 3 runs (3 or 9 rows, neither a multiple of 7; the chunk sizes of the module's fixture,
  so their programs are reused)."""
  monkeypatch.setattr(sweeps.tables, "ROW_GROUP", 7)  # read where the tables are written
  sizes = {}
  for chunk in (1, 3):
    d = tmp_path / f"c{chunk}"
    sweeps.run(_cfg(chunk=chunk), out=str(d))
    meta = pq.ParquetFile(d / "results.parquet").metadata
    sizes[chunk] = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
  rows = (10 + 5) * 3  # (2 rho x 5 seeds + 5 seeds) x 3 targets
  assert sizes[1] == sizes[3] == [7] * (rows // 7) + [rows % 7]


def test_host_thread_error_is_raised_and_leaves_no_temporary_files(tmp_path, monkeypatch):
  calls = []
  real = sweeps.storage._write_chunk

  def failing(path, *args):
    calls.append(path)
    if len(calls) == 2:
      raise OSError(28, "No space left on device")
    return real(path, *args)

  monkeypatch.setattr(sweeps.storage, "_write_chunk", failing)  # called as storage._write_chunk
  out = tmp_path / "out"
  with pytest.raises(OSError, match="No space left"):
    sweeps.run(_cfg(chunk=3), out=str(out), csv=True)
  assert not [p for p in out.rglob("*") if p.name.startswith(".tmp-")]
  assert not (out / "results.parquet").exists()
  assert json.loads((out / "sweep.json").read_text())["status"] == "running"


def test_csv_with_part_is_refused(tmp_path):
  out = tmp_path / "out"
  code, err = _cli(FLAGS + ["--csv", "--part", "1/2", "--out", str(out)])
  assert code == 2 and len(err.strip().splitlines()) == 1, err
  assert "--csv" in err and "--merge" in err, err
  assert not out.exists()
  with pytest.raises(sweeps.SweepError, match="^csv: "):
    sweeps.run(_cfg(), out=str(out), part=(1, 2), csv=True)
  assert not out.exists()


def test_parquet_is_the_default_output(tmp_path):
  out = tmp_path / "out"
  assert _cli(FLAGS + ["--out", str(out)])[0] == 0
  assert (out / "results.parquet").exists() and not (out / "results.csv").exists()
  assert json.loads((out / "sweep.json").read_text())["outputs"] == [
      "results.parquet", "summary.csv", "sweep.png"]
