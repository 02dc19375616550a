#!/usr/bin/env bash
# Per-image latency of `stoke predict`'s path (read + decode + preprocess +
# forward, batch 1) beside the same network in PyTorch (PIL preprocessing), on
# a camera-size JPEG (2448x2048) and a small one (256x256).
#   bash bench/predict_latency.sh [build dir] [threads]
# PyTorch: Debian's python3-torch and python3-pil (apt-get install python3-torch
# python3-pil); PyPI's torch wheels pull the CUDA libraries and are not needed.
set -euo pipefail
build=${1:-build}
threads=${2:-2}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export STOKE_LOG_LEVEL=error STOKE_CPU_THREADS=$threads
stoke=$build/bin/stoke
# A model as `stoke train` makes it: ResNet-style, stem 16, widths 16/32/64,
# one block per stage, 128x128 RGB, ImageNet mean/std.
"$stoke" dataset --out "$work/data" --count 24 --size 256x256 >/dev/null
"$stoke" train --data "$work/data" --out "$work/model.stoke" --size 128 --epochs 1 --batch 8 \
  --normalize imagenet >/dev/null 2>&1
"$stoke" dataset --out "$work/big" --count 1 --size 2448x2048 --defects 0 >/dev/null
big=$(find "$work/big" -name '*.jpg' | head -1)
small=$(find "$work/data" -name '*.jpg' | head -1)
for image in "$big" "$small"; do
  "$build/bin/stoke_bench_predict" --model "$work/model.stoke" --image "$image" --iterations 40
  if /usr/bin/python3 -c 'import torch, PIL' 2>/dev/null; then
    /usr/bin/python3 "$here/pytorch_predict.py" --image "$image" --size 128 --threads "$threads" --iterations 40
    /usr/bin/python3 "$here/pytorch_predict.py" --image "$image" --size 128 --threads "$threads" --iterations 40 --draft
  else
    echo '{"impl": "pytorch", "skipped": "no torch/PIL for /usr/bin/python3 (apt-get install python3-torch python3-pil)"}'
  fi
done
