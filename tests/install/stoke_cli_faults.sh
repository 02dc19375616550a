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
cleanup_pids=""  # processes a case started that must not outlive it
cleanup() {
  # shellcheck disable=SC2086
  test -z "$cleanup_pids" || kill -KILL $cleanup_pids 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
export STOKE_LOG_LEVEL=warn
T=(--epochs 1 --size 16 --batch 4 --arch plain)

# shellcheck source=test_lib.sh
source "$(dirname "$0")/test_lib.sh"

# Out-of-memory cases cannot run under AddressSanitizer: its operator new
# aborts instead of throwing std::bad_alloc, and its shadow memory does not
# fit an address-space limit. The release build runs them.
skip_oom_under_asan() {
  skip_under_asan "$stoke" "out of memory aborts there instead of throwing"
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
  skip_oom_under_asan
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
  skip_oom_under_asan
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

images=$(dirname "$0")/tiny_images.py

# A copy of the dataset with one truncated and one unsupported image in ok/.
damaged_copy() {
  cp -r "$work/d" "$work/c"
  local first
  first=$(find "$work/c/ok" -type f | sort | head -1)
  head -c 100 "$first" >"$work/c/ok/cut.png"
  rm "$first"
  echo "not an image" >"$work/c/ok/text.jpg"
}

case_skip_corrupt() {  # item 10: --skip-corrupt for train and eval, per-file reports
  setup
  damaged_copy
  run "$stoke" eval --model "$work/m.stoke" --data "$work/c" --good ok
  expect_clean_failure "eval of a folder with bad files"
  grep -q -- '--skip-corrupt' "$work/err" || { cat "$work/err"; fail "eval: no --skip-corrupt hint"; }
  run "$stoke" eval --model "$work/m.stoke" --data "$work/c" --good ok --skip-corrupt --json
  test "$rc" -eq 0 || { cat "$work/err"; fail "eval --skip-corrupt: status $rc"; }
  grep -q 'skipped .*cut.png' "$work/err" && grep -q 'skipped .*text.jpg' "$work/err" \
    || { cat "$work/err"; fail "eval --skip-corrupt does not list what it skipped"; }
  python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); names = [s["file"] for s in d["skipped"]]
assert any(n.endswith("cut.png") for n in names) and any(n.endswith("text.jpg") for n in names), names
assert d["samples"] == 23, d["samples"]' "$work/out" || fail "eval --json: skipped files or samples"
  run "$stoke" train --data "$work/c" --out "$work/x.stoke" "${T[@]}"
  expect_clean_failure "train on a folder with bad files"
  grep -q -- '--skip-corrupt' "$work/err" || { cat "$work/err"; fail "train: no --skip-corrupt hint"; }
  run "$stoke" train --data "$work/c" --out "$work/x.stoke" "${T[@]}" --skip-corrupt
  test "$rc" -eq 0 && test -s "$work/x.stoke" || { cat "$work/err"; fail "train --skip-corrupt: status $rc"; }
  grep -q 'skipped .*cut.png' "$work/err" || { cat "$work/err"; fail "train does not list what it skipped"; }
  # Past the budget (max(10, 1 %)) it stops, naming the budget.
  for i in $(seq 1 11); do echo bad >"$work/c/defect/bad$i.png"; done
  run "$stoke" eval --model "$work/m.stoke" --data "$work/c" --skip-corrupt
  expect_clean_failure "eval past the corruption budget"
  grep -q 'budget' "$work/err" || { cat "$work/err"; fail "no budget message"; }
  # A folder with only some of the model's classes: evaluated, with the metrics that still mean something.
  mkdir -p "$work/g"
  cp -r "$work/d/ok" "$work/g/ok"
  run "$stoke" eval --model "$work/m.stoke" --data "$work/g" --good ok --json
  test "$rc" -eq 0 || { cat "$work/err"; fail "eval of good parts only: status $rc"; }
  python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); c = {x["name"]: x for x in d["classes"]}
assert c["defect"]["support"] == 0 and c["defect"]["recall"] is None, c
assert d["auc"] is None and d["false_reject_rate"] is None, d' "$work/out" \
    || { cat "$work/out"; fail "good parts only: metrics without meaning are not null"; }
}

