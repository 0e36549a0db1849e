#!/usr/bin/env bash
# The whole test suite on a fresh machine: installs dependencies, builds everything with
# warnings as errors, and runs every test (unit, protocol, and end-to-end tests that start
# real service processes on loopback with free ports).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
build_dir=${ATOLL_BUILD_DIR:-build}
ctest --test-dir "$build_dir" --output-on-failure --parallel "$(nproc)" --timeout 300
