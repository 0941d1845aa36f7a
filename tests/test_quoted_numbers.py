"""Quoted numbers cannot go stale: each one is checked against the file it comes from.

Tables of measurements are generated from the result files (``drjax/bench/doc_tables.py``,
checked by tests/test_doc_tables.py) and the prose quotes few numbers. Where a finding quotes one
(docs/findings/, the README's findings, the CHANGELOG's record), it carries its source right
after it, as an HTML comment that neither GitHub nor the docs site shows:

    took 32.0 s<!-- src: benchmarks/results/amd-epyc-2c.json#benchmarks/reproduce_all/subprocess/wall_s -->

The source is ``FILE#PATH`` (FILE relative to the repository root, glob patterns allowed) and
optional ``@OP`` steps (``@``, not ``|``, which would split a table cell); two sources separated
by `` / `` are divided. FILE is a JSON file or a Markdown file whose pipe tables are read as one
list of rows ({header: cell}). PATH steps, split on ``/``: a key (or the unique key starting with
it, code quotes aside: long table headers), a list index (``0``, ``-1``) or slice (``1:``), ``*``
(every value), or a filter ``[key=value,...]`` (every row whose fields match). OP: ``min``,
``max``, ``mean`` (over everything selected), ``*F`` or ``/F`` (scale, e.g. ``*1000`` for seconds
quoted in ms), ``abs``. The quoted number must equal the source's value rounded to the quoted
number of decimals. Markers inside code (examples like the one above) are not checked.

Sources are committed result files: ``benchmarks/results/*`` (timings; the text around each of
them must name the machine), ``docs/findings/*.json`` and ``docs/figures-run/`` (written by the
one documented command of docs/reproduce.md, which also makes every figure the pages show).
"""

import glob
import json
import math
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PAGES = sorted(
    ["README.md", "CHANGELOG.md", os.path.join("benchmarks", "README.md")]
    + [os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "**", "*.md"),
                                                    recursive=True)
       if not os.path.relpath(p, ROOT).startswith(os.path.join("docs", "figures-run"))])
PAGES = [p for p in PAGES if os.path.exists(os.path.join(ROOT, p))]

MARKER = re.compile(r"<!--\s*src:\s*(.*?)\s*-->", re.S)
# The number right before a marker: an optional sign (a "-" right after a digit or a marker is a
# range dash, not a sign), digits with thousands commas, decimals, then an optional unit and bold.
QUOTED = re.compile(r"(?P<sign>(?<![^\s(\[=/])[-−])?(?P<num>\d[\d,]*(?:\.\d+)?(?:e-?\d+)?)"
                    r"(?P<unit>\s?(?:x|%|s|ms|µs|MB|GB|GiB|MiB))?\**\s*$")

# Which machine a benchmark file measured: the name the surrounding text must mention.
MACHINES = {"amd-epyc-2c": "amd-epyc-2c", "intel-xeon-2c": "intel-xeon-2c",
            "nvidia-h200": "H200"}

# The findings the README quotes: each of these files must be quoted there at least once.
README_SOURCES = (
    "docs/figures-run/paper/results.md",          # the critical q, the put option's crossing
    "docs/findings/drpvi_findings.json",          # the DRPVI finding
    "docs/findings/r2pvi_published_code.json",    # the R2PVI published-code finding
)

# Pages whose prose may quote a number with a source: the findings. Every other page points to a
# generated table instead (a marker there fails test_markers_only_where_findings_quote_numbers).
FINDINGS_PAGES = ("README.md", "CHANGELOG.md")
FINDINGS_DIR = os.path.join("docs", "findings") + os.sep
# A generated table: the generator rewrites it, tests/test_doc_tables.py checks it.
GENERATED = re.compile(r"^<!--\s*table:\s*[\w-]+\s*-->.*?^<!-- /table -->", re.S | re.M)

