"""The open core (issue 28): agents as compositions, an open registry, plugins, declared
hyperparameters in sweeps, and the example plugin experiments/custom_agent.py."""

import json
import os
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import drjax
from drjax import data as data_lib
from drjax import plugins
from drjax.agents import compose, offline, pieces, registry
from drjax.envs import LinearMDP

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "experiments", "custom_agent.py")


_FRESH = {}  # the registry and the loaded plugins before this module's (what a new process has)


@pytest.fixture(scope="module", autouse=True)
def _restore_registry():
  """The agents this module registers are removed afterwards: other test modules in the same
  worker loop over every registered agent with its defaults (``drpvi-scaled`` has none)."""
  registry.names()  # the built-ins loaded first: what is restored includes them
  saved, loaded = dict(registry._REGISTRY), dict(plugins._LOADED)  # pylint: disable=protected-access
  sources = dict(registry._SOURCES)  # pylint: disable=protected-access
  # A new process's state: without the example plugin (in case a module before this one in the
  # same worker loaded it).
  ex = ("drpvi-ellipsoid", "drpvi-scaled", "dr-lsvi-ucb-ellipsoid")
  ex_key = plugins.resolve(EXAMPLE)
  _FRESH.update(
      registry={k: v for k, v in saved.items() if k not in ex},
      sources={k: v for k, v in sources.items() if k not in ex},
      loaded={k: v for k, v in loaded.items() if k != ex_key},
      plugin_sources={k: v for k, v in plugins._SOURCES.items()  # pylint: disable=protected-access
                      if k != ex_key})
  yield
  registry._REGISTRY.clear()  # pylint: disable=protected-access
  registry._REGISTRY.update(saved)  # pylint: disable=protected-access
  registry._SOURCES.clear()  # pylint: disable=protected-access
  registry._SOURCES.update(sources)  # pylint: disable=protected-access
  plugins._LOADED.clear()  # pylint: disable=protected-access
  plugins._LOADED.update(loaded)  # pylint: disable=protected-access


@pytest.fixture(scope="module")
def example():
  plugins.load(EXAMPLE)
  return EXAMPLE


@pytest.fixture(scope="module")
def linear():
  env = LinearMDP()
  params = env.make_params()
  ds = data_lib.collect(env, params, data_lib.uniform(env.num_actions), jax.random.key(1), 30)
  return env, params, ds


def _same(a, b):
  return all(np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(a, b))


def test_example_is_short_and_registers_three_agents(example):
  with open(example) as f:
    assert len(f.read().splitlines()) <= 45
  for name in ("drpvi-ellipsoid", "drpvi-scaled", "dr-lsvi-ucb-ellipsoid"):
    assert name in registry.names()
  assert registry.get("drpvi-scaled").missing({}) == ("kappa",)
  plugins.load(example)  # idempotent: a second load registers nothing twice
  assert registry.names().count("drpvi-scaled") == 1


def test_drpvi_scaled_at_kappa_one_is_drpvi_and_kappa_scales_the_penalty(example, linear):
  env, params, ds = linear
  scaled, drpvi = registry.make("drpvi-scaled", env), registry.make("drpvi", env)
  q1 = scaled.fit(ds, registry.make_hparams("drpvi-scaled", env, kappa=1.0, rho=0.3))
  q0 = drpvi.fit(ds, registry.make_hparams("drpvi", env, rho=0.3))
  assert _same(q1, q0)  # bit for bit
  q2 = scaled.fit(ds, registry.make_hparams("drpvi-scaled", env, kappa=2.0, rho=0.3))
  assert float(q2.beta) == 2.0 * float(q0.beta)


def test_drpvi_ellipsoid_penalty_is_the_elliptical_norm(example, linear):
  env, params, ds = linear
  agent = registry.make("drpvi-ellipsoid", env)
  qf = agent.fit(ds, registry.make_hparams("drpvi-ellipsoid", env, rho=0.2))
  model = env.model(params)
  phi = np.asarray(model.phi[1, 2], np.float64)  # [A, d] at step 1, state 2
  pinv = np.asarray(qf.pinv[1], np.float64)
  want = phi @ np.asarray(qf.w[1]) - float(qf.beta) * np.sqrt(np.einsum("ad,de,ae->a", phi, pinv,
                                                                         phi))
  want = np.clip(want, 0.0, env.horizon - 1)
  got = agent.q_values(qf, 1, model.phi[1, 2], jnp.asarray(2 == model.fail_state))
  np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6)


