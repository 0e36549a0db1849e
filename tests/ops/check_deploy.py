#!/usr/bin/env python3
"""Offline validation of the deployment files against the cluster config.

    check_deploy.py compose SOURCE_DIR   docker/compose.yaml, config/docker.toml, Dockerfile
    check_deploy.py k8s SOURCE_DIR       docker/k8s/

Both layouts take the join path: a head (`atoll start head --foreground`) and hosts that
join it (`atoll start host --foreground`), no host listed in their configs. Both check that
the hosts they start are the islands and hosts of config/local.toml (names aside on
Kubernetes, where a host is named after its pod), that the head advertises a name its
peers resolve and keeps the RM's state on a volume, that every part has its health checks
(`atoll probe ready`; on Kubernetes liveness `atoll probe live` too), runs as a non-root
user with memory and cpu limits, and that the deployment is secure by default: the config
says CURVE with its keys in /etc/atoll/keys, and every container mounts the keys there
read-only but the head's, which makes them (compose), or the Secret atoll-keys (Kubernetes,
client pods without the cluster's secret key).

The compose check also runs Debian's `docker-compose config`. The Kubernetes check checks
every object against the Kubernetes API's schema as the kubernetes package from PyPI
has it: each field must be one of its kind's, of the right type, and the required ones
present. It also runs yamllint and, where kubectl is installed (it is not a Debian
package), `kubectl kustomize`. No docker engine or Kubernetes API server is needed.

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
# The image's user (docker/Dockerfile).
USER_ID = 10001
# What a host takes when the config does not list it (common/service/config.h's HostConfig).
DEFAULT_ARENA_MB = 256
DEFAULT_DEVICE_MB = 256


def region_mb(devices):
    """The object store's shared-memory region in /dev/shm: its arena and each device's
    memory (services/objectstore/memory_pools.h)."""
    return DEFAULT_ARENA_MB + devices * DEFAULT_DEVICE_MB
READY = ["atoll", "probe", "ready"]
LIVE = ["atoll", "probe", "live"]


def check(condition, message):
    if not condition:
        problems.append(message)
    return condition


def run(argv, cwd):
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=60)


def load_config(path):
    with open(path, "rb") as f:
        return tomllib.load(f)


def topology(config):
    """{island: sorted [(host, devices, kind)]} of a cluster config."""
    return {island["name"]: sorted((h["name"], h.get("devices", 1), h.get("kind", "cpu"))
                                   for h in island.get("hosts", []))
            for island in config.get("islands", [])}


def endpoint_host(endpoint):
    m = re.match(r"^tcp://([^:]+):(\d+|\*)$", endpoint)
    return (m.group(1), m.group(2)) if m else (None, None)


def megabytes(size):
    """'256m' -> 256 (MiB); '1g' -> 1024; '256Mi' -> 256."""
    m = re.match(r"^(\d+)\s*([kmg])i?b?$", str(size).strip(), re.IGNORECASE)
    if not m:
        return 0
    return int(m.group(1)) * {"k": 1 / 1024, "m": 1, "g": 1024}[m.group(2).lower()]


def option(command, name):
    """The value of `--name VALUE` in a command's words, or None."""
    for i, word in enumerate(command[:-1]):
        if word == name:
            return command[i + 1]
    return None


def start_part(command):
    """"head" or "host" for `atoll start head|host ...`, else None."""
    if command[:2] == ["atoll", "start"] and len(command) > 2:
        return command[2]
    return None


def check_part_command(where, command, config_path, rm_endpoint):
    """The options every `atoll start` of a layout needs."""
    check("--foreground" in command,
          f"{where}: `atoll start` should run with --foreground (the container's main process)")
    check(option(command, "--config") == config_path,
          f"{where}: --config should be {config_path}, not {option(command, '--config')}")
    if start_part(command) == "host":
        check(option(command, "--rm") == rm_endpoint,
              f"{where}: --rm should be the config's rm.endpoint {rm_endpoint}, "
              f"not {option(command, '--rm')}")


