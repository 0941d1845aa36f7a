#!/usr/bin/env bash
# The dimension study's full grid (drjax.paper.dimension.GRIDS["full"]) on one NVIDIA GPU:
# 3 feature families x d in {4, ..., 256} x 64 instances x 16 seeds x K = 10^4 episodes of
# DR-LSVI-UCB (beta 1 and Theorem 1's beta), LSVI-UCB and we-drive-u. Each (family, d) is one
# drjax sweep (chunked by GPU memory); finished sweeps are reused, so rerunning resumes.
# Not yet run on a GPU: no timing is claimed for it.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-results-dimension-full}"
pip install --quiet -e ".[cuda12]"
python -c "import jax; print(jax.devices())"
drjax reproduce dimension --grid full --out "$OUT"
