"""Host-side argument checks shared by every public function, and two small shared helpers.

Every check raises ``ValueError`` (bad value) or ``TypeError`` (bad kind: a string, a boolean,
``None``, an object of the wrong class, a float where an integer is needed) whose message starts
with the argument's name and states the allowed range. Value checks run only on concrete
arguments and are skipped under ``jit``/``vmap`` tracing, where values are unknown (shapes and
dtypes are static and are always checked). Nothing here is traced or compiled, and a check costs
a few Python operations (plus one host copy of a concrete device array whose values it reads).

Indices in drjax's Python API are 0-based (step ``h = 0`` is the papers' step 1, factor ``i = 0``
their factor 1); ``index`` / ``indices`` reject anything outside ``[0, n - 1]`` (no negative
indexing), naming the argument and the range.

Helpers beside the checks: ``bisect`` (the one bisection loop of drjax's kink / breakpoint /
weight searches) and ``mean_stderr`` (the mean and standard error across seeds or episodes).
"""

from __future__ import annotations

import numbers
import warnings
import weakref

import jax
import numpy as np

# ---------------------------------------------------------------------------------------------
# Traced or concrete.


def is_concrete(*xs) -> bool:
  """True if no leaf of ``xs`` is a JAX tracer (values can be inspected)."""
  if len(xs) == 1 and isinstance(xs[0], (jax.Array, np.ndarray, float, int)):  # one leaf
    return not isinstance(xs[0], jax.core.Tracer)
  return not any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree_util.tree_leaves(xs))


def require_concrete(name: str, x, why: str = "") -> None:
  """``TypeError`` if ``x`` is traced (a value that must be known on the host)."""
  if not is_concrete(x):
    because = f" ({why})" if why else ""
    raise TypeError(f"{name} must be a concrete value{because}, got a traced value; call this "
                    "outside jit/vmap")


# ---------------------------------------------------------------------------------------------
# Kinds: numbers, integers, indices, booleans, choices, objects.


def _dtype_of(x):
  return x.dtype if hasattr(x, "dtype") else np.asarray(x).dtype


def _real_dtype(dtype) -> bool:
  kind = getattr(dtype, "kind", None)
  if kind in ("f", "i", "u"):  # NumPy's own kinds answer at once (issubdtype is slow)
    return True
  if kind in ("b", "c", "O", "U", "S", "M", "m"):
    return False
  return (np.issubdtype(dtype, np.integer) or np.issubdtype(dtype, np.floating)
          or jax.dtypes.issubdtype(dtype, jax.numpy.floating))


def _values(name: str, x) -> np.ndarray:
  """``x`` as a float64 array; ``TypeError`` for None, strings, booleans, non-real dtypes."""
  if x is None:
    raise TypeError(f"{name} must be a number or an array of numbers, got None")
  if isinstance(x, (str, bytes)):
    raise TypeError(f"{name} must be a number or an array of numbers, got the string {x!r}")
  try:
    a = np.asarray(x)
  except Exception as e:  # ragged lists and the like  # pylint: disable=broad-except
    raise TypeError(f"{name} must be a number or an array of numbers, got {x!r} ({e})") from None
  if a.dtype == bool or not _real_dtype(a.dtype):
    what = "booleans" if a.dtype == bool else f"dtype {a.dtype}"
    raise TypeError(f"{name} must be a number or an array of numbers, got {what}"
                    + (f" ({x!r})" if a.ndim == 0 else ""))
  return a.astype(np.float64)


def numeric(name: str, x) -> None:
  """``x`` must be a real number or array of real numbers (traced: a real dtype)."""
  if is_concrete(x):
    _values(name, x)
  elif not _real_dtype(x.dtype) or x.dtype == bool:
    raise TypeError(f"{name} must hold real numbers, got dtype {x.dtype}")


def numbers_(**kwargs) -> None:
  """Each keyword value must be a number (or array of numbers): no strings, booleans, None."""
  for name, x in kwargs.items():
    numeric(name, x)


def _show(a: np.ndarray) -> str:
  if a.ndim == 0:
    return repr(float(a))
  bad = a[~np.isfinite(a)]
  if bad.size:
    return f"a non-finite value ({bad.flat[0]})"
  return f"values in [{a.min():g}, {a.max():g}]"


