"""One registry of agents by name: the only place agent names live.

The CLI, ``drjax.sweeps`` and ``drjax reproduce`` look agents up here; adding an algorithm is a
``register(AgentSpec(...))`` next to its module, nothing else.

  >>> from drjax.agents import registry
  >>> registry.names()                          # every registered agent
  >>> spec = registry.get("drpvi")              # metadata: kind, divergence, hparams, paper
  >>> agent = registry.make("drpvi", env)       # the agent for an environment's (H, d, A)
  >>> hp = registry.make_hparams("drpvi", env, rho=0.3)   # validated, traced-ready
  >>> registry.register(registry.get("drpvi").replace(name="mine", factory=...))  # a variant
  >>> registry.register(...)                    # again from the same file / session: replaces
  >>> registry.unregister("mine")               # a plugin's agent (never a built-in)

Agent protocol (what the engine, evaluation, sweeps and reproduce use):

* every agent: ``config`` (``horizon``, ``feature_dim``, ``num_actions``),
  ``act(qf, h, phi_all, fail) -> int32``, ``q_values(qf, h, phi_all, fail) -> [A]``; a
  ``QFunction`` is what evaluation consumes;
* online (``kind="online"``, ``drjax.Agent``): ``init`` / ``init_stats``, ``plan(state, hparams,
  model) -> QFunction`` at the top of each episode, ``update(state, ...)`` after it,
  ``uncertainty(qf, h, phi)`` (Theorem 1's width); ``make_train(env, agent, K)`` runs it;
* offline (``kind="offline"``, ``drjax.agents.offline.OfflineAgent``):
  ``fit(dataset, hparams, pilot=None, model=None) -> QFunction``, one backward induction over a
  fixed ``drjax.data.Dataset``; ``make_fit`` / ``drjax.sweeps`` run it.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

from drjax import plugins
from drjax.agents.bounds import (  # noqa: F401  (re-exported: registry.Bounds, ...)
    BUILTIN_BOUNDS, DEFAULT_BOUNDS, Bounds, _parse_bounds, bounds)

__all__ = ["AgentSpec", "register", "unregister", "get", "names", "specs", "make",
           "make_hparams", "reward_source", "UnknownAgentError", "Bounds", "bounds",
           "check_hparam", "source"]


# The agents a sweep runs when none are named (``SweepConfig.agents``' default; here, importable
# without JAX, so that ``drjax sweep --help`` can name them).
DEFAULT_AGENTS = ("dr-lsvi-ucb", "lsvi-ucb")


class UnknownAgentError(ValueError):
  """An agent name that is not registered (the message lists the registered ones)."""


# Hyperparameters with sweep fields (and flags) of their own and fixed ranges (rho in [0, 1],
# beta >= 0, lam > 0, reg_weight > 0; checked where they are built), not by ``check_hparam``.
NAMED_HPARAMS = ("rho", "beta", "lam", "reg_weight")


@dataclasses.dataclass(frozen=True)
class AgentSpec:
  """A registered agent.

  Attributes:
    name: registry name (``"drpvi"``), used on the command line and in result tables.
    display: name in figures and tables (``"DRPVI"``).
    kind: ``"online"`` or ``"offline"``.
    divergence: ``"tv"`` or ``"none"`` (nominal).
    uncertainty: ``"constrained"`` (a radius rho), ``"regularized"`` or ``"none"``.
    hparams: the names of the agent's traced hyperparameters, in order.
    paper: the reference.
    factory: ``factory(horizon, feature_dim, num_actions, **options)`` (online agents also take
      ``capacity``).
    options: static options the factory accepts.
    color: matplotlib color used in figures.
    needs_pilot: offline agents that need an independent pilot dataset (VA-DRPVI).
    make_hparams_fn: ``(spec, horizon, feature_dim, num_actions, **values) -> hparams``
      (default: the online or offline agents' ``make_hparams``, by ``kind``).
    hparams_type: the agent's hyperparameter ``NamedTuple``: its fields are the declared traced
      hyperparameters (``hparams`` must list them, in order) and its field defaults the declared
      defaults (``defaults``). A field without a default must be given a value (in
      ``make_hparams``, ``drjax.sweep``, ``drjax sweep --hparam NAME=...``): it never becomes 0.
    hparam_defaults: the declared defaults when they are not ``hparams_type``'s (LSVI-UCB, whose
      ``HParams`` carries a rho it ignores).
    ignores: the sweep's agent settings (``"bonus"``, ``"clip"``, ``"tie_break"``: what
      ``--preset`` sets) that do not apply to this agent (PEVI's penalty is the ellipsoid: it
      ignores ``bonus``). A setting changed from its default that an agent neither takes as an
      option (``bonus`` / ``penalty``, ``clip``, ``tie_break``) nor ignores is an error naming
      both (``sweeps.validate``), never a silent default.
    variant_of: the registry name of the agent this spec was derived from with ``replace(name=...)``.

  A spec derived with ``replace(name=...)`` gets its own plot colour (``color=None``: a palette
  colour no other registered agent has, chosen when it is registered) and its own, empty,
  citation (``paper``) unless given.
  """

  name: str
  display: str
  kind: str
  divergence: str
  uncertainty: str
  hparams: tuple
  paper: str
  factory: Callable
  options: tuple = ()
  color: str | None = None
  needs_pilot: bool = False
  make_hparams_fn: Callable | None = None
  hparams_type: type | None = None
  hparam_defaults: dict | None = None
  ignores: tuple = ()
  variant_of: str | None = None

  @property
  def defaults(self) -> dict:
    """The declared default of each hyperparameter that has one (``hparams_type``'s field
    defaults)."""
    if self.hparam_defaults is not None:
      return dict(self.hparam_defaults)
    if self.hparams_type is None:
      return {}
    return {f: x for f, x in getattr(self.hparams_type, "_field_defaults", {}).items()
            if f in self.hparams}

  def missing(self, given) -> tuple[str, ...]:
    """The declared hyperparameters with neither a value in ``given`` nor a default."""
    defaults = self.defaults
    return tuple(f for f in self.hparams if f not in given and f not in defaults)

  def replace(self, **changes) -> "AgentSpec":
    """A copy with ``changes`` (derive a variant's spec from a built-in one).

    With a new ``name``, the copy does not inherit the plot colour or the citation: ``color``
    becomes ``None`` (a colour of its own, chosen by ``register``) and ``paper`` empty, unless
    given; ``variant_of`` records the parent's name. With a new ``hparams_type``, the declared
    defaults are its field defaults (the parent's ``hparam_defaults`` are dropped unless given).
    """
    if "name" in changes and changes["name"] != self.name:
      changes.setdefault("color", None)
      changes.setdefault("paper", "")
      changes.setdefault("variant_of", self.name)
    if "hparams_type" in changes:  # its field defaults are the declared ones, not the parent's
      changes.setdefault("hparam_defaults", None)
    return dataclasses.replace(self, **changes)

  def bounds(self, hparam: str) -> Bounds:
    """The allowed range of the declared hyperparameter ``hparam`` (``Bounds``): the
    ``bounds`` mapping of ``hparams_type`` when it names it, else ``BUILTIN_BOUNDS``, else
    ``DEFAULT_BOUNDS`` (``[0, inf)``)."""
    return bounds(self.hparams_type, hparam, label=f"agent {self.name!r}")

  @property
  def robust(self) -> bool:
    """Whether the agent has an uncertainty level rho."""
    return "rho" in self.hparams

  def describe(self) -> dict:
    out = {"name": self.name, "display": self.display, "kind": self.kind,
           "divergence": self.divergence, "uncertainty": self.uncertainty,
           "hparams": list(self.hparams), "options": list(self.options), "paper": self.paper}
    extra = [h for h in self.hparams if h not in NAMED_HPARAMS]
    if extra:  # the declared ranges of the hyperparameters --hparam takes
      out["bounds"] = {h: str(self.bounds(h)) for h in extra}
    if self.variant_of is not None:
      out["variant_of"] = self.variant_of
    return out


def check_hparam(name: str, hparam: str, values) -> None:
  """Checks the values of the declared hyperparameter ``hparam`` of agent ``name`` against its
  declared ``Bounds`` on the host (before anything is traced).

  The one check behind ``registry.make_hparams``, ``sweeps.validate`` (``sweeps.run``) and
  ``drjax sweep --hparam``: the same ``ValueError`` in all three, ``agent 'NAME': hyperparameter
  HPARAM must be in [lo, hi), got X``. Not for rho, beta, lam and reg_weight, which have ranges
  (and errors) of their own.
  """
  spec = get(name)
  b = spec.bounds(hparam)
  if hparam not in spec.hparams:
    raise ValueError(f"agent {name!r} has no hyperparameter {hparam!r} (its hyperparameters: "
                     f"{', '.join(spec.hparams) or 'none'})")
  from drjax import _checks  # pylint: disable=g-import-not-at-top
  _checks.require_concrete(hparam, values, "the hyperparameter's bounds are checked on the host")
  label = f"agent {name!r} hyperparameter {hparam}"
  b.check(name, hparam, _checks._values(label, values))  # pylint: disable=protected-access


_REGISTRY: dict[str, AgentSpec] = {}
# ``baseline``: a fixed policy that needs no training or data (``drjax.agents.baselines``).
KINDS = ("online", "offline", "baseline")


_SOURCES: dict[str, str] = {}  # name -> the source that registered it (``source``)
BUILTIN = "drjax (built-in)"
INTERACTIVE = plugins.INTERACTIVE
# Plot colours of agents registered without one (``color=None``): the candidate farthest from every
# colour in use (``_auto_color``), from matplotlib's named CSS colours less the greys and those too
# light to read on white (relative luminance above MAX_LUMINANCE: contrast with white below 2.5).
MIN_SATURATION, MAX_LUMINANCE = 0.35, 0.37
_BUILTIN_LOADING = False


def _caller_source() -> str:
  """Where ``register`` was called from (``plugins.caller_source``), or ``BUILTIN`` while the
  built-in agents are registered."""
  if _BUILTIN_LOADING:
    return BUILTIN
  return plugins.caller_source(skip=(__name__,))


def source(name: str) -> str:
  """Where agent ``name`` was registered from: ``BUILTIN``, a file's real path, or
  ``INTERACTIVE``."""
  get(name)
  return _SOURCES.get(name, "unknown")


def _rgb_distance(a, b) -> float:
  """Perceptual distance of two RGB colours in [0, 1]^3 ("redmean": sRGB weighted by the mean
  red, close to CIELAB's Delta E for plot colours)."""
  r = (a[0] + b[0]) / 2
  dr, dg, db = a[0] - b[0], a[1] - b[1], a[2] - b[2]
  return ((2 + r) * dr * dr + 4 * dg * dg + (3 - r) * db * db) ** 0.5


def auto_color_candidates() -> tuple[str, ...]:
  """The named colours an agent registered without one may get: matplotlib's CSS colours with
  HLS saturation >= ``MIN_SATURATION`` (no greys) and WCAG relative luminance <=
  ``MAX_LUMINANCE`` (readable on the figures' white), in name order."""
  import colorsys  # pylint: disable=g-import-not-at-top
  from matplotlib import colors as mcolors  # pylint: disable=g-import-not-at-top

  def linear(c):
    return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4
  out = []
  for name, hexa in sorted(mcolors.CSS4_COLORS.items()):
    rgb = mcolors.to_rgb(hexa)
    sat = colorsys.rgb_to_hls(*rgb)[2]
    lum = sum(w * linear(c) for w, c in zip((0.2126, 0.7152, 0.0722), rgb))
    if sat >= MIN_SATURATION and lum <= MAX_LUMINANCE:
      out.append(name)
  return tuple(out)


def _auto_color(name: str) -> str:
  """The candidate colour farthest (``_rgb_distance``) from the nearest colour of every other
  registered agent (ties: the first in name order): distinct from all of them, and as far as the
  palette allows from the closest, whatever was registered before."""
  from matplotlib import colors as mcolors  # pylint: disable=g-import-not-at-top
  used = [mcolors.to_rgb(s.color) for n, s in _REGISTRY.items()
          if n != name and s.color and mcolors.is_color_like(s.color)]
  best, best_d = None, -1.0
  for c in auto_color_candidates():
    rgb = mcolors.to_rgb(c)
    d = min((_rgb_distance(rgb, u) for u in used), default=1.0)
    if d > best_d:
      best, best_d = c, d
  return best


def register(spec: AgentSpec) -> AgentSpec:
  """Adds ``spec``; returns the registered spec (with its colour filled in).

  Registering a name again from the same source (the same file, imported as a module or loaded
  as a plugin path, or the same interactive session: a notebook re-running its cell) replaces the
  earlier spec. From another source it is a ``ValueError`` naming both (``unregister`` first);
  a built-in agent's name is never replaced.
  """
  _load()
  if not isinstance(spec, AgentSpec):
    raise TypeError(f"spec must be an AgentSpec, got {type(spec).__name__}")
  if not isinstance(spec.name, str) or not spec.name:
    raise TypeError(f"spec.name must be a non-empty string, got {spec.name!r}")
  if not callable(spec.factory):
    raise TypeError(f"spec.factory must be a function (horizon, feature_dim, num_actions, "
                    f"**options) -> agent, got {type(spec.factory).__name__}")
  if spec.kind not in KINDS:
    raise ValueError(f"kind must be 'online', 'offline' or 'baseline', got {spec.kind!r}")
  if spec.hparams_type is not None:
    fields = tuple(getattr(spec.hparams_type, "_fields", ()))
    if not fields:
      raise TypeError(f"spec.hparams_type must be a NamedTuple class, got {spec.hparams_type!r}")
    if tuple(spec.hparams) != fields:
      raise ValueError(f"spec.hparams {tuple(spec.hparams)} must list hparams_type's fields "
                       f"{fields} in order")
  for setting in spec.ignores:
    if setting not in ("bonus", "clip", "tie_break"):
      raise ValueError(f"spec.ignores: {setting!r} is not a sweep agent setting (bonus, clip, "
                       "tie_break)")
  where = _caller_source()
  old = _REGISTRY.get(spec.name)
  if old is not None and old is not spec:
    before = _SOURCES.get(spec.name, "unknown")
    if before == BUILTIN:
      raise ValueError(f"agent {spec.name!r} is a built-in agent and cannot be replaced; register "
                       f"yours under another name (e.g. {spec.name + '-mine'!r}: "
                       f"registry.get({spec.name!r}).replace(name=...))")
    if before != where:
      raise ValueError(f"agent {spec.name!r} is already registered from {before}; registering it "
                       f"from {where} would replace it: call "
                       f"registry.unregister({spec.name!r}) first, or use another name")
  if spec.color is None:
    spec = dataclasses.replace(spec, color=_auto_color(spec.name))
  _REGISTRY[spec.name] = spec
  _SOURCES[spec.name] = where
  return spec


def unregister(name: str) -> AgentSpec:
  """Removes agent ``name`` (registered by a plugin or a session) and returns its spec.

  ``UnknownAgentError`` for a name that is not registered; a built-in agent is a ``ValueError``
  (the sweeps, ``reproduce`` and the docs rely on them).
  """
  spec = get(name)
  if _SOURCES.get(name) == BUILTIN:
    raise ValueError(f"agent {name!r} is a built-in agent and cannot be unregistered")
  del _REGISTRY[name]
  _SOURCES.pop(name, None)
  return spec


def names(kind: str | None = None) -> tuple[str, ...]:
  """Registered names, in registration order (``kind``: only online or offline agents); read
  when called, so agents registered later (plugins) are included."""
  _check_kind(kind)
  _load()
  return tuple(n for n, s in _REGISTRY.items() if kind is None or s.kind == kind)


def specs(kind: str | None = None) -> tuple[AgentSpec, ...]:
  """The registered specs, in registration order (``kind``: only online or offline agents)."""
  return tuple(get(n) for n in names(kind))


def get(name: str) -> AgentSpec:
  """The spec of ``name``; an unknown name raises ``UnknownAgentError`` listing the registered
  agents."""
  _load()
  if not isinstance(name, str):
    raise TypeError(f"name must be an agent name (a string), one of {', '.join(_REGISTRY)}; got "
                    f"{type(name).__name__} {name!r}")
  if name not in _REGISTRY:
    raise UnknownAgentError(f"unknown agent {name!r}; registered agents: "
                            f"{', '.join(_REGISTRY)}")
  return _REGISTRY[name]


def _check_kind(kind) -> None:
  if kind is not None and kind not in KINDS:
    raise ValueError(f"kind must be None, 'online', 'offline' or 'baseline', got {kind!r}")


def _dims(env_or_dims, name: str = "env"):
  """``(H, d, A)`` of an environment or an ``(H, d, A)`` tuple of integers >= 1."""
  from drjax import _checks  # pylint: disable=g-import-not-at-top
  if isinstance(env_or_dims, tuple):
    if len(env_or_dims) != 3:
      raise ValueError(f"{name} must be an environment or an (H, d, A) tuple, got "
                       f"{env_or_dims!r}")
    return tuple(_checks.integer(f"{name}[{k}] ({n})", x, 1)
                 for k, (n, x) in enumerate(zip(("H", "d", "A"), env_or_dims)))
  if not all(hasattr(env_or_dims, f) for f in ("horizon", "feature_dim", "num_actions")):
    raise TypeError(f"{name} must be an environment (LinearMDP(), PutOption(), ...) or an "
                    f"(H, d, A) tuple, got {type(env_or_dims).__name__}")
  return env_or_dims.horizon, env_or_dims.feature_dim, env_or_dims.num_actions


def make(name: str, env, **options):
  """The agent ``name`` for ``env`` (or an ``(H, d, A)`` tuple) with static ``options``.

  Online agents need ``capacity`` (the number of episodes they store). An option the agent does
  not take is a ``ValueError`` naming it and listing the allowed ones.
  """
  spec = get(name)
  allowed = set(spec.options) | ({"capacity"} if spec.kind == "online" else set())
  bad = sorted(set(options) - allowed)
  if bad:
    raise ValueError(f"agent {name!r} has no option {', '.join(map(repr, bad))} (options: "
                     f"{', '.join(sorted(allowed)) or 'none'})")
  H, d, A = _dims(env)
  if "neutral" in spec.options and "neutral" not in options and not isinstance(env, tuple):
    from drjax.agents import baselines  # pylint: disable=g-import-not-at-top
    neutral = baselines.neutral_action(env)
    options["neutral"] = -1 if neutral is None else neutral
  return spec.factory(H, d, A, **options)


def make_hparams(name: str, env, **values):
  """Validated hyperparameters of agent ``name`` for ``env`` / ``(H, d, A)``.

  Only the agent's own hyperparameters are accepted (``ValueError`` naming any other, e.g. rho
  for PEVI); missing ones take their declared defaults (``AgentSpec.defaults``: the
  experiments' beta 1, lambda 0.1, rho 0 for the built-in agents). A declared hyperparameter
  with no default and no value is a ``ValueError`` naming it.
  """
  spec = get(name)
  unknown = sorted(set(values) - set(spec.hparams) - {"dtype"})
  if unknown:
    raise ValueError(f"agent {name!r} has no hyperparameter {', '.join(map(repr, unknown))} "
                     f"(its hyperparameters: {', '.join(spec.hparams)})")
  missing = spec.missing(values)
  if missing:
    raise ValueError(f"agent {name!r}: hyperparameter {', '.join(map(repr, missing))} has no "
                     f"default; give a value ({', '.join(f'{m}=...' for m in missing)})")
  H, d, A = _dims(env)
  values = {**spec.defaults, **values}
  for f, x in values.items():  # the declared bounds: the same check as the sweeps'
    if f not in NAMED_HPARAMS + ("dtype",):
      check_hparam(name, f, x)
  fn = spec.make_hparams_fn or {"online": _online_hparams, "offline": _offline_hparams,
                                "baseline": _baseline_hparams}[spec.kind]
  return fn(spec, H, d, A, **values)


# ---------------------------------------------------------------------------------------------
# The built-in agents.


def _online_hparams(spec, H, d, A, dtype=None, **values):
  from drjax.agents import base  # pylint: disable=g-import-not-at-top
  from drjax import _checks  # pylint: disable=g-import-not-at-top
  hp_type = spec.hparams_type or base.HParams
  extra = {f: values.pop(f) for f in list(values) if f not in ("rho", "beta", "lam")}
  hp = base.make_hparams(H, d, rho=values.pop("rho", 0.0), dtype=dtype, **values)
  if not extra:
    return hp if hp_type is base.HParams else hp_type(**hp._asdict())
  for f, x in extra.items():  # a plugin's own scalar hyperparameters, in their bounds
    _checks.require_concrete(f, x, "make_hparams validates its values on the host")
    b = spec.bounds(f)
    _checks.number(f"{spec.name} hparams.{f}", x, b.lo, b.hi, lo_open=b.lo_open,
                   hi_open=b.hi_open)
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  out = {**hp._asdict(), **{f: jnp.asarray(x, hp.beta.dtype) for f, x in extra.items()}}
  return hp_type(**{f: out[f] for f in hp_type._fields})


def _offline_hparams(spec, H, d, A, dtype=None, **values):
  agent = make(spec.name, (H, d, A))
  from drjax.agents import offline  # pylint: disable=g-import-not-at-top
  return offline.make_hparams(agent, dtype=dtype, **values)


def _baseline_hparams(spec, H, d, A, dtype=None, **values):
  """A baseline's hyperparameters (``constant``: ``action``, a whole number in [0, A - 1])."""
  from drjax.agents import baselines  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  agent = make(spec.name, (H, d, A), **({"neutral": 0} if "neutral" in spec.options else {}))
  dtype = dtype or jnp.result_type(float)
  hp = agent.hparams_type(**{f: jnp.asarray(x, dtype) for f, x in values.items()})
  baselines.check_hparams(agent, hp)
  return hp


def _lazy(module: str, fn: str) -> Callable:
  def factory(*args, **kwargs):
    import importlib  # pylint: disable=g-import-not-at-top
    return getattr(importlib.import_module(module), fn)(*args, **kwargs)
  factory.__name__ = fn
  return factory


_LOADED = False


def _load() -> None:
  """Registers the built-in agents once (modules are imported when an agent is built), then the
  installed ``drjax.agents`` entry points (``drjax.plugins``)."""
  global _LOADED
  if _LOADED:
    return
  _LOADED = True
  global _BUILTIN_LOADING
  _BUILTIN_LOADING = True
  try:
    _register_builtins()
  finally:
    _BUILTIN_LOADING = False
  plugins.load_entry_points("drjax.agents")


# The built-in agents' declared defaults (the experiments'; the same as their hyperparameter
# NamedTuples' field defaults, checked in tests): written here so that reading the registry
# imports no agent module.
BUILTIN_DEFAULTS = {"rho": 0.0, "beta": 1.0, "lam": 0.1, "var_shift": 0.0, "reg_weight": 0.1,
                    "beta_var": 1.0, "var_floor": 1.0}


def _defaults(*names) -> dict:
  return {n: BUILTIN_DEFAULTS[n] for n in names}


# The built-in agents' default reward source (their papers'): ``"theta"`` uses the environment's
# known reward parameters, ``"regressed"`` the ridge estimate ``Lambda_h^-1 sum phi r``. Each
# takes the other through its ``reward`` option (``make(name, env, reward="regressed")``).
# Agents that a robust agent is compared with: its nominal counterpart (``SweepConfig.controls``).
NOMINAL = {"dr-lsvi-ucb": "lsvi-ucb", "we-drive-u": "lsvi-ucb", "drpvi": "pevi",
           "drpvi-mono": "pevi", "va-drpvi-mono": "pevi",
           "va-drpvi": "pevi", "r2pvi-tv": "pevi", "r2pvi-kl": "pevi", "r2pvi-chi2": "pevi",
           "drvi-l": "pevi"}


BUILTIN_REWARDS = {"dr-lsvi-ucb": "theta", "lsvi-ucb": "regressed", "pevi": "regressed",
                   "drpvi": "theta", "drpvi-mono": "theta", "va-drpvi": "theta",
                   "va-drpvi-mono": "theta",
                   "r2pvi-tv": "theta",
                   "r2pvi-kl": "theta", "r2pvi-chi2": "theta", "drvi-l": "theta",
                   "we-drive-u": "theta"}


def reward_source(name: str, **options) -> str | None:
  """The reward source agent ``name`` uses with ``options``: its ``reward`` option when given,
  else its default (``BUILTIN_REWARDS``; ``None`` for an agent that declares none, a plugin's)."""
  spec = get(name)
  bad = sorted(set(options) - set(spec.options) - {"capacity"})
  if bad:
    raise ValueError(f"agent {name!r} has no option {', '.join(map(repr, bad))} (options: "
                     f"{', '.join(sorted(spec.options)) or 'none'})")
  reward = options.get("reward")
  if reward is not None and reward not in ("theta", "regressed"):
    raise ValueError(f"reward must be 'theta' or 'regressed', got {reward!r}")
  return reward or BUILTIN_REWARDS.get(name)


def _register_builtins() -> None:
  """The twelve built-in agents and the three baselines."""
  online_opts = ("bonus", "alpha", "grid_size", "tie_break", "solver", "known", "reward")
  register(AgentSpec(
      "dr-lsvi-ucb", "DR-LSVI-UCB", "online", "tv", "constrained", ("rho", "beta", "lam"),
      "Liu & Xu, AISTATS 2024 (Algorithm 1)", _lazy("drjax.agents.lsvi", "dr_lsvi_ucb"),
      online_opts, "tab:red", hparam_defaults=_defaults("rho", "beta", "lam"),
      ignores=("clip",)))
  register(AgentSpec(
      "lsvi-ucb", "LSVI-UCB", "online", "none", "none", ("beta", "lam"),
      "Jin, Yang, Wang & Jordan, COLT 2020", _lazy("drjax.agents.lsvi", "lsvi_ucb"),
      ("clip", "tie_break", "fail_zero", "solver", "known", "reward"), "tab:blue",
      hparam_defaults=_defaults("beta", "lam"), ignores=("bonus",)))
  offline_opts = ("truncation", "fail_zero", "tie_break", "known", "reward")
  robust_opts = offline_opts + ("penalty", "vmin")
  register(AgentSpec(
      "pevi", "PEVI", "offline", "none", "none", ("beta", "lam"),
      "Jin, Yang & Wang, ICML 2021", _lazy("drjax.agents.offline", "pevi"), offline_opts,
      "tab:green", hparam_defaults=_defaults("beta", "lam"), ignores=("bonus", "clip")))
  register(AgentSpec(
      "drpvi", "DRPVI", "offline", "tv", "constrained", ("rho", "beta", "lam"),
      "Liu & Xu, NeurIPS 2024 (Algorithm 1)", _lazy("drjax.agents.offline", "drpvi"),
      robust_opts + ("monotone",), "tab:orange", hparam_defaults=_defaults("rho", "beta", "lam"),
      ignores=("clip",)))
  register(AgentSpec(
      "va-drpvi", "VA-DRPVI", "offline", "tv", "constrained",
      ("rho", "beta", "lam", "var_shift"),
      "Liu & Xu, NeurIPS 2024 (Algorithm 3; Algorithm 2 as variance='alg2')",
      _lazy("drjax.agents.offline", "va_drpvi"),
      robust_opts + ("variance", "grid_size", "monotone"),
      "tab:purple", needs_pilot=True, hparam_defaults=_defaults("rho", "beta", "lam", "var_shift"),
      ignores=("clip",)))
  for div, display, color in (("tv", "R2PVI-TV", "tab:olive"), ("kl", "R2PVI-KL", "tab:cyan"),
                              ("chi2", "R2PVI-chi2", "tab:brown")):
    register(AgentSpec(
        f"r2pvi-{div}", display, "offline", div, "regularized", ("reg_weight", "beta", "lam"),
        "Tang, Liu & Xu, ICML 2025 (R2PVI)", _lazy("drjax.agents.offline", f"r2pvi_{div}"),
        robust_opts, color, hparam_defaults=_defaults("reg_weight", "beta", "lam"),
        ignores=("clip",)))
  register(AgentSpec(
      "drvi-l", "DRVI-L", "offline", "kl", "constrained", ("rho", "beta", "lam"),
      "Ma et al. 2022 (the R2PVI paper's DRVI-L baseline)", _lazy("drjax.agents.offline", "drvi_l"),
      ("truncation", "fail_zero", "tie_break", "penalty", "tol", "known", "reward"), "tab:pink",
      hparam_defaults=_defaults("rho", "beta", "lam"), ignores=("clip",)))
  register(AgentSpec(
      "drpvi-mono", "DRPVI-mono", "offline", "tv", "constrained", ("rho", "beta", "lam"),
      "DRPVI with z_i(alpha) made monotone before the max (a deviation, docs/presets.md)",
      _lazy("drjax.agents.offline", "drpvi_monotone"), robust_opts, "darkgoldenrod",
      hparam_defaults=_defaults("rho", "beta", "lam"), ignores=("clip",)))
  register(AgentSpec(
      "va-drpvi-mono", "VA-DRPVI-mono", "offline", "tv", "constrained",
      ("rho", "beta", "lam", "var_shift"),
      "VA-DRPVI (Alg. 3) with z_i(alpha) made monotone before the max (a deviation)",
      _lazy("drjax.agents.offline", "va_drpvi_monotone"), robust_opts, "indigo",
      needs_pilot=True, hparam_defaults=_defaults("rho", "beta", "lam", "var_shift"),
      ignores=("clip",)))
  register(AgentSpec(
      "we-drive-u", "We-DRIVE-U", "online", "tv", "constrained",
      ("rho", "beta", "lam", "beta_var", "var_floor"),
      "Liu, Wang & Xu, arXiv 2409.20521 (reconstructed from the abstract; docs/agents.md)",
      _lazy("drjax.agents.wedriveu", "we_drive_u"),
      ("switch", "cap", "weights", "alpha", "grid_size", "tie_break", "solver", "reward"), "teal",
      make_hparams_fn=_lazy("drjax.agents.wedriveu", "registry_hparams"),
      hparam_defaults=_defaults("rho", "beta", "lam", "beta_var", "var_floor"),
      ignores=("bonus", "clip")))  # its bonus: always the paper's d-rectangular one
  # Baselines: fixed policies, no training (drjax.agents.baselines).
  register(AgentSpec(
      "uniform-random", "uniform random", "baseline", "none", "none", (),
      "baseline: a uniformly random action at every step",
      _lazy("drjax.agents.baselines", "uniform_random"), (), "0.45", hparam_defaults={}))
  register(AgentSpec(
      "constant", "constant action", "baseline", "none", "none", ("action",),
      "baseline: always the action hparams.action (--hparam action=0,1)",
      _lazy("drjax.agents.baselines", "constant"), (), "0.25", hparam_defaults={}))
  register(AgentSpec(
      "zero-torque", "zero torque", "baseline", "none", "none", (),
      "baseline: the neutral action (Pendulum's zero torque)",
      _lazy("drjax.agents.baselines", "zero_torque"), ("neutral",), "0.6", hparam_defaults={}))


# A plugin that fails to import registers nothing (the built-ins loaded before its state is saved).
plugins.track_dicts(_REGISTRY, _SOURCES, prepare=_load)
