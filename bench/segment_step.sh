#!/usr/bin/env bash
# The segmentation training step (U-Net on ResNet-18, 512x512, batch 4) in
# stoke and in PyTorch, same threads, interleaved rounds (the machines are
# shared and noisy): each round runs both sides once; the summary gives each
# side's median and minimum over the rounds' medians, and the time ratio.
#   bash bench/segment_step.sh [build dir] [threads] [rounds] [size] [batch]
# PyTorch: /usr/bin/python3 with torch (Debian's python3-torch).
set -euo pipefail
build=${1:-build}
threads=${2:-2}
rounds=${3:-3}
size=${4:-512}
batch=${5:-4}
here=$(cd "$(dirname "$0")" && pwd)
export STOKE_LOG_LEVEL=error STOKE_CPU_THREADS=$threads
out=$(mktemp)
trap 'rm -f "$out"' EXIT
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$rounds"); do
  "$build/bin/stoke_bench_segment_step" --size "$size" --batch "$batch" --steps 3 | tee -a "$out"
  /usr/bin/python3 "$here/pytorch_segment_step.py" --size "$size" --batch "$batch" --steps 3 \
    --threads "$threads" | tee -a "$out"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/python3 - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
side = {"stoke": [r["median_ms"] for r in rows if r["impl"] == "stoke"],
        "pytorch": [r["median_ms"] for r in rows if r["impl"].startswith("pytorch")]}
for k, v in side.items():
    print(f"{k:8s} median {statistics.median(v):9.1f} ms  min {min(v):9.1f} ms  rounds {len(v)}")
s, p = side["stoke"], side["pytorch"]
print(f"stoke / PyTorch time: median {statistics.median(s) / statistics.median(p):.2f}, "
      f"min {min(s) / min(p):.2f}")
PY