case_folder_rule() {  # item 11: subfolders, other extensions, BMP/TIFF, FIFOs, broken links
  setup
  cp -r "$work/d" "$work/s"
  mkdir -p "$work/s/ok/sub/deeper"
  for f in $(find "$work/s/ok" -maxdepth 1 -type f | sort | head -5); do mv "$f" "$work/s/ok/sub/deeper/"; done
  echo notes >"$work/s/ok/notes.txt"
  run "$stoke" train --data "$work/s" --out "$work/s.stoke" "${T[@]}" --json
  test "$rc" -eq 0 || { cat "$work/err"; fail "train with a class subfolder: status $rc"; }
  python3 -c 'import json, sys; d = json.loads(open(sys.argv[1]).read())
assert d["train_samples"] + d["val_samples"] == 24, d' "$work/out" || fail "images in ok/sub/ were dropped"
  grep -q 'skipped .*notes.txt: ignored' "$work/err" || { cat "$work/err"; fail "notes.txt dropped without a word"; }
  mkdir "$work/p"
  python3 "$images" bmp "$work/p/a.bmp"
  mkfifo "$work/p/pipe.png"
  ln -s "$work/nowhere.jpg" "$work/p/dangling.jpg"
  echo x >"$work/p/readme.md"
  run "$stoke" predict --model "$work/m.stoke" --data "$work/p" --csv
  test "$rc" -eq 1 || { cat "$work/err"; fail "predict --data with bad entries: status $rc"; }
  grep -q 'a.bmp,[a-z]' "$work/out" || { cat "$work/out" "$work/err"; fail "predict --data skipped a BMP"; }
  for name in pipe.png dangling.jpg readme.md; do
    grep -q "$name" "$work/err" || { cat "$work/err"; fail "predict --data said nothing about $name"; }
  done
}

case_success_only_when_written() {  # item 12: no success claimed for a model never written
  setup
  run "$stoke" train --data "$work/d" --out '' "${T[@]}"
  test "$rc" -eq 2 || { cat "$work/err"; fail "--out '': status $rc"; }
  run "$stoke" train --data "$work/d" --out "$work/r.stoke" "${T[@]}" --resume "$work/m.stoke"
  expect_clean_failure "--resume of a finished checkpoint"
  grep -q 'nothing to train' "$work/err" || { cat "$work/err"; fail "finished resume: message"; }
  test ! -e "$work/r.stoke" || fail "a finished resume wrote a model"
  "$stoke" train --data "$work/d" --out "$work/shared.stoke" --epochs 100000 --size 16 --batch 4 \
    --arch plain >/dev/null 2>"$work/first.err" &
  pid=$!
  for _ in $(seq 1 600); do grep -q 'train ' "$work/first.err" 2>/dev/null && break; sleep 0.1; done
  run "$stoke" train --data "$work/d" --out "$work/shared.stoke" "${T[@]}"
  kill -TERM $pid
  wait $pid
  test "$rc" -eq 2 && grep -q 'being written by another run' "$work/err" \
    || { cat "$work/err"; fail "two runs onto one --out: status $rc"; }
  test ! -e "$work/shared.stoke.lock" || fail "the lock file stayed"
}

case_outputs_checked_first() {  # item 16: --out, --log, --report writable before the first epoch
  setup
  for args in "--log $work/missing/x.json" "--report $work/m.stoke" "--out $work/missing/y.stoke"; do
    # shellcheck disable=SC2086
    run "$stoke" train --data "$work/d" --out "$work/o.stoke" "${T[@]}" $args
    test "$rc" -eq 2 || { cat "$work/err"; fail "$args: status $rc"; }
    ! grep -q '^epoch 1/' "$work/err" || fail "$args: refused only after training"
  done
  mkdir "$work/ro"
  chmod 555 "$work/ro"
  if [ ! -w "$work/ro" ]; then
    run "$stoke" train --data "$work/d" --out "$work/ro/z.stoke" "${T[@]}"
  elif setpriv --reuid=65534 --regid=65534 --clear-groups true 2>/dev/null; then
    # Root writes into chmod 555 folders: the same train as the unprivileged
    # user nobody (65534), which reads the dataset and writes only where the
    # folder lets it (the control run into a writable folder must succeed).
    echo "note: as root; the read-only folder is checked with the train run as user 65534"
    chmod 755 "$work"
    mkdir -m 777 "$work/rw"
    run setpriv --reuid=65534 --regid=65534 --clear-groups "$stoke" train --data "$work/d" \
      --out "$work/rw/z.stoke" "${T[@]}"
    test "$rc" -eq 0 && test -s "$work/rw/z.stoke" || { cat "$work/err"; fail "user 65534 cannot train here"; }
    run setpriv --reuid=65534 --regid=65534 --clear-groups "$stoke" train --data "$work/d" \
      --out "$work/ro/z.stoke" "${T[@]}"
  elif unshare -m true 2>/dev/null; then
    # No setpriv: a read-only mount over the folder, seen by this one process.
    echo "note: as root; the read-only folder is a read-only tmpfs mounted in a private namespace"
    # shellcheck disable=SC2016 # $1 and $@ are the inner shell's
    run unshare -m sh -c 'mount -t tmpfs -o ro tmpfs "$1" && shift && exec "$@"' sh "$work/ro" \
      "$stoke" train --data "$work/d" --out "$work/ro/z.stoke" "${T[@]}"
  else
    chmod 755 "$work/ro"
    skip "root writes into read-only folders, and neither setpriv nor unshare -m works here (the other checks passed)"
  fi
  test "$rc" -eq 2 && grep -q 'cannot write' "$work/err" || { cat "$work/err"; fail "read-only --out"; }
  ! grep -q '^epoch 1/' "$work/err" || fail "read-only --out refused only after training"
  test ! -e "$work/ro/z.stoke" || fail "a model was written into the read-only folder"
  chmod 755 "$work/ro"
}

