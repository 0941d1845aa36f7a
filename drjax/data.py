"""Offline datasets: K i.i.d. trajectories of an environment under a behavior policy.

The offline algorithms (PEVI, DRPVI, VA-DRPVI; ``drjax.agents.offline``) fit a Q-function to a
fixed ``Dataset`` in one backward induction. A dataset is a pytree, so ``collect`` and every
``fit`` are jit/vmap-able over seeds (a leading axis on every leaf).

* ``collect(env, params, behavior, key, num_trajectories)``: trajectories from ``env.reset`` /
  ``env.step`` (trajectory n uses ``jax.random.fold_in(key, n)``, so the first n trajectories of
  a larger collection are the collection of n: datasets of several sizes are nested).
* behavior policies ``(key, phi_all [A, d], h) -> action``: ``uniform``, ``fixed``,
  ``epsilon_greedy`` around a learned Q-function, or any function of that signature; a behavior
  with a ``bind(key)`` method (``drjax.policies.Mixture``) is bound once per trajectory (each
  trajectory follows one component). Saved policies and the sweep's behavior strings:
  ``drjax.policies``.
* ``save`` / ``load``: one ``.npz`` file (format ``drjax-dataset/1``), shapes checked against an
  environment or agent on load; ``check_dataset`` does the same for a dataset in memory.
* ``split(dataset, n)``: the first n trajectories and the rest (a pilot for VA-DRPVI).

Layout (step-major, N trajectories, 0-indexed steps h = 0..H-1, so row h is the paper's h + 1):
``phi [H, N, d]`` features of the action taken at ``s_h``; ``action [H, N]``; ``reward [H, N]``;
``next_phi [H, N, A, d]`` features of every action at ``s_{h+1}``; ``next_fail [H, N]``;
``state``/``next_state [H, N]`` integer state indices (finite environments; -1 otherwise);
``theta [H, d]`` the known reward parameters; ``valid [N]`` which trajectories are used.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from drjax import _checks
from drjax import _io
from drjax._precision import exact_matmuls
from drjax._checks import check_int

Array = jax.Array

FORMAT = "drjax-dataset/1"
FIELDS = ("phi", "action", "reward", "next_phi", "next_fail", "state", "next_state", "theta",
          "valid")

__all__ = ["Dataset", "collect", "uniform", "fixed", "epsilon_greedy", "save", "load", "split",
           "check_dataset", "num_trajectories", "with_size"]


class Dataset(NamedTuple):
  """N trajectories of horizon H (see the module docstring for the layout).

  Attributes:
    phi: ``[H, N, d]`` features of the action taken at step h.
    action: ``[H, N]`` int32 actions.
    reward: ``[H, N]`` rewards.
    next_phi: ``[H, N, A, d]`` features of every action at the next state.
    next_fail: ``[H, N]`` bool, the next state is the fail state.
    state: ``[H, N]`` int32 state index at step h (-1 for environments without one).
    next_state: ``[H, N]`` int32 index of the next state (-1 without one).
    theta: ``[H, d]`` known reward parameters (the robust algorithms use them; PEVI regresses the
      observed rewards instead).
    valid: ``[N]`` bool, trajectories in use (the others are ignored entirely); ``with_size``
      keeps the first n, so one compiled fit serves every dataset size of a sweep.
  """

  phi: Array
  action: Array
  reward: Array
  next_phi: Array
  next_fail: Array
  state: Array
  next_state: Array
  theta: Array
  valid: Array


# ---------------------------------------------------------------------------------------------
# Behavior policies: (key, phi_all [A, d], h) -> int32 action.


@dataclasses.dataclass(frozen=True)
class _Uniform:
  """``uniform``'s behavior: equal (and hashing equal) for equal ``num_actions``, so a new
  ``uniform(A)`` reuses ``collect``'s compiled program (it is a static argument)."""
  num_actions: int

  def __call__(self, key, phi_all, h):
    del phi_all, h
    return jax.random.randint(key, (), 0, self.num_actions, dtype=jnp.int32)


@dataclasses.dataclass(frozen=True)
class _Fixed:
  """``fixed``'s behavior, equal for equal ``action`` (as ``_Uniform``)."""
  action: int

  def __call__(self, key, phi_all, h):
    del key, phi_all, h
    return jnp.asarray(self.action, jnp.int32)


def uniform(num_actions: int) -> Callable:
  """Uniform over the ``num_actions`` actions (the DRPVI paper's behavior on the linear MDP).

  Two calls with the same ``num_actions`` give equal behaviors, so ``collect`` compiles once for
  both."""
  return _Uniform(check_int("num_actions", num_actions))


