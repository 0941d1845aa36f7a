"""The open core, second pass (issue 35 item 5): re-registration and unregister, the same
source as a module and as a path, presets that do not reach a variant, declared hyperparameter
bounds enforced identically in make_hparams / sweeps.run / drjax sweep --hparam, the agent's own
width in uncertainty() and sweep.json, a variant's own colour and citation, the offline figure's
title, and the oracle written from scratch in docs/agents.md."""

import dataclasses
import importlib
import os
import re
import sys
import textwrap
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import drjax
from drjax import plugins, style
from drjax.agents import compose, lsvi, offline, registry
from drjax.agents.base import QFunction

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "experiments", "custom_agent.py")


@pytest.fixture(autouse=True)
def _restore_registry():
  """Every agent registered here is removed afterwards (other modules loop over the registry)."""
  registry.names()
  kept = (registry._REGISTRY, registry._SOURCES, plugins._LOADED,  # pylint: disable=protected-access
          plugins._SOURCES, drjax.envs._REGISTRY, drjax.envs._SOURCES,  # pylint: disable=protected-access
          drjax.envs.SWEEP_SPECS)
  saved = [dict(d) for d in kept]
  yield
  for d, old in zip(kept, saved):
    d.clear()
    d.update(old)


def _variant(name, display=None, **kw):
  return registry.get("drpvi").replace(name=name, display=display or name, **kw)


def _write(path, display, extra="", agent="edited-agent"):
  """A plugin file registering PEVI as ``agent`` with ``display``, then ``extra`` code."""
  path.write_text(textwrap.dedent(f"""
      from drjax.agents import registry
      registry.register(registry.get("pevi").replace(name="{agent}", display="{display}"))
  """) + extra)
  return str(path)


def test_an_edited_plugin_file_is_executed_again_and_an_unchanged_one_is_not(tmp_path):
  """A notebook's loop: load, edit the file, load again: the agent is the edited one and the
  recorded source hash is that of the new bytes; loading an unchanged file is a no-op."""
  path = _write(tmp_path / "edited.py", "v1")
  first = plugins.load(path)
  h1 = plugins.source_hash(path)
  assert registry.get("edited-agent").display == "v1"
  assert plugins.load(path) is first  # unchanged: not executed again
  _write(tmp_path / "edited.py", "v2")  # the same size, within the same second
  plugins.load(path)
  assert registry.get("edited-agent").display == "v2"
  h2 = plugins.source_hash(path)
  assert h2 != h1 and h2 == plugins._hash_source(path, None)  # pylint: disable=protected-access


def test_an_edited_module_plugin_is_executed_again(tmp_path, monkeypatch, request):
  monkeypatch.syspath_prepend(str(tmp_path))
  request.addfinalizer(lambda: [sys.modules.pop(m, None) for m in ("edited_mod", "edited_pkg")])
  monkeypatch.delitem(sys.modules, "edited_mod", raising=False)
  _write(tmp_path / "edited_mod.py", "m1")
  plugins.load("edited_mod")
  _write(tmp_path / "edited_mod.py", "m2")  # same size: a stale .pyc would run "m1"
  plugins.load("edited_mod")
  assert registry.get("edited-agent").display == "m2"
  # A package is not re-executed after an edit (its submodules would stay old): an error.
  registry.unregister("edited-agent")
  pkg = tmp_path / "edited_pkg"
  pkg.mkdir()
  _write(pkg / "__init__.py", "p1")
  monkeypatch.delitem(sys.modules, "edited_pkg", raising=False)
  plugins.load("edited_pkg")
  _write(pkg / "__init__.py", "p2")
  with pytest.raises(plugins.PluginError, match="package whose source changed"):
    plugins.load("edited_pkg")
  assert registry.get("edited-agent").display == "p1"


