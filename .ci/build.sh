#!/usr/bin/env bash
# Configures and builds stoke into ./build (Release, CUDA plugin when the CUDA
# toolkit and cuDNN are found). Extra arguments go to cmake's configure step.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DSTOKE_CUDA_ARCHITECTURES="${STOKE_CUDA_ARCHITECTURES:-90}" "$@"
cmake --build build -j "$jobs"
