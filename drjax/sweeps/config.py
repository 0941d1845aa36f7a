"""The sweep's configuration (``SweepConfig``) and its validation on the host (``validate``).

Also what a configuration names: the environment (``make_env``, from the environment registry
``drjax.envs.SWEEP_SPECS``), the agents (``drjax.agents.registry``), the behavior policy of
offline agents, the source parameters and the exact target grid (``target_values``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import decimal
import fractions
import hashlib
import itertools
import json
import math
import os
import re

import jax
import numpy as np

from drjax import envs
from drjax.agents import registry
from drjax.agents.base import BONUS_FORMS, CLIP_FORMS, TIE_BREAKS
from drjax.sweeps.errors import SweepTypeError, _Error

DEFAULT_AGENTS = registry.DEFAULT_AGENTS  # the default of SweepConfig.agents
# Offline agents' data-collection policy (drjax.policies.parse): uniform, a fixed action,
# epsilon-greedy around a saved policy, or a mixture of these (one component per trajectory).
BEHAVIORS = ("uniform", "fixed:<action>", "eps-greedy:file=<path>,eps=<e>[,mode=greedy|played]"
             "[,index=<i>]", "mix:<w1>*<spec1>+<w2>*<spec2>")
# Hyperparameters with a sweep field of their own (--rho, --beta, --lam, --reg-weight); any
# other declared hyperparameter of an agent is an axis of ``SweepConfig.hparams``.
NAMED_HPARAMS = ("rho", "beta", "lam", "reg_weight")
# Per-run study quantities a sweep can record at episode checkpoints (``SweepConfig.record``):
# columns ``<name>@<k>``. Widths: sums over episodes <= k and steps of the d-rectangular /
# elliptical widths at the visited features; switches / dual_calls: the counts at episode k;
# ave_subopt: exact AveSubopt(k) = V*(rho) - mean_{j <= k} V^{pi_j}(rho) (finite environments).
RECORDS = ("width_rect", "width_ellip", "switches", "dual_calls", "ave_subopt")
# The policies of an online run a sweep can evaluate (``SweepConfig.eval_modes``, the ``policy``
# column): ``played``, the final plan with the bonus (the optimistic policy the agent acts by);
# ``greedy``, the bonus-free greedy policy of the same data (``drjax.replan`` at beta = 0).
# Offline agents and baselines have one policy, recorded as ``played``.
EVAL_MODES = ("played", "greedy")
# ``SweepConfig.tune``: the policy whose source return picks beta and lambda.
TUNE_BY = EVAL_MODES
# The defaults of beta and lambda where the environment recommends none (``SweepSpec.hparams``).
DEFAULT_BETA, DEFAULT_LAM = 1.0, 0.1


# The registered agents and environments are read when used, never copied at import: an agent or
# environment registered later (a plugin, drjax.plugins) is as good as a built-in one.
def agent_names() -> tuple[str, ...]:
  """Every registered agent (``drjax.agents.registry.names()``)."""
  return registry.names()


def env_names() -> tuple[str, ...]:
  """The environments a sweep runs (``drjax.envs.SWEEP_SPECS``, plugins included)."""
  envs.names()  # loads the environment entry points
  return tuple(envs.SWEEP_SPECS)


def env_params(name: str) -> tuple:
  """The source parameters of environment ``name`` that may be swept."""
  return envs.SWEEP_SPECS[name].params


def env_target(name: str) -> str | None:
  """The target family's parameter of environment ``name`` (None: no target family)."""
  return envs.SWEEP_SPECS[name].target


def env_targets(name: str) -> tuple:
  """Every target family of environment ``name`` (``SweepSpec.targets``, else ``(target,)``;
  empty: none)."""
  spec = envs.SWEEP_SPECS[name]
  return tuple(spec.targets) or ((spec.target,) if spec.target is not None else ())


def target_mode(config: "SweepConfig") -> str:
  """How the chunk program builds the targets: ``"source"`` (no targets), ``"targets"``
  (``env.target_params(src, values)``) or ``"targets:NAME"`` (an environment with several
  families: ``env.target_params(src, NAME, values)``)."""
  if not config.targets:
    return "source"
  return f"targets:{config.targets[0]}" if envs.SWEEP_SPECS[config.env].targets else "targets"


def make_targets(env, mode: str, source, values):
  """The target params of ``values`` for a ``target_mode``."""
  if mode.startswith("targets:"):
    return env.target_params(source, mode[len("targets:"):], values)
  return env.target_params(source, values)


def __getattr__(name):
  """``AGENTS``, ``ENVS``, ``ENV_PARAMS``, ``TARGETS``, ``ENV_ARGS``: the registries as they are
  now (computed on access)."""
  specs = lambda: {n: envs.SWEEP_SPECS[n] for n in env_names()}  # noqa: E731
  if name == "AGENTS":
    return agent_names()
  if name == "ENVS":
    return env_names()
  if name == "ENV_PARAMS":
    return {n: s.params for n, s in specs().items()}
  if name == "TARGETS":
    return {n: s.target for n, s in specs().items() if s.target is not None}
  if name == "ENV_ARGS":
    return {n: s.args for n, s in specs().items()}
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


DEFAULT_MEMORY_MB = 512.0  # a chunk's budget on CPU (host memory, shared with everything else)
# On an accelerator, ``memory_mb=None`` budgets this fraction of the first device's memory limit
# (``memory_stats()["bytes_limit"]``): the per-run estimate (``grid.bytes_per_run``) is calibrated
# on CPU, and XLA needs room of its own. A chunk of 8 GiB (14,638 runs) ran on an H200.
ACCELERATOR_MEMORY_FRACTION = 0.25


def auto_memory_mb(device) -> float:
  """The chunk budget (MiB) that ``memory_mb=None`` resolves to on ``device``.

  ``DEFAULT_MEMORY_MB`` on a CPU, or when the device reports no memory limit; on a GPU or TPU
  ``ACCELERATOR_MEMORY_FRACTION`` of its ``bytes_limit``, in whole MiB (at least the CPU's).
  """
  if getattr(device, "platform", "cpu") == "cpu":
    return DEFAULT_MEMORY_MB
  try:
    limit = (device.memory_stats() or {}).get("bytes_limit")
  except Exception:  # pylint: disable=broad-except  (a backend without memory statistics)
    limit = None
  if not isinstance(limit, (int, float)) or not limit > 0:
    return DEFAULT_MEMORY_MB
  return float(max(DEFAULT_MEMORY_MB, math.floor(ACCELERATOR_MEMORY_FRACTION * limit / 2**20)))


def sampled(env_name: str) -> bool:
  """Whether the environment's source params are sampled from an ``instance`` seed (random
  instances), not typed."""
  return envs.SWEEP_SPECS[env_name].sampled


