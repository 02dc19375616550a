#!/usr/bin/env bash
# CTest (CPU machine, not labelled gpu): the verdict rules of
# tests/gpu/device_check.sh (tests/gpu/device_verdict.sh) on fake step results:
# gtest logs that pass, skip, fail, crash or list nothing; benches that crash,
# time out or print FAILED; compute-sanitizer runs that time out, report
# errors or match no test.
#   usage: device_verdict_test.sh <source-dir>
set -uo pipefail
src=$1
# shellcheck source=device_verdict.sh
. "$src/tests/gpu/device_verdict.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
expect() {  # expect <what> <expected> <actual>
  if [ "$2" != "$3" ]; then
    echo "FAIL: $1: expected '$2', got '$3'"
    failures=$((failures + 1))
  else
    echo "ok: $1: $3"
  fi
}

cat >"$tmp/list.txt" <<'EOF'
Gpu/OpSuite.
  ReluForwardBackwardMatchNaive/cuda  # GetParam() = 48-byte object <...>
  SgdPlainStepIsExact/cuda  # GetParam() = 48-byte object <...>
CudaProbe.
  SeesADevice
  MakesAContext
EOF
gtest_list "$tmp/list.txt" >"$tmp/listed"
expect "list parses suites and parameterized names" \
  "Gpu/OpSuite.ReluForwardBackwardMatchNaive/cuda Gpu/OpSuite.SgdPlainStepIsExact/cuda CudaProbe.SeesADevice CudaProbe.MakesAContext" \
  "$(tr '\n' ' ' <"$tmp/listed" | sed 's/ $//')"

# All four pass.
cat >"$tmp/all.log" <<'EOF'
[==========] Running 4 tests from 2 test suites.
[ RUN      ] Gpu/OpSuite.ReluForwardBackwardMatchNaive/cuda
[       OK ] Gpu/OpSuite.ReluForwardBackwardMatchNaive/cuda (3 ms)
[ RUN      ] Gpu/OpSuite.SgdPlainStepIsExact/cuda
[       OK ] Gpu/OpSuite.SgdPlainStepIsExact/cuda (1 ms)
[ RUN      ] CudaProbe.SeesADevice
[       OK ] CudaProbe.SeesADevice (0 ms)
[ RUN      ] CudaProbe.MakesAContext
[       OK ] CudaProbe.MakesAContext (0 ms)
[  PASSED  ] 4 tests.
EOF
gtest_classify "$tmp/listed" "$tmp/all.log" >"$tmp/c"
expect "all passed" "pass" "$(gtest_verdict "$tmp/c")"

# Zero listed: the hole of the last version (0 tests counted as passed).
: >"$tmp/none"
gtest_classify "$tmp/none" "$tmp/all.log" >"$tmp/c"
expect "a binary listing 0 tests" "fail: listed 0 tests" "$(gtest_verdict "$tmp/c")"

# One skipped, one failed (parameterized: the name ends in a comma).
cat >"$tmp/mixed.log" <<'EOF'
[ RUN      ] Gpu/OpSuite.ReluForwardBackwardMatchNaive/cuda
x.cpp:10: Failure
[  FAILED  ] Gpu/OpSuite.ReluForwardBackwardMatchNaive/cuda, where GetParam() = 48-byte object <...> (3 ms)
[ RUN      ] Gpu/OpSuite.SgdPlainStepIsExact/cuda
[       OK ] Gpu/OpSuite.SgdPlainStepIsExact/cuda (1 ms)
[ RUN      ] CudaProbe.SeesADevice
gpu_fixture.hpp:20: Skipped
no CUDA device
[  SKIPPED ] CudaProbe.SeesADevice (0 ms)
[ RUN      ] CudaProbe.MakesAContext
[       OK ] CudaProbe.MakesAContext (0 ms)
[  SKIPPED ] 1 test, listed below:
[  SKIPPED ] CudaProbe.SeesADevice
[  FAILED  ] 1 test, listed below:
[  FAILED  ] Gpu/OpSuite.ReluForwardBackwardMatchNaive/cuda, where GetParam() = 48-byte object <...>
EOF
gtest_classify "$tmp/listed" "$tmp/mixed.log" >"$tmp/c"
expect "statuses of a mixed run" "failed passed skipped passed" "$(awk '{printf "%s ", $1}' "$tmp/c" | sed 's/ $//')"
expect "a skip fails on the GPU machine" \
  "fail: 2/4 passed, 1 skipped, 1 failed, 0 crashed, 0 not reached" "$(gtest_verdict "$tmp/c")"

