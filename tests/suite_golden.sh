#!/bin/sh
# Golden tests: for every tests/golden/NAME.rv, the loop IR after the
# lowering pipeline (`ravel emit NAME.rv --target lower`) must equal
# NAME.lower.txt and the generated C (`ravel emit NAME.rv`) NAME.c. A
# mismatch prints a unified diff (expected -> current). After an intended
# change, `make golden-update` regenerates the files (GOLDEN_UPDATE=1);
# review the diff before committing it.
BUILD=${BUILD:-build}
RAVEL=$BUILD/ravel
export RAVEL_CACHE_DIR=${RAVEL_CACHE_DIR:-$(mktemp -d)}
unset RAVEL_DEBUG
out=$(mktemp)
passed=0
failed=0
check() { # check FILE.rv EXPECTED ARGS...
    f=$1
    want=$2
    shift 2
    if ! "$RAVEL" emit "$f" "$@" >"$out" 2>&1; then
        echo "FAIL ravel emit $f $*"
        cat "$out"
        failed=$((failed + 1))
        return
    fi
    if [ -n "$GOLDEN_UPDATE" ]; then
        cp "$out" "$want"
        echo "wrote $want"
        passed=$((passed + 1))
    elif [ ! -f "$want" ]; then
        echo "FAIL $want is missing (make golden-update writes it)"
        failed=$((failed + 1))
    elif diff -u "$want" "$out" >"$out.diff"; then
        passed=$((passed + 1))
    else
        echo "FAIL $want differs from ravel emit $f $*:"
        cat "$out.diff"
        failed=$((failed + 1))
    fi
}
for f in tests/golden/*.rv; do
    [ -f "$f" ] || continue
    base=${f%.rv}
    check "$f" "$base.lower.txt" --target lower
    check "$f" "$base.c"
done
# tests/bounds: the bounds pass's box, instantiated at each placement the
# walk makes, is the walk's region (RAVEL_DEBUG=bounds compares them), and
# the dump changes no code.
for f in tests/bounds/*.rv; do
    [ -f "$f" ] || continue
    if ! RAVEL_DEBUG=bounds "$RAVEL" emit "$f" >"$out.c" 2>"$out" || ! "$RAVEL" emit "$f" >"$out.plain" ||
        ! cmp -s "$out.c" "$out.plain" || ! grep -q '^bounds: ' "$out" ||
        grep '^bounds: ' "$out" | grep -qv "the box's instance is the walk's region"; then
        echo "FAIL RAVEL_DEBUG=bounds ravel emit $f:"
        cat "$out"
        failed=$((failed + 1))
    else
        passed=$((passed + 1))
    fi
done
rm -f "$out" "$out.diff" "$out.c" "$out.plain"
echo "golden: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
