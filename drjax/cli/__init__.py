"""Command-line interface: ``drjax <command> [options]`` (console script ``drjax``).

Commands, one module each (an ``_add_<name>_parser`` and a ``_cmd_<name>`` function, so more can be
added next to them):

* ``reproduce`` (``drjax.cli.reproduce``) -- every experiment of the paper (Section 6, Appendix A)
  and the AveSubopt figure: results JSON, PNG/PDF figures and ``results.md`` under ``--out``.
* ``train`` (``drjax.cli.train``) -- one environment, both algorithms, a list of rho values and N
  seeds.
* ``plan`` (``drjax.cli.plan``) -- exact robust planning (``drjax.planning.robust_dp``) in the
  simulated linear MDP of Appendix A: the optimal robust value at the initial state and the optimal
  action at every step and state.
* ``bench`` (``drjax.cli.bench``) -- the speed benchmarks of ``drjax.bench`` (machine, compile
  share, scaling).
* ``sweep`` (``drjax.cli.sweep``) -- agents x a grid of settings x seeds (``drjax.sweeps``):
  chunked, sharded over devices, resumable, tidy tables (Parquet/CSV), summary and figure.

This module holds the top-level parser (``build_parser``), ``main``, ``console_main``, ``--version``
and the ``--plugin`` preloading; ``drjax.cli._common`` what the commands share (the one-line-error
parser, range checks, the compilation cache). The names of every command module are re-exported
here (``cli.plan_linear_mdp``, ``cli.SWEEP_PRESETS``, ...).

``drjax`` alone prints the help (the commands above) and exits with code 0; ``drjax --version``
prints the distribution name (``drjax-rl``; the import name is ``drjax``), its version and the JAX
and Python versions. Bad flags print one line ``drjax <command>: error: <message>`` on stderr and
exit with code 2.
"""

# Must run before JAX initializes its CPU backend (see drjax/_xla.py, README "CPU hang").
import drjax._xla  # noqa: E402,I001  isort: skip

drjax._xla.configure()

import argparse  # noqa: E402
import sys  # noqa: E402

# The commands' names, re-exported: tests and scripts use them as ``cli.NAME``.
from drjax.cli._common import (  # noqa: E402,F401
    MAX_COUNT, MAX_SEED, _finite_in, _Parser, _positive_int, enable_compilation_cache)
from drjax.cli.bench import _add_bench_parser, _cmd_bench  # noqa: E402,F401
from drjax.cli.plan import (  # noqa: E402,F401
    ENVS, _add_plan_parser, _cmd_plan, _format_plan, _plan_rho, plan_linear_mdp)
from drjax.cli.reproduce import (  # noqa: E402,F401
    ALL_FIGURES, FIGURES, PRESETS, _add_reproduce_parser, _add_run_flags, _check_run_flags,
    _cmd_reproduce, _opt_level)
from drjax.cli.sweep import (  # noqa: E402,F401
    _CONFIG_FLAGS, _EXEC_CONFIG_FLAGS, _FIELD_FLAGS, SWEEP_PRESETS, _add_sweep_parser,
    _agent_names, _cmd_sweep, _interrupted_message, _name_values, _run_sweep, _set_host_devices,
    _sweep_config_kwargs, _sweep_envs, _sweep_exec_kwargs)
from drjax.cli.train import _add_train_parser, _cmd_train  # noqa: E402,F401


DISTRIBUTION = "drjax-rl"  # the pip name (pyproject.toml); PyPI's `drjax` is Google's DrJAX


def version_string() -> str:
  """What ``drjax --version`` prints: the pip name and version, the import name, JAX and Python."""
  import platform  # pylint: disable=g-import-not-at-top
  from importlib import metadata  # pylint: disable=g-import-not-at-top

  import drjax  # pylint: disable=g-import-not-at-top

  def installed(name):
    try:
      return metadata.version(name)
    except metadata.PackageNotFoundError:
      return "not installed"

  return (f"{DISTRIBUTION} {drjax.__version__} (import name drjax; jax {installed('jax')}, "
          f"jaxlib {installed('jaxlib')}, Python {platform.python_version()})")


class _VersionAction(argparse.Action):
  """``--version``: prints ``version_string()`` unwrapped (argparse's own action wraps it)."""

  def __call__(self, parser, namespace, values, option_string=None):
    print(version_string())
    parser.exit(0)


