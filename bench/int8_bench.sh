#!/usr/bin/env bash
# int8 against fp32 and bf16 inference through the Predictor (docs/precision.md,
# int8): the default net and ResNet-18 at 224x224, each quantized to int8 by
# `stoke quantize --precision int8` (calibrated on the training images, gated
# on a second synthetic set: its decision agreement is printed), then the same
# model, image and threads with STOKE_PRECISION=fp32, bf16 (where native) and
# int8 alternating in rounds; prints each precision's median and minimum of the
# batch-1 and batch-N forward, the ratios to fp32, and the load average.
#   bash bench/int8_bench.sh [build dir] [threads] [rounds] [batch] [iterations]
set -euo pipefail
build=${1:-build}
threads=${2:-2}
rounds=${3:-3}
batch=${4:-32}
iterations=${5:-10}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export STOKE_LOG_LEVEL=error STOKE_CPU_THREADS=$threads
stoke=$build/bin/stoke
bf16=$("$stoke" info --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["bf16"])')
precisions="fp32 int8"
[ "$bf16" = native ] && precisions="fp32 bf16 int8"
"$stoke" dataset --out "$work/data" --count 24 --size 256x256 >/dev/null
"$stoke" dataset --out "$work/val" --count 48 --size 256x256 --seed 9 >/dev/null
"$stoke" train --data "$work/data" --out "$work/default.stoke" --size 224 --epochs 1 --batch 8 >/dev/null 2>&1
"$stoke" train --data "$work/data" --out "$work/resnet18.stoke" --size 224 --epochs 1 --batch 8 \
  --arch resnet18 >/dev/null 2>&1
for model in default resnet18; do
  # --force: the bench measures speed whatever the gate says (its figures are printed).
  "$stoke" quantize --model "$work/$model.stoke" --precision int8 --calibrate "$work/data" \
    --val "$work/val" --out "$work/$model-int8.stoke" --force --json 2>/dev/null \
    | sed "s/^{/{\"model\": \"$model\", /"
done
image=$(find "$work/data" -name '*.jpg' | sort | head -1)
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg); bf16: $bf16; $threads threads"
for ((r = 0; r < rounds; ++r)); do
  for model in default resnet18; do
    for p in $precisions; do
      file=$work/$model.stoke
      [ "$p" = int8 ] && file=$work/$model-int8.stoke
      STOKE_PRECISION=$p "$build/bin/stoke_bench_predict" --model "$file" --image "$image" \
        --iterations "$iterations" --warmup 2 --concurrent 1 --batch "$batch" \
        | sed "s/^{/{\"model\": \"$model\", /"
    done
  done
done >"$work/runs.jsonl"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$work/runs.jsonl" $precisions <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
ps = sys.argv[2:]
keys = [("forward_ms", "forward b1"), ("forward_batch_ms", "forward b%d" % runs[0]["batch"])]
print("| model | measure | " + " | ".join("%s median (min) ms" % p for p in ps) + " | " +
      " | ".join("%s / fp32" % p for p in ps if p != "fp32") + " |")
print("| --- | --- | " + " | ".join("---" for _ in ps) + " | " + " | ".join("---" for p in ps if p != "fp32") + " |")
for model in ("default", "resnet18"):
    for key, label in keys:
        v = {p: [r[key] for r in runs if r["model"] == model and r["precision"] == p] for p in ps}
        m = {p: statistics.median(v[p]) for p in ps}
        print("| %s | %s | " % (model, label) + " | ".join("%.2f (%.2f)" % (m[p], min(v[p])) for p in ps) +
              " | " + " | ".join("%.2f" % (m[p] / m["fp32"]) for p in ps if p != "fp32") + " |")
PY
