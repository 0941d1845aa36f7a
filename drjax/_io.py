"""Atomic file writes, shared by ``drjax sweep`` (``drjax.sweeps``) and ``drjax reproduce``.

A file is written to a temporary file in its own directory (named ``.tmp-*``), flushed and
``fsync``-ed, given the mode a plain ``open`` would give it (``0o666`` less the umask, not
``mkstemp``'s ``0o600``) and renamed onto its name with ``os.replace``: a reader, or a run
killed at any point, sees the previous file or the complete new one, never a half-written one.
On any error the temporary file is deleted and the error raised.
"""

from __future__ import annotations

import contextlib
import os
import tempfile


def _umask() -> int:
  mask = os.umask(0o022)
  os.umask(mask)
  return mask


_UMASK = _umask()  # read once at import (os.umask can only be read by setting it)
FILE_MODE = 0o666 & ~_UMASK  # the mode of a file created by open(path, "w")
DIR_MODE = 0o777 & ~_UMASK  # the mode of a directory created by os.mkdir (mkdtemp's is 0o700)


def atomic_write(path: str | os.PathLike, data: bytes | str) -> None:
  """Writes ``data`` (``str`` is encoded as UTF-8) to ``path`` all at once.

  A temporary file in the same directory, then ``os.replace``; nothing is left behind on error.
  """
  if isinstance(data, str):
    data = data.encode("utf-8")
  path = os.fspath(path)
  d = os.path.dirname(path) or "."
  fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=d)
  try:
    os.fchmod(fd, FILE_MODE)
    with os.fdopen(fd, "wb") as f:
      f.write(data)
      f.flush()
      os.fsync(f.fileno())
    os.replace(tmp, path)
  except BaseException:
    if os.path.exists(tmp):
      os.unlink(tmp)
    raise


def temp_file(directory: str, prefix: str = ".tmp-") -> str:
  """A new empty temporary file in ``directory`` (to be ``publish``-ed or deleted)."""
  fd, tmp = tempfile.mkstemp(prefix=prefix, dir=directory)
  os.close(fd)
  return tmp


def publish(tmp: str, path: str) -> None:
  """Renames the complete temporary file ``tmp`` onto ``path`` with the ordinary file mode."""
  os.chmod(tmp, FILE_MODE)
  os.replace(tmp, path)


@contextlib.contextmanager
def atomic_path(path: str):
  """Yields a temporary path next to ``path``; renamed onto ``path`` when the block succeeds.

  For large files written by a library (CSV, Parquet) straight to disk, without holding the
  whole file in memory. The temporary file is deleted if the block raises.
  """
  tmp = temp_file(os.path.dirname(path) or ".")
  try:
    yield tmp
    publish(tmp, path)
  finally:
    if os.path.exists(tmp):
      os.unlink(tmp)

