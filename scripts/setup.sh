#!/usr/bin/env bash
# Installs atoll's build dependencies from Debian's packages. Idempotent: when every
# package is already installed it does nothing (no apt-get update, no network).
set -euo pipefail

packages=(
  build-essential cmake pkg-config clang-format
  libzmq3-dev cppzmq-dev libmsgpack-cxx-dev libspdlog-dev libfmt-dev libtoml11-dev
  libcli11-dev nlohmann-json3-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libopenblas-dev
  python3 python3-matplotlib
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "setup: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
