"""XLA optimization level of the paper programs (``--opt-level``): choice, validation, provenance."""

import pytest

from drjax import cli
from drjax.paper import programs


def test_auto_uses_fast_compile_for_small_workloads_only():
  assert programs.opt_level_for("auto", programs.FAST_COMPILE_MAX_WORK) == 0
  assert programs.opt_level_for("auto", programs.FAST_COMPILE_MAX_WORK + 1) is None
  assert programs.opt_level_for("auto", 10, small=1) == 1
  assert programs.opt_level_for("auto", programs.FAST_COMPILE_MAX_WORK + 1, small=1) is None
  assert programs.opt_level_for(2, 10**9) == 2
  assert programs.compiler_options(None) is None
  assert programs.compiler_options(0) == {"xla_backend_optimization_level": 0}


@pytest.mark.parametrize("bad", ["fast", 4, -1, 1.5, True, None])
def test_bad_opt_level_names_the_argument(bad):
  with pytest.raises(ValueError, match="opt_level must be one of"):
    programs.opt_level_for(bad, 1)


def test_bad_opt_level_in_the_api_is_refused_before_tracing(tmp_path):
  from drjax.paper import reproduce as rep  # pylint: disable=g-import-not-at-top
  with pytest.raises(ValueError, match="opt_level"):
    rep.reproduce(["fig1"], out=str(tmp_path / "o"), seeds=2, episodes=2, opt_level="O3",
                  quiet=True)
  assert not (tmp_path / "o" / "fig1").exists()


@pytest.mark.parametrize("cmd", ["reproduce", "train"])
def test_cli_rejects_bad_opt_level(cmd, tmp_path, capsys):
  out = tmp_path / "out"
  argv = [cmd, "--opt-level", "7", "--out", str(out)]
  if cmd == "train":
    argv += ["--env", "linear-mdp"]
  with pytest.raises(SystemExit) as e:
    cli.main(argv)
  assert e.value.code == 2
  err = capsys.readouterr().err.strip()
  assert len(err.splitlines()) == 1 and "--opt-level" in err, err
  assert not out.exists()


def test_the_offline_figure_compiles_fast_at_the_papers_size():
  """20 seeds x 100 trajectories x 3 xi_norm stays in the fast-compile range (drpvi's program at
  -O0 and -O1 agree: tests/test_drpvi_paper.py)."""
  from drjax.paper import drpvi  # pylint: disable=g-import-not-at-top
  assert programs.opt_level_for("auto", drpvi.DEFAULT_SEEDS * 100 * len(drpvi.XI)) == 0


def test_the_put_option_figure_plans_over_the_whole_capacity_when_compiling_is_the_wait():
  """``plan_blocks_for``: one plan (``blocks=0``) up to the fast-compile size, the filled slots
  above; ``drjax reproduce fig2`` at a small size records it, and its numbers equal those of the
  filled-slot plan (the same program otherwise)."""
  import jax  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top

  from drjax import _opt_level  # pylint: disable=g-import-not-at-top
  from drjax.paper import presets, put_option_experiment as poe  # pylint: disable=g-import-not-at-top
  assert _opt_level.plan_blocks_for(programs.FAST_COMPILE_MAX_WORK) == 0
  assert _opt_level.plan_blocks_for(programs.FAST_COMPILE_MAX_WORK + 1) is None
  preset = presets.PRESETS["paper"]
  kw = dict(seeds=2, episodes=6, key=jax.random.PRNGKey(1), rhos=(0.1,), p_us=(0.4, 0.6))
  res = poe.run_put_option(preset, **kw)
  assert res["plan_blocks"] == 0
  blocks = poe.plan_blocks_for
  try:
    poe.plan_blocks_for = lambda work: None  # the filled slots
    other = poe.run_put_option(preset, **kw)
  finally:
    poe.plan_blocks_for = blocks
  assert other["plan_blocks"] is None
  for k in ("dr", "ls"):
    np.testing.assert_allclose(res[k], other[k], rtol=1e-9, atol=1e-9)
