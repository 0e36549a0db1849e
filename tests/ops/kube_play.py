#!/usr/bin/env python3
"""docker/k8s/ as `podman kube play` (podman 4.3) can run it: kube_play_test.sh's helper.

    kube_play.py SOURCE_DIR KEYS_DIR IMAGE OUT_DIR SUFFIX

Renders the kustomization as `kubectl kustomize` would for what podman plays (the
resources, the ConfigMap of configMapGenerator) and writes, into OUT_DIR, one YAML file per
workload in the order to play them, listed on stdout as "FILE<TAB>CONTAINER<TAB>ALIAS<TAB>
CHECK" lines: CONTAINER is what podman names the pod's (first) container, ALIAS the pod's
DNS name or "-", CHECK what says it is up: "exec COMMAND..." (its readiness probe's
command), "http PORT PATH" (its readiness probe's GET; PORT a number), or "exit" (a Job's
pod: it must finish with status 0).

  - Deployments as they are (the head with its PersistentVolumeClaim and the ConfigMap);
  - a StatefulSet as its pods (podman 4.3 plays no StatefulSet): Pod NAME-0, NAME-1, ...
    with the template's spec, as the StatefulSet controller makes them;
  - a Job as its pod (nor Jobs): Pod NAME-0, restartPolicy kept.

What podman 4.3 cannot do as Kubernetes does is done by the test instead, and said here:
  - images: every container runs IMAGE (the test's image of this build);
  - a PersistentVolumeClaim or ConfigMap NAME is played as NAME-SUFFIX: podman makes each
    a volume of the machine's, which another run must not take for its own;
  - Secret volumes become hostPath folders under OUT_DIR holding what the volume's `items`
    lay out, readable by the pod's fsGroup (podman 4.3 mounts a Secret's values still
    base64-encoded and ignores `items`);
  - emptyDir volumes become folders under OUT_DIR with the mode the kubelet gives an
    emptyDir (0777, sticky here): podman 4.3 mounts one as a tmpfs only root may write,
    where a host's object store (not root) makes its arena in /dev/shm;
  - a headless Service and a pod's hostname + subdomain give the pod the DNS name
    HOSTNAME.SUBDOMAIN: ALIAS, which the test passes as a network alias of the pod;
  - Services, the Namespace and the Secret itself are not played.
"""

import copy
import os
import sys

import yaml


def load(source):
    base = os.path.join(source, "docker/k8s")
    with open(os.path.join(base, "kustomization.yaml")) as f:
        kustomization = yaml.safe_load(f)
    objects = []
    for resource in kustomization["resources"]:
        with open(os.path.join(base, resource)) as f:
            objects += [d for d in yaml.safe_load_all(f) if d]
    config_maps = []
    for generator in kustomization.get("configMapGenerator", []):
        data = {}
        for name in generator["files"]:
            with open(os.path.join(base, name)) as f:
                data[os.path.basename(name)] = f.read()
        config_maps.append({"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": generator["name"]}, "data": data})
    return kustomization, objects, config_maps


def secret_files(kustomization, keys_dir):
    """{key: bytes} of the Secret atoll-keys as the secretGenerator makes it."""
    out = {}
    for generator in kustomization.get("secretGenerator", []):
        for entry in generator["files"]:
            key, _, path = entry.partition("=")
            relative = path[len("keys/"):] if path.startswith("keys/") else path
            with open(os.path.join(keys_dir, relative), "rb") as f:
                out[key] = f.read()
    return out


def secret_folder(volume, files, folder, group):
    """Lays out a Secret volume's items in `folder`, as the kubelet would."""
    source = volume["secret"]
    items = source.get("items") or [{"key": k, "path": k} for k in files]
    for item in items:
        path = os.path.join(folder, item["path"])
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(files[item["key"]])
        os.chmod(path, source.get("defaultMode", 0o644))
    for root, dirs, names in os.walk(folder):
        os.chown(root, 0, group)
        os.chmod(root, 0o750)
        for name in names:
            os.chown(os.path.join(root, name), 0, group)


