#!/bin/sh
# Runs every test suite and prints the total last: "N passed, N failed".
# Unit suites print "<suite>: N passed, N failed"; the script-driven suites
# (error diagnostics, round-trips, end-to-end) do the same through
# tests/*.sh. A suite that crashes counts as one failure.
BUILD=${BUILD:-build}
export BUILD
passed=0
failed=0
log=$(mktemp)
for t in "$BUILD"/tests/test_*; do
    [ -x "$t" ] || continue
    if ! "$t" >"$log" 2>&1; then :; fi
    line=$(grep -E '^[^ ]+: [0-9]+ passed, [0-9]+ failed$' "$log" | tail -n 1)
    if [ -z "$line" ]; then
        echo "$t: crashed or printed no result"
        cat "$log"
        failed=$((failed + 1))
        continue
    fi
    p=$(echo "$line" | sed -E 's/.*: ([0-9]+) passed.*/\1/')
    f=$(echo "$line" | sed -E 's/.* ([0-9]+) failed$/\1/')
    [ "$f" -ne 0 ] && cat "$log"
    echo "$line"
    passed=$((passed + p))
    failed=$((failed + f))
done
for s in tests/suite_*.sh; do
    [ -f "$s" ] || continue
    if ! sh "$s" >"$log" 2>&1; then :; fi
    line=$(grep -E '^[^ ]+: [0-9]+ passed, [0-9]+ failed$' "$log" | tail -n 1)
    if [ -z "$line" ]; then
        echo "$s: printed no result"
        cat "$log"
        failed=$((failed + 1))
        continue
    fi
    p=$(echo "$line" | sed -E 's/.*: ([0-9]+) passed.*/\1/')
    f=$(echo "$line" | sed -E 's/.* ([0-9]+) failed$/\1/')
    [ "$f" -ne 0 ] && cat "$log"
    echo "$line"
    passed=$((passed + p))
    failed=$((failed + f))
done
rm -f "$log"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
