#!/usr/bin/env bash
# Configures and builds atoll into build/ (or $ATOLL_BUILD_DIR), always with the same
# configuration (RelWithDebInfo, warnings as errors), so that scripts/demo.sh and
# scripts/test.sh share one build: whatever one built, the other reuses. Incremental after
# the first run.
#   scripts/build.sh                       everything (services, CLI, tests, benchmarks)
#   scripts/build.sh --target atoll ...    only the named targets
#   scripts/build.sh -DATOLL_SANITIZE=ON   extra cmake settings (use another build dir)
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${ATOLL_BUILD_DIR:-build}
configure=()
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --target) targets+=(--target "$2"); shift 2 ;;
    *) configure+=("$1"); shift ;;
  esac
done
generator=()
command -v ninja >/dev/null && [ ! -f "$build_dir/Makefile" ] && generator=(-G Ninja)
launcher=()
# ccache with paths taken relative to the checkout and the build directory's own path left
# out of the hash, so that another build directory beside build/ (the wheel's, build-wheel/:
# tests/install/pip_install_test.sh) or another checkout reuses the objects compiled here.
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
fi
# Debug information as line tables only (-g1): backtraces, perf and sanitizer reports still
# name file and line, and the build takes about a third less time than with -g's full
# information (locals and types, mostly "optimized out" at -O2 anyway). For a debugger's
# view of variables: -DCMAKE_BUILD_TYPE=Debug in a build directory of its own. Settings
# given to this script come after these, so theirs win.
cmake -S . -B "$build_dir" "${generator[@]}" "${launcher[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DATOLL_WERROR=ON "${configure[@]}" \
  >/dev/null
cmake --build "$build_dir" --parallel "$(nproc)" "${targets[@]}"
