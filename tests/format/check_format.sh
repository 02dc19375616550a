#!/usr/bin/env bash
# Every C++/CUDA source of the tree is as the committed .clang-format writes it.
#   tests/format/check_format.sh <source root> [clang-format binary]
# Prints each file that differs (and the first lines of the difference); exits 1 if any does.
# The formatter is pinned to one major version (Debian 12's clang-format-14): another
# version formats some constructs differently, which is not a style violation.
set -euo pipefail
root=$1
tool=${2:-clang-format-14}
command -v "$tool" >/dev/null || { echo "check_format: $tool not found (install clang-format-14)"; exit 1; }
cd "$root"
mapfile -t files < <(find include lib tools tests bench examples \
  \( -name '*.cpp' -o -name '*.hpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) -type f | sort)
[ ${#files[@]} -gt 0 ] || { echo "check_format: no sources under $root"; exit 1; }
bad=0
for f in "${files[@]}"; do
  if ! "$tool" --style=file "$f" | cmp -s - "$f"; then
    echo "not formatted: $f"
    "$tool" --style=file "$f" | diff -u "$f" - | head -12 || true
    bad=$((bad + 1))
  fi
done
echo "check_format: ${#files[@]} files, $bad not formatted (fix: $tool -i <file>)"
[ "$bad" -eq 0 ]
