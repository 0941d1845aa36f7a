"""A figure-directory swap killed at any stage is completed or undone by the next run."""

import json
import os
import subprocess
import sys

import pytest

from drjax import cli
from drjax.paper import outputs

PANEL = {"x": [0, 1], "x_label": "q", "curves": {"LSVI-UCB": {"mean": [1, 2], "stderr": [0, 0]}}}

WRITER = """
import json, sys
from drjax.paper import outputs
outputs.write_figure(sys.argv[1], "figX", json.loads(sys.argv[2]))
"""


def _tag(out):
  d = os.path.join(out, "figX")
  return sorted(f for f in os.listdir(d) if f.endswith(".json"))


@pytest.mark.parametrize("stage", outputs.STAGES)
def test_killed_swap_is_completed_or_undone_by_the_next_run(stage, tmp_path):
  out = str(tmp_path)
  outputs.write_figure(out, "figX", {"old": PANEL})
  env = dict(os.environ, DRJAX_TEST_KILL_AT=stage)
  r = subprocess.run([sys.executable, "-c", WRITER, out, json.dumps({"new": PANEL})], env=env,
                     capture_output=True, text=True, timeout=120)
  assert r.returncode == 99, r.stderr  # killed at the stage
  hidden = [e for e in os.listdir(out) if e.startswith(".")]
  assert hidden  # the kill left temporary directories behind
  if stage == "moved-old":
    assert not os.path.exists(os.path.join(out, "figX"))  # the window the issue describes
  outputs.recover(out, "figX")  # what the next run does first
  # The swap is completed once the new directory is complete, undone before.
  want = ["old.json"] if stage in ("writing", "written") else ["new.json"]
  assert _tag(out) == want
  assert sorted(os.listdir(os.path.join(out, "figX"))) == sorted(want + ["figX.pdf", "figX.png"])
  assert os.listdir(out) == ["figX"]  # stale temporary directories cleaned


def test_reproduce_recovers_before_writing_results_md(tmp_path):
  out = str(tmp_path)
  outputs.write_figure(out, "fig1", {"a": PANEL})
  env = dict(os.environ, DRJAX_TEST_KILL_AT="moved-old")
  r = subprocess.run([sys.executable, "-c", WRITER.replace("figX", "fig1"), out,
                      json.dumps({"b": PANEL})], env=env, capture_output=True, timeout=120)
  assert r.returncode == 99
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
