"""Host-side argument checks shared by the public functions (small guard calls at entry).

Every check raises ``ValueError`` (bad value) or ``TypeError`` (bad kind) whose message starts
with the argument's name and states the allowed range. Value checks run only on concrete
arguments and are skipped under ``jit``/``vmap`` tracing, where values are unknown (shapes are
static and are always checked). Nothing here is traced or compiled.
"""

from __future__ import annotations

import numbers

import jax
import numpy as np


def is_concrete(*xs) -> bool:
  """True if no leaf of ``xs`` is a JAX tracer (values can be inspected)."""
  return not any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree_util.tree_leaves(xs))


def _values(name: str, x) -> np.ndarray:
  if isinstance(x, (str, bytes)):
    raise TypeError(f"{name} must be a number or an array of numbers, got the string {x!r}")
  try:
    a = np.asarray(x)
  except Exception as e:  # ragged lists and the like
    raise TypeError(f"{name} must be a number or an array of numbers, got {x!r} ({e})") from None
  if a.dtype == bool or not (np.issubdtype(a.dtype, np.number)):
    raise TypeError(f"{name} must be a number or an array of numbers, got dtype {a.dtype}")
  return a.astype(np.float64)


def _show(a: np.ndarray) -> str:
  if a.ndim == 0:
    return repr(float(a))
  bad = a[~np.isfinite(a)]
  if bad.size:
    return f"a non-finite value ({bad.flat[0]})"
  return f"values in [{a.min():g}, {a.max():g}]"


def finite(name: str, x) -> None:
  """Concrete ``x`` must be numeric and finite (no NaN/inf)."""
  if not is_concrete(x):
    return
  a = _values(name, x)
  if not np.all(np.isfinite(a)):
    raise ValueError(f"{name} must be finite, got {_show(a)}")


def in_range(name: str, x, lo=None, hi=None, *, lo_open: bool = False) -> None:
  """Concrete ``x`` must be finite with every entry in ``[lo, hi]`` (``(lo, hi]`` if lo_open)."""
  if not is_concrete(x):
    return
  a = _values(name, x)
  ok = np.isfinite(a)
  if lo is not None:
    ok &= (a > lo) if lo_open else (a >= lo)
  if hi is not None:
    ok &= a <= hi
  if not np.all(ok):
    left = "(" if lo_open else "["
    lo_s = "-inf" if lo is None else f"{lo:g}"
    hi_s = "inf" if hi is None else f"{hi:g}"
    raise ValueError(f"{name} must lie in {left}{lo_s}, {hi_s}], got {_show(a)}")


def distribution(name: str, x, axis: int = -1, atol: float = 1e-6) -> None:
  """Concrete ``x`` must hold probability vectors along ``axis`` (>= 0, summing to 1)."""
  if not is_concrete(x):
    return
  a = _values(name, x)
  if not np.all(np.isfinite(a)) or np.any(a < -atol):
    raise ValueError(f"{name} must be a probability distribution (entries >= 0), got {_show(a)}")
  sums = a.sum(axis=axis)
  if np.any(np.abs(sums - 1) > atol * max(1, a.shape[axis] if a.ndim else 1)):
    raise ValueError(f"{name} must be a probability distribution (entries summing to 1 along "
                     f"axis {axis}), got sums in [{sums.min():g}, {sums.max():g}]")


def integer(name: str, x, lo: int | None = None) -> int:
  """``x`` must be a Python/NumPy integer (not a bool, float or string) ``>= lo``; returns it."""
  if isinstance(x, (bool, np.bool_)) or not isinstance(x, numbers.Integral):
    raise TypeError(f"{name} must be an integer{'' if lo is None else f' >= {lo}'}, got "
                    f"{type(x).__name__} {x!r}")
  if lo is not None and x < lo:
    raise ValueError(f"{name} must be an integer >= {lo}, got {x!r}")
  return int(x)


def scalar(name: str, x) -> None:
  """``x`` must be a scalar (rank 0)."""
  if np.ndim(x) != 0:
    raise ValueError(f"{name} must be a scalar, got shape {tuple(np.shape(x))}")


