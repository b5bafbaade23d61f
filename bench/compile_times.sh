#!/bin/sh
# bench/compile_times.sh — cold JIT compile time of every program in
# examples/ and bench/programs/ (or the files given), one JSON line each:
#
#     {"bench": "compile", "file": "examples/dense_gelu.rv", "wall_s": 1.21,
#      "cpu_s": 1.18, "kernels": 1}
#
# Each program is compiled once with a fresh RAVEL_CACHE_DIR, so nothing
# comes from the cache, by `ravel run FILE --random 1` (compile, then one
# run on random inputs: negligible next to the compile). cpu_s is the
# user + system time of the process and its children, the C compiler
# included: on a loaded machine it moves far less than wall_s, so compare
# cpu_s. `kernels` counts the kernel functions in the generated C. The
# issue-12 goal is every program under 5 s.
#
#     sh bench/compile_times.sh [FILE.rv...]      (BUILD=build by default)
BUILD=${BUILD:-build}
RAVEL="$BUILD/ravel"
[ -x "$RAVEL" ] || { echo "compile_times: $RAVEL is missing: run make first" >&2; exit 1; }
[ $# -gt 0 ] || set -- examples/*.rv bench/programs/*.rv
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
for f in "$@"; do
    cache="$tmp/cache"
    rm -rf "$cache"
    mkdir -p "$cache"
    if ! RAVEL_CACHE_DIR="$cache" /usr/bin/time -f '%e %U %S' -o "$tmp/time" \
        "$RAVEL" run "$f" --random 1 >"$tmp/out" 2>&1; then
        echo "compile_times: $f failed:" >&2
        cat "$tmp/out" >&2
        status=1
        continue
    fi
    kernels=$("$RAVEL" emit "$f" 2>/dev/null | grep -c '^int32_t kernel_' || true)
    awk -v f="$f" -v k="$kernels" '{ printf "{\"bench\": \"compile\", \"file\": \"%s\", \"wall_s\": %.2f, \"cpu_s\": %.2f, \"kernels\": %d}\n", f, $1, $2 + $3, k }' "$tmp/time"
done
exit $status
