"""Plugins: agents and environments registered from outside the package.

A plugin is a Python module (an importable name, ``my_lab.agents``) or a file
(``experiments/custom_agent.py``) whose import registers agents
(``drjax.agents.registry.register``) or environments (``drjax.envs.register``). Three ways in:

* ``drjax.plugins.load("experiments/custom_agent.py")`` in Python;
* ``--plugin MODULE_OR_FILE`` on every ``drjax`` command; ``drjax sweep`` records the plugins in
  ``sweep.json`` (``SweepConfig.plugins``), so ``--resume`` and ``--merge`` load them again;
* installed packages that declare an entry point in the groups ``drjax.agents`` or
  ``drjax.envs`` (``[project.entry-points."drjax.agents"] my_agents = "my_lab.agents"``): loaded
  lazily, the first time a registry is read. An entry point may name a module (imported) or a
  function (called with no arguments).

Loading is idempotent while a plugin's source is unchanged; after an edit, ``load`` executes it
again and its registrations replace the earlier version's. A plugin that fails to import
registers nothing.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import importlib.util
import os
import sys

__all__ = ["load", "resolve", "loaded", "source_hash", "load_entry_points", "PluginError",
           "GROUPS"]

GROUPS = ("drjax.agents", "drjax.envs")

_LOADED: dict[str, str] = {}  # resolved spec -> module name
_SOURCES: dict[str, str] = {}  # resolved spec -> hash of the source it was loaded from
_ENTRY_POINTS_DONE: set[str] = set()


class PluginError(ValueError):
  """A plugin that cannot be found or fails to import (the message names it)."""


def _is_file(spec: str) -> bool:
  return spec.endswith(".py") or os.sep in spec or "/" in spec


def resolve(spec: str) -> str:
  """The recorded form of ``spec``: the absolute path of a file, or the module name as given."""
  if not isinstance(spec, str) or not spec.strip():
    raise TypeError(f"plugin must be a module name or a .py file path, got {spec!r}")
  spec = spec.strip()
  if _is_file(spec):
    return os.path.abspath(os.path.expanduser(spec))
  return spec


INTERACTIVE = "the interactive session (__main__)"


def caller_source(skip=()) -> str:
  """Where a ``register`` function was called from: the real path of the calling file (a module
  imported by name and the same file loaded as a plugin path are one source), or ``INTERACTIVE``
  for ``__main__`` code that is no file on disk (a notebook cell, ``python -c``, a REPL). Frames
  of this module and of the modules named in ``skip`` (the registry asking) are not the caller."""
  frame = sys._getframe(1)  # pylint: disable=protected-access
  while frame is not None and (frame.f_globals.get("__name__") == __name__
                               or frame.f_globals.get("__name__") in skip):
    frame = frame.f_back
  if frame is None:
    return INTERACTIVE
  path = frame.f_code.co_filename
  if frame.f_globals.get("__name__") == "__main__" and (
      not os.path.isfile(path) or "ipykernel_" in path):
    return INTERACTIVE
  return os.path.realpath(path) if os.path.isfile(path) else path


# Registries that a failed plugin must leave as they were: (save, restore) pairs given by the
# registries themselves (agents, environments), which sit above this module. A registry imported
# while a plugin loads is saved as it is when it registers itself (before the plugin's own
# registrations).
_TRACKED: list = []
_ACTIVE: list = []  # the saved states of the loads in progress


def track(save, restore) -> None:
  """Registers a registry's ``save() -> state`` and ``restore(state)`` for ``load``."""
  _TRACKED.append((save, restore))
  for saved in _ACTIVE:
    saved.append((restore, save()))


def track_dicts(*dicts, prepare=None) -> None:
  """``track`` for a registry held in dicts: copies saved (after ``prepare()``, e.g. loading
  what the registry loads lazily, so that a restore cannot drop it for good), put back in
  place."""
  def save():
    if prepare is not None:
      prepare()
    return [dict(d) for d in dicts]
  track(save, lambda state: _put_back(dicts, state))


def _put_back(dicts, state) -> None:
  for d, saved in zip(dicts, state):
    d.clear()
    d.update(saved)