def build_parser() -> argparse.ArgumentParser:
  """The top-level parser with one subparser per command."""
  parser = _Parser(prog="drjax", description="Distributionally robust off-dynamics RL in JAX "
                   "(DR-LSVI-UCB, Liu & Xu, AISTATS 2024).",
                   epilog="Run 'drjax <command> --help' for a command's options.")
  parser.add_argument("--version", action=_VersionAction, nargs=0,
                      help="print the distribution name (drjax-rl), its version, and the JAX "
                           "and Python versions, and exit")
  sub = parser.add_subparsers(dest="command", metavar="command", parser_class=_Parser)
  sub.required = True
  _add_reproduce_parser(sub)
  _add_train_parser(sub)
  _add_plan_parser(sub)
  _add_bench_parser(sub)
  _add_sweep_parser(sub)
  sub.choices["sweep"].add_argument(
      "--plugin", action="append", default=None, metavar="MODULE_OR_FILE",
      help="load a plugin first (a module name or a .py file that registers agents or "
           "environments; repeatable); recorded in sweep.json, so --resume and --merge load it "
           "again")
  return parser


# The commands that select agents and environments by name, so the only ones that see plugins:
# ``train``, ``plan``, ``reproduce`` and ``bench`` run drjax's own algorithms and environments.
PLUGIN_COMMANDS = ("sweep",)


def _plugin_args(argv) -> list[str]:
  """The values of ``--plugin X`` / ``--plugin=X`` in ``argv`` (before parsing: a plugin's
  agents must be registered when the parser lists and checks agent names)."""
  out = []
  for i, a in enumerate(argv):
    if a == "--plugin" and i + 1 < len(argv):
      out.append(argv[i + 1])
    elif a.startswith("--plugin="):
      out.append(a.split("=", 1)[1])
  return out


def _load_plugins(argv) -> None:
  specs = _plugin_args(argv)
  if not specs:
    return
  command = next((a for a in argv if not a.startswith("-")), None)
  if command not in PLUGIN_COMMANDS and command in _COMMANDS:
    print(f"drjax {command}: error: --plugin: only drjax sweep selects agents and environments "
          f"by name ({command} runs drjax's built-in algorithms and environments); run a "
          "plugin's agent with drjax sweep --plugin MODULE_OR_FILE --agents NAME", file=sys.stderr)
    raise SystemExit(2)
  from drjax import plugins  # pylint: disable=g-import-not-at-top
  for spec in specs:
    try:
      plugins.load(spec)
    except (plugins.PluginError, TypeError) as e:
      print(f"drjax: error: --plugin: {e}", file=sys.stderr)
      raise SystemExit(2) from None


_COMMANDS = ("reproduce", "train", "plan", "bench", "sweep")


def main(argv=None) -> int:
  """Entry point of the ``drjax`` console script; returns the exit code (errors: SystemExit 2).

  ``drjax`` with no arguments prints the help (the list of commands) on stdout and returns 0;
  ``drjax --version`` prints the distribution name and version and exits with 0.
  """
  argv = sys.argv[1:] if argv is None else list(argv)
  _load_plugins(argv)
  parser = build_parser()
  if not argv:
    parser.print_help()
    return 0
  args = parser.parse_args(argv)
  args.argv = argv
  if args.command in ("reproduce", "train"):
    enable_compilation_cache()
  return args.func(args.parser, args)


def console_main() -> None:
  """The ``drjax`` console script (and ``python -m drjax.cli``): ``sys.exit(main())``.

  A command stopped by Ctrl-C catches the ``KeyboardInterrupt`` and returns 130. CPython (3.11,
  3.12) records a ``KeyboardInterrupt`` that leaves a string ``exec``/``eval`` (``dataclasses``
  and ``namedtuple`` build their methods that way, e.g. while a lazily imported module loads) as
  unhandled even when a caller catches it, and under ``python -m`` then ends the process with
  SIGINT (return code -2) instead of the code returned. That record is reset at the start of every
  string evaluation, so one empty evaluation after ``main`` returned (every interrupt was handled
  by then) keeps the exit code the command chose.
  """
  code = main()
  exec("pass", {})  # pylint: disable=exec-used
  sys.exit(code)

