"""drjax.sweeps: setting and target columns hold the typed values exactly (issue 18, item 3).

The computation runs in float32 here (the command's default): the source parameters it uses are
rounded to float32, but the tables (Parquet, CSV, summary, in memory) hold the float64 values as
typed, so ``df.xi_norm == 0.1`` selects rows; error messages print the typed values.
"""

from __future__ import annotations


import numpy as np
import pandas as pd
import pytest

from drjax import sweeps

import sweep_cli  # tests/sweep_cli.py


def _float32():
  return sweep_cli.x64(False)


_cli = sweep_cli.run  # drjax sweep ARGS in this process: (exit code, stderr)


TYPED_Q = [i / 20 for i in range(21)]  # i / 20 is the float64 nearest to the decimal i * 0.05


def test_target_values_are_the_typed_decimals():
  assert sweeps.target_values(("q", 0.0, 1.0, 21)).tolist() == TYPED_Q
  assert 0.15 in sweeps.target_values(("q", 0.0, 1.0, 21)).tolist()  # linspace: 0.15000000000000002
  got = sweeps.target_values(("p_u", 0.15, 0.85, 29)).tolist()
  assert got[0] == 0.15 and got[-1] == 0.85 and got[2] == 0.2 and got[10] == 0.4
  assert sweeps.target_values(("q", 0.3, 0.3, 1)).tolist() == [0.3]


def test_float32_sweep_columns_equal_typed_values(tmp_path):
  out = tmp_path / "out"
  cfg = sweeps.SweepConfig(env="linear-mdp", agents=("dr-lsvi-ucb", "lsvi-ucb"), seeds=2,
                           episodes=4, rho=(0.0, 0.3), rho_at=((0, 3),), beta=(0.1,), lam=(0.1,),
                           env_params={"xi_norm": (0.1, 0.2), "delta": (0.3,)},
                           targets=("q", 0.0, 1.0, 21))
  with _float32():
    res = sweeps.run(cfg, out=str(out), csv=True)
  assert res.info["config"]["dtype"] == "float32"
  parquet = pd.read_parquet(out / "results.parquet")
  frames = {"parquet": parquet, "csv": pd.read_csv(out / "results.csv"),
            "summary.csv": pd.read_csv(out / "summary.csv"), "df": res.df,
            "summary": res.summary}
  for name, f in frames.items():
    rows = len(f)
    assert (f.xi_norm == 0.1).sum() == rows // 2 and (f.xi_norm == 0.2).sum() == rows // 2, name
    assert (f.delta == 0.3).all() and (f.p == 0.001).all(), name  # swept and default
    assert (f.beta == 0.1).all() and (f.lam == 0.1).all(), name
    assert set(f.rho.dropna()) == {0.0, 0.3} and f.rho.isna().any(), name
    assert sorted(set(f.target_q)) == TYPED_Q, name
    assert (f.target_q == 0.15).sum() == rows // 21 and (f.target_q == 0.85).any(), name
    assert len(f[(f.xi_norm == 0.1) & (f.rho == 0.3) & (f.target_q == 0.7)]) >= 1, name
  # Setting and target columns are float64 in Parquet; computed columns keep float32.
  for c in ("rho", "beta", "lam", "delta", "p", "xi_norm", "target_q"):
    assert parquet[c].dtype == np.float64, c
  for c in ("train_return", "value", "value_stderr"):
    assert parquet[c].dtype == np.float32 and res.df[c].dtype == np.float32, c
  for c in ("value_mean", "value_stderr", "train_return_mean"):
    assert res.summary[c].dtype == np.float64, c
  # The raw CSV text holds the typed values, not float32 noise.
  text = (out / "results.csv").read_text()
  assert "0.30000001" not in text and "0.1000000" not in text and "0.15000000" not in text


@pytest.mark.parametrize("env_params, shown", [
    ({"delta": (0.9,), "xi_norm": (0.2,)}, "delta=0.9, xi_norm=0.2"),
    ({"p": (1.1,)}, "p=1.1"),
])
def test_error_messages_show_typed_values(env_params, shown):
  with _float32():
    with pytest.raises(ValueError) as e:
      sweeps.validate(sweeps.SweepConfig(env_params=env_params))
  msg = str(e.value)
  assert msg.startswith("env_params: ") and shown in msg and "99999" not in msg, msg


def test_value_valid_as_typed_but_not_in_float32():
  """0.6 + 0.4 <= 1 as typed, but float32(0.6) + float32(0.4) > 1: refused, typed values shown."""
  with _float32():
    with pytest.raises(ValueError, match=r"^env_params: \{'delta': 0.6, 'xi_norm': 0.4\}: valid "
                                         "as typed but not once rounded to float32"):
      sweeps.validate(sweeps.SweepConfig(env_params={"delta": (0.6,), "xi_norm": (0.4,)}))
  sweeps.validate(sweeps.SweepConfig(env_params={"delta": (0.6,), "xi_norm": (0.4,)},
                                     dtype="float64"))  # fine in float64 (the session's x64)


def test_cli_error_message_shows_typed_values(tmp_path):
  code, err = _cli(["--seeds", "2", "--episodes", "3", "--env-param", "delta=0.9",
                    "--env-param", "xi_norm=0.2", "--quiet", "--out", str(tmp_path / "o")])
  assert code == 2 and len(err.strip().splitlines()) == 1, err
  assert "--env-param" in err and "delta=0.9, xi_norm=0.2" in err and "99999" not in err, err
  assert not (tmp_path / "o").exists()
