#!/usr/bin/env bash
# Installs atoll's build dependencies from Debian's packages, and the tools the test suite
# drives (a terminal multiplexer, a headless browser, the deployment file validators, podman
# to run the containers, and playwright-core from npm). Idempotent: when everything is
# installed it does nothing (no apt-get update, no network).
#   scripts/setup.sh               build dependencies and test tools
#   scripts/setup.sh --build-only  build dependencies only (docker/Dockerfile)
set -euo pipefail
cd "$(dirname "$0")/.."
build_only=0
[ "${1:-}" = "--build-only" ] && build_only=1

packages=(
  build-essential cmake pkg-config clang-format
  libzmq3-dev cppzmq-dev libmsgpack-cxx-dev libspdlog-dev libfmt-dev libtoml11-dev
  libcli11-dev nlohmann-json3-dev libcpp-httplib-dev zlib1g-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libopenblas-dev libsleef-dev libjemalloc-dev
  python3 python3-matplotlib
  python3-dev pybind11-dev python3-numpy   # the Python package atoll (python/)
)

# What tests/ops drives: `atoll top` in tmux, the dashboard in headless chromium, the
# compose and Kubernetes files through docker-compose, yamllint and the Kubernetes API's
# models (python3-kubernetes), and for real with podman (runc, netavark networks with DNS,
# catatonit for `init`, debootstrap for a base image: tests/ops/podman_lib.sh);
# scripts/fuzz.sh's compiler and libFuzzer; pytest for tests/python; `ip`, which makes the
# network namespaces of the tests and benchmarks across machines; Dask distributed, the
# peer bench/peers measures against.
if [ $build_only -eq 0 ]; then
  packages+=(tmux chromium docker-compose yamllint python3-yaml python3-kubernetes
             podman runc netavark aardvark-dns catatonit iptables debootstrap
             clang-14 libfuzzer-14-dev python3-pytest iproute2 python3-distributed)
  # Node.js for playwright-core: Debian's, unless a node with npm is installed already.
  command -v npm >/dev/null || packages+=(nodejs npm)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

[ $build_only -eq 1 ] || bash tests/ops/browser/setup.sh
