#!/usr/bin/env python
"""The import graph of a package: its modules, lines, import arrows, circles and upward arrows.

``python benchmarks/import_graph.py [PACKAGE_DIR] [--check]`` (default ``drjax/`` beside this
folder). Reads every ``*.py`` file under ``PACKAGE_DIR`` with ``ast`` (nothing is imported or run;
no dependency beyond the standard library) and prints:

* the number of modules, their lines (physical lines, as ``wc -l``) and the import arrows;
* the import circles: strongly connected components of more than one module;
* the upward arrows: from a module of a lower layer of ``LAYERS`` to one of a higher layer;
* the modules over ``MAX_LINES`` lines.

An arrow ``A -> B`` (counted once per pair) stands for any ``import`` / ``from ... import`` in
``A`` naming the package's module ``B``, **at module level or inside a function alike** (a
function-level import is a dependency all the same, only a later one; the output marks each arrow
``module`` or ``function`` by its first import at module level, else its first one), and for
``importlib.import_module("literal")``. ``from P import n`` is an arrow to ``P.n`` when that is a
module, else to ``P``; relative imports are resolved. The parent packages Python runs on the way
(``drjax/__init__.py`` for every ``drjax.x``) are not arrows, and neither is an explicit import
of a package that contains the importing module (``import drjax`` in ``drjax/sweeps/storage.py``,
``from drjax.paper import FIGURES`` in ``drjax/paper/presets.py``): Python has run that package
before the module anyway, and counting it would close a circle through every package that imports
one of its own submodules.

One kind of arrow is listed but not counted as upward: a package's module-level ``__getattr__``
(PEP 562) importing one of that package's own submodules, the lazy attribute of a facade
(``drjax.sweeps``): it does not run at import, and importing the submodule anywhere sets the same
attribute. Such arrows are listed apart and are part of neither circles nor upward arrows.

``--check`` exits 1 when there is a circle, an upward arrow or a module in no layer.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import fnmatch
import os
import sys

# The layers, low to high: (name, module patterns). A module is named by its path in the package
# without ``.py`` (``agents/base``; ``__init__``: the package's own ``__init__.py``); patterns are
# ``fnmatch`` patterns. A module takes the layer of an exact name when one matches, else the
# highest layer with a matching pattern (``bench/__main__`` is a command, not a benchmark). Arrows
# within one layer are allowed (circles are reported apart).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    # sweeps/errors (SweepError: a ValueError naming a field; imports nothing) by exact name: the
    # behaviors (policies) raise it below the sweeps.
    ("utilities, protocols", ("_xla", "_precision", "_checks", "_io", "_git", "_pystack", "_cache",
                              "_programs", "_opt_level", "plugins", "protocols", "sweeps/errors")),
    ("linear algebra, duals", ("linalg", "duals_tv", "duals_kl_chi2", "robust", "regularized")),
    ("features", ("features",)),
    ("envs", ("envs/*",)),
    ("exact planning", ("planning",)),
    ("data", ("data",)),
    ("agents", ("agents/*",)),
    ("train", ("train",)),
    ("saved policies, behaviors", ("policies",)),
    ("evaluation", ("evaluate", "put_lattice", "ledge_routes")),
    ("sensitivity", ("sensitivity", "sensitivity/*")),
    ("facade", ("__init__",)),
    ("plotting style", ("style",)),
    ("sweeps", ("sweeps/*",)),
    ("paper", ("paper/*",)),
    ("bench", ("bench/*",)),
    ("cli", ("cli", "cli/*", "__main__", "*/__main__")),
)

MAX_LINES = 600


@dataclasses.dataclass(frozen=True)
class Arrow:
  """``src -> dst`` (module names), where: ``module``, ``function`` or ``getattr``, and the line."""

  src: str
  dst: str
  where: str
  line: int


@dataclasses.dataclass
class Graph:
  """What ``analyze`` finds. Module names are paths in the package without ``.py``."""

  package: str
  lines: dict[str, int]
  arrows: list[Arrow]
  layer: dict[str, int | None]
  circles: list[tuple[str, ...]]
  upward: list[Arrow]
  lazy: list[Arrow]

  @property
  def unplaced(self) -> list[str]:
    return sorted(m for m, i in self.layer.items() if i is None)

  @property
  def over(self) -> list[tuple[str, int]]:
    big = [(m, n) for m, n in self.lines.items() if n > MAX_LINES]
    return sorted(big, key=lambda x: (-x[1], x[0]))


def _modules(root: str) -> dict[str, str]:
  """Dotted module name (``drjax.agents.base``, ``drjax`` for the root ``__init__``) -> file."""
  pkg = os.path.basename(os.path.normpath(root))
  out = {}
  for dirpath, dirnames, filenames in os.walk(root):
    dirnames[:] = sorted(d for d in dirnames if not d.startswith((".", "__pycache__")))
    rel = os.path.relpath(dirpath, root)
    parts = [pkg] + ([] if rel == "." else rel.split(os.sep))
    for f in sorted(filenames):
      if f.endswith(".py"):
        name = parts if f == "__init__.py" else parts + [f[:-3]]
        out[".".join(name)] = os.path.join(dirpath, f)
  return out


def short(dotted: str, is_package: bool) -> str:
  """``agents/base`` for ``drjax.agents.base``; ``agents/__init__`` for ``drjax.agents``."""
  parts = dotted.split(".")[1:] + (["__init__"] if is_package else [])
  return "/".join(parts)


class _Imports(ast.NodeVisitor):
  """(dotted target candidates, where, line) of every import in one module."""

  def __init__(self, this: str, is_package: bool):
    self.this, self.is_package = this, is_package
    self.funcs: list[str] = []
    self.found: list[tuple[list[str], str, int]] = []

  def _where(self) -> str:
    if not self.funcs:
      return "module"
    return "getattr" if self.funcs == ["__getattr__"] and self.is_package else "function"

  def _def(self, node):
    self.funcs.append(node.name)
    self.generic_visit(node)
    self.funcs.pop()

  visit_FunctionDef = visit_AsyncFunctionDef = _def

  def visit_Lambda(self, node):
    self.funcs.append("<lambda>")
    self.generic_visit(node)
    self.funcs.pop()

  def visit_Import(self, node):
    for alias in node.names:
      self.found.append(([alias.name], self._where(), node.lineno))

  def visit_ImportFrom(self, node):
    base = node.module or ""
    if node.level:
      pkg = self.this.split(".") if self.is_package else self.this.split(".")[:-1]
      pkg = pkg[:len(pkg) - (node.level - 1)]
      base = ".".join(pkg + ([base] if base else []))
    for alias in node.names:
      names = [base] if alias.name == "*" else [f"{base}.{alias.name}", base]
      self.found.append((names, self._where(), node.lineno))

  def visit_Call(self, node):
    f = node.func
    name = (f.attr if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name)
            and f.value.id == "importlib" else f.id if isinstance(f, ast.Name) else None)
    if (name == "import_module" and node.args and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)):
      self.found.append(([node.args[0].value], self._where(), node.lineno))
    self.generic_visit(node)


def _resolve(candidates: list[str], modules: dict[str, str]) -> str | None:
  """The first candidate that is a module of the package, or its longest prefix that is one."""
  for c in candidates:
    parts = c.split(".")
    for n in range(len(parts), 0, -1):
      if ".".join(parts[:n]) in modules:
        return ".".join(parts[:n])
  return None


def layer_of(name: str, layers=LAYERS) -> int | None:
  """The index in ``layers`` of module ``name`` (see ``LAYERS``), ``None`` when none matches."""
  for i, (_, pats) in enumerate(layers):
    if name in pats:
      return i
  for i in range(len(layers) - 1, -1, -1):
    if any(fnmatch.fnmatchcase(name, p) for p in layers[i][1]):
      return i
  return None


def _circles(nodes: list[str], succ: dict[str, set[str]]) -> list[tuple[str, ...]]:
  """Strongly connected components of more than one node (Tarjan), each sorted, in order."""
  index, low, on, stack, out = {}, {}, set(), [], []

  def visit(v):
    index[v] = low[v] = len(index)
    stack.append(v)
    on.add(v)
    for w in sorted(succ.get(v, ())):
      if w not in index:
        visit(w)
        low[v] = min(low[v], low[w])
      elif w in on:
        low[v] = min(low[v], index[w])
    if low[v] == index[v]:
      comp = []
      while True:
        w = stack.pop()
        on.discard(w)
        comp.append(w)
        if w == v:
          break
      if len(comp) > 1:
        out.append(tuple(sorted(comp)))

  for v in nodes:
    if v not in index:
      visit(v)
  return sorted(out)


def analyze(root: str, layers=LAYERS) -> Graph:
  """The import graph of the package in folder ``root`` (see the module docstring)."""
  modules = _modules(root)
  pkg = os.path.basename(os.path.normpath(root))
  packages = {m for m, f in modules.items() if f.endswith("__init__.py")}
  name = {m: short(m, m in packages) for m in modules}
  lines, first = {}, {}
  for m, path in modules.items():
    with open(path, encoding="utf-8") as f:
      src = f.read()
    lines[name[m]] = src.count("\n") + (0 if src.endswith("\n") or not src else 1)
    visitor = _Imports(m, m in packages)
    visitor.visit(ast.parse(src, filename=path))
    for candidates, where, line in visitor.found:
      dst = _resolve(candidates, modules)
      if dst is None or dst == m or m.startswith(dst + "."):
        continue  # not the package's, itself, or a package containing it
      if where == "getattr" and not dst.startswith(m + "."):
        where = "function"  # only a package's own submodules are lazy attributes
      key = (name[m], name[dst])
      rank = {"module": 0, "function": 1, "getattr": 2}[where]
      if key not in first or rank < first[key][0]:
        first[key] = (rank, Arrow(key[0], key[1], where, line))
  arrows = sorted((a for _, a in first.values()), key=lambda a: (a.src, a.dst))
  layer = {n: layer_of(n, layers) for n in lines}
  succ: dict[str, set[str]] = {}
  for a in arrows:
    if a.where != "getattr":
      succ.setdefault(a.src, set()).add(a.dst)
  up, lazy = [], []
  for a in arrows:
    lo, hi = layer[a.src], layer[a.dst]
    if lo is not None and hi is not None and hi > lo:
      (lazy if a.where == "getattr" else up).append(a)
  return Graph(pkg, lines, arrows, layer, _circles(sorted(lines), succ), up, lazy)


def report(g: Graph, layers=LAYERS) -> str:
  """The printed summary of ``g``."""
  def lay(m):
    i = g.layer[m]
    return "no layer" if i is None else layers[i][0]

  def arrow(a):
    return f"  {a.src} ({lay(a.src)}) -> {a.dst} ({lay(a.dst)})  [{a.where}, line {a.line}]"

  n_fn = sum(a.where != "module" for a in g.arrows)
  out = [f"package {g.package}: {len(g.lines)} modules, {sum(g.lines.values()):,} lines, "
         f"{len(g.arrows)} import arrows ({len(g.arrows) - n_fn} at module level, {n_fn} only "
         "inside functions)", "", "layers, low to high:"]
  for i, (lname, _) in enumerate(layers):
    out.append(f"  {i:2d} {lname}: {' '.join(sorted(m for m in g.lines if g.layer[m] == i))}")
  if g.unplaced:
    out.append(f"  in no layer: {' '.join(g.unplaced)}")
  out += ["", f"import circles (strongly connected components of more than one module): "
          f"{len(g.circles)}"]
  for c in g.circles:
    out.append("  " + " <-> ".join(c))
    out += ["  " + arrow(a) for a in g.arrows if a.src in c and a.dst in c]
  out += ["", f"upward arrows (from a lower layer to a higher one): {len(g.upward)}"]
  out += [arrow(a) for a in g.upward]
  out += ["", "lazy attributes (a package's module __getattr__ importing its own submodule; not "
          f"run at import, not counted as upward): {len(g.lazy)}"]
  out += [arrow(a) for a in g.lazy]
  out += ["", f"modules over {MAX_LINES} lines: {len(g.over)}"]
  out += [f"  {m} {n:,}" for m, n in g.over]
  out += ["", "arrows:"]
  out += [f"  {a.src} -> {a.dst}  [{a.where}]" for a in g.arrows]
  return "\n".join(out) + "\n"


def main(argv=None, layers=LAYERS) -> int:
  here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("package", nargs="?", default=os.path.join(here, "drjax"),
                  help="the package folder (default: drjax/ of this checkout)")
  ap.add_argument("--check", action="store_true",
                  help="exit 1 on an import circle, an upward arrow or a module in no layer")
  args = ap.parse_args(argv)
  g = analyze(args.package, layers)
  sys.stdout.write(report(g, layers))
  return int(args.check and bool(g.circles or g.upward or g.unplaced))


if __name__ == "__main__":
  sys.exit(main())
