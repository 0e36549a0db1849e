#!/usr/bin/env bash
# Drives `atoll top` in a real terminal (tmux) while a job runs, and reads the screen: the
# job's devices appear busy (non-zero %), its client and running program are listed, and
# `q` quits. Then `atoll submit` of a multi-step job in a terminal draws its progress line.
source "$(dirname "$0")/lib.sh"
command -v tmux >/dev/null || skip "tmux is not installed (scripts/setup.sh installs it)"

start_cluster

sock="$work/tmux.sock"
tmux_() { tmux -S "$sock" "$@"; }
cleanups+=("tmux -S '$sock' kill-server")
# The shell prints top's exit status once top gave the terminal back: read from the screen,
# it does not depend on when tmux reaps the process.
tmux_ new-session -d -s top -x 160 -y 48 \
  "ATOLL_HOME='$ATOLL_HOME' '$atoll' top --interval-ms 200 --status-interval-ms 500;
   echo \"top exit status \$?\"; sleep 60"
# top is up (and subscribed) once it drew the cluster; then the job starts.
deadline=$((SECONDS + 10))
until tmux_ capture-pane -p -t top | grep -q "device 3"; do
  [ $SECONDS -lt $deadline ] || { tmux_ capture-pane -p -t top; fail "atoll top did not start"; }
  sleep 0.1
done
start_spin_job top-job 100000

# Busy devices: lines "    device <id> cpu [####....]  NN%".
busy_devices() {
  sed -n 's/^ *device \([0-9]*\) .*\] *\([0-9]*\)%.*/\1 \2/p' <<<"$1" | awk '$2 > 0' | wc -l
}
deadline=$((SECONDS + 40))
while :; do
  screen=$(tmux_ capture-pane -p -t top)
  if [ "$(busy_devices "$screen")" -ge 4 ] && grep -q "top-job" <<<"$screen" &&
     grep -Eq "running|scheduled" <<<"$screen"; then
    break
  fi
  if [ $SECONDS -ge $deadline ]; then
    echo "$screen"
    echo "--- job stderr"; cat "$work/top-job.err"
    fail "atoll top did not show 4 busy devices, the client and its running program"
  fi
  sleep 0.3
done
echo "--- atoll top, as tmux shows it"
echo "$screen"
grep -q "island0" <<<"$screen" || fail "no island line"
grep -Eq "^  h0 +alive" <<<"$screen" || fail "no host line for h0"
grep -q "objects" <<<"$screen" || fail "no memory in use (store.stats) on the screen"

tmux_ send-keys -t top q
deadline=$((SECONDS + 10))
until screen=$(tmux_ capture-pane -p -t top) && grep -q "^top exit status" <<<"$screen"; do
  [ $SECONDS -lt $deadline ] || { echo "$screen"; fail "q did not quit atoll top"; }
  sleep 0.1
done
grep -q "^top exit status 0" <<<"$screen" || { echo "$screen"; fail "atoll top ended badly"; }

# A multi-step submit in a terminal: one progress line redrawn in place. (The pane is read
# while its shell still runs: tmux drops a dead pane's first line.)
tmux_ new-window -d -t top: -n submit \
  "ATOLL_HOME='$ATOLL_HOME' '$atoll' submit --steps 25 '$ATOLL_SOURCE_DIR/examples/spin.toml';
   echo \"exit status \$?\"; sleep 60"
deadline=$((SECONDS + 40))
until screen=$(tmux_ capture-pane -p -t top:submit) && grep -q "^exit status" <<<"$screen"; do
  [ $SECONDS -lt $deadline ] || { echo "$screen"; fail "atoll submit --steps 25 did not finish"; }
  sleep 0.2
done
echo "--- atoll submit --steps 25, as tmux shows it"
sed '/^$/d' <<<"$screen"
grep -q "^exit status 0" <<<"$screen" || fail "submit failed"
grep -Eq '^spin \[#+\] 25/25 steps +[0-9.]+ steps/s +done in' <<<"$screen" ||
  fail "no finished progress line"
[ "$(grep -c 'steps/s' <<<"$screen")" = 1 ] || fail "the progress line was not redrawn in place"
grep -q '^y = f32\[4\]' <<<"$screen" || fail "no result after the progress line"
echo "PASS"