def _range(lo, hi, lo_open: bool, hi_open: bool) -> str:
  """The allowed range in words: ``in [0, 1]``, ``> 0 and finite``, ``>= 0 and finite``."""
  if lo is not None and hi is not None:
    return f"lie in {'(' if lo_open else '['}{lo:g}, {hi:g}{')' if hi_open else ']'}"
  if lo is not None:
    return f"be {'>' if lo_open else '>='} {lo:g} and finite"
  if hi is not None:
    return f"be {'<' if hi_open else '<='} {hi:g} and finite"
  return "be finite"


def finite(name: str, x) -> None:
  """Concrete ``x`` must be numeric and finite (no NaN/inf)."""
  if not is_concrete(x):
    return
  a = _values(name, x)
  if not np.all(np.isfinite(a)):
    raise ValueError(f"{name} must be finite, got {_show(a)}")


def in_range(name: str, x, lo=None, hi=None, *, lo_open: bool = False,
             hi_open: bool = False) -> None:
  """Concrete ``x`` must be finite with every entry in ``[lo, hi]`` (open ends on request)."""
  if not is_concrete(x):
    return
  a = _values(name, x)
  ok = np.isfinite(a)
  if lo is not None:
    ok &= (a > lo) if lo_open else (a >= lo)
  if hi is not None:
    ok &= (a < hi) if hi_open else (a <= hi)
  if not ok.all():
    raise ValueError(f"{name} must {_range(lo, hi, lo_open, hi_open)}, got {_show(a)}")


def number(name: str, x, lo=None, hi=None, *, lo_open: bool = False,
           hi_open: bool = False) -> float:
  """A concrete real scalar (Python / NumPy number or 0-d array) in the range; returns it."""
  require_concrete(name, x)
  a = _values(name, x)
  if a.ndim:
    raise ValueError(f"{name} must be a number (a scalar), got shape {a.shape}")
  in_range(name, a, lo, hi, lo_open=lo_open, hi_open=hi_open)
  return float(a)


def integer(name: str, x, lo: int | None = None, hi: int | None = None) -> int:
  """``x`` must be a Python/NumPy integer (not a bool, float or string) in ``[lo, hi]``;
  returns it as ``int`` (so equal values give equal cache keys)."""
  if lo is not None and hi is not None:
    rng = f" in [{lo}, {hi}]"
  elif lo is not None:
    rng = f" >= {lo}"
  else:
    rng = "" if hi is None else f" <= {hi}"
  if isinstance(x, (bool, np.bool_)) or not isinstance(x, numbers.Integral):
    raise TypeError(f"{name} must be an integer{rng}, got {type(x).__name__} {x!r}")
  if (lo is not None and x < lo) or (hi is not None and x > hi):
    raise ValueError(f"{name} must be an integer{rng}, got {x!r}")
  return int(x)


def optional_integer(name: str, x, lo: int | None = None, hi: int | None = None) -> int | None:
  """``None`` or ``integer(name, x, lo, hi)``."""
  return None if x is None else integer(name, x, lo, hi)


def check_int(name: str, value, minimum: int = 1) -> int:
  """``integer(name, value, minimum)``: an integer ``>= minimum`` (``TypeError`` for bools, floats,
  strings, lists; ``ValueError`` below), as ``int``. Also ``drjax.agents.base.check_int``."""
  return integer(name, value, minimum)


def _int_kind(name: str, x, what: str) -> np.ndarray | None:
  """``x`` as an integer array when concrete (``None`` when traced); ``TypeError`` unless it
  holds integers."""
  if isinstance(x, (bool, np.bool_, str, bytes)) or x is None:
    raise TypeError(f"{name} must be {what}, got {type(x).__name__} {x!r}")
  if not is_concrete(x):
    if not np.issubdtype(x.dtype, np.integer):
      raise TypeError(f"{name} must be {what}, got dtype {x.dtype}")
    return None
  try:
    a = np.asarray(x)
  except Exception:  # pylint: disable=broad-except
    raise TypeError(f"{name} must be {what}, got {x!r}") from None
  if not np.issubdtype(a.dtype, np.integer):
    if not hasattr(x, "dtype"):
      raise TypeError(f"{name} must be {what}, got {type(x).__name__} {x!r}")
    raise TypeError(f"{name} must be {what}, got {'booleans' if a.dtype == bool else a.dtype}"
                    + (f" ({x!r})" if a.ndim == 0 else ""))
  return a