@dataclasses.dataclass(frozen=True)
class SweepConfig:
  """The full configuration of a sweep (what ``sweep.json`` stores under ``config``).

  Attributes:
    env: ``"linear-mdp"``, ``"put-option"`` or ``"random"``.
    env_args: static constructor arguments of the environment (put option: ``num_anchors``,
      ``horizon``, ``variant``; random: ``num_states``, ``num_actions``, ``feature_dim``,
      ``horizon`` and the generator's knobs ``features``, ``sparsity``, ``feature_concentration``,
      ``factor_concentration``, ``factor_support``, ``structure``).
    agents: registered agent names (``drjax.agents.registry.names()``); default:
      ``DEFAULT_AGENTS`` (DR-LSVI-UCB and LSVI-UCB). Offline agents (PEVI, DRPVI, VA-DRPVI) fit each run's policy to a dataset collected
      in the source domain under ``behavior``.
    seeds: number of seeds N; seeds are the indices ``0..N-1``.
    seed_ids: optional subset of ``0..N-1`` to run (rerun chosen seeds); ``None``: all.
    episodes: training episodes K.
    rho: uncertainty levels: scalars in [0, 1] placed at the 0-indexed ``rho_at`` positions (all
      positions when ``rho_at`` is None), or full ``[H, d]`` arrays. Used by DR-LSVI-UCB only.
    rho_at: 0-indexed ``(h, i)`` positions for scalar rho (``((0, 3),)`` is the paper's
      rho_{1,4}).
    beta: bonus multipliers (>= 0); ``None`` (default): the environment's recommended value for
      each agent's kind (``recommended_hparams``; gymnax: scaled to the return range, see
      docs/environments.md), else 1.
    lam: ridge regularizers (> 0); ``None`` (default): as for beta, else 0.1.
    agent_hparams: per-agent axes of beta / lam, ``{agent: {"beta": (...), "lam": (...)}}``,
      replacing the shared ``beta`` / ``lam`` for that agent (the per-kind defaults resolve into
      it when the agents' kinds are recommended different values).
    eval_modes: the policies evaluated per online run (``EVAL_MODES``, the ``policy`` column):
      ``"played"`` (the final optimistic plan) and ``"greedy"`` (``replan`` at beta = 0, the same
      data and evaluation keys); ``None``: the environment's choice (``SweepSpec.eval_modes``:
      both on gymnax, ``("played",)`` on the paper's environments). Offline agents and
      baselines have one policy (``"played"``). The ``policy`` column exists unless the modes
      are ``("played",)``.
    controls: add the controls of every robust agent: rho = 0 (a robust agent's own nominal
      limit), its nominal counterpart (``registry.NOMINAL``: LSVI-UCB, PEVI) and the
      ``uniform-random`` baseline.
    tune: ``"played"`` or ``"greedy"``: the source-only tuning protocol (docs/sweeps.md): every
      run is also evaluated in the source (column ``source_value`` when there are targets) and,
      per agent and every other setting, the (beta, lambda) of the grid with the best mean
      source value of that policy is selected (``select_best``), recorded in ``sweep.json``
      (``tuning``) and ``tuned.csv``.
    env_params: source-environment parameter name -> values (``ENV_PARAMS``; other parameters
      keep the environment's defaults). ``random``'s ``instance`` is the integer seed of
      ``RandomLinearMDP.sample_params(jax.random.key(instance))``.
    targets: ``(name, start, stop, num)``: evaluate on the targets ``linspace(start, stop, num)``
      of the environment's family (``TARGETS``); ``None``: evaluate in the source domain.
    test_episodes: Monte Carlo episodes per run and target (environments without exact model).
    seed: base PRNG seed.
    chunk: runs per chunk; ``None``: chosen from ``memory_mb``.
    memory_mb: memory budget (MiB) for one chunk when ``chunk`` is None; ``None`` (default):
      ``auto_memory_mb`` of the first device, resolved by ``validate`` (512 on CPU; a quarter of
      a GPU's memory limit), so ``sweep.json`` records the number used.
    bonus, clip, tie_break: agent options (see ``dr_lsvi_ucb`` / ``lsvi_ucb``).
    dtype: ``"float32"`` or ``"float64"``; ``None`` takes JAX's current default.
    save_returns: also keep every run's ``[K]`` training returns (``returns.npy``).
    trajectories: offline agents: dataset sizes N (a sweep axis, like rho: the largest dataset
      is collected once per seed and each size uses its first N trajectories, so one compiled
      program serves every size and the datasets are nested). VA-DRPVI also collects an
      independent pilot of the same size (2N trajectories in all; the column counts D).
    behavior: offline agents' behavior policy: ``"uniform"`` (the DRPVI paper's) or
      ``"fixed:A"`` (always action A; ``"fixed:1"`` holds the put option, as the R2PVI code).
    reg_weight: regularization weights (> 0) of the robust regularized agents (R2PVI), a sweep
      axis of theirs (every (h, i)).
    hparams: any other declared hyperparameter of the agents (``AgentSpec.hparams``) -> its
      values (finite numbers, scalars): an axis that applies to the agents that declare it
      (VA-DRPVI's ``var_shift``, a plugin's ``kappa``); the others ignore it. A declared
      hyperparameter with neither values here nor a declared default is an error naming it.
    plugins: plugin modules or ``.py`` files (``drjax.plugins``) loaded before the config is
      validated, so that a stored config (``--resume``, ``--merge``) finds its agents again.
    record: online agents' per-run study quantities (``RECORDS``), columns ``<name>@<k>`` for
      each checkpoint k of ``record_at``. ``ave_subopt`` is measured at the run's rho for robust
      agents and at the single ``rho`` of the config for nominal ones (their learning ignores
      rho); it needs a finite environment.
    record_at: episode checkpoints (integers in [1, episodes]) of ``record``; ``None``:
      ``(episodes,)``.
  """

  env: str = "linear-mdp"
  env_args: dict = dataclasses.field(default_factory=dict)
  agents: tuple = DEFAULT_AGENTS
  seeds: int = 10
  seed_ids: tuple | None = None
  episodes: int = 100
  rho: tuple = (0.0,)
  rho_at: tuple | None = None
  beta: tuple | None = None
  lam: tuple | None = None
  env_params: dict = dataclasses.field(default_factory=dict)
  targets: tuple | None = None
  test_episodes: int = 100
  seed: int = 0
  chunk: int | None = None
  memory_mb: float | None = None
  bonus: str = "paper"
  clip: str = "paper"
  tie_break: str = "optimistic"
  dtype: str | None = None
  save_returns: bool = False
  trajectories: tuple = (100,)
  behavior: str = "uniform"
  reg_weight: tuple = (0.1,)
  hparams: dict = dataclasses.field(default_factory=dict)
  plugins: tuple = ()
  record: tuple = ()
  record_at: tuple | None = None
  agent_hparams: dict = dataclasses.field(default_factory=dict)
  eval_modes: tuple | None = None
  controls: bool = False
  tune: str | None = None

  # -------------------------------------------------------------- (de)serialization
  def to_dict(self) -> dict:
    """JSON-ready dict (tuples become lists)."""
    return json.loads(json.dumps(dataclasses.asdict(self)))

  @classmethod
  def from_dict(cls, d: dict) -> "SweepConfig":
    """Inverse of ``to_dict``; unknown keys raise ``ValueError``."""
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(d) - names)
    if unknown:
      raise ValueError(f"config: unknown keys {unknown}")
    d = dict(d)

    def tup(x):
      return tuple(tup(v) for v in x) if isinstance(x, (list, tuple)) else x

    for k in ("agents", "seed_ids", "rho", "rho_at", "beta", "lam", "targets", "trajectories",
              "reg_weight", "record", "record_at", "eval_modes"):
      if d.get(k) is not None:
        d[k] = tup(d[k])
    if "env_params" in d:
      d["env_params"] = {k: tuple(v) for k, v in d["env_params"].items()}
    if isinstance(d.get("hparams"), dict):
      d["hparams"] = {k: tup(v) for k, v in d["hparams"].items()}
    if d.get("plugins") is not None:
      d["plugins"] = tup(d["plugins"])
    if isinstance(d.get("agent_hparams"), dict):
      d["agent_hparams"] = {a: ({k: tup(v) for k, v in x.items()} if isinstance(x, dict) else x)
                            for a, x in d["agent_hparams"].items()}
    return cls(**d)


