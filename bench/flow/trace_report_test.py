#!/usr/bin/env python3
"""trace_report.py on made-up trace files: roles, iterations per size, warm-up left out, hop times."""
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    with tempfile.TemporaryDirectory() as d:
        files = {pid: open(os.path.join(d, f"trace.{pid}"), "w") for pid in (10, 20, 30)}
        t = 1_000_000
        for size in range(2):
            for i in range(3):
                hop = 5_000 if i > 0 else 900_000  # the warm-up iteration (0) is slow: left out
                for pid, point, dt in ((10, "bench_start", 0), (20, "recv_submitted", 1_000), (20, "engine_sleeps", 0),
                                       (30, "send_started", hop), (30, "completion_written", 2_000),
                                       (10, "bench_send_seen", 1_000)):
                    t += dt
                    files[pid].write(f"{t} {pid} {pid + 1} {point} {i if point == 'bench_start' else 0}\n")
                t += 100_000
        for f in files.values():
            f.close()
        out = subprocess.run([sys.executable, os.path.join(HERE, "trace_report.py"), d, "--warmup", "1"],
                             check=True, capture_output=True, text=True).stdout
        print(out)
        assert out.count("2 iterations") == 2, "two sizes of two timed iterations each"
        line = next(l for l in out.splitlines() if "receiver recv_submitted -> sender send_started" in l)
        assert "5.0 /    5.0 /    5.0" in line, line  # µs, the warm-up's 900 µs left out
        assert "engine_sleeps" not in out, "state points are not hops"
        assert re.search(r"^ +6\.0 +sender +send_started$", out, re.M), "first occurrence since bench_start"
        empty = subprocess.run([sys.executable, os.path.join(HERE, "trace_report.py"), os.path.join(d, "none")],
                               capture_output=True, text=True)
        assert empty.returncode != 0 and "no trace" in empty.stderr, empty.stderr
    print("ok")


if __name__ == "__main__":
    main()
