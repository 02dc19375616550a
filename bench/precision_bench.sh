#!/usr/bin/env bash
# bf16 against fp32 inference through the Predictor (the path of `stoke
# predict`, docs/precision.md), same model, image and threads: the rounds
# interleave the two precisions; prints each precision's median and minimum
# of the batch-1 forward, the batch-N forward and the file-to-decision time,
# the ratios bf16 / fp32, and the load average before and after.
#   bash bench/precision_bench.sh [build dir] [threads] [rounds] [batch]
set -euo pipefail
build=${1:-build}
threads=${2:-2}
rounds=${3:-5}
batch=${4:-8}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export STOKE_LOG_LEVEL=error STOKE_CPU_THREADS=$threads
stoke=$build/bin/stoke
bf16=$("$stoke" info --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["bf16"])')
if [ "$bf16" = none ]; then
  echo "precision_bench: this CPU has no bf16 kernels (stoke info: bf16 none)"
  exit 0
fi
"$stoke" dataset --out "$work/data" --count 24 --size 256x256 >/dev/null
# The default `stoke train` net and ResNet-18, 224x224 RGB.
"$stoke" train --data "$work/data" --out "$work/default.stoke" --size 224 --epochs 1 --batch 8 >/dev/null 2>&1
"$stoke" train --data "$work/data" --out "$work/resnet18.stoke" --size 224 --epochs 1 --batch 8 \
  --arch resnet18 >/dev/null 2>&1
image=$(find "$work/data" -name '*.jpg' | sort | head -1)
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg); bf16 on this CPU: $bf16; $threads threads"
for ((r = 0; r < rounds; ++r)); do
  for model in default resnet18; do
    for p in fp32 bf16; do
      STOKE_PRECISION=$p "$build/bin/stoke_bench_predict" --model "$work/$model.stoke" --image "$image" \
        --iterations 20 --warmup 3 --concurrent 1 --batch "$batch" | sed "s/^{/{\"model\": \"$model\", /"
    done
  done
done >"$work/runs.jsonl"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$work/runs.jsonl" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
keys = [("forward_ms", "forward b1"), ("forward_batch_ms", "forward b%d" % runs[0]["batch"]),
        ("total_ms", "file -> decision b1")]
print("| model | measure | fp32 median (min) ms | bf16 median (min) ms | bf16 / fp32 (medians) |")
print("| --- | --- | --- | --- | --- |")
for model in ("default", "resnet18"):
    for key, label in keys:
        v = {p: [r[key] for r in runs if r["model"] == model and r["precision"] == p] for p in ("fp32", "bf16")}
        m = {p: statistics.median(v[p]) for p in v}
        print("| %s | %s | %.2f (%.2f) | %.2f (%.2f) | %.2f |" % (
            model, label, m["fp32"], min(v["fp32"]), m["bf16"], min(v["bf16"]), m["bf16"] / m["fp32"]))
PY
