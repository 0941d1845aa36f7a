import os

# Before JAX initializes: drjax's XLA flags (single-threaded Eigen, fast compiles; drjax/_xla.py),
# fixed here so determinism does not depend on the caller's environment; then float64.
os.environ.pop("DRJAX_NO_XLA_FLAG", None)
os.environ["DRJAX_NO_CACHE"] = "1"  # no persistent compilation cache written by CLI tests
from drjax import _xla  # noqa: E402

_xla.configure()

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_rank_promotion", "raise")