def check_config(name, path, local, rm_host):
    """A layout's config: the islands of config/local.toml and no hosts (they join), the RM
    named as `rm_host` on fixed ports, CURVE with KEYS_DIR. Returns the config."""
    config = load_config(path)
    islands = [i["name"] for i in config.get("islands", [])]
    check(islands == list(local),
          f"{name}: islands {islands} differ from config/local.toml's {list(local)}")
    listed = [h["name"] for i in config.get("islands", []) for h in i.get("hosts", [])]
    check(not listed, f"{name}: lists hosts {listed}: hosts join the head, and the layout "
                      "alone says which there are")
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


# ---- compose -------------------------------------------------------------------------------


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


def volume_at(service, path, volumes):
    """The named volume mounted at `path`'s folder (or above it), or None."""
    for source, target, _ro in mounts_of(service):
        if source in volumes and (path == target or path.startswith(target.rstrip("/") + "/")):
            return source
    return None


def check_compose_service(name, svc, volumes):
    """What every service of the compose file has: the image, a non-root user, limits, an
    init, the keys (read-only but the head's)."""
    check(svc.get("image") == "${ATOLL_IMAGE:-atoll:latest}",
          f"compose {name}: image should be ${{ATOLL_IMAGE:-atoll:latest}}")
    user = str(svc.get("user", ""))
    check(user.split(":")[0] == str(USER_ID),
          f"compose {name}: should run as the image's user {USER_ID}, not '{user}' (non-root)")
    check(svc.get("mem_limit") and svc.get("cpus"), f"compose {name}: needs mem_limit and cpus")
    check(svc.get("init") is True, f"compose {name}: needs init: true (reaps the services' "
                                   "orphans, passes signals on)")
    for (source, _target, _ro) in mounts_of(svc):
        check(source in volumes, f"compose {name}: volume {source} is not declared")
    keys = [(source, ro) for (source, target, ro) in mounts_of(svc) if target == KEYS_DIR]
    read_only = start_part(svc.get("command", [])) != "head"
    check(len(keys) == 1 and keys[0][0] in volumes and keys[0][1] == read_only,
          f"compose {name}: should mount the keys volume at {KEYS_DIR}"
          f"{' read-only' if read_only else ', writable (it makes the keys)'}")


