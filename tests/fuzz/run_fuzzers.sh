#!/usr/bin/env bash
# Builds the libFuzzer targets with the `fuzz` preset (clang-14, ASan+UBSan)
# and runs each one, one after the other, for a time or an execution count:
#   tests/fuzz/run_fuzzers.sh [-t SECONDS] [-n RUNS] [TARGET...]
# (each target stops at whichever limit comes first; default: -t 60, every
# target in targets.cmake). Each run starts from the
# committed seed corpus (copied; new inputs go to build-fuzz/fuzz/corpus/<name>),
# saves crash/leak/timeout reproducers under tests/fuzz/crashes/<name>/ and
# its log under build-fuzz/fuzz/logs/<name>.log, then prints a table of
# executions, exec/s, seconds and reproducers per target. Exit status 1 when
# any target produced a reproducer.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
mode=()
while getopts "t:n:" opt; do
  case $opt in
    t) mode+=(-max_total_time="$OPTARG") ;;
    n) mode+=(-runs="$OPTARG") ;;
    *) sed -n '2,12p' "$0"; exit 2 ;;
  esac
done
[ ${#mode[@]} -gt 0 ] || mode=(-max_total_time=60)
shift $((OPTIND - 1))
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  read -r -a targets <<<"$(sed -n 's/^set(STOKE_FUZZ_TARGETS \(.*\))$/\1/p' "$here/targets.cmake")"
fi

cd "$root"
cmake --preset fuzz >/dev/null
ninja -C build-fuzz $(printf 'fuzz_%s ' "${targets[@]}")

out=$root/build-fuzz/fuzz
mkdir -p "$out/logs"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
failed=0
rows=()
for name in "${targets[@]}"; do
  corpus=$out/corpus/$name
  crashes=$here/crashes/$name
  mkdir -p "$corpus" "$crashes"
  cp -n "$here/corpus/$name/"* "$corpus/" 2>/dev/null || true
  log=$out/logs/$name.log
  before=$(ls "$crashes" | wc -l)
  start=$(date +%s.%N)
  # -timeout: one input taking longer is a hang; -rss_limit_mb: an input that
  # makes the library allocate beyond this is a defect (corrupt sizes).
  set +e
  "$out/fuzz_$name" "${mode[@]}" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$crashes/" "$corpus" >"$log" 2>&1
  rc=$?
  set -e
  secs=$(echo "$(date +%s.%N) - $start" | bc)
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  found=$(( $(ls "$crashes" | wc -l) - before ))
  [ "$rc" -ne 0 ] || [ "$found" -ne 0 ] && failed=1
  rows+=("$(printf '%-12s %12s %10.0f %8.1f %6s %4s' "$name" "${runs:-?}" \
            "$(echo "${runs:-0} / $secs" | bc -l)" "$secs" "$found" "$rc")")
done
printf '%-12s %12s %10s %8s %6s %4s\n' target executions exec/s seconds crashes rc
printf '%s\n' "${rows[@]}"
exit $failed
