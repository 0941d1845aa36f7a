"""``drjax reproduce shifts``: robust against non-robust agents under physics shifts, with
baselines and controls.

Agents learn in a source physics and are evaluated in target physics of growing shift (the shape
of RFQI, Panaganti et al. 2022, and ODRL, Lyu et al. 2024):

* **CartPole** (``drjax.envs.gymnax_env``): RBF features on all four observation coordinates
  (2 x 2 x 3 x 3 centers for cart position and velocity, pole angle and angular velocity; d =
  72), H = 50 (uniform random survives about 22 steps, so returns are off the ceiling), shifts in the harder direction, one target family each: a shorter pole (``length``
  0.5 -> 0.05), stronger gravity (``gravity`` 9.8 -> 24.5), a weaker push (``force_mag`` 10 ->
  2.5).
* **The ledge** (``drjax.envs.ledge``, continuous lateral position, RBF features): the wind
  (probability of a gust toward the cliff) grows from the source 0.1; ``ledge.LedgeGrid`` gives
  the exact answer (``planning.robust_dp``): the robust-optimal route per rho and its exact return
  in every target (``exact_ledge``), which the learned agents are judged against.
* **online**: LSVI-UCB and DR-LSVI-UCB, K episodes in the source, tuned on the source only
  (``SweepConfig.tune = "greedy"``: per agent and rho the (beta, lambda) of a small grid around
  the environment's recommendation with the best mean source return of the greedy policy; the
  selection is recorded), both evaluation modes (``played``: the final optimistic plan;
  ``greedy``: ``replan`` at beta = 0).
* **offline**: PEVI, DRPVI, DRPVI with the monotone z estimator (``drpvi-mono``), VA-DRPVI,
  R2PVI (TV, KL, chi-square) and DRVI-L, fitted to N uniform-behavior trajectories of the source.
* **controls and baselines in every panel** (``SweepConfig.controls``): every robust agent at
  rho = 0, its nominal counterpart (LSVI-UCB, PEVI), R2PVI at a regularization weight so large
  that its adversary cannot move (``REG_NOMINAL``: its nominal limit), and the baselines
  ``uniform-random`` and ``constant`` (each action).
* evaluation: ``test_episodes`` Monte Carlo episodes per (run, target), common random numbers
  (seed j's evaluation key is the same for every agent, setting and target).

Each (environment, family, online / offline) is one ``drjax.sweeps.run`` with all its agents.
The band of every curve is ``mean +- 1.96 * stderr`` over seeds, ``stderr = std(ddof=1) /
sqrt(seeds)`` of the per-seed Monte Carlo returns.

Two exact checks of causes on finite models (``discount_check``; ``exact_ledge``): with an
absorbing zero-value fail state and deterministic transitions to alive states, the TV robust value
is the nominal value of the problem discounted by ``1 - rho`` (so on near-deterministic CartPole
robustness only makes the agent more myopic); on the ledge the robust-optimal route changes at
``ledge_routes.critical_rho``.

Grids: ``default`` (the study, 16 seeds), ``quick`` (fewer seeds, targets and episodes),
``smoke`` (the tests') and ``full`` (a GPU job, ``benchmarks/gpu_shifts.sh``).
"""

from __future__ import annotations

import dataclasses
import math
import os
import time

import numpy as np

from drjax import sweeps

ONLINE = ("lsvi-ucb", "dr-lsvi-ucb")
OFFLINE = ("pevi", "drpvi", "drpvi-mono", "va-drpvi", "r2pvi-tv", "r2pvi-kl", "r2pvi-chi2",
           "drvi-l")
BASELINES = ("uniform-random", "constant")
# robust agent -> nominal counterpart (drjax.agents.registry.NOMINAL for the ones in the study)
ROBUST = {"dr-lsvi-ucb": "lsvi-ucb", "drpvi": "pevi", "drpvi-mono": "pevi", "va-drpvi": "pevi",
          "drvi-l": "pevi", "r2pvi-tv": "pevi", "r2pvi-kl": "pevi", "r2pvi-chi2": "pevi"}
REGULARIZED = ("r2pvi-tv", "r2pvi-kl", "r2pvi-chi2")
REG_NOMINAL = 1e4  # R2PVI's nominal limit: TV exactly nominal once reg_weight >= max V - min V
BETA_SCALES = (0.3, 1.0)  # the tuning grid: these multiples of the recommended beta
Z95 = 1.96


