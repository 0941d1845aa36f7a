"""One look for every drjax figure (``reproduce``, ``train``, ``sweep``).

* one colour and one name per algorithm: ``color(name)`` / ``display(name)``, both read from
  ``drjax.agents.registry`` (``AgentSpec.color`` / ``.display``), for a registry name
  (``"dr-lsvi-ucb"``), a display name (``"DR-LSVI-UCB"``) or a variant of one
  (``"DRPVI, rho 0.1"``: DRPVI's colour; ``shades`` tells variants apart);
* exact references (optimal policies, bounds) in black and greys, which no algorithm uses, thin
  and drawn *above* the learned curves (``reference_style``), so a reference that coincides with
  a learned curve stays visible;
* one wording of the y axis: ``Y_LABEL`` (``Y_LABEL_SOURCE`` when the return is measured in the
  source domain);
* symbols as mathtext: ``math("||xi||_1 = 0.1, rho_1,4 = 0.5")`` gives
  ``"$\\|\\xi\\|_1$ = 0.1, $\\rho_{1,4}$ = 0.5"``.
"""

from __future__ import annotations

import re

import numpy as np

from drjax.agents import registry

__all__ = ["Y_LABEL", "Y_LABEL_SOURCE", "display", "color", "is_reference", "reference_style",
           "shades", "math", "y_label", "LEARNED_LW", "REFERENCE_LW", "LEARNED_Z",
           "REFERENCE_Z"]

Y_LABEL = "expected return in the target domain"
Y_LABEL_SOURCE = "expected return in the source domain"

LEARNED_LW, REFERENCE_LW = 1.8, 1.2
LEARNED_Z, REFERENCE_Z = 2.0, 3.0  # references above the learned curves (Line2D default: 2)

# Exact references: colours no algorithm has (black, greys), each with its own dash pattern.
_REFERENCES = {
    "robust optimum (exact)": ("black", (0, (5, 2.5))),
    "non-robust optimum (exact)": ("0.3", (0, (1.2, 2.2))),
    "optimal stopping of the source (exact)": ("0.3", (0, (1.2, 2.2))),  # the non-robust one
    "Theorem 1 bound": ("0.3", (0, (6, 2, 1.5, 2))),
}
_OTHER_REFERENCE = ("0.2", (0, (6, 2, 1.5, 2)))  # e.g. "TV-regularized optimum, ... (exact)"


def display(name: str) -> str:
  """The name an algorithm has in figures and tables (registry ``display``); other names as
  given."""
  if name in registry.names():
    return registry.get(name).display
  return name


def _algorithm(name: str):
  """The registry spec of ``name`` (registry name, display name, or ``"<display>, ..."``)."""
  base = name.split(",")[0].strip()
  for spec in registry.specs():
    if base in (spec.name, spec.display):
      return spec
  return None


def is_reference(name: str) -> bool:
  """Whether a curve is an exact reference (an optimal policy's value, a bound), not learned."""
  return "(exact)" in name or "bound" in name.lower()


def color(name: str):
  """The colour of an algorithm (registry) or of a reference; None for anything else."""
  if is_reference(name):
    return reference_style(name)["color"]
  spec = _algorithm(name)
  return None if spec is None else spec.color


def reference_style(name: str) -> dict:
  """``Line2D`` keywords of an exact reference: colour, dashes, width, drawn above curves."""
  c, ls = _REFERENCES.get(name, _OTHER_REFERENCE)
  return dict(color=c, ls=ls, lw=REFERENCE_LW, zorder=REFERENCE_Z)


def shades(base, n: int) -> list:
  """``n`` shades of colour ``base`` from light to dark (variants of one algorithm)."""
  from matplotlib.colors import to_rgb  # pylint: disable=g-import-not-at-top

  rgb = np.asarray(to_rgb(base))
  if n == 1:
    return [tuple(float(v) for v in rgb)]
  out = []
  for t in np.linspace(-0.45, 0.45, n):  # < 0: mixed with white, > 0: with black
    mix = rgb + (-t) * (1 - rgb) if t < 0 else rgb * (1 - t)
    out.append(tuple(float(v) for v in np.clip(mix, 0, 1)))
  return out


_GREEK = ("alpha", "beta", "delta", "lambda", "mu", "nu", "phi", "rho", "xi")
_MATH = re.compile(r"(\$[^$]*\$)")
_RULES = (
    (re.compile(r"\|\|xi\|\|_1"), r"$\\|\\xi\\|_1$"),
    (re.compile(r"\|\|xi\|\|"), r"$\\|\\xi\\|$"),
    (re.compile(r"\b(" + "|".join(_GREEK) + r")_\{?(\w),(\w)\}?"), r"$\\\1_{\2,\3}$"),
    (re.compile(r"\b(" + "|".join(_GREEK) + r")_\{?(\w+)\}?"), r"$\\\1_{\2}$"),
    (re.compile(r"\b(" + "|".join(_GREEK) + r")\b"), r"$\\\1$"),
    (re.compile(r"\bp_u\b"), r"$p_u$"),
    (re.compile(r"\bV\*_1\b"), r"$V^*_1$"),
    (re.compile(r"\bx(\d)\b"), r"$x_\1$"),
    (re.compile(r"AveSubopt\(k\)"), r"AveSubopt$(k)$"),
    (re.compile(r"AveSubopt\(K\)"), r"AveSubopt$(K)$"),
    (re.compile(r">="), r"$\\geq$"),
    (re.compile(r"<="), r"$\\leq$"),
)
# Single letters that are symbols here (q, k, p, K, H, d, N), as words of their own: not inside a
# word, a hyphenated word ("d-rectangular") or an enumeration label such as "(d)".
_LETTER = re.compile(r"(?<![\w$\\{\-'])([qkpKHdN])(?![\w$}\-'])")


def _letters(text: str) -> str:
  def sub(m):
    i = m.start()
    if text[i - 1:i] == "(" and text[i + 1:i + 2] == ")":
      return m.group(0)  # "(d)"
    return f"${m.group(1)}$"
  return _LETTER.sub(sub, text)


def math(text: str) -> str:
  """``text`` with the symbols drjax writes in plain text (``||xi||_1``, ``rho_1,4``, ``rho``,
  ``p_u``, ``q``, ``k``, ``K``, ``x1`` ...) as mathtext; parts already in ``$...$`` are kept."""
  if not text:
    return text
  parts = _MATH.split(text)
  for j in range(0, len(parts), 2):  # even parts are outside $...$
    s = parts[j]
    pieces = [s]
    for rule, repl in _RULES:  # each rule only rewrites what earlier rules left as plain text
      pieces = [q for p in pieces for q in
                ([p] if p.startswith("$") else _MATH.split(rule.sub(repl, p)))]
      pieces = [p for p in pieces if p]
    parts[j] = "".join(p if p.startswith("$") else _letters(p) for p in pieces)
  return "".join(parts)


def y_label(text: str | None = None) -> str:
  """The y-axis wording: ``Y_LABEL`` for a return in the target domain (``"average reward ..."``
  in panels written by older runs), anything else as given; as mathtext."""
  if not text:
    return Y_LABEL
  if text.startswith("average reward in the target domain"):
    text = Y_LABEL + text[len("average reward in the target domain"):]
  elif text.startswith("average reward"):
    text = "expected return" + text[len("average reward"):]
  return math(text)
