"""What the engine, the sweeps and the evaluation call: typed protocols.

``make_train`` (``drjax.train``) drives an ``OnlineAgent``; ``make_fit`` and ``drjax.sweeps``
drive an ``OfflineAgent``; both kinds are acted on by ``drjax.evaluate`` through ``act`` (and
``q_values``) on the ``QFunction`` they return. Environments are ``Environment`` (sampled
episodes) or ``FiniteEnvironment`` (with an exact ``LinearModel``). The signatures below are
exactly the calls those functions make; ``docs/agents.md`` lists them, and a test keeps the two
and the built-in agents and environments in agreement (``tests/test_protocols.py``).

Every method is pure: states and Q-functions are pytrees, hyperparameters a traced
``NamedTuple`` (``hparams_type``), indices 0-based (step ``h`` in ``[0, H - 1]``).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import jax

Array = jax.Array


@runtime_checkable
class OnlineAgent(Protocol):
  """An online agent (``drjax.Agent``; DR-LSVI-UCB, LSVI-UCB, ``lsvi.make_agent``)."""

  name: str
  kind: str  # "online"
  config: Any  # horizon, feature_dim, num_actions, capacity (static)
  hparams_type: type

  def init(self, theta: Array, lam: Array | None = None, capacity: int | None = None) -> Any:
    """Empty buffer-form state (``AgentState``) with ``capacity`` episode slots."""

  def init_stats(self, theta: Array, num_states: int, lam: Array | None = None,
                 model: Any = None) -> Any:
    """Empty sufficient-statistics state (``StatsState``) of a finite environment."""

  def plan(self, state: Any, hparams: Any, model: Any = None, *, size: int | None = None,
           refactor: bool = False) -> Any:
    """The ``QFunction`` of the next episode: backward induction over the state's atoms.
    ``size``: plan over the first ``size`` buffer slots (static); ``refactor``: recompute
    ``Lambda^-1`` from the Gram matrix and ``hparams.lam``."""

  def act(self, qf: Any, h: Array, phi_all: Array, fail: Array) -> Array:
    """The greedy action (int32) at step ``h`` from the features ``phi_all [A, d]``."""

  def q_values(self, qf: Any, h: Array, phi_all: Array, fail: Array) -> Array:
    """``[..., A]`` the Q-values at ``phi_all [..., A, d]``."""

  def regression_features(self, phi_all: Array, a: Array) -> Array:
    """``[d]`` the regression row of a transition that took action ``a``."""

  def update(self, state: Any, phi: Array, reward: Array, next_phi: Array | None,
             next_fail: Array | None, next_state: Array | None, model: Any = None,
             slot: Array | None = None) -> Any:
    """The state with one finished episode (``[H, ...]`` per step) added."""

  def uncertainty(self, qf: Any, h: Array, phi: Array) -> Array:
    """The agent's own width at ``phi [..., d]``: its bonus with beta = 1 (DR-LSVI-UCB's
    d-rectangular ``sum_i phi_i sqrt([Lambda_h^-1]_ii)``, LSVI-UCB's elliptical one, a custom
    width's value)."""

  def bonus(self, qf: Any, h: Array, phi: Array) -> Array:
    """The bonus (``scale * width``) at features ``phi [..., d]``."""


@runtime_checkable
class OfflineAgent(Protocol):
  """An offline agent (``drjax.agents.offline.OfflineAgent``; PEVI, DRPVI, VA-DRPVI, R2PVI,
  DRVI-L, ``offline.make_agent``)."""

  name: str
  kind: str  # "offline"
  config: Any  # horizon, feature_dim, num_actions, objective (static)
  hparams_type: type
  needs_pilot: bool

  def fit(self, ds: Any, hparams: Any, *, pilot: Any = None, model: Any = None,
          form: str = "auto") -> Any:
    """The ``QFunction`` fitted to the dataset ``ds`` by one backward induction."""

  def act(self, qf: Any, h: Array, phi_all: Array, fail: Array) -> Array:
    """The greedy action (int32) at step ``h`` from the features ``phi_all [A, d]``."""

  def q_values(self, qf: Any, h: Array, phi_all: Array, fail: Array, clip: bool = True) -> Array:
    """``[..., A]`` the pessimistic Q-values at ``phi_all [..., A, d]``."""

  def width(self, qf: Any, h: Array, phi: Array) -> Array:
    """The penalty's width (without its scale) at features ``phi [..., d]``."""


@runtime_checkable
class Environment(Protocol):
  """A JAX environment with linear features (``drjax.envs.Environment``)."""

  horizon: int
  num_actions: int
  feature_dim: int

  def default_params(self) -> Any:
    """The default parameters (a pytree)."""

  def validate(self, params: Any) -> None:
    """Host-side check of concrete params (``ValueError`` naming the parameter)."""

  def reset(self, key: Array, params: Any) -> Any:
    """The initial state."""

  def step(self, key: Array, state: Any, action: Array, params: Any) -> tuple:
    """``(next_state, reward, done)``."""

  def phi_all(self, state: Any, params: Any) -> Array:
    """``[A, d]`` the features of every action at ``state`` (nonnegative, rows summing to 1)."""

  def is_fail(self, state: Any, params: Any) -> Array:
    """Whether ``state`` is the absorbing zero-value fail state."""

  def theta(self, params: Any) -> Array:
    """``[H, d]`` the known reward parameters (``r_h = phi^T theta_h``)."""


@runtime_checkable
class FiniteEnvironment(Environment, Protocol):
  """An environment with finitely many states and an exact ``LinearModel``."""

  num_states: int

  def model(self, params: Any) -> Any:
    """The exact ``LinearModel`` (features, reward parameters, factors ``mu``, fail state)."""


PROTOCOLS = (OnlineAgent, OfflineAgent, Environment, FiniteEnvironment)


def unchecked(method):
  """The unchecked core of an agent method (``method.unchecked``: the same computation without
  the host-side argument checks), or the method itself. The engine and the evaluation check their
  own arguments once, at their boundary, and call the cores inside traced code; an agent without
  cores (a plugin's own) is called through its public methods."""
  return getattr(method, "unchecked", method)


def describe(protocol) -> list[str]:
  """The protocol as lines ``name(parameters)`` (attributes first, without annotations): what
  ``docs/agents.md`` lists (a test checks that it lists exactly these)."""
  import inspect  # pylint: disable=g-import-not-at-top
  own = protocol.__dict__
  out = [f"{a}  (attribute)" for a in own.get("__annotations__", {})]
  for name, fn in own.items():
    if callable(fn) and not name.startswith("_"):
      params = list(inspect.signature(fn).parameters.values())[1:]  # without self
      sig = inspect.Signature([p.replace(annotation=inspect.Parameter.empty) for p in params])
      out.append(f"{name}{sig}")
  return out