def check_compose(root):
    local = topology(load_config(os.path.join(root, "config/local.toml")))
    docker = check_config("config/docker.toml", os.path.join(root, "config/docker.toml"), local,
                          "head")
    rm_endpoint = docker["rm"]["endpoint"]
    path = os.path.join(root, "docker/compose.yaml")
    with open(path) as f:
        compose = yaml.safe_load(f)
    services = compose.get("services", {})
    volumes = set(compose.get("volumes", {}) or {})
    for name, svc in services.items():
        check_compose_service(name, svc, volumes)

    heads = [n for n, s in services.items() if start_part(s.get("command", [])) == "head"]
    hosts = {n: s for n, s in services.items() if start_part(s.get("command", [])) == "host"}
    if check(heads == ["head"], f"compose: one service `head` should start the head, not {heads}"):
        head = services["head"]
        command = head["command"]
        check_part_command("compose head", command, "/etc/atoll/docker.toml", rm_endpoint)
        check(option(command, "--advertise") == "head",
              "compose head: should --advertise its service name head, which follows it to a "
              "new address")
        state = option(command, "--rm-state") or ""
        check(volume_at(head, state, volumes) is not None,
              f"compose head: --rm-state '{state}' should be on a named volume (the RM's state "
              "file outlives the container)")
        check(head.get("healthcheck", {}).get("test") == ["CMD"] + READY,
              "compose head: healthcheck should be atoll probe ready")

    joined = {}
    for name, svc in hosts.items():
        command = svc["command"]
        check_part_command(f"compose {name}", command, "/etc/atoll/docker.toml", rm_endpoint)
        check(option(command, "--host") == name,
              f"compose {name}: --host should be the service's name {name}")
        island = option(command, "--island")
        devices = int(option(command, "--devices") or 1)
        joined.setdefault(island, []).append((name, devices, option(command, "--kind") or "cpu"))
        check(svc.get("healthcheck", {}).get("test") == ["CMD"] + READY,
              f"compose {name}: healthcheck should be atoll probe ready")
        check(svc.get("depends_on", {}).get("head", {}).get("condition") == "service_healthy",
              f"compose {name}: should start once the head is healthy")
        check(megabytes(svc.get("shm_size", "64m")) >= region_mb(devices),
              f"compose {name}: shm_size {svc.get('shm_size')} cannot hold the store's "
              f"{region_mb(devices)} MiB region (arena and {devices} devices) in /dev/shm")
    joined = {island: sorted(h) for island, h in joined.items()}
    check(joined == local, f"compose: the hosts that join {joined} differ from "
                           f"config/local.toml's {local}")

    check(set(services) == {"head", "client", "dashboard"} | set(hosts),
          f"compose: services {sorted(services)} should be head, the hosts, client, dashboard")
    client = services.get("client", {})
    command = client.get("command", [])
    check(command[:2] == ["atoll", "submit"], "compose client: should run `atoll submit`")
    if len(command) >= 3:
        job = command[-1]
        check(job.startswith("/usr/share/atoll/examples/") and os.path.exists(
            os.path.join(root, "examples", os.path.basename(job))),
            f"compose client: {job} is not one of examples/ (the image's /usr/share/atoll/examples)")
    for host in hosts:
        check(client.get("depends_on", {}).get(host, {}).get("condition") == "service_healthy",
              f"compose client: should start once {host} is healthy")
    for name in ("client", "dashboard"):
        env = env_of(services.get(name, {}))
        check(env.get("ATOLL_RM") == rm_endpoint,
              f"compose {name}: ATOLL_RM should be {rm_endpoint}")
        check(env.get("ATOLL_EVENTS") == docker["rm"]["events_out"],
              f"compose {name}: ATOLL_EVENTS should be {docker['rm']['events_out']}")
        check(env.get("ATOLL_KEYS") == KEYS_DIR,
              f"compose {name}: ATOLL_KEYS should be {KEYS_DIR} (its client key)")
    for port in services.get("dashboard", {}).get("ports", []):
        check(str(port).startswith("127.0.0.1:"),
              f"compose dashboard: publish {port} on the docker host's loopback only")

    check_dockerfile(root)
    tool = shutil.which("docker-compose")
    if check(tool is not None,
             "docker-compose (Debian package docker-compose) is not installed: run scripts/setup.sh"):
        r = run([tool, "-f", path, "config", "-q"], root)
        check(r.returncode == 0, f"docker-compose config: {r.stderr.strip()}")
        r = run([tool, "-f", path, "config", "--services"], root)
        check(set(r.stdout.split()) == set(services),
              f"docker-compose config --services: {r.stdout.split()}")
        print(f"docker-compose config: {len(services)} services valid")


def check_dockerfile(root):
    with open(os.path.join(root, "docker/Dockerfile")) as f:
        dockerfile = f.read()
    for needed in ("COPY config/ /etc/atoll/", "COPY examples/ /usr/share/atoll/examples/",
                   "libcpp-httplib", "AS runtime", f"USER {USER_ID}:{USER_ID}"):
        check(needed in dockerfile, f"docker/Dockerfile: missing `{needed}`")
    # The folders that named volumes mount take their owner from the image: the user's.
    for folder in (KEYS_DIR, "/var/lib/atoll"):
        check(re.search(rf"install -d -o atoll -g atoll [^\n]*{re.escape(folder)}", dockerfile),
              f"docker/Dockerfile: {folder} should be made the atoll user's (install -d -o atoll)")


