"""Every public function rejects bad arguments with a drjax error naming the argument.

A table of specs, one per public function, constructor or method (``drjax.__all__``, the public
modules ``drjax.agents`` (base, state, registry, offline, lsvi), ``envs``, ``planning``,
``evaluate``, ``put_lattice``, ``robust`` (``linalg``, ``duals_tv``, ``duals_kl_chi2``),
``regularized``, ``sensitivity``, ``data``, ``train`` and the methods of ``Agent`` /
``OfflineAgent`` / the environments). A spec is ``(label, function, good keyword arguments,
{argument: bad values})``; each bad value replaces one good argument, and the call must raise the
expected ``TypeError`` / ``ValueError`` whose message names the argument (as a word). The bad
values follow the argument's kind (``INT``, ``NUM``, ``ARR``, ``IDX``, ``CHOICE``, ``BOOL``,
``OBJ``, ``KEY``): strings, booleans, NaN, wrong shapes, out-of-range values and indices, objects
of the wrong class.

Every error must be raised on the host before anything is traced: with JAX's traceback filtering
off, no frame of the error's traceback may lie inside JAX (a ``jit`` / ``vmap`` / ``scan`` being
traced). The calls validate and stop, so the whole table runs in seconds.
"""

from __future__ import annotations

import math
import re
import traceback

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import drjax
from drjax import data, envs, evaluate, planning, put_lattice, regularized, robust, sensitivity
from drjax import duals_kl_chi2, duals_tv, linalg
from drjax import train as train_lib
from drjax.agents import base, compose, lsvi, offline, registry, state
from drjax.envs import put_option as po

NAN = math.nan

# ---------------------------------------------------------------------------------------------
# Bad values by argument kind: (value, expected error type).


def _required(out, optional):
  """``None`` is a bad value of a required argument, the default of an optional one."""
  return [item for item in out if not (optional and item[0] is None)]


def INT(lo=1, hi=None, optional=False):  # noqa: N802
  """A Python / NumPy integer >= lo (<= hi)."""
  out = [("3", TypeError), (True, TypeError), (2.5, TypeError), (NAN, TypeError),
         (None, TypeError), (lo - 1, ValueError)]
  return _required(out + ([(hi + 1, ValueError)] if hi is not None else []), optional)


def NUM(low=None, high=None, shape_ok=False, optional=False):  # noqa: N802
  """A real scalar; ``low`` / ``high``: out-of-range values (ValueError)."""
  out = [("abc", TypeError), (True, TypeError), (None, TypeError), (NAN, ValueError)]
  if not shape_ok:
    out.append((np.zeros((2, 7)), ValueError))
  out += [(v, ValueError) for v in (low, high) if v is not None]
  return _required(out, optional)


def ARR(shape, bad_value=None, nan=True, optional=False):  # noqa: N802
  """A real array of ``shape``; a wrong shape, NaN (if checked) and ``bad_value`` filled."""
  wrong = tuple(s + 1 for s in shape) if shape else (2, 7)
  out = [("abc", TypeError), (True, TypeError), (None, TypeError),
         (np.zeros(wrong), ValueError)]
  if nan:
    out.append((np.full(shape, NAN), ValueError))
  if bad_value is not None:
    out.append((np.full(shape, bad_value), ValueError))
  return _required(out, optional)


def IDX(size):  # noqa: N802
  """A 0-based index in [0, size - 1]."""
  return [(size, ValueError), (-1, ValueError), (1.5, TypeError), ("0", TypeError),
          (True, TypeError)]


def CHOICE():  # noqa: N802
  return [("bogus", ValueError), (3, TypeError), (None, TypeError)]


def BOOL():  # noqa: N802
  return [("yes", TypeError), (1, TypeError), (None, TypeError)]


def OBJ(*others, optional=False):  # noqa: N802
  """An object of the wrong class (TypeError)."""
  return _required([(None, TypeError), ("x", TypeError), (object(), TypeError)] + [
      (o, TypeError) for o in others], optional)


def KEY():  # noqa: N802
  return [(3, TypeError), ("key", TypeError), (np.zeros(2), TypeError),
          (jax.random.split(jax.random.PRNGKey(0), 2), TypeError)]


# ---------------------------------------------------------------------------------------------
# Valid objects (built without compiling anything heavy).

H, S, A, D = 3, 5, 16, 4
LIN = drjax.LinearMDP()
LP = LIN.make_params()
PUT = drjax.PutOption(num_anchors=4, horizon=3)
PP = PUT.make_params()
PUT_D = PUT.feature_dim


def _random_env():
  env = drjax.RandomLinearMDP(num_states=3, num_actions=2, feature_dim=2, horizon=2)
  phi = np.zeros((2, 3, 2, 2))
  phi[:, 0, :, 0] = 1.0  # the fail state 0
  phi[:, 1:, :, 1] = 1.0
  mu = np.zeros((2, 2, 3))
  mu[:, 0, 0] = 1.0
  mu[:, 1, 1:] = 0.5
  theta = np.tile([0.0, 0.5], (2, 1))
  return env, env.make_params(phi, theta, mu, 0, np.array([0.0, 0.5, 0.5]))


RND, RP = _random_env()
MODEL = LIN.model(LP)
RHO = np.zeros((H, D))
POL = np.zeros((H, S), np.int32)
KEY0 = jax.random.PRNGKey(0)
TYPED_KEY = jax.random.key(0)
AG = drjax.dr_lsvi_ucb(H, D, A, 4)
LS = drjax.lsvi_ucb(H, D, A, 4)
PUT_AG = drjax.dr_lsvi_ucb(3, PUT_D, 2, 4)
OFF = drjax.drpvi(H, D, A)
HP = drjax.make_hparams(H, D)
OHP = offline.make_hparams(OFF)
QF = base.QFunction(w=jnp.zeros((H, D)), pinv=jnp.broadcast_to(jnp.eye(D), (H, D, D)),
                    beta=jnp.zeros(()), top=jnp.ones((H,)), nu=jnp.zeros((H, D)),
                    alpha=jnp.zeros((H, D)))
QFS = jax.tree_util.tree_map(lambda x: jnp.stack([x, x]), QF)
PUT_QF = base.QFunction(w=jnp.zeros((3, PUT_D)), pinv=jnp.broadcast_to(jnp.eye(PUT_D),
                                                                       (3, PUT_D, PUT_D)),
                        beta=jnp.zeros(()), top=jnp.ones((3,)), nu=jnp.zeros((3, PUT_D)),
                        alpha=jnp.zeros((3, PUT_D)))
STATE = AG.init(LIN.theta(LP), HP.lam)
STATS = AG.init_stats(LIN.theta(LP), S, HP.lam)
PHI_ALL = MODEL.phi[0, 0]  # [A, d]
LIN_S0 = envs.LinearMDPState(s=jnp.asarray(0, jnp.int32), h=jnp.asarray(0, jnp.int32))
PUT_S0 = po.PutOptionState(price=jnp.asarray(100.0), exited=jnp.asarray(False),
                           h=jnp.asarray(0, jnp.int32))
RND_S0 = envs.RandomMDPState(s=jnp.asarray(1, jnp.int32), h=jnp.asarray(0, jnp.int32))
N = 2
DS = data.Dataset(phi=np.zeros((H, N, D)), action=np.zeros((H, N), np.int32),
                  reward=np.zeros((H, N)), next_phi=np.zeros((H, N, A, D)),
                  next_fail=np.zeros((H, N), bool), state=np.zeros((H, N), np.int32),
                  next_state=np.zeros((H, N), np.int32), theta=np.zeros((H, D)),
                  valid=np.ones((N,), bool))
M6 = np.full((D, 6), 0.1)
V6 = np.linspace(0.0, 3.0, 6)
MU3 = np.array([0.2, 0.3, 0.5])
V3 = np.array([1.0, 0.0, 2.0])
SPD = np.eye(3) * 2.0
PUT_POLICY = put_lattice.PutPolicy(breakpoints=jnp.zeros((3, 2)), valid=jnp.zeros((3, 2), bool),
                                   region_action=jnp.ones((3, 3), jnp.int32),
                                   count=jnp.zeros((3,), jnp.int32))
FAMILY = sensitivity.Family(sample=lambda k: None, project=lambda z: z, kernel=lambda z: z)
ACTION_FN = lambda h, s: jnp.int32(1)  # noqa: E731
BEHAVIOR = data.uniform(A)


def _bad_model(**changes):
  return MODEL._replace(**{k: v for k, v in changes.items()})


MODEL_BAD = OBJ(LP, _bad_model(mu=MODEL.mu[:, :2])) + [
    (_bad_model(phi=MODEL.phi - 1.0), ValueError), (_bad_model(mu=2 * MODEL.mu), ValueError),
    (_bad_model(fail_state=jnp.asarray(9, jnp.int32)), ValueError)]
