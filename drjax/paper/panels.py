"""Panels: mean and standard error across seeds, exact references, fitted slopes."""

from __future__ import annotations

import math

import numpy as np


def _curve(values):
  """Mean and standard error across seeds (axis 0)."""
  values = np.asarray(values, dtype=np.float64)
  n = values.shape[0]
  stderr = values.std(axis=0, ddof=1) / math.sqrt(n) if n > 1 else np.zeros(values.shape[1:])
  return {"mean": values.mean(axis=0).tolist(), "stderr": stderr.tolist()}


def _exact(values):
  values = np.asarray(values, dtype=np.float64)
  return {"mean": values.tolist(), "stderr": np.zeros_like(values).tolist()}


def _fit_slope(k, y, k_min=10):
  sel = (k >= k_min) & (y > 0)
  if sel.sum() < 2:
    return float("nan")
  return float(np.polyfit(np.log(k[sel]), np.log(y[sel]), 1)[0])
