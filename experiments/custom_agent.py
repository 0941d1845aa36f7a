"""Three new agents composed from drjax's pieces, as a plugin (docs/agents.md walks through it).

    drjax sweep --plugin experiments/custom_agent.py --agents drpvi-ellipsoid drpvi-scaled \
        --hparam kappa=0,1 --trajectories 50 --seeds 10 --targets q=0:1:11 --out custom
"""
from typing import NamedTuple

from drjax.agents import compose, lsvi, offline, registry


class ScaledHParams(NamedTuple):  # DRPVI's hyperparameters and a new traced one, without default
  kappa: float
  rho: float = 0.0
  beta: float = 1.0
  lam: float = 0.1


def kappa_beta(hp):  # the penalty multiplier: kappa * beta
  return hp.kappa * hp.beta


def drpvi_ellipsoid(H, d, A, **options):  # DRPVI with PEVI's ellipsoid penalty
  return offline.make_agent("DRPVI-ellipsoid", offline.DRPVIHParams, H, d, A,
                            oracle=compose.TVConstrained(), width="ellipsoid", **options)


def drpvi_scaled(H, d, A, **options):  # DRPVI whose penalty is multiplied by kappa
  return offline.make_agent("DRPVI-scaled", ScaledHParams, H, d, A,
                            oracle=compose.TVConstrained(), scale=kappa_beta, **options)


def dr_lsvi_ucb_ellipsoid(H, d, A, capacity, **options):  # DR-LSVI-UCB with LSVI-UCB's bonus
  return lsvi.make_agent("DR-LSVI-UCB-ellipsoid", H, d, A, capacity,
                         oracle=compose.TVConstrained(), width="ellipsoid", **options)


opts = ("truncation", "fail_zero", "tie_break", "vmin")
registry.register(registry.get("drpvi").replace(
    name="drpvi-ellipsoid", display="DRPVI-ellipsoid", factory=drpvi_ellipsoid, options=opts))
registry.register(registry.get("drpvi").replace(
    name="drpvi-scaled", display="DRPVI-scaled", factory=drpvi_scaled, options=opts,
    hparams=ScaledHParams._fields, hparams_type=ScaledHParams))
registry.register(registry.get("dr-lsvi-ucb").replace(
    name="dr-lsvi-ucb-ellipsoid", display="DR-LSVI-UCB-ellipsoid",
    factory=dr_lsvi_ucb_ellipsoid, options=("tie_break", "solver")))
