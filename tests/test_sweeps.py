"""drjax.sweeps and `drjax sweep`: rows, summary, chunk/device/part/resume invariance, errors.

Sizes are tiny (K = 6 episodes, a handful of seeds): compilation dominates, so the tests reuse a
few program shapes. Everything runs in float64 (tests/conftest.py); CLI calls pass ``--x64``.
"""

from __future__ import annotations

import functools
import json
import os
import socket
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest

import drjax
from drjax import _xla
from drjax import cli, evaluate, sweeps
from drjax.envs.linear_mdp import LinearMDP, target_params

import sweep_cli  # tests/sweep_cli.py

K, SMALL, SMALL_FLAGS = sweep_cli.K, sweep_cli.SMALL, sweep_cli.SMALL_FLAGS
FILES = ("results.parquet", "results.csv", "summary.csv")  # results.csv: with --csv
FAULT_CLI = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fault_cli.py")
DR = drjax.dr_lsvi_ucb(3, 4, 16, K)


@functools.lru_cache(maxsize=None)
def _train():
  """DR-LSVI-UCB training on the linear MDP, jitted once for the independent checks."""
  return jax.jit(drjax.make_train(LinearMDP(), DR, K))


def _cfg(**kw):
  return sweeps.SweepConfig(**{**SMALL, **kw})


def _bytes(d):
  return {f: open(os.path.join(d, f), "rb").read() for f in FILES}


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
  """A compilation cache shared by this module's CLI subprocesses (not the user's)."""
  return str(tmp_path_factory.mktemp("jax-cache"))


def _env(cache, **extra):
  """Environment for CLI subprocesses: the test session's XLA flags, a private cache."""
  env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "DRJAX_NO_CACHE")}
  env.update(DRJAX_CACHE_DIR=cache, XLA_FLAGS=" ".join(_xla.flags_for_this_jaxlib()))
  env.update(extra)
  return env


def _cli_subprocess(args, cache, timeout=240, fault=(), **env):
  """``drjax sweep ARGS`` in a new process; ``fault``: options of tests/fault_cli.py."""
  cmd = ([sys.executable, FAULT_CLI, *fault, "--"] if fault else
         [sys.executable, "-m", "drjax.cli"])
  return subprocess.run(cmd + ["sweep", *args], capture_output=True, text=True,
                        env=_env(cache, **env), timeout=timeout)


_cli = sweep_cli.run  # drjax sweep ARGS in this process: (exit code, stderr)


@pytest.fixture(scope="module")
def full():
  """The small sweep, unchunked, in memory (one program for all 10 runs).

  Built once per test session: conftest.py keeps this module's tests on one xdist worker.
  """
  return sweeps.run(_cfg())


# ---------------------------------------------------------------------------------------------
# Rows, columns, values, summary.


