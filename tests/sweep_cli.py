"""``drjax sweep`` called in the test process, for the sweep tests (one helper, four test files)."""

from __future__ import annotations

import contextlib
import io
import os

import jax

from drjax import cli


def run(args):
  """``drjax sweep ARGS`` in this process: (exit code, stderr). Keeps x64 and XLA_FLAGS as is
  (the command sets both)."""
  err = io.StringIO()
  x64, flags = jax.config.jax_enable_x64, os.environ.get("XLA_FLAGS")
  try:
    with contextlib.redirect_stderr(err):
      code = cli.main(["sweep", *args])
  except SystemExit as e:
    code = e.code
  finally:
    jax.config.update("jax_enable_x64", x64)
    if flags is not None:
      os.environ["XLA_FLAGS"] = flags
  return code, err.getvalue()
