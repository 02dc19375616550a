#!/usr/bin/env bash
# Run HERE (the CPU machine) before lending minutes to the GPU machine: builds
# stoke for sm_90 and packs only what tests/gpu/device_check.sh runs, plus the
# shared libraries the GPU machine lacks, into out/device/ (the device tool
# carries it: `carry: ["out/device"]`, 64 MiB at most; this aims at <= 40 MiB).
#   usage: tests/gpu/make_device_bundle.sh [build-dir]
#
#   out/device/bin      stoke-info, stoke_gpu_tests, stoke_cuda_tests, benches
#   out/device/lib      libstoke.so, libstoke_cuda.so (the plugin)
#   out/device/libs.tgz deps/: Debian libraries the device lacks (oneTBB,
#                       libjpeg-turbo, libpng, OpenBLAS, Google Benchmark, ...);
#                       runtime/: the C++ runtime (libstdc++, libgcc_s, libz,
#                       libgomp), last on stoke's library path, never on
#                       PyTorch's. Compressed (OpenBLAS alone is 35 MiB);
#                       device_check.sh unpacks it in its preflight.
# Not carried: CUDA, cuDNN, cuBLAS, NVRTC (the device has them through the
# toolkit and PyTorch's wheels), glibc, and every CPU-only test (the CPU
# machine runs those; device time is for GPU work).
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
bundle=out/device
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTOKE_CUDA=ON \
  -DSTOKE_CUDA_ARCHITECTURES=90 >/dev/null
# Target by target: one that this tree does not have (yet) is reported, not fatal.
for target in stoke stoke_cuda stoke-info stoke_gpu_tests stoke_cuda_tests \
              stoke_bench_cuda_step stoke_bench_memory stoke-bench; do
  cmake --build "$build" -j "$(nproc)" --target "$target" >/dev/null ||
    echo "bundle: target $target did not build" >&2
done

rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/lib" "$bundle/deps" "$bundle/runtime"
for f in bin/stoke-info bin/stoke-bench tests/stoke_gpu_tests tests/stoke_cuda_tests \
         bench/stoke_bench_cuda_step bench/stoke_bench_memory; do
  if [ -x "$build/$f" ]; then cp "$build/$f" "$bundle/bin/"; else echo "bundle: missing $build/$f" >&2; fi
done
cp -P "$build"/lib/libstoke.so* "$bundle/lib/"
cp "$build"/lib/libstoke_cuda.so "$bundle/lib/"
# Symbols are not needed to run; the carry limit is.
strip --strip-unneeded "$bundle"/bin/* "$bundle"/lib/*.so* 2>/dev/null || true

skip='linux-vdso|ld-linux|/libc\.so|/libm\.so|/libdl\.so|/libpthread|/librt\.so|/libcud|/libnvrtc|/libcublas|/libnvJitLink'
runtime='/(libstdc\+\+|libgcc_s|libz|libgomp)\.so'
for f in "$bundle"/bin/* "$bundle"/lib/*.so*; do
  ldd "$f" 2>/dev/null | awk '/=> \//{print $3}' | grep -Ev "$skip" || true
done | sort -u | while read -r dep; do
  case "$dep" in "$PWD/$build"/*) continue ;; esac
  if [[ "$dep" =~ $runtime ]]; then cp -L "$dep" "$bundle/runtime/"; else cp -L "$dep" "$bundle/deps/"; fi
done
strip --strip-unneeded "$bundle"/deps/* "$bundle"/runtime/* 2>/dev/null || true
tar -czf "$bundle/libs.tgz" -C "$bundle" deps runtime
rm -rf "$bundle/deps" "$bundle/runtime"
size=$(du -sm "$bundle" | cut -f1)
du -sh "$bundle"/*
echo "bundle: ${size} MiB in $bundle (limit 64 MiB carried with the tree, aim <= 40)"
if ((size > 40)); then echo "bundle: over 40 MiB; trim before carrying" >&2; exit 1; fi
echo "bundle ready: carry out/device, run tests/gpu/device_check.sh"
