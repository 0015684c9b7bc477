#!/usr/bin/env python3
"""Checks the source tree against the dependency rules of docs/architecture.md.

The rules are the table between the markers `<!-- layout-rules -->` and `<!-- /layout-rules -->`
in docs/architecture.md: one row per module (a folder with its own library target), naming the
modules whose headers it may include. The page is the single statement of the rules; this check
keeps the code to it. It fails when:
  - a production source includes a header of a module its row does not list;
  - a module's public headers are not under <module>/include/rdmad/<module>/ (the include path
    equals the folder; client/, the public API, is the one exception: rdmad/<name>.h);
  - a folder holds production sources but has no row (a module nobody placed).
Tests, benches and fuzz targets may include anything: they test modules from outside.

Usage: check_layout.py <source root>
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"(rdmad/[^"]+)"', re.M)
SOURCE_EXT = (".h", ".cc", ".c", ".cpp")
# Made at build time (cmake/RdmadVersion.cmake), so in no module's folder.
GENERATED = {"rdmad/version.h"}
NOT_PRODUCTION = ("tests", "bench", "build", "docs", "deploy", "scripts", "cmake", ".git", ".ci")


def read_rules(root):
    text = open(os.path.join(root, "docs", "architecture.md"), encoding="utf-8").read()
    m = re.search(r"<!-- layout-rules -->(.*?)<!-- /layout-rules -->", text, re.S)
    if not m:
        sys.exit("docs/architecture.md: no <!-- layout-rules --> table")
    rules = {}
    for line in m.group(1).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2 or not cells[0].startswith("`"):
            continue
        module = cells[0].strip("`").rstrip("/")
        allowed = set(re.findall(r"`([^`]+)`", cells[1]))
        rules[module] = {a.rstrip("/") for a in allowed}
    return rules


def module_of(path, modules):
    """The longest module folder that contains `path` (relative to the root)."""
    best = None
    for m in modules:
        if path == m or path.startswith(m + "/"):
            if best is None or len(m) > len(best):
                best = m
    return best


def header_module(include, modules, client_headers):
    """The module whose public header `include` ("rdmad/x/y.h") is."""
    rel = include[len("rdmad/"):]
    if rel in client_headers:
        return "client"
    best = None
    for m in modules:
        if rel.startswith(m + "/") and (best is None or len(m) > len(best)):
            best = m
    return best


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".")
    rules = read_rules(root)
    modules = set(rules)
    errors = []
    client_inc = os.path.join(root, "client", "include", "rdmad")
    client_headers = {f for f in os.listdir(client_inc) if f.endswith(".h")} if os.path.isdir(client_inc) else set()
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        top = rel_dir.split(os.sep)[0]
        if top in NOT_PRODUCTION or top.startswith("build") or "CMakeCache.txt" in filenames:
            dirnames[:] = []
            continue
        for f in filenames:
            if not f.endswith(SOURCE_EXT):
                continue
            rel = os.path.normpath(os.path.join(rel_dir, f))
            mod = module_of(rel, modules)
            if mod is None:
                errors.append(f"{rel}: in no module of the layout rules")
                continue
            inside = rel[len(mod) + 1:]
            if inside.startswith("include/"):
                want = "include/rdmad/" if mod == "client" else f"include/rdmad/{mod}/"
                if not inside.startswith(want):
                    errors.append(f"{rel}: public header of {mod}/ outside {mod}/{want}")
            text = open(os.path.join(dirpath, f), encoding="utf-8", errors="replace").read()
            for inc in INCLUDE.findall(text):
                if inc in GENERATED:
                    continue
                target = header_module(inc, modules, client_headers)
                if target is None:
                    errors.append(f"{rel}: includes {inc}, which no module of the layout rules publishes")
                elif target != mod and target not in rules[mod]:
                    errors.append(f"{rel}: {mod}/ may not include {inc} ({target}/ is not in its row)")
    for e in errors:
        print(e)
    print(f"layout: {len(errors)} violation(s) of docs/architecture.md's rules over {len(modules)} modules")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
