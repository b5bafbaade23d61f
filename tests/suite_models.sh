#!/bin/sh
# suite_models.sh — the recursive models of bench/trees/MODELS.md
# (models/*.rv): each file is what models/gen.py writes from its template
# (`gen.py --check`) and checks (`ravel check`; suite_roundtrip.sh prints
# them back). Their values are checked by python/tests/test_models.py (run
# by suite_python.sh, which has NumPy): the interpreter against bench/trees/trees_ref.py's float64 oracle and
# against PyTorch where torch is installed, and compiled code against the
# interpreter, on the same structures and weights.
# The last line is "models: N passed, M failed".
BUILD=${BUILD:-build}
RAVEL="$BUILD/ravel"
passed=0
failed=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if python3 models/gen.py --check >"$tmp/err" 2>&1; then
    passed=$((passed + 1))
else
    echo "FAIL models/gen.py --check (run python3 models/gen.py and commit the files)"
    sed 's/^/  /' "$tmp/err"
    failed=$((failed + 1))
fi
for f in models/*.rv; do
    [ -f "$f" ] || continue
    if "$RAVEL" check "$f" >/dev/null 2>"$tmp/err"; then
        passed=$((passed + 1))
    else
        echo "FAIL ravel check $f"
        sed 's/^/  /' "$tmp/err"
        failed=$((failed + 1))
    fi
done
echo "models: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
