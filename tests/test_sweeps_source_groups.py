"""drjax.sweeps: chunks never mix source instances (issue 18, item 1).

Settings are ordered source parameters slowest and, for source groups of at least
``grid.GROUP_MIN_RUNS`` runs, chunks are cut where they change, so every chunk trains on one
source instance (built once, unbatched). The numbers' independence of the chunk size in both
modes is tested in ``test_sweeps_program.py``; here: the grid order, the cuts, the threshold, and
a directory written with the old order refused with a clear message. Also the default chunk
budget (``memory_mb=None``): 512 MiB on CPU, a quarter of an accelerator's memory limit.
"""

from __future__ import annotations

import hashlib
import json
import os

import numpy as np
import pytest

from drjax import sweeps
from drjax.sweeps import config as sweep_config, grid, storage

CFG = dict(env="linear-mdp", agents=("dr-lsvi-ucb", "lsvi-ucb"), seeds=3, episodes=4,
           rho=(0.0, 0.5), rho_at=((0, 3),), beta=(1.0, 2.0),
           env_params={"xi_norm": (0.1, 0.2, 0.3), "delta": (0.3, 0.4)},
           targets=("q", 0.0, 1.0, 3))


@pytest.mark.parametrize("chunk", [1, 2, 4, 5, 7, 100, None])
def test_chunks_hold_one_source_instance_and_cover_every_run_once(chunk):
  # 4 (DR-LSVI-UCB) and 2 (LSVI-UCB) settings per instance x 64 seeds: 256 and 128 runs per group
  cfg = sweeps.validate(sweeps.SweepConfig(**{**CFG, "seeds": 64}, chunk=chunk))
  env = sweeps.make_env(cfg)
  lay = grid.layout(cfg, env)
  assert lay.groups == 6 and lay.grouped == (True, True)
  for k, (name, nset) in enumerate(lay.agents):
    g = grid._grid(cfg, env, name)
    source = np.stack([g.columns["xi_norm"], g.columns["delta"]], axis=1)
    # source parameters slowest: each instance's settings are one contiguous block, in the
    # order of itertools.product over the typed values
    blocks = source.reshape(6, nset // 6, 2)
    assert (blocks == blocks[:, :1]).all()
    want = [(x, d) for x in (0.1, 0.2, 0.3) for d in (0.3, 0.4)]
    assert [tuple(b[0]) for b in blocks] == want
    # one params entry per instance, equal to the instance's typed values (rounded to float32)
    np.testing.assert_allclose(np.asarray(g.params.xi_norm), [w[0] for w in want], rtol=1e-6)
    np.testing.assert_allclose(np.asarray(g.params.delta), [w[1] for w in want], rtol=1e-6)
    seen = []
    for j, c in enumerate(lay.chunks):
      if c[0] != k:
        continue
      setting, seed = lay.chunk_runs(j)
      inst = {tuple(source[s]) for s in setting}
      assert len(inst) == 1  # one instance per chunk
      assert inst == {want[lay.chunk_group(j)]}
      assert c[2] <= lay.chunk
      seen += list(zip(setting.tolist(), seed.tolist()))
    assert seen == [(s, i) for s in range(nset) for i in range(64)]  # every run once, in order


def test_small_groups_share_chunks_and_a_rerun_of_chosen_seeds_keeps_the_mode():
  # DR-LSVI-UCB: 4 settings x 32 seeds = 128 runs per instance (grouped); LSVI-UCB: 64 (not)
  cfg = sweeps.validate(sweeps.SweepConfig(**{**CFG, "seeds": 32}, chunk=100))
  lay = grid.layout(cfg)
  assert grid.GROUP_MIN_RUNS == 128 and lay.grouped == (True, False)
  spans = [(c[1], c[2]) for c in lay.chunks if c[0] == 1]
  assert spans == [(0, 100), (100, 100), (200, 100), (300, 84)]  # across instances
  assert all(lay.chunk_group(j) == 0 for j, c in enumerate(lay.chunks) if c[0] == 1)
  # seeds 3 and 7 alone: the mode follows the config's seeds, not the seeds run
  sub = grid.layout(sweeps.validate(sweeps.SweepConfig(**{**CFG, "seeds": 32}, seed_ids=(3, 7),
                                                       chunk=100)))
  assert sub.grouped == (True, False)


def test_a_directory_from_the_old_settings_order_is_refused_before_anything_runs(tmp_path):
  cfg = sweeps.validate(sweeps.SweepConfig(**CFG))
  # what an earlier drjax stored: the same config, hashed without the settings-order salt
  old_hash = hashlib.sha256(sweep_config._canonical(cfg.to_dict()).encode()).hexdigest()[:16]
  assert old_hash != storage.config_hash(cfg)
  out = tmp_path / "old"
  os.makedirs(out / "chunks")
  meta = {"format": storage.FORMAT, "status": "running", "config": cfg.to_dict(),
          "config_hash": old_hash}
  (out / "sweep.json").write_text(json.dumps(meta))
  (out / "chunks" / "chunk-000000.npz").write_bytes(b"old chunk")
  with pytest.raises(sweeps.SweepError, match="earlier drjax.*--overwrite"):
    sweeps.run(cfg, out=str(out))
  assert json.loads((out / "sweep.json").read_text()) == meta  # nothing touched
  assert (out / "chunks" / "chunk-000000.npz").read_bytes() == b"old chunk"


def test_without_a_swept_source_parameter_the_hash_is_unsalted():
  cfg = sweeps.validate(sweeps.SweepConfig(**{**CFG, "env_params": {"xi_norm": (0.1,)}}))
  plain = hashlib.sha256(sweep_config._canonical(cfg.to_dict()).encode()).hexdigest()[:16]
  assert storage.config_hash(cfg) == plain  # directories of such sweeps resume as before


class _FakeDevice:
  def __init__(self, platform, stats):
    self.platform, self._stats = platform, stats

  def memory_stats(self):
    if isinstance(self._stats, Exception):
      raise self._stats
    return self._stats


def test_chunk_budget_from_the_device_memory():
  from drjax.sweeps import config as cfg_mod
  gib = 2**30
  # a quarter of the limit, in whole MiB (hand-computed)
  assert sweeps.auto_memory_mb(_FakeDevice("gpu", {"bytes_limit": 80 * gib})) == 20 * 1024
  assert sweeps.auto_memory_mb(_FakeDevice("gpu", {"bytes_limit": 10 * gib + 5})) == 2560
  assert sweeps.auto_memory_mb(_FakeDevice("tpu", {"bytes_limit": 16 * gib})) == 4096
  # CPU, no statistics, a tiny limit: the CPU budget
  for dev in (_FakeDevice("cpu", {"bytes_limit": 80 * gib}), _FakeDevice("gpu", None),
              _FakeDevice("gpu", {}), _FakeDevice("gpu", RuntimeError("no stats")),
              _FakeDevice("gpu", {"bytes_limit": gib})):
    assert sweeps.auto_memory_mb(dev) == cfg_mod.DEFAULT_MEMORY_MB == 512.0


def test_validate_resolves_the_default_budget_and_the_layout_uses_it(monkeypatch):
  import jax
  cfg = sweeps.SweepConfig(**{**CFG, "env_params": {}, "seeds": 100_000})
  assert cfg.memory_mb is None
  on_cpu = sweeps.validate(cfg)
  assert on_cpu.memory_mb == 512.0 and on_cpu.to_dict()["memory_mb"] == 512.0
  explicit = sweeps.validate(sweeps.SweepConfig(**{**CFG, "env_params": {}, "seeds": 100_000},
                                                memory_mb=2048.0))
  from drjax.sweeps import config as cfg_mod
  monkeypatch.setattr(cfg_mod.jax, "devices",
                      lambda *a: [_FakeDevice("gpu", {"bytes_limit": 8 * 2**30})])
  on_gpu = sweeps.validate(cfg)
  assert on_gpu.memory_mb == 2048.0  # a quarter of 8 GiB
  assert grid.layout(on_gpu).chunk == grid.layout(explicit).chunk >= 4 * grid.layout(on_cpu).chunk
  assert jax.devices()[0].platform == "gpu"  # (the fake, to be sure the patch took)
