"""drjax: distributionally robust off-dynamics RL with linear function approximation, in JAX.

The d-rectangular linear family as pure, jit/vmap-able functions behind one agent registry
(``drjax.agents.registry``): online DR-LSVI-UCB (Liu & Xu, AISTATS 2024) and LSVI-UCB (Jin et al.,
2020); offline PEVI (Jin et al., 2021), DRPVI and VA-DRPVI (Liu & Xu, NeurIPS 2024) over datasets
(``drjax.data``); exact TV-dual kernels; JAX environments; exact robust planning and evaluation.

Importing drjax appends ``--xla_cpu_multi_thread_eigen=false`` to ``XLA_FLAGS`` when JAX's backend
is not yet initialized (see docs/engine.md, "XLA flags"); set ``DRJAX_NO_XLA_FLAG=1`` to opt out.
"""

from drjax import _xla

_xla.configure()  # before anything initializes JAX's CPU backend

# pylint: disable=g-import-not-at-top,wrong-import-position
from drjax import data, envs, evaluate, planning, robust, sensitivity
from drjax.agents import registry
from drjax.agents.offline import (
    DRPVIHParams,
    OfflineAgent,
    PEVIHParams,
    VADRPVIHParams,
    drpvi,
    pevi,
    va_drpvi,
)
from drjax.agents.base import (
    Agent,
    AgentConfig,
    HParams,
    QFunction,
    check_features,
    make_hparams,
    rho_array,
    validate_hparams,
)
from drjax.agents.lsvi import dr_lsvi_ucb, lsvi_ucb
from drjax.agents.state import AgentState, StatsState
from drjax.envs import (
    Environment,
    FiniteEnvironment,
    LinearMDP,
    LinearModel,
    PutOption,
    RandomLinearMDP,
    random_linear_drmdp,
)
from drjax.train import FitOutput, TrainOutput, make_fit, make_train, replan, sweep

__version__ = "0.1.0"


def __getattr__(name):
  """``drjax.sweeps`` (imports pandas/pyarrow) is loaded on first use."""
  if name == "sweeps":
    import importlib  # pylint: disable=g-import-not-at-top
    return importlib.import_module("drjax.sweeps")
  raise AttributeError(f"module 'drjax' has no attribute {name!r}")

__all__ = [
    "Agent",
    "DRPVIHParams",
    "FitOutput",
    "OfflineAgent",
    "PEVIHParams",
    "VADRPVIHParams",
    "data",
    "drpvi",
    "make_fit",
    "pevi",
    "registry",
    "va_drpvi",
    "AgentConfig",
    "AgentState",
    "StatsState",
    "replan",
    "Environment",
    "FiniteEnvironment",
    "HParams",
    "LinearMDP",
    "LinearModel",
    "PutOption",
    "QFunction",
    "RandomLinearMDP",
    "TrainOutput",
    "check_features",
    "dr_lsvi_ucb",
    "envs",
    "evaluate",
    "lsvi_ucb",
    "make_hparams",
    "make_train",
    "planning",
    "random_linear_drmdp",
    "rho_array",
    "robust",
    "sensitivity",
    "sweep",
    "validate_hparams",
]
