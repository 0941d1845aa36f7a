"""The git state of the checkout drjax is imported from (results' and benchmarks' provenance)."""

from __future__ import annotations

import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the checkout, if any


def state(*pathspec: str, untracked: bool = True) -> tuple[str, list[str]] | None:
  """``(HEAD commit, git status --porcelain lines)`` of the checkout, the status limited to
  ``pathspec`` (default: the whole tree; ``untracked=False``: tracked files only); ``None`` when
  drjax is not imported from a git checkout (an installed wheel) or git fails."""
  if not os.path.exists(os.path.join(ROOT, ".git")):
    return None
  status = ["git", "status", "--porcelain"] + ([] if untracked else ["--untracked-files=no"])
  try:
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                          timeout=30, check=True).stdout.strip()
    lines = subprocess.run(status + (["--", *pathspec] if pathspec else []), cwd=ROOT,
                           capture_output=True, text=True, timeout=30, check=True).stdout
  except (OSError, subprocess.SubprocessError):
    return None
  return head, [ln.rstrip() for ln in lines.splitlines() if ln.strip()]
