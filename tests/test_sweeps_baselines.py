"""Issue 34 items 1-2: baselines as sweep agents, the greedy evaluation mode, rho = 0 controls and
the source-only tuning protocol, each checked against an independent computation: direct
``make_train`` / ``replan`` / ``mc_evaluate`` calls with the keys of the common-random-numbers
contract (tests/test_crn.py), hand-written rollouts of the baseline policies, a NumPy backward
induction for exact baseline values, and the argmax of the source returns recomputed with pandas
from the results table.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import drjax
from drjax import envs, evaluate
from drjax.agents import baselines, registry
from drjax.sweeps import SweepConfig, SweepError, run, select_best, validate
from drjax.sweeps.grid import _grid
from drjax.sweeps.program import _hparams_of, _make_agent
from drjax.train import make_train

pytest.importorskip("gymnax")

H, K, N = 8, 6, 8  # horizon, episodes, Monte Carlo test episodes


def _cfg(**kw):
  base = dict(env="cartpole", env_args={"horizon": H}, agents=("dr-lsvi-ucb", "constant"),
              seeds=2, episodes=K, rho=(0.1,), beta=(0.5, 20.0), lam=(1.0,),
              hparams={"action": (0.0, 1.0)}, targets=("length", 0.5, 1.5, 2),
              test_episodes=N, seed=3, controls=True, tune="greedy",
              eval_modes=("played", "greedy"))
  base.update(kw)
  return SweepConfig(**base)


@pytest.fixture(scope="module")
def swept():
  cfg = _cfg()
  return validate(cfg), run(cfg)


def _tables(vcfg, env, name):
  grid = _grid(vcfg, env, name)
  return grid, {"rho": jnp.asarray(grid.rho), "beta": jnp.asarray(grid.beta),
                "lam": jnp.asarray(grid.lam), "reg_weight": jnp.asarray(grid.reg_weight),
                "hparams": {n: jnp.asarray(v) for n, v in grid.hparams.items()}}


def test_controls_present(swept):
  vcfg, res = swept
  assert vcfg.agents == ("dr-lsvi-ucb", "constant", "lsvi-ucb", "uniform-random")
  assert vcfg.rho == (0.0, 0.1)
  df = res.df
  assert set(df[df.agent == "dr-lsvi-ucb"].rho) == {0.0, 0.1}
  assert set(df.agent.astype(str)) == set(vcfg.agents)
  # Online agents have both policies; the others one (played).
  pol = df.groupby(df.agent.astype(str))["policy"].agg(lambda p: set(p.astype(str)))
  assert pol["lsvi-ucb"] == pol["dr-lsvi-ucb"] == {"played", "greedy"}
  assert pol["uniform-random"] == pol["constant"] == {"played"}
  # Each (agent, setting, seed) has one row per policy and target.
  n = df.groupby([df.agent.astype(str), "setting", "seed"]).size()
  assert set(n[["lsvi-ucb", "dr-lsvi-ucb"]]) == {4} and set(n[["constant"]]) == {2}


def test_played_and_greedy_equal_direct_replan(swept):
  """``value`` of policy played / greedy (and ``source_value``) equal ``mc_evaluate`` of the
  final plan / of ``drjax.replan`` at beta = 0, trained and evaluated with the seed's keys."""
  vcfg, res = swept
  env = envs.make("cartpole", horizon=H)
  params = env.default_params()
  targets = env.target_params(params, "length", jnp.asarray([0.5, 1.5]))
  df = res.df
  for name in ("dr-lsvi-ucb",):  # (LSVI-UCB's greedy policy comes from the same code path)
    agent = _make_agent(name, vcfg, env)
    grid, tables = _tables(vcfg, env, name)
    hp_of = _hparams_of(agent)
    train = jax.jit(make_train(env, agent, K, outputs=("state", "final_qf")))
    replan = jax.jit(lambda state, hp, agent=agent: drjax.replan(env, agent, state, hp, params))
    for setting in (0, len(grid.beta) - 1):
      for seed in range(vcfg.seeds):
        key = jax.random.fold_in(jax.random.PRNGKey(vcfg.seed), seed)
        hp = hp_of(setting, tables)
        out = train(jax.random.fold_in(key, 0), hp, params)
        greedy = replan(out.state, hp._replace(beta=jnp.zeros(())))
        k_eval = jax.random.fold_in(key, 1)
        rows = df[(df.agent == name) & (df.setting == setting) & (df.seed == seed)]
        for mode, qf in (("played", out.final_qf), ("greedy", greedy)):
          got = rows[rows.policy == mode].sort_values("target_length")
          want = [float(evaluate.mc_evaluate(env, agent, qf, jax.tree_util.tree_map(
              lambda x, t=t: x[t], targets), k_eval, N)["mean"]) for t in range(2)]
          np.testing.assert_allclose(got.value.to_numpy(), want, rtol=1e-5, atol=1e-5)
          src = float(evaluate.mc_evaluate(env, agent, qf, params, k_eval, N)["mean"])
          np.testing.assert_allclose(got.source_value.to_numpy(), src, rtol=1e-5, atol=1e-5)