def test_dr_lsvi_ucb_ellipsoid_bonus_is_the_elliptical_norm(example):
  env = LinearMDP()
  agent = registry.make("dr-lsvi-ucb-ellipsoid", env, capacity=5)
  train = jax.jit(drjax.make_train(env, agent, 5))
  out = train(jax.random.key(0), registry.make_hparams("dr-lsvi-ucb-ellipsoid", env, rho=0.3),
              env.make_params())
  qf = jax.tree_util.tree_map(lambda x: x, out.final_qf)
  phi = np.array([[0.5, 0.5, 0.0, 0.0], [0.0, 0.25, 0.25, 0.5]])
  pinv = np.asarray(qf.pinv[0], np.float64)
  bonus = float(qf.beta) * np.sqrt(np.einsum("ad,de,ae->a", phi, pinv, phi))
  np.testing.assert_allclose(np.asarray(agent.bonus(qf, 0, jnp.asarray(phi, jnp.float32))), bonus,
                             rtol=1e-5)
  # The robust part is DR-LSVI-UCB's: the same nu as the built-in agent on the same data.
  assert np.any(np.asarray(qf.nu) != 0)


def test_a_custom_oracle_is_a_plain_function(linear):
  """Any callable (StepInputs, hp) -> (nu, alpha) is an oracle: the nominal regression written
  by hand gives PEVI's Q (known reward: theta + Lambda^-1 sum g v, checked against a NumPy
  backward induction)."""
  env, params, ds = linear

  def my_oracle(x, hp):
    return x.pinv @ (x.g.T @ x.v), jnp.zeros_like(x.pinv[0])

  agent = offline.make_agent("mine", offline.PEVIHParams, env.horizon, env.feature_dim,
                             env.num_actions, oracle=my_oracle, width="ellipsoid", vmin="zero")
  qf = agent.fit(ds, offline.make_hparams(agent, beta=0.5, lam=1.0), form="buffer")
  # NumPy: w_h = theta_h + Lambda_h^-1 sum phi V_{h+1}(s').
  H, d = env.horizon, env.feature_dim
  phi, nphi = np.asarray(ds.phi, np.float64), np.asarray(ds.next_phi, np.float64)
  nfail, theta = np.asarray(ds.next_fail), np.asarray(ds.theta, np.float64)
  w_next = None
  for h in range(H - 1, -1, -1):
    lam_h = phi[h].T @ phi[h] + np.eye(d)
    pinv = np.linalg.inv(lam_h)
    if h == H - 1:
      w = theta[h]
    else:
      p1 = np.linalg.inv(phi[h + 1].T @ phi[h + 1] + np.eye(d))
      q = nphi[h] @ w_next - 0.5 * np.sqrt(np.einsum("nad,de,nae->na", nphi[h], p1, nphi[h]))
      v = np.where(nfail[h], 0.0, np.clip(q, 0, H - h - 1).max(-1))
      w = theta[h] + pinv @ (phi[h].T @ v)
    np.testing.assert_allclose(np.asarray(qf.w[h]), w, rtol=2e-4, atol=2e-5)
    w_next = w


def test_registry_is_read_when_used_not_at_import():
  from drjax import sweeps  # imported before the registration below
  name = "late-drpvi"
  if name not in registry.names():
    registry.register(registry.get("drpvi").replace(name=name, display="late"))
  cfg = sweeps.validate(sweeps.SweepConfig(agents=(name,), seeds=2, trajectories=(10,)))
  assert cfg.agents == (name,) and name in sweeps.AGENTS


def test_spec_defaults_agree_with_the_hyperparameter_namedtuples():
  env = (3, 4, 2)
  for name in registry.names():
    spec = registry.get(name)
    kw = ({"capacity": 2} if spec.kind == "online" else
          {"neutral": 0} if "neutral" in spec.options else {})
    cls = registry.make(name, env, **kw).hparams_type
    nt = {f: x for f, x in cls._field_defaults.items() if f in spec.hparams}
    assert nt == spec.defaults, name