@dataclasses.dataclass(frozen=True)
class EnvSpec:
  """One environment of the study.

  Attributes:
    name: the registry name.
    env_args: constructor arguments ``((key, value), ...)``.
    families: ``((field, source, hardest), ...)``: one target family per field, the targets
      ``linspace`` from the source to the hardest value (the source included).
    return_bound: the largest return (scales the recommended beta: ``drjax.envs.recommend``).
    episodes: online K; trajectories: offline N (uniform behavior).
    rhos: the robust agents' uncertainty levels (rho = 0 is added as the control).
    reg_weight: R2PVI's regularization weight (``REG_NOMINAL`` is added as its control).
    actions: the ``constant`` baseline's actions.
    beta_offline, lam_offline: the offline agents' penalty multiplier and ridge.
  """

  name: str
  env_args: tuple
  families: tuple
  return_bound: float | None  # None: the horizon (a reward of at most 1 per step)
  episodes: int
  trajectories: int
  rhos: tuple
  reg_weight: float
  actions: tuple
  beta_offline: float = 0.1
  lam_offline: float = 0.1


CARTPOLE = EnvSpec("cartpole", (("horizon", 50), ("centers_per_dim", (2, 2, 3, 3))),
                   (("length", 0.5, 0.05), ("gravity", 9.8, 24.5), ("force_mag", 10.0, 2.5)),
                   return_bound=None, episodes=30, trajectories=200, rhos=(0.05, 0.2),
                   reg_weight=3.0, actions=(0, 1))
LEDGE = EnvSpec("ledge", (("horizon", 10),), (("wind", 0.1, 0.5),), return_bound=1.0,
                episodes=100, trajectories=200, rhos=(0.1, 0.3), reg_weight=0.1,
                actions=(0, 1, 2))


@dataclasses.dataclass(frozen=True)
class Grid:
  """One grid of the study (every field is recorded in the panels' configuration)."""

  envs: tuple = (CARTPOLE, LEDGE)
  seeds: int = 16
  targets: int = 4  # per family, the source included
  test_episodes: int = 100
  episodes_scale: float = 1.0  # K and N of every environment times this
  modes: tuple = ("online", "offline")
  offline_agents: tuple = OFFLINE
  seed: int = 0


def _tiny(spec: EnvSpec, **args) -> EnvSpec:
  return dataclasses.replace(spec, env_args=tuple(args.items()))


GRIDS = {
    "default": Grid(),
    "quick": Grid(seeds=8, targets=3, test_episodes=50, episodes_scale=0.5),
    "smoke": Grid(envs=(_tiny(CARTPOLE, horizon=5, centers_per_dim=2), _tiny(LEDGE, horizon=6,
                                                                           split=3)),
                  seeds=2, targets=2, test_episodes=4, episodes_scale=0.1,
                  offline_agents=("pevi", "drpvi", "r2pvi-tv")),
    # A GPU job (benchmarks/gpu_shifts.sh): 5x the seeds, more targets, episodes, K and N.
    "full": Grid(seeds=80, targets=6, test_episodes=500, episodes_scale=3.0),
}


MULTI_ENV = "cartpole-shifts"  # CartPole with every family of the study in one target axis


