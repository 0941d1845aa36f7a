"""The documentation builds with ``mkdocs build --strict``, and the README's links resolve.

``--strict`` (with ``validation`` in mkdocs.yml) fails on a link to a missing page or file, on an
anchor a page does not have, on a cross-reference to an API object mkdocstrings cannot find, and on
a docs page missing from the navigation. mkdocs-material and mkdocstrings come with the ``test``
extra (and the ``docs`` extra), so CI runs this test; it is skipped only where they are missing.
(``.ci/docs`` builds the site the same way in CI, before the tests.)

The build is run WITHOUT ``--quiet``: ``--quiet`` raises mkdocs' logger to ERROR, so strict mode
never counts a warning and the build "passes" with every warning above (mkdocs issue #4126); this
test passed that way while the site did not build (issue 36). Two checks need no mkdocs: every
page under docs/ is in the navigation or in ``NOT_IN_NAV``, and every ``[name][drjax.x.y]``
cross-reference of a page names an object that a ``::: module`` block of the docs renders.
"""

import ast
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import unicodedata

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HAVE_MKDOCS = all(importlib.util.find_spec(m) is not None
                  for m in ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python"))


@pytest.mark.skipif(not HAVE_MKDOCS, reason="mkdocs-material / mkdocstrings[python] not installed "
                    "(pip install -e '.[docs]')")
def test_docs_build_strict(tmp_path):
  env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
  res = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict",
                        "--config-file", os.path.join(ROOT, "mkdocs.yml"),
                        "--site-dir", str(tmp_path / "site")],
                       cwd=ROOT, capture_output=True, text=True, timeout=240, env=env)
  log = res.stdout + res.stderr
  assert res.returncode == 0, log[-4000:]
  # belt and braces: a warning fails the test even if strict mode stopped counting them
  warnings = [l for l in log.splitlines() if l.startswith(("WARNING", "ERROR"))]
  assert not warnings, "\n".join(warnings)
  site = tmp_path / "site"
  for page in ("index.html", "getting-started/index.html", "api/drjax/index.html",
               "benchmarks/results/amd-epyc-2c.json"):
    assert (site / page).exists(), page
  # the API reference is generated from the docstrings
  api = (site / "api" / "train" / "index.html").read_text(encoding="utf-8")
  assert 'id="drjax.train.make_train"' in api


@pytest.mark.skipif(not HAVE_MKDOCS, reason="mkdocs-material / mkdocstrings[python] not installed "
                    "(pip install -e '.[docs]')")
def test_ci_docs_fails_on_an_unlisted_page_and_a_moved_symbol(tmp_path):
  # CI's step (.ci/docs) on a small site with mkdocs.yml's settings and two of issue 36's
  # breakages: a page that is not in the nav, and a cross-reference to a module OfflineAgent is
  # not in (a symbol that moved without a re-export; with one, mkdocstrings follows the alias
  # once the new module is rendered). A small site: the whole one takes twice as long to build.
  for name in ("drjax", "benchmarks"):
    os.symlink(os.path.join(ROOT, name), tmp_path / name)
  shutil.copytree(os.path.join(ROOT, ".ci"), tmp_path / ".ci")
  shutil.copytree(os.path.join(ROOT, "docs", "hooks"), tmp_path / "docs" / "hooks")
  with open(os.path.join(ROOT, "mkdocs.yml"), encoding="utf-8") as f:
    config = f.read()
  config, n = re.subn(r"^nav:.*?(?=^\S|\Z)", "nav:\n  - index.md\n  - api.md\n", config,
                      flags=re.M | re.S)
  assert n == 1 and "strict: true" in config
  (tmp_path / "mkdocs.yml").write_text(config, encoding="utf-8")
  pages = {"index.md": "# Home\n\n[`OfflineAgent`][drjax.agents.lsvi.OfflineAgent]\n",
           "api.md": "# API\n\n::: drjax.agents.offline_types\n", "unlisted.md": "# Unlisted\n"}
  for name, text in pages.items():
    (tmp_path / "docs" / name).write_text(text, encoding="utf-8")
  res = subprocess.run(["bash", str(tmp_path / ".ci" / "docs")], capture_output=True, text=True,
                       timeout=240, env=dict(os.environ, PYTHON=sys.executable))
  log = res.stdout + res.stderr
  assert res.returncode != 0, log[-4000:]
  assert "- unlisted.md" in log and "target 'drjax.agents.lsvi.OfflineAgent'" in log, log[-4000:]
  assert "Aborted with 2 warnings in strict mode" in log and "--strict failed" in log, log[-4000:]
  # test_docs_build_strict: the real site builds


