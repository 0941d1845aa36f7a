"""What the commands share: the one-line-error parser, range checks of flags, the compilation cache.

Imports nothing of ``drjax.cli`` (every command module imports it).
"""

import argparse
import math


class _Parser(argparse.ArgumentParser):
  """``ArgumentParser`` whose errors are a single line on stderr (exit code 2)."""

  def error(self, message):  # noqa: D102
    message = " ".join(str(message).split())
    self.exit(2, f"{self.prog}: error: {message}\n")


def _finite_in(parser, name: str, value, lo: float, hi: float) -> None:
  if value is not None and not (math.isfinite(value) and lo <= value <= hi):
    parser.error(f"{name} must lie in [{lo:g}, {hi:g}], got {value!r}")



MAX_COUNT = 2**31 - 1  # seeds, episodes, test episodes: int32 indices inside the programs
MAX_SEED = 2**32 - 1  # jax.random.PRNGKey keeps 32 bits without x64 (2**32 would equal seed 0)


def _positive_int(parser, name, value):
  if value is not None and not 1 <= value <= MAX_COUNT:
    parser.error(f"{name} must be an integer in [1, {MAX_COUNT}], got {value}")


def enable_compilation_cache() -> str | None:
  """Turns on JAX's persistent compilation cache for the commands (a second run skips compiling).

  Directory: ``$DRJAX_CACHE_DIR``, else ``~/.cache/drjax/jax``. ``DRJAX_NO_CACHE=1`` disables it
  (the benchmarks do, to measure cold starts). Returns the directory, or None when disabled. The
  Python API turns on the same cache (``drjax._cache``).
  """
  from drjax import _cache  # pylint: disable=g-import-not-at-top

  return _cache.configure()
