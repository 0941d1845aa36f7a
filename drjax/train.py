"""A whole K-episode training run as one ``lax.scan`` (act, step, observe; plan per episode).

``make_train(env, agent, num_episodes)`` returns ``train(key, hparams, env_params)``, a pure
function of one seed and one hyperparameter setting; batch seeds, rho/beta/lambda and environment
params with ``jax.vmap`` (``sweep`` does it for the common grid) — one compilation serves all.
"""

from __future__ import annotations

import functools
import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from drjax import _checks
from drjax._precision import exact_matmuls
from drjax.agents import base, offline_core
from drjax.agents.base import Agent, HParams, QFunction, check_features, validate_hparams
from drjax.envs.base import FiniteEnvironment
from drjax import planning, protocols
from drjax import _programs


class TrainOutput(NamedTuple):
  """Everything a training run returns (leading axes added by ``vmap``).

  Fields not requested with ``make_train(..., outputs=...)`` are ``None``.

  Attributes:
    state: final agent state: ``AgentState`` (buffer form: the trajectories the agent saw) or
      ``StatsState`` (sufficient statistics).
    returns: ``[K]`` undiscounted return of each training episode in the source domain.
    actions: ``[K, H]`` actions taken.
    states: ``[K, H]`` integer state index visited at each step (``-1`` for environments whose
      state has no ``s`` field).
    estimation_error: ``[K]`` the d-rectangular estimation error of each episode,
      ``sum_h sum_i phi_{h,i}^k sqrt([Lambda_h^k]^-1_ii)`` (Theorem 1).
    qf: the per-episode ``QFunction`` (leading axis K) when ``record_q=True``, else ``None``.
    final_qf: the ``QFunction`` planned on all K episodes (the learned policy).
    width_rect: ``[K, H]`` the d-rectangular width ``sum_i phi_i sqrt([Lambda_h^k]^-1_ii)`` at
      the visited features (opt-in: ``outputs=(..., "width_rect")``; its sum over h is
      ``estimation_error``).
    width_ellip: ``[K, H]`` the elliptical width ``sqrt(phi^T [Lambda_h^k]^-1 phi)`` at the
      visited features (opt-in), the quantity the elliptical potential lemma bounds.
    switches: ``[K]`` int32, the number of distinct policies computed up to and including the
      one episode k acts with (opt-in; ``k + 1`` for agents that plan every episode, fewer for
      rare-switching agents).
    dual_calls: ``[K]`` int32, the dual problems (one per ``(h, i)``, ``h < H``) solved up to
      and including episode k's plan (opt-in; 0 for nominal agents).
    robust_value: ``[K]`` the exact robust value ``E_{s_1} V_1^{pi_k, rho}(s_1)`` of episode k's
      greedy policy at ``hparams.rho`` (opt-in; finite environments only), for exact AveSubopt
      curves without storing K Q-functions.
  """

  state: Any
  returns: jax.Array | None
  actions: jax.Array | None
  states: jax.Array | None
  estimation_error: jax.Array | None
  qf: QFunction | None
  final_qf: QFunction | None
  width_rect: jax.Array | None = None
  width_ellip: jax.Array | None = None
  switches: jax.Array | None = None
  dual_calls: jax.Array | None = None
  robust_value: jax.Array | None = None


OUTPUTS = ("state", "returns", "actions", "states", "estimation_error", "final_qf")
# Opt-in outputs of studies (never computed unless named in ``outputs``): per-step widths,
# policy-switch and dual-call counts, per-episode exact robust values.
STUDY_OUTPUTS = ("width_rect", "width_ellip", "switches", "dual_calls", "robust_value")
ALL_OUTPUTS = OUTPUTS + STUDY_OUTPUTS
FORMS = ("auto", "stats", "buffer")
SEGMENT_MIN_K = 256
# The buffer form below SEGMENT_MIN_K plans over the filled slots rounded up to a multiple of this
# many (``make_train(..., blocks=...)``; ``plan_sizes``).
PLAN_BLOCK = 16


