"""Environments: the interface and the paper's two experiments plus random linear DRMDPs.

``make(name, **kwargs)`` builds an environment by name::

  env = make("put-option", variant="notebook")
  params = env.default_params()
"""

from __future__ import annotations

from drjax.envs.base import Environment, FiniteEnvironment, LinearModel
from drjax.envs.linear_mdp import (
    LinearMDP,
    LinearMDPParams,
    LinearMDPState,
    action_vectors,
    target_params,
)
from drjax.envs.put_option import (
    PutOption,
    PutOptionParams,
    PutOptionState,
    fixed_initial_price,
)
from drjax.envs.random_mdp import (
    RandomLinearMDP,
    RandomMDPParams,
    RandomMDPState,
    random_linear_drmdp,
)

_REGISTRY = {
    "linear-mdp": LinearMDP,
    "put-option": PutOption,
    "random": RandomLinearMDP,
}


def make(name: str, **kwargs) -> Environment:
  """Builds the environment registered as ``name`` with constructor ``kwargs``.

  Args:
    name: ``"linear-mdp"`` (``LinearMDP``, no kwargs), ``"put-option"`` (``PutOption``:
      ``num_anchors``, ``horizon``, ``variant``) or ``"random"`` (``RandomLinearMDP``:
      ``num_states``, ``num_actions``, ``feature_dim``, ``horizon``).
    **kwargs: static constructor arguments (params are built with ``env.make_params``).

  Returns:
    The environment; raises ``ValueError`` for an unknown name or invalid arguments.
  """
  from drjax import _checks  # pylint: disable=g-import-not-at-top
  _checks.choice("name", name, tuple(sorted(_REGISTRY)))
  return _REGISTRY[name](**kwargs)


__all__ = [
    "Environment",
    "FiniteEnvironment",
    "LinearMDP",
    "LinearMDPParams",
    "LinearMDPState",
    "LinearModel",
    "PutOption",
    "PutOptionParams",
    "PutOptionState",
    "RandomLinearMDP",
    "RandomMDPParams",
    "RandomMDPState",
    "action_vectors",
    "fixed_initial_price",
    "make",
    "random_linear_drmdp",
    "target_params",
]
