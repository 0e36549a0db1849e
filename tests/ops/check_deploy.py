#!/usr/bin/env python3
"""Offline validation of the deployment files against the cluster config.

    check_deploy.py compose SOURCE_DIR   docker/compose.yaml, config/docker.toml, Dockerfile
    check_deploy.py k8s SOURCE_DIR       docker/k8s/

Both check that the files describe the topology of config/local.toml (the same islands and
hosts), that services reach each other by name rather than loopback, that a host's object
store and executor share what they must (IPC / /dev/shm, the run directory), and that the
deployment is secure by default: the config says CURVE with its keys in /etc/atoll/keys,
and every container mounts the keys there read-only (compose: the volume the one-shot
`keys` service fills; Kubernetes: the Secret atoll-keys, client pods without the cluster's
secret key). The compose check also runs Debian's `docker-compose config`; the Kubernetes
check runs yamllint and, where kubectl is installed (it is not a Debian package),
`kubectl kustomize`. No docker engine or Kubernetes API server is needed or contacted.

Exit status: 0 when everything holds, 1 with one line per problem otherwise.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib

import yaml

problems = []

# Where every container finds the CURVE keys (security.keys_dir of both configs).
KEYS_DIR = "/etc/atoll/keys"
# The service roles of docker/atoll-container: containers that hold the cluster's key pair.
MEMBER_ROLES = ("rm", "objectstore", "executor", "scheduler")


def check(condition, message):
    if not condition:
        problems.append(message)
    return condition


def run(argv, cwd):
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=60)


def topology(path):
    """{island: [(host, devices, kind, device_memory_mb, arena_mb)]} of a cluster config."""
    with open(path, "rb") as f:
        config = tomllib.load(f)
    out = {}
    for island in config.get("islands", []):
        out[island["name"]] = [
            (h["name"], h.get("devices", 1), h.get("kind", "cpu"),
             h.get("device_memory_mb", 256), h.get("arena_mb", 256))
            for h in island.get("hosts", [])
        ]
    return config, out


def endpoint_host(endpoint):
    m = re.match(r"^tcp://([^:]+):(\d+|\*)$", endpoint)
    return (m.group(1), m.group(2)) if m else (None, None)


def megabytes(size):
    """'256m' -> 256 (MiB); '1g' -> 1024; '256Mi' -> 256."""
    m = re.match(r"^(\d+)\s*([kmg])i?b?$", str(size).strip(), re.IGNORECASE)
    if not m:
        return 0
    return int(m.group(1)) * {"k": 1 / 1024, "m": 1, "g": 1024}[m.group(2).lower()]


def check_config_matches(name, path, local_topology, rm_host):
    config, topo = topology(path)
    check(topo == local_topology,
          f"{name}: islands/hosts {topo} differ from config/local.toml's {local_topology}")
    for key in ("endpoint", "events_in", "events_out"):
        host, port = endpoint_host(config.get("rm", {}).get(key, ""))
        check(host == rm_host, f"{name}: rm.{key} should name the host '{rm_host}', not {host}")
        check(port is not None and port.isdigit(), f"{name}: rm.{key} needs a fixed port")
    bind = config.get("cluster", {}).get("bind_host", "")
    check(bind not in ("127.0.0.1", "localhost", "::1"),
          f"{name}: cluster.bind_host '{bind}' is loopback: peers in other containers "
          "could not reach what it registers")
    security = config.get("security", {})
    check(security.get("mode", "curve") == "curve",
          f"{name}: security.mode should be \"curve\" (secure by default), not "
          f"\"{security.get('mode')}\"")
    check(security.get("keys_dir") == KEYS_DIR,
          f"{name}: security.keys_dir should be {KEYS_DIR}, where the keys are mounted, "
          f"not {security.get('keys_dir')}")
    return config


def env_of(service):
    env = service.get("environment", {})
    if isinstance(env, list):
        env = dict(e.split("=", 1) for e in env)
    return env


def mounts_of(service):
    """[(source, target, read_only)] of a compose service's volumes, short or long syntax."""
    out = []
    for v in service.get("volumes", []):
        if isinstance(v, dict):
            out.append((v.get("source"), v.get("target"), bool(v.get("read_only"))))
        else:
            parts = v.split(":")
            mode = parts[2].split(",") if len(parts) > 2 else []
            out.append((parts[0], parts[1] if len(parts) > 1 else parts[0], "ro" in mode))
    return out