def fixed(action: int) -> Callable:
  """Always ``action``, a 0-based action index ``>= 0`` (the R2PVI put-option code always holds;
  ``collect`` checks it against the environment's ``[0, A - 1]``). Equal for equal ``action``
  (one compiled ``collect``, as ``uniform``)."""
  return _Fixed(_checks.integer("action", action, 0))


def epsilon_greedy(agent, qf, epsilon) -> Callable:
  """Greedy in ``agent``'s Q-function ``qf`` w.p. ``1 - epsilon``, uniform otherwise.

  ``epsilon`` may be traced (a sweepable behavior parameter); the fail flag given to
  ``agent.act`` is False (behavior policies see features only).
  """
  _checks.agent("agent", agent)
  _checks.qfunction("qf", qf, agent.config.horizon, agent.config.feature_dim)
  _checks.array("epsilon", epsilon, ())
  _checks.in_range("epsilon", epsilon, 0, 1)
  A = agent.config.num_actions

  def behavior(key, phi_all, h):
    k1, k2 = jax.random.split(key)
    greedy = agent.act(qf, h, phi_all, jnp.asarray(False))
    explore = jax.random.uniform(k1, ()) < epsilon
    return jnp.where(explore, jax.random.randint(k2, (), 0, A, dtype=jnp.int32),
                     greedy).astype(jnp.int32)

  return behavior


# ---------------------------------------------------------------------------------------------
# Collection.


def _trajectory(env, params, behavior, key):
  H = env.horizon
  if hasattr(behavior, "bind"):  # a mixture (drjax.policies.Mixture): one component per trajectory
    behavior = behavior.bind(jax.random.fold_in(key, 0x6D6978))
  k_reset, k_steps = jax.random.split(key)
  s0 = env.reset(k_reset, params)

  def step(s, xs):
    h, k = xs
    kb, ke = jax.random.split(k)
    phi_all = env.phi_all(s, params)
    a = jnp.asarray(behavior(kb, phi_all, h), jnp.int32)
    s2, r, _ = env.step(ke, s, a, params)
    out = (phi_all[jnp.clip(a, 0, env.num_actions - 1)], a, r, env.phi_all(s2, params),
           env.is_fail(s2, params), jnp.asarray(getattr(s, "s", -1), jnp.int32),
           jnp.asarray(getattr(s2, "s", -1), jnp.int32))
    return s2, out

  _, ys = jax.lax.scan(step, s0, (jnp.arange(H), jax.random.split(k_steps, H)))
  return ys


def _collect(env, params, behavior, key, n):
  keys = jax.vmap(lambda i: jax.random.fold_in(key, i))(jnp.arange(n))
  ys = jax.vmap(lambda k: _trajectory(env, params, behavior, k))(keys)
  phi, a, r, nphi, nfail, s, s2 = (jnp.swapaxes(y, 0, 1) for y in ys)  # [H, N, ...]
  dtype = jnp.result_type(float)
  return Dataset(phi=phi.astype(dtype), action=a, reward=r.astype(dtype),
                 next_phi=nphi.astype(dtype), next_fail=nfail.astype(bool), state=s,
                 next_state=s2, theta=jnp.asarray(env.theta(params), dtype),
                 valid=jnp.ones((n,), bool))


def collect(env, params, behavior: Callable, key, num_trajectories: int, *,
            check: bool = True) -> Dataset:
  """``num_trajectories`` i.i.d. trajectories of ``env`` under ``behavior``.

  Jit/vmap-able (``env``, ``behavior`` and ``num_trajectories`` static): ``jax.vmap(lambda k:
  collect(env, params, behavior, k, N))(keys)`` gives one dataset per seed. Called with concrete
  arguments it validates first (``ValueError``/``TypeError`` naming the argument) and, with
  ``check``, verifies afterwards that every action the behavior returned lies in ``[0, A - 1]``
  (0-based).
  Under an outer ``jit``/``vmap`` that check cannot run: an out-of-range action is then recorded
  as returned and its features are those of the nearest valid index (documented, not checked).

  Args:
    env: an ``Environment``.
    params: its params (validated with ``env.validate`` when concrete).
    behavior: ``(key, phi_all [A, d], h) -> action`` (``uniform``, ``fixed``, ``epsilon_greedy``
      or your own pure JAX function).
    key: a JAX PRNG key; trajectory n uses ``fold_in(key, n)``.
    num_trajectories: N >= 1 (static).
    check: host-side check of the returned actions (concrete calls only).

  Returns:
    a ``Dataset`` with N trajectories.
  """
  _checks.environment("env", env)
  n = check_int("num_trajectories", num_trajectories)
  _checks.function("behavior", behavior, "(key, phi_all, h) -> action")
  check = _checks.boolean("check", check)
  _checks.key("key", key)
  if _checks.is_concrete(params, key):
    env.validate(params)
    _check_behavior(env, params, behavior, key)
    ds = _collect_jit(env, params, behavior, key, n)
    if check and _checks.is_concrete(ds.action):  # traced behavior parameters
      a = np.asarray(ds.action)
      bad = (a < 0) | (a >= env.num_actions)
      if bad.any():
        raise ValueError(f"behavior returned actions outside [0, {env.num_actions - 1}] "
                         f"(e.g. {int(a[bad][0])}) in {int(bad.sum())} of {a.size} steps")
    return ds
  return _collect(env, params, behavior, key, n)