def rank(name: str, x, ranks) -> None:
  """``x`` must have one of the ranks ``ranks`` (an int or a set)."""
  allowed = {ranks} if isinstance(ranks, int) else set(ranks)
  if np.ndim(x) not in allowed:
    raise ValueError(f"{name} must have rank {' or '.join(map(str, sorted(allowed)))}, got shape "
                     f"{tuple(np.shape(x))}")


def shape(name: str, x, expected: tuple, what: str = "") -> None:
  """``x`` must have shape ``expected`` (``what`` names the dimensions, e.g. ``"[K]"``)."""
  got = tuple(np.shape(x))
  if got != tuple(expected):
    label = f" {what}" if what else ""
    raise ValueError(f"{name} must have shape{label} {tuple(expected)}, got {got}")


# ---------------------------------------------------------------------------------------------
# Composite guards of the public kernels (one call at each entry of drjax.robust / planning).


def ridge_args(phi, mask, lam) -> None:
  """``phi [K, d]``, ``mask [K]``, scalar ``lam > 0`` (masked rows of phi may hold anything)."""
  rank("phi", phi, 2)
  shape("mask", mask, (np.shape(phi)[0],), "[K]")
  scalar("lam", lam)
  in_range("lam", lam, 0, lo_open=True)


def alpha_args(M, v, rho, horizon) -> None:
  """``M [d, K]``, ``v [K]`` finite, ``rho`` scalar or ``[d]`` in [0, 1], scalar ``horizon >= 0``."""
  rank("M", M, 2)
  shape("v", v, (np.shape(M)[1],), "[K]")
  rank("rho", rho, {0, 1})
  if np.ndim(rho) == 1:
    shape("rho", rho, (np.shape(M)[0],), "[d]")
  scalar("horizon", horizon)
  finite("M", M)
  finite("v", v)
  in_range("rho", rho, 0, 1)
  in_range("horizon", horizon, 0)


def grid_args(horizon, num_points) -> None:
  """``make_grid``: scalar ``horizon >= 0`` and an integer ``num_points >= 2``."""
  integer("num_points", num_points, 2)
  scalar("horizon", horizon)
  in_range("horizon", horizon, 0)


def tv_args(mu, V, rho) -> None:
  """``mu [S]`` a distribution, ``V [S]`` finite, scalar ``rho`` in [0, 1]."""
  rank("mu", mu, 1)
  shape("V", V, np.shape(mu), "[S]")
  scalar("rho", rho)
  distribution("mu", mu)
  finite("V", V)
  in_range("rho", rho, 0, 1)


def model(m) -> None:
  """A finite ``LinearModel``: shapes, and (when concrete) features >= 0, factor distributions
  ``mu [H, d, S]`` summing to 1 over states, finite rewards, an initial distribution and a fail
  state index in range."""
  for field in ("phi", "theta", "mu", "reward", "init_dist"):
    if not hasattr(m, field):
      raise TypeError(f"model must be a LinearModel (env.model(params)), got "
                      f"{type(m).__name__} without {field!r}")
  rank("model.phi", m.phi, 4)
  H, S, A, d = np.shape(m.phi)
  shape("model.mu", m.mu, (H, d, S), "[H, d, S]")
  shape("model.reward", m.reward, (H, S, A), "[H, S, A]")
  shape("model.init_dist", m.init_dist, (S,), "[S]")
  if not is_concrete(m):
    return
  in_range("model.phi", m.phi, 0)
  distribution("model.mu", m.mu, axis=-1)
  finite("model.reward", m.reward)
  distribution("model.init_dist", m.init_dist)
  fail = np.asarray(m.fail_state)
  if fail.ndim != 0 or not -1 <= int(fail) < S:
    raise ValueError(f"model.fail_state must be a state index in [0, {S - 1}] (or -1: no fail "
                     f"state), got {fail}")


def params_type(params, cls, env_name: str, name: str = "params") -> None:
  """``params`` must be a ``cls`` (e.g. ``LinearMDPParams``), not another environment's params."""
  if not isinstance(params, cls):
    raise TypeError(f"{name} must be {cls.__name__} (from {env_name}.make_params), got "
                    f"{type(params).__name__}; params of another environment do not fit")


def numbers_(**kwargs) -> None:
  """Each keyword value must be a number (or array of numbers): no strings, booleans, None."""
  for name, x in kwargs.items():
    if x is None:
      raise TypeError(f"{name} must be a number, got None")
    if is_concrete(x):
      _values(name, x)
