"""``drjax sweep``: agents x a grid of settings x seeds (``drjax.sweeps``): chunked, sharded over
devices, resumable, tidy tables (Parquet/CSV), summary and figure."""

import math
import sys

from drjax.cli._common import _positive_int, enable_compilation_cache


# Agent options of the presets (bonus form, LSVI-UCB clipping, tie-breaking).
SWEEP_PRESETS = {"paper": ("paper", "paper", "optimistic"),
                 "notebook": ("notebook", "notebook", "first")}
# Flags that define the sweep (not allowed with --from / --merge; --resume reads them from
# DIR/sweep.json when none is given).
_CONFIG_FLAGS = ("env", "env_arg", "agents", "seeds", "episodes", "rho", "rho_at", "beta", "lam",
                 "env_param", "targets", "test_episodes", "seed", "preset", "x64", "save_returns",
                 "trajectories", "behavior", "reg_weight", "hparam", "record", "record_at",
                 "eval", "controls", "tune")
_EXEC_CONFIG_FLAGS = ("chunk", "memory_mb", "seed_ids")  # also allowed with --from
_FIELD_FLAGS = {"env": "--env", "env_args": "--env-arg", "agents": "--agents", "seeds": "--seeds",
                "seed_ids": "--seed-ids", "episodes": "--episodes", "rho": "--rho",
                "rho_at": "--rho-at", "beta": "--beta", "lam": "--lam",
                "env_params": "--env-param", "targets": "--targets",
                "test_episodes": "--test-episodes", "seed": "--seed", "chunk": "--chunk",
                "memory_mb": "--memory-mb", "dtype": "--x64", "devices": "--devices",
                "part": "--part", "out": "--out", "from": "--from", "bonus": "--preset",
                "clip": "--preset", "tie_break": "--preset", "trajectories": "--trajectories",
                "behavior": "--behavior", "reg_weight": "--reg-weight", "hparams": "--hparam",
                "plugins": "--plugin", "record": "--record", "record_at": "--record-at",
                "eval_modes": "--eval", "controls": "--controls", "tune": "--tune",
                "agent_hparams": "--beta/--lam"}


def _sweep_envs():
  from drjax.sweeps.config import env_names  # pylint: disable=g-import-not-at-top
  return env_names()


def _agent_names(kind=None):
  from drjax.agents import registry  # pylint: disable=g-import-not-at-top
  return registry.names(kind)


def _default_agents():
  from drjax.agents import registry  # pylint: disable=g-import-not-at-top  (no JAX import)
  return registry.DEFAULT_AGENTS


