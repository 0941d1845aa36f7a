"""A sweep knows the code it ran (issue 35, item 4): ``sweep.json`` records drjax's version and the
source hash of each plugin; resuming or merging with changed code is refused in one line naming
what changed, unless explicitly allowed (and then recorded)."""

import json
import os

import pytest

import drjax
from drjax import plugins, sweeps
from drjax.agents import registry

import sweep_cli  # tests/sweep_cli.py  pylint: disable=g-import-not-at-top

PLUGIN = '''from drjax.agents import registry
VERSION = {version}  # the edit between two runs
registry.register(registry.get("dr-lsvi-ucb").replace(name="code-id-agent", display="mine"))
'''


@pytest.fixture(autouse=True)
def _restore_registry():
  """The agent registered here is removed afterwards (other tests loop over every agent)."""
  # pylint: disable=protected-access
  registry.names()
  kept = [(d, dict(d)) for d in (registry._REGISTRY, registry._SOURCES, plugins._LOADED,
                                 plugins._SOURCES)]
  yield
  for d, old in kept:
    d.clear()
    d.update(old)


def _write(path, version):
  with open(path, "w") as f:
    f.write(PLUGIN.format(version=version))


def _new_process(path):
  """What a new process sees: the plugin not loaded yet (loaded again from the file as it is)."""
  key = plugins.resolve(str(path))
  plugins._LOADED.pop(key, None)  # pylint: disable=protected-access
  plugins._SOURCES.pop(key, None)  # pylint: disable=protected-access


def _config(path):
  return sweeps.SweepConfig(agents=("code-id-agent",), seeds=2, episodes=3, rho=(0.1,),
                            targets=("q", 0.0, 1.0, 2), chunk=1, plugins=(str(path),))


def _meta(out):
  with open(os.path.join(out, "sweep.json")) as f:
    return json.load(f)


def test_source_hash_follows_the_source(tmp_path):
  a, b = tmp_path / "a.py", tmp_path / "b.py"
  _write(a, 1)
  _write(b, 1)
  assert plugins.source_hash(str(a)) == plugins.source_hash(str(b))  # the content, not the name
  _write(b, 2)
  assert plugins.source_hash(str(a)) != plugins.source_hash(str(b))
  # A module plugin that is a package: a change in any of its files changes the hash.
  pkg = tmp_path / "code_id_pkg"
  pkg.mkdir()
  (pkg / "__init__.py").write_text("from code_id_pkg import inner  # noqa\n")
  (pkg / "inner.py").write_text("X = 1\n")
  import sys  # pylint: disable=g-import-not-at-top
  sys.path.insert(0, str(tmp_path))
  try:
    first = plugins.source_hash("code_id_pkg")
    (pkg / "inner.py").write_text("X = 2\n")
    for name in ("code_id_pkg", "code_id_pkg.inner"):  # a new process
      sys.modules.pop(name, None)
    plugins._SOURCES.pop("code_id_pkg")  # pylint: disable=protected-access
    plugins._LOADED.pop("code_id_pkg")  # pylint: disable=protected-access
    assert plugins.source_hash("code_id_pkg") != first
  finally:
    sys.path.remove(str(tmp_path))
    for name in ("code_id_pkg", "code_id_pkg.inner"):
      sys.modules.pop(name, None)
  with pytest.raises(plugins.PluginError, match="no such file"):
    plugins.source_hash(str(tmp_path / "missing.py"))


def test_a_changed_plugin_is_refused_then_resumed_unchanged_or_allowed(tmp_path):
  path, out = tmp_path / "mine.py", str(tmp_path / "s")
  _write(path, 1)
  config = _config(path)
  sweeps.run(config, out=out, part=(1, 2))
  meta = _meta(out)
  h1 = plugins.source_hash(str(path))
  assert meta["code"] == {"drjax_version": drjax.__version__, "plugins": {str(path): h1}}
  chunks = sorted(os.listdir(os.path.join(out, "chunks")))

  _write(path, 2)  # edited between the run and its resume
  _new_process(path)
  h2 = plugins.source_hash(str(path))
  with pytest.raises(sweeps.SweepError, match="other code") as e:
    sweeps.run(config, out=out)
  msg = str(e.value)
  assert e.value.field == "out" and "\n" not in msg
  assert f"plugin {path} (source {h1} -> {h2})" in msg and "--allow-code-change" in msg
  assert _meta(out) == meta and sorted(os.listdir(os.path.join(out, "chunks"))) == chunks

  _write(path, 1)  # the code it ran: resumes
  _new_process(path)
  sweeps.run(config, out=out)
  assert "code_changes" not in _meta(out)

  _write(path, 2)  # allowed: resumes, and sweep.json says so
  _new_process(path)
  sweeps.run(config, out=out, allow_code_change=True)
  meta = _meta(out)
  assert meta["code"]["plugins"] == {str(path): h2}
  assert [c["changed"] for c in meta["code_changes"]] == [[f"plugin {path} (source {h1} -> {h2})"]]
  assert meta["code_changes"][0]["from"]["plugins"] == {str(path): h1}
  sweeps.run(config, out=out)  # the new code is now the sweep's: no flag needed
  assert len(_meta(out)["code_changes"]) == 1


def test_merge_and_the_command_refuse_changed_code_in_one_line(tmp_path, monkeypatch):
  path, out = tmp_path / "mine.py", str(tmp_path / "s")
  _write(path, 1)
  for part in ((1, 2), (2, 2)):
    sweeps.run(_config(path), out=out, part=part)
  _write(path, 3)
  _new_process(path)
  with pytest.raises(sweeps.SweepError, match=f"plugin {path}"):
    sweeps.merge(out)
  for args in (["--merge"], ["--resume", "--quiet"]):
    _new_process(path)
    code, err = sweep_cli.run(args + ["--out", out])
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and f"plugin {path}" in lines[0], err
  _new_process(path)
  code, err = sweep_cli.run(["--merge", "--allow-code-change", "--out", out])
  assert code == 0, err
  assert os.path.isfile(os.path.join(out, "results.parquet"))
  assert len(_meta(out)["code_changes"]) == 1
  # Another drjax version is code that changed too.
  monkeypatch.setattr(drjax, "__version__", "99.0")
  code, err = sweep_cli.run(["--resume", "--quiet", "--out", out])
  assert code == 2 and f"drjax version {_meta(out)['code']['drjax_version']} -> 99.0" in err, err


def test_resuming_with_a_recorded_plugin_deleted_names_sweep_json_not_the_flag(tmp_path):
  """The plugin comes from sweep.json (the command gave no --plugin): the one line says so."""
  path, out = tmp_path / "gone.py", str(tmp_path / "s")
  _write(path, 1)
  sweeps.run(_config(path), out=out, part=(1, 2))
  os.remove(path)
  _new_process(path)
  code, err = sweep_cli.run(["--resume", "--quiet", "--out", out])
  lines = err.strip().splitlines()
  assert code == 2 and len(lines) == 1, err
  assert "sweep.json records a plugin" in lines[0] and "no such file" in lines[0], err
  assert ": --plugin:" not in lines[0], err
  # --from FILE: the file named is the one that records the plugin.
  code, err = sweep_cli.run(["--from", os.path.join(out, "sweep.json"), "--quiet", "--out",
                             str(tmp_path / "new")])
  assert code == 2 and f"--from: {os.path.join(out, 'sweep.json')} records a plugin" in err, err
