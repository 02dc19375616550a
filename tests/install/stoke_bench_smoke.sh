#!/usr/bin/env bash
# stoke-bench end to end on a tiny synthetic dataset: runs, writes a config
# file that stoke loads, and prints valid JSON with both runs.
#   usage: stoke_bench_smoke.sh STOKE_BENCH STOKE_INFO
set -euo pipefail
bench=$1 info=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
XDG_CACHE_HOME="$tmp/cache" STOKE_CUDA_PLUGIN=off "$bench" --images 8 --size 32 --epochs 1 \
  --steps-per-trial 1 --config-out "$tmp/tuned.conf" --json >"$tmp/out.json"
python3 - "$tmp/out.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["images"] == 8, d["images"]
for run in ("baseline", "tuned"):
    assert d[run]["images_per_second"] > 0, run
assert d["baseline"]["batch_size"] == 2
assert len(d["tune"]["trials"]) >= 3
assert d["speedup"] > 0
print("speedup %.2f, end to end / bound %.2f" % (d["speedup"], d["end_to_end_over_bound"]))
PY
# The tuned config loads, and its values show with the file as their source.
STOKE_CONFIG="$tmp/tuned.conf" STOKE_CUDA_PLUGIN=off "$info" | grep -E "STOKE_CPU_THREADS +[0-9]+ +file" >/dev/null
# The generated dataset is reused on the next run (no regeneration).
test -f "$tmp/cache/stoke/datasets/inspection-2448x2048-8-q90-s1/.complete"
echo PASS