def check_compose_keys(services, volumes):
    """The one-shot `keys` service fills a volume that every other service mounts read-only
    at KEYS_DIR, and each starts only once `keys` has completed."""
    keys = services.get("keys", {})
    check(keys.get("command") == ["atoll", "keygen", "--dir", KEYS_DIR],
          f"compose keys: command should be atoll keygen --dir {KEYS_DIR}")
    made = [src for (src, target, ro) in mounts_of(keys) if target == KEYS_DIR and not ro]
    if not check(len(made) == 1 and made[0] in volumes,
                 f"compose keys: should mount a named volume at {KEYS_DIR}, writable"):
        return
    for name, svc in services.items():
        if name == "keys":
            continue
        check((made[0], KEYS_DIR, True) in mounts_of(svc),
              f"compose {name}: should mount the keys volume {made[0]} at {KEYS_DIR} read-only")
        depends = svc.get("depends_on", {})
        check(isinstance(depends, dict) and depends.get("keys", {}).get("condition") ==
              "service_completed_successfully",
              f"compose {name}: should depend on keys with condition "
              "service_completed_successfully")


def check_compose(root):
    _, local = topology(os.path.join(root, "config/local.toml"))
    docker = check_config_matches("config/docker.toml", os.path.join(root, "config/docker.toml"),
                                  local, "rm")
    path = os.path.join(root, "docker/compose.yaml")
    with open(path) as f:
        compose = yaml.safe_load(f)
    services = compose.get("services", {})

    expected = {"keys", "rm", "client", "dashboard"}
    for island, hosts in local.items():
        expected.add(f"scheduler-{island}")
        for (host, *_rest) in hosts:
            expected |= {f"objectstore-{host}", f"executor-{host}"}
    check(set(services) == expected,
          f"compose services {sorted(services)} differ from the topology's {sorted(expected)}")

    volumes = set(compose.get("volumes", {}) or {})
    for name, svc in services.items():
        env = env_of(svc)
        if name not in ("keys", "client", "dashboard"):
            check(env.get("ATOLL_CONFIG") == "/etc/atoll/docker.toml",
                  f"compose {name}: ATOLL_CONFIG should be /etc/atoll/docker.toml")
        check(svc.get("image") == "atoll:latest", f"compose {name}: image should be atoll:latest")
        for (source, _target, _ro) in mounts_of(svc):
            check(source in volumes, f"compose {name}: volume {source} is not declared")
    check_compose_keys(services, volumes)

    for island, hosts in local.items():
        sched = services.get(f"scheduler-{island}", {})
        check(env_of(sched).get("ATOLL_ISLAND") == island,
              f"compose scheduler-{island}: ATOLL_ISLAND should be {island}")
        check(sched.get("command") == ["atoll-container", "scheduler"],
              f"compose scheduler-{island}: command should be atoll-container scheduler")
        for (host, _devices, _kind, _mem, arena_mb) in hosts:
            store = services.get(f"objectstore-{host}", {})
            execu = services.get(f"executor-{host}", {})
            check(env_of(store).get("ATOLL_HOST") == host,
                  f"compose objectstore-{host}: ATOLL_HOST should be {host}")
            check(env_of(execu).get("ATOLL_HOST") == host,
                  f"compose executor-{host}: ATOLL_HOST should be {host}")
            check(store.get("ipc") == "shareable",
                  f"compose objectstore-{host}: ipc should be shareable")
            check(execu.get("ipc") == f"service:objectstore-{host}",
                  f"compose executor-{host}: ipc should be service:objectstore-{host} "
                  "(to map the store's arena)")
            check(megabytes(store.get("shm_size", "64m")) >= arena_mb,
                  f"compose objectstore-{host}: shm_size {store.get('shm_size')} cannot hold "
                  f"the {arena_mb} MiB arena")
            store_run = [src for (src, target, _ro) in mounts_of(store) if target == "/run/atoll"]
            exec_run = [src for (src, target, _ro) in mounts_of(execu) if target == "/run/atoll"]
            check(store_run and store_run == exec_run,
                  f"compose {host}: object store and executor must mount one volume at /run/atoll")
            check(f"objectstore-{host}" in execu.get("depends_on", {}),
                  f"compose executor-{host}: should depend on objectstore-{host}")
            check(f"executor-{host}" in sched.get("depends_on", {}),
                  f"compose scheduler-{island}: should depend on executor-{host}")

    client = services.get("client", {})
    command = client.get("command", [])
    check(command[:2] == ["atoll", "submit"], "compose client: should run `atoll submit`")
    if len(command) >= 3:
        job = command[-1]
        check(job.startswith("/usr/share/atoll/examples/") and os.path.exists(
            os.path.join(root, "examples", os.path.basename(job))),
            f"compose client: {job} is not one of examples/ (the image's /usr/share/atoll/examples)")
    for name in ("client", "dashboard"):
        env = env_of(services.get(name, {}))
        check(env.get("ATOLL_RM") == docker["rm"]["endpoint"],
              f"compose {name}: ATOLL_RM should be {docker['rm']['endpoint']}")
        check(env.get("ATOLL_EVENTS") == docker["rm"]["events_out"],
              f"compose {name}: ATOLL_EVENTS should be {docker['rm']['events_out']}")
        check(env.get("ATOLL_KEYS") == KEYS_DIR,
              f"compose {name}: ATOLL_KEYS should be {KEYS_DIR} (its client key)")
    for port in services.get("dashboard", {}).get("ports", []):
        check(str(port).startswith("127.0.0.1:"),
              f"compose dashboard: publish {port} on the docker host's loopback only")

    with open(os.path.join(root, "docker/Dockerfile")) as f:
        dockerfile = f.read()
    for needed in ("COPY docker/atoll-container", "COPY config/ /etc/atoll/",
                   "COPY examples/ /usr/share/atoll/examples/", "libcpp-httplib"):
        check(needed in dockerfile, f"docker/Dockerfile: missing `{needed}`")

    tool = shutil.which("docker-compose")
    if check(tool is not None,
             "docker-compose (Debian package docker-compose) is not installed: run scripts/setup.sh"):
        r = run([tool, "-f", path, "config", "-q"], root)
        check(r.returncode == 0, f"docker-compose config: {r.stderr.strip()}")
        r = run([tool, "-f", path, "config", "--services"], root)
        check(set(r.stdout.split()) == set(services),
              f"docker-compose config --services: {r.stdout.split()}")
        print(f"docker-compose config: {len(services)} services valid")


