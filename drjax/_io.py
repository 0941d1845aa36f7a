"""Atomic file writes, shared by ``drjax sweep`` (``drjax.sweeps``) and ``drjax reproduce``.

A file is written to a temporary file in its own directory (named ``.tmp-*``), flushed and
``fsync``-ed, given the mode a plain ``open`` would give it (``0o666`` less the umask) and
renamed onto its name with ``os.replace``: a reader, or a run killed at any point, sees the
previous file or the complete new one, never a half-written one.
On any error the temporary file is deleted and the error raised.
"""

from __future__ import annotations

import contextlib
import os


def _umask() -> int:
  mask = os.umask(0o022)
  os.umask(mask)
  return mask


_UMASK = _umask()  # read once at import (os.umask can only be read by setting it)
FILE_MODE = 0o666 & ~_UMASK  # the mode of a file created by open(path, "w")
DIR_MODE = 0o777 & ~_UMASK  # the mode of a directory created by os.mkdir (mkdtemp's is 0o700)


def token() -> str:
  """8 random hex digits (``os.urandom``) that keep temporary names of concurrent writers apart,
  even two processes with the same pid (containers sharing a volume, job-array tasks on other
  hosts writing into one shared directory)."""
  return os.urandom(4).hex()


def temp_name(directory: str, prefix: str = ".tmp-", suffix: str = "") -> str:
  """A path in ``directory`` that nothing uses yet, not created:
  ``<prefix><pid>.<token><suffix>``.

  The caller holds the name *before* the file exists, so a KeyboardInterrupt arriving at any
  bytecode after the file is created still finds it to delete (``tempfile.mkstemp`` returns its
  name only after more Python code runs: a Ctrl-C there left an orphan ``.tmp-*``).
  """
  while True:
    path = os.path.join(directory, f"{prefix}{os.getpid()}.{token()}{suffix}")
    if not os.path.lexists(path):
      return path


def publish(tmp: str, path: str) -> None:
  """Renames the complete temporary file ``tmp`` onto ``path`` with the ordinary file mode."""
  os.chmod(tmp, FILE_MODE)
  os.replace(tmp, path)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, prefix: str = ".tmp-", suffix: str = ""):
  """Yields a temporary path next to ``path`` (not yet created); renamed onto ``path`` when the
  block succeeds, deleted if it raises.

  For files written by a library (CSV, Parquet, ``np.savez``) straight to disk, without holding
  the whole file in memory.
  """
  path = os.fspath(path)
  tmp = temp_name(os.path.dirname(path) or ".", prefix, suffix)
  try:
    yield tmp
    publish(tmp, path)
  finally:
    if os.path.lexists(tmp):
      os.unlink(tmp)


def atomic_write(path: str | os.PathLike, data: bytes | str) -> None:
  """Writes ``data`` (``str`` is encoded as UTF-8) to ``path`` all at once.

  A temporary file in the same directory, flushed and ``fsync``-ed, then ``os.replace``; nothing
  is left behind on error.
  """
  if isinstance(data, str):
    data = data.encode("utf-8")
  with atomic_path(path) as tmp:
    with open(tmp, "wb") as f:
      f.write(data)
      f.flush()
      os.fsync(f.fileno())
