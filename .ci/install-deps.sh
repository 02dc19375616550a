#!/usr/bin/env bash
# Installs stoke's Debian 12 build and test dependencies (`--demo`: only what
# the library and the demo need). Idempotent: does
# nothing (not even `apt-get update`) when everything is already installed.
# Runs apt-get as root, or through sudo when not root.
set -euo pipefail

# What the library and the demo need (`--demo`): compilers, CMake, and the
# libraries libstoke links.
demo_packages=(
  build-essential cmake ninja-build pkg-config python3
  libtbb-dev libxsimd-dev libturbojpeg0-dev libjpeg62-turbo-dev libpng-dev libtiff-dev zlib1g-dev
  libopenblas-dev
  libdnnl-dev  # CPU convolutions (lib/backend/cpu/conv2d_dnnl.cpp); without it: im2col + OpenBLAS
  libgloo-dev  # data-parallel training between CPU ranks (optional: one rank without it)
)
# Tests and benchmarks on top.
test_packages=(
  libgtest-dev libgmock-dev libbenchmark-dev
  libopencv-dev  # optional, bench-only reference (bench/pipeline.cmake)
  dataset-fashion-mnist
  clang-format-14  # tests/format/check_format.sh (the format check CTest)
  python3-venv python3-pip  # test-time only: tests/interchange/run.sh makes a venv with onnx + onnxruntime,
  # tests/anomaly/anomalib_run.sh one with anomalib 2.7.0 (~4 min and ~6 GB in ~/.cache/stoke, once)
  # test-time only: the PyTorch references (Interchange.TorchvisionExport,
  # Anomaly.PatchCoreParityWithPyTorch) skip without them
  python3-torch python3-torchvision
  mono-mcs mono-runtime  # the C# host of the C ABI (CApi.CSharpPInvokeHost, examples/csharp)
  python3-numpy  # the Python host's zero-copy array path (CApi.PythonCtypesHost; ctypes alone without it)
  redis-server  # the rendezvous of Distributed.TwoHostRehearsal (started by the test itself, skips without it)
)
packages=("${demo_packages[@]}")
if [ "${1:-}" != "--demo" ]; then packages+=("${test_packages[@]}"); fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