# Figures not made by the documented reproduce command: timing studies of a named machine.
MACHINE_FIGURES = ("docs/figures/r2pvi_time_cpu.png", "docs/figures/r2pvi_time_h200.png")


def _read(page):
  with open(os.path.join(ROOT, page), encoding="utf-8") as f:
    return f.read()


def _code_spans(text):
  """(start, end) of fenced code blocks and inline code: markers there are examples."""
  spans = [m.span() for m in re.finditer(r"^```.*?^```", text, re.S | re.M)]
  spans += [m.span() for m in re.finditer(r"`[^`\n]+`", text)]
  return spans


def _markers(page):
  """(marker text, quoted number as text, block of text around it) of each marker."""
  text = _read(page)
  code = _code_spans(text)
  out = []
  for m in MARKER.finditer(text):
    if any(a <= m.start() < b for a, b in code):
      continue
    before = MARKER.sub("", text[max(0, m.start() - 200):m.start()])
    q = QUOTED.search(before)
    quoted = None if q is None else (q.group("sign") or "").replace("−", "-") + q.group("num")
    out.append((m.group(1), quoted, _block(text, m.start())))
  return out


def _block(text, pos):
  """The paragraph holding pos; a table with the paragraphs right before and after it."""
  paras = [(m.start(), m.end()) for m in re.finditer(r"(?:[^\n]|\n(?![ \t]*\n))+", text)]
  i = next(k for k, (a, b) in enumerate(paras) if a <= pos < b)
  lo, hi = i, i
  if text[paras[i][0]:paras[i][1]].lstrip().startswith("|"):
    lo, hi = max(0, i - 1), min(len(paras) - 1, i + 1)
  return text[paras[lo][0]:paras[hi][1]]


class Many(list):
  """Several selected values: path steps apply to each, aggregates reduce them."""


_CACHE = {}


def _load(path):
  if path not in _CACHE:
    text = _read(path)
    if path.endswith(".json"):
      _CACHE[path] = json.loads(text)
    elif path.endswith(".md"):
      _CACHE[path] = _table_rows(text)
    else:
      raise ValueError(f"unsupported source file type: {path}")
  return _CACHE[path]


def _cells(line):
  cells = re.split(r"(?<!\\)\|", line.strip())[1:-1]
  return [c.strip().replace("\\|", "|") for c in cells]


def _table_rows(text):
  rows, header = [], None
  for line in text.splitlines():
    if not line.lstrip().startswith("|"):
      header = None
      continue
    cells = _cells(line)
    if header is None:
      header = cells
    elif not all(re.fullmatch(r":?-+:?", c) for c in cells):
      rows.append(dict(zip(header, cells)))
  return rows


def _number(v):
  if isinstance(v, bool) or v is None:
    raise ValueError(f"not a number: {v!r}")
  if isinstance(v, (int, float)):
    return float(v)
  s = str(v).strip().strip("*").replace(",", "").replace("−", "-").lstrip("+")
  s = re.sub(r"\s*(x|%|s)$", "", s)
  return float(s)


def _same(a, b):
  try:
    return math.isclose(_number(a), _number(b), rel_tol=1e-9, abs_tol=1e-12)
  except (TypeError, ValueError):
    return str(a).strip() == str(b).strip()


def _step(value, step):
  if isinstance(value, Many):
    out = Many()
    for v in value:
      r = _step(v, step)
      out.extend(r) if isinstance(r, Many) else out.append(r)
    return out
  if step == "*":
    return Many(value.values() if isinstance(value, dict) else value)
  if step.startswith("[") and step.endswith("]"):
    conds = [c.split("=", 1) for c in step[1:-1].split(",")]
    rows = Many(r for r in value if isinstance(r, dict)
                and all(k in r and _same(r[k], v) for k, v in conds))
    if not rows:
      raise KeyError(f"no row matches {step}")
    return rows[0] if len(rows) == 1 else rows
  if isinstance(value, list):
    if re.fullmatch(r"-?\d*:-?\d*", step):
      a, b = (int(x) if x else None for x in step.split(":"))
      return Many(value[a:b])
    return value[int(step)]
  if step in value:
    return value[step]
  keys = [k for k in value if k.startswith(step) or k.lstrip("`").startswith(step)]
  if len(keys) != 1:
    raise KeyError(f"{step!r} matches {len(keys)} keys of {sorted(value)[:12]}")
  return value[keys[0]]