def test_a_plugin_that_fails_registers_nothing_and_a_failed_edit_keeps_the_version_loaded(
    tmp_path):
  broken = tmp_path / "broken.py"
  broken.write_text(textwrap.dedent("""
      from drjax.agents import registry
      registry.register(registry.get("pevi").replace(name="half-agent", display="half"))
      raise RuntimeError("the second half is broken")
  """))
  with pytest.raises(plugins.PluginError, match="the second half is broken"):
    plugins.load(str(broken))
  assert "half-agent" not in registry.names()
  path = _write(tmp_path / "kept.py", "good")
  plugins.load(path)
  h = plugins.source_hash(path)
  _write(tmp_path / "kept.py", "bad!", extra="raise RuntimeError('typo')\n")
  for _ in range(2):  # refused each time while the file stays broken
    with pytest.raises(plugins.PluginError, match="typo"):
      plugins.load(path)
    assert registry.get("edited-agent").display == "good"
    assert plugins.source_hash(path) == h  # the version that runs


def test_a_failed_edit_of_a_module_plugin_keeps_the_version_loaded(tmp_path, monkeypatch,
                                                                   request):
  """The edit runs in the module's own namespace (the agent's factory reads it): when it raises,
  the namespace is put back, so the kept agent still runs the version loaded."""
  monkeypatch.syspath_prepend(str(tmp_path))
  request.addfinalizer(lambda: sys.modules.pop("kept_mod", None))
  _write(tmp_path / "kept_mod.py", "k1", extra="VERSION = 'v1'\n")
  module = plugins.load("kept_mod")
  _write(tmp_path / "kept_mod.py", "k2", extra="VERSION = 'v2-broken'\nraise RuntimeError('x')\n")
  with pytest.raises(plugins.PluginError, match="RuntimeError: x"):
    plugins.load("kept_mod")
  assert module.VERSION == "v1" and registry.get("edited-agent").display == "k1"


def test_a_package_plugin_whose_submodule_registered_before_a_sibling_failed_loads_again(
    tmp_path, monkeypatch, request):
  """Python keeps a failed package's submodules that imported fine; the one that registered an
  agent is forgotten with the registration, so the corrected package registers it again."""
  monkeypatch.syspath_prepend(str(tmp_path))
  names = ("half_pkg", "half_pkg.agents", "half_pkg.broken")
  request.addfinalizer(lambda: [sys.modules.pop(m, None) for m in names])
  pkg = tmp_path / "half_pkg"
  pkg.mkdir()
  (pkg / "__init__.py").write_text("from half_pkg import agents, broken  # noqa\n")
  _write(pkg / "agents.py", "half")
  (pkg / "broken.py").write_text("raise RuntimeError('sibling')\n")
  with pytest.raises(plugins.PluginError, match="sibling"):
    plugins.load("half_pkg")
  assert "edited-agent" not in registry.names()
  (pkg / "broken.py").write_text("FIXED = True\n")
  plugins.load("half_pkg")
  assert registry.get("edited-agent").display == "half"


def test_an_unparsable_colour_does_not_break_the_next_automatic_one():
  registry.register(_variant("odd-colour", color="not-a-colour"))
  assert registry.register(_variant("after-odd")).color  # was: ValueError Invalid RGBA argument


def test_a_plugin_loaded_inside_a_failing_plugin_is_undone_and_loads_again(tmp_path):
  """Plugin A loads plugin B (which registers an agent), then raises: B's agent is gone with A's,
  and loading B again executes it (it is not taken for loaded)."""
  inner = _write(tmp_path / "inner.py", "inner")
  outer = tmp_path / "outer.py"
  outer.write_text(f"from drjax import plugins\nplugins.load({inner!r})\nraise RuntimeError('A')\n")
  with pytest.raises(plugins.PluginError, match="RuntimeError: A"):
    plugins.load(str(outer))
  assert "edited-agent" not in registry.names()
  plugins.load(inner)
  assert registry.get("edited-agent").display == "inner"