def resolve_form(env, form: str) -> str:
  """``"stats"`` or ``"buffer"``: ``"auto"`` picks sufficient statistics for finite environments.

  Raises ``ValueError`` naming ``form`` when ``"stats"`` is forced on an environment without a
  finite model.
  """
  _checks.environment("env", env)
  _checks.choice("form", form, FORMS)
  finite = isinstance(env, FiniteEnvironment)
  if form == "stats" and not finite:
    raise ValueError(f"form='stats' (sufficient statistics) needs a finite environment with an "
                     f"exact model (a FiniteEnvironment); {type(env).__name__} has none: use "
                     "form='buffer' or 'auto'")
  if form == "auto":
    return "stats" if finite else "buffer"
  return form


def segment_bounds(num_episodes: int, first: int = 16, ratio: float = 1.5) -> tuple[int, ...]:
  """End points of the buffer form's segments: episode k plans over the first ``end`` slots of
  its segment. Geometric growth: a K-episode run costs about ``2r/(r+1) * K^2/2`` atom passes
  (1.2x the ideal ``K^2/2`` for ``r = 1.5``) instead of ``K * K``."""
  num_episodes = _checks.integer("num_episodes", num_episodes, 1)
  first = _checks.integer("first", first, 1)
  ratio = _checks.number("ratio", ratio, 1, lo_open=True)
  ends = []
  end = min(first, num_episodes)
  while True:
    ends.append(end)
    if end >= num_episodes:
      return tuple(ends)
    end = min(num_episodes, max(end + 1, int(math.ceil(end * ratio))))


