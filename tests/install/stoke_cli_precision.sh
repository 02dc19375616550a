#!/usr/bin/env bash
# --precision on the `stoke` command (docs/precision.md): info reports the
# effective precision; predict and eval run bf16 where oneDNN has bf16
# kernels and refuse it with the reason where it has none (ONEDNN_MAX_CPU_ISA=AVX2
# stands for a CPU without AVX-512); train runs bf16 mixed precision where the
# CPU has native bf16 and refuses it with the reason elsewhere, refuses fp16 on
# the CPU with its reason;
# the anomaly commands refuse a reduced precision by name; a value outside the
# list is a usage error.
#   stoke_cli_precision.sh <stoke binary>
set -uo pipefail
stoke=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export STOKE_LOG_LEVEL=warn
# shellcheck source=test_lib.sh
source "$(dirname "$0")/test_lib.sh"


"$stoke" info --json >"$work/info.json" 2>/dev/null || fail "info --json"
bf16=$(json_field bf16 <"$work/info.json") || fail "info --json has no \"bf16\""
test "$(json_field precision <"$work/info.json")" = fp32 || fail "default precision is not fp32"
# auto: bf16 where native and measured faster than fp32 (bf16_time_ratio at most 0.9).
want_auto=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1]));
t=r["bf16_time_ratio"]; assert (t is None) == (r["bf16"] != "native"), r
print("bf16" if t is not None and t <= 0.9 else "fp32")' "$work/info.json") || fail "info's bf16_time_ratio"
test "$(STOKE_PRECISION=auto "$stoke" info --json 2>/dev/null | json_field precision)" = "$want_auto" \
  || fail "auto with bf16 $bf16 is not $want_auto"
STOKE_PRECISION=bf16 ONEDNN_MAX_CPU_ISA=AVX2 "$stoke" info --json 2>/dev/null | json_field precision \
  | grep -q '^unavailable: .*bf16' || fail "info under AVX2 does not say bf16 is unavailable"
"$stoke" info 2>/dev/null | grep -q '^precision: fp32' || fail "info text has no precision line"
# The CPU's matrix products: OpenBLAS's kernels, or oneDNN's sgemm where OpenBLAS lags the CPU.
json_field matrix_route <"$work/info.json" | grep -Eq '^(OpenBLAS .*kernels\)|oneDNN sgemm \()' \
  || fail "info --json has no matrix_route"
"$stoke" info 2>/dev/null | grep -q '^cpu matrix products: ' || fail "info text has no matrix line"

"$stoke" dataset --out "$work/d" --count 24 --size 32x32 >/dev/null 2>&1 || fail "dataset"
"$stoke" train --data "$work/d" --out "$work/m.stoke" --epochs 1 --size 16 --batch 4 --precision fp32 \
  >/dev/null 2>"$work/train.err" || { cat "$work/train.err"; fail "train --precision fp32"; }

# bf16 training without bf16 kernels: refused naming what is missing, no model.
ONEDNN_MAX_CPU_ISA=AVX2 "$stoke" train --data "$work/d" --out "$work/x.stoke" --epochs 1 --size 16 \
  --precision bf16 >/dev/null 2>"$work/err"
test $? -eq 1 && grep -q 'training in bf16' "$work/err" && grep -q 'AVX-512' "$work/err" \
  || { cat "$work/err"; fail "train --precision bf16 under AVX2 not refused with its reason"; }
test ! -e "$work/x.stoke" || fail "a refused train --precision bf16 wrote a model"
"$stoke" train --data "$work/d" --out "$work/x.stoke" --epochs 1 --size 16 --precision fp16 \
  --loss-scale dynamic >/dev/null 2>"$work/err"
test $? -eq 1 && grep -q 'training in fp16 is not available on the CPU' "$work/err" \
  || { cat "$work/err"; fail "train --precision fp16 on the CPU not refused with its reason"; }
test ! -e "$work/x.stoke" || fail "a refused train --precision fp16 wrote a model"
"$stoke" train --data "$work/d" --out "$work/x.stoke" --epochs 1 --size 16 --precision int8 \
  >/dev/null 2>"$work/err"
test $? -eq 2 && grep -q 'expected fp32, bf16, fp16 or auto' "$work/err" \
  || { cat "$work/err"; fail "train --precision int8 not a usage error"; }
test ! -e "$work/x.stoke" || fail "a refused --precision wrote a model"

# Loss scaling (docs/precision.md): off by default in fp32, dynamic on request
# (GradScaler's 65536 to start; no overflow in fp32 here), bad values refused.
"$stoke" train --data "$work/d" --out "$work/ls.stoke" --epochs 1 --size 16 --batch 4 --json \
  --loss-scale dynamic >"$work/ls.json" 2>"$work/ls.err" || { cat "$work/ls.err"; fail "train --loss-scale dynamic"; }
grep -q '"skipped_steps": 0, "loss_scale": 65536, "precision": "fp32"}' "$work/ls.json" || { cat "$work/ls.json"; fail "loss scale not in --json"; }
grep -q 'loss scale 65536, 0 steps skipped' "$work/ls.err" || { cat "$work/ls.err"; fail "no loss scale in the epoch line"; }
"$stoke" train --data "$work/d" --out "$work/off.stoke" --epochs 1 --size 16 --batch 4 --json \
  >"$work/off.json" 2>/dev/null || fail "train without --loss-scale"
grep -q '"loss_scale": 0, "precision": "fp32"}' "$work/off.json" || { cat "$work/off.json"; fail "loss scaling on by default in fp32"; }
for bad in 0 -1 nan often; do
  "$stoke" train --data "$work/d" --out "$work/x.stoke" --epochs 1 --size 16 --loss-scale "$bad" >/dev/null 2>"$work/err"
  test $? -eq 2 && grep -q -- '--loss-scale' "$work/err" || { cat "$work/err"; fail "--loss-scale $bad not refused"; }