def test_rows_columns_and_values_match_independent_runs():
  cfg = sweeps.SweepConfig(env="linear-mdp", agents=("dr-lsvi-ucb", "lsvi-ucb"), seeds=3,
                           episodes=K, rho=(0.0, 0.5), rho_at=((0, 3),), beta=(1.0, 0.5),
                           env_params={"xi_norm": (0.1, 0.2)}, targets=("q", 0.0, 1.0, 3),
                           seed=7, chunk=4)
  res = sweeps.run(cfg)
  df = res.df
  assert list(df.columns) == ["agent", "setting", "seed", "rho_index", "rho", "beta", "lam",
                              "delta", "p", "xi_norm", "target_q", "train_return", "value",
                              "value_stderr"]
  # DR-LSVI-UCB: 2 rho x 2 beta x 2 xi settings; LSVI-UCB: 2 beta x 2 xi; x 3 seeds x 3 targets.
  assert len(df) == (8 + 4) * 3 * 3
  dr = df[df.agent == "dr-lsvi-ucb"]
  ls = df[df.agent == "lsvi-ucb"]
  assert sorted(dr.setting.unique()) == list(range(8)) and sorted(ls.setting.unique()) == [0, 1,
                                                                                          2, 3]
  assert ls.rho.isna().all() and (ls.rho_index == -1).all()
  assert set(dr.rho) == {0.0, 0.5} and set(df.beta) == {1.0, 0.5} and set(df.lam) == {0.1}
  assert set(df.xi_norm) == {0.1, 0.2} and set(df.delta) == {0.3} and set(df.p) == {0.001}
  np.testing.assert_array_equal(df.target_q.to_numpy()[:3], [0.0, 0.5, 1.0])
  assert (df.value_stderr == 0).all()  # exact evaluation
  # Row order: agent, setting, seed, target.
  assert df.seed.to_numpy()[:9].tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2]
  # Each setting's columns are constant per setting id and the grid is complete.
  per_setting = dr.groupby("setting")[["rho", "beta", "xi_norm"]].nunique()
  assert (per_setting == 1).all().all()
  assert len(dr.groupby(["rho", "beta", "xi_norm"])) == 8
  # An independent run: make_train on key fold_in(fold_in(PRNGKey(seed), j), 0) with the row's
  # settings, exact target values; it must equal the sweep's rows.
  env = LinearMDP()
  params = env.make_params(xi_norm=0.2)
  hp = drjax.make_hparams(3, 4, rho=drjax.rho_array(3, 4, 0.5, at=[(0, 3)]), beta=0.5, lam=0.1)
  out = _train()(jax.random.fold_in(jax.random.fold_in(jax.random.PRNGKey(7), 2), 0), hp, params)
  want = np.asarray(evaluate.exact_target_values(env, DR, out.final_qf,
                                                 target_params(params, jnp.asarray([0, 0.5, 1]))))
  rows = df[(df.agent == "dr-lsvi-ucb") & (df.rho == 0.5) & (df.beta == 0.5) & (df.xi_norm == 0.2)
            & (df.seed == 2)]
  assert len(rows) == 3 and rows.setting.nunique() == 1
  np.testing.assert_allclose(rows.value.to_numpy(), want, rtol=0, atol=1e-12)
  np.testing.assert_allclose(rows.train_return.to_numpy(), float(out.returns.mean()), rtol=0,
                             atol=1e-12)
  # Arrays in row order of (agent, setting, seed).
  assert res.arrays["value"].shape == (12 * 3, 3)
  np.testing.assert_array_equal(res.arrays["value"].reshape(-1), df.value.to_numpy())


def test_summary_equals_pandas_groupby(full):
  df, summary = full.df, full.summary
  keys = ["agent", "setting", "rho_index", "rho", "beta", "lam", "delta", "p", "xi_norm",
          "target_q"]
  g = df.groupby(keys, dropna=False, observed=True)["value"]
  want = pd.DataFrame({"mean": g.mean(), "std": g.std(ddof=1), "count": g.size()}).reset_index()
  merged = summary.merge(want, on=keys, how="outer", validate="one_to_one")
  assert len(merged) == len(summary) == len(want) == 2 * 3
  np.testing.assert_allclose(merged.value_mean, merged["mean"], rtol=1e-12)
  np.testing.assert_allclose(merged.value_stderr, merged["std"] / np.sqrt(merged["count"]),
                             rtol=1e-12)
  assert (merged.value_count == merged["count"]).all() and (merged["count"] == 5).all()
  # One group by hand.
  v = df[(df.rho == 0.5) & (df.target_q == 1.0)].value.to_numpy()
  row = summary[(summary.rho == 0.5) & (summary.target_q == 1.0)].iloc[0]
  assert row.value_mean == pytest.approx(v.sum() / len(v), rel=1e-12)
  assert row.value_stderr == pytest.approx(
      np.sqrt(((v - v.mean()) ** 2).sum() / (len(v) - 1) / len(v)), rel=1e-12)


def test_source_evaluation_and_put_option_monte_carlo():
  """No targets: the value is the exact source value; the put option uses Monte Carlo."""
  res = sweeps.run(_cfg(targets=None, rho=(0.2,), rho_at=None, seeds=2))
  assert "target_q" not in res.df.columns and len(res.df) == 2
  env = LinearMDP()
  key = jax.random.fold_in(jax.random.fold_in(jax.random.PRNGKey(0), 1), 0)
  params = env.make_params()
  out = _train()(key, drjax.make_hparams(3, 4, rho=0.2, lam=0.1), params)
  want = float(evaluate.target_value(env, DR, out.final_qf, params))
  assert res.df.value.iloc[1] == pytest.approx(want, abs=1e-12)
  put = sweeps.run(sweeps.SweepConfig(env="put-option", env_args={"num_anchors": 4,
                                                                  "horizon": 3},
                                      agents=("lsvi-ucb",), seeds=2, episodes=4,
                                      targets=("p_u", 0.3, 0.7, 2), test_episodes=8))
  assert list(put.df.target_p_u) == [0.3, 0.7, 0.3, 0.7]
  assert (put.df.value_stderr > 0).any()


