"""Declared hyperparameter ranges (``Bounds``) and their lookup (``bounds``).

Below ``registry`` (which re-exports every name here) so that the agents' own checks
(``offline_types``) read a declared range without importing the registry, which imports them.
"""

from __future__ import annotations

import math
from typing import NamedTuple


class Bounds(NamedTuple):
  """The allowed range of a declared hyperparameter (``None``: unbounded on that side).

  Declared once, with the field: ``bounds = {"kappa": "[0, 2]"}`` in the hyperparameter
  ``NamedTuple`` (a string ``"[lo, hi]"`` / ``"(lo, hi)"`` / mixed, ``inf`` allowed, a
  ``(lo, hi)`` pair of closed ends, or a ``Bounds``). ``registry.make_hparams``,
  ``offline.make_hparams``, ``drjax sweep --hparam`` and ``sweeps.run`` enforce it with the same
  message (``check``). A hyperparameter without a declaration is ``DEFAULT_BOUNDS``,
  ``[0, inf)``.
  """

  lo: float | None = 0.0
  hi: float | None = None
  lo_open: bool = False
  hi_open: bool = False

  def __str__(self) -> str:
    lo = "-inf" if self.lo is None else f"{self.lo:g}"
    hi = "inf" if self.hi is None else f"{self.hi:g}"
    return (("(" if self.lo is None or self.lo_open else "[") + f"{lo}, {hi}" +
            (")" if self.hi is None or self.hi_open else "]"))

  def contains(self, x: float) -> bool:
    """Whether the number ``x`` is finite and in the range."""
    return math.isfinite(x) and (
        self.lo is None or (x > self.lo if self.lo_open else x >= self.lo)) and (
        self.hi is None or (x < self.hi if self.hi_open else x <= self.hi))

  def check(self, agent: str, hparam: str, values) -> None:
    """The one message of every entry point (``registry.check_hparam``,
    ``offline.make_hparams``): ``ValueError`` ``agent 'AGENT': hyperparameter HPARAM must be in
    [lo, hi), got X`` for the first of ``values`` (a number or an array) outside the range."""
    import numpy as np  # pylint: disable=g-import-not-at-top  (reading the registry imports none)
    for x in np.asarray(values, np.float64).ravel():
      if not self.contains(float(x)):
        raise ValueError(f"agent {agent!r}: hyperparameter {hparam} must be in {self}, got "
                         f"{float(x)!r}")


DEFAULT_BOUNDS = Bounds(0.0)  # [0, inf): a declared hyperparameter without its own bounds
# The built-in agents' hyperparameters that a sweep takes through ``--hparam`` (rho, beta, lam
# and reg_weight have flags and fixed ranges of their own: docs/agents.md): written here so
# that reading the registry imports no agent module.
BUILTIN_BOUNDS = {"var_shift": Bounds(0.0), "beta_var": Bounds(0.0),
                  "var_floor": Bounds(0.0, lo_open=True)}


def _parse_bounds(label: str, b) -> Bounds:
  """``b`` (a ``Bounds``, a ``(lo, hi)`` pair, or a string ``"[lo, hi)"``) as ``Bounds``."""
  if isinstance(b, Bounds):
    return b
  if isinstance(b, str):
    t = b.strip()
    body = t[1:-1].split(",") if len(t) >= 2 else []
    if len(body) == 2 and t[0] in "[(" and t[-1] in "])":
      try:
        lo, hi = (float(x) for x in body)
      except ValueError:
        lo = hi = math.nan
      if not (math.isnan(lo) or math.isnan(hi)) and lo <= hi:
        return Bounds(None if lo == -math.inf else lo, None if hi == math.inf else hi,
                      t[0] == "(", t[-1] == ")")
  elif isinstance(b, (tuple, list)) and len(b) == 2 and all(
      x is None or (isinstance(x, (int, float)) and not isinstance(x, bool)) for x in b):
    return Bounds(None if b[0] is None else float(b[0]), None if b[1] is None else float(b[1]))
  raise ValueError(f"{label}: bounds must be a string like '[0, inf)' or '(0, 1]', a (lo, hi) "
                   f"pair (None: unbounded) or a registry.Bounds, got {b!r}")


def bounds(hparams_type, hparam: str, label: str = "hparams_type") -> Bounds:
  """The declared range of ``hparam`` of a hyperparameter ``NamedTuple`` class (or ``None``):
  its class attribute ``bounds`` (``{name: "[lo, hi)" | (lo, hi) | Bounds}``) when it names
  ``hparam``, else ``BUILTIN_BOUNDS``, else ``DEFAULT_BOUNDS``."""
  if not isinstance(hparam, str):
    raise TypeError(f"hparam must be a hyperparameter name (a string), got "
                    f"{type(hparam).__name__} {hparam!r}")
  if hparams_type is not None and not (isinstance(hparams_type, type)
                                       and hasattr(hparams_type, "_fields")):
    raise TypeError(f"hparams_type must be a hyperparameter NamedTuple class or None, got "
                    f"{hparams_type!r}")
  declared = getattr(hparams_type, "bounds", None) if hparams_type is not None else None
  if declared is not None and not isinstance(declared, dict):
    raise TypeError(f"{label}: {hparams_type.__name__}.bounds must be a dict "
                    f"{{hyperparameter: '[lo, hi]'}}, got {type(declared).__name__}")
  if declared and hparam in declared:
    return _parse_bounds(f"{label} hyperparameter {hparam}", declared[hparam])
  return BUILTIN_BOUNDS.get(hparam, DEFAULT_BOUNDS)
