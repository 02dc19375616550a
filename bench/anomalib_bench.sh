#!/usr/bin/env bash
# PatchCore (or PaDiM: --method padim) fit and per-image scoring: stoke beside
# anomalib 2.7 itself (bench/anomalib_reference.py), same weights, inputs and threads.
#   bash bench/anomalib_bench.sh [build dir] [extra anomalib_reference.py options]
# The Python: STOKE_ANOMALIB_PYTHON, else the environment the parity tests make
# (tests/anomaly/anomalib_run.sh: ${STOKE_PY_CACHE:-~/.cache/stoke}/venv-anomalib).
set -euo pipefail
build=${1:-build}
shift || true
cache=${STOKE_PY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/stoke}
py=${STOKE_ANOMALIB_PYTHON:-$cache/venv-anomalib/bin/python}
if [[ ! -x $py ]]; then
  echo "no anomalib python at $py: set STOKE_ANOMALIB_PYTHON or run ctest -R ParityWithAnomalib once" >&2
  exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
PYTHONWARNINGS=ignore "$py" "$(dirname "$0")/anomalib_reference.py" "$build/bin/stoke_bench_anomaly" "$work" "$@"
