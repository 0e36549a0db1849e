#!/usr/bin/env bash
# docker/compose.yaml run for real, as its users run it: Debian's docker-compose against
# podman's Docker API (podman_lib.sh says why these and how), with an image of this build's
# binaries. The cluster comes up (a head, four hosts joining it, the client that runs the
# paper's Figure 2 program, the dashboard); the client's results are checked; the containers
# run as the image's user with their limits; one host is killed and the RM reports it lost
# while the others go on (Figure 2 again); the head is restarted in place and its RM resumes
# from the state file on its volume (it still knows the killed host, which never came back);
# then `down -v`. Skipped, saying why, where podman cannot run containers.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/podman_lib.sh"

podman_setup
make_image
start_podman_service

project=atoll-test-$$
export ATOLL_IMAGE=$image
label=com.docker.compose.project=$project
compose() {
  timeout 120 docker-compose -p "$project" -f "$ATOLL_SOURCE_DIR/docker/compose.yaml" "$@"
}
cleanups+=("compose down -v -t 2; podman rm -f \$(containers_labelled $label)")
report_on_failure dump_containers "$label"
# The container of compose service $1.
container() {
  podman ps -a --filter "label=$label" --filter "label=com.docker.compose.service=$1" \
    --format '{{.Names}}'
}
# A command in a new client container (not starting the services it depends on: compose
# would wait for their health, which only this script's healthchecks say).
client() {
  compose run --rm --no-deps client "$@" 2>"$work/client.err"
}
figure2=$'y = f32[2] {2, 3}\nz = f32[2] {2, 4}'

phase "docker-compose up -d (running each container's healthcheck until it returns)"
compose up -d --no-build >"$work/up.log" 2>&1 &
up=$!
deadline=$((SECONDS + 180))
while kill -0 $up 2>/dev/null; do
  [ $SECONDS -lt $deadline ] || { cat "$work/up.log"; fail "compose up took over 180 s"; }
  run_healthchecks "$label"
  sleep 1
done
wait $up || { cat "$work/up.log"; fail "docker-compose up"; }

phase "the client's Figure 2"
timeout 60 podman wait "$(container client)" >/dev/null || fail "the client did not finish"
out=$(podman logs "$(container client)" 2>&1)
echo "$out"
[ "$out" = "$figure2" ] || fail "the client printed something else than Figure 2's results"

phase "users and limits"
for service in head i0h0 dashboard; do
  [ "$(podman exec "$(container $service)" id -u)" = 10001 ] || fail "$service does not run as 10001"
done
[ "$(podman inspect --format '{{.HostConfig.Memory}}' "$(container i0h0)")" -gt 0 ] ||
  fail "i0h0 has no memory limit"

# `atoll status --json`'s hosts as "name:alive" words.
hosts_alive() {
  client atoll status --json | "${ATOLL_PYTHON:-python3}" -c '
import json, sys
for island in json.load(sys.stdin)["islands"]:
    for host in island["hosts"]:
        print(host["name"] + ":" + ("true" if host["alive"] else "false"))' | sort | tr '\n' ' '
}
# Waits up to 60 s for hosts_alive to print $1.
await_hosts() {
  local deadline=$((SECONDS + 60)) seen=""
  until seen=$(hosts_alive) && [ "$seen" = "$1" ]; do
    [ $SECONDS -lt $deadline ] || fail "hosts are '$seen', not '$1', after 60 s"
    sleep 1
  done
}
await_hosts "i0h0:true i0h1:true i1h0:true i1h1:true "

phase "kill host i1h1's container: the RM reports it lost; the rest goes on"
podman kill "$(container i1h1)" >/dev/null
await_hosts "i0h0:true i0h1:true i1h0:true i1h1:false "
client atoll status | grep -q "host i1h1 .*LOST" || fail "atoll status does not say i1h1 is lost"
out=$(client atoll submit /usr/share/atoll/examples/figure2.toml)
[ "$out" = "$figure2" ] || fail "Figure 2 without i1h1: $out $(cat "$work/client.err")"

phase "restart the head in place: the RM resumes from its state file"
compose restart -t 10 head >/dev/null 2>&1 || fail "docker-compose restart head"
await_hosts "i0h0:true i0h1:true i1h0:true i1h1:false "
podman exec "$(container head)" sh -c 'cat ~/.atoll/logs/rm.log' |
  grep -q "state from /var/lib/atoll/rm.state: 4 hosts" || fail "the RM did not resume from its state"
out=$(client atoll submit /usr/share/atoll/examples/figure2.toml)
[ "$out" = "$figure2" ] || fail "Figure 2 after the head's restart: $out $(cat "$work/client.err")"

phase "docker-compose down -v"
compose down -v -t 10 >"$work/down.log" 2>&1 || { cat "$work/down.log"; fail "docker-compose down"; }
[ -z "$(containers_labelled "$label")" ] || fail "containers left after down"
phase "PASS"
