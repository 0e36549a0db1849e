#!/usr/bin/env bash
# The tests under sanitizers, each sanitizer in a build of its own:
#   scripts/sanitize.sh address          every test under ASan and UBSan (build-asan/)
#   scripts/sanitize.sh address --quick  the part of that CI runs: all but the long
#                                        end-to-end binaries (ASAN_LONG below)
#   scripts/sanitize.sh thread           the threaded parts under TSan (build-tsan/): the
#                                        executor's, object store's and client's unit tests
#                                        and every end-to-end test
#   scripts/sanitize.sh thread --quick   the part of that CI runs (see TSAN_QUICK below)
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

# The threaded parts, by test binary: every test of a binary carries its name as its label.
TSAN_QUICK=(executor_unit_test objectstore_unit_test objectstore_process_test client_test
            public_api_test e2e_test)
TSAN_MORE=(e2e_elastic_test examples_e2e_test e2e_chaos_test)
# The binaries whose tests take minutes even unsanitized: the whole ASan run only.
ASAN_LONG=(e2e_elastic_test examples_e2e_test e2e_chaos_test e2e_wire_fuzz_test)

build_args=()
ctest_args=()
case "$kind" in
  address)
    build_dir=${ATOLL_BUILD_DIR:-build-asan}
    build_args+=(-DATOLL_BUILD_BENCH=OFF)
    if [ "$quick" = 1 ]; then
      labels=$(IFS='|'; echo "${ASAN_LONG[*]}")
      ctest_args+=(-LE "^($labels)\$")
    fi
    ;;
  thread)
    build_dir=${ATOLL_BUILD_DIR:-build-tsan}
    binaries=("${TSAN_QUICK[@]}")
    [ "$quick" = 1 ] || binaries+=("${TSAN_MORE[@]}")
    for binary in "${binaries[@]}"; do build_args+=(--target "$binary"); done
    labels=$(IFS='|'; echo "${binaries[*]}")
    ctest_args+=(-L "^($labels)\$")
    ;;
  *)
    echo "usage: scripts/sanitize.sh address|thread [--quick] [ctest arguments]" >&2
    exit 2
    ;;
esac

bash scripts/setup.sh
# -O1 and line tables only: the sanitizers' usual setting, and a build CI can afford.
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