def _hand_rollouts(env, params, key, policy) -> float:
  """Mean return of N episodes, written out step by step with the documented keys."""
  A = env.num_actions
  reset, step = jax.jit(env.reset), jax.jit(env.step)  # compiled once; the loop is Python's
  total = 0.0
  for n in range(N):
    kn = jax.random.fold_in(key, n)
    s = reset(jax.random.fold_in(kn, H), params)
    alive, ret = True, 0.0
    for h in range(H):
      k = jax.random.fold_in(kn, h)
      a = policy(jax.random.fold_in(k, baselines.ACTION_STREAM), A)
      s, r, done = step(k, s, jnp.int32(a), params)
      ret += float(r) if alive else 0.0
      alive = alive and not bool(done)
    total += ret
  return total / N


@pytest.mark.parametrize("name,action", [("uniform-random", None), ("constant", 0),
                                         ("constant", 1)])
def test_baselines_equal_hand_written_rollouts(swept, name, action):
  vcfg, res = swept
  env = envs.make("cartpole", horizon=H)
  params = env.default_params()
  target = env.target_params(params, "length", jnp.asarray(1.5))
  df = res.df
  rows = df[(df.agent == name) & (df.target_length == 1.5)]
  if action is not None:
    rows = rows[rows.action == action]
  if action is None:
    policy = lambda k, A: int(jax.random.randint(k, (), 0, A))  # noqa: E731
  else:
    policy = lambda k, A: action  # noqa: E731
  for seed in range(vcfg.seeds):
    k_eval = jax.random.fold_in(jax.random.fold_in(jax.random.PRNGKey(vcfg.seed), seed), 1)
    want = _hand_rollouts(env, target, k_eval, policy)
    got = rows[rows.seed == seed].value.to_numpy()
    np.testing.assert_allclose(got, [want], rtol=1e-6)
  assert rows.train_return.isna().all()  # no training


def test_tuning_picks_argmax_of_source_returns(swept):
  """The selection recomputed from the rows: per agent and rho, the (beta, lambda) with the
  largest mean source return of the greedy policy (played for agents without one)."""
  vcfg, res = swept
  df = res.df.copy()
  df["agent"] = df.agent.astype(str)
  df["policy"] = df.policy.astype(str)
  tuning = res.info["tuning"]
  assert tuning["policy"] == "greedy" and tuning["by"] == "source"
  assert tuning["grid"]["lsvi-ucb"] == {"beta": [0.5, 20.0], "lam": [1.0]}
  assert "uniform-random" not in tuning["grid"]
  got = {(s["agent"], s["rho"]): (s["beta"], s["lam"])
         for s in tuning["selected"]}
  want = {}
  for name in ("lsvi-ucb", "dr-lsvi-ucb"):
    d = df[(df.agent == name) & (df.policy == "greedy") & (df.target_length == 0.5)]
    for rho, g in d.groupby(d.rho.fillna(-1.0)):
      means = g.groupby(["beta", "lam"]).source_value.mean()
      want[(name, None if rho < 0 else rho)] = means.idxmax()
  assert got == want
  assert len(got) == 3  # lsvi-ucb, dr-lsvi-ucb at rho 0 and 0.1
  # tuned rows: the selected settings at every target and policy, baselines untouched.
  t = res.tuned
  assert set(t.agent.astype(str)) == set(vcfg.agents)
  assert len(t[t.agent == "lsvi-ucb"]) == 4 and len(t[t.agent == "constant"]) == 4
  # select_best on the results table (summarized first) gives the same selection.
  again = select_best(res.df, "greedy")
  assert {(a, r if r == r else None): (b, lm) for a, r, b, lm in
          zip(again.agent, again.rho, again.beta, again.lam)} == want


