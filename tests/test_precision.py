"""drjax's kernels trace every matrix product at full float32 precision (``HIGHEST``), so that
GPUs do not silently use TensorFloat-32 (drjax/_precision.py). Checked on the lowered programs,
which are the same on every backend."""

import re

import jax
import pytest

from drjax import data
from drjax.agents import registry
from drjax.envs.linear_mdp import LinearMDP

ENV = LinearMDP()
PARAMS = ENV.make_params(xi_norm=0.2)


def _dot_precisions(lowered_text: str) -> list[str]:
  lines = [ln for ln in lowered_text.splitlines() if "dot_general" in ln]
  assert lines, "no matrix product in the program"
  return [m.group(1) if (m := re.search(r"precision = \[([A-Z_, ]+)\]", ln)) else "DEFAULT"
          for ln in lines]


@pytest.mark.parametrize("name", registry.names("offline"))
def test_offline_fit_and_act_use_highest_precision(name):
  agent = registry.make(name, ENV)
  ds = data.collect(ENV, PARAMS, data.uniform(ENV.num_actions), jax.random.key(0), 10)
  hp = registry.make_hparams(name, ENV)
  pilot = ds if agent.needs_pilot else None
  text = jax.jit(lambda d, h: agent.fit(d, h, pilot=pilot)).lower(ds, hp).as_text()
  assert set(_dot_precisions(text)) == {"HIGHEST, HIGHEST"}
  qf = agent.fit(ds, hp, pilot=pilot)
  phi_all = ds.next_phi[0, 0]
  text = jax.jit(lambda q, p: agent.act(q, 0, p, False)).lower(qf, phi_all).as_text()
  # d = 4: the Q-values phi_all @ w are unrolled multiply-adds (linalg._small_matmul), exact in
  # float32 on every backend; what products remain (PEVI's ellipsoid width) are at full precision.
  if "dot_general" in text:
    assert set(_dot_precisions(text)) == {"HIGHEST, HIGHEST"}


def test_without_the_wrapper_products_are_default():
  # the check above can fail: a plain product lowers without a precision attribute
  text = jax.jit(lambda a, b: a @ b).lower(jax.numpy.ones((2, 2)), jax.numpy.ones((2, 2)))
  assert _dot_precisions(text.as_text()) == ["DEFAULT, DEFAULT"]


def test_planning_and_evaluation_use_highest_precision():
  import jax.numpy as jnp
  from drjax import evaluate, planning
  model = ENV.model(PARAMS)
  rho = jnp.full((ENV.horizon, ENV.feature_dim), 0.2)
  text = jax.jit(planning.robust_dp).lower(model, rho).as_text()
  assert set(_dot_precisions(text)) == {"HIGHEST, HIGHEST"}
  text = jax.jit(lambda m, r: planning.regularized_dp(m, r, "chi2")).lower(model, rho).as_text()
  assert set(_dot_precisions(text)) == {"HIGHEST, HIGHEST"}
  agent = registry.make("drpvi", ENV)
  ds = data.collect(ENV, PARAMS, data.uniform(ENV.num_actions), jax.random.key(0), 10)
  qf = agent.fit(ds, registry.make_hparams("drpvi", ENV))
  text = jax.jit(lambda q: evaluate.offline_subopt(agent, q, model, rho)).lower(qf).as_text()
  assert set(_dot_precisions(text)) == {"HIGHEST, HIGHEST"}


def test_online_engine_and_make_fit_use_highest_precision():
  from drjax import train
  from drjax.agents.base import make_hparams
  agent = registry.make("dr-lsvi-ucb", ENV, capacity=5)
  run = train.make_train(ENV, agent, 5)
  hp = make_hparams(ENV.horizon, ENV.feature_dim, rho=0.3)
  text = jax.jit(run).lower(jax.random.key(0), hp, PARAMS).as_text()
  assert set(_dot_precisions(text)) == {"HIGHEST, HIGHEST"}
  off = registry.make("drpvi", ENV)
  fit_run = train.make_fit(ENV, off, 8)
  text = jax.jit(fit_run).lower(jax.random.key(0), registry.make_hparams("drpvi", ENV),
                                PARAMS).as_text()
  assert set(_dot_precisions(text)) == {"HIGHEST, HIGHEST"}


def test_sweep_chunk_program_wraps_its_jits():
  # drjax.sweeps builds its chunk program with in/out shardings; every jax.jit in the package
  # must trace an exact_matmuls-wrapped function (a jit added without it fails here).
  import importlib
  import inspect
  import pkgutil
  from drjax import sweeps
  source = "".join(inspect.getsource(importlib.import_module(f"drjax.sweeps.{m.name}"))
                   for m in pkgutil.iter_modules(sweeps.__path__))
  jits = re.findall(r"jax\.jit\(([^,\n)]+)", source)
  assert jits and all(j.startswith("exact_matmuls(") for j in jits), jits


def test_offline_act_with_more_than_eight_features_uses_highest_precision():
  """Above ``linalg.UNROLL_MAX_D`` features the Q-values stay one product, at full precision."""
  from drjax.envs.random_mdp import random_linear_drmdp  # pylint: disable=g-import-not-at-top
  env, params = random_linear_drmdp(jax.random.PRNGKey(0), 6, 3, 12, 3)
  agent = registry.make("drpvi", env)
  ds = data.collect(env, params, data.uniform(env.num_actions), jax.random.key(0), 10)
  qf = agent.fit(ds, registry.make_hparams("drpvi", env))
  text = jax.jit(lambda q, p: agent.act(q, 0, p, False)).lower(qf, ds.next_phi[0, 0]).as_text()
  assert set(_dot_precisions(text)) == {"HIGHEST, HIGHEST"}