def test_an_environment_plugin_can_be_loaded_again_after_an_edit(tmp_path):
  code = textwrap.dedent("""
      from drjax import envs
      class MyEnv(envs.LinearMDP):
        VERSION = {v}
      envs.register("my-edited-env", MyEnv)
  """)
  path = tmp_path / "env_plugin.py"
  path.write_text(code.format(v=1))
  plugins.load(str(path))
  path.write_text(code.format(v=22))
  plugins.load(str(path))  # was: "environment 'my-edited-env' is already registered"
  assert drjax.envs.make("my-edited-env").VERSION == 22
  other = tmp_path / "other"
  other.mkdir()
  (other / "env_plugin.py").write_text(code.format(v=3))
  with pytest.raises(plugins.PluginError, match="already registered from"):
    plugins.load(str(other / "env_plugin.py"))
  assert drjax.envs.make("my-edited-env").VERSION == 22
  with pytest.raises(ValueError, match="'random' is a built-in environment"):
    drjax.envs.register("random", drjax.envs.LinearMDP)


# ---------------------------------------------------------------------------------------------
# Registration.


def test_registering_again_from_the_same_source_replaces_and_unregister_removes():
  first = registry.register(_variant("again", "first"))
  assert registry.source("again") == os.path.realpath(__file__)
  second = registry.register(_variant("again", "second"))  # a notebook re-running its cell
  assert registry.get("again") is second and registry.get("again").display == "second"
  assert registry.names().count("again") == 1 and first is not second
  assert registry.unregister("again") is second
  assert "again" not in registry.names()
  with pytest.raises(registry.UnknownAgentError, match="again"):
    registry.unregister("again")
  with pytest.raises(ValueError, match="built-in"):
    registry.unregister("drpvi")


def test_a_different_agent_under_a_built_in_name_is_an_error():
  with pytest.raises(ValueError, match="'drpvi' is a built-in agent"):
    registry.register(registry.get("pevi").replace(name="drpvi", display="not DRPVI"))
  assert registry.get("drpvi").display == "DRPVI"
  registry.register(registry.get("drpvi"))  # the same spec again: nothing happens


def test_interactive_cells_replace_and_a_file_does_not(tmp_path):
  """Code run as ``__main__`` without a file (a notebook cell, a REPL) is one source, the
  session: re-running an edited cell replaces its agent; a file registering the same name is
  another source (error naming both)."""
  cell = textwrap.dedent("""
      from drjax.agents import registry
      registry.register(registry.get("drpvi").replace(name="cell-agent", display=DISPLAY))
  """)
  for n, display in enumerate(("v1", "v2")):
    exec(compile(cell, f"<ipython-input-{n}-abc>", "exec"),  # pylint: disable=exec-used
         {"__name__": "__main__", "DISPLAY": display})
  assert registry.get("cell-agent").display == "v2"
  assert registry.source("cell-agent") == registry.INTERACTIVE
  other = tmp_path / "other_agents.py"
  other.write_text(cell.replace("DISPLAY", "'file'"))
  with pytest.raises(plugins.PluginError, match="already registered from the interactive"):
    plugins.load(str(other))


def _plugin_file(tmp_path, module, display):
  return _write(tmp_path / f"{module}.py", display, agent=f"{module}-agent")


@pytest.mark.parametrize("module_first", [True, False])
def test_the_same_file_as_a_module_and_as_a_path_is_one_source(tmp_path, monkeypatch,
                                                               module_first):
  module = f"my_agents_{int(module_first)}"
  path = _plugin_file(tmp_path, module, "mine")
  monkeypatch.syspath_prepend(str(tmp_path))
  monkeypatch.delitem(sys.modules, module, raising=False)
  steps = [lambda: importlib.import_module(module), lambda: plugins.load(path)]
  for step in steps if module_first else steps[::-1]:
    step()  # neither "already registered"
  assert registry.get(f"{module}-agent").display == "mine"
  assert registry.source(f"{module}-agent") == os.path.realpath(path)
  # Another file registering the same name: an error naming both files.
  other = tmp_path / "elsewhere"
  other.mkdir()
  with pytest.raises(plugins.PluginError) as e:
    plugins.load(_plugin_file(other, module, "theirs"))
  assert os.path.realpath(path) in str(e.value) and os.path.realpath(other) in str(e.value)
  assert registry.get(f"{module}-agent").display == "mine"


# ---------------------------------------------------------------------------------------------
# A variant's colour and citation.