def _add_sweep_parser(sub) -> None:
  p = sub.add_parser(
      "sweep", help="agents x a grid of settings x seeds: chunked, sharded, resumable, tidy",
      description=(
          "Trains every agent on every setting of the grid (rho x beta x lambda x source "
          "parameters) for every seed, evaluates each final policy on the target family (exact "
          "for finite environments, Monte Carlo with common random numbers otherwise) and "
          "writes DIR/results.parquet (one row per agent x setting x seed x target; "
          "results.csv too with --csv), summary.csv (mean, stderr, count), sweep.json and "
          "sweep.png, streamed while the chunks compute. Chunks are "
          "written atomically as they finish; rerunning the same command resumes (without "
          "--chunk: with the stored chunk layout). Ctrl-C stops with exit code 130 and prints "
          "the command that resumes."))
  g = p.add_argument_group("the sweep (stored in DIR/sweep.json)")
  g.add_argument("--env", default=None, help="linear-mdp, put-option or random "
                                             "(default: linear-mdp)")
  g.add_argument("--env-arg", action="append", default=None, metavar="NAME=VALUE",
                 help="static environment argument, repeatable (put-option: num_anchors, "
                      "horizon, variant; random: num_states, num_actions, feature_dim, horizon)")
  g.add_argument("--agents", nargs="+", default=None, metavar="AGENT",
                 help=f"registered agents: {', '.join(_agent_names())} (default: "
                      f"{', '.join(_default_agents())})")
  g.add_argument("--seeds", type=int, default=None, metavar="N", help="seeds (default: 10)")
  g.add_argument("--episodes", type=int, default=None, metavar="K",
                 help="training episodes K (default: 100)")
  g.add_argument("--rho", type=float, nargs="+", default=None, metavar="R",
                 help="rho values in [0, 1], robust agents only (default: 0)")
  g.add_argument("--trajectories", type=int, nargs="+", default=None, metavar="N",
                 help="offline agents: dataset sizes N, a sweep axis (default: 100)")
  g.add_argument("--reg-weight", type=float, nargs="+", default=None, metavar="W",
                 help="regularization weights > 0 of the robust regularized agents (r2pvi-*), "
                      "a sweep axis (default: 0.1)")
  g.add_argument("--hparam", action="append", default=None, metavar="NAME=V1,V2,...",
                 help="sweep any other declared hyperparameter of the agents, repeatable (e.g. "
                      "var_shift=0,1 for va-drpvi, or a plugin agent's own): an axis of the "
                      "agents that declare it; the others ignore it. A declared hyperparameter "
                      "without a default must be given here")
  g.add_argument("--behavior", default=None, metavar="POLICY",
                 help="offline agents' behavior policy: uniform (default), fixed:A (always "
                      "action A; fixed:1 holds the put option), eps-greedy:file=PATH,eps=E"
                      "[,mode=greedy|played][,index=I|all] (epsilon-greedy around a saved policy, "
                      "see --save-policies) or mix:W1*SPEC1+W2*SPEC2 (each trajectory from one "
                      "component, drawn with the weights); recorded in sweep.json (data)")
  g.add_argument("--rho-at", nargs="+", default=None, metavar="H,I",
                 help="1-indexed positions (h, i) that get the rho value, e.g. 1,4 for the "
                      "paper's rho_1,4 (default: every position)")
  g.add_argument("--beta", type=float, nargs="+", default=None, metavar="B",
                 help="bonus multipliers >= 0 (default: the environment's recommendation for "
                      "the agent's kind, docs/environments.md; else 1)")
  g.add_argument("--lam", type=float, nargs="+", default=None, metavar="L",
                 help="ridge lambdas > 0 (default: as for --beta; else 0.1)")
  g.add_argument("--eval", nargs="+", default=None, metavar="MODE", choices=("played", "greedy"),
                 help="policies of online runs to evaluate, a 'policy' column: played (the final "
                      "optimistic plan) and greedy (replan at beta = 0, same data and keys); "
                      "default: both on gymnax environments, played on the paper's")
  g.add_argument("--controls", action="store_true", default=None,
                 help="add every robust agent's controls: rho = 0, its nominal counterpart "
                      "(lsvi-ucb, pevi) and the uniform-random baseline")
  g.add_argument("--tune", default=None, metavar="POLICY", choices=("played", "greedy"),
                 help="source-only tuning: per agent (and other setting) select the (beta, "
                      "lambda) of the --beta x --lam grid with the best mean source value of "
                      "this policy; recorded in sweep.json (tuning) and DIR/tuned.csv")
  g.add_argument("--env-param", action="append", default=None, metavar="NAME=V1,V2,...",
                 help="sweep a source parameter, repeatable (linear-mdp: delta, p, xi_norm; "
                      "put-option: p_u, init_low, init_high; random: instance)")
  g.add_argument("--targets", default=None, metavar="NAME=START:STOP:NUM",
                 help="evaluate on linspace(START, STOP, NUM) targets: q=0:1:21 (linear-mdp), "
                      "p_u=0.15:0.85:29 (put-option), length=0.25:2:15 (cartpole; gymnax "
                      "environments: a physics field, docs/environments.md); default: evaluate "
                      "in the source domain")
  g.add_argument("--test-episodes", type=int, default=None, metavar="N",
                 help="Monte Carlo episodes per run and target (put-option; default: 100)")
  g.add_argument("--seed", type=int, default=None, help="base PRNG seed (default: 0)")
  g.add_argument("--preset", default=None, choices=tuple(SWEEP_PRESETS),
                 help="agent options: paper (default) or notebook (bonus form, LSVI-UCB "
                      "clipping, tie-breaking)")
  g.add_argument("--x64", action="store_true", default=None, help="compute in float64")
  g.add_argument("--save-returns", action="store_true", default=None,
                 help="also write every run's training returns (DIR/returns.npy, [runs, K])")
  g.add_argument("--record", default=None, metavar="NAMES",
                 help="online agents' study quantities, comma-separated, as columns NAME@K: "
                      "width_rect, width_ellip (width sums at the visited features), switches, "
                      "dual_calls, ave_subopt (exact AveSubopt; finite environments)")
  g.add_argument("--record-at", default=None, metavar="K1,K2,...",
                 help="episode checkpoints of --record (default: the last episode)")
  e = p.add_argument_group("execution")
  e.add_argument("--out", default=None, metavar="DIR", help="output directory (required)")
  e.add_argument("--csv", action="store_true",
                 help="also write DIR/results.csv (the rows of results.parquet, the primary "
                      "output); with parts, give it to --merge")
  e.add_argument("--chunk", type=int, default=None, metavar="C",
                 help="runs per chunk (default: from --memory-mb)")
  e.add_argument("--memory-mb", type=float, default=None, metavar="MB",
                 help="memory budget of one chunk in MiB when --chunk is not given (default: 512 "
                      "on CPU, a quarter of the memory limit of a GPU/TPU)")
  e.add_argument("--devices", type=int, default=None, metavar="N",
                 help="devices to shard over (default: all; on CPU, N host devices, at most the "
                      "number of cores)")
  e.add_argument("--part", default=None, metavar="I/N",
                 help="run only the I-th of N slices of the chunks (job arrays); then --merge")
  e.add_argument("--merge", action="store_true", help="assemble DIR's finished parts")
  e.add_argument("--save-policies", default=None, metavar="PATH",
                 help="stage 1 of a learned behavior: after the sweep, learn its agent's policy "
                      "at its single setting in the source again, one per seed (the sweep's "
                      "keys), and save them to PATH (.npz, drjax-policy/1) for --behavior "
                      "eps-greedy:file=PATH,eps=E,index=I (one agent and one setting only)")
  e.add_argument("--from", dest="from_", default=None, metavar="SWEEP.JSON",
                 help="rerun the sweep stored in a sweep.json (with --out DIR2)")
  e.add_argument("--seed-ids", nargs="+", default=None, metavar="J",
                 help="run only these seed indices (e.g. 3 17 or 3,17)")
  e.add_argument("--resume", action="store_true",
                 help="continue the sweep stored in DIR/sweep.json (no other sweep flags needed)")
  e.add_argument("--allow-code-change", action="store_true",
                 help="resume or merge a sweep that ran with other code (another drjax version, "
                      "a plugin whose source changed; refused without it), recorded in sweep.json")
  e.add_argument("--overwrite", action="store_true",
                 help="start over: delete the sweep DIR holds (its chunks and results) first; "
                      "not with --part, --resume or --merge")
  e.add_argument("--quiet", action="store_true", help="no progress bar")
  e.add_argument("--distributed", action="store_true",
                 help="call jax.distributed.initialize() (auto-detected cluster, or the three "
                      "flags below) and shard over every process's devices")
  e.add_argument("--coordinator", default=None, metavar="HOST:PORT")
  e.add_argument("--num-processes", type=int, default=None, metavar="N")
  e.add_argument("--process-id", type=int, default=None, metavar="I")
  p.set_defaults(func=_cmd_sweep, parser=p)