def multi_shift_env():
  """Registers (once) and returns the class of ``MULTI_ENV``: a ``GymnaxEnv`` whose target
  family ``index`` walks several families, so that one sweep trains each run once and evaluates it
  on the targets of every family (one compiled program per agent, not one per family).

  The constructor argument ``shifts = ((field, (v_1, ..., v_n)), ...)`` (n values per family);
  target ``t`` (an integer ``0 .. F n - 1``) is family ``t // n`` at its value ``t % n``, the
  other fields at the source's."""
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  from drjax import envs  # pylint: disable=g-import-not-at-top
  from drjax.envs.gymnax_env import GymnaxEnv  # pylint: disable=g-import-not-at-top
  global _MultiShift  # pylint: disable=global-statement
  if _MultiShift is not None:
    return _MultiShift

  @dataclasses.dataclass(frozen=True)
  class MultiShift(GymnaxEnv):
    """``GymnaxEnv`` (CartPole) with the target family ``index`` over ``shifts``."""

    shifts: tuple = ()

    def __post_init__(self):
      object.__setattr__(self, "shifts", tuple((str(f), tuple(float(x) for x in v))
                                               for f, v in self.shifts))
      if not self.shifts or len({len(v) for _, v in self.shifts}) != 1:
        raise ValueError(f"shifts: give ((field, values), ...) with equally many values, got "
                         f"{self.shifts!r}")
      super().__post_init__()

    @property
    def targets(self) -> tuple:
      return ("index",) + super().targets

    def target_params(self, source_params, name_or_names, value):
      if name_or_names != "index":
        return super().target_params(source_params, name_or_names, value)
      n = len(self.shifts[0][1])
      t = jnp.round(jnp.asarray(value)).astype(jnp.int32)
      fam, k = t // n, t % n
      names = tuple(f for f, _ in self.shifts)
      vals = tuple(jnp.where(fam == j, jnp.asarray(v)[k], getattr(source_params.physics, f))
                   for j, (f, v) in enumerate(self.shifts))
      return super().target_params(source_params, names, vals)

  def make(**kw):
    return MultiShift(env_id="CartPole-v1", **kw)

  from drjax.envs import _GYMNAX_ARGS  # pylint: disable=g-import-not-at-top
  envs.register(MULTI_ENV, make, envs.SweepSpec(
      _GYMNAX_ARGS + ("shifts",), ("length", "gravity", "masspole", "masscart", "force_mag"),
      "index", targets=("index",), eval_modes=("played", "greedy")))
  _MultiShift = MultiShift
  return MultiShift


_MultiShift = None


def target_grid(field_family: tuple, num: int) -> np.ndarray:
  """The targets of a family ``(field, source, hardest)``: ``linspace(hardest, source, num)``
  in increasing order of the field (as the sweep's ``targets``)."""
  _, src, hard = field_family
  lo, hi = min(src, hard), max(src, hard)
  return sweeps.target_values(("x", lo, hi, num))


def episodes(grid: Grid, spec: EnvSpec) -> tuple[int, int]:
  """``(K, N)`` of ``spec`` under ``grid`` (at least 2 each)."""
  return (max(2, round(spec.episodes * grid.episodes_scale)),
          max(2, round(spec.trajectories * grid.episodes_scale)))


def recommended_beta(spec: EnvSpec) -> dict:
  """``{agent: beta}`` at lambda ``recommend.LAM``: ``SCALE R sqrt(LAM) / gap`` with the
  agent's width gap measured at reset states (``drjax.envs.recommend``) and ``R`` the
  environment's largest return (``EnvSpec.return_bound``)."""
  from drjax import envs  # pylint: disable=g-import-not-at-top
  from drjax.envs import recommend  # pylint: disable=g-import-not-at-top
  norm, gap = recommend.widths(envs.make(spec.name, **dict(spec.env_args)))
  R = spec.return_bound or float(dict(spec.env_args)["horizon"])
  b = lambda g: float(f"{recommend.SCALE * R * math.sqrt(recommend.LAM) / g:.3g}")  # noqa: E731
  return {"lsvi-ucb": b(norm), "dr-lsvi-ucb": b(gap)}


def config(grid: Grid, spec: EnvSpec, mode: str) -> sweeps.SweepConfig:
  """The sweep of one (environment, ``"online"`` / ``"offline"``): all its agents, baselines and
  controls, and the targets of all its families (``multi_shift_env`` for several)."""
  if mode not in ("online", "offline"):
    raise ValueError(f"mode must be 'online' or 'offline', got {mode!r}")
  K, N = episodes(grid, spec)
  env, env_args = spec.name, dict(spec.env_args)
  if len(spec.families) > 1:
    multi_shift_env()
    env = MULTI_ENV
    env_args["shifts"] = tuple((f, tuple(target_grid(fam, grid.targets).tolist()))
                               for fam in spec.families for f in fam[:1])
    n = grid.targets * len(spec.families)
    targets = ("index", 0.0, float(n - 1), n)
  else:
    field, src, hard = spec.families[0]
    targets = (field, min(src, hard), max(src, hard), grid.targets)
  common = dict(env=env, env_args=env_args, seeds=grid.seeds, seed=grid.seed, targets=targets,
                test_episodes=grid.test_episodes, controls=True,
                hparams={"action": tuple(float(a) for a in spec.actions)})
  if mode == "online":
    from drjax.envs import recommend  # pylint: disable=g-import-not-at-top
    rec = recommended_beta(spec)
    ah = {a: {"beta": tuple(float(f"{s * rec[a]:.3g}") for s in BETA_SCALES),
              "lam": (recommend.LAM,)} for a in ONLINE}
    return sweeps.SweepConfig(agents=ONLINE + BASELINES, episodes=K, rho=tuple(spec.rhos),
                              agent_hparams=ah, eval_modes=("played", "greedy"), tune="greedy",
                              **common)
  return sweeps.SweepConfig(agents=tuple(grid.offline_agents) + BASELINES, episodes=K,
                            rho=tuple(spec.rhos), beta=(spec.beta_offline,),
                            lam=(spec.lam_offline,), trajectories=(N,), behavior="uniform",
                            reg_weight=(spec.reg_weight, REG_NOMINAL), **common)