def load_k8s(root):
    base = os.path.join(root, "docker/k8s")
    with open(os.path.join(base, "kustomization.yaml")) as f:
        kustomization = yaml.safe_load(f)
    objects = []
    for resource in kustomization.get("resources", []):
        path = os.path.join(base, resource)
        if not check(os.path.exists(path), f"k8s: resource {resource} does not exist"):
            continue
        with open(path) as f:
            for doc in yaml.safe_load_all(f):
                if doc:
                    objects.append(doc)
    listed = set(kustomization.get("resources", []))
    for name in os.listdir(base):
        if name.endswith(".yaml") and name != "kustomization.yaml":
            check(name in listed, f"k8s: {name} is not listed in kustomization.yaml")
    return base, kustomization, objects


def pod_spec(obj):
    return obj.get("spec", {}).get("template", {}).get("spec", {})


def keys_path(secret_key):
    """Where a key of the Secret atoll-keys belongs in a keys folder: the Secret's keys are
    flat, so "clients.NAME.key" stands for clients/NAME.key, "allowed.NAME.pub" for
    allowed/NAME.pub (common/net/curve_keys.h)."""
    for folder in ("clients", "allowed"):
        if secret_key.startswith(folder + "."):
            return folder + "/" + secret_key[len(folder) + 1:]
    return secret_key


