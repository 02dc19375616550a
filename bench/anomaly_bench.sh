#!/usr/bin/env bash
# PatchCore (or PaDiM: --method padim) fit and per-image scoring: stoke beside anomalib's definitions in
# PyTorch (bench/anomaly_reference.py), same weights, inputs and threads.
#   bash bench/anomaly_bench.sh [build dir] [extra anomaly_reference.py options]
# PyTorch: Debian's python3-torch and python3-torchvision.
set -euo pipefail
build=${1:-build}
shift || true
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 "$(dirname "$0")/anomaly_reference.py" "$build/bin/stoke_bench_anomaly" "$work" "$@"
