"""drjax's speed benchmarks, part of the package: ``drjax bench`` (or ``python -m drjax.bench``)
works wherever drjax is installed; in a source checkout results go to ``benchmarks/results/``
(else ``./bench-results/``), next to ``benchmarks/README.md``.

* ``drjax.bench.bench``: the suite behind ``drjax bench`` (``main``, ``BENCHMARKS``), whose
  benchmarks are ``drjax.bench.reproduce_bench`` (``drjax reproduce all`` cold, compile share)
  and ``drjax.bench.scaling`` (seeds, the alpha kernel, a hyperparameter grid), with the load
  and timing accounting of ``drjax.bench.timing`` and the report of ``drjax.bench.report``;
* ``drjax.bench.engine``: the training engine against ``drjax.bench.numpy_ref`` (vectorized NumPy
  DR-LSVI-UCB);
* ``drjax.bench.offline`` / ``drjax.bench.numpy_offline``: one offline ``agent.fit`` against
  vectorized NumPy of the same algorithms (and the R2PVI paper's Figure 2 in ``drjax reproduce
  r2pvi-time``);
* ``drjax.bench.sweep_bench``: ``drjax sweep`` processes (devices, 100,000 seeds, wall vs
  compute);
* ``drjax.bench.machine``: the machine a timing ran on;
* ``drjax.bench.compiles``: JAX's traces and compilations inside a timed block.
"""
