#!/bin/sh
# suite_fuzz_tune.sh — the tuner fuzzer: random programs (tests/fuzz_gen.c,
# through `fuzz_programs --print`) through `ravel tune` and its records
# (docs/tuning.md "Fuzzing the tuner"). Each program is tuned with a tiny
# budget; then
#   1. the tuner either tuned it (exit 0) or refused it with a clear
#      message (exit 1, `error:` naming the file or `ravel tune`): a crash,
#      a hang (FUZZ_TUNE_TIMEOUT s) or a silent failure is a failure;
#   2. every variant it wrote (OUT.vN.sched under the program's
#      definitions) matches the interpreter (`ravel run --check`) at the
#      ends of every size range, at 0 and 1 where the range allows, at a
#      prime inside it and at random sizes;
#   3. a resumed run with the same budget measures nothing (the records
#      file keeps its length) and reads the file back without a warning;
#   4. `ravel build --records` builds the dispatcher and its leaves, and
#      the library (tests/e2e/aot_driver.c) matches the interpreter at the
#      same sizes: the dispatcher covers the range, and a leaf it picks is
#      right there (specialized leaves included).
# A make-test run is short (a few programs per feature set, below, about
# 25 s); `make fuzz-tune` runs the long one. Knobs: FUZZ_TUNE_SEED (1701),
# FUZZ_TUNE_COUNT (programs per set, 3), FUZZ_TUNE_FEATURES (feature sets
# separated by spaces, each as fuzz_programs --features takes it or
# "contract", the script's own contractions, optionally with ":COUNT"),
# FUZZ_TUNE_KEEP (a directory: each failing program's files stay there),
# FUZZ_TUNE_VERBOSE=1 (print each rejection's message).
# Prints one line per failure with the replay command, a summary per
# feature set (tuned/rejected/failed), and "fuzz_tune: N passed, M failed"
# (tuned and located rejections pass).
BUILD=${BUILD:-build}
RAVEL="$BUILD/ravel"
GEN="$BUILD/fuzz_programs"
CC=${CC:-cc}
SEED=${FUZZ_TUNE_SEED:-1701}
COUNT=${FUZZ_TUNE_COUNT:-3}
FEATURES=${FUZZ_TUNE_FEATURES:-"contract:6 pack:6 recurse,pack,sched"}
TIMEOUT=${FUZZ_TUNE_TIMEOUT:-120}
KEEP=${FUZZ_TUNE_KEEP:-}
VERBOSE=${FUZZ_TUNE_VERBOSE:-}
export RAVEL_CACHE_DIR=${RAVEL_CACHE_DIR:-$(mktemp -d)}
passed=0
failed=0
wd=$(mktemp -d)
trap 'rm -rf "$wd"' EXIT

if [ ! -x "$GEN" ] || [ ! -x "$RAVEL" ]; then
    echo "$GEN or $RAVEL is missing (make $GEN)"
    echo "fuzz_tune: 0 passed, 1 failed"
    exit 1
fi
printf 'size M in 1..2\ninput X : f32[M, 4]\nY[i, j < 4] = sum(k < 4) X[i, k] * X[j, k]\n' >"$wd/probe.rv"
if "$RAVEL" tune "$wd/probe.rv" --trials 1 --quiet 2>&1 | grep -qF "libxgboost-dev"; then
    echo "skipped: XGBoost is not installed (the tuner's cost model needs it)"
    echo "fuzz_tune: 0 passed, 0 failed"
    exit 0
fi

