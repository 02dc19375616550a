#!/usr/bin/env bash
# The README's examples run: make a small dataset, train on it with the
# Trainer, read it with a custom loop over the Loader and Prefetcher.
#   usage: examples_smoke.sh BIN_DIR
set -euo pipefail
bin=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
export STOKE_CUDA_PLUGIN=off
"$bin/make_dataset" data 24 160 120 >/dev/null
test "$(find data -name '*.jpg' | wc -l)" -eq 24
"$bin/train_folder" data 2 32 >train.txt
grep -q "stopped: completed" train.txt
test -s train-log.json && test -s best.ckpt
python3 -c 'import json; d=json.load(open("train-log.json")); assert len(d["epochs"]) == 2'
"$bin/custom_loop" data 4 >loop.txt
grep -q "^4 batches" loop.txt
echo PASS
