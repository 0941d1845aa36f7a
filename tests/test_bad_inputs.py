"""Bad input across the API and the CLI: the right error type, and a message naming the argument.

Each table row is ``(id, thunk, error type, text the message must contain)``; the thunk makes the
bad call. To add cases (e.g. agents and training), append rows to a table or add a table and list
it in ``API_CASES``. Every error must be raised on the host, before anything is traced.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from drjax import cli, evaluate, planning, robust
from drjax.agents.base import QFunction
from drjax.agents.lsvi import dr_lsvi_ucb
from drjax.envs import make as make_env
from drjax.envs.linear_mdp import LinearMDP, target_params
from drjax.envs.put_option import PutOption
from drjax.envs.random_mdp import random_linear_drmdp

LIN = LinearMDP()
PUT = PutOption(num_anchors=4, horizon=3)
M = jnp.full((4, 6), 0.1)
V = jnp.linspace(0.0, 3.0, 6)
MU = jnp.asarray([0.2, 0.3, 0.5])
VS = jnp.asarray([1.0, 0.0, 2.0])


def lin_params(**kw):
  return LIN.make_params(**kw)


def put_params(**kw):
  return PUT.make_params(**kw)


def model(**changes):
  m = LIN.model(lin_params())
  return m._replace(**{k: f(getattr(m, k)) for k, f in changes.items()})


RHO = np.zeros((3, 4))


def qf(H=3, d=4, stacked=None):
  shape = (H, d) if stacked is None else (stacked, H, d)
  w = jnp.zeros(shape)
  linv = jnp.broadcast_to(jnp.eye(d), shape + (d,))
  return QFunction(w=w, pinv=linv, beta=jnp.zeros(shape[:-2]), top=jnp.ones(shape[:-1]),
                   nu=w, alpha=w)


AGENT = dr_lsvi_ucb(3, 4, 16, 4)
PUT_AGENT = dr_lsvi_ucb(3, 5, 2, 4)
KEY = jax.random.PRNGKey(0)

ROBUST = [
    ("alpha_rho_above_1", lambda: robust.alpha_max_exact(M, V, 1.5, 3.0), ValueError, "rho"),
    ("alpha_rho_negative", lambda: robust.alpha_max_exact(M, V, -0.1, 3.0), ValueError, "rho"),
    ("alpha_rho_nan", lambda: robust.alpha_max_exact(M, V, math.nan, 3.0), ValueError, "rho"),
    ("alpha_rho_string", lambda: robust.alpha_max_exact(M, V, "0.5", 3.0), TypeError, "rho"),
    ("alpha_rho_shape", lambda: robust.alpha_max_exact(M, V, jnp.zeros(5), 3.0), ValueError,
     "rho"),
    ("alpha_horizon_negative", lambda: robust.alpha_max_exact(M, V, 0.1, -1.0), ValueError,
     "horizon"),
    ("alpha_horizon_vector", lambda: robust.alpha_max_exact(M, V, 0.1, jnp.ones(2)), ValueError,
     "horizon"),
    ("alpha_v_nan", lambda: robust.alpha_max_exact(M, V.at[2].set(jnp.nan), 0.1, 3.0),
     ValueError, "v"),
    ("alpha_M_nan", lambda: robust.alpha_max_exact(M.at[0, 0].set(jnp.nan), V, 0.1, 3.0),
     ValueError, "M"),
    ("alpha_v_shape", lambda: robust.alpha_max_exact(M, V[:4], 0.1, 3.0), ValueError, "v"),
    ("alpha_M_rank", lambda: robust.alpha_max_exact(V, V, 0.1, 3.0), ValueError, "M"),
    ("grid_alpha_rho", lambda: robust.alpha_max_grid(M, V, 2.0, 3.0, robust.make_grid(3.0, 5)),
     ValueError, "rho"),
    ("grid_points_fraction", lambda: robust.make_grid(3.0, 2.5), TypeError, "num_points"),
    ("grid_points_one", lambda: robust.make_grid(3.0, 1), ValueError, "num_points"),
    ("grid_points_bool", lambda: robust.make_grid(3.0, True), TypeError, "num_points"),
    ("grid_horizon_negative", lambda: robust.make_grid(-1.0, 5), ValueError, "horizon"),
    ("tv_mu_not_normalized", lambda: robust.tv_worst_case_value(MU * 2, VS, 0.1), ValueError,
     "mu"),
    ("tv_mu_negative", lambda: robust.tv_worst_case_value(jnp.asarray([-0.2, 0.7, 0.5]), VS, 0.1),
     ValueError, "mu"),
    ("tv_rho_above_1", lambda: robust.tv_worst_case_value(MU, VS, 1.2), ValueError, "rho"),
    ("tv_V_nan", lambda: robust.tv_worst_case_value(MU, VS.at[0].set(jnp.nan), 0.1), ValueError,
     "V"),
    ("tv_V_shape", lambda: robust.tv_worst_case_value(MU, VS[:2], 0.1), ValueError, "V"),
    ("tv_rho_vector", lambda: robust.tv_worst_case_value(MU, VS, jnp.zeros(3)), ValueError,
     "rho"),
    ("tvdist_rho_negative", lambda: robust.tv_worst_case_distribution(MU, VS, -0.5), ValueError,
     "rho"),
    ("tvdist_mu_rank", lambda: robust.tv_worst_case_distribution(MU[None], VS, 0.1), ValueError,
     "mu"),
    ("gram_lam_zero", lambda: robust.gram(M.T, jnp.ones(6, bool), 0.0), ValueError, "lam"),
    ("ridge_lam_negative", lambda: robust.ridge_factors(M.T, jnp.ones(6, bool), -1.0),
     ValueError, "lam"),
    ("ridge_mask_shape", lambda: robust.ridge_factors(M.T, jnp.ones(5, bool), 0.1), ValueError,
     "mask"),
    ("ridge_phi_rank", lambda: robust.ridge_factors(V, jnp.ones(6, bool), 0.1), ValueError,
     "phi"),
]

PLANNING = [
    ("dp_mu_not_distribution", lambda: planning.robust_dp(model(mu=lambda x: 2 * x), RHO),
     ValueError, "model.mu"),
    ("dp_phi_negative", lambda: planning.robust_dp(model(phi=lambda x: x - 1), RHO), ValueError,
     "model.phi"),
    ("dp_reward_nan", lambda: planning.robust_dp(model(reward=lambda x: x * jnp.nan), RHO),
     ValueError, "model.reward"),
    ("dp_init_dist", lambda: planning.robust_dp(model(init_dist=lambda x: x * 0), RHO),
     ValueError, "model.init_dist"),
    ("dp_fail_state", lambda: planning.robust_dp(model(fail_state=lambda x: x + 7), RHO),
     ValueError, "model.fail_state"),
    ("dp_mu_shape", lambda: planning.robust_dp(model(mu=lambda x: x[:, :3]), RHO), ValueError,
     "model.mu"),
    ("dp_not_a_model", lambda: planning.robust_dp(lin_params(), RHO), TypeError, "model"),
    ("dp_rho_above_1", lambda: planning.robust_dp(model(), RHO + 1.5), ValueError, "rho"),
    ("dp_rho_shape", lambda: planning.robust_dp(model(), np.zeros((2, 4))), ValueError, "rho"),
    ("eval_policy_range", lambda: planning.robust_evaluate(model(), RHO,
                                                           jnp.full((3, 5), 16)), ValueError,
     "policy"),
    ("eval_policy_float", lambda: planning.robust_evaluate(model(), RHO, jnp.zeros((3, 5))),
     ValueError, "policy"),
    ("nominal_policy_shape", lambda: planning.nominal_evaluate(model(), jnp.zeros((3, 4), int)),
     ValueError, "policy"),
]

EVALUATE = [
    ("bound_nan", lambda: evaluate.theorem1_bound(jnp.asarray([1.0, jnp.nan]), 3, 4, 0.1),
     ValueError, "estimation_error"),
    ("bound_p_zero", lambda: evaluate.theorem1_bound(jnp.ones(3), 3, 4, 0.0), ValueError, "p"),
    ("bound_p_string", lambda: evaluate.theorem1_bound(jnp.ones(3), 3, 4, "0.1"), TypeError, "p"),
    ("bound_H_fraction", lambda: evaluate.theorem1_bound(jnp.ones(3), 3.5, 4, 0.1), TypeError,
     "H"),
    ("bound_d_bool", lambda: evaluate.theorem1_bound(jnp.ones(3), 3, True, 0.1), TypeError, "d"),
    ("bound_beta_negative", lambda: evaluate.theorem1_bound(jnp.ones(3), 3, 4, 0.1, beta=-1.0),
     ValueError, "beta"),
    ("bound_c_nan", lambda: evaluate.theorem1_bound(jnp.ones(3), 3, 4, 0.1, c=math.nan),
     ValueError, "c"),
    ("subopt_single_qf", lambda: evaluate.ave_subopt(AGENT, qf(), model(), RHO), ValueError,
     "record_q=True"),
    ("subopt_qf_shape", lambda: evaluate.ave_subopt(AGENT, qf(d=5, stacked=2), model(), RHO),
     ValueError, "qfs.w"),
    ("greedy_qf_shape", lambda: evaluate.greedy_policy(AGENT, qf(H=2), model()), ValueError,
     "qf.w"),
    ("greedy_not_a_qf", lambda: evaluate.greedy_policy(AGENT, jnp.zeros((3, 4)), model()),
     TypeError, "qf"),
    ("mc_episodes_zero", lambda: evaluate.mc_evaluate(LIN, AGENT, qf(), lin_params(), KEY, 0),
     ValueError, "num_episodes"),
    ("mc_episodes_bool", lambda: evaluate.mc_evaluate(LIN, AGENT, qf(), lin_params(), KEY, True),
     TypeError, "num_episodes"),
    ("mc_key_int", lambda: evaluate.mc_evaluate(LIN, AGENT, qf(), lin_params(), 3, 10), TypeError,
     "key"),
    ("mc_params_other_env", lambda: evaluate.mc_evaluate(LIN, AGENT, qf(), put_params(), KEY, 10),
     TypeError, "params"),
    ("exact_targets_not_finite", lambda: evaluate.exact_target_values(
        PUT, AGENT, qf(), put_params()), TypeError, "env"),
    ("put_exact_p_us", lambda: evaluate.put_option_exact_values(
        PUT, PUT_AGENT, qf(3, 5), [1.5], 95.0, 105.0), ValueError, "p_us"),
    ("put_exact_init", lambda: evaluate.put_option_exact_values(
        PUT, PUT_AGENT, qf(3, 5), [0.5], 105.0, 95.0), ValueError, "init_low"),
    ("put_exact_env", lambda: evaluate.put_option_exact_values(
        LIN, PUT_AGENT, qf(3, 5), [0.5], 95.0, 105.0), TypeError, "env"),
    ("put_optimal_init_nan", lambda: evaluate.put_option_optimal_values(
        PUT, [0.5], math.nan, 105.0), ValueError, "init_low"),
]

ENVS = [
    ("lin_delta_string", lambda: lin_params(delta="0.3"), TypeError, "delta"),
    ("lin_p_none", lambda: lin_params(p=None), TypeError, "p"),
    ("lin_xi_too_large", lambda: lin_params(xi_norm=0.8), ValueError, "xi_norm"),
    ("lin_p_nan", lambda: lin_params(p=math.nan), ValueError, "p"),
    ("lin_q_above_1", lambda: lin_params(q=2.0), ValueError, "q"),
    ("lin_validate_put_params", lambda: LIN.validate(put_params()), TypeError, "params"),
    ("lin_targets_of_put_params", lambda: target_params(put_params(), 0.5), TypeError,
     "source_params"),
    ("lin_targets_q_string", lambda: target_params(lin_params(), "half"), TypeError, "q"),
    ("put_validate_lin_params", lambda: PUT.validate(lin_params()), TypeError, "params"),
    ("put_p_u_above_1", lambda: put_params(p_u=1.5), ValueError, "p_u"),
    ("put_init_order", lambda: put_params(init_low=110.0), ValueError, "init_low"),
    ("put_p_u_string", lambda: put_params(p_u="high"), TypeError, "p_u"),
    ("put_targets_of_lin_params", lambda: PUT.target_params(lin_params(), 0.5), TypeError,
     "source_params"),
    ("put_anchors_one", lambda: PutOption(num_anchors=1), ValueError, "num_anchors"),
    ("put_horizon_zero", lambda: PutOption(horizon=0), ValueError, "horizon"),
    ("put_horizon_fraction", lambda: PutOption(horizon=2.5), TypeError, "horizon"),
    ("put_variant", lambda: PutOption(variant="colab"), ValueError, "variant"),
    ("random_concentration_zero", lambda: random_linear_drmdp(KEY, 4, 2, 3, 2, concentration=0.0),
     ValueError, "concentration"),
    ("random_concentration_negative", lambda: random_linear_drmdp(
        KEY, 4, 2, 3, 2, concentration=-1.0), ValueError, "concentration"),
    ("random_concentration_nan", lambda: random_linear_drmdp(
        KEY, 4, 2, 3, 2, concentration=math.nan), ValueError, "concentration"),
    ("random_concentration_string", lambda: random_linear_drmdp(
        KEY, 4, 2, 3, 2, concentration="1"), TypeError, "concentration"),
    ("make_unknown_env", lambda: make_env("gridworld"), ValueError, "name"),
]

def _sweep(**kw):
  import drjax  # pylint: disable=g-import-not-at-top
  args = dict(num_seeds=2, num_episodes=3, hparams=drjax.make_hparams(3, 4))
  args.update(kw)
  key = args.pop("key", jax.random.PRNGKey(0))
  agent = args.pop("agent", dr_lsvi_ucb(3, 4, 16, 5))
  params = args.pop("params", LIN.make_params())
  return drjax.sweep(LIN, params, agent, key, **args)


def _train(**kw):
  from drjax.train import make_train  # pylint: disable=g-import-not-at-top
  args = dict(agent=dr_lsvi_ucb(3, 4, 16, 5), num_episodes=5)
  args.update(kw)
  return make_train(args.pop("env", LIN), args.pop("agent"), args.pop("num_episodes"), **args)


def _hp(**kw):
  from drjax.agents.base import make_hparams  # pylint: disable=g-import-not-at-top
  return make_hparams(3, 4, **kw)


AGENTS_TRAIN = [
    ("agent_capacity_float", lambda: dr_lsvi_ucb(3, 4, 16, 10.0), TypeError, "capacity"),
    ("agent_capacity_bool", lambda: dr_lsvi_ucb(3, 4, 16, True), TypeError, "capacity"),
    ("agent_capacity_list", lambda: dr_lsvi_ucb(3, 4, 16, [10]), TypeError, "capacity"),
    ("agent_horizon_str", lambda: dr_lsvi_ucb("3", 4, 16, 10), TypeError, "horizon"),
    ("agent_d_zero", lambda: dr_lsvi_ucb(3, 0, 16, 10), ValueError, "feature_dim"),
    ("agent_solver", lambda: dr_lsvi_ucb(3, 4, 16, 10, solver="lu"), ValueError, "solver"),
    ("agent_grid_size", lambda: dr_lsvi_ucb(3, 4, 16, 10, alpha="grid", grid_size=1),
     ValueError, "grid_size"),
    ("lsvi_fail_zero", lambda: __import__("drjax").lsvi_ucb(3, 4, 16, 10, fail_zero="yes"),
     TypeError, "fail_zero"),
    ("train_capacity_below_K", lambda: _train(num_episodes=6), ValueError, "capacity"),
    ("train_K_bool", lambda: _train(num_episodes=True), TypeError, "num_episodes"),
    ("train_form", lambda: _train(form="fast"), ValueError, "form"),
    ("train_stats_continuous", lambda: _train(env=PUT, agent=dr_lsvi_ucb(3, 5, 2, 5),
                                              form="stats"), ValueError, "form='stats'"),
    ("train_outputs", lambda: _train(outputs=("buffers",)), ValueError, "outputs"),
    ("train_agent_env_mismatch", lambda: _train(agent=dr_lsvi_ucb(3, 5, 16, 5)), ValueError,
     "does not match env"),
    ("sweep_hparams_none", lambda: _sweep(hparams=None), TypeError, "hparams"),
    ("sweep_int_key", lambda: _sweep(key=0), TypeError, "key"),
    ("sweep_seeds_bool", lambda: _sweep(num_seeds=True), TypeError, "num_seeds"),
    ("sweep_seeds_zero", lambda: _sweep(num_seeds=0), ValueError, "num_seeds"),
    ("sweep_params_per_seed_bad_seed", lambda: _sweep(
        params_per_seed=True, params=LIN.make_params()._replace(
            xi_norm=jnp.asarray([0.1, 0.9]), delta=jnp.asarray([0.3, 0.3]),
            p=jnp.asarray([0.001, 0.001]), q=jnp.asarray([0.0, 0.0]),
            target=jnp.asarray([0.0, 0.0]))), ValueError, "xi_norm"),
    ("hparams_rho_range", lambda: _hp(rho=1.5), ValueError, "rho"),
    ("hparams_lam_zero", lambda: _hp(lam=0.0), ValueError, "lam"),
    ("hparams_beta_negative", lambda: _hp(beta=-1.0), ValueError, "beta"),
]

API_CASES = ROBUST + PLANNING + EVALUATE + ENVS + AGENTS_TRAIN


@pytest.mark.parametrize("thunk,error,text", [c[1:] for c in API_CASES],
                         ids=[c[0] for c in API_CASES])
def test_api_rejects_bad_input_naming_the_argument(thunk, error, text):
  with pytest.raises(error) as e:
    thunk()
  assert text in str(e.value), str(e.value)


BIG = str(2**64)
CLI_CASES = [
    ("seed_negative", ["reproduce", "fig1", "--seed", "-1"], "--seed"),
    ("seed_beyond_64_bits", ["reproduce", "fig1", "--seed", BIG], "--seed"),
    ("seed_beyond_32_bits", ["reproduce", "fig1", "--seed", str(2**32)], "--seed"),
    ("seeds_beyond_64_bits", ["reproduce", "fig1", "--seeds", str(2**70)], "--seeds"),
    ("seeds_not_int", ["reproduce", "fig1", "--seeds", "ten"], "--seeds"),
    ("episodes_beyond_64_bits", ["reproduce", "fig2", "--episodes", BIG], "--episodes"),
    ("test_episodes_zero", ["reproduce", "fig2", "--test-episodes", "0"], "--test-episodes"),
    ("test_episodes_huge", ["reproduce", "fig2", "--test-episodes", BIG], "--test-episodes"),
    ("evaluation_unknown", ["reproduce", "fig2", "--evaluation", "sampled"], "--evaluation"),
    ("train_beta_negative", ["train", "--beta", "-1"], "--beta"),
    ("train_lam_nan", ["train", "--lam", "nan"], "--lam"),
    ("train_xi_norm", ["train", "--xi-norm", "0.5"], "--xi-norm"),
    ("train_env", ["train", "--env", "gridworld"], "--env"),
    ("train_rho_nan", ["train", "--rho", "nan"], "--rho"),
    ("train_seed_huge", ["train", "--seed", BIG], "--seed"),
    ("plan_rho", ["plan", "--rho", "2"], "--rho"),
    ("plan_q", ["plan", "--q", "-0.5"], "--q"),
    ("plan_xi_nan", ["plan", "--xi-norm", "nan"], "--xi-norm"),
    ("plan_rho_array_shape", ["plan", "--rho-array", "[[1]]"], "--rho-array"),
    ("plan_rho_and_array", ["plan", "--rho", "0.5", "--rho-array", "[[0]]"], "--rho"),
    ("plan_delta", ["plan", "--delta", "2"], "delta"),
    ("plan_p", ["plan", "--p", "1.5"], "p must"),
]


@pytest.mark.parametrize("argv,text", [c[1:] for c in CLI_CASES], ids=[c[0] for c in CLI_CASES])
def test_cli_rejects_bad_flags_in_one_line_exit_2_writing_nothing(argv, text, tmp_path, capsys):
  out = tmp_path / "out"
  extra = ["--out", str(out)] if argv[0] != "plan" else []
  with pytest.raises(SystemExit) as e:
    cli.main(argv + extra)
  assert e.value.code == 2
  err = capsys.readouterr().err.strip()
  assert len(err.splitlines()) == 1 and text in err, err
  assert not out.exists()


def test_at_least_60_bad_inputs():
  assert len(API_CASES) + len(CLI_CASES) >= 60
