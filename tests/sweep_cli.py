"""Shared by the sweep tests: ``drjax sweep`` in the test process, JAX's x64 mode for a block, and
the small sweep (DR-LSVI-UCB, K = 6, 5 seeds x 2 rho) as a config and as command-line flags."""

from __future__ import annotations

import contextlib
import io
import os

import jax

from drjax import cli


K = 6
SMALL = dict(env="linear-mdp", agents=("dr-lsvi-ucb",), seeds=5, episodes=K, rho=(0.0, 0.5),
             rho_at=((0, 3),), targets=("q", 0.0, 1.0, 3))
SMALL_FLAGS = ["--env", "linear-mdp", "--agents", "dr-lsvi-ucb", "--seeds", "5", "--episodes",
               str(K), "--rho", "0", "0.5", "--rho-at", "1,4", "--targets", "q=0:1:3", "--x64",
               "--quiet"]


@contextlib.contextmanager
def x64(on: bool):
  """JAX's x64 mode ``on`` inside the block, restored after it."""
  was = jax.config.jax_enable_x64
  jax.config.update("jax_enable_x64", on)
  try:
    yield
  finally:
    jax.config.update("jax_enable_x64", was)


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
