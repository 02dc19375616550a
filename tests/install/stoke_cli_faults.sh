#!/usr/bin/env bash
# Misuse and faults against the `stoke` command (issue 25): each case is one
# CTest (tests/stoke_cli.cmake) and checks that no file is lost, nothing
# crashes or hangs, and the message says what went wrong.
#   stoke_cli_faults.sh <stoke binary> <case>
# Exit 0: pass; 77: skipped (the reason is printed); anything else: fail.
set -uo pipefail
stoke=$1
case_name=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export STOKE_LOG_LEVEL=warn
T=(--epochs 1 --size 16 --batch 4 --arch plain)

fail() {
  echo "FAIL: $*"
  exit 1
}
skip() {
  echo "SKIP: $*"
  exit 77
}

# Out-of-memory cases cannot run under AddressSanitizer: its operator new
# aborts instead of throwing std::bad_alloc, and its shadow memory does not
# fit an address-space limit. The release build runs them.
skip_under_asan() {
  if ldd "$stoke" 2>/dev/null | grep -q libasan; then
    skip "an AddressSanitizer build: out of memory aborts there instead of throwing"
  fi
}

# A dataset and a trained model, as the issue's reproductions use.
setup() {
  "$stoke" dataset --out "$work/d" --count 24 --size 32x32 >/dev/null 2>&1 || fail "dataset"
  "$stoke" train --data "$work/d" --out "$work/m.stoke" "${T[@]}" >/dev/null 2>"$work/setup.err" \
    || { cat "$work/setup.err"; fail "setup train"; }
}

# Runs the command line with a 120 s bound; sets $rc, keeps stderr in $work/err.
run() {
  timeout -k 5 120 "$@" >"$work/out" 2>"$work/err"
  rc=$?
}

# A status from a signal or a foreign exception (abort) is never acceptable.
expect_clean_failure() {
  test "$rc" -ne 0 || fail "$1: status 0"
  test "$rc" -lt 124 || { cat "$work/err"; fail "$1: status $rc (crash, signal or hang)"; }
  grep -q '^stoke ' "$work/err" || { cat "$work/err"; fail "$1: no stoke message"; }
}

case_cache_with_validation() {  # item 1: train and validation loaders shared PATH.partial
  setup
  STOKE_CACHE=file:$work/c.cache run "$stoke" train --data "$work/d" --out "$work/c.stoke" "${T[@]}"
  test "$rc" -eq 0 || { cat "$work/err"; fail "cached train: status $rc"; }
  test -s "$work/c.stoke" || fail "no model"
  # The second run reuses both files (no rebuild) and still trains.
  STOKE_CACHE=file:$work/c.cache STOKE_LOG_LEVEL=info run "$stoke" train --data "$work/d" \
    --out "$work/c2.stoke" "${T[@]}"
  test "$rc" -eq 0 || { cat "$work/err"; fail "second cached train: status $rc"; }
}

case_cache_refuses_foreign_file() {  # item 2: a model or an image at PATH is not replaced
  setup
  cp "$work/m.stoke" "$work/keep.stoke"
  STOKE_CACHE=file:$work/m.stoke run "$stoke" train --data "$work/d" --out "$work/x.stoke" "${T[@]}"
  expect_clean_failure "cache onto a model"
  grep -q 'not a stoke cache file' "$work/err" || { cat "$work/err"; fail "message"; }
  cmp -s "$work/m.stoke" "$work/keep.stoke" || fail "the model at the cache path was changed"
  img=$(find "$work/d" -type f | head -1)
  cp "$img" "$work/keep.png"
  STOKE_CACHE=file:$img run "$stoke" train --data "$work/d" --out "$work/x.stoke" "${T[@]}"
  expect_clean_failure "cache onto an image"
  cmp -s "$img" "$work/keep.png" || fail "the image at the cache path was changed"
  mkdir "$work/dir"
  STOKE_CACHE=file:$work/dir run "$stoke" train --data "$work/d" --out "$work/x.stoke" "${T[@]}"
  expect_clean_failure "cache onto a directory"
}

case_nan_learning_rate() {  # item 3: --lr nan|inf refused; a diverging run writes no NaN model
  setup
  for lr in nan inf -5; do
    run "$stoke" train --data "$work/d" --out "$work/n.stoke" "${T[@]}" --lr "$lr"
    test "$rc" -eq 2 || { cat "$work/err"; fail "--lr $lr: status $rc"; }
    test ! -e "$work/n.stoke" || fail "--lr $lr wrote a model"
  done
  run "$stoke" train --data "$work/d" --out "$work/n.stoke" "${T[@]}" --optimizer sgd --lr 10 --epochs 2
  if [ "$rc" -eq 0 ]; then
    # It did not diverge on this machine: the model it wrote must load.
    run "$stoke" predict --model "$work/n.stoke" "$(find "$work/d" -type f | head -1)"
    test "$rc" -eq 0 || fail "a model train wrote does not load"
  else
    expect_clean_failure "diverged training"
    grep -q 'diverged' "$work/err" || { cat "$work/err"; fail "no divergence message"; }
    test ! -e "$work/n.stoke" || fail "a diverged run wrote its model"
    if [ -e "$work/n.stoke.stop" ]; then
      run "$stoke" export --model "$work/n.stoke.stop" --onnx "$work/n.onnx"
      test "$rc" -eq 0 || { cat "$work/err"; fail "the stop checkpoint is not the finite state"; }
    fi
  fi
  # A model file with NaN weights (valid CRC) is refused by every reader.
  python3 "$(dirname "$0")/model_file_edit.py" nan "$work/m.stoke" "$work/nan.stoke"
  for cmd in predict eval export; do
    case $cmd in
      predict) run "$stoke" predict --model "$work/nan.stoke" "$(find "$work/d" -type f | head -1)" ;;
      eval) run "$stoke" eval --model "$work/nan.stoke" --data "$work/d" --good ok ;;
      export) run "$stoke" export --model "$work/nan.stoke" --onnx "$work/nan.onnx" ;;
    esac
    expect_clean_failure "$cmd of a NaN model"
    grep -q 'NaN' "$work/err" || { cat "$work/err"; fail "$cmd: no NaN message"; }
  done
}

