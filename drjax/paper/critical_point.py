"""Appendix A's claims about the simulated linear MDP, checked by exact planning.

1. The critical perturbation level (Appendix A, eq. (critical point)): in the target domain with
   perturbation level ``q`` the optimal first action at ``x1`` is ``(1,1,1,1)`` for small ``q`` and
   ``(-1,-1,-1,-1)`` beyond a critical ``q*``; the paper states
   ``q* = (4 - 2 m (3 - m)) / (4 - 2 m)`` with ``m = delta + ||xi||_1``. We find the switch by
   exact (nominal) DP on the q-target over a grid of q (vmapped), refine it by bisection, and
   compare with the paper's formula and with the closed form that the exact Bellman equations
   give (derived below).
2. The robust-optimal first action and robust value ``V_1^{*,rho}(x1)`` for ``rho_{1,4}`` in
   ``{0.3, 0.4, 0.5}`` (others 0), the ``rho`` at which the robust first action switches, and the
   claim "larger rho_{1,4} is more robust": the worst-case (over ``q`` in [0, 1]) target value of
   the robust-optimal policy as a function of ``rho``.
3. Optionally (``--learning``), AveSubopt(k) of DR-LSVI-UCB on the source domain and the fitted
   slope of ``log AveSubopt`` vs ``log k``.

Closed form. With ``c = delta + <xi, a>`` and ``m = delta + ||xi||_1``: ``V_3 = (m, m, m, 0, 1)``;
``V_2(x2) = max_c [2c + (1 - c)(1 - p) m] = 2m + (1 - m)(1 - p) m`` and ``V_2(x5) = 2``,
``V_2(x4) = 0``. In the q-target, ``Q_1(x1, c) = (1 - c) V_2(x2) + 2 c (1 - q)`` is affine in
``c``, so the first action switches from ``c = m`` to ``c = delta - ||xi||_1`` at
``q* = 1 - V_2(x2) / 2 = 1 - m - (1 - p) m (1 - m) / 2`` (``(1 - m)(2 - m) / 2`` at ``p = 0``),
whereas the paper's formula simplifies to ``(1 - m)(2 - m) / (2 - m) = 1 - m``. Robustly, the
adversary moves ``rho_{1,4}`` of factor 4's mass from ``x5`` to the lowest-value state ``x4``, so
in the source domain (factor 1 keeps its ``p``) the switch is at
``rho* = 1 - (1 - p) V_2(x2) / 2``.

Run ``python -m experiments.critical_point`` for a markdown table.
"""

from __future__ import annotations

import drjax._xla  # noqa: I001  isort: skip

drjax._xla.configure()

import argparse  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from drjax import planning  # noqa: E402
from drjax.envs import linear_mdp  # noqa: E402
from drjax.envs.linear_mdp import LinearMDP, LinearMDPParams  # noqa: E402

ALL_ONES = 15  # index of (1, 1, 1, 1) in itertools.product order
ALL_MINUS = 0  # index of (-1, -1, -1, -1)
X1 = linear_mdp.X1


def paper_q_star(delta: float, xi_norm: float) -> float:
  """The paper's critical point, Appendix A eq. (critical point)."""
  m = delta + xi_norm
  return (4 - 2 * m * (3 - m)) / (4 - 2 * m)


def derived_q_star(delta: float, xi_norm: float, p: float) -> float:
  """``1 - V_2(x2) / 2`` from the exact Bellman equations (module docstring)."""
  m = delta + xi_norm
  return 1 - m - (1 - p) * m * (1 - m) / 2


def derived_rho_star(delta: float, xi_norm: float, p: float) -> float:
  """``1 - (1 - p) V_2(x2) / 2``: where the robust-optimal first action switches."""
  m = delta + xi_norm
  return 1 - (1 - p) * (2 * m + (1 - m) * (1 - p) * m) / 2


def _rho_14(rho) -> jax.Array:
  return jnp.zeros((3, 4), jnp.result_type(float)).at[0, 3].set(rho)


def _params(delta, p, xi_norm, q, target) -> LinearMDPParams:
  f = lambda x: jnp.asarray(x, jnp.result_type(float))  # noqa: E731
  return LinearMDPParams(delta=f(delta), p=f(p), xi_norm=f(xi_norm), q=f(q), target=f(target))


@jax.jit
def _target_plan(delta, p, xi_norm, q, rho):
  """``(first action at x1, all tie?, V_1*(x1))`` in the q-target with rho around it."""
  env = LinearMDP()
  model = env.model(_params(delta, p, xi_norm, q, 1.0))
  res = planning.robust_dp(model, rho)
  return res.policy[0, X1], res.ties[0, X1], res.v[0, X1]


