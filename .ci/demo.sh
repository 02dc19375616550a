#!/usr/bin/env bash
# Quick start 1: install dependencies, build, run the main demo (stoke-info,
# then stoke-bench; arguments are passed to stoke-bench).
set -euo pipefail
cd "$(dirname "$0")/.."
bash .ci/install-deps.sh
bash .ci/build.sh
./build/bin/stoke-info
# The field notes' experiment: baseline vs autotuned training on the embedded
# synthetic inspection dataset (generated once under ~/.cache/stoke).
./build/bin/stoke-bench "$@"
