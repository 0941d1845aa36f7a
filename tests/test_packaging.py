"""Packaging: the pip name (not PyPI's `drjax`), the JAX window, `drjax` alone and `--version`."""

import os
import subprocess
import sys
import tomllib

import jax
import jaxlib
import pytest
from packaging.requirements import Requirement
from packaging.version import Version

import drjax
from drjax import cli

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COMMANDS = ("reproduce", "train", "plan", "bench", "sweep")
# The tested window: .ci/run runs jax 0.10.2 (Python 3.11) and the newest jax (Python 3.12).
OLDEST, NEWEST = "0.10.2", "0.12.0.1"


@pytest.fixture(scope="module")
def project():
  with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
    return tomllib.load(f)["project"]


def _req(reqs, name):
  (req,) = [Requirement(r) for r in reqs if Requirement(r).name == name]
  return req


def test_distribution_name_is_not_googles_drjax_and_version_matches(project):
  # PyPI's `drjax` is Google's DrJAX (MapReduce primitives), which also imports as `drjax`.
  assert project["name"] == cli.DISTRIBUTION == "drjax-rl"
  assert project["version"] == drjax.__version__
  assert project["scripts"]["drjax"] == "drjax.cli:console_main"
  assert all(r.startswith("drjax-rl[") for r in project["optional-dependencies"]["dev"]
             if r.startswith("drjax"))


def test_jax_window_is_bounded_and_the_same_for_jaxlib_and_cuda12(project):
  jax_req = _req(project["dependencies"], "jax")
  jaxlib_req = _req(project["dependencies"], "jaxlib")
  cuda = _req(project["optional-dependencies"]["cuda12"], "jax")
  assert cuda.extras == {"cuda12"}
  assert jax_req.specifier == jaxlib_req.specifier == cuda.specifier
  spec = jax_req.specifier
  for v in (OLDEST, "0.11.2", "0.12.0", NEWEST, "0.12.9"):
    assert spec.contains(v), v
  for v in ("0.10.1", "0.9.2", "0.13.0", "1.0.0"):
    assert not spec.contains(v), v
  # jax 0.10.2 needs Python >= 3.11 (jax >= 0.11: >= 3.12).
  assert project["requires-python"] == ">=3.11"
  classifiers = [c.rsplit(" :: ", 1)[-1] for c in project["classifiers"]
                 if c.startswith("Programming Language :: Python :: 3.")]
  assert classifiers == ["3.11", "3.12", "3.13"]


def test_installed_jax_is_inside_the_window(project):
  spec = _req(project["dependencies"], "jax").specifier
  assert spec.contains(jax.__version__), jax.__version__
  assert spec.contains(jaxlib.__version__), jaxlib.__version__
  assert Version(jax.__version__) >= Version(OLDEST)


def test_drjax_alone_lists_the_commands_and_exits_0(capsys):
  assert cli.main([]) == 0
  out, err = capsys.readouterr()
  assert err == ""
  assert out.startswith("usage: drjax")
  for name in COMMANDS:
    assert f"\n    {name}" in out, name
  assert "--version" in out


def test_version_prints_distribution_version_and_jax(capsys):
  with pytest.raises(SystemExit) as e:
    cli.main(["--version"])
  assert e.value.code == 0
  out = capsys.readouterr().out
  assert out.startswith(f"drjax-rl {drjax.__version__} (import name drjax; ")
  assert f"jax {jax.__version__}," in out and out.count("\n") == 1


def test_console_entry_point_in_a_fresh_process():
  cmd = [sys.executable, "-m", "drjax.cli"]
  res = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=ROOT)
  assert res.returncode == 0, res.stderr[-2000:]
  assert all(name in res.stdout for name in COMMANDS)
  res = subprocess.run(cmd + ["--version"], capture_output=True, text=True, timeout=120, cwd=ROOT)
  assert res.returncode == 0 and res.stdout.startswith("drjax-rl "), res.stderr[-2000:]


def test_ci_script_is_valid_bash_with_a_newest_jax_lane():
  path = os.path.join(ROOT, ".ci", "run")
  assert subprocess.run(["bash", "-n", path], capture_output=True).returncode == 0
  with open(path) as f:
    text = f.read()
  assert "python -m pytest -q" in text  # the README's test command, default environment
  assert os.path.exists(os.path.join(ROOT, ".ci", "newest-jax")) and ".ci/newest-jax" in text
