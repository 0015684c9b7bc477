#!/usr/bin/env python3
"""Every metric name used by the Grafana dashboard and the alert rules is one rdmad exports, and
every name rdmad declares is in the contract and in base units.

Usage: check_metric_names.py SOURCE_DIR
Reads deploy/metrics.txt (the contract list; names after its "# Deprecated" line are still
exported but on their way out), extracts the metric names from every PromQL expression of
deploy/grafana/rdmad.json (panel targets and template variable queries) and of
deploy/prometheus/rdmad-alerts.yml, and fails naming each unknown or deprecated one. Then reads
every declaration `Metric kName{"rdmad_...` of the daemon's sources (outside tests/ and bench/):
each name is declared once, listed in metrics.txt, and, unless deprecated, free of non-base units
(docs/operations.md, "Metric names"). Only the standard library.
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
# Name parts that are units other than the base ones (seconds, bytes, bits, ratios): a rate is
# _bits_per_second or _bytes_per_second, a duration _seconds, a size _bytes.
NON_BASE_UNITS = {"ns", "us", "usec", "ms", "msec", "millis", "micros", "nanos", "minutes", "hours", "days",
                  "kb", "mb", "gb", "tb", "kib", "mib", "gib", "kbytes", "mbytes", "gbytes",
                  "bps", "kbps", "mbps", "gbps", "mbit", "gbit", "pct", "percent"}
DECLARATION = re.compile(r'Metric\s+k\w+\s*\{\s*"(rdmad_\w+)"')


def unit_problem(name):
    """Why `name` breaks the base-unit rule, or None."""
    bad = [part for part in name.split("_") if part in NON_BASE_UNITS]
    return f"non-base unit {'/'.join(bad)}" if bad else None


def read_contract(text):
    """(current names, deprecated names) of deploy/metrics.txt."""
    current, deprecated = set(), set()
    target = current
    for line in text.splitlines():
        if line.startswith("# Deprecated"):
            target = deprecated
        elif line.strip() and not line.startswith("#"):
            target.add(line.strip())
    return current, deprecated


def declarations(src):
    """(where, name) of every metric declaration in the daemon's sources."""
    for path in sorted(src.rglob("*")):
        rel = path.relative_to(src)
        if path.suffix not in (".cc", ".h") or rel.parts[0] in ("tests", "bench", "build"):
            continue
        text = path.read_text(errors="replace")
        for m in DECLARATION.finditer(text):
            yield f"{rel}:{text.count(chr(10), 0, m.start()) + 1}", m.group(1)


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
    for good in ("rdmad_dcqcn_rate_bits_per_second", "rdmad_rate_bytes_per_second", "rdmad_transfers_total",
                 "rdmad_registration_duration_seconds", "rdmad_quota_usage_max_ratio", "rdmad_np_cnp_packets_sent_total"):
        assert unit_problem(good) is None, good
    for bad in ("rdmad_dcqcn_rate_mbps", "rdmad_flow_latency_us", "rdmad_poll_interval_ms", "rdmad_buffer_kb",
                "rdmad_link_gbps", "rdmad_cpu_percent"):
        assert unit_problem(bad), bad
    assert read_contract("a\n# x\nb\n# Deprecated: old\nc\n") == ({"a", "b"}, {"c"})
    assert [n for _, n in [("", m.group(1)) for m in DECLARATION.finditer(
        'inline constexpr Metric kA{"rdmad_a_total", "A.", Kind::kCounter};\nconstexpr Metric kB{\n    "rdmad_b", "B"}')]] \
        == ["rdmad_a_total", "rdmad_b"]


def main():
    self_test()
    src = Path(sys.argv[1])
    current, deprecated = read_contract((src / "deploy/metrics.txt").read_text())
    contract = current | deprecated
    bad = []
    for name in sorted(current):
        if unit_problem(name):
            bad.append(f"deploy/metrics.txt: {name}: {unit_problem(name)}")
    declared = {}
    for where, name in declarations(src):
        if name in declared:
            bad.append(f"{where}: {name} declared again (first at {declared[name]})")
        declared.setdefault(name, where)
        if name not in contract:
            bad.append(f"{where}: {name} is not in deploy/metrics.txt")
        elif name not in deprecated and unit_problem(name):
            bad.append(f"{where}: {name}: {unit_problem(name)}")
    if len(declared) < 50:
        bad.append(f"only {len(declared)} metric declarations found: the reader no longer matches the code")
    used = set()
    dashboard = json.loads((src / "deploy/grafana/rdmad.json").read_text())
    for where, expr in dashboard_exprs(dashboard):
        for name in metric_names(expr):
            used.add(name)
            if not known(name, contract):
                bad.append(f"dashboard {where}: {name}")
            elif known(name, deprecated):
                bad.append(f"dashboard {where}: {name} is deprecated")
    rules = (src / "deploy/prometheus/rdmad-alerts.yml").read_text()
    for where, expr in rules_exprs(rules):
        names = metric_names(expr)
        if not names:
            bad.append(f"{where}: no metric name found in {expr!r}")
        for name in names:
            if not known(name, contract) and name not in PROMETHEUS_SERIES:
                bad.append(f"alert {where}: {name}")
            elif known(name, deprecated):
                bad.append(f"alert {where}: {name} is deprecated")
    for b in bad:
        print("metric name problem:", b)
    print(f"{len(used)} metric names in the dashboard, {len(contract)} in deploy/metrics.txt "
          f"({len(deprecated)} deprecated), {len(declared)} declared in the sources")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
