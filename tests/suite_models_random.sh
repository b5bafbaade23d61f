#!/bin/sh
# suite_models_random.sh — every recursive model (models/*.rv) at its
# smallest hidden size, compiled under its own schedule, against the
# interpreter on the six shapes of random structures `--random 1..6` draws
# (a single node, a 200-node chain, complete trees, many tiny structures,
# random shapes: docs/recursion.md), with `--check`'s tolerance. The
# weights are drawn scaled by 1 / sqrt(fan-in) in a recursive program
# (src/interp/random_scale.c), so deep structures stay as accurate as
# shallow ones. The larger sizes are the same templates (models/gen.py);
# python/tests/test_models.py checks the values against the oracle.
# The last line is "models-random: N passed, M failed".
BUILD=${BUILD:-build}
RAVEL="$BUILD/ravel"
passed=0
failed=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export RAVEL_CACHE_DIR="$tmp/cache"
# models/<model>_h<H>.rv -> the smallest H of each model
smallest=$(for f in models/*_h*.rv; do
    [ -f "$f" ] && echo "$f" | sed 's/^\(.*\)_h\([0-9]*\)\.rv$/\1 \2/'
done | sort -k1,1 -k2,2n | awk '!seen[$1]++ { print $1 "_h" $2 ".rv" }')
for f in $smallest; do
    for seed in 1 2 3 4 5 6; do
        if "$RAVEL" run "$f" --random $seed --check >"$tmp/log" 2>&1; then
            passed=$((passed + 1))
        else
            echo "FAIL ravel run $f --random $seed --check"
            sed 's/^/  /' "$tmp/log"
            failed=$((failed + 1))
        fi
    done
done
echo "models-random: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
