#!/bin/sh
# run.sh — ravel's GPU schedules (bench/gpu/*.rv) against cuBLAS through
# PyTorch, on a machine with a CUDA device: JSON lines, one per (op, T,
# system). ravel's figure is `ravel run --time`'s per-run kernel time
# (each launch until the device is done; the copies to and from the device
# that `ravel run` makes per call are not counted, as PyTorch's tensors
# stay on the device). Each program is first checked against the
# interpreter (--check).
#   sh bench/gpu/run.sh            # T = 1 16 64 128
#   T="8 32" RAVEL=build/ravel sh bench/gpu/run.sh
set -e
RAVEL=${RAVEL:-build/ravel}
TS=${T:-1 16 64 128}
here=$(dirname "$0")
for f in bmm_nt_shared bmm_nt_reg dense_shared dense_reg; do
    "$RAVEL" run "$here/$f.rv" --target cuda --size T=3 --random 1 --check >/dev/null
    for t in $TS; do
        ms=$("$RAVEL" run "$here/$f.rv" --target cuda --size T="$t" --random 1 --time --repeat 50 |
            sed -n 's/^time: per run (mean) kernels \([0-9.]*\) ms.*/\1/p')
        echo "{\"op\": \"$f\", \"T\": $t, \"system\": \"ravel\", \"ms\": $ms}"
    done
done
python3 "$here/torch_gpu.py" --T "$(echo $TS | tr ' ' ',')"