def _flat(value):
  if isinstance(value, list):
    for v in value:
      yield from _flat(v)
  elif value is not None:
    x = _number(value)
    if not math.isnan(x):
      yield x


def _op(value, op):
  if op in ("min", "max", "mean"):
    xs = list(_flat(value))
    assert xs, "nothing to aggregate"
    return {"min": min, "max": max, "mean": lambda v: sum(v) / len(v)}[op](xs)
  if isinstance(value, Many):
    return Many(_op(v, op) for v in value)
  if op == "abs":
    return abs(_number(value))
  if op[0] in "*/":
    f = float(op[1:])
    return _number(value) * f if op[0] == "*" else _number(value) / f
  raise ValueError(f"unknown operation {op!r}")


def _term(term):
  src, _, rest = term.partition("#")
  path, *ops = rest.split("@")
  files = sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, src)))
  assert files, f"source file {src} does not exist (is it committed?)"
  values = Many()
  for f in files:
    v = _load(f)
    for step in [s for s in path.split("/") if s]:
      v = _step(v, step)
    values.extend(v) if isinstance(v, Many) else values.append(v)
  value = values[0] if len(values) == 1 and not any(c in src for c in "*?[") else values
  for op in ops:
    value = _op(value, op.strip())
  assert not isinstance(value, list), f"{term} selects several values: add @min, @max or @mean"
  return _number(value)


def _evaluate(source):
  terms = source.split(" / ")
  value = _term(terms[0])
  for t in terms[1:]:
    value /= _term(t)
  return value


def _tolerance(quoted):
  """Half a unit of the quoted number's last digit ("0.35": 0.005, "2e-4": 0.5e-4)."""
  mantissa, _, exponent = quoted.replace(",", "").partition("e")
  decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
  return 0.5 * 10.0 ** (int(exponent or 0) - decimals)


MARKERS = {page: _markers(page) for page in PAGES}


def test_the_pages_quote_numbers_with_sources():
  assert sum(len(m) for m in MARKERS.values()) > 0, "no quoted numbers found"
  readme = MARKERS["README.md"]
  assert len(readme) >= 10, "the numbers of the README's findings must carry their sources"
  for src in README_SOURCES:
    assert any(src in source for source, _, _ in readme), f"the README quotes nothing from {src}"


def test_markers_only_where_findings_quote_numbers():
  # Outside the findings a measurement belongs in a generated table, not in a marked sentence.
  bad = [f"{page}: {len(MARKERS[page])} markers" for page in PAGES
         if MARKERS[page] and page not in FINDINGS_PAGES and not page.startswith(FINDINGS_DIR)]
  assert not bad, "quote these numbers from a generated table (drjax/bench/doc_tables.py):\n" + \
      "\n".join(bad)


def _mismatch(source, quoted):
  if quoted is None:
    return f"no number right before the marker {source!r}"
  try:
    value = _evaluate(source)
  except Exception as e:  # pylint: disable=broad-except  (reported with the marker)
    return f"{source}: {type(e).__name__}: {e}"
  want = float(quoted.replace(",", ""))
  if abs(value - want) > _tolerance(quoted) * (1 + 1e-9) + 1e-12 * abs(want):
    return f"quotes {quoted}, but {source} gives {value!r}"
  return None