# ---------------------------------------------------------------------------------------------
# Invariance: chunks, devices, one seed alone, parts + merge, --from.


def test_chunked_equals_unchunked_equals_four_devices(full, tmp_path, cache_dir):
  chunked = sweeps.run(_cfg(chunk=3))  # 4 chunks, the last one padded
  pd.testing.assert_frame_equal(chunked.df, full.df, check_exact=True)
  out = tmp_path / "four"
  res = _cli_subprocess(SMALL_FLAGS + ["--chunk", "3", "--out", str(out)], cache_dir,
                        XLA_FLAGS=" ".join(("--xla_force_host_platform_device_count=4",)
                                           + _xla.flags_for_this_jaxlib()),
                        JAX_PLATFORMS="cpu")  # 4 host devices, also on a machine with a GPU
  assert res.returncode == 0, res.stderr
  info = json.loads((out / "sweep.json").read_text())
  assert info["devices"]["count"] == 4
  df4, _ = sweeps.load(str(out))
  pd.testing.assert_frame_equal(df4, full.df, check_exact=True, check_categorical=False)


def test_grouped_source_chunks_on_four_devices_equal_one_device(tmp_path, cache_dir):
  # 130 runs per source instance: grouped (one instance per chunk, its index a replicated scalar)
  flags = ["--env", "linear-mdp", "--agents", "lsvi-ucb", "--seeds", "130", "--episodes", "3",
           "--env-param", "xi_norm=0.1,0.2", "--targets", "q=0:1:3", "--chunk", "100", "--x64",
           "--quiet"]
  out1, out4 = tmp_path / "one", tmp_path / "four"
  assert _cli(flags + ["--out", str(out1)])[0] == 0
  res = _cli_subprocess(flags + ["--out", str(out4)], cache_dir,
                        XLA_FLAGS=" ".join(("--xla_force_host_platform_device_count=4",)
                                           + _xla.flags_for_this_jaxlib()),
                        JAX_PLATFORMS="cpu")
  assert res.returncode == 0, res.stderr
  info = json.loads((out4 / "sweep.json").read_text())
  assert info["devices"]["count"] == 4 and info["layout"]["grouped"] == {"lsvi-ucb": True}
  assert info["layout"]["num_chunks"] == 4  # 2 instances x (100 + 30 runs)
  df1, _ = sweeps.load(str(out1))
  df4, _ = sweeps.load(str(out4))
  pd.testing.assert_frame_equal(df4, df1, check_exact=True, check_categorical=False)


def test_one_seed_alone_reproduces_its_rows(full):
  alone = sweeps.run(_cfg(seed_ids=(3,), chunk=3))
  want = full.df[full.df.seed == 3].reset_index(drop=True)
  pd.testing.assert_frame_equal(alone.df, want, check_exact=True)


def test_parts_merge_and_from_equal_one_run(tmp_path):
  one, parts, again = tmp_path / "one", tmp_path / "parts", tmp_path / "again"
  assert _cli(SMALL_FLAGS + ["--chunk", "3", "--csv", "--out", str(one)])[0] == 0
  r1 = sweeps.run(_cfg(chunk=3), out=str(parts), part=(1, 2))
  assert r1.df is None and not (parts / "results.parquet").exists()
  assert _cli(SMALL_FLAGS + ["--chunk", "3", "--part", "2/2", "--out", str(parts)])[0] == 0
  code, err = _cli(["--merge", "--csv", "--out", str(parts), "--quiet"])
  assert code == 0, err
  assert _bytes(parts) == _bytes(one)
  code, err = _cli(["--from", str(one / "sweep.json"), "--csv", "--out", str(again), "--quiet"])
  assert code == 0, err
  assert _bytes(again) == _bytes(one)
  meta = json.loads((one / "sweep.json").read_text())
  assert meta["config"]["chunk"] == 3 and meta["command"][:2] == ["drjax", "sweep"]
  assert meta["layout"]["num_chunks"] == 4 and meta["provenance"]["jax_version"] == jax.__version__
  import pyarrow.parquet as pq  # pylint: disable=g-import-not-at-top
  pmeta = json.loads(pq.read_schema(one / "results.parquet").metadata[b"drjax.sweep"])
  assert pmeta["config"] == meta["config"] and pmeta["provenance"] == meta["provenance"]