def index(name: str, x, size: int, what: str = "") -> None:
  """``x`` must be one 0-based integer index in ``[0, size - 1]`` (``what``: e.g. ``"(step h)"``);
  traced: an integer scalar."""
  desc = f"a 0-based index{f' {what}' if what else ''} in [0, {size - 1}]"
  a = _int_kind(name, x, f"an integer, {desc}")
  if np.ndim(x) != 0:
    raise ValueError(f"{name} must be {desc}, got shape {tuple(np.shape(x))}")
  if a is not None and not 0 <= int(a) < size:
    raise ValueError(f"{name} must be {desc}, got {int(a)}")


def indices(name: str, x, size: int, what: str = "") -> None:
  """Every entry of the integer array ``x`` must lie in ``[0, size - 1]`` (0-based)."""
  desc = f"0-based {what or 'indices'} in [0, {size - 1}]"
  a = _int_kind(name, x, f"an array of integers, {desc}")
  if a is not None and a.size and (a.min() < 0 or a.max() >= size):
    raise ValueError(f"{name} must hold {desc}, got values in [{a.min()}, {a.max()}]")


def boolean(name: str, x) -> bool:
  """``x`` must be a Python / NumPy bool; returns it as ``bool``."""
  if not isinstance(x, (bool, np.bool_)):
    raise TypeError(f"{name} must be True or False, got {type(x).__name__} {x!r}")
  return bool(x)


def bool_array(name: str, x) -> None:
  """``x`` must be a bool or an array of bools (traced: a bool dtype)."""
  if isinstance(x, (bool, np.bool_)):
    return
  dtype = getattr(x, "dtype", None)
  if dtype is None:
    if isinstance(x, (str, bytes)) or x is None or not is_concrete(x):
      raise TypeError(f"{name} must be a bool or an array of bools, got {type(x).__name__} "
                      f"{x!r}")
    dtype = np.asarray(x).dtype
  if dtype != bool:
    raise TypeError(f"{name} must be a bool or an array of bools, got dtype {dtype}")


def choice(name: str, x, options) -> str:
  """``x`` must be one of the strings ``options``; returns it."""
  if not isinstance(x, str):
    raise TypeError(f"{name} must be one of {tuple(options)}, got {type(x).__name__} {x!r}")
  if x not in options:
    raise ValueError(f"{name} must be one of {tuple(options)}, got {x!r}")
  return x


def instance(name: str, x, types, what: str) -> None:
  """``x`` must be an instance of ``types`` (``what`` says which and where they come from)."""
  if not isinstance(x, types):
    raise TypeError(f"{name} must be {what}, got {type(x).__name__}")


def function(name: str, f, what: str) -> None:
  """``f`` must be callable (``what`` gives its signature)."""
  if not callable(f):
    raise TypeError(f"{name} must be a function {what}, got {type(f).__name__}")


def dtype(name: str, x) -> None:
  """``None`` or a floating-point dtype (``jnp.float32``, ``"float64"``, ...)."""
  if x is None:
    return
  try:
    dt = np.dtype(x)
  except TypeError:
    raise TypeError(f"{name} must be a floating-point dtype (e.g. jnp.float32) or None, got "
                    f"{x!r}") from None
  if not jax.numpy.issubdtype(dt, jax.numpy.floating):  # (bfloat16 too)
    raise TypeError(f"{name} must be a floating-point dtype (e.g. jnp.float32) or None, got {dt}")


# ---------------------------------------------------------------------------------------------
# Shapes.


def broadcast_shapes(*shapes) -> tuple:
  """NumPy's ``broadcast_shapes`` of shape tuples in plain Python (``ValueError`` if they do not
  broadcast): microseconds, where NumPy's builds arrays."""
  out = []
  for dims in zip(*(((1,) * (n - len(s)) + tuple(s)) for n in [max(map(len, shapes), default=0)]
                    for s in shapes)):
    sizes = {d for d in dims if d != 1}
    if len(sizes) > 1:
      raise ValueError(f"shapes {shapes} do not broadcast")
    out.append(sizes.pop() if sizes else 1)
  return tuple(out)


def scalar(name: str, x) -> None:
  """``x`` must be a scalar (rank 0)."""
  if np.ndim(x) != 0:
    raise ValueError(f"{name} must be a scalar, got shape {tuple(np.shape(x))}")


