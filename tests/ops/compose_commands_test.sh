#!/usr/bin/env bash
# docker/compose.yaml's commands run here as plain processes, without containers (ops_compose
# runs them in containers where podman can): the head's and each host's `atoll start ...
# --foreground`, as compose runs them, with what names a container (the service name "head",
# /etc/atoll/..., the volumes) replaced by loopback, free ports and folders of the test's own.
# Then: `atoll probe` says each part live and ready; the client's command prints Figure 2's
# results; a host's command told to stop (SIGTERM, as `docker stop` does) drains its host
# and exits 0; one whose supervisor dies exits non-zero (so its container ends); the head
# restarted with the same --rm-state carries on with the hosts it knew.
source "$(dirname "$0")/lib.sh"
export PATH="$ATOLL_BIN_DIR:$PATH"

# A free base port for the RM's three fixed ports, below Linux's ephemeral range (32768 and
# up): the ports the other tests' services bind to port 0 for, and their outgoing
# connections' ports, come from that range, and one taken between this check and the RM's
# bind would fail the test.
port=$("${ATOLL_PYTHON:-python3}" - <<'PY'
import random, socket
for _ in range(50):
    base = random.randrange(20000, 32700)
    try:
        socks = []
        for p in range(base, base + 3):
            s = socket.socket(); s.bind(("127.0.0.1", p)); socks.append(s)
        print(base); break
    except OSError:
        pass
PY
)
[ -n "$port" ] || fail "no free ports"
sed -e "s|tcp://head:5550|tcp://127.0.0.1:$port|" -e "s|tcp://head:5551|tcp://127.0.0.1:$((port + 1))|" \
    -e "s|tcp://head:5552|tcp://127.0.0.1:$((port + 2))|" -e 's/heartbeat_ms = 500/heartbeat_ms = 100/' \
    -e "s|^keys_dir = \"/etc/atoll/keys\"|keys_dir = \"$work/keys\"|" \
    "$ATOLL_SOURCE_DIR/config/docker.toml" >"$work/docker.toml"
grep -q "^keys_dir = \"$work/keys\"" "$work/docker.toml" || fail "docker.toml names no keys_dir"

# Each compose service's command, one line of tab-separated words, with the container's
# names replaced.
"${ATOLL_PYTHON:-python3}" - "$ATOLL_SOURCE_DIR/docker/compose.yaml" >"$work/commands" <<PY
import sys, yaml
replace = {"/etc/atoll/docker.toml": "$work/docker.toml",
           "tcp://head:5550": "tcp://127.0.0.1:$port",
           "/var/lib/atoll/rm.state": "$work/volume/rm.state"}
for name, service in yaml.safe_load(open(sys.argv[1]))["services"].items():
    words = []
    for w in service["command"]:
        if words and words[-1] in ("--bind", "--advertise"):
            w = "127.0.0.1"
        words.append(replace.get(w, w.replace("/usr/share/atoll/", "$ATOLL_SOURCE_DIR/")))
    print(name + "\t" + "\t".join(words))
PY
command_of() {  # SERVICE: its words, one per line
  awk -F'\t' -v s="$1" '$1 == s { for (i = 2; i <= NF; i++) print $i }' "$work/commands"
}
export ATOLL_KEYS="$work/keys"
mkdir -p "$work/volume"

