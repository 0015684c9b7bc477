#!/usr/bin/env python3
"""The manifest checker fails on what a cluster would refuse or what breaks rdmad there.

Usage: kubernetes_checker_test.py SOURCE_DIR
Copies deploy/ to a temporary tree, breaks one thing at a time (a misspelled key, a wrong type, a
stale PrometheusRule, a policy the DaemonSet must keep) and runs check_kubernetes_manifests.run
on it: each must fail naming the file and the field. The unbroken copy must pass.
"""
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import check_kubernetes_manifests as checker  # noqa: E402

CASES = [
    # (file under deploy/, text, replacement, what the error must say)
    ("kubernetes/daemonset.yaml", "            periodSeconds: 5\n", "            periodSecond: 5\n",
     "daemonset.yaml#0.spec.template.spec.containers[0].readinessProbe: unknown field 'periodSecond'"),
    ("kubernetes/daemonset.yaml", "      hostNetwork: true\n", '      hostNetwork: "true"\n',
     "daemonset.yaml#0.spec.template.spec.hostNetwork: expected boolean, got str 'true'"),
    ("kubernetes/daemonset.yaml", "              containerPort: 9842\n", "              containerPort: \"9842\"\n",
     "containers[0].ports[0].containerPort: expected integer"),
    ("kubernetes/daemonset.yaml", "            path: /readyz\n", "            path: /metrics\n",
     "needs a readiness probe on GET /readyz"),
    ("kubernetes/daemonset.yaml", "          type: RuntimeDefault\n", "          type: Unconfined\n",
     "needs a seccompProfile"),
    ("kubernetes/daemonset.yaml", "            defaultMode: 0400\n", "            defaultMode: 0644\n",
     "on a read-only Secret mount with defaultMode 0400 or 0600"),
    ("kubernetes/daemonset.yaml", "            defaultMode: 0400\n", "            defaultMode: 01000\n",
     "secret.defaultMode: expected mode"),
    ("kubernetes/namespace.yaml", "    pod-security.kubernetes.io/enforce: privileged\n", "",
     "label pod-security.kubernetes.io/enforce: privileged missing"),
    ("kubernetes/service.yaml", "  publishNotReadyAddresses: true\n", "  publishNotReadyAddresses: false\n",
     "discovery needs publishNotReadyAddresses: true"),
    ("kubernetes/service.yaml", "  clusterIP: None\n", "  clusterIp: None\n",
     "service.yaml#0.spec: unknown field 'clusterIp'"),
    ("kubernetes/configmap.yaml", 'discover = "dns:rdmad-peers.rdmad.svc.cluster.local"',
     'discover = "dns:peers.rdmad.svc.cluster.local"', "names no headless Service"),
    ("kubernetes/prometheus-operator/podmonitor.yaml", "      interval: 15s\n", "      interval: 15\n",
     "podMetricsEndpoints[0].interval: expected string, got int 15"),
    ("kubernetes/prometheus-operator/servicemonitor.yaml", "  endpoints:\n", "  endpoint:\n",
     "servicemonitor.yaml#0.spec: unknown field 'endpoint'"),
    ("kubernetes/patches/rdma-shared-device-plugin.yaml", "            limits:\n", "            limit:\n",
     "resources: unknown field 'limit'"),
    ("kubernetes/example-client-pod.yaml", "    supplementalGroups: [2100]\n", "    supplementalGroups: ['2100']\n",
     "supplementalGroups[0]: expected integer"),
    ("prometheus/rdmad-alerts.yml", "        for: 2m\n", "        for: 3m\n", "PrometheusRule: deploy/kubernetes"),
]


def main():
    src = Path(sys.argv[1])
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp, "good")
        shutil.copytree(src / "deploy", base / "deploy")
        errors, _ = checker.run(base)
        if errors:
            print("FAIL: the unbroken manifests do not pass:", *errors, sep="\n  ")
            failures += 1
        for i, (rel, old, new, needle) in enumerate(CASES):
            tree = Path(tmp, f"case{i}")
            shutil.copytree(src / "deploy", tree / "deploy")
            f = tree / "deploy" / rel
            text = f.read_text()
            if old not in text:
                print(f"FAIL: case {i}: {rel} no longer contains {old!r}: update the case")
                failures += 1
                continue
            f.write_text(text.replace(old, new, 1))
            errors, _ = checker.run(tree)
            if not any(needle in e for e in errors):
                print(f"FAIL: case {i} ({rel}: {old.strip()!r} -> {new.strip()!r}) not caught as {needle!r}; errors:",
                      *errors, sep="\n  ")
                failures += 1
            else:
                print(f"ok: {rel}: {new.strip() or 'removed ' + old.strip()!r} -> {next(e for e in errors if needle in e)}")
    print(f"{len(CASES) + 1 - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