def _is_int(x) -> bool:
  return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


def _floats(field: str, values, *, lo=None, hi=None, lo_open=False) -> tuple:
  if isinstance(values, (int, float, np.number)):
    values = (values,)
  try:
    vals = tuple(float(v) for v in values)
  except (TypeError, ValueError):
    raise _Error(field, f"must be a list of numbers, got {values!r}") from None
  if not vals:
    raise _Error(field, "needs at least one value")
  for v in vals:
    bad = not math.isfinite(v) or (lo is not None and (v <= lo if lo_open else v < lo)) or (
        hi is not None and v > hi)
    if bad:
      lo_s = "" if lo is None else (f"> {lo:g}" if lo_open else f">= {lo:g}")
      hi_s = "" if hi is None else f"<= {hi:g}"
      rng = " and ".join(s for s in (lo_s, hi_s) if s) or "finite"
      raise _Error(field, f"values must be {rng}, got {v!r}")
  return vals


def make_env(config: SweepConfig):
  """The environment of ``config`` (``ValueError`` for a bad name or constructor argument)."""
  if config.env not in env_names():
    raise _Error("env", f"must be one of {', '.join(env_names())}, got {config.env!r}")
  allowed = envs.SWEEP_SPECS[config.env].args
  for k in config.env_args:
    if k not in allowed:
      raise _Error("env_args", f"unknown argument {k!r} for {config.env} (allowed: "
                               f"{', '.join(allowed) or 'none'})")
  try:
    return envs.make(config.env, **config.env_args)
  except (TypeError, ValueError) as e:
    raise _Error("env_args", str(e)) from None


def behavior_of(config: SweepConfig, env) -> tuple:
  """``(behavior, provenance)`` of ``config.behavior`` (``drjax.policies.parse``); the
  provenance (spec, kind, eps, mixture weights, policy files with their SHA-256) goes to
  ``sweep.json`` under ``data``."""
  from drjax import policies  # pylint: disable=g-import-not-at-top
  return policies.parse(config.behavior, env)


def _data_provenance(config: SweepConfig, env, specs: dict, behavior: dict) -> dict | None:
  """``sweep.json``'s ``data`` entry for a sweep with offline agents (else ``None``): the
  behavior's provenance (``behavior_of(...)[1]``) and the dataset sizes (``trajectories``;
  VA-DRPVI also collects an independent pilot of the same size). ``specs``: the agents'
  ``AgentSpec``s."""
  offline = [a for a in config.agents if specs[a].kind == "offline"]
  if not offline:
    return None
  pilot = [a for a in offline if getattr(registry.make(a, env), "needs_pilot", False)]
  return {"behavior": behavior, "trajectories": list(config.trajectories),
          "collected_per_seed": max(config.trajectories), "pilot_agents": pilot,
          "seeds": config.seeds}


def policy_file_hashes(config: SweepConfig) -> list:
  """The SHA-256 of every policy file ``config.behavior`` names (salts ``config_hash``, so a
  sweep is never resumed with a changed file)."""
  from drjax import policies  # pylint: disable=g-import-not-at-top
  b = config.behavior
  if not isinstance(b, str) or "file=" not in b:
    return []
  return [policies.file_hash(p) if os.path.isfile(p) else "missing:" + p
          for p in policies._files(b)]  # pylint: disable=protected-access


def _canonical(obj) -> str:
  """The canonical JSON of ``obj`` (sorted keys, no spaces): what the sweep's identity hashes."""
  return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def _identity_hash(config_dict: dict, env_params: dict, files) -> str:
  """``storage.config_hash`` of a config's ``to_dict()``, its ``env_params`` and its policy files'
  hashes (``policy_file_hashes``)."""
  text = _canonical(config_dict)
  if any(len(v) > 1 for v in env_params.values()):
    text += "|settings:source-slowest"
  if files:
    text += "|policy-files:" + ",".join(files)
  return hashlib.sha256(text.encode()).hexdigest()[:16]


def _source_params(env, config: SweepConfig, values: dict):
  """Validated source params with ``values`` overriding the environment's defaults."""
  if sampled(config.env):
    inst = values.get("instance", 0)
    return env.sample_params(jax.random.key(int(inst)))
  return env.make_params(**values)


def target_values(targets) -> np.ndarray:
  """The float64 target grid of ``targets = (name, start, stop, num)``, exactly as typed.

  Entry ``i`` is the float64 nearest to the exact decimal ``start + (stop - start) * i / (num -
  1)`` of the typed ``start`` and ``stop`` (their shortest decimal representations), so
  ``q=0:1:21`` gives ``0.15`` and ``0.85``, not ``np.linspace``'s ``0.15000000000000002`` and
  ``0.8500000000000001``: ``df.target_q == 0.15`` selects rows. The computation uses these
  values rounded once to its dtype.
  """
  _, start, stop, num = targets
  a = fractions.Fraction(decimal.Decimal(repr(float(start))))
  b = fractions.Fraction(decimal.Decimal(repr(float(stop))))
  if num == 1:
    return np.array([float(a)])
  return np.array([float(a + (b - a) * i / (num - 1)) for i in range(num)], np.float64)


def _source_defaults(env) -> dict:
  """The environment's default source parameters as float64, exactly as its code types them."""
  with jax.enable_x64(True):
    p = env.make_params()

  def flat(x) -> dict:  # nested params (a gymnax EnvParams inside): their scalar fields
    items = (x._asdict() if hasattr(x, "_asdict") else
             {f.name: getattr(x, f.name) for f in dataclasses.fields(x)})
    out = {}
    for k, v in items.items():
      if hasattr(v, "_asdict") or dataclasses.is_dataclass(v):
        out.update(flat(v))
      elif np.ndim(v) == 0:
        out[k] = float(np.asarray(v))
    return out

  return flat(p)