@jax.jit
def _source_plan(delta, p, xi_norm, rho):
  env = LinearMDP()
  model = env.model(_params(delta, p, xi_norm, 0.0, 0.0))
  res = planning.robust_dp(model, rho)
  return res.policy, res.ties[0, X1], res.v[0, X1]


def _bisect(pred, lo, hi, iters: int = 80):
  """Boundary of ``pred`` in ``[lo, hi]`` (``pred(lo)`` True, ``pred(hi)`` False); traceable."""

  def body(_, lohi):
    lo, hi = lohi
    mid = 0.5 * (lo + hi)
    ok = pred(mid)
    return jnp.where(ok, mid, lo), jnp.where(ok, hi, mid)

  lo, hi = jax.lax.fori_loop(0, iters, body, (lo, hi))
  return 0.5 * (lo + hi)


@jax.jit
def _q_switch(delta, p, xi_norm, lo, hi, a_lo):
  """The q in ``[lo, hi]`` where the target-optimal first action stops being ``a_lo``."""
  zero = jnp.zeros((3, 4), jnp.result_type(float))
  return _bisect(lambda q: _target_plan(delta, p, xi_norm, q, zero)[0] == a_lo, lo, hi)


@jax.jit
def _rho_switch(delta, p, xi_norm):
  """The rho_{1,4} in [0, 1] where the robust first action stops being (1,1,1,1)."""
  pred = lambda r: _source_plan(delta, p, xi_norm, _rho_14(r))[0][0, X1] == ALL_ONES  # noqa: E731
  one = jnp.ones((), jnp.result_type(float))
  return _bisect(pred, 0.0 * one, one)


@jax.jit
def _q_grid(delta, p, xi_norm, qs):
  zero = jnp.zeros((3, 4), jnp.result_type(float))
  return jax.vmap(lambda q: _target_plan(delta, p, xi_norm, q, zero))(qs)


@jax.jit
def _target_values_of_policy(delta, p, xi_norm, policy, qs):
  """``[Q]`` exact value at x1 of a tabular policy in every q-target (nominal DP, vmapped)."""
  env = LinearMDP()

  def one(q):
    model = env.model(_params(delta, p, xi_norm, q, 1.0))
    return planning.nominal_evaluate(model, policy)[0, X1]

  return jax.vmap(one)(qs)


@jax.jit
def _rho_sweep(delta, p, xi_norm, rhos, qs):
  """Per rho_{1,4}: (min over q of the target value of the robust-optimal policy, V_1^{*,rho})."""

  def one(r):
    pol, _, v1 = _source_plan(delta, p, xi_norm, _rho_14(r))
    return jnp.min(_target_values_of_policy(delta, p, xi_norm, pol, qs)), v1

  return jax.vmap(one)(rhos)


