#!/bin/sh
# bench/encoder/run.sh — ravel's encoder layer and every baseline on the same
# batches, one dataset at a time (the C process, which times ravel and the
# packed C baseline interleaved, and the PyTorch process alternate, so load
# on this shared machine hits them alike), results in bench/encoder/out/.
# `ravel bench encoder [OPTIONS]` runs this script.
#
#   sh bench/encoder/run.sh                       # all 8 datasets × 32,64,128 × 1,2 threads
#   sh bench/encoder/run.sh --check               # ravel and every baseline vs ref/y.npy, no timing
#   DATASETS=mnli,cola BATCH=32 THREADS=1 sh bench/encoder/run.sh
#   sh bench/encoder/run.sh --datasets mnli,cola --batch 32 --threads 1   # the same
#   LAYER=bert768 MIN_TIME=0.5 MIN_RUNS=3 sh bench/encoder/run.sh
#   TORCH=0 sh bench/encoder/run.sh               # ravel and packed C only (no venv needed)
#
# Needs bench/setup.sh (OpenBLAS) and bench/encoder/setup.sh (the venv).
set -eu
cd "$(dirname "$0")/../.."
while [ $# -gt 0 ]; do
    case "$1" in
        --check) CHECK=1; shift; continue ;;
        --datasets) DATASETS=$2 ;;
        --batch) BATCH=$2 ;;
        --threads) THREADS=$2 ;;
        --layer) LAYER=$2 ;;
        --min-time) MIN_TIME=$2 ;;
        --min-runs) MIN_RUNS=$2 ;;
        --no-torch) TORCH=0; shift; continue ;;
        *) echo "usage: run.sh [--check] [--datasets a,b] [--batch 32,64] [--threads 1,2]" \
                "[--layer cora512|bert768] [--min-time S] [--min-runs N] [--no-torch]" >&2
           exit 2 ;;
    esac
    shift 2
done
# the drivers of the build `ravel bench` belongs to, else build/bench
BUILD=${RAVEL_BENCH_DIR:-${BENCH_BUILD:-build/bench}}
PY=${ENCODER_PYTHON:-bench/encoder/.venv/bin/python}
LAYER=${LAYER:-cora512}
DATASETS=${DATASETS:-race,wiki512,squadv2,wiki128,mnli,xnli,mrpc,cola}
BATCH=${BATCH:-32,64,128}
THREADS=${THREADS:-1,2}
MIN_TIME=${MIN_TIME:-0.2}
MIN_RUNS=${MIN_RUNS:-5}
TORCH=${TORCH:-1}
CHECK=${CHECK:-0}

if [ "$TORCH" = 0 ]; then
    PY=python3 # gen.py and summarize.py need numpy only
elif [ ! -x "$PY" ]; then
    echo "run.sh: $PY not found: run \`sh bench/encoder/setup.sh\` (PyTorch), or --no-torch" >&2
    exit 1
fi
make -s -f bench/Makefile.inc bench-encoder "$BUILD/peak" BENCH_BUILD="$BUILD"
[ -e bench/encoder/out/weights/bert768/ln2_b.npy ] || "$PY" bench/encoder/gen.py

if [ "$CHECK" = 1 ]; then
    "$BUILD/packed_encoder" --check
    [ "$TORCH" = 0 ] || "$PY" bench/encoder/torch_encoder.py --check
    exit 0
fi

out=bench/encoder/out/results-$(date -u +%Y%m%d-%H%M%S).jsonl
log=${out%.jsonl}.log
# the roofline: FP32 FMA peak (and STREAM triad) per thread count
"$BUILD/peak" --threads "$THREADS" --quick >>"$out" 2>>"$log"
for ds in $(echo "$DATASETS" | tr , ' '); do
    "$BUILD/packed_encoder" --config "$LAYER" --datasets "$ds" --batch "$BATCH" \
        --threads "$THREADS" --min-time "$MIN_TIME" --min-runs "$MIN_RUNS" >>"$out" 2>>"$log"
    [ "$TORCH" = 0 ] ||
    "$PY" bench/encoder/torch_encoder.py --layer "$LAYER" --datasets "$ds" --batch "$BATCH" \
        --threads "$THREADS" --min-time "$MIN_TIME" --min-runs "$MIN_RUNS" >>"$out" 2>>"$log"
done
echo "run.sh: $out"
"$PY" bench/encoder/summarize.py "$out"
