#!/bin/sh
# bench/plot.sh — draws bench/out/*.png from benchmark JSON lines.
#
#   sh bench/plot.sh [results.jsonl ...]
#
# With no arguments, plots the newest bench/out/results-*.jsonl. One PNG per
# workload variant and thread count: gflops_*.png (every baseline, ravel when
# present, the measured peak as a dashed line) and ratio_*.png (baseline time
# over ravel time, one line per baseline; only once ravel has numbers).
# Needs python3 (standard library) and gnuplot (bench/setup.sh installs it).
set -eu
cd "$(dirname "$0")/.."
OUT=bench/out
if [ $# -eq 0 ]; then
    newest=$(ls -t $OUT/results-*.jsonl 2>/dev/null | head -n 1 || true)
    [ -n "$newest" ] || { echo "plot.sh: no $OUT/results-*.jsonl; run bench/run.sh first" >&2; exit 1; }
    set -- "$newest"
fi
command -v gnuplot >/dev/null || { echo "plot.sh: gnuplot missing; run bench/setup.sh" >&2; exit 1; }

count=0
rm -f "$OUT"/*.png "$OUT"/dat/*.dat # never mix plots of different runs
python3 bench/plot_data.py "$OUT/dat" "$OUT" "$@" > "$OUT/dat.list"
while IFS='|' read -r dat png ttl xl yl n peak logx; do
    case "$png" in */ratio_*) ratio=1 ;; *) ratio=0 ;; esac
    gnuplot -e "dat='$dat'; out='$png'; ttl='$ttl'; xl='$xl'; yl='$yl'; n=$n; peak=$peak; logx=$logx; ratio=$ratio" \
        bench/plot.gp
    count=$((count + 1))
done < "$OUT/dat.list"
echo "plot.sh: $count plots in $OUT/ from $*"