def test_a_variant_gets_its_own_colour_and_citation():
  parent = registry.get("drpvi")
  spec = registry.register(_variant("colour-a"))
  spec_b = registry.register(_variant("colour-b"))
  given = registry.register(_variant("colour-c", color="tab:gray", paper="Me, 2026"))
  others = {s.color for s in registry.specs() if s.name not in ("colour-a", "colour-b")}
  assert spec.color not in others | {spec_b.color} and spec_b.color not in others
  assert spec.paper == "" and spec.variant_of == "drpvi" and parent.paper.startswith("Liu & Xu")
  assert spec.describe()["variant_of"] == "drpvi" and spec.describe()["paper"] == ""
  assert (given.color, given.paper) == ("tab:gray", "Me, 2026")
  assert style.color("colour-a") == spec.color != style.color("drpvi") == parent.color
  # Re-registered from the same source: the same colour again.
  assert registry.register(_variant("colour-a", "again")).color == spec.color
  # A copy under the same name (no variant) keeps everything.
  assert parent.replace(display="x").color == parent.color


def test_twenty_variants_get_distinct_colours_none_near_another_agents():
  """Colours chosen when registered: 20 variants (the palette used to run out after 11, and its
  second colour sat beside DRPVI's tab:orange) all differ from each other and from the built-in
  agents by at least 0.15 in RGB (Euclidean, channels in [0, 1]); the first by 0.4."""
  from matplotlib import colors as mcolors  # pylint: disable=g-import-not-at-top
  rgb = lambda c: np.asarray(mcolors.to_rgb(c))  # noqa: E731
  builtin = [s.color for s in registry.specs() if s.kind != "baseline"]
  got = [registry.register(_variant(f"many-{i}")).color for i in range(20)]
  every = builtin + got
  gaps = [np.linalg.norm(rgb(a) - rgb(b)) for i, a in enumerate(every) for b in every[:i]]
  assert min(gaps) >= 0.15, min(gaps)
  assert min(np.linalg.norm(rgb(got[0]) - rgb(b)) for b in builtin) >= 0.4


# ---------------------------------------------------------------------------------------------
# Presets against variants.


def test_a_preset_setting_a_variant_does_not_take_is_an_error_naming_both(capsys, tmp_path):
  from drjax import cli, sweeps
  registry.register(_variant("no-penalty", options=("truncation", "tie_break")))
  common = dict(seeds=2, trajectories=(10,))
  with pytest.raises(ValueError, match=r"bonus='notebook'.*'no-penalty'.*'penalty'"):
    sweeps.validate(sweeps.SweepConfig(agents=("drpvi", "no-penalty"), bonus="notebook",
                                       **common))
  sweeps.validate(sweeps.SweepConfig(agents=("drpvi", "no-penalty"), **common))  # paper: fine
  # Declared as not applying (its width is its own): no error.
  registry.register(_variant("no-penalty", options=("truncation", "tie_break"),
                             ignores=("bonus", "clip")))
  sweeps.validate(sweeps.SweepConfig(agents=("no-penalty",), bonus="notebook", clip="notebook",
                                     tie_break="first", **common))
  # Every built-in agent takes the notebook preset (or declares it does not apply).
  builtins = tuple(s.name for s in registry.specs() if registry.source(s.name) ==
                   registry.BUILTIN and s.kind != "baseline")  # baselines take no settings
  sweeps.validate(sweeps.SweepConfig(agents=builtins, env="random", bonus="notebook",
                                     clip="notebook", tie_break="first", **common))
  # The command line names the flag and the agent, in one line.
  registry.register(_variant("no-penalty", options=("truncation", "tie_break")))
  with pytest.raises(SystemExit) as e:
    cli.main(["sweep", "--agents", "no-penalty", "--preset", "notebook", "--trajectories", "10",
              "--seeds", "2", "--quiet", "--out", str(tmp_path / "s")])
  err = capsys.readouterr().err.strip()
  assert e.value.code == 2 and len(err.splitlines()) == 1
  assert "--preset" in err and "'no-penalty'" in err and "penalty" in err


# ---------------------------------------------------------------------------------------------
# Declared bounds.


