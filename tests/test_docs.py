"""The documentation builds with ``mkdocs build --strict``, and the README's links resolve.

``--strict`` (with ``validation`` in mkdocs.yml) fails on a link to a missing page or file, on an
anchor a page does not have, on a cross-reference to an API object mkdocstrings cannot find, and on
a docs page missing from the navigation. mkdocs-material and mkdocstrings come with the ``test``
extra (and the ``docs`` extra), so CI runs this test; it is skipped only where they are missing.
"""

import importlib.util
import os
import re
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
  res = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet",
                        "--config-file", os.path.join(ROOT, "mkdocs.yml"),
                        "--site-dir", str(tmp_path / "site")],
                       cwd=ROOT, capture_output=True, text=True, timeout=240, env=env)
  assert res.returncode == 0, (res.stdout + res.stderr)[-4000:]
  site = tmp_path / "site"
  for page in ("index.html", "getting-started/index.html", "api/drjax/index.html",
               "benchmarks/results/amd-epyc-2c.json"):
    assert (site / page).exists(), page
  # the API reference is generated from the docstrings
  api = (site / "api" / "train" / "index.html").read_text(encoding="utf-8")
  assert 'id="drjax.train.make_train"' in api


def _github_slug(heading):
  """The anchor GitHub gives a Markdown heading."""
  text = re.sub(r"<[^>]+>", "", heading).strip().lower()
  text = "".join(c for c in text if c in " -_" or unicodedata.category(c)[0] in "LN")
  return text.replace(" ", "-")


def _anchors(path):
  with open(path, encoding="utf-8") as f:
    text = re.sub(r"```.*?```", "", f.read(), flags=re.S)
  slugs, seen = set(), {}
  for heading in re.findall(r"^#{1,6}\s+(.*?)\s*#*\s*$", text, re.M):
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
  # a README for users: the rest lives in docs/ (the budget: about 15 KB)
  prose = re.sub(r"<!--.*?-->", "", text, flags=re.S)
  assert len(prose.encode()) < 16_000, len(prose.encode())
  # the Quickstart's first block starts with exactly the two set-up commands
  m = re.search(r"^#+\s*Quick\s*start.*?$", text, re.I | re.M)
  block = re.search(r"```[a-z]*\n(.*?)```", text[m.end():], re.S).group(1)
  lines = [l.strip() for l in block.splitlines() if l.strip() and not l.startswith("#")]
  assert lines == ["pip install -e . && drjax reproduce all --out results",
                   'pip install -e ".[test]" && python -m pytest -q']
  assert "drjax-rl" in text and "DrJAX" in text and "git clone" in text
