"""Tables: the tidy rows streamed into ``results.parquet`` (and ``results.csv``), ``returns.npy``
and the summary (``summarize``: mean, standard error and count, accumulated chunk by chunk)."""

from __future__ import annotations

import os

import numpy as np

from drjax import _io
from drjax.sweeps.config import ResolvedSweep, SweepConfig, _canonical
from drjax.sweeps.grid import Layout
from drjax.sweeps.storage import _temp_path


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
# Also summarized when the table has it (``SweepConfig.tune`` with targets): each policy's value
# in the source, what the tuning protocol selects by.
SOURCE_STAT = "source_value"


def policy_modes(config: SweepConfig, agent: str) -> tuple:
  """The policies evaluated for ``agent``'s runs (the ``policy`` column's values): the
  config's ``eval_modes`` for an online agent, ``("played",)`` for the others (one policy)."""
  from drjax.agents import registry  # pylint: disable=g-import-not-at-top
  return _policy_modes(config, registry.get(agent).kind)


def _policy_modes(config: SweepConfig, kind: str) -> tuple:
  """``policy_modes`` of an agent of ``kind``."""
  modes = tuple(config.eval_modes or ("played",))
  return modes if kind == "online" else ("played",)


def has_policy_column(config: SweepConfig) -> bool:
  """Whether the tables have a ``policy`` column (the modes are more than ``("played",)``)."""
  return tuple(config.eval_modes or ("played",)) != ("played",)


def has_source_column(config: SweepConfig) -> bool:
  """Whether the tables have a ``source_value`` column (tuning with targets: without targets
  ``value`` is the source value)."""
  return bool(getattr(config, "tune", None)) and config.targets is not None


