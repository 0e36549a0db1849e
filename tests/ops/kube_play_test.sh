#!/usr/bin/env bash
# docker/k8s/ run for real with `podman kube play` where podman 4.3 can (kube_play.py says
# what it plays and what the test does for podman): the head's Deployment with its
# PersistentVolumeClaim and ConfigMap, each StatefulSet's pods (the hosts), the dashboard's
# Deployment and the demo Job's pod, with an image of this build's binaries, on a network of
# the test's own. Each pod must become ready as its readiness probe says (`atoll probe ready`,
# run here: podman runs no readiness probes), the demo pod must print Figure 2's results, and
# the dashboard must serve /healthz. Skipped, saying why, where podman cannot run containers.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/podman_lib.sh"

podman_setup
make_image
network=atoll-kube-$$
podman network create "$network" >/dev/null || fail "podman network create"
cleanups+=("podman network rm -f $network")
"$ATOLL_BIN_DIR/atoll" keygen --dir "$work/keys" >/dev/null || fail "keygen"
mkdir -p "$work/play"
"${ATOLL_PYTHON:-python3}" "$ATOLL_SOURCE_DIR/tests/ops/kube_play.py" "$ATOLL_SOURCE_DIR" \
  "$work/keys" "$image" "$work/play" $$ >"$work/plays" || fail "kube_play.py"
# Takes down every pod played, and the volumes of the claim and the ConfigMap.
down_all() {
  local file
  for file in $(cut -f1 "$work/plays"); do podman kube down "$file" >/dev/null 2>&1; done
  podman volume rm -f atoll-state-$$ atoll-config-$$ >/dev/null 2>&1
}
cleanups+=(down_all)
report_containers() {
  local container
  for container in $(cut -f2 "$work/plays"); do
    echo "--- $container: $(podman inspect --format '{{.State.Status}}' "$container" 2>&1)"
    podman logs --tail 15 "$container" 2>&1
  done
}
report_on_failure report_containers
# What says CONTAINER is up (kube_play.py's CHECK).
up() {  # CONTAINER CHECK...
  local container=$1
  shift
  case "$1" in
    exec) shift; podman exec "$container" "$@" >/dev/null 2>&1 ;;
    http)  # GET http://127.0.0.1:PORT/PATH in the container (bash, no curl in the image)
      podman exec "$container" bash -c "exec 3<>/dev/tcp/127.0.0.1/$2 &&
        printf 'GET $3 HTTP/1.0\\r\\n\\r\\n' >&3 && head -n 1 <&3" 2>/dev/null | grep -q " 200 " ;;
    exit) [ "$(podman inspect --format '{{.State.Status}} {{.State.ExitCode}}' "$container")" = \
            "exited 0" ] ;;
    *) fail "no check for $container" ;;
  esac
}

while IFS=$'\t' read -r file container alias check; do
  phase "podman kube play $(basename "$file"): until $check"
  network_option=$network
  [ "$alias" = - ] || network_option="$network:alias=$alias"
  podman kube play --replace --network "$network_option" "$file" >"$work/play.log" 2>&1 ||
    { cat "$work/play.log"; fail "podman kube play $file"; }
  deadline=$((SECONDS + 60))
  # shellcheck disable=SC2086  # CHECK is words
  until up "$container" $check; do
    [ $SECONDS -lt $deadline ] || fail "$container: '$check' did not succeed within 60 s"
    sleep 0.5
  done
done <"$work/plays"

out=$(podman logs atoll-demo-0-client 2>&1)
echo "$out"
[ "$out" = $'y = f32[2] {2, 3}\nz = f32[2] {2, 4}' ] || fail "the demo Job's pod printed something else"
for container in atoll-head-pod-0-head atoll-island0-0-host; do
  [ "$(podman exec "$container" id -u)" = 10001 ] || fail "$container does not run as 10001"
done
phase "PASS"
