#!/usr/bin/env bash
# CTest (CPU machine, not labelled gpu): tests/gpu/device_check.sh end to end
# on a fake bundle whose stoke-info reports a GPU and whose test binaries and
# benches are scripts printing GoogleTest output. Checks the verdicts and the
# answers a killed run leaves: the GPU test binary crashes in its second test
# and the rest runs again in ONE process; a bench prints FAILED; the summary
# is in $OUT after the first step; the partial tarball appears; exit 1.
#   usage: device_check_fake_run_test.sh <source-dir>
set -uo pipefail
src=$1
tmp=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; echo "--- device_check.sh output ---"; tail -c 8000 "$tmp/log" 2>/dev/null; exit 1; }
b=$tmp/bundle
mkdir -p "$b/bin" "$b/lib" "$tmp/out"
: >"$b/lib/libstoke_cuda.so"
cat >"$b/bin/stoke-info" <<'EOF'
#!/usr/bin/env bash
# Without --json: the text the default plugin search check reads.
[ "${1:-}" = --json ] || { echo "  GPU 0            Fake H200 (sm_90)"; exit 0; }
echo '{"cuda": {"plugin_loaded": true, "plugin_error": "", "device_error": "", "driver_version": 13000,
  "runtime_version": 13000, "cudnn_version": 91900, "nvrtc_version": 13000,
  "gpus": [{"name": "Fake H200", "compute_capability": "9.0"}]}}'
EOF
# A gtest-like binary: lists four tests; a run of all of them crashes in the
# second (as a sticky CUDA fault would); each process start is counted.
cat >"$b/bin/stoke_gpu_tests" <<EOF
#!/usr/bin/env bash
tests="Gpu/OpSuite.ReluA/cuda Gpu/OpSuite.SgdB/cuda Pool.C Pool.D"
filter="*"
for a in "\$@"; do case "\$a" in --gtest_filter=*) filter=\${a#--gtest_filter=} ;; esac; done
case " \$* " in *" --gtest_list_tests "*)
  printf 'Gpu/OpSuite.\n  ReluA/cuda  # GetParam() = x\n  SgdB/cuda  # GetParam() = x\nPool.\n  C\n  D\n'; exit 0 ;;
esac
echo run >>"$tmp/starts"
for t in \$tests; do
  [ "\$filter" = "*" ] || case ":\$filter:" in *":\$t:"*) ;; *) continue ;; esac
  echo "[ RUN      ] \$t"
  if [ "\$t" = Gpu/OpSuite.SgdB/cuda ]; then echo "illegal memory access" >&2; kill -SEGV \$\$; fi
  echo "[       OK ] \$t (1 ms)"
done
exit 0
EOF
# The CUDA plugin's own binary: lists no test for the filter (the old hole).
cat >"$b/bin/stoke_cuda_tests" <<'EOF'
#!/usr/bin/env bash
case " $* " in *" --gtest_list_tests "*) exit 0 ;; esac
echo "[==========] Running 0 tests from 0 test suites."
EOF
cat >"$b/bin/stoke_bench_cuda_step" <<'EOF'
#!/usr/bin/env bash
echo "batch 64: 3.1 ms/step"; echo "loss parity FAILED: 2.30 vs 2.41"; exit 0
EOF
cat >"$b/bin/stoke_bench_memory" <<'EOF'
#!/usr/bin/env bash
echo "BM_PoolAllocate/cuda 120 ns"
EOF
chmod +x "$b"/bin/*

OUT="$tmp/out" STOKE_DEVICE_BUNDLE="$b" STOKE_DEVICE_BUDGET=120 STOKE_DEVICE_PARTIAL_AT=0 \
  PATH="$tmp/nosan:$PATH" timeout -k 5 100 bash "$src/tests/gpu/device_check.sh" >"$tmp/log" 2>&1
rc=$?
[ "$rc" = 1 ] || fail "exit $rc, expected 1 (a crash, a FAILED bench, 0 listed tests)"
s=$tmp/out/summary.txt
[ -s "$s" ] || fail "no summary.txt"
tar -tzf "$tmp/out/results.tgz" >/dev/null || fail "results.tgz unreadable"
# Verdict lines.
grep -q 'gpu-tests: fail: 3/4 passed, 0 skipped, 0 failed, 1 crashed, 0 not reached' "$s" ||
  fail "gpu-tests verdict wrong"
grep -q 'crashed: Gpu/OpSuite.SgdB/cuda' "$s" || fail "the crashed test is not named"
grep -q 'cuda-gpu-tests: fail: listed 0 tests (filter Gpu\*)' "$s" || fail "0 listed tests did not fail"
grep -q 'step-bench: fail: loss parity FAILED' "$s" || fail "a bench printing FAILED did not fail"
grep -q 'memory-bench: pass' "$s" || fail "a bench that measured did not pass"
grep -q 'preflight ok\|preflight 1 GPU' "$s" || fail "no preflight line"
grep -q '^wheels: ' "$s" || fail "no wheel versions in the preflight summary"
# The rest after the crash ran in one process: the first run plus one rerun.
starts=$(wc -l <"$tmp/starts")
[ "$starts" = 2 ] || fail "$starts processes of stoke_gpu_tests, expected 2 (the run and one rerun of the rest)"
grep -q 'gpu-tests-rest1: rc=0' "$s" || fail "no rerun of the rest"
# Every minute returns an answer: the summary so far is printed after each
# step, and the partial tarball was made (then superseded by results.tgz).
n=$(grep -c -- '- summary so far' "$tmp/log")
((n >= 4)) || fail "the summary so far was printed $n times"
grep -q 'partial results: results-partial.tgz' "$s" || fail "no partial tarball"
[ ! -e "$tmp/out/results-partial.tgz" ] || fail "the partial tarball was left beside results.tgz"
files=$(find "$tmp/out" -type f | wc -l)
((files <= 4)) || fail "$files files in \$OUT"
tail -3 "$tmp/log" | grep -q 'verdict: FAILED' || fail "the summary is not printed last"
echo "fake GPU run: exit 1 with the expected verdicts ($files files in \$OUT)"