def test_exact_baseline_values_on_a_finite_model():
  """uniform-random and constant on the linear MDP: exact values equal a NumPy backward
  induction through the model's kernel."""
  cfg = SweepConfig(env="linear-mdp", agents=("uniform-random", "constant"), seeds=1,
                    hparams={"action": (0.0, 1.0)}, targets=("q", 0.0, 1.0, 3))
  res = run(cfg)
  env = envs.make("linear-mdp")
  src = env.default_params()
  for qi, q in enumerate((0.0, 0.5, 1.0)):
    model = env.model(env.target_params(src, jnp.asarray(q)))
    P = np.asarray(model.transition, np.float64)
    r = np.asarray(model.reward, np.float64)
    Hm, S, A = r.shape
    for name, pi in (("uniform-random", np.full(A, 1.0 / A)), ("constant", np.eye(A)[0]),
                     ("constant", np.eye(A)[1])):
      v = np.zeros(S)
      for h in reversed(range(Hm)):
        v = np.array([sum(pi[a] * (r[h, s, a] + P[h, s, a] @ v) for a in range(A))
                      for s in range(S)])
      want = float(np.asarray(model.init_dist, np.float64) @ v)
      rows = res.df[(res.df.agent == name) & np.isclose(res.df.target_q, q)]
      if name == "constant":
        rows = rows[rows.action == float(np.argmax(pi))]
      np.testing.assert_allclose(rows.value.to_numpy(), [want], rtol=1e-5)


def test_bad_inputs_name_the_field():
  with pytest.raises(SweepError, match="^eval_modes"):
    validate(_cfg(eval_modes=("greedy", "best")))
  with pytest.raises(SweepError, match="^eval_modes.*always"):
    validate(_cfg(eval_modes=("greedy",)))
  with pytest.raises(SweepError, match="^tune.*grid"):
    validate(_cfg(beta=(1.0,), lam=(1.0,)))
  with pytest.raises(SweepError, match="^tune"):
    validate(_cfg(tune="best"))
  with pytest.raises(SweepError, match="^controls.*robust"):
    validate(_cfg(agents=("lsvi-ucb",), tune=None))
  with pytest.raises(SweepError, match="^agents: zero-torque"):
    validate(_cfg(agents=("zero-torque",), controls=False, tune=None))
  with pytest.raises(SweepError, match="^hparams.*action"):
    validate(_cfg(hparams={}, controls=False))
  with pytest.raises(SweepError, match="^agent_hparams"):
    validate(_cfg(agent_hparams={"pevi": {"beta": (1.0,)}}))


def test_zero_torque_is_pendulums_middle_torque():
  env = envs.make("pendulum", horizon=4)
  b = registry.make("zero-torque", env)
  assert b.config.neutral == 2 and env.num_actions == 5
  torques = np.linspace(-2.0, 2.0, 5)  # gymnax's max_torque 2
  assert torques[b.config.neutral] == 0.0
  with pytest.raises(ValueError, match="neutral"):
    registry.make("zero-torque", envs.make("pendulum", horizon=4, num_torques=4))


def test_recommended_defaults_follow_the_measured_widths():
  """beta / sqrt(lambda) = SCALE H / gap, the widths measured here on other reset states with
  NumPy (elliptical: ||phi||_2; d-rectangular: 1 - sum_i phi_i sqrt(1 - phi_i^2 / ||phi||^2))."""
  from drjax.envs import recommend
  env = envs.make("cartpole", horizon=40)
  params = env.default_params()
  reset, phi_all = jax.jit(env.reset), jax.jit(env.phi_all)  # compiled once, not op by op
  phis = np.stack([np.asarray(phi_all(reset(jax.random.PRNGKey(1000 + i), params), params),
                              np.float64) for i in range(32)])
  n2 = np.sum(phis ** 2, -1)
  norm = np.median(np.sqrt(n2))
  gap = np.median(1.0 - np.sum(phis * np.sqrt(1.0 - phis ** 2 / n2[..., None]), -1))
  v = validate(SweepConfig(env="cartpole", env_args={"horizon": 40},
                           agents=("lsvi-ucb", "dr-lsvi-ucb", "uniform-random", "pevi")))
  lam = recommend.LAM
  assert v.agent_hparams["lsvi-ucb"]["lam"] == (lam,) == v.agent_hparams["dr-lsvi-ucb"]["lam"]
  np.testing.assert_allclose(v.agent_hparams["lsvi-ucb"]["beta"][0],
                             recommend.SCALE * 40 * np.sqrt(lam) / norm, rtol=0.05)
  np.testing.assert_allclose(v.agent_hparams["dr-lsvi-ucb"]["beta"][0],
                             recommend.SCALE * 40 * np.sqrt(lam) / gap, rtol=0.05)
  assert (v.beta, v.lam) == ((1.0,), (0.1,)) and "pevi" not in v.agent_hparams  # offline
  assert v.eval_modes == ("played", "greedy")
  # The papers' environments keep beta 1, lambda 0.1 and the played policy alone.
  p = validate(SweepConfig(env="linear-mdp"))
  assert (p.beta, p.lam, p.agent_hparams, p.eval_modes) == ((1.0,), (0.1,), {}, ("played",))


