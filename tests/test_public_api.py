"""Import smoke test of the public surface, and the XLA flag set-up."""

import os
import subprocess
import sys
import textwrap

import drjax
from drjax import _xla


def test_public_names():
  expected = {"dr_lsvi_ucb", "lsvi_ucb", "make_hparams", "make_train", "sweep", "rho_array",
              "HParams", "QFunction", "AgentState", "TrainOutput", "robust", "planning",
              "evaluate", "envs", "LinearMDP", "PutOption", "RandomLinearMDP",
              "random_linear_drmdp", "Environment", "FiniteEnvironment", "LinearModel",
              "sensitivity", "data", "registry", "pevi", "drpvi", "va_drpvi", "make_fit",
              "OfflineAgent", "PEVIHParams", "DRPVIHParams", "VADRPVIHParams"}
  assert expected <= set(drjax.__all__)
  for name in drjax.__all__:
    assert getattr(drjax, name) is not None, name
  for name in ("alpha_max_exact", "alpha_max_grid", "ridge_factors", "tv_worst_case_value"):
    assert callable(getattr(drjax.robust, name))
  for name in drjax.sensitivity.__all__:
    assert getattr(drjax.sensitivity, name) is not None, name
  for name in ("rho_gradient", "param_gradient", "find_kinks", "one_sided_derivatives",
               "learned_sensitivity", "worst_case_search", "project_tv_simplex"):
    assert callable(getattr(drjax.sensitivity, name))


def _flags_after_import(xla_flags=None, extra_env=None):
  env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "DRJAX_NO_XLA_FLAG")}
  if xla_flags is not None:
    env["XLA_FLAGS"] = xla_flags
  env.update(extra_env or {})
  code = "import drjax, os; print(os.environ.get('XLA_FLAGS', ''))"
  res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       timeout=120)
  assert res.returncode == 0, res.stderr
  return res.stdout.strip()


def test_import_sets_flags_and_keeps_user_choices():
  assert _flags_after_import() == " ".join(_xla.flags_for_this_jaxlib())
  mine = "--xla_cpu_multi_thread_eigen=true --foo_bar"
  flags = _flags_after_import(mine)
  assert flags.startswith(mine) and "xla_cpu_multi_thread_eigen=false" not in flags
  assert ("--xla_cpu_use_fusion_emitters=false" in flags) == (
      "--xla_cpu_use_fusion_emitters=false" in _xla.flags_for_this_jaxlib())
  assert _flags_after_import(extra_env={"DRJAX_NO_XLA_FLAG": "1"}) == ""


def test_no_flag_once_backend_is_initialized():
  code = textwrap.dedent("""
      import os, jax
      jax.numpy.zeros(1).block_until_ready()
      import drjax
      print(repr(os.environ.get('XLA_FLAGS', '')))
  """)
  env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
  res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       timeout=120)
  assert res.returncode == 0, res.stderr
  assert res.stdout.strip() == "''"


def _run(code, **env_changes):
  env = {k: v for k, v in os.environ.items() if k not in env_changes}
  env.update({k: v for k, v in env_changes.items() if v is not None})
  res = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                       text=True, env=env, timeout=120)
  assert res.returncode == 0, res.stderr
  return res.stdout.split()


def test_help_imports_no_jax():
  # `drjax --help`, `drjax sweep --help`: the parser is built and printed without JAX or NumPy
  # (issue 35: importing JAX was 3 of the 3.4 CPU seconds of the help).
  out = _run("""
      import contextlib, io, sys
      import drjax.cli
      for argv in (["--help"], ["sweep", "--help"], ["reproduce", "--help"], ["plan", "--help"]):
        with contextlib.redirect_stdout(io.StringIO()) as f, contextlib.suppress(SystemExit):
          drjax.cli.main(argv)
        assert "usage: drjax" in f.getvalue(), argv
      print(*sorted(m for m in ("jax", "jaxlib", "numpy", "pandas") if m in sys.modules) or ["-"])
  """)
  assert out == ["-"]


def test_lazy_public_names_and_cache(tmp_path):
  # `import drjax` imports no JAX; the first public name does, and turns on the persistent
  # compilation cache in DRJAX_CACHE_DIR (DRJAX_NO_CACHE=1: off; a directory set by the user: kept).
  code = """
      import sys
      import drjax
      print("jax" in sys.modules)
      from drjax import LinearMDP
      import jax
      print("jax" in sys.modules, LinearMDP is drjax.envs.LinearMDP,
            jax.config.jax_compilation_cache_dir)
  """
  cache = str(tmp_path / "c")
  assert _run(code, DRJAX_NO_CACHE=None, DRJAX_CACHE_DIR=cache) == ["False", "True", "True", cache]
  assert _run(code, DRJAX_NO_CACHE="1", DRJAX_CACHE_DIR=cache)[-1] == "None"
  mine = str(tmp_path / "mine")
  assert _run(code, DRJAX_NO_CACHE=None, DRJAX_CACHE_DIR=cache,
              JAX_COMPILATION_CACHE_DIR=mine)[-1] == mine


def test_dir_and_unknown_name():
  assert set(drjax.__all__) <= set(dir(drjax))
  try:
    drjax.no_such_name  # noqa: B018
  except AttributeError as e:
    assert "no_such_name" in str(e)
  else:
    raise AssertionError("no AttributeError")
