#!/usr/bin/env bash
# run.sh TOOL WORKDIR: the U-Net segmentation model against PyTorch (parity.py). Needs
# PyTorch and numpy where python3 runs (Debian's python3-torch; or
# STOKE_TORCH_PYTHON naming a python that has them). Exit 77 = skipped, with the reason.
set -euo pipefail
tool=$1 work=$2
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work" && mkdir -p "$work"
py=${STOKE_TORCH_PYTHON:-/usr/bin/python3}
if ! "$py" -c 'import torch, numpy' 2>/dev/null; then
  echo "SKIP: $py cannot import torch and numpy (install python3-torch, or set STOKE_TORCH_PYTHON)"
  exit 77
fi
exec "$py" "$here/parity.py" "$tool" "$work"
