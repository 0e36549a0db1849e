#!/usr/bin/env bash
# Configures and builds atoll into build/ (or $ATOLL_BUILD_DIR). Incremental after the first
# run. Extra arguments go to cmake's configure step, e.g. -DATOLL_SANITIZE=ON.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${ATOLL_BUILD_DIR:-build}
generator=()
command -v ninja >/dev/null && [ ! -f "$build_dir/Makefile" ] && generator=(-G Ninja)
cmake -S . -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
cmake --build "$build_dir" --parallel "$(nproc)"