def decode_targets(grid: Grid, spec: EnvSpec, df) -> tuple[np.ndarray, np.ndarray]:
  """``(family, target)`` of every row of a sweep of ``config(grid, spec, mode)``."""
  if len(spec.families) == 1:
    f = spec.families[0][0]
    return np.full(len(df), f, object), df[f"target_{f}"].to_numpy(np.float64)
  t = np.rint(df["target_index"].to_numpy(np.float64)).astype(int)
  fam, k = t // grid.targets, t % grid.targets
  values = np.array([target_grid(f, grid.targets) for f in spec.families])
  return np.array([f[0] for f in spec.families], object)[fam], values[fam, k]


def label(agent: str, rho=None, reg=None, action=None, policy: str = "played") -> str:
  """The curve's name: ``"dr-lsvi-ucb rho=0.05 greedy"``, ``"r2pvi-kl reg=3"``, ``"constant
  a=1"``, ``"pevi"``."""
  s = agent
  if agent in REGULARIZED:
    s += f" reg={float(reg):g}"
  elif agent in ROBUST:
    s += f" rho={float(rho):g}"
  if agent == "constant":
    s += f" a={int(action)}"
  if policy == "greedy":
    s += " greedy"
  return s


def kind(agent: str, rho=None, reg=None) -> str:
  """``baseline``, ``nominal`` (a non-robust agent), ``control`` (a robust agent at its nominal
  limit: rho = 0, or R2PVI at ``REG_NOMINAL``) or ``robust``."""
  if agent in BASELINES:
    return "baseline"
  if agent not in ROBUST:
    return "nominal"
  if agent in REGULARIZED:
    return "control" if float(reg) >= REG_NOMINAL else "robust"
  return "control" if float(rho) == 0.0 else "robust"


def _tuned(res, df):
  """The rows of the tuned (beta, lambda) per online agent and rho (``select_best`` of the
  greedy policy's source value); baselines kept."""
  sel = sweeps.select_best(res.summary, "greedy")
  keep = np.zeros(len(df), bool)
  base = df["agent"].isin(BASELINES).to_numpy()
  keep |= base
  for _, s in sel.iterrows():
    m = ((df["agent"] == s["agent"]) & np.isclose(df["beta"], s["beta"])
         & np.isclose(df["lam"], s["lam"]))
    if "rho" in sel.columns and not (isinstance(s["rho"], float) and math.isnan(s["rho"])):
      m &= np.isclose(df["rho"].astype(float), float(s["rho"]))
    keep |= m.to_numpy()
  cols = [c for c in ("agent", "rho", "beta", "lam", "mean", "stderr", "count") if c in sel]
  return df[keep], sel[cols].to_dict("records")


