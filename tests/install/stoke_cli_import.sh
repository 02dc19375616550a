#!/usr/bin/env bash
# `stoke import` writes deployable model files (issue 29 item 3): a model that
# `stoke export` wrote as ONNX comes back with its class names and
# preprocessing and predicts what the original predicts; stated class names,
# resize and normalization are stored; misuse is a usage error naming the option.
#   stoke_cli_import.sh <stoke binary>
set -uo pipefail
stoke=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export STOKE_LOG_LEVEL=error
# shellcheck source=test_lib.sh
source "$(dirname "$0")/test_lib.sh"

A=(--arch resnet18 --width-mult 0.25)
"$stoke" dataset --out "$work/d" --count 24 --size 48x48 >/dev/null 2>&1 || fail "dataset"
"$stoke" train --data "$work/d" --out "$work/m.stoke" "${A[@]}" --size 32 --epochs 1 --batch 4 \
  --normalize imagenet >/dev/null 2>"$work/err" || { cat "$work/err"; fail "train"; }
"$stoke" export --model "$work/m.stoke" --onnx "$work/m.onnx" --fold-bn >/dev/null 2>"$work/err" \
  || { cat "$work/err"; fail "export"; }

# Back from ONNX with nothing but the architecture: names, size, normalization from its metadata.
"$stoke" import "$work/m.onnx" "${A[@]}" --out "$work/i.stoke" >"$work/out" 2>"$work/err" \
  || { cat "$work/err"; fail "import of stoke's own ONNX export"; }
grep -q 'input 3x32x32' "$work/out" && grep -q 'mean=0.485:0.456:0.406' "$work/out" \
  || { cat "$work/out"; fail "import did not take the export's size and normalization"; }
"$stoke" predict --model "$work/m.stoke" --data "$work/d" --csv >"$work/want.csv" 2>/dev/null || fail "predict original"
"$stoke" predict --model "$work/i.stoke" --data "$work/d" --csv >"$work/got.csv" 2>"$work/err" \
  || { cat "$work/err"; fail "predict imported"; }
python3 - "$work/want.csv" "$work/got.csv" <<'PY' || fail "imported predictions differ"
import csv, sys
want, got = (list(csv.reader(open(p))) for p in sys.argv[1:3])
assert want[0] == got[0], (want[0], got[0])  # file, class, confidence: the same class names
assert len(want) == len(got) > 1
worst = 0.0
for w, g in zip(want[1:], got[1:]):
    assert w[:2] == g[:2], (w, g)
    worst = max(worst, abs(float(w[2]) - float(g[2])))
assert worst <= 1e-5, worst
print(f"imported ONNX export: {len(want) - 1} predictions, max confidence difference {worst:.1e}")
PY
"$stoke" eval --model "$work/i.stoke" --data "$work/d" --json >"$work/eval.json" 2>"$work/err" \
  || { cat "$work/err"; fail "eval of the imported model"; }

# Stated class names, resize and normalization are what the model file says.
printf 'ok\nbad\n' >"$work/names.txt"
"$stoke" import "$work/m.onnx" "${A[@]}" --class-names "$work/names.txt" --resize 40 --crop 32 \
  --normalize minmax --out "$work/s.stoke" >"$work/out" 2>"$work/err" || { cat "$work/err"; fail "import with options"; }
grep -q '2 classes (ok ... bad), input 3x32x32 centre-cropped from a 40x40 resize, min-max' "$work/out" \
  || { cat "$work/out"; fail "stated options not applied"; }
"$stoke" predict --model "$work/s.stoke" --data "$work/d" --json 2>/dev/null | head -1 | grep -q '"ok"' \
  || fail "predict does not use the stated class names"

# Misuse: usage errors (status 2) naming the option; nothing written.
expect_usage() {  # expect_usage TEXT ARGS...
  local text=$1
  shift
  "$stoke" import "$@" >"$work/out" 2>"$work/err"
  local rc=$?
  test $rc -eq 2 && grep -q -- "$text" "$work/err" || { cat "$work/err"; fail "import $*: status $rc, want 2 and '$text'"; }
  test ! -e "$work/x.stoke" || fail "import $* wrote a model"
}
expect_usage '--class-names' "$work/m.onnx" "${A[@]}" --new-head --class-names "$work/names.txt" --out "$work/x.stoke"
expect_usage '--classes 3, but 2 class names' "$work/m.onnx" "${A[@]}" --classes 3 --class-names "$work/names.txt" --out "$work/x.stoke"
expect_usage '--resize 1000' "$work/m.onnx" "${A[@]}" --resize 1000 --out "$work/x.stoke"
expect_usage '--size and --crop' "$work/m.onnx" "${A[@]}" --size 32 --crop 40 --out "$work/x.stoke"
"$stoke" import "$work/m.onnx" "${A[@]}" --class-names "$work/none.txt" --out "$work/x.stoke" >/dev/null 2>"$work/err"
test $? -eq 1 && grep -q "cannot open '$work/none.txt'" "$work/err" || { cat "$work/err"; fail "missing --class-names file"; }
test ! -e "$work/x.stoke" || fail "a failed import wrote a model"
echo "ok"