QF_BAD = OBJ(RHO, QF._replace(w=jnp.zeros((H + 1, D))))
AGENT_BAD = OBJ(LIN, drjax.dr_lsvi_ucb(H, D + 1, A, 4))
ENV_BAD = OBJ(AG)
LIN_PARAMS_BAD = OBJ(PP)

# Bad values whose error is a ValueError although the value is an object (shape mismatches).
for i, (v, e) in enumerate(QF_BAD):
  if isinstance(v, base.QFunction):
    QF_BAD[i] = (v, ValueError)
for i, (v, e) in enumerate(AGENT_BAD):
  if hasattr(v, "config"):
    AGENT_BAD[i] = (v, ValueError)
for i, (v, e) in enumerate(MODEL_BAD):
  if hasattr(v, "phi") and v.mu.shape[1] == 2:
    MODEL_BAD[i] = (v, ValueError)
MODEL_BAD_OPT = _required(MODEL_BAD, True)
MU_BAD = [("abc", TypeError), (True, TypeError), (None, TypeError),
          (np.full((3, 3), 1 / 3), ValueError), (np.full(3, NAN), ValueError),
          (np.full(3, 0.5), ValueError)]


# ---------------------------------------------------------------------------------------------
# The table: (label, function, good kwargs, {argument: [(bad value, error), ...]}).
# A bad value may be ``(value, error, text)`` when the message names the argument otherwise.

SPECS = []


def spec(label, fn, good, bad):
  SPECS.append((label, fn, good, bad))


# drjax.agents.base and the top level ---------------------------------------------------------
spec("make_hparams", drjax.make_hparams, dict(horizon=H, feature_dim=D, rho=0.1, beta=1.0,
                                               lam=0.1),
     dict(horizon=INT(), feature_dim=INT(), rho=NUM(-0.1, 1.5, shape_ok=True) + [
         (np.zeros((2, D)), ValueError), ("0.5", TypeError)],
          beta=NUM(-1.0, shape_ok=True), lam=NUM(0.0, shape_ok=True) + [("big", TypeError)],
          dtype=[(int, TypeError), ("float33", TypeError)]))
spec("rho_array", drjax.rho_array, dict(horizon=H, feature_dim=D, value=0.5, at=[(0, 3)]),
     dict(horizon=INT(), feature_dim=INT(), value=NUM(-0.5, shape_ok=True),
          at=[((0, 3), TypeError), ([(1, 4)], ValueError), ([(3, 0)], ValueError),
              ([(0.5, 1)], TypeError), ("03", TypeError), (5, TypeError), ([(-1, 0)], ValueError),
              ([(0, 1, 2)], TypeError)]))
spec("validate_hparams", drjax.validate_hparams, dict(hparams=HP, horizon=H, feature_dim=D),
     dict(hparams=OBJ(RHO) + [(HP._replace(rho=jnp.full((H, D), 2.0)), ValueError, "rho"),
                              (HP._replace(lam=jnp.asarray(NAN)), ValueError, "lam"),
                              (HP._replace(beta="x"), TypeError, "beta")],
          horizon=INT(), feature_dim=INT()))
spec("check_features", drjax.check_features, dict(phi=np.full((2, 3), 1 / 3), name="phi",
                                                   atol=1e-6),
     dict(phi=[("abc", TypeError), (np.full((2, 3), -1.0), ValueError),
               (np.full((2, 3), NAN), ValueError), (1.0, ValueError), (True, TypeError)],
          atol=NUM(-1.0), name=[(3, TypeError, "name")]))
spec("check_int", base.check_int, dict(name="count", value=3, minimum=1),
     dict(value=[(v, e, "count") for v, e in INT()]))
spec("init_state", base.init_state, dict(theta=np.zeros((H, D)), horizon=H, feature_dim=D,
                                          num_actions=A, capacity=4, lam=0.1),
     dict(theta=ARR((H, D), nan=False), horizon=INT(), feature_dim=INT(), num_actions=INT(),
          capacity=INT(), lam=NUM(0.0, optional=True), solver=CHOICE(), quad=BOOL()))
spec("init_stats_state", base.init_stats_state, dict(theta=np.zeros((H, D)), horizon=H,
                                                      feature_dim=D, num_states=S, lam=0.1),
     dict(theta=ARR((H, D), nan=False), horizon=INT(), feature_dim=INT(), num_states=INT(),
          lam=NUM(-1.0, optional=True), solver=CHOICE(),
          phi_table=ARR((H, S, A, D), nan=False, optional=True)))
spec("observe", base.observe, dict(state=STATE, h=0, phi=np.zeros(D), reward=0.0,
                                    next_phi_all=np.zeros((A, D)), next_fail=False),
     dict(state=OBJ(STATS), h=IDX(H), phi=ARR((D,), nan=False), reward=ARR((), nan=False)[:4],
          next_phi_all=ARR((A, D), nan=False), next_fail=[("no", TypeError), (1.0, TypeError),
                                                          (np.zeros(2, bool), ValueError)]))
spec("store_episode", base.store_episode, dict(state=STATE, k=0, phi=np.zeros((H, D)),
                                                reward=np.zeros(H), next_phi=np.zeros((H, A, D)),
                                                next_fail=np.zeros(H, bool)),
     dict(state=OBJ(STATS), k=IDX(4), phi=ARR((H, D), nan=False), reward=ARR((H,), nan=False),
          next_phi=ARR((H, A, D), nan=False),
          next_fail=[("no", TypeError), (np.zeros(H), TypeError),
                     (np.zeros(H + 1, bool), ValueError)]))
spec("update_stats", base.update_stats, dict(state=STATS, phi=np.zeros((H, D)), reward=np.zeros(H),
                                              next_state=np.zeros(H, np.int32)),
     dict(state=OBJ(STATE), phi=ARR((H, D), nan=False), reward=ARR((H,), nan=False),
          next_state=[(np.full(H, S, np.int32), ValueError), (np.full(H, -1), ValueError),
                      (np.zeros(H), TypeError), (np.zeros(H + 1, np.int32), ValueError)],
          phi_table=ARR((H, S, A, D), nan=False, optional=True)))
spec("end_episode", base.end_episode, dict(state=STATE), dict(state=OBJ(QF)))
spec("valid_mask", base.valid_mask, dict(state=STATE), dict(state=OBJ(STATS)))
spec("sqrt_diag", base.sqrt_diag, dict(pinv=SPD), dict(pinv=[("abc", TypeError),
                                                            (np.zeros((2, 3)), ValueError),
                                                            (np.zeros(3), ValueError)]))
spec("diag_bonus", base.diag_bonus, dict(pinv=SPD, phi=np.zeros(3), beta=1.0, form="paper"),
     dict(pinv=[("abc", TypeError), (np.zeros((2, 3)), ValueError)],
          phi=[("abc", TypeError), (np.zeros(4), ValueError)], beta=[("abc", TypeError)],
          form=CHOICE()))
spec("ellipsoid_bonus", base.ellipsoid_bonus, dict(pinv=SPD, phi=np.zeros(3), beta=1.0),
     dict(pinv=[("abc", TypeError), (np.zeros((2, 3)), ValueError)],
          phi=[("abc", TypeError), (np.zeros(4), ValueError)], beta=[(None, TypeError)]))
spec("clip_tops", base.clip_tops, dict(horizon=H, form="paper", robust=True, dtype=jnp.float32),
     dict(horizon=INT(), form=CHOICE(), robust=BOOL()))

# Agent constructors and methods.
for name, fn in (("dr_lsvi_ucb", drjax.dr_lsvi_ucb), ("lsvi_ucb", drjax.lsvi_ucb)):
  extra = (dict(bonus=CHOICE(), alpha=CHOICE(), grid_size=INT(0)) if name == "dr_lsvi_ucb"
           else dict(clip=CHOICE(), fail_zero=BOOL()))
  spec(name, fn, dict(horizon=H, feature_dim=D, num_actions=A, capacity=4),
       dict(horizon=INT(), feature_dim=INT(), num_actions=INT(), capacity=INT(),
            tie_break=CHOICE(), solver=CHOICE(), known=OBJ(optional=True), **extra))
spec("agent.init", AG.init, dict(theta=np.zeros((H, D)), lam=0.1, capacity=4),
     dict(theta=ARR((H, D), nan=False), lam=NUM(0.0, optional=True),
          capacity=INT(optional=True)))
spec("agent.init_stats", AG.init_stats, dict(theta=np.zeros((H, D)), num_states=S, lam=0.1),
     dict(theta=ARR((H, D), nan=False), num_states=INT(), lam=NUM(0.0, optional=True),
          model=MODEL_BAD_OPT))
