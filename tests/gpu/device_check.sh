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
#     PyTorch -> the segmentation step and the Predictor beside PyTorch ->
#     memory/prefetch benches ->
#     compute-sanitizer memcheck on the custom kernels;
#   - verdicts by tests/gpu/device_verdict.sh (tested on the CPU machine by
#     device_verdict_test.sh): a skipped GPU test, a binary or filter listing
#     no test, a bench that crashes, times out or prints FAILED all fail; a
#     compute-sanitizer timeout is inconclusive; no CPU-only test runs here;
#   - after a crash of a test binary, what it did not reach runs again in one
#     process (--gtest_filter of those tests), until all ran or none advances;
#   - every minute returns an answer: $OUT/summary.txt is rewritten and the
#     summary so far printed whenever a step ends, a partial tarball
#     ($OUT/results-partial.tgz) is written once half the budget is gone, and
#     the end tars everything into $OUT/results.tgz (at most 3 files), the
#     summary printed last.
# Exit: 0 every step passed, 1 something failed, 2 nothing failed but something
# was inconclusive, 3 preflight refused.
# PyTorch and compute-sanitizer run with the bundle's C++ runtime libraries off
# the library path.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 3
OUT=${OUT:-$root/out/device-results}
bundle=${STOKE_DEVICE_BUNDLE:-$root/out/device}
budget=${STOKE_DEVICE_BUDGET:-420}
partial_at=${STOKE_DEVICE_PARTIAL_AT:-$((budget / 2))}  # seconds; the fake-run test sets it
mkdir -p "$OUT"
# shellcheck source=device_verdict.sh
. "$root/tests/gpu/device_verdict.sh" || exit 3
start=$(date +%s)
deadline=$((start + budget))
scratch=$(mktemp -d "${TMPDIR:-/tmp}/stoke-device.XXXXXX")
summary=$scratch/summary.txt
outcomes=()  # one "pass" / "fail: ..." / "inconclusive: ..." per checked step
partial_done=0

log() { echo "[$(($(date +%s) - start))s] $*" | tee -a "$summary"; }
note() { echo "$*" >>"$summary"; }
# outcome <name> <outcome>: records a step's verdict in the summary.
outcome() {
  outcomes+=("$2")
  log "$1: $2"
}
# checkpoint: whatever kills this script from outside, $OUT holds the summary
# so far (and past half the budget a partial tarball of the logs); the output
# tail holds it too.
checkpoint() {
  cp "$summary" "$OUT/summary.txt" 2>/dev/null
  if ((!partial_done && $(date +%s) - start >= partial_at)); then
    partial_done=1
    tar -czf "$OUT/results-partial.tgz" -C "$scratch" . 2>/dev/null
    note "partial results: results-partial.tgz at $(($(date +%s) - start))s"
    cp "$summary" "$OUT/summary.txt" 2>/dev/null
  fi
  echo "---------------- summary so far ($(($(date +%s) - start))s) ----------------"
  tail -c 6000 "$summary"
  echo "---------------- end of summary so far ----------------"
}

