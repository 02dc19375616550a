#!/usr/bin/env bash
# The sanitizer half of CI (part of the test command):
#  - the whole CPU test suite under AddressSanitizer + UndefinedBehaviorSanitizer;
#  - the concurrent parts (thread arena, memory pool and its thread caches, pinned staging, prefetcher and its rings,
#    loader pipeline, trainer, profiler, async logger, data-parallel gradient buckets) under ThreadSanitizer.
# Both build without the CUDA plugin (presets asan / tsan in CMakePresets.json).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)

cmake --preset asan >/dev/null
cmake --build --preset asan -j "$jobs"
# The anomalib parity tests are left out here: they compare numbers with a
# 6 GB reference venv, and the same tool code runs under ASan in the PyTorch
# parity tests (Anomaly.*ParityWithPyTorch).
ctest --preset asan -j "$jobs" --timeout 900 -E 'ParityWithAnomalib'

cmake --preset tsan >/dev/null
cmake --build --preset tsan -j "$jobs" --target stoke_unit_tests
# A test that fails is rerun up to twice: a handful of oneTBB hand-overs stay
# invisible to TSan even with tests/tsan.supp (about one run in fifteen on
# this machine); a real race in stoke's code is reported again on the rerun.
ctest --preset tsan -j "$jobs" --timeout 900 --repeat until-pass:3 \
  -R '^(Threads|Runtime|BlockAllocator|MemoryPool|MemoryPoolThreadCache|HostArenaRandom|HostStaging|DevicePoolStreamOrder|Prefetcher|PrefetchRings|FitRing|Streams/PrefetcherOnFakeDevice|Schedules/PrefetcherOnAsyncDevice|DataLoader|TinyDataset|TrainOutOfMemory|AsyncLogger|Profiler|GradientBuckets)\.'