def rank(name: str, x, ranks) -> None:
  """``x`` must have one of the ranks ``ranks`` (an int or a set)."""
  allowed = {ranks} if isinstance(ranks, int) else set(ranks)
  if np.ndim(x) not in allowed:
    raise ValueError(f"{name} must have rank {' or '.join(map(str, sorted(allowed)))}, got shape "
                     f"{tuple(np.shape(x))}")


def shape(name: str, x, expected: tuple, what: str = "") -> None:
  """``x`` must have shape ``expected`` (``None`` entries: any size; ``what`` names the
  dimensions, e.g. ``"[K]"``)."""
  got = tuple(np.shape(x))
  want = tuple(expected)
  if len(got) != len(want) or any(w is not None and w != g for w, g in zip(want, got)):
    label = f" {what}" if what else ""
    shown = "(" + ", ".join("?" if w is None else str(w) for w in want) + \
        ("," if len(want) == 1 else "") + ")"
    raise ValueError(f"{name} must have shape{label} {shown}, got {got}")


def array(name: str, x, expected: tuple | None = None, what: str = "") -> None:
  """A numeric array (kind checked) of shape ``expected`` (if given)."""
  numeric(name, x)
  if expected is not None:
    shape(name, x, expected, what)


# ---------------------------------------------------------------------------------------------
# The one validator of uncertainty levels (TV radii in [0, 1], KL radii >= 0, weights > 0).


def rho(name: str, x, shape_: tuple = (), *, what: str = "", hi: float | None = 1.0,
        lo_open: bool = False, batch: bool = False, scalar_ok: bool = False) -> None:
  """Radii / levels ``x``: numbers of shape ``shape_`` (``what`` names it, e.g. ``"(H, d)"``);
  ``batch``: any leading axes ``(..., *shape_)``; ``scalar_ok``: a scalar too. Concrete values
  must be finite and in ``[0, hi]`` (``hi=None``: ``>= 0``; ``lo_open``: ``> 0``)."""
  numeric(name, x)
  got = tuple(np.shape(x))
  want = tuple(shape_)
  n = len(want)
  ok = (len(got) >= n and got[len(got) - n:] == want) if batch else got == want
  if not ok and not (scalar_ok and got == ()):
    if not want and not batch:
      raise ValueError(f"{name} must be a scalar, got shape {got}")
    dims = ", ".join(map(str, want))
    spec = f"(..., {dims})" if batch else f"({dims}{',' if n == 1 else ''})"
    label = f"{what} = " if what else ""
    alt = "be a scalar or " if scalar_ok else ""
    raise ValueError(f"{name} must {alt}have shape {label}{spec}, got {got}")
  in_range(name, x, 0.0, hi, lo_open=lo_open)


# ---------------------------------------------------------------------------------------------
# PRNG keys.


def key(name: str, k) -> None:
  """``k`` must be one JAX PRNG key: ``jax.random.key(seed)`` (a typed key, shape ``()``) or
  ``jax.random.PRNGKey(seed)`` (``uint32[2]``); concrete or traced."""
  dtype = getattr(k, "dtype", None)
  if dtype is not None:
    if jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
      if np.ndim(k) == 0:
        return
    elif dtype == np.uint32 and tuple(np.shape(k)) == (2,):
      return
  shown = f"{type(k).__name__} {k!r}" if dtype is None else \
      f"{type(k).__name__} of dtype {dtype} and shape {tuple(np.shape(k))}"
  raise TypeError(f"{name} must be a JAX PRNG key (one key: jax.random.key(seed) or "
                  f"jax.random.PRNGKey(seed)), got {shown}")


# ---------------------------------------------------------------------------------------------
# Composite guards of the public kernels (one call at each entry of drjax.robust / planning).


def ridge_args(phi, mask, lam) -> None:
  """``phi [K, d]``, ``mask [K]``, scalar ``lam > 0`` (masked rows of phi may hold anything)."""
  numbers_(phi=phi, lam=lam)
  rank("phi", phi, 2)
  bool_array("mask", mask)
  shape("mask", mask, (np.shape(phi)[0],), "[K]")
  scalar("lam", lam)
  in_range("lam", lam, 0, lo_open=True)


def alpha_args(M, v, rho_, horizon) -> None:
  """``M [d, K]``, ``v [K]`` finite, ``rho`` scalar or ``[d]`` in [0, 1], scalar ``horizon >= 0``."""
  numbers_(M=M, v=v, horizon=horizon)
  rank("M", M, 2)
  shape("v", v, (np.shape(M)[1],), "[K]")
  rho("rho", rho_, (np.shape(M)[0],), what="[d]", scalar_ok=True)
  scalar("horizon", horizon)
  finite("M", M)
  finite("v", v)
  in_range("horizon", horizon, 0)


