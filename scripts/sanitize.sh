#!/usr/bin/env bash
# The tests under sanitizers, each sanitizer in a build of its own:
#   scripts/sanitize.sh address          every test under ASan and UBSan (build-asan/)
#   scripts/sanitize.sh address --quick  the threaded and memory-owning parts (ASAN_QUICK)
#   scripts/sanitize.sh thread           the threaded parts under TSan (build-tsan/): the
#                                        executor's, object store's and client's unit tests
#                                        and every end-to-end test
#   scripts/sanitize.sh thread --quick   the threaded parts' own tests (TSAN_QUICK)
# Builds only what the tests need, then runs them; extra arguments go to ctest (-R REGEX).
# ATOLL_BUILD_DIR overrides the build directory.
#
# The processes the tests start (a cluster's services, the CLI) are sanitized binaries too
# and inherit the options below. Every report goes to a file under <build>/sanitizer-reports/
# rather than to a log that no test shows, and the run fails when any such file exists,
# printing them: a service that hit a report fails the run even if its test passed.
set -euo pipefail
cd "$(dirname "$0")/.."
kind=${1:-}
shift || true
quick=0
if [ "${1:-}" = --quick ]; then
  quick=1
  shift
fi

# What each run builds and runs, by test binary (every test carries its binary's name as its
# label). The quick forms build only their binaries.
# ASan quick: the parts that own memory across threads and processes (the executor, the
# object store and its process, the client) and the RM's state file. The decoders are left
# to scripts/fuzz.sh, whose harnesses run them under ASan and UBSan on far more inputs, and
# the cluster end to end to the whole run: with it, the ASan build alone takes about 25 min.
ASAN_QUICK=(executor_unit_test objectstore_unit_test objectstore_process_test client_test
            state_file_test)
# TSan quick: the threaded parts' own tests (device streams, the outbox over real ZeroMQ, the
# store's timers); the whole TSan run adds every cluster test, whose services run sanitized.
TSAN_QUICK=(executor_unit_test objectstore_unit_test objectstore_process_test client_test)
TSAN_MORE=(public_api_test e2e_test e2e_elastic_test examples_e2e_test e2e_chaos_test
           e2e_metrics_test)

build_args=()
ctest_args=()
binaries=()
case "$kind" in
  address)
    build_dir=${ATOLL_BUILD_DIR:-build-asan}
    build_args+=(-DATOLL_BUILD_BENCH=OFF)
    if [ "$quick" = 1 ]; then binaries=("${ASAN_QUICK[@]}"); fi
    ;;
  thread)
    build_dir=${ATOLL_BUILD_DIR:-build-tsan}
    binaries=("${TSAN_QUICK[@]}")
    if [ "$quick" = 0 ]; then binaries+=("${TSAN_MORE[@]}"); fi
    ;;
  *)
    echo "usage: scripts/sanitize.sh address|thread [--quick] [ctest arguments]" >&2
    exit 2
    ;;
esac
if [ ${#binaries[@]} -gt 0 ]; then
  for binary in "${binaries[@]}"; do build_args+=(--target "$binary"); done
  labels=$(IFS='|'; echo "${binaries[*]}")
  ctest_args+=(-L "^($labels)\$")
fi

bash scripts/setup.sh
# -O1 and line tables only: the sanitizers' usual setting, and a quicker build.
ATOLL_BUILD_DIR=$build_dir bash scripts/build.sh -DATOLL_SANITIZE="$kind" \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" "${build_args[@]}"

reports=$PWD/$build_dir/sanitizer-reports
rm -rf "$reports"
mkdir -p "$reports"
suppressions=$PWD/scripts/sanitizers
# ASan stops at its first report anyway; UBSan is built not to recover (-fno-sanitize-recover)
# and told so again here; TSan goes on after a race so that one run shows them all, and the
# report files fail the run.
export ASAN_OPTIONS="log_path=$reports/report:halt_on_error=1:detect_leaks=1"
export LSAN_OPTIONS="suppressions=$suppressions/lsan.supp"
export UBSAN_OPTIONS="log_path=$reports/report:halt_on_error=1:print_stacktrace=1"
export TSAN_OPTIONS="log_path=$reports/report:halt_on_error=0:second_deadlock_stack=1:ignore_noninstrumented_modules=1:suppressions=$suppressions/tsan.supp"

status=0
ctest --test-dir "$build_dir" --output-on-failure --parallel "$(nproc)" --timeout 300 \
  "${ctest_args[@]}" "$@" || status=$?

found=$(find "$reports" -type f | sort)
if [ -n "$found" ]; then
  for report in $found; do
    echo "==== $report"
    cat "$report"
  done
  echo "sanitize.sh $kind: $(echo "$found" | wc -l) sanitizer report(s), above" >&2
  status=1
fi
exit "$status"
