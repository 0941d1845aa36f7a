"""The compiled chunk program: one jitted, run-sharded function per agent that trains (or fits)
a chunk of runs and evaluates each run's greedy policy on the targets."""

from __future__ import annotations


import jax
import jax.numpy as jnp
import numpy as np

from drjax import evaluate, planning
from drjax._precision import exact_matmuls
from drjax.agents import registry
from drjax.envs.base import FiniteEnvironment
from drjax.sweeps.config import SweepConfig, make_targets
from drjax.sweeps.grid import _make_agent, reward_option  # noqa: F401  (_make_agent: re-exported)
from drjax.train import _entry_features, make_fit, make_train, replan
from drjax import _programs


NAMED_TABLES = ("rho", "beta", "lam", "reg_weight")  # the hyperparameters with tables of their own


def _hparams_of(agent):
  """``f(setting_idx, tables) -> hparams`` of one run: the named tables (rho, beta, lam,
  reg_weight), the ``SweepConfig.hparams`` axes, and the declared defaults of the agent's
  hyperparameter NamedTuple for the rest (``validate`` has checked that every field without a
  default has an axis: nothing becomes 0 silently)."""
  cls = agent.hparams_type
  defaults = getattr(cls, "_field_defaults", {})

  def hparams_of(setting_idx, tables):
    dtype = tables["beta"].dtype
    out = {}
    for f in cls._fields:
      if f in NAMED_TABLES:
        out[f] = tables[f][setting_idx]
      elif f in tables["hparams"]:
        out[f] = tables["hparams"][f][setting_idx]
      elif f in defaults:
        out[f] = jnp.asarray(defaults[f], dtype)
      else:
        raise ValueError(f"{agent.name}: hyperparameter {f!r} has no values and no default")
    return cls(**out)

  return hparams_of


def ordered_sum(x):
  """Sum over the last axis in index order (a loop, not a tree reduction).

  Under ``vmap`` every run's sum is computed in the same order whatever the batch size, so a
  run's numbers do not depend on the chunk size or the number of devices (XLA's vectorized
  reductions sum in an order that depends on the batch shape: float32 means differed in the last
  bit between chunk sizes).
  """
  return jax.lax.fori_loop(0, x.shape[-1], lambda i, acc: acc + x[..., i],
                           jnp.zeros(x.shape[:-1], x.dtype))


