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
stoke=./build-demo/bin/stoke
"$stoke" info
"$stoke" bench "$@"

work=${STOKE_DEMO_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/stoke/demo}
mkdir -p "$work"
[ -d "$work/data" ] || "$stoke" dataset --out "$work/data" --count 200 --size 128x128
[ -d "$work/test" ] || "$stoke" dataset --out "$work/test" --count 100 --size 128x128 --seed 7
"$stoke" train --data "$work/data" --out "$work/model.stoke" --size 64 --epochs 10 --batch 8 --augment hflip,vflip
"$stoke" eval --model "$work/model.stoke" --data "$work/test" --good ok --escape-rate 0.05 --report "$work/report"
"$stoke" predict --model "$work/model.stoke" --data "$work/test" --csv | head -5
echo "demo: the evaluation report is $work/report/report.html"
