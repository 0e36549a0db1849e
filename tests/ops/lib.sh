# Shared by the tests/ops shell tests (sourced): a cluster of the test's own (free ports,
# own state dir under a temporary directory), stopped and removed on exit whatever happens.
# Needs ATOLL_BIN_DIR and ATOLL_SOURCE_DIR (set by CTest, see CMakeLists.txt).
set -euo pipefail
: "${ATOLL_BIN_DIR:?set ATOLL_BIN_DIR to the bin dir of a build}"
: "${ATOLL_SOURCE_DIR:?set ATOLL_SOURCE_DIR to the source tree}"
atoll="$ATOLL_BIN_DIR/atoll"
work=$(mktemp -d "${TMPDIR:-/tmp}/atoll-ops-XXXXXX")
export ATOLL_HOME="$work/state"
unset ATOLL_RM ATOLL_EVENTS
cleanups=()

cleanup() {
  local status=$?
  for ((i = ${#cleanups[@]} - 1; i >= 0; i--)); do eval "${cleanups[$i]}" >/dev/null 2>&1 || true; done
  "$atoll" down >/dev/null 2>&1 || true
  if [ $status -ne 0 ] && [ $status -ne 77 ] && [ -d "$ATOLL_HOME/logs" ]; then
    for log in "$ATOLL_HOME"/logs/*.log; do
      echo "--- last lines of $log"
      tail -n 5 "$log"
    done
  fi
  rm -rf "$work"
}
trap cleanup EXIT

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

skip() {
  echo "SKIP: $*"
  exit 77
}

# Starts the cluster of tests/ops/ops_cluster.toml (1 island, 2 hosts x 2 cpu devices).
start_cluster() {
  "$atoll" up --config "$ATOLL_SOURCE_DIR/tests/ops/ops_cluster.toml" \
    --bin-dir "$ATOLL_BIN_DIR" >"$work/up.log" 2>&1 || { cat "$work/up.log"; fail "atoll up"; }
}

# Starts `atoll dashboard` on a free loopback port, pushing every $1 ms, and sets $url once
# it serves (bounded: 10 s).
start_dashboard() {
  "$atoll" dashboard --listen 127.0.0.1:0 --push-interval-ms "$1" >"$work/dashboard.out" \
    2>"$work/dashboard.err" &
  cleanups+=("kill $!")
  local deadline=$((SECONDS + 10))
  until url=$(grep -so 'http://[^ ]*/' "$work/dashboard.out"); do
    [ $SECONDS -lt $deadline ] || { cat "$work/dashboard.err"; fail "the dashboard did not start"; }
    sleep 0.1
  done
}

# Runs examples/spin.toml for STEPS steps in the background as client NAME (its stdout and
# stderr go to $work/NAME.out and .err); the job is killed on exit.
start_spin_job() {
  local name=$1 steps=$2
  sed "s/^name = \"spin\"/name = \"$name\"/" "$ATOLL_SOURCE_DIR/examples/spin.toml" >"$work/$name.toml"
  "$atoll" submit --steps "$steps" --timeout-s 30 "$work/$name.toml" >"$work/$name.out" \
    2>"$work/$name.err" &
  cleanups+=("kill $!")
}
