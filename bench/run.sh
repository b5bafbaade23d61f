#!/bin/sh
# bench/run.sh — runs the benchmarks, saves their JSON lines, draws the plots.
#
#   sh bench/run.sh [--quick] [NAME ...]     NAME: peak dense bmm sgemm torch tune
#
# Default: all of them (~6 min, ~8 once ravel is timed too, plus ~15 for tune,
# which replays the committed bench/records; --quick: ~30 s, ~5 min with tune). Results go to stdout and
# to bench/out/results-<date>.jsonl; the drivers' notes (library kernels,
# spin settings) to bench/out/results-<date>.log; plots to bench/out/*.png.
# Extra options: BENCH_ARGS for the C drivers (e.g. "--threads 1"), TORCH_ARGS
# for torch_bench.py.
set -eu
cd "$(dirname "$0")/.."
BUILD=${BENCH_BUILD:-build/bench}
PYTHON=${PYTHON:-/usr/bin/python3}   # Debian's python3-torch lives there
QUICK=""
NAMES=""
for a in "$@"; do
    case "$a" in
    --quick) QUICK=--quick ;;
    peak | dense | bmm | sgemm | torch | tune) NAMES="$NAMES $a" ;;
    *) echo "usage: $0 [--quick] [peak|dense|bmm|sgemm|torch|tune ...]" >&2; exit 2 ;;
    esac
done
[ -n "$NAMES" ] || NAMES="peak dense bmm sgemm torch tune"

BENCH_BUILD=$BUILD sh bench/build.sh >/dev/null
mkdir -p bench/out
stamp=$(date +%Y%m%d-%H%M%S)
out=bench/out/results-$stamp.jsonl
log=bench/out/results-$stamp.log
: > "$out"
echo "run.sh: $(uname -n), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$log"
start=$(date +%s)
for name in $NAMES; do
    t0=$(date +%s)
    case "$name" in
    peak) "$BUILD/peak" $QUICK ;;
    torch) "$PYTHON" bench/torch_bench.py $QUICK ${TORCH_ARGS:-} ;;
    *) "$BUILD/bench_$name" $QUICK ${BENCH_ARGS:-} ;;
    esac 2>> "$log" | tee -a "$out"
    echo "run.sh: $name took $(( $(date +%s) - t0 )) s" | tee -a "$log" >&2
done
echo "run.sh: all took $(( $(date +%s) - start )) s; results in $out" | tee -a "$log" >&2
case " $NAMES " in *" tune "*) python3 bench/summarize_tune.py "$out" > "${out%.jsonl}-tune.md" ;; esac
command -v gnuplot >/dev/null && sh bench/plot.sh "$out" >&2 || echo "run.sh: no gnuplot, no plots" >&2