spec("agent.plan", AG.plan, dict(state=STATE, hparams=HP),
     dict(state=OBJ(QF), hparams=OBJ(RHO) + [(HP._replace(rho=jnp.zeros((2, D))), ValueError, "rho"),
                                        (HP._replace(rho=jnp.full((H, D), 2.0)), ValueError,
                                         "rho"),
                                        (HP._replace(beta=jnp.asarray(NAN)), ValueError, "beta")],
          size=INT(1, 4, optional=True), refactor=BOOL()))
spec("agent.plan(stats)", AG.plan, dict(state=STATS, hparams=HP, model=MODEL),
     dict(model=[(None, ValueError)] + MODEL_BAD_OPT, hparams=[(OHP._replace(rho=jnp.zeros(3)),
                                                      ValueError, "rho")]))
for label, method in (("agent.act", AG.act), ("agent.q_values", AG.q_values),
                      ("offline.act", OFF.act), ("offline.q_values", OFF.q_values)):
  spec(label, method, dict(qf=QF, h=0, phi_all=PHI_ALL, fail=False),
       dict(qf=QF_BAD, h=IDX(H), phi_all=[("abc", TypeError), (np.zeros((A, D + 1)), ValueError),
                                          (True, TypeError)],
            fail=[("no", TypeError), (0.5, TypeError), (None, TypeError)]))
for label, method in (("agent.bonus", AG.bonus), ("agent.uncertainty", AG.uncertainty),
                      ("offline.width", OFF.width)):
  spec(label, method, dict(qf=QF, h=0, phi=np.zeros(D)),
       dict(qf=QF_BAD, h=IDX(H), phi=[("abc", TypeError), (np.zeros(D + 1), ValueError)]))
spec("agent.regression_features", AG.regression_features, dict(phi_all=PHI_ALL, a=0),
     dict(phi_all=ARR((A, D), nan=False), a=IDX(A)))
spec("agent.update", AG.update, dict(state=STATE, phi=np.zeros((H, D)), reward=np.zeros(H),
                                      next_phi=np.zeros((H, A, D)), next_fail=np.zeros(H, bool),
                                      next_state=None, slot=0),
     dict(state=OBJ(QF), slot=IDX(4), phi=ARR((H, D), nan=False)))
spec("agent.observe", AG.observe, dict(state=STATE, h=0, phi=np.zeros(D), reward=0.0,
                                        next_phi_all=np.zeros((A, D)), next_fail=False),
     dict(state=OBJ(), h=IDX(H)))

# drjax.agents.offline ------------------------------------------------------------------------
OFFLINE_OPTS = dict(penalty=CHOICE(), truncation=CHOICE(), vmin=CHOICE(), fail_zero=BOOL(),
                    tie_break=CHOICE())
for name, fn in (("drpvi", offline.drpvi), ("va_drpvi", offline.va_drpvi),
                 ("r2pvi", offline.r2pvi), ("r2pvi_kl", offline.r2pvi_kl)):
  extra = {"drpvi": dict(monotone=BOOL()), "va_drpvi": dict(variance=CHOICE(), monotone=BOOL()),
           "r2pvi": dict(divergence=CHOICE())}.get(name, {})
  spec(name, fn, dict(horizon=H, feature_dim=D, num_actions=A),
       dict(horizon=INT(), feature_dim=INT(), num_actions=INT(), **OFFLINE_OPTS, **extra))
spec("drpvi_monotone", offline.drpvi_monotone, dict(horizon=H, feature_dim=D, num_actions=A),
     dict(horizon=INT(), feature_dim=INT(), num_actions=INT(), **OFFLINE_OPTS,
          monotone=[(True, ValueError, "do not pass monotone")]))
spec("va_drpvi_monotone", offline.va_drpvi_monotone,
     dict(horizon=H, feature_dim=D, num_actions=A),
     dict(horizon=INT(), feature_dim=INT(), num_actions=INT(), **OFFLINE_OPTS,
          monotone=[(True, ValueError, "do not pass monotone")],
          variance=[("alg2", ValueError, "monotone=True applies to variance='alg3' only")]))
spec("offline.make_agent", offline.make_agent,
     dict(name="X", hparams_type=offline.DRPVIHParams, horizon=H, feature_dim=D, num_actions=A,
          oracle=compose.TVConstrained()),
     dict(horizon=INT(), feature_dim=INT(), num_actions=INT(), oracle=OBJ(), width=CHOICE(),
          truncation=CHOICE(), reward=CHOICE(), vmin=CHOICE(), fail_zero=BOOL(),
          tie_break=CHOICE(), hparams_type=OBJ(), scale=OBJ(), variance=CHOICE()[:2],
          grid_size=INT(0)))
spec("lsvi.make_agent", lsvi.make_agent,
     dict(name="X", horizon=H, feature_dim=D, num_actions=A, capacity=4,
          oracle=compose.TVConstrained()),
     dict(horizon=INT(), feature_dim=INT(), num_actions=INT(), capacity=INT(), oracle=OBJ(),
          width=CHOICE(), reward=CHOICE(), clip=CHOICE(), tie_break=CHOICE(), fail_zero=BOOL(),
          solver=CHOICE(), scale=OBJ()))
spec("envs.register", envs.register, dict(name="linear-mdp", cls=envs.LinearMDP),
     dict(name=[(None, TypeError), ("", TypeError), (3, TypeError),
                ("random", ValueError, "built-in environment")],
          cls=[(None, TypeError), ("x", TypeError)], sweep=OBJ(optional=True)))
spec("envs.names", envs.names, dict(), dict())
spec("pevi", offline.pevi, dict(horizon=H, feature_dim=D, num_actions=A),
     dict(horizon=INT(), feature_dim=INT(), num_actions=INT(), truncation=CHOICE(),
          fail_zero=BOOL(), tie_break=CHOICE()))
spec("drvi_l", offline.drvi_l, dict(horizon=H, feature_dim=D, num_actions=A, tol=1e-6),
     dict(horizon=INT(), feature_dim=INT(), num_actions=INT(), tol=NUM(0.0, 1.5),
          penalty=CHOICE()))
spec("offline.make_hparams", offline.make_hparams, dict(agent=OFF, rho=0.1, beta=1.0, lam=0.1),
     dict(agent=OBJ(AG), rho=NUM(-0.1, 1.5, shape_ok=True), beta=NUM(-1.0, shape_ok=True),
          lam=NUM(0.0, shape_ok=True), dtype=[(int, TypeError)],
          var_shift=[(0.0, ValueError)]))
spec("check_hparams", offline.check_hparams, dict(agent=OFF, hparams=OHP),
     dict(agent=OBJ(AG), hparams=OBJ(HP._replace(rho="x")) + [
         (OHP._replace(rho=jnp.full((H, D), 2.0)), ValueError, "rho")]))
spec("theory_hparams", offline.theory_hparams, dict(agent=OFF, num_trajectories=10, delta=0.1),
     dict(agent=OBJ(AG), num_trajectories=INT(), delta=NUM(0.0, 1.0)))
spec("atoms", offline.atoms, dict(ds=DS, form="buffer"),
     dict(ds=OBJ(DS._asdict()), form=CHOICE(), model=MODEL_BAD_OPT,
          weights=[(np.zeros((H, N + 1)), ValueError), ("w", TypeError)]))
spec("offline.fit", OFF.fit, dict(ds=DS, hparams=OHP),
     dict(ds=OBJ(), hparams=OBJ(HP) + [(OHP._replace(rho=jnp.zeros((2, D))), ValueError, "rho")],
          form=CHOICE(), model=MODEL_BAD_OPT))
spec("registry.get", registry.get, dict(name="drpvi"),
     dict(name=[("cql", ValueError, "agent"), (3, TypeError), (None, TypeError)]))
spec("registry.names", registry.names, dict(kind=None), dict(kind=[("both", ValueError),
                                                                   (3, ValueError)]))
spec("registry.specs", registry.specs, dict(kind=None), dict(kind=[("both", ValueError)]))
spec("registry.make", registry.make, dict(name="drpvi", env=LIN),
     dict(name=[("cql", ValueError, "agent"), (3, TypeError)],
          env=[(None, TypeError), ("x", TypeError), ((3, 4), ValueError),
               ((3, 4.5, 16), TypeError), ((3, 0, 16), ValueError)],
          penalty=[("bogus", ValueError)], bonus=[("paper", ValueError)]))
spec("registry.make_hparams", registry.make_hparams, dict(name="dr-lsvi-ucb", env=LIN),
     dict(name=[("cql", ValueError, "agent")], env=[(None, TypeError), ((3, 4), ValueError)],
          rho=NUM(-0.1, 2.0, shape_ok=True), lam=NUM(0.0, shape_ok=True),
          reg_weight=[(0.1, ValueError)]))
