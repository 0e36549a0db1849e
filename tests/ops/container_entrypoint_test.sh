#!/usr/bin/env bash
# docker/atoll-container, the entrypoint of every container, run here without docker: the
# compose topology (config/docker.toml's islands and hosts) as processes started the way
# compose starts them, one run directory per host as the host's shared volume, the rm on
# loopback ports instead of the name "rm", every other service binding the address that
# ATOLL_BIND_HOST names, all with CURVE keys that the `keys` service's command made. Then the
# compose file's client command runs the Figure 2 program with the client key "default".
source "$(dirname "$0")/lib.sh"
entry="$ATOLL_SOURCE_DIR/docker/atoll-container"
export PATH="$ATOLL_BIN_DIR:$PATH"

# A free base port for the rm's three fixed ports.
port=$("${ATOLL_PYTHON:-python3}" - <<'PY'
import random, socket
for _ in range(50):
    base = random.randrange(20000, 60000)
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
# The compose file's `keys` service, with $work/keys for its volume.
"$entry" atoll keygen --dir "$work/keys" >/dev/null || fail "keygen"
sed -e "s|tcp://rm:5550|tcp://127.0.0.1:$port|" -e "s|tcp://rm:5551|tcp://127.0.0.1:$((port + 1))|" \
    -e "s|tcp://rm:5552|tcp://127.0.0.1:$((port + 2))|" -e 's/heartbeat_ms = 500/heartbeat_ms = 100/' \
    -e "s|^keys_dir = \"/etc/atoll/keys\"|keys_dir = \"$work/keys\"|" \
    "$ATOLL_SOURCE_DIR/config/docker.toml" >"$work/docker.toml"
grep -q "^keys_dir = \"$work/keys\"" "$work/docker.toml" || fail "docker.toml names no keys_dir"
export ATOLL_CONFIG="$work/docker.toml" ATOLL_RM_PORT=$port
# As in a container, services bind the interface eth0 (config/docker.toml's bind_host) and
# register its address; where this machine has no eth0, ATOLL_BIND_HOST says loopback.
bind_ip=127.0.0.1
if [ -e /sys/class/net/eth0 ] && bind_ip=$(ip -4 -o addr show eth0 2>/dev/null |
                                          awk '{sub("/.*", "", $4); print $4; exit}') &&
   [ -n "$bind_ip" ]; then
  echo "services bind eth0 ($bind_ip)"
else
  bind_ip=127.0.0.1
  export ATOLL_BIND_HOST=127.0.0.1
fi
mkdir -p "$work/logs"

# Starts `atoll-container ROLE` with extra environment, like one compose service.
service() {
  local name=$1 role=$2
  shift 2
  env "$@" "$entry" "$role" >"$work/logs/$name.log" 2>&1 &
  cleanups+=("kill $!")
}
wait_ready() {  # RUN_DIR NAME
  local deadline=$((SECONDS + 20))
  until ATOLL_RUN_DIR=$1 "$entry" ready "$2"; do
    [ $SECONDS -lt $deadline ] || { tail -n 20 "$work"/logs/*.log; fail "$1/$2 not ready"; }
    sleep 0.1
  done
}

service rm rm ATOLL_RUN_DIR="$work/run-rm"
wait_ready "$work/run-rm" rm
hosts=$(sed -n 's/^ *name = "\(i[0-9]h[0-9]\)"$/\1/p' "$ATOLL_CONFIG")
for h in $hosts; do
  # The executor starts first: it must wait for its object store's ready file.
  service "executor-$h" executor ATOLL_RUN_DIR="$work/run-$h" ATOLL_HOST="$h"
  service "objectstore-$h" objectstore ATOLL_RUN_DIR="$work/run-$h" ATOLL_HOST="$h"
done
for h in $hosts; do wait_ready "$work/run-$h" executor; done
for island in island0 island1; do
  service "scheduler-$island" scheduler ATOLL_RUN_DIR="$work/run-$island" ATOLL_ISLAND=$island
  wait_ready "$work/run-$island" scheduler
done

# The compose file's client, with the environment compose gives it.
export ATOLL_KEYS="$work/keys"
out=$(ATOLL_RM="tcp://127.0.0.1:$port" ATOLL_EVENTS="tcp://127.0.0.1:$((port + 2))" \
      "$entry" atoll submit "$ATOLL_SOURCE_DIR/examples/figure2.toml") || fail "submit: $out"
echo "$out"
[ "$out" = $'y = f32[2] {2, 3}\nz = f32[2] {2, 4}' ] || fail "wrong results"
# Without a client key the cluster refuses the connection.
ATOLL_KEYS=plain ATOLL_RM="tcp://127.0.0.1:$port" timeout 30 "$ATOLL_BIN_DIR/atoll" status \
  >"$work/plain.out" 2>&1 && fail "a plain-text client was served: $(cat "$work/plain.out")"
status=$(ATOLL_RM="tcp://127.0.0.1:$port" "$ATOLL_BIN_DIR/atoll" status)
echo "$status"
[ "$(grep -c '^  host .* alive ' <<<"$status")" = 4 ] || fail "not 4 live hosts"
# Every registered endpoint is the bound interface's address, not a wildcard.
[ "$(grep -o 'tcp://[0-9.]*' <<<"$status" | sort -u | grep -vc "tcp://$bind_ip\|tcp://127.0.0.1")" = 0 ] ||
  fail "endpoints other than $bind_ip registered"
grep -q "control tcp://$bind_ip:" <<<"$status" || fail "executors did not register $bind_ip"
# A host's executor found its own store (through the run directory's ready file).
for h in $hosts; do
  store=$(sed -n 's/^endpoint *= *"\(.*\)"$/\1/p' "$work/run-$h/objectstore.ready")
  grep -q "host $h .*store $store" <<<"$status" || fail "$h does not use its store $store"
done
echo "PASS"
