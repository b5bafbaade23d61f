#!/bin/sh
# suite_roundtrip.sh — the printer's contract on every example and model
# (models/*.rv, the recursive models): printing a
# parsed program and printing the parse of that text again give the same
# text, print(parse(print(parse(src)))) == print(parse(src)), through
# `ravel print`. Runs from the repository root; BUILD names the build
# directory (default build). The last line is
# "roundtrip: N passed, M failed".
BUILD=${BUILD:-build}
RAVEL="$BUILD/ravel"
passed=0
failed=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for f in examples/*.rv models/*.rv; do
    [ -f "$f" ] || continue
    name=$(basename "$(dirname "$f")")_$(basename "$f" .rv)
    if ! "$RAVEL" print "$f" >"$tmp/$name.1.rv" 2>"$tmp/err"; then
        echo "FAIL $f: ravel print failed"
        sed 's/^/  /' "$tmp/err"
        failed=$((failed + 1))
        continue
    fi
    if ! "$RAVEL" print "$tmp/$name.1.rv" >"$tmp/$name.2.rv" 2>"$tmp/err"; then
        echo "FAIL $f: the printed program does not parse"
        sed 's/^/  /' "$tmp/err"
        failed=$((failed + 1))
        continue
    fi
    if cmp -s "$tmp/$name.1.rv" "$tmp/$name.2.rv"; then
        passed=$((passed + 1))
    else
        echo "FAIL $f: printing is not stable"
        diff "$tmp/$name.1.rv" "$tmp/$name.2.rv" | sed 's/^/  /'
        failed=$((failed + 1))
    fi
done
echo "roundtrip: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