spec("registry.reward_source", registry.reward_source, dict(name="drpvi"),
     dict(name=[("cql", ValueError, "agent"), (3, TypeError)],
          reward=[("learned", ValueError, "reward")], bogus=[(1, ValueError, "option")]))
spec("registry.register", registry.register, dict(spec=registry.get("drpvi")),
     dict(spec=OBJ(registry.get("drpvi").describe())))
spec("registry.unregister", registry.unregister, dict(name="no-such-agent"),
     dict(name=[("cql", ValueError, "agent"), (3, TypeError), ("drpvi", ValueError, "built-in")]))
spec("registry.source", registry.source, dict(name="drpvi"),
     dict(name=[("cql", ValueError, "agent"), (3, TypeError)]))
spec("registry.bounds", registry.bounds, dict(hparams_type=None, hparam="kappa"),
     dict(hparams_type=[(int, TypeError), ("x", TypeError)], hparam=[(3, TypeError),
                                                                    (None, TypeError)]))
spec("registry.check_hparam", registry.check_hparam,
     dict(name="va-drpvi", hparam="var_shift", values=0.5),
     dict(name=[("cql", ValueError, "agent")], hparam=[("kappa", ValueError, "kappa"), (3, TypeError)],
          values=[(-1.0, ValueError, "var_shift"), (NAN, ValueError, "var_shift"),
                  ("abc", TypeError, "var_shift"), (None, TypeError, "var_shift")]))
spec("stats_atoms", lsvi.stats_atoms, dict(model=MODEL, horizon=H, num_states=S),
     dict(model=MODEL_BAD, horizon=INT(), num_states=INT()))

# drjax.envs ----------------------------------------------------------------------------------
spec("LinearMDP.make_params", LIN.make_params, dict(delta=0.3, p=0.001, xi_norm=0.1),
     dict(delta=NUM(2.0, shape_ok=True), p=NUM(-0.1, 1.5, shape_ok=True),
          xi_norm=NUM(-0.1, 0.8, shape_ok=True), q=NUM(-0.1, 1.5, shape_ok=True, optional=True)))
spec("target_params", envs.target_params, dict(source_params=LP, q=0.5),
     dict(source_params=LIN_PARAMS_BAD, q=NUM(-0.5, 1.5, shape_ok=True)))
spec("LinearMDP.validate", LIN.validate, dict(params=LP),
     dict(params=LIN_PARAMS_BAD + [(LP._replace(q=jnp.asarray(1.5)), ValueError, "q"),
                                   (LP._replace(p="x"), TypeError, "p")]))
spec("LinearMDP.model", LIN.model, dict(params=LP), dict(params=LIN_PARAMS_BAD))
spec("LinearMDP.theta", LIN.theta, dict(params=LP), dict(params=LIN_PARAMS_BAD))
spec("LinearMDP.reset", LIN.reset, dict(key=KEY0, params=LP),
     dict(key=_required(KEY(), True), params=LIN_PARAMS_BAD))
spec("LinearMDP.step", LIN.step, dict(key=KEY0, state=LIN_S0, action=0, params=LP),
     dict(key=KEY(), state=OBJ(PUT_S0) + [(LIN_S0._replace(h=jnp.asarray(3)), ValueError),
                                          (LIN_S0._replace(s=jnp.asarray(7)), ValueError)],
          action=IDX(A), params=LIN_PARAMS_BAD))
spec("LinearMDP.phi_all", LIN.phi_all, dict(state=LIN_S0, params=LP),
     dict(state=OBJ(PUT_S0) + [(LIN_S0._replace(s=jnp.asarray(7)), ValueError)],
          params=LIN_PARAMS_BAD))
spec("LinearMDP.is_fail", LIN.is_fail, dict(state=LIN_S0, params=LP), dict(state=OBJ(PUT_S0)))
spec("PutOption", drjax.PutOption, dict(num_anchors=4, horizon=3, variant="paper"),
     dict(num_anchors=INT(2), horizon=INT(), variant=CHOICE()))
spec("PutOption.make_params", PUT.make_params, dict(p_u=0.5, init_low=95.0, init_high=105.0),
     dict(p_u=NUM(-0.1, 1.5, shape_ok=True), init_low=NUM(0.0, 106.0, shape_ok=True),
          init_high=NUM(90.0, shape_ok=True)))
spec("PutOption.target_params", PUT.target_params, dict(source_params=PP, p_u=0.5),
     dict(source_params=OBJ(LP), p_u=NUM(-0.1, 1.5, shape_ok=True)))
spec("PutOption.reset", PUT.reset, dict(key=KEY0, params=PP), dict(key=KEY(), params=OBJ(LP)))
spec("PutOption.step", PUT.step, dict(key=KEY0, state=PUT_S0, action=1, params=PP),
     dict(key=KEY(), state=OBJ(LIN_S0) + [(PUT_S0._replace(h=jnp.asarray(3)), ValueError)],
          action=IDX(2), params=OBJ(LP)))
spec("PutOption.phi_all", PUT.phi_all, dict(state=PUT_S0, params=PP), dict(state=OBJ(LIN_S0)))
spec("PutOption.theta", PUT.theta, dict(params=PP), dict(params=OBJ(LP)))
spec("PutOption.hat_features", PUT.hat_features, dict(price=100.0),
     dict(price=[("abc", TypeError), (NAN, ValueError), (True, TypeError)]))
spec("fixed_initial_price", envs.fixed_initial_price, dict(key=KEY0, params=PP),
     dict(key=KEY(), params=OBJ(LP)))
spec("RandomLinearMDP", drjax.RandomLinearMDP, dict(num_states=3, num_actions=2, feature_dim=2,
                                                     horizon=2),
     dict(num_states=INT(2), num_actions=INT(), feature_dim=INT(2), horizon=INT()))
# None is valid: the constructor's feature / factor concentrations (default 1)
CONC = [("abc", TypeError), (True, TypeError), (NAN, ValueError),
        (0.0, ValueError), (-1.0, ValueError), (np.zeros(2), TypeError)]
spec("RandomLinearMDP.sample_params", RND.sample_params, dict(key=KEY0, concentration=1.0),
     dict(key=KEY(), concentration=CONC))
spec("RandomLinearMDP.make_params", RND.make_params, dict(RP._asdict()),
     dict(phi=[("abc", TypeError), (np.zeros((2, 3, 2, 3)), ValueError)],
          mu=[("abc", TypeError), (2 * RP.mu, ValueError)],
          fail_state=[(2.5, TypeError), (3, ValueError), (-1, ValueError), ("0", TypeError)],
          init_dist=[(None, TypeError), (np.ones(3), ValueError)]))
spec("RandomLinearMDP.validate", RND.validate, dict(params=RP),
     dict(params=OBJ(LP) + [(RP._replace(init_dist=RP.init_dist * 2), ValueError, "init_dist"),
                            (RP._replace(theta="x"), TypeError, "theta")]))
spec("RandomLinearMDP.step", RND.step, dict(key=KEY0, state=RND_S0, action=0, params=RP),
     dict(key=KEY(), state=OBJ(LIN_S0) + [(RND_S0._replace(s=jnp.asarray(3)), ValueError)],
          action=IDX(2), params=OBJ(LP)))
spec("RandomLinearMDP.reset", RND.reset, dict(key=KEY0, params=RP),
     dict(key=KEY(), params=OBJ(LP)))
spec("random_linear_drmdp", envs.random_linear_drmdp,
     dict(key=KEY0, num_states=3, num_actions=2, feature_dim=2, horizon=2, concentration=1.0),
     dict(key=KEY(), num_states=INT(2), num_actions=INT(), feature_dim=INT(2), horizon=INT(),
          concentration=CONC))
ALIASED = envs.RandomLinearMDP(num_states=3, num_actions=2, feature_dim=3, horizon=2,
                               structure="aliased").sample_params(KEY0)
spec("closed_form_robust_values", envs.closed_form_robust_values, dict(params=ALIASED, rho=0.1),
     dict(params=OBJ(LP) + [(envs.RandomLinearMDP(num_states=3, num_actions=2, feature_dim=3,
                                                   horizon=2).sample_params(KEY0),
                             ValueError, "same features")],
          rho=[(2.0, ValueError, "rho"), (-0.1, ValueError, "rho")]))
# The cliff-side traverse (drjax.envs.ledge): the geometry's ranges depend on the other fields
# (rock_rows <= num_rows - 2, split <= horizon - 1, start_row <= num_rows - 1).
LEDGE_GEOMETRY = dict(horizon=10, num_rows=5, rock_rows=1, split=5, start_row=2)
LEDGE_BAD = dict(horizon=INT(2), num_rows=INT(3), rock_rows=INT(1, 3), split=INT(1, 9),
                 start_row=INT(0, 4))
