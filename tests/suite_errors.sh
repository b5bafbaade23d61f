#!/bin/sh
# suite_errors.sh — every tests/error/*.rv must be rejected by `ravel check`
# with the diagnostic its first line announces:
#
#     # expect: LINE:COL: MESSAGE
#
# The run passes when ravel exits with status 1, its output contains
# "FILE:LINE:COL: error: " (the location, FILE as given on the command
# line) and MESSAGE (a substring of the message). Runs from the repository
# root; BUILD names the build directory (default build). The last line is
# "errors: N passed, M failed", the format tests/run.sh sums.
BUILD=${BUILD:-build}
RAVEL="$BUILD/ravel"
passed=0
failed=0
for f in tests/error/*.rv; do
    [ -f "$f" ] || continue
    expect=$(head -n 1 "$f" | sed -n 's/^# expect: //p')
    loc=${expect%%: *}
    msg=${expect#*: }
    if [ -z "$expect" ] || [ "$loc" = "$expect" ]; then
        echo "FAIL $f: first line must be '# expect: LINE:COL: MESSAGE'"
        failed=$((failed + 1))
        continue
    fi
    out=$("$RAVEL" check "$f" 2>&1)
    rc=$?
    if [ "$rc" -eq 1 ] && printf '%s\n' "$out" | grep -qF -- "$f:$loc: error: " &&
        printf '%s\n' "$out" | grep -qF -- "$msg"; then
        passed=$((passed + 1))
    else
        echo "FAIL $f (exit status $rc)"
        echo "  expected: $f:$loc: error: ...$msg..."
        printf '%s\n' "$out" | sed 's/^/  got: /'
        failed=$((failed + 1))
    fi
done
echo "errors: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
