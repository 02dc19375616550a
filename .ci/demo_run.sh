#!/usr/bin/env bash
# The run part of the demo (.ci/demo.sh builds, then calls this):
#   .ci/demo_run.sh STOKE [stoke bench arguments...]
# stoke info; stoke bench (baseline vs autotuned, the advisor); then a folder
# of images -> model file -> evaluation report -> predictions CSV.
# DEMO_EPOCHS (default 10): training epochs (the CTest Demo.RunPartEndToEnd
# runs it short).
set -euo pipefail
stoke=$1
shift
# Where the demo's images, model and report go (not a library knob: unset so
# that stoke does not warn about an unknown STOKE_* variable).
work=${STOKE_DEMO_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/stoke/demo}
unset STOKE_DEMO_DIR

"$stoke" info
"$stoke" bench "$@"

mkdir -p "$work"
[ -d "$work/data" ] || "$stoke" dataset --out "$work/data" --count 200 --size 128x128
[ -d "$work/test" ] || "$stoke" dataset --out "$work/test" --count 100 --size 128x128 --seed 7
"$stoke" train --data "$work/data" --out "$work/model.stoke" --size 64 --epochs "${DEMO_EPOCHS:-10}" --batch 8 --augment hflip,vflip
"$stoke" eval --model "$work/model.stoke" --data "$work/test" --good ok --escape-rate 0.05 --report "$work/report"
# The whole CSV to a file, its first lines shown (a pipe into head would end
# predict with SIGPIPE, and the script with it).
"$stoke" predict --model "$work/model.stoke" --data "$work/test" --csv >"$work/predictions.csv"
head -5 "$work/predictions.csv"
echo "demo: the evaluation report is $work/report/report.html, the predictions $work/predictions.csv"
