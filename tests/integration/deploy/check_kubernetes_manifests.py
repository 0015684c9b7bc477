#!/usr/bin/env python3
"""The Kubernetes manifests are valid YAML and use only fields Kubernetes accepts for their kinds.

Usage: check_kubernetes_manifests.py SOURCE_DIR [RDMAD_BINARY]
Debian ships no Kubernetes OpenAPI schemas (and kubeconform's come from the network), so this is a
hand-written schema: the subset of the API (core/v1, apps/v1 as of v1.29; monitoring.coreos.com/v1
of the Prometheus Operator) that these manifests use, field by field with types, enums and
required fields, taken from the API reference. An unknown field is an error, as
`kubectl apply --validate=strict` makes it; a field the schema does not list must be added here,
from the reference, before a manifest may use it. Then semantic checks (selectors match template
labels, mounts name volumes, probe ports name container ports, capabilities carry no CAP_
prefix), the DaemonSet's policy (daemonset_policy), the Prometheus Operator rule file is what
deploy/prometheus/make_prometheusrule.py makes, and with RDMAD_BINARY the ConfigMap's rdmad.toml
passes `rdmad --check-config`. Files under deploy/kubernetes/patches/ are strategic merge patches:
checked against their kind's schema without its required fields. kubernetes_checker_test.py
proves that a misspelled key or a wrong type fails. Needs PyYAML (Debian: python3-yaml).
"""
import os
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
OCTAL_MODE = "mode"  # an integer 0..0777 (written 0400 in YAML 1.1, which is octal)
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
    "configMap": obj({"name": S, "defaultMode": OCTAL_MODE, "optional": B,
                      "items": lst(obj({"key": S, "path": S, "mode": OCTAL_MODE}, ["key", "path"]))}),
    "secret": obj({"secretName": S, "defaultMode": OCTAL_MODE, "optional": B,
                   "items": lst(obj({"key": S, "path": S, "mode": OCTAL_MODE}, ["key", "path"]))}),
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
        "fsGroupChangePolicy": S, "sysctls": lst(obj({"name": S, "value": S}, ["name", "value"])),
        "seccompProfile": obj({"type": S, "localhostProfile": S}, ["type"]),
        "appArmorProfile": obj({"type": S, "localhostProfile": S}, ["type"])}),
    "imagePullSecrets": lst(obj({"name": S})), "shareProcessNamespace": B, "hostname": S,
    "enableServiceLinks": B}, ["containers"])
TEMPLATE = obj({"metadata": META, "spec": POD_SPEC}, ["spec"])
# Prometheus Operator (monitoring.coreos.com/v1): RelabelConfig, NamespaceSelector, the endpoint
# fields PodMetricsEndpoint and Endpoint share.
RELABEL = obj({"sourceLabels": lst(S), "separator": S, "targetLabel": S, "regex": S, "modulus": I,
               "replacement": S, "action": S})
NS_SELECTOR = obj({"any": B, "matchNames": lst(S)})
ENDPOINT_FIELDS = {"port": S, "path": S, "scheme": S, "params": {"map": lst(S)}, "interval": S,
                   "scrapeTimeout": S, "honorLabels": B, "honorTimestamps": B, "relabelings": lst(RELABEL),
                   "metricRelabelings": lst(RELABEL)}

