#!/usr/bin/env bash
# stoke int8 against ONNX Runtime's own static quantization of the same
# weights (issue 28: stoke's CPU int8 <= 0.9x ORT's time on its static-
# quantized QDQ model, decision agreement >= 99.5 %). The default net and
# ResNet-18 at 224x224 (stoke train, 1 epoch on 24 synthetic images), each:
#   stoke quantize --precision int8 --calibrate <the training images> (--force)
#   stoke export of the fp32 file (--fold-bn) -> quantize_static (QDQ, per-channel
#     s8 weights, u8 activations, MinMax) on the same calibration images,
#     preprocessed by stoke (int8_ort_bench.py)
#   stoke export of the int8 file (stoke's own QDQ model, timed in ORT as well)
# then in interleaved rounds: stoke int8 (stoke_bench_predict, STOKE_PRECISION
# unset: the file's int8), stoke fp32 (the same file, STOKE_PRECISION=fp32), ORT
# on its static-quantized model, ORT on stoke's QDQ export and ORT on the fp32
# export; the same image and thread count, batch 1 and batch N. Prints medians
# (minima) over the rounds, the ratios to stoke fp32 and to
# ORT's static QDQ, the load average, and the decision agreement with stoke
# fp32 on 48 other synthetic images of stoke int8 and of ORT's static QDQ.
#   bash bench/int8_ort_bench.sh [build dir] [threads] [rounds] [batch] [iterations]
# Needs the ONNX Runtime venv of tests/interchange/run.sh (STOKE_ORT_PYTHON).
set -euo pipefail
build=${1:-build}
threads=${2:-2}
rounds=${3:-3}
batch=${4:-32}
iterations=${5:-10}
here=$(cd "$(dirname "$0")" && pwd)
py=${STOKE_ORT_PYTHON:-${STOKE_PY_CACHE:-$HOME/.cache/stoke}/venv-onnx/bin/python}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export STOKE_LOG_LEVEL=error STOKE_CPU_THREADS=$threads
stoke=$build/bin/stoke
tool=$build/tests/stoke_int8_qdq_tool
"$stoke" dataset --out "$work/data" --count 24 --size 256x256 >/dev/null
"$stoke" dataset --out "$work/val" --count 48 --size 256x256 --seed 9 >/dev/null
models="default resnet18"
for model in $models; do
  arch=()
  [ "$model" = resnet18 ] && arch=(--arch resnet18)
  "$stoke" train --data "$work/data" --out "$work/$model.stoke" --size 224 --epochs 1 --batch 8 \
    "${arch[@]}" >/dev/null 2>&1
  # --force: the bench measures speed whatever the gate says (its figures are printed).
  "$stoke" quantize --model "$work/$model.stoke" --precision int8 --calibrate "$work/data" \
    --val "$work/val" --out "$work/$model-int8.stoke" --force --json 2>/dev/null \
    | sed "s/^{/{\"model\": \"$model\", /"
  "$stoke" export --model "$work/$model.stoke" --onnx "$work/$model.onnx" --fold-bn >/dev/null
  "$stoke" export --model "$work/$model-int8.stoke" --onnx "$work/$model-stoke-qdq.onnx" >/dev/null
  "$tool" "$work/$model.stoke" "$work/data" "$work/$model-calib" >/dev/null
  "$py" "$here/int8_ort_bench.py" quantize "$work/$model.onnx" "$work/$model-calib/input.bin" \
    "$work/$model-ort-qdq.onnx"
  # Decisions on the 48 validation images: stoke fp32, stoke int8, ORT's static QDQ.
  # (the tool prints "precision N C H W classes")
  STOKE_PRECISION=fp32 "$tool" "$work/$model.stoke" "$work/val" "$work/$model-val32" \
    >"$work/$model-val32.txt"
  "$tool" "$work/$model-int8.stoke" "$work/val" "$work/$model-val8" >/dev/null
  "$py" "$here/int8_ort_bench.py" logits "$work/$model-ort-qdq.onnx" \
    "$work/$model-val32/input.bin" "$work/$model-valort.bin"
done
image=$(find "$work/data" -name '*.jpg' | sort | head -1)
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg); $threads threads"
for ((r = 0; r < rounds; ++r)); do
  for model in $models; do
    "$build/bin/stoke_bench_predict" --model "$work/$model-int8.stoke" --image "$image" \
      --iterations "$iterations" --warmup 2 --concurrent 1 --batch "$batch" \
      | sed "s/^{/{\"model\": \"$model\", /"
    STOKE_PRECISION=fp32 "$build/bin/stoke_bench_predict" --model "$work/$model-int8.stoke" \
      --image "$image" --iterations "$iterations" --warmup 2 --concurrent 1 --batch "$batch" \
      | sed "s/^{/{\"model\": \"$model\", /"
    for onnx in ort-qdq stoke-qdq fp32; do
      file=$work/$model-$onnx.onnx
      [ $onnx = fp32 ] && file=$work/$model.onnx
      "$py" "$here/int8_ort_bench.py" time "$file" "$work/$model-calib/input.bin" "$threads" \
        "$batch" "$iterations" 2 "ort $onnx" | sed "s/^{/{\"model\": \"$model\", /"
    done
  done
done >"$work/runs.jsonl"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
"$py" - "$work" $models <<'PY'
import json, statistics, sys
work, models = sys.argv[1], sys.argv[2:]
runs = [json.loads(l) for l in open(work + "/runs.jsonl")]
for r in runs:
    r.setdefault("impl", "stoke")
    if r["impl"] == "stoke":
        r["impl"] = "stoke " + r["precision"]
impls = ["stoke int8", "stoke fp32", "ort ort-qdq", "ort stoke-qdq", "ort fp32"]
keys = [("forward_ms", "b1"), ("forward_batch_ms", "b%d" % runs[0]["batch"])]
print("| model | batch | " + " | ".join("%s median (min) ms" % i for i in impls) +
      " | stoke int8 / ORT static QDQ (median, min) | stoke int8 / stoke fp32 (median, min) |")
print("| --- | --- | " + " | ".join("---" for _ in impls) + " | --- | --- |")
for model in models:
    for key, label in keys:
        v = {i: [r[key] for r in runs if r["model"] == model and r["impl"] == i] for i in impls}
        med = {i: statistics.median(v[i]) for i in impls}
        print("| %s | %s | " % (model, label) +
              " | ".join("%.2f (%.2f)" % (med[i], min(v[i])) for i in impls) +
              " | %.2f, %.2f" % (med["stoke int8"] / med["ort ort-qdq"],
                                 min(v["stoke int8"]) / min(v["ort ort-qdq"])) +
              " | %.2f, %.2f |" % (med["stoke int8"] / med["stoke fp32"],
                                   min(v["stoke int8"]) / min(v["stoke fp32"])))
import numpy as np
for model in models:
    _, n, c, h, w, k = open("%s/%s-val32.txt" % (work, model)).read().split()
    n, k = int(n), int(k)
    top1 = lambda path: np.fromfile(path, dtype=np.float32).reshape(n, k).argmax(1)
    f, q = top1("%s/%s-val32/logits.bin" % (work, model)), top1("%s/%s-val8/logits.bin" % (work, model))
    o = top1("%s/%s-valort.bin" % (work, model))
    agree = lambda a, b: 100.0 * float(np.mean(a == b))
    print("%s: top-1 agreement on %d other images: stoke int8 with stoke fp32 %.1f %%, ORT static QDQ "
          "with stoke fp32 %.1f %%, stoke int8 with ORT static QDQ %.1f %%"
          % (model, n, agree(q, f), agree(o, f), agree(q, o)))
PY
