#!/usr/bin/env bash
# CTest (any machine with a CUDA build): the plugin's link hygiene.
# - it exports stoke_cuda_plugin and nothing else (internal symbols hidden);
# - its RUNPATH has no empty entry (which would search the current directory);
# - its link line has no -lcudart_static (cudart is linked shared).
#   usage: plugin_link_test.sh <libstoke_cuda.so> <build-dir>
set -uo pipefail
plugin=$1
build=$2
fail() { echo "FAIL: $*"; exit 1; }
[ -f "$plugin" ] || fail "no plugin at $plugin"
exports=$(nm -D --defined-only "$plugin" | awk '$2 ~ /^[TDBRVWiu]$/ {print $3}' | grep -vxE '_init|_fini' | sort)
[ "$exports" = "stoke_cuda_plugin" ] ||
  fail "exports $(wc -l <<<"$exports") symbols, expected only stoke_cuda_plugin: $(head -5 <<<"$exports" | tr '\n' ' ')"
runpath=$(readelf -d "$plugin" | sed -n 's/.*R\(UN\)\{0,1\}PATH.*\[\(.*\)\]/\2/p')
case ":$runpath:" in *::*) fail "empty entry in the RUNPATH '$runpath'" ;; esac
if [ -f "$build/build.ninja" ]; then
  line=$(grep -A6 '^build lib/libstoke_cuda.so:' "$build/build.ninja" | grep 'LINK_LIBRARIES')
  [ -n "$line" ] || fail "no link line for the plugin in build.ninja"
  ! grep -q 'cudart_static' <<<"$line" || fail "the plugin's link line has -lcudart_static"
fi
echo "plugin exports only stoke_cuda_plugin; RUNPATH '$runpath'"