# contract_program SEED INDEX: a random contraction for the "contract"
# feature set (fuzz_gen.c draws products only 3 programs in 10): dense NT
# or NN, batch_matmul, packed ragged rows or a recursion's member (a
# reduced TreeLSTM with dynamic_batch()), f32 or now and then f64 or i32,
# with or without an epilogue
# (bias, gelu, tanh), a producer stage before it, a consumer after it and
# a schedule of the program's own; size ranges from 0..0 and 0..5 to
# 1..1000000 (small columns and k there), a symbolic k or a constant one,
# and now and then no size at all (which must be refused, located).
contract_program() {
    awk -v seed="$1" -v idx="$2" 'function r(n) { return int(rand() * n) }
    # a reduced TreeLSTM: its per-level product iou is the tuned member
    function tree_lstm(   h) {
        h = 1 + r(6)
        print "size N in 1.." 8 * (1 + r(12))
        print "size B in 1.." (1 + r(8))
        print "structure T : tree(N, " (2 + r(2)) ") {\n    children child, nchild"
        print "    roots root[s < B]\n    data word in 0..9\n}"
        print "input Emb : f32[10, " h "]\ninput U : f32[" 3 * h ", " h "]"
        print "X[n, g < " 3 * h "] = Emb[word[n], g % " h "]"
        print "recurse R over T {"
        print "    hs[n, i < " h "] = sum(k < nchild[n]) h[child[n, k], i]"
        print "    iou[n, g < " 3 * h "] = X[n, g] + sum(j < " h ") U[g, j] * hs[n, j]"
        print "    c[n, i < " h "] = sigmoid(iou[n, i]) * tanh(iou[n, " 2 * h " + i])" \
              " + sum(k < nchild[n]) c[child[n, k], i]"
        print "    h[n, i < " h "] = sigmoid(iou[n, " h " + i]) * tanh(c[n, i])\n}"
        print "Out[s, i] = h[root[s], i]"
        print "schedule R {\n    dynamic_batch()\n}"
    }
    BEGIN {
        srand(seed * 1000 + idx)
        split("0..0 0..5 1..1 1..7 2..40 1..130 0..300 1..1000000", ranges, " ")
        split("1 3 8 16 17 33", cols, " ")
        split("1 4 16 31", ks, " ")
        kind = r(5)            # 0 dense NT, 1 dense NN, 2 bmm NT, 3 ragged rows, 4 recursion
        if (kind == 4) { tree_lstm(); exit }
        dt = r(6) == 0 ? "f64" : r(6) == 0 ? "i32" : "f32"
        rg = ranges[1 + r(8)]
        big = rg == "1..1000000"
        n = big ? 1 + r(8) : cols[1 + r(6)]
        kext = big ? 1 + r(4) : ks[1 + r(4)]
        symk = !big && r(3) == 0
        nosize = r(12) == 0
        rows = r(4) == 0 && !big ? "2 * T" : "T"
        if (kind == 3) {
            print "size B in " (r(2) ? "0" : "1") ".." (1 + r(4))
            print "ufun len[b < B] in " r(2) ".." (2 + r(6))
        } else if (nosize)
            rows = 1 + r(9)
        else
            print "size T in " rg
        if (symk) { print "size K in " r(2) ".." (2 + r(5)); kext = "K" }
        if (kind == 2) print "size H in 1.." (1 + r(3))
        if (kind == 3) {
            print "input X : " dt "[b < B, l < len[b], " kext "]"
            print "input W : " dt "[" n ", " kext "]"
        } else if (kind == 2) {
            print "input X : " dt "[H, " rows ", " kext "]"
            print "input W : " dt "[H, " n ", " kext "]"
        } else {
            print "input X : " dt "[" rows ", " kext "]"
            print "input W : " dt "[" (kind == 1 ? kext ", " n : n ", " kext) "]"
        }
        e = dt == "i32" ? r(2) : r(4) # epilogue: 0 none, 1 bias, 2 gelu(. + bias), 3 tanh
        if (kind == 3 && r(2)) e = 0 # (packed rows refuse an epilogue: tune the rest)
        if (e == 1 || e == 2) print "input bias : " dt "[" n "]"
        pre = r(3) == 0 && dt != "i32"
        if (pre && kind == 0) {
            print "X2[i, k] = X[i, k] * 0.5 + 0.25"
            xs = "X2"
        } else
            xs = "X"
        if (kind == 0) { lhs = "Y[i, j]"; body = "sum(k < " kext ") " xs "[i, k] * W[j, k]" }
        if (kind == 1) { lhs = "Y[i, j]"; body = "sum(k < " kext ") X[i, k] * W[k, j]" }
        if (kind == 2) { lhs = "Y[h, i, j]"; body = "sum(k < " kext ") X[h, i, k] * W[h, j, k]" }
        if (kind == 3) { lhs = "Y[b, l < len[b], j < " n "]"; body = "sum(k < " kext ") X[b, l, k] * W[j, k]" }
        if (e == 1) body = body " + bias[j]"
        if (e == 2) body = "gelu(" body " + bias[j])"
        if (e == 3) body = "tanh(" body ")"
        print lhs " = " body
        if (r(3) == 0 && kind == 0) print "Z[i, j] = Y[i, j] * 2 - 1"
        if (pre && kind == 0 && r(2)) print "schedule X2 {\n    parallel(i)\n}"
        else if (r(4) == 0 && kind <= 1) print "schedule Y {\n    parallel(i)\n}"
    }'
}

