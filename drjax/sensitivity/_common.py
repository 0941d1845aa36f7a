"""Shared helpers of ``drjax.sensitivity``: model dimensions, host-side checks, exact values."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from drjax import _checks, planning
from drjax.envs.base import LinearModel

Array = jax.Array


def _dims(model: LinearModel) -> tuple[int, int, int, int]:
  """``(H, S, A, d)`` of ``model`` after ``_checks.model`` (``TypeError``/``ValueError`` naming
  ``model`` and the field for anything but a valid finite ``LinearModel``)."""
  _checks.model(model)
  return tuple(np.shape(model.phi))  # H, S, A, d


def _dtype(model: LinearModel):
  return jnp.result_type(model.phi, model.mu, model.reward)


def _check_rho(rho, model: LinearModel, name: str = "rho") -> None:
  H, _, _, d = _dims(model)
  _checks.rho(name, rho, (H, d), what="(H, d)")


def _check_rho_shape(rho, model: LinearModel) -> None:
  """``rho`` numbers of shape ``[H, d]`` (values are checked along the segment by the caller)."""
  H, _, _, d = _dims(model)
  _checks.numeric("rho", rho)
  if tuple(np.shape(rho)) != (H, d):
    raise ValueError(f"rho must have shape (H, d) = ({H}, {d}), got {tuple(np.shape(rho))}")


def _check_policy(policy, model: LinearModel) -> None:
  if policy is not None:
    H, S, A, _ = _dims(model)
    _checks.policy("policy", policy, H, S, A)


def _values(model: LinearModel, rho, policy) -> tuple[Array, Array]:
  """``(v [H+1, S], policy [H, S])``: robust values of ``policy`` (optimal ones if None)."""
  if policy is None:
    res = planning.robust_dp(model, rho)
    return res.v, res.policy
  return planning.robust_evaluate(model, rho, policy), jnp.asarray(policy)
