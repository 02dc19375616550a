#!/usr/bin/env bash
# The GPU check, run ON THE DEVICE MACHINE from the repository root with the
# bundle made here by tests/gpu/make_device_bundle.sh carried:
#   run(command: "bash tests/gpu/device_check.sh", carry: ["out/device"], timeout_s: 480)
#
# It returns a complete answer the first time:
#   - preflight (<= 30 s): unresolved libraries of every bundled binary and
#     library, then `stoke-info --json` must show the CUDA plugin loaded and at
#     least one GPU; otherwise it prints why and exits 3 without spending more;
#   - one global deadline (STOKE_DEVICE_BUDGET, 420 s) shared by steps in order
#     of value, each guarded by the deadline and `timeout -k`: GPU tests (op
#     suite, trainer on the GPU, pool, prefetcher, graphs) -> step bench beside
#     PyTorch -> memory/prefetch benches -> compute-sanitizer memcheck on the
#     custom kernels -> reruns of the tests that did not pass, one per process;
#   - a skipped GPU test counts as a failure; no CPU-only test runs here;
#   - everything goes into one scratch folder tarred into $OUT/results.tgz,
#     plus $OUT/summary.txt (2 files), and the summary is printed last.
# Exit: 0 every GPU test passed, 1 something failed, 3 preflight refused.
# PyTorch runs with the bundle's C++ runtime libraries off the library path.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 3
OUT=${OUT:-$root/out/device-results}
bundle=${STOKE_DEVICE_BUNDLE:-$root/out/device}
budget=${STOKE_DEVICE_BUDGET:-420}
mkdir -p "$OUT"
start=$(date +%s)
deadline=$((start + budget))
scratch=$(mktemp -d "${TMPDIR:-/tmp}/stoke-device.XXXXXX")
summary=$scratch/summary.txt
failed=0
not_passed=()

log() { echo "[$(($(date +%s) - start))s] $*" | tee -a "$summary"; }
note() { echo "$*" >>"$summary"; }

finish() {
  local rc=$1
  log "verdict: $2 (exit $rc)"
  tar -czf "$OUT/results.tgz" -C "$scratch" . 2>/dev/null || echo "tar of results failed" >&2
  cp "$summary" "$OUT/summary.txt"
  echo "================ summary ($OUT/summary.txt) ================"
  tail -c 10000 "$summary"
  rm -rf "$scratch" "${jit_cache:-}"
  [ "${libs:-$bundle}" = "$bundle" ] || rm -rf "$libs"
  exit "$rc"
}
refuse() {
  log "preflight failed: $*"
  finish 3 "no GPU check ran"
}

# --- library paths: stoke's binaries get the bundle; PyTorch never does ----
# The bundle's Debian libraries travel compressed (libs.tgz: deps/, runtime/).
libs=$bundle
if [ -f "$bundle/libs.tgz" ]; then
  libs=$(mktemp -d "${TMPDIR:-/tmp}/stoke-libs.XXXXXX")
  tar -xzf "$bundle/libs.tgz" -C "$libs" || echo "could not unpack $bundle/libs.tgz" >>"$summary"
fi
join_path() {
  local out="" d
  for d in "$@"; do [ -n "$d" ] && [ -d "$d" ] && out="${out:+$out:}$d"; done
  echo "$out"
}
wheel_libs=$(timeout -k 2 10 python3 - <<'PY' 2>/dev/null
import glob, os
try:
    import nvidia
    roots = list(nvidia.__path__)
except Exception:
    roots = []
print(" ".join(d for r in roots for d in sorted(glob.glob(os.path.join(r, "*", "lib")))))
PY
)
# shellcheck disable=SC2086  # the wheel folders have no spaces
stoke_ld=$(join_path "$bundle/lib" "$libs/deps" $wheel_libs /usr/local/cuda/lib64 \
  /usr/local/cuda/targets/x86_64-linux/lib "$libs/runtime" \
  $(tr : " " <<<"${LD_LIBRARY_PATH:-}"))
# Prefix of every stoke command (nothing is exported: python3 keeps the
# machine's own environment).
stoke=(env "LD_LIBRARY_PATH=$stoke_ld" "STOKE_CUDA_PLUGIN=$bundle/lib/libstoke_cuda.so")
note "stoke LD_LIBRARY_PATH=$stoke_ld"

# --- step runner: deadline-guarded, one log file per step --------------------
# step <name> <max seconds> <command...>; returns the command's status,
# 125 when the deadline left no time for it.
step() {
  local name=$1 secs=$2 left
  shift 2
  left=$((deadline - $(date +%s)))
  if ((left < 15)); then
    log "$name: not run, ${left}s left before the deadline"
    return 125
  fi
  ((secs > left)) && secs=$left
  local t0
  t0=$(date +%s)
  timeout -k 5 "$secs" "$@" >"$scratch/$name.txt" 2>&1
  local rc=$?
  log "$name: rc=$rc in $(($(date +%s) - t0))s$( ((rc == 124 || rc == 137)) && echo " (timed out at ${secs}s)")"
  return "$rc"
}

