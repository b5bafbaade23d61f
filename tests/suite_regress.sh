#!/bin/sh
# suite_regress.sh — regression programs found by random testing and by
# held-out test runs (tests/regress/*.rv). The first line of each says what
# must happen:
#
#     # expect: ok                 compiled output matches the interpreter:
#                                  `ravel run --random S --check` for S = 1..6,
#                                  and for S = 1 with the arguments of each
#                                  `# sizes: ...` line (e.g. --size N=0): the
#                                  edges a random draw may miss
#     # expect: LINE:COL: MESSAGE  `ravel check` rejects it there (as
#                                  tests/suite_errors.sh)
#     # expect: run-error: MESSAGE `ravel run --random S` (S = 1..6, plus the
#                                  arguments of a `# args: ...` line, e.g.
#                                  --size K=0 --input idx=FILE.npy) exits 1
#                                  reporting MESSAGE: a run the compiled code
#                                  or the host refuses, never a crash
#
# Every run has a time limit, so a hang is a failure, not a stuck suite; a
# crash (any exit status but 0 for ok cases) is a failure too. Prints
# "regress: N passed, N failed".
BUILD=${BUILD:-build}
RAVEL="$BUILD/ravel"
LIMIT=${REGRESS_TIME_LIMIT:-120}
export RAVEL_CACHE_DIR=${RAVEL_CACHE_DIR:-$(mktemp -d)}
# Under SAN=1 (or with BUILD=build-asan) the JIT compiles the kernels with
# the sanitizers too, so a read out of bounds in generated code is
# reported, not only one in ravel itself.
case "${SAN:-0}:$BUILD" in
1:* | *:build-asan)
    export RAVEL_CC=${RAVEL_CC:-"${CC:-cc} -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"}
    ;;
esac
log=$(mktemp)
passed=0
failed=0
# Runs `ravel run F --random S ARGS...` for S = 1..6: each must exit with
# status WANT and print MSG (when not empty).
run_seeds() {
    f=$1 want=$2 msg=$3
    shift 3
    for seed in 1 2 3 4 5 6; do
        timeout "$LIMIT" "$RAVEL" run "$f" --random $seed "$@" >"$log" 2>&1
        rc=$?
        if [ "$rc" -eq "$want" ] && { [ -z "$msg" ] || grep -qF -- "$msg" "$log"; }; then
            passed=$((passed + 1))
        else
            echo "FAIL $f: run --random $seed $* (exit status $rc, expected $want)"
            [ -n "$msg" ] && echo "  expected: $msg"
            sed 's/^/  got: /' "$log"
            failed=$((failed + 1))
        fi
    done
}

# Runs `ravel run F --random 1 --check ARGS...`, which must pass.
run_one() {
    f=$1
    shift
    timeout "$LIMIT" "$RAVEL" run "$f" --random 1 --check "$@" >"$log" 2>&1
    rc=$?
    if [ "$rc" -eq 0 ]; then
        passed=$((passed + 1))
    else
        echo "FAIL $f: run --random 1 --check $* (exit status $rc)"
        sed 's/^/  got: /' "$log"
        failed=$((failed + 1))
    fi
}

for f in tests/regress/*.rv; do
    [ -f "$f" ] || continue
    expect=$(head -n 1 "$f" | sed -n 's/^# expect: //p')
    case "$expect" in
    ok)
        run_seeds "$f" 0 "" --check
        old_ifs=$IFS
        IFS='
'
        for sizes in $(sed -n 's/^# sizes: //p' "$f"); do
            IFS=$old_ifs
            # shellcheck disable=SC2086
            run_one "$f" $sizes
        done
        IFS=$old_ifs
        continue
        ;;
    run-error:*)
        # shellcheck disable=SC2046
        run_seeds "$f" 1 "${expect#run-error: }" $(sed -n 's/^# args: //p' "$f")
        continue
        ;;
    esac
    loc=${expect%%: *}
    msg=${expect#*: }
    if [ -z "$expect" ] || [ "$loc" = "$expect" ]; then
        echo "FAIL $f: first line must be '# expect: ok', '# expect: LINE:COL: MESSAGE' or '# expect: run-error: MESSAGE'"
        failed=$((failed + 1))
        continue
    fi
    timeout "$LIMIT" "$RAVEL" check "$f" >"$log" 2>&1
    rc=$?
    if [ "$rc" -eq 1 ] && grep -qF -- "$f:$loc: error: " "$log" && grep -qF -- "$msg" "$log"; then
        passed=$((passed + 1))
    else
        echo "FAIL $f (exit status $rc)"
        echo "  expected: $f:$loc: error: ...$msg..."
        sed 's/^/  got: /' "$log"
        failed=$((failed + 1))
    fi
done
rm -f "$log"
echo "regress: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
