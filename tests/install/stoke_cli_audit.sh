#!/usr/bin/env bash
# stoke audit (docs/audit.md) on two synthetic sets: copies of training images
# planted in the validation set (byte-identical, re-encoded JPEG, resized,
# shifted by one pixel, one under another class) are found across the splits,
# the clean sets have no cross-split pair, corrupt files and images over
# STOKE_MAX_IMAGE_PIXELS are listed without failing the audit, --report
# writes the pairs, --model finds a planted mislabelled image, and stoke train
# warns about the shared exact duplicates.
#   stoke_cli_audit.sh <stoke binary> <stoke_audit_images binary>
set -euo pipefail
stoke=$1
images=$2
source "$(dirname "$0")/test_lib.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export STOKE_LOG_LEVEL=error

"$stoke" dataset --out "$work/train" --count 40 --size 64x64 >/dev/null
"$stoke" dataset --out "$work/val" --count 40 --size 64x64 --seed 2 >/dev/null

# pair_found JSON A B: a near-duplicate pair (either order) across train and val.
pair_found() {
  grep -F "\"a\": \"$2\", \"b\": \"$3\"" "$1" | grep -qF '"splits": ["train", "val"]'
}

# Clean sets: distinct images, no pair across the splits.
"$stoke" audit --data "$work/train" --val "$work/val" --json >"$work/clean.json" 2>"$work/clean.err" \
  || fail "audit of the clean sets: $(cat "$work/clean.err")"
grep -q '"cross_split": 0,' "$work/clean.json" || fail "pairs across clean sets: $(cat "$work/clean.json")"
grep -q '"exact_duplicates": \[\],' "$work/clean.json" || fail "exact duplicates in clean sets"
grep -q '"images": 80,' "$work/clean.json" || fail "not 80 images: $(head -3 "$work/clean.json")"
grep -q '"train": {"defect": [0-9]*, "ok": [0-9]*}' "$work/clean.json" || fail "class counts: $(cat "$work/clean.json")"
grep -q '"label_noise": null' "$work/clean.json" || fail "label_noise is not null without --model"
"$stoke" train --data "$work/train" --val "$work/val" --out "$work/model.stoke" --size 16 --epochs 1 --batch 8 \
  --arch plain >/dev/null 2>"$work/train-clean.err" || fail "train: $(cat "$work/train-clean.err")"
if grep -q 'byte-identical' "$work/train-clean.err"; then fail "train warned on clean sets"; fi

# The planted copies.
t=$work/train
v=$work/val
cp "$t/ok/000000.jpg" "$v/ok/copy.jpg"
"$images" reencode "$t/ok/000001.jpg" "$v/ok/reencoded.jpg" 60
"$images" resize "$t/defect/000003.jpg" "$v/defect/resized.png" 48 48
"$images" shift "$t/ok/000002.jpg" "$v/ok/shifted.jpg" 1 0
"$images" reencode "$t/ok/000004.jpg" "$v/defect/conflict.jpg" 90
"$stoke" audit --data "$t" --val "$v" --json >"$work/planted.json" 2>"$work/planted.err" \
  || fail "audit with planted copies: $(cat "$work/planted.err")"
grep -qF "[\"$t/ok/000000.jpg\", \"$v/ok/copy.jpg\"]" "$work/planted.json" \
  || fail "the byte-identical copy: $(cat "$work/planted.json")"
pair_found "$work/planted.json" "$t/ok/000001.jpg" "$v/ok/reencoded.jpg" || fail "the re-encoded JPEG"
pair_found "$work/planted.json" "$t/defect/000003.jpg" "$v/defect/resized.png" || fail "the resized copy"
pair_found "$work/planted.json" "$t/ok/000002.jpg" "$v/ok/shifted.jpg" || fail "the shifted copy"
pair_found "$work/planted.json" "$t/ok/000004.jpg" "$v/defect/conflict.jpg" || fail "the copy under another class"
grep -F "\"b\": \"$v/defect/conflict.jpg\"" "$work/planted.json" | grep -qF '"classes": ["ok", "defect"], "label_conflict": true' \
  || fail "the copy under another class is no label conflict"
grep -F "\"b\": \"$v/ok/shifted.jpg\"" "$work/planted.json" | grep -qF '"label_conflict": false' \
  || fail "a same-class pair is a label conflict"
grep -q '"cross_split": 5,' "$work/planted.json" || fail "not 5 cross-split pairs: $(grep cross_split "$work/planted.json")"
grep -qF "{\"path\": \"$v/defect/resized.png\", \"split\": \"val\", \"width\": 48, \"height\": 48, \"channels\": 3, \"majority\": \"64x64x3\"}" \
  "$work/planted.json" || fail "the resized copy is no size outlier: $(grep -A3 size_outliers "$work/planted.json")"
"$stoke" audit --data "$t" --val "$v" >"$work/planted.txt" 2>/dev/null || fail "the summary"
grep -q '^5 pairs across train and val$' "$work/planted.txt" && grep -q 'LABEL CONFLICT' "$work/planted.txt" \
  || fail "summary: $(cat "$work/planted.txt")"

