# Shell helpers of stoke's command-line tests (sourced, not run):
#   fail MSG          prints FAIL: MSG, exits 1
#   skip MSG          prints SKIP: MSG, exits 77 (CTest's SKIP_RETURN_CODE)
#   skip_under_asan BINARY WHY
#                     skips with WHY when BINARY links AddressSanitizer's runtime
fail() {
  echo "FAIL: $*"
  exit 1
}
skip() {
  echo "SKIP: $*"
  exit 77
}
skip_under_asan() {
  if ldd "$1" 2>/dev/null | grep -q libasan; then skip "an AddressSanitizer build: $2"; fi
}