def _name_values(parser, flag, items, *, single=False) -> dict:
  out = {}
  for item in items or ():
    name, sep, vals = item.partition("=")
    if not sep or not name or not vals:
      parser.error(f"{flag} must look like NAME=" + ("VALUE" if single else "V1,V2,...") +
                   f", got {item!r}")
    if name in out:
      parser.error(f"{flag}: {name!r} given twice")
    out[name] = vals
  return out


def _sweep_config_kwargs(parser, args) -> dict:
  """SweepConfig keyword arguments from the flags that were given (plain parsing, no JAX)."""
  kw = {}
  if args.env is not None:
    if args.env not in _sweep_envs():
      parser.error(f"--env: unknown environment {args.env!r}; choose from "
                   f"{', '.join(_sweep_envs())}")
    kw["env"] = args.env
  if args.env_arg is not None:
    env_args = {}
    for k, v in _name_values(parser, "--env-arg", args.env_arg, single=True).items():
      try:
        env_args[k] = int(v)
      except ValueError:
        env_args[k] = v
    kw["env_args"] = env_args
  if args.agents is not None:
    for a in args.agents:
      if a not in _agent_names():
        parser.error(f"--agents: unknown agent {a!r}; registered agents: "
                     f"{', '.join(_agent_names())}")
    kw["agents"] = tuple(args.agents)
  if args.trajectories is not None:
    for n in args.trajectories:
      _positive_int(parser, "--trajectories", n)
    kw["trajectories"] = tuple(args.trajectories)
  if args.behavior is not None:
    kw["behavior"] = args.behavior
  if args.reg_weight is not None:
    kw["reg_weight"] = tuple(args.reg_weight)
  if args.hparam is not None:
    hparams = {}
    for k, v in _name_values(parser, "--hparam", args.hparam).items():
      try:
        hparams[k] = tuple(float(x) for x in v.split(","))
      except ValueError:
        parser.error(f"--hparam {k}: values must be numbers separated by commas, got {v!r}")
    kw["hparams"] = hparams
  if kw and args.plugin:  # recorded in sweep.json: --resume and --merge load them again
    from drjax import plugins  # pylint: disable=g-import-not-at-top
    kw["plugins"] = tuple(plugins.resolve(x) for x in args.plugin)
  for name in ("seeds", "episodes", "test_episodes"):
    v = getattr(args, name)
    if v is not None:
      _positive_int(parser, "--" + name.replace("_", "-"), v)
      kw[name] = v
  if args.seed is not None:
    if not 0 <= args.seed < 2**31:
      parser.error(f"--seed must be an integer in [0, 2^31), got {args.seed}")
    kw["seed"] = args.seed
  for name in ("rho", "beta", "lam"):
    if getattr(args, name) is not None:
      kw[name] = tuple(getattr(args, name))
  if args.rho_at is not None:
    pos = []
    for item in args.rho_at:
      try:
        h, i = (int(x) for x in item.split(","))
      except ValueError:
        parser.error(f"--rho-at positions must look like H,I (1-indexed integers), got {item!r}")
      pos.append((h - 1, i - 1))
    kw["rho_at"] = tuple(pos)
  if args.env_param is not None:
    env_params = {}
    for k, v in _name_values(parser, "--env-param", args.env_param).items():
      try:
        env_params[k] = tuple(float(x) for x in v.split(","))
      except ValueError:
        parser.error(f"--env-param {k}: values must be numbers separated by commas, got {v!r}")
    kw["env_params"] = env_params
  if args.targets is not None:
    name, sep, rng = args.targets.partition("=")
    parts = rng.split(":")
    try:
      if not sep or len(parts) != 3:
        raise ValueError
      kw["targets"] = (name, float(parts[0]), float(parts[1]), int(parts[2]))
    except ValueError:
      parser.error(f"--targets must look like NAME=START:STOP:NUM (e.g. q=0:1:21), got "
                   f"{args.targets!r}")
  if args.preset is not None:
    kw["bonus"], kw["clip"], kw["tie_break"] = SWEEP_PRESETS[args.preset]
  if args.x64:
    kw["dtype"] = "float64"
  if args.save_returns:
    kw["save_returns"] = True
  if args.record is not None:
    kw["record"] = tuple(x.strip() for x in args.record.split(",") if x.strip())
  if args.eval is not None:
    kw["eval_modes"] = tuple(args.eval)
  if args.controls:
    kw["controls"] = True
  if args.tune is not None:
    kw["tune"] = args.tune
  if args.record_at is not None:
    try:
      kw["record_at"] = tuple(int(x) for x in args.record_at.split(","))
    except ValueError:
      parser.error(f"--record-at must be integers separated by commas (e.g. 100,1000), got "
                   f"{args.record_at!r}")
  return kw