case_val_classes_checked() {  # item 13: --val classes are the training classes, or some of them
  setup
  mkdir -p "$work/v"
  cp -r "$work/d/ok" "$work/v/ok"
  cp -r "$work/d/defect" "$work/v/other"
  run "$stoke" train --data "$work/d" --val "$work/v" --out "$work/v.stoke" "${T[@]}"
  expect_clean_failure "--val with a class the training set lacks"
  grep -q "'other' is not one of the classes" "$work/err" || { cat "$work/err"; fail "message"; }
  rm -r "$work/v/other"
  run "$stoke" train --data "$work/d" --val "$work/v" --out "$work/v.stoke" "${T[@]}"
  test "$rc" -eq 0 || { cat "$work/err"; fail "--val with only some classes: status $rc"; }
  grep -q "no images of class 'defect'" "$work/err" || { cat "$work/err"; fail "missing class not said"; }
}

case_bad_values_refused() {  # item 18: bad values, and --resume onto another dataset
  setup
  for args in "--normalize mean=nan,std=1" "--normalize mean=0,std=0" "--augment brightness=abc" \
    "--augment contrast=5" "--lr -5" "--split 50,abc" "--channels 2" "--epochs 0"; do
    # shellcheck disable=SC2086
    run "$stoke" train --data "$work/d" --out "$work/b.stoke" "${T[@]}" $args
    test "$rc" -eq 2 || { cat "$work/err"; fail "train $args: status $rc"; }
  done
  run "$stoke" import /dev/null --arch resnet18 --size 0 --out "$work/i.stoke"
  test "$rc" -eq 2 || { cat "$work/err"; fail "import --size 0: status $rc"; }
  run "$stoke" eval --model "$work/m.stoke" --data "$work/d" --good ok --escape-rate nan
  test "$rc" -eq 2 || { cat "$work/err"; fail "--escape-rate nan: status $rc"; }
  "$stoke" dataset --out "$work/t" --count 24 --size 32x32 --seed 7 >/dev/null 2>&1 || fail "dataset"
  run "$stoke" train --data "$work/t" --out "$work/rr.stoke" "${T[@]}" --epochs 2 --resume "$work/m.stoke"
  test "$rc" -eq 2 && grep -q 'another dataset' "$work/err" || { cat "$work/err"; fail "--resume on another dataset"; }
  run "$stoke" train --data "$work/t" --out "$work/rr.stoke" "${T[@]}" --epochs 2 --resume "$work/m.stoke" --force
  test "$rc" -eq 0 || { cat "$work/err"; fail "--resume --force: status $rc"; }
}

case_max_image_pixels() {  # item 15: predict and eval apply STOKE_MAX_IMAGE_PIXELS
  setup
  img=$(find "$work/d" -type f | head -1)
  STOKE_MAX_IMAGE_PIXELS=100 run "$stoke" predict --model "$work/m.stoke" "$img"
  test "$rc" -eq 1 && grep -q 'STOKE_MAX_IMAGE_PIXELS' "$work/err" || { cat "$work/err"; fail "predict ignores the limit"; }
  STOKE_MAX_IMAGE_PIXELS=100 run "$stoke" eval --model "$work/m.stoke" --data "$work/d"
  expect_clean_failure "eval over the pixel limit"
  grep -q 'STOKE_MAX_IMAGE_PIXELS' "$work/err" || { cat "$work/err"; fail "eval ignores the limit"; }
}