# ---- Kubernetes ----------------------------------------------------------------------------


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
            objects += [doc for doc in yaml.safe_load_all(f) if doc]
    listed = set(kustomization.get("resources", []))
    for name in os.listdir(base):
        if name.endswith(".yaml") and name != "kustomization.yaml":
            check(name in listed, f"k8s: {name} is not listed in kustomization.yaml")
    return base, kustomization, objects


def check_schema(objects):
    """Every object against the Kubernetes API's models (kubernetes from PyPI): no field its
    kind lacks, every value of its field's type, the required fields present."""
    try:
        import kubernetes
        import kubernetes.client as models
    except ImportError:
        check(False, "the kubernetes package is not installed: run scripts/setup.sh (.venv)")
        return
    scalars = {"str": (str,), "int": (int,), "bool": (bool,), "float": (int, float),
               "object": (str, int, dict, list), "datetime": (str,), "date": (str,)}

    # The models name their fields' types as "list[V1Container]" and "dict(str, str)" (the
    # generator of client 1.22's time), or "List[V1Container]" and "Dict[str, str]" (since).
    def walk(value, type_name, where):
        if type_name.startswith(("list[", "List[")):
            if check(isinstance(value, list), f"{where}: should be a list"):
                for i, item in enumerate(value):
                    walk(item, type_name[5:-1], f"{where}[{i}]")
        elif type_name.startswith(("dict(", "Dict[")):
            inner = type_name[type_name.index(",") + 1:-1].strip()
            if check(isinstance(value, dict), f"{where}: should be a mapping"):
                for key, item in value.items():
                    walk(item, inner, f"{where}.{key}")
        elif type_name in scalars:
            check(isinstance(value, scalars[type_name]) and
                  (type_name == "bool" or not isinstance(value, bool)),
                  f"{where}: should be {type_name}, not {value!r}")
        else:
            model = getattr(models, type_name)
            if not check(isinstance(value, dict), f"{where}: should be a {type_name} mapping"):
                return
            fields = {json: attr for attr, json in model.attribute_map.items()}
            for key, item in value.items():
                if check(key in fields, f"{where}: {type_name} has no field '{key}'"):
                    walk(item, model.openapi_types[fields[key]], f"{where}.{key}")

    client = models.ApiClient()
    for obj in objects:
        kind, version = obj.get("kind", ""), str(obj.get("apiVersion", "")).split("/")[-1]
        type_name = version.capitalize() + kind
        where = f"k8s {kind} {obj.get('metadata', {}).get('name')}"
        if not check(hasattr(models, type_name), f"{where}: no such kind in the API ({type_name})"):
            continue
        before = len(problems)
        walk(obj, type_name, where)
        if len(problems) == before:
            try:  # the model's own checks: required fields, allowed values
                client._ApiClient__deserialize(obj, type_name)
            except (ValueError, TypeError) as e:
                check(False, f"{where}: {e}")
    print(f"schema: {len(objects)} objects checked against the API of kubernetes "
          f"{kubernetes.__version__}")


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
    (a part of the cluster) gets the cluster's key pair and every allowed client key, a
    client the cluster's public key and the client key "default", never the cluster's
    secret key."""
    volumes = [v for v in spec.get("volumes", [])
               if v.get("secret", {}).get("secretName") == "atoll-keys"]
    if not check(len(volumes) == 1, f"k8s {name}: the pod should have one volume of the "
                                    "Secret atoll-keys"):
        return
    volume = volumes[0]
    member = any(start_part(c.get("command", [])) for c in spec.get("containers", []))
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


def check_workload_pods(w):
    """A workload's pods run as a non-root user, with limits and health checks."""
    name = w["metadata"]["name"]
    spec = pod_spec(w)
    pod_security = spec.get("securityContext", {})
    for c in spec.get("containers", []):
        where = f"k8s {name}/{c['name']}"
        security = {**pod_security, **c.get("securityContext", {})}
        check(security.get("runAsNonRoot") is True and security.get("runAsUser", 0) != 0,
              f"{where}: should run as a non-root user (runAsNonRoot, runAsUser {USER_ID})")
        check(c.get("securityContext", {}).get("allowPrivilegeEscalation") is False,
              f"{where}: should set allowPrivilegeEscalation: false")
        resources = c.get("resources", {})
        for what in ("requests", "limits"):
            check({"cpu", "memory"} <= set(resources.get(what, {})),
                  f"{where}: needs cpu and memory {what}")
        if w["kind"] == "Job":
            continue
        readiness, liveness = c.get("readinessProbe"), c.get("livenessProbe")
        check(readiness and liveness and readiness != liveness,
              f"{where}: needs a readiness and a (different) liveness probe")
        if start_part(c.get("command", [])):
            check((readiness or {}).get("exec", {}).get("command") == READY and
                  (liveness or {}).get("exec", {}).get("command") == LIVE,
                  f"{where}: probes should be atoll probe ready (readiness) and atoll probe "
                  "live (liveness)")