def plan_sizes(start: int, end: int, block: int) -> tuple[int, ...]:
  """The plan sizes of a segment of the buffer form whose episodes ``k in [start, end]`` plan with
  ``k`` filled slots: the multiples of ``block`` from the smallest that covers ``start`` (at least
  ``block``), and ``end``. Episode k plans over the smallest size ``>= k`` (``_plan_index``);
  ``block = 0``: one size, ``end`` (the whole segment)."""
  start = _checks.integer("start", start, 0)
  end = _checks.integer("end", end, 1)
  block = _checks.integer("block", block, 0)
  if start > end:
    raise ValueError(f"start must be <= end, got start = {start}, end = {end}")
  if block == 0:
    return (end,)
  first = max(block, -(-start // block) * block)
  return tuple(range(first, end, block)) + (end,)


def _plan_index(k, sizes: tuple[int, ...]):
  """``[]`` int32: the index of the smallest of ``sizes`` (ascending) that is ``>= k``. From the
  episode index of the scan, which is not batched under ``vmap`` over seeds or hyperparameters,
  so the ``lax.switch`` it selects stays a real branch (a batched index would turn it into a
  select that runs every branch)."""
  bounds = jnp.asarray(sizes[:-1], jnp.int32)
  return jnp.sum(bounds < jnp.asarray(k, jnp.int32)).astype(jnp.int32)


def make_train(env, agent: Agent, num_episodes: int, *, record_q: bool = False,
               form: str = "auto", outputs=None, segments: bool | None = None,
               blocks: int | None = None):
  """Builds ``train(key, hparams, env_params) -> TrainOutput`` for one seed.

  Args:
    env: an ``Environment`` (source domain structure).
    agent: an ``Agent`` from ``dr_lsvi_ucb`` / ``lsvi_ucb`` with capacity >= ``num_episodes``.
    num_episodes: K (static).
    record_q: also return the Q-function of every episode (for exact AveSubopt curves).
    form: ``"auto"`` (sufficient statistics for finite environments, else the buffer),
      ``"stats"`` or ``"buffer"``. Both forms give the same Q-functions and actions (to
      rounding) on the same trajectories.
    outputs: names of the ``TrainOutput`` fields to return (others are ``None``, so a vmapped
      sweep does not hold them in memory); default: all of ``OUTPUTS``. The study outputs
      (``STUDY_OUTPUTS``: ``width_rect``, ``width_ellip``, ``switches``, ``dual_calls``,
      ``robust_value``) are computed only when named here (none of their work is traced
      otherwise).
    segments: buffer form: split the episode scan into segments of growing buffer size, so
      episode k plans over O(k) slots rather than the whole capacity (each segment is compiled
      separately). ``None``: segments when K >= ``SEGMENT_MIN_K`` (long runs, where the saving
      dominates the extra compile time).
    blocks: buffer form, one segment (no ``segments``): episode k plans over its ``k`` filled
      slots rounded up to a multiple of ``blocks`` (a ``lax.switch`` over the plan sizes, chosen
      by the episode index: one compiled plan per size), not over the whole capacity. The same
      run: the empty slots' atoms are zeros, so the plans are exact (equal to the whole-capacity
      plan up to the last bits where XLA sums or fuses in another order; the same actions).
      ``None``: ``PLAN_BLOCK`` slots; ``0``: the whole capacity at every episode (one plan).
  """
  _checks.environment("env", env)
  H = env.horizon
  K = base.check_int("num_episodes (K)", num_episodes)
  _check_kind(agent, "online", "make_train")
  record_q = _checks.boolean("record_q", record_q)
  if segments is not None:
    segments = _checks.boolean("segments", segments)
  if blocks is not None:
    blocks = _checks.integer("blocks", blocks, 0)
  form = resolve_form(env, form)
  if agent.config.capacity < K:
    raise ValueError(f"agent capacity {agent.config.capacity} must be >= num_episodes {K} "
                     "(the agent stores one slot per episode)")
  _checks.agent_dims(agent, (H, env.feature_dim, env.num_actions))
  outputs = OUTPUTS if outputs is None else _names("outputs", outputs)
  bad = [o for o in outputs if o not in ALL_OUTPUTS]
  if bad:
    raise ValueError(f"outputs must be a subset of {ALL_OUTPUTS}, got {bad}")
  stats = form == "stats"
  want = set(outputs)
  if "robust_value" in want and not isinstance(env, FiniteEnvironment):
    raise ValueError(f"outputs 'robust_value' needs a finite environment with an exact model "
                     f"(a FiniteEnvironment); {type(env).__name__} has none")
  widths = bool(want & {"width_rect", "width_ellip"})
  takes_qf = bool(getattr(agent, "update_takes_qf", False))
  counters = getattr(agent, "counters", None)
  duals_per_plan = getattr(agent, "duals_per_plan", None)
  if ("dual_calls" in want or "switches" in want) and counters is None and duals_per_plan is None:
    raise ValueError(f"outputs 'switches' / 'dual_calls' need an agent that counts them "
                     f"(Agent.counters or Agent.duals_per_plan); {agent.name!r} has neither")
  if segments is None:
    segments = K >= SEGMENT_MIN_K
  bounds = segment_bounds(K, ratio=2.0) if (segments and not stats) else (K,)
  block = 0 if (stats or len(bounds) > 1) else (PLAN_BLOCK if blocks is None else blocks)

  def train(key, hparams: HParams, env_params) -> TrainOutput:
    _checks.key("key", key)
    if not all(hasattr(hparams, f) for f in ("rho", "beta", "lam")):
      raise TypeError(f"hparams must be an HParams(rho, beta, lam) (drjax.make_hparams), got "
                      f"{type(hparams).__name__}")
    _checks.env_params(env, env_params, "env_params")
    theta = env.theta(env_params)
    if stats or "robust_value" in want:
      model = env.model(env_params)
    if stats:
      state0 = agent.init_stats(theta, env.num_states, hparams.lam, model=model)
    else:
      model = None if "robust_value" not in want else model
      state0 = agent.init(theta, hparams.lam, capacity=K)

    def _counts(agent_state, k):
      """``[2]`` int32: policies computed and dual problems solved up to episode k's plan."""
      if counters is not None:
        return jnp.stack([jnp.asarray(c, jnp.int32) for c in counters(agent_state)])
      plans = jnp.asarray(k, jnp.int32) + 1
      return jnp.stack([plans, plans * jnp.int32(duals_per_plan)])

    def _robust_value(qf):
      """Exact robust value of the greedy policy of ``qf`` at ``hparams.rho`` (finite model)."""
      fail = jnp.arange(model.phi.shape[1]) == model.fail_state
      over_states = jax.vmap(act, in_axes=(None, None, 0, 0))
      pi = jax.vmap(over_states, in_axes=(None, 0, 0, None))(qf, jnp.arange(H), model.phi, fail)
      rho = jnp.asarray(hparams.rho, model.phi.dtype)
      v = planning._evaluate_with(model, planning._factor_values, rho, pi.astype(jnp.int32))  # pylint: disable=protected-access
      return planning.initial_value(model, v)

    # The agent's cores: arguments were checked above, once (an agent without ``.unchecked``
    # cores, e.g. a plugin's own, is called through its public methods).
    core = protocols.unchecked
    plan, act, features, update = (
        core(agent.plan), core(agent.act), core(agent.regression_features), core(agent.update))
    # Theorem 1's estimation error is the d-rectangular width whatever the agent's own bonus
    # (``agent.uncertainty``, the agent's own width, is LSVI-UCB's elliptical one, for instance).
    from drjax.agents import pieces  # pylint: disable=g-import-not-at-top
    width = exact_matmuls(lambda qf, h, phi: pieces.d_rectangular(qf.pinv[h], phi))

    def make_episode(size, last=False, start=0):
      """One episode: plan, act H steps, update. ``last``: the scan's carry also holds the plan
      (the final policy is the plan of iteration K, which only plans: see below). Episodes
      ``start..size`` plan over ``plan_sizes(start, size, block)`` slots (a buffer state)."""
      sizes = plan_sizes(start, size, block) if isinstance(state0, base.AgentState) else (size,)
      branches = [functools.partial(plan, size=n) for n in sizes]

      def episode(carry, xs):
        agent_state = carry[0] if last else carry
        k, k_reset, step_keys = xs
        if len(sizes) == 1:
          qf = plan(agent_state, hparams, model, size=size)
        else:  # k: the scan's episode index, not batched under vmap (a real branch)
          qf = jax.lax.switch(_plan_index(k, sizes), branches, agent_state, hparams, model)
        s0 = env.reset(k_reset, env_params)

        def step(carry, xs):
          s, phi_all, fail = carry  # features and fail flag of s, computed once per state
          h, rand_h = xs
          a = act(qf, h, phi_all, fail)
          if noisy:
            s2, r, _ = env.step_given(rand_h, s, a, env_params)
          else:
            s2, r, _ = env.step(rand_h, s, a, env_params)
          phi = features(phi_all, a)
          phi2, fail2 = env.phi_all(s2, env_params), env.is_fail(s2, env_params)
          sidx = jnp.asarray(getattr(s, "s", -1), jnp.int32)
          s2idx = jnp.asarray(getattr(s2, "s", -1), jnp.int32)
          # Theorem 1's d-rectangular estimation error: the paper's bonus with beta = 1.
          err = width(qf, h, phi)
          wid = _widths(qf.pinv[h], phi) if widths else None
          ys = (phi, r, phi2 if not stats else None, fail2, a, sidx, s2idx, err, wid)
          return (s2, phi2, fail2), ys

        carry0 = (s0, env.phi_all(s0, env_params), env.is_fail(s0, env_params))
        _, (phi, r, next_phi, next_fail, a, sidx, s2idx, err, wid) = jax.lax.scan(
            step, carry0, (jnp.arange(H), step_keys), unroll=H if H <= 4 else 1)
        count = _counts(agent_state, k) if ("switches" in want or "dual_calls" in want) else None
        extra = dict(qf=qf, hparams=hparams) if takes_qf else {}

        def learn(agent_state):
          if stats:
            return update(agent_state, phi, r, None, None, s2idx, model=model, **extra)
          # The episode index k is not batched under vmap over seeds: one in-place slice update.
          return update(agent_state, phi, r, next_phi, next_fail, None, slot=k, **extra)

        if last:  # iteration K (not batched under vmap: a real branch) keeps the state
          agent_state = jax.lax.cond(k < K, learn, lambda s: s, agent_state)
        else:
          agent_state = learn(agent_state)
        value = _robust_value(qf) if "robust_value" in want else None
        out = (jnp.sum(r), a, sidx, jnp.sum(err), wid, count, value)
        return ((agent_state, qf) if last else agent_state), (out, qf if record_q else None)
      return episode

    # Every episode's keys, drawn before the episode scan: episode k resets with
    # split(keys[k])[0] and steps with split(split(keys[k])[1], H) (the same numbers as drawing
    # them inside the episode, but one vectorized threefry call over all K episodes instead of
    # two per episode: on CPU each is a 5-iteration while loop). So are the steps' own random
    # numbers when the environment separates them (``env.step_noise``; None if it does not).
    # One seed x 3,000 episodes of the linear MDP: 8.6-11x -> 17.7-17.9x the NumPy baseline.
    keys = jax.random.split(key, K)
    k_reset, k_steps = jnp.moveaxis(jax.vmap(jax.random.split)(keys), 1, 0)
    step_keys = jax.vmap(lambda k: jax.random.split(k, H))(k_steps)
    noise = jax.vmap(jax.vmap(lambda k: env.step_noise(k, env_params)))(step_keys)
    noisy = noise is not None
    if noisy:
      step_keys = noise
    # The final policy (``final_qf``) is planned by the episode scan itself, in one extra
    # iteration K that plans on all K episodes and learns nothing (its episode is played and
    # dropped): the plan, the largest part of the program, is traced, lowered and compiled once,
    # not a second time after the scan (issue 35: 15% of a small sweep's compile work).
    final_in_scan = "final_qf" in want
    ks = jnp.arange(K + final_in_scan, dtype=jnp.int32)
    if final_in_scan:  # iteration K's keys: any (its episode is dropped); the last episode's
      k_reset, step_keys = jax.tree_util.tree_map(lambda x: jnp.concatenate([x, x[-1:]]),
                                                  (k_reset, step_keys))
    state, ys, start, final_qf = state0, [], 0, None
    for i, end in enumerate(bounds):
      last = final_in_scan and i == len(bounds) - 1
      stop = end + 1 if last else end
      xs = jax.tree_util.tree_map(lambda x: x[start:stop], (ks, k_reset, step_keys))
      if last:
        qf0 = jax.tree_util.tree_map(  # a placeholder of the plan's shape (replaced at once)
            lambda x: jnp.zeros(x.shape, x.dtype),
            jax.eval_shape(lambda s: plan(s, hparams, model, size=end), state))
        (state, final_qf), y = jax.lax.scan(make_episode(end, last=True, start=start),
                                            (state, qf0), xs)
        y = jax.tree_util.tree_map(lambda x: x[:-1], y)  # iteration K's episode: dropped
      else:
        state, y = jax.lax.scan(make_episode(end, start=start), state, xs)
      ys.append(y)
      start = end
    ((ret, acts, sidx, err, wid, count, value), qfs) = jax.tree_util.tree_map(
        lambda *x: jnp.concatenate(x) if len(x) > 1 else x[0], *ys)
    pick = lambda name, x: x if name in want else None  # noqa: E731
    return TrainOutput(state=pick("state", state), returns=pick("returns", ret),
                       actions=pick("actions", acts), states=pick("states", sidx),
                       estimation_error=pick("estimation_error", err),
                       qf=qfs, final_qf=final_qf,
                       width_rect=pick("width_rect", None if wid is None else wid[..., 0]),
                       width_ellip=pick("width_ellip", None if wid is None else wid[..., 1]),
                       switches=pick("switches", None if count is None else count[..., 0]),
                       dual_calls=pick("dual_calls", None if count is None else count[..., 1]),
                       robust_value=pick("robust_value", value))

  return exact_matmuls(train)


def _widths(pinv, phi):
  """``[2]``: the d-rectangular and the elliptical width of ``phi [d]`` under ``pinv [d, d]``."""
  rect = jnp.sum(phi * jnp.sqrt(jnp.maximum(jnp.diagonal(pinv), 0.0)))
  ellip = jnp.sqrt(jnp.maximum(phi @ pinv @ phi, 0.0))
  return jnp.stack([rect, ellip])


def replan(env, agent: Agent, state, hparams: HParams, env_params):
  """Plans from a finished run's agent state with (possibly new) hyperparameters.

  ``Lambda^-1`` is recomputed from the stored Gram matrices and ``hparams.lam``, so the result is
  differentiable in rho, beta and lambda with the collected data held fixed (a pathwise
  derivative). Works for both forms (``AgentState`` and ``StatsState``).
  """
  _checks.environment("env", env)
  _check_kind(agent, "online", "replan")
  _checks.instance("state", state, (base.AgentState, base.StatsState),
                   "an AgentState or StatsState (TrainOutput.state)")
  _check_hparams_type(hparams)
  model = env.model(env_params) if isinstance(state, base.StatsState) else None
  return agent.plan(state, hparams, model, refactor=True)


def broadcast_hparams(hparams: HParams, horizon: int, feature_dim: int) -> tuple[HParams, tuple]:
  """Broadcasts the batch axes of rho ``[..., H, d]``, beta ``[...]`` and lam ``[...]``.

  Returns the hyperparameters flattened to one leading batch axis and the batch shape.
  """
  if not all(hasattr(hparams, f) for f in ("rho", "beta", "lam")):
    raise TypeError(f"hparams must be an HParams(rho, beta, lam), got {type(hparams).__name__}")
  horizon = _checks.integer("horizon", horizon, 1)
  feature_dim = _checks.integer("feature_dim", feature_dim, 1)
  if _checks.is_concrete(hparams):
    validate_hparams(hparams, horizon, feature_dim)
  return _broadcast(hparams, horizon, feature_dim)


def _broadcast(hparams: HParams, horizon: int, feature_dim: int) -> tuple[HParams, tuple]:
  """``broadcast_hparams`` of validated hyperparameters (no checks)."""
  rho = jnp.asarray(hparams.rho)
  beta = jnp.asarray(hparams.beta)
  lam = jnp.asarray(hparams.lam)
  batch = jnp.broadcast_shapes(rho.shape[:-2], beta.shape, lam.shape)
  n = 1
  for b in batch:
    n *= b
  rho = jnp.broadcast_to(rho, batch + (horizon, feature_dim)).reshape((n, horizon, feature_dim))
  beta = jnp.broadcast_to(beta, batch).reshape((n,))
  lam = jnp.broadcast_to(lam, batch).reshape((n,))
  return HParams(rho=rho, beta=beta, lam=lam), batch


SWEEP_OUTPUTS = ("returns", "actions", "states", "estimation_error", "final_qf")


@_programs.cached
def _compiled_sweep(env, agent: Agent, num_episodes: int, record_q: bool, params_batched: bool,
                    form: str, outputs: tuple, num_seeds: int, batch: tuple):
  """``jit(key, hparams, params -> outputs [*batch, num_seeds, ...])``: the hyperparameters'
  broadcast, the key split and the final reshape are inside the program (no eager dispatches per
  call)."""
  train = make_train(env, agent, num_episodes, record_q=record_q, form=form, outputs=outputs)
  over_seeds = jax.vmap(train, in_axes=(0, None, 0 if params_batched else None))
  over_hp = jax.vmap(over_seeds, in_axes=(None, 0, None))

  def run(key, hparams, params):
    flat, _ = _broadcast(hparams, env.horizon, env.feature_dim)
    out = over_hp(jax.random.split(key, num_seeds), flat, params)
    return jax.tree_util.tree_map(lambda x: x.reshape(batch + x.shape[1:]), out)

  return jax.jit(exact_matmuls(run))


def check_key(key, name: str = "key"):
  """A JAX PRNG key (raw ``uint32[2]`` or typed); raises ``TypeError`` naming ``name``
  (``drjax._checks.key``)."""
  _checks.key(name, key)
  return key


def _check_hparams_type(hparams) -> None:
  if not all(hasattr(hparams, f) for f in ("rho", "beta", "lam")):
    raise TypeError(f"hparams must be an HParams(rho, beta, lam) (drjax.make_hparams), got "
                    f"{type(hparams).__name__}")


def _names(name: str, x) -> tuple:
  """A sequence of field names (not one string, whose characters would be iterated)."""
  if isinstance(x, str) or not hasattr(x, "__iter__"):
    raise TypeError(f"{name} must be a sequence of names (e.g. ('returns',)), got {x!r}")
  x = tuple(x)
  if not all(isinstance(n, str) for n in x):
    raise TypeError(f"{name} must be a sequence of names (strings), got {x!r}")
  return x


def sweep(env, env_params, agent: Agent, key, *, num_seeds: int, num_episodes: int,
          hparams: HParams, record_q: bool = False, params_per_seed: bool = False,
          form: str = "auto", outputs=SWEEP_OUTPUTS) -> TrainOutput:
  """Trains ``agent`` for every hyperparameter setting x seed in ONE compiled call.

  Validates everything on the host first (``ValueError`` naming the argument), then runs
  ``jit(vmap_hparams(vmap_seeds(train)))``. Calling it again with other rho/beta/lambda values of
  the same batch shape reuses the compiled program. For sweeps too large for memory, chunking,
  several devices and result files, see ``drjax.sweeps``.

  Args:
    env: the source ``Environment``.
    env_params: its params (validated with ``env.validate``); with ``params_per_seed`` a batch
      with leading axis ``num_seeds`` (e.g. one fixed initial price per seed).
    agent: ``dr_lsvi_ucb(...)`` or ``lsvi_ucb(...)``.
    key: a JAX PRNG key; seed j uses ``jax.random.split(key, num_seeds)[j]`` for every
      hyperparameter setting (common random numbers across the grid).
    num_seeds: number of independent runs per setting.
    num_episodes: K.
    hparams: ``HParams`` with optional leading batch axes (see ``make_hparams``).
    record_q: also return every episode's Q-function.
    form: ``"auto"``, ``"stats"`` or ``"buffer"`` (see ``make_train``).
    outputs: the ``TrainOutput`` fields to return (default: everything but the agent state, so
      memory is the working set, not the buffers); add ``"state"`` for the buffers/statistics.

  Returns:
    ``TrainOutput`` whose arrays have leading axes ``batch_shape + (num_seeds,)``.
  """
  _checks.environment("env", env)
  _check_kind(agent, "online", "sweep")
  num_seeds = base.check_int("num_seeds", num_seeds)
  num_episodes = base.check_int("num_episodes (K)", num_episodes)
  record_q = _checks.boolean("record_q", record_q)
  params_per_seed = _checks.boolean("params_per_seed", params_per_seed)
  if not isinstance(hparams, HParams):
    raise TypeError(f"hparams must be an HParams (see drjax.make_hparams), got "
                    f"{type(hparams).__name__}")
  check_key(key)
  form = resolve_form(env, form)
  capacity = agent.config.capacity
  if capacity < num_episodes:
    raise ValueError(f"agent capacity {capacity} must be >= num_episodes {num_episodes}")
  H, d = env.horizon, env.feature_dim
  _checks.agent_dims(agent, (H, d, env.num_actions))
  validate_hparams(hparams, H, d)
  outputs = _names("outputs", outputs)
  bad = [o for o in outputs if o not in OUTPUTS]
  if bad:
    raise ValueError(f"outputs must be a subset of {OUTPUTS}, got {bad}")
  if params_per_seed:
    leaves = jax.tree_util.tree_leaves(env_params)
    if any(jnp.shape(x)[:1] != (num_seeds,) for x in leaves):
      raise ValueError(f"env_params must have leading axis num_seeds={num_seeds} when "
                       "params_per_seed=True")
    for j in range(num_seeds):  # every seed's params, not only the first
      _checks.env_params(env, jax.tree_util.tree_map(lambda x, j=j: x[j], env_params),
                         f"env_params[{j}]")
    one = jax.tree_util.tree_map(lambda x: x[0], env_params)
  else:
    one = env_params
    _checks.env_params(env, one, "env_params")
  _entry_features(env, one, key)
  batch = _checks.broadcast_shapes(np.shape(hparams.rho)[:-2], np.shape(hparams.beta),
                                   np.shape(hparams.lam))  # validated above; shapes only
  fn = _compiled_sweep(env, agent, num_episodes, record_q, params_per_seed, form, outputs,
                       num_seeds, batch)
  return fn(key, hparams, env_params)


def check_env_features(env, params, key) -> None:
  """Checks the features an environment produces (negative: ValueError; rows not summing to 1:
  warning). Uses the exact model when there is one (its features computed by one compiled program
  per environment), else the initial state and one random step."""
  _checks.environment("env", env)
  _checks.key("key", key)
  phi = None
  if hasattr(env, "model"):
    try:
      phi = _model_features(env)(params)
    except NotImplementedError:
      pass
  if phi is None:
    s = env.reset(key, params)
    phi = env.phi_all(s, params)
    s2, _, _ = env.step(key, s, jnp.zeros((), jnp.int32), params)
    phi = jnp.concatenate([phi, env.phi_all(s2, params)])
  check_features(phi, name=f"{type(env).__name__} features")


@_programs.cached
def _model_features(env):
  """``jit(params -> env.model(params).phi)``, one program per environment: built eagerly, the
  linear MDP's model is some 1,100 dispatched operations (and 40 small compilations cold)."""
  return jax.jit(exact_matmuls(lambda params: env.model(params).phi))


def _entry_features(env, params, key) -> None:
  """The entry points' feature check, as the environment's ``feature_check`` says: nothing more
  for ``"validate"`` (its constructor and ``validate(params)``, run before, guarantee them);
  ``check_env_features`` on every call for ``"call"``."""
  if getattr(env, "feature_check", "call") == "validate":
    return
  check_env_features(env, params, key)


def _check_kind(agent, kind: str, where: str) -> None:
  got = getattr(agent, "kind", None)
  if got != kind:
    other = "make_fit / agent.fit(dataset, hparams)" if got == "offline" else "make_train"
    raise TypeError(f"agent must be an {kind} agent: {where} runs {kind} agents; "
                    f"{getattr(agent, 'name', agent)!r} is {got or 'not an agent'}: use {other}")


class FitOutput(NamedTuple):
  """What ``make_fit``'s function returns (leading axes added by ``vmap``).

  Attributes:
    final_qf: the fitted ``QFunction`` (the learned policy).
    data_return: ``[]`` mean return of the dataset's valid trajectories (the behavior policy's
      return in the source domain).
    dataset: the ``Dataset`` (only with ``keep_data=True``, else ``None``).
  """

  final_qf: QFunction
  data_return: jax.Array
  dataset: Any = None


def make_fit(env, agent, num_trajectories: int, behavior=None, *, form: str = "auto",
             keep_data: bool = False):
  """Builds ``fit_run(key, hparams, env_params, size=None) -> FitOutput`` for an offline agent.

  One run collects ``num_trajectories`` i.i.d. trajectories of ``env`` under ``behavior``
  (default: uniform over actions) with ``fold_in(key, 0)`` -- and, for agents that need one
  (VA-DRPVI), an independent pilot dataset of the same size with ``fold_in(key, 1)`` -- and fits
  the agent in one backward induction. ``size`` (traced, <= N) uses only the first ``size``
  trajectories of both (``data.with_size``): one compilation serves a grid of dataset sizes, and
  the datasets of different sizes are nested (common random numbers). ``form``: ``"auto"`` uses
  sufficient statistics and the exact ``min_s V(s)`` for finite environments (``"buffer"``: the
  data, as for any environment). Pure: ``jax.vmap`` over keys, hyperparameters, params.
  """
  from drjax import data as data_lib  # pylint: disable=g-import-not-at-top
  _checks.environment("env", env)
  _check_kind(agent, "offline", "make_fit")
  keep_data = _checks.boolean("keep_data", keep_data)
  N = base.check_int("num_trajectories", num_trajectories)
  cfg = agent.config
  _checks.agent_dims(agent, (env.horizon, env.feature_dim, env.num_actions))
  _checks.choice("form", form, FORMS)
  if form == "stats" and not isinstance(env, FiniteEnvironment):
    raise ValueError(f"form='stats' needs a finite environment; {type(env).__name__} has none")
  finite = isinstance(env, FiniteEnvironment) and form != "buffer"
  behavior = behavior if behavior is not None else data_lib.uniform(env.num_actions)
  if not callable(behavior):
    raise TypeError(f"behavior must be a function (key, phi_all, h) -> action, got "
                    f"{type(behavior).__name__}")

  def fit_run(key, hparams, env_params, size=None) -> FitOutput:
    _checks.key("key", key)
    if hasattr(agent.fit, "unchecked"):  # the core is called below: check its hparams here, once
      offline_core._check_hparam_shapes(agent, hparams)  # pylint: disable=protected-access
      if _checks.is_concrete(hparams):
        offline_core.check_hparams(agent, hparams)
    if size is not None:
      _checks.array("size", size, ())
      _checks.indices("size", size, N + 1, "dataset sizes")
    _checks.env_params(env, env_params, "env_params")
    ds = data_lib._collect(env, env_params, behavior, jax.random.fold_in(key, 0), N)  # pylint: disable=protected-access
    pilot = None
    if agent.needs_pilot:
      pilot = data_lib._collect(env, env_params, behavior, jax.random.fold_in(key, 1), N)  # pylint: disable=protected-access
    if size is not None:
      ds = data_lib.with_size(ds, size)
      pilot = None if pilot is None else data_lib.with_size(pilot, size)
    model = env.model(env_params) if finite else None
    stats = finite and getattr(cfg, "variance", None) != "alg2"  # alg2: buffer form only
    qf = protocols.unchecked(agent.fit)(ds, hparams, pilot=pilot, model=model,
                                        form="stats" if stats else "buffer")
    valid = ds.valid.astype(ds.reward.dtype)
    ret = jnp.sum(jnp.sum(ds.reward, axis=0) * valid) / jnp.sum(valid)
    return FitOutput(final_qf=qf, data_return=ret, dataset=ds if keep_data else None)

  return exact_matmuls(fit_run)
