"""Results files: one JSON per panel, PNG + PDF figures, and ``results.md``; written atomically.

Everything of one figure NAME is first written into a temporary directory next to ``DIR/<NAME>``
and renamed into place only when complete, so an interrupted run leaves either the previous
complete results or none — never a half-written directory.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile

import numpy as np

COLORS = {"LSVI-UCB": "tab:blue", "DR-LSVI-UCB": "tab:red",
          "robust optimum (exact)": "tab:red", "non-robust optimum (exact)": "tab:blue",
          "Theorem 1 bound": "tab:gray"}
TITLES = {"fig1": "Figure 1: simulated linear MDP (rho_1,4 = 0.5)",
          "fig3": "Ablation (Appendix A): rho_1,4 in {0.3, 0.4, 0.5}",
          "fig2": "Figure 2: American put option",
          "subopt": "AveSubopt(k) on the simulated linear MDP"}


def crossing(x, a, b, tol=1e-9):
  """First x where curve ``a - b`` changes sign (linear interpolation).

  Points where the curves coincide (``|a - b| <= tol``) carry no sign; the crossing is between the
  last point with one sign and the next point with the other. Returns None if the sign never
  changes (including identical curves).
  """
  x, diff = np.asarray(x, float), np.asarray(a, float) - np.asarray(b, float)
  last = None
  for i in range(len(x)):
    if abs(diff[i]) <= tol:
      continue
    if last is not None and diff[last] * diff[i] < 0:
      if i == last + 1:
        return float(x[last] + (x[i] - x[last]) * diff[last] / (diff[last] - diff[i]))
      return float(x[last + 1])  # the curves touch in between
    last = i
  return None


def area(x, y):
  """Area under a curve (trapezoid rule)."""
  x, y = np.asarray(x, float), np.asarray(y, float)
  return float(np.sum((x[1:] - x[:-1]) * (y[1:] + y[:-1]) / 2))


def _plot(name: str, panels: dict, path_base: str) -> None:
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top

  tags = list(panels)
  ncol = 3 if len(tags) >= 3 else len(tags)
  nrow = math.ceil(len(tags) / ncol)
  fig, axes = plt.subplots(nrow, ncol, figsize=(4.2 * ncol, 3.3 * nrow), squeeze=False)
  for ax, tag in zip(axes.flat, tags):
    p = panels[tag]
    x = np.asarray(p["x"])
    for cname, c in p["curves"].items():
      m, se = np.asarray(c["mean"]), np.asarray(c["stderr"])
      exact = "exact" in cname or "bound" in cname
      ax.plot(x, m, ls="--" if exact else "-", color=COLORS.get(cname), label=cname,
              lw=1.2 if exact else 1.8)
      if not exact:
        ax.fill_between(x, m - 1.96 * se, m + 1.96 * se, color=COLORS.get(cname), alpha=0.2)
    if p.get("critical_q") is not None and np.isfinite(p["critical_q"]):
      ax.axvline(p["critical_q"], color="k", ls=":", lw=1, label="critical q (exact)")
    if name == "subopt":
      ax.set_xscale("log")
      ax.set_yscale("log")
    ax.set_title(p.get("title", tag), fontsize=9)
    ax.set_xlabel(p["x_label"], fontsize=8)
    ax.set_ylabel(p.get("y_label", ""), fontsize=8)
    ax.tick_params(labelsize=7)
  for ax in list(axes.flat)[len(tags):]:
    ax.axis("off")
  axes.flat[0].legend(fontsize=6.5, loc="best")
  fig.suptitle(TITLES.get(name, name) + " — mean and 95% band across seeds", fontsize=10)
  fig.tight_layout()
  fig.savefig(path_base + ".png", dpi=130)
  fig.savefig(path_base + ".pdf")
  plt.close(fig)


def write_figure(out_dir: str, name: str, panels: dict, plot=None) -> str:
  """Writes ``out_dir/<name>/{<panel>.json, <name>.png, <name>.pdf}`` atomically.

  ``plot(panels, path_base)`` draws the figure (default: the curve panels of ``_plot``).
  """
  os.makedirs(out_dir, exist_ok=True)
  final = os.path.join(out_dir, name)
  tmp = tempfile.mkdtemp(prefix=f".{name}-", dir=out_dir)
  try:
    for tag, panel in panels.items():
      with open(os.path.join(tmp, f"{tag}.json"), "w") as f:
        json.dump(panel, f, indent=1, allow_nan=True)
    if plot is None:
      _plot(name, panels, os.path.join(tmp, name))
    else:
      plot(panels, os.path.join(tmp, name))
    old = None
    if os.path.exists(final):
      old = tempfile.mkdtemp(prefix=f".{name}-old-", dir=out_dir)
      os.rename(final, os.path.join(old, name))
    os.rename(tmp, final)
    if old:
      shutil.rmtree(old, ignore_errors=True)
  except BaseException:
    shutil.rmtree(tmp, ignore_errors=True)
    raise
  return final


def summary_rows(name: str, panels: dict) -> list[str]:
  rows = []
  for tag, p in panels.items():
    c = p["curves"]
    if name == "subopt":
      s = p.get("slopes", {})
      last = {k: c[k]["mean"][-1] for k in ("DR-LSVI-UCB", "LSVI-UCB")}
      rows.append(f"| {name} | {tag} | DR {s.get('DR-LSVI-UCB', float('nan')):.3f}, "
                  f"LSVI {s.get('LSVI-UCB', float('nan')):.3f} | DR "
                  f"{last['DR-LSVI-UCB']:.4f}, LSVI {last['LSVI-UCB']:.4f} | |")
      continue
    x = p["x"]
    cross = crossing(x, c["DR-LSVI-UCB"]["mean"], c["LSVI-UCB"]["mean"])
    cross_s = "none" if cross is None else f"{cross:.3f}"
    crit = p.get("critical_q")
    crit_s = "" if crit is None else f"{crit:.3f} (paper's formula {p['critical_q_paper_formula']:.3f})"
    rows.append(f"| {name} | {tag} | {cross_s} | AUC LSVI {area(x, c['LSVI-UCB']['mean']):.4f}, "
                f"DR {area(x, c['DR-LSVI-UCB']['mean']):.4f} | {crit_s} |")
  return rows


def sensitivity_rows(panels: dict) -> list[str]:
  """``results.md`` rows of ``drjax reproduce sensitivity`` (one per ||xi||_1)."""
  rows = []
  for tag, p in panels.items():
    kinks = ", ".join(f"{k:.6f}" for k in p["kinks"]) or "none"
    sides = "; ".join(f"{o['left']:.4f}, {o['right']:.4f}" for o in p["one_sided"]) or "-"
    diff = float(np.max(np.abs(np.asarray(p["grad_autodiff"]) -
                               np.asarray(p["grad_closed_form"]))))
    g = np.asarray(p["sensitivity_map"]["autodiff"])
    h, i = np.unravel_index(np.argmax(np.abs(g)), g.shape)
    wc = p["worst_case"]
    f = wc["families"]

    def fe(n):
      if n not in f:
        return "-"
      e = f[n].get("exact")
      return f"{f[n]['found']:.6f}" + ("" if e is None else f" / {e:.6f}")

    rows.append(f"| sensitivity | {tag} | {kinks} ({p['rho_star_closed_form']:.6f}) | {sides} | "
                f"{diff:.1e} | h={h + 1}, i={i + 1}: {g[h, i]:.4f} | {wc['nominal_value']:.6f} | "
                f"{fe('d-rectangular')} | {fe('s,a-rectangular')} | "
                f"{fe('factor-4 q at every step')} |")
  return rows


def write_summary(out_dir: str, sections: dict, header: str) -> str:
  """Writes ``out_dir/results.md`` (atomically) for all figures in ``sections`` {name: panels}."""
  lines = [header, "",
           "| figure | panel | DR/LSVI curves cross at | area under curve | exact critical q |",
           "|---|---|---|---|---|"]
  for name, panels in sections.items():
    if name not in ("subopt", "sensitivity"):
      lines += summary_rows(name, panels)
  if "subopt" in sections:
    lines += ["", "| figure | panel | fitted slope of log AveSubopt vs log k | AveSubopt(K) | |",
              "|---|---|---|---|---|"]
    lines += summary_rows("subopt", sections["subopt"])
  if "sensitivity" in sections:
    lines += ["", "Sensitivity (exact, float64): kinks of the robust first action at x1 along "
              "rho_1,4 (closed form rho* = 1 - (1-p) V_2(x2)/2), one-sided derivatives there, "
              "max |autodiff - closed form| over the 101-point curve, the largest entry of "
              "|dV*/drho| at rho_1,4 = 0.5, and the worst-case values of the policy that is "
              "robust-optimal for rho_h,4 = 0.5 (found by gradient search / exact).", "",
              "| figure | panel | kinks (closed form) | dV/drho_1,4 left, right at kink | "
              "max |autodiff - closed form| | largest |dV*/drho_h,i| | nominal | d-rect found / "
              "exact | s,a-rect found / exact | factor-4 q every step found |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    lines += sensitivity_rows(sections["sensitivity"])
  path = os.path.join(out_dir, "results.md")
  fd, tmp = tempfile.mkstemp(prefix=".results-", suffix=".md", dir=out_dir)
  with os.fdopen(fd, "w") as f:
    f.write("\n".join(lines) + "\n")
  os.replace(tmp, path)
  return path
