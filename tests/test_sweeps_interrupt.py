"""drjax.sweeps and `drjax sweep`: interrupts, reruns, damaged chunks, error types (issue 18, item 6).

Tiny sizes (K = 6, 5 seeds x 2 rho); everything in float64 (tests/conftest.py; CLI calls pass
``--x64``). Each chunk's results are fetched late (tests/fault_cli.py in a new process, a
monkeypatch in this one), so that a SIGINT arrives while chunks remain.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from drjax import _xla
from drjax import sweeps

import sweep_cli  # tests/sweep_cli.py

K, SMALL, SMALL_FLAGS = sweep_cli.K, sweep_cli.SMALL, sweep_cli.SMALL_FLAGS
FILES = ("results.parquet", "summary.csv")
FAULT_CLI = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fault_cli.py")


def _cfg(**kw):
  return sweeps.SweepConfig(**{**SMALL, **kw})


def _files(d):
  """Every file under ``d``: bytes, chunk files as their arrays (less the time they took), and
  sweep.json aside (it holds timings and the command)."""
  out = {}
  for p in sorted(d.rglob("*")):
    if p.is_file() and p.name != "sweep.json":
      if p.parent.name == "chunks" and not p.name.startswith(".tmp-"):
        with np.load(p) as z:
          out[str(p.relative_to(d))] = {k: z[k].tobytes() for k in z.files if k != "seconds"}
      else:
        out[str(p.relative_to(d))] = p.read_bytes()
  return out


def _raw(d):
  """Every file under ``d`` (relative path -> bytes)."""
  return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def _results(d):
  return {f: (d / f).read_bytes() for f in FILES}


_cli = sweep_cli.run  # drjax sweep ARGS in this process: (exit code, stderr)


def _env(**extra):
  env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "DRJAX_NO_CACHE")}
  env.update(DRJAX_NO_CACHE="1", XLA_FLAGS=" ".join(_xla.flags_for_this_jaxlib()), **extra)
  return env


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
  """The small sweep with --chunk 1 (10 chunks), uninterrupted, written by the command."""
  out = tmp_path_factory.mktemp("clean") / "out"
  code, err = _cli(SMALL_FLAGS + ["--chunk", "1", "--out", str(out)])
  assert code == 0, err
  return out


# ---------------------------------------------------------------------------------------------
# Ctrl-C.


def test_sigint_mid_sweep_exits_130_with_one_line_and_rerun_completes(tmp_path, clean):
  out = tmp_path / "out"
  proc = subprocess.Popen([sys.executable, FAULT_CLI, "--chunk-delay", "2.0", "--", "sweep",
                           *SMALL_FLAGS, "--chunk", "1", "--out", str(out)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
  first = out / "chunks" / "chunk-000000.npz"
  deadline = time.monotonic() + 240
  while not first.exists() and proc.poll() is None and time.monotonic() < deadline:
    time.sleep(0.01)
  assert first.exists(), proc.communicate()[1]
  proc.send_signal(signal.SIGINT)
  _, err = proc.communicate(timeout=120)
  assert proc.returncode == 130, err
  lines = err.strip().splitlines()
  assert len(lines) == 1, err
  saved = sorted(p.name for p in (out / "chunks").iterdir())
  n = len(saved)
  assert 1 <= n < 10, saved
  assert lines[0].startswith(f"drjax sweep: interrupted; {n} of 10 chunks saved in {out}; "
                             f"resume with: drjax sweep --resume --out {out}"), lines[0]
  # Nothing half-written: no temporary files, every chunk file loads, no results yet.
  assert all(not name.startswith(".tmp-") for name in saved), saved
  assert not any(p.name.startswith(".tmp-") for p in out.iterdir())
  for name in saved:
    with np.load(out / "chunks" / name) as z:
      assert z["value"].shape == (1, 3)
  assert not (out / "results.parquet").exists()
  assert json.loads((out / "sweep.json").read_text())["status"] == "running"
  # The printed command resumes (in this process: `drjax` is this interpreter's cli.main).
  resume = shlex.split(lines[0].split("resume with: ", 1)[1])
  assert resume[:2] == ["drjax", "sweep"]
  code, err = _cli(resume[2:] + ["--quiet"])
  assert code == 0, err
  info = json.loads((out / "sweep.json").read_text())
  assert info["status"] == "complete" and info["timings"]["runs_computed"] == 10 - n
  assert _files(out) == _files(clean)


def test_api_interrupt_raises_sweep_interrupted(tmp_path, monkeypatch):
  """KeyboardInterrupt inside run(): SweepInterrupted (a KeyboardInterrupt) with the count."""
  out = tmp_path / "out"
  get = sweeps.running._get  # pylint: disable=protected-access
  monkeypatch.setattr(sweeps.running, "_get", lambda tree: time.sleep(2.0) or get(tree))
  main = threading.main_thread().ident

  def interrupt():
    first = out / "chunks" / "chunk-000000.npz"
    deadline = time.monotonic() + 240
    while not first.exists() and time.monotonic() < deadline:
      time.sleep(0.01)
    assert main is not None
    os.kill(os.getpid(), signal.SIGINT)

  t = threading.Thread(target=interrupt, daemon=True)
  t.start()
  with pytest.raises(sweeps.SweepInterrupted) as e:
    sweeps.run(_cfg(chunk=1), out=str(out))
  t.join()
  assert isinstance(e.value, KeyboardInterrupt)
  assert e.value.total == 10 and 1 <= e.value.saved < 10 and e.value.out == str(out)
  assert "chunks saved in" in str(e.value)
  assert not any(p.name.startswith(".tmp-") for p in (out / "chunks").iterdir())


# ---------------------------------------------------------------------------------------------
# Reruns.


def test_rerun_without_chunk_resumes_with_the_stored_layout(tmp_path, clean):
  out = tmp_path / "out"
  code, err = _cli(SMALL_FLAGS + ["--chunk", "1", "--part", "1/2", "--out", str(out)])
  assert code == 0, err
  assert sorted(p.name for p in (out / "chunks").iterdir()) == [
      f"chunk-{j:06d}.npz" for j in range(5)]
  # The same command without --chunk (and without --quiet: it says what it does) resumes.
  flags = [f for f in SMALL_FLAGS if f != "--quiet"]
  code, err = _cli(flags + ["--out", str(out)])
  assert code == 0, err
  assert "stored layout (chunk 1" in err, err
  info = json.loads((out / "sweep.json").read_text())
  assert info["config"]["chunk"] == 1 and info["timings"]["runs_computed"] == 5
  assert _files(out) == _files(clean)
  # The API too: chunk=None (any memory_mb) resumes with the stored layout.
  res = sweeps.run(_cfg(memory_mb=1.0), out=str(out))
  assert res.info["config"]["chunk"] == 1 and res.info["timings"]["runs_computed"] == 0
  assert _results(out) == _results(clean)
  # An explicit, different --chunk is still another sweep: refused, nothing written.
  before = _raw(out)
  code, err = _cli(SMALL_FLAGS + ["--chunk", "3", "--out", str(out)])
  assert code == 2 and "differs in: chunk" in err and len(err.strip().splitlines()) == 1, err
  assert _raw(out) == before


def test_damaged_or_foreign_chunk_is_an_error_and_overwrite_starts_over(tmp_path, clean):
  out, other = tmp_path / "out", tmp_path / "other"
  assert _cli(SMALL_FLAGS + ["--chunk", "1", "--part", "1/2", "--out", str(out)])[0] == 0
  path = out / "chunks" / "chunk-000002.npz"
  path.write_bytes(b"not an npz file")
  before = _raw(out)
  code, err = _cli(SMALL_FLAGS + ["--chunk", "1", "--out", str(out)])
  assert code == 2 and len(err.strip().splitlines()) == 1, err
  assert "--out" in err and str(path) in err and "cannot be read" in err and "--overwrite" in err
  assert _raw(out) == before  # nothing lost, nothing written
  with pytest.raises(sweeps.SweepError, match="^out: chunk file .*chunk-000002.npz"):
    sweeps.run(_cfg(chunk=1), out=str(out))
  with pytest.raises(sweeps.SweepError, match="chunk-000002.npz cannot be read"):
    sweeps.merge(str(out))
  # A chunk of another sweep (another seed) in its place.
  assert _cli(SMALL_FLAGS + ["--chunk", "1", "--seed", "1", "--part", "1/5", "--out",
                             str(other)])[0] == 0
  path.write_bytes((other / "chunks" / "chunk-000001.npz").read_bytes())
  code, err = _cli(SMALL_FLAGS + ["--chunk", "1", "--out", str(out)])
  assert code == 2 and "chunk-000002.npz belongs to another sweep" in err, err
  # --overwrite starts over: every chunk recomputed, the same files as a clean run.
  code, err = _cli(SMALL_FLAGS + ["--chunk", "1", "--overwrite", "--out", str(out)])
  assert code == 0, err
  info = json.loads((out / "sweep.json").read_text())
  assert info["timings"]["runs_computed"] == 10
  assert _files(out) == _files(clean)


@pytest.mark.parametrize("extra, other", [
    (["--part", "1/2"], "--part"),
    (["--resume"], "--resume"),
])
def test_overwrite_conflicts(tmp_path, extra, other):
  out = tmp_path / "out"
  code, err = _cli(SMALL_FLAGS + ["--overwrite", "--out", str(out)] + extra)
  assert code == 2 and len(err.strip().splitlines()) == 1, err
  assert "--overwrite" in err and other in err, err
  assert not out.exists()
  code, err = _cli(["--merge", "--overwrite", "--out", str(out), "--quiet"])
  assert code == 2 and "--overwrite" in err and "--merge" in err, err
  with pytest.raises(sweeps.SweepError, match="^overwrite: "):
    sweeps.run(_cfg(), out=str(out), part=(1, 2), overwrite=True)
  assert not out.exists()


# ---------------------------------------------------------------------------------------------
# Error types.


@pytest.mark.parametrize("kw, field", [
    (dict(agents="dr-lsvi-ucb"), "agents"),
    (dict(agents={"dr-lsvi-ucb"}), "agents"),
    (dict(rho="0.5"), "rho"),
    (dict(rho_at="1,4"), "rho_at"),
    (dict(beta="1"), "beta"),
    (dict(trajectories="100"), "trajectories"),
    (dict(seed_ids="3"), "seed_ids"),
    (dict(targets="q=0:1:3"), "targets"),
    (dict(env_params={"xi_norm": "0.1"}), "env_params"),
    (dict(env_params=[("xi_norm", (0.1,))]), "env_params"),
])
def test_strings_for_tuples_are_type_errors_naming_the_field(kw, field):
  with pytest.raises(TypeError, match=f"^{field}: ") as e:
    sweeps.validate(_cfg(**kw))
  assert isinstance(e.value, sweeps.SweepError) and isinstance(e.value, ValueError)
  assert type(e.value) is sweeps.SweepTypeError and e.value.field == field
  if kw.get("agents") == "dr-lsvi-ucb":
    assert "agents=('dr-lsvi-ucb',)" in str(e.value)


def test_public_error_type():
  with pytest.raises(sweeps.SweepError) as e:
    sweeps.validate(_cfg(rho=(1.5,)))
  assert type(e.value) is sweeps.SweepError and issubclass(sweeps.SweepError, ValueError)
  assert f"{type(e.value).__module__}.{type(e.value).__qualname__}" == "drjax.sweeps.SweepError"
  assert e.value.field == "rho" and str(e.value).startswith("rho: ")
  assert {"SweepError", "SweepTypeError", "SweepInterrupted"} <= set(sweeps.__all__)
  assert "_Error" not in repr(type(e.value)) and sweeps.SweepError.__doc__
