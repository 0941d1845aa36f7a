"""Environments: the interface and the paper's two experiments plus random linear DRMDPs, the
cliff-side traverse where robustness changes the route (``ledge``, ``ledge-grid``:
``drjax.envs.ledge``), and
gymnax's classic control (``cartpole``, ``acrobot``, ``mountain-car``, ``pendulum``; the optional
``gymnax`` extra, imported only when one of them is built: ``drjax.envs.gymnax_env``).

``make(name, **kwargs)`` builds an environment by name::

  env = make("put-option", variant="notebook")
  params = env.default_params()
"""

from __future__ import annotations

from typing import Callable, NamedTuple

from drjax import plugins
from drjax.envs.base import Environment, FiniteEnvironment, LinearModel
from drjax.envs.ledge import (
    Ledge,
    LedgeGrid,
    LedgeGridParams,
    LedgeGridState,
    LedgeParams,
    LedgeState,
)
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
    closed_form_robust_values,
    random_linear_drmdp,
)



def _gymnax(name: str):
  """A builder of the gymnax environment registered as ``name`` that imports the adapter (and
  gymnax) only when called: importing drjax never imports gymnax."""

  def build(**kwargs):
    from drjax.envs import gymnax_env  # pylint: disable=g-import-not-at-top
    return gymnax_env.make(name, **kwargs)

  build.__name__ = build.__qualname__ = f"gymnax_{name.replace('-', '_')}"
  return build


_GYMNAX = ("cartpole", "acrobot", "mountain-car", "pendulum")
_REGISTRY = {
    "linear-mdp": LinearMDP,
    "put-option": PutOption,
    "random": RandomLinearMDP,
    "ledge": Ledge,
    "ledge-grid": LedgeGrid,
    **{n: _gymnax(n) for n in _GYMNAX},
}
_SOURCES: dict[str, str] = {}  # name -> where a plugin registered it (plugins.caller_source)


class SweepSpec(NamedTuple):
  """What ``drjax.sweeps`` may set for a registered environment (``SWEEP_SPECS[name]``)."""

  args: tuple  # constructor arguments (``env_args``), in the order messages list them
  params: tuple  # source parameters that may be swept (``env_params``)
  target: str | None  # the target family's parameter (``targets``); None: no target family
  sampled: bool = False  # params are sampled from an integer ``instance`` seed, not typed
  # Several target families (``target`` is the first): the environment's ``target_params(src,
  # name, values)`` takes the family's name. Empty: the single family ``target``, called as
  # ``target_params(src, values)``.
  targets: tuple = ()
  # Recommended hyperparameters: ``hparams(env) -> {agent name or kind: {"beta": b, "lam": l}}``
  # (``drjax.envs.recommend``), what ``SweepConfig.beta`` / ``lam`` = None resolve to.
  hparams: Callable | None = None
  # The policies a sweep evaluates by default (``SweepConfig.eval_modes``; None: played only).
  eval_modes: tuple | None = None


# Keyed by the registered names (``make``), in the same order.
SWEEP_SPECS = {
    "linear-mdp": SweepSpec((), ("delta", "p", "xi_norm"), "q"),
    "put-option": SweepSpec(("num_anchors", "horizon", "variant"),
                            ("p_u", "init_low", "init_high"), "p_u"),
    "random": SweepSpec(("num_states", "num_actions", "feature_dim", "horizon", "features",
                         "sparsity", "feature_concentration", "factor_concentration",
                         "factor_support", "structure"), ("instance",), None, sampled=True),
    # The cliff-side traverse (drjax.envs.ledge): target_params(src, NAME, values).
    "ledge": SweepSpec(("horizon", "num_rows", "rock_rows", "split", "start_row", "features",
                        "centers_per_dim", "width", "tiles_per_dim", "num_tilings", "obs_dims"),
                       ("wind", "gust", "jitter", "safe_reward"), "wind",
                       targets=("wind", "gust", "jitter")),
    "ledge-grid": SweepSpec(("horizon", "num_rows", "rock_rows", "split", "start_row"),
                            ("wind", "safe_reward"), "wind", targets=("wind",)),
}
def _online_hparams(env) -> dict:
  from drjax.envs import recommend  # pylint: disable=g-import-not-at-top
  return recommend.online_hparams(env)


# gymnax (lazily: the names only): the source physics of the target families may be swept too.
_GYMNAX_ARGS = ("horizon", "features", "centers_per_dim", "width", "tiles_per_dim", "num_tilings",
                "obs_dims")
