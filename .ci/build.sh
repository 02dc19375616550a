#!/usr/bin/env bash
# Configures and builds stoke into ./build, or $STOKE_BUILD_DIR (Release, CUDA
# plugin when the CUDA toolkit and cuDNN are found). Extra arguments go to
# cmake's configure step.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
dir=${STOKE_BUILD_DIR:-build}
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DSTOKE_CUDA_ARCHITECTURES="${STOKE_CUDA_ARCHITECTURES:-90}" "$@"
cmake --build "$dir" -j "$jobs"
