#!/usr/bin/env bash
# Installs the build tree into a temporary prefix and builds a small consumer
# project against it with find_package(stoke), and the same main.cpp with
# pkg-config (stoke.pc, found from its own folder), then runs both.
#   usage: consumer_test.sh BUILD_DIR CONSUMER_SOURCE CMAKE CXX [CXX_FLAGS LINKER_FLAGS]
# (the flags carry sanitizer options into the consumer build)
set -euo pipefail
build=$1 src=$2 cmake=$3 cxx=$4 cxx_flags=${5:-} linker_flags=${6:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$cmake" --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log"
"$cmake" -S "$src" -B "$tmp/build" -DCMAKE_PREFIX_PATH="$tmp/prefix" \
  -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_CXX_FLAGS="$cxx_flags" \
  -DCMAKE_EXE_LINKER_FLAGS="$linker_flags" >"$tmp/configure.log" || { cat "$tmp/configure.log"; exit 1; }
"$cmake" --build "$tmp/build" >"$tmp/build.log" || { cat "$tmp/build.log"; exit 1; }
STOKE_CUDA_PLUGIN=off "$tmp/build/consumer"
# PKG_CONFIG_LIBDIR: only the temporary prefix, never an installed stoke.pc.
pcdir=$(dirname "$(find "$tmp/prefix" -name stoke.pc)")
pc_flags=$(PKG_CONFIG_LIBDIR="$pcdir" pkg-config --cflags --libs stoke)
# shellcheck disable=SC2086  # the flags are words
"$cxx" -std=c++20 $cxx_flags "$src/main.cpp" $pc_flags $linker_flags -o "$tmp/consumer-pc" ||
  { echo "pkg-config --cflags --libs stoke: $pc_flags"; exit 1; }
STOKE_CUDA_PLUGIN=off LD_LIBRARY_PATH="$(PKG_CONFIG_LIBDIR="$pcdir" pkg-config --variable=libdir stoke)" \
  "$tmp/consumer-pc"