def secret_keys(kustomization):
    """{key: file} of the kustomization's Secret atoll-keys, checked against the layout."""
    generators = {g["name"]: g for g in kustomization.get("secretGenerator", [])}
    if not check("atoll-keys" in generators, "k8s: kustomization makes no Secret atoll-keys"):
        return {}
    keys = {}
    for entry in generators["atoll-keys"].get("files", []):
        key, _, path = entry.partition("=")
        keys[key] = path
        check(path == "keys/" + keys_path(key),
              f"k8s: Secret atoll-keys' {key} should come from keys/{keys_path(key)} "
              f"(what `atoll keygen --dir docker/k8s/keys` makes), not {path}")
    for needed in ("cluster.key", "cluster.pub", "clients.default.key", "allowed.default.pub"):
        check(needed in keys, f"k8s: Secret atoll-keys lacks {needed}")
    return keys


def check_pod_keys(name, spec, keys):
    """Every container of a pod mounts the Secret atoll-keys read-only at KEYS_DIR: a member
    (a service) gets the cluster's key pair and every allowed client key, a client the
    cluster's public key and the client key "default", never the cluster's secret key."""
    volumes = [v for v in spec.get("volumes", [])
               if v.get("secret", {}).get("secretName") == "atoll-keys"]
    if not check(len(volumes) == 1, f"k8s {name}: the pod should have one volume of the "
                                    "Secret atoll-keys"):
        return
    volume = volumes[0]
    member = any(c.get("command", [])[:1] == ["atoll-container"] and
                 c["command"][1:2] and c["command"][1] in MEMBER_ROLES
                 for c in spec.get("containers", []))
    for c in spec.get("containers", []):
        check(any(m["name"] == volume["name"] and m["mountPath"] == KEYS_DIR and
                  m.get("readOnly") for m in c.get("volumeMounts", [])),
              f"k8s {name}/{c['name']}: should mount the keys at {KEYS_DIR} read-only")
        if not member:
            env = {e["name"]: e.get("value") for e in c.get("env", [])}
            check(env.get("ATOLL_KEYS") == KEYS_DIR,
                  f"k8s {name}/{c['name']}: ATOLL_KEYS should be {KEYS_DIR}")
    items = {i["key"]: i["path"] for i in volume["secret"].get("items", [])}
    for key, path in items.items():
        check(key in keys and path == keys_path(key),
              f"k8s {name}: key {key} of atoll-keys should exist and be put at {keys_path(key)}")
    if member:
        needed = {"cluster.key"} | {k for k in keys if k.startswith("allowed.")}
    else:
        needed = {"cluster.pub", "clients.default.key"}
        check("cluster.key" not in items,
              f"k8s {name}: a client pod must not hold the cluster's secret key")
    check(needed <= set(items), f"k8s {name}: the keys volume lacks {sorted(needed - set(items))}")


