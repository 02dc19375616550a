#!/usr/bin/env bash
# Quick start 1: install dependencies, build, run the main demo.
set -euo pipefail
cd "$(dirname "$0")/.."
bash .ci/install-deps.sh
bash .ci/build.sh
./build/bin/stoke-info
