#!/usr/bin/env bash
# run.sh MODE TOOL WORKDIR [ARG...]: the interchange checks against the Python reference
# packages. MODE export: stoke's ONNX files in ONNX Runtime; import: onnx- and
# numpy-generated torchvision-style files into stoke; anomaly_export: stoke's
# anomaly models (PatchCore, PaDiM) exported and run in ONNX Runtime; torchvision: a real
# torchvision export (needs PyTorch where python3 runs; skips otherwise);
# segment_export: a segmentation model file through `stoke export` (ARG: the stoke command);
# deploy_import: `stoke import` of a torchvision export run by `stoke predict`
# (TOOL is then the stoke command; PyTorch as for torchvision); int8_qdq: an int8
# model file's QDQ export in ONNX Runtime (TOOL the stoke command, then int8_qdq_tool);
# fp16: stoke export --fp16 in ONNX Runtime (the same arguments as int8_qdq).
# The virtual environment is made once and reused: $STOKE_PY_CACHE
# (default ~/.cache/stoke)/venv-onnx. Exit 77 = skipped, with the reason printed.
set -euo pipefail
mode=$1 tool=$2 work=$3
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work" && mkdir -p "$work"

if [[ $mode == torchvision || $mode == deploy_import ]]; then
  # Debian's python3-torch and python3-torchvision are enough (no onnx package needed).
  py=${STOKE_TORCH_PYTHON:-/usr/bin/python3}
  if ! "$py" -c 'import torch, torchvision, numpy' 2>/dev/null; then
    echo "SKIP: $py cannot import torch, torchvision and numpy (install python3-torchvision, or set STOKE_TORCH_PYTHON)"
    exit 77
  fi
  exec "$py" "$here/${mode}_check.py" "$tool" "$work"
fi

cache=${STOKE_PY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/stoke}
venv=$cache/venv-onnx
stamp=$venv/.stoke-ready-1
if [[ ! -f $stamp ]]; then
  mkdir -p "$cache"
  rm -rf "$venv"
  if ! python3 -m venv "$venv" >"$work/venv.log" 2>&1; then
    cat "$work/venv.log"
    echo "SKIP: python3 -m venv failed (install python3-venv: .ci/install-deps.sh)"
    exit 77
  fi
  if ! "$venv/bin/pip" install --disable-pip-version-check -q numpy onnx onnxruntime >>"$work/venv.log" 2>&1; then
    tail -5 "$work/venv.log"
    echo "SKIP: pip could not install numpy, onnx and onnxruntime (no network to PyPI?)"
    exit 77
  fi
  touch "$stamp"
fi
exec "$venv/bin/python" "$here/${mode}_check.py" "$tool" "$work" "${@:4}"