spec("Ledge", envs.Ledge, dict(LEDGE_GEOMETRY, features="rbf", obs_dims=(1,)),
     dict(LEDGE_BAD, features=CHOICE(), obs_dims=[((2,), ValueError), ((0, 0), ValueError)]))
spec("LedgeGrid", envs.LedgeGrid, dict(LEDGE_GEOMETRY), dict(LEDGE_BAD))
spec("envs.make", envs.make, dict(name="linear-mdp"),
     dict(name=[("gridworld", ValueError), (3, TypeError)]))
spec("sample_categorical", envs.base.sample_categorical, dict(key=KEY0, probs=MU3),
     dict(key=KEY(), probs=[("abc", TypeError), (np.zeros((2, 2)), ValueError)]))
spec("lattice_nodes", po.lattice_nodes, dict(horizon=3), dict(horizon=INT()))
spec("lattice_prices", po.lattice_prices, dict(s0=100.0, horizon=3),
     dict(s0=NUM(0.0, -5.0), horizon=INT()))
spec("lattice_value", po.lattice_value, dict(actions=np.ones((3, 3), np.int32),
                                              prices=np.full((3, 3), 100.0), p_u=0.5, rho=0.0),
     dict(actions=[(np.full((3, 3), 2), ValueError), (np.ones((3, 3)), TypeError),
                   (np.ones((3, 2), np.int32), ValueError), ("abc", ValueError)],
          prices=ARR((3, 3)), p_u=NUM(-0.1, 1.5), rho=NUM(-0.1, 1.5)))
spec("optimal_stopping_action", po.optimal_stopping_action,
     dict(h=0, price=100.0, horizon=3, p_u=0.5, rho=0.0),
     dict(h=IDX(3), price=NUM(0.0), horizon=INT(), p_u=NUM(1.5), rho=NUM(-0.5)))

# drjax.planning ------------------------------------------------------------------------------
RHO_BAD = ARR((H, D), 1.5)
POL_BAD = [(np.full((H, S), A, np.int32), ValueError), (np.full((H, S), -1), ValueError),
           (np.zeros((H, S)), ValueError), (np.zeros((H, S + 1), np.int32), ValueError),
           ("abc", TypeError), (None, TypeError)]
POL_BAD_OPT = _required(POL_BAD, True)
V_NEXT = np.zeros((H, S))
spec("robust_dp", planning.robust_dp, dict(model=MODEL, rho=RHO),
     dict(model=MODEL_BAD, rho=RHO_BAD))
spec("robust_evaluate", planning.robust_evaluate, dict(model=MODEL, rho=RHO, policy=POL),
     dict(model=MODEL_BAD, rho=RHO_BAD, policy=POL_BAD))
spec("nominal_evaluate", planning.nominal_evaluate, dict(model=MODEL, policy=POL),
     dict(model=MODEL_BAD, policy=POL_BAD, transition=ARR((H, S, A, S), 0.5, optional=True)))
spec("worst_case_kernel", planning.worst_case_kernel, dict(model=MODEL, rho=RHO,
                                                            v_next_per_step=V_NEXT),
     dict(model=MODEL_BAD, rho=RHO_BAD, v_next_per_step=ARR((H, S))))
spec("initial_value", planning.initial_value, dict(model=MODEL, v=np.zeros((H + 1, S))),
     dict(model=MODEL_BAD, v=[("abc", TypeError), (np.zeros((H, S)), ValueError),
                              (True, TypeError)]))
spec("validate_rho", planning.validate_rho, dict(rho=RHO, horizon=H, feature_dim=D),
     dict(rho=RHO_BAD, horizon=INT(), feature_dim=INT()))
spec("validate_policy", planning.validate_policy, dict(policy=POL, horizon=H, num_states=S,
                                                        num_actions=A),
     dict(policy=POL_BAD, horizon=INT(), num_states=INT(), num_actions=INT()))
spec("validate_divergence", planning.validate_divergence, dict(divergence="tv"),
     dict(divergence=CHOICE()))
spec("validate_weight", planning.validate_weight, dict(weight=1.0, horizon=H, feature_dim=D),
     dict(weight=ARR((H, D), 0.0), horizon=INT(), feature_dim=INT()))
spec("validate_kl_radius", planning.validate_kl_radius, dict(rho=0.1, horizon=H, feature_dim=D),
     dict(rho=ARR((H, D), -0.1), horizon=INT(), feature_dim=INT()))
spec("regularized_dp", planning.regularized_dp, dict(model=MODEL, weight=1.0, divergence="kl"),
     dict(model=MODEL_BAD, weight=ARR((H, D), -1.0), divergence=CHOICE()))
spec("regularized_evaluate", planning.regularized_evaluate,
     dict(model=MODEL, weight=1.0, divergence="tv", policy=POL),
     dict(model=MODEL_BAD, weight=NUM(0.0), divergence=CHOICE(), policy=POL_BAD))
spec("regularized_worst_case_kernel", planning.regularized_worst_case_kernel,
     dict(model=MODEL, weight=1.0, divergence="chi2", v_next_per_step=V_NEXT),
     dict(model=MODEL_BAD, weight=NUM(0.0), divergence=CHOICE(), v_next_per_step=ARR((H, S))))
KL_SEARCH = dict(tol=NUM(0.0, -1e-3), bracket=[((1.0, 0.5), ValueError), ("ab", ValueError),
                                              ((0.0, 1.0), ValueError), (("a", 1), TypeError)],
                 grid_size=INT(3))
spec("kl_constrained_dp", planning.kl_constrained_dp, dict(model=MODEL, rho=0.1),
     dict(model=MODEL_BAD, rho=ARR((H, D), -0.1), **KL_SEARCH))
spec("kl_constrained_evaluate", planning.kl_constrained_evaluate,
     dict(model=MODEL, rho=0.1, policy=POL),
     dict(model=MODEL_BAD, rho=NUM(-0.1), policy=POL_BAD, **KL_SEARCH))
spec("kl_constrained_worst_case_kernel", planning.kl_constrained_worst_case_kernel,
     dict(model=MODEL, rho=0.1, v_next_per_step=V_NEXT),
     dict(model=MODEL_BAD, rho=NUM(-0.1), v_next_per_step=ARR((H, S)), **KL_SEARCH))
spec("weight_for_radius", planning.weight_for_radius,
     dict(model=MODEL, policy=POL, rho=0.1, divergence="tv"),
     dict(model=MODEL_BAD, policy=POL_BAD, rho=NUM(-0.1, 1.5), divergence=CHOICE(),
          bounds=[((0.0, None), ValueError), ((1.0, 0.5), ValueError), (3, TypeError),
                  (("a", None), TypeError)],
          iterations=INT()))

# drjax.evaluate and drjax.put_lattice --------------------------------------------------------
spec("greedy_policy", evaluate.greedy_policy, dict(agent=AG, qf=QF, model=MODEL),
     dict(agent=AGENT_BAD, qf=QF_BAD, model=MODEL_BAD))
for name, fn in (("policy_values", evaluate.policy_values), ("ave_subopt", evaluate.ave_subopt)):
  spec(name, fn, dict(agent=AG, qfs=QFS, model=MODEL, rho=RHO),
       dict(agent=AGENT_BAD, qfs=OBJ() + [(QF, ValueError)], model=MODEL_BAD, rho=RHO_BAD))
spec("theorem1_bound", evaluate.theorem1_bound, dict(estimation_error=np.ones(5), H=H, d=D,
                                                      p=0.1, c=1.0),
     dict(estimation_error=[("abc", TypeError), (np.array([1.0, NAN]), ValueError)],
          H=INT(), d=INT(), p=NUM(0.0, 1.0), c=NUM(0.0),
          beta=NUM(-1.0, shape_ok=True, optional=True)))
spec("target_value", evaluate.target_value, dict(env=LIN, agent=AG, qf=QF, params=LP),
     dict(env=OBJ(PUT), agent=AGENT_BAD, params=LIN_PARAMS_BAD))
spec("exact_target_values", evaluate.exact_target_values,
     dict(env=LIN, agent=AG, qf=QF, target_params_batch=envs.target_params(LP, np.zeros(2))),
     dict(env=OBJ(PUT), agent=AGENT_BAD, qf=QF_BAD,
          target_params_batch=LIN_PARAMS_BAD + [(envs.target_params(LP, np.zeros(2))._replace(
              q=np.array([0.0, 1.5])), ValueError, "q")]))
spec("offline_subopt", evaluate.offline_subopt, dict(agent=OFF, qf=QF, model=MODEL, level=RHO),
     dict(agent=AGENT_BAD, qf=QF_BAD, model=MODEL_BAD, level=[(np.full((H, D), 2.0), ValueError,
                                                              "rho")],
          objective=CHOICE()[:2]))
