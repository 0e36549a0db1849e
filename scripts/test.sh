#!/usr/bin/env bash
# The whole test suite on a fresh machine: installs dependencies, builds everything with
# warnings as errors, and runs every test (unit, protocol, and end-to-end tests that start
# real service processes on loopback with free ports).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
build_dir=${ATOLL_BUILD_DIR:-build}
status=0
ctest --test-dir "$build_dir" --output-on-failure --parallel "$(nproc)" --timeout 300 || status=$?
# A skipped test says why on a line "SKIP: ..."; ctest only says that it was skipped.
awk '/^[0-9]+\/[0-9]+ Testing: / { test = $3 } /^SKIP: / { print "skipped " test ": " substr($0, 7) }' \
  "$build_dir/Testing/Temporary/LastTest.log"
exit $status
