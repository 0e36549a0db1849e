#!/usr/bin/env bash
# Opens `atoll dashboard` in headless Chromium (Debian's /usr/bin/chromium, driven by
# playwright for Python from the venv: browser/dashboard_test.py) while two clients run jobs on the same devices, and checks that
# devices, programs and the gang timeline appear and update, with both clients told apart.
# Saves a screenshot to $ATOLL_DASHBOARD_SCREENSHOT (docs/dashboard.png is made this way).
# Skipped (exit 77) only when chromium is not installed.
source "$(dirname "$0")/lib.sh"
chromium=${ATOLL_CHROMIUM:-/usr/bin/chromium}
[ -x "$chromium" ] || skip "chromium is not installed ($chromium; scripts/setup.sh installs Debian's)"
browser_dir="$ATOLL_SOURCE_DIR/tests/ops/browser"
python=${ATOLL_PYTHON:-python3}
"$python" -c "import playwright" 2>/dev/null ||
  fail "$python has no playwright: run scripts/setup.sh (it installs requirements.lock into .venv)"

start_cluster
start_dashboard 300
echo "dashboard at $url"

start_spin_job alpha 100000
start_spin_job beta 100000

ATOLL_CHROMIUM="$chromium" "$python" "$browser_dir/dashboard_test.py" "$url" \
  "${ATOLL_DASHBOARD_SCREENSHOT:-$work/dashboard.png}" || fail "the browser checks failed"
for job in alpha beta; do
  ! grep -q "atoll:" "$work/$job.err" || fail "job $job: $(cat "$work/$job.err")"
done
echo "PASS"