# --- preflight ---------------------------------------------------------------
log "preflight: bundle $bundle"
[ -x "$bundle/bin/stoke-info" ] || refuse "no $bundle/bin/stoke-info: run tests/gpu/make_device_bundle.sh on the build machine and carry out/device"
[ -f "$bundle/lib/libstoke_cuda.so" ] || refuse "no CUDA plugin in the bundle ($bundle/lib/libstoke_cuda.so): build with -DSTOKE_CUDA=ON"
core_missing=""
for f in "$bundle"/bin/* "$bundle"/lib/*.so* "$libs"/deps/*; do
  [ -f "$f" ] || continue
  missing=$(LD_LIBRARY_PATH="$stoke_ld" timeout 10 ldd "$f" 2>&1 | awk '/not found/{print $1}' | sort -u | tr '\n' ' ')
  [ -z "$missing" ] && continue
  note "unresolved: $(basename "$f"): $missing"
  case "$(basename "$f")" in
    stoke-info | stoke_gpu_tests | libstoke.so* | libstoke_cuda.so) core_missing="$core_missing $(basename "$f"): $missing" ;;
  esac
done
[ -z "$core_missing" ] || refuse "unresolved libraries:$core_missing"
timeout -k 2 8 nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap \
  --format=csv,noheader >>"$summary" 2>&1 || note "nvidia-smi: not available or failed"
"${stoke[@]}" timeout -k 2 15 "$bundle/bin/stoke-info" --json >"$scratch/stoke-info.json" 2>"$scratch/stoke-info.err"
info_rc=$?
[ "$info_rc" = 0 ] || refuse "stoke-info --json exited $info_rc: $(tail -c 300 "$scratch/stoke-info.err")"
verdict=$(python3 - "$scratch/stoke-info.json" <<'PY' 2>&1
import json, sys
d = json.load(open(sys.argv[1]))
c = d.get("cuda") or d.get("system", {}).get("cuda")  # stoke-info's or `stoke info`'s layout
if c is None:
    print("stoke-info --json has no cuda section"); sys.exit()
if not c["plugin_loaded"]:
    print("CUDA plugin not loaded: " + (c["plugin_error"] or "no reason given"))
elif not c["gpus"]:
    print("plugin loaded but no GPU: " + (c["device_error"] or "no reason given"))
else:
    g = c["gpus"][0]
    print("ok %d GPU(s), %s sm_%s, driver %d runtime %d cuDNN %d NVRTC %d" % (
        len(c["gpus"]), g["name"], g["compute_capability"].replace(".", ""),
        c["driver_version"], c["runtime_version"], c["cudnn_version"], c["nvrtc_version"]))
PY
)
case "$verdict" in
  ok*) log "preflight ${verdict#ok }" ;;
  *) refuse "${verdict:-stoke-info --json could not be read}" ;;
esac
log "preflight done"

# --- GPU tests (the most valuable step) -------------------------------------
jit_cache=$(mktemp -d "${TMPDIR:-/tmp}/stoke-jit.XXXXXX")
export STOKE_JIT_CACHE=$jit_cache
# gtest <name> <seconds> <binary> [filter]: runs the tests; a skipped test
# counts as failed; a test that failed, crashed or was never reached (a CUDA
# fault is sticky and takes the rest of the process with it) is also queued
# for a rerun in its own process.
gtest() {
  local name=$1 secs=$2 bin=$3 filter=${4:-*} listed passed skipped t
  [ -x "$bin" ] || { log "$name: $bin missing from the bundle"; failed=1; return; }
  listed=$("${stoke[@]}" timeout 20 "$bin" --gtest_list_tests --gtest_filter="$filter" |
    awk '/^[^ ]/{s=$1} /^  /{print s $1}')
  step "$name" "$secs" "${stoke[@]}" "$bin" --gtest_filter="$filter" \
    --gtest_output="json:$scratch/$name.json"
  passed=$(grep -oE '^\[       OK \] [^ ]+' "$scratch/$name.txt" 2>/dev/null | awk '{print $4}')
  skipped=$(grep -oE '^\[  SKIPPED \] [^ ]+ \(' "$scratch/$name.txt" 2>/dev/null | awk '{print $4}')
  local n=0 nskip=0 nbad=0
  for t in $listed; do
    n=$((n + 1))
    grep -qxF -- "$t" <<<"$passed" && continue
    if grep -qxF -- "$t" <<<"$skipped"; then nskip=$((nskip + 1)); continue; fi
    nbad=$((nbad + 1))
    not_passed+=("$bin $t")
  done
  log "$name: $((n - nskip - nbad))/$n passed, $nskip skipped (= failed here), $nbad failed/crashed/not reached"
  grep -E '^\[  FAILED  \] [^ ]+ \(' "$scratch/$name.txt" 2>/dev/null | head -30 >>"$summary"
  ((nskip == 0)) || grep -m1 -A1 ': Skipped$' "$scratch/$name.txt" | sed 's/^/  first skip: /' >>"$summary"
  ((nskip + nbad == 0)) || failed=1
}
# bench_result <step>: a bench that printed "skipped" or an error did not
# measure anything on the GPU: that is a failure here.
bench_result() {
  local f="$scratch/$1.txt"
  if grep -qE '^skipped|ERROR OCCURRED' "$f" 2>/dev/null; then
    log "$1: did not measure: $(grep -m1 -E '^skipped|ERROR OCCURRED' "$f" | cut -c1-200)"
    failed=1
  fi
}
gtest gpu-tests 200 "$bundle/bin/stoke_gpu_tests"
gtest cuda-gpu-tests 40 "$bundle/bin/stoke_cuda_tests" 'Gpu*'

# --- step time beside PyTorch on the same GPU -------------------------------
step step-bench 60 "${stoke[@]}" "$bundle/bin/stoke_bench_cuda_step" --batches 64,256 --steps 10 --warmup 3 \
  --json "$scratch/step-bench.json"
bench_result step-bench
tail -12 "$scratch/step-bench.txt" 2>/dev/null | cut -c1-200 >>"$summary"
step pytorch-step 75 python3 bench/pytorch_gpu_step.py --batches 64,256 \
  --steps 10 --warmup 3 --json "$scratch/pytorch-step.json"
bench_result pytorch-step
tail -12 "$scratch/pytorch-step.txt" 2>/dev/null | cut -c1-200 >>"$summary"

# --- memory and prefetch benches, then the baseline-vs-tuned bench ----------
step memory-bench 30 "${stoke[@]}" "$bundle/bin/stoke_bench_memory" --benchmark_filter=cuda \
  --benchmark_min_time=0.1
bench_result memory-bench
grep -E '^BM_' "$scratch/memory-bench.txt" 2>/dev/null | grep -v 'ERROR OCCURRED' | head -20 >>"$summary"
if [ -x "$bundle/bin/stoke-bench" ]; then
  step tuned-bench 90 "${stoke[@]}" "$bundle/bin/stoke-bench" --images 128 --epochs 1 --steps-per-trial 12 --json --config-out "$scratch/tuned.conf"
  bench_result tuned-bench
  tail -15 "$scratch/tuned-bench.txt" 2>/dev/null | cut -c1-200 >>"$summary"
fi

# --- out-of-bounds accesses of the custom kernels ---------------------------
sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
if [ -n "$sanitizer" ]; then
  step memcheck 90 "${stoke[@]}" "$sanitizer" --tool memcheck --error-exitcode 99 \
    "$bundle/bin/stoke_gpu_tests" \
    --gtest_filter='Gpu/OpSuite.Pool*:Gpu/OpSuite.GlobalAvgPool*:Gpu/OpSuite.Relu*:Gpu/OpSuite.Softmax*:Gpu/OpSuite.Sgd*:Gpu/OpSuite.Adam*:Gpu/OpSuite.Linear*:Gpu/OpSuite.Dropout*'
  mrc=$?
  ((mrc == 0 || mrc == 125)) || failed=1
  grep -E 'ERROR SUMMARY|Invalid' "$scratch/memcheck.txt" 2>/dev/null | head -10 >>"$summary"
else
  log "memcheck: no compute-sanitizer on this machine"
fi

# --- reruns, one test per process (a CUDA fault is sticky) -------------------
i=0
for entry in "${not_passed[@]}"; do
  i=$((i + 1))
  bin=${entry%% *} t=${entry#* }
  step "rerun-$i" 30 "${stoke[@]}" "$bin" --gtest_filter="$t" || true
  result=$(grep -oE '^\[ +(OK|FAILED|SKIPPED) +\]' "$scratch/rerun-$i.txt" 2>/dev/null | tail -1)
  note "  rerun alone: $t: ${result:-no result}"
  grep -m3 -E 'Failure|error:' "$scratch/rerun-$i.txt" 2>/dev/null | cut -c1-200 | sed 's/^/    /' >>"$summary"
done

if ((failed)); then finish 1 "FAILED: see the lines above; logs in results.tgz"; fi
finish 0 "every GPU test passed"