done
test ! -e "$work/x.stoke" || fail "a refused --loss-scale wrote a model"
"$stoke" predict --model "$work/m.stoke" --data "$work/d" --precision int4 >/dev/null 2>"$work/err"
test $? -eq 2 && grep -q "'int4' is not one of fp32, bf16, fp16, int8, auto" "$work/err" \
  || { cat "$work/err"; fail "--precision int4 not a usage error"; }
# int8 needs a calibrated model file (stoke quantize --precision int8).
"$stoke" predict --model "$work/m.stoke" --data "$work/d" --precision int8 >/dev/null 2>"$work/err"
rc=$?
test $rc -ne 0 && test $rc -lt 124 && grep -q 'int8 calibration' "$work/err" \
  || { cat "$work/err"; fail "--precision int8 on an uncalibrated model not refused"; }
STOKE_PRECISION=half "$stoke" predict --model "$work/m.stoke" --data "$work/d" >/dev/null 2>"$work/err"
rc=$?
test $rc -ne 0 && test $rc -lt 124 && grep -q 'STOKE_PRECISION' "$work/err" \
  || { cat "$work/err"; fail "STOKE_PRECISION=half: status $rc"; }

# Without bf16 kernels: a clear refusal, status 1, nothing printed as a result.
ONEDNN_MAX_CPU_ISA=AVX2 "$stoke" predict --model "$work/m.stoke" --data "$work/d" --precision bf16 \
  >"$work/out" 2>"$work/err"
test $? -eq 1 && grep -q 'bf16' "$work/err" && grep -q 'fp32' "$work/err" && test ! -s "$work/out" \
  || { cat "$work/err"; fail "bf16 under AVX2 not refused with its reason"; }

test "$bf16" = none && skip "oneDNN has no bf16 kernels on this CPU (the refusal above passed)"

# bf16 training where the CPU has it natively; emulated (oneDNN capped at
# AVX512_CORE) it is refused as slower than fp32.
if test "$bf16" = native; then
  "$stoke" train --data "$work/d" --out "$work/b.stoke" --epochs 1 --size 16 --batch 4 --json \
    --precision bf16 >"$work/b.json" 2>"$work/b.err" || { cat "$work/b.err"; fail "train --precision bf16"; }
  test "$(json_field precision <"$work/b.json")" = bf16 || { cat "$work/b.json"; fail "train json does not say bf16"; }
  # An ordinary fp32 model: the predictor's fp32 self-check passes.
  "$stoke" predict --model "$work/b.stoke" --data "$work/d" --csv >/dev/null 2>"$work/err" \
    || { cat "$work/err"; fail "predict on the bf16-trained model"; }
  grep -qi 'self-check.*fail' "$work/err" && { cat "$work/err"; fail "bf16-trained model fails its self-check"; }
  "$stoke" train --data "$work/d" --out "$work/auto.stoke" --epochs 1 --size 16 --batch 4 --json \
    --precision auto >"$work/auto.json" 2>/dev/null || fail "train --precision auto"
  test "$(json_field precision <"$work/auto.json")" = fp32 || fail "train --precision auto is not fp32"
  ONEDNN_MAX_CPU_ISA=AVX512_CORE "$stoke" train --data "$work/d" --out "$work/x.stoke" --epochs 1 \
    --size 16 --precision bf16 >/dev/null 2>"$work/err"
  test $? -eq 1 && grep -q 'emulated' "$work/err" \
    || { cat "$work/err"; fail "emulated bf16 training not refused"; }
  test ! -e "$work/x.stoke" || fail "a refused emulated bf16 training wrote a model"
fi

"$stoke" predict --model "$work/m.stoke" --data "$work/d" --csv >"$work/fp32.csv" 2>/dev/null \
  || fail "predict fp32"
"$stoke" predict --model "$work/m.stoke" --data "$work/d" --csv --precision bf16 >"$work/bf16.csv" \
  2>"$work/err" || { cat "$work/err"; fail "predict --precision bf16"; }
test "$(wc -l <"$work/bf16.csv")" -eq "$(wc -l <"$work/fp32.csv")" || fail "bf16 rows differ in number"
cmp -s "$work/fp32.csv" "$work/bf16.csv" && fail "bf16 gave fp32's exact confidences (not run in bf16?)"
# Same files and, for all but near-ties, the same classes.
cut -d, -f1 "$work/fp32.csv" | cmp -s - <(cut -d, -f1 "$work/bf16.csv") || fail "bf16 rows name other files"
changed=$(paste -d, <(cut -d, -f2 "$work/fp32.csv") <(cut -d, -f2 "$work/bf16.csv") | awk -F, '$1 != $2' | wc -l)
test "$changed" -le 2 || fail "$changed of $(wc -l <"$work/fp32.csv") decisions changed in bf16"

"$stoke" eval --model "$work/m.stoke" --data "$work/d" --json --precision bf16 >"$work/eval.json" 2>"$work/err" \
  || { cat "$work/err"; fail "eval --precision bf16"; }
test "$(json_field compute_precision <"$work/eval.json")" = bf16 || fail "eval json does not say bf16"
"$stoke" eval --model "$work/m.stoke" --data "$work/d" --json >"$work/eval32.json" 2>/dev/null || fail "eval"
test "$(json_field compute_precision <"$work/eval32.json")" = fp32 || fail "eval json does not say fp32"
echo "ok: bf16 $bf16, $changed decisions changed"
