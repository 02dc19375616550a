#!/usr/bin/env bash
# Run HERE (the CPU machine) before lending minutes to the GPU machine: builds
# stoke for sm_90 and packs only what tests/gpu/device_check.sh runs, plus the
# shared libraries the GPU machine lacks, into out/device/ (the device tool
# carries it: `carry: ["out/device"]`; the working tree and the carried paths
# travel 64 MiB in all, so the bundle must fit in 64 MiB less the tree).
#   usage: tests/gpu/make_device_bundle.sh [build-dir]
# Configure and build errors are printed (a target that failed to build would
# otherwise be bundled from an older build) and stop it; a target this tree
# does not have is reported and skipped. Exit 1 when the bundle does not fit.
#
#   out/device/bin      stoke-info, stoke_gpu_tests, stoke_cuda_tests, benches
#   out/device/lib      libstoke.so, libstoke_cuda.so (the plugin)
#   out/device/predict  the prediction bench's model file and two JPEGs
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
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
if ! cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTOKE_CUDA=ON \
  -DSTOKE_CUDA_ARCHITECTURES=90 >"$logs/configure.txt" 2>&1; then
  tail -40 "$logs/configure.txt" >&2
  echo "bundle: configure failed (above)" >&2
  exit 1
fi
grep -E '^CMake (Warning|Error)' -A3 "$logs/configure.txt" >&2 || true
# Target by target: one that this tree does not have (yet) is reported, not
# fatal; one that fails to build stops the bundle with its errors.
targets=$(cmake --build "$build" --target help 2>/dev/null | sed -n 's/^\([^: ]*\): .*/\1/p')
for target in stoke stoke_cuda stoke-info stoke_gpu_tests stoke_cuda_tests \
              stoke_bench_cuda_step stoke_bench_memory stoke-bench stoke_bench_predict stoke_bench_segment_step stoke_cli; do
  if ! grep -qxF -- "$target" <<<"$targets"; then
    echo "bundle: this tree has no target $target" >&2
    continue
  fi
  if ! cmake --build "$build" -j "$(nproc)" --target "$target" >"$logs/$target.txt" 2>&1; then
    grep -E 'error|FAILED|undefined reference' "$logs/$target.txt" | head -40 >&2
    echo "bundle: target $target failed to build (errors above)" >&2
    exit 1
  fi
done

rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/lib" "$bundle/deps" "$bundle/runtime"
for f in bin/stoke-info bin/stoke-bench tests/stoke_gpu_tests tests/stoke_cuda_tests \
         bench/stoke_bench_cuda_step bench/stoke_bench_memory bin/stoke_bench_predict \
         bin/stoke_bench_segment_step; do
  if [ -x "$build/$f" ]; then cp "$build/$f" "$bundle/bin/"; else echo "bundle: missing $build/$f" >&2; fi
done
cp -P "$build"/lib/libstoke.so* "$bundle/lib/"
cp "$build"/lib/libstoke_cuda.so "$bundle/lib/"
# Symbols are not needed to run; the carry limit is.
strip --strip-unneeded "$bundle"/bin/* "$bundle"/lib/*.so* 2>/dev/null || true

# The prediction bench's inputs, made here: a model as `stoke train` makes it
# (bench/predict_latency.sh's: stem 16, widths 16/32/64, 128x128 RGB) and a
# camera-size and a small JPEG.
if [ -x "$build/bin/stoke" ]; then
  work=$(mktemp -d)
  mkdir -p "$bundle/predict"
  if STOKE_LOG_LEVEL=error "$build/bin/stoke" dataset --out "$work/data" --count 24 --size 256x256 >/dev/null &&
    STOKE_LOG_LEVEL=error "$build/bin/stoke" train --data "$work/data" --out "$bundle/predict/model.stoke" \
      --size 128 --epochs 1 --batch 8 --normalize imagenet >/dev/null 2>&1 &&
    STOKE_LOG_LEVEL=error "$build/bin/stoke" dataset --out "$work/big" --count 1 --size 2448x2048 \
      --defects 0 >/dev/null; then
    cp "$(find "$work/big" -name '*.jpg' | head -1)" "$bundle/predict/big.jpg"
    cp "$(find "$work/data" -name '*.jpg' | head -1)" "$bundle/predict/small.jpg"
  else
    echo "bundle: could not make the prediction bench's model (stoke train failed)" >&2
    rm -rf "$bundle/predict"
  fi
  rm -rf "$work"
fi

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
du -sh "$bundle"/*
# The carry limit: 64 MiB for the working tree (tracked and untracked files
# git does not ignore, shared/ where there is one) and the carried paths.
limit=$((64 * 1024 * 1024))
# (no shared/ in the checkout is not an error, nor a listed file deleted since)
tree=$( (git ls-files -z --cached --others --exclude-standard
  if [ -d shared ]; then find shared -type f -print0; fi) |
  du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1) || true
size=$(du -sb "$bundle" | cut -f1)
room=$((limit - ${tree:-0}))
mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }
echo "bundle: $(mib "$size") in $bundle; the tree $(mib "${tree:-0}"); room $(mib "$room") of 64 MiB"
if ((size > room)); then
  echo "bundle: $(mib $((size - room))) over the carry limit (64 MiB less the tree); trim before carrying" >&2
  exit 1
fi
echo "bundle ready: carry out/device, run tests/gpu/device_check.sh"