def grid_args(horizon, num_points) -> None:
  """``make_grid``: scalar ``horizon >= 0`` and an integer ``num_points >= 2``."""
  integer("num_points", num_points, 2)
  numeric("horizon", horizon)
  scalar("horizon", horizon)
  in_range("horizon", horizon, 0)


def tv_args(mu, V, rho_) -> None:
  """``mu [S]`` a distribution, ``V [S]`` finite, scalar ``rho`` in [0, 1]."""
  numbers_(mu=mu, V=V)
  rank("mu", mu, 1)
  shape("V", V, np.shape(mu), "[S]")
  rho("rho", rho_)
  distribution("mu", mu)
  finite("V", V)


def distribution(name: str, x, axis: int = -1, atol: float = 1e-6) -> None:
  """Concrete ``x`` must hold probability vectors along ``axis`` (>= 0, summing to 1)."""
  if not is_concrete(x):
    return
  a = _values(name, x)
  if not np.all(np.isfinite(a)) or np.any(a < -atol):
    raise ValueError(f"{name} must be a probability distribution (entries >= 0), got {_show(a)}")
  sums = a.sum(axis=axis)
  if np.any(np.abs(sums - 1) > atol * max(1, a.shape[axis] if a.ndim else 1)):
    raise ValueError(f"{name} must be a probability distribution (entries summing to 1 along "
                     f"axis {axis}), got sums in [{sums.min():g}, {sums.max():g}]")


_MODEL_FIELDS = ("phi", "theta", "mu", "reward", "fail_state", "init_dist")
_VALID_MODELS: dict = {}  # id tuple -> weak references to the validated (immutable) arrays


def _model_cache_key(m):
  leaves = [getattr(m, f) for f in _MODEL_FIELDS]
  if not all(isinstance(x, jax.Array) for x in leaves):
    return None, None  # NumPy arrays are mutable: validated every time
  return tuple(id(x) for x in leaves), leaves


def model(m, name: str = "model") -> None:
  """A finite ``LinearModel``: shapes, and (when concrete) features >= 0, factor distributions
  ``mu [H, d, S]`` summing to 1 over states, finite rewards, an initial distribution and a fail
  state index in range. A concrete model of JAX arrays (immutable) is validated once: later calls
  with the same arrays return at once."""
  for field in _MODEL_FIELDS:
    if not hasattr(m, field):
      raise TypeError(f"{name} must be a LinearModel (env.model(params)), got "
                      f"{type(m).__name__} without {field!r}")
  rank(f"{name}.phi", m.phi, 4)
  H, S, A, d = np.shape(m.phi)
  shape(f"{name}.theta", m.theta, (H, d), "[H, d]")
  shape(f"{name}.mu", m.mu, (H, d, S), "[H, d, S]")
  shape(f"{name}.reward", m.reward, (H, S, A), "[H, S, A]")
  shape(f"{name}.init_dist", m.init_dist, (S,), "[S]")
  scalar(f"{name}.fail_state", m.fail_state)
  if not is_concrete(m):
    return
  key_, leaves = _model_cache_key(m)
  if key_ is not None:
    refs = _VALID_MODELS.get(key_)
    if refs is not None and all(r() is x for r, x in zip(refs, leaves)):
      return
  in_range(f"{name}.phi", m.phi, 0)
  distribution(f"{name}.mu", m.mu, axis=-1)
  finite(f"{name}.reward", m.reward)
  distribution(f"{name}.init_dist", m.init_dist)
  fail = np.asarray(m.fail_state)
  if not np.issubdtype(fail.dtype, np.integer) or not -1 <= int(fail) < S:
    raise ValueError(f"{name}.fail_state must be a state index in [0, {S - 1}] (or -1: no fail "
                     f"state), got {fail}")
  if key_ is not None:
    if len(_VALID_MODELS) > 64:
      _VALID_MODELS.clear()
    _VALID_MODELS[key_] = tuple(weakref.ref(x) for x in leaves)


def params_type(params, cls, env_name: str, name: str = "params") -> None:
  """``params`` must be a ``cls`` (e.g. ``LinearMDPParams``), not another environment's params."""
  if not isinstance(params, cls):
    raise TypeError(f"{name} must be {cls.__name__} (from {env_name}.make_params), got "
                    f"{type(params).__name__}; params of another environment do not fit")


