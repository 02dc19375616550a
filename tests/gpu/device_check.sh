#!/usr/bin/env bash
# Run ON THE GPU MACHINE (device tool), from the repository root, with
# carry: ["out/device"] made by tests/gpu/make_device_bundle.sh. Writes every
# log and JSON result under $OUT and stays well inside 8 minutes.
#   1. points the loader at the bundle's libraries and at CUDA/cuDNN/cuBLAS there
#   2. prints nvidia-smi and versions
#   3. runs every GPU test (label gpu: parity, pool, prefetcher, graphs, NVRTC)
#   4. runs the GPU benches briefly, and the PyTorch references beside them
set -uo pipefail
OUT=${OUT:-$PWD/out/device-results}
mkdir -p "$OUT"
bundle=$PWD/out/device
start=$(date +%s)
log() { echo "[$(( $(date +%s) - start ))s] $*" | tee -a "$OUT/summary.txt"; }

if [ ! -x "$bundle/bin/stoke_gpu_tests" ]; then
  log "no bundle at $bundle: run tests/gpu/make_device_bundle.sh here and carry out/device"
  exit 2
fi

# cuDNN / cuBLAS / NVRTC / cudart from the PyTorch wheels, then the toolkit.
wheel_libs=$(python3 - <<'PY' 2>/dev/null
import glob, os
try:
    import nvidia
    roots = list(nvidia.__path__)
except Exception:
    roots = []
dirs = []
for r in roots:
    dirs += sorted(glob.glob(os.path.join(r, "*", "lib")))
print(":".join(dirs))
PY
)
cuda_lib=""
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -d "$d" ] && cuda_lib="$cuda_lib:$d"
done
export LD_LIBRARY_PATH="$bundle/lib:$bundle/deps:${wheel_libs}${cuda_lib}:${LD_LIBRARY_PATH:-}"
export STOKE_CUDA_PLUGIN="$bundle/lib/libstoke_cuda.so"
echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH" >"$OUT/env.txt"

log "nvidia-smi"
nvidia-smi >"$OUT/nvidia-smi.txt" 2>&1
nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv >>"$OUT/summary.txt" 2>&1
ldd "$bundle/lib/libstoke_cuda.so" >"$OUT/ldd-plugin.txt" 2>&1

log "stoke-info"
timeout 60 "$bundle/bin/stoke-info" >"$OUT/stoke-info.txt" 2>&1; log "stoke-info rc=$?"
timeout 60 "$bundle/bin/stoke-info" --json >"$OUT/stoke-info.json" 2>"$OUT/stoke-info.json.err"
grep -E "^  (GPU|plugin|driver|runtime|cuDNN|NVRTC|no CUDA)|^selected" "$OUT/stoke-info.txt" | tee -a "$OUT/summary.txt"

log "GPU tests"
timeout 240 "$bundle/bin/stoke_gpu_tests" --gtest_output="json:$OUT/gpu-tests.json" \
  >"$OUT/gpu-tests.txt" 2>&1
gpu_rc=$?
log "gpu tests rc=$gpu_rc"
grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[       OK|FAILED" "$OUT/gpu-tests.txt" | tail -60 >>"$OUT/summary.txt"

# A CUDA fault (illegal address) is sticky and fails every later test in the
# process: after a failed run, each CUDA parity test once more on its own.
if [ "$gpu_rc" != 0 ]; then
  log "CudaParity and op suite tests one per process"
  for t in $("$bundle/bin/stoke_gpu_tests" --gtest_list_tests --gtest_filter='CudaParity.*:Gpu/OpSuite.*' | awk '/^ /{print s $1} /^[^ ]/{s=$1}'); do
    timeout 60 "$bundle/bin/stoke_gpu_tests" --gtest_filter="$t" >"$OUT/parity-$t.txt" 2>&1
    log "$t rc=$?"
    grep -E "Failure|error|FAILED" "$OUT/parity-$t.txt" | head -5 >>"$OUT/summary.txt"
  done
fi

# Out-of-bounds reads of the custom kernels (the guard values catch writes).
sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
if [ -n "$sanitizer" ]; then
  log "compute-sanitizer memcheck on the custom-kernel parity tests"
  timeout 90 "$sanitizer" --tool memcheck --error-exitcode 99 "$bundle/bin/stoke_gpu_tests" \
    --gtest_filter='Gpu/OpSuite.Pool*:Gpu/OpSuite.GlobalAvgPool*:Gpu/OpSuite.Relu*:Gpu/OpSuite.Softmax*:Gpu/OpSuite.Sgd*:Gpu/OpSuite.Linear*' \
    >"$OUT/memcheck.txt" 2>&1
  log "memcheck rc=$?"
  grep -E "ERROR SUMMARY|Invalid|PASSED|FAILED" "$OUT/memcheck.txt" | head -20 >>"$OUT/summary.txt"
else
  log "no compute-sanitizer on this machine"
fi

log "CUDA plugin internals (JIT vs precompiled kernels, NVRTC)"
export STOKE_JIT_CACHE="$OUT/jit-cache"
timeout 180 "$bundle/bin/stoke_cuda_tests" --gtest_output="json:$OUT/cuda-tests.json" \
  >"$OUT/cuda-tests.txt" 2>&1
log "cuda tests rc=$?"
grep -E "^\[  (PASSED|FAILED|SKIPPED) |FAILED" "$OUT/cuda-tests.txt" | tail -40 >>"$OUT/summary.txt"

log "unit tests (CPU paths on this machine)"
timeout 120 "$bundle/bin/stoke_unit_tests" --gtest_brief=1 >"$OUT/unit-tests.txt" 2>&1
log "unit tests rc=$?"
tail -5 "$OUT/unit-tests.txt" >>"$OUT/summary.txt"

# Benches: one line each in tests/gpu/device_benches.txt: "<seconds> <command...>",
# run from the repository root with the bundle on PATH.
export PATH="$bundle/bin:$PATH"
if [ -f tests/gpu/device_benches.txt ]; then
  n=0
  while read -r secs cmd; do
    case "$secs" in ''|'#'*) continue ;; esac
    n=$((n + 1))
    log "bench $n: $cmd"
    timeout "$secs" bash -c "$cmd" >"$OUT/bench-$n.txt" 2>&1
    log "bench $n rc=$?"
    tail -30 "$OUT/bench-$n.txt" >>"$OUT/summary.txt"
  done <tests/gpu/device_benches.txt
fi
log "done"
