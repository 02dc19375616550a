#!/usr/bin/env bash
# The Debian packages (docs/packaging.md) of the already-built ./build (or
# $STOKE_BUILD_DIR), checked as a line PC would use them: CPack writes the
# .debs, apt-get installs them, the consumer example (tests/install/consumer)
# is built against the installed files with CMake (find_package(stoke)) and
# with pkg-config, both binaries and the installed `stoke` run, and the
# packages are purged again, on failure too, so the machine is left as it was.
# Does not rebuild the library. Runs apt-get as root, or through sudo.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${STOKE_BUILD_DIR:-build}
src=$PWD/tests/install/consumer
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
fail() { echo "package: FAIL: $*" >&2; exit 1; }
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "ok installed"; }

[ -f "$dir/CPackConfig.cmake" ] || fail "$dir/CPackConfig.cmake missing: build first (.ci/build.sh)"
dir=$(cd "$dir" && pwd)
tmp=$(mktemp -d)
names=()
cleanup() {
  local status=$? present=()
  for name in "${names[@]}"; do
    if installed "$name"; then present+=("$name"); fi
  done
  if [ ${#present[@]} -gt 0 ]; then
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq "${present[@]}" >"$tmp/purge.log" ||
      { cat "$tmp/purge.log"; status=1; }
    for name in "${present[@]}"; do
      if installed "$name"; then echo "package: FAIL: $name still installed" >&2; status=1; fi
    done
  fi
  rm -rf "$tmp"
  exit $status
}
trap cleanup EXIT

# 1. The packages.
rm -rf "$dir/packages"
cpack -G DEB --config "$dir/CPackConfig.cmake" >"$tmp/cpack.log" 2>&1 ||
  { cat "$tmp/cpack.log"; fail "cpack"; }
debs=("$dir"/packages/*.deb)
[ -f "${debs[0]}" ] || { cat "$tmp/cpack.log"; fail "cpack wrote no .deb into $dir/packages"; }
for deb in "${debs[@]}"; do
  name=$(dpkg-deb -f "$deb" Package)
  # Refuse to touch a stoke package someone installed: purging it afterwards
  # would not leave the machine as it was.
  if installed "$name"; then fail "$name is already installed; remove it first"; fi
  names+=("$name")
  echo "package: $(basename "$deb"): $(dpkg-deb -f "$deb" Depends)"
done
for name in libstoke libstoke-dev stoke-tools; do
  [[ " ${names[*]} " == *" $name "* ]] || fail "no $name package"
done
# Every file a plain `cmake --install` installs is in a package (an install
# rule without a COMPONENT would be in none).
cmake --install "$dir" --prefix "$tmp/all" >/dev/null
(cd "$tmp/all" && find . ! -type d | sed 's|^\./||' | sort) >"$tmp/installed.txt"
for deb in "${debs[@]}"; do dpkg-deb -c "$deb"; done | awk '$1 !~ /^d/ {print $6}' |
  sed 's|^\./usr/||' | grep -v '^share/doc/[^/]*/copyright$' | sort >"$tmp/packaged.txt"
diff "$tmp/installed.txt" "$tmp/packaged.txt" >"$tmp/files.diff" ||
  { cat "$tmp/files.diff"; fail "cmake --install (<) and the packages (>) hold different files"; }

# 2. Installed with their dependencies, as on a line PC.
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${debs[@]}" \
  >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; fail "apt-get install"; }
libdir=$(dirname "$(dpkg -L libstoke | grep -m1 '/libstoke\.so\.')")

# 2b. Every library an installed binary links that a Debian package owns is
#     in that package's Depends (dpkg-shlibdeps skips what it has no
#     information on; CUDA from NVIDIA's .run installer has no owner).
check_depends() {  # package
  local depends file so path owner
  depends=" $(dpkg-query -W -f='${Depends}' "$1" | tr ',|' '\n\n' | sed 's/^ *//; s/[ (].*//' | tr '\n' ' ') "
  while read -r file; do
    [ -f "$file" ] && [ ! -L "$file" ] || continue
    for so in $(readelf -d "$file" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
      path=$(ldd "$file" | awk -v so="$so" '$1 == so && $3 ~ /^\// {print $3}')
      [ -n "$path" ] || continue
      owner=$( (dpkg -S "$path" 2>/dev/null || dpkg -S "$(readlink -f "$path")" 2>/dev/null) | head -1 | cut -d: -f1) ||
        true
      [ -z "$owner" ] || [ "$owner" = "$1" ] || [[ "$depends" == *" $owner "* ]] ||
        fail "$1: $file links $so ($path, package $owner), which is not in Depends:$depends"
    done
  done < <(dpkg -L "$1")
}
for name in "${names[@]}"; do check_depends "$name"; done

# 3. The consumer with find_package(stoke): the installed package, not a build tree.
cmake -S "$src" -B "$tmp/cmake" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF >"$tmp/configure.log" ||
  { cat "$tmp/configure.log"; fail "consumer configure (find_package(stoke))"; }
grep -qx "stoke_DIR:PATH=$libdir/cmake/stoke" "$tmp/cmake/CMakeCache.txt" ||
  fail "find_package(stoke) did not find $libdir/cmake/stoke: $(grep '^stoke_DIR' "$tmp/cmake/CMakeCache.txt")"
cmake --build "$tmp/cmake" >"$tmp/build.log" || { cat "$tmp/build.log"; fail "consumer build (CMake)"; }

# 4. The same consumer with pkg-config.
flags=$(pkg-config --cflags --libs stoke) || fail "pkg-config stoke"
echo "package: pkg-config --cflags --libs stoke: $flags"
# shellcheck disable=SC2086  # the flags are words
g++ -std=c++20 "$src/main.cpp" $flags -o "$tmp/consumer-pc" || fail "consumer build (pkg-config)"

# 5. Both run against the installed libstoke (and the installed plugin, where
#    there is one: it loads, or says why not, and the run falls back to the CPU).
want=$(readlink -f "$libdir"/libstoke.so.*.*.*)
for program in "$tmp/cmake/consumer" "$tmp/consumer-pc"; do
  got=$(ldd "$program" | awk '$1 ~ /^libstoke\.so/ {print $3}')
  [ -n "$got" ] && [ "$(readlink -f "$got")" = "$want" ] ||
    fail "$program does not load the installed $want: $(ldd "$program" | grep libstoke)"
  env -u LD_LIBRARY_PATH "$program" || fail "$program"
done
command -v stoke >/dev/null || fail "no stoke command on PATH"
stoke --version || fail "stoke --version"
stoke-info >"$tmp/info.txt" 2>&1 || { cat "$tmp/info.txt"; fail "stoke-info"; }
grep -q "selected device" "$tmp/info.txt" || { cat "$tmp/info.txt"; fail "stoke-info printed no device"; }
# The installed libstoke finds the installed plugin beside itself.
if [[ " ${names[*]} " == *" libstoke-cuda "* ]]; then
  # Where it looked (--json: also where the plugin was not opened, as on a machine
  # without a CUDA driver).
  plugin=$(stoke-info --json 2>/dev/null | grep -o '"plugin_path":"[^"]*"' | cut -d'"' -f4)
  [ -n "$plugin" ] && [ "$(readlink -f "$plugin")" = "$(readlink -f "$libdir/libstoke_cuda.so")" ] ||
    { cat "$tmp/info.txt"; fail "stoke-info did not look for the plugin at $libdir/libstoke_cuda.so"; }
fi
grep -E "^ +plugin |^selected device" "$tmp/info.txt" | sed 's/^ */package: stoke-info: /'
echo "package: PASS (${names[*]}; purged on exit)"
