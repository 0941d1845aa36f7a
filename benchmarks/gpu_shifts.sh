#!/usr/bin/env bash
# The shift study's full grid (drjax.paper.shifts.GRIDS["full"]) on one NVIDIA GPU: 80 seeds
# (5x the default's 16), 6 targets per family instead of 4, 500 Monte Carlo episodes per (run,
# target) instead of 100, K and N 3x the default's (CartPole K = 90, N = 600; ledge K = 300,
# N = 600). The same agents, baselines, controls and source-only tuning as the default grid:
# CartPole (pole length, gravity, force_mag; one sweep per online/offline with every family's
# targets) and the ledge (wind), online (LSVI-UCB, DR-LSVI-UCB, both evaluation modes) and offline
# (PEVI, DRPVI, DRPVI-mono, VA-DRPVI, R2PVI-TV/KL/chi2, DRVI-L). Each sweep is chunked by GPU
# memory (a quarter of the device's limit); finished sweeps are reused, so rerunning resumes.
# Not yet run on a GPU (no device was lent when the study was redone): no timing is claimed.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-results-shifts-full}"
pip install --quiet -e ".[cuda12,gymnax]"
python -c "import jax; print(jax.devices())"
/usr/bin/time -v drjax reproduce shifts --grid full --out "$OUT"