case_json_is_utf8() {  # item 19: names with bytes that are no UTF-8 are escaped
  setup
  mkdir "$work/u"
  img=$(find "$work/d/ok" -type f | head -1)
  cp "$img" "$work/u/$(printf 'part\377').${img##*.}"
  run "$stoke" predict --model "$work/m.stoke" --data "$work/u" --json
  test "$rc" -eq 0 || { cat "$work/err"; fail "predict --json: status $rc"; }
  python3 -c 'import json, sys; [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")]' "$work/out" \
    || fail "predict --json is not UTF-8 JSON"
  cp -r "$work/d" "$work/e"
  echo bad >"$work/e/ok/$(printf 'bad\377').png"
  run "$stoke" eval --model "$work/m.stoke" --data "$work/e" --json --skip-corrupt --report "$work/rep"
  test "$rc" -eq 0 || { cat "$work/err"; fail "eval --json: status $rc"; }
  for f in "$work/out" "$work/rep/report.json"; do
    python3 -c 'import json, sys; json.load(open(sys.argv[1], encoding="utf-8"))' "$f" \
      || fail "$f is not UTF-8 JSON"
  done
}

case_impossible_splits() {  # item 20: splits and rank counts checked up front
  setup
  run "$stoke" train --data "$work/d" --out "$work/q.stoke" "${T[@]}" --split 0,100
  test "$rc" -eq 2 && grep -q 'no training' "$work/err" || { cat "$work/err"; fail "--split 0,100: status $rc"; }
  run "$stoke" train --data "$work/d" --out "$work/q.stoke" "${T[@]}" --split 60,60
  test "$rc" -eq 2 || { cat "$work/err"; fail "--split 60,60: status $rc"; }
  run "$stoke" train --data "$work/d" --out "$work/q.stoke" "${T[@]}" --nproc 64
  test "$rc" -eq 2 || { cat "$work/err"; fail "--nproc 64: status $rc"; }
  ! grep -q 'started' "$work/err" || fail "--nproc 64 started ranks"
}

case_report_bounded() {  # item 14: the HTML report does not grow with classes squared
  mkdir "$work/k"
  python3 "$images" classes "$work/k" 1000
  run "$stoke" train --data "$work/k" --out "$work/k.stoke" --epochs 1 --size 8 --batch 64 --arch plain \
    --channels 1
  test "$rc" -eq 0 || { cat "$work/err"; fail "train on 1000 classes: status $rc"; }
  run "$stoke" eval --model "$work/k.stoke" --data "$work/k" --report "$work/krep"
  test "$rc" -eq 0 || { cat "$work/err"; fail "eval of 1000 classes: status $rc"; }
  size=$(stat -c %s "$work/krep/report.html")
  test "$size" -lt 2000000 || fail "report.html of 1000 classes is $size bytes"
  grep -q 'largest' "$work/krep/report.html" || fail "no top confusions in the report"
}

case_sigterm_under_nproc() {  # item 17: SIGTERM to the launcher stops every rank with one checkpoint
  "$stoke" info --json 2>/dev/null | grep -q '"distributed": *true' || skip "a build without Gloo"
  setup
  STOKE_DIST_TIMEOUT=20 "$stoke" train --nproc 2 --data "$work/d" --out "$work/p.stoke" --epochs 100000 \
    --size 16 --batch 4 --arch plain >/dev/null 2>"$work/err" &
  pid=$!
  for _ in $(seq 1 600); do grep -q '^train ' "$work/err" 2>/dev/null && break; sleep 0.1; done
  grep -q '^train ' "$work/err" || { cat "$work/err"; fail "the ranks never started training"; }
  ranks=$(pgrep -P $pid | tr '\n' ' ')
  kill -TERM $pid
  wait $pid
  rc=$?
  test "$rc" -eq 130 || { cat "$work/err"; fail "SIGTERM under --nproc: status $rc"; }
  test -s "$work/p.stoke.stop" || { cat "$work/err"; fail "SIGTERM under --nproc wrote no stop checkpoint"; }
  for r in $ranks; do ! kill -0 "$r" 2>/dev/null || fail "rank process $r still runs"; done
  ! grep -q 'killing rank' "$work/err" || { cat "$work/err"; fail "a rank had to be killed"; }
}