def check_head(by_kind, config, rm_host):
    """The head: one Deployment starting it, advertising hostname.subdomain (a headless
    Service that publishes it before it is ready), its RM state on a claimed volume."""
    heads = [w for w in by_kind.get("Deployment", {}).values()
             if any(start_part(c.get("command", [])) == "head"
                    for c in pod_spec(w).get("containers", []))]
    if not check(len(heads) == 1, "k8s: one Deployment should start the head"):
        return
    head = heads[0]
    name = head["metadata"]["name"]
    check(head["spec"].get("replicas", 1) == 1 and
          head["spec"].get("strategy", {}).get("type") == "Recreate",
          f"k8s {name}: one replica, strategy Recreate (one RM holds the state)")
    spec = pod_spec(head)
    command = spec["containers"][0]["command"]
    check_part_command(f"k8s {name}", command, "/etc/atoll/k8s/cluster.toml", None)
    dns = f"{spec.get('hostname')}.{spec.get('subdomain')}"
    check(option(command, "--advertise") == dns == rm_host,
          f"k8s {name}: should --advertise its DNS name hostname.subdomain ({dns}), which "
          f"cluster.toml's rm endpoints name ({rm_host})")
    service = by_kind.get("Service", {}).get(spec.get("subdomain"), {})
    check(service.get("spec", {}).get("clusterIP") == "None" and
          service.get("spec", {}).get("publishNotReadyAddresses") is True,
          f"k8s {name}: its subdomain should be a headless Service that publishes it before it "
          "is ready (its own schedulers reach the RM by that name)")
    ports = {p["port"] for p in service.get("spec", {}).get("ports", [])}
    for key in ("endpoint", "events_in", "events_out"):
        port = int(endpoint_host(config["rm"][key])[1])
        check(port in ports, f"k8s Service {spec.get('subdomain')}: no port {port} for rm.{key}")
    state = option(command, "--rm-state") or ""
    mounts = {m["mountPath"]: m["name"] for m in spec["containers"][0].get("volumeMounts", [])}
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    claimed = [volumes.get(n, {}).get("persistentVolumeClaim", {}).get("claimName")
               for path, n in mounts.items() if state.startswith(path.rstrip("/") + "/")]
    check(claimed and claimed[0] in by_kind.get("PersistentVolumeClaim", {}),
          f"k8s {name}: --rm-state '{state}' should be on a PersistentVolumeClaim's volume")


