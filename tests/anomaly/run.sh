#!/usr/bin/env bash
# run.sh TOOL WORKDIR [patchcore] [padim]: PatchCore and PaDiM parity with a
# PyTorch reference (parity.py; both methods without one named).
# Needs PyTorch and torchvision where python3 runs (Debian's python3-torch and
# python3-torchvision; or STOKE_TORCH_PYTHON naming a python that has them,
# anomalib too where it should be the reference). Exit 77 = skipped, with the
# reason printed.
set -euo pipefail
tool=$1 work=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work" && mkdir -p "$work"
py=${STOKE_TORCH_PYTHON:-/usr/bin/python3}
if ! "$py" -c 'import torch, torchvision, numpy' 2>/dev/null; then
  echo "SKIP: $py cannot import torch, torchvision and numpy (install python3-torchvision, or set STOKE_TORCH_PYTHON)"
  exit 77
fi
exec "$py" "$here/parity.py" "$tool" "$work" "$@"