spec("offline_bound", evaluate.offline_bound, dict(agent=OFF, qf=QF, model=MODEL, rho=RHO),
     dict(agent=AGENT_BAD + [(AG, TypeError)], qf=QF_BAD, model=MODEL_BAD, rho=RHO_BAD,
          beta=NUM(-1.0, optional=True)))
spec("episode_key", evaluate.episode_key, dict(key=KEY0, episode=0, step=0),
     dict(key=KEY(), episode=[(-1, ValueError), (1.5, TypeError), ("0", TypeError),
                              (np.zeros(2, np.int32), ValueError)],
          step=[(-1, ValueError), (True, TypeError)]))
spec("mc_evaluate", evaluate.mc_evaluate, dict(env=LIN, agent=AG, qf=QF, params=LP, key=KEY0,
                                                num_episodes=4),
     dict(env=ENV_BAD, agent=AGENT_BAD, qf=QF_BAD, params=LIN_PARAMS_BAD, key=KEY(),
          num_episodes=INT()))
INIT = dict(init_low=NUM(0.0, -1.0) + [(106.0, ValueError)], init_high=NUM(0.0))
spec("put_option_node_actions", put_lattice.put_option_node_actions,
     dict(action_fn=ACTION_FN, s0=100.0, horizon=3),
     dict(action_fn=OBJ(), s0=NUM(0.0), horizon=INT()))
spec("put_option_policy", put_lattice.put_option_policy,
     dict(action_fn=ACTION_FN, horizon=3, init_low=95.0, init_high=105.0),
     dict(action_fn=OBJ(), horizon=INT(), grid_size=INT(2), max_changes=INT(), iters=INT(0),
          **INIT))
spec("put_option_piecewise_values", put_lattice.put_option_piecewise_values,
     dict(policy=PUT_POLICY, p_us=[0.5], init_low=95.0, init_high=105.0),
     dict(policy=OBJ(QF) + [(PUT_POLICY._replace(valid=jnp.zeros((3, 3), bool)), ValueError)],
          p_us=[("abc", TypeError), ([1.5], ValueError), (0.5, ValueError), ([NAN], ValueError)],
          rho=NUM(-0.1, 1.5), integrate=BOOL(), **INIT))
spec("put_option_policy_values", put_lattice.put_option_policy_values,
     dict(action_fn=ACTION_FN, horizon=3, p_us=[0.5], init_low=95.0, init_high=105.0),
     dict(action_fn=OBJ(), horizon=INT(), p_us=[([1.5], ValueError)], rho=NUM(-0.1), **INIT))
spec("put_option_agent_policy", put_lattice.put_option_agent_policy,
     dict(env=PUT, agent=PUT_AG, qf=PUT_QF, init_low=95.0, init_high=105.0),
     dict(env=OBJ(LIN), agent=OBJ() + [(AG, ValueError)], qf=OBJ() + [(QF, ValueError)],
          **INIT))
spec("put_option_optimal_policy", put_lattice.put_option_optimal_policy,
     dict(env=PUT, init_low=95.0, init_high=105.0),
     dict(env=OBJ(LIN), source_p_u=NUM(-0.1, 1.5), rho=NUM(-0.1, 1.5), **INIT))
spec("put_option_exact_values", put_lattice.put_option_exact_values,
     dict(env=PUT, agent=PUT_AG, qf=PUT_QF, p_us=[0.5], init_low=95.0, init_high=105.0),
     dict(env=OBJ(LIN), agent=OBJ() + [(AG, ValueError)], qf=OBJ() + [(QF, ValueError)],
          p_us=[([1.5], ValueError), ("abc", TypeError)], grid_size=INT(2), **INIT))
spec("put_option_optimal_values", put_lattice.put_option_optimal_values,
     dict(env=PUT, p_us=[0.5], init_low=95.0, init_high=105.0),
     dict(env=OBJ(LIN), p_us=[([1.5], ValueError), (np.zeros((2, 2)), ValueError)],
          source_p_u=NUM(1.5), rho=NUM(-0.1), **INIT))

# drjax.robust --------------------------------------------------------------------------------
MASK6 = np.ones(6, bool)
spec("gram", robust.gram, dict(phi=M6.T, mask=MASK6, lam=0.1),
     dict(phi=[("abc", TypeError), (V6, ValueError)], mask=[(np.ones(5, bool), ValueError),
                                                            (np.ones(6), TypeError)],
          lam=NUM(0.0)))
for name, fn in (("ridge_factors", robust.ridge_factors),
                 ("ridge_operator", robust.ridge_operator)):
  spec(name, fn, dict(phi=M6.T, mask=MASK6, lam=0.1),
       dict(phi=[("abc", TypeError), (V6, ValueError)], mask=[(np.ones(5, bool), ValueError)],
            lam=NUM(-1.0)))
for name, fn in (("cholesky", robust.cholesky), ("spd_inverse", robust.spd_inverse)):
  spec(name, fn, dict(a=SPD), dict(a=[("abc", TypeError), (np.zeros((2, 3)), ValueError)]))
spec("triangular_inverse", robust.triangular_inverse, dict(low=SPD),
     dict(low=[("abc", TypeError), (np.zeros(3), ValueError)]))
spec("z_of_alpha", robust.z_of_alpha, dict(M=M6, v=V6, alpha=1.0),
     dict(M=[("abc", TypeError), (V6, ValueError)], v=ARR((6,), nan=False),
          alpha=[("abc", TypeError), (np.zeros(D + 1), ValueError),
                 (np.zeros((2, 2)), ValueError)]))
spec("rank_argsort", robust.rank_argsort, dict(v=V6),
     dict(v=[("abc", TypeError), (np.zeros((2, 2)), ValueError), (None, TypeError)]))
spec("alpha_max_exact", robust.alpha_max_exact, dict(M=M6, v=V6, rho=0.1, horizon=3.0),
     dict(M=[("abc", TypeError), (V6, ValueError)], v=ARR((6,)),
          rho=NUM(-0.1, 1.5) + [(np.zeros(D + 1), ValueError)], horizon=NUM(-1.0)))
spec("alpha_max_grid", robust.alpha_max_grid,
     dict(M=M6, v=V6, rho=0.1, horizon=3.0, grid=np.linspace(0, 3, 5)),
     dict(v=ARR((6,)), rho=NUM(2.0), horizon=NUM(-1.0), grid=[(np.zeros((2, 2)), ValueError),
                                                               (np.full(5, NAN), ValueError)],
          include_exact=BOOL()))
spec("make_grid", robust.make_grid, dict(horizon=3.0, num_points=5),
     dict(horizon=NUM(-1.0), num_points=INT(2), dtype=[(int, TypeError)]))
spec("tv_dual_nu", robust.tv_dual_nu,
     dict(phi=M6.T, mask=MASK6, v=V6, lam=0.1, rho=0.1, horizon=3.0),
     dict(phi=[(V6, ValueError)], mask=[(np.ones(5, bool), ValueError)], v=ARR((6,)),
          lam=NUM(0.0), rho=NUM(1.5), horizon=NUM(-1.0), method=CHOICE()))
for name, fn in (("tv_worst_case_value", robust.tv_worst_case_value),
                 ("tv_worst_case_distribution", robust.tv_worst_case_distribution)):
  spec(name, fn, dict(mu=MU3, V=V3, rho=0.1),
       dict(mu=MU_BAD, V=ARR((3,)), rho=NUM(-0.1, 1.2)))
spec("atom_targets", robust.atom_targets, dict(g=M6.T, v=V6, c=np.zeros(3)),
     dict(g=[("abc", TypeError), (V6, ValueError)], v=ARR((6,), nan=False),
          c=[(np.zeros((2, 2)), ValueError), ("c", TypeError)]))
spec("alpha_max_atoms", robust.alpha_max_atoms,
     dict(pinv=np.eye(D), g=M6.T, v=V6, rho=0.1, horizon=3.0),
     dict(pinv=ARR((D, D), nan=False), g=[(V6, ValueError)], v=ARR((6,), nan=False),
          rho=NUM(-0.1, 1.5), horizon=NUM(-1.0), method=CHOICE(),
          operator=[(np.zeros((6, D)), ValueError)], sort=BOOL()[:2],
          grid=[(np.zeros((2, 2)), ValueError)], vmin=[(np.zeros(2), ValueError)],
          monotone=BOOL()[:2]))
spec("monotone_candidates", duals_tv.monotone_candidates, dict(z=M6, c=V6),
     dict(z=[(V6, ValueError), ("abc", TypeError)], c=[(np.zeros((2, 2)), ValueError),
                                                       (np.zeros(5), ValueError)]))
spec("chi2_dual_max", robust.chi2_dual_max, dict(M=M6, v=V6, weight=1.0, horizon=3.0),
     dict(M=[(V6, ValueError)], v=ARR((6,), nan=False), weight=NUM(0.0), horizon=NUM(-1.0)))
