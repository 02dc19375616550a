#!/usr/bin/env bash
# Mean IoU of the same U-Net trained by stoke and by PyTorch on the same synthetic
# set with the same schedule (issue 30: "the same data in PyTorch with the same model
# and schedule reaches a comparable one"). For each seed: one seeded random
# torchvision-layout ResNet-18 encoder (width-scaled) is written as safetensors and
# both sides start their encoder from it (`stoke train --init`; the PyTorch side
# loads it), each decoder from its own default initialization; then `stoke eval`
# and the PyTorch side's evaluation of the same rule (bench/pytorch_segment_train.py)
# on the validation folder. Sides alternate per seed; the summary gives each side's
# mean IoU per seed, median and spread.
#   bash bench/segment_iou.sh [build dir] [seeds (1 2 3 4 5)] [epochs (14)] [count (48)]
# PyTorch: /usr/bin/python3 with torch and PIL (Debian's python3-torch, python3-pil),
# or STOKE_TORCH_PYTHON.
set -euo pipefail
build=${1:-build}
seeds=${2:-1 2 3 4 5}
epochs=${3:-14}
count=${4:-48}
py=${STOKE_TORCH_PYTHON:-/usr/bin/python3}
here=$(cd "$(dirname "$0")" && pwd)
stoke=$build/bin/stoke
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export STOKE_LOG_LEVEL=error STOKE_CPU_THREADS=2
size=64 width=0.25 batch=8 lr=0.01
# The data of docs/segmentation-cli.md's run (README's quick look at segmentation).
"$stoke" dataset --task segment --out "$work/train" --count "$count" --size 96x80 --format png \
  --defects 0.8 --seed 1 >/dev/null
"$stoke" dataset --task segment --out "$work/val" --count $((count / 4)) --size 96x80 --format png \
  --defects 0.8 --seed 2 >/dev/null
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for seed in $seeds; do
  enc=$work/encoder$seed.safetensors
  "$py" "$here/pytorch_segment_train.py" --width $width --seed "$seed" --write-encoder "$enc"
  start=$(date +%s.%N)
  "$stoke" train --task segment --data "$work/train" --val "$work/val" --arch resnet18 \
    --width $width --size $size --epochs "$epochs" --batch $batch --lr $lr --class-weights auto \
    --init "$enc" --seed "$seed" --out "$work/seg$seed.stoke" >/dev/null 2>"$work/train.err" ||
    { cat "$work/train.err"; exit 1; }
  seconds=$(echo "$(date +%s.%N) - $start" | bc)
  "$stoke" eval --model "$work/seg$seed.stoke" --data "$work/val" --json 2>/dev/null |
    "$py" -c 'import json,sys; d=json.load(sys.stdin); print(json.dumps({"impl": "stoke", "seed": int(sys.argv[1]), "mean_iou": d["mean_iou"], "per_class_iou": d["per_class_iou"], "pixel_accuracy": d["pixel_accuracy"], "seconds": float(sys.argv[2])}))' \
      "$seed" "$seconds" | tee -a "$work/rows"
  "$py" "$here/pytorch_segment_train.py" --train "$work/train" --val "$work/val" --size $size \
    --width $width --epochs "$epochs" --batch $batch --lr $lr --seed "$seed" --encoder "$enc" |
    "$py" -c 'import json,sys; d=json.load(sys.stdin); d["impl"]="pytorch"; d["seed"]=int(sys.argv[1]); print(json.dumps(d))' \
      "$seed" | tee -a "$work/rows"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
"$py" - "$work/rows" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("| seed | stoke mean IoU | PyTorch mean IoU |")
print("| --- | --- | --- |")
by = {}
for r in rows:
    by.setdefault(r["seed"], {})[r["impl"]] = r["mean_iou"]
for seed, v in by.items():
    print(f"| {seed} | {v.get('stoke', float('nan')):.3f} | {v.get('pytorch', float('nan')):.3f} |")
for impl in ("stoke", "pytorch"):
    v = [r["mean_iou"] for r in rows if r["impl"] == impl]
    print(f"{impl:8s} mean IoU median {statistics.median(v):.3f} min {min(v):.3f} "
          f"max {max(v):.3f} over {len(v)} seeds")
PY
