"""drjax's timing harnesses that ship with the package (the rest of ``drjax bench`` lives in
``benchmarks/`` of a checkout).

* ``drjax.bench.numpy_offline``: vectorized NumPy implementations of the offline agents (PEVI,
  DRPVI, VA-DRPVI, R2PVI-TV / -KL / -chi2, DRVI-L), the baseline every offline timing is
  compared with (agreement with drjax is tested to 1e-8 in float64);
* ``drjax.bench.offline``: one ``agent.fit`` through the entry point a user calls against that
  NumPy, interleaved in one process (``drjax bench --only offline``, and the R2PVI paper's
  Figure 2 in ``drjax reproduce r2pvi-time``).
"""
