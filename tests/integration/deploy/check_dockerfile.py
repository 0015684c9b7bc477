#!/usr/bin/env python3
"""The container image's Dockerfile installs what the build makes (docker is not available here).

Usage: check_dockerfile.py SOURCE_DIR
Parses deploy/container/Dockerfile (instructions, ARG defaults, ${VAR} expansion) and checks it
against the build's own description of its packages: the base is Debian 12, every .deb it copies
and installs is named as CPack names them (<package>_<version>_<arch>.deb, DEB-DEFAULT, with the
package names of cmake/RdmadPackaging.cmake and the version of project()), the daemon and client
packages are both installed with ibverbs-providers, and the entry point is the path the package
installs rdmad to (and the DaemonSet runs). A self-test proves each check fails on a bad file.
"""
import re
import sys
from pathlib import Path


def instructions(text):
    """(KEYWORD, argument) per instruction: comments dropped, continuation lines joined."""
    out, cur = [], ""
    for line in text.splitlines():
        if not cur and line.lstrip().startswith("#"):
            continue
        if line.rstrip().endswith("\\"):
            cur += line.rstrip()[:-1] + " "
            continue
        cur += line
        if cur.strip():
            kw, _, arg = cur.strip().partition(" ")
            out.append((kw.upper(), arg.strip()))
        cur = ""
    return out


def expand(s, args):
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: args.get(m.group(1) or m.group(2), m.group(0)), s)


def build_facts(source):
    cml = (source / "CMakeLists.txt").read_text()
    version = re.search(r"project\(rdmad VERSION (\S+)", cml).group(1)
    pkg = (source / "cmake/RdmadPackaging.cmake").read_text()
    names = dict(re.findall(r"set\(CPACK_DEBIAN_(\w+)_PACKAGE_NAME (\S+)\)", pkg))
    sbin = re.search(r"install\(TARGETS rdmad\b.*RUNTIME DESTINATION \$\{CMAKE_INSTALL_SBINDIR\}", pkg) is not None
    return version, names, "DEB-DEFAULT" in pkg, sbin


def check(text, version, names, deb_default, sbin):
    errors = []
    ins = instructions(text)
    args = {}
    for kw, arg in ins:
        if kw == "ARG" and "=" in arg:
            k, v = arg.split("=", 1)
            args[k] = v
    froms = [a for k, a in ins if k == "FROM"]
    if len(froms) != 1 or not re.fullmatch(r"debian:(bookworm|12)(-slim)?", froms[0]):
        errors.append(f"FROM must be one Debian 12 image (debian:bookworm-slim), not {froms}")
    if args.get("RDMAD_VERSION") != version:
        errors.append(f"ARG RDMAD_VERSION={args.get('RDMAD_VERSION')} but the build makes version {version}")
    if not deb_default:
        errors.append("cmake/RdmadPackaging.cmake no longer names packages DEB-DEFAULT: update this check")
    wanted = {names.get("DAEMON"), names.get("LIB")}
    produced = {f"{n}_{version}_{args.get('DEB_ARCH', 'amd64')}.deb" for n in names.values()}
    copied = set()
    for kw, arg in ins:
        if kw == "COPY":
            copied |= {Path(expand(p, args)).name for p in arg.split()[:-1] if p.endswith(".deb")}
    for deb in sorted(copied - produced):
        errors.append(f"COPY {deb}: the build makes no such package (it makes {sorted(produced)})")
    run = " ".join(expand(a, args) for k, a in ins if k == "RUN")
    installed = set(re.findall(r"/tmp/debs/(\S+\.deb)", run))
    for deb in sorted(installed - copied):
        errors.append(f"RUN installs {deb}, which is not copied in")
    for n in sorted(x for x in wanted if x):
        if f"{n}_{version}_{args.get('DEB_ARCH', 'amd64')}.deb" not in installed:
            errors.append(f"the package {n} is not installed")
    if not re.search(r"apt-get install[^&]*\bibverbs-providers\b", run):
        errors.append("ibverbs-providers is not installed (libibverbs finds no driver without it)")
    entry = [a for k, a in ins if k == "ENTRYPOINT"]
    if not sbin or entry != ['["/usr/sbin/rdmad"]']:
        errors.append(f"ENTRYPOINT must be [\"/usr/sbin/rdmad\"], where the package installs it (got {entry})")
    return errors


def self_test(version, names):
    good = Path(__file__).resolve().parents[3] / "deploy/container/Dockerfile"
    text = good.read_text()
    for bad, needle in [
        (text.replace("FROM debian:bookworm-slim", "FROM ubuntu:22.04"), "FROM must be"),
        (text.replace("librdmad0_${RDMAD_VERSION}", "librdmad_${RDMAD_VERSION}"), "makes no such package"),
        (text.replace("ARG RDMAD_VERSION=" + version, "ARG RDMAD_VERSION=9.9.9"), "ARG RDMAD_VERSION=9.9.9"),
        (text.replace("         ibverbs-providers \\\n", ""), "ibverbs-providers"),
        (text.replace('ENTRYPOINT ["/usr/sbin/rdmad"]', 'ENTRYPOINT ["/usr/bin/rdmad"]'), "ENTRYPOINT"),
    ]:
        assert bad != text, needle
        errs = "\n".join(check(bad, version, names, True, True))
        assert needle in errs, (needle, errs)


def main():
    source = Path(sys.argv[1])
    version, names, deb_default, sbin = build_facts(source)
    self_test(version, names)
    errors = check((source / "deploy/container/Dockerfile").read_text(), version, names, deb_default, sbin)
    for e in errors:
        print("ERROR:", e)
    print(f"deploy/container/Dockerfile: {'bad' if errors else 'ok'} (packages {sorted(names.values())}, "
          f"version {version}; docker itself is not run here)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