def collect(grid: Grid, *, out: str | None = None, log=None):
  """Runs the sweeps; returns ``(rows, tuning)``: the tidy rows (one per run x policy x target)
  with ``env``, ``family``, ``mode``, ``agent``, ``label``, ``kind``, ``rho``, ``seed``,
  ``target`` and ``value`` (the run's Monte Carlo return), and the online selections."""
  import pandas as pd  # pylint: disable=g-import-not-at-top
  log = log or (lambda m: None)
  frames, tuning, seconds = [], {}, {}
  for spec in grid.envs:
    for mode in grid.modes:
      cfg = config(grid, spec, mode)
      key = f"{spec.name}-{mode}"
      t0 = time.perf_counter()
      path = None if out is None else os.path.join(out, key)
      res = sweeps.run(cfg, out=path, quiet=True)
      df = res.df
      if mode == "online":
        df, tuning[key] = _tuned(res, df)
      n = len(df)
      col = lambda c, fill=np.nan: (df[c].to_numpy(np.float64) if c in df  # noqa: E731
                                    else np.full(n, fill))
      agent = df["agent"].astype(str).to_numpy()
      rho, reg, act = col("rho"), col("reg_weight"), col("action")
      policy = (df["policy"].astype(str).to_numpy() if "policy" in df
                else np.full(n, "played"))
      family, target = decode_targets(grid, spec, df)
      frames.append(pd.DataFrame({
          "env": spec.name, "family": family, "mode": mode, "agent": agent,
          "label": [label(*x) for x in zip(agent, rho, reg, act, policy)],
          "kind": [kind(a, r, g) for a, r, g in zip(agent, rho, reg)],
          "policy": policy, "rho": rho, "reg_weight": reg, "beta": col("beta"),
          "seed": df["seed"].to_numpy(), "target": target,
          "value": df["value"].to_numpy(np.float64)}))
      seconds[key] = round(time.perf_counter() - t0, 1)
      log(f"[drjax]   {key}: {n} rows ({seconds[key]:.1f} s)")
  return pd.concat(frames, ignore_index=True), tuning, seconds


def band(values) -> dict:
  """Mean, stderr over seeds (``std(ddof=1) / sqrt(n)``) and the 95% band ``mean +- 1.96 se``."""
  v = np.asarray(values, np.float64)
  n = len(v)
  mean = float(v.mean())
  se = float(v.std(ddof=1) / math.sqrt(n)) if n > 1 else 0.0
  return {"mean": mean, "stderr": se, "lo": mean - Z95 * se, "hi": mean + Z95 * se, "seeds": n}


def analyze(df) -> list:
  """One curve per (env, family, mode, label): the band at every target."""
  curves = []
  for (env, fam, mode, lab), g in df.groupby(["env", "family", "mode", "label"], sort=False):
    pts = [{"target": float(t), **band(gt.sort_values("seed")["value"])}
           for t, gt in g.groupby("target", sort=True)]
    first = g.iloc[0]
    curves.append({"env": env, "family": fam, "mode": mode, "label": lab,
                   "agent": str(first["agent"]), "kind": str(first["kind"]),
                   "policy": str(first["policy"]), "rho": float(first["rho"]),
                   "points": pts})
  return curves


# ----------------------------------------------------------------------------- exact checks


def exact_ledge(spec: EnvSpec, rhos, winds) -> dict:
  """The exact answer on ``ledge.LedgeGrid`` (the geometry of ``spec``): per rho, the route and
  robust value of ``planning.robust_dp``'s policy at the source, and that policy's exact return
  (nominal kernel) at every target wind; the critical rho and wind."""
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  from drjax import envs, planning  # pylint: disable=g-import-not-at-top
  from drjax import ledge_routes  # pylint: disable=g-import-not-at-top
  from drjax.envs import ledge  # pylint: disable=g-import-not-at-top
  env = envs.make(spec.name, **dict(spec.env_args))
  grid = ledge._grid_of(env)  # pylint: disable=protected-access
  src = grid.default_params()
  out = {"geometry": {"horizon": grid.horizon, "num_rows": grid.num_rows, "split": grid.split},
         "source_wind": float(src.wind), "safe_reward": float(src.safe_reward),
         "critical_rho": ledge_routes.critical_rho(grid, src),
         "critical_wind": ledge_routes.critical_wind(grid, src), "winds": [float(w) for w in winds],
         "policies": []}
  model = grid.model(src)
  for rho, route, value in ledge_routes.route_table(grid, src, [float(r) for r in rhos]):
    pi = planning.robust_dp(model, jnp.full((grid.horizon, grid.feature_dim), rho,
                                            model.mu.dtype)).policy
    ret = []
    for w in winds:
      m = grid.model(grid.target_params(src, "wind", float(w)))
      ret.append(float(planning.initial_value(m, planning.nominal_evaluate(m, pi))))
    out["policies"].append({"rho": rho, "route": route, "robust_value": value,
                            "returns": ret})
  return out