# The size assignments of program $1, one per line as "D N=V M=W" (D the
# data's seed for --random): each range's low and high end, 0 and 1 where
# allowed, a prime inside, a random point (seeded by $2). Sizes are drawn
# independently per line; a program with a structure gets six random
# draws of its own instead (its sizes bind each other: B roots of N nodes).
assignments() {
    if grep -q '^structure' "$1"; then
        for k in 1 2 3 4 5 6; do echo "$(($2 * 6 + k))"; done
        return
    fi
    awk -v seed="$2" 'BEGIN { n = 0 }
    /^size [A-Za-z_][A-Za-z0-9_]* in -?[0-9]+\.\.-?[0-9]+/ {
        split($4, r, "\\.\\.")
        names[n] = $2; lo[n] = r[1] + 0; hi[n] = r[2] + 0; n++
    }
    function prime_in(a, b,   p, d, ok) {
        for (p = int((a + b) / 2); p <= b; p++) {
            if (p < 2) continue
            ok = 1
            for (d = 2; d * d <= p; d++) if (p % d == 0) { ok = 0; break }
            if (ok) return p
        }
        return b
    }
    function pick(i, k) {
        if (k == 0) return lo[i]
        if (k == 1) return hi[i]
        if (k == 2) return (lo[i] <= 1 && hi[i] >= 1) ? 1 : lo[i]
        if (k == 3) return prime_in(lo[i], hi[i])
        return lo[i] + int(rand() * (hi[i] - lo[i] + 1))
    }
    END {
        srand(seed)
        if (n == 0) { print seed + 1; exit }
        for (k = 0; k < 6; k++) {
            line = ""
            for (i = 0; i < n; i++) line = line " " names[i] "=" pick(i, (k + i) % 6)
            print (seed + 1) line
        }
    }' "$1" | sort -u
}