class BoundedHParams(NamedTuple):
  """DRPVI's hyperparameters and two new ones: kappa in (-1, 1] (declared), tau undeclared."""

  kappa: float
  tau: float = 0.0
  rho: float = 0.0
  beta: float = 1.0
  lam: float = 0.1
  bounds = {"kappa": "(-1, 1]"}


def kappa_beta(hp):
  return hp.kappa * hp.beta


def drpvi_bounded(H, d, A, **options):
  return offline.make_agent("bounded", BoundedHParams, H, d, A, oracle=compose.TVConstrained(),
                            scale=kappa_beta, **options)


def _register_bounded():
  registry.register(registry.get("drpvi").replace(
      name="bounded", factory=drpvi_bounded, options=("tie_break",), ignores=("bonus", "clip"),
      hparams=BoundedHParams._fields, hparams_type=BoundedHParams))


def _three_errors(name, capsys, tmp_path, **hparams):
  """The messages of registry.make_hparams, sweeps.run and drjax sweep --hparam for one value."""
  from drjax import cli, sweeps
  out = []
  with pytest.raises(ValueError) as e:
    registry.make_hparams(name, (3, 4, 2), **hparams)
  out.append(str(e.value))
  with pytest.raises(ValueError) as e:
    sweeps.run(sweeps.SweepConfig(agents=(name,), seeds=2, trajectories=(10,),
                                  hparams={k: (v,) for k, v in hparams.items()}),
               out=str(tmp_path / "run"), quiet=True)
  out.append(str(e.value))
  flags = [f"--hparam={k}={v}" for k, v in hparams.items()]
  with pytest.raises(SystemExit) as e:
    cli.main(["sweep", "--agents", name, *flags, "--trajectories", "10", "--seeds", "2",
              "--quiet", "--out", str(tmp_path / "cli")])
  assert e.value.code == 2
  out.append(capsys.readouterr().err.strip())
  assert not os.path.exists(tmp_path / "run" / "sweep.json")  # refused before anything ran
  return out


@pytest.mark.parametrize("name,hparams,message", [
    ("drpvi-scaled", {"kappa": -1.0},
     "agent 'drpvi-scaled': hyperparameter kappa must be in [0, inf), got -1.0"),
    ("bounded", {"kappa": -1.0},
     "agent 'bounded': hyperparameter kappa must be in (-1, 1], got -1.0"),
    ("bounded", {"kappa": 0.5, "tau": -2.0},
     "agent 'bounded': hyperparameter tau must be in [0, inf), got -2.0"),
    ("va-drpvi", {"var_shift": -1.0},
     "agent 'va-drpvi': hyperparameter var_shift must be in [0, inf), got -1.0"),
    ("we-drive-u", {"var_floor": 0.0},
     "agent 'we-drive-u': hyperparameter var_floor must be in (0, inf), got 0.0"),
])
def test_bounds_are_enforced_identically_in_the_three_places(capsys, tmp_path, name, hparams,
                                                             message):
  plugins.load(EXAMPLE)
  _register_bounded()
  for got in _three_errors(name, capsys, tmp_path, **hparams):
    assert message in got, got
  if registry.get(name).kind == "offline":  # the agent-level API: the agent's own name
    agent = registry.make(name, (3, 4, 2))
    with pytest.raises(ValueError) as e:
      offline.make_hparams(agent, **hparams)
    assert message.replace(repr(name), repr(agent.name)) in str(e.value), str(e.value)