case_model_not_regular_file() {  # item 5: directories, devices and FIFOs as --model
  setup
  img=$(find "$work/d" -type f | head -1)
  mkdir "$work/dir.stoke"
  mkfifo "$work/fifo.stoke"
  truncate -s 50G "$work/sparse.stoke" 2>/dev/null || skip "no sparse file here"
  for m in "$work/dir.stoke" /dev/zero "$work/fifo.stoke" "$work/sparse.stoke"; do
    for cmd in predict export; do
      if [ $cmd = predict ]; then
        run "$stoke" predict --model "$m" "$img"
      else
        run "$stoke" export --model "$m" --onnx "$work/x.onnx"
      fi
      expect_clean_failure "$cmd --model $m"
    done
  done
}

case_crafted_model_file() {  # item 8: values that size allocations are bounded
  skip_under_asan
  setup
  img=$(find "$work/d" -type f | head -1)
  for edit in resize_width blocks_per_stage; do
    python3 "$(dirname "$0")/model_file_edit.py" "$edit" "$work/m.stoke" "$work/$edit.stoke"
    (ulimit -v 4000000 && timeout -k 5 120 "$stoke" predict --model "$work/$edit.stoke" "$img") \
      >"$work/out" 2>"$work/err"
    rc=$?
    expect_clean_failure "predict of a model with a crafted $edit"
  done
}

case_export_atomic() {  # item 6: a failed export leaves the previous file, and says why
  setup
  run "$stoke" export --model "$work/m.stoke" --onnx "$work/good.onnx"
  test "$rc" -eq 0 || { cat "$work/err"; fail "export"; }
  cp "$work/good.onnx" "$work/keep.onnx"
  # ulimit -f in 512-byte blocks: far below the model's size.
  (ulimit -f 8 && "$stoke" export --model "$work/m.stoke" --onnx "$work/good.onnx") \
    >"$work/out" 2>"$work/err"
  rc=$?
  expect_clean_failure "export past ulimit -f"
  grep -qi 'too large\|space' "$work/err" || { cat "$work/err"; fail "the message drops errno"; }
  cmp -s "$work/good.onnx" "$work/keep.onnx" || fail "the previous export was destroyed"
  test -z "$(find "$work" -maxdepth 1 -name '.good.onnx.tmp*')" || fail "a temporary file stayed"
}

case_output_names_input() {  # item 7: outputs onto inputs are refused, naming both
  setup
  cp "$work/m.stoke" "$work/keep.stoke"
  run "$stoke" export --model "$work/m.stoke" --onnx "$work/m.stoke"
  test "$rc" -eq 2 && grep -q 'refusing' "$work/err" || { cat "$work/err"; fail "export onto its model"; }
  cmp -s "$work/m.stoke" "$work/keep.stoke" || fail "export destroyed its model"
  img=$(find "$work/d" -type f | head -1)
  cp "$img" "$work/keep.img"
  run "$stoke" train --data "$work/d" --out "$img" "${T[@]}"
  test "$rc" -eq 2 && grep -q 'refusing' "$work/err" || { cat "$work/err"; fail "train onto an image"; }
  cmp -s "$img" "$work/keep.img" || fail "train destroyed a training image"
  run "$stoke" train --data "$work/d" --out "$work/x.json" --log "$work/x.json" "${T[@]}"
  test "$rc" -eq 2 && grep -q 'both name' "$work/err" || { cat "$work/err"; fail "--out = --log"; }
}

case_hostile_arguments() {  # item 9: no foreign exception escapes any command
  skip_under_asan
  setup
  img=$(find "$work/d" -type f | head -1)
  run "$stoke" train --data "$work/d" --out "$work/big.stoke" --size 100000 --epochs 1 --batch 1
  expect_clean_failure "train --size 100000"
  for args in "predict --model $work/m.stoke --data /nonexistent" "eval --model /nonexistent --data $work/d" \
    "export --model $work/d --onnx $work/x.onnx" "import --safetensors /dev/null --out $work/i.stoke" \
    "train --data /nonexistent --out $work/y.stoke" "dataset --out /proc/forbidden --count 2"; do
    # shellcheck disable=SC2086
    run "$stoke" $args
    expect_clean_failure "stoke $args"
  done
}

case_sigterm_writes_stop_checkpoint() {  # item 17: SIGTERM is treated as Ctrl-C
  setup
  "$stoke" train --data "$work/d" --out "$work/t.stoke" --epochs 100000 --size 16 --batch 4 \
    --arch plain >/dev/null 2>"$work/err" &
  pid=$!
  sleep 3
  kill -TERM $pid
  wait $pid
  rc=$?
  test "$rc" -eq 130 || { cat "$work/err"; fail "SIGTERM: status $rc"; }
  test -s "$work/t.stoke.stop" || fail "SIGTERM wrote no stop checkpoint"
}

"case_$case_name"
echo "PASS: $case_name"
