#!/usr/bin/env python3
"""Writes the Prometheus Operator's PrometheusRule for rdmad from the alert file, rdmad-alerts.yml.

Usage: make_prometheusrule.py [--check] [SOURCE_DIR]
Without --check, (re)writes deploy/kubernetes/prometheus-operator/prometheusrule.yaml; with it,
exits 1 when the committed file differs from what this script makes (the deploy test runs that),
so rdmad-alerts.yml stays the one place the rules are written. Needs PyYAML (python3-yaml).
"""
import sys
from pathlib import Path

import yaml

OUT = "deploy/kubernetes/prometheus-operator/prometheusrule.yaml"
HEADER = """\
# GENERATED from deploy/prometheus/rdmad-alerts.yml by deploy/prometheus/make_prometheusrule.py:
# edit the alert file and run the script (the deploy_kubernetes_manifests test fails when this
# file is stale). The rules expect job="rdmad": the PodMonitor/ServiceMonitor here set the job from
# the app.kubernetes.io/name label (jobLabel). The release label is what kube-prometheus-stack's
# default ruleSelector matches; set it to your Prometheus' ruleSelector.
"""


def render(source: Path) -> str:
    alerts = yaml.safe_load((source / "deploy/prometheus/rdmad-alerts.yml").read_text())
    rule = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {
            "name": "rdmad",
            "namespace": "rdmad",
            "labels": {"app.kubernetes.io/name": "rdmad", "release": "kube-prometheus-stack"},
        },
        "spec": {"groups": alerts["groups"]},
    }
    return HEADER + yaml.safe_dump(rule, sort_keys=False, default_flow_style=False, width=100, allow_unicode=True)


def main(argv):
    check = "--check" in argv
    rest = [a for a in argv if a != "--check"]
    source = Path(rest[0]) if rest else Path(__file__).resolve().parents[2]
    text = render(source)
    out = source / OUT
    if check:
        if not out.exists() or out.read_text() != text:
            print(f"{OUT} is stale: run deploy/prometheus/make_prometheusrule.py")
            return 1
        return 0
    out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
