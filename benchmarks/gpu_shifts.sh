#!/usr/bin/env bash
# The shift study's full grid (drjax.paper.shifts.GRIDS["full"]) on one NVIDIA GPU: 10x the
# default's runs (80 seeds instead of 8, rho in {0.05, 0.1, 0.2, 0.3}), K = N = 500 instead of 150,
# 15 targets instead of 11 and 2,000 Monte Carlo episodes per (run, target) instead of 500, on
# CartPole (pole length 0.25-2.0) and Pendulum (l 0.5-2.0), online (DR-LSVI-UCB vs LSVI-UCB)
# and offline (DRPVI vs PEVI). One drjax sweep per (environment, online/offline), chunked by GPU
# memory; finished sweeps are reused, so rerunning resumes.
# Not yet run on a GPU: no timing is claimed for it.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-results-shifts-full}"
pip install --quiet -e ".[cuda12,gymnax]"
python -c "import jax; print(jax.devices())"
drjax reproduce shifts --grid full --out "$OUT"