def _sweep_exec_kwargs(parser, args) -> dict:
  kw = {}
  if args.chunk is not None:
    if args.chunk < 1:
      parser.error(f"--chunk must be a positive integer, got {args.chunk}")
    kw["chunk"] = args.chunk
  if args.memory_mb is not None:
    if not (math.isfinite(args.memory_mb) and args.memory_mb > 0):
      parser.error(f"--memory-mb must be > 0, got {args.memory_mb!r}")
    kw["memory_mb"] = args.memory_mb
  if args.seed_ids is not None:
    ids = []
    for item in args.seed_ids:
      for x in item.split(","):
        try:
          ids.append(int(x))
        except ValueError:
          parser.error(f"--seed-ids must be integers (e.g. 3 17 or 3,17), got {item!r}")
    kw["seed_ids"] = tuple(ids)
  return kw


def _set_host_devices(n: int) -> None:
  """Before JAX starts: N host (CPU) devices in XLA_FLAGS, replacing any earlier count."""
  import os  # pylint: disable=g-import-not-at-top

  flags = [f for f in os.environ.get("XLA_FLAGS", "").split()
           if not f.startswith("--xla_force_host_platform_device_count")]
  os.environ["XLA_FLAGS"] = " ".join(flags + [f"--xla_force_host_platform_device_count={n}"])