def test_missing_hyperparameter_is_an_error_everywhere(example):
  env = LinearMDP()
  with pytest.raises(ValueError, match="kappa"):
    registry.make_hparams("drpvi-scaled", env)
  agent = registry.make("drpvi-scaled", env)
  with pytest.raises(ValueError, match="kappa"):
    offline.make_hparams(agent, rho=0.1)
  from drjax import sweeps
  with pytest.raises(ValueError, match="kappa"):
    sweeps.run(sweeps.SweepConfig(agents=("drpvi-scaled",), seeds=2, trajectories=(10,),
                                  plugins=(EXAMPLE,)), out=None, quiet=True)
  # drjax.sweep takes built HParams: a field without a value is named before tracing.
  online = drjax.dr_lsvi_ucb(env.horizon, env.feature_dim, env.num_actions, 5)
  hp = drjax.make_hparams(env.horizon, env.feature_dim)._replace(lam=None)
  with pytest.raises((TypeError, ValueError), match="lam"):
    drjax.sweep(env, env.make_params(), online, jax.random.key(0), num_seeds=2, num_episodes=3,
                hparams=hp)


def test_hparam_axis_applies_to_the_agents_that_declare_it(example):
  from drjax import sweeps
  cfg = sweeps.validate(sweeps.SweepConfig(
      agents=("drpvi-scaled", "va-drpvi", "drpvi"), seeds=2, trajectories=(10,),
      hparams={"kappa": (0.0, 1.0, 2.0), "var_shift": (0.0, 1.0)}, plugins=(EXAMPLE,)))
  lay = sweeps.layout(cfg)
  settings = dict(lay.agents)
  assert settings == {"drpvi-scaled": 3, "va-drpvi": 2, "drpvi": 1}
  with pytest.raises(ValueError, match="not a hyperparameter"):
    sweeps.validate(sweeps.SweepConfig(agents=("drpvi",), hparams={"kappa": (1.0,)}))
  with pytest.raises(ValueError, match="--rho|rho="):
    sweeps.validate(sweeps.SweepConfig(agents=("drpvi",), hparams={"rho": (0.1,)}))


def test_sweep_runs_each_kappa_as_the_agent_with_that_kappa(example, tmp_path):
  """The chunk program's hyperparameters come from the axis: the swept DRPVI-scaled at kappa=1
  has the values of the built-in DRPVI (same seeds, same data), kappa=0 those of an unpenalized
  one (beta=0)."""
  from drjax import sweeps
  common = dict(seeds=3, trajectories=(20,), rho=(0.3,), targets=("q", 0.0, 1.0, 3))
  sweeps.run(sweeps.SweepConfig(agents=("drpvi-scaled",), hparams={"kappa": (0.0, 1.0)},
                                plugins=(EXAMPLE,), **common), out=str(tmp_path / "a"), quiet=True)
  sweeps.run(sweeps.SweepConfig(agents=("drpvi",), beta=(0.0, 1.0), **common),
             out=str(tmp_path / "b"), quiet=True)
  a, _ = sweeps.load(str(tmp_path / "a"))
  b, _ = sweeps.load(str(tmp_path / "b"))
  for k, beta in ((0.0, 0.0), (1.0, 1.0)):
    va = a[a.kappa == k].sort_values(["seed", "target_q"]).value.to_numpy()
    vb = b[b.beta == beta].sort_values(["seed", "target_q"]).value.to_numpy()
    np.testing.assert_array_equal(va, vb)


def _set_registry(state):
  """Sets the agent registry and the loaded plugins to ``state`` (a dict as ``_FRESH``)."""
  # pylint: disable=protected-access
  for d, k in ((registry._REGISTRY, "registry"), (registry._SOURCES, "sources"),
               (plugins._LOADED, "loaded"), (plugins._SOURCES, "plugin_sources")):
    d.clear()
    d.update(state[k])


def _drjax(*args, cwd):
  """``drjax ARGS`` run from ``cwd`` in this process (``drjax.cli.main``), as a new process would
  run it: the registry and the loaded plugins are those before any plugin of this module (so a
  plugin the command needs must be loaded by the command itself: ``--plugin``, or sweep.json on
  ``--merge`` / ``--resume``), restored afterwards; x64 and XLA_FLAGS restored (the command sets
  them). Returns an object with ``returncode`` and ``stderr``."""
  import contextlib  # pylint: disable=g-import-not-at-top
  import io  # pylint: disable=g-import-not-at-top
  import types  # pylint: disable=g-import-not-at-top

  from drjax import cli  # pylint: disable=g-import-not-at-top
  # pylint: disable=protected-access
  now = {"registry": dict(registry._REGISTRY), "sources": dict(registry._SOURCES),
         "loaded": dict(plugins._LOADED), "plugin_sources": dict(plugins._SOURCES)}
  x64, flags, here = jax.config.jax_enable_x64, os.environ.get("XLA_FLAGS"), os.getcwd()
  err = io.StringIO()
  _set_registry(_FRESH)
  try:
    os.chdir(cwd)
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
      code = cli.main(list(args))
  except SystemExit as e:
    code = e.code
  finally:
    os.chdir(here)
    _set_registry(now)
    jax.config.update("jax_enable_x64", x64)
    if flags is not None:
      os.environ["XLA_FLAGS"] = flags
  return types.SimpleNamespace(returncode=code, stderr=err.getvalue())