def test_declared_bounds_admit_their_range_everywhere():
  from drjax import sweeps
  _register_bounded()
  hp = registry.make_hparams("bounded", (3, 4, 2), kappa=-0.5)
  assert float(hp.kappa) == -0.5 and float(hp.tau) == 0.0
  agent = registry.make("bounded", (3, 4, 2))
  assert float(offline.make_hparams(agent, kappa=-0.5).kappa) == -0.5
  with pytest.raises(ValueError, match=re.escape("(-1, 1]")):
    offline.make_hparams(agent, kappa=1.5)  # the agent-level API reads the same declaration
  cfg = sweeps.validate(sweeps.SweepConfig(agents=("bounded",), seeds=2, trajectories=(10,),
                                           hparams={"kappa": (-0.5, 1.0)}))
  assert cfg.hparams == {"kappa": (-0.5, 1.0)}
  spec = registry.get("bounded")
  assert str(spec.bounds("kappa")) == "(-1, 1]" and str(spec.bounds("tau")) == "[0, inf)"
  assert spec.describe()["bounds"] == {"kappa": "(-1, 1]", "tau": "[0, inf)"}
  assert not spec.bounds("kappa").contains(-1.0) and spec.bounds("kappa").contains(1.0)
  with pytest.raises(ValueError, match="bounds must be"):
    registry._parse_bounds("x", "[1, 0]")  # pylint: disable=protected-access


# ---------------------------------------------------------------------------------------------
# The agent's own width.


def max_width(pinv, phi):
  """A custom width: the largest coordinate term ``max_i phi_i sqrt([Lambda^-1]_ii)``."""
  return jnp.max(phi * jnp.sqrt(jnp.diagonal(pinv))[(None,) * (phi.ndim - 1)], axis=-1)


def _qf(H=3, d=4, seed=0):
  k1, k2 = jax.random.split(jax.random.key(seed))
  a = np.asarray(jax.random.normal(k1, (H, d, d)), np.float64)
  pinv = np.einsum("hij,hkj->hik", a, a) + np.eye(d)
  z = jnp.zeros((H, d), jnp.float32)
  qf = QFunction(z, jnp.asarray(pinv, jnp.float32), jnp.float32(2.0), jnp.full((H,), 3.0), z, z)
  phi = np.asarray(jax.random.uniform(k2, (5, d)), np.float64)
  return qf, pinv, phi


def test_uncertainty_is_the_agent_own_width():
  qf, pinv, phi = _qf()
  h = 1
  custom = lsvi.make_agent("max-width", 3, 4, 2, 5, oracle=compose.TVConstrained(),
                           width=max_width)
  want = [max(p[i] * np.sqrt(pinv[h, i, i]) for i in range(4)) for p in phi]
  np.testing.assert_allclose(custom.uncertainty(qf, h, jnp.asarray(phi, jnp.float32)), want,
                             rtol=1e-5)
  np.testing.assert_allclose(custom.bonus(qf, h, jnp.asarray(phi, jnp.float32)),
                             2.0 * np.asarray(want), rtol=1e-5)
  assert custom.config.bonus == f"{__name__}.max_width"
  ls = registry.make("lsvi-ucb", (3, 4, 2), capacity=5)
  np.testing.assert_allclose(ls.uncertainty(qf, h, jnp.asarray(phi, jnp.float32)),
                             [np.sqrt(p @ pinv[h] @ p) for p in phi], rtol=1e-5)
  assert ls.config.bonus == "ellipsoid"
  dr = registry.make("dr-lsvi-ucb", (3, 4, 2), capacity=5, bonus="notebook")
  np.testing.assert_allclose(dr.uncertainty(qf, h, jnp.asarray(phi, jnp.float32)),
                             [np.sqrt(sum(p[i] ** 2 * pinv[h, i, i] for i in range(4)))
                              for p in phi], rtol=1e-5)
  assert dr.config.bonus == "notebook"


def test_estimation_error_stays_theorem_1_for_every_agent():
  """make_train's estimation_error is the d-rectangular width at the visited features even for
  LSVI-UCB, whose own width (uncertainty) is the elliptical one."""
  from drjax.envs import LinearMDP
  env = LinearMDP()
  params = env.make_params()
  agent = registry.make("lsvi-ucb", env, capacity=3)
  out = drjax.make_train(env, agent, 3, record_q=True)(
      jax.random.key(0), registry.make_hparams("lsvi-ucb", env), params)
  phi_tab = np.asarray(env.model(params).phi, np.float64)
  pinv = np.asarray(out.qf.pinv, np.float64)
  s, a = np.asarray(out.states), np.asarray(out.actions)
  want = [sum(phi_tab[h, s[k, h], a[k, h]] @ np.sqrt(np.diagonal(pinv[k, h]))
              for h in range(env.horizon)) for k in range(3)]
  np.testing.assert_allclose(out.estimation_error, want, rtol=1e-5)


