#!/usr/bin/env python3
"""A flamegraph SVG from `perf script` output (stdin), kernel frames included.

    perf script -i perf.data | python3 benches/perf_flamegraph.py "title" > out.svg

benches/realclient.sh --profile draws one per Spillway run. The server's own pprof endpoint
samples user space only, and on this VM it caught few samples (20-74 in a run of 1-2 CPU-s);
perf sees the kernel too, where most of a shuffle server's time goes (socket copies, page
faults of stored blocks, wake-ups). Frames are collapsed as FlameGraph's stackcollapse-perf
does (root first, one line per distinct stack); widths are shares of all samples.
"""
import html
import sys
from collections import defaultdict

WIDTH = 1600
ROW = 16
MIN_SHARE = 0.005  # frames narrower than this (of all samples) are not drawn


def stacks(lines):
    """Yields one list of frame names (leaf first) per sample."""
    frames = []
    in_sample = False
    for line in lines:
        line = line.rstrip("\n")
        if not line.strip():
            if in_sample:
                yield frames
            frames, in_sample = [], False
            continue
        if not line.startswith((" ", "\t")):
            in_sample = True  # the sample's header line: command, pid, time, event
            continue
        parts = line.strip().split(None, 1)
        if len(parts) < 2:
            continue
        sym = parts[1]
        # "sym+0x1f (dso)": keep the symbol, drop the offset; unknown frames keep the dso.
        dso = ""
        if sym.endswith(")") and " (" in sym:
            sym, dso = sym.rsplit(" (", 1)
            dso = dso[:-1]
        if "+0x" in sym:
            sym = sym.rsplit("+0x", 1)[0]
        if sym == "[unknown]" and dso:
            sym = "[%s]" % dso.rsplit("/", 1)[-1]
        elif "kernel" in dso:
            sym += " [k]"
        frames.append(sym)
    if in_sample:
        yield frames


def main():
    title = sys.argv[1] if len(sys.argv) > 1 else "perf"
    counts = defaultdict(int)
    total = 0
    for frames in stacks(sys.stdin):
        path = tuple(reversed(frames))
        total += 1
        for depth in range(1, len(path) + 1):
            counts[path[:depth]] += 1
    if total == 0:
        sys.exit("no samples in the input")
    children = defaultdict(list)
    for path in counts:
        children[path[:-1]].append(path)
    rects = []
    max_depth = 0

    def lay(path, x, depth):
        nonlocal max_depth
        for child in sorted(children[path]):
            share = counts[child] / total
            if share >= MIN_SHARE:
                rects.append((x, depth, share, child[-1], counts[child]))
                max_depth = max(max_depth, depth)
                lay(child, x, depth + 1)
            x += share

    lay((), 0.0, 0)
    height = (max_depth + 3) * ROW
    out = [
        '<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="monospace" '
        'font-size="11">' % (WIDTH, height),
        '<text x="4" y="12">%s: %d samples (perf, kernel included); hover for names</text>'
        % (html.escape(title), total),
    ]
    for x, depth, share, name, n in rects:
        y = height - (depth + 1) * ROW
        w = share * WIDTH
        # Kernel frames blue, the rest warm; the hue from the name, the same in every run.
        if name.endswith(" [k]"):
            color = "hsl(%d,60%%,70%%)" % (190 + sum(name.encode()) % 30)
        else:
            color = "hsl(%d,80%%,60%%)" % (10 + sum(name.encode()) % 45)
        label = html.escape(name)
        out.append(
            '<g><title>%s (%d samples, %.2f%%)</title><rect x="%.1f" y="%d" width="%.1f" '
            'height="%d" fill="%s" stroke="white" stroke-width="0.3"/>'
            % (label, n, share * 100, x * WIDTH, y, w, ROW - 1, color)
        )
        chars = int(w / 6.6)
        if chars >= 4:
            text = name if len(name) <= chars else name[: chars - 2] + ".."
            out.append('<text x="%.1f" y="%d">%s</text>' % (x * WIDTH + 2, y + 11, html.escape(text)))
        out.append("</g>")
    out.append("</svg>")
    print("\n".join(out))


if __name__ == "__main__":
    main()
