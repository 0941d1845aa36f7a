"""Matrix products at full float32 precision on every backend.

On NVIDIA GPUs JAX computes float32 ``dot``s with TensorFloat-32 by default (10-bit mantissas):
measured on an H200 (jax 0.11.2), that moved DRPVI's put-option weights by up to 3e-2 and DRVI-L's
(whose clipped KL estimate jumps where a ridge estimate crosses 0) by up to 17 against the same
fit in NumPy float32, where the CPU gives 1e-5. drjax's kernels are exact algorithms, so they trace
their products with ``jax.default_matmul_precision("highest")`` (true float32; a no-op on CPU
and for float64). ``DRJAX_MATMUL_PRECISION`` (read once, at import) overrides it: ``"default"``
leaves JAX's setting alone (faster TF32 products on GPU, not exact), or any value
``jax.default_matmul_precision`` accepts.
"""

from __future__ import annotations

import functools
import os

import jax

_ENV = "DRJAX_MATMUL_PRECISION"
PRECISION = os.environ.get(_ENV, "highest").strip() or "highest"
_ALLOWED = ("default", "highest", "float32", "high", "bfloat16_3x", "tensorfloat32", "bfloat16",
            "fastest")
if PRECISION not in _ALLOWED:
  raise ValueError(f"{_ENV} must be one of {_ALLOWED}, got {PRECISION!r}")


def exact_matmuls(fn):
  """``fn`` traced with ``jax.default_matmul_precision(PRECISION)`` (unchanged for "default")."""
  if PRECISION == "default":
    return fn

  @functools.wraps(fn)
  def wrapped(*args, **kwargs):
    with jax.default_matmul_precision(PRECISION):
      return fn(*args, **kwargs)

  return wrapped