finish() {
  local rc=$1
  log "verdict: $2 (exit $rc)"
  if tar -czf "$OUT/results.tgz" -C "$scratch" . 2>/dev/null; then
    rm -f "$OUT/results-partial.tgz"
  else
    echo "tar of results failed" >&2
  fi
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
# shellcheck disable=SC2086,SC2046  # the wheel folders have no spaces
stoke_ld=$(join_path "$bundle/lib" "$libs/deps" $wheel_libs /usr/local/cuda/lib64 \
  /usr/local/cuda/targets/x86_64-linux/lib "$libs/runtime" \
  $(tr : " " <<<"${LD_LIBRARY_PATH:-}"))
# Prefix of every stoke command (nothing is exported: python3 keeps the
# machine's own environment).
# The script's own STOKE_DEVICE_* settings are not stoke's (stoke would warn).
stoke=(env -u STOKE_DEVICE_BUDGET -u STOKE_DEVICE_BUNDLE -u STOKE_DEVICE_PARTIAL_AT
  "LD_LIBRARY_PATH=$stoke_ld" "STOKE_CUDA_PLUGIN=$bundle/lib/libstoke_cuda.so")
note "stoke LD_LIBRARY_PATH=$stoke_ld"
# compute-sanitizer is itself a C++ program and its injection library runs in
# the tested process: the bundle's libstdc++ must not replace the machine's
# under it, so its path is stoke's less the bundled runtime.
# shellcheck disable=SC2086,SC2046
sanitizer_ld=$(join_path "$bundle/lib" "$libs/deps" $wheel_libs /usr/local/cuda/lib64 \
  /usr/local/cuda/targets/x86_64-linux/lib $(tr : " " <<<"${LD_LIBRARY_PATH:-}"))

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
  checkpoint
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
# The libraries stoke loads come from these wheels: their versions explain a
# plugin that does not load or a cuDNN that behaves differently.
wheels=$(timeout -k 2 10 python3 - <<'PY' 2>&1
import importlib.metadata as md
keys = ("cudnn", "cublas", "nccl", "cuda-runtime", "cuda-nvrtc", "nvjitlink")
found = set()
for d in md.distributions():
    n = (d.metadata["Name"] or "").lower().replace("_", "-")
    if n == "torch" or (n.startswith("nvidia-") and any(k in n for k in keys)):
        found.add(n + " " + d.version)
print(", ".join(sorted(found)) or "none found")
PY
)
note "wheels: ${wheels:-python3 did not answer}"
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
# The default search (what users get: the plugin beside libstoke.so, opened
# only where libcuda.so.1 loads) must find the GPU as the named plugin did.
env -u STOKE_CUDA_PLUGIN -u STOKE_DEVICE_BUDGET -u STOKE_DEVICE_BUNDLE -u STOKE_DEVICE_PARTIAL_AT \
  "LD_LIBRARY_PATH=$stoke_ld" timeout -k 2 15 "$bundle/bin/stoke-info" >"$scratch/stoke-info-default.txt" 2>&1
if grep -q "^  GPU 0 " "$scratch/stoke-info-default.txt"; then
  outcome "default plugin search" pass
else
  outcome "default plugin search" "fail: $(grep -m1 'plugin' "$scratch/stoke-info-default.txt")"
fi
log "preflight done"

# --- GPU tests (the most valuable step) -------------------------------------
jit_cache=$(mktemp -d "${TMPDIR:-/tmp}/stoke-jit.XXXXXX")
export STOKE_JIT_CACHE=$jit_cache
# gtest <name> <seconds> <binary> [filter]: runs the tests (a skipped one
# counts as failed). A CUDA fault is sticky and takes the rest of the process
# with it: after a crash or a timeout, the tests not reached run again in one
# process (--gtest_filter of them), as long as each round reaches further and
# the deadline allows. Each round gets the seconds again.
gtest() {
  local name=$1 secs=$2 bin=$3 filter=${4:-*} round=0 left before=-1 rest
  [ -x "$bin" ] || { outcome "$name" "fail: $bin missing from the bundle"; return; }
  "${stoke[@]}" timeout 20 "$bin" --gtest_list_tests --gtest_filter="$filter" \
    >"$scratch/$name.list.txt" 2>&1
  gtest_list "$scratch/$name.list.txt" >"$scratch/$name.listed"
  local logs=()
  if [ ! -s "$scratch/$name.listed" ]; then  # nothing to run: it checked nothing
    : >"$scratch/$name.status"
    outcome "$name" "$(gtest_verdict "$scratch/$name.status") (filter $filter)"
    head -c 300 "$scratch/$name.list.txt" | sed 's/^/  /' >>"$summary"
    checkpoint
    return
  fi
  step "$name" "$secs" "${stoke[@]}" "$bin" --gtest_filter="$filter" \
    --gtest_output="json:$scratch/$name.json"
  [ -f "$scratch/$name.txt" ] && logs+=("$scratch/$name.txt")
  while :; do
    gtest_classify "$scratch/$name.listed" "${logs[@]}" >"$scratch/$name.status"
    rest=$(awk '$1 == "notreached" {print $2}' "$scratch/$name.status")
    left=$(grep -c . <<<"$rest")
    [ -n "$rest" ] || break
    ((before < 0 || left < before)) || { note "  $name: no progress, $left not reached"; break; }
    before=$left round=$((round + 1))
    note "  $name: $left test(s) not reached (crash or timeout): rerun $round in one process"
    step "$name-rest$round" "$secs" "${stoke[@]}" "$bin" --gtest_filter="$(paste -sd: <<<"$rest")" \
      --gtest_output="json:$scratch/$name-rest$round.json"
    (($? == 125)) && break
    [ -f "$scratch/$name-rest$round.txt" ] && logs+=("$scratch/$name-rest$round.txt")
  done
  outcome "$name" "$(gtest_verdict "$scratch/$name.status")"
  awk '$1 != "passed" {print "  " $1 ": " $2}' "$scratch/$name.status" | head -40 >>"$summary"
  local first_skip
  first_skip=$(cat "${logs[@]}" /dev/null | grep -m1 -A1 ': Skipped$' | tr '\n' ' ' | cut -c1-200)
  [ -z "$first_skip" ] || note "  first skip: $first_skip"
  # The failure messages of the first failed tests (file:line and the line after).
  cat "${logs[@]}" /dev/null | grep -m6 -A1 ': Failure$' | cut -c1-200 | sed 's/^/    /' >>"$summary"
  checkpoint
}
# bench <name> <seconds> <command...>: a bench that crashes, times out, prints
# FAILED, an error or a skip, or prints nothing, fails.
bench() {
  local name=$1
  step "$@"
  outcome "$name" "$(bench_verdict $? "$scratch/$name.txt")"
}
gtest gpu-tests 240 "$bundle/bin/stoke_gpu_tests"
gtest cuda-gpu-tests 60 "$bundle/bin/stoke_cuda_tests" 'Gpu*'
# One line per GPU path of issue 27 (ran / passed / seconds), from both binaries.
cat "$scratch/gpu-tests.status" "$scratch/cuda-gpu-tests.status" >"$scratch/all-gpu.status" 2>/dev/null
gpu_logs=("$scratch"/gpu-tests*.txt "$scratch"/cuda-gpu-tests*.txt)
for path in \
  'GPU inference (Predictor, evaluate, fused plan)=GpuInference.*:CudaParity.InferencePlan*' \
  'gradient accumulation=GpuTrainerPaths.GradientAccumulation*' \
  'out of memory and auto batch on the device=GpuTrainerPaths.OutOfMemory*' \
  'out of memory inside a capture=CudaParity.OutOfMemoryInsideACapture*' \
  'cuDNN benchmark mode, backward passes=CudaParity.BenchmarkMode*' \
  'deterministic steps bit-repeatable=GpuTrainerPaths.DeterministicSteps*' \
  'TF32 backward convolution and cuBLAS linear=CudaParity.Tf32Backward*' \
  'class-weighted loss=GpuTrainerPaths.ClassWeighted*' \
  'uint8 upload with graphs=GpuTrainerPaths.Uint8UploadUnderGraphs*' \
  'trainer with streams off=GpuTrainerPaths.StreamsOff*' \
  'frozen layers=GpuTrainerPaths.FrozenStages*' \
  'checkpoint round trip and resume=GpuTrainerPaths.CheckpointRoundTrip*' \
  'JIT failure falls back to precompiled=GpuJitFallback.*:Kernels/DeviceNormalizeKernel.*' \
  'ring pageable fallback=DeviceStreams.PageableFallback*' \
  'custom kernels past 2^31 elements=GpuLargeTensors.*' \
  'conv cache: two threads, eviction=GpuConvCache.*' \
  'prefetch event order=Streams/DevicePrefetchOrder.*' \
  'bf16 and fp16 training convolutions, bf16 programs=Gpu/OpSuite.Bf16*:Gpu/OpSuite.Fp16*:Bf16Training.*'; do
  note "  path $(gtest_path_line "${path%%=*}" "${path#*=}" "$scratch/all-gpu.status" "${gpu_logs[@]}")"
done
# The paths added since (one line each in the summary; absent ones say so).
for group in 'Anomaly*:*Anomaly*' '*ReducedPrecision*:*Bf16*:*Fp16*:*Half*' '*Segment*'; do
  n=$(awk -v pat="$group" 'BEGIN { n = split(pat, p, ":"); for (i = 1; i <= n; i++) { g = p[i]; gsub(/\./, "\\.", g); gsub(/\*/, ".*", g); re[i] = "^" g "$" } }
       { for (i in re) if ($2 ~ re[i]) { c[$1]++; t++; break } }
       END { if (t) printf "%d listed, %d passed", t, c["passed"]; else printf "none in this build" }' \
       "$scratch/gpu-tests.status" 2>/dev/null)
  note "  paths $group: ${n:-no status}"
done

# --- step time beside PyTorch on the same GPU -------------------------------
bench step-bench 60 "${stoke[@]}" "$bundle/bin/stoke_bench_cuda_step" --batches 64,256 --steps 10 \
  --warmup 3 --json "$scratch/step-bench.json"
grep 'peak pool memory' "$scratch/step-bench.txt" 2>/dev/null | cut -c1-200 >>"$summary"
tail -6 "$scratch/step-bench.txt" 2>/dev/null | cut -c1-200 >>"$summary"
bench pytorch-step 75 python3 bench/pytorch_gpu_step.py --batches 64,256 \
  --steps 10 --warmup 3 --json "$scratch/pytorch-step.json"
tail -12 "$scratch/pytorch-step.txt" 2>/dev/null | cut -c1-200 >>"$summary"
# Mixed precision: stoke's bf16 convolutions beside PyTorch's bf16 autocast
# (issue 28's GPU target; eager steps, batch 256).
bench step-bench-bf16 45 "${stoke[@]}" "$bundle/bin/stoke_bench_cuda_step" --batches 256 \
  --modes eager --steps 10 --warmup 2 --precision bf16
tail -3 "$scratch/step-bench-bf16.txt" 2>/dev/null | cut -c1-200 >>"$summary"
bench pytorch-step-bf16 60 python3 bench/pytorch_gpu_step.py --batches 256 --modes eager \
  --steps 10 --warmup 2 --amp bf16
tail -3 "$scratch/pytorch-step-bf16.txt" 2>/dev/null | cut -c1-200 >>"$summary"
# A/B of the convolution workspace limit: the old fixed 512 MiB beside the
# automatic limit of step-bench (batch 256, where it decides the algorithms).
bench step-bench-ws512 45 "${stoke[@]}" "$bundle/bin/stoke_bench_cuda_step" --batches 256 \
  --modes eager --steps 10 --warmup 2 --workspace-mb 512
grep -E '^batch|^  batch' "$scratch/step-bench-ws512.txt" 2>/dev/null | cut -c1-200 >>"$summary"

# --- the segmentation model's training step beside PyTorch on the same GPU ---
# (U-Net on ResNet-18 as `stoke train --task segment` builds it, 512x512.)
if [ -x "$bundle/bin/stoke_bench_segment_step" ]; then
  for batch in 4 16; do
    bench "segment-step-b$batch" 40 "${stoke[@]}" "$bundle/bin/stoke_bench_segment_step" \
      --size 512 --batch "$batch" --steps 5 --warmup 2
    grep '^{' "$scratch/segment-step-b$batch.txt" 2>/dev/null | cut -c1-400 >>"$summary"
    bench "pytorch-segment-step-b$batch" 60 python3 bench/pytorch_segment_step.py --size 512 \
      --batch "$batch" --steps 5 --warmup 2 --threads 4 --device cuda
    grep '^{' "$scratch/pytorch-segment-step-b$batch.txt" 2>/dev/null | cut -c1-400 >>"$summary"
  done
fi

# --- `stoke predict`'s path on the GPU beside PyTorch on the same GPU ---------
# (stoke_bench_predict: the Predictor on the registry's default backend, the
# GPU here; batch 1 end to end and forward, and the forward of 32 at once.)
if [ -f "$bundle/predict/model.stoke" ] && [ -x "$bundle/bin/stoke_bench_predict" ]; then
  for image in big small; do
    bench "predict-$image" 45 "${stoke[@]}" "$bundle/bin/stoke_bench_predict" \
      --model "$bundle/predict/model.stoke" --image "$bundle/predict/$image.jpg" \
      --iterations 40 --batch 32
    grep '^{' "$scratch/predict-$image.txt" 2>/dev/null | cut -c1-600 >>"$summary"
    bench "pytorch-predict-$image" 45 python3 bench/pytorch_predict.py \
      --image "$bundle/predict/$image.jpg" --size 128 --threads 4 --iterations 40 \
      --device cuda --batch 32
    grep '^{' "$scratch/pytorch-predict-$image.txt" 2>/dev/null | cut -c1-600 >>"$summary"
  done
else
  note "predict: no model in the bundle (make_device_bundle.sh makes it with stoke train)"
fi

# --- memory and prefetch benches, then the baseline-vs-tuned bench ----------
bench memory-bench 30 "${stoke[@]}" "$bundle/bin/stoke_bench_memory" --benchmark_filter=cuda \
  --benchmark_min_time=0.1
grep -E '^BM_' "$scratch/memory-bench.txt" 2>/dev/null | grep -v 'ERROR OCCURRED' | head -20 >>"$summary"
if [ -x "$bundle/bin/stoke-bench" ]; then
  bench tuned-bench 90 "${stoke[@]}" "$bundle/bin/stoke-bench" --images 128 --epochs 1 \
    --steps-per-trial 12 --json --config-out "$scratch/tuned.conf"
  tail -15 "$scratch/tuned-bench.txt" 2>/dev/null | cut -c1-200 >>"$summary"
fi

# --- out-of-bounds accesses of the custom kernels ---------------------------
# Pooling, ReLU, softmax, dropout, the elementwise ops, the optimizer updates
# and the uint8 normalize: stoke's own kernels (convolutions and linear layers
# are cuDNN's and cuBLAS's).
memcheck() {
  local name=$1 bin=$2 filter=$3 missing
  missing=$(LD_LIBRARY_PATH="$sanitizer_ld" timeout 10 ldd "$bin" 2>&1 |
    grep -E 'not found' | awk '{print $1}' | sort -u | tr '\n' ' ')
  if [ -n "$missing" ]; then
    outcome "$name" "inconclusive: $(basename "$bin") does not load without the bundled C++ runtime: $missing"
    return
  fi
  step "$name" 90 env "LD_LIBRARY_PATH=$sanitizer_ld" "STOKE_CUDA_PLUGIN=$bundle/lib/libstoke_cuda.so" \
    "$sanitizer" --tool memcheck --error-exitcode 99 "$bin" --gtest_filter="$filter"
  outcome "$name" "$(sanitizer_verdict $? "$scratch/$name.txt")"
  grep -E 'ERROR SUMMARY|Invalid' "$scratch/$name.txt" 2>/dev/null | head -10 >>"$summary"
}
sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
if [ -n "$sanitizer" ]; then
  memcheck memcheck "$bundle/bin/stoke_gpu_tests" \
    'Gpu/OpSuite.Pool*:Gpu/OpSuite.GlobalAvgPool*:Gpu/OpSuite.Relu*:Gpu/OpSuite.Softmax*:Gpu/OpSuite.Dropout*:Gpu/OpSuite.AddAccumulate*:Gpu/OpSuite.Elementwise*:Gpu/OpSuite.Sgd*:Gpu/OpSuite.Adam*:Gpu/OpSuite.Update*:Kernels/DeviceNormalizeKernel.*'
  memcheck memcheck-kernels "$bundle/bin/stoke_cuda_tests" '*GpuKernels.*'
else
  outcome memcheck "inconclusive: no compute-sanitizer on this machine"
fi

verdict_exit "${outcomes[@]}"
case $? in
  0) finish 0 "every step passed" ;;
  2) finish 2 "nothing failed, something inconclusive: see the lines above; logs in results.tgz" ;;
  *) finish 1 "FAILED: see the lines above; logs in results.tgz" ;;
esac