def _check_source(env, c: SweepConfig, values: dict, targets, dtype: str) -> None:
  """``env.validate`` of one combination of source values (and the targets), on the host.

  Typed values are checked in float64 first, so that a message shows them as typed
  (``delta=0.9``, not float32's ``0.8999999761581421``), then in the computation's dtype: a value
  valid as typed but not once rounded to float32 is refused too, naming the typed values.
  """
  field = "env_params" if targets is None else "targets"

  def check():
    src = _source_params(env, c, values)
    if targets is not None:
      env.validate(make_targets(env, target_mode(c), src, targets))

  typed = not sampled(c.env)  # random instances are sampled, not typed: checked as computed
  try:
    with jax.enable_x64(True) if typed else contextlib.nullcontext():
      check()
  except ValueError as e:
    raise _Error(field, f"{values}: {e}" if targets is None else str(e)) from None
  if typed and dtype != "float64":
    try:
      check()
    except ValueError:
      what = f"{values}" if values else "the default source parameters"
      raise _Error(field, f"{what}{' with these targets' if targets is not None else ''}: valid "
                          f"as typed but not once rounded to {dtype}, the computation's dtype "
                          "(compute in float64: --x64 / dtype='float64')") from None


# Fields holding a tuple (of names, numbers or pairs): a string there is a type error.
_TUPLE_FIELDS = {"agents": "a list of agent names", "rho": "a list of numbers or [H, d] arrays",
                 "rho_at": "a list of (h, i) pairs", "beta": "a list of numbers",
                 "lam": "a list of numbers", "reg_weight": "a list of numbers",
                 "trajectories": "a list of integers", "seed_ids": "a list of integers",
                 "targets": "(name, start, stop, num)"}


def _check_types(c: SweepConfig) -> None:
  """``SweepTypeError`` naming the field for a string (or other non-sequence) where a tuple is
  expected, and for ``env_args`` / ``env_params`` that are not dicts."""
  for name, what in _TUPLE_FIELDS.items():
    v = getattr(c, name)
    if isinstance(v, (str, bytes)):
      example = f"{name}=({v!r},)" if name in ("agents",) else None
      raise SweepTypeError(name, f"must be {what}, got the string {v!r}"
                                 + (f" (write {example})" if example else ""))
    scalar_ok = name in ("rho", "beta", "lam", "reg_weight", "trajectories", "seed_ids")
    if v is not None and not isinstance(v, (list, tuple)) and not (
        scalar_ok and (isinstance(v, (int, float, np.number)) or
                       (name == "rho" and isinstance(v, np.ndarray)))):
      raise SweepTypeError(name, f"must be {what}, got {type(v).__name__} {v!r}")
  if c.agents is None:
    raise SweepTypeError("agents", "must be a list of agent names, got None")
  if not isinstance(c.plugins, (list, tuple)) or not all(isinstance(p, str) for p in c.plugins):
    raise SweepTypeError("plugins", f"must be a list of module names or .py paths, got "
                                    f"{c.plugins!r}")
  for name in ("env_args", "env_params", "hparams"):
    if not isinstance(getattr(c, name), dict):
      raise SweepTypeError(name, f"must be a dict, got {type(getattr(c, name)).__name__} "
                                 f"{getattr(c, name)!r}")
  for k, v in c.env_params.items():
    if isinstance(v, (str, bytes)):
      raise SweepTypeError("env_params", f"{k}: must be a list of numbers, got the string {v!r}")


def _load_plugins(specs) -> tuple:
  """Loads the config's plugins; returns their recorded form (absolute paths for files)."""
  from drjax import plugins  # pylint: disable=g-import-not-at-top
  out = []
  for spec in specs:
    try:
      plugins.load(spec)
    except (plugins.PluginError, TypeError) as e:
      raise _Error("plugins", str(e)) from None
    out.append(plugins.resolve(spec))
  return tuple(out)


def _check_hparams(c: SweepConfig) -> dict:
  """The ``hparams`` axes, checked: each a declared hyperparameter of at least one of the agents
  (and not one with a field of its own), finite numbers; and every declared hyperparameter of
  every agent has values or a declared default."""
  out = {}
  declared = {a: registry.get(a).hparams for a in c.agents}
  for name, values in c.hparams.items():
    if not isinstance(name, str):
      raise _Error("hparams", f"names must be strings, got {name!r}")
    if name in NAMED_HPARAMS:
      flag = name.replace("_", "-")
      raise _Error("hparams", f"{name} has a field of its own: use {name}=... (--{flag})")
    if not any(name in h for h in declared.values()):
      raise _Error("hparams", f"{name!r} is not a hyperparameter of any of the agents "
                              f"{', '.join(c.agents)} (theirs: "
                              f"{', '.join(sorted(set().union(*declared.values())))})")
    if isinstance(values, (str, bytes)):
      raise SweepTypeError("hparams", f"{name}: must be a list of numbers, got {values!r}")
    vals = _floats(f"hparams {name}", values)
    if len(set(vals)) != len(vals):
      raise _Error("hparams", f"{name}: duplicate value in {list(vals)}")
    for a in c.agents:  # the declared bounds (registry.check_hparam, as make_hparams checks them)
      if name in declared[a]:
        try:
          registry.check_hparam(a, name, vals)
        except ValueError as e:
          raise _Error("hparams", str(e)) from None
    out[name] = vals
  for a in c.agents:
    spec = registry.get(a)
    missing = spec.missing(set(NAMED_HPARAMS) | set(out))
    if missing:
      raise _Error("hparams", f"agent {a!r}: hyperparameter {', '.join(map(repr, missing))} has "
                              f"no default; give its values (--hparam {missing[0]}=V1,V2,... / "
                              f"hparams={{{missing[0]!r}: (...)}})")
  return out


# The agent settings of a sweep (what ``--preset`` sets), the agent options each one sets, and
# their defaults (the paper's forms).
SETTINGS = {"bonus": (("bonus", "penalty"), "paper"), "clip": (("clip",), "paper"),
            "tie_break": (("tie_break",), "optimistic")}


def _check_settings(c: SweepConfig) -> None:
  """A setting changed from its default (``--preset notebook``) must reach every agent: each
  agent takes it as an option or declares that it does not apply (``AgentSpec.ignores``), else
  the error names the setting and the agent (it would silently run its own default: a variant of
  DRPVI without the ``penalty`` option would keep the paper's penalty). Baselines take none."""
  for setting, (options, default) in SETTINGS.items():
    value = getattr(c, setting)
    if value == default:
      continue
    for a in c.agents:
      spec = registry.get(a)
      if spec.kind == "baseline" or setting in spec.ignores or set(options) & set(spec.options):
        continue
      pass_on = " and pass it to the builder as width=" if setting == "bonus" else ""
      raise _Error(setting, f"{setting}={value!r} (--preset) does not reach agent {a!r}: it takes "
                            f"no {' or '.join(map(repr, options))} option (its options: "
                            f"{', '.join(spec.options) or 'none'}) and would run its default "
                            f"{default!r}; add the option to its AgentSpec.options (its factory "
                            f"must take it{pass_on}), declare "
                            f"AgentSpec.ignores=({setting!r},) if it does "
                            f"not apply, or keep {setting}={default!r} (--preset paper)")


