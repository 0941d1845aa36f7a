"""d-rectangular feature maps for continuous observations (Assumption 1: ``phi >= 0``, rows sum 1).

The algorithms of this library assume features ``phi(s, a) >= 0`` with ``sum_i phi_i(s, a) = 1``
(the d-rectangular linear DRMDP). For a continuous observation ``x`` (a gymnax environment's,
``drjax.envs.gymnax_env``) two maps of that kind are built here:

* ``rbf(low, high, centers_per_dim, width)``: soft state aggregation. The observation is scaled
  to the unit box and clipped, ``u_j = clip((x_j - low_j) / (high_j - low_j), 0, 1)``; the centers
  form a grid, ``c_{j,k} = k / (n_j - 1)`` (``n_j = centers_per_dim[j]``; one center sits at 0.5);
  each Gaussian has standard deviation ``sigma_j = width / (n_j - 1)`` (``width`` in units of the
  spacing between neighboring centers; ``sigma_j = width`` for one center). The feature of grid
  point ``k = (k_1, ..., k_D)`` is the normalized radial basis function

      psi_k(x) = exp(-sum_j (u_j - c_{j,k_j})^2 / (2 sigma_j^2)) / Z(x),

  ``Z`` the sum over the grid: ``psi >= 0`` and ``sum_k psi_k = 1``. The Gaussian is separable, so
  ``psi`` is the outer product of one normalized vector per dimension (computed in that form, a
  softmax per dimension: exact, stable, ``O(sum_j n_j)`` exponentials). Smooth in ``x`` inside
  the box (``jax.grad`` works; zero gradient where a coordinate is clipped).
* ``tile_coding(low, high, tiles_per_dim, num_tilings)``: normalized tile coding. Tiling
  ``t = 0..T-1`` (``T = num_tilings``) is shifted by ``o_{t,j} = ((t (2j + 1)) mod T) / T`` of a
  tile in dimension ``j`` (the asymmetric displacements ``1, 3, 5, ...`` of Sutton & Barto,
  Section 9.5.4); the active tile of tiling ``t`` has index ``i_j = floor(n_j u_j + o_{t,j})`` in
  ``[0, n_j]`` per dimension (``n_j + 1`` tiles, so the shifted tilings still cover the box), and
  its feature is ``1 / T``. So ``psi`` has ``T`` nonzero entries, each ``1 / T``:
  ``d_state = T prod_j (n_j + 1)``. Piecewise constant (no useful gradient).

Both maps are ``FeatureMap`` objects: frozen, hashable (usable as static fields of an
environment), ``fmap(x) -> [m]`` the state features (``jit``/``vmap``-able), ``fmap.num_features``
``= m``, ``fmap.phi_all(x, A) -> [A, A m]`` the features *per action block*: action ``a`` puts
``psi(x)`` in its own block of ``m`` coordinates (``phi(s, a) = e_a (x) psi(s)``), so ``d = A m``
and every row still lies on the simplex. ``action_blocks(psi, A)`` does the same for any state
features. ``check_feature_map(fn, obs_samples, num_actions)`` checks a user's map against
Assumption 1 on sample observations (a ``ValueError`` naming the map, the worst row, its sum and
its minimum).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from drjax import _checks

Array = jax.Array

KINDS = ("rbf", "tiles")


def _bounds(low, high) -> tuple[tuple, tuple]:
  """``(low, high)`` as tuples of finite floats of one length with ``low < high`` everywhere."""
  for name, x in (("low", low), ("high", high)):
    _checks.numeric(name, x)
    _checks.finite(name, x)
    if np.ndim(x) != 1 or np.size(x) == 0:
      raise ValueError(f"{name} must be a non-empty 1-D sequence of numbers (one per observation "
                       f"dimension), got shape {np.shape(x)}")
  lo = tuple(float(v) for v in np.asarray(low, np.float64))
  hi = tuple(float(v) for v in np.asarray(high, np.float64))
  if len(lo) != len(hi):
    raise ValueError(f"low and high must have the same length, got {len(lo)} and {len(hi)}")
  bad = [j for j in range(len(lo)) if not lo[j] < hi[j]]
  if bad:
    j = bad[0]
    raise ValueError(f"low must be < high in every dimension, got low[{j}]={lo[j]!r} >= "
                     f"high[{j}]={hi[j]!r}")
  return lo, hi


def _per_dim(name: str, n, dims: int, minimum: int) -> tuple:
  """An integer (the same for every dimension) or one integer per dimension, each >= minimum."""
  if isinstance(n, (list, tuple, np.ndarray)):
    vals = tuple(n)
    if len(vals) != dims:
      raise ValueError(f"{name} must be an integer or {dims} integers (one per observation "
                       f"dimension), got {len(vals)}")
  else:
    vals = (n,) * dims
  return tuple(_checks.integer(name, v, minimum) for v in vals)


@dataclasses.dataclass(frozen=True)
class FeatureMap:
  """A d-rectangular state feature map on a box (``rbf`` / ``tile_coding`` build it).

  Attributes:
    kind: ``"rbf"`` or ``"tiles"``.
    low, high: per-dimension bounds of the observation box (observations are clipped to it).
    sizes: centers (rbf) or tiles (tiles) per dimension.
    width: rbf only: Gaussian standard deviation in units of the center spacing.
    num_tilings: tiles only: the number ``T`` of tilings.
  """

  kind: str
  low: tuple
  high: tuple
  sizes: tuple
  width: float = 0.0
  num_tilings: int = 1

  @property
  def obs_dim(self) -> int:
    return len(self.low)

  @property
  def num_features(self) -> int:
    """``m``: the number of state features."""
    if self.kind == "rbf":
      return math.prod(self.sizes)
    return self.num_tilings * math.prod(n + 1 for n in self.sizes)

  @property
  def name(self) -> str:
    if self.kind == "rbf":
      return f"rbf(centers_per_dim={self.sizes}, width={self.width:g})"
    return f"tile_coding(tiles_per_dim={self.sizes}, num_tilings={self.num_tilings})"

  def scaled(self, x) -> Array:
    """``[D]`` the observation scaled to the unit box and clipped to it."""
    x = jnp.asarray(x)
    dtype = jnp.result_type(x, float)
    lo = jnp.asarray(self.low, dtype)
    hi = jnp.asarray(self.high, dtype)
    return jnp.clip((x.astype(dtype) - lo) / (hi - lo), 0.0, 1.0)

  def __call__(self, x) -> Array:
    """``[m]`` the state features of one observation ``x [D]`` (nonnegative, summing to 1)."""
    _checks.numeric("x", x)
    if np.ndim(x) != 1 or np.shape(x)[0] != self.obs_dim:
      raise ValueError(f"x must be one observation of shape [{self.obs_dim}], got shape "
                       f"{tuple(np.shape(x))} (vmap the feature map over a batch)")
    u = self.scaled(x)
    return self._rbf(u) if self.kind == "rbf" else self._tiles(u)

  def _rbf(self, u: Array) -> Array:
    out = None
    for j, n in enumerate(self.sizes):
      centers = jnp.linspace(0.0, 1.0, n, dtype=u.dtype) if n > 1 else jnp.full((1,), 0.5,
                                                                                   u.dtype)
      sigma = self.width / (n - 1) if n > 1 else self.width
      p = jax.nn.softmax(-((u[j] - centers) ** 2) / (2.0 * sigma**2))
      out = p if out is None else (out[:, None] * p[None, :]).reshape(-1)
    return out

  def _tiles(self, u: Array) -> Array:
    T = self.num_tilings
    sizes = np.asarray(self.sizes)
    t = np.arange(T)[:, None]
    j = np.arange(self.obs_dim)[None, :]
    offsets = jnp.asarray(((t * (2 * j + 1)) % T) / T, u.dtype)  # [T, D]
    n = jnp.asarray(sizes, u.dtype)[None, :]
    idx = jnp.floor(u[None, :] * n + offsets).astype(jnp.int32)
    idx = jnp.clip(idx, 0, jnp.asarray(sizes, jnp.int32)[None, :])  # [T, D] in [0, n_j]
    strides = np.array([math.prod(int(n) + 1 for n in sizes[k + 1:])
                        for k in range(self.obs_dim)])  # row-major
    flat = jnp.sum(idx * jnp.asarray(strides, jnp.int32)[None, :], axis=-1)  # [T]
    per = math.prod(int(n) + 1 for n in self.sizes)
    flat = flat + jnp.arange(T, dtype=jnp.int32) * per
    return jnp.zeros((self.num_features,), u.dtype).at[flat].add(1.0 / T)

  def phi_all(self, x, num_actions: int) -> Array:
    """``[A, A m]`` the features of every action at ``x``, one action block each."""
    return action_blocks(self(x), num_actions)


def action_blocks(psi, num_actions: int) -> Array:
  """``[A, A m]``: row ``a`` holds the state features ``psi [m]`` in block ``a`` (zeros elsewhere).

  Rows of state features on the simplex stay on the simplex: ``phi(s, a) = e_a (x) psi(s)``.
  """
  A = _checks.integer("num_actions", num_actions, 1)
  psi = jnp.asarray(psi)
  if psi.ndim != 1:
    raise ValueError(f"psi must be the state features [m] of one state, got shape {psi.shape}")
  return (jnp.eye(A, dtype=psi.dtype)[:, :, None] * psi[None, None, :]).reshape(A, -1)


def rbf(low, high, centers_per_dim=3, width: float = 0.5) -> FeatureMap:
  """Soft state aggregation: normalized Gaussian RBFs on a grid over the scaled, clipped box.

  Args:
    low: ``[D]`` lower bounds of the observation box (observations are clipped to the box).
    high: ``[D]`` upper bounds (``low < high``).
    centers_per_dim: centers per dimension (an integer >= 1, or one per dimension).
    width: Gaussian standard deviation in units of the spacing between neighboring centers
      (> 0; 0.5: a neighbor's weight at a center is ``exp(-2)`` of the center's own).

  Returns:
    The ``FeatureMap`` (``prod(centers_per_dim)`` state features).
  """
  lo, hi = _bounds(low, high)
  sizes = _per_dim("centers_per_dim", centers_per_dim, len(lo), 1)
  _checks.number("width", width, 0, lo_open=True)
  return FeatureMap("rbf", lo, hi, sizes, width=float(width))


def tile_coding(low, high, tiles_per_dim=4, num_tilings: int = 4) -> FeatureMap:
  """Normalized tile coding: ``num_tilings`` offset grids, each active tile weighing ``1 / T``.

  Args:
    low: ``[D]`` lower bounds of the observation box (observations are clipped to the box).
    high: ``[D]`` upper bounds (``low < high``).
    tiles_per_dim: tiles ``n_j`` across the box per dimension (an integer >= 1, or one per
      dimension); each tiling holds ``n_j + 1`` per dimension to cover the box once shifted.
    num_tilings: ``T >= 1`` tilings.

  Returns:
    The ``FeatureMap`` (``T prod_j (n_j + 1)`` state features, ``T`` of them active).
  """
  lo, hi = _bounds(low, high)
  sizes = _per_dim("tiles_per_dim", tiles_per_dim, len(lo), 1)
  T = _checks.integer("num_tilings", num_tilings, 1)
  return FeatureMap("tiles", lo, hi, sizes, num_tilings=T)


def check_feature_map(fn: Callable, obs_samples, num_actions: int, *, atol: float = 1e-5,
                      name: str | None = None) -> None:
  """Checks Assumption 1 for a feature map on sample observations (on the host).

  Args:
    fn: the map, ``fn(x [D]) -> [m]`` (state features, placed in action blocks) or ``[A, d]``
      (the features of every action); a pure JAX function (it is ``vmap``-ed over the samples).
    obs_samples: ``[N, D]`` observations.
    num_actions: ``A``; a map returning ``[A', d]`` must have ``A' = A``.
    atol: tolerance on ``phi >= 0`` and ``|sum - 1|``.
    name: how messages name the map (default: its ``name`` attribute or ``__name__``).

  Raises:
    ValueError: a non-finite, negative or non-normalized row (naming the map, the worst row, its
      sum and its minimum), or an output of the wrong shape.
  """
  _checks.function("fn", fn, "a feature map x -> [m] or [A, d]")
  A = _checks.integer("num_actions", num_actions, 1)
  _checks.number("atol", atol, 0)
  label = name or getattr(fn, "name", None) or getattr(fn, "__name__", None) or repr(fn)
  _checks.numeric("obs_samples", obs_samples)
  if np.ndim(obs_samples) != 2 or np.shape(obs_samples)[0] == 0:
    raise ValueError(f"obs_samples must have shape [N, D] with N >= 1, got "
                     f"{tuple(np.shape(obs_samples))}")
  phi = np.asarray(jax.vmap(fn)(jnp.asarray(obs_samples)), np.float64)
  if phi.ndim == 3 and phi.shape[1] != A:
    raise ValueError(f"feature map {label}: returns [{phi.shape[1]}, {phi.shape[2]}] per "
                     f"observation, but num_actions = {A} (expected [m] or [{A}, d])")
  if phi.ndim not in (2, 3) or phi.shape[-1] == 0:
    raise ValueError(f"feature map {label}: must return [m] or [A, d] per observation, got "
                     f"{phi.shape[1:]}")
  rows = phi.reshape(-1, phi.shape[-1])
  where = lambda r: (f"sample {r // phi.shape[1]}, action {r % phi.shape[1]}" if phi.ndim == 3
                     else f"sample {r}")  # noqa: E731
  finite = np.isfinite(rows).all(-1)
  if not finite.all():
    r = int(np.argmin(finite))
    raise ValueError(f"feature map {label}: row at {where(r)} is not finite")
  sums, mins = rows.sum(-1), rows.min(-1)
  err = np.maximum(np.abs(sums - 1), np.maximum(-mins, 0))
  r = int(np.argmax(err))
  if err[r] > atol:
    what = "has a negative entry" if mins[r] < -atol else "does not sum to 1"
    raise ValueError(f"feature map {label} violates Assumption 1 (phi >= 0, rows summing to 1): "
                     f"the worst row ({where(r)}) {what}: sum {sums[r]:.6g}, min {mins[r]:.6g} "
                     f"(tolerance {atol:g})")


__all__ = ["FeatureMap", "KINDS", "action_blocks", "check_feature_map", "rbf", "tile_coding"]
