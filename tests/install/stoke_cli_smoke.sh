#!/usr/bin/env bash
# The `stoke` command end to end on a tiny synthetic dataset:
# dataset -> train (with report) -> eval (report) -> predict (table, CSV, JSON),
# a checkpoint without model information refused, and Ctrl-C during training
# writing the stop checkpoint.
#   stoke_cli_smoke.sh <stoke binary>
set -euo pipefail
stoke=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export STOKE_LOG_LEVEL=error

# info and bench are the stoke-info and stoke-bench programs.
"$stoke" info --json 2>/dev/null | grep -q '"stoke_version"' || { echo "FAIL: stoke info --json"; exit 1; }
"$stoke" bench --help >/dev/null 2>&1 || { echo "FAIL: stoke bench --help"; exit 1; }
"$stoke" help | grep -q predict || { echo "FAIL: stoke help"; exit 1; }

"$stoke" dataset --out "$work/data" --count 48 --size 40x40 --format png >/dev/null
"$stoke" train --data "$work/data" --out "$work/model.stoke" --size 16 --epochs 2 --batch 8 --arch plain \
  --normalize mean=0.5,std=0.25 --augment hflip --report "$work/train-report" --json >"$work/train.json" 2>"$work/train.err" \
  || { echo "FAIL: --normalize mean=0.5,std=0.25 (one value each)"; cat "$work/train.err"; exit 1; }
grep -q '"reason": "completed"' "$work/train.json" || { echo "FAIL: train json"; cat "$work/train.json"; exit 1; }
grep -q 'ETA' "$work/train.err" || { echo "FAIL: no progress line with ETA"; cat "$work/train.err"; exit 1; }
test -s "$work/train-report/report.html" || { echo "FAIL: no training report"; exit 1; }

"$stoke" eval --model "$work/model.stoke" --data "$work/data" --good ok --escape-rate 0.1 --report "$work/report" \
  --json >"$work/eval.json" 2>/dev/null
grep -q '"accuracy"' "$work/eval.json" && grep -q '"auc"' "$work/eval.json" || { echo "FAIL: eval json"; exit 1; }
grep -q '<svg' "$work/report/report.html" || { echo "FAIL: report has no chart"; exit 1; }

images=$(find "$work/data" -name '*.png' | wc -l)
lines=$("$stoke" predict --model "$work/model.stoke" --data "$work/data" --csv 2>/dev/null | wc -l)
test "$lines" -eq $((images + 1)) || { echo "FAIL: predict --csv gave $lines lines for $images images"; exit 1; }
one=$(find "$work/data/ok" -name '*.png' | head -1)
"$stoke" predict --model "$work/model.stoke" "$one" --json 2>/dev/null | grep -q '"probabilities"' \
  || { echo "FAIL: predict --json"; exit 1; }

# A bad image among good ones: reported in its row, the others classified, status 1.
mkdir -p "$work/mixed"
cp "$one" "$work/mixed/a.png"
printf 'not an image' >"$work/mixed/b.png"
set +e
"$stoke" predict --model "$work/model.stoke" --data "$work/mixed" --csv >"$work/mixed.csv" 2>/dev/null; status=$?
set -e
test $status -eq 1 && test "$(wc -l <"$work/mixed.csv")" -eq 3 && grep -q 'b.png,,,' "$work/mixed.csv" \
  && grep -q 'a.png,[a-z]*,0' "$work/mixed.csv" || { echo "FAIL: mixed folder: $status"; cat "$work/mixed.csv"; exit 1; }

# Usage errors are status 2; a file that is not a model file is status 1 with the reason.
set +e
"$stoke" predict --model "$work/model.stoke" --bogus >/dev/null 2>&1; test $? -eq 2 || { echo "FAIL: usage status"; exit 1; }
head -c 100 "$work/model.stoke" >"$work/cut.stoke"
"$stoke" predict --model "$work/cut.stoke" "$one" >/dev/null 2>"$work/cut.err"; status=$?
set -e
test $status -eq 1 && grep -q 'truncated' "$work/cut.err" || { echo "FAIL: cut model: $status"; cat "$work/cut.err"; exit 1; }

# Data-parallel: two rank processes on this machine, rank 0 writes the model
# (skipped where the build has no Gloo: the launcher then says so and fails).
if "$stoke" info --json 2>/dev/null | grep -q '"distributed": *true'; then
  "$stoke" train --nproc 2 --data "$work/data" --out "$work/dp.stoke" --size 16 --epochs 1 --batch 4 --arch plain \
    --json >"$work/dp.json" 2>"$work/dp.err" || { echo "FAIL: train --nproc 2"; cat "$work/dp.err"; exit 1; }
  grep -q 'started 2 ranks' "$work/dp.err" || { echo "FAIL: --nproc 2 started no ranks"; cat "$work/dp.err"; exit 1; }
  test "$(grep -c '"reason"' "$work/dp.json")" -eq 1 || { echo "FAIL: rank 0 alone reports"; cat "$work/dp.json"; exit 1; }
  test "$(grep -c '^epoch 1/1' "$work/dp.err")" -eq 1 || { echo "FAIL: rank 0 alone logs epochs"; cat "$work/dp.err"; exit 1; }
  # A device list without --nproc trains data-parallel, one rank per listed device
  # (instead of being refused). Where fewer GPUs exist than listed, the rank
  # without its device fails naming it, and the run fails.
  set +e
  STOKE_GPU_DEVICE=0,1 STOKE_DIST_TIMEOUT=20 "$stoke" train --data "$work/data" --out "$work/list.stoke" --size 16 \
    --epochs 1 --batch 4 --arch plain >/dev/null 2>"$work/list.err"
  status=$?
  set -e
  grep -q 'lists 2 devices: training data-parallel' "$work/list.err" && grep -q 'started 2 ranks' "$work/list.err" \
    || { echo "FAIL: a device list did not launch one rank per device"; cat "$work/list.err"; exit 1; }
  gpus=$("$stoke" info --json 2>/dev/null | python3 -c 'import json, sys; print(len(json.load(sys.stdin)["system"]["cuda"]["gpus"]))')
  if [ "${gpus:-0}" -lt 2 ]; then
    test $status -ne 0 && grep -q 'STOKE_GPU_DEVICE' "$work/list.err" \
      || { echo "FAIL: a listed device that does not exist: status $status"; cat "$work/list.err"; exit 1; }
  else
    test $status -eq 0 || { echo "FAIL: training on two listed GPUs: status $status"; cat "$work/list.err"; exit 1; }
  fi
  "$stoke" predict --model "$work/dp.stoke" "$one" --json 2>/dev/null | grep -q '"probabilities"' \
    || { echo "FAIL: the data-parallel model does not predict"; exit 1; }
fi

# Ctrl-C: the run stops after its current step and writes MODEL.stop.
"$stoke" train --data "$work/data" --out "$work/long.stoke" --size 16 --epochs 10000 --batch 4 --arch plain \
  2>"$work/long.err" >/dev/null &
pid=$!
for _ in $(seq 1 600); do
  grep -q 'train ' "$work/long.err" 2>/dev/null && break
  sleep 0.1
done
kill -INT "$pid"
set +e
wait "$pid"; status=$?
set -e
test $status -eq 130 || { echo "FAIL: interrupted train exit status $status"; cat "$work/long.err"; exit 1; }
test -s "$work/long.stoke.stop" || { echo "FAIL: no stop checkpoint"; exit 1; }
echo "stoke CLI smoke: ok"
