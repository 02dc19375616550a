#!/usr/bin/env bash
# Run HERE (the CPU machine) before lending minutes to the GPU machine: builds
# stoke for sm_90 and packs the binaries, libstoke, the CUDA plugin and the
# shared libraries the GPU machine lacks (it has no Debian -dev packages) into
# out/device/, which the device tool carries (`carry: ["out/device"]`).
#   usage: tests/gpu/make_device_bundle.sh [build-dir]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
bundle=out/device
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTOKE_CUDA=ON \
  -DSTOKE_CUDA_ARCHITECTURES=90 >/dev/null
cmake --build "$build" -j "$(nproc)"

rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/lib" "$bundle/deps"
# Only what device_check.sh runs: the carry limit is 64 MiB, and the pipeline
# bench alone would drag in OpenCV and its hundred libraries.
for f in bin/stoke-info bin/stoke-bench tests/stoke_unit_tests tests/stoke_gpu_tests \
         tests/stoke_cuda_tests bench/stoke_bench_cuda_step bench/stoke_bench_memory; do
  if [ -x "$build/$f" ]; then cp "$build/$f" "$bundle/bin/"; else echo "bundle: missing $build/$f" >&2; fi
done
cp -P "$build"/lib/libstoke.so* "$bundle/lib/"
cp "$build"/lib/libstoke_cuda.so "$bundle/lib/"

# Non-CUDA shared libraries from Debian that the binaries need. CUDA, cuDNN and
# cuBLAS come from the GPU machine itself (toolkit / PyTorch wheels); glibc too.
skip='linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|libpthread|librt\.so|libcud|libnvrtc|libcublas|libnvJitLink'
for f in "$bundle"/bin/* "$bundle"/lib/*.so*; do
  ldd "$f" 2>/dev/null | awk '/=> \//{print $3}' | grep -Ev "$skip" || true
done | sort -u | while read -r dep; do
  case "$dep" in "$PWD/$build"/*) continue ;; esac
  cp -L "$dep" "$bundle/deps/"
done
du -sh "$bundle"
echo "bundle ready: carry out/device, run tests/gpu/device_check.sh"