# check_program DIR FEATURES INDEX: 0 tuned and right, 2 rejected with a
# message, 1 failed (the reason on stdout).
check_program() {
    d=$1 feats=$2 idx=$3
    p="$d/p.rv"
    if [ "$feats" = contract ]; then
        contract_program "$SEED" "$idx" >"$p"
    else
        "$GEN" --seed "$SEED" --index "$idx" --count 1 --features "$feats" --print | sed 1d >"$p"
    fi
    tune="$RAVEL tune $p --trials 4 --batch 2 --threads 1 --verify 2 --specialize 2 --timeout 20 --records $d/r.jsonl"
    timeout "$TIMEOUT" $tune -o "$d/t" >"$d/tune.log" 2>&1
    rc=$?
    if [ $rc -eq 1 ]; then
        if grep -qE "(^|: )error: " "$d/tune.log" && ! grep -qiE "internal|assert|bug" "$d/tune.log"; then
            grep -E "error: " "$d/tune.log" | head -n 1 | sed 's/^/    rejected: /' >"$d/why"
            [ -s "$d/r.jsonl" ] && ! "$RAVEL" build "$p" --records "$d/r.jsonl" -o "$d/rej" \
                >/dev/null 2>"$d/rej.log" && ! grep -q "error: " "$d/rej.log" &&
                { echo "records of a refused program do not build and say nothing"; return 1; }
            return 2
        fi
        echo "ravel tune failed without a clear error: $(tail -n 1 "$d/tune.log")"
        return 1
    fi
    if [ $rc -ne 0 ]; then
        echo "ravel tune exited with status $rc (124: hang, >128: signal): $(tail -n 1 "$d/tune.log")"
        return 1
    fi
    grep -q "^tuned .* 0 wrong" "$d/tune.log" || {
        echo "the tuner measured a wrong candidate: $(grep '^tuned' "$d/tune.log")"
        return 1
    }
    assignments "$p" "$idx" >"$d/sizes"
    [ -s "$d/sizes" ] || { echo "no size assignments drawn"; return 1; }
    # every variant against the interpreter
    for v in "$d"/t.v*.sched; do
        [ -f "$v" ] || { echo "no variant written"; return 1; }
        # OUT.rv's definitions (up to variant 0's blocks), then the
        # variant's whole trace (the program's own blocks among them)
        awk '/^schedule /{exit} {print}' "$d/t.rv" | cat - "$v" >"$d/v.rv"
        while read -r rs sz; do
            args=""
            for a in $sz; do args="$args --size $a"; done
            if ! timeout "$TIMEOUT" "$RAVEL" run "$d/v.rv" --random "$rs" $args --check \
                >"$d/run.log" 2>&1; then
                echo "variant $(basename "$v") at $sz: $(grep -m1 -iE 'error|mismatch|differ' "$d/run.log" || tail -n 1 "$d/run.log")"
                return 1
            fi
        done <"$d/sizes"
    done
    # a resumed run measures nothing and reads its records without a warning
    n1=$(wc -l <"$d/r.jsonl")
    timeout "$TIMEOUT" $tune >"$d/resume.log" 2>&1 || {
        echo "resumed ravel tune failed: $(tail -n 1 "$d/resume.log")"
        return 1
    }
    n2=$(wc -l <"$d/r.jsonl")
    [ "$n1" -eq "$n2" ] || { echo "a resumed run measured $((n2 - n1)) more"; return 1; }
    if grep -q "skipped\|warning" "$d/resume.log"; then
        echo "a resumed run warned: $(grep -m1 'skipped\|warning' "$d/resume.log")"
        return 1
    fi
    # the records built as a library, run through its dispatcher
    mkdir -p "$d/aot"
    timeout "$TIMEOUT" "$RAVEL" build "$p" --records "$d/r.jsonl" -o "$d/aot/model" >"$d/build.log" 2>&1 || {
        echo "ravel build --records failed: $(tail -n 1 "$d/build.log")"
        return 1
    }
    $CC -std=c11 -O1 -march=native -fopenmp-simd -I"$d/aot" -o "$d/aot/driver" \
        tests/e2e/aot_driver.c "$d/aot/model.c" -lm >"$d/cc.log" 2>&1 || {
        echo "the built library does not compile: $(head -n 1 "$d/cc.log")"
        return 1
    }
    while read -r rs sz; do
        args=""
        for a in $sz; do args="$args --size $a"; done
        rm -rf "$d/ref" "$d/out" && mkdir -p "$d/ref" "$d/out"
        timeout "$TIMEOUT" "$RAVEL" eval "$p" --random "$rs" $args --save-inputs --output "$d/ref" \
            >"$d/eval.txt" 2>&1 || continue # the interpreter refused (checked above with run)
        sizes=$(sed -n 's/^\([A-Za-z_][A-Za-z0-9_]*\) = \(-\{0,1\}[0-9][0-9]*\)$/\1=\2/p' "$d/eval.txt")
        timeout "$TIMEOUT" "$d/aot/driver" "$d/ref" "$d/out" $sizes >"$d/drv.log" 2>&1 || {
            echo "the built library at $sz: $(grep -m1 -iE 'mismatch|error|differ' "$d/drv.log" || tail -n 1 "$d/drv.log")"
            return 1
        }
    done <"$d/sizes"
    return 0
}

for set in $FEATURES; do
    feats=${set%%:*} n=$COUNT
    [ "$feats" = "$set" ] || n=${set#*:}
    t=0 r=0 f=0
    i=0
    while [ $i -lt "$n" ]; do
        d="$wd/$feats.$i"
        mkdir -p "$d"
        why=$(check_program "$d" "$feats" "$i")
        case $? in
        0) t=$((t + 1)) ;;
        2)
            r=$((r + 1))
            [ -n "$VERBOSE" ] && echo "seed $SEED #$i features $feats: $(cat "$d/why")"
            ;;
        *)
            f=$((f + 1))
            echo "FAIL seed $SEED #$i features $feats: $why"
            if [ "$feats" = contract ]; then
                echo "  replay: the program is contract_program $SEED $i in $0 (FUZZ_TUNE_KEEP keeps it) &&"
            else
                echo "  replay: $GEN --seed $SEED --index $i --count 1 --features $feats --print | sed 1d >p.rv &&"
            fi
            echo "          $RAVEL tune p.rv --trials 4 --batch 2 --threads 1 --verify 2 --specialize 2 --records r.jsonl -o t"
            if [ -n "$KEEP" ]; then
                mkdir -p "$KEEP" && cp -r "$d" "$KEEP/$SEED.$feats.$i"
            fi
            ;;
        esac
        i=$((i + 1))
    done
    echo "features $feats: $t tuned, $r rejected, $f failed"
    passed=$((passed + t + r))
    failed=$((failed + f))
done
echo "fuzz_tune: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
