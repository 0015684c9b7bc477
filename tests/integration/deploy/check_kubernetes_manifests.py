#!/usr/bin/env python3
"""The Kubernetes manifests are valid YAML and use only fields Kubernetes accepts for their kinds.

Usage: check_kubernetes_manifests.py SOURCE_DIR [RDMAD_BINARY]
A hand-written schema (the subset of the API, v1.27, that manifests of this kind use, with types and
required fields; an unknown field is an error, as `kubectl apply --validate=strict` makes it)
plus semantic checks: selectors match template labels, mounts name volumes, probe ports name
container ports, capabilities carry no CAP_ prefix. With RDMAD_BINARY, the ConfigMap's
rdmad.toml must pass `rdmad --check-config`. Needs PyYAML (Debian: python3-yaml).
"""
import re
import subprocess
import sys
import tempfile
from pathlib import Path

try:
    import yaml
except ImportError:
    print("SKIPPED: PyYAML missing (Debian package python3-yaml)")
    sys.exit(77)

S, I, B, Q = "string", "integer", "boolean", "quantity"  # quantity: "500m", "2Gi" or a number
STRMAP = {"map": S}


def obj(fields, required=()):
    return {"fields": fields, "required": set(required)}


def lst(item):
    return {"list": item}


META = obj({"name": S, "namespace": S, "labels": STRMAP, "annotations": STRMAP, "generateName": S})
SELECTOR = obj({"matchLabels": STRMAP, "matchExpressions": lst(obj(
    {"key": S, "operator": S, "values": lst(S)}, ["key", "operator"]))})
PORT_REF = "int-or-string"
EXEC = obj({"command": lst(S)})
HTTP_GET = obj({"path": S, "port": PORT_REF, "host": S, "scheme": S,
                "httpHeaders": lst(obj({"name": S, "value": S}, ["name", "value"]))}, ["port"])
PROBE = obj({"exec": EXEC, "httpGet": HTTP_GET, "tcpSocket": obj({"port": PORT_REF, "host": S}, ["port"]),
             "grpc": obj({"port": I, "service": S}, ["port"]),
             "initialDelaySeconds": I, "periodSeconds": I, "timeoutSeconds": I, "successThreshold": I,
             "failureThreshold": I, "terminationGracePeriodSeconds": I})
ENV = obj({"name": S, "value": S, "valueFrom": obj({
    "fieldRef": obj({"fieldPath": S, "apiVersion": S}, ["fieldPath"]),
    "configMapKeyRef": obj({"name": S, "key": S, "optional": B}, ["key"]),
    "secretKeyRef": obj({"name": S, "key": S, "optional": B}, ["key"]),
    "resourceFieldRef": obj({"resource": S, "containerName": S, "divisor": Q}, ["resource"])})}, ["name"])
SECURITY_CONTEXT = obj({
    "runAsUser": I, "runAsGroup": I, "runAsNonRoot": B, "privileged": B, "allowPrivilegeEscalation": B,
    "readOnlyRootFilesystem": B, "procMount": S,
    "capabilities": obj({"add": lst(S), "drop": lst(S)}),
    "seccompProfile": obj({"type": S, "localhostProfile": S}, ["type"]),
    "seLinuxOptions": obj({"user": S, "role": S, "type": S, "level": S}),
    "appArmorProfile": obj({"type": S, "localhostProfile": S}, ["type"])})
CONTAINER = obj({
    "name": S, "image": S, "imagePullPolicy": S, "command": lst(S), "args": lst(S), "workingDir": S,
    "ports": lst(obj({"name": S, "containerPort": I, "protocol": S, "hostPort": I, "hostIP": S},
                     ["containerPort"])),
    "env": lst(ENV),
    "envFrom": lst(obj({"prefix": S, "configMapRef": obj({"name": S, "optional": B}),
                        "secretRef": obj({"name": S, "optional": B})})),
    "resources": obj({"requests": {"map": Q}, "limits": {"map": Q}}),
    "volumeMounts": lst(obj({"name": S, "mountPath": S, "readOnly": B, "subPath": S,
                             "mountPropagation": S}, ["name", "mountPath"])),
    "livenessProbe": PROBE, "readinessProbe": PROBE, "startupProbe": PROBE,
    "lifecycle": obj({"postStart": obj({"exec": EXEC, "httpGet": HTTP_GET}),
                      "preStop": obj({"exec": EXEC, "httpGet": HTTP_GET})}),
    "securityContext": SECURITY_CONTEXT, "stdin": B, "tty": B,
    "terminationMessagePath": S, "terminationMessagePolicy": S}, ["name"])