KINDS = {
    ("v1", "Namespace"): obj({"apiVersion": S, "kind": S, "metadata": META}, ["metadata"]),
    ("v1", "ServiceAccount"): obj({"apiVersion": S, "kind": S, "metadata": META,
                                   "automountServiceAccountToken": B,
                                   "imagePullSecrets": lst(obj({"name": S}))}, ["metadata"]),
    ("v1", "ConfigMap"): obj({"apiVersion": S, "kind": S, "metadata": META, "data": STRMAP,
                              "binaryData": STRMAP, "immutable": B}, ["metadata"]),
    ("v1", "Pod"): obj({"apiVersion": S, "kind": S, "metadata": META, "spec": POD_SPEC}, ["metadata", "spec"]),
    ("v1", "Service"): obj({"apiVersion": S, "kind": S, "metadata": META, "spec": obj({
        "selector": STRMAP, "type": S, "clusterIP": S, "clusterIPs": lst(S), "publishNotReadyAddresses": B,
        "ipFamilyPolicy": S, "ipFamilies": lst(S), "internalTrafficPolicy": S, "sessionAffinity": S,
        "ports": lst(obj({"name": S, "port": I, "targetPort": PORT_REF, "protocol": S, "appProtocol": S},
                         ["port"]))})},
        ["metadata", "spec"]),
    ("v1", "Secret"): obj({"apiVersion": S, "kind": S, "metadata": META, "type": S, "data": STRMAP,
                           "stringData": STRMAP, "immutable": B}, ["metadata"]),
    ("monitoring.coreos.com/v1", "PodMonitor"): obj({"apiVersion": S, "kind": S, "metadata": META, "spec": obj({
        "jobLabel": S, "podTargetLabels": lst(S), "selector": SELECTOR, "namespaceSelector": NS_SELECTOR,
        "sampleLimit": I, "podMetricsEndpoints": lst(obj(dict(ENDPOINT_FIELDS, targetPort=PORT_REF)))},
        ["selector"])}, ["metadata", "spec"]),
    ("monitoring.coreos.com/v1", "ServiceMonitor"): obj({"apiVersion": S, "kind": S, "metadata": META, "spec": obj({
        "jobLabel": S, "targetLabels": lst(S), "podTargetLabels": lst(S), "selector": SELECTOR,
        "namespaceSelector": NS_SELECTOR, "sampleLimit": I,
        "endpoints": lst(obj(dict(ENDPOINT_FIELDS, targetPort=PORT_REF)))}, ["selector"])}, ["metadata", "spec"]),
    ("monitoring.coreos.com/v1", "PrometheusRule"): obj({"apiVersion": S, "kind": S, "metadata": META, "spec": obj({
        "groups": lst(obj({"name": S, "interval": S, "limit": I, "partial_response_strategy": S,
                           "rules": lst(obj({"alert": S, "record": S, "expr": PORT_REF, "for": S,
                                             "keep_firing_for": S, "labels": STRMAP, "annotations": STRMAP},
                                            ["expr"]))}, ["name"]))})}, ["metadata", "spec"]),
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


def check(value, schema, path, errors, partial=False):
    """Appends to `errors` what in `value` does not fit `schema`; `partial`: a patch (no required fields)."""
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
    elif schema == OCTAL_MODE:
        ok = isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 0o777
    elif "any" in schema:
        ok = True
    elif "map" in schema:
        ok = isinstance(value, dict)
        if ok:
            for k, v in value.items():
                check(v, schema["map"], f"{path}.{k}", errors, partial)
    elif "list" in schema:
        ok = isinstance(value, list)
        if ok:
            for i, v in enumerate(value):
                check(v, schema["list"], f"{path}[{i}]", errors, partial)
    else:
        ok = isinstance(value, dict)
        if ok:
            for k, v in value.items():
                if k not in schema["fields"]:
                    errors.append(f"{path}: unknown field '{k}'")
                    continue
                if k in ENUMS and v not in ENUMS[k]:
                    errors.append(f"{path}.{k}: '{v}' is not one of {sorted(ENUMS[k])}")
                check(v, schema["fields"][k], f"{path}.{k}", errors, partial)
            for k in sorted(set() if partial else schema["required"] - value.keys()):
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


def toml_value(config_toml, section, key):
    """The string value of `key` in [section] of rdmad.toml (a plain scan: the keys used here are strings)."""
    m = re.search(r"^\[" + re.escape(section) + r"\]\s*$(.*?)(?=^\[|\Z)", config_toml or "", re.M | re.S)
    v = m and re.search(r"^" + re.escape(key) + r'\s*=\s*"([^"]*)"', m.group(1), re.M)
    return v.group(1) if v else None


def daemonset_policy(doc, objects, config_toml, where, errors):
    """What rdmad's DaemonSet must keep on a real cluster's rules (docs/kubernetes.md)."""
    pod = doc["spec"]["template"]["spec"]
    c = pod["containers"][0]
    sc = c.get("securityContext", {})
    mounts = {m["mountPath"]: m for m in c.get("volumeMounts", [])}
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    host = {p: volumes[m["name"]].get("hostPath", {}) for p, m in mounts.items() if m["name"] in volumes}
    caps = sc.get("capabilities", {})
    seccomp = sc.get("seccompProfile") or pod.get("securityContext", {}).get("seccompProfile") or {}
    ports = {p.get("name"): p.get("containerPort") for p in c.get("ports", [])}
    listen = toml_value(config_toml, "metrics", "listen") or ""
    peer_listen = toml_value(config_toml, "peer", "listen") or ""

    def probe(name, path):
        g = c.get(name, {}).get("httpGet", {})
        return g.get("path") == path and ports.get(g.get("port"), g.get("port")) == int(listen.rsplit(":", 1)[-1] or 0)

    rules = [
        (pod.get("hostNetwork") is True, "hostNetwork: true"),
        (pod.get("dnsPolicy") == "ClusterFirstWithHostNet", "dnsPolicy: ClusterFirstWithHostNet (cluster DNS for discovery)"),
        (pod.get("priorityClassName") == "system-node-critical", "priorityClassName: system-node-critical"),
        (bool(pod.get("nodeSelector")), "a nodeSelector"),
        (pod.get("automountServiceAccountToken") is False, "automountServiceAccountToken: false (no API access)"),
        (sorted(caps.get("add", [])) == ["IPC_LOCK", "NET_ADMIN"] and caps.get("drop") == ["ALL"],
         "capabilities: drop ALL, add exactly IPC_LOCK and NET_ADMIN"),
        (sc.get("privileged") is not True and sc.get("allowPrivilegeEscalation") is False,
         "not privileged, allowPrivilegeEscalation: false"),
        (sc.get("readOnlyRootFilesystem") is True, "readOnlyRootFilesystem: true"),
        (seccomp.get("type") in ("RuntimeDefault", "Localhost"), "a seccompProfile (RuntimeDefault or Localhost)"),
        (host.get("/dev/infiniband", {}).get("path") == "/dev/infiniband" and
         host["/dev/infiniband"].get("type") in ("DirectoryOrCreate", "Directory"),
         "/dev/infiniband from the host, type DirectoryOrCreate or Directory"),
        (host.get("/sys", {}).get("path") == "/sys" and mounts["/sys"].get("readOnly") is True, "/sys from the host, read-only"),
        (probe("livenessProbe", "/healthz"), f"a liveness probe on GET /healthz at the metrics port of listen = {listen!r}"),
        (probe("readinessProbe", "/readyz"), f"a readiness probe on GET /readyz at the metrics port of listen = {listen!r}"),
        (c.get("readinessProbe", {}).get("timeoutSeconds", 1) * 1000 >
         int(re.search(r"^probe_timeout_ms\s*=\s*(\d+)", config_toml or "", re.M).group(1)
             if re.search(r"^probe_timeout_ms\s*=", config_toml or "", re.M) else 1000),
         "probes' timeoutSeconds above [metrics] probe_timeout_ms"),
        (ports.get("rdmad") == int(peer_listen.rsplit(":", 1)[-1] or 0), f"a container port 'rdmad' = [peer] listen {peer_listen!r}"),
    ]
    sock = toml_value(config_toml, "daemon", "socket_path")
    sock_dir = sock.rsplit("/", 1)[0] if sock else None
    rules.append((sock_dir is not None and host.get(sock_dir, {}).get("path") == sock_dir,
                  f"the socket directory {sock_dir} shared by hostPath"))
    admin = mounts.get("/run/rdmad-admin")
    rules.append((admin is not None and "emptyDir" in volumes.get(admin["name"], {}),
                  "the admin socket's directory /run/rdmad-admin in an emptyDir (never on the host)"))
    key = toml_value(config_toml, "peer", "key_file")
    secret_mounts = [(p, m) for p, m in mounts.items() if "secret" in volumes.get(m["name"], {})]
    key_mount = [(p, m) for p, m in secret_mounts if key and key.startswith(p.rstrip("/") + "/")]
    rules.append((bool(key_mount) and key_mount[0][1].get("readOnly") is True and
                  volumes[key_mount[0][1]["name"]]["secret"].get("defaultMode") in (0o400, 0o600),
                  f"[peer] key_file {key} on a read-only Secret mount with defaultMode 0400 or 0600"))
    for ok, what in rules:
        if not ok:
            errors.append(f"{where}: the rdmad DaemonSet needs {what}")
    labels = doc["spec"]["template"]["metadata"].get("labels", {})
    discover = toml_value(config_toml, "peer", "discover") or ""
    services = [o for o in objects if o["kind"] == "Service" and o["spec"].get("clusterIP") == "None"]
    svc = [o for o in services if discover.split(":", 1)[-1].split(".")[0:2] == [o["metadata"]["name"],
           o["metadata"].get("namespace")] or f"._tcp.{o['metadata']['name']}.{o['metadata'].get('namespace')}." in discover]
    if not svc:
        errors.append(f"[peer] discover = {discover!r} names no headless Service in deploy/kubernetes")
    for o in svc:
        sel = o["spec"].get("selector", {})
        if not sel or any(labels.get(k) != v for k, v in sel.items()):
            errors.append(f"Service {o['metadata']['name']}: selector {sel} does not select the DaemonSet's pods")
        if o["spec"].get("publishNotReadyAddresses") is not True:
            errors.append(f"Service {o['metadata']['name']}: discovery needs publishNotReadyAddresses: true")
        if not any(p.get("name") == "rdmad" and p.get("port") == ports.get("rdmad") for p in o["spec"].get("ports", [])):
            errors.append(f"Service {o['metadata']['name']}: no port 'rdmad' = the peer port (SRV _rdmad._tcp)")
    if re.search(r"^\[\[nic\]\]", config_toml or "", re.M):
        errors.append("configmap: [[nic]] present: the DaemonSet's ConfigMap discovers NICs (embedded_nics)")


def namespace_policy(objects, errors):
    """Pod Security admits the DaemonSet (privileged); nothing asks for API access."""
    for o in objects:
        if o["kind"] == "Namespace" and o["metadata"]["name"] == "rdmad":
            labels = o["metadata"].get("labels", {})
            for mode in ("enforce", "audit", "warn"):
                if labels.get(f"pod-security.kubernetes.io/{mode}") != "privileged":
                    errors.append(f"namespace rdmad: label pod-security.kubernetes.io/{mode}: privileged missing")
        if o["kind"] == "ServiceAccount" and o.get("automountServiceAccountToken") is not False:
            errors.append(f"ServiceAccount {o['metadata']['name']}: automountServiceAccountToken: false")


def client_pod_policy(doc, config_toml, where, errors):
    """The example client mounts the client socket's directory only, as a non-root member of its group."""
    pod = doc["spec"]
    sock = toml_value(config_toml, "daemon", "socket_path") or ""
    paths = [v.get("hostPath", {}).get("path") for v in pod.get("volumes", []) if "hostPath" in v]
    if paths != [sock.rsplit("/", 1)[0]]:
        errors.append(f"{where}: the client pod must mount exactly the client socket's host directory, not {paths}")
    psc = pod.get("securityContext", {})
    if psc.get("runAsNonRoot") is not True or not psc.get("supplementalGroups"):
        errors.append(f"{where}: the client pod runs as non-root in the socket's group (runAsNonRoot, supplementalGroups)")


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


def check_config(rdmad, config_toml, where, errors):
    """`rdmad --check-config` on the ConfigMap's file, with the Secret's key file stood in for."""
    with tempfile.TemporaryDirectory() as tmp:
        toml = config_toml
        key = toml_value(toml, "peer", "key_file")
        if key:
            Path(tmp, "cluster.key").write_text("k8s manifest check key, not a secret\n")
            os.chmod(Path(tmp, "cluster.key"), 0o600)
            toml = toml.replace(f'"{key}"', f'"{tmp}/cluster.key"')
        # Until the daemon has [peer] discover (DNS discovery, issue 24 item 1), check the rest.
        known = subprocess.run([rdmad, "--print-default-config"], capture_output=True, text=True).stdout
        for k in ("discover", "discover_port", "discover_interval_ms", "idle_session_ms"):
            if not re.search(rf"^#?\s*{k}\s*=", known, re.M) and re.search(rf"^{k}\s*=", toml, re.M):
                print(f"NOTE: this rdmad has no [peer] {k}; checked the ConfigMap without it")
                toml = re.sub(rf"^{k}\s*=.*$", "", toml, flags=re.M)
        f = Path(tmp, "rdmad.toml")
        f.write_text(toml)
        r = subprocess.run([rdmad, "--check-config", str(f)], capture_output=True, text=True)
        if r.returncode != 0:
            errors.append(f"{where}: rdmad.toml fails --check-config: {r.stdout}{r.stderr}")


def load(src, errors):
    """(doc, where, is_patch) of every object under deploy/kubernetes (subdirectories too)."""
    out = []
    root = src / "deploy/kubernetes"
    for path in sorted(root.rglob("*.yaml")):
        rel = path.relative_to(root)
        try:
            docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
        except yaml.YAMLError as e:
            errors.append(f"{rel}: not valid YAML: {e}")
            continue
        for n, doc in enumerate(docs):
            out.append((doc, f"{rel}#{n}", rel.parts[0] == "patches"))
    return out


def run(src, rdmad=None):
    """Every check over SOURCE_DIR; returns the errors and the kinds checked."""
    errors, kinds, objects, config_toml = [], [], [], None
    for doc, where, patch in load(src, errors):
        if not isinstance(doc, dict):
            errors.append(f"{where}: not an object")
            continue
        key = (doc.get("apiVersion"), doc.get("kind"))
        if key not in KINDS:
            errors.append(f"{where}: unexpected apiVersion/kind {key}")
            continue
        kinds.append(key[1])
        check(doc, KINDS[key], where, errors, partial=patch)
        if patch:
            continue
        semantic(doc, where, errors)
        objects.append((doc, where))
        if key[1] == "ConfigMap":
            config_toml = doc.get("data", {}).get("rdmad.toml")
            if rdmad and config_toml:
                check_config(rdmad, config_toml, where, errors)
    docs = [d for d, _ in objects]
    for doc, where in objects:
        if doc["kind"] == "DaemonSet":
            daemonset_policy(doc, docs, config_toml, where, errors)
        if doc["kind"] == "Pod":
            client_pod_policy(doc, config_toml, where, errors)
        if doc["kind"] in ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"):
            errors.append(f"{where}: rdmad needs no API access, so no RBAC objects")
    namespace_policy(docs, errors)
    for prom in sorted((src / "deploy/prometheus").glob("*.yml")):
        try:
            yaml.safe_load(prom.read_text())
        except yaml.YAMLError as e:
            errors.append(f"{prom.name}: not valid YAML: {e}")
    gen = subprocess.run([sys.executable, str(src / "deploy/prometheus/make_prometheusrule.py"), "--check", str(src)],
                         capture_output=True, text=True)
    if gen.returncode != 0:
        errors.append(f"PrometheusRule: {gen.stdout}{gen.stderr}".strip())
    for kind in ("Namespace", "ServiceAccount", "ConfigMap", "Secret", "Service", "DaemonSet", "Pod", "PodMonitor",
                 "ServiceMonitor", "PrometheusRule"):
        if kind not in kinds:
            errors.append(f"no {kind} in deploy/kubernetes")
    return errors, kinds


def main():
    self_test()
    errors, kinds = run(Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else None)
    for e in errors:
        print("ERROR:", e)
    print(f"checked {len(kinds)} objects: {', '.join(kinds)}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
