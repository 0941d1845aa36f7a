"""Runs every notebook in ``notebooks/`` top to bottom (small mode) and checks that it plots.

Each notebook is executed with nbclient in a fresh ``python3`` kernel that runs on *this*
interpreter (``sys.executable``; a kernelspec written to a temporary directory, so a ``python3``
kernelspec of some other Python on the machine is never picked up), from ``notebooks/`` and with
``DRJAX_NOTEBOOK_SMALL=1`` (few seeds and episodes; compilation dominates the run time). A notebook
passes when no cell raises and every cell tagged ``figure`` displays an ``image/png``, so a notebook
that silently stops plotting fails. New notebooks are picked up by the glob.
"""

from __future__ import annotations

import json
import os
import pathlib
import sys

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
KernelSpecManager = pytest.importorskip("jupyter_client.kernelspec").KernelSpecManager
AsyncKernelManager = pytest.importorskip("jupyter_client.manager").AsyncKernelManager

NOTEBOOK_DIR = pathlib.Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
KERNEL = "python3"
CELL_TIMEOUT_S = 300
FIGURE_TAG = "figure"
PARAMETERS_TAG = "parameters"


def _tags(cell) -> list[str]:
  return list(cell.get("metadata", {}).get("tags", []))


@pytest.fixture(scope="module")
def kernel_spec_manager(tmp_path_factory) -> KernelSpecManager:
  """A kernelspec manager whose only ``python3`` kernel is ipykernel on ``sys.executable``."""
  kernels = tmp_path_factory.mktemp("kernels")
  spec = kernels / KERNEL
  spec.mkdir()
  (spec / "kernel.json").write_text(json.dumps({
      "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
      "display_name": f"Python 3 ({sys.executable})",
      "language": "python",
  }))
  return KernelSpecManager(kernel_dirs=[str(kernels)], ensure_native_kernel=False)


def test_notebooks_found():
  names = {p.name for p in NOTEBOOKS}
  assert {"linear_mdp.ipynb", "put_option.ipynb"} <= names, names


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_is_clean(path):
  """Stored without outputs, with a tagged parameters cell and at least one figure cell."""
  nb = nbformat.read(path, as_version=4)
  nbformat.validate(nb)
  assert nb.metadata.get("kernelspec", {}).get("name") == KERNEL
  code = [c for c in nb.cells if c.cell_type == "code"]
  dirty = [i for i, c in enumerate(code) if c.outputs or c.execution_count is not None]
  assert not dirty, f"code cells {dirty} of {path.name} have outputs; clear them before committing"
  params = [c for c in code if PARAMETERS_TAG in _tags(c)]
  assert len(params) == 1, "exactly one code cell must be tagged 'parameters'"
  assert "DRJAX_NOTEBOOK_SMALL" in params[0].source, "the parameters cell must honour small mode"
  assert any(FIGURE_TAG in _tags(c) for c in code), f"no code cell tagged {FIGURE_TAG!r}"


def _execute(nb, kernel_spec_manager, **env):
  """Executes ``nb`` in place from ``notebooks/``; raises CellExecutionError on a failing cell."""
  km = AsyncKernelManager(kernel_name=KERNEL, kernel_spec_manager=kernel_spec_manager)
  client = nbclient.NotebookClient(
      nb, km=km, kernel_name=KERNEL, timeout=CELL_TIMEOUT_S, allow_errors=False,
      resources={"metadata": {"path": str(NOTEBOOK_DIR)}})
  full_env = dict(os.environ, **env)
  full_env.pop("MPLBACKEND", None)  # the notebooks select the inline backend themselves
  client.execute(env=full_env, cleanup_kc=True)  # shut the kernel down (nbclient does not own km)
  return nb


def test_kernel_runs_this_interpreter(kernel_spec_manager):
  nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
      "import os, sys; print(sys.executable); print(os.getcwd()); "
      "print(os.environ.get('DRJAX_NOTEBOOK_SMALL'))")])
  _execute(nb, kernel_spec_manager, DRJAX_NOTEBOOK_SMALL="1")
  lines = "".join(o.get("text", "") for o in nb.cells[0].outputs).split("\n")
  assert os.path.realpath(lines[0]) == os.path.realpath(sys.executable), lines
  assert os.path.realpath(lines[1]) == os.path.realpath(NOTEBOOK_DIR), lines
  assert lines[2] == "1", lines


@pytest.mark.timeout(2 * CELL_TIMEOUT_S)
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs_and_plots(path, kernel_spec_manager):
  nb = _execute(nbformat.read(path, as_version=4), kernel_spec_manager, DRJAX_NOTEBOOK_SMALL="1")

  code = [c for c in nb.cells if c.cell_type == "code"]
  figures = [i for i, c in enumerate(code) if FIGURE_TAG in _tags(c)]
  assert figures, f"no code cell of {path.name} is tagged {FIGURE_TAG!r}"
  for i in figures:
    kinds = [o.get("output_type") for o in code[i].outputs]
    assert any("image/png" in o.get("data", {}) for o in code[i].outputs), (
        f"figure cell {i} of {path.name} displayed no image/png (outputs: {kinds})")
  errors = [o for c in code for o in c.outputs if o.get("output_type") == "error"]
  assert not errors, errors
