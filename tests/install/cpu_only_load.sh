#!/usr/bin/env bash
# A program linked against libstoke must start and run on the CPU on a machine
# without CUDA: libstoke itself needs no CUDA library, and a missing, disabled or
# broken CUDA plugin only means "running on CPU".
#   usage: cpu_only_load.sh STOKE_INFO LIBSTOKE
set -euo pipefail
info=$1
lib=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }

# 1. libstoke and the program link no CUDA library.
for f in "$lib" "$info"; do
  if readelf -d "$f" | grep -E 'NEEDED.*(libcuda|libcudart|libcudnn|libcublas|libnvrtc)'; then
    fail "$f links a CUDA library directly"
  fi
done

# 2. Plugin disabled by the variable.
out=$(STOKE_CUDA_PLUGIN=off "$info") || fail "stoke-info failed with STOKE_CUDA_PLUGIN=off"
grep -q "no CUDA device: running on CPU" <<<"$out" || fail "no CPU fallback line: $out"
grep -q "selected device: CPU" <<<"$out" || fail "CPU not selected: $out"

# 3. Plugin absent: libstoke and the program copied alone, a bare environment
#    with no CUDA on any loader path.
mkdir -p "$tmp/bin" "$tmp/lib"
cp "$info" "$tmp/bin/"
cp -P "$(dirname "$lib")"/libstoke.so* "$tmp/lib/"
out=$(env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH="$tmp/lib" "$tmp/bin/$(basename "$info")") ||
  fail "stoke-info failed without the plugin"
grep -q "no CUDA device: running on CPU" <<<"$out" || fail "no CPU fallback without plugin: $out"
if env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH="$tmp/lib" ldd "$tmp/bin/$(basename "$info")" |
   grep -E 'libcud|libnvrtc|libcublas'; then
  fail "the program pulls in CUDA libraries"
fi

# 4. A broken plugin (not a shared object) beside libstoke: a clear reason, CPU run.
echo "not an ELF file" >"$tmp/lib/libstoke_cuda.so"
out=$(env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH="$tmp/lib" STOKE_CUDA_PLUGIN="$tmp/lib/libstoke_cuda.so" \
      "$tmp/bin/$(basename "$info")") || fail "stoke-info failed with a broken plugin"
grep -q "cannot load" <<<"$out" || fail "broken plugin not reported: $out"
grep -q "selected device: CPU" <<<"$out" || fail "CPU not selected with a broken plugin: $out"

# 5. CUDA_VISIBLE_DEVICES reaches the process and is shown (here it hides every device).
out=$(CUDA_VISIBLE_DEVICES=-1 "$info") || fail "stoke-info failed with CUDA_VISIBLE_DEVICES=-1"
grep -q "CUDA_VISIBLE_DEVICES=-1" <<<"$out" || fail "CUDA_VISIBLE_DEVICES not shown: $out"
grep -q "selected device: CPU" <<<"$out" || fail "CPU not selected with no visible device: $out"

# 6. The default search opens the plugin only where it can work: under an
#    address-space limit that leaves no room for the CUDA libraries (their
#    loaders crash when a mapping fails) and without a driver it says why.
# (Not under AddressSanitizer: its shadow memory needs terabytes of address space.)
# ldd's output read whole first: `ldd | grep -q` under pipefail fails when grep
# stops at the match and ldd takes SIGPIPE, which ran this under ASan.
libs=$(ldd "$info" 2>/dev/null || true)
if (ulimit -v 2000000) 2>/dev/null && ! grep -q libasan <<<"$libs"; then
  out=$( (ulimit -v 2000000 && "$info") ) || fail "stoke-info failed under ulimit -v 2000000"
  if ! grep -q "libstoke was built without" <<<"$out"; then
    grep -q "not loaded: the address-space limit (ulimit -v 2000000 KiB" <<<"$out" ||
      fail "the plugin was opened under ulimit -v 2000000: $out"
  fi
  grep -q "selected device: CPU" <<<"$out" || fail "CPU not selected under ulimit -v: $out"
fi
if ! ldconfig -p | grep -q 'libcuda\.so\.1 '; then
  out=$("$info")
  grep -q "not loaded: no CUDA driver: libcuda.so.1\|libstoke was built without" <<<"$out" ||
    fail "a machine without a CUDA driver: $out"
fi

# 7. JSON output parses.
STOKE_CUDA_PLUGIN=off "$info" --json | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["selection"]["use_gpu"] is False' ||
  fail "--json is not valid JSON"
echo "PASS"
