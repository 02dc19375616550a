#!/usr/bin/env bash
# Quick start 2: install dependencies, build, run every test. GPU tests (label
# `gpu`) skip with their reason where no CUDA device exists.
set -euo pipefail
cd "$(dirname "$0")/.."
bash .ci/install-deps.sh
bash .ci/build.sh
ctest --test-dir build --output-on-failure -j "$(nproc)" --timeout 900
