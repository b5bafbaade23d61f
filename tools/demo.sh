#!/bin/sh
# The main demo: a ragged program (softmax over attention scores of
# sentences of different lengths, CoRa's SDPA softmax) and a recursive
# model's node computations (Cortex's TreeRNN), each checked, printed back
# as source, and evaluated by the reference interpreter on random inputs
# drawn within the declared ranges.
set -e
BUILD=${1:-build}
RAVEL=$BUILD/ravel
OUT=${OUT:-out/demo}
mkdir -p "$OUT"
for ex in ragged_softmax tree_rnn_cond; do
    echo "== examples/$ex.rv"
    "$RAVEL" check "examples/$ex.rv"
    echo "-- ravel print (the IR as source; it parses back to the same IR)"
    "$RAVEL" print "examples/$ex.rv"
    echo "-- ravel eval --random 7 (reference interpreter)"
    "$RAVEL" eval "examples/$ex.rv" --random 7 --output "$OUT/$ex" --save-inputs
    echo "-- ravel run --random 7 --check (compiled C, compared with the interpreter)"
    "$RAVEL" run "examples/$ex.rv" --random 7 --check
    echo
done
echo "-- a diagnostic: an index outside the declared range"
printf 'size T in 1..8\ninput X : f32[T, 4]\nY[i] = X[i, 4]\n' > "$OUT/bad.rv"
if "$RAVEL" check "$OUT/bad.rv"; then
    echo "expected an error" >&2
    exit 1
fi
echo "demo: ok (arrays in $OUT)"
