#!/usr/bin/env bash
# Every C++/CUDA source of the tree is as the committed .clang-format writes it.
#   tests/format/check_format.sh <source root> [clang-format binary]
# Prints where files differ (file:line and the line); exits 1 if any does.
# The formatter is pinned to one major version (Debian 12's clang-format-14): another
# version formats some constructs differently, which is not a style violation.
set -euo pipefail
root=$1
tool=${2:-clang-format-14}
command -v "$tool" >/dev/null || { echo "check_format: $tool not found (install clang-format-14)"; exit 1; }
cd "$root"
mapfile -t files < <(find include lib tools tests bench examples \
  \( -name '*.c' -o -name '*.cpp' -o -name '*.hpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) -type f | sort)
[ ${#files[@]} -gt 0 ] || { echo "check_format: no sources under $root"; exit 1; }
# One process for the whole tree; each difference is reported with its file and line.
if "$tool" --style=file --dry-run --Werror "${files[@]}" 2>"${TMPDIR:-/tmp}/check_format.$$"; then
  rm -f "${TMPDIR:-/tmp}/check_format.$$"
  echo "check_format: ${#files[@]} files, all formatted"
  exit 0
fi
head -40 "${TMPDIR:-/tmp}/check_format.$$"
bad=$( (grep -oE '^[^:]+:[0-9]+:[0-9]+: error' "${TMPDIR:-/tmp}/check_format.$$" || true) | cut -d: -f1 | sort -u | wc -l)
rm -f "${TMPDIR:-/tmp}/check_format.$$"
echo "check_format: ${#files[@]} files, $bad not formatted (fix: $tool -i <file>)"
exit 1
