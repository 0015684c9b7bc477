#!/usr/bin/env python3
"""Every metric name used by the Grafana dashboard and the alert rules is one rdmad exports.

Usage: check_metric_names.py SOURCE_DIR
Reads deploy/metrics.txt (the contract list), extracts the metric names from every PromQL
expression of deploy/grafana/rdmad.json (panel targets and template variable queries) and of
deploy/prometheus/rdmad-alerts.yml, and fails naming each unknown one. Only the standard library.
"""
import json
import re
import sys
from pathlib import Path

# Prometheus' own series, allowed in alert rules only.
PROMETHEUS_SERIES = {"up"}
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless",
            "bool", "offset", "inf", "nan"}
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


def metric_names(expr):
    """The metric names in a PromQL expression (identifiers that are not functions, keywords,
    label names in matchers or grouping clauses, durations or template variables)."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)           # string literals
    expr = re.sub(r"\{[^}]*\}", "", expr)                     # label matchers
    expr = re.sub(r"\[[^\]]*\]", "", expr)                    # range selectors
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", expr)
    expr = re.sub(r"\$\{?\w+\}?", " ", expr)                  # Grafana variables
    names = set()
    for m in re.finditer(r"(?<![\w.])([a-zA-Z_:][\w:]*)(\s*\()?", expr):
        word, call = m.group(1), m.group(2)
        if call or word.lower() in KEYWORDS:
            continue
        names.add(word)
    return names


def known(name, contract):
    if name in contract:
        return True
    return any(name.endswith(s) and name[: -len(s)] in contract for s in HISTOGRAM_SUFFIXES)


def dashboard_targets(dashboard):
    """(where, target) for every panel query (label_contract.py reads their legends too)."""
    for panel in dashboard["panels"]:
        for sub in [panel] + panel.get("panels", []):
            for target in sub.get("targets", []):
                yield f'panel "{sub["title"]}" {target.get("refId", "")}'.rstrip(), target


def dashboard_exprs(dashboard):
    for where, target in dashboard_targets(dashboard):
        yield where, target["expr"]
    for var in dashboard["templating"]["list"]:
        query = var.get("query")
        if var["type"] == "query":
            text = query["query"] if isinstance(query, dict) else query
            inner = re.fullmatch(r"label_values\((.*),\s*\w+\)", text)
            yield f'variable "{var["name"]}"', inner.group(1) if inner else text


def rules_exprs(text):
    # The rules file: "expr: ..." on one line or as a "|" block.
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"^(\s*)expr:\s*(.*)$", line)
        if not m:
            continue
        if m.group(2).strip() != "|":
            yield f"rules line {i + 1}", m.group(2)
            continue
        block = []
        for nxt in lines[i + 1:]:
            if nxt.strip() and len(nxt) - len(nxt.lstrip()) <= len(m.group(1)):
                break
            block.append(nxt)
        yield f"rules line {i + 1}", "\n".join(block)


def self_test():
    assert metric_names('sum by (instance, le) (rate(rdmad_x_bucket{a="b",c=~"$d"}[$__rate_interval]))') == {"rdmad_x_bucket"}
    assert metric_names("time() - rdmad_start_time_seconds offset 5m") == {"rdmad_start_time_seconds"}
    assert metric_names('a / on(device) b > 0.01 and up{job="x"} == 0') == {"a", "b", "up"}
    assert not known("rdmad_typo_total", {"rdmad_typo"})
    assert known("rdmad_h_bucket", {"rdmad_h"})


def main():
    self_test()
    src = Path(sys.argv[1])
    contract = {line.strip() for line in (src / "deploy/metrics.txt").read_text().splitlines()
                if line.strip() and not line.startswith("#")}
    bad = []
    used = set()
    dashboard = json.loads((src / "deploy/grafana/rdmad.json").read_text())
    for where, expr in dashboard_exprs(dashboard):
        for name in metric_names(expr):
            used.add(name)
            if not known(name, contract):
                bad.append(f"dashboard {where}: {name}")
    rules = (src / "deploy/prometheus/rdmad-alerts.yml").read_text()
    for where, expr in rules_exprs(rules):
        names = metric_names(expr)
        if not names:
            bad.append(f"{where}: no metric name found in {expr!r}")
        for name in names:
            if not known(name, contract) and name not in PROMETHEUS_SERIES:
                bad.append(f"alert {where}: {name}")
    for b in bad:
        print("unknown metric:", b)
    print(f"{len(used)} metric names in the dashboard, {len(contract)} in deploy/metrics.txt")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