def _cmd_sweep(parser, args) -> int:
  import os  # pylint: disable=g-import-not-at-top

  given = [f for f in _CONFIG_FLAGS if getattr(args, f) is not None]
  flag = lambda f: "--" + f.replace("_", "-")  # noqa: E731
  if args.out is None:
    parser.error("--out DIR is required")
  modes = [m for m, on in (("--merge", args.merge), ("--from", args.from_ is not None),
                           ("--resume", args.resume and not given)) if on]
  if len(modes) > 1:
    parser.error(f"give only one of {', '.join(modes)}")
  if (args.merge or args.from_ is not None) and given:
    parser.error(f"{modes[0]}: the sweep comes from a sweep.json; do not combine it with "
                 f"{', '.join(flag(f) for f in given)}")
  if args.merge and (args.part or _sweep_exec_kwargs(parser, args)):
    parser.error("--merge takes only --out (and --csv, --quiet, --allow-code-change)")
  if args.csv and args.part is not None:
    parser.error("--csv: the final files of a sweep run in parts are written by --merge; give "
                 "--csv to --merge, not to --part")
  if args.overwrite:
    for other, on in (("--merge", args.merge), ("--resume", args.resume),
                      ("--part", args.part is not None)):
      if on:
        parser.error(f"--overwrite starts the sweep over; it cannot be combined with {other}" + (
            " (each part would delete the others' chunks: clear DIR once before the parts)"
            if other == "--part" else ""))
  part = None
  if args.part is not None:
    try:
      i, n = (int(x) for x in args.part.split("/"))
      if not 1 <= i <= n:
        raise ValueError
    except ValueError:
      parser.error(f"--part must be I/N with integers 1 <= I <= N, got {args.part!r}")
    part = (i, n)
  if args.devices is not None:
    if args.devices < 1:
      parser.error(f"--devices must be a positive integer, got {args.devices}")
    _set_host_devices(args.devices)  # before JAX starts; affects only the CPU platform
  dist = (args.coordinator, args.num_processes, args.process_id)
  if any(x is not None for x in dist) and not args.distributed:
    parser.error("--coordinator/--num-processes/--process-id need --distributed")
  config_kw = _sweep_config_kwargs(parser, args)
  exec_kw = _sweep_exec_kwargs(parser, args)
  # JAX starts here.
  import jax  # pylint: disable=g-import-not-at-top

  if args.distributed:
    try:
      jax.config.update("jax_cpu_collectives_implementation", "gloo")
      kw = {k: v for k, v in zip(("coordinator_address", "num_processes", "process_id"), dist)
            if v is not None}
      jax.distributed.initialize(**kw)
    except (RuntimeError, ValueError) as e:
      parser.error(f"--distributed: {' '.join(str(e).split())}")
  enable_compilation_cache()
  from drjax import sweeps  # pylint: disable=g-import-not-at-top

  def fail(e):
    field = getattr(e, "field", "")
    name = _FIELD_FLAGS.get(field.split(" ")[0], field)
    if name == "--plugin" and not getattr(args, "plugin", None):  # recorded, not given
      recorded = (f"--from: {args.from_}" if args.from_ is not None
                  else f"--out: {os.path.join(args.out or '.', 'sweep.json')}")
      name = f"{recorded} records a plugin that fails"
    parser.error(f"{name}: {getattr(e, 'detail', str(e))}" if name else str(e))

  if args.devices is not None and jax.default_backend() == "cpu":
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    if args.devices > cores:
      parser.error(f"--devices: {args.devices} CPU devices requested but only {cores} cores are "
                   "available")
  command = ["drjax"] + list(args.argv)
  try:
    return _run_sweep(parser, args, sweeps, jax, given, config_kw, exec_kw, part, command, fail)
  except KeyboardInterrupt as e:
    # Ctrl-C: one line (what is saved, the command that resumes), exit code 130; every file is
    # written atomically, so nothing is half-written.
    print(_interrupted_message(args, part, e), file=sys.stderr, flush=True)
    return 130


