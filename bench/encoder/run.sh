#!/bin/sh
# bench/encoder/run.sh — every encoder baseline on the same batches, one
# dataset at a time (the C and the PyTorch process alternate, so load on this
# shared machine hits them alike), results in bench/encoder/out/.
#
#   sh bench/encoder/run.sh                       # all 8 datasets × 32,64,128 × 1,2 threads
#   sh bench/encoder/run.sh --check               # every baseline vs ref/y.npy, no timing
#   DATASETS=mnli,cola BATCH=32 THREADS=1 sh bench/encoder/run.sh
#   LAYER=bert768 MIN_TIME=0.5 MIN_RUNS=3 sh bench/encoder/run.sh
#
# Needs bench/setup.sh (OpenBLAS) and bench/encoder/setup.sh (the venv).
set -eu
cd "$(dirname "$0")/../.."
BUILD=${BENCH_BUILD:-build/bench}
PY=${ENCODER_PYTHON:-bench/encoder/.venv/bin/python}
LAYER=${LAYER:-cora512}
DATASETS=${DATASETS:-race,wiki512,squadv2,wiki128,mnli,xnli,mrpc,cola}
BATCH=${BATCH:-32,64,128}
THREADS=${THREADS:-1,2}
MIN_TIME=${MIN_TIME:-0.2}
MIN_RUNS=${MIN_RUNS:-5}

make -s -f bench/Makefile.inc bench-encoder BENCH_BUILD="$BUILD"
[ -e bench/encoder/out/weights/bert768/ln2_b.npy ] || "$PY" bench/encoder/gen.py

if [ "${1:-}" = "--check" ]; then
    "$BUILD/packed_encoder" --check
    "$PY" bench/encoder/torch_encoder.py --check
    exit 0
fi

out=bench/encoder/out/results-$(date -u +%Y%m%d-%H%M%S).jsonl
log=${out%.jsonl}.log
for ds in $(echo "$DATASETS" | tr , ' '); do
    "$BUILD/packed_encoder" --config "$LAYER" --datasets "$ds" --batch "$BATCH" \
        --threads "$THREADS" --min-time "$MIN_TIME" --min-runs "$MIN_RUNS" >>"$out" 2>>"$log"
    "$PY" bench/encoder/torch_encoder.py --layer "$LAYER" --datasets "$ds" --batch "$BATCH" \
        --threads "$THREADS" --min-time "$MIN_TIME" --min-runs "$MIN_RUNS" >>"$out" 2>>"$log"
done
echo "run.sh: $out"
"$PY" bench/encoder/summarize.py "$out"