def env_params(env, params, name: str = "params") -> None:
  """``env.validate(params)`` (concrete params), its message prefixed by ``name`` when the caller's
  argument has another name (``env_params``, ``target_params_batch``)."""
  if not is_concrete(params):
    return
  try:
    env.validate(params)
  except (TypeError, ValueError) as e:
    if name == "params":
      raise
    raise type(e)(f"{name}: {e}") from None


# The drjax classes checked here (``Environment``, ``FiniteEnvironment``, ``QFunction``), registered
# by ``envs.base`` / ``agents.base`` as they define them: this module imports nothing of drjax. No
# object exists before its class, so an unregistered class fails a check as ``isinstance`` would.
_CLASSES: dict[str, type] = {}


def register(cls: type) -> type:
  """Class decorator: ``cls`` is the class the checks test against under its name."""
  _CLASSES[cls.__name__] = cls
  return cls


def _is_a(x, class_name: str) -> bool:
  cls = _CLASSES.get(class_name)
  return cls is not None and isinstance(x, cls)


def environment(name: str, env, finite_: bool = False) -> None:
  """``env`` must be a drjax ``Environment`` (``FiniteEnvironment`` with ``finite_``)."""
  if not _is_a(env, "FiniteEnvironment" if finite_ else "Environment"):
    what = ("a FiniteEnvironment with an exact model (LinearMDP, RandomLinearMDP)" if finite_
            else "a drjax Environment (LinearMDP(), PutOption(), drjax.envs.make(...))")
    raise TypeError(f"{name} must be {what}, got {type(env).__name__}")


def agent(name: str, a, kind: str | None = None) -> None:
  """``a`` must be a drjax agent (``online``: ``Agent``; ``offline``: ``OfflineAgent``)."""
  cfg = getattr(a, "config", None)
  ok = (callable(getattr(a, "act", None)) and callable(getattr(a, "q_values", None))
        and all(hasattr(cfg, f) for f in ("horizon", "feature_dim", "num_actions")))
  if not ok:
    raise TypeError(f"{name} must be a drjax agent (drjax.dr_lsvi_ucb(...), drjax.drpvi(...), "
                    f"drjax.registry.make(...)), got {type(a).__name__}")
  if kind is not None and getattr(a, "kind", None) != kind:
    raise TypeError(f"{name} must be an {kind} agent, got the {getattr(a, 'kind', '?')} agent "
                    f"{getattr(a, 'name', '?')!r}")


def agent_dims(agent, dims: tuple, against: str = "env") -> None:
  """``agent.config``'s ``(H, d, A)`` must equal ``dims``, those of ``against`` (``"env"``, ``"the
  model's"``)."""
  cfg = agent.config
  have = (cfg.horizon, cfg.feature_dim, cfg.num_actions)
  if have != tuple(dims):
    raise ValueError(f"agent (H, d, A) = {have} does not match {against} (H, d, A) = "
                     f"{tuple(dims)}")


def qfunction(name: str, qf, H: int, d: int, stacked: bool = False) -> None:
  """``qf`` a ``QFunction`` with ``w [H, d]`` (``stacked``: ``[K, H, d]``)."""
  if not _is_a(qf, "QFunction"):
    raise TypeError(f"{name} must be a QFunction (agent.plan / agent.fit / "
                    f"TrainOutput.final_qf), got {type(qf).__name__}")
  w = tuple(np.shape(qf.w))
  if stacked and w == (H, d):
    raise ValueError(f"{name} must be the per-episode Q-functions stacked over K episodes, w [K, "
                     f"H, d] = [K, {H}, {d}], got a single Q-function (w {w}); train with "
                     "make_train(..., record_q=True) and pass TrainOutput.qf")
  want = (None, H, d) if stacked else (H, d)
  if len(w) != len(want) or any(a is not None and a != b for a, b in zip(want, w)):
    spec = "[K, H, d]" if stacked else "[H, d]"
    raise ValueError(f"{name}.w must have shape {spec} with (H, d) = ({H}, {d}), got {w}")


