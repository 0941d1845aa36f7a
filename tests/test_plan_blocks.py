"""The buffer form plans over its filled slots (issue 35 item 3): ``make_train(..., blocks=B)``
plans episode k over the smallest multiple of B (or K) that covers its k filled slots, through a
``lax.switch`` on the scan's episode index. Checked: the sizes against a brute-force rule, the
runs against the whole-capacity plan (``blocks=0``: the same actions, floats to the last bits) on
the linear MDP, the put option and gymnax's CartPole for K not a multiple of and equal to a
multiple of the block, and that the switch stays a real branch under ``vmap`` over seeds."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from drjax import envs, train
from drjax.agents.base import make_hparams
from drjax.agents.lsvi import dr_lsvi_ucb, lsvi_ucb
from drjax.envs.linear_mdp import LinearMDP
from drjax.envs.put_option import PutOption
from drjax.train import _plan_index as plan_index  # pylint: disable=protected-access
from drjax.train import make_train, plan_sizes


def _smallest_cover(k, start, end, block):
  """Brute force: the smallest multiple of block in [max(block, start), end) that is >= k, else
  end (the segment's end always covers k <= end)."""
  for n in range(1, end):
    if n % block == 0 and n >= start and n >= k:
      return n
  return end


@pytest.mark.parametrize("start,end,block", [(0, 100, 16), (0, 13, 4), (0, 16, 16), (0, 5, 16),
                                             (0, 32, 8), (16, 32, 8), (17, 50, 8), (7, 7, 3)])
def test_plan_sizes_cover_each_episode_with_the_smallest_block(start, end, block):
  sizes = plan_sizes(start, end, block)
  assert sizes[-1] == end and all(a < b for a, b in zip(sizes, sizes[1:]))
  for k in range(start, end + 1):  # episode k has k filled slots; iteration K (= end) plans all
    i = int(plan_index(k, sizes))
    assert sizes[i] >= k, (k, sizes)
    assert sizes[i] == _smallest_cover(k, start, end, block), (k, sizes)
  assert plan_sizes(start, end, 0) == (end,)


def test_blocks_argument_errors():
  env = LinearMDP()
  agent = dr_lsvi_ucb(env.horizon, env.feature_dim, env.num_actions, 10)
  with pytest.raises(ValueError, match="blocks"):
    make_train(env, agent, 10, form="buffer", blocks=-1)
  with pytest.raises(TypeError, match="blocks"):
    make_train(env, agent, 10, form="buffer", blocks="16")
  with pytest.raises(ValueError, match="start"):
    plan_sizes(5, 4, 2)


def _runs(env, params, agent, hp, K, block, seeds=2):
  """The same seeds trained with ``blocks=block`` and ``blocks=0`` (every episode's plan kept)."""
  keys = jax.random.split(jax.random.PRNGKey(K), seeds)
  out = {}
  for b in (block, 0):
    fn = make_train(env, agent, K, record_q=True, form="buffer", blocks=b)
    out[b] = jax.jit(jax.vmap(fn, in_axes=(0, None, None)))(keys, hp, params)
  return out[block], out[0]


def _assert_same(a, b):
  """Actions, states, counts and flags identical; every float equal to its dtype's rounding (the
  two programs are compiled apart, so XLA may fuse an update differently: a few outputs, the
  Gram matrices included, differ in the last bit on some backends and optimization levels)."""
  la, lb = jax.tree_util.tree_leaves_with_path(a), jax.tree_util.tree_leaves(b)
  assert len(la) == len(lb) and la
  for (path, x), y in zip(la, lb):
    x, y = np.asarray(x), np.asarray(y)
    where = jax.tree_util.keystr(path)
    assert x.dtype == y.dtype and x.shape == y.shape, where
    if np.issubdtype(x.dtype, np.floating):
      eps = np.finfo(x.dtype).eps
      scale = max(1.0, float(np.max(np.abs(y))) if y.size else 1.0)
      np.testing.assert_allclose(x, y, rtol=0, atol=64 * eps * scale, err_msg=where)
    else:
      np.testing.assert_array_equal(x, y, err_msg=where)


@pytest.mark.parametrize("kind,K,block", [("dr", 13, 4), ("lsvi", 8, 4)])
def test_linear_mdp_filled_slots_same_run(kind, K, block):
  env = LinearMDP()
  params = env.make_params(delta=0.3, p=0.001, xi_norm=0.2)
  H, d, A = env.horizon, env.feature_dim, env.num_actions
  # LSVI-UCB with Sherman-Morrison keeps its next-state norms (state.quad), which the smaller
  # plans slice too.
  agent = (dr_lsvi_ucb(H, d, A, K) if kind == "dr" else
           lsvi_ucb(H, d, A, K, solver="sherman-morrison"))
  rho = np.random.default_rng(0).uniform(0.0, 0.7, size=(H, d))
  hp = make_hparams(H, d, rho=rho, beta=0.8, lam=0.4)
  blocked, full = _runs(env, params, agent, hp, K, block)
  _assert_same(blocked, full)
  # The runs learn something (the comparison is not between two empty buffers).
  assert np.all(np.asarray(blocked.state.count) == K)
  assert np.ptp(np.asarray(blocked.qf.w), axis=1).max() > 0.01  # the plans change over episodes


@pytest.mark.parametrize("kind", ["dr"])
def test_put_option_filled_slots_same_run(kind):
  # d = 21 > 8: the Sherman-Morrison solver. K = 10 with blocks of 4: sizes 4, 8, 10.
  env = PutOption()
  params = env.default_params()
  H, d, A = env.horizon, env.feature_dim, env.num_actions
  K = 10
  agent = (dr_lsvi_ucb if kind == "dr" else lsvi_ucb)(H, d, A, K)
  hp = make_hparams(H, d, rho=0.3, beta=1.0, lam=0.1)
  blocked, full = _runs(env, params, agent, hp, K, 4)
  _assert_same(blocked, full)


def test_cartpole_filled_slots_same_run_in_float32():
  pytest.importorskip("gymnax")
  from drjax.agents import registry  # pylint: disable=g-import-not-at-top
  env = envs.make("cartpole", horizon=6, obs_dims=(2, 3), centers_per_dim=3)
  params = env.default_params()
  H, d = env.horizon, env.feature_dim
  K = 12  # a multiple of the block: sizes 4, 8, 12
  with jax.enable_x64(False):  # the engine's default precision (the suite runs in float64)
    agent = registry.make("dr-lsvi-ucb", env, capacity=K, reward="regressed")
    hp = make_hparams(H, d, rho=jnp.full((H, d), 0.2, jnp.float32), beta=10.0, lam=1.0)
    blocked, full = _runs(env, params, agent, hp, K, 4)
  assert np.asarray(blocked.qf.w).dtype == np.float32
  _assert_same(blocked, full)


def _all_eqns(jaxpr):
  """Every equation of a jaxpr, nested ones included."""
  for eqn in jaxpr.eqns:
    yield eqn
    for v in eqn.params.values():
      for sub in (v if isinstance(v, (tuple, list)) else (v,)):
        inner = getattr(sub, "jaxpr", None)
        if inner is not None:
          yield from _all_eqns(inner if hasattr(inner, "eqns") else inner.jaxpr)


def _conds(jaxpr):
  """Every ``cond`` equation of a jaxpr, nested ones included."""
  return [e for e in _all_eqns(jaxpr) if e.primitive.name == "cond"]


def test_switch_is_a_real_branch_under_vmap():
  """The plan size is chosen by the scan's episode index, which vmap over seeds and
  hyperparameters does not batch: the vmapped program keeps a ``cond`` with one branch per plan
  size (a batched index would have become a ``select_n`` over every branch's outputs)."""
  env = LinearMDP()
  params = env.make_params(delta=0.3, p=0.001, xi_norm=0.2)
  H, d, A = env.horizon, env.feature_dim, env.num_actions
  K = 10
  agent = dr_lsvi_ucb(H, d, A, K)
  hp = make_hparams(H, d, rho=0.2, beta=1.0, lam=0.1)
  fn = make_train(env, agent, K, form="buffer", blocks=4)
  over = jax.vmap(jax.vmap(fn, in_axes=(0, None, None)), in_axes=(None, 0, None))
  hps = jax.tree_util.tree_map(lambda x: jnp.stack([x, x]), hp)
  jaxpr = jax.make_jaxpr(over)(jax.random.split(jax.random.PRNGKey(0), 3), hps, params).jaxpr
  sizes = plan_sizes(0, K, 4)
  assert len(sizes) == 3
  assert [len(e.params["branches"]) for e in _conds(jaxpr)].count(len(sizes)) >= 1
  # Without blocks there is no such switch.
  fn0 = make_train(env, agent, K, form="buffer", blocks=0)
  jaxpr0 = jax.make_jaxpr(jax.vmap(fn0, in_axes=(0, None, None)))(
      jax.random.split(jax.random.PRNGKey(0), 3), hp, params).jaxpr
  assert all(len(e.params["branches"]) != len(sizes) for e in _conds(jaxpr0))


def test_stats_form_and_segments_take_no_blocks():
  """The sufficient-statistics form has no slots, and segmented runs plan per segment: one plan
  size each (``plan_sizes`` is not used)."""
  env = LinearMDP()
  params = env.make_params(delta=0.3, p=0.001, xi_norm=0.2)
  H, d, A = env.horizon, env.feature_dim, env.num_actions
  agent = dr_lsvi_ucb(H, d, A, 40)
  hp = make_hparams(H, d, rho=0.2, beta=1.0, lam=0.1)
  assert len(train.segment_bounds(40, ratio=2.0)) == 3
  for kw in (dict(form="stats"), dict(form="buffer", segments=True)):
    jaxpr = jax.make_jaxpr(make_train(env, agent, 40, blocks=4, **kw))(
        jax.random.PRNGKey(0), hp, params).jaxpr
    assert not any(len(e.params["branches"]) > 2 for e in _conds(jaxpr)), kw
  assert train.PLAN_BLOCK > 0


def test_small_buffer_sweeps_plan_the_whole_capacity(monkeypatch):
  """A sweep small enough to compile at -O0 (compiling is its wait) builds one plan: its chunk
  program gets ``blocks=0``; larger buffer-form sweeps get make_train's default; finite
  environments (sufficient statistics) and offline agents are left alone."""
  from drjax import sweeps  # pylint: disable=g-import-not-at-top
  from drjax.sweeps import program, running  # pylint: disable=g-import-not-at-top

  class Online:
    kind = "online"

  small = sweeps.SweepConfig(env="put-option", agents=("dr-lsvi-ucb",), seeds=2, episodes=4)
  put = PutOption()
  rule = running._plan_blocks  # pylint: disable=protected-access
  assert rule(small, put, Online(), 2) == 0
  assert rule(small, put, Online(), running.BUFFER_O0_MAX_WORK // small.episodes + 1) is None
  assert rule(small, LinearMDP(), Online(), 2) is None
  seen = []
  real = program.make_train

  def spy(*args, **kw):
    seen.append(kw.get("blocks", "absent"))
    return real(*args, **kw)

  monkeypatch.setattr(program, "make_train", spy)
  res = sweeps.run(sweeps.SweepConfig(env="put-option", env_args={"num_anchors": 4, "horizon": 3},
                                      agents=("dr-lsvi-ucb",), seeds=2, episodes=4,
                                      test_episodes=4))
  assert seen == [0] and len(res.df) == 2


@pytest.mark.parametrize("env_name,make", [("put", dr_lsvi_ucb), ("put", lsvi_ucb),
                                           ("linear", dr_lsvi_ucb)])
def test_a_filled_slot_plan_never_copies_every_step_of_a_buffer(env_name, make):
  """``plan(..., size=n)`` reads each step's first n rows where the step uses them: no value of
  the traced plan holds the first n rows of every step of a buffer (``[H, n, d]`` features,
  ``[H, n, A, d]`` next-state features, ``[H, n, A]`` LSVI-UCB's norms), which the plan used to
  cut from the ``[H, K, ...]`` buffers (a copy of all of them) before the induction. Both the
  scanned (put option, H = 10) and the unrolled (linear MDP, H = 3) inductions."""
  env = PutOption() if env_name == "put" else LinearMDP()
  H, d, A = env.horizon, env.feature_dim, env.num_actions
  K, n = 40, 24
  agent = make(H, d, A, K)
  hp = make_hparams(H, d, rho=0.2, beta=1.0, lam=0.1)
  state = agent.init(jnp.zeros((H, d)), lam=0.1)
  jaxpr = jax.make_jaxpr(lambda s: agent.plan(s, hp, size=n))(state).jaxpr
  cut = {(H, n, d), (H, n, A, d), (H, n, A)}
  shapes = {tuple(v.aval.shape) for e in _all_eqns(jaxpr) for v in e.outvars}
  assert not shapes & cut, shapes & cut
  assert (H, K, A, d) == state.next_phi.shape  # the buffers themselves are whole