def dr_lsvi_ucb_max(H, d, A, capacity, **options):
  return lsvi.make_agent("DR-LSVI-UCB-max", H, d, A, capacity, oracle=compose.TVConstrained(),
                         width=max_width, **options)


def test_sweep_json_records_each_agent_width():
  from drjax import sweeps
  from drjax.sweeps import grid
  registry.register(registry.get("dr-lsvi-ucb").replace(
      name="dr-max", factory=dr_lsvi_ucb_max, options=("tie_break",), ignores=("bonus", "clip")))
  cfg = sweeps.validate(sweeps.SweepConfig(agents=("dr-lsvi-ucb", "lsvi-ucb", "dr-max", "pevi"),
                                           seeds=2, episodes=3, trajectories=(10,)))
  assert grid.layout(cfg).describe()["width"] == {
      "dr-lsvi-ucb": "paper", "lsvi-ucb": "ellipsoid", "dr-max": f"{__name__}.max_width",
      "pevi": "ellipsoid"}
  cfg = sweeps.validate(sweeps.SweepConfig(agents=("dr-lsvi-ucb", "drpvi"), seeds=2,
                                           bonus="notebook", trajectories=(10,)))
  assert grid.layout(cfg).describe()["width"] == {"dr-lsvi-ucb": "notebook", "drpvi": "notebook"}


def test_a_file_plugins_width_is_recorded_under_the_files_name(tmp_path):
  """``my_widths.py``'s ``double``: recorded as ``my_widths.double`` (it was the internal module
  name ``drjax_plugin_my_widths_<hash of the path>.double``)."""
  from drjax import sweeps
  from drjax.sweeps import grid
  path = tmp_path / "my_widths.py"
  path.write_text(textwrap.dedent("""
      from drjax.agents import compose, lsvi, pieces, registry
      def double(pinv, phi):
        return 2.0 * pieces.width_fn("paper")(pinv, phi)
      def factory(H, d, A, capacity, **options):
        return lsvi.make_agent("DR-double", H, d, A, capacity, oracle=compose.TVConstrained(),
                               width=double, **options)
      registry.register(registry.get("dr-lsvi-ucb").replace(
          name="dr-double", factory=factory, options=("tie_break",), ignores=("bonus", "clip")))
  """))
  plugins.load(str(path))
  assert registry.make("dr-double", (3, 4, 2), capacity=2).config.bonus == "my_widths.double"
  cfg = sweeps.validate(sweeps.SweepConfig(agents=("dr-double",), seeds=2, episodes=3,
                                           plugins=(str(path),)))
  assert grid.layout(cfg).describe()["width"] == {"dr-double": "my_widths.double"}


# ---------------------------------------------------------------------------------------------
# The figure's title.


@pytest.mark.parametrize("agents,want,absent", [
    (("drpvi",), "$N$ = 20, 50 trajectories", "$K$"),
    (("dr-lsvi-ucb",), "$K$ = 7", "$N$"),
    (("drpvi", "dr-lsvi-ucb"), "$K$ = 7, $N$ = 20, 50 trajectories", None),
])
def test_the_figure_title_names_the_data_the_runs_used(monkeypatch, tmp_path, agents, want,
                                                       absent):
  import pandas as pd
  from matplotlib.figure import Figure
  from drjax import sweeps
  from drjax.sweeps import figure
  titles = []
  monkeypatch.setattr(Figure, "savefig",
                      lambda self, *a, **k: titles.append(self.axes[0].get_title()))
  cfg = sweeps.SweepConfig(agents=agents, seeds=3, episodes=7, trajectories=(20, 50))
  df = pd.DataFrame(columns=["agent", "seed", "setting", "beta", "train_return", "value"])
  summary = pd.DataFrame({"agent": list(agents), "setting": [0] * len(agents),
                          "beta": [1.0] * len(agents), "value_mean": [1.0] * len(agents),
                          "value_stderr": [0.1] * len(agents)})
  figure._plot(df, summary, cfg, str(tmp_path / "x.png"))  # pylint: disable=protected-access
  assert len(titles) == 1 and want in titles[0], titles
  assert absent is None or absent not in titles[0]
  titles.clear()
  figure._plot(df, summary, dataclasses.replace(cfg, seeds=1), str(tmp_path / "y.png"))  # pylint: disable=protected-access
  assert "1 seed," in titles[0] and "1 seeds" not in titles[0], titles