_collect_jit = jax.jit(exact_matmuls(_collect), static_argnums=(0, 2, 4))


def _check_behavior(env, params, behavior, key) -> None:
  """The behavior's output must be one integer action (checked by abstract evaluation)."""
  phi = jax.ShapeDtypeStruct((env.num_actions, env.feature_dim), jnp.result_type(float))
  try:
    out = jax.eval_shape(behavior, key, phi, jnp.zeros((), jnp.int32))
  except Exception as e:  # pylint: disable=broad-except
    raise TypeError(f"behavior must be a pure JAX function (key, phi_all [A, d], h) -> action; "
                    f"calling it failed: {type(e).__name__}: {e}") from None
  if getattr(out, "shape", None) != () or not jnp.issubdtype(out.dtype, jnp.integer):
    raise TypeError(f"behavior must return one integer action (shape ()), got "
                    f"{getattr(out, 'dtype', type(out).__name__)}{getattr(out, 'shape', '')}")


# ---------------------------------------------------------------------------------------------
# Size, split, checks.


def num_trajectories(ds: Dataset) -> int:
  """N (the trajectory axis, including trajectories marked invalid)."""
  _check_ds(ds)
  return int(np.shape(ds.valid)[-1])


def with_size(ds: Dataset, n) -> Dataset:
  """The dataset restricted to its first ``n`` trajectories by the ``valid`` mask (``n`` may be
  traced: one compiled fit serves every size up to N; concrete: an integer in ``[0, N]``)."""
  _check_ds(ds)
  N = ds.valid.shape[-1]
  _checks.array("n", n, ())
  _checks.indices("n", n, N + 1, "sizes")
  return ds._replace(valid=jnp.logical_and(ds.valid, jnp.arange(N) < n))


def split(ds: Dataset, n: int) -> tuple[Dataset, Dataset]:
  """``(first n trajectories, the other N - n)``: independent halves of an i.i.d. collection
  (e.g. VA-DRPVI's pilot dataset D' and its main dataset D)."""
  _check_ds(ds)
  N = num_trajectories(ds)
  n = check_int("n", n)
  if n >= N:
    raise ValueError(f"n must lie in [1, {N - 1}] to leave trajectories on both sides, got {n}")

  def part(sl):
    return Dataset(*(x if f == "theta" else (x[sl] if f == "valid" else x[:, sl])
                     for f, x in zip(FIELDS, ds)))

  return part(slice(0, n)), part(slice(n, N))


def check_dataset(ds, horizon: int, feature_dim: int, num_actions: int,
                  name: str = "dataset") -> None:
  """Raises ``TypeError``/``ValueError`` naming ``name`` and the field when ``ds`` does not fit an
  environment or agent with (H, d, A); an empty dataset (no valid trajectory) is an error."""
  if not isinstance(name, str):
    raise TypeError(f"name must be a string, got {type(name).__name__}")
  horizon = check_int("horizon", horizon)
  feature_dim = check_int("feature_dim", feature_dim)
  num_actions = check_int("num_actions", num_actions)
  if not isinstance(ds, Dataset):
    raise TypeError(f"{name} must be a drjax.data.Dataset (collect / load), got "
                    f"{type(ds).__name__}")
  if not _checks.is_concrete(ds):
    return  # shapes are checked by the caller's tracing; values cannot be
  H, d, A = horizon, feature_dim, num_actions
  v = np.shape(ds.valid)
  if len(v) != 1:
    raise ValueError(f"{name}.valid must have shape [N], got {v} (vmap over a batch of datasets)")
  N = v[0]
  want = {"phi": (H, N, d), "action": (H, N), "reward": (H, N), "next_phi": (H, N, A, d),
          "next_fail": (H, N), "state": (H, N), "next_state": (H, N), "theta": (H, d)}
  for f, shape in want.items():
    got = tuple(np.shape(getattr(ds, f)))
    if got != shape:
      raise ValueError(f"{name}.{f} must have shape {list(shape)} for (H, N, d, A) = "
                       f"({H}, {N}, {d}, {A}), got {list(got)}")
  if N == 0:
    raise ValueError(f"{name} is empty: it needs at least one valid trajectory")
  # One fused pass on the device (no host copy of the arrays): any valid, finite fields, actions.
  anyv, finite, amin, amax = (np.asarray(x) for x in _summary(ds))
  if not anyv:
    raise ValueError(f"{name} is empty: it needs at least one valid trajectory")
  for f, ok in zip(("phi", "reward", "next_phi", "theta"), finite):
    if not ok:
      raise ValueError(f"{name}.{f} must be finite")
  if amin < 0 or amax >= A:
    raise ValueError(f"{name}.action must lie in [0, {A - 1}], got values in [{amin}, {amax}]")


