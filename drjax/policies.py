"""Saved policies and the behaviors built from them: epsilon-greedy data around a learned
Q-function, mixtures of behaviors, and the sweep's ``behavior`` strings.

A **policy file** (``.npz``, format ``drjax-policy/1``) holds one learned ``QFunction`` -- an
online agent's final Q-function (``make_train(...).final_qf``) or an offline agent's fit -- or a
stack of them (a leading policy axis ``[P]``, e.g. one per seed):

* ``w [P?, H, d]``: the linear weights (``theta + nu``, or the ridge solution);
* ``pinv [P?, H, d, d]``: ``Lambda_h^-1`` (the bonus / penalty's matrix);
* ``beta [P?]``: the bonus / penalty multiplier; ``top [P?, H]``: the truncation level per step;
* ``nu [P?, H, d]``, ``alpha [P?, H, d]``: the robust regression weights and the TV dual's
  maximizing alpha (zeros for nominal agents);

plus ``__meta__``, a JSON string: ``format``, ``horizon``, ``feature_dim``, ``num_actions``,
``num_policies`` (P, 0 without a policy axis), ``agent`` (the registry name, or ``None``),
``options`` (the agent's static options, so ``mode="played"`` can rebuild it) and ``metadata``
(free provenance: environment, params, hyperparameters, key, episodes...). ``save`` writes one,
``load`` reads it (shapes checked), ``file_hash`` is its SHA-256 (recorded by the sweeps).

Behaviors (``(key, phi_all [A, d], h) -> action``, as ``drjax.data``'s):

* ``epsilon_greedy(qf, epsilon, num_actions)``: greedy in ``phi^T w_h`` (``mode="greedy"``: the
  bonus-free greedy policy of the learned weights, ties to the lowest index) with probability
  ``1 - epsilon``, uniform otherwise; ``act=agent.act`` acts as the agent does (``"played"``: with
  its bonus or penalty and truncation).
* ``mixture(behaviors, weights)``: each *trajectory* follows one component, drawn i.i.d. with
  probabilities ``weights`` from the trajectory's key (so the dataset stays i.i.d. trajectories of
  one behavior, the mixture; the fraction from each component is ``weights`` in expectation).
* ``parse(spec, env)``: the sweep's ``--behavior`` grammar (``uniform``, ``fixed:A``,
  ``eps-greedy:file=PATH,eps=E[,mode=greedy|played][,index=I]``,
  ``mix:W1*SPEC1+W2*SPEC2...``) -> ``(behavior, provenance)``.

``learn(env, agent, hparams, params, key, ...)`` is stage 1 of the two-stage recipe (a learned
source policy, then data around it): it trains an online agent (``episodes``) or fits an offline
one (``trajectories``) in the source and returns its final ``QFunction``; ``save`` writes it.
``drjax.sweeps.save_policies(config, path)`` (``drjax sweep ... --save-policies PATH``) does the
same for a sweep configuration with one agent and one setting, one policy per seed, with the
sweep's keys (in the sweeps package, above this module).
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
from typing import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from drjax import _checks
from drjax import _io
from drjax import data as data_lib
from drjax.agents.base import QFunction

FORMAT = "drjax-policy/1"
FIELDS = QFunction._fields  # ("w", "pinv", "beta", "top", "nu", "alpha")
MODES = ("greedy", "played")

__all__ = ["save", "load", "file_hash", "epsilon_greedy", "mixture", "Mixture", "parse", "learn",
           "greedy_action", "FORMAT", "MODES"]


# ---------------------------------------------------------------------------------------------
# Files.


def save(path: str | os.PathLike, qf: QFunction, num_actions: int, *, agent: str | None = None,
         options: dict | None = None, metadata: dict | None = None) -> None:
  """Writes ``qf`` (one ``QFunction``, or a stack with a leading policy axis) to ``path``.

  Args:
    path: the ``.npz`` file (written atomically).
    qf: a ``QFunction`` (``final_qf`` of ``make_train`` / ``make_fit``, or ``agent.fit``'s).
    num_actions: A (the features' action axis; checked on load against an environment).
    agent: the agent's registry name (``"lsvi-ucb"``), needed for ``mode="played"``.
    options: the agent's static options (``registry.make(agent, env, **options)``).
    metadata: JSON-serializable provenance (environment, params, hyperparameters, key, ...).
  """
  _check_path(path)
  _checks.instance("qf", qf, QFunction, "a drjax QFunction (final_qf of make_train / make_fit)")
  A = _checks.integer("num_actions", num_actions, 1)
  if agent is not None and not isinstance(agent, str):
    raise TypeError(f"agent must be a registry name (str) or None, got {type(agent).__name__}")
  for name, x in (("options", options), ("metadata", metadata)):
    if x is not None and not isinstance(x, dict):
      raise TypeError(f"{name} must be a dict (JSON-serializable) or None, got "
                      f"{type(x).__name__}")
    try:
      json.dumps(x or {})
    except (TypeError, ValueError) as e:
      raise TypeError(f"{name} must be JSON-serializable: {e}") from None
  arrays = {f: np.asarray(x) for f, x in zip(FIELDS, qf)}
  w = arrays["w"]
  if w.ndim not in (2, 3):
    raise ValueError(f"qf.w must have shape [H, d] or [P, H, d], got {list(w.shape)}")
  lead = w.shape[:-2]
  H, d = w.shape[-2:]
  want = {"pinv": lead + (H, d, d), "beta": lead, "top": lead + (H,), "nu": lead + (H, d),
          "alpha": lead + (H, d)}
  for f, shape in want.items():
    if arrays[f].shape != shape:
      raise ValueError(f"qf.{f} must have shape {list(shape)} for w {list(w.shape)}, got "
                       f"{list(arrays[f].shape)}")
  meta = {"format": FORMAT, "horizon": int(H), "feature_dim": int(d), "num_actions": A,
          "num_policies": int(lead[0]) if lead else 0, "agent": agent,
          "options": options or {}, "metadata": metadata or {}}
  with _io.atomic_path(os.fspath(path), prefix=".policy-", suffix=".npz") as tmp:
    with open(tmp, "wb") as f:
      np.savez(f, __meta__=np.asarray(json.dumps(meta)), **arrays)


def load(path: str | os.PathLike, *, env=None, index: int | None = None
         ) -> tuple[QFunction, dict]:
  """``(qf, meta)`` from a file written by ``save``.

  ``env``: checks (H, d, A) against the environment. ``index``: one policy of a stacked file
  (``0 <= index < P``); a stacked file without ``index`` returns the stack.
  """
  _check_path(path)
  p = os.fspath(path)
  if not os.path.isfile(p):
    raise ValueError(f"policy file {p!r} does not exist")
  try:
    z = np.load(p, allow_pickle=False)
  except (OSError, ValueError) as e:
    raise ValueError(f"{p}: not a drjax policy file ({e})") from None
  with z:
    missing = [f for f in FIELDS + ("__meta__",) if f not in z.files]
    if missing:
      raise ValueError(f"{p}: not a drjax policy file, missing arrays {missing}")
    meta = json.loads(str(z["__meta__"]))
    if meta.get("format") != FORMAT:
      raise ValueError(f"{p}: unknown policy format {meta.get('format')!r}, expected {FORMAT!r}")
    arrays = {f: np.asarray(z[f]) for f in FIELDS}
  P = meta.get("num_policies", 0)
  if index is not None:
    if not P:
      if index != 0:
        raise ValueError(f"index: {p} holds one policy (index 0), got {index}")
    else:
      index = _checks.integer("index", index, 0)
      if index >= P:
        raise ValueError(f"index must lie in [0, {P - 1}] ({p} holds {P} policies), got {index}")
      arrays = {f: x[index] for f, x in arrays.items()}
  qf = QFunction(**{f: jnp.asarray(x) for f, x in arrays.items()})
  if env is not None:
    _checks.environment("env", env)
    got = (meta["horizon"], meta["feature_dim"], meta["num_actions"])
    want = (env.horizon, env.feature_dim, env.num_actions)
    if got != want:
      raise ValueError(f"{p}: the policy's (H, d, A) = {got} does not match the environment's "
                       f"{want}")
  return qf, meta


@functools.lru_cache(maxsize=64)
def _hash(path: str, mtime_ns: int, size: int) -> str:
  h = hashlib.sha256()
  with open(path, "rb") as f:
    for block in iter(lambda: f.read(1 << 20), b""):
      h.update(block)
  return h.hexdigest()


def file_hash(path: str | os.PathLike) -> str:
  """The SHA-256 of the file's bytes (hex)."""
  _check_path(path)
  p = os.path.abspath(os.fspath(path))
  st = os.stat(p)
  return _hash(p, st.st_mtime_ns, st.st_size)


def _check_path(path) -> None:
  if not isinstance(path, (str, os.PathLike)):
    raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}")


# ---------------------------------------------------------------------------------------------
# Behaviors.


def greedy_action(qf: QFunction, h, phi_all):
  """``argmax_a phi_all[a] @ w_h`` (the bonus-free greedy action; ties to the lowest index)."""
  w = jnp.asarray(qf.w)[h]
  return jnp.argmax(phi_all @ w.astype(phi_all.dtype)).astype(jnp.int32)


def epsilon_greedy(qf: QFunction, epsilon, num_actions: int, *, act: Callable | None = None
                   ) -> Callable:
  """Behavior ``(key, phi_all, h) -> action``: greedy w.p. ``1 - epsilon``, uniform otherwise.

  Greedy in ``phi^T w_h`` (``greedy_action``), or ``act(qf, h, phi_all, False)`` when ``act`` is
  given (``agent.act``: the agent's own action, bonus or penalty included). ``epsilon`` in [0, 1]
  may be traced.
  """
  _checks.instance("qf", qf, QFunction, "a drjax QFunction")
  A = _checks.integer("num_actions", num_actions, 1)
  _checks.array("epsilon", epsilon, ())
  if _checks.is_concrete(epsilon):
    _checks.in_range("epsilon", epsilon, 0, 1)
  if act is not None:
    _checks.function("act", act, "(qf, h, phi_all, fail) -> action")
  if act is None:  # only w is needed (a small constant in the compiled program)
    qf = qf._replace(pinv=jnp.zeros((0,)), nu=jnp.zeros((0,)), alpha=jnp.zeros((0,)))

  def behavior(key, phi_all, h):
    k1, k2 = jax.random.split(key)
    greedy = (greedy_action(qf, h, phi_all) if act is None
              else act(qf, h, phi_all, jnp.asarray(False)))
    explore = jax.random.uniform(k1, ()) < epsilon
    return jnp.where(explore, jax.random.randint(k2, (), 0, A, dtype=jnp.int32),
                     greedy).astype(jnp.int32)

  behavior.epsilon = epsilon
  return behavior


class Mixture:
  """A mixture of behaviors: each trajectory follows one component, drawn with ``weights``.

  ``drjax.data.collect`` calls ``bind(key)`` once per trajectory (with a key of its own, so the
  components' draws are those they would make alone); called directly, as a per-step behavior, it
  draws the component at every step.
  """

  def __init__(self, behaviors: Sequence[Callable], weights: Sequence[float]):
    behaviors = tuple(behaviors)
    if not behaviors:
      raise ValueError("behaviors needs at least one behavior")
    for i, b in enumerate(behaviors):
      _checks.function(f"behaviors[{i}]", b, "(key, phi_all, h) -> action")
      if isinstance(b, Mixture):
        raise ValueError(f"behaviors[{i}]: a mixture cannot contain a mixture (flatten it)")
    w = np.asarray(weights, np.float64)
    if w.shape != (len(behaviors),):
      raise ValueError(f"weights must have one entry per behavior ({len(behaviors)}), got "
                       f"shape {list(w.shape)}")
    if not np.all(np.isfinite(w)) or np.any(w < 0) or not w.sum() > 0:
      raise ValueError(f"weights must be finite, >= 0 and not all 0, got {w.tolist()}")
    self.behaviors = behaviors
    self.weights = tuple(float(x) for x in w / w.sum())

  def component(self, key):
    """The component index of the trajectory with mixture key ``key``."""
    return jax.random.choice(key, len(self.behaviors), p=jnp.asarray(self.weights)).astype(
        jnp.int32)

  def bind(self, key) -> Callable:
    k = self.component(key)

    def behavior(kb, phi_all, h):
      branches = [lambda kb_, p_, h_, b=b: jnp.asarray(b(kb_, p_, h_), jnp.int32)
                  for b in self.behaviors]
      return jax.lax.switch(k, branches, kb, phi_all, h)

    return behavior

  def __call__(self, key, phi_all, h):
    km, kb = jax.random.split(key)
    return self.bind(km)(kb, phi_all, h)


def mixture(behaviors: Sequence[Callable], weights: Sequence[float]) -> Mixture:
  """``Mixture(behaviors, weights)`` (weights normalized to sum to 1)."""
  return Mixture(behaviors, weights)


# ---------------------------------------------------------------------------------------------
# The sweep's behavior strings.


def _error(msg: str):
  from drjax.sweeps.errors import _Error  # pylint: disable=g-import-not-at-top
  return _Error("behavior", msg)


def _kv(body: str, spec: str) -> dict:
  out = {}
  for part in body.split(","):
    if "=" not in part:
      raise _error(f"expected key=value pairs separated by commas, got {part!r} in {spec!r}")
    k, v = part.split("=", 1)
    out[k.strip()] = v.strip()
  return out


def parse(spec: str, env) -> tuple[Callable, dict]:
  """The behavior of a sweep's ``--behavior`` string and its provenance (JSON-ready).

  * ``uniform``; ``fixed:A`` (always action A);
  * ``eps-greedy:file=PATH,eps=E[,mode=greedy|played][,index=I]``: epsilon-greedy around the
    policy saved in ``PATH`` (``save``), greedy in ``phi^T w`` (``mode=greedy``, default) or as
    the saved agent acts (``played``: rebuilt with ``registry.make(agent, env, **options)``);
    ``index``: which policy of a stacked file (default 0), or ``all``: each trajectory around one
    of the file's P policies, drawn uniformly (a mixture);
  * ``mix:W1*SPEC1+W2*SPEC2+...``: a mixture, each trajectory from component k with probability
    ``Wk / sum W`` (components are any of the above; a path may not contain ``+``).

  Raises ``ValueError`` naming ``behavior`` for a malformed string, a missing or mismatched file,
  or a value out of range. Cached by (spec, env, the files' hashes).
  """
  if not isinstance(spec, str):
    raise _error(f"must be a string, got {type(spec).__name__}")
  files = tuple(file_hash(p) if os.path.isfile(p) else None for p in _files(spec))
  return _parse(spec, env, files)


def _files(spec: str) -> list:
  out = []
  for part in (spec[4:].split("+") if spec.startswith("mix:") else [spec]):
    body = part.split("*", 1)[-1] if spec.startswith("mix:") else part
    if body.startswith("eps-greedy:"):
      try:
        kv = _kv(body[len("eps-greedy:"):], spec)
      except ValueError:
        continue
      if "file" in kv:
        out.append(kv["file"])
  return out


@functools.lru_cache(maxsize=64)
def _parse(spec: str, env, hashes) -> tuple[Callable, dict]:
  del hashes  # part of the cache key only: a changed file is parsed again
  if spec.startswith("mix:"):
    comps, weights, prov, shares = [], [], [], []
    for part in spec[len("mix:"):].split("+"):
      if "*" not in part:
        raise _error(f"mix: components are WEIGHT*SPEC joined by '+', got {part!r} in {spec!r}")
      w, sub = part.split("*", 1)
      try:
        w = float(w)
      except ValueError:
        raise _error(f"mix: weight {w!r} is not a number in {spec!r}") from None
      if not (math.isfinite(w) and w > 0):
        raise _error(f"mix: weights must be > 0, got {w!r} in {spec!r}")
      if sub.startswith("mix:"):
        raise _error(f"mix: components cannot be mixtures, got {sub!r}")
      b, p = _one(sub.strip(), env)
      prov.append(p)
      shares.append(w)
      if isinstance(b, Mixture):  # index=all: its components, each with its share of w
        comps.extend(b.behaviors)
        weights.extend(w * x for x in b.weights)
      else:
        comps.append(b)
        weights.append(w)
    mix = Mixture(comps, weights)
    for p, w in zip(prov, shares):
      p["weight"] = w / sum(shares)
    return mix, {"spec": spec, "kind": "mix", "components": prov,
                 "assignment": "each trajectory's component drawn i.i.d. with the weights"}
  b, p = _one(spec, env)
  return b, {"spec": spec, **p}


def _one(spec: str, env) -> tuple[Callable, dict]:
  A = env.num_actions
  if spec == "uniform":
    return data_lib.uniform(A), {"kind": "uniform"}
  if spec.startswith("fixed:"):
    try:
      a = int(spec[len("fixed:"):])
    except ValueError:
      a = -1
    if 0 <= a < A:
      return data_lib.fixed(a), {"kind": "fixed", "action": a}
    raise _error(f"fixed:A needs an action A in [0, {A - 1}], got {spec!r}")
  if spec.startswith("eps-greedy:"):
    kv = _kv(spec[len("eps-greedy:"):], spec)
    bad = sorted(set(kv) - {"file", "eps", "mode", "index"})
    if bad:
      raise _error(f"eps-greedy: unknown key(s) {bad} (allowed: file, eps, mode, index)")
    if "file" not in kv or "eps" not in kv:
      raise _error(f"eps-greedy needs file=PATH and eps=E, got {spec!r}")
    try:
      eps = float(kv["eps"])
    except ValueError:
      eps = float("nan")
    if not 0 <= eps <= 1:
      raise _error(f"eps-greedy: eps must lie in [0, 1], got {kv['eps']!r}")
    mode = kv.get("mode", "greedy")
    if mode not in MODES:
      raise _error(f"eps-greedy: mode must be one of {', '.join(MODES)}, got {mode!r}")
    every = kv.get("index") == "all"
    try:
      index = None if every else int(kv.get("index", "0"))
    except ValueError:
      raise _error(f"eps-greedy: index must be an integer or 'all', got {kv['index']!r}") from None
    path = kv["file"]
    try:
      qf, meta = load(path, env=env, index=index)
    except (ValueError, TypeError) as e:
      raise _error(f"eps-greedy: {e}") from None
    act = None
    if mode == "played":
      if not meta.get("agent"):
        raise _error(f"eps-greedy: mode=played needs the agent's registry name in {path} "
                     "(policies.save(..., agent=NAME, options=...))")
      from drjax.agents import registry  # pylint: disable=g-import-not-at-top
      opts = dict(meta.get("options") or {})
      if registry.get(meta["agent"]).kind == "online":
        opts.setdefault("capacity", 1)  # act does not depend on the buffer's capacity
      act = registry.make(meta["agent"], env, **opts).act
    dtype = jnp.result_type(float)
    qf = jax.tree_util.tree_map(lambda x: jnp.asarray(x, dtype), qf)
    prov = {"kind": "eps-greedy", "eps": eps, "mode": mode, "file": os.path.abspath(path),
            "sha256": file_hash(path), "index": "all" if every else index,
            "num_policies": meta.get("num_policies", 0), "policy_agent": meta.get("agent"),
            "policy_metadata": meta.get("metadata", {})}
    if qf.w.ndim == 2:
      return epsilon_greedy(qf, eps, A, act=act), prov
    # index=all on a stack: each trajectory around one of the P policies, drawn uniformly
    P = qf.w.shape[0]
    comps = [epsilon_greedy(jax.tree_util.tree_map(lambda x, i=i: x[i], qf), eps, A, act=act)
             for i in range(P)]
    return Mixture(comps, [1.0] * P), prov
  raise _error(f"must be 'uniform', 'fixed:A', 'eps-greedy:file=PATH,eps=E' or "
               f"'mix:W1*SPEC1+W2*SPEC2', got {spec!r}")


# ---------------------------------------------------------------------------------------------
# Stage 1: a policy learned in the source.


def learn(env, agent, hparams, params, key, *, episodes: int | None = None,
          trajectories: int | None = None, behavior: Callable | None = None) -> QFunction:
  """The final ``QFunction`` of ``agent`` learned in ``env`` at ``params`` (the source).

  Online agents train for ``episodes`` (``drjax.train.make_train``); offline agents fit to
  ``trajectories`` collected under ``behavior`` (default uniform; ``drjax.train.make_fit``).
  ``key`` with a leading axis (``jax.random.split``) learns one policy per key (a stack: ``save``
  writes it with a policy axis).
  """
  from drjax import train  # pylint: disable=g-import-not-at-top
  offline = getattr(agent, "kind", "online") == "offline"
  if offline:
    n = _checks.integer("trajectories", trajectories, 1)
    run = train.make_fit(env, agent, n, behavior)
  else:
    k = _checks.integer("episodes", episodes, 1)
    run = train.make_train(env, agent, k, outputs=("final_qf",))
  one = lambda kk: run(kk, hparams, params).final_qf  # noqa: E731
  typed = jnp.issubdtype(key.dtype, jax.dtypes.prng_key)
  if key.ndim > (0 if typed else 1):  # a stack of keys: one policy each
    return jax.jit(jax.vmap(one))(key)
  return jax.jit(one)(key)