def discount_model(num_states: int = 6, num_actions: int = 2, horizon: int = 8, seed: int = 0):
  """A finite ``LinearModel`` (one-hot features) whose alive states move deterministically to
  alive states (a random next state per (h, s, a)), rewards in [0, 1], and an absorbing zero-value
  fail state (the last): the situation of near-deterministic CartPole."""
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  from drjax.envs.base import LinearModel  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(seed)
  S, A, H = num_states + 1, num_actions, horizon
  F, d = S - 1, S * A
  phi = np.zeros((H, S, A, d))
  mu = np.zeros((H, d, S))
  reward = np.zeros((H, S, A))
  for h in range(H):
    for s in range(S):
      for a in range(A):
        i = s * A + a
        phi[h, s, a, i] = 1.0
        mu[h, i, F if s == F else rng.integers(num_states)] = 1.0
        reward[h, s, a] = 0.0 if s == F else rng.uniform()
  theta = reward.reshape(H, d)  # one-hot: theta_h[s A + a] = r_h(s, a)
  init = np.zeros(S)
  init[0] = 1.0
  f = lambda x: jnp.asarray(x, jnp.result_type(float))  # noqa: E731
  return LinearModel(phi=f(phi), theta=f(theta), mu=f(mu), reward=f(reward),
                     fail_state=jnp.asarray(F, jnp.int32), init_dist=f(init))


def discounted_dp(model, gamma: float) -> np.ndarray:
  """``[H + 1, S]``: nominal optimal values with the continuation discounted by ``gamma``
  (``V_h = max_a r + gamma P V_{h+1}``), a NumPy loop."""
  P = np.asarray(model.transition, np.float64)
  r = np.asarray(model.reward, np.float64)
  H, S = r.shape[:2]
  v = np.zeros((H + 1, S))
  for h in reversed(range(H)):
    v[h] = np.max(r[h] + gamma * P[h] @ v[h + 1], axis=-1)
  return v


def discount_check(rhos=(0.0, 0.05, 0.2, 0.5), seeds=(0, 1, 2)) -> dict:
  """(i) the TV / absorbing-fail discount, exactly: on ``discount_model`` the robust values of
  ``planning.robust_dp`` at rho equal the nominal values of the problem discounted by ``1 -
  rho``. Returns the largest absolute difference over models, rho, steps and states."""
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  from drjax import planning  # pylint: disable=g-import-not-at-top
  worst = 0.0
  for seed in seeds:
    m = discount_model(seed=seed)
    H, d = m.theta.shape
    for rho in rhos:
      v = np.asarray(planning.robust_dp(m, jnp.full((H, d), rho, m.mu.dtype)).v, np.float64)
      worst = max(worst, float(np.max(np.abs(v - discounted_dp(m, 1.0 - rho)))))
  return {"rhos": list(rhos), "models": len(seeds), "max_abs_diff": worst}


def panels(curves: list, grid: Grid, seconds: float, runs: int, tuning: dict,
           sweep_seconds: dict, exact: dict | None = None) -> dict:
  """The figure's panels (one per environment, family and mode), each with the full config."""
  from drjax.sweeps import provenance  # pylint: disable=g-import-not-at-top
  envs = {}
  for s in grid.envs:
    K, N = episodes(grid, s)
    envs[s.name] = {"args": dict(s.env_args), "episodes": K, "trajectories": N,
                    "rhos": list(s.rhos), "reg_weight": [s.reg_weight, REG_NOMINAL],
                    "constant_actions": list(s.actions), "beta_offline": s.beta_offline,
                    "lam_offline": s.lam_offline,
                    "families": {f: {"source": src, "hardest": hard,
                                     "targets": target_grid((f, src, hard), grid.targets).tolist()}
                                 for f, src, hard in s.families}}
  cfg = {"experiment": "shifts", "grid": dataclasses.asdict(grid), "envs": envs,
         "online_agents": list(ONLINE), "offline_agents": list(grid.offline_agents),
         "baselines": list(BASELINES), "behavior": "uniform", "reward": "regressed",
         "tuning": {"by": "source", "policy": "greedy", "beta_scales": list(BETA_SCALES),
                    "selected": tuning},
         "band": "mean +- 1.96 * stderr over seeds (stderr = std(ddof=1) / sqrt(seeds)) of each "
                 "seed's Monte Carlo return",
         "evaluation": "test_episodes Monte Carlo episodes per run and target, common random "
                       "numbers across agents, settings and targets", "runs": runs,
         "seconds": round(seconds, 1), "sweep_seconds": sweep_seconds}
  try:
    cfg["provenance"] = provenance()
  except Exception:  # pylint: disable=broad-except
    pass
  out = {}
  for s in grid.envs:
    for f, _, _ in s.families:
      for mode in grid.modes:
        out[f"{s.name}-{f}-{mode}"] = {
            "curves": [c for c in curves if c["env"] == s.name and c["family"] == f
                       and c["mode"] == mode], "config": cfg}
  if exact is not None:
    out["exact"] = {"curves": [], "config": cfg, **exact}
  return out