def _check_record(c: SweepConfig, env) -> tuple:
  """``(record, record_at)`` resolved: names of ``RECORDS`` in their canonical order and sorted
  checkpoints; errors name the field."""
  rec = c.record if isinstance(c.record, (list, tuple)) else (c.record,)
  bad = [r for r in rec if r not in RECORDS]
  if bad:
    raise _Error("record", f"unknown quantity {bad[0]!r}; allowed: {', '.join(RECORDS)}")
  if len(set(rec)) != len(rec):
    raise _Error("record", f"duplicate quantity in {list(rec)}")
  if not rec:
    if c.record_at is not None:
      raise _Error("record_at", "applies only with record (the quantities to record)")
    return (), None
  offline = [a for a in c.agents if registry.get(a).kind != "online"]
  if offline:
    raise _Error("record", f"records online training runs; {offline[0]!r} is "
                           f"{registry.get(offline[0]).kind}")
  if "ave_subopt" in rec:
    from drjax.envs.base import FiniteEnvironment  # pylint: disable=g-import-not-at-top
    if not isinstance(env, FiniteEnvironment):
      raise _Error("record", f"ave_subopt needs a finite environment (exact robust values); "
                             f"{c.env} has none")
    nominal = [a for a in c.agents if not registry.get(a).robust]
    if nominal and len(c.rho) != 1:
      raise _Error("record", f"ave_subopt of a nominal agent ({nominal[0]!r}) is measured at the "
                             f"config's rho, which must then be a single value, got {len(c.rho)}")
  at = (c.episodes,) if c.record_at is None else (
      tuple(c.record_at) if isinstance(c.record_at, (list, tuple)) else (c.record_at,))
  if not at or not all(_is_int(k) and 1 <= k <= c.episodes for k in at):
    raise _Error("record_at", f"must be integers in [1, {c.episodes}] (episodes), got {list(at)}")
  if len(set(at)) != len(at):
    raise _Error("record_at", f"duplicate checkpoint in {list(at)}")
  return tuple(r for r in RECORDS if r in rec), tuple(sorted(int(k) for k in at))


def recommended_hparams(env_name: str, env) -> dict:
  """``{agent name or kind: {"beta": b, "lam": l}}``: the hyperparameters the environment
  recommends (``SweepSpec.hparams(env)``; an agent's own entry before its kind's; empty when it
  recommends none)."""
  fn = getattr(envs.SWEEP_SPECS[env_name], "hparams", None)
  return {k: dict(v) for k, v in fn(env).items()} if fn is not None else {}


def _with_controls(c: SweepConfig, H: int, d: int) -> SweepConfig:
  """``controls``: rho = 0 added to the rho grid, each robust agent's nominal counterpart
  (``registry.NOMINAL``) and the ``uniform-random`` baseline added to the agents (idempotent)."""
  if not isinstance(c.controls, bool):
    raise SweepTypeError("controls", f"must be True or False, got {c.controls!r}")
  if not c.controls:
    return c
  agents = list(c.agents)
  robust = [a for a in agents if registry.get(a).robust]
  if not robust:
    raise _Error("controls", f"adds the controls of robust agents; none of {list(agents)} is "
                             "robust")
  for a in robust:
    nominal = registry.NOMINAL.get(a)
    if nominal is not None and nominal in agent_names() and nominal not in agents:
      agents.append(nominal)
  if "uniform-random" not in agents:
    agents.append("uniform-random")
  rho = list(c.rho) if isinstance(c.rho, (list, tuple)) else [c.rho]
  if all(np.ndim(r) == 0 for r in rho):
    if not any(float(r) == 0.0 for r in rho):
      rho.insert(0, 0.0)
  elif not any(np.all(np.asarray(r, np.float64) == 0) for r in rho):
    rho.insert(0, np.zeros((H, d)).tolist())
  return dataclasses.replace(c, agents=tuple(agents), rho=tuple(rho))


def _check_eval_modes(c: SweepConfig) -> tuple:
  """``eval_modes`` resolved: the environment's (``SweepSpec.eval_modes``) when None; names of
  ``EVAL_MODES`` in canonical order."""
  modes = c.eval_modes
  if modes is None:
    modes = getattr(envs.SWEEP_SPECS[c.env], "eval_modes", None) or ("played",)
  if isinstance(modes, str):
    raise SweepTypeError("eval_modes", f"must be a list of {', '.join(EVAL_MODES)}, got the "
                                       f"string {modes!r} (write eval_modes=({modes!r},))")
  modes = tuple(modes)
  bad = [m for m in modes if m not in EVAL_MODES]
  if bad or not modes:
    raise _Error("eval_modes", f"must be one or more of {', '.join(EVAL_MODES)}, got "
                               f"{list(modes)}")
  if len(set(modes)) != len(modes):
    raise _Error("eval_modes", f"duplicate mode in {list(modes)}")
  if "played" not in modes:
    raise _Error("eval_modes", "'played' (the final policy) is always evaluated; give "
                               "('played', 'greedy') for both")
  return tuple(m for m in EVAL_MODES if m in modes)


def _resolve_beta_lam(c: SweepConfig, env) -> tuple:
  """``(beta, lam, agent_hparams)``: the shared axes and the per-agent ones.

  Given values are checked; ``None`` takes, per agent, the environment's recommendation for it
  or its kind (``recommended_hparams``), else ``DEFAULT_BETA`` / ``DEFAULT_LAM``. When the agents that
  declare the hyperparameter resolve to one value it is the shared axis; otherwise each of them
  gets its own in ``agent_hparams`` (recorded in ``sweep.json``).
  """
  if not isinstance(c.agent_hparams, dict):
    raise SweepTypeError("agent_hparams", f"must be a dict, got {c.agent_hparams!r}")
  per = {}
  for a, axes in c.agent_hparams.items():
    if a not in c.agents:
      raise _Error("agent_hparams", f"{a!r} is not one of the agents {list(c.agents)}")
    if not isinstance(axes, dict):
      raise SweepTypeError("agent_hparams", f"{a}: must be a dict of beta / lam values, got "
                                            f"{axes!r}")
    out = {}
    for name, vals in axes.items():
      if name not in ("beta", "lam"):
        raise _Error("agent_hparams", f"{a}: only beta and lam have per-agent axes, got "
                                      f"{name!r}")
      if name not in registry.get(a).hparams:
        raise _Error("agent_hparams", f"{a} has no hyperparameter {name!r}")
      lo_open = name == "lam"
      out[name] = _floats(f"agent_hparams {a} {name}", vals, lo=0.0, lo_open=lo_open)
    per[a] = out
  rec = recommended_hparams(c.env, env)
  shared = {}
  for name, given, default in (("beta", c.beta, DEFAULT_BETA), ("lam", c.lam, DEFAULT_LAM)):
    if given is not None:
      shared[name] = _floats(name, given, lo=0.0, lo_open=name == "lam")
      continue
    users = [a for a in c.agents if name in registry.get(a).hparams and name not in per.get(a, {})]
    want = {a: (float(rec.get(a, rec.get(registry.get(a).kind, {})).get(name, default)),)
            for a in users}
    values = set(want.values())
    if len(values) <= 1:
      shared[name] = values.pop() if values else (default,)
    else:
      shared[name] = (default,)
      for a, v in want.items():
        if v != (default,):
          per.setdefault(a, {})[name] = v
  return shared["beta"], shared["lam"], {a: v for a, v in per.items() if v}