_GYMNAX_TARGETS = {
    "cartpole": ("length", "gravity", "masspole", "masscart", "force_mag"),
    "acrobot": ("link_length_1", "link_length_2", "link_mass_1", "link_mass_2"),
    "mountain-car": ("force", "gravity"),
    "pendulum": ("g", "m", "l"),
}
for _n, _t in _GYMNAX_TARGETS.items():
  SWEEP_SPECS[_n] = SweepSpec(_GYMNAX_ARGS + (("num_torques",) if _n == "pendulum" else ()), _t,
                              _t[0], targets=_t + (("link_length", "link_mass")
                                                   if _n == "acrobot" else ()),
                              hparams=_online_hparams, eval_modes=("played", "greedy"))
del _n, _t
for _n in ("ledge", "ledge-grid"):  # recommended beta / lambda for a return of at most 1
  SWEEP_SPECS[_n] = SWEEP_SPECS[_n]._replace(hparams=_online_hparams,
                                             eval_modes=("played", "greedy"))
del _n


def register(name: str, cls, sweep: SweepSpec | None = None) -> None:
  """Registers an environment class ``cls`` (``cls(**env_args)`` builds it) under ``name``, for
  ``make`` and, with a ``SweepSpec``, for ``drjax.sweeps`` / ``drjax sweep --env name``. Plugins
  call this (``drjax.plugins``). Registering a name again from the same source (the same file, or
  the same interactive session: a notebook re-running its cell, an edited plugin loaded again)
  replaces it; from another source, or a built-in environment's name, it is an error."""
  if not isinstance(name, str) or not name:
    raise TypeError(f"name must be a non-empty string, got {name!r}")
  if not callable(cls):
    raise TypeError(f"cls must be an environment class, got {cls!r}")
  if sweep is not None and not isinstance(sweep, SweepSpec):
    raise TypeError(f"sweep must be a SweepSpec or None, got {type(sweep).__name__}")
  where = plugins.caller_source(skip=(__name__,))
  before = _SOURCES.get(name)
  if name in _REGISTRY and before is None:  # a built-in environment
    if _REGISTRY[name] is cls and sweep is None:
      return
    raise ValueError(f"environment {name!r} is a built-in environment and cannot be replaced; "
                     "register yours under another name")
  if before is not None and before != where and _REGISTRY[name] is not cls:
    raise ValueError(f"environment {name!r} is already registered from {before}; registering it "
                     f"from {where} would replace it: use another name")
  _REGISTRY[name] = cls
  _SOURCES[name] = where
  if sweep is not None:
    SWEEP_SPECS[name] = sweep
  else:
    SWEEP_SPECS.pop(name, None)


def names() -> tuple[str, ...]:
  """Registered environment names (installed ``drjax.envs`` entry points included)."""
  plugins.load_entry_points("drjax.envs")
  return tuple(_REGISTRY)


def make(name: str, **kwargs) -> Environment:
  """Builds the environment registered as ``name`` with constructor ``kwargs``.

  Args:
    name: ``"linear-mdp"`` (``LinearMDP``, no kwargs), ``"put-option"`` (``PutOption``:
      ``num_anchors``, ``horizon``, ``variant``), ``"random"`` (``RandomLinearMDP``:
      ``num_states``, ``num_actions``, ``feature_dim``, ``horizon``), ``"ledge"`` (``Ledge``) /
      ``"ledge-grid"`` (``LedgeGrid``: ``horizon``, ``num_rows``, ``rock_rows``, ``split``,
      ``start_row``; ``Ledge`` also the features) or a gymnax environment,
      ``"cartpole"``, ``"acrobot"``, ``"mountain-car"``, ``"pendulum"`` (``GymnaxEnv``:
      ``horizon``, ``features``, ...; needs ``pip install -e ".[gymnax]"``).
    **kwargs: static constructor arguments (params are built with ``env.make_params``).

  Returns:
    The environment; raises ``ValueError`` for an unknown name or invalid arguments.
  """
  from drjax import _checks  # pylint: disable=g-import-not-at-top
  _checks.choice("name", name, tuple(sorted(names())))
  return _REGISTRY[name](**kwargs)


__all__ = [
    "Environment",
    "FiniteEnvironment",
    "Ledge",
    "LedgeGrid",
    "LedgeGridParams",
    "LedgeGridState",
    "LedgeParams",
    "LedgeState",
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
    "closed_form_robust_values",
    "fixed_initial_price",
    "make",
    "names",
    "register",
    "random_linear_drmdp",
    "target_params",
]


# A plugin that fails to import registers nothing (the entry points loaded before its state is
# saved: a restore must not drop them for good).
plugins.track_dicts(_REGISTRY, _SOURCES, SWEEP_SPECS,
                    prepare=lambda: plugins.load_entry_points("drjax.envs"))
