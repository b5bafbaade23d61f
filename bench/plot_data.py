#!/usr/bin/env python3
"""bench/plot_data.py — turns benchmark JSON lines into gnuplot .dat files.

    plot_data.py DAT_DIR PNG_DIR results.jsonl...

Reads every JSON line of the given files (other lines are skipped), groups
them into plots — one per workload variant and thread count — and writes, per
plot and metric, a .dat file with one gnuplot data block per series (blocks
separated by two blank lines, each starting with its title), plus one line
per plot on stdout for bench/plot.sh:

    <dat file>|<png file>|<title>|<x label>|<y label>|<series count>|<peak or 0>|<log x 0/1>

Metrics: "ratio" (baseline_ms / ravel_ms per baseline; >1 means ravel is
faster; skipped while ravel has no numbers) and "gflops" (each baseline and
ravel, with the measured FP32 peak for that thread count when the input holds
a bench/peak line). Standard library only.
"""
import json
import os
import sys
from collections import defaultdict


def plot_key(d):
    """(file stem, title, x label, x value) for a result line, or None."""
    c = d.get("config", {})
    t = c.get("threads")
    if d["bench"] == "dense":
        stem = f"dense_{c['N']}x{c['K']}_{c['epilogue']}_t{t}"
        title = f"dense Y=X·Wᵀ, W {c['N']}x{c['K']}, X [16T,{c['K']}], {c['epilogue']}, {t} thread(s)"
        return stem, title, "T (sequence length; M = 16T)", c["T"]
    if d["bench"] == "bmm":
        stem = f"bmm_{c['layout']}_t{t}"
        title = f"batch matmul {c['layout']} [192,T,{'64' if c['layout'] == 'NT' else 'T'}], {t} thread(s)"
        return stem, title, "T (sequence length)", c["T"]
    if d["bench"] == "sgemm":
        return f"sgemm_t{t}", f"square SGEMM, {t} thread(s)", "n (M = N = K)", c["M"]
    return None


def main():
    out_dir, png_dir = sys.argv[1], sys.argv[2]
    os.makedirs(out_dir, exist_ok=True)
    peak = {}
    # plots[stem] = [title, xlabel, {metric: {series: {x: y}}}]
    plots = {}
    for path in sys.argv[3:]:
        with open(path) as f:
            for raw in f:
                raw = raw.strip()
                if not raw.startswith("{"):
                    continue
                try:
                    d = json.loads(raw)
                except json.JSONDecodeError:
                    continue
                if d.get("bench") == "peak":
                    if d.get("kind") == "fma":
                        peak[d["threads"]] = max(peak.get(d["threads"], 0), d["gflops"])
                    continue
                key = plot_key(d)
                if key is None:
                    continue
                stem, title, xlabel, x = key
                p = plots.setdefault(stem, [title, xlabel, defaultdict(lambda: defaultdict(dict))])
                series = p[2]
                base = d["baseline"]
                series["gflops"][base][x] = d["baseline_gflops"]
                if d.get("ravel_ms") is not None:
                    series["gflops"]["ravel"][x] = d["gflops"]
                    series["ratio"][f"{base} / ravel"][x] = d["ratio"]
    for stem, (title, xlabel, series) in sorted(plots.items()):
        threads = int(stem.rsplit("_t", 1)[1])
        for metric, ylabel in (("ratio", "baseline time / ravel time (>1: ravel faster)"),
                               ("gflops", "GFLOP/s")):
            data = series.get(metric)
            if not data:
                continue
            dat = os.path.join(out_dir, f"{metric}_{stem}.dat")
            with open(dat, "w") as f:
                for i, (name, points) in enumerate(sorted(data.items())):
                    if i:
                        f.write("\n\n")
                    f.write(f'"x" "{name}"\n')
                    for x in sorted(points):
                        f.write(f"{x} {points[x]}\n")
            png = os.path.join(png_dir, f"{metric}_{stem}.png")
            pk = peak.get(threads, 0) if metric == "gflops" else 0
            logx = 0 if stem.startswith("sgemm") else 1
            print(f"{dat}|{png}|{title}|{xlabel}|{ylabel}|{len(data)}|{pk}|{logx}")


if __name__ == "__main__":
    main()
