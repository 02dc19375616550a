#!/usr/bin/env bash
# Data-parallel throughput on one machine: the same training run (same data,
# epochs, images per optimizer step) as one process and as N rank processes
# (`stoke train --nproc N`), interleaved.
#   bench/dp_throughput.sh [build dir] [ranks] [rounds] [epochs]
# Per round it prints, for 1 rank x T threads (pinned to T cores, the share
# of one of the N ranks), 1 process x all cores and N ranks x T threads
# (T = cores / N):
#   - the wall time of the whole command (process start, dataset scan,
#     rendezvous, training, model file),
#   - the steady-state training rate: images/s over the epochs after the first
#     (rank 0's train log, `stoke train --log`), and
#   - for N ranks, the share of the epoch spent in collectives (the profiler's
#     `communicate` stage: the wait for the gradient allreduce after backward,
#     and the stop agreement), and
#   - N ranks again with --bucket-kb 0 (no gradient buckets overlapped with
#     backward: one allreduce after it), for the buckets' effect.
# Rank scaling = N ranks / 1 rank at the same threads per rank.
set -euo pipefail
build=${1:-build}
ranks=${2:-2}
rounds=${3:-2}
epochs=${4:-6}
stoke=$build/bin/stoke
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cores=$(nproc)
"$stoke" dataset --out "$work/data" --count 800 --size 96x96 --format png >/dev/null

run() {  # run <nproc> <threads per process> <batch per rank> [stoke train args]: prints "wall rate communicate-share"
  local start end
  start=$(date +%s.%N)
  STOKE_CPU_THREADS=$2 STOKE_LOG_LEVEL=error ${pin:-} "$stoke" train --nproc "$1" --data "$work/data" \
    --out "$work/m.stoke" --size 48 --epochs "$epochs" --batch "$3" --arch plain --split 100,0 \
    --log "$work/log.json" "${@:4}" >/dev/null 2>"$work/err" || { cat "$work/err" >&2; exit 1; }
  end=$(date +%s.%N)
  python3 - "$work/log.json" "$(echo "$end - $start" | bc)" <<'PY'
import json, sys
epochs = json.load(open(sys.argv[1]))["epochs"][1:]  # the first epoch warms up
images = sum(e["images"] for e in epochs)
seconds = sum(e["seconds"] for e in epochs)
comm = sum(e["profile"]["stages"]["communicate"]["seconds"] for e in epochs)
print(f"{float(sys.argv[2]):.2f} {images / seconds:.1f} {comm / seconds:.3f}")
PY
}

per_rank=$((32 / ranks))
threads=$((cores / ranks > 0 ? cores / ranks : 1))
echo "dp_throughput: $cores cores, $ranks ranks x $threads thread(s), $epochs epochs, 800 PNGs 96x96 -> 48x48, plain CNN, 32 images per step"
for r in $(seq 1 "$rounds"); do
  # One rank on the cores one of the N ranks has (taskset): its loader
  # thread and compute would otherwise spread over every core, and the
  # scaling would compare N ranks with a rank that already used them.
  read -r single_wall single_rate _ < <(pin="taskset -c 0-$((threads - 1))" run 1 "$threads" 32)
  read -r whole_wall whole_rate _ < <(run 1 "$cores" 32)
  read -r many_wall many_rate many_comm < <(run "$ranks" "$threads" "$per_rank")
  read -r _ whole_block_rate whole_block_comm < <(run "$ranks" "$threads" "$per_rank" --bucket-kb 0)
  printf 'round %d: wall %.2f / %.2f / %.2f s | steady images/s: 1 rank x %d %.1f, 1 process x %d %.1f, %d ranks x %d %.1f (communicate %.1f %%) | rank scaling %.2fx (wall %.2fx), vs one process %.2fx\n' \
    "$r" "$single_wall" "$whole_wall" "$many_wall" "$threads" "$single_rate" "$cores" "$whole_rate" \
    "$ranks" "$threads" "$many_rate" "$(echo "$many_comm * 100" | bc -l)" \
    "$(echo "$many_rate / $single_rate" | bc -l)" "$(echo "$single_wall / $many_wall" | bc -l)" \
    "$(echo "$many_rate / $whole_rate" | bc -l)"
  printf '         without buckets (--bucket-kb 0: one allreduce after backward): %d ranks x %d %.1f images/s (communicate %.1f %%) | buckets / none %.2fx\n' \
    "$ranks" "$threads" "$whole_block_rate" "$(echo "$whole_block_comm * 100" | bc -l)" \
    "$(echo "$many_rate / $whole_block_rate" | bc -l)"
done
