"""drjax's XLA flags are only those the installed jaxlib knows (XLA aborts on unknown flags)."""

import subprocess
import sys

from drjax import _xla


def test_fusion_emitter_flag_only_before_jaxlib_0_11(monkeypatch):
  monkeypatch.setattr(_xla, "_jaxlib_version", lambda: (0, 10))
  assert "--xla_cpu_use_fusion_emitters=false" in _xla.flags_for_this_jaxlib()
  for v in [(0, 11), (0, 12), (1, 0)]:
    monkeypatch.setattr(_xla, "_jaxlib_version", lambda v=v: v)
    flags = _xla.flags_for_this_jaxlib()
    assert "--xla_cpu_use_fusion_emitters=false" not in flags
    assert "--xla_cpu_multi_thread_eigen=false" in flags
  monkeypatch.setattr(_xla, "_jaxlib_version", lambda: None)  # unknown version: keep all
  assert _xla.flags_for_this_jaxlib() == _xla.FLAGS


def test_configure_adds_exactly_the_known_flags_in_a_fresh_process():
  code = ("import os; os.environ.pop('XLA_FLAGS', None)\n"
          "from drjax import _xla\n"
          "import drjax, jax; jax.numpy.zeros(1).block_until_ready()\n"
          "print(os.environ['XLA_FLAGS'] == ' '.join(_xla.flags_for_this_jaxlib()))\n")
  res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env={k: v for k, v in __import__("os").environ.items() if k != "XLA_FLAGS"})
  assert res.returncode == 0, res.stderr[-2000:]
  assert res.stdout.strip() == "True"