def agent_axis(config: SweepConfig, agent: str, name: str, spec=None) -> tuple:
  """The values of ``beta`` / ``lam`` that ``agent``'s settings take (its ``agent_hparams``, else
  the shared axis; ``(nan,)`` for an agent without the hyperparameter: a baseline). ``spec``: the
  agent's ``AgentSpec`` when at hand."""
  if name not in (spec if spec is not None else registry.get(agent)).hparams:
    return (float("nan"),)
  return tuple(config.agent_hparams.get(agent, {}).get(name, getattr(config, name)))


def _check_tune(c: SweepConfig) -> str | None:
  if c.tune is None:
    return None
  if c.tune not in TUNE_BY:
    raise _Error("tune", f"must be None or one of {', '.join(TUNE_BY)} (the policy whose source "
                         f"return selects beta and lambda), got {c.tune!r}")
  tuned = [a for a in c.agents if {"beta", "lam"} & set(registry.get(a).hparams)]
  if not tuned:
    raise _Error("tune", "selects beta and lambda; none of the agents has them")
  if not any(len(agent_axis(c, a, "beta")) * len(agent_axis(c, a, "lam")) > 1 for a in tuned):
    raise _Error("tune", "needs a grid to search: give several beta and/or lambda values "
                         "(--beta B1 B2 ... --lam L1 L2 ...)")
  return c.tune


def record_columns(config: SweepConfig) -> tuple:
  """The result columns of ``config.record`` (``<name>@<k>``), in order."""
  return tuple(f"{n}@{k}" for n in config.record for k in (config.record_at or ()))


def validate(config: SweepConfig) -> SweepConfig:
  """Checks every field on the host (nothing is compiled) and returns the resolved config.

  Resolved means: tuples everywhere, ``dtype`` filled in from JAX's current default. Raises
  ``SweepError`` (a ``ValueError``) whose message starts with the offending field (``"rho_at:
  ..."``); a string where a tuple is expected (``agents="dr-lsvi-ucb"``) is a
  ``SweepTypeError``, also a ``TypeError``.

  A sweep resolves its configuration once with ``resolve`` (this validation, then the environment,
  the agents and the grid's sources in one ``ResolvedSweep``).
  """
  return _validate(config)[0]