def _save_loaded():
  return dict(_LOADED), dict(_SOURCES), set(sys.modules)


def _restore_loaded(state) -> None:
  """Forgets the plugins loaded since ``state`` (a nested load inside a plugin that then failed:
  its registrations are undone, so it must be executed again when next loaded), and the modules
  they imported of their own that Python keeps after a failed import (a package's submodule that
  registered before a sibling raised): only modules new since ``state``."""
  loaded, sources, modules = state
  for key in set(_LOADED) - set(loaded):
    if _LOADED[key] not in modules:
      sys.modules.pop(_LOADED[key], None)
  _put_back((_LOADED, _SOURCES), (loaded, sources))


def _forget_new_submodules(key: str, state) -> None:
  """After module plugin ``key`` failed: drop its submodules imported since ``state``."""
  modules = next(saved[2] for restore, saved in state if restore is _restore_loaded)
  for name in [m for m in sys.modules if m.startswith(key + ".") and m not in modules]:
    del sys.modules[name]


def _registries() -> list:
  saved = [(restore, save()) for save, restore in _TRACKED]
  saved.append((_restore_loaded, _save_loaded()))
  _ACTIVE.append(saved)
  return saved


def _restore(saved) -> None:
  """Puts back what ``_registries`` saw: a plugin that fails to import registers nothing."""
  for restore, state in saved:
    restore(state)


def load(spec: str):
  """Imports the plugin ``spec`` (a module name or a ``.py`` file); returns the module.

  A plugin whose source is unchanged since it was loaded is not executed again. One whose source
  changed (a file or module edited in a running notebook) is executed again: its registrations
  replace those of the earlier version (the same source, ``registry.register``). Loading is all
  or nothing: a plugin that fails to import leaves the agent and environment registries as they
  were (an edited plugin that fails keeps its previous version). Raises ``PluginError`` naming
  the plugin when the file or module does not exist or fails to import (the original exception
  is chained).
  """
  key = resolve(spec)
  if key in _LOADED:
    old = sys.modules.get(_LOADED[key])
    if old is not None and _current_hash(key, old) in (None, _SOURCES.get(key)):
      return old  # unchanged (or no longer readable: the version loaded stays)
    if old is not None and getattr(old, "__path__", None):  # its submodules would stay old
      raise PluginError(f"plugin {spec!r} is a package whose source changed since it was "
                        "loaded; a package cannot be loaded again in a running process: "
                        "restart it")
  if _is_file(key):
    if not os.path.isfile(key):
      raise PluginError(f"plugin {spec!r}: no such file ({key})")
  snapshot = _registries()
  try:
    name, module, source = _execute_file(key) if _is_file(key) else _import_module(key)
  except BaseException as e:
    _restore(snapshot)
    _forget_new_submodules(key, snapshot)
    if not isinstance(e, Exception):
      raise
    if (isinstance(e, ModuleNotFoundError) and not _is_file(key) and e.name
        and key.startswith(e.name)):
      raise PluginError(f"plugin {spec!r}: no module named {e.name!r} (give an importable "
                        "module name or the path of a .py file)") from e
    raise PluginError(f"plugin {spec!r} failed to import: {type(e).__name__}: {e}") from e
  finally:
    _ACTIVE.pop()  # loads nest (a plugin loading another): last in, first out
  _LOADED[key] = name
  _SOURCES[key] = source
  return module


def _execute_file(key: str):
  """``(module name, module, source hash)`` of file plugin ``key``, executed in a new module
  (the previous version's, if any, stays in ``sys.modules`` when it raises)."""
  stem = os.path.splitext(os.path.basename(key))[0].replace("-", "_")
  name = f"drjax_plugin_{stem}_{hashlib.sha1(key.encode()).hexdigest()[:8]}"
  with open(key, "rb") as f:
    data = f.read()
  mspec = importlib.util.spec_from_file_location(name, key)
  module = importlib.util.module_from_spec(mspec)
  module.__drjax_plugin_file__ = key  # recorded names use the file's (pieces.width_name)
  previous = sys.modules.get(name)
  sys.modules[name] = module
  try:
    code = compile(data, key, "exec", dont_inherit=True)
    exec(code, module.__dict__)  # pylint: disable=exec-used
  except BaseException:
    if previous is None:
      del sys.modules[name]
    else:
      sys.modules[name] = previous
    raise
  return name, module, _digest([("", data)])  # the hash of exactly the bytes executed


