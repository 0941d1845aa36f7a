"""A Ctrl-C at any line of an atomic write leaves the previous file (or figure directory) or the
complete new one, and no temporary file: the KeyboardInterrupt is raised, by a trace function, at
every line event of the writer's own code (``drjax._io``, ``drjax.paper.files`` and
``tempfile``, where the previous writer created its files) in turn."""

import os
import sys
import tempfile

import numpy as np
import pytest

from drjax import _io, data
from drjax.paper import files

_TRACED = {os.path.abspath(m.__file__) for m in (_io, files, tempfile)}


class _Interrupt:
  """Raises KeyboardInterrupt at the ``n``-th line event in ``_TRACED`` (never if ``n`` is 0)."""

  def __init__(self, n):
    self.n, self.seen = n, 0

  def __call__(self, frame, event, arg):
    if os.path.abspath(frame.f_code.co_filename) not in _TRACED:
      return None
    return self._line

  def _line(self, frame, event, arg):
    if event == "line":
      self.seen += 1
      if self.seen == self.n:
        raise KeyboardInterrupt
    return self._line


def _run(n, write):
  tracer, previous = _Interrupt(n), sys.gettrace()  # a coverage tool's or debugger's, kept
  sys.settrace(tracer)
  try:
    write()
    return tracer.seen, False
  except KeyboardInterrupt:
    return tracer.seen, True
  finally:
    sys.settrace(previous)


def _each_line(write, check):
  """Runs ``write`` once untraced-to-the-end to count its lines, then once interrupted at each."""
  total, interrupted = _run(0, write)
  assert not interrupted and total > 5, total
  for n in range(1, total + 1):
    _, interrupted = _run(n, write)
    check(n, interrupted)


def test_atomic_write_interrupted_at_any_line(tmp_path):
  path = tmp_path / "f.json"
  path.write_text("old")

  def check(n, interrupted):
    assert os.listdir(tmp_path) == ["f.json"], (n, os.listdir(tmp_path))
    assert path.read_text() in ("old", "new"), n
    if not interrupted:
      assert path.read_text() == "new"
    path.write_text("old")

  _each_line(lambda: _io.atomic_write(path, "new"), check)


def test_dataset_save_interrupted_at_any_line(tmp_path):
  ds = data.Dataset(*[np.zeros((2, 3, 4), np.float32) for _ in data.FIELDS])
  path = tmp_path / "d.npz"

  def check(n, interrupted):
    assert os.listdir(tmp_path) in ([], ["d.npz"]), (n, os.listdir(tmp_path))
    if not interrupted:
      assert os.listdir(tmp_path) == ["d.npz"]
    if path.exists():
      data.load(path)  # complete
      path.unlink()

  _each_line(lambda: data.save(path, ds), check)


PANEL = {"x": [0, 1], "x_label": "q", "curves": {"A": {"mean": [1, 2], "stderr": [0, 0]}}}


@pytest.mark.parametrize("previous", [False, True])
def test_write_figure_interrupted_at_any_line(tmp_path, previous):
  out = str(tmp_path)
  final = os.path.join(out, "figX")
  no_plot = lambda panels, base: None  # noqa: E731

  def reset():
    if os.path.exists(final):
      for f in os.listdir(final):
        os.remove(os.path.join(final, f))
      os.rmdir(final)
    if previous:
      files.write_figure(out, "figX", {"old": PANEL}, plot=no_plot)

  def check(n, interrupted):
    names = sorted(os.listdir(out))
    assert names == (["figX"] if previous or os.path.exists(final) else []), (n, names)
    if names:
      assert sorted(os.listdir(final)) in (["old.json"], ["new.json"]), (n, os.listdir(final))
    if not interrupted:
      assert sorted(os.listdir(final)) == ["new.json"]
    reset()

  reset()
  _each_line(lambda: files.write_figure(out, "figX", {"new": PANEL}, plot=no_plot), check)


def test_two_writers_with_the_same_pid_get_different_temporary_names(tmp_path):
  """Containers sharing a volume (each its own pid 1), or job-array tasks on other hosts writing
  into one directory: two processes with the same pid must not share a temporary name (a counter
  per process gave both ``.tmp-1.0``: one truncated the other's file before it was published)."""
  import subprocess  # pylint: disable=g-import-not-at-top
  code = ("import os, sys; os.getpid = lambda: 1; from drjax import _io; "
          "print(_io.temp_name(sys.argv[1]))")
  names = [subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True,
                          text=True, check=True).stdout.strip() for _ in range(2)]
  assert names[0] != names[1] and all(os.path.basename(n).startswith(".tmp-1.") for n in names)