def test_cli_plugin_sweep_runs_resumes_and_merges(tmp_path):
  common = ["--plugin", EXAMPLE, "--agents", "drpvi-ellipsoid", "drpvi-scaled", "--trajectories",
            "10", "--seeds", "2", "--targets", "q=0:1:2", "--chunk", "2", "--quiet"]
  r = _drjax("sweep", *common, "--out", "s", cwd=tmp_path)
  assert r.returncode == 2
  lines = r.stderr.strip().splitlines()
  assert len(lines) == 1 and "kappa" in lines[0], r.stderr
  for part in ("1/2", "2/2"):
    r = _drjax("sweep", *common, "--hparam", "kappa=0,1", "--part", part, "--out", "s",
               cwd=tmp_path)
    assert r.returncode == 0, r.stderr
  stored = json.load(open(tmp_path / "s" / "sweep.json"))
  assert stored["config"]["plugins"] == [EXAMPLE]
  assert stored["config"]["hparams"] == {"kappa": [0.0, 1.0]}
  r = _drjax("sweep", "--merge", "--out", "s", cwd=tmp_path)  # no --plugin: from sweep.json
  assert r.returncode == 0, r.stderr
  r = _drjax("sweep", "--resume", "--out", "s", "--quiet", cwd=tmp_path)
  assert r.returncode == 0, r.stderr
  assert os.path.isfile(tmp_path / "s" / "results.parquet")


def test_cli_bad_plugin_is_one_line(tmp_path):
  r = _drjax("sweep", "--plugin", "no_such_module_xyz", "--out", "s", cwd=tmp_path)
  assert r.returncode == 2 and "no_such_module_xyz" in r.stderr
  assert len(r.stderr.strip().splitlines()) == 1
  # Only drjax sweep selects agents by name: the other commands refuse --plugin in one line.
  for command in ("train", "plan", "reproduce", "bench"):
    r = _drjax(command, "--plugin", EXAMPLE, cwd=tmp_path)
    assert r.returncode == 2 and "only drjax sweep" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_entry_point_plugins_load_lazily(tmp_path, monkeypatch):
  """An installed distribution's ``drjax.agents`` entry point registers its agents the first
  time the registry is read (a fake distribution on sys.path)."""
  pkg = tmp_path / "ep_agents.py"
  pkg.write_text(textwrap.dedent("""
      from drjax.agents import registry
      def register():
        registry.register(registry.get("pevi").replace(name="ep-pevi", display="EP"))
  """))
  dist = tmp_path / "ep_agents-0.1.dist-info"
  dist.mkdir()
  (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: ep-agents\nVersion: 0.1\n")
  (dist / "entry_points.txt").write_text("[drjax.agents]\nep = ep_agents:register\n")
  monkeypatch.syspath_prepend(str(tmp_path))
  monkeypatch.setattr(plugins, "_ENTRY_POINTS_DONE", set())
  plugins.load_entry_points("drjax.agents")
  assert "ep-pevi" in registry.names()


def test_widths_are_the_equations():
  k1, k2 = jax.random.split(jax.random.key(0))
  a = np.asarray(jax.random.normal(k1, (4, 4)), np.float64)
  pinv = a @ a.T + np.eye(4)
  phi = np.asarray(jax.random.uniform(k2, (3, 4)), np.float64)
  np.testing.assert_allclose(pieces.d_rectangular(pinv, phi),
                             [sum(p[i] * np.sqrt(pinv[i, i]) for i in range(4)) for p in phi])
  np.testing.assert_allclose(pieces.notebook(pinv, phi),
                             [np.sqrt(sum(p[i] ** 2 * pinv[i, i] for i in range(4)))
                              for p in phi], rtol=1e-6)
  for f in (pieces.ellipsoid, pieces.ellipsoid_unrolled):
    np.testing.assert_allclose(f(pinv, phi), [np.sqrt(p @ pinv @ p) for p in phi], rtol=1e-6)
  with pytest.raises(ValueError, match="width"):
    pieces.width_fn("bogus")
  assert compose.TVConstrained() == compose.TVConstrained()  # hashable by value: cached agents