@jax.jit
def _summary(ds: Dataset):
  finite = jnp.stack([jnp.all(jnp.isfinite(x)) for x in (ds.phi, ds.reward, ds.next_phi,
                                                         ds.theta)])
  return jnp.any(ds.valid), finite, jnp.min(ds.action), jnp.max(ds.action)


def _state_range(ds: Dataset, num_states: int, name: str) -> None:
  for f in ("state", "next_state"):
    s = np.asarray(getattr(ds, f))
    if s.size and (s.min() < 0 or s.max() >= num_states):
      raise ValueError(f"{name}.{f} must hold state indices in [0, {num_states - 1}] for the "
                       f"sufficient-statistics form, got values in [{s.min()}, {s.max()}] "
                       "(-1: collected from an environment without state indices)")


# ---------------------------------------------------------------------------------------------
# Files.


def save(path: str | os.PathLike, ds: Dataset, *, metadata: dict | None = None) -> None:
  """Writes ``ds`` to ``path`` (``.npz``, format ``drjax-dataset/1``) atomically.

  ``metadata``: JSON-serializable provenance stored with the arrays (environment, params,
  behavior, key...). A leading batch axis (a vmapped collection) is saved as is.
  """
  _check_path(path)
  _check_ds(ds)
  if metadata is not None and not isinstance(metadata, dict):
    raise TypeError(f"metadata must be a dict (JSON-serializable) or None, got "
                    f"{type(metadata).__name__}")
  try:
    json.dumps(metadata or {})
  except (TypeError, ValueError) as e:
    raise TypeError(f"metadata must be JSON-serializable: {e}") from None
  path = os.fspath(path)
  arrays = {f: np.asarray(x) for f, x in zip(FIELDS, ds)}
  meta = {"format": FORMAT, "fields": list(FIELDS), "metadata": metadata or {}}
  text = json.dumps(meta)
  with _io.atomic_path(path, prefix=".dataset-", suffix=".npz") as tmp:
    with open(tmp, "wb") as f:
      np.savez(f, __meta__=np.asarray(text), **arrays)


def load(path: str | os.PathLike, *, env=None, agent=None) -> tuple[Dataset, dict]:
  """Reads a dataset written by ``save`` (or by you: an ``.npz`` with the ``FIELDS`` arrays).

  Shapes are checked against ``env`` (``horizon``, ``feature_dim``, ``num_actions``) and/or
  ``agent`` (its ``config``) when given. Returns ``(dataset, metadata)``.
  """
  _check_path(path)
  if env is not None:
    _checks.environment("env", env)
  if agent is not None:
    _checks.agent("agent", agent)
  with np.load(os.fspath(path), allow_pickle=False) as z:
    missing = [f for f in FIELDS if f not in z.files]
    if missing:
      raise ValueError(f"{os.fspath(path)}: not a drjax dataset, missing arrays {missing} "
                       f"(expected {list(FIELDS)})")
    meta = json.loads(str(z["__meta__"])) if "__meta__" in z.files else {}
    if meta and meta.get("format") != FORMAT:
      raise ValueError(f"{os.fspath(path)}: unknown dataset format {meta.get('format')!r}, "
                       f"expected {FORMAT!r}")
    ds = Dataset(**{f: jnp.asarray(z[f]) for f in FIELDS})
  for what, obj in (("env", env), ("agent", agent)):
    if obj is None:
      continue
    dims = (obj.horizon, obj.feature_dim, obj.num_actions) if what == "env" else (
        obj.config.horizon, obj.config.feature_dim, obj.config.num_actions)
    check_dataset(ds, *dims, name=f"dataset {os.fspath(path)} (for the {what})")
  return ds, meta.get("metadata", {})


def _check_ds(ds, name: str = "ds") -> None:
  _checks.instance(name, ds, Dataset, "a drjax.data.Dataset (collect / load)")


def _check_path(path) -> None:
  if not isinstance(path, (str, os.PathLike)):
    raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}")

