"""drjax's import layers (issue 28, item 6): no import circles, no arrow running back up.

``benchmarks/import_graph.py`` reads the package with ``ast`` (see its docstring for what an arrow
is and its ``LAYERS`` table). The known violations left in others' files are an explicit allow-list
below, to be emptied as they are fixed; an entry that no longer occurs fails the test, so the list
only shrinks. A new circle or upward arrow anywhere fails it, as the synthetic packages below show.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DRJAX = os.path.join(ROOT, "drjax")


def _load():
  spec = importlib.util.spec_from_file_location(
      "import_graph", os.path.join(ROOT, "benchmarks", "import_graph.py"))
  mod = importlib.util.module_from_spec(spec)
  sys.modules["import_graph"] = mod  # dataclasses look their module up
  spec.loader.exec_module(mod)
  return mod


ig = _load()

# Import circles still allowed (each a frozenset of modules): none.
ALLOWED_CIRCLES: frozenset[frozenset[str]] = frozenset()

# Upward arrows still allowed, (from, to).
ALLOWED_UPWARD: frozenset[tuple[str, str]] = frozenset({
    # The R2PVI paper's timing figure (paper/) runs the offline benchmark (bench/, above paper/):
    # issue 28 item 6, "the timing figure lives in one place" (files of the paper/ and bench/ work).
    ("paper/r2pvi_time", "bench/machine"),
    ("paper/r2pvi_time", "bench/offline"),
})


def violations(root, layers=ig.LAYERS, circles=ALLOWED_CIRCLES, upward=ALLOWED_UPWARD) -> dict:
  """The circles, upward arrows and modules in no layer of the package ``root`` not allowed."""
  g = ig.analyze(str(root), layers)
  return {"circles": [c for c in g.circles if frozenset(c) not in circles],
          "upward": [(a.src, a.dst) for a in g.upward if (a.src, a.dst) not in upward],
          "unplaced": g.unplaced}


def test_drjax_has_no_circle_and_no_upward_arrow():
  assert violations(DRJAX) == {"circles": [], "upward": [], "unplaced": []}


def test_the_allow_list_holds_only_what_still_occurs():
  g = ig.analyze(DRJAX)
  stale = ([sorted(c) for c in ALLOWED_CIRCLES if tuple(sorted(c)) not in g.circles]
           + [a for a in ALLOWED_UPWARD if a not in {(u.src, u.dst) for u in g.upward}])
  assert not stale, f"fixed, remove from the allow-list in tests/test_layers.py: {stale}"


def test_the_facade_does_not_import_sweeps_at_import():
  """``import drjax`` runs no sweeps module; ``drjax.sweeps`` is imported on first use.

  The facade's ``__getattr__`` imports its public submodules by a computed name
  (``importlib.import_module(f"drjax.{name}")``, no arrow ``ast`` can see), so the intent is
  checked where it holds: no import of a sweeps module in ``__init__`` outside ``__getattr__``,
  and, in a fresh interpreter, none in ``sys.modules`` after ``import drjax``.
  """
  g = ig.analyze(DRJAX)
  to_sweeps = [a for a in g.arrows if a.src == "__init__" and a.dst.startswith("sweeps/")]
  assert all(a.where == "getattr" for a in to_sweeps), to_sweeps
  code = ("import sys, drjax\n"
          "early = sorted(m for m in sys.modules if m.startswith(('drjax.sweeps', 'jax')))\n"
          "assert not early, early\n"
          "assert 'sweeps' in dir(drjax)\n"
          "assert drjax.sweeps is sys.modules['drjax.sweeps']\n")
  env = {**os.environ, "DRJAX_NO_CACHE": "1"}
  res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=120, check=False)
  assert res.returncode == 0, res.stderr[-2000:]


def test_circles_are_the_mutually_reachable_groups():
  """Against a transitive closure of drjax's arrows, computed apart from the script's Tarjan."""
  g = ig.analyze(DRJAX)
  nodes = sorted(g.lines)
  reach = {u: {a.dst for a in g.arrows if a.src == u and a.where != "getattr"} for u in nodes}
  changed = True
  while changed:
    changed = False
    for u in nodes:
      more = set().union(*(reach[v] for v in reach[u])) - reach[u]
      if more:
        reach[u] |= more
        changed = True
  groups = {tuple(sorted({u} | {v for v in reach[u] if u in reach[v]})) for u in nodes}
  assert sorted(c for c in groups if len(c) > 1) == g.circles


def test_modules_and_lines_are_the_files():
  files = [os.path.join(d, f) for d, _, fs in os.walk(DRJAX) for f in fs if f.endswith(".py")]
  g = ig.analyze(DRJAX)
  assert len(g.lines) == len(files)
  total = 0
  for f in files:
    with open(f, encoding="utf-8") as fh:
      total += len(fh.readlines())
  assert sum(g.lines.values()) == total


# ---------------------------------------------------------------------------------------------
# Synthetic packages: the check fails on a new circle or upward arrow.

LAYERS = (("low", ("low", "sub/*")), ("high", ("high", "__init__")))


def _package(tmp_path, files: dict[str, str]) -> str:
  root = tmp_path / "pkg"
  for name, src in {"__init__.py": "", "sub/__init__.py": "", **files}.items():
    (root / name).parent.mkdir(parents=True, exist_ok=True)
    (root / name).write_text(textwrap.dedent(src))
  return str(root)


def _check(root) -> dict:
  return violations(root, LAYERS, frozenset(), frozenset())


def test_a_clean_package_passes(tmp_path):
  root = _package(tmp_path, {
      "low.py": "import os\nimport pkg\nfrom pkg import sub\n",  # pkg contains low: no arrow
      "high.py": "from . import low\nfrom pkg.low import os as _\n",
      "sub/leaf.py": "from pkg.sub import x\nfrom .. import low\n",  # sub/__init__: its own package
  })
  g = ig.analyze(root, LAYERS)
  assert [(a.src, a.dst) for a in g.arrows] == [
      ("high", "low"), ("low", "sub/__init__"), ("sub/leaf", "low")]
  assert _check(root) == {"circles": [], "upward": [], "unplaced": []}
  assert ig.main([root], LAYERS) == 0 and ig.main([root, "--check"], LAYERS) == 0


def test_a_new_circle_fails(tmp_path):
  root = _package(tmp_path, {
      "low.py": "import pkg.sub.leaf\n",
      "high.py": "",
      "sub/leaf.py": "def f():\n  from pkg import low  # inside a function: an arrow too\n",
  })
  assert _check(root) == {"circles": [("low", "sub/leaf")], "upward": [], "unplaced": []}
  assert ig.main([root, "--check"], LAYERS) == 1


def test_a_new_upward_arrow_fails(tmp_path):
  root = _package(tmp_path, {
      "low.py": "import importlib\ndef f():\n  return importlib.import_module('pkg.high')\n",
      "high.py": "",
  })
  got = _check(root)
  assert got == {"circles": [], "upward": [("low", "high")], "unplaced": []}
  allowed = violations(root, LAYERS, frozenset(), frozenset({("low", "high")}))
  assert allowed["upward"] == []


def test_a_module_in_no_layer_fails(tmp_path):
  root = _package(tmp_path, {"low.py": "", "high.py": "", "stray.py": ""})
  assert _check(root)["unplaced"] == ["stray"]


@pytest.mark.parametrize("own", [True, False])
def test_a_lazy_facade_attribute_is_not_upward(tmp_path, own):
  """``__getattr__`` of ``__init__`` importing the package's own submodule runs on first use only;
  from a plain module, or in any other function, it is an upward arrow."""
  src = "def __getattr__(name):\n  import pkg.top\n  return pkg.top\n"
  layers = (("low", ("low", "__init__" if own else "mid")), ("high", ("top",)))
  files = {"low.py": "", "top.py": "import pkg\nfrom pkg import low\n"}
  files.update({"__init__.py": src} if own else {"mid.py": src})
  root = _package(tmp_path, files)
  g = ig.analyze(root, layers)
  src_name = "__init__" if own else "mid"
  assert [(a.src, a.dst) for a in (g.lazy if own else g.upward)] == [(src_name, "top")]
  assert not (g.upward if own else g.lazy)
