"""Exact critical points of the linear MDP (runnable: ``python -m experiments.critical_point``).

The computation lives in ``drjax.paper.critical_point`` (the ``drjax`` command uses it too).
"""

from drjax.paper.critical_point import main

if __name__ == "__main__":
  main()