VOLUME = obj({
    "name": S,
    "hostPath": obj({"path": S, "type": S}, ["path"]),
    "configMap": obj({"name": S, "defaultMode": I, "optional": B,
                      "items": lst(obj({"key": S, "path": S, "mode": I}, ["key", "path"]))}),
    "secret": obj({"secretName": S, "defaultMode": I, "optional": B}),
    "emptyDir": obj({"medium": S, "sizeLimit": Q}),
    "projected": obj({"sources": lst({"any": True}), "defaultMode": I})}, ["name"])
POD_SPEC = obj({
    "containers": lst(CONTAINER), "initContainers": lst(CONTAINER), "volumes": lst(VOLUME),
    "nodeSelector": STRMAP, "nodeName": S, "affinity": {"any": True},
    "tolerations": lst(obj({"key": S, "operator": S, "value": S, "effect": S, "tolerationSeconds": I})),
    "priorityClassName": S, "priority": I, "serviceAccountName": S, "automountServiceAccountToken": B,
    "hostNetwork": B, "hostPID": B, "hostIPC": B, "dnsPolicy": S, "restartPolicy": S,
    "terminationGracePeriodSeconds": I, "securityContext": obj({
        "runAsUser": I, "runAsGroup": I, "runAsNonRoot": B, "fsGroup": I, "supplementalGroups": lst(I),
        "seccompProfile": obj({"type": S, "localhostProfile": S}, ["type"])}),
    "imagePullSecrets": lst(obj({"name": S})), "shareProcessNamespace": B, "hostname": S,
    "enableServiceLinks": B}, ["containers"])
TEMPLATE = obj({"metadata": META, "spec": POD_SPEC}, ["spec"])

KINDS = {
    ("v1", "Namespace"): obj({"apiVersion": S, "kind": S, "metadata": META}, ["metadata"]),
    ("v1", "ServiceAccount"): obj({"apiVersion": S, "kind": S, "metadata": META,
                                   "automountServiceAccountToken": B,
                                   "imagePullSecrets": lst(obj({"name": S}))}, ["metadata"]),
    ("v1", "ConfigMap"): obj({"apiVersion": S, "kind": S, "metadata": META, "data": STRMAP,
                              "binaryData": STRMAP, "immutable": B}, ["metadata"]),
    ("v1", "Pod"): obj({"apiVersion": S, "kind": S, "metadata": META, "spec": POD_SPEC}, ["metadata", "spec"]),
    ("v1", "Service"): obj({"apiVersion": S, "kind": S, "metadata": META, "spec": obj({
        "selector": STRMAP, "type": S, "clusterIP": S,
        "ports": lst(obj({"name": S, "port": I, "targetPort": PORT_REF, "protocol": S}, ["port"]))})},
        ["metadata", "spec"]),
    ("apps/v1", "DaemonSet"): obj({"apiVersion": S, "kind": S, "metadata": META, "spec": obj({
        "selector": SELECTOR, "template": TEMPLATE, "minReadySeconds": I, "revisionHistoryLimit": I,
        "updateStrategy": obj({"type": S, "rollingUpdate": obj({"maxUnavailable": PORT_REF,
                                                                  "maxSurge": PORT_REF})})},
        ["selector", "template"])}, ["metadata", "spec"]),
}
ENUMS = {"imagePullPolicy": {"Always", "IfNotPresent", "Never"},
         "dnsPolicy": {"ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"},
         "protocol": {"TCP", "UDP", "SCTP"}, "operator": {"Exists", "Equal", "In", "NotIn", "DoesNotExist"},
         "effect": {"NoSchedule", "PreferNoSchedule", "NoExecute"},
         "mountPropagation": {"None", "HostToContainer", "Bidirectional"}}