def critical_points(delta: float = 0.3, p: float = 0.001, xi_norms=(0.1, 0.2, 0.3),
                    rhos=(0.3, 0.4, 0.5), num_q: int = 1001) -> dict:
  """All numbers of the critical-point study (exact planning, no sampling).

  Args:
    delta, p: environment parameters (Appendix A: 0.3, 0.001).
    xi_norms: values of ``||xi||_1``.
    rhos: values of ``rho_{1,4}`` for the robust part.
    num_q: size of the q grid on [0, 1] used to locate the switch and the worst-case target value.

  Returns:
    dict with ``rows`` (one dict per xi_norm: ``q_star_exact`` (grid + bisection), the grid
    bracket, ``q_star_derived``, ``q_star_paper``, first actions at q = 0 and q = 0.9, and per
    rho: ``robust`` entries with the robust-optimal first action, ``V_1^{*,rho}(x1)``, the
    worst-case / q=0 / q=1 target values of that policy), ``rho_star_exact`` /
    ``rho_star_derived``, and ``more_robust_with_rho`` (the worst-case target value is
    nondecreasing along a fine rho grid) per xi_norm.
  """
  env = LinearMDP()
  for xi in xi_norms:
    env.make_params(delta=delta, p=p, xi_norm=xi)  # validates
  zero_rho = jnp.zeros((3, 4))
  qs = jnp.linspace(0.0, 1.0, num_q)
  acts = np.asarray(linear_mdp.action_vectors()).astype(int)
  rows = []
  for xi in xi_norms:
    grid = _q_grid(delta, p, xi, qs)
    a_grid = np.asarray(grid[0])
    change = np.nonzero(a_grid[1:] != a_grid[:-1])[0]
    if len(change) != 1:
      raise RuntimeError(f"expected one switch of the first action for xi_norm={xi}, found "
                         f"{len(change)}")
    j = int(change[0])
    a_lo = int(a_grid[j])
    q_star = float(_q_switch(delta, p, xi, qs[j], qs[j + 1], a_lo))
    first = lambda q, xi=xi: acts[int(_target_plan(delta, p, xi, q, zero_rho)[0])].tolist()

    robust = []
    for rho in rhos:
      pol, tie, v1 = _source_plan(delta, p, xi, _rho_14(rho))
      tv = np.asarray(_target_values_of_policy(delta, p, xi, pol, qs))
      robust.append(dict(rho=float(rho), first_action=acts[int(pol[0, X1])].tolist(),
                         first_action_tie=bool(tie), robust_value=float(v1),
                         worst_target_value=float(tv.min()),
                         worst_target_q=float(qs[int(tv.argmin())]),
                         target_value_q0=float(tv[0]), target_value_q1=float(tv[-1])))

    # rho* by bisection on the robust first action, and monotonicity over a fine rho grid.
    rho_star = float(_rho_switch(delta, p, xi))
    worst, vstar = _rho_sweep(delta, p, xi, jnp.linspace(0.0, 1.0, 101), qs)
    worst, vstar = np.asarray(worst), np.asarray(vstar)

    rows.append(dict(
        xi_norm=float(xi), q_star_exact=q_star,
        q_star_bracket=(float(qs[j]), float(qs[j + 1])),
        q_star_derived=derived_q_star(delta, xi, p), q_star_paper=paper_q_star(delta, xi),
        action_below=acts[a_lo].tolist(), action_above=acts[int(a_grid[j + 1])].tolist(),
        first_action_q0=first(0.0), first_action_q09=first(0.9),
        rho_star_exact=rho_star, rho_star_derived=derived_rho_star(delta, xi, p),
        robust=robust,
        more_robust_with_rho=bool(np.all(np.diff(worst) >= -1e-12)),
        robust_value_nonincreasing=bool(np.all(np.diff(vstar) <= 1e-12)),
        worst_target_value_rho0=float(worst[0]), worst_target_value_rho1=float(worst[-1])))
  return dict(delta=delta, p=p, num_q=num_q, rows=rows)


def avesubopt_slope(num_seeds: int = 100, num_episodes: int = 100, rho_14: float = 0.5,
                    xi_norm: float = 0.1, beta: float = 1.0, lam: float = 0.1,
                    seed: int = 0, **agent_kwargs) -> dict:
  """AveSubopt(k) of DR-LSVI-UCB on the source linear MDP (exact, averaged over seeds).

  Returns the mean curve at a few k and the least-squares slope of ``log AveSubopt(k)`` vs
  ``log k`` for ``k = 10..K`` (Theorem 1 predicts at most ``-1/2`` up to the estimation-error
  term). Reported, not asserted. ``agent_kwargs`` go to ``dr_lsvi_ucb`` (e.g. ``tie_break``).
  """
  from drjax import evaluate  # pylint: disable=g-import-not-at-top
  from drjax.agents.base import make_hparams  # pylint: disable=g-import-not-at-top
  from drjax.agents.lsvi import dr_lsvi_ucb  # pylint: disable=g-import-not-at-top
  from drjax.train import make_train  # pylint: disable=g-import-not-at-top

  env = LinearMDP()
  params = env.make_params(xi_norm=xi_norm)
  K = num_episodes
  agent = dr_lsvi_ucb(env.horizon, env.feature_dim, env.num_actions, K, **agent_kwargs)
  rho = np.asarray(_rho_14(rho_14))
  hp = make_hparams(env.horizon, env.feature_dim, rho=rho, beta=beta, lam=lam)
  train = jax.jit(jax.vmap(make_train(env, agent, K, record_q=True), in_axes=(0, None, None)))
  out = train(jax.random.split(jax.random.key(seed), num_seeds), hp, params)
  model = env.model(params)
  res = jax.vmap(lambda qf: evaluate.ave_subopt(agent, qf, model, rho))(out.qf)
  curve = np.asarray(res["ave_subopt"]).mean(0)
  k = np.arange(1, K + 1)
  sel = k >= min(10, K)
  slope = float(np.polyfit(np.log(k[sel]), np.log(np.maximum(curve[sel], 1e-300)), 1)[0])
  bound = evaluate.theorem1_bound(out.estimation_error, env.horizon, env.feature_dim, 0.001,
                                  beta=beta)
  pick = [kk for kk in (1, 10, 50, 100, K) if kk <= K]
  return dict(num_seeds=num_seeds, K=K, rho_14=rho_14, xi_norm=xi_norm, beta=beta, lam=lam,
              agent_kwargs=agent_kwargs,
              v_star=float(res["v_star"][0]),
              ave_subopt={kk: float(curve[kk - 1]) for kk in sorted(set(pick))},
              ave_subopt_se={kk: float(np.asarray(res["ave_subopt"])[:, kk - 1].std(ddof=1)
                                       / np.sqrt(num_seeds)) for kk in sorted(set(pick))},
              bound_total={kk: float(np.asarray(bound["total"]).mean(0)[kk - 1])
                           for kk in sorted(set(pick))},
              slope=slope)


