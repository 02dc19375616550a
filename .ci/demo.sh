#!/usr/bin/env bash
# Quick start 1: install what the library needs (no test tools), build the
# library, the `stoke` command and the examples into build-demo, and run the
# main demo on the embedded synthetic inspection dataset:
#   1. `stoke info`: the machine, the device stoke picks, the configuration;
#   2. `stoke bench`: the field notes' experiment, baseline vs autotuned
#      training, one table and the advisor's report (arguments go to it);
#   3. folder of images -> model file -> evaluation report -> predictions.
set -euo pipefail
cd "$(dirname "$0")/.."
bash .ci/install-deps.sh --demo
STOKE_BUILD_DIR=build-demo bash .ci/build.sh -DSTOKE_BUILD_TESTS=OFF -DSTOKE_BUILD_BENCH=OFF
bash .ci/demo_run.sh ./build-demo/bin/stoke "$@"