spec("kl_dual_search", robust.kl_dual_search,
     dict(M=M6, v=V6, mask=MASK6, rho=0.1, horizon=3.0),
     dict(M=[(V6, ValueError)], v=ARR((6,), nan=False), mask=[(np.ones(5, bool), ValueError)],
          rho=NUM(-0.1), horizon=NUM(-1.0), tol=NUM(0.0), grid_size=INT(2),
          bounds=[((1.0, 0.5), ValueError), ((0.0, 1.0), ValueError)]))

# drjax.regularized ---------------------------------------------------------------------------
FACTOR = dict(mu=MU_BAD, V=ARR((3,)))
for name in ("tv_regularized_value", "tv_regularized_worst_case_distribution",
             "kl_regularized_value", "kl_regularized_worst_case_distribution",
             "chi2_regularized_value", "chi2_regularized_worst_case_distribution"):
  spec(name, getattr(regularized, name), dict(mu=MU3, V=V3, w=1.0),
       dict(w=NUM(0.0, -1.0), **FACTOR))
spec("chi2_dual_objective", regularized.chi2_dual_objective, dict(mu=MU3, V=V3, w=1.0, alpha=1.0),
     dict(w=NUM(0.0), alpha=NUM(), **FACTOR))
spec("kl_constrained_dual_objective", regularized.kl_constrained_dual_objective,
     dict(mu=MU3, V=V3, rho=0.1, alpha=1.0),
     dict(rho=NUM(-0.1), alpha=NUM(0.0, shape_ok=True), **FACTOR))
for name in ("kl_constrained_value", "kl_constrained_worst_case_distribution"):
  spec(name, getattr(regularized, name), dict(mu=MU3, V=V3, rho=0.1),
       dict(rho=NUM(-0.1), **FACTOR, **KL_SEARCH))
spec("kl_constrained_num_iterations", regularized.kl_constrained_num_iterations, dict(),
     dict(KL_SEARCH))
for name in ("tv_distance", "kl_divergence", "chi2_divergence"):
  spec(name, getattr(regularized, name), dict(nu=MU3, mu=MU3),
       dict(nu=[("abc", TypeError), (np.zeros((2, 2)), ValueError)],
            mu=[("abc", TypeError), (np.zeros(4), ValueError)]))

# drjax.sensitivity ---------------------------------------------------------------------------
E14 = np.zeros((H, D))
E14[0, 3] = 1.0
for name in ("robust_value", "rho_gradient", "closed_form_rho_gradient"):
  spec(name, getattr(sensitivity, name), dict(model=MODEL, rho=RHO),
       dict(model=MODEL_BAD, rho=RHO_BAD, policy=POL_BAD_OPT))
spec("param_gradient", sensitivity.param_gradient, dict(env=LIN, params=LP, rho=RHO, wrt="p"),
     dict(env=OBJ(PUT), params=[(3.0, TypeError), (LP._replace(p=jnp.asarray(2.0)), ValueError,
                                                   "p")],
          rho=RHO_BAD, wrt=[("mu", ValueError), (3, TypeError), ([], ValueError)],
          policy=POL_BAD_OPT))
spec("one_sided_derivatives", sensitivity.one_sided_derivatives,
     dict(model=MODEL, rho=RHO + 0.5, direction=E14),
     dict(model=MODEL_BAD, rho=RHO_BAD[:4] + [(RHO + 1.0, ValueError)], direction=ARR((H, D)),
          t=NUM(), eps=NUM(0.0), policy=POL_BAD_OPT))
for name, fn in (("kink_bracket", sensitivity.kink_bracket),
                 ("find_kinks", sensitivity.find_kinks)):
  spec(name, fn, dict(model=MODEL, rho=RHO, direction=E14),
       dict(model=MODEL_BAD, rho=[("abc", TypeError), (np.zeros((2, D)), ValueError)],
            direction=ARR((H, D)), t_lo=NUM(), t_hi=NUM(), num_grid=INT(2), tol=NUM(0.0),
            by=CHOICE(), policy=POL_BAD_OPT))
spec("find_kinks(range)", sensitivity.find_kinks, dict(model=MODEL, rho=RHO, direction=E14),
     dict(t_hi=[(2.0, ValueError, "rho"), (-1.0, ValueError, "t_lo")]))
TRAIN_STATE = STATS
for name in ("learned_value", "learned_sensitivity"):
  spec(name, getattr(sensitivity, name),
       dict(agent=AG, env=LIN, env_params=LP, train_state=TRAIN_STATE, hparams=HP),
       dict(agent=AGENT_BAD + [(OFF, TypeError)], env=ENV_BAD, train_state=OBJ(QF),
            key=_required(KEY(), True),
            hparams=OBJ(RHO) + [(HP._replace(rho=jnp.full((H, D), 2.0)), ValueError, "rho")]))
spec("project_tv_simplex", sensitivity.project_tv_simplex, dict(y=V3, mu=MU3, rho=0.1),
     dict(y=[("abc", TypeError), (None, TypeError), (np.zeros((3, 3)), ValueError),
            (np.full(3, NAN), ValueError)], mu=MU_BAD, rho=NUM(-0.1, 1.5)))
RHO_SA = np.zeros((H, S, A))
spec("sa_rectangular_evaluate", sensitivity.sa_rectangular_evaluate,
     dict(model=MODEL, rho_sa=RHO_SA, policy=POL),
     dict(model=MODEL_BAD, rho_sa=ARR((H, S, A), 1.5), policy=POL_BAD))
spec("d_rectangular_family", sensitivity.d_rectangular_family, dict(model=MODEL, rho=RHO),
     dict(model=MODEL_BAD, rho=RHO_BAD))
spec("sa_rectangular_family", sensitivity.sa_rectangular_family, dict(model=MODEL, rho_sa=RHO_SA),
     dict(model=MODEL_BAD, rho_sa=ARR((H, S, A), -0.5)))
spec("factor_q_family", sensitivity.factor_q_family,
     dict(model=MODEL, factor=3, q_max=np.zeros(H)),
     dict(model=MODEL_BAD, factor=IDX(D), q_max=ARR((H,), 1.5)))
spec("worst_case_search", sensitivity.worst_case_search,
     dict(model=MODEL, policy=POL, family=FAMILY, key=KEY0),
     dict(model=MODEL_BAD, policy=POL_BAD, family=OBJ(), key=KEY(), steps=INT(),
          restarts=INT(), optimizer=[("sgd", TypeError), (3, TypeError)], jit=BOOL()))
spec("default_optimizer", sensitivity.default_optimizer, dict(learning_rate=1.0),
     dict(learning_rate=NUM(0.0, -1.0)))

# drjax.data ----------------------------------------------------------------------------------
spec("data.uniform", data.uniform, dict(num_actions=A), dict(num_actions=INT()))
spec("data.fixed", data.fixed, dict(action=0), dict(action=INT(0)))
spec("data.epsilon_greedy", data.epsilon_greedy, dict(agent=AG, qf=QF, epsilon=0.1),
     dict(agent=OBJ(), qf=QF_BAD, epsilon=NUM(-0.1, 1.5)))
spec("data.collect", data.collect, dict(env=LIN, params=LP, behavior=BEHAVIOR, key=KEY0,
                                         num_trajectories=2),
     dict(env=ENV_BAD, params=LIN_PARAMS_BAD, behavior=[(None, TypeError), (3, TypeError)],
          key=KEY(), num_trajectories=INT(), check=BOOL()))
spec("data.save", data.save, dict(path="/nonexistent/never-written.npz", ds=DS),
     dict(path=[(3, TypeError), (None, TypeError)], ds=OBJ(DS._asdict()),
          metadata=[([1, 2], TypeError), ({"x": object()}, TypeError)]))
spec("data.load", data.load, dict(path="/nonexistent/missing.npz"),
     dict(path=[(3, TypeError)], env=OBJ(optional=True), agent=OBJ(optional=True)))
spec("data.split", data.split, dict(ds=DS, n=1),
     dict(ds=OBJ(), n=INT(1) + [(N, ValueError)]))
spec("data.check_dataset", data.check_dataset, dict(ds=DS, horizon=H, feature_dim=D,
                                                     num_actions=A),
     dict(ds=[(v, e, "dataset") for v, e in OBJ()], horizon=INT(), feature_dim=INT(),
          num_actions=INT(), name=[(3, TypeError)]))
spec("data.num_trajectories", data.num_trajectories, dict(ds=DS), dict(ds=OBJ()))
spec("data.with_size", data.with_size, dict(ds=DS, n=1),
     dict(ds=OBJ(), n=[(N + 1, ValueError), (-1, ValueError), (1.5, TypeError),
                       ("1", TypeError), (np.zeros(2, np.int32), ValueError)]))