def _summary_frame(head: dict, stats: dict):
  """The summary DataFrame: key columns ``head`` then ``<metric>_{mean,stderr,count}``."""
  import pandas as pd  # pylint: disable=g-import-not-at-top

  cols = dict(head)
  for m in STATS + ((SOURCE_STAT,) if SOURCE_STAT in stats else ()):
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
  for m in STATS + ((SOURCE_STAT,) if SOURCE_STAT in df.columns else ()):
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

  def __init__(self, rs: ResolvedSweep, lay: Layout, grids: dict, *, out: str | None = None,
               csv: bool = False, meta: dict | None = None):
    import pyarrow as pa  # pylint: disable=g-import-not-at-top

    config = rs.config
    self.pa = pa
    self.config, self.lay, self.out = config, lay, out
    self.T = config.targets[3] if config.targets else 1
    self.target = (f"target_{config.targets[0]}", rs.targets) if config.targets else None
    self.columns = [grids[a].columns for a, _ in lay.agents]
    self.dictionary = pa.array(list(config.agents), pa.string())
    # Policies (SweepConfig.eval_modes): per agent, the modes of its rows (run, policy, target).
    self.policy = has_policy_column(config)
    self.modes = [_policy_modes(config, rs.specs[a].kind) for a, _ in lay.agents]
    self.all_modes = list(config.eval_modes or ("played",))
    self.mode_dictionary = pa.array(self.all_modes, pa.string())
    self.source = has_source_column(config)
    self.metrics = STATS + ((SOURCE_STAT,) if self.source else ())
    self.stats = [{m: _Stats(s, len(pm) * (self.T if m == "value" else 1) if m != "train_return"
                             else 1) for m in self.metrics}
                  for (_, s), pm in zip(lay.agents, self.modes)]
    self.next = 0
    self.rows = 0
    self.runs = 0
    self.chunk_seconds = 0.0
    dtype = np.dtype(config.dtype)
    fields = [("agent", pa.dictionary(pa.int8(), pa.string())), ("setting", pa.int64()),
              ("seed", pa.int64())]
    fields += [(c, pa.from_numpy_dtype(v.dtype)) for c, v in self.columns[0].items()]
    if self.policy:
      fields.append(("policy", pa.dictionary(pa.int8(), pa.string())))
    if self.target:
      fields.append((self.target[0], pa.float64()))
    fields += [(c, pa.from_numpy_dtype(dtype)) for c in ("train_return", "value",
                                                         "value_stderr")]
    if self.source:
      fields.append((SOURCE_STAT, pa.from_numpy_dtype(dtype)))
    self.record = rs.record_columns  # per-run study columns (SweepConfig.record)
    fields += [(c, pa.int64() if c.split("@")[0] in ("switches", "dual_calls")
                else pa.from_numpy_dtype(dtype)) for c in self.record]
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
    modes = self.modes[k]
    P = len(modes)
    sfx = lambda m: "" if m == "played" else "_" + m  # noqa: E731
    tr = np.asarray(res["train_return"])[:n]
    # [n, P, T]: rows are run-major, then policy, then target.
    value = np.stack([np.asarray(res["value" + sfx(m)])[:n].reshape(n, T) for m in modes], 1)
    stderr = np.stack([np.asarray(res["value" + sfx(m) + "_stderr"])[:n].reshape(n, T)
                       for m in modes], 1)
    R = P * T  # rows per run
    rows = np.repeat(setting, R)
    arrays = [pa.DictionaryArray.from_arrays(pa.array(np.full(n * R, k, np.int8)),
                                             self.dictionary),
              pa.array(rows), pa.array(np.repeat(seed, R))]
    arrays += [pa.array(col[rows], from_pandas=True) for col in self.columns[k].values()]
    if self.policy:
      ids = np.array([self.all_modes.index(m) for m in modes], np.int8)
      arrays.append(pa.DictionaryArray.from_arrays(pa.array(np.tile(np.repeat(ids, T), n)),
                                                   self.mode_dictionary))
    if self.target:
      arrays.append(pa.array(np.tile(self.target[1], n * P)))
    arrays += [pa.array(np.repeat(tr, R), from_pandas=True),
               pa.array(value.reshape(-1), from_pandas=True),
               pa.array(stderr.reshape(-1), from_pandas=True)]
    if self.source:
      src = np.stack([np.asarray(res[SOURCE_STAT + sfx(m)])[:n] for m in modes], 1)  # [n, P]
      arrays.append(pa.array(np.repeat(src.reshape(-1), T), from_pandas=True))
    nat = len(self.config.record_at or ())
    for i, c in enumerate(self.record):  # columns name-major, checkpoint-minor
      x = np.asarray(res["record_" + self.config.record[i // nat]])[:n, i % nat]
      arrays.append(pa.array(np.repeat(x.astype(np.int64) if x.dtype.kind in "iu" else x, R),
                             from_pandas=True))
    self._emit(pa.RecordBatch.from_arrays(arrays, schema=self.schema.remove_metadata()))
    # Summary: the chunk's runs are setting-major, so each setting is one block of rows.
    cuts = np.flatnonzero(np.diff(setting)) + 1
    for a, b in zip(np.concatenate([[0], cuts]), np.concatenate([cuts, [n]])):
      s = int(setting[a])
      self.stats[k]["value"].add(s, value[a:b].reshape(b - a, R))
      self.stats[k]["train_return"].add(s, tr[a:b, None])
      if self.source:
        self.stats[k][SOURCE_STAT].add(s, src[a:b])
    if self.returns is not None:
      self.returns[self.runs:self.runs + n] = np.asarray(res["returns"])[:n]
    if self.out is None:
      for name in ("train_return", "value", "value_stderr", "returns", "value_greedy",
                   "value_greedy_stderr", SOURCE_STAT, SOURCE_STAT + "_greedy") + tuple(
          "record_" + r for r in self.config.record):
        if name in res:
          self.arrays.setdefault(name, []).append(np.asarray(res[name])[:n])
    self.chunk_seconds += float(res.get("seconds", 0.0))
    self.runs += n
    self.rows += n * R
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
    if self.policy:
      head["policy"] = []
    if self.target:
      head[self.target[0]] = []
    stats = {m: ([], [], []) for m in self.metrics}
    for k, (_, S) in enumerate(self.lay.agents):
      modes = self.modes[k]
      P, T = len(modes), self.T
      ids = np.repeat(np.arange(S), P * T)
      head["agent"].append(np.full(S * P * T, k))
      head["setting"].append(ids)
      for c, v in self.columns[k].items():
        head[c].append(v[ids])
      if self.policy:
        codes = np.array([self.all_modes.index(m) for m in modes])
        head["policy"].append(np.tile(np.repeat(codes, T), S))
      if self.target:
        head[self.target[0]].append(np.tile(self.target[1], S * P))
      for m in self.metrics:
        res = self.stats[k][m].result()
        for acc, r in zip(stats[m], res):
          if m == "value":
            acc.append(r.reshape(-1))  # [S, P * T]
          elif m == "train_return":
            acc.append(np.repeat(r[:, 0], P * T))
          else:  # [S, P]
            acc.append(np.repeat(r.reshape(-1), T))
    head = {c: np.concatenate(v) for c, v in head.items()}
    head["agent"] = pd.Categorical.from_codes(head["agent"], categories=list(self.config.agents))
    if self.policy:
      head["policy"] = pd.Categorical.from_codes(head["policy"], categories=self.all_modes)
    return _summary_frame(head, {m: tuple(np.concatenate(a) for a in stats[m])
                                 for m in self.metrics})

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
      _io.publish(tmp, os.path.join(self.out, name))
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
