# Shared by the tests that run atoll's containers for real with Debian's podman (sourced after
# lib.sh): compose_test.sh and kube_play_test.sh. Needs root (rootful podman, debootstrap).
#
# podman_setup: a podman configuration of the test's own (CONTAINERS_CONF) with what these
#   machines need: runtime runc (crun refuses their hybrid cgroups), default ulimits no
#   higher than nofile/nproc 1024 (raising limits is refused), netavark networks (their DNS
#   lets containers find each other by name). Skips (exit 77) saying why when something is
#   missing or podman cannot run a container.
# make_image: the image docker/Dockerfile describes, with the binaries of this build instead
#   of building them again: a Debian 12 base made with debootstrap (no registry is reachable;
#   cached as an image and as a tarball under the build dir), the Dockerfile's `runtime`
#   stage on it (cached by podman's layer cache), and the service binaries, stripped of
#   debug info, on top. Sets $image; the image is removed on exit, the bases are kept.
# report_on_failure COMMAND...: on a failure (not a skip), the cleanup runs COMMAND, with its
#   output on the test's stderr (lib.sh's cleanup silences what it runs), before what was
#   registered earlier (what COMMAND reports on is still there).
# start_podman_service: podman's Docker API on a private socket (for docker-compose); sets
#   DOCKER_HOST and stops the service on exit.

exec {report_fd}>&2  # the test's stderr
report_on_failure() {
  cleanups+=("report_if_failed $*")
}
report_if_failed() {  # cleanup's $status is the test's exit status
  [ "$status" -eq 0 ] || [ "$status" -eq 77 ] || "$@" >&"$report_fd" 2>&1
}

base_image=localhost/atoll-test-debian:bookworm
runtime_image=localhost/atoll-test-runtime:latest
cache_dir="${ATOLL_BUILD_DIR:-$ATOLL_BIN_DIR/..}/container-cache"

# Prints the seconds since the test started with a message: where the time goes.
phase() {
  echo "[$SECONDS s] $*"
}

podman_setup() {
  [ "$(id -u)" -eq 0 ] || skip "needs root (rootful podman and debootstrap)"
  local tool
  for tool in podman runc debootstrap netavark; do
    command -v "$tool" >/dev/null || [ -x "/usr/lib/podman/$tool" ] ||
      skip "$tool is not installed (scripts/setup.sh installs it)"
  done
  cat >"$work/containers.conf" <<'EOF'
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]
[engine]
runtime = "runc"
[network]
network_backend = "netavark"
EOF
  export CONTAINERS_CONF="$work/containers.conf"
  local info
  info=$(podman info --format '{{.Host.OCIRuntime.Name}} {{.Host.NetworkBackend}}' 2>&1) ||
    skip "podman cannot run here: $info"
  [ "$info" = "runc netavark" ] || skip "podman does not use runc and netavark here: $info"
  make_base_image
  local out
  out=$(timeout 60 podman run --rm "$base_image" true 2>&1) ||
    skip "podman cannot run a container here: $out"
}

# The Debian 12 base: the cached image, else the cached tarball, else debootstrap.
make_base_image() {
  podman image exists "$base_image" && return
  local tarball="$cache_dir/debian-bookworm-minbase.tar"
  if [ ! -f "$tarball" ]; then
    phase "debootstrap --variant=minbase bookworm (once; cached in $cache_dir)"
    mkdir -p "$cache_dir"
    timeout 600 debootstrap --variant=minbase bookworm "$work/rootfs" http://deb.debian.org/debian \
      >"$work/debootstrap.log" 2>&1 || { tail -n 20 "$work/debootstrap.log"; fail "debootstrap"; }
    tar -C "$work/rootfs" -cf "$tarball.part" . && mv "$tarball.part" "$tarball"
    rm -rf "$work/rootfs"
  fi
  podman import "$tarball" "$base_image" >"$work/import.log" 2>&1 ||
    { cat "$work/import.log"; fail "podman import $tarball"; }
}

make_image() {
  phase "the image: docker/Dockerfile's runtime stage on $base_image, and this build's binaries"
  podman build --pull=never --build-arg "DEBIAN=$base_image" --target runtime \
    -t "$runtime_image" -f "$ATOLL_SOURCE_DIR/docker/Dockerfile" "$ATOLL_SOURCE_DIR" \
    >"$work/build-runtime.log" 2>&1 || { tail -n 30 "$work/build-runtime.log"; fail "podman build"; }
  mkdir -p "$work/image/bin"
  local b
  for b in atoll atoll-rm atoll-scheduler atoll-executor atoll-objectstore; do
    strip --strip-debug -o "$work/image/bin/$b" "$ATOLL_BIN_DIR/$b" || fail "strip $b"
  done
  printf 'FROM %s\nCOPY bin/ /usr/local/bin/\n' "$runtime_image" >"$work/image/Containerfile"
  image=localhost/atoll-test:$$
  podman build --pull=never -t "$image" "$work/image" >"$work/build.log" 2>&1 ||
    { cat "$work/build.log"; fail "podman build of the test image"; }
  cleanups+=("podman rmi -f $image")
}

start_podman_service() {
  local socket="$work/podman.sock"
  podman system service --time=0 "unix://$socket" >"$work/podman-service.log" 2>&1 &
  cleanups+=("kill $!")
  local deadline=$((SECONDS + 20))
  until [ -S "$socket" ]; do
    [ $SECONDS -lt $deadline ] || { cat "$work/podman-service.log"; fail "podman system service"; }
    sleep 0.1
  done
  export DOCKER_HOST="unix://$socket"
}

# The names of the containers whose label $1 (key=value) matches.
containers_labelled() {
  podman ps -a --filter "label=$1" --format '{{.Names}}'
}

# Runs `podman healthcheck run` for each running container labelled $1, once: podman runs
# healthchecks from systemd timers, which these machines lack.
run_healthchecks() {
  local c
  for c in $(podman ps --filter "label=$1" --format '{{.Names}}'); do
    podman healthcheck run "$c" >/dev/null 2>&1 || true
  done
}

# The last lines of every container labelled $1, how each last ended, and the warnings and
# errors its services logged (~/.atoll/logs, copied out, so also from one that stopped):
# what a failure needs to be understood.
dump_containers() {
  local c logs
  local ended='exit {{.State.ExitCode}}, OOM-killed {{.State.OOMKilled}}, restarts {{.RestartCount}}'
  podman ps -a --filter "label=$1" --format '{{.Names}} {{.Status}}'
  for c in $(containers_labelled "$1"); do
    echo "--- $c: $(podman inspect --format "$ended" "$c" 2>&1)"
    podman logs --tail 15 "$c" 2>&1
    logs=$(mktemp -d)
    if podman cp "$c:/home/atoll/.atoll/logs" "$logs" >/dev/null 2>&1; then
      grep -hE '^[0-9:.]+ [^ ]+ (warning|error|critical):' "$logs"/logs/*.log 2>/dev/null |
        sort | tail -n 20
    fi
    rm -rf "$logs"
  done
}