def check_k8s(root):
    _, local = topology(os.path.join(root, "config/local.toml"))
    base, kustomization, objects = load_k8s(root)
    generators = {g["name"]: g for g in kustomization.get("configMapGenerator", [])}
    check("atoll-config" in generators, "k8s: kustomization makes no ConfigMap atoll-config")
    files = generators.get("atoll-config", {}).get("files", [])
    check(files == ["cluster.toml"], "k8s: atoll-config should hold cluster.toml")
    config = check_config_matches("docker/k8s/cluster.toml", os.path.join(base, "cluster.toml"),
                                  local, "atoll-rm")
    keys = secret_keys(kustomization)

    by_kind = {}
    for obj in objects:
        check(obj.get("apiVersion") and obj.get("kind") and obj.get("metadata", {}).get("name"),
              f"k8s: an object lacks apiVersion, kind or metadata.name: {str(obj)[:80]}")
        by_kind.setdefault(obj.get("kind"), {})[obj["metadata"]["name"]] = obj

    workloads = []
    for kind in ("Deployment", "StatefulSet", "Job"):
        workloads += list(by_kind.get(kind, {}).values())
    pod_labels = []
    for w in workloads:
        name = w["metadata"]["name"]
        labels = w["spec"]["template"].get("metadata", {}).get("labels", {})
        pod_labels.append(labels)
        if w["kind"] != "Job":
            selector = w["spec"].get("selector", {}).get("matchLabels", {})
            check(selector and all(labels.get(k) == v for k, v in selector.items()),
                  f"k8s {name}: selector {selector} does not match its pod labels {labels}")
        spec = pod_spec(w)
        declared = {v["name"]: v for v in spec.get("volumes", [])}
        for c in spec.get("containers", []):
            check(c.get("image") == "atoll", f"k8s {name}/{c['name']}: image should be atoll")
            for m in c.get("volumeMounts", []):
                check(m["name"] in declared, f"k8s {name}/{c['name']}: volume {m['name']} undeclared")
            for e in c.get("env", []):
                if e["name"] in ("ATOLL_CONFIG",):
                    check(e["value"] == "/etc/atoll/k8s/cluster.toml",
                          f"k8s {name}: ATOLL_CONFIG should be /etc/atoll/k8s/cluster.toml")
        for v in declared.values():
            if "configMap" in v:
                check(v["configMap"]["name"] in generators,
                      f"k8s {name}: ConfigMap {v['configMap']['name']} is not generated")
        check_pod_keys(name, spec, keys)

    for svc in by_kind.get("Service", {}).values():
        selector = svc["spec"].get("selector", {})
        check(any(all(l.get(k) == v for k, v in selector.items()) for l in pod_labels),
              f"k8s Service {svc['metadata']['name']}: selector {selector} selects no pod")

    # The rm: a Deployment, and a Service named as the config's endpoints say.
    check("atoll-rm" in by_kind.get("Deployment", {}), "k8s: no Deployment atoll-rm")
    rm_svc = by_kind.get("Service", {}).get("atoll-rm")
    if check(rm_svc is not None, "k8s: no Service atoll-rm"):
        ports = {p["port"] for p in rm_svc["spec"]["ports"]}
        for key in ("endpoint", "events_in", "events_out"):
            port = int(endpoint_host(config["rm"][key])[1])
            check(port in ports, f"k8s Service atoll-rm: no port {port} for rm.{key}")

    for island, hosts in local.items():
        sched = by_kind.get("Deployment", {}).get(f"atoll-scheduler-{island}")
        if check(sched is not None, f"k8s: no Deployment atoll-scheduler-{island}"):
            env = {e["name"]: e for e in pod_spec(sched)["containers"][0].get("env", [])}
            check(env.get("ATOLL_ISLAND", {}).get("value") == island,
                  f"k8s atoll-scheduler-{island}: ATOLL_ISLAND should be {island}")
            check("ATOLL_BIND_HOST" in env, f"k8s atoll-scheduler-{island}: no ATOLL_BIND_HOST")
        check(f"atoll-scheduler-{island}" in by_kind.get("Service", {}),
              f"k8s: no Service atoll-scheduler-{island}")
        sts = by_kind.get("StatefulSet", {}).get(f"atoll-{island}")
        if not check(sts is not None, f"k8s: no StatefulSet atoll-{island} for the hosts"):
            continue
        check(sts["spec"].get("serviceName") in by_kind.get("Service", {}),
              f"k8s atoll-{island}: serviceName names no Service")
        replicas = sts["spec"].get("replicas", 1)
        spec = pod_spec(sts)
        containers = {c["name"]: c for c in spec.get("containers", [])}
        check(set(containers) == {"objectstore", "executor"},
              f"k8s atoll-{island}: the pod should hold objectstore and executor, "
              f"not {sorted(containers)}")
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        for cname, c in containers.items():
            env = {e["name"]: e for e in c.get("env", [])}
            prefix = env.get("ATOLL_HOST_PREFIX", {}).get("value", "")
            names = [prefix + str(i) for i in range(replicas)]
            check(names == [h[0] for h in hosts],
                  f"k8s atoll-{island}/{cname}: pods are hosts {names}, the config has "
                  f"{[h[0] for h in hosts]}")
            check(env.get("ATOLL_BIND_HOST", {}).get("valueFrom", {}).get("fieldRef", {})
                  .get("fieldPath") == "status.podIP",
                  f"k8s atoll-{island}/{cname}: ATOLL_BIND_HOST should be the pod IP")
            mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
            shm = volumes.get(mounts.get("/dev/shm"), {})
            check(shm.get("emptyDir", {}).get("medium") == "Memory",
                  f"k8s atoll-{island}/{cname}: /dev/shm should be a memory emptyDir")
            arena = max(h[4] for h in hosts)
            check(megabytes(shm.get("emptyDir", {}).get("sizeLimit", "0")) >= arena,
                  f"k8s atoll-{island}: /dev/shm cannot hold the {arena} MiB arena")
            check("emptyDir" in volumes.get(mounts.get("/run/atoll"), {}),
                  f"k8s atoll-{island}/{cname}: /run/atoll should be a shared emptyDir")
        if len(containers) == 2:
            a, b = containers["objectstore"], containers["executor"]
            ma = {m["mountPath"]: m["name"] for m in a.get("volumeMounts", [])}
            mb = {m["mountPath"]: m["name"] for m in b.get("volumeMounts", [])}
            for path in ("/dev/shm", "/run/atoll"):
                check(ma.get(path) and ma.get(path) == mb.get(path),
                      f"k8s atoll-{island}: objectstore and executor must share {path}")
            check(a["command"] == ["atoll-container", "objectstore"] and
                  b["command"] == ["atoll-container", "executor"],
                  f"k8s atoll-{island}: containers should run atoll-container objectstore/executor")

    for name in ("atoll-dashboard",):
        check(name in by_kind.get("Deployment", {}) and name in by_kind.get("Service", {}),
              f"k8s: no Deployment and Service {name}")

    yamllint = shutil.which("yamllint")
    if check(yamllint is not None,
             "yamllint (Debian package yamllint) is not installed: run scripts/setup.sh"):
        r = run([yamllint, "-c", os.path.join(root, ".yamllint.yaml"), "docker/"], root)
        check(r.returncode == 0, f"yamllint: {r.stdout.strip()} {r.stderr.strip()}")
        print("yamllint: docker/ clean")

    kubectl = shutil.which("kubectl")
    if kubectl is None:
        print("kubectl is not installed (no Debian package): skipped `kubectl kustomize`; "
              "checked the manifests' structure here instead")
    else:
        check_kustomize(kubectl, base, kustomization, len(objects))


