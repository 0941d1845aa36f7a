"""Figure directories: one JSON per panel and the figure's PNG + PDF, written atomically.

Everything of one figure NAME is first written into a temporary directory next to ``DIR/<NAME>``
and renamed into place only when complete, so an interrupted run leaves either the previous
complete results or none — never a half-written directory.
"""

from __future__ import annotations

import json
import os
import shutil

from drjax import _io
from drjax.paper import plotting

_COMPLETE = ".complete"  # marks a new figure directory whose files are all written


def _pid_alive(pid: int) -> bool:
  if pid == os.getpid():
    return True
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except OSError:  # exists, owned by someone else
    return True
  return True


def _temp_entries(out_dir: str, name: str):
  """``(path, kind, pid)`` of this figure's temporary directories (``.<name>.<kind>.<pid>.*``)."""
  prefix = f".{name}."
  found = []
  try:
    entries = os.listdir(out_dir)
  except OSError:
    return found
  for e in entries:
    if not e.startswith(prefix):
      continue
    parts = e[len(prefix):].split(".")
    if len(parts) >= 3 and parts[0] in ("new", "old") and parts[1].isdigit():
      found.append((os.path.join(out_dir, e), parts[0], int(parts[1])))
  return found


def recover(out_dir: str, name: str) -> str | None:
  """Completes or undoes a figure-directory swap that a killed run left half done; cleans up.

  If ``out_dir/<name>`` is missing, the newest *complete* new directory of a dead run is moved into
  place (the swap is completed), else the newest previous directory moved aside is restored.
  Temporary directories of runs that are no longer alive are then deleted (those of live
  processes, e.g. a concurrent run, are left alone). Returns what was done, or None.
  """
  final = os.path.join(out_dir, name)
  stale = [(p, kind) for p, kind, pid in _temp_entries(out_dir, name) if not _pid_alive(pid)]
  action = None
  if not os.path.exists(final):
    mtime = lambda p: os.stat(p).st_mtime  # noqa: E731
    new = sorted((p for p, kind in stale
                  if kind == "new" and os.path.exists(os.path.join(p, _COMPLETE))), key=mtime)
    old = sorted((p for p, kind in stale if kind == "old"), key=mtime)
    pick = new[-1] if new else (old[-1] if old else None)
    if pick is not None:
      os.rename(pick, final)
      action = ("completed" if new else "restored") + f" {final} from {os.path.basename(pick)}"
  marker = os.path.join(final, _COMPLETE)
  if os.path.exists(marker):
    os.remove(marker)
  for p, _ in stale:
    if os.path.exists(p):
      shutil.rmtree(p, ignore_errors=True)
  return action


def write_figure(out_dir: str, name: str, panels: dict, plot=None) -> str:
  """Writes ``out_dir/<name>/{<panel>.json, <name>.png, <name>.pdf}`` atomically.

  ``plot(panels, path_base)`` draws the figure (default: the curve panels,
  ``plotting.save_curve_figure``).

  Everything goes to ``out_dir/.<name>.new.<pid>.<token>`` first, marked complete when done;
  then the previous ``out_dir/<name>`` is renamed to ``.<name>.old.<pid>.<token>``, the new
  directory renamed into place and the old one deleted. A run killed anywhere in between leaves
  a state that ``recover`` (called first by every later write) turns back into a complete
  ``out_dir/<name>``.
  """
  os.makedirs(out_dir, exist_ok=True)
  recover(out_dir, name)
  final = os.path.join(out_dir, name)
  pid = os.getpid()
  tmp = old = None
  # The temporary paths are named before they are created, so a KeyboardInterrupt arriving just
  # after ``os.mkdir`` or ``os.rename`` still finds them in the handler below (``mkdtemp`` returns
  # its path only after more Python code runs: a Ctrl-C there left an orphan ``.new`` directory).
  # The pid says whose they are (``recover`` deletes those of dead processes); a random token
  # keeps apart writers with the same pid (threads, containers, hosts sharing the directory).
  new_path = os.path.join(out_dir, f".{name}.new.{pid}.{_io.token()}")
  old_path = os.path.join(out_dir, f".{name}.old.{pid}.{_io.token()}")
  try:  # a KeyboardInterrupt anywhere below (Ctrl-C) leaves the previous directory in place
    tmp = new_path
    try:
      os.mkdir(tmp, _io.DIR_MODE)
    except FileExistsError:
      tmp = None  # another writer's: not ours to delete
      raise
    os.chmod(tmp, _io.DIR_MODE)  # renamed into place below: readable like any other directory
    for tag, panel in panels.items():
      with open(os.path.join(tmp, f"{tag}.json"), "w") as f:
        json.dump(panel, f, indent=1, allow_nan=True)
    if plot is None:
      plotting.save_curve_figure(name, panels, os.path.join(tmp, name))
    else:
      plot(panels, os.path.join(tmp, name))
    open(os.path.join(tmp, _COMPLETE), "w").close()
    if os.path.exists(final):
      old = old_path
      os.rename(final, old)
    os.rename(tmp, final)
    tmp = None
    os.remove(os.path.join(final, _COMPLETE))
    if old:
      shutil.rmtree(old, ignore_errors=True)
  except BaseException:
    if tmp is not None:
      shutil.rmtree(tmp, ignore_errors=True)
    if os.path.exists(final):  # the previous directory, or the new one once renamed into place
      marker = os.path.join(final, _COMPLETE)
      if os.path.exists(marker):
        os.remove(marker)
      if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    elif old is not None and os.path.exists(old):
      os.rename(old, final)
    raise
  return final
