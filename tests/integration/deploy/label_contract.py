#!/usr/bin/env python3
"""Every label an alert's annotations ($labels.X) or a dashboard legend ({{X}}) names exists on the
series its expression yields, judged against a live scrape: the metric's own labels (those all
of the expression's rdmad_ metrics share), or the `by (...)` list of an aggregation. `instance`
and `job` come from Prometheus and are always there. A label missing here renders as an empty
string in an alert or a legend ("away from node-a0/").

Usage: label_contract.py SCRAPE_FILE ALERTS_YAML DASHBOARD_JSON
"""
import json
import re
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_metric_names import HISTOGRAM_SUFFIXES, dashboard_targets, metric_names  # noqa: E402

SCRAPE_LABELS = {"instance", "job"}


def scrape_labels(path):
    """metric base name -> set of label names seen on any of its series."""
    labels = {}
    for line in open(path, encoding="utf-8"):
        if not line.startswith("rdmad_"):
            continue
        m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})?\s", line)
        if not m:
            continue
        name = m.group(1)
        names = set(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="', m.group(3) or ""))
        for s in HISTOGRAM_SUFFIXES:
            if name.endswith(s):
                labels.setdefault(name[: -len(s)], set()).update(names - {"le"})
        labels.setdefault(name, set()).update(names)
    return labels


def available(expr, labels):
    """Labels the expression's result carries, or None when none of its metrics was scraped."""
    by = re.search(r"\bby\s*\(([^)]*)\)", expr)
    if by:
        return {x.strip() for x in by.group(1).split(",") if x.strip()} - {"le"}
    sets = [labels[m] for m in metric_names(expr) if m in labels]
    if not sets:
        return None
    return set.intersection(*sets)


def check(where, expr, used, labels, problems, unchecked):
    have = available(expr, labels)
    if have is None:
        unchecked.append(where)
        return
    for label in sorted(set(used) - SCRAPE_LABELS - have):
        problems.append(f"{where}: names label '{label}', which {expr!r} does not have (it has: "
                        f"{', '.join(sorted(have)) or 'none'})")


def main():
    scrape, alerts_path, dashboard_path = sys.argv[1:4]
    labels = scrape_labels(scrape)
    problems, unchecked = [], []
    checked = 0
    for group in yaml.safe_load(open(alerts_path, encoding="utf-8"))["groups"]:
        for rule in group["rules"]:
            if "alert" not in rule:
                continue
            text = " ".join(str(v) for v in rule.get("annotations", {}).values())
            used = re.findall(r"\$labels\.([a-zA-Z_][a-zA-Z0-9_]*)", text)
            check(f"alert {rule['alert']}", rule["expr"], used, labels, problems, unchecked)
            checked += 1

    for where, t in dashboard_targets(json.load(open(dashboard_path, encoding="utf-8"))):
        used = re.findall(r"\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}", t.get("legendFormat", ""))
        check(where, t["expr"], used, labels, problems, unchecked)
        checked += 1
    if problems:
        print("FAIL: labels that the series do not have:\n  " + "\n  ".join(problems))
        return 1
    note = f" ({len(unchecked)} without a scraped series: {', '.join(unchecked)})" if unchecked else ""
    print(f"PASS: the labels of {checked - len(unchecked)} alert and panel expressions exist in a live scrape{note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
