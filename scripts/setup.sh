#!/usr/bin/env bash
# Installs atoll's dependencies: the C++ libraries and tools from Debian's packages, and the
# Python packages from PyPI, pinned with their hashes in requirements.lock, into the project's
# virtual environment .venv/ (every script, test and CMake rule uses .venv/bin/python).
# Idempotent and quiet: when everything is installed it does nothing (no apt-get update, no
# network).
#   scripts/setup.sh               build dependencies, test tools and .venv
#   scripts/setup.sh --build-only  build dependencies only (docker/Dockerfile)
set -euo pipefail
cd "$(dirname "$0")/.."
build_only=0
[ "${1:-}" = "--build-only" ] && build_only=1

packages=(
  build-essential cmake pkg-config clang-format ninja-build ccache
  libzmq3-dev cppzmq-dev libmsgpack-cxx-dev libspdlog-dev libfmt-dev libtoml11-dev
  libcli11-dev nlohmann-json3-dev libcpp-httplib-dev zlib1g-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libopenblas-dev libsleef-dev libjemalloc-dev libdnnl-dev
  python3 python3-dev python3-venv   # the interpreter .venv is made from, and its headers
)

# What the tests drive beyond the build: `atoll top` in tmux, the dashboard in Debian's
# chromium (driven by playwright from PyPI), the compose and Kubernetes files through
# docker-compose and yamllint, and for real with podman (runc, netavark networks with DNS,
# catatonit for `init`, debootstrap for a base image: tests/ops/podman_lib.sh);
# scripts/fuzz.sh's and thread_safety.sh's compiler, libFuzzer and clang's OpenMP (the kernels
# set oneDNN's OpenMP thread count, and CMake looks for OpenMP with whichever compiler builds); `ip`, which makes the network namespaces of the
# tests and benchmarks across machines; the English text examples/jax/lm trains on (Debian's
# fortunes, /usr/share/games/fortunes); Debian's torch and torchvision, which export the real
# models that atoll.onnx is tested and benchmarked on (bench/onnx/export_torch.py, run by
# /usr/bin/python3: torch's PyPI wheel pulls gigabytes of CUDA libraries into .venv).
if [ $build_only -eq 0 ]; then
  packages+=(tmux chromium docker-compose yamllint
             podman runc netavark aardvark-dns catatonit iptables debootstrap
             clang-14 libfuzzer-14-dev libomp-14-dev iproute2 fortunes
             python3-torch python3-torchvision)
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

[ $build_only -eq 1 ] || bash scripts/venv.sh