@_programs.cached
def _program(env, agent, episodes: int, target_mode: str, test_episodes: int, save_returns: bool,
             mesh, num_runs: int, behavior=None, num_trajectories: int = 0,
             settings_per_group: int = 0, record: tuple = (), record_at: tuple = (),
             eval_modes: tuple = ("played",), source_eval: bool = False,
             plan_blocks: int | None = None):
  """Jitted ``f(seed_idx [C], setting_idx [C], group, base_key, tables) -> outputs``, sharded on
  runs.

  Online agents train for ``episodes``; offline agents collect ``num_trajectories`` (the largest
  size; each setting uses its first ``tables["size"]``) under ``behavior`` and fit once. The
  ``train_return`` of an offline run is the mean return of its dataset (the behavior policy's).

  ``group``: the chunk's source group (a scalar: a chunk never mixes source instances, see
  ``grid.Layout``). Its params are taken from ``tables["params"]`` (leaves ``[G, ...]``) once,
  outside the vmap over runs, so everything derived from them alone (the finite model, features,
  the target domains and their models) is built once per chunk, and the agents' products over all
  states are one large product for the whole chunk, not a batch of small ones per run (gathered
  per run, the params made a chunk 3x slower on the linear MDP). Every run computes the same
  way whatever the chunk size, so the numbers do not depend on the chunking.

  ``record`` / ``record_at``: ``SweepConfig.record`` quantities at the episode checkpoints,
  returned as ``record_<name> [len(record_at)]`` per run (``tables["record_rho"]``: the rho at
  which ``ave_subopt`` is measured, per setting).

  ``settings_per_group`` > 0: the agent is not grouped (``grid.Layout``): ``group`` is ignored and
  each run takes the params of its own setting's group, ``setting_idx // settings_per_group``.

  ``eval_modes`` (``SweepConfig.eval_modes``): with ``"greedy"``, an online run's bonus-free
  greedy policy (``replan`` of its final data at beta = 0) is evaluated too, with the same key:
  ``value_greedy`` / ``value_greedy_stderr`` (NaN for offline agents and baselines, which have
  one policy). ``source_eval``: every policy is also evaluated in the source, ``source_value``
  (and ``source_value_greedy``) ``[]`` per run (``SweepConfig.tune``).

  ``plan_blocks``: ``make_train``'s ``blocks`` (the buffer form planning over its filled slots;
  ``None``: its default, ``0``: the whole capacity, one compiled plan).

  A baseline (``kind="baseline"``, ``drjax.agents.baselines``) trains nothing: its policy is
  evaluated with the run's evaluation key (its ``train_return`` is NaN).
  """
  offline = agent.kind == "offline"
  baseline = agent.kind == "baseline"
  greedy = "greedy" in eval_modes
  if baseline:
    from drjax.agents import baselines  # pylint: disable=g-import-not-at-top
  elif offline:
    fit = make_fit(env, agent, num_trajectories, behavior)
  else:
    study = {"width_rect": "width_rect", "width_ellip": "width_ellip", "switches": "switches",
             "dual_calls": "dual_calls", "ave_subopt": "robust_value"}
    outputs = ("returns", "final_qf") + (("state",) if greedy else ())
    train = make_train(env, agent, episodes, outputs=outputs + tuple(study[r] for r in record),
                       blocks=plan_blocks)
    at = np.asarray(record_at, np.int32) - 1  # a constant of the program (no eager dispatch)
  finite = isinstance(env, FiniteEnvironment)
  hparams_of = _hparams_of(agent)

  def value_in(qf, params, key):
    if baseline:  # qf: the baseline's hyperparameters
      if finite:
        return baselines.exact_value(env, agent, qf, params), jnp.zeros((), params_dtype(params))
      r = baselines.mc_returns(env, agent, qf, params, key, test_episodes)
      mean = ordered_sum(r) / test_episodes
      var = ordered_sum((r - mean) ** 2) / max(test_episodes - 1, 1)
      return mean, jnp.sqrt(var / test_episodes) if test_episodes > 1 else jnp.zeros_like(mean)
    if finite:
      return evaluate.target_value(env, agent, qf, params), jnp.zeros((), qf.w.dtype)
    r = evaluate.mc_evaluate(env, agent, qf, params, key, test_episodes)["returns"]
    mean = ordered_sum(r) / test_episodes
    var = ordered_sum((r - mean) ** 2) / max(test_episodes - 1, 1)
    return mean, jnp.sqrt(var / test_episodes) if test_episodes > 1 else jnp.zeros_like(mean)

  def one(seed_idx, setting_idx, params, base_key, tables):
    hp = hparams_of(setting_idx, tables)
    key = jax.random.fold_in(base_key, seed_idx)
    policies = {}
    if baseline:
      out, returns = None, None
      policies["played"] = hp
    elif offline:
      fo = fit(jax.random.fold_in(key, 0), hp, params, tables["size"][setting_idx])
      out = fo._replace(dataset=None)
      returns = None
      policies["played"] = out.final_qf
    else:
      if "ave_subopt" in record:  # the rho of the objective (nominal agents ignore hp.rho)
        hp = hp._replace(rho=tables["record_rho"][setting_idx])
      out = train(jax.random.fold_in(key, 0), hp, params)
      returns = out.returns
      policies["played"] = out.final_qf
      if greedy:  # the bonus-free greedy policy of the same data (drjax.replan at beta = 0)
        policies["greedy"] = _greedy_qf(env, agent, out.state, hp, params)
    k_eval = jax.random.fold_in(key, 1)
    res = {}
    for mode in ("played", "greedy") if greedy else ("played",):
      suffix = "" if mode == "played" else "_" + mode
      if mode not in policies:  # offline agents and baselines: one policy
        nan = jnp.full((tables["targets"].shape[0] if target_mode != "source" else 1,), jnp.nan,
                       tables["beta"].dtype)
        res["value" + suffix], res["value" + suffix + "_stderr"] = nan, nan
        if source_eval:
          res["source_value" + suffix] = nan[0]
        continue
      pol = policies[mode]
      if target_mode != "source":  # "targets" or "targets:NAME" (config.target_mode)
        tps = make_targets(env, target_mode, params, tables["targets"])
        val, err = jax.vmap(lambda t, pol=pol: value_in(pol, t, k_eval))(tps)
        if source_eval:
          res["source_value" + suffix] = value_in(pol, params, k_eval)[0]
      else:
        val, err = value_in(pol, params, k_eval)
        val, err = val[None], err[None]
        if source_eval:
          res["source_value" + suffix] = val[0]
      res["value" + suffix], res["value" + suffix + "_stderr"] = val, err
    val = res["value"]
    if baseline:
      train_return = jnp.full((), jnp.nan, val.dtype)
    else:
      train_return = out.data_return if offline else ordered_sum(returns) / episodes
    res["train_return"] = train_return
    if save_returns:
      res["returns"] = (returns if returns is not None
                        else jnp.full((episodes,), jnp.nan, val.dtype))
    for name in record:
      res["record_" + name] = _recorded(name, out, at, env, params, hp.rho)
    return res

  def chunk(seed_idx, setting_idx, group, base_key, tables):
    if settings_per_group:  # per run
      params = jax.tree_util.tree_map(lambda x: x[setting_idx // settings_per_group],
                                      tables["params"])
      axis = 0
    else:
      params, axis = jax.tree_util.tree_map(lambda x: x[group], tables["params"]), None
    return jax.vmap(one, in_axes=(0, 0, axis, None, None))(seed_idx, setting_idx, params,
                                                            base_key, tables)

  P = jax.sharding.PartitionSpec
  runs = jax.sharding.NamedSharding(mesh, P("runs"))
  rep = jax.sharding.NamedSharding(mesh, P())
  return (jax.jit(exact_matmuls(chunk), in_shardings=(runs, runs, rep, rep, rep),
                  out_shardings=runs),
          runs, rep)


def params_dtype(params):
  """The float dtype of an environment's params (the computation's)."""
  leaves = [x for x in jax.tree_util.tree_leaves(params) if jnp.issubdtype(x.dtype, jnp.floating)]
  return leaves[0].dtype if leaves else jnp.result_type(float)


def _greedy_qf(env, agent, state, hp, params):
  """``drjax.replan`` of a run's final state at beta = 0 (an agent whose state is neither
  buffer nor statistics form, e.g. We-DRIVE-U's, plans through its own ``plan(...,
  refactor=True)``)."""
  hp0 = hp._replace(beta=jnp.zeros_like(hp.beta))
  from drjax.agents import base  # pylint: disable=g-import-not-at-top
  if isinstance(state, (base.AgentState, base.StatsState)):
    return replan(env, agent, state, hp0, params)
  model = env.model(params) if isinstance(env, FiniteEnvironment) else None
  return agent.plan(state, hp0, model, refactor=True)


def _recorded(name: str, out, at, env, params, rho):
  """``[C]`` the recorded quantity ``name`` of one run at the 0-based checkpoints ``at``."""
  if name in ("switches", "dual_calls"):
    return getattr(out, name)[at]
  if name in ("width_rect", "width_ellip"):  # sums over the episodes <= k and every step
    return jnp.cumsum(jnp.sum(getattr(out, name), axis=-1))[at]
  model = env.model(params)  # ave_subopt: V* - running mean of the episodes' robust values
  v_star = planning.initial_value(model, planning.robust_dp(model, rho).v)
  k = jnp.arange(1, out.robust_value.shape[0] + 1, dtype=out.robust_value.dtype)
  return (v_star - jnp.cumsum(out.robust_value) / k)[at]


def _check_features(env, params) -> None:
  """The environment's features, checked as its ``feature_check`` says (``train._entry_features``:
  built-in environments guarantee them by ``validate`` or check them once per object; others are
  checked here, a finite model's features computed by one jitted call)."""
  _entry_features(env, params, jax.random.PRNGKey(0))