def _interrupted_message(args, part, e) -> str:
  import shlex  # pylint: disable=g-import-not-at-top

  saved = getattr(e, "saved", None)
  if saved is None:
    return "drjax sweep: interrupted before the sweep started; nothing was written"
  if args.merge:
    return (f"drjax sweep: interrupted while merging {args.out} (its chunks are intact); resume "
            f"with: {shlex.join(['drjax', 'sweep', '--merge', '--out', args.out] + (['--csv'] if args.csv else []))}")
  resume = ["drjax", "sweep", "--resume", "--out", args.out]
  if part is not None:
    resume += ["--part", f"{part[0]}/{part[1]}"]
  if args.devices is not None:
    resume += ["--devices", str(args.devices)]
  if args.csv:
    resume += ["--csv"]
  if args.distributed:
    return (f"drjax sweep: interrupted; {saved} of {e.total} chunks saved in {args.out}; rerun "
            "the same command on every process to resume")
  return (f"drjax sweep: interrupted; {saved} of {e.total} chunks saved in {args.out}; resume "
          f"with: {shlex.join(resume)}")


def _run_sweep(parser, args, sweeps, jax, given, config_kw, exec_kw, part, command, fail) -> int:
  import os  # pylint: disable=g-import-not-at-top

  try:
    if args.merge:
      if os.path.isfile(os.path.join(args.out, "sweep.json")):
        stored = sweeps.load_config(args.out)
        jax.config.update("jax_enable_x64", stored.dtype == "float64")
      sweeps.merge(args.out, quiet=args.quiet, command=command, csv=args.csv,
                   allow_code_change=args.allow_code_change)
      return 0
    if args.from_ is not None:
      base = sweeps.load_config(args.from_).to_dict()
    elif args.resume and not given:
      if not os.path.isfile(os.path.join(args.out, "sweep.json")):
        parser.error(f"--resume: {args.out!r} holds no sweep.json to resume")
      base = sweeps.load_config(args.out).to_dict()
    else:
      base = {}
    cfg = dict(base, **config_kw, **exec_kw)
    cfg.setdefault("dtype", "float32")  # the command computes in float32 unless --x64
    jax.config.update("jax_enable_x64", cfg["dtype"] == "float64")
    config = sweeps.SweepConfig.from_dict(cfg)
    if args.save_policies is not None:  # checked before the sweep runs
      if part is not None:
        parser.error("--save-policies: run it without --part")
      _check_one_setting(sweeps, config)
    sweeps.run(config, out=args.out, devices=args.devices, part=part, overwrite=args.overwrite,
               quiet=args.quiet, command=command, csv=args.csv,
               allow_code_change=args.allow_code_change)
    if args.save_policies is not None:
      meta = sweeps.save_policies(config, args.save_policies)
      if not args.quiet:
        print(f"[drjax] saved {meta['num_policies']} {meta['agent']} policies to "
              f"{args.save_policies}")
  except ValueError as e:
    if not hasattr(e, "field"):
      raise
    fail(e)
  return 0


def _check_one_setting(sweeps, config) -> None:
  """``--save-policies``: one agent and one setting (``SweepError`` naming the field)."""
  from drjax.sweeps.grid import _settings  # pylint: disable=g-import-not-at-top
  rs = sweeps.resolve(config)  # validated, the environment built once
  cfg = rs.config
  if len(cfg.agents) != 1:
    raise sweeps.SweepError("agents", f"--save-policies learns one agent's policies; got "
                                      f"{len(cfg.agents)} agents ({', '.join(cfg.agents)})")
  n = len(_settings(rs, cfg.agents[0]).beta)
  if n != 1:
    raise sweeps.SweepError("rho", f"--save-policies needs one setting (one value of rho, beta, "
                                   f"lam, the source parameters and the sizes), got {n}")
