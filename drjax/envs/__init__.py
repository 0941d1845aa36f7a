"""Environments: the interface and the paper's two experiments plus random linear DRMDPs.

``make(name, **kwargs)`` builds an environment by name::

  env = make("put-option", variant="notebook")
  params = env.default_params()
"""

from __future__ import annotations

from typing import NamedTuple

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


class SweepSpec(NamedTuple):
  """What ``drjax.sweeps`` may set for a registered environment (``SWEEP_SPECS[name]``)."""

  args: tuple  # constructor arguments (``env_args``), in the order messages list them
  params: tuple  # source parameters that may be swept (``env_params``)
  target: str | None  # the target family's parameter (``targets``); None: no target family
  sampled: bool = False  # params are sampled from an integer ``instance`` seed, not typed


# Keyed by the registered names (``make``), in the same order.
SWEEP_SPECS = {
    "linear-mdp": SweepSpec((), ("delta", "p", "xi_norm"), "q"),
    "put-option": SweepSpec(("num_anchors", "horizon", "variant"),
                            ("p_u", "init_low", "init_high"), "p_u"),
    "random": SweepSpec(("num_states", "num_actions", "feature_dim", "horizon"), ("instance",),
                        None, sampled=True),
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
    "SWEEP_SPECS",
    "SweepSpec",
    "action_vectors",
    "fixed_initial_price",
    "make",
    "random_linear_drmdp",
    "target_params",
]