HOSTPATH_TYPES = {"", "DirectoryOrCreate", "Directory", "FileOrCreate", "File", "Socket", "CharDevice",
                  "BlockDevice"}
QUANTITY = re.compile(r"^[0-9.]+(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$")


def check(value, schema, path, errors):
    if schema == S:
        ok = isinstance(value, str)
    elif schema == I:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif schema == B:
        ok = isinstance(value, bool)
    elif schema == Q:
        ok = (isinstance(value, (int, float)) and not isinstance(value, bool)) or \
            (isinstance(value, str) and QUANTITY.match(value) is not None)
    elif schema == PORT_REF:
        ok = isinstance(value, (int, str)) and not isinstance(value, bool)
    elif "any" in schema:
        ok = True
    elif "map" in schema:
        ok = isinstance(value, dict)
        if ok:
            for k, v in value.items():
                check(v, schema["map"], f"{path}.{k}", errors)
    elif "list" in schema:
        ok = isinstance(value, list)
        if ok:
            for i, v in enumerate(value):
                check(v, schema["list"], f"{path}[{i}]", errors)
    else:
        ok = isinstance(value, dict)
        if ok:
            for k, v in value.items():
                if k not in schema["fields"]:
                    errors.append(f"{path}: unknown field '{k}'")
                    continue
                if k in ENUMS and v not in ENUMS[k]:
                    errors.append(f"{path}.{k}: '{v}' is not one of {sorted(ENUMS[k])}")
                check(v, schema["fields"][k], f"{path}.{k}", errors)
            for k in sorted(schema["required"] - value.keys()):
                errors.append(f"{path}: missing required field '{k}'")
    if not ok:
        errors.append(f"{path}: expected {schema if isinstance(schema, str) else 'a ' + next(iter(schema))}, "
                      f"got {type(value).__name__} {value!r}")


def semantic(doc, where, errors):
    spec = doc.get("spec", {})
    pod = spec.get("template", {}).get("spec") if doc["kind"] == "DaemonSet" else spec
    if doc["kind"] == "DaemonSet":
        want = spec.get("selector", {}).get("matchLabels", {})
        have = spec.get("template", {}).get("metadata", {}).get("labels", {})
        if not want or any(have.get(k) != v for k, v in want.items()):
            errors.append(f"{where}: selector.matchLabels {want} do not match the template labels {have}")
    if not isinstance(pod, dict):
        return
    volumes = {v["name"] for v in pod.get("volumes", [])}
    for v in pod.get("volumes", []):
        if "hostPath" in v and v["hostPath"].get("type", "") not in HOSTPATH_TYPES:
            errors.append(f"{where}: volume {v['name']}: bad hostPath type {v['hostPath']['type']}")
    for c in pod.get("containers", []) + pod.get("initContainers", []):
        if "image" not in c:
            errors.append(f"{where}: container {c.get('name')} has no image")
        for m in c.get("volumeMounts", []):
            if m["name"] not in volumes:
                errors.append(f"{where}: container {c['name']} mounts unknown volume {m['name']}")
        ports = {p.get("name") for p in c.get("ports", [])}
        for p in c.get("ports", []):
            if "name" in p and (len(p["name"]) > 15 or not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", p["name"])):
                errors.append(f"{where}: port name {p['name']!r} is not an IANA service name")
        for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
            port = c.get(probe, {}).get("httpGet", {}).get("port")
            if isinstance(port, str) and port not in ports:
                errors.append(f"{where}: {probe} uses port {port!r}, not a named container port")
        for cap in c.get("securityContext", {}).get("capabilities", {}).get("add", []):
            if cap.startswith("CAP_") or cap != cap.upper():
                errors.append(f"{where}: capability {cap!r} must be written without CAP_ (e.g. IPC_LOCK)")


def daemonset_policy(doc, config_toml, where, errors):
    """What rdmad's DaemonSet must keep (docs/kubernetes.md)."""
    pod = doc["spec"]["template"]["spec"]
    c = pod["containers"][0]
    mounts = {m["mountPath"]: m for m in c.get("volumeMounts", [])}
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    host = {p: volumes[m["name"]].get("hostPath", {}).get("path") for p, m in mounts.items() if m["name"] in volumes}
    caps = c.get("securityContext", {}).get("capabilities", {})
    rules = [
        (pod.get("hostNetwork") is True, "hostNetwork: true"),
        (pod.get("priorityClassName") == "system-node-critical", "priorityClassName: system-node-critical"),
        (bool(pod.get("nodeSelector")), "a nodeSelector"),
        (sorted(caps.get("add", [])) == ["IPC_LOCK", "NET_ADMIN"] and caps.get("drop") == ["ALL"],
         "capabilities: drop ALL, add exactly IPC_LOCK and NET_ADMIN"),
        (c.get("securityContext", {}).get("privileged") is not True, "not privileged"),
        (host.get("/dev/infiniband") == "/dev/infiniband", "/dev/infiniband from the host"),
        (host.get("/sys") == "/sys" and mounts["/sys"].get("readOnly") is True, "/sys from the host, read-only"),
        ("livenessProbe" in c, "a liveness probe"),
    ]
    m = re.search(r'^socket_path\s*=\s*"([^"]+)"', config_toml or "", re.M)
    sock_dir = m.group(1).rsplit("/", 1)[0] if m else None
    rules.append((sock_dir is not None and host.get(sock_dir) == sock_dir,
                  f"the socket directory {sock_dir} shared by hostPath"))
    for ok, what in rules:
        if not ok:
            errors.append(f"{where}: the rdmad DaemonSet needs {what}")


def self_test():
    errors = []
    bad = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "x"},
           "spec": {"selector": {"matchLabels": {"a": "b"}},
                    "template": {"metadata": {"labels": {"a": "c"}},
                                 "spec": {"hostNetwrok": True, "containers": [
                                     {"name": "c", "image": "i", "volumeMounts": [{"name": "v", "mountPath": "/v"}],
                                      "securityContext": {"capabilities": {"add": ["CAP_IPC_LOCK"]}}}]}}}}
    check(bad, KINDS[("apps/v1", "DaemonSet")], "self", errors)
    semantic(bad, "self", errors)
    text = "\n".join(errors)
    for needle in ("unknown field 'hostNetwrok'", "do not match", "unknown volume v", "without CAP_"):
        assert needle in text, (needle, text)


