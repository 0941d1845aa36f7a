"""``drjax plan``: JSON output consistent with robust_dp, errors, and the critical point."""

import json
import os
import subprocess
import sys

import jax
import numpy as np
import pytest

from drjax import cli, planning
from drjax.envs.linear_mdp import LinearMDP, action_vectors

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_main(capsys, *args):
  assert cli.main(["plan", *args]) == 0
  return capsys.readouterr().out


def run_json(capsys, *args):
  return json.loads(run_main(capsys, "--json", *args))


def expected(rho, q=None, xi_norm=0.1):
  env = LinearMDP()
  model = env.model(env.make_params(delta=0.3, p=0.001, xi_norm=xi_norm, q=q))
  res = jax.jit(planning.robust_dp)(model, np.asarray(rho, np.float64))
  return model, res


def check_consistent(out, model, res):
  np.testing.assert_allclose(out["value"], float(planning.initial_value(model, res.v)),
                             rtol=0, atol=1e-12)
  acts = np.asarray(action_vectors()).astype(int)
  assert len(out["actions"]) == 3 and all(len(row) == 5 for row in out["actions"])
  for h in range(3):
    for s in range(5):
      a = out["actions"][h][s]
      if bool(res.ties[h, s]):
        assert a is None
      else:
        assert a == acts[int(res.policy[h, s])].tolist()
  np.testing.assert_allclose(np.asarray(out["values"]), np.asarray(res.v[:-1]), atol=1e-12)


def test_plan_json_matches_robust_dp(capsys):
  out = run_json(capsys, "--env", "linear-mdp", "--xi-norm", "0.1", "--delta", "0.3", "--p",
                 "0.001", "--rho", "0.5")
  assert set(out) >= {"value", "actions", "config"}
  rho = np.zeros((3, 4))
  rho[0, 3] = 0.5
  check_consistent(out, *expected(rho))
  assert out["config"]["rho"] == rho.tolist() and out["config"]["q"] is None
  assert out["config"]["domain"] == "source" and out["config"]["xi_norm"] == 0.1
  # Hand-computed: V_1^{*,rho}(x1) = 0.8 * 0.999 * V2(x2) + 2 * 0.2 * 0.5, V2(x2) = 1.03976.
  np.testing.assert_allclose(out["value"], 0.8 * 0.999 * 1.03976 + 0.2, atol=1e-12)
  assert out["actions"][0][0] == [-1, -1, -1, -1]
  assert out["actions"][0][3] is None and out["actions"][0][4] is None  # x4, x5: all tie

  # --rho-array, and a target domain with rho around it.
  rho2 = np.random.default_rng(0).uniform(0, 0.7, (3, 4))
  out2 = run_json(capsys, "--rho-array", json.dumps(rho2.tolist()), "--q", "0.3",
                  "--xi-norm", "0.2")
  check_consistent(out2, *expected(rho2, q=0.3, xi_norm=0.2))
  assert out2["config"]["domain"] == "target" and out2["config"]["q"] == 0.3


def test_plan_first_action_flips_at_exact_critical_point(capsys):
  """xi_norm = 0.1: exact q* = 1 - V2(x2)/2 = 0.48012; the paper's formula gives 0.6."""
  first = lambda q: run_json(capsys, "--xi-norm", "0.1", "--q", str(q))["actions"][0][0]  # noqa
  assert first(0.0) == [1, 1, 1, 1]
  assert first(0.9) == [-1, -1, -1, -1]
  assert first(0.4801) == [1, 1, 1, 1]
  assert first(0.4802) == [-1, -1, -1, -1]
  # Between the exact q* and the paper's (4 - 2m(3 - m)) / (4 - 2m) = 0.6 exact planning
  # already prefers (-1,-1,-1,-1), contrary to the paper's formula.
  assert first(0.55) == [-1, -1, -1, -1]
  assert run_json(capsys, "--q", "0.48012")["actions"][0][0] is None  # all actions tie at q*


def test_plan_table_output(capsys):
  text = run_main(capsys, "--rho", "0.3")
  assert "V_1*(x1) = 1.183232144" in text
  assert "any (all tie)" in text and "(+1,+1,+1,+1)" in text


@pytest.mark.parametrize("args, fragment", [
    (["--rho", "1.5"], "--rho must lie in [0, 1]"),
    (["--rho", "-0.1"], "--rho must lie in [0, 1]"),
    (["--rho", "nan"], "--rho must lie in [0, 1]"),
    (["--q", "1.2"], "--q must lie in [0, 1]"),
    (["--rho-array", "[[0.1, 0.2]]"], "--rho-array must have shape [H, d] = [3, 4]"),
    (["--rho-array", json.dumps([[0.0] * 4] * 2 + [[0, 0, 0, 2]])], "entries must lie in"),
    (["--rho-array", "not json"], "--rho-array must be a JSON array"),
    (["--rho", "0.1", "--rho-array", json.dumps([[0.0] * 4] * 3)], "either --rho or"),
    (["--env", "cartpole"], "invalid choice"),
    (["--xi-norm", "0.5"], "xi_norm must satisfy"),
    (["--p", "2"], "p must satisfy"),
    (["--rho", "abc"], "invalid float value"),
])
def test_plan_bad_flags_exit_2_with_one_line(capsys, args, fragment):
  with pytest.raises(SystemExit) as e:
    cli.main(["plan", *args])
  assert e.value.code == 2
  err = capsys.readouterr().err
  assert err.count("\n") == 1 and err.startswith("drjax plan: error: "), err
  assert fragment in err


def test_plan_subprocess():
  env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
  cmd = [sys.executable, "-m", "drjax.cli", "plan", "--rho", "0.4", "--json"]
  proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
  assert proc.returncode == 0, proc.stderr
  out = json.loads(proc.stdout)
  rho = np.zeros((3, 4))
  rho[0, 3] = 0.4
  check_consistent(out, *expected(rho))
  bad = subprocess.run(cmd[:4] + ["--q", "7"], capture_output=True, text=True, cwd=ROOT,
                       env=env, timeout=120)
  assert bad.returncode == 2 and bad.stdout == ""
  assert bad.stderr == "drjax plan: error: --q must lie in [0, 1], got 7.0\n"
