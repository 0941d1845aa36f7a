"""drjax._pystack.reserved: an ordinary call, without CPython's data-stack chunk thrash."""

import platform
import sys
import threading

import pytest

from drjax import _pystack


def _depth(n):
  return 0 if n == 0 else _depth(n - 1) + 1


def _round_trips(depth=400, times=2000):
  """Calls that go ``depth`` frames deep and back, ``times`` times (like JAX's tracing)."""
  return sum(_depth(depth) for _ in range(times))


def test_reserved_passes_arguments_and_results():
  assert _pystack.reserved(lambda a, b, *, c: (a, b, c), 1, 2, c=3) == (1, 2, 3)
  assert _pystack.reserved(dict, fn=4) == {"fn": 4}  # a keyword named like the parameter
  assert _pystack.reserved(_round_trips, 10, times=3) == 30


def test_reserved_propagates_exceptions():
  with pytest.raises(KeyError, match="x"):
    _pystack.reserved({}.__getitem__, "x")
  with pytest.raises(RecursionError):  # the recursion limit still counts frames
    _pystack.reserved(_depth, sys.getrecursionlimit() + 10)


def test_reserving_frame_is_big_enough_for_its_chunk():
  code = _pystack._reserving_call().__code__
  if platform.python_implementation() != "CPython":
    pytest.skip("only CPython keeps frames in stack chunks")
  # CPython: chunk = smallest power of two >= 8 bytes x (frame slots + 1000); the frame must ask
  # for more than half of CHUNK_BYTES (else its chunk is half as big and nearly full).
  assert 8 * (code.co_stacksize + 1000) > _pystack.CHUNK_BYTES // 2
  assert 8 * (code.co_nlocals + code.co_stacksize + 64 + 1000) <= _pystack.CHUNK_BYTES


def _minor_faults_in_thread(fn):
  """Minor page faults of the calling thread while ``fn`` runs (Linux)."""
  import resource  # pylint: disable=g-import-not-at-top
  out = {}

  def run():
    before = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
    fn()
    out["faults"] = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - before

  t = threading.Thread(target=run)  # a fresh thread: its own frame stack, fresh chunks
  t.start()
  t.join()
  return out["faults"]


@pytest.mark.skipif(not sys.platform.startswith("linux") or
                    platform.python_implementation() != "CPython",
                    reason="RUSAGE_THREAD page faults: Linux; stack chunks: CPython")
def test_reserved_calls_allocate_no_stack_chunks():
  # Every chunk CPython maps is new memory: its first use faults its pages in. 2,000 round trips
  # 400 frames deep cross a chunk boundary (and back) at least once each where CPython thrashes.
  _pystack.reserved(int)  # builds the reserving function outside the count
  plain = _minor_faults_in_thread(_round_trips)
  reserved = _minor_faults_in_thread(lambda: _pystack.reserved(_round_trips))
  # The pages the calls below use, once (CHUNK_BYTES / 4 KiB = 128 at most).
  assert reserved < 200, (plain, reserved)
  if sys.version_info >= (3, 11) and plain > 4000:  # this CPython thrashes: reserved does not
    assert reserved * 10 < plain, (plain, reserved)
