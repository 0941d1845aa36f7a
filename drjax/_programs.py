"""drjax's in-process caches of built agents and compiled programs, and the call that empties them.

Equal compositions (an agent's pure functions, a sweep's jitted program, a paper experiment's
program) are built once per process and shared; each of them keeps its compiled XLA executables
alive, and on Linux each executable holds a few memory mappings of its own. A long-lived process
that builds thousands of distinct programs (a notebook iterating on variants, a test suite) can so
run out of memory, or of the kernel's per-process mapping limit (``vm.max_map_count``, 65,530 by
default: XLA then crashes while compiling). ``drjax.clear_caches()`` drops them all.

Keys are the static structure of a program (environment, agent, sizes, modes), never the values
of traced arguments: one entry serves every hyperparameter grid of that shape.
"""

from __future__ import annotations

import functools

_CACHES: list = []


def cached(fn):
  """``functools.lru_cache(maxsize=None)(fn)``, emptied by :func:`clear_caches`."""
  wrapper = functools.lru_cache(maxsize=None)(fn)
  _CACHES.append(wrapper)
  return wrapper


def clear_caches() -> None:
  """Drops drjax's built agents and programs and JAX's compilation caches (``jax.clear_caches``).

  The next call of any entry point traces and compiles again (or reads the persistent
  compilation cache, ``drjax._cache``). Objects you still hold (a ``drjax.make_train`` result, an
  ``Agent``) keep working.
  """
  for c in _CACHES:
    c.cache_clear()
  import jax  # pylint: disable=g-import-not-at-top

  jax.clear_caches()