def check_kustomize(kubectl, base, kustomization, resources):
    """Renders the manifests with `kubectl kustomize` (offline: `kubectl apply --dry-run=client`
    needs an API server for discovery), from a copy whose keys/ holds placeholders: the real
    keys are made by whoever deploys, and are not in the repository."""
    with tempfile.TemporaryDirectory() as work:
        copy = os.path.join(work, "k8s")
        shutil.copytree(base, copy, ignore=shutil.ignore_patterns("keys"))
        for g in kustomization.get("secretGenerator", []):
            for entry in g.get("files", []):
                path = os.path.join(copy, entry.partition("=")[2] or entry)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w") as f:
                    f.write('public = "placeholder"\n')
        r = run([kubectl, "kustomize", copy], work)
    if not check(r.returncode == 0, f"kubectl kustomize: {r.stderr.strip()}"):
        return
    rendered = [d for d in yaml.safe_load_all(r.stdout) if d]
    check(len(rendered) == resources + 2,
          f"kubectl kustomize rendered {len(rendered)} objects, expected {resources + 2} "
          "(resources + the ConfigMap and the Secret)")
    secrets = [d["metadata"]["name"] for d in rendered if d["kind"] == "Secret"]
    for d in rendered:
        for v in pod_spec(d).get("volumes", []):
            if "secret" in v:
                check(v["secret"]["secretName"] in secrets,
                      f"kubectl kustomize: {d['metadata']['name']} mounts Secret "
                      f"{v['secret']['secretName']}, which it does not make")
    print(f"kubectl kustomize: {len(rendered)} objects")


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("compose", "k8s"):
        print(__doc__, file=sys.stderr)
        return 2
    root = os.path.abspath(sys.argv[2])
    (check_compose if sys.argv[1] == "compose" else check_k8s)(root)
    for p in problems:
        print(f"FAIL: {p}")
    if not problems:
        print(f"{sys.argv[1]}: OK")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