# drjax.train ---------------------------------------------------------------------------------
spec("resolve_form", train_lib.resolve_form, dict(env=LIN, form="auto"),
     dict(env=OBJ(), form=CHOICE()))
spec("segment_bounds", train_lib.segment_bounds, dict(num_episodes=100, first=16, ratio=1.5),
     dict(num_episodes=INT(), first=INT(), ratio=NUM(1.0, 0.5)))
spec("make_train", drjax.make_train, dict(env=LIN, agent=AG, num_episodes=4),
     dict(env=ENV_BAD, agent=OBJ(OFF), num_episodes=INT() + [(5, ValueError, "capacity")],
          record_q=BOOL(), form=CHOICE(), outputs=[("returns", TypeError),
                                                   (("buffers",), ValueError), ((3,), TypeError)],
          segments=[("yes", TypeError), (1, TypeError)],
          blocks=[("16", TypeError), (True, TypeError), (2.5, TypeError), (-1, ValueError)]))
spec("plan_sizes", train_lib.plan_sizes, dict(start=0, end=100, block=16),
     dict(start=INT(0) + [(101, ValueError)], end=INT(), block=INT(0)))
spec("make_train(train)", drjax.make_train(LIN, AG, 4), dict(key=KEY0, hparams=HP, env_params=LP),
     dict(key=KEY(), hparams=OBJ(RHO), env_params=LIN_PARAMS_BAD))
spec("replan", drjax.replan, dict(env=LIN, agent=AG, state=STATS, hparams=HP, env_params=LP),
     dict(env=ENV_BAD, agent=OBJ(OFF), state=OBJ(QF),
          hparams=OBJ(RHO) + [(HP._replace(rho=jnp.full((H, D), 2.0)), ValueError, "rho")]))
spec("broadcast_hparams", train_lib.broadcast_hparams, dict(hparams=HP, horizon=H, feature_dim=D),
     dict(hparams=OBJ(RHO) + [(HP._replace(lam=jnp.asarray(-1.0)), ValueError, "lam")],
          horizon=INT(), feature_dim=INT()))
spec("check_key", train_lib.check_key, dict(key=KEY0), dict(key=KEY()))
spec("sweep", drjax.sweep, dict(env=LIN, env_params=LP, agent=AG, key=KEY0, num_seeds=2,
                                num_episodes=3, hparams=HP),
     dict(env=ENV_BAD, env_params=LIN_PARAMS_BAD, agent=OBJ(OFF), key=KEY(), num_seeds=INT(),
          num_episodes=INT(), hparams=OBJ(RHO) + [(HP._replace(beta=jnp.asarray(-1.0)),
                                                   ValueError, "beta")],
          record_q=BOOL(), params_per_seed=BOOL(), form=CHOICE(),
          outputs=[("returns", TypeError), (("buffers",), ValueError)]))
spec("check_env_features", train_lib.check_env_features, dict(env=LIN, params=LP, key=KEY0),
     dict(env=ENV_BAD, key=KEY()))
spec("make_fit", drjax.make_fit, dict(env=LIN, agent=OFF, num_trajectories=4),
     dict(env=ENV_BAD, agent=OBJ(AG), num_trajectories=INT(),
          behavior=[(3, TypeError), ("uniform", TypeError)], form=CHOICE(), keep_data=BOOL()))
spec("make_fit(fit_run)", drjax.make_fit(LIN, OFF, 4), dict(key=KEY0, hparams=OHP, env_params=LP),
     dict(key=KEY(), size=[(5, ValueError), (-1, ValueError), (1.5, TypeError)],
          env_params=LIN_PARAMS_BAD))


def _cases():
  for label, fn, good, bad in SPECS:
    for arg, values in bad.items():
      for k, item in enumerate(values):
        value, error = item[0], item[1]
        text = item[2] if len(item) > 2 else arg
        yield pytest.param(fn, good, arg, value, error, text, id=f"{label}-{arg}-{k}")


CASES = list(_cases())


@pytest.fixture(scope="module", autouse=True)
def _unfiltered_tracebacks():
  """JAX trims its own frames from tracebacks; keep them so the test can see any."""
  old = jax.config.jax_traceback_filtering
  jax.config.update("jax_traceback_filtering", "off")
  yield
  jax.config.update("jax_traceback_filtering", old)


def _names(msg: str, text: str) -> bool:
  """``text`` occurs in ``msg`` as a word (``rho`` in ``hp.rho``, not ``h`` in ``shape``)."""
  return re.search(rf"(?<!\w){re.escape(text)}(?!\w)", msg) is not None


@pytest.mark.parametrize("fn, good, arg, value, error, text", CASES)
def test_bad_argument_raises_a_named_error_before_tracing(fn, good, arg, value, error, text):
  kwargs = dict(good)
  kwargs[arg] = value
  with pytest.raises((TypeError, ValueError)) as e:
    fn(**kwargs)
  msg = str(e.value)
  assert type(e.value) is error or (error is ValueError and isinstance(e.value, ValueError)), (
      f"{type(e.value).__name__} instead of {error.__name__}: {msg}")
  assert _names(msg, text), f"the message does not name {text!r}: {msg}"
  inside_jax = [f for f in traceback.extract_tb(e.value.__traceback__)
                if "/jax/_src/" in f.filename.replace("\\", "/")]
  assert not inside_jax, f"raised while JAX was tracing ({inside_jax[-1]}): {msg}"


def test_the_table_covers_the_public_api():
  """Every public callable of the covered modules has a spec (data containers excluded), and
  every spec with several arguments has bad values for at least two of them (so a valid-looking
  baseline that were itself invalid would fail the other argument's cases)."""
  import inspect  # pylint: disable=g-import-not-at-top
  covered = {getattr(fn, "__wrapped__", fn) for _, fn, _, _ in SPECS}
  covered |= {fn for _, fn, _, _ in SPECS}
  modules = [drjax, base, state, registry, offline, lsvi, envs, po, planning, evaluate,
             put_lattice, robust, linalg, duals_tv, duals_kl_chi2, regularized, sensitivity, data,
             train_lib]
  # No arguments (LinearMDP, action_vectors, clear_caches), base classes and exceptions, a decorator, and the
  # two R2PVI aliases of r2pvi_kl.
  skip = {"exact_matmuls", "UnknownAgentError", "AgentSpec", "Environment", "FiniteEnvironment",
          "LinearMDP", "action_vectors", "r2pvi_tv", "r2pvi_chi2", "clear_caches"}
  missing = []
  for mod in modules:
    names = getattr(mod, "__all__", None) or [n for n in dir(mod) if not n.startswith("_")]
    for n in names:
      obj = getattr(mod, n, None)
      if (obj is None or inspect.ismodule(obj) or not callable(obj) or n in skip
          or (isinstance(obj, type) and issubclass(obj, tuple))  # NamedTuple data containers
          or not getattr(obj, "__module__", "").startswith("drjax")):
        continue
      if obj not in covered and getattr(obj, "__wrapped__", None) not in covered:
        missing.append(f"{mod.__name__}.{n}")
  assert not missing, f"public functions without a bad-input spec: {missing}"
  for label, fn, good, bad in SPECS:
    # check_int's other arguments are labels; is_fail / phi_all of the put option ignore params.
    if len(good) >= 2 and label not in ("check_int", "LinearMDP.is_fail", "PutOption.phi_all",
                                        "find_kinks(range)"):
      assert len(bad) >= 2, label
  assert len(CASES) >= 900, len(CASES)


def test_shared_helpers_bisect_mean_stderr_and_the_model_cache():
  from drjax import _checks  # pylint: disable=g-import-not-at-top
  lo, hi = _checks.bisect(lambda x: x < jnp.asarray([0.3, 0.7]), jnp.zeros(2), jnp.ones(2), 45)
  np.testing.assert_allclose(0.5 * (lo + hi), [0.3, 0.7], atol=1e-12)
  x = np.array([[1.0, 2.0], [3.0, 5.0], [4.0, 11.0]])
  mean, se = _checks.mean_stderr(x)
  np.testing.assert_allclose(mean, x.mean(0))
  np.testing.assert_allclose(se, x.std(0, ddof=1) / np.sqrt(3))
  assert np.all(_checks.mean_stderr(x[:1])[1] == 0)
  # A model of JAX arrays is validated once; a NumPy model (mutable) every time.
  m = jax.tree_util.tree_map(np.array, MODEL)
  _checks.model(m)
  m.mu[0, 0, 0] += 1.0
  with pytest.raises(ValueError, match="model.mu"):
    _checks.model(m)
  _checks.model(MODEL)
  _checks.model(MODEL)
  with pytest.raises(ValueError, match="model.phi"):
    _checks.model(MODEL._replace(phi=-MODEL.phi))
