#!/usr/bin/env bash
# CTest (CPU machine, not labelled gpu): tests/gpu/device_check.sh, given a
# bundle of this build's binaries on a machine without a GPU, must refuse in
# its preflight: exit 3 within 60 s, say why, and leave at most 4 files in $OUT
# (summary.txt and results.tgz), the summary printed last.
#   usage: device_check_refusal_test.sh <build-dir> <source-dir>
set -uo pipefail
build=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; echo "--- device_check.sh output ---"; cat "$tmp/log" 2>/dev/null; exit 1; }

mkdir -p "$tmp/bundle/bin" "$tmp/bundle/lib" "$tmp/out"
for f in bin/stoke-info tests/stoke_gpu_tests tests/stoke_cuda_tests; do
  [ -x "$build/$f" ] && ln -s "$build/$f" "$tmp/bundle/bin/"
done
cp -P "$build"/lib/libstoke.so* "$tmp/bundle/lib/" 2>/dev/null
[ -f "$build/lib/libstoke_cuda.so" ] && ln -s "$build/lib/libstoke_cuda.so" "$tmp/bundle/lib/"

t0=$(date +%s)
OUT="$tmp/out" STOKE_DEVICE_BUNDLE="$tmp/bundle" timeout -k 5 60 \
  bash "$src/tests/gpu/device_check.sh" >"$tmp/log" 2>&1
rc=$?
elapsed=$(($(date +%s) - t0))
[ "$rc" = 3 ] || fail "exit $rc, expected 3 (preflight refusal)"
((elapsed < 60)) || fail "took ${elapsed}s"
reason=$(grep -m1 'preflight failed: ' "$tmp/log" | sed 's/.*preflight failed: //')
[ -n "$reason" ] || fail "no 'preflight failed: <reason>' line"
# The reason is the real one here: no GPU (or a plugin that cannot load, or no plugin built).
echo "$reason" | grep -qiE 'no GPU|plugin|driver|device' || fail "reason does not say why: $reason"
files=$(find "$tmp/out" -type f | wc -l)
((files <= 4)) || fail "$files files in \$OUT"
[ -s "$tmp/out/summary.txt" ] || fail "no summary.txt"
tar -tzf "$tmp/out/results.tgz" >/dev/null || fail "results.tgz unreadable"
tail -3 "$tmp/log" | grep -q 'preflight failed\|verdict' || fail "the summary is not printed last"
echo "refused in ${elapsed}s with exit 3: $reason ($files files in \$OUT)"