def policy(name: str, p, horizon: int, num_states: int, num_actions: int) -> None:
  """An integer ``[H, S]`` table of actions in ``[0, A - 1]`` (values checked if concrete)."""
  got = tuple(np.shape(p))
  if isinstance(p, (str, bytes)) or p is None:
    raise TypeError(f"{name} must be an integer [H, S] array of actions, got {p!r}")
  if got != (horizon, num_states):
    raise ValueError(f"{name} must have shape (H, S) = ({horizon}, {num_states}), got {got}")
  dtype_ = _dtype_of(p)
  if not np.issubdtype(dtype_, np.integer):
    raise ValueError(f"{name} must hold integer action indices, got dtype {dtype_}")
  if is_concrete(p):
    a = np.asarray(p)
    if a.size and (a.min() < 0 or a.max() >= num_actions):
      raise ValueError(f"{name} actions must lie in [0, {num_actions - 1}] (0-based action "
                       f"indices), got values in [{a.min()}, {a.max()}]")


# ---------------------------------------------------------------------------------------------
# Shared helpers (not checks): one bisection, one mean / standard error.


def bisect(pred, lo, hi, iters: int):
  """``iters`` halvings of ``[lo, hi]`` keeping ``pred(lo)`` True and ``pred(hi)`` False.

  ``pred(mid) -> bool`` (traceable; arrays of bools bisect elementwise). Returns the final
  ``(lo, hi)`` (its midpoint is within ``(hi - lo) / 2**(iters + 1)`` of the switch). A
  ``lax.fori_loop``: jit/vmap-able, one trace whatever ``iters``.
  """
  jnp = jax.numpy

  def body(_, lohi):
    a, b = lohi
    mid = 0.5 * (a + b)
    ok = pred(mid)
    return jnp.where(ok, mid, a), jnp.where(ok, b, mid)

  return jax.lax.fori_loop(0, iters, body, (lo, hi))


def mean_stderr(x, axis: int = 0, xp=np):
  """``(mean, stderr)`` of ``x`` along ``axis``: ``stderr = std(ddof=1) / sqrt(n)``, 0 for
  ``n = 1``. ``xp``: ``numpy`` (host) or ``jax.numpy`` (traceable)."""
  n = x.shape[axis]
  mean = xp.mean(x, axis=axis)
  if n > 1:
    return mean, xp.std(x, axis=axis, ddof=1) / xp.sqrt(n)
  return mean, xp.zeros_like(mean)


def q_args(qf, h, phi_all, fail, *, H: int, d: int, A: int, lead: bool,
           scalar_fail: bool = False) -> None:
  """The arguments of an agent's ``q_values`` / ``act``: ``qf`` one ``QFunction`` of the agent,
  ``h`` a 0-based step, ``phi_all [A, d]`` (``lead``: ``[..., A, d]``), ``fail`` a bool
  (``scalar_fail``: a scalar one when there is no leading axis)."""
  qfunction("qf", qf, H, d)
  index("h", h, H, "(step)")
  numeric("phi_all", phi_all)
  if lead:
    if np.ndim(phi_all) < 2 or tuple(np.shape(phi_all)[-2:]) != (A, d):
      raise ValueError(f"phi_all must have shape [..., A, d] = [..., {A}, {d}], got "
                       f"{tuple(np.shape(phi_all))}")
  else:
    shape("phi_all", phi_all, (A, d), "[A, d]")
    if scalar_fail:
      scalar("fail", fail)
  bool_array("fail", fail)


def features(phi, name: str = "phi", atol: float = 1e-6, stacklevel: int = 3) -> None:
  """Features must be >= 0 (ValueError); rows that do not sum to 1 (Assumption 1) only warn."""
  if not isinstance(name, str):
    raise TypeError(f"name must be a string, got {type(name).__name__}")
  number("atol", atol, 0)
  require_concrete(name, phi, "check_features reads the feature values")
  phi = _values(name, phi)
  if phi.ndim < 1:
    raise ValueError(f"{name}: features must have shape [..., d], got a scalar")
  if not np.all(np.isfinite(phi)):
    bad = phi[~np.isfinite(phi)].flat[0]
    raise ValueError(f"{name}: features must be finite, got a non-finite value ({bad})")
  if np.any(phi < -atol):
    raise ValueError(f"{name}: features must be >= 0 (Assumption 1), got min {phi.min()}")
  sums = phi.sum(-1)
  if np.any(np.abs(sums - 1) > 1e-4):
    warnings.warn(f"{name}: feature rows do not sum to 1 (Assumption 1 violated; sums in "
                  f"[{sums.min():.3g}, {sums.max():.3g}]). Proceeding.", stacklevel=stacklevel)