def _validate(config: SweepConfig) -> tuple:
  """``validate``'s work: ``(resolved config, environment, (behavior, provenance))``, the
  environment built once and the behavior parsed once (``resolve`` keeps them)."""
  c = config
  _check_types(c)
  plugins = _load_plugins(c.plugins)
  env = make_env(c)
  H, d = env.horizon, env.feature_dim
  if not c.agents:
    raise _Error("agents", f"needs at least one of {', '.join(agent_names())}")
  for a in c.agents:
    if a not in agent_names():
      raise _Error("agents", f"unknown agent {a!r}; registered agents: "
                             f"{', '.join(agent_names())}")
  if len(set(c.agents)) != len(c.agents):
    raise _Error("agents", f"duplicate agent in {list(c.agents)}")
  c = _with_controls(c, H, d)
  eval_modes = _check_eval_modes(c)
  for a in c.agents:  # a baseline that does not apply to the environment (zero-torque)
    if registry.get(a).kind == "baseline":
      try:
        registry.make(a, env)
      except ValueError as e:
        raise _Error("agents", f"{a}: {e}") from None
  for name in ("seeds", "episodes", "test_episodes"):
    v = getattr(c, name)
    if not _is_int(v) or v < 1:
      raise _Error(name, f"must be an integer >= 1, got {v!r}")
  traj = c.trajectories if isinstance(c.trajectories, (list, tuple)) else (c.trajectories,)
  if not traj or not all(_is_int(n) and n >= 1 for n in traj):
    raise _Error("trajectories", f"must be integers >= 1, got {list(traj)}")
  if len(set(traj)) != len(traj):
    raise _Error("trajectories", f"duplicate value in {list(traj)}")
  behavior = behavior_of(c, env)
  seed_ids = None
  if c.seed_ids is not None:
    ids = tuple(c.seed_ids) if isinstance(c.seed_ids, (list, tuple)) else (c.seed_ids,)
    if not ids or not all(_is_int(i) and 0 <= i < c.seeds for i in ids):
      raise _Error("seed_ids", f"must be integers in [0, {c.seeds - 1}] (seeds = {c.seeds}), "
                               f"got {list(ids)}")
    if len(set(ids)) != len(ids):
      raise _Error("seed_ids", f"duplicate seed in {list(ids)}")
    seed_ids = tuple(sorted(int(i) for i in ids))
  if not _is_int(c.seed) or not 0 <= c.seed < 2**31:
    raise _Error("seed", f"must be an integer in [0, 2^31), got {c.seed!r}")
  if c.chunk is not None and (not _is_int(c.chunk) or c.chunk < 1):
    raise _Error("chunk", f"must be a positive integer, got {c.chunk!r}")
  if c.memory_mb is not None:
    _floats("memory_mb", (c.memory_mb,), lo=0, lo_open=True)
  for name, allowed in (("bonus", BONUS_FORMS), ("clip", CLIP_FORMS),
                        ("tie_break", TIE_BREAKS)):
    if getattr(c, name) not in allowed:
      raise _Error(name, f"must be one of {', '.join(allowed)}, got {getattr(c, name)!r}")
  _check_settings(c)
  # rho: all scalars or all [H, d] arrays.
  rho_vals = c.rho if isinstance(c.rho, (list, tuple)) else (c.rho,)
  if not rho_vals:
    raise _Error("rho", "needs at least one value")
  arrays = [np.asarray(r, dtype=np.float64) for r in rho_vals]
  if all(a.ndim == 0 for a in arrays):
    rho = _floats("rho", rho_vals, lo=0.0, hi=1.0)
  elif all(a.shape == (H, d) for a in arrays):
    for a in arrays:
      if not np.all(np.isfinite(a)) or a.min() < 0 or a.max() > 1:
        raise _Error("rho", f"array entries must lie in [0, 1], got values in "
                            f"[{np.nanmin(a):g}, {np.nanmax(a):g}]")
    rho = tuple(tuple(tuple(float(x) for x in row) for row in a) for a in arrays)
  else:
    raise _Error("rho", f"give scalars in [0, 1] or [H, d] = [{H}, {d}] arrays, got shapes "
                        f"{[list(a.shape) for a in arrays]}")
  rho_at = None
  if c.rho_at is not None:
    if not all(np.ndim(r) == 0 for r in rho_vals):
      raise _Error("rho_at", "applies to scalar rho values only, not to [H, d] arrays")
    pos = tuple(c.rho_at)
    if not pos:
      raise _Error("rho_at", "needs at least one (h, i) position")
    out = []
    for p in pos:
      if (not isinstance(p, (list, tuple)) or len(p) != 2 or not all(_is_int(x) for x in p)
          or not (0 <= p[0] < H and 0 <= p[1] < d)):
        if isinstance(p, (list, tuple)) and len(p) == 2 and all(_is_int(x) for x in p):
          raise _Error("rho_at", f"rho_{{{p[0] + 1},{p[1] + 1}}} (0-indexed ({p[0]}, {p[1]})) is "
                                 f"outside [1, {H}] x [1, {d}] (1-indexed h in 1..H, i in 1..d)")
        raise _Error("rho_at", f"positions must be (h, i) integer pairs, got {p!r}")
      out.append((int(p[0]), int(p[1])))
    if len(set(out)) != len(out):
      raise _Error("rho_at", f"duplicate position in {out}")
    rho_at = tuple(out)
  beta, lam, agent_hparams = _resolve_beta_lam(c, env)
  reg_weight = _floats("reg_weight", c.reg_weight, lo=0.0, lo_open=True)
  hparams = _check_hparams(c)
  # Environment parameters.
  sources = {}
  for name, values in c.env_params.items():
    if name not in env_params(c.env):
      hint = " (a target parameter: use targets)" if name in ("q", "target") else ""
      raise _Error("env_params", f"unknown parameter {name!r} for {c.env}{hint}; sweepable: "
                                 f"{', '.join(env_params(c.env))}")
    vals = _floats(f"env_params {name}", values)
    if name == "instance":
      if not all(v == int(v) and 0 <= v < 2**31 for v in vals):
        raise _Error("env_params instance", f"must be integers in [0, 2^31), got {list(vals)}")
      vals = tuple(int(v) for v in vals)
    sources[name] = vals
  dtype = c.dtype
  current = "float64" if jax.config.jax_enable_x64 else "float32"
  if dtype is None:
    dtype = current
  if dtype not in ("float32", "float64"):
    raise _Error("dtype", f"must be float32 or float64, got {dtype!r}")
  if dtype != current:
    raise _Error("dtype", f"{dtype} requested but JAX computes in {current} (set "
                          f"jax.config.update('jax_enable_x64', {dtype == 'float64'}) first)")
  # Every combination of source values must be valid (checked before anything is compiled).
  combos = list(itertools.product(*sources.values())) or [()]
  for combo in combos:
    _check_source(env, c, dict(zip(sources, combo)), None, dtype)
  targets = None
  if c.targets is not None:
    if not env_targets(c.env):
      fams = ", ".join(f"{k} ({env_target(k)})" for k in env_names() if env_target(k))
      raise _Error("targets", f"environment {c.env} has no target family (targets exist for "
                              f"{fams})")
    t = tuple(c.targets)
    if len(t) != 4:
      raise _Error("targets", f"must be (name, start, stop, num), got {c.targets!r}")
    name, start, stop, num = t
    if name not in env_targets(c.env):
      raise _Error("targets", f"unknown target parameter {name!r} for {c.env}; use "
                              f"{' or '.join(map(repr, env_targets(c.env)))}")
    if not _is_int(num) or num < 1:
      raise _Error("targets", f"NUM must be an integer >= 1, got {num!r}")
    start, stop = _floats("targets", (start, stop))
    targets = (name, start, stop, int(num))
    grid = target_values(targets)
    for combo in combos:
      _check_source(env, c, dict(zip(sources, combo)), grid, dtype)
  record, record_at = _check_record(c, env)
  tune = _check_tune(dataclasses.replace(c, beta=beta, lam=lam, agent_hparams=agent_hparams))
  resolved = dataclasses.replace(
      c, record=record, record_at=record_at, agents=tuple(c.agents), seed_ids=seed_ids, rho=rho, rho_at=rho_at, beta=beta, lam=lam,
      trajectories=tuple(int(n) for n in traj), reg_weight=reg_weight,
      env_params=sources, targets=targets, dtype=dtype, env_args=dict(c.env_args),
      hparams=hparams, plugins=plugins,
      memory_mb=(float(c.memory_mb) if c.memory_mb is not None
                 else auto_memory_mb(jax.devices()[0])),
      save_returns=bool(c.save_returns), agent_hparams=agent_hparams, eval_modes=eval_modes,
      tune=tune)
  return resolved, env, behavior


# ---------------------------------------------------------------------------------------------
# The configuration resolved once: what the rest of a sweep reads.


def reward_option(name: str, env, spec=None) -> str | None:
  """``"regressed"`` for an agent with a ``reward`` option when ``env.reward_known`` is False (the
  environment has no known reward parameters: its ``theta`` is not the reward), else ``None``
  (the agent's default reward source). ``spec``: the agent's ``AgentSpec`` when at hand."""
  if getattr(env, "reward_known", True):
    return None
  if "reward" not in (spec if spec is not None else registry.get(name)).options:
    return None
  return "regressed"


def _make_agent(name: str, config: SweepConfig, env, spec=None):
  """The agent of ``name`` with the config's options: ``bonus`` is the bonus (online) or penalty
  (offline) form, ``clip`` the nominal online agent's clipping, ``tie_break`` for all.
  ``spec``: the agent's ``AgentSpec`` when at hand (``ResolvedSweep.specs``)."""
  spec = spec if spec is not None else registry.get(name)
  opts = {}
  for option, value in (("bonus", config.bonus), ("penalty", config.bonus),
                        ("clip", config.clip), ("tie_break", config.tie_break)):
    if option in spec.options:
      opts[option] = value
  if spec.kind == "baseline":
    return registry.make(name, env)
  reward = reward_option(name, env, spec)
  if reward is not None:
    opts["reward"] = reward
  if spec.kind == "online":
    opts["capacity"] = config.episodes
  # registry factories are lru-cached: equal configurations share compiled chunk programs.
  return registry.make(name, env, **opts)


def _built(name: str, config: SweepConfig, env, spec):
  """``_make_agent``; a plugin factory that raises is one error naming the agent and the options
  it was given (a built-in factory's error is a bug: raised as it is)."""
  try:
    return _make_agent(name, config, env, spec)
  except (TypeError, ValueError) as e:
    if registry.source(name) == registry.BUILTIN:
      raise
    hint = ""
    if re.search(r"unexpected keyword argument '(bonus|penalty)'", str(e)):
      hint = ("; the builders (offline.make_agent, lsvi.make_agent) take the bonus or penalty "
              "form as width=: map the option to it in the factory (docs/agents.md)")
    raise _Error("agents", f"{name}: its factory ({registry.source(name)}) failed for the "
                           f"sweep's options: {type(e).__name__}: {e}{hint}") from e


