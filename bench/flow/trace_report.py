#!/usr/bin/env python3
"""Where a flow SEND's time goes: merges the trace files of a -DRDMAD_TRACE_POINTS=ON build.

    cmake -S . -B build-trace -G Ninja -DRDMAD_TRACE_POINTS=ON
    cmake --build build-trace --target rdmad flow_bench
    mkdir -p /tmp/trace && rm -f /tmp/trace/trace.*
    RDMAD_TRACE_DIR=/tmp/trace build-trace/bench/flow/flow_bench --only=sendrecv --iters=5000
    bench/flow/trace_report.py /tmp/trace

Each file is one process's points (rdmad/base/trace_points.h): `<ns> <pid> <tid> <point> <arg>`,
on the host's CLOCK_MONOTONIC. The bench's process (the one with bench_start) is the client, the
daemon that takes the receives is the receiver, the one that starts the sends the sender.
Iterations begin at bench_start (its arg is the iteration; each message size starts again at 0);
the bench's warm-up iterations (the first 200 of each size) are left out.

For each size it prints the median time of each point's first occurrence in an iteration (since
bench_start), and every hop (one point to the next, whichever thread or process) with its
p10/p50/p90 and its mean share of an iteration, largest first.
"""
import argparse
import collections
import glob
import os
import statistics
import sys

SKIP = {"engine_sleeps", "engine_wakes"}  # state, not steps of the request


def load(directory):
    events = []
    for path in glob.glob(os.path.join(directory, "trace.*")):
        with open(path) as f:
            for line in f:
                ns, pid, tid, point, arg = line.split()
                events.append((int(ns), int(pid), int(tid), point, int(arg)))
    events.sort()
    return events


def roles(events):
    first = {}
    for _, pid, _, point, _ in events:
        first.setdefault(point, pid)
    out = {}
    for point, role in (("bench_start", "client"), ("recv_submitted", "receiver"), ("send_started", "sender")):
        if point in first:
            out.setdefault(first[point], role)
    return out


def iterations(events, warmup):
    """Lists of events per iteration, grouped by size (a new size when the iteration number drops)."""
    sizes, current, last = [], None, None
    for e in events:
        if e[3] == "bench_start":
            if last is None or e[4] < last:
                sizes.append([])
            last = e[4]
            current = [e] if e[4] >= warmup else None
            if current is not None:
                sizes[-1].append(current)
        elif current is not None:
            current.append(e)
    return sizes


def pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * q))]


def report(its, role):
    print(f"  {len(its)} iterations\n")
    print("  median µs since bench_start of each point's first occurrence:")
    firsts = collections.defaultdict(list)
    for it in its:
        t0, seen = it[0][0], set()
        for ns, pid, _, point, _ in it:
            key = (role.get(pid, "?"), point)
            if key not in seen and point not in SKIP:
                seen.add(key)
                firsts[key].append((ns - t0) / 1000)
    for (who, point), v in sorted(firsts.items(), key=lambda kv: statistics.median(kv[1])):
        if len(v) >= len(its) // 2:
            print(f"  {statistics.median(v):9.1f}  {who:8} {point}")
    print("\n  hops (µs): p10 / p50 / p90, and mean µs per iteration")
    hops = collections.defaultdict(list)
    for it in its:
        steps = [(ns, role.get(pid, "?"), point) for ns, pid, _, point, _ in it if point not in SKIP]
        for a, b in zip(steps, steps[1:]):
            hops[(a[1], a[2], b[1], b[2])].append((b[0] - a[0]) / 1000)
    rows = sorted(hops.items(), key=lambda kv: -sum(kv[1]))
    for (ra, pa, rb, pb), v in rows:
        if len(v) < len(its) // 4:
            continue
        name = f"{ra} {pa} -> {rb} {pb}"
        print(f"  {name:62} {pct(v, .1):6.1f} / {pct(v, .5):6.1f} / {pct(v, .9):6.1f}   {sum(v) / len(its):6.1f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("directory", help="where RDMAD_TRACE_DIR pointed")
    ap.add_argument("--warmup", type=int, default=200, help="iterations of each size left out (default 200)")
    args = ap.parse_args()
    events = load(args.directory)
    if not events:
        sys.exit(f"no trace.* files with points in {args.directory} (a -DRDMAD_TRACE_POINTS=ON build?)")
    role = roles(events)
    for n, its in enumerate(iterations(events, args.warmup)):
        print(f"size {n + 1} (in the bench's order)")
        if its:
            report(its, role)
        print()


if __name__ == "__main__":
    main()