def test_killed_sweep_resumes_to_identical_files(tmp_path, cache_dir):
  """SIGKILL after 2 of 4 chunks (injected by tests/fault_cli.py), rerun."""
  killed, clean = tmp_path / "killed", tmp_path / "clean"
  args = SMALL_FLAGS + ["--chunk", "3"]
  res = _cli_subprocess(args + ["--out", str(killed)], cache_dir,
                        fault=("--kill-after-chunks", "2"))
  assert res.returncode == -9, (res.returncode, res.stderr)
  chunks = sorted(p.name for p in (killed / "chunks").iterdir())
  assert chunks == ["chunk-000000.npz", "chunk-000001.npz"], chunks
  assert not (killed / "results.csv").exists()
  assert json.loads((killed / "sweep.json").read_text())["status"] == "running"
  # A leftover temporary file is ignored. A damaged chunk file (writes are atomic, so damaged from
  # outside) is an error naming it, with nothing written; deleting it recomputes that chunk.
  (killed / "chunks" / ".tmp-leftover").write_bytes(b"partial")
  data = (killed / "chunks" / "chunk-000001.npz").read_bytes()
  (killed / "chunks" / "chunk-000001.npz").write_bytes(data[: len(data) // 2])
  before = {p: p.read_bytes() for p in killed.rglob("*") if p.is_file()}
  code, err = _cli(args + ["--out", str(killed)])
  assert code == 2 and len(err.strip().splitlines()) == 1, err
  assert "--out" in err and "chunk-000001.npz" in err and "--overwrite" in err, err
  assert {p: p.read_bytes() for p in killed.rglob("*") if p.is_file()} == before
  (killed / "chunks" / "chunk-000001.npz").unlink()
  res = _cli_subprocess(args + ["--csv", "--out", str(killed)], cache_dir)
  assert res.returncode == 0, res.stderr
  assert _cli(args + ["--csv", "--out", str(clean)])[0] == 0
  assert _bytes(killed) == _bytes(clean)
  assert (killed / "sweep.png").read_bytes() == (clean / "sweep.png").read_bytes()


def _free_port():
  with socket.socket() as s:
    s.bind(("localhost", 0))
    return s.getsockname()[1]


def test_two_processes_with_jax_distributed(full, tmp_path, cache_dir):
  """jax.distributed on localhost: 2 processes x 1 CPU device each; process 0 writes."""
  out = tmp_path / "dist"
  port = _free_port()
  procs = [subprocess.Popen(
      [sys.executable, "-m", "drjax.cli", "sweep", *SMALL_FLAGS, "--out", str(out),
       "--distributed", "--coordinator", f"localhost:{port}", "--num-processes", "2",
       "--process-id", str(i)], env=_env(cache_dir, JAX_PLATFORMS="cpu"),  # CPU processes
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(2)]
  outs = [p.communicate(timeout=240) for p in procs]
  assert [p.returncode for p in procs] == [0, 0], [o[1][-2000:] for o in outs]
  info = json.loads((out / "sweep.json").read_text())
  assert info["devices"]["count"] == 2 and info["devices"]["process_count"] == 2
  df, _ = sweeps.load(str(out))
  pd.testing.assert_frame_equal(df, full.df, check_exact=True, check_categorical=False)


# ---------------------------------------------------------------------------------------------
# Bad input: one line naming the flag, exit code 2, nothing written; ValueError in the API.


@pytest.mark.parametrize("args, flag", [
    (["--chunk", "0"], "--chunk"),
    (["--chunk", "x"], "--chunk"),
    (["--devices", "0"], "--devices"),
    (["--devices", "9999"], "--devices"),
    (["--agents", "dqn"], "--agents"),
    (["--env", "breakout"], "--env"),
    (["--env-param", "zeta=0.1"], "--env-param"),
    (["--env-param", "q=0.1"], "--env-param"),
    (["--env-param", "xi_norm=0.1,0.5"], "--env-param"),
    (["--rho-at", "4,1"], "--rho-at"),
    (["--rho-at", "1,5"], "--rho-at"),
    (["--rho-at", "0,1"], "--rho-at"),
    (["--rho", "1.5"], "--rho"),
    (["--beta", "-1"], "--beta"),
    (["--lam", "0"], "--lam"),
    (["--targets", "q=0:2:3"], "--targets"),
    (["--targets", "p_u=0:1:3"], "--targets"),
    (["--targets", "q=0:1"], "--targets"),
    (["--part", "3/2"], "--part"),
    (["--part", "0/2"], "--part"),
    (["--part", "1-2"], "--part"),
    (["--seeds", "0"], "--seeds"),
    (["--seed-ids", "7"], "--seed-ids"),
])
def test_cli_bad_input(args, flag, tmp_path):
  out = tmp_path / "out"
  base = ["--seeds", "5", "--episodes", "3", "--quiet", "--x64", "--out", str(out)]
  code, err = _cli(base + args)
  assert code == 2, err
  lines = err.strip().splitlines()
  assert len(lines) == 1 and flag in lines[0], err
  assert not out.exists()


def test_cli_refuses_a_directory_holding_another_sweep(tmp_path):
  out = tmp_path / "out"
  sweeps.run(_cfg(seeds=2, targets=None, rho=(0.0,)), out=str(out))
  before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
  code, err = _cli(SMALL_FLAGS + ["--out", str(out)])
  assert code == 2 and "--out" in err and "different sweep" in err and len(
      err.strip().splitlines()) == 1, err
  assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
  with pytest.raises(ValueError, match="out: .* different sweep"):
    sweeps.run(_cfg(), out=str(out))
  code, err = _cli(["--merge", "--out", str(tmp_path / "nothing"), "--quiet"])
  assert code == 2 and "--out" in err


@pytest.mark.parametrize("kw, field", [
    (dict(chunk=0), "chunk"), (dict(chunk=2.5), "chunk"), (dict(agents=("dqn",)), "agents"),
    (dict(env="breakout"), "env"), (dict(env_params={"zeta": (0.1,)}), "env_params"),
    (dict(rho_at=((3, 0),)), "rho_at"), (dict(rho=(-0.1,)), "rho"), (dict(lam=(0.0,)), "lam"),
    (dict(targets=("q", 0.0, 1.5, 3)), "targets"), (dict(seed_ids=(5,)), "seed_ids"),
    (dict(rho=(np.zeros((2, 4)),), rho_at=None), "rho"),
])
def test_api_bad_input_raises_value_error(kw, field):
  with pytest.raises(ValueError, match=f"^{field}"):
    sweeps.run(_cfg(**kw))


def test_api_bad_devices_and_part(tmp_path):
  with pytest.raises(ValueError, match="^devices"):
    sweeps.run(_cfg(), devices=len(jax.devices()) + 1)
  with pytest.raises(ValueError, match="^devices"):
    sweeps.run(_cfg(), devices=0)
  with pytest.raises(ValueError, match="^part"):
    sweeps.run(_cfg(), out=str(tmp_path / "x"), part=(3, 2))
  assert not (tmp_path / "x").exists()


def test_layout_depends_on_config_only():
  cfg = sweeps.validate(_cfg(seeds=7, chunk=3))
  lay = sweeps.layout(cfg)
  assert [c[2] for c in lay.chunks] == [3, 3, 3, 3, 2]  # 2 rho x 7 seeds = 14 runs
  setting, seed = lay.chunk_runs(2)
  assert setting.tolist() == [0, 1, 1] and seed.tolist() == [6, 0, 1]
  assert lay.part(1, 2) == [0, 1, 2] and lay.part(2, 2) == [3, 4]
  big = sweeps.layout(sweeps.validate(_cfg(seeds=100_000, chunk=None, memory_mb=64)))
  assert 100 < big.chunk < 100_000
  assert set(cli._sweep_envs()) == set(sweeps.ENVS) and set(cli._agent_names()) == set(sweeps.AGENTS)
