#!/bin/sh
# Every example compiles (default schedule) and its outputs match the
# reference interpreter on random inputs: `ravel run --random S --check`.
BUILD=${BUILD:-build}
RAVEL=$BUILD/ravel
export RAVEL_CACHE_DIR=${RAVEL_CACHE_DIR:-$(mktemp -d)}
log=$(mktemp)
passed=0
failed=0
for f in examples/*.rv; do
    for seed in 1 2; do
        if "$RAVEL" run "$f" --random $seed --check >"$log" 2>&1; then
            passed=$((passed + 1))
        else
            echo "FAIL run --check $f --random $seed"; cat "$log"; failed=$((failed + 1))
        fi
    done
done
rm -f "$log"
echo "run-check: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