def test_default_online_agents_beat_uniform_random_on_cartpole():
  """The defaults a new user gets (no --beta / --lam): both online agents' greedy policies beat
  a uniformly random policy at the source (H 30, K 50, 3 seeds; docs/environments.md)."""
  cfg = SweepConfig(env="cartpole", env_args={"horizon": 30}, agents=("lsvi-ucb", "dr-lsvi-ucb",
                    "uniform-random"), rho=(0.05,), seeds=3, episodes=50, test_episodes=32)
  s = run(cfg).summary
  s = s.assign(agent=s.agent.astype(str), policy=s.policy.astype(str))
  rnd = s[s.agent == "uniform-random"].iloc[0]
  for name in ("lsvi-ucb", "dr-lsvi-ucb"):
    g = s[(s.agent == name) & (s.policy == "greedy")].iloc[0]
    margin = 2.0 * np.hypot(g.value_stderr, rnd.value_stderr)
    assert g.value_mean - rnd.value_mean > margin, (name, g.value_mean, rnd.value_mean)


def test_select_best_on_a_hand_made_summary():
  """Argmax per (agent, rho) of the named policy's source mean; ties go to the first setting;
  agents with one policy use theirs; baselines are left out."""
  import pandas as pd
  rows = []
  vals = {("lsvi-ucb", 0, "played"): 5.0, ("lsvi-ucb", 0, "greedy"): 1.0,
          ("lsvi-ucb", 1, "played"): 2.0, ("lsvi-ucb", 1, "greedy"): 3.0,
          ("dr-lsvi-ucb", 0, "played"): 4.0, ("dr-lsvi-ucb", 0, "greedy"): 7.0,
          ("dr-lsvi-ucb", 1, "played"): 4.0, ("dr-lsvi-ucb", 1, "greedy"): 7.0,  # a tie
          ("pevi", 0, "played"): 1.0, ("pevi", 1, "played"): 6.0}
  betas = {0: 1.0, 1: 10.0}
  for (agent, s, pol), v in vals.items():
    for t in (0.5, 1.0):  # two targets: the source value repeats
      rows.append({"agent": agent, "setting": s, "rho": 0.1 if agent == "dr-lsvi-ucb" else
                   np.nan, "beta": betas[s], "lam": 0.1, "policy": pol, "target_length": t,
                   "value_mean": -v, "value_stderr": 0.0, "value_count": 2,
                   "train_return_mean": 0.0, "train_return_stderr": 0.0, "train_return_count": 2,
                   "source_value_mean": v, "source_value_stderr": 0.5, "source_value_count": 2})
  rows.append({"agent": "uniform-random", "setting": 0, "rho": np.nan, "beta": np.nan,
               "lam": np.nan, "policy": "played", "target_length": 0.5, "value_mean": 9.0,
               "value_stderr": 0.0, "value_count": 2, "train_return_mean": np.nan,
               "train_return_stderr": np.nan, "train_return_count": 0, "source_value_mean": 9.0,
               "source_value_stderr": 0.0, "source_value_count": 2})
  summary = pd.DataFrame(rows)
  got = {r.agent: r.beta for r in select_best(summary, "greedy").itertuples()}
  assert got == {"lsvi-ucb": 10.0, "dr-lsvi-ucb": 1.0, "pevi": 10.0}
  got = {r.agent: r.beta for r in select_best(summary, "played").itertuples()}
  assert got == {"lsvi-ucb": 1.0, "dr-lsvi-ucb": 1.0, "pevi": 10.0}
  with pytest.raises(ValueError, match="policy"):
    select_best(summary, "best")
  with pytest.raises(ValueError, match="source"):  # targets but no source value
    select_best(summary.drop(columns=[c for c in summary if c.startswith("source_")]))


def test_controls_for_offline_agents_and_the_cli_flags():
  v = validate(SweepConfig(env="linear-mdp", agents=("drpvi",), rho=(0.2,), controls=True))
  assert v.agents == ("drpvi", "pevi", "uniform-random") and v.rho == (0.0, 0.2)
  assert validate(v) == v  # resolved configs are fixed points (resume, merge)
  from drjax import cli
  from drjax.cli.sweep import _sweep_config_kwargs
  parser = cli.build_parser()
  args = parser.parse_args(["sweep", "--env", "cartpole", "--agents", "lsvi-ucb", "dr-lsvi-ucb",
                            "--eval", "played", "greedy", "--controls", "--tune", "greedy",
                            "--beta", "1", "10", "--out", "x"])
  kw = _sweep_config_kwargs(parser, args)
  assert kw["eval_modes"] == ("played", "greedy") and kw["controls"] is True
  assert kw["tune"] == "greedy" and kw["beta"] == (1.0, 10.0) and "lam" not in kw
