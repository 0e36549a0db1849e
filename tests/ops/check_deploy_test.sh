#!/usr/bin/env bash
# check_deploy.py itself: on copies of the deployment files, each broken in one way that
# matters, it must fail and say why (so that a passing check means something).
set -euo pipefail
src=${ATOLL_SOURCE_DIR:?}
python=${ATOLL_PYTHON:-python3}
work=$(mktemp -d "${TMPDIR:-/tmp}/atoll-deploy-XXXXXX")
trap 'rm -rf "$work"' EXIT

# A fresh copy of what the checks read; then `break FILE SED-EXPR` edits it.
fresh() {
  rm -rf "$work/tree"
  mkdir -p "$work/tree"
  cp -r "$src/config" "$src/docker" "$src/examples" "$src/.yamllint.yaml" "$work/tree/"
}
expect_failure() {  # MODE WHAT EXPECTED-MESSAGE-PART
  if out=$("$python" "$src/tests/ops/check_deploy.py" "$1" "$work/tree" 2>&1); then
    echo "FAIL: check_deploy.py $1 passed although $2"
    exit 1
  fi
  grep -q -- "$3" <<<"$out" || { echo "FAIL: $2: no '$3' in:"; echo "$out"; exit 1; }
  echo "ok   $1: $2"
}

fresh
"$python" "$src/tests/ops/check_deploy.py" compose "$work/tree" >/dev/null
"$python" "$src/tests/ops/check_deploy.py" k8s "$work/tree" >/dev/null

fresh  # a host added to the config but not to the deployments
sed -i 's/^  name = "i1h1"/  name = "i1h1"\n  devices = 2\n\n  [[islands.hosts]]\n  name = "i1h2"/' \
  "$work/tree/config/local.toml"
expect_failure compose "local.toml has a host compose lacks" "differ from"
expect_failure k8s "local.toml has a host the manifests lack" "differ from config/local.toml"

fresh  # an executor that does not share its object store's IPC namespace
sed -i 's/ipc: "service:objectstore-i0h1"/ipc: private/' "$work/tree/docker/compose.yaml"
expect_failure compose "an executor has its own IPC namespace" "ipc should be service:objectstore-i0h1"

fresh  # a scheduler for the wrong island
sed -i '0,/ATOLL_ISLAND: island1/s//ATOLL_ISLAND: island0/' "$work/tree/docker/compose.yaml"
expect_failure compose "scheduler-island1 orders island0" "ATOLL_ISLAND should be island1"

fresh  # loopback addresses in the container config
sed -i 's|tcp://rm:|tcp://127.0.0.1:|' "$work/tree/config/docker.toml"
expect_failure compose "docker.toml points at loopback" "should name the host 'rm'"

fresh  # invalid compose syntax that only docker-compose itself knows about
sed -i 's/^    init: true/    init: maybe/; s/^  init: true/  init: maybe/' "$work/tree/docker/compose.yaml"
expect_failure compose "init is not a boolean" "docker-compose config"

fresh  # one StatefulSet replica too few
sed -i '0,/replicas: 2/s//replicas: 1/' "$work/tree/docker/k8s/hosts.yaml"
expect_failure k8s "island0 has 1 pod for 2 hosts" "pods are hosts"

fresh  # the executor without the shared /dev/shm
python3 - "$work/tree/docker/k8s/hosts.yaml" <<'PY'
import sys
p = sys.argv[1]
s = open(p).read()
s = s.replace("          volumeMounts: *mounts\n", "          volumeMounts:\n            - {name: config, mountPath: /etc/atoll/k8s}\n", 1)
open(p, "w").write(s)
PY
expect_failure k8s "the executor does not mount the arena" "must share /dev/shm"

fresh  # a Service that selects nothing
sed -i '/^  selector:/s/component: dashboard}/component: dashbord}/' \
  "$work/tree/docker/k8s/dashboard.yaml"
expect_failure k8s "a Service selects no pod" "selects no pod"

fresh  # plain text in the containers' config
sed -i 's/^mode = "curve"/mode = "plain"/' "$work/tree/config/docker.toml"
expect_failure compose "docker.toml turns CURVE off" 'security.mode should be "curve"'

fresh  # an executor without the keys
sed -i 's|\["keys:/etc/atoll/keys:ro", "i1h1-run|["i1h1-run|' "$work/tree/docker/compose.yaml"
expect_failure compose "executor-i1h1 lacks the keys" "executor-i1h1: should mount the keys volume"

fresh  # the rm starting before the keys exist
sed -i '/^    depends_on: \*after-keys$/d' "$work/tree/docker/compose.yaml"
expect_failure compose "the rm does not wait for keys" "rm: should depend on keys"

fresh  # the keys somewhere the pods do not mount them
sed -i 's|^keys_dir = .*|keys_dir = "/keys"|' "$work/tree/docker/k8s/cluster.toml"
expect_failure k8s "cluster.toml's keys_dir is not the mount" "security.keys_dir should be"

fresh  # the rm pod without the keys
sed -i '/name: keys, mountPath/d' "$work/tree/docker/k8s/rm.yaml"
expect_failure k8s "the rm does not mount the keys" "atoll-rm/rm: should mount the keys"

fresh  # the demo client given the cluster's secret key
sed -i 's/{key: cluster.pub, path: cluster.pub}/{key: cluster.key, path: cluster.key}/' \
  "$work/tree/docker/k8s/demo-job.yaml"
expect_failure k8s "a client pod holds cluster.key" "must not hold the cluster's secret key"

fresh  # a client allowed in the Secret but not given to the services
sed -i 's|^      - allowed.default.pub=keys/allowed/default.pub|&\n      - allowed.alice.pub=keys/allowed/alice.pub|' \
  "$work/tree/docker/k8s/kustomization.yaml"
expect_failure k8s "services lack an allowed key" "lacks \['allowed.alice.pub'\]"

fresh  # bad YAML style
echo "extra:   [a,b]   " >>"$work/tree/docker/k8s/namespace.yaml"
expect_failure k8s "yamllint finds problems" "yamllint"
echo "PASS"
