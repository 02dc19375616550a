#!/usr/bin/env bash
# Data-parallel throughput on one machine: the same training run (same data,
# epochs, batch per step) as one process with all cores and as N rank
# processes with cores/N threads each (`stoke train --nproc N`), interleaved.
#   bench/dp_throughput.sh [build dir] [ranks] [rounds]
# Prints the wall time of each run, the scaling over ranks (1 rank / N ranks,
# same threads per rank) and N ranks against one process with every core.
set -euo pipefail
build=${1:-build}
ranks=${2:-2}
rounds=${3:-2}
stoke=$build/bin/stoke
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cores=$(nproc)
"$stoke" dataset --out "$work/data" --count 800 --size 96x96 --format png >/dev/null
run() {  # run <nproc> <threads per process> <batch per rank>
  local start end
  start=$(date +%s.%N)
  STOKE_CPU_THREADS=$2 STOKE_LOG_LEVEL=error "$stoke" train --nproc "$1" --data "$work/data" --out "$work/m.stoke" \
    --size 48 --epochs 3 --batch "$3" --arch plain --split 100,0 --json >/dev/null 2>&1
  end=$(date +%s.%N)
  echo "$end - $start" | bc
}
per_rank=$((32 / ranks))
threads=$((cores / ranks > 0 ? cores / ranks : 1))
for r in $(seq 1 "$rounds"); do
  single=$(run 1 "$threads" 32)   # one rank with one rank's threads: the scaling baseline
  whole=$(run 1 "$cores" 32)      # one process with every core
  many=$(run "$ranks" "$threads" "$per_rank")
  printf 'round %d: 1 rank x %d thread(s) %.2f s | 1 process x %d threads %.2f s | %d ranks x %d thread(s) %.2f s | rank scaling %.2fx, vs all cores in one process %.2fx\n' \
    "$r" "$threads" "$single" "$cores" "$whole" "$ranks" "$threads" "$many" \
    "$(echo "$single / $many" | bc -l)" "$(echo "$whole / $many" | bc -l)"
done