def _panel_keys(ps: dict) -> list:
  return [k for k in ps if k != "exact"]


def plot(ps: dict, path_base: str) -> None:
  """One panel per (environment, family, mode): return in the target against the shifted field
  (dotted line: the source), bands 95% over seeds; baselines thin dashed, controls dash-dot,
  greedy policies dotted; on the ledge the exact returns of the robust-optimal policies (black)."""
  from drjax.paper import plotting  # pylint: disable=g-import-not-at-top
  keys = _panel_keys(ps)
  cfg = ps[keys[0]]["config"]
  cols = 2
  rows = (len(keys) + cols - 1) // cols
  fig = plotting.new_figure((11, 3.4 * rows))
  axes = np.asarray(fig.subplots(rows, cols)).reshape(-1)
  styles = {"baseline": ("--", 0.8), "control": ("-.", 1.0), "nominal": ("-", 1.2),
            "robust": ("-", 1.8)}
  for ax, key in zip(axes, keys):
    panel = ps[key]["curves"]
    c0 = panel[0]
    fam = cfg["envs"][c0["env"]]["families"][c0["family"]]
    for c in panel:
      x = [p["target"] for p in c["points"]]
      ls, lw = styles[c["kind"]]
      if c["policy"] == "greedy":
        ls = ":"
      ax.plot(x, [p["mean"] for p in c["points"]], ls=ls, lw=lw, marker="o", ms=2,
              label=c["label"])
      ax.fill_between(x, [p["lo"] for p in c["points"]], [p["hi"] for p in c["points"]],
                      alpha=0.12)
    if c0["env"] == "ledge" and "exact" in ps:
      for p in ps["exact"]["policies"]:
        ax.plot(ps["exact"]["winds"], p["returns"], color="k", lw=0.8,
                ls="-" if p["route"] == "ledge" else "--")
    ax.axvline(fam["source"], color="k", ls=":", lw=1)
    ax.set(xlabel=f"target {c0['family']} (source {fam['source']:g})",
           ylabel="return in target", title=f"{c0['env']}, {c0['mode']}")
    ax.legend(fontsize=5, ncol=2)
  for ax in axes[len(keys):]:
    ax.set_visible(False)
  fig.tight_layout(rect=(0, 0.03, 1, 1))
  fig.text(0.01, 0.005, f"{cfg['grid']['seeds']} seeds; bands: mean +- 1.96 stderr over seeds; "
                        f"{cfg['grid']['test_episodes']} Monte Carlo episodes per run and target",
           fontsize=7)
  plotting.save_figure(fig, path_base)


def _at(c: dict, x: float) -> dict:
  return min(c["points"], key=lambda p: abs(p["target"] - x))


def _fmt(p: dict) -> str:
  return f"{p['mean']:.2f} [{p['lo']:.2f}, {p['hi']:.2f}]"


def summary_rows(ps: dict) -> list:
  """Per curve: the return at the source and at the hardest target, with bands, and the
  difference to the nominal counterpart's (same policy) at both."""
  cfg = ps[_panel_keys(ps)[0]]["config"]
  rows = []
  for key in _panel_keys(ps):
    curves = {c["label"]: c for c in ps[key]["curves"]}
    for c in ps[key]["curves"]:
      fam = cfg["envs"][c["env"]]["families"][c["family"]]
      xs = (fam["source"], fam["hardest"])
      pts = [_at(c, x) for x in xs]
      nom = ROBUST.get(c["agent"])
      nominal = curves.get(nom + (" greedy" if c["policy"] == "greedy" else "")) if nom else None
      diff = ([p["mean"] - _at(nominal, x)["mean"] for p, x in zip(pts, xs)]
              if nominal else [None, None])
      rows.append({"panel": key, "label": c["label"], "kind": c["kind"], "targets": list(xs),
                   "points": pts, "minus_nominal": diff})
  return rows


