"""drjax: distributionally robust off-dynamics RL with linear function approximation, in JAX.

The d-rectangular linear family as pure, jit/vmap-able functions behind one agent registry
(``drjax.agents.registry``): online DR-LSVI-UCB (Liu & Xu, AISTATS 2024) and LSVI-UCB (Jin et al.,
2020); offline PEVI (Jin et al., 2021), DRPVI and VA-DRPVI (Liu & Xu, NeurIPS 2024) over datasets
(``drjax.data``); exact TV-dual kernels; JAX environments; exact robust planning and evaluation.

Importing drjax appends ``--xla_cpu_multi_thread_eigen=false`` to ``XLA_FLAGS`` when JAX's backend
is not yet initialized (see docs/engine.md, "XLA flags"); set ``DRJAX_NO_XLA_FLAG=1`` to opt out.
It imports nothing else: the first public name used imports JAX and the module that defines it,
and turns on JAX's persistent compilation cache (``~/.cache/drjax/jax``, ``drjax._cache``; a
directory the user set is kept; ``DRJAX_NO_CACHE=1`` opts out), as the ``drjax`` command does.
"""

from drjax import _xla

_xla.configure()  # before anything initializes JAX's CPU backend

# The public names, imported on first use (PEP 562): ``import drjax`` imports neither JAX nor any
# module below, so the command line prints its help at once; ``drjax.sweep(...)``,
# ``from drjax import LinearMDP`` and ``drjax.__all__`` work as if everything were imported.
_LAZY = {
    "drjax.agents.registry": ("registry",),
    "drjax.agents.offline": ("DRPVIHParams", "OfflineAgent", "PEVIHParams", "VADRPVIHParams",
                             "drpvi", "pevi", "va_drpvi"),
    "drjax.agents.base": ("Agent", "AgentConfig", "HParams", "QFunction", "check_features",
                          "make_hparams", "rho_array", "validate_hparams"),
    "drjax.agents.lsvi": ("dr_lsvi_ucb", "lsvi_ucb"),
    "drjax.agents.state": ("AgentState", "StatsState"),
    "drjax.envs": ("Environment", "FiniteEnvironment", "LinearMDP", "LinearModel", "PutOption",
                   "RandomLinearMDP", "random_linear_drmdp"),
    "drjax._programs": ("clear_caches",),
    "drjax.train": ("FitOutput", "TrainOutput", "make_fit", "make_train", "replan", "sweep"),
}
_ATTR_MODULE = {name: mod for mod, names in _LAZY.items() for name in names}
# submodules that are public names (``drjax.sweeps`` imports pandas/pyarrow)
_SUBMODULES = ("data", "envs", "evaluate", "planning", "policies", "robust", "sensitivity",
               "sweeps")

__version__ = "0.1.0"


def __getattr__(name):
  """Imports a public name on first use (and turns on the compilation cache, ``drjax._cache``)."""
  import importlib  # pylint: disable=g-import-not-at-top

  if name in _SUBMODULES:
    from drjax import _cache  # pylint: disable=g-import-not-at-top
    _cache.configure()
    return importlib.import_module(f"drjax.{name}")  # sets drjax.<name>
  mod = _ATTR_MODULE.get(name)
  if mod is None:
    raise AttributeError(f"module 'drjax' has no attribute {name!r}")
  from drjax import _cache  # pylint: disable=g-import-not-at-top
  _cache.configure()
  module = importlib.import_module(mod)
  value = module if mod.endswith("." + name) else getattr(module, name)
  globals()[name] = value
  return value


def __dir__():
  return sorted(set(globals()) | set(__all__) | {"sweeps"})


__all__ = [
    "Agent",
    "clear_caches",
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
    "policies",
    "random_linear_drmdp",
    "rho_array",
    "robust",
    "sensitivity",
    "sweep",
    "validate_hparams",
]
