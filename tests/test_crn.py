"""Common random numbers in the sweeps' Monte Carlo evaluation (issue 30, item 5).

The contract (docs/sweeps.md, "Monte Carlo evaluation"): run ``(agent, setting, seed j)`` trains
with ``fold_in(fold_in(PRNGKey(config.seed), j), 0)`` and evaluates its greedy policy in every
target with ``k_eval = fold_in(fold_in(PRNGKey(config.seed), j), 1)`` (``mc_evaluate``: episode n,
step h draws from ``episode_key(k_eval, n, h)``): the same numbers for every agent, every
rho / beta setting and every target of seed j. Checked here against direct ``make_train`` /
``mc_evaluate`` calls with keys derived from that contract, by two identical agents under two
names (identical values), and by the paired standard error of a difference of two policies.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from drjax import evaluate
from drjax.agents import registry
from drjax.envs.put_option import PutOption
from drjax.sweeps import SweepConfig, run
from drjax.sweeps.program import _hparams_of, _make_agent
from drjax.train import make_train

COPY = "dr-lsvi-ucb-crn-copy"


@pytest.fixture(scope="module")
def swept():
  registry.register(registry.get("dr-lsvi-ucb").replace(name=COPY, display="copy"))
  try:
    cfg = SweepConfig(env="put-option", env_args={"num_anchors": 4, "horizon": 4},
                      agents=("dr-lsvi-ucb", COPY, "lsvi-ucb"), seeds=3, episodes=6,
                      rho=(0.0, 0.3), beta=(0.5, 1.0), targets=("p_u", 0.3, 0.7, 3),
                      test_episodes=64, seed=11, dtype="float64")
    yield cfg, run(cfg)
  finally:
    registry._REGISTRY.pop(COPY, None)  # pylint: disable=protected-access


def test_identical_agents_get_identical_values(swept):
  _, res = swept
  df = res.df
  a = df[df.agent == "dr-lsvi-ucb"].reset_index(drop=True)
  b = df[df.agent == COPY].reset_index(drop=True)
  assert len(a) == 3 * 4 * 3  # seeds x (rho x beta) x targets
  for c in ("seed", "rho", "beta", "target_p_u", "value", "value_stderr", "train_return"):
    np.testing.assert_array_equal(a[c].to_numpy(), b[c].to_numpy())


def test_every_run_uses_its_seeds_keys(swept):
  """Each (agent, setting, seed, target) value is ``mc_evaluate`` of the run's policy with the
  seed's evaluation key: no agent, setting or target index enters the key."""
  cfg, res = swept
  env = PutOption(num_anchors=4, horizon=4)
  params = env.default_params()
  targets = env.target_params(params, jnp.linspace(0.3, 0.7, 3))
  base = jax.random.PRNGKey(cfg.seed)
  from drjax.sweeps.config import validate  # pylint: disable=g-import-not-at-top
  from drjax.sweeps.grid import _grid  # pylint: disable=g-import-not-at-top
  vcfg = validate(cfg)
  df = res.df
  for name in ("dr-lsvi-ucb", "lsvi-ucb"):
    agent = _make_agent(name, vcfg, env)
    grid = _grid(vcfg, env, name)
    tables = {"rho": jnp.asarray(grid.rho), "beta": jnp.asarray(grid.beta),
              "lam": jnp.asarray(grid.lam), "reg_weight": jnp.asarray(grid.reg_weight),
              "hparams": {}}
    hp_of = _hparams_of(agent)
    train = jax.jit(make_train(env, agent, cfg.episodes))  # compiled once for every run
    rows = df[df.agent == name]
    for setting in sorted(set(rows.setting)):
      for seed in range(cfg.seeds):
        key = jax.random.fold_in(base, seed)
        qf = train(jax.random.fold_in(key, 0), hp_of(setting, tables), params).final_qf
        k_eval = jax.random.fold_in(key, 1)
        want = [float(evaluate.mc_evaluate(env, agent, qf, jax.tree_util.tree_map(
            lambda x: x[t], targets), k_eval, cfg.test_episodes)["mean"]) for t in range(3)]
        got = rows[(rows.setting == setting) & (rows.seed == seed)].value.to_numpy()
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_paired_difference_has_a_smaller_standard_error():
  """Two different policies on the same key: the standard error of their per-episode difference
  is far below the independent-draws one, ``sqrt(se_a^2 + se_b^2)``; on independent keys it is
  not (so the test can fail)."""
  env = PutOption(num_anchors=4, horizon=6)
  params = env.target_params(env.default_params(), 0.45)
  train_key = jax.random.PRNGKey(0)
  qfs = []
  for name, hp in (("dr-lsvi-ucb", dict(rho=0.2)), ("lsvi-ucb", {})):
    agent = registry.make(name, env, capacity=20)
    out = make_train(env, agent, 20)(train_key, registry.make_hparams(name, env, **hp),
                                     env.default_params())
    qfs.append((agent, out.final_qf))
  key = jax.random.PRNGKey(7)
  n = 2000
  ra = np.asarray(evaluate.mc_evaluate(env, *qfs[0], params, key, n)["returns"])
  rb = np.asarray(evaluate.mc_evaluate(env, *qfs[1], params, key, n)["returns"])
  rb_ind = np.asarray(evaluate.mc_evaluate(env, *qfs[1], params, jax.random.PRNGKey(8),
                                           n)["returns"])
  se = lambda x: np.std(x, ddof=1) / np.sqrt(len(x))  # noqa: E731
  assert not np.array_equal(ra, rb)  # different policies
  independent = np.hypot(se(ra), se(rb))
  assert se(ra - rb) < 0.7 * independent, (se(ra - rb), independent)  # measured: 0.58
  assert se(ra - rb_ind) > 0.8 * independent  # independent keys: no reduction


def test_summary_and_figure_carry_standard_errors(swept):
  cfg, res = swept
  s = res.summary
  for c in ("value_mean", "value_stderr", "value_count"):
    assert c in s.columns
  df = res.df
  g = df[(df.agent == "lsvi-ucb") & (df.target_p_u == df.target_p_u.min())]
  for (setting,), rows in g.groupby(["setting"]):
    row = s[(s.agent == "lsvi-ucb") & (s.setting == setting)
            & (s.target_p_u == df.target_p_u.min())]
    v = rows.value.to_numpy()
    np.testing.assert_allclose(row.value_stderr.to_numpy(), np.std(v, ddof=1) / np.sqrt(len(v)),
                               rtol=1e-10)
    assert int(row.value_count.iloc[0]) == cfg.seeds