def summary_table(ps: dict) -> list:
  """``results.md`` lines: the return at the source and the hardest target of every curve."""
  from drjax.paper.tables import md_table  # pylint: disable=g-import-not-at-top
  cfg = ps[_panel_keys(ps)[0]]["config"]
  rows = []
  for r in summary_rows(ps):
    d = ("" if r["minus_nominal"][0] is None
         else " / ".join(f"{v:+.2f}" for v in r["minus_nominal"]))
    rows.append([r["panel"], r["label"], r["kind"]] + [_fmt(p) for p in r["points"]] + [d])
  g = cfg["grid"]
  lines = ["", f"## shifts: return in the target (mean [95% band over {g['seeds']} seeds], "
               f"{g['test_episodes']} Monte Carlo episodes per run and target)", ""]
  lines += md_table(["sweep", "curve", "kind", "source", "hardest target",
                     "minus nominal (source / hardest)"], rows)
  return lines


def describe(g: Grid) -> str:
  """The log line of ``drjax reproduce shifts``."""
  envs = ", ".join(f"{s.name} ({'/'.join(f[0] for f in s.families)}; K, N = "
                   f"{'/'.join(map(str, episodes(g, s)))})" for s in g.envs)
  return (f"shift study: {envs}; online {list(ONLINE)} tuned on the source, offline "
          f"{list(g.offline_agents)}, baselines and controls; {g.seeds} seeds, {g.targets} "
          f"targets x {g.test_episodes} episodes")


def run(grid: str | Grid = "default", *, sweep_dir: str | None = None, log=None):
  """Collects and analyses the study; returns ``(panels, df)``."""
  g = GRIDS[grid] if isinstance(grid, str) else grid
  t0 = time.perf_counter()
  df, tuning, secs = collect(g, out=sweep_dir, log=log)
  if sweep_dir is not None:
    df.to_parquet(os.path.join(sweep_dir, "rows.parquet"))
  exact = None
  ledges = [s for s in g.envs if s.name == "ledge"]
  if ledges:
    s = ledges[0]
    fam = s.families[0]
    exact = exact_ledge(s, (0.0,) + tuple(s.rhos), target_grid(fam, g.targets))
  exact = {"ledge": exact, "discount": discount_check()} if exact else {
      "discount": discount_check()}
  curves = analyze(df)
  ps = panels(curves, g, time.perf_counter() - t0, len(df), tuning, secs)
  ps["exact"] = {"curves": [], "config": ps[_panel_keys(ps)[0]]["config"],
                 **(exact.get("ledge") or {}), "discount": exact["discount"]}
  return ps, df


def findings(ps: dict) -> dict:
  """``docs/findings/shifts.json``: per curve the band at the source and the hardest target and
  the difference to its nominal counterpart; the online selections, the exact checks, the
  configuration and the times."""
  keys = _panel_keys(ps)
  cfg = ps[keys[0]]["config"]
  rows = []
  for r in summary_rows(ps):
    rows.append({"sweep": r["panel"], "curve": r["label"], "kind": r["kind"],
                 "source": r["points"][0], "hardest": r["points"][1],
                 "minus_nominal": {"source": r["minus_nominal"][0],
                                   "hardest": r["minus_nominal"][1]}})
  exact = {k: v for k, v in ps.get("exact", {}).items() if k not in ("curves", "config")}
  return {"rows": rows, "exact": exact, "tuning": cfg["tuning"], "seconds": cfg["seconds"],
          "sweep_seconds": cfg["sweep_seconds"], "config": {k: v for k, v in cfg.items()
                                                            if k not in ("tuning",)}}


def load_panels(directory: str) -> dict:
  """The panels ``drjax reproduce shifts`` wrote (``DIR/shifts/*.json``)."""
  import glob  # pylint: disable=g-import-not-at-top
  import json  # pylint: disable=g-import-not-at-top
  out = {}
  for f in sorted(glob.glob(os.path.join(directory, "*.json"))):
    with open(f) as fh:
      out[os.path.splitext(os.path.basename(f))[0]] = json.load(fh)
  return out