# Runs service $1's command in the background from a state dir of its own ($work/$1), as its
# container would (its foreground command the container's main process); sets pid_$1.
start_part() {
  local words
  mapfile -t words < <(command_of "$1")
  [ ${#words[@]} -gt 0 ] || fail "compose.yaml has no command for $1"
  "${words[0]}" --state-dir "$work/$1" "${words[@]:1}" >"$work/$1.out" 2>&1 &
  eval "pid_$1=$!"
  cleanups+=("kill $!")
}
# Waits (bounded) until `atoll probe ready` says part $1 is ready.
await_ready() {
  local deadline=$((SECONDS + 30))
  until atoll --state-dir "$work/$1" probe ready >"$work/probe.out" 2>&1; do
    [ $SECONDS -lt $deadline ] || { cat "$work/probe.out" "$work/$1.out"; fail "$1 not ready"; }
    sleep 0.2
  done
}
# Waits (bounded) for the foreground command of part $1 to exit; sets $exit_status.
await_exit() {
  local pid_var="pid_$1" deadline=$((SECONDS + 30))
  while kill -0 "${!pid_var}" 2>/dev/null; do
    [ $SECONDS -lt $deadline ] || fail "$1's command did not exit"
    sleep 0.1
  done
  exit_status=0
  wait "${!pid_var}" || exit_status=$?
}

start_part head
await_ready head
atoll --state-dir "$work/head" probe live | grep -qx "live: cluster" || fail "head not live"
hosts=$(awk -F'\t' '$2 == "atoll" && $4 == "host" { print $1 }' "$work/commands")
[ "$(echo $hosts)" = "i0h0 i0h1 i1h0 i1h1" ] || fail "compose.yaml's hosts are $hosts"
for h in $hosts; do start_part "$h"; done
for h in $hosts; do await_ready "$h"; done

mapfile -t client < <(command_of client)
out=$(ATOLL_RM="tcp://127.0.0.1:$port" ATOLL_EVENTS="tcp://127.0.0.1:$((port + 2))" "${client[@]}") ||
  fail "the client: $out"
echo "$out"
[ "$out" = $'y = f32[2] {2, 3}\nz = f32[2] {2, 4}' ] || fail "wrong results"
status=$(atoll --rm "tcp://127.0.0.1:$port" status)
[ "$(grep -c '^  host .* alive ' <<<"$status")" = 4 ] || { echo "$status"; fail "not 4 live hosts"; }

# Told to stop, a host drains and its command exits 0 with nothing left running.
kill -TERM "$pid_i1h1"
await_exit i1h1
[ "$exit_status" = 0 ] || { cat "$work/i1h1.out"; fail "i1h1 did not stop cleanly"; }
grep -q "^drained host i1h1" "$work/i1h1.out" || { cat "$work/i1h1.out"; fail "i1h1 not drained"; }
atoll --state-dir "$work/i1h1" probe live >/dev/null 2>&1 && fail "i1h1 still probes live"

# A host whose supervisor dies takes its command with it: the container ends.
supervisor=$(sed -n '/^\[supervisor\]/,/^\[/s/^pid = \([0-9]*\)$/\1/p' "$work/i1h0/host-i1h0.toml")
[ -n "$supervisor" ] || fail "no supervisor recorded for i1h0"
kill -KILL "$supervisor"
await_exit i1h0
[ "$exit_status" != 0 ] || fail "i1h0's command exited 0 after its supervisor died"
atoll --state-dir "$work/i1h0" stop >/dev/null  # its services, left without their supervisor

# The head restarted with the same state file knows the hosts that are gone (i1h1 drained,
# i1h0 stopped), which only its state file can tell it, and the others are back.
kill -TERM "$pid_head"
await_exit head
[ "$exit_status" = 0 ] || { cat "$work/head.out"; fail "the head did not stop cleanly"; }
start_part head
await_ready head
# (They count as alive until they miss their heartbeats, as after any restart of the RM.)
deadline=$((SECONDS + 30))
until status=$(atoll --rm "tcp://127.0.0.1:$port" status) &&
      grep -q "^  host i1h0 .* DEAD " <<<"$status" && grep -q "^  host i1h1 .* DEAD " <<<"$status"; do
  [ $SECONDS -lt $deadline ] || { echo "$status"; fail "the restarted RM does not know i1h0, i1h1"; }
  sleep 0.2
done
echo "$status"
for h in i0h0 i0h1; do await_ready "$h"; done
echo "PASS"
