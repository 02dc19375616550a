#!/usr/bin/env bash
# anomalib_run.sh TOOL WORKDIR patchcore|padim: PatchCore or PaDiM parity with
# anomalib 2.7 itself (anomalib_parity.py). The Python is STOKE_ANOMALIB_PYTHON
# where set (a python that imports anomalib 2.7.0, torch and torchvision), else a
# virtual environment made once and reused:
# ${STOKE_PY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/stoke}/venv-anomalib
# (`pip install anomalib==2.7.0`: about 4 minutes and 6 GB the first time; a lock
# keeps two tests from installing it at once). Exit 77 = skipped, with the
# reason printed.
set -euo pipefail
tool=$1 work=$2 method=$3
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work" && mkdir -p "$work"
check='import anomalib, torch, torchvision, numpy; assert anomalib.__version__ == "2.7.0", anomalib.__version__'

if [[ -n ${STOKE_ANOMALIB_PYTHON:-} ]]; then
  py=$STOKE_ANOMALIB_PYTHON
  if ! "$py" -c "$check" >"$work/import.log" 2>&1; then
    tail -3 "$work/import.log"
    echo "SKIP: STOKE_ANOMALIB_PYTHON=$py cannot import anomalib 2.7.0, torch, torchvision and numpy"
    exit 77
  fi
else
  cache=${STOKE_PY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/stoke}
  venv=$cache/venv-anomalib
  stamp=$venv/.stoke-ready-anomalib-2.7.0
  if ! mkdir -p "$cache" || ! command -v flock >/dev/null; then
    echo "SKIP: cannot create $cache or flock is missing (util-linux)"
    exit 77
  fi
  exec 9>"$cache/venv-anomalib.lock"
  flock 9  # the other anomalib test may be installing the environment
  if [[ ! -f $stamp ]]; then
    rm -rf "$venv"
    echo "installing anomalib 2.7.0 into $venv (once; minutes, about 6 GB)"
    if ! python3 -m venv "$venv" >"$work/venv.log" 2>&1; then
      cat "$work/venv.log"
      echo "SKIP: python3 -m venv failed (install python3-venv: .ci/install-deps.sh)"
      exit 77
    fi
    if ! "$venv/bin/pip" install --disable-pip-version-check -q anomalib==2.7.0 >>"$work/venv.log" 2>&1; then
      tail -5 "$work/venv.log"
      echo "SKIP: pip could not install anomalib==2.7.0 (no network to PyPI, or no disk space?)"
      exit 77
    fi
    if ! "$venv/bin/python" -c "$check" >>"$work/venv.log" 2>&1; then
      tail -5 "$work/venv.log"
      echo "SKIP: anomalib 2.7.0 installed but does not import with torch, torchvision and numpy"
      exit 77
    fi
    touch "$stamp"
  fi
  flock -u 9
  py=$venv/bin/python
fi
# anomalib and timm warn about deprecations on import; the checks print what matters.
PYTHONWARNINGS=ignore exec "$py" "$here/anomalib_parity.py" "$tool" "$work" "$method"
