#!/usr/bin/env bash
# The C ABI (include/stoke/stoke.h) from its hosts, each one CTest (tests/capi.cmake):
#   hosts_test.sh c      STOKE LIBDIR SRCDIR CXX "CXXFLAGS" "LDFLAGS"  the header as C99 and as C++
#                                            (-Wall -Wextra -Werror -pedantic), both programs run
#   hosts_test.sh csharp STOKE LIBDIR SRCDIR  examples/csharp by P/Invoke (mcs, mono)
#   hosts_test.sh python STOKE LIBDIR SRCDIR PYTHON  examples/python (ctypes)
# A host predicts dataset images from their files and their bytes and camera
# frames from buffers it holds (written as BMP for `stoke predict`), and the
# results must equal `stoke predict --json`'s on the same files bit for bit;
# then it trains a model through the ABI with a progress callback.
# Exit 0: pass; 77: skipped (the reason is printed); anything else: fail.
set -uo pipefail
host=$1 stoke=$2 libdir=$3 srcdir=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export STOKE_LOG_LEVEL=error

# shellcheck source=../install/test_lib.sh
source "$(dirname "$0")/../install/test_lib.sh"

# A mono or Python process loading an AddressSanitizer build of libstoke
# would need the ASan runtime preloaded into an uninstrumented interpreter;
# the release build runs these hosts.
skip_host_under_asan() {
  skip_under_asan "$libdir/libstoke.so" "$1 cannot load libstoke without preloading the runtime"
}

# A dataset and a model trained on it for one epoch (seconds).
make_model() {
  "$stoke" dataset --out "$work/d" --count 24 --size 48x48 >/dev/null 2>&1 || fail "stoke dataset"
  "$stoke" train --data "$work/d" --out "$work/m.stoke" --epochs 1 --size 32 --batch 8 \
    >/dev/null 2>"$work/train.err" || { cat "$work/train.err"; fail "stoke train"; }
  images=("$(find "$work/d" -type f | sort | head -1)" "$(find "$work/d" -type f | sort | tail -1)")
}

# A segmentation model (seconds) and what `stoke predict --masks --json` gives
# its first image ($seg_image): $work/seg.json.
make_segment_model() {
  "$stoke" dataset --task segment --out "$work/s" --count 12 --size 48x40 --format png \
    --defects 0.8 --seed 1 >/dev/null 2>&1 || fail "stoke dataset --task segment"
  "$stoke" train --task segment --data "$work/s" --arch resnet18 --width 0.25 --size 32 \
    --epochs 1 --batch 4 --out "$work/s.stoke" >/dev/null 2>"$work/segment.err" \
    || { cat "$work/segment.err"; fail "segmentation train"; }
  seg_image=$(find "$work/s/images" -type f | sort | head -1)
  "$stoke" predict --model "$work/s.stoke" "$seg_image" --masks "$work/masks" --json \
    >"$work/seg.json" 2>"$work/seg.err" || { cat "$work/seg.err"; fail "segmentation predict"; }
}

# The host's JSON lines ($work/host.json) against `stoke predict --json` on
# every file they name.
compare() {
  mapfile -t files < <(python3 -c 'import json,sys
for f in sorted({json.loads(l)["file"] for l in open(sys.argv[1]) if l.strip()}): print(f)' "$work/host.json") \
    || fail "the host's output is not JSON lines"
  test ${#files[@]} -gt 0 || fail "the host printed no predictions"
  # One file per run: the hosts classify one image per call, and a batch of
  # several (what `stoke predict A B C` runs) can differ from a batch of one in
  # a probability's last bit (the CPU convolutions' kernels depend on the batch).
  : >"$work/stoke.json"
  for file in "${files[@]}"; do
    "$stoke" predict --model "$work/m.stoke" --json "$file" >>"$work/stoke.json" 2>"$work/predict.err" \
      || { cat "$work/predict.err"; fail "stoke predict $file"; }
  done
  python3 "$srcdir/tests/capi/compare_predictions.py" "$work/stoke.json" "$work/host.json" \
    file bytes buffer-mono8 buffer-bgr8 buffer-rgb8 || fail "the host differs from stoke predict"
}

case "$host" in
  c)
    cxx=$5 cxxflags=$6 ldflags=$7
    # shellcheck disable=SC2086  # the flags are lists
    for lang in c99 c++; do
      if [ "$lang" = c99 ]; then std=(-x c -std=c99); else std=(-x c++ -std=c++20); fi
      $cxx "${std[@]}" -Wall -Wextra -Werror -pedantic $cxxflags -I"$srcdir/include" \
        "$srcdir/tests/capi/c_abi_test.c" -x none -o "$work/c_abi_test_$lang" $ldflags -L"$libdir" \
        -lstoke -lm -pthread -Wl,-rpath,"$libdir" 2>"$work/cc.err" || { cat "$work/cc.err"; fail "compile as $lang"; }
      $cxx "${std[@]}" -Wall -Wextra -Werror -pedantic $cxxflags -I"$srcdir/include" \
        "$srcdir/tests/capi/c_segment_test.c" -x none -o "$work/c_segment_test_$lang" $ldflags \
        -L"$libdir" -lstoke -Wl,-rpath,"$libdir" 2>"$work/cc.err" || { cat "$work/cc.err"; fail "compile the segmentation test as $lang"; }
    done
    make_model
    # An anomaly model, and the score `stoke predict` gives one image.
    "$stoke" train --task anomaly --data "$work/d/ok" --arch resnet18 --width-mult 0.25 --size 32 \
      --coreset 0.5 --out "$work/a.stoke" >/dev/null 2>"$work/anomaly.err" || { cat "$work/anomaly.err"; fail "anomaly train"; }
    score=$("$stoke" predict --model "$work/a.stoke" "${images[0]}" --json 2>/dev/null \
      | python3 -c 'import json, sys; print(json.load(sys.stdin)["score"])') || fail "anomaly predict"
    # The same calls on a PaDiM model.
    "$stoke" train --task anomaly --method padim --data "$work/d/ok" --arch resnet18 --width-mult 0.25 \
      --size 32 --out "$work/p.stoke" >/dev/null 2>"$work/padim.err" || { cat "$work/padim.err"; fail "padim train"; }
    padim_score=$("$stoke" predict --model "$work/p.stoke" "${images[0]}" --json 2>/dev/null \
      | python3 -c 'import json, sys; print(json.load(sys.stdin)["score"])') || fail "padim predict"
    make_segment_model
    read -r seg_w seg_h seg_areas < <(python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))
