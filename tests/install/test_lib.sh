# Shell helpers of stoke's command-line tests (sourced, not run):
#   fail MSG          prints FAIL: MSG, exits 1
#   skip MSG          prints SKIP: MSG, exits 77 (CTest's SKIP_RETURN_CODE)
#   skip_under_asan BINARY WHY
#                     skips with WHY when BINARY links AddressSanitizer's runtime
#   json_field KEY    the value of a top-level key of the JSON object on stdin
fail() {
  echo "FAIL: $*"
  exit 1
}
skip() {
  echo "SKIP: $*"
  exit 77
}
# (grep reads all of ldd's output: with `grep -q` under pipefail, ldd could
# die of SIGPIPE after the match and the check read as "no ASan".)
skip_under_asan() {
  local libs
  libs=$(ldd "$1" 2>/dev/null || true)
  if grep -q libasan <<<"$libs"; then skip "an AddressSanitizer build: $2"; fi
}
json_field() {
  python3 -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"
}