def for_podman(spec, name, image, files, out_dir):
    """A pod spec with the image and Secret volumes podman can run."""
    spec = copy.deepcopy(spec)
    group = spec.get("securityContext", {}).get("fsGroup", 0)
    for c in spec["containers"]:
        c["image"] = image
    for v in spec.get("volumes", []):
        folder = os.path.join(out_dir, f"{name}-{v['name']}")
        if "secret" in v:
            secret_folder(v, files, folder, group)
            v.pop("secret")
            v["hostPath"] = {"path": folder, "type": "Directory"}
        elif "emptyDir" in v:
            os.makedirs(folder)
            os.chmod(folder, 0o1777)
            v.pop("emptyDir")
            v["hostPath"] = {"path": folder, "type": "Directory"}
    return spec


def readiness(container, kind):
    """CHECK of the module docstring, for a container of a `kind` workload."""
    if kind == "Job":
        return "exit"
    probe = container.get("readinessProbe", {})
    if "exec" in probe:
        return " ".join(["exec"] + probe["exec"]["command"])
    if "httpGet" in probe:
        port = probe["httpGet"]["port"]
        if not isinstance(port, int):
            port = next(p["containerPort"] for p in container["ports"] if p["name"] == port)
        return f"http {port} {probe['httpGet']['path']}"
    return "-"


def with_suffix(docs, suffix):
    """The documents with every PersistentVolumeClaim and ConfigMap, and their uses, named
    NAME-SUFFIX."""
    docs = copy.deepcopy(docs)
    for d in docs:
        if d["kind"] in ("PersistentVolumeClaim", "ConfigMap"):
            d["metadata"]["name"] += "-" + suffix
        spec = d.get("spec", {})
        for v in spec.get("template", {}).get("spec", spec).get("volumes", []):
            if "persistentVolumeClaim" in v:
                v["persistentVolumeClaim"]["claimName"] += "-" + suffix
            if "configMap" in v:
                v["configMap"]["name"] += "-" + suffix
    return docs


def pod(name, template, spec):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": template.get("metadata", {}).get("labels", {})},
            "spec": spec}


def main():
    if len(sys.argv) != 6:
        print(__doc__, file=sys.stderr)
        return 2
    source, keys_dir, image, out_dir, suffix = sys.argv[1:]
    kustomization, objects, config_maps = load(source)
    files = secret_files(kustomization, keys_dir)
    claims = [o for o in objects if o["kind"] == "PersistentVolumeClaim"]
    plays = []  # (file name, documents, pod name, alias, check)
    for o in objects:
        kind, name = o["kind"], o["metadata"]["name"]
        template = o.get("spec", {}).get("template")
        if template is None:
            continue
        spec = template["spec"]
        alias = f"{spec['hostname']}.{spec['subdomain']}" if spec.get("subdomain") else "-"
        check = readiness(spec["containers"][0], kind)
        if kind == "Deployment":
            played = copy.deepcopy(o)
            played["spec"]["template"]["spec"] = for_podman(spec, name, image, files, out_dir)
            used = {v["persistentVolumeClaim"]["claimName"]
                    for v in spec.get("volumes", []) if "persistentVolumeClaim" in v}
            docs = config_maps + [c for c in claims if c["metadata"]["name"] in used] + [played]
            plays.append((name, docs, f"{name}-pod-0", alias, check))
        elif kind == "StatefulSet":
            for i in range(o["spec"].get("replicas", 1)):
                pod_name = f"{name}-{i}"
                docs = config_maps + [pod(pod_name, template,
                                          for_podman(spec, pod_name, image, files, out_dir))]
                plays.append((pod_name, docs, pod_name, alias, check))
        elif kind == "Job":
            pod_name = f"{name}-0"
            docs = [pod(pod_name, template, for_podman(spec, pod_name, image, files, out_dir))]
            plays.append((pod_name, docs, pod_name, alias, check))
    for file_name, docs, pod_name, alias, check in plays:
        path = os.path.join(out_dir, file_name + ".yaml")
        with open(path, "w") as f:
            yaml.safe_dump_all(with_suffix(docs, suffix), f)
        container = docs[-1]["spec"].get("template", docs[-1])["spec"]["containers"][0]["name"]
        print(f"{path}\t{pod_name}-{container}\t{alias}\t{check}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
