#!/usr/bin/env bash
# Data-parallel gradient buckets: the same two-rank training with each bucket
# size, interleaved round by round, on a model whose gradient block is large
# (ResNet-18: 44.7 MB).
#   bench/dp_buckets.sh [build dir] [rounds] [bucket KiB list]
# Prints per run the steady-state images/s (epochs after the first, rank 0's
# `stoke train --log`) and the `communicate` share (the wait for the gradient
# allreduce after backward, and the stop agreement). 0 = no buckets: one
# allreduce of the whole block after backward.
set -euo pipefail
build=${1:-build}
rounds=${2:-2}
sizes=${3:-"25600 256 0"}
stoke=$build/bin/stoke
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$stoke" dataset --out "$work/data" --count 256 --size 96x96 --format png >/dev/null 2>&1
echo "dp_buckets: $(nproc) cores, 2 ranks x 1 thread, ResNet-18 at 64x64, 8 images per rank and step, 3 epochs of 256 PNGs"
for r in $(seq 1 "$rounds"); do
  for kb in $sizes; do
    STOKE_CPU_THREADS=1 STOKE_LOG_LEVEL=error "$stoke" train --nproc 2 --data "$work/data" \
      --out "$work/m.stoke" --size 64 --epochs 3 --batch 8 --arch resnet18 --split 100,0 \
      --bucket-kb "$kb" --log "$work/log.json" >/dev/null 2>"$work/err" || { cat "$work/err" >&2; exit 1; }
    python3 - "$work/log.json" "$r" "$kb" <<'PY'
import json, sys
epochs = json.load(open(sys.argv[1]))["epochs"][1:]
seconds = sum(e["seconds"] for e in epochs)
rate = sum(e["images"] for e in epochs) / seconds
comm = sum(e["profile"]["stages"]["communicate"]["seconds"] for e in epochs) / seconds
print(f"round {sys.argv[2]}: --bucket-kb {sys.argv[3]:>6}: {rate:6.1f} images/s, communicate {100 * comm:4.1f} %")
PY
  done
done
