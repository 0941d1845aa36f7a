import os

# Before JAX initializes: drjax's XLA flags (single-threaded Eigen, fast compiles; drjax/_xla.py),
# fixed here so determinism does not depend on the caller's environment; then float64.
os.environ.pop("DRJAX_NO_XLA_FLAG", None)
# One persistent compilation cache for the run, in a fresh temporary directory (never the user's
# ~/.cache/drjax), shared by the xdist workers and every command the tests start, removed at the
# end (pytest_unconfigure). It starts empty, so the first test to need a program compiles it; a
# later test or command that builds the same program reads it back. Tests of the cache itself and
# the cold-start benchmarks set their own DRJAX_NO_CACHE / DRJAX_CACHE_DIR.
if not os.environ.get("PYTEST_XDIST_WORKER"):  # the controller, or a run without xdist
  import tempfile  # pylint: disable=g-import-not-at-top

  os.environ["DRJAX_CACHE_DIR"] = tempfile.mkdtemp(prefix="drjax-test-cache-")
  os.environ["_DRJAX_TEST_CACHE_OWNER"] = str(os.getpid())
  os.environ.pop("DRJAX_NO_CACHE", None)
# The tests compile hundreds of small programs and run each for a moment: LLVM -O0 compiles them
# about 1.5x faster (test_engine.py + test_agents.py: 110 s -> 75 s on 2 cores). XLA's own HLO
# passes still run, so the programs compute the same values; programs that pass their own
# ``compiler_options`` (drjax.paper.programs, test_opt_level.py) keep their level. Set
# --xla_backend_optimization_level yourself in XLA_FLAGS to test at another level.
if "--xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
  os.environ["XLA_FLAGS"] = " ".join(
      [os.environ.get("XLA_FLAGS", ""), "--xla_backend_optimization_level=0"]).strip()
from drjax import _xla  # noqa: E402

_xla.configure()

import jax  # noqa: E402
import pytest  # noqa: E402

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_rank_promotion", "raise")
jax.config.update("jax_compilation_cache_dir", os.environ["DRJAX_CACHE_DIR"])
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)


def pytest_unconfigure(config):
  del config
  if os.environ.get("_DRJAX_TEST_CACHE_OWNER") == str(os.getpid()):
    import shutil  # pylint: disable=g-import-not-at-top

    shutil.rmtree(os.environ["DRJAX_CACHE_DIR"], ignore_errors=True)


# Test scheduling under pytest-xdist (`-n 2`, pyproject.toml). The tests of SHARED_WORKER_FILES run
# on one worker, in file order: they share module fixtures (test_reproduce: one `drjax reproduce
# all` run; test_sweeps: the small sweep, its compiled programs and the CLI compilation cache),
# which xdist's default `--dist load` would build once per worker. Every other test is handed out
# on its own, in collection order, with the slowest files first (SLOW_FILES_FIRST: the notebooks
# and README examples each run a fresh interpreter that compiles its own programs), so that the
# two workers finish together. Only the default distribution is changed: an explicit `--dist`
# other than `load` is honoured. (`--dist loadgroup` would do the grouping with xdist_group marks,
# but with pytest >= 9.2 it silently stops grouping: pytest-xdist issue #1386.)
SHARED_WORKER_FILES = ("test_reproduce.py", "test_sweeps.py")
SLOW_FILES_FIRST = ("test_shifts.py", "test_notebooks.py", "test_readme.py", "test_bench.py",
                    "test_dimension.py", "test_sensitivity.py", "test_gradient_audit.py",
                    "test_agents.py", "test_engine.py")


def pytest_collection_modifyitems(items):
  rank = {name: i for i, name in enumerate(SLOW_FILES_FIRST)}
  items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: file order kept


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook
def pytest_xdist_make_scheduler(config, log):
  if config.getvalue("dist") != "load":
    return None
  from xdist.scheduler import LoadScopeScheduling  # pylint: disable=g-import-not-at-top

  class SharedFilesScheduling(LoadScopeScheduling):
    """Work units: one per file of SHARED_WORKER_FILES, one per test otherwise.

    LoadScopeScheduling hands out the units with the most tests first (the shared files), then
    the single tests in collection order.
    """

    def _split_scope(self, nodeid):
      path = nodeid.split("::", 1)[0]
      return path if os.path.basename(path) in SHARED_WORKER_FILES else nodeid

  return SharedFilesScheduling(config, log)


@pytest.fixture(autouse=True, scope="module")
def _free_programs_after_module():
  """Each test module's compiled programs are dropped when it ends (``drjax.clear_caches``).

  A worker process runs thousands of tests; without this it keeps every program it ever compiled
  (drjax's and JAX's in-process caches): 5 GB of memory per worker and, since each XLA executable
  holds a few memory mappings, more than Linux's default 65,530 mappings per process, after which
  XLA crashed while compiling (a segmentation fault in ``backend_compile_and_load`` near the end
  of the suite). Measured on 2 cores: about 45,000 mappings per worker at 13% of the suite.
  """
  yield
  import gc  # pylint: disable=g-import-not-at-top

  import drjax  # pylint: disable=g-import-not-at-top

  drjax.clear_caches()
  gc.collect()


@pytest.fixture(autouse=True)
def _restore_x64():
  """Every test starts with float64 on and leaves it on: in-process ``drjax sweep`` / ``train``
  calls set ``jax_enable_x64`` from their ``--x64`` flag, which would otherwise leak into the
  next test on the same worker (float64 tolerances then fail on float32 numbers)."""
  jax.config.update("jax_enable_x64", True)
  yield
  jax.config.update("jax_enable_x64", True)