print(r["width"], r["height"], ",".join(str(v) for v in r["areas"].values()))' "$work/seg.json") \
      || fail "the segmentation prediction"
    for lang in c99 c++; do
      "$work/c_segment_test_$lang" "$work/s.stoke" "$seg_image" "$seg_w" "$seg_h" "$seg_areas" \
        "$work/m.stoke" || fail "the C ABI segmentation test compiled as $lang"
    done
    for lang in c99 c++; do
      mkdir -p "$work/$lang" "$work/$lang-padim"
      "$work/c_abi_test_$lang" "$work/m.stoke" "${images[0]}" "$work/d" "$work/$lang" \
        "$work/a.stoke" "${images[0]}" "$score" || fail "the C ABI test compiled as $lang"
      "$work/c_abi_test_$lang" "$work/m.stoke" "${images[0]}" "$work/d" "$work/$lang-padim" \
        "$work/p.stoke" "${images[0]}" "$padim_score" || fail "the C ABI test compiled as $lang, PaDiM"
    done
    ;;
  csharp)
    command -v mcs >/dev/null || skip "mcs not found (Debian: apt-get install mono-mcs; .ci/install-deps.sh installs it)"
    command -v mono >/dev/null || skip "mono not found (Debian: apt-get install mono-runtime)"
    skip_host_under_asan mono
    mcs -nologo -warnaserror -out:"$work/stoke_example.exe" "$srcdir/examples/csharp/Stoke.cs" \
      "$srcdir/examples/csharp/Example.cs" 2>&1 || fail "mcs"
    make_model
    LD_LIBRARY_PATH="$libdir" mono "$work/stoke_example.exe" "$work/m.stoke" "$work/frames" "$work/d" \
      "${images[@]}" \
      >"$work/host.json" 2>"$work/host.err" || { cat "$work/host.err"; fail "the C# example"; }
    compare
    # A segmentation model through the binding: the size and areas `stoke predict` gave.
    make_segment_model
    LD_LIBRARY_PATH="$libdir" mono "$work/stoke_example.exe" --segment "$work/s.stoke" "$seg_image" \
      >"$work/host-seg.json" 2>"$work/host.err" || { cat "$work/host.err"; fail "the C# example, --segment"; }
    python3 - "$work/host-seg.json" "$work/seg.json" <<'PY' || fail "C# SegmentFile differs from stoke predict"
import json, sys
got, want = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
for k in ("width", "height", "areas"):
    assert got[k] == want[k], (k, got[k], want[k])
print("SegmentFile:", got)
PY
    ;;
  python)
    python=$5
    skip_host_under_asan python
    make_model
    LIBSTOKE="$libdir/libstoke.so" PYTHONPATH="$srcdir/examples/python" "$python" \
      "$srcdir/examples/python/example.py" "$work/m.stoke" "$work/frames" "$work/d" "${images[@]}" \
      >"$work/host.json" 2>"$work/host.err" || { cat "$work/host.err"; fail "the Python example"; }
    cat "$work/host.err"
    compare
    # A segmentation model through the module: the size and areas `stoke predict` gave.
    make_segment_model
    LIBSTOKE="$libdir/libstoke.so" PYTHONPATH="$srcdir/examples/python" "$python" - \
      "$work/s.stoke" "$seg_image" "$work/seg.json" <<'PY' || fail "the Python module's segment_file"
import json, sys
import stoke_ctypes
want = json.load(open(sys.argv[3]))
with stoke_ctypes.Predictor(sys.argv[1]) as p:
    r = p.segment_file(sys.argv[2])
assert (r.width, r.height) == (want["width"], want["height"]), (r, want)
assert r.areas == want["areas"], (r.areas, want["areas"])
assert len(r.labels) == r.width * r.height
assert all(r.labels.count(bytes([k])) == n for k, n in enumerate(r.areas.values())), r.areas
print("segment_file:", r)
PY
    ;;
  *)
    fail "unknown host '$host'"
    ;;
esac
echo "PASS: $host"
