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
expect_failure compose "local.toml has a host compose lacks" "differ from config/local.toml"
expect_failure k8s "local.toml has a host the manifests lack" "differ from config/local.toml"

fresh  # a host listed in the containers' config again
printf '\n  [[islands.hosts]]\n  name = "i0h0"\n' >>"$work/tree/config/docker.toml"
expect_failure compose "docker.toml lists a host" "lists hosts"

fresh  # a host that joins the wrong island
"${ATOLL_PYTHON:-python3}" - "$work/tree/docker/compose.yaml" <<'PY'
import sys
p = sys.argv[1]
s = open(p).read()
s = s.replace('"--island", "island1", "--host", "i1h1"', '"--island", "island0", "--host", "i1h1"')
open(p, "w").write(s)
PY
expect_failure compose "i1h1 joins island0" "differ from config/local.toml"

fresh  # a host whose command daemonizes: the container would end at once
sed -i '0,/"start", "host", "--foreground", /s//"start", "host", /' "$work/tree/docker/compose.yaml"
expect_failure compose "a host runs in the background" "should run with --foreground"

fresh  # the head's state in the container, not on a volume
sed -i 's|"keys:/etc/atoll/keys", "state:/var/lib/atoll"\]|"keys:/etc/atoll/keys"]|' \
  "$work/tree/docker/compose.yaml"
expect_failure compose "the RM's state is not on a volume" "should be on a named volume"

fresh  # the head advertises what its container has for an address
sed -i 's|"--advertise", "head",|"--advertise", "10.0.0.2",|' "$work/tree/docker/compose.yaml"
expect_failure compose "the head advertises an address" "should --advertise its service name"

fresh  # containers run as root
sed -i 's/^  user: "10001:10001"/  user: "0:0"/' "$work/tree/docker/compose.yaml"
expect_failure compose "the containers run as root" "non-root"

fresh  # a host without its health check
sed -i '/^  healthcheck: \*ready$/d' "$work/tree/docker/compose.yaml"
expect_failure compose "the hosts have no healthcheck" "healthcheck should be atoll probe ready"

fresh  # loopback addresses in the container config
sed -i 's|tcp://head:|tcp://127.0.0.1:|' "$work/tree/config/docker.toml"
expect_failure compose "docker.toml points at loopback" "should name the host 'head'"

fresh  # invalid compose syntax that only docker-compose itself knows about
sed -i 's/^  init: true/  init: maybe/' "$work/tree/docker/compose.yaml"
expect_failure compose "init is not a boolean" "docker-compose config"

fresh  # plain text in the containers' config
sed -i 's/^mode = "curve"/mode = "plain"/' "$work/tree/config/docker.toml"
expect_failure compose "docker.toml turns CURVE off" 'security.mode should be "curve"'

fresh  # a client that may write the keys
sed -i 's|^  volumes: \["keys:/etc/atoll/keys:ro"\]|  volumes: ["keys:/etc/atoll/keys"]|' \
  "$work/tree/docker/compose.yaml"
expect_failure compose "the keys are writable everywhere" "at /etc/atoll/keys read-only"

fresh  # one StatefulSet replica too few
sed -i '0,/replicas: 2/s//replicas: 1/' "$work/tree/docker/k8s/hosts.yaml"
expect_failure k8s "island0 has 1 host for 2" "differ from config/local.toml"

fresh  # a host without the shared-memory /dev/shm
sed -i '0,/emptyDir: {medium: Memory, sizeLimit: 800Mi}/s//emptyDir: {}/' \
  "$work/tree/docker/k8s/hosts.yaml"
expect_failure k8s "/dev/shm is on disk" "/dev/shm should be a memory emptyDir"

fresh  # the head advertises a name nobody resolves
sed -i 's|"--advertise", "head.atoll-head",|"--advertise", "atoll-head",|' "$work/tree/docker/k8s/head.yaml"
expect_failure k8s "the head advertises another name" "should --advertise its DNS name"

fresh  # the RM's state in the pod, not on the claim
sed -i 's|"--rm-state", "/var/lib/atoll/rm.state"|"--rm-state", "/tmp/rm.state"|' \
  "$work/tree/docker/k8s/head.yaml"
expect_failure k8s "the RM's state is not on the claim" "PersistentVolumeClaim's volume"

fresh  # a misspelled field: Kubernetes would refuse the object
sed -i 's/^          readinessProbe:  # serves its page/          readinesProbe:  # serves its page/' \
  "$work/tree/docker/k8s/dashboard.yaml"
expect_failure k8s "a field the API does not have" "has no field 'readinesProbe'"

fresh  # a field of the wrong type
sed -i '0,/replicas: 1  # one RM/s//replicas: "1"  # one RM/' "$work/tree/docker/k8s/head.yaml"
expect_failure k8s "replicas is a string" "should be int"

fresh  # a pod without limits
sed -i '0,/            limits: {cpu: "1", memory: 512Mi}/s///' "$work/tree/docker/k8s/head.yaml"
expect_failure k8s "the head has no limits" "needs cpu and memory limits"

fresh  # a host without a liveness probe
"${ATOLL_PYTHON:-python3}" - "$work/tree/docker/k8s/hosts.yaml" <<'PY'
import sys
p = sys.argv[1]
s = open(p).read()
s = s.replace("""          livenessProbe:  # the supervisor and the services run
            exec: {command: ["atoll", "probe", "live"]}
            initialDelaySeconds: 10
            periodSeconds: 10
            timeoutSeconds: 5
""", "", 1)
open(p, "w").write(s)
PY
expect_failure k8s "island0's hosts have no liveness probe" "liveness probe"

fresh  # a pod running as root
sed -i '0,/        runAsUser: 10001/s//        runAsUser: 0/' "$work/tree/docker/k8s/dashboard.yaml"
expect_failure k8s "the dashboard runs as root" "non-root user"

fresh  # a Service that selects nothing
sed -i '/^  selector:/s/component: dashboard}/component: dashbord}/' \
  "$work/tree/docker/k8s/dashboard.yaml"
expect_failure k8s "a Service selects no pod" "selects no pod"

fresh  # the keys somewhere the pods do not mount them
sed -i 's|^keys_dir = .*|keys_dir = "/keys"|' "$work/tree/docker/k8s/cluster.toml"
expect_failure k8s "cluster.toml's keys_dir is not the mount" "security.keys_dir should be"

fresh  # the head pod without the keys
sed -i '/name: keys, mountPath/d' "$work/tree/docker/k8s/head.yaml"
expect_failure k8s "the head does not mount the keys" "atoll-head/head: should mount the keys"

fresh  # the demo client given the cluster's secret key
sed -i 's/{key: cluster.pub, path: cluster.pub}/{key: cluster.key, path: cluster.key}/' \
  "$work/tree/docker/k8s/demo-job.yaml"
expect_failure k8s "a client pod holds cluster.key" "must not hold the cluster's secret key"

fresh  # a client allowed in the Secret but not given to the services
sed -i 's|^      - allowed.default.pub=keys/allowed/default.pub|&\n      - allowed.alice.pub=keys/allowed/alice.pub|' \
  "$work/tree/docker/k8s/kustomization.yaml"
expect_failure k8s "services lack an allowed key" "lacks \\['allowed.alice.pub'\\]"

fresh  # bad YAML style
echo "extra:   [a,b]   " >>"$work/tree/docker/k8s/namespace.yaml"
expect_failure k8s "yamllint finds problems" "yamllint"
echo "PASS"