def _fmt_a(a) -> str:
  return "(" + ",".join(f"{x:+d}" for x in a) + ")"


def to_markdown(res: dict) -> str:
  """Markdown tables of ``critical_points`` results."""
  out = [f"delta = {res['delta']}, p = {res['p']}, q grid of {res['num_q']} points + bisection",
         "",
         "| xi_norm | q* exact (DP) | q* closed form 1 - V2(x2)/2 | q* paper (A, eq. critical "
         "point) | action q < q* | action q > q* | action q=0 | action q=0.9 | rho* exact |",
         "|---|---|---|---|---|---|---|---|---|"]
  for r in res["rows"]:
    out.append(f"| {r['xi_norm']:g} | {r['q_star_exact']:.10f} | {r['q_star_derived']:.10f} | "
               f"{r['q_star_paper']:.10f} | {_fmt_a(r['action_below'])} | "
               f"{_fmt_a(r['action_above'])} | {_fmt_a(r['first_action_q0'])} | "
               f"{_fmt_a(r['first_action_q09'])} | {r['rho_star_exact']:.10f} |")
  out += ["",
          "| xi_norm | rho_{1,4} | robust first action | V_1^{*,rho}(x1) | min_q target value "
          "(at q) | target value q=0 | target value q=1 |",
          "|---|---|---|---|---|---|---|"]
  for r in res["rows"]:
    for e in r["robust"]:
      out.append(f"| {r['xi_norm']:g} | {e['rho']:g} | {_fmt_a(e['first_action'])} | "
                 f"{e['robust_value']:.6f} | {e['worst_target_value']:.6f} "
                 f"({e['worst_target_q']:g}) | {e['target_value_q0']:.6f} | "
                 f"{e['target_value_q1']:.6f} |")
  out += ["", "| xi_norm | worst-case target value nondecreasing in rho (101-point grid) | "
          "V_1^{*,rho} nonincreasing in rho | worst target value rho=0 -> rho=1 |",
          "|---|---|---|---|"]
  for r in res["rows"]:
    out.append(f"| {r['xi_norm']:g} | {r['more_robust_with_rho']} | "
               f"{r['robust_value_nonincreasing']} | {r['worst_target_value_rho0']:.6f} -> "
               f"{r['worst_target_value_rho1']:.6f} |")
  return "\n".join(out)


def to_markdown_learning(L: dict) -> str:
  """Markdown table of an ``avesubopt_slope`` result."""
  out = ["", f"DR-LSVI-UCB {L['agent_kwargs'] or ''} AveSubopt (exact, mean over "
         f"{L['num_seeds']} seeds; rho_14 = {L['rho_14']}, xi_norm = {L['xi_norm']}, beta = "
         f"{L['beta']}, lambda = {L['lam']}; V_1* = {L['v_star']:.6f})", "",
         "| k | AveSubopt(k) | s.e. | Theorem 1 RHS (beta as used) |", "|---|---|---|---|"]
  for kk, v in L["ave_subopt"].items():
    out.append(f"| {kk} | {v:.5f} | {L['ave_subopt_se'][kk]:.5f} | "
               f"{L['bound_total'][kk]:.3f} |")
  out += ["", f"fitted slope of log AveSubopt(k) vs log k, k = 10..{L['K']}: {L['slope']:.3f}"]
  return "\n".join(out)


def main(argv=None) -> None:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--learning", action="store_true",
                  help="also train DR-LSVI-UCB and report the AveSubopt slope")
  args = ap.parse_args(argv)
  jax.config.update("jax_enable_x64", True)  # exact planning in float64 (for this process only)
  res = critical_points()
  print(to_markdown(res))
  if args.learning:
    print(to_markdown_learning(avesubopt_slope()))
    print(to_markdown_learning(avesubopt_slope(tie_break="first")))


if __name__ == "__main__":
  main()
