"""Deep Python calls without CPython's data-stack chunk thrash (python/cpython#142183).

Since Python 3.11, CPython keeps each thread's frames on a stack of 16 KiB chunks. A chunk is
allocated (``mmap``) when a call does not fit in the current one and freed (``munmap``) as soon as
the frame at its base returns, so code whose call depth keeps crossing a chunk boundary maps and
unmaps a chunk on every crossing: each a system call, fresh pages to fault in and, in a
multi-threaded process, a TLB shootdown on every core. JAX's tracing does exactly this. In
``drjax reproduce all`` (Python 3.11.7, jax 0.10.2) it made 146,000 16 KiB ``mmap``/``munmap``
pairs, about 1.5 s of system time, most of it in the threads that trace (and hold the GIL).
CPython fixed it by keeping one spare chunk per thread (3.13 and 3.14 backports, 2026-03); the
releases before, 3.10's excepted (its frames are heap objects), still thrash.

``reserved(fn, *args, **kwargs)`` calls ``fn`` from a frame that asks for half of a 512 KiB chunk.
CPython gives that frame a chunk of its own, and every call ``fn`` makes (about 33,000 slots of
locals and stack: hundreds of frames deep) fits in the other half, so no chunk is allocated or
freed until ``fn`` returns. The frame is a copy of a two-line function that declares a value stack
of 31,800 more slots than it uses (``types.CodeType.replace``): CPython reserves them but never
writes them, so a call costs one chunk mapping and a page or two (about 8 us on ``amd-epyc-2c``).
Where CPython no longer thrashes it changes nothing but that one larger frame; where the code
object cannot be rebuilt (not CPython) it is an ordinary call.
"""

from __future__ import annotations

import functools
import types

CHUNK_BYTES = 1 << 19  # the chunk the reserving frame gets (CPython: powers of two from 16 KiB)
# CPython sizes a new chunk as the smallest power of two >= 8 bytes x (frame slots + 1000), so a
# frame of just over half of CHUNK_BYTES / 8 - 1000 slots gets a CHUNK_BYTES chunk; the rest of
# the chunk (the frame's own locals and specials are a few slots more) holds the calls below it.
EXTRA_STACK = CHUNK_BYTES // 2 // 8 - 1000 + 32


def _call(fn, args, kwargs):
  return fn(*args, **kwargs)


@functools.lru_cache(maxsize=None)
def _reserving_call():
  code = _call.__code__
  try:
    code = code.replace(co_stacksize=code.co_stacksize + EXTRA_STACK)
  except (AttributeError, TypeError, ValueError):  # not CPython's code objects
    return _call
  return types.FunctionType(code, _call.__globals__, "reserved_stack_call")


def reserved(fn, /, *args, **kwargs):
  """``fn(*args, **kwargs)``, its calls kept inside one pre-allocated CPython stack chunk."""
  return _reserving_call()(fn, args, kwargs)