# A crash in the second test: it is "crashed", the two after it "notreached";
# the rerun of those two in one process (its own log) completes the picture.
cat >"$tmp/crash.log" <<'EOF'
[ RUN      ] Gpu/OpSuite.ReluForwardBackwardMatchNaive/cuda
[       OK ] Gpu/OpSuite.ReluForwardBackwardMatchNaive/cuda (3 ms)
[ RUN      ] Gpu/OpSuite.SgdPlainStepIsExact/cuda
EOF
gtest_classify "$tmp/listed" "$tmp/crash.log" >"$tmp/c"
expect "statuses after a crash" "passed crashed notreached notreached" \
  "$(awk '{printf "%s ", $1}' "$tmp/c" | sed 's/ $//')"
expect "what the rerun's filter holds" "CudaProbe.SeesADevice:CudaProbe.MakesAContext" \
  "$(awk '$1 == "notreached" {print $2}' "$tmp/c" | paste -sd:)"
cat >"$tmp/rest.log" <<'EOF'
[ RUN      ] CudaProbe.SeesADevice
[       OK ] CudaProbe.SeesADevice (0 ms)
[ RUN      ] CudaProbe.MakesAContext
[       OK ] CudaProbe.MakesAContext (0 ms)
EOF
gtest_classify "$tmp/listed" "$tmp/crash.log" "$tmp/rest.log" >"$tmp/c"
expect "statuses after the rerun" "passed crashed passed passed" \
  "$(awk '{printf "%s ", $1}' "$tmp/c" | sed 's/ $//')"
expect "a crash stays a failure after the rerun" \
  "fail: 3/4 passed, 0 skipped, 0 failed, 1 crashed, 0 not reached" "$(gtest_verdict "$tmp/c")"
# The summary's "[  FAILED  ] 3 tests, listed below" line names no test.
printf '[  FAILED  ] 3 tests, listed below:\n' >"$tmp/count.log"
gtest_classify "$tmp/listed" "$tmp/all.log" "$tmp/count.log" >"$tmp/c"
expect "a count line is not a test" "pass" "$(gtest_verdict "$tmp/c")"

# Benches.
printf 'BM_Copy/cuda 12 GB/s\n' >"$tmp/bench-ok"
expect "bench that measured" "pass" "$(bench_verdict 0 "$tmp/bench-ok")"
expect "bench that crashed" "fail: crashed (signal 11, exit 139)" "$(bench_verdict 139 "$tmp/bench-ok")"
expect "bench that timed out" "fail: timed out" "$(bench_verdict 124 "$tmp/bench-ok")"
expect "bench killed after its timeout" "fail: timed out" "$(bench_verdict 137 "$tmp/bench-ok")"
expect "bench that exited 1" "fail: exit 1" "$(bench_verdict 1 "$tmp/bench-ok")"
printf 'step 64: 1.2 ms\nparity check FAILED: loss 2.3 vs 2.4\n' >"$tmp/bench-failed"
expect "bench that printed FAILED and exited 0" "fail: parity check FAILED: loss 2.3 vs 2.4" \
  "$(bench_verdict 0 "$tmp/bench-failed")"
printf 'BM_Copy/cuda  ERROR OCCURRED: no device\n' >"$tmp/bench-err"
expect "bench with ERROR OCCURRED" "fail: BM_Copy/cuda  ERROR OCCURRED: no device" \
  "$(bench_verdict 0 "$tmp/bench-err")"
printf 'skipped: no CUDA device\n' >"$tmp/bench-skip"
expect "bench that skipped" "fail: skipped: no CUDA device" "$(bench_verdict 0 "$tmp/bench-skip")"
: >"$tmp/bench-empty"
expect "bench that printed nothing" "fail: printed nothing" "$(bench_verdict 0 "$tmp/bench-empty")"
expect "bench the deadline did not start" "inconclusive: not run, the deadline came first" \
  "$(bench_verdict 125 "$tmp/bench-empty")"