def main():
    self_test()
    src = Path(sys.argv[1])
    rdmad = sys.argv[2] if len(sys.argv) > 2 else None
    errors, kinds, daemonsets, config_toml = [], [], [], None
    for path in sorted((src / "deploy/kubernetes").glob("*.yaml")):
        try:
            docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
        except yaml.YAMLError as e:
            errors.append(f"{path.name}: not valid YAML: {e}")
            continue
        for n, doc in enumerate(docs):
            where = f"{path.name}#{n}"
            key = (doc.get("apiVersion"), doc.get("kind"))
            if key not in KINDS:
                errors.append(f"{where}: unexpected apiVersion/kind {key}")
                continue
            kinds.append(key[1])
            check(doc, KINDS[key], where, errors)
            semantic(doc, where, errors)
            if key[1] == "DaemonSet":
                daemonsets.append((doc, where))
            if key[1] == "ConfigMap":
                config_toml = doc.get("data", {}).get("rdmad.toml")
            if key[1] == "ConfigMap" and rdmad:
                with tempfile.NamedTemporaryFile("w", suffix=".toml") as f:
                    f.write(doc["data"]["rdmad.toml"])
                    f.flush()
                    r = subprocess.run([rdmad, "--check-config", f.name], capture_output=True, text=True)
                    if r.returncode != 0:
                        errors.append(f"{where}: rdmad.toml fails --check-config: {r.stdout}{r.stderr}")
    for doc, where in daemonsets:
        daemonset_policy(doc, config_toml, where, errors)
    for prom in sorted((src / "deploy/prometheus").glob("*.yml")):
        try:
            yaml.safe_load(prom.read_text())
        except yaml.YAMLError as e:
            errors.append(f"{prom.name}: not valid YAML: {e}")
    for kind in ("Namespace", "ServiceAccount", "ConfigMap", "DaemonSet"):
        if kind not in kinds:
            errors.append(f"no {kind} in deploy/kubernetes")
    for e in errors:
        print("ERROR:", e)
    print(f"checked {len(kinds)} objects: {', '.join(kinds)}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
