#!/usr/bin/env bash
# The main job on a fresh machine: installs dependencies, builds, starts a local cluster
# (config/local.toml: 2 islands, 4 hosts, 8 cpu devices), runs the Pathways paper's
# Figure 2 program on it (examples/figure2.toml) and stops the cluster again.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# Only what the demo runs; scripts/test.sh builds the rest in the same build directory.
bash scripts/build.sh --target atoll --target atoll-rm --target atoll-scheduler \
  --target atoll-executor --target atoll-objectstore
build_dir=${ATOLL_BUILD_DIR:-build}
atoll="$build_dir/bin/atoll"
# The demo's own state dir, so it never touches a cluster the user started.
export ATOLL_HOME=${ATOLL_HOME:-$(mktemp -d /tmp/atoll-demo-XXXXXX)}
trap '"$atoll" down >/dev/null 2>&1 || true' EXIT
"$atoll" up --config config/local.toml
echo
echo "$ atoll submit examples/figure2.toml"
"$atoll" submit examples/figure2.toml
