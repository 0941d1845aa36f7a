"""drjax: distributionally robust off-dynamics RL with linear function approximation, in JAX."""

from drjax import _xla

_xla.configure()  # before anything initializes JAX's CPU backend

__version__ = "0.1.0"
