"""SweepConfig.record / drjax sweep --record: per-run study columns at episode checkpoints, checked
against the same runs made directly with make_train and evaluated independently."""

import os

import jax
import numpy as np
import pandas as pd
import pytest

import drjax
from drjax import evaluate, sweeps
from drjax.agents import registry

ARGS = dict(num_states=6, num_actions=3, feature_dim=4, horizon=3)
K, AT = 16, (4, 16)


def _config(**kw):
  base = dict(env="random", env_args=ARGS, agents=("dr-lsvi-ucb", "lsvi-ucb"), seeds=2,
              episodes=K, rho=(0.3,), beta=(0.5,), lam=(0.5,), env_params={"instance": (3,)},
              record=("width_rect", "width_ellip", "switches", "dual_calls", "ave_subopt"),
              record_at=AT)
  base.update(kw)
  return sweeps.SweepConfig(**base)


def test_record_columns_equal_direct_runs():
  res = sweeps.run(_config(), quiet=True)
  df = res.df
  env = drjax.envs.make("random", **ARGS)
  params = env.sample_params(jax.random.key(3))
  model = env.model(params)
  H, d = env.horizon, env.feature_dim
  for name in ("dr-lsvi-ucb", "lsvi-ucb"):
    agent = registry.make(name, env, capacity=K)
    hp = drjax.make_hparams(H, d, rho=0.3, beta=0.5, lam=0.5)  # lsvi-ucb: rho only evaluates
    train = jax.jit(drjax.make_train(env, agent, K, record_q=True,
                                     outputs=("states", "actions", "width_rect", "width_ellip")))
    for seed in range(2):
      key = jax.random.fold_in(jax.random.fold_in(jax.random.PRNGKey(0), seed), 0)
      out = train(key, hp, params)
      row = df[(df.agent == name) & (df.seed == seed)].iloc[0]
      # widths recomputed from the recorded Lambda^-1 and the visited features
      phi = np.asarray(model.phi)[np.arange(H)[None], np.asarray(out.states), np.asarray(out.actions)]
      pinv = np.asarray(out.qf.pinv, np.float64)
      rect = np.einsum("khi,khi->k", phi, np.sqrt(np.diagonal(pinv, axis1=2, axis2=3)))
      ellip = np.sqrt(np.einsum("khi,khij,khj->kh", phi, pinv, phi)).sum(1)
      sub = np.asarray(evaluate.ave_subopt(agent, out.qf, model, hp.rho)["ave_subopt"])
      for k in AT:
        np.testing.assert_allclose(row[f"width_rect@{k}"], rect[:k].sum(), rtol=1e-4)
        np.testing.assert_allclose(row[f"width_ellip@{k}"], ellip[:k].sum(), rtol=1e-4)
        np.testing.assert_allclose(row[f"ave_subopt@{k}"], sub[k - 1], rtol=1e-4, atol=1e-5)
        assert row[f"switches@{k}"] == k
        assert row[f"dual_calls@{k}"] == (k * (H - 1) * d if name == "dr-lsvi-ucb" else 0)
  assert set(res.arrays) >= {"record_width_rect", "record_ave_subopt"}


@pytest.mark.parametrize("kw, field", [
    (dict(record=("width",)), "record"),
    (dict(record=("switches", "switches")), "record"),
    (dict(record_at=(0, 5)), "record_at"),
    (dict(record_at=(K + 1,)), "record_at"),
    (dict(record=(), record_at=(4,)), "record_at"),
    (dict(rho=(0.1, 0.2)), "record"),  # lsvi-ucb's ave_subopt needs one rho
    (dict(agents=("pevi",), rho=(0.1,)), "record"),
    (dict(env="put-option", env_args={}, env_params={}, agents=("dr-lsvi-ucb",),
          record=("ave_subopt",)), "record"),
])
def test_record_errors_name_the_field(kw, field):
  with pytest.raises(ValueError, match=f"^{field}:"):
    sweeps.validate(_config(**kw))


def test_cli_record_columns_in_results(tmp_path):
  """``drjax sweep --record``: through ``drjax.cli.main`` in this process (tests/sweep_cli.py;
  the command sets its own precision: float32 without --x64, as in a new process)."""
  import sweep_cli  # tests/sweep_cli.py  pylint: disable=g-import-not-at-top
  out = str(tmp_path / "s")
  cmd = ["--env", "random", "--agents", "dr-lsvi-ucb",
         "--seeds", "2", "--episodes", "8", "--rho", "0.2", "--lam", "0.5", "--out", out,
         "--record", "switches,width_rect", "--record-at", "4,8", "--chunk", "2"]
  for k, v in ARGS.items():
    cmd += ["--env-arg", f"{k}={v}"]
  code, err = sweep_cli.run(cmd)
  assert code == 0, err[-2000:]
  df = pd.read_parquet(os.path.join(out, "results.parquet"))
  assert list(df["switches@8"]) == [8, 8]
  assert (df["width_rect@8"] > df["width_rect@4"]).all()
  code, err = sweep_cli.run(cmd[:-4] + ["--record", "nope"])
  assert code == 2 and "record" in err
