#!/usr/bin/env bash
# The README's demo, run part (.ci/demo_run.sh), short: every step must succeed
# and leave its output (the report, one prediction per test image).
#   tests/install/demo_run_test.sh <source dir> <stoke>
set -euo pipefail
src=$1
stoke=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
DEMO_EPOCHS=1 STOKE_DEMO_DIR="$work/demo" XDG_CACHE_HOME="$work/cache" \
  bash "$src/.ci/demo_run.sh" "$stoke" --images 40 --epochs 1 >"$work/out.txt" 2>&1 \
  || { echo "FAIL: the demo's run part exited with $?"; tail -30 "$work/out.txt"; exit 1; }
test -s "$work/demo/report/report.html" || { echo "FAIL: no evaluation report"; exit 1; }
lines=$(wc -l <"$work/demo/predictions.csv")
test "$lines" -eq 101 || { echo "FAIL: $lines lines of predictions (want a header + 100)"; exit 1; }
grep -q "demo: the evaluation report is" "$work/out.txt" || { echo "FAIL: the demo did not finish"; exit 1; }
if grep -q "unknown environment variable" "$work/out.txt"; then
  echo "FAIL: the demo warns about its own variables"
  grep "unknown environment variable" "$work/out.txt"
  exit 1
fi
echo "demo run part: ok"
