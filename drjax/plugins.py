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

Loading is idempotent: a file or module already loaded is not executed twice.
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


def load(spec: str):
  """Imports the plugin ``spec`` (a module name or a ``.py`` file) once; returns the module.

  Raises ``PluginError`` naming the plugin when the file or module does not exist or fails to
  import (the original exception is chained).
  """
  key = resolve(spec)
  if key in _LOADED:
    return sys.modules[_LOADED[key]]
  if _is_file(key):
    if not os.path.isfile(key):
      raise PluginError(f"plugin {spec!r}: no such file ({key})")
    stem = os.path.splitext(os.path.basename(key))[0].replace("-", "_")
    name = f"drjax_plugin_{stem}_{hashlib.sha1(key.encode()).hexdigest()[:8]}"
    mspec = importlib.util.spec_from_file_location(name, key)
    module = importlib.util.module_from_spec(mspec)
    sys.modules[name] = module
    try:
      mspec.loader.exec_module(module)
    except Exception as e:
      del sys.modules[name]
      raise PluginError(f"plugin {spec!r} failed to import: {type(e).__name__}: {e}") from e
  else:
    name = key
    try:
      module = importlib.import_module(key)
    except ModuleNotFoundError as e:
      if e.name and key.startswith(e.name):
        raise PluginError(f"plugin {spec!r}: no module named {e.name!r} (give an importable "
                          "module name or the path of a .py file)") from e
      raise PluginError(f"plugin {spec!r} failed to import: {type(e).__name__}: {e}") from e
    except Exception as e:
      raise PluginError(f"plugin {spec!r} failed to import: {type(e).__name__}: {e}") from e
  _LOADED[key] = name
  _SOURCES[key] = _hash_source(key, module)
  return module


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
  h = hashlib.sha256()
  for label, path in files:
    with open(path, "rb") as f:
      data = f.read()
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
