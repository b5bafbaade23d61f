#!/bin/sh
# bench/tune/tune.sh — tunes bench_tune's operators (bench/tune/OP.rv) on
# this machine and keeps what bench_tune and `make bench` replay:
# bench/records/OP.jsonl (every measurement, JSON lines, each naming the
# machine class; resumable: a run with the same TRIALS measures nothing
# new, a larger one only the difference) and bench/records/OP.tune.json
# (the tuning's trials and its wall, compile and measure seconds, summed
# over the runs that made the records), which bench/summarize_tune.py
# compares with per-shape tuning.
#
#   sh bench/tune/tune.sh [TRIALS [OP...]]     (default 24 trials, every operator)
#
# Each operator is tuned once per thread count of $THREADS (default "1 2",
# what bench_tune runs): a record names the threads it was measured on and
# a tuner or `ravel build --records --threads N` reads only those of its
# count. OP.tune.json keeps one entry per count under "runs".
#
# Runs under nice: tuning measures on the real machine, so a busy machine
# gives noisier records (the records say which machine class, not how busy):
# $NOTE (default: the load average when the run began) goes into
# OP.tune.json's "note". $SHAPES names a --shapes file (the effort goes
# to its shapes; e.g. bench/tune/small_t.txt for a top-up at small T);
# its time counts in OP.tune.json as any run's. $VERIFY is ravel tune's
# --verify (default: half the trials; docs/tuning.md "Verifying the
# dispatcher"); the verification's measurements count in "trials".
set -eu
cd "$(dirname "$0")/../.."
RAVEL=${RAVEL:-build/ravel}
trials=${1:-24}
[ $# -gt 0 ] && shift
ops=${*:-"dense_2304x768 dense_768x768 dense_3072x768 dense_768x3072 dense_2304x768_gelu
 dense_768x768_gelu dense_3072x768_gelu dense_768x3072_gelu bmm_nt bmm_nn"}
threads=${THREADS:-"1 2"}
note=${NOTE:-"load average $(cut -d' ' -f1-3 /proc/loadavg) when tuning began"}
machine=$("$RAVEL" tune --hw | sed -n 's/^machine class: *//p')
for op in $ops; do
    for th in $threads; do
        log=$(mktemp)
        nice -n 10 "$RAVEL" tune "bench/tune/$op.rv" --trials "$trials" --threads "$th" --quiet \
            ${SHAPES:+--shapes "$SHAPES"} ${VERIFY:+--verify "$VERIFY"} \
            --records "bench/records/$op.jsonl" >"$log" 2>&1 || { cat "$log"; rm -f "$log"; exit 1; }
        summary=$(grep '^tuned ' "$log")
        rm -f "$log"
        echo "$op ($th thread(s)): $summary"
        python3 - "$op" "$th" "$machine" "$note" "$summary" <<'PY'
import json, os, re, sys
op, th, machine, note, line = sys.argv[1:6]
m = re.search(r"(\d+) measurements \((\d+) from the records\).*; ([\d.]+)s \(compile ([\d.]+)s, measure ([\d.]+)s\)", line)
total, reused, wall, comp, meas = int(m[1]), int(m[2]), float(m[3]), float(m[4]), float(m[5])
path = f"bench/records/{op}.tune.json"
side = json.load(open(path)) if os.path.exists(path) else {}
runs = side.get("runs", {})
old = runs.get(th) if reused else None
old = old or {"wall_s": 0, "compile_s": 0, "measure_s": 0}
runs[th] = {"trials": total, "wall_s": round(old["wall_s"] + wall, 1),
            "compile_s": round(old["compile_s"] + comp, 1),
            "measure_s": round(old["measure_s"] + meas, 1)}
side = {"op": op, "machine": machine, "note": note, "runs": runs}
with open(path, "w") as f:
    f.write(json.dumps(side, sort_keys=True) + "\n")
PY
    done
done
