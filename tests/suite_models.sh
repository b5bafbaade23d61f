#!/bin/sh
# suite_models.sh — the recursive models of bench/trees/MODELS.md
# (models/*.rv): each file is what models/gen.py writes from its template
# (`gen.py --check`) and checks (`ravel check`; suite_roundtrip.sh prints
# them back). Their values are checked by python/tests/test_models.py (run
# by suite_python.sh, which has NumPy): the interpreter against bench/trees/trees_ref.py's float64 oracle and
# against PyTorch where torch is installed, and compiled code against the
# interpreter, on the same structures and weights. Here each model at its
# smallest hidden size also runs compiled under its own schedule against
# the interpreter on the six shapes of random structures `--random 1..6`
# draws (a single node, a 200-node chain, complete trees, many tiny
# structures, random shapes: docs/recursion.md), with `--check`'s
# tolerance: the weights are drawn over sqrt(fan-in) in a recursive
# program (src/interp/random_scale.c), so deep structures stay as accurate
# as shallow ones.
# The last line is "models: N passed, M failed".
BUILD=${BUILD:-build}
RAVEL="$BUILD/ravel"
passed=0
failed=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export RAVEL_CACHE_DIR="$tmp/cache"
# expect WHAT CMD...: runs CMD, counts it, prints its output when it fails
expect() {
    what=$1
    shift
    if "$@" >"$tmp/err" 2>&1; then
        passed=$((passed + 1))
    else
        echo "FAIL $what"
        sed 's/^/  /' "$tmp/err"
        failed=$((failed + 1))
    fi
}
expect "models/gen.py --check (run python3 models/gen.py and commit the files)" \
    python3 models/gen.py --check
for f in models/*.rv; do
    [ -f "$f" ] && expect "ravel check $f" "$RAVEL" check "$f"
done
# models/<model>_h<H>.rv -> the smallest H of each model
smallest=$(for f in models/*_h*.rv; do
    [ -f "$f" ] && echo "$f" | sed 's/^\(.*\)_h\([0-9]*\)\.rv$/\1 \2/'
done | sort -k1,1 -k2,2n | awk '!seen[$1]++ { print $1 "_h" $2 ".rv" }')
for f in $smallest; do
    for seed in 1 2 3 4 5 6; do
        expect "ravel run $f --random $seed --check" "$RAVEL" run "$f" --random $seed --check
    done
done
echo "models: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