# compute-sanitizer.
printf '[==========] Running 3 tests\n========= ERROR SUMMARY: 0 errors\n' >"$tmp/san-ok"
expect "clean sanitizer run" "pass" "$(sanitizer_verdict 0 "$tmp/san-ok")"
printf '[==========] Running 3 tests\n[ RUN      ] Gpu/OpSuite.Relu\n' >"$tmp/san-slow"
expect "sanitizer timeout" "inconclusive: timed out under the sanitizer" \
  "$(sanitizer_verdict 124 "$tmp/san-slow")"
expect "sanitizer killed after its timeout" "inconclusive: timed out under the sanitizer" \
  "$(sanitizer_verdict 137 "$tmp/san-slow")"
printf '========= Invalid __global__ read of size 4\n========= ERROR SUMMARY: 2 errors\n' >"$tmp/san-bad"
expect "sanitizer errors" "fail: 2 memcheck error(s)" "$(sanitizer_verdict 99 "$tmp/san-bad")"
expect "sanitizer errors before a timeout" "fail: timed out after reporting 2 error(s)" \
  "$(sanitizer_verdict 124 "$tmp/san-bad")"
printf '[==========] Running 0 tests from 0 test suites.\n========= ERROR SUMMARY: 0 errors\n' >"$tmp/san-none"
expect "sanitizer filter matching nothing" "fail: its filter matched no test" \
  "$(sanitizer_verdict 0 "$tmp/san-none")"
expect "a test failing under the sanitizer" "fail: exit 1 under the sanitizer (a test failed or crashed)" \
  "$(sanitizer_verdict 1 "$tmp/san-ok")"
expect "sanitizer the deadline did not start" "inconclusive: not run, the deadline came first" \
  "$(sanitizer_verdict 125 "$tmp/san-none")"

# One summary line per GPU path: ran / passed / seconds from the
# classification and the logs' times (a rerun's log overrides).
cat >"$tmp/paths.status" <<'EOF'
passed GpuTrainerPaths.GradientAccumulationMatchesTheCpuReference
failed GpuTrainerPaths.ClassWeightedLossMatchesTheCpuReference
notreached GpuTrainerPaths.StreamsOffTrainsLikeACopyStreamAndRunsEagerly
passed Kernels/DeviceNormalizeKernel.EqualsTheCpuReference/Jit
EOF
cat >"$tmp/paths.log" <<'EOF'
[ RUN      ] GpuTrainerPaths.GradientAccumulationMatchesTheCpuReference
[       OK ] GpuTrainerPaths.GradientAccumulationMatchesTheCpuReference (1500 ms)
[ RUN      ] GpuTrainerPaths.ClassWeightedLossMatchesTheCpuReference
[  FAILED  ] GpuTrainerPaths.ClassWeightedLossMatchesTheCpuReference (250 ms)
[ RUN      ] Kernels/DeviceNormalizeKernel.EqualsTheCpuReference/Jit
[       OK ] Kernels/DeviceNormalizeKernel.EqualsTheCpuReference/Jit (40 ms)
[  FAILED  ] GpuTrainerPaths.ClassWeightedLossMatchesTheCpuReference
EOF
expect "path line: one test" "accumulation: ran 1 of 1, passed 1, 1.5 s" \
  "$(gtest_path_line accumulation 'GpuTrainerPaths.GradientAccumulation*' "$tmp/paths.status" "$tmp/paths.log")"
expect "path line: several patterns, a failure, one not reached" \
  "trainer: ran 2 of 3, passed 1, 1.8 s" \
  "$(gtest_path_line trainer 'GpuTrainerPaths.*:Nothing.*' "$tmp/paths.status" "$tmp/paths.log")"
expect "path line: a parameterized name" "normalize: ran 1 of 1, passed 1, 0.0 s" \
  "$(gtest_path_line normalize 'Kernels/DeviceNormalizeKernel.*' "$tmp/paths.status" "$tmp/paths.log")"
expect "path line: none listed" "eviction: no test in this build" \
  "$(gtest_path_line eviction 'GpuConvCache.*' "$tmp/paths.status" "$tmp/paths.log")"

# The exit of the whole check.
verdict_exit pass pass
expect "exit, all passed" 0 $?
verdict_exit pass "inconclusive: timed out under the sanitizer" pass
expect "exit, one inconclusive" 2 $?
verdict_exit "inconclusive: x" "fail: exit 1" pass
expect "exit, a failure beats inconclusive" 1 $?
verdict_exit
expect "exit, nothing recorded" 0 $?

if ((failures)); then
  echo "$failures verdict check(s) failed"
  exit 1
fi
echo "every verdict check passed"
