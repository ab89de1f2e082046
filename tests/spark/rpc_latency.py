#!/usr/bin/env python3
"""Server-side latency per RPC from a Spillway (or Java Uniffle) RPC audit log.

Usage: rpc_latency.py AUDIT_LOG

Reads the `cmd=` and `executionTimeUs=` fields of every line and prints a tab-separated table,
one row per command (most frequent first): calls, p50, p99, p99.9 and max in milliseconds, and
how many calls answered with a status other than SUCCESS. Percentiles are nearest-rank.
"""
import math
import re
import sys
from collections import defaultdict


LINE = re.compile(
    r"cmd=(?P<cmd>[^\t]+)\tstatusCode=(?P<status>[^\t]+)\t.*?executionTimeUs=(?P<us>\d+)"
)


def rank(sorted_us, q):
    return sorted_us[max(0, math.ceil(q * len(sorted_us)) - 1)] / 1000.0


def main(path):
    times = defaultdict(list)
    errors = defaultdict(int)
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = LINE.search(line)
            if m is None:
                continue
            cmd, status, us = m.group("cmd"), m.group("status"), int(m.group("us"))
            times[cmd].append(us)
            if status != "SUCCESS":
                errors[cmd] += 1
    print("rpc\tcalls\tp50_ms\tp99_ms\tp999_ms\tmax_ms\tnot_success")
    for cmd, us in sorted(times.items(), key=lambda kv: -len(kv[1])):
        us.sort()
        print(
            f"{cmd}\t{len(us)}\t{rank(us, 0.5):.3f}\t{rank(us, 0.99):.3f}\t"
            f"{rank(us, 0.999):.3f}\t{us[-1] / 1000.0:.3f}\t{errors[cmd]}"
        )


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