# stoke train names the shared exact duplicate (one line), the re-encoded ones not.
"$stoke" train --data "$t" --val "$v" --out "$work/model2.stoke" --size 16 --epochs 1 --batch 8 --arch plain \
  >/dev/null 2>"$work/train.err" || fail "train with planted copies: $(cat "$work/train.err")"
test "$(grep -c 'byte-identical' "$work/train.err")" -eq 1 \
  && grep -qF "warning: 1 validation image is byte-identical to training images (first: $t/ok/000000.jpg = $v/ok/copy.jpg)" \
    "$work/train.err" || fail "train's duplicate warning: $(cat "$work/train.err")"

# Bad files are listed with the reason; the audit still runs (status 0).
printf 'not an image' >"$v/ok/garbage.jpg"
head -c 400 "$t/ok/000005.jpg" >"$v/ok/truncated.jpg"
printf 'x' >"$v/notes.txt"
"$stoke" audit --data "$t" --val "$v" --json --report "$work/report" --model "$work/model.stoke" \
  >"$work/bad.json" 2>"$work/bad.err" || fail "a corrupt file failed the audit: $(cat "$work/bad.err")"
grep -qF "{\"path\": \"$v/ok/garbage.jpg\", \"reason\": \"cannot decode image" "$work/bad.json" \
  || fail "garbage not unreadable: $(grep -A4 unreadable "$work/bad.json")"
grep -qF "{\"path\": \"$v/ok/truncated.jpg\", \"reason\": " "$work/bad.json" || fail "truncated not unreadable"
grep -qF "{\"path\": \"$v/notes.txt\", \"reason\": \"ignored: not in a class folder" "$work/bad.json" \
  || fail "the stray file not skipped: $(grep -A4 skipped "$work/bad.json")"
grep -q '"cross_split": 5,' "$work/bad.json" || fail "bad files changed the pairs"
grep -q '"label_noise": \[' "$work/bad.json" || fail "no label_noise list with --model"
if command -v python3 >/dev/null; then
  python3 -m json.tool "$work/bad.json" >/dev/null || fail "--json is not JSON"
fi

# The report: audit.json as --json printed, the pairs side by side with thumbnails.
cmp -s "$work/bad.json" "$work/report/audit.json" || fail "report/audit.json differs from --json"
html=$work/report/audit.html
grep -qF "$v/defect/conflict.jpg" "$html" && grep -qF "$v/ok/copy.jpg" "$html" || fail "pairs missing from audit.html"
test "$(grep -o 'data:image/jpeg;base64,' "$html" | wc -l)" -ge 10 || fail "fewer than 10 thumbnails in audit.html"
grep -q 'label conflict' "$html" && grep -qF 'garbage.jpg' "$html" || fail "audit.html lacks the conflict or the unreadable file"

# --model: a defect image planted under ok in a copy of the training set is a
# label-noise candidate of a model trained on another 150 images (it puts
# that image in defect with p = 0.999 on this machine, far from 0.9).
"$stoke" dataset --out "$work/more" --count 150 --size 64x64 --seed 5 >/dev/null
"$stoke" train --data "$work/more" --out "$work/noise.stoke" --size 32 --epochs 15 --batch 16 --arch plain \
  >/dev/null 2>"$work/noise-train.err" || fail "train for --model: $(cat "$work/noise-train.err")"
cp -r "$t" "$work/noisy"
cp "$t/defect/000003.jpg" "$work/noisy/ok/mislabelled.jpg"
"$stoke" audit --data "$work/noisy" --model "$work/noise.stoke" --json >"$work/noise.json" 2>/dev/null \
  || fail "audit --model"
grep -qF "{\"path\": \"$work/noisy/ok/mislabelled.jpg\", \"class\": \"ok\", \"predicted\": \"defect\"" \
  "$work/noise.json" || fail "the mislabelled image is no label-noise candidate: $(grep -A5 label_noise "$work/noise.json")"

# The pixel limit: every image refused with the knob named, status 0.
STOKE_MAX_IMAGE_PIXELS=1000 "$stoke" audit --data "$t" --json >"$work/limit.json" 2>/dev/null \
  || fail "audit under STOKE_MAX_IMAGE_PIXELS"
test "$(grep -c 'STOKE_MAX_IMAGE_PIXELS' "$work/limit.json")" -eq 40 || fail "not 40 images over the limit"

# Usage errors are status 2, a missing folder status 1 with the message.
set +e
"$stoke" audit --data "$t" --bogus >/dev/null 2>&1; test $? -eq 2 || fail "unknown flag: not status 2"
"$stoke" audit --val "$v" >/dev/null 2>&1; test $? -eq 2 || fail "no --data: not status 2"
"$stoke" audit --data "$work/missing" >/dev/null 2>"$work/missing.err"; status=$?
set -e
test $status -eq 1 && grep -q '^stoke audit: .*missing' "$work/missing.err" \
  || fail "a missing folder: status $status, $(cat "$work/missing.err")"
echo "PASS"
