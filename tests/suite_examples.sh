#!/bin/sh
# Every example checks, verifies and evaluates with the reference
# interpreter on random inputs (three seeds: different sizes, UF arrays
# and data; for recursion, a single node, a 200-node chain, bushy trees),
# writing its outputs as .npy files.
BUILD=${BUILD:-build}
RAVEL=$BUILD/ravel
out=$(mktemp -d)
passed=0
failed=0
for f in examples/*.rv; do
    name=$(basename "$f" .rv)
    if "$RAVEL" check "$f" >/dev/null 2>"$out/err"; then
        passed=$((passed + 1))
    else
        echo "FAIL check $f"; cat "$out/err"; failed=$((failed + 1))
    fi
    for seed in 1 2 3; do
        if "$RAVEL" eval "$f" --random $seed --output "$out/$name.$seed" >"$out/log" 2>&1 &&
            [ -n "$(ls "$out/$name.$seed"/*.npy 2>/dev/null)" ]; then
            passed=$((passed + 1))
        else
            echo "FAIL eval $f --random $seed"; cat "$out/log"; failed=$((failed + 1))
        fi
    done
done
rm -rf "$out"
echo "examples: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
