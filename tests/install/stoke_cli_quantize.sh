#!/usr/bin/env bash
# stoke quantize (docs/precision.md, the gate): a classifier and anomaly
# models (PatchCore, PaDiM) in bf16, written only after the comparison with fp32 on a validation
# folder, run in bf16 by predict and eval unless STOKE_PRECISION says fp32;
# int8 without --calibrate (stoke_cli_quantize_int8.sh has int8), --calibrate
# with bf16 and an output onto the input refused by name. Status 77:
# no bf16 kernels on this CPU (its refusal is checked first).
#   stoke_cli_quantize.sh <stoke binary>
set -uo pipefail
stoke=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export STOKE_LOG_LEVEL=warn
# shellcheck source=test_lib.sh
source "$(dirname "$0")/test_lib.sh"


"$stoke" dataset --out "$work/d" --count 24 --size 48x48 >/dev/null 2>&1 || fail "dataset"
"$stoke" dataset --out "$work/v" --count 24 --size 48x48 --seed 4 >/dev/null 2>&1 || fail "val dataset"
"$stoke" train --data "$work/d" --out "$work/m.stoke" --epochs 1 --size 32 --batch 8 >/dev/null 2>&1 \
  || fail "train"
Q=(--model "$work/m.stoke" --val "$work/v" --good ok)

"$stoke" quantize "${Q[@]}" --out "$work/x.stoke" --precision int8 >/dev/null 2>"$work/err"
test $? -eq 2 && grep -q 'int8 needs --calibrate' "$work/err" || { cat "$work/err"; fail "int8 without --calibrate"; }
"$stoke" quantize "${Q[@]}" --out "$work/x.stoke" --calibrate "$work/v" >/dev/null 2>"$work/err"
test $? -eq 2 && grep -q 'calibrate is for int8' "$work/err" || { cat "$work/err"; fail "--calibrate with bf16"; }
"$stoke" quantize "${Q[@]}" --out "$work/m.stoke" >/dev/null 2>"$work/err"
test $? -eq 2 && grep -q 'is the input --model' "$work/err" || { cat "$work/err"; fail "--out onto --model"; }
test ! -e "$work/x.stoke" || fail "a refused quantize wrote a model"

bf16=$("$stoke" info --json 2>/dev/null | json_field bf16)
test -z "${STOKE_TEST_EXPECT_NO_BF16:-}" || test "$bf16" = none || fail "bf16 is $bf16 under the AVX2 cap"
if [ "$bf16" = none ]; then
  "$stoke" quantize "${Q[@]}" --out "$work/x.stoke" >/dev/null 2>"$work/err"
  test $? -eq 1 && grep -q 'bf16' "$work/err" && test ! -e "$work/x.stoke" \
    || { cat "$work/err"; fail "no bf16: quantize did not refuse"; }
  grep -q 'has no bf16 kernels here' "$work/err" || { cat "$work/err"; fail "no bf16: the reason"; }
  # CTest's run under ONEDNN_MAX_CPU_ISA=AVX2 is for this case: it passes here.
  test -n "${STOKE_TEST_EXPECT_NO_BF16:-}" && { echo "ok: refused without bf16"; exit 0; }
  skip "oneDNN has no bf16 kernels on this CPU (the refusal passed)"
fi
test "$bf16" = native || skip "bf16 is emulated on this CPU (a quantized model would predict in fp32 here)"
"$stoke" quantize --model "$work/m.stoke" --val "$work/v" --good nosuch --out "$work/x.stoke" >/dev/null 2>"$work/err"
test $? -eq 2 && grep -q 'no such class' "$work/err" || { cat "$work/err"; fail "--good of no class"; }


"$stoke" quantize "${Q[@]}" --out "$work/q.stoke" --json >"$work/q.json" 2>"$work/err" \
  || { cat "$work/err"; fail "quantize"; }
python3 - "$work/q.json" <<'PY' || fail "quantize json"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["precision"] == "bf16" and r["images"] == 24 and r["written"] is True, r
assert (r["passed"] is True) == (r["disagreement"] <= 0.005 and r["escape_reduced"] <= r["escape_fp32"]), r
PY
if [ "$(json_field passed <"$work/q.json")" = True ]; then
  # The gated bf16 runs unasked where it is measured faster than fp32 (as auto decides), and asked always.
  want=$("$stoke" info --json 2>/dev/null | python3 -c 'import json,sys; t=json.load(sys.stdin)["bf16_time_ratio"]
print("bf16" if t is not None and t <= 0.9 else "fp32")') || fail "info's bf16_time_ratio"
  test "$("$stoke" eval --model "$work/q.stoke" --data "$work/v" --json 2>/dev/null | json_field compute_precision)" = "$want" \
    || fail "eval of the quantized model does not run $want"
  test "$(STOKE_PRECISION=bf16 "$stoke" eval --model "$work/q.stoke" --data "$work/v" --json 2>/dev/null \
    | json_field compute_precision)" = bf16 || fail "STOKE_PRECISION=bf16 does not run bf16"
  test "$(STOKE_PRECISION=fp32 "$stoke" eval --model "$work/q.stoke" --data "$work/v" --json 2>/dev/null \
    | json_field compute_precision)" = fp32 || fail "STOKE_PRECISION=fp32 does not override the model file"
  test "$("$stoke" eval --model "$work/m.stoke" --data "$work/v" --json 2>/dev/null | json_field compute_precision)" = fp32 \
    || fail "the input model changed"
fi

# An anomaly model: decisions, escapes and the image AUROC compared.
"$stoke" dataset --out "$work/a" --count 30 --size 64x64 --defects 0.4 --seed 6 >/dev/null 2>&1 || fail "anomaly dataset"
"$stoke" train --task anomaly --data "$work/a/ok" --arch resnet18 --width-mult 0.25 --size 32 --coreset 0.5 \
  --out "$work/an.stoke" >/dev/null 2>"$work/err" || { cat "$work/err"; fail "anomaly train"; }
"$stoke" quantize --model "$work/an.stoke" --val "$work/a" --good ok --out "$work/anq.stoke" --force --json \
  >"$work/aq.json" 2>"$work/err" || { cat "$work/err"; fail "anomaly quantize"; }
python3 - "$work/aq.json" <<'PY' || fail "anomaly quantize json"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["images"] == 30 and r["auroc_fp32"] is not None and r["written"] is True, r
PY
"$stoke" predict --model "$work/anq.stoke" --data "$work/a/ok" --json >/dev/null 2>"$work/err" \
  || { cat "$work/err"; fail "predict with the quantized anomaly model"; }
# The same gate on a PaDiM model.
"$stoke" train --task anomaly --method padim --data "$work/a/ok" --arch resnet18 --width-mult 0.25 --size 32 \
  --out "$work/pd.stoke" >/dev/null 2>"$work/err" || { cat "$work/err"; fail "padim train"; }
"$stoke" quantize --model "$work/pd.stoke" --val "$work/a" --good ok --out "$work/pdq.stoke" --force --json \
  >"$work/pq.json" 2>"$work/err" || { cat "$work/err"; fail "padim quantize"; }
python3 - "$work/pq.json" <<'PY' || fail "padim quantize json"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["images"] == 30 and r["auroc_fp32"] is not None and r["written"] is True, r
PY
"$stoke" predict --model "$work/pdq.stoke" --data "$work/a/ok" --json >/dev/null 2>"$work/err" \
  || { cat "$work/err"; fail "predict with the quantized padim model"; }
echo "ok"
