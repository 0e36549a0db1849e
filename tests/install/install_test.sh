#!/usr/bin/env bash
# install_test.sh BUILD_DIR CONSUMER_DIR CXX: installs BUILD_DIR's client library into a
# temporary prefix, then builds CONSUMER_DIR's program against that tree twice, with CMake
# (find_package(atoll)) and with pkg-config, and runs both. The installed tree must hold
# nothing from the source or build tree: the build trees are removed before each run.
set -euo pipefail
build=$1 consumer=$2 cxx=$3
work=$(mktemp -d /tmp/atoll-install-XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$work/prefix" >"$work/install.log" || {
  cat "$work/install.log"; fail "cmake --install"; }
for f in include/atoll/client.h include/atoll/unary_ops.def; do
  [ -f "$work/prefix/$f" ] || fail "$f not installed"
done
lib=$(find "$work/prefix" -name libatoll.so -print -quit)
[ -n "$lib" ] || fail "libatoll.so not installed"
libdir=$(dirname "$lib")
[ -f "$libdir/cmake/atoll/atollConfig.cmake" ] || fail "no CMake package in $libdir/cmake/atoll"
[ -f "$libdir/pkgconfig/atoll.pc" ] || fail "no atoll.pc in $libdir/pkgconfig"
# Moved after installing: both the package and the .pc file find the tree where it is.
mv "$work/prefix" "$work/moved"
libdir=${libdir/$work\/prefix/$work\/moved}

echo "== CMake: find_package(atoll)"
cmake -S "$consumer" -B "$work/cmake-build" -DCMAKE_PREFIX_PATH="$work/moved" \
  -DCMAKE_CXX_COMPILER="$cxx" >"$work/configure.log" || {
  cat "$work/configure.log"; fail "configuring the consumer"; }
cmake --build "$work/cmake-build" >"$work/build.log" || { cat "$work/build.log"; fail "building"; }
LD_LIBRARY_PATH="$libdir" "$work/cmake-build/consumer" || fail "the CMake-built consumer"

echo "== pkg-config"
export PKG_CONFIG_PATH="$libdir/pkgconfig"
# shellcheck disable=SC2046
"$cxx" -o "$work/consumer-pc" "$consumer/main.cc" $(pkg-config --cflags --libs atoll) ||
  fail "building with pkg-config --cflags --libs atoll"
LD_LIBRARY_PATH="$libdir" "$work/consumer-pc" || fail "the pkg-config-built consumer"
echo "PASS"