def test_ci_builds_the_docs_strictly_before_the_tests():
  with open(os.path.join(ROOT, ".ci", "run"), encoding="utf-8") as f:
    run = f.read()
  with open(os.path.join(ROOT, ".ci", "docs"), encoding="utf-8") as f:
    docs = f.read()
  step = 'pip install --quiet -e ".[docs]" && bash .ci/docs'
  assert step in run and run.index(step) < run.index("python -m pytest -q")
  build = re.search(r"^.*-m mkdocs build.*$", docs, re.M).group(0)
  assert "--strict" in build and "--quiet" not in build and " -v" not in build
  assert subprocess.run(["bash", "-n", os.path.join(ROOT, ".ci", "docs")]).returncode == 0


# Pages under docs/ deliberately left out of mkdocs.yml's nav (page -> why); each must also be in
# mkdocs.yml's `not_in_nav`, which tells mkdocs so. Empty: every page is in the navigation.
NOT_IN_NAV = {}


def _mkdocs_section(key):
  """The lines of a top-level key of mkdocs.yml (up to the next top-level key), without YAML."""
  with open(os.path.join(ROOT, "mkdocs.yml"), encoding="utf-8") as f:
    text = f.read()
  m = re.search(rf"^{key}:(.*?)(?=^\S|\Z)", text, re.M | re.S)
  return m.group(1) if m else ""


def _docs_pages():
  docs = os.path.join(ROOT, "docs")
  return sorted(os.path.relpath(os.path.join(d, f), docs).replace(os.sep, "/")
                for d, _, files in os.walk(docs) for f in files if f.endswith(".md"))


def test_every_docs_page_is_in_the_nav_or_deliberately_left_out():
  nav = re.findall(r"([\w./-]+\.md)\s*$", _mkdocs_section("nav"), re.M)
  pages = _docs_pages()
  assert len(nav) == len(set(nav)), "a page is twice in nav"
  assert not set(nav) - set(pages), f"nav lists missing pages: {sorted(set(nav) - set(pages))}"
  unlisted = sorted(set(pages) - set(nav) - set(NOT_IN_NAV))
  assert not unlisted, (f"docs pages in neither mkdocs.yml's nav nor NOT_IN_NAV: {unlisted} "
                        "(add them to nav, or to NOT_IN_NAV with the reason and to not_in_nav)")
  not_in_nav = re.findall(r"[\w./-]+\.md", _mkdocs_section("not_in_nav"))
  assert sorted(not_in_nav) == sorted(NOT_IN_NAV), (not_in_nav, sorted(NOT_IN_NAV))
  # exclude_docs hides files from the site: only the hooks and the figures' PDFs
  assert _mkdocs_section("exclude_docs").split() == ["|", "hooks/", "figures-run/**/*.pdf"]


def _api_blocks():
  """{module: rendered member names or None (all public ones)} of the docs' `::: module` blocks."""
  blocks = {}
  for page in _docs_pages():
    with open(os.path.join(ROOT, "docs", page), encoding="utf-8") as f:
      text = f.read()
    for m in re.finditer(r"^::: ([\w.]+)\n((?:[ \t]+\S.*\n?)*)", text, re.M):
      members = None
      opt = re.search(r"^\s+members:\s*(.*)$", m.group(2), re.M)
      if opt:
        value = opt.group(1).strip()
        members = set() if value == "false" else set(re.findall(r"\w+", value))
      old = blocks.get(m.group(1), set())
      blocks[m.group(1)] = None if members is None or old is None else old | members
  return blocks


