"""The sweep's error types: bad input (``SweepError``, ``SweepTypeError``) and Ctrl-C.

Their public names are ``drjax.sweeps.SweepError`` etc. (``__module__`` says so).
"""

from __future__ import annotations


class SweepError(ValueError):
  """Bad sweep input: a ``ValueError`` that knows which configuration field it is about.

  Raised by ``validate``, ``run``, ``merge``, ``load_config`` and ``check_out_dir`` before
  anything is compiled or written. ``str(e)`` is ``"<field>: <detail>"``.

  Attributes:
    field: the ``SweepConfig`` field or ``run`` argument (``"rho_at"``, ``"env_params"``,
      ``"out"``, ``"devices"``, ...); the command maps it to its flag.
    detail: the message without the field.
  """

  def __init__(self, field: str, message: str):
    super().__init__(f"{field}: {message}")
    self.field = field
    self.detail = message


class SweepTypeError(SweepError, TypeError):
  """A field of the wrong type, e.g. the string ``agents="dr-lsvi-ucb"`` where a tuple of names
  is expected: both a ``TypeError`` and a ``SweepError`` (so a ``ValueError``)."""


class SweepInterrupted(KeyboardInterrupt):
  """``run`` was interrupted (Ctrl-C): the finished chunks are saved, nothing is half-written.

  Attributes:
    out: the output directory (None in memory).
    saved: chunks of the sweep saved in ``out`` (including those of earlier runs).
    total: chunks of the whole sweep.
    part: the ``(i, n)`` part that was running, or None.
  """

  def __init__(self, out, saved: int, total: int, part=None):
    where = (f"{saved} of {total} chunks saved in {out}; rerun to resume" if out is not None
             else "in memory, nothing saved")
    super().__init__(f"sweep interrupted: {where}")
    self.out, self.saved, self.total, self.part = out, saved, total, part


_Error = SweepError  # the name used throughout the package

for _cls in (SweepError, SweepTypeError, SweepInterrupted):
  _cls.__module__ = "drjax.sweeps"  # the public name (re-exported by the package)
del _cls
