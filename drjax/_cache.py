"""JAX's persistent compilation cache for drjax: on for the commands and for the Python API.

Compiling is most of the wait of a small experiment (docs/benchmarks.md, "Time to first result");
with the cache a program compiled once is read back in milliseconds by the next process.

Directory: ``$DRJAX_CACHE_DIR``, else ``~/.cache/drjax/jax``. ``DRJAX_NO_CACHE=1`` turns it off
(the benchmarks do, to measure cold starts; the test suite does). A cache directory the user gave
JAX (``jax.config.update("jax_compilation_cache_dir", ...)`` or ``JAX_COMPILATION_CACHE_DIR``) is
kept. Only programs that take more than 0.5 s to compile are written.

Imports nothing at module level: ``configure()`` imports JAX, so call it only where JAX is needed.
"""

from __future__ import annotations

import os

MIN_COMPILE_SECS = 0.5  # programs that compile faster are not worth a file


def directory() -> str | None:
  """The directory drjax would use (None when ``DRJAX_NO_CACHE`` is set)."""
  if os.environ.get("DRJAX_NO_CACHE"):
    return None
  return os.environ.get("DRJAX_CACHE_DIR") or os.path.join(
      os.path.expanduser("~"), ".cache", "drjax", "jax")


def configure() -> str | None:
  """Turns the persistent compilation cache on (imports JAX); returns its directory or None.

  Does nothing when ``DRJAX_NO_CACHE`` is set or the directory cannot be created; keeps a cache
  directory already set in JAX's configuration. Cheap to call again.
  """
  path = directory()
  if path is None:
    return None
  import jax  # pylint: disable=g-import-not-at-top

  current = jax.config.jax_compilation_cache_dir
  if current:
    return current
  try:
    os.makedirs(path, exist_ok=True)
  except OSError:
    return None
  jax.config.update("jax_compilation_cache_dir", path)
  jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_SECS)
  return path