@pytest.mark.parametrize("page", [p for p in PAGES if MARKERS[p]])
def test_quoted_numbers_match_their_sources(page):
  # One test per page, every stale number reported: update the text, or rerun the command that
  # writes the source file and commit its output.
  bad = [msg for source, quoted, _ in MARKERS[page] if (msg := _mismatch(source, quoted))]
  assert not bad, f"{page}: {len(bad)} quoted numbers disagree with their sources:\n" + \
      "\n".join(bad)


@pytest.mark.parametrize("page", [p for p in PAGES if any("benchmarks/results/" in s
                                                         for s, _, _ in MARKERS[p])])
def test_every_timing_names_its_machine(page):
  bad = []
  for source, quoted, block in MARKERS[page]:
    for term in source.split(" / "):
      if "benchmarks/results/" not in term:
        continue
      name = os.path.basename(term.partition("#")[0])
      machine = [m for prefix, m in MACHINES.items() if name.startswith(prefix)]
      if not machine:
        bad.append(f"{name}: which machine is this? (add it to MACHINES)")
      elif machine[0] not in block:
        bad.append(f"the text around {quoted} (from {name}) does not name {machine[0]!r}")
  assert not bad, f"{page}:\n" + "\n".join(bad)


def _prose(text):
  text = re.sub(r"```.*?```", "", text, flags=re.S)
  text = re.sub(r"`[^`\n]*`", "", text)
  return text


def test_readme_timings_and_speedups_carry_sources():
  # Every "N s" / "N ms" / "Nx" of the README's prose is a measurement: it must carry a source
  # (or be in a generated table, which tests/test_doc_tables.py checks).
  text = _prose(GENERATED.sub("", _read("README.md")))
  unsourced = []
  for m in re.finditer(r"(?<![\w.])\d[\d,]*(?:\.\d+)?(?:\s?(?:s|ms)|x)(?![\w])", text):
    after = text[m.end():m.end() + 12]
    if not re.match(r"\**\s*<!--\s*src:", after):
      unsourced.append(text[max(0, m.start() - 30):m.end() + 10].replace("\n", " "))
  assert not unsourced, f"timings or speedups without a source: {unsourced}"


def _images(page):
  text = _read(page)
  base = os.path.dirname(page)
  for target in re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", text):
    yield os.path.normpath(os.path.join(base, target)).replace(os.sep, "/")


def _figure_command():
  """{output directory: figure names} of the documented command that makes the figures."""
  text = _read("docs/reproduce.md")
  runs = re.findall(r"drjax reproduce ([\w\s-]+?)((?:\s--preset \w+)?)"
                    r"\s--out (docs/figures-run/\w+)", text)
  assert runs, "docs/reproduce.md documents no command writing docs/figures-run/"
  from drjax import paper  # no JAX: the figure names only
  out = {}
  for names, _, directory in runs:
    names = names.split()
    out[directory] = set(paper.ALL_FIGURES) if names == ["all"] else set(names)
  return out


@pytest.mark.parametrize("page", ["README.md"] + [p for p in PAGES if p.startswith("docs")])
def test_figures_come_from_the_documented_command(page):
  made = _figure_command()
  for image in _images(page):
    assert os.path.exists(os.path.join(ROOT, image)), f"{page}: {image} does not exist"
    if image in MACHINE_FIGURES:
      continue
    m = re.fullmatch(r"(docs/figures-run/\w+)/([\w-]+)/([\w-]+)\.png", image)
    assert m and m.group(2) == m.group(3), f"{page}: {image} is not written by drjax reproduce"
    assert m.group(2) in made.get(m.group(1), ()), (
        f"{page}: {image} is not made by the documented command of docs/reproduce.md")


def test_each_figure_run_is_one_run():
  # results.md lists the run of every panel; numbers and figures of a directory must agree.
  for path in glob.glob(os.path.join(ROOT, "docs", "figures-run", "*", "results.md")):
    with open(path, encoding="utf-8") as f:
      assert "All rows come from one run." in f.read(), path