case_hung_rank_named() {  # item 25: a hung rank is named, and stopped seconds after its peer's timeout
  "$stoke" info --json 2>/dev/null | grep -q '"distributed": *true' || skip "a build without Gloo"
  setup
  STOKE_DIST_TIMEOUT=5 "$stoke" train --nproc 2 --data "$work/d" --out "$work/h.stoke" --epochs 100000 \
    --size 16 --batch 4 --arch plain >/dev/null 2>"$work/err" &
  pid=$!
  cleanup_pids="$pid"
  for _ in $(seq 1 600); do grep -q '^train ' "$work/err" 2>/dev/null && break; sleep 0.1; done
  grep -q '^train ' "$work/err" || { cat "$work/err"; fail "the ranks never started training"; }
  hung=""
  for r in $(pgrep -P $pid); do
    tr '\0' '\n' <"/proc/$r/environ" | grep -qx 'RANK=1' && hung=$r
  done
  test -n "$hung" || fail "no rank 1 under the launcher"
  cleanup_pids="$pid $hung"
  kill -STOP "$hung"  # hangs: alive, connections open, never answers
  start=$(date +%s%N)
  wait $pid
  rc=$?
  seconds=$((($(date +%s%N) - start) / 1000000000))
  echo "launcher ended ${seconds} s after rank 1 hung (status $rc)"
  test "$rc" -ne 0 && test "$rc" -lt 124 || { cat "$work/err"; fail "status $rc"; }
  # STOKE_DIST_TIMEOUT 5 s for rank 0 to give up, 3 s for the launcher, 4 s of margin.
  test "$seconds" -le 12 || { cat "$work/err"; fail "the hung rank was stopped only after ${seconds} s"; }
  grep -q "no answer from rank 1 (127.0.0.1 on [^,]*, pid $hung)" "$work/err" \
    || { cat "$work/err"; fail "rank 0's error does not name the hung rank 1 and its address"; }
  grep -q "killing rank 1 (pid $hung)" "$work/err" || { cat "$work/err"; fail "the launcher does not name rank 1"; }
  ! kill -0 "$hung" 2>/dev/null || fail "the hung rank $hung still runs"
}

case_address_space_limit() {  # item 4: out of memory under ulimit -v is a message, never a hang
  skip_oom_under_asan
  setup
  img=$(find "$work/d" -type f | head -1)
  (ulimit -v 400000 && true) 2>/dev/null || skip "this machine refuses ulimit -v"
  for limit in 1300000 1000000 800000 600000; do
    (ulimit -v $limit && timeout -k 5 60 "$stoke" predict --model "$work/m.stoke" "$img") \
      >"$work/out" 2>"$work/err"
    rc=$?
    if [ "$rc" -ne 0 ]; then
      expect_clean_failure "predict under ulimit -v $limit"
      grep -qi 'out of memory' "$work/err" || { cat "$work/err"; fail "ulimit -v $limit: no out-of-memory message"; }
    fi
    for batch in 4 auto; do
      (ulimit -v $limit && timeout -k 5 120 "$stoke" train --data "$work/d" --out "$work/l.stoke" --epochs 1 \
        --size 32 --batch $batch) >"$work/out" 2>"$work/err"
      rc=$?
      # 0: it fit; 130: the documented back-off stopped with its checkpoint; 1: a message.
      case $rc in
        0 | 130) ;;
        1) grep -qi 'out of memory\|stoke train' "$work/err" || { cat "$work/err"; fail "train $limit/$batch: no message"; } ;;
        *) cat "$work/err"; fail "train --batch $batch under ulimit -v $limit: status $rc (crash, signal or hang)" ;;
      esac
    done
  done
}

case_dist_store_not_created() {  # item 20: STOKE_DIST_STORE=file:DIR makes no chain of folders
  "$stoke" info --json 2>/dev/null | grep -q '"distributed": *true' || skip "a build without Gloo"
  setup
  RANK=0 WORLD_SIZE=2 STOKE_DIST_TIMEOUT=5 STOKE_DIST_STORE=file:$work/no/such/store \
    run "$stoke" train --data "$work/d" --out "$work/ds.stoke" "${T[@]}"
  expect_clean_failure "a store under folders that do not exist"
  grep -q 'does not exist' "$work/err" || { cat "$work/err"; fail "message"; }
  test ! -e "$work/no" || fail "STOKE_DIST_STORE created $work/no"
}

case_model_without_training_images() {  # item 20: a model file that embeds no training data
  setup
  run "$stoke" train --data "$work/d" --out "$work/private.stoke" "${T[@]}" --no-reference-images
  test "$rc" -eq 0 || { cat "$work/err"; fail "--no-reference-images: status $rc"; }
  ! grep -a -q "$work/d" "$work/private.stoke" || fail "the model file names the dataset folder"
  grep -a -q "$work/d" "$work/m.stoke" || fail "the default model file should name its dataset (the test is blind)"
  run "$stoke" predict --model "$work/private.stoke" "$(find "$work/d" -type f | head -1)"
  test "$rc" -eq 0 && grep -q 'self-check skipped' "$work/err" || { cat "$work/err"; fail "predict of the private model"; }
}

"case_$case_name"
echo "PASS: $case_name"
