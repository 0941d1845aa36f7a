"""A figure-directory swap killed at any stage is completed or undone by the next run."""

import json
import os
import signal
import subprocess
import sys

import pytest

from drjax import cli
from drjax.paper import outputs

PANEL = {"x": [0, 1], "x_label": "q", "curves": {"LSVI-UCB": {"mean": [1, 2], "stderr": [0, 0]}}}

# Stages of ``outputs.write_figure`` at which the writer is killed, in order: ``writing`` (files
# written, the new directory not yet marked complete), ``written`` (new directory complete),
# ``moved-old`` (previous directory moved aside, ``DIR/<name>`` missing), ``moved-new`` (new
# directory in place, previous one not yet deleted).
STAGES = ("writing", "written", "moved-old", "moved-new")

# ``write_figure`` in a process that SIGKILLs itself at a stage: the kill is injected from outside
# the library, by wrapping ``open`` (the completion marker) and ``os.rename`` (the two moves).
WRITER = """
import builtins, json, os, signal, sys
from drjax.paper import outputs

out, name, panels, stage = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4]
real_open, real_rename, renames = builtins.open, os.rename, []

def kill():
  os.kill(os.getpid(), signal.SIGKILL)

def open_(file, *args, **kwargs):
  if stage == "writing" and os.path.basename(str(file)) == ".complete":
    kill()
  return real_open(file, *args, **kwargs)

def rename(src, dst):
  if stage == "written" and not renames:
    kill()
  real_rename(src, dst)
  renames.append(dst)
  if (stage, len(renames)) in (("moved-old", 1), ("moved-new", 2)):
    kill()

builtins.open, os.rename = open_, rename
outputs.write_figure(out, name, panels)
"""


def _killed_write(out, name, panels, stage):
  r = subprocess.run([sys.executable, "-c", WRITER, out, name, json.dumps(panels), stage],
                     capture_output=True, text=True, timeout=120)
  assert r.returncode == -signal.SIGKILL, r.stderr  # killed at the stage
  return r


def _tag(out):
  d = os.path.join(out, "figX")
  return sorted(f for f in os.listdir(d) if f.endswith(".json"))


def _hidden(out, kind):
  """The temporary directories ``.figX.<kind>.*`` left in ``out``."""
  return [e for e in os.listdir(out) if e.startswith(f".figX.{kind}.")]


@pytest.mark.parametrize("stage", STAGES)
def test_killed_swap_is_completed_or_undone_by_the_next_run(stage, tmp_path):
  out = str(tmp_path)
  outputs.write_figure(out, "figX", {"old": PANEL})
  _killed_write(out, "figX", {"new": PANEL}, stage)
  # The kill left the state the stage names.
  new, old = _hidden(out, "new"), _hidden(out, "old")
  complete = [os.path.exists(os.path.join(out, d, ".complete")) for d in new]
  if stage == "writing":
    assert complete == [False] and not old and _tag(out) == ["old.json"]
  elif stage == "written":
    assert complete == [True] and not old and _tag(out) == ["old.json"]
  elif stage == "moved-old":
    assert complete == [True] and len(old) == 1
    assert not os.path.exists(os.path.join(out, "figX"))  # the window the issue describes
  else:
    assert not new and len(old) == 1 and _tag(out) == ["new.json"]
  outputs.recover(out, "figX")  # what the next run does first
  # The swap is completed once the new directory is complete, undone before.
  want = ["old.json"] if stage in ("writing", "written") else ["new.json"]
  assert _tag(out) == want
  assert sorted(os.listdir(os.path.join(out, "figX"))) == sorted(want + ["figX.pdf", "figX.png"])
  assert os.listdir(out) == ["figX"]  # stale temporary directories cleaned


def test_reproduce_recovers_before_writing_results_md(tmp_path):
  out = str(tmp_path)
  outputs.write_figure(out, "fig1", {"a": PANEL})
  _killed_write(out, "fig1", {"b": PANEL}, "moved-old")
  assert not os.path.exists(os.path.join(out, "fig1"))
  from drjax.paper import reproduce as rep
  rep._recover_all(out, quiet=True)
  assert sorted(rep.load_results(out)["fig1"]) == ["b"]
  assert os.listdir(out) == ["fig1"]


def test_live_runs_temporary_directories_are_left_alone(tmp_path):
  out = str(tmp_path)
  outputs.write_figure(out, "figX", {"old": PANEL})
  mine = os.path.join(out, f".figX.new.{os.getpid()}.abc")  # a live run (this process)
  os.mkdir(mine)
  dead = os.path.join(out, ".figX.new.999999999.abc")  # no such process
  os.mkdir(dead)
  outputs.recover(out, "figX")
  assert os.path.isdir(mine) and not os.path.exists(dead)


@pytest.mark.parametrize("out,msg", [
    ("", "--out must be a directory name"),
    ("/proc/drjax-x", "--out '/proc/drjax-x' is not a writable directory"),
    ("x" * 300, "is not a writable directory (File name too long)"),
])
def test_unusable_out_fails_before_training_and_creates_nothing(out, msg, tmp_path, capsys,
                                                               monkeypatch):
  monkeypatch.chdir(tmp_path)
  with pytest.raises(SystemExit) as e:
    cli.main(["reproduce", "fig2", "--out", out, "--seeds", "1", "--episodes", "1", "--quiet"])
  assert e.value.code == 2
  err = capsys.readouterr().err.strip()
  assert len(err.splitlines()) == 1 and msg in err, err
  assert os.listdir(tmp_path) == []


def test_out_probe_removes_the_directories_it_created_when_it_fails(tmp_path, capsys):
  base = tmp_path / "a"
  out = str(base / "b" / ("y" * 300))
  with pytest.raises(SystemExit):
    cli.main(["reproduce", "fig2", "--out", out, "--quiet"])
  assert not base.exists()
  assert "File name too long" in capsys.readouterr().err


@pytest.mark.parametrize("step", ["mkdir", "rename-1", "rename-2"])
def test_ctrl_c_just_after_a_filesystem_step_leaves_one_complete_directory(step, tmp_path,
                                                                          monkeypatch):
  """A KeyboardInterrupt arriving right after ``os.mkdir`` made the new directory, or right after
  either rename of the swap (Python delivers a Ctrl-C between any two bytecodes): ``out`` holds
  ``figX`` complete (previous or new contents) and nothing else. CI once found an orphan
  ``.fig2.new.<pid>.*`` after a Ctrl-C that came inside ``tempfile.mkdtemp``."""
  out = str(tmp_path)
  outputs.write_figure(out, "figX", {"old": PANEL}, plot=lambda panels, base: None)
  real_mkdir, real_rename, renames = os.mkdir, os.rename, []

  def mkdir(path, *args, **kwargs):
    real_mkdir(path, *args, **kwargs)
    if step == "mkdir" and ".figX.new." in str(path):
      raise KeyboardInterrupt

  def rename(src, dst):
    real_rename(src, dst)
    renames.append(dst)
    if step == f"rename-{len(renames)}":
      raise KeyboardInterrupt

  monkeypatch.setattr(os, "mkdir", mkdir)
  monkeypatch.setattr(os, "rename", rename)
  with pytest.raises(KeyboardInterrupt):
    outputs.write_figure(out, "figX", {"new": PANEL}, plot=lambda panels, base: None)
  monkeypatch.undo()
  assert os.listdir(out) == ["figX"]
  want = ["new.json"] if step == "rename-2" else ["old.json"]
  assert sorted(os.listdir(os.path.join(out, "figX"))) == want