def _import_module(key: str):
  """``(module name, module, source hash)`` of module plugin ``key``: imported, or executed
  again when edited since it was loaded."""
  if key in _LOADED and key in sys.modules:
    module = _reexecute(sys.modules[key])
  else:
    module = importlib.import_module(key)
  return key, module, _hash_source(key, module)


def _reexecute(module):
  """Executes an edited single-file module plugin again, in its namespace, from the bytes read
  now (``importlib.reload`` could run a stale ``.pyc`` of a same-size edit within a second)."""
  with open(module.__file__, "rb") as f:
    data = f.read()
  code = compile(data, module.__file__, "exec", dont_inherit=True)
  before = dict(module.__dict__)  # the version loaded: put back whole if the edit raises
  try:
    exec(code, module.__dict__)  # pylint: disable=exec-used
  except BaseException:
    _put_back((module.__dict__,), (before,))
    raise
  return module


def _current_hash(key: str, module) -> str | None:
  """The source hash of a loaded plugin as it is on disk now (None if it cannot be read)."""
  try:
    return _hash_source(key, None if _is_file(key) else module)
  except OSError:
    return None


def source_hash(spec: str) -> str:
  """The SHA-256 (16 hex digits) of a plugin's source: the ``.py`` file's bytes, or a module's
  file (a package: every ``.py`` file under its directory, with their relative paths).

  For a loaded plugin, the source it was loaded from (a file edited since in a running notebook
  is not what runs); otherwise the source on disk (the plugin is imported to find a module's
  files). ``drjax sweep`` records it in ``sweep.json`` (``code``): ``--resume`` and ``--merge``
  refuse a sweep whose plugin source changed. Raises ``PluginError`` as ``load`` does.
  """
  key = resolve(spec)
  if key in _SOURCES:
    return _SOURCES[key]
  if _is_file(key):
    if not os.path.isfile(key):
      raise PluginError(f"plugin {spec!r}: no such file ({key})")
    return _hash_source(key, None)
  return _hash_source(key, load(key))


def _hash_source(key: str, module) -> str:
  """``source_hash`` of a file plugin (``module`` unused) or of an imported module."""
  if _is_file(key):
    files = [("", key)]  # a single file: its content only
  else:
    path = getattr(module, "__file__", None)
    roots = list(getattr(module, "__path__", None) or [])  # a package: all its .py files
    if not roots:
      files = [("", path)] if path else []
    else:
      files = []
      for root in roots:
        for d, subdirs, names in os.walk(root):
          subdirs[:] = sorted(x for x in subdirs if x != "__pycache__")
          files += [(os.path.relpath(os.path.join(d, f), root), os.path.join(d, f))
                    for f in sorted(names) if f.endswith(".py")]
  items = []
  for label, path in files:
    with open(path, "rb") as f:
      items.append((label, f.read()))
  return _digest(items)


def _digest(items) -> str:
  """SHA-256 (first 16 hex digits) of ``(label, bytes)`` pairs, each with its length."""
  h = hashlib.sha256()
  for label, data in items:
    h.update(f"{label}\0{len(data)}\0".encode())
    h.update(data)
  return h.hexdigest()[:16]


def loaded() -> tuple[str, ...]:
  """The resolved specs of the plugins loaded so far, in order."""
  return tuple(_LOADED)


def load_entry_points(group: str) -> None:
  """Loads the installed entry points of ``group`` (once per process)."""
  if group in _ENTRY_POINTS_DONE:
    return
  _ENTRY_POINTS_DONE.add(group)
  eps = importlib.metadata.entry_points()
  selected = eps.select(group=group) if hasattr(eps, "select") else eps.get(group, ())
  for ep in selected:
    try:
      obj = ep.load()
    except Exception as e:
      raise PluginError(f"entry point {ep.name!r} of group {group!r} ({ep.value}) failed to "
                        f"load: {type(e).__name__}: {e}") from e
    if callable(obj) and not isinstance(obj, type(sys)):
      obj()