# ---------------------------------------------------------------------------------------------
# docs/agents.md writes an oracle from scratch: its block runs and is DRPVI at cap = H.


def _docs_block(marker):
  with open(os.path.join(ROOT, "docs", "agents.md"), encoding="utf-8") as f:
    blocks = re.findall(r"^```python\n(.*?)^```", f.read(), re.S | re.M)
  found = [b for b in blocks if marker in b]
  assert len(found) == 1, f"docs/agents.md has {len(found)} blocks with {marker!r}"
  return found[0]


def test_the_docs_oracle_written_from_scratch_runs_and_is_drpvi_at_cap_h(capsys):
  from drjax import sweeps
  block = _docs_block("def capped_tv(")
  exec(compile(block, "docs/agents.md", "exec"), {"__name__": "docs_agents"})  # pylint: disable=exec-used
  lines = capsys.readouterr().out.strip().splitlines()
  gap = float(lines[0].rsplit(":", 1)[1])
  alpha = float(lines[1].rsplit(":", 1)[1])
  assert gap < 1e-4, lines  # the brute force over the kinks is the built-in exact dual
  assert alpha == pytest.approx(0.5), lines  # the cap binds
  # Its penalty follows the preset (it takes the option), and cap's bounds are declared.
  assert registry.make("drpvi-capped", (3, 4, 2), penalty="notebook").config.penalty == "notebook"
  sweeps.validate(sweeps.SweepConfig(agents=("drpvi-capped",), seeds=2, trajectories=(10,),
                                     bonus="notebook", hparams={"cap": (0.5, 3.0)}))
  with pytest.raises(ValueError, match=re.escape("cap must be in [0, inf), got -1.0")):
    registry.make_hparams("drpvi-capped", (3, 4, 2), cap=-1.0)


def test_a_plugin_factory_that_rejects_the_sweeps_options_is_one_error(tmp_path, capsys):
  """A variant declaring ``penalty`` whose factory forwards it to ``offline.make_agent`` (which
  calls it ``width``): one line naming the agent, its file and the mapping, nothing written; it
  used to end in a traceback from inside the factory."""
  from drjax import cli, sweeps
  path = tmp_path / "pen_agents.py"
  path.write_text(textwrap.dedent("""
      from drjax.agents import compose, offline, registry
      def factory(H, d, A, **options):
        return offline.make_agent("DRPVI-fwd", offline.DRPVIHParams, H, d, A,
                                  oracle=compose.TVConstrained(), **options)
      registry.register(registry.get("drpvi").replace(
          name="drpvi-fwd", display="DRPVI-fwd", factory=factory,
          options=("penalty", "truncation", "fail_zero", "tie_break")))
  """))
  plugins.load(str(path))
  with pytest.raises(sweeps.SweepError) as e:
    sweeps.run(sweeps.SweepConfig(agents=("drpvi-fwd",), seeds=2, trajectories=(10,)),
               out=str(tmp_path / "run"), quiet=True)
  msg = str(e.value)
  assert "drpvi-fwd" in msg and str(path) in msg and "'penalty'" in msg and "width=" in msg, msg
  assert not os.path.exists(tmp_path / "run")
  with pytest.raises(SystemExit) as e:
    cli.main(["sweep", "--plugin", str(path), "--agents", "drpvi-fwd", "--trajectories", "10",
              "--seeds", "2", "--quiet", "--out", str(tmp_path / "cli")])
  assert e.value.code == 2
  err = capsys.readouterr().err.strip()
  assert len(err.splitlines()) == 1 and "width=" in err, err
  assert not os.path.exists(tmp_path / "cli")