def _module_file(module):
  """The source file of a drjax module (read, not imported), or None."""
  base = os.path.join(ROOT, *module.split("."))
  for path in (base + ".py", os.path.join(base, "__init__.py")):
    if os.path.isfile(path):
      return path
  return None


def _reference_problem(ref, blocks):
  """Why mkdocstrings would not render `ref` (a dotted name), or None. Read from the sources, as
  griffe reads them: an object is rendered on the page of the module that DEFINES it (a `:::`
  block of that module, its members option permitting), and only with a docstring."""
  parts = ref.split(".")
  i = max((i for i in range(1, len(parts) + 1) if _module_file(".".join(parts[:i]))), default=0)
  if not i:
    return "no such module"
  module, path = ".".join(parts[:i]), parts[i:]
  if module not in blocks:
    return f"no `::: {module}` block in the docs"
  if not path:
    return None
  members = blocks[module]
  if path[0].startswith("_") or (members is not None and path[0] not in members):
    return f"the `::: {module}` block does not render {path[0]}"
  with open(_module_file(module), encoding="utf-8") as f:
    body = ast.parse(f.read()).body
  node = None
  for name in path:
    defs = {n.name: n for n in body
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    if name not in defs:
      imported = any(isinstance(n, ast.ImportFrom) and any(name in (a.name, a.asname)
                                                           for a in n.names) for n in body)
      return (f"{name} is imported into {module}, not defined there: reference the module that "
              "defines it" if imported else f"{module} defines no {name}")
    node = defs[name]
    body = node.body
  return None if ast.get_docstring(node) else "no docstring (mkdocstrings skips it)"


def test_api_cross_references_name_rendered_objects():
  # `[text][drjax.x.y]` links a page to the API reference; a symbol that moves (as the offline
  # types did when agents/offline.py was split) breaks it. The strict build finds this too; this
  # check says why, runs where mkdocs is not installed, and is stricter: a reference names the
  # module that defines the object (mkdocstrings also follows a re-export to a rendered module).
  blocks = _api_blocks()
  broken = {}
  for page in _docs_pages():
    with open(os.path.join(ROOT, "docs", page), encoding="utf-8") as f:
      text = re.sub(r"```.*?```", "", f.read(), flags=re.S)
    for ref in sorted(set(re.findall(r"\]\[(drjax(?:\.\w+)+)\]", text))):
      problem = _reference_problem(ref, blocks)
      if problem:
        broken[f"{page}: {ref}"] = problem
  assert not broken, "\n".join(f"{k}: {v}" for k, v in broken.items())


def test_cross_reference_check_can_fail():
  # the check above on the references issue 36 found broken, on made-up ones and on good ones
  blocks = _api_blocks()
  for ref in ("drjax.agents.offline.DRPVIHParams", "drjax.agents.offline.OfflineAgent"):
    assert "imported into drjax.agents.offline, not defined" in _reference_problem(ref, blocks)
  assert _reference_problem("drjaxx.f", blocks) == "no such module"
  assert "`::: drjax` block does not render nope" in _reference_problem("drjax.nope.f", blocks)
  assert _reference_problem("drjax.train.no_such_function", blocks) == "drjax.train defines no " \
      "no_such_function"
  assert "does not render setup" in _reference_problem("drjax.paper.setup", {"drjax.paper": {"x"}})
  assert "does not render _widths" in _reference_problem("drjax.train._widths", blocks)
  assert "no `::: drjax._xla` block" in _reference_problem("drjax._xla.configure", blocks)
  for ref in ("drjax.agents.offline_types.OfflineAgent", "drjax.train.make_train",
              "drjax.paper.setup", "drjax.train"):
    assert _reference_problem(ref, blocks) is None, ref


def _github_slug(heading):
  """The anchor GitHub gives a Markdown heading."""
  text = re.sub(r"<[^>]+>", "", heading).strip().lower()
  text = "".join(c for c in text if c in " -_" or unicodedata.category(c)[0] in "LN")
  return text.replace(" ", "-")


def _headings(path):
  """``[(level, text)]`` of a Markdown page's headings, outside code blocks, in order."""
  with open(path, encoding="utf-8") as f:
    text = re.sub(r"```.*?```", "", f.read(), flags=re.S)
  return [(len(marks), heading)
          for marks, heading in re.findall(r"^(#{1,6})\s+(.*?)\s*#*\s*$", text, re.M)]


def _anchors(path):
  slugs, seen = set(), {}
  for _, heading in _headings(path):
    slug = _github_slug(heading)
    n = seen.get(slug, 0)
    seen[slug] = n + 1
    slugs.add(slug if n == 0 else f"{slug}-{n}")
  return slugs


def _links(path):
  with open(path, encoding="utf-8") as f:
    text = re.sub(r"```.*?```", "", f.read(), flags=re.S)
  return re.findall(r"\]\(([^)\s]+)\)", text)


@pytest.mark.parametrize("page", ["README.md", "CHANGELOG.md", "benchmarks/README.md"])
def test_repository_pages_links_resolve(page):
  # The README (shown by GitHub, outside the docs site) links docs pages and their sections:
  # every file must exist and every #anchor be a heading of its page (GitHub's anchors).
  path = os.path.join(ROOT, page)
  if not os.path.exists(path):
    pytest.skip(f"{page} does not exist")
  broken = []
  for link in _links(path):
    if re.match(r"[a-z]+:", link):
      continue
    target, _, anchor = link.partition("#")
    full = os.path.normpath(os.path.join(os.path.dirname(path), target)) if target else path
    if not os.path.exists(full):
      broken.append(link)
    elif anchor and full.endswith(".md") and anchor not in _anchors(full):
      broken.append(link)
  assert not broken, f"{page}: broken links {broken}"


def test_license_is_apache_2():
  with open(os.path.join(ROOT, "LICENSE"), encoding="utf-8") as f:
    text = f.read()
  assert "Apache License" in text and "Version 2.0, January 2004" in text
  assert "END OF TERMS AND CONDITIONS" in text


def test_readme_is_short_and_starts_with_the_setup():
  with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
    text = f.read()
  # a README for users: the rest lives in docs/ (issues 19 and 36: about 15 KB). The whole file,
  # source markers included: measured on the prose alone (< 16,000) it grew to 17.6 KB.
  assert len(text.encode()) < 15_000, len(text.encode())
  # the Quickstart's first block starts with exactly the two set-up commands
  m = re.search(r"^#+\s*Quick\s*start.*?$", text, re.I | re.M)
  block = re.search(r"```[a-z]*\n(.*?)```", text[m.end():], re.S).group(1)
  lines = [l.strip() for l in block.splitlines() if l.strip() and not l.startswith("#")]
  assert lines == ["pip install -e . && drjax reproduce all --out results",
                   'pip install -e ".[test]" && python -m pytest -q']
  assert "drjax-rl" in text and "DrJAX" in text and "git clone" in text


def test_no_docs_page_repeats_a_section():
  # A section pasted twice keeps both copies' claims, and the stale copy goes unnoticed: the site
  # builds (mkdocs numbers the second anchor). docs/benchmarks.md once held "Running them",
  # "Machines" and "Time to first result" twice, the second copy with an older sitting's figures.
  repeated = {}
  for page in [*_docs_pages(), "../README.md"]:
    headings = _headings(os.path.join(ROOT, "docs", page))
    twice = sorted({h for h in headings if headings.count(h) > 1})
    if twice:
      repeated[page] = twice
  assert not repeated, f"headings repeated within a page: {repeated}"
