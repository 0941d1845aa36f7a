"""``drjax plan``: exact robust planning (``drjax.planning.robust_dp``) in the simulated linear MDP
of Appendix A: the optimal robust value at the initial state and the optimal action at every step
and state."""

import json
import math

from drjax.cli._common import _finite_in


ENVS = ("linear-mdp",)


def _add_plan_parser(sub) -> None:
  p = sub.add_parser(
      "plan",
      help="exact robust planning in the simulated linear MDP",
      description=(
          "Exact robust dynamic programming (TV, d-rectangular; Liu & Xu 2024, Prop. 1 and 3) "
          "in the simulated linear MDP of Appendix A. Without --q the model is the source "
          "domain; with --q it is the target domain with perturbation level q (eq. A.2), and "
          "the same rho is applied around that target (rho = 0: ordinary planning in the "
          "target). Computed in float64."))
  p.add_argument("--env", default="linear-mdp", choices=ENVS, help="environment")
  p.add_argument("--xi-norm", type=float, default=0.1, help="||xi||_1 (default 0.1)")
  p.add_argument("--delta", type=float, default=0.3, help="delta (default 0.3)")
  p.add_argument("--p", type=float, default=0.001, help="source failure probability p")
  p.add_argument("--rho", type=float, default=None,
                 help="rho_{1,4} in [0, 1] (all other rho_{h,i} = 0); default 0")
  p.add_argument("--rho-array", default=None, metavar="JSON",
                 help="full [H, d] rho as a JSON array (instead of --rho)")
  p.add_argument("--q", type=float, default=None,
                 help="plan in the target domain with perturbation level q in [0, 1]")
  p.add_argument("--json", action="store_true", help="print JSON instead of a table")
  p.set_defaults(func=_cmd_plan, parser=p)



def _plan_rho(parser, args, horizon: int, dim: int):
  import numpy as np  # pylint: disable=g-import-not-at-top  (not needed for --help)

  if args.rho is not None and args.rho_array is not None:
    parser.error("give either --rho or --rho-array, not both")
  if args.rho_array is not None:
    try:
      rho = np.asarray(json.loads(args.rho_array), dtype=np.float64)
    except (ValueError, TypeError) as e:
      parser.error(f"--rho-array must be a JSON array of numbers of shape [{horizon}, {dim}] "
                   f"({e})")
    if rho.shape != (horizon, dim):
      parser.error(f"--rho-array must have shape [H, d] = [{horizon}, {dim}], got "
                   f"{list(rho.shape)}")
    if not np.all(np.isfinite(rho)) or np.any(rho < 0) or np.any(rho > 1):
      parser.error(f"--rho-array entries must lie in [0, 1], got values in "
                   f"[{np.nanmin(rho):g}, {np.nanmax(rho):g}]")
    return rho
  _finite_in(parser, "--rho", args.rho, 0.0, 1.0)
  rho = np.zeros((horizon, dim))
  rho[0, dim - 1] = 0.0 if args.rho is None else args.rho
  return rho


def plan_linear_mdp(*, delta: float, p: float, xi_norm: float, rho,
                    q: float | None = None) -> dict:
  """Exact robust plan in the linear MDP; the dict the ``plan`` command prints as JSON.

  Args:
    delta, p, xi_norm: the environment (Appendix A); validated by ``LinearMDP.make_params``.
    rho: ``[H, d]`` uncertainty levels.
    q: ``None`` for the source domain, else the target perturbation level.

  Returns:
    dict with ``value`` (``V_1^{*,rho}(x1)``), ``actions`` (``[H][S]`` lists of +-1 entries, or
    ``None`` where all actions tie; ``actions[0]`` is the paper's step 1), ``values``
    (``[H][S]`` optimal robust values ``V_h^{*,rho}(s)``) and ``config``.
  """
  import jax  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top

  from drjax import planning  # pylint: disable=g-import-not-at-top
  from drjax.envs import linear_mdp  # pylint: disable=g-import-not-at-top

  env = linear_mdp.LinearMDP()
  params = env.make_params(delta=delta, p=p, xi_norm=xi_norm, q=q)
  model = env.model(params)
  res = jax.jit(planning.robust_dp)(model, np.asarray(rho, np.float64))
  value = float(planning.initial_value(model, res.v))
  acts = np.asarray(linear_mdp.action_vectors()).astype(int)
  policy, ties, v = np.asarray(res.policy), np.asarray(res.ties), np.asarray(res.v)
  actions = [[None if ties[h, s] else acts[policy[h, s]].tolist()
              for s in range(env.num_states)] for h in range(env.horizon)]
  config = dict(env="linear-mdp", delta=delta, p=p, xi_norm=xi_norm, q=q,
                domain="source" if q is None else "target", rho=np.asarray(rho).tolist(),
                horizon=env.horizon, num_states=env.num_states, feature_dim=env.feature_dim)
  return dict(value=value, actions=actions, values=v[:-1].tolist(), config=config)


def _format_plan(out: dict) -> str:
  cfg = out["config"]
  dom = "source domain" if cfg["q"] is None else f"target domain q={cfg['q']:g}"
  lines = [f"linear-mdp ({dom}; delta={cfg['delta']:g}, p={cfg['p']:g}, "
           f"xi_norm={cfg['xi_norm']:g})",
           "rho (rows h=1..H): " + json.dumps(cfg["rho"]),
           f"optimal robust value V_1*(x1) = {out['value']:.10g}",
           "",
           f"{'h':>2}  {'state':<5}  {'optimal action':<16}  {'V_h*(s)':>12}",
           f"{'--':>2}  {'-----':<5}  {'-' * 16}  {'-' * 12}"]
  for h, (row, vrow) in enumerate(zip(out["actions"], out["values"]), start=1):
    for s, (a, val) in enumerate(zip(row, vrow), start=1):
      txt = "any (all tie)" if a is None else "(" + ",".join(f"{x:+d}" for x in a) + ")"
      lines.append(f"{h:>2}  x{s:<4}  {txt:<16}  {val:>12.8f}")
  return "\n".join(lines)


def _cmd_plan(parser, args) -> int:
  import jax  # pylint: disable=g-import-not-at-top

  jax.config.update("jax_enable_x64", True)  # the command computes in float64
  horizon, dim = 3, 4  # the linear MDP of Appendix A
  rho = _plan_rho(parser, args, horizon, dim)
  _finite_in(parser, "--q", args.q, 0.0, 1.0)
  for name in ("xi_norm", "delta", "p"):
    if not math.isfinite(getattr(args, name)):
      parser.error(f"--{name.replace('_', '-')} must be finite, got {getattr(args, name)!r}")
  try:
    out = plan_linear_mdp(delta=args.delta, p=args.p, xi_norm=args.xi_norm, rho=rho, q=args.q)
  except ValueError as e:
    parser.error(str(e))
  if args.json:
    print(json.dumps(out))
  else:
    print(_format_plan(out))
  return 0
