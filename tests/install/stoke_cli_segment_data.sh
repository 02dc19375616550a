#!/usr/bin/env bash
# `stoke dataset --task segment` (issue 30, item 1; docs/segmentation.md): the
# segmentation layout (images/, masks/, classes.txt), the classification set's
# pictures, and its usage errors.
#   stoke_cli_segment_data.sh <stoke binary>
set -uo pipefail
stoke=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export STOKE_LOG_LEVEL=error
# shellcheck source=test_lib.sh
source "$(dirname "$0")/test_lib.sh"

common=(--count 6 --size 40x30 --format png --defects 0.5 --seed 4)
"$stoke" dataset --task segment --out "$work/s" "${common[@]}" >"$work/out" 2>&1 \
  || { cat "$work/out"; fail "dataset --task segment"; }
grep -q 'images and their masks' "$work/out" || { cat "$work/out"; fail "no summary line"; }
test "$(printf 'background\nscratch\nspot\n')" = "$(cat "$work/s/classes.txt")" || fail "classes.txt"
for i in 000000 000001 000002 000003 000004 000005; do
  test -f "$work/s/images/$i.png" || fail "missing images/$i.png"
  test -f "$work/s/masks/$i.png" || fail "missing masks/$i.png"
done
test "$(find "$work/s" -type f | wc -l)" -eq 13 || { find "$work/s"; fail "unexpected files"; }
# The same pictures as the classification set of the same options.
"$stoke" dataset --out "$work/c" "${common[@]}" >/dev/null 2>&1 || fail "dataset"
for f in "$work"/c/*/*.png; do
  cmp -s "$f" "$work/s/images/$(basename "$f")" || fail "$(basename "$f") differs between the sets"
done

expect_usage() {  # expect_usage WHAT ARGS...: status 2 and WHAT in the message
  local what=$1
  shift
  "$stoke" dataset "$@" >/dev/null 2>"$work/err"
  test $? -eq 2 && grep -q -- "$what" "$work/err" || { cat "$work/err"; fail "usage: $what"; }
}
expect_usage '--task is classify or segment' --task segmentation --out "$work/x"
expect_usage '--masks is for --task classify' --task segment --masks "$work/m" --out "$work/x"
test ! -e "$work/x" || fail "a refused command wrote files"
echo "ok"