def check_hosts(by_kind, local, rm_endpoint):
    """Per island a StatefulSet whose pods join it with --devices; they are the hosts of
    config/local.toml (by island, count and devices)."""
    joined = {}
    for sts in by_kind.get("StatefulSet", {}).values():
        name = sts["metadata"]["name"]
        spec = pod_spec(sts)
        containers = spec.get("containers", [])
        command = containers[0].get("command", []) if containers else []
        if not check(len(containers) == 1 and start_part(command) == "host",
                     f"k8s {name}: the pod should be one container running atoll start host"):
            continue
        check_part_command(f"k8s {name}", command, "/etc/atoll/k8s/cluster.toml", rm_endpoint)
        check(option(command, "--host") is None,
              f"k8s {name}: should not pass --host: each pod is the host of its name")
        check(sts["spec"].get("serviceName") in by_kind.get("Service", {}),
              f"k8s {name}: serviceName names no Service")
        island = option(command, "--island")
        devices = int(option(command, "--devices") or 1)
        kind = option(command, "--kind") or "cpu"
        joined.setdefault(island, []).extend(
            [(devices, kind)] * sts["spec"].get("replicas", 1))
        mounts = {m["mountPath"]: m["name"] for m in containers[0].get("volumeMounts", [])}
        shm = {v["name"]: v for v in spec.get("volumes", [])}.get(mounts.get("/dev/shm"), {})
        check(shm.get("emptyDir", {}).get("medium") == "Memory" and
              megabytes(shm["emptyDir"].get("sizeLimit", "0")) >= region_mb(devices),
              f"k8s {name}: /dev/shm should be a memory emptyDir that holds the store's "
              f"{region_mb(devices)} MiB region (arena and {devices} devices)")
    expected = {island: sorted((d, k) for (_n, d, k) in hosts) for island, hosts in local.items()}
    joined = {island: sorted(h) for island, h in joined.items()}
    check(joined == expected, f"k8s: the hosts that join (devices, kind) {joined} differ from "
                              f"config/local.toml's {expected}")


def check_k8s(root):
    local = topology(load_config(os.path.join(root, "config/local.toml")))
    base, kustomization, objects = load_k8s(root)
    generators = {g["name"]: g for g in kustomization.get("configMapGenerator", [])}
    check("atoll-config" in generators, "k8s: kustomization makes no ConfigMap atoll-config")
    files = generators.get("atoll-config", {}).get("files", [])
    check(files == ["cluster.toml"], "k8s: atoll-config should hold cluster.toml")
    config_path = os.path.join(base, "cluster.toml")
    rm_host = endpoint_host(load_config(config_path).get("rm", {}).get("endpoint", ""))[0]
    config = check_config("docker/k8s/cluster.toml", config_path, local, rm_host)
    keys = secret_keys(kustomization)

    by_kind = {}
    for obj in objects:
        check(obj.get("apiVersion") and obj.get("kind") and obj.get("metadata", {}).get("name"),
              f"k8s: an object lacks apiVersion, kind or metadata.name: {str(obj)[:80]}")
        by_kind.setdefault(obj.get("kind"), {})[obj["metadata"]["name"]] = obj
    check_schema(objects)

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
                if e["name"] in ("ATOLL_RM", "ATOLL_EVENTS"):
                    key = "endpoint" if e["name"] == "ATOLL_RM" else "events_out"
                    check(e.get("value") == config["rm"][key],
                          f"k8s {name}: {e['name']} should be cluster.toml's rm.{key}")
        for v in declared.values():
            if "configMap" in v:
                check(v["configMap"]["name"] in generators,
                      f"k8s {name}: ConfigMap {v['configMap']['name']} is not generated")
        check_pod_keys(name, spec, keys)
        check_workload_pods(w)

    for svc in by_kind.get("Service", {}).values():
        selector = svc["spec"].get("selector", {})
        check(any(all(l.get(k) == v for k, v in selector.items()) for l in pod_labels),
              f"k8s Service {svc['metadata']['name']}: selector {selector} selects no pod")
    check_head(by_kind, config, rm_host)
    check_hosts(by_kind, local, config["rm"]["endpoint"])
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