def _reward_source(name: str, env, spec=None) -> str | None:
  """The reward source agent ``name``'s sweep runs use (``registry.reward_source`` with its
  ``reward_option``): ``"theta"``, ``"regressed"`` or ``None`` (a plugin that declares none)."""
  r = reward_option(name, env, spec)
  return registry.reward_source(name, **({"reward": r} if r else {}))


def _width_name(agent) -> str | None:
  """The width of an agent's bonus (online) or penalty (offline) as built (``pieces.width_name``;
  ``None`` for an agent whose config names none)."""
  from drjax.agents import pieces  # pylint: disable=g-import-not-at-top
  cfg = getattr(agent, "config", None)
  w = getattr(cfg, "bonus", getattr(cfg, "penalty", None))
  return None if w is None else pieces.width_name(w)


@dataclasses.dataclass(frozen=True, eq=False)
class ResolvedSweep:
  """A sweep's configuration resolved once (``resolve``): the one value the rest of a sweep reads.

  ``sweeps.run`` and ``sweeps.merge`` resolve their configuration once; the layout, the settings
  tables, the chunk programs, the results files, the figure and ``sweep.json`` read this value
  instead of looking the environment, the agents or the grid up again.

  Attributes:
    config: the validated ``SweepConfig`` (``validate``'s result, what ``sweep.json`` records).
    env: the environment, built once (``make_env``).
    specs: ``{agent: AgentSpec}`` of the config's agents, in their order (the registry's).
    offline: whether an agent is offline (datasets, the ``trajectories`` column).
    agents: ``{agent: agent}`` built with the config's options (``bonus``, ``clip``,
      ``tie_break``, the reward source, the capacity of online agents).
    behavior: the offline agents' behavior policy (``drjax.policies.parse`` of
      ``config.behavior``; parsed for every config, as ``validate`` checks it).
    data: ``sweep.json``'s ``data`` entry (``_data_provenance``), or None without offline agents.
    target_mode: ``target_mode(config)``: how the chunk program builds the targets.
    targets: ``target_values(config.targets)`` (float64, as typed), or None.
    axes: ``{agent: {"beta": values, "lam": values}}`` (``agent_axis``; ``(nan,)`` for an agent
      without the hyperparameter).
    record_columns: ``record_columns(config)``.
    source_names: the swept source parameters (``config.env_params``' keys, in order).
    sources: every combination of their values, the first parameter slowest (``()`` once when
      none is swept): the source groups of the grid.
    source_params: the environment's params of each combination.
    source_columns: every sweepable parameter of the environment (``env_params``): a setting
      column each.
    source_defaults: the environment's default source parameters as typed (float64; empty for an
      environment whose instances are sampled).
    sampled: whether the source params are sampled from an ``instance`` seed (``sampled``).
    rewards: ``((agent, reward source), ...)``: ``"theta"`` (the environment's reward
      parameters) or ``"regressed"`` (``registry.reward_source``; ``None`` for a plugin that
      declares none).
    widths: ``((agent, width), ...)``: each agent's bonus (online) or penalty (offline) width
      as built (``pieces.width_name``: ``"paper"``, ``"notebook"``, ``"ellipsoid"`` or a custom
      width's ``module.qualname``; ``None`` for an agent whose config names none).
    policy_files: the SHA-256 of each policy file the behavior names (``policy_file_hashes``).
    config_dict: ``config.to_dict()``, what ``sweep.json`` and the results' metadata record.
    hash: the sweep's identity (``storage.config_hash``), in its chunk files and ``sweep.json``.
  """

  config: SweepConfig
  env: object
  specs: dict
  offline: bool
  agents: dict
  behavior: object
  data: dict | None
  target_mode: str
  targets: np.ndarray | None
  axes: dict
  record_columns: tuple
  source_names: tuple
  sources: tuple
  source_params: tuple
  source_columns: tuple
  source_defaults: dict
  sampled: bool
  rewards: tuple
  widths: tuple
  policy_files: tuple
  config_dict: dict
  hash: str

  def with_layout(self, config: SweepConfig) -> ResolvedSweep:
    """This value for ``config``, the same sweep with another chunk layout (``chunk``,
    ``memory_mb``: ``storage.stored_layout``), nothing else differing."""
    d = config.to_dict()
    return dataclasses.replace(self, config=config, config_dict=d,
                               hash=_identity_hash(d, config.env_params, self.policy_files))


def resolve(config: SweepConfig) -> ResolvedSweep:
  """Validates ``config`` (``validate``) and resolves it once into a ``ResolvedSweep``.

  The environment is built once (by the validation), the agents are looked up and built once,
  the behavior parsed once and the source parameters' grid computed once. Raises what
  ``validate`` raises.
  """
  c, env, behavior = _validate(config)
  return _resolved(c, env, behavior)


def _resolved(config: SweepConfig, env=None, behavior=None) -> ResolvedSweep:
  """The ``ResolvedSweep`` of an already validated ``config`` (no checks), with its environment
  and ``behavior_of`` result when at hand (else built here)."""
  c = config
  env = env if env is not None else make_env(c)
  behavior = behavior if behavior is not None else behavior_of(c, env)
  specs = {a: registry.get(a) for a in c.agents}
  agents = {a: _built(a, c, env, s) for a, s in specs.items()}
  axes = {a: {n: agent_axis(c, a, n, s) for n in ("beta", "lam")} for a, s in specs.items()}
  names = tuple(c.env_params)
  sources = tuple(itertools.product(*[c.env_params[n] for n in names]))
  try:
    data = _data_provenance(c, env, specs, behavior[1])
  except (ValueError, TypeError) as e:  # e.g. a policy file removed before a merge
    data = {"behavior": {"spec": c.behavior, "error": str(e)}}
  is_sampled = sampled(c.env)
  files, d = tuple(policy_file_hashes(c)), c.to_dict()
  return ResolvedSweep(
      config=c, env=env, specs=specs,
      offline=any(s.kind == "offline" for s in specs.values()), agents=agents,
      behavior=behavior[0], data=data,
      target_mode=target_mode(c), targets=target_values(c.targets) if c.targets else None,
      axes=axes, record_columns=record_columns(c), source_names=names, sources=sources,
      source_params=tuple(_source_params(env, c, dict(zip(names, e))) for e in sources),
      source_columns=tuple(env_params(c.env)),
      source_defaults=_source_defaults(env) if not is_sampled else {}, sampled=is_sampled,
      rewards=tuple((a, _reward_source(a, env, s)) for a, s in specs.items()),
      widths=tuple((a, _width_name(x)) for a, x in agents.items()),
      policy_files=files, config_dict=d, hash=_identity_hash(d, c.env_params, files))
