#!/bin/sh
# suite_tune.sh — `ravel tune` and `ravel build --records` on the command
# line (tools/cmd_tune.c, docs/tuning.md): usage errors, located errors in
# a --shapes file, a program with nothing to tune, and a tiny tuning run
# whose outputs run (OUT.rv checked against the interpreter) and build
# (NAME.c with the tree as NAME_dispatch). Nothing depends on timings.
# Without XGBoost the tuning run is skipped (its error is checked). The
# last line is "tune: N passed, M failed".
BUILD=${BUILD:-build}
RAVEL="$BUILD/ravel"
export RAVEL_CACHE_DIR=${RAVEL_CACHE_DIR:-$(mktemp -d)}
passed=0
failed=0
out=$(mktemp)
wd=$(mktemp -d)
trap 'rm -rf "$out" "$wd"' EXIT

# expect_status STATUS PATTERN COMMAND...: the exit status is STATUS and
# the output (stdout and stderr) contains the fixed string PATTERN.
expect_status() {
    want=$1 pattern=$2
    shift 2
    "$@" >"$out" 2>&1
    rc=$?
    if [ "$rc" -eq "$want" ] && grep -qF -- "$pattern" "$out"; then
        passed=$((passed + 1))
    else
        echo "FAIL $* (exit status $rc, expected $want and '$pattern')"
        sed 's/^/  got: /' "$out"
        failed=$((failed + 1))
    fi
}

cat >"$wd/tiny.rv" <<'EOF'
size M in 1..6
input X : f32[M, 16]
input W : f32[32, 16]
Y[i, j] = sum(k < 16) X[i, k] * W[j, k]
EOF

expect_status 0 "vector width:" "$RAVEL" tune --hw
expect_status 2 "ravel tune: bad option --trials x" "$RAVEL" tune "$wd/tiny.rv" --trials x
expect_status 2 "no .rv file" "$RAVEL" tune --trials 4
expect_status 1 "nothing to tune" "$RAVEL" tune examples/softmax.rv --trials 4
printf '2 5\n# a comment\n\n9\n' >"$wd/shapes.txt"
expect_status 1 "$wd/shapes.txt:4: error: M = 9 is outside its range 1..6" \
    "$RAVEL" tune "$wd/tiny.rv" --shapes "$wd/shapes.txt"
printf '2 5 7\n' >"$wd/bad.txt"
expect_status 1 "$wd/bad.txt:1: error: expected 1 size value(s) and an optional weight" \
    "$RAVEL" tune "$wd/tiny.rv" --shapes "$wd/bad.txt"
expect_status 1 "has no tuning records of this program" \
    "$RAVEL" build "$wd/tiny.rv" --records "$wd/none.jsonl" -o "$wd/none"
expect_status 2 "no --variant or --dispatch with it" \
    "$RAVEL" build "$wd/tiny.rv" --records "$wd/none.jsonl" --variant x -o "$wd/none"

if RAVEL_XGBOOST=/nonexistent/libxgboost.so "$RAVEL" tune "$wd/tiny.rv" >"$out" 2>&1; then
    echo "FAIL ravel tune without XGBoost succeeded"
    failed=$((failed + 1))
elif grep -qF "install the Debian package libxgboost-dev" "$out"; then
    passed=$((passed + 1))
else
    echo "FAIL ravel tune without XGBoost: no message naming the package"
    sed 's/^/  got: /' "$out"
    failed=$((failed + 1))
fi

printf '1\n4 3\n' >"$wd/shapes.txt"
"$RAVEL" tune "$wd/tiny.rv" --trials 4 --verify 0 --batch 2 --threads 1 --shapes "$wd/shapes.txt" \
    --records "$wd/r.jsonl" -o "$wd/t" >"$wd/log" 2>&1
rc=$?
if [ $rc -ne 0 ] && grep -qF "libxgboost-dev" "$wd/log"; then
    echo "skipped the tuning run: XGBoost is not installed"
else
    expect_status 0 "4 measurements (0 from the records)" cat "$wd/log"
    # the tuning layer's errors carry no prefix of their own: the tool adds it once
    printf 'input X : f32[4, 16]\nY[i, j < 8] = sum(k < 16) X[i, k]\n' >"$wd/nosize.rv"
    expect_status 1 "error: ravel tune: the program has 0 size variables" \
        "$RAVEL" tune "$wd/nosize.rv" --trials 4
    expect_status 0 "Y: 64 elements" "$RAVEL" run "$wd/t.rv" --size M=2 --random 1 --check
    expect_status 0 "int t_dispatch(const int64_t *sizes, void *user)" cat "$wd/t_dispatch.c"
    expect_status 0 "4 measurements (4 from the records)" \
        "$RAVEL" tune "$wd/tiny.rv" --trials 4 --verify 0 --threads 1 --shapes "$wd/shapes.txt" \
        --records "$wd/r.jsonl"
    # hostile records (docs/tuning.md "Hostile records"): a corrupt line is
    # an error naming the file and line, for the tuner and the build alike;
    # a torn last line, and lines of this program that fit it no more (a
    # trace that does not parse or is illegal, a shape outside the range
    # or of other sizes), are skipped with a warning naming the file and
    # line; lines of another program or machine are not this run's; none
    # of them, however fast they claim to be, makes a kernel, and what is
    # built from them still matches the interpreter
    n=$(wc -l <"$wd/r.jsonl")
    mkdir -p "$wd/haot"
    line=$(grep '"status":"ok"' "$wd/r.jsonl" | head -n 1)
    fast() { printf '%s\n' "$line" | sed "s/\"seconds\":[^,]*,/\"seconds\":1e-12,/; $1"; }
    retrace() { fast "s/\"trace\":\"\\([^\"\\\\]\\|\\\\.\\)*\"/\"trace\":\"$1\"/"; }
    resume_h() { # the tuner resumed from records file $1
        "$RAVEL" tune "$wd/tiny.rv" --trials 4 --verify 0 --threads 1 --shapes "$wd/shapes.txt" \
            --records "$1"
    }
    { cat "$wd/r.jsonl"; printf '%s' "$line" | head -c 70; } >"$wd/h_torn.jsonl"
    expect_status 0 "h_torn.jsonl:$((n + 1)): skipped a torn last line" \
        "$RAVEL" build "$wd/tiny.rv" --records "$wd/h_torn.jsonl" -o "$wd/h_torn"
    expect_status 0 "h_torn.jsonl:$((n + 1)): skipped a torn last line" resume_h "$wd/h_torn.jsonl"
    expect_status 0 "4 measurements (4 from the records)" resume_h "$wd/h_torn.jsonl"
    for bad in 'NaN' '-1' '1e999' '"fast"'; do
        { head -n 1 "$wd/r.jsonl"; printf '%s\n' "$line" | sed "s/\"seconds\":[^,]*,/\"seconds\":$bad,/"; \
          tail -n +2 "$wd/r.jsonl"; } >"$wd/h_num.jsonl"
        expect_status 1 "h_num.jsonl:2: corrupt tuning record" \
            "$RAVEL" build "$wd/tiny.rv" --records "$wd/h_num.jsonl" -o "$wd/h_num"
        expect_status 1 "h_num.jsonl:2: corrupt tuning record" resume_h "$wd/h_num.jsonl"
    done
    expect_status 1 "$wd/haot: cannot read: Is a directory" \
        "$RAVEL" build "$wd/tiny.rv" --records "$wd/haot" -o "$wd/h_dir"
    { head -n 1 "$wd/r.jsonl"; echo '{"version":1,"program":'; tail -n +2 "$wd/r.jsonl"; } >"$wd/h_json.jsonl"
    expect_status 1 "h_json.jsonl:2: corrupt tuning record: not valid JSON" \
        "$RAVEL" build "$wd/tiny.rv" --records "$wd/h_json.jsonl" -o "$wd/h_json"
    expect_status 1 "h_json.jsonl:2: corrupt tuning record: not valid JSON" resume_h "$wd/h_json.jsonl"
    # lines that claim a time far below any real one, and fit nothing
    { cat "$wd/r.jsonl"
      retrace 'schedule Y {\\n    bogus(((\\n}\\n'          # line n+1: does not parse
      retrace 'schedule Y {\\n    vectorize(zz)\\n}\\n'     # illegal for the program
      fast 's/"shape":{"M":[0-9]*}/"shape":{"M":999999999999999}/'
      fast 's/"shape":{"M":[0-9]*}/"shape":{"Q":2}/'
      fast 's/"program":"[0-9a-f]*"/"program":"0123456789abcdef"/'
      fast 's/"machine":"[^"]*"/"machine":"another machine"/'
      cat "$wd/r.jsonl"                                    # every line twice
    } >"$wd/h_fit.jsonl"
    expect_status 0 "h_fit.jsonl:$((n + 1)): skipped 4 tuning record(s) of this program that fit it no more" \
        "$RAVEL" build "$wd/tiny.rv" --records "$wd/h_fit.jsonl" -o "$wd/haot/model"
    expect_status 0 "its trace is no candidate of this program" resume_h "$wd/h_fit.jsonl"
    expect_status 0 "$((2 * 4)) measurements ($((2 * 4)) from the records)" resume_h "$wd/h_fit.jsonl"
    expect_status 0 "built" sh -c "${CC:-cc} -std=c11 -O1 -march=native -fopenmp-simd \
        -I'$wd/haot' -o '$wd/haot/driver' tests/e2e/aot_driver.c '$wd/haot/model.c' -lm && echo built"
    for M in 1 4 6; do
        rm -rf "$wd/haot/ref" "$wd/haot/out" && mkdir -p "$wd/haot/ref" "$wd/haot/out"
        "$RAVEL" eval "$wd/tiny.rv" --random "$M" --size M=$M --save-inputs \
            --output "$wd/haot/ref" >/dev/null 2>&1
        expect_status 0 "" "$wd/haot/driver" "$wd/haot/ref" "$wd/haot/out" M=$M
    done
    # records are per thread count: those of 1 thread are not 3 threads'
    cp "$wd/r.jsonl" "$wd/r3.jsonl"
    expect_status 0 "4 measurements (0 from the records)" \
        "$RAVEL" tune "$wd/tiny.rv" --trials 4 --verify 0 --threads 3 --shapes "$wd/shapes.txt" \
        --records "$wd/r3.jsonl"
    expect_status 1 "at 3 thread(s)" \
        "$RAVEL" build "$wd/tiny.rv" --records "$wd/r.jsonl" --threads 3 -o "$wd/b3"
    expect_status 0 "wrote" "$RAVEL" build "$wd/tiny.rv" --records "$wd/r.jsonl" -o "$wd/b"
    expect_status 0 "" ${CC:-cc} -std=c11 -c "$wd/b.c" -o "$wd/b.o"
    # a specialized leaf (docs/tuning.md): a record of a candidate compiled
    # for M = 4 alone, far faster than any there, so the build has a leaf
    # at M = 4 whatever the timings: NAME.c compiles it for M = 4 (its
    # guard and the exact test ahead of the tree), and the library matches
    # the interpreter at every M, the leaf's and the others'
    line=$(grep '"shape":{"M":4}' "$wd/r.jsonl" | grep '"status":"ok"' | head -n 1)
    printf '%s\n' "$line" | sed 's/"seconds":[^,]*,/"seconds":1e-12,/; s/}$/,"spec":true}/' \
        >>"$wd/r.jsonl"
    mkdir -p "$wd/aot"
    expect_status 0 "wrote" "$RAVEL" build "$wd/tiny.rv" --records "$wd/r.jsonl" -o "$wd/aot/model"
    expect_status 0 "compiled for M = 4" cat "$wd/aot/model.c"
    expect_status 0 "if (sizes[0] == 4LL)" cat "$wd/aot/model.c"
    expect_status 0 "built" sh -c "${CC:-cc} -std=c11 -O1 -march=native -fopenmp-simd \
        -I'$wd/aot' -o '$wd/aot/driver' tests/e2e/aot_driver.c '$wd/aot/model.c' -lm && echo built"
    for M in 1 2 3 4 5 6; do
        rm -rf "$wd/aot/ref" "$wd/aot/out" && mkdir -p "$wd/aot/ref" "$wd/aot/out"
        "$RAVEL" eval "$wd/tiny.rv" --random "$M" --size M=$M --save-inputs \
            --output "$wd/aot/ref" >/dev/null 2>&1
        expect_status 0 "" "$wd/aot/driver" "$wd/aot/ref" "$wd/aot/out" M=$M
    done
    # the written variants and dispatch, as OUT.rv's comment says to build them
    set -- "$wd"/t.v*.sched
    if [ $# -gt 1 ]; then
        vs=""
        for f in "$@"; do vs="$vs --variant $f"; done
        expect_status 0 "wrote" "$RAVEL" build "$wd/t.rv" -o "$wd/t" $vs --dispatch extern
        expect_status 0 "" ${CC:-cc} -std=c11 -shared -fPIC -Wl,--no-undefined -o "$wd/libt.so" \
            "$wd/t.c" "$wd/t_dispatch.c" -lm
    fi

    # ragged rows (packed tokens): tuned and dispatched on the sum of len;
    # OUT.rv runs, the build reads the sum, a resumed run measures nothing
    cat >"$wd/ragged.rv" <<'EOF'
size B in 1..3
ufun len[b < B] in 0..4
input X : f32[b < B, l < len[b], k < 8]
input W : f32[j < 16, k < 8]
Y[b, l < len[b], j < 16] = sum(k < 8) X[b, l, k] * W[j, k]
EOF
    "$RAVEL" tune "$wd/ragged.rv" --trials 6 --verify 0 --batch 3 --threads 1 --records "$wd/rr.jsonl" \
        -o "$wd/rt" >"$wd/rlog" 2>&1
    expect_status 0 "6 measurements (0 from the records), 0 wrong" cat "$wd/rlog"
    expect_status 0 "B=1,sum(len)=0: variant" cat "$wd/rlog"
    expect_status 0 "fuse(b, l)" cat "$wd/rt.rv"
    for s in 1 2 3; do
        expect_status 0 "Y: " "$RAVEL" run "$wd/rt.rv" --random $s --check
    done
    expect_status 0 "6 measurements (6 from the records)" \
        "$RAVEL" tune "$wd/ragged.rv" --trials 6 --verify 0 --threads 1 --records "$wd/rr.jsonl"
    expect_status 0 "wrote" "$RAVEL" build "$wd/ragged.rv" --records "$wd/rr.jsonl" -o "$wd/rb"
    if grep -q 'rb_tree_dispatch' "$wd/rb.c"; then
        expect_status 0 "+= (int64_t)len[rv_i];" cat "$wd/rb.c"
    fi
    expect_status 0 "" ${CC:-cc} -std=c11 -c "$wd/rb.c" -o "$wd/rb.o"
    # --shapes for packed rows: their sum in B's place, in the sum's range
    printf '7\n12 3\n' >"$wd/rshapes.txt"
    expect_status 0 "sum(len)=12: variant" \
        "$RAVEL" tune "$wd/ragged.rv" --trials 2 --batch 2 --threads 1 --shapes "$wd/rshapes.txt" \
        --shapes-only
    # packed rows with an epilogue: every candidate accumulates in Y with k
    # outside the tile, so none is legal; refused, located, saying why
    printf 'size B in 1..3\nufun len[b < B] in 0..4\ninput X : f32[b < B, l < len[b], 8]\ninput W : f32[j < 16, 8]\ninput bias : f32[16]\nY[b, l < len[b], j < 16] = sum(k < 8) X[b, l, k] * W[j, k] + bias[j]\n' >"$wd/repi.rv"
    expect_status 1 "$wd/repi.rv:6:1: error: ravel tune: Y: ragged rows are tuned without an epilogue" \
        "$RAVEL" tune "$wd/repi.rv" --trials 2
    printf '13\n' >"$wd/rbad.txt"
    expect_status 1 "$wd/rbad.txt:1: error: sum(len) = 13 is outside its range 0..12" \
        "$RAVEL" tune "$wd/ragged.rv" --shapes "$wd/rbad.txt"
    # what is not tunable is said, located: a recursion's member without
    # dynamic_batch() (its node loop is one node at a time), a ragged
    # extent other than packed rows
    expect_status 1 "examples/tree_lstm.rv:29:9: error: ravel tune: recursion R: its member iou is tuned level by level" \
        "$RAVEL" tune examples/tree_lstm.rv --trials 2
    printf 'size B in 1..3\nufun len[b < B] in 0..4\ninput X : f32[b < B, i < 4, k < 8]\ninput W : f32[b < B, j < len[b], k < 8]\nY[b, i < 4, j < len[b]] = sum(k < 8) X[b, i, k] * W[b, j, k]\n' >"$wd/rj.rv"
    expect_status 1 "$wd/rj.rv:5:1: error: ravel tune: Y: ragged rows are tuned in the form" \
        "$RAVEL" tune "$wd/rj.rv" --trials 2

    # a candidate that crashes or hangs (the RAVEL_TUNE_FAULT hook: the
    # second candidate measured aborts, or the first hangs) costs that
    # candidate, recorded failed, not the run; the others are measured
    # (--specialize 0: the records hold the 6 trials alone)
    RAVEL_TUNE_FAULT=abort:1 "$RAVEL" tune "$wd/tiny.rv" --trials 6 --verify 0 --batch 3 --threads 1 \
        --specialize 0 --records "$wd/crash.jsonl" >"$wd/crash.log" 2>&1
    expect_status 0 "6 measurements (0 from the records), 0 wrong and 1 failed" cat "$wd/crash.log"
    expect_status 0 "killed by signal 6" cat "$wd/crash.log"
    expect_status 0 '"status":"failed"' cat "$wd/crash.jsonl"
    expect_status 0 "6" sh -c "wc -l <'$wd/crash.jsonl'"
    RAVEL_TUNE_FAULT=hang:0 "$RAVEL" tune "$wd/tiny.rv" --trials 4 --batch 2 --threads 1 \
        --timeout 1 >"$wd/hang.log" 2>&1
    expect_status 0 "0 wrong and 1 failed" cat "$wd/hang.log"
    expect_status 0 "gave no result in 1 s and was killed" cat "$wd/hang.log"

    # the dispatcher verified by measurement (the default --verify: half
    # the trials, past them), said so; a resumed run measures nothing
    "$RAVEL" tune "$wd/tiny.rv" --trials 4 --batch 2 --threads 1 --specialize 0 \
        --records "$wd/v.jsonl" >"$wd/v.log" 2>&1
    expect_status 0 "verified the dispatcher: 2 measurements" cat "$wd/v.log"
    expect_status 0 "6 measurements (6 from the records)" \
        "$RAVEL" tune "$wd/tiny.rv" --trials 4 --batch 2 --threads 1 --specialize 0 \
        --records "$wd/v.jsonl"

    # --plot: the tuning curve as PNG with gnuplot, or a message naming it
    if command -v gnuplot >/dev/null 2>&1; then
        expect_status 0 "wrote $wd/curve.png" \
            "$RAVEL" tune "$wd/tiny.rv" --trials 4 --batch 2 --quiet --plot "$wd/curve.png"
        expect_status 0 "PNG" head -c 4 "$wd/curve.png"
    else
        expect_status 1 "--plot needs gnuplot" \
            "$RAVEL" tune "$wd/tiny.rv" --trials 4 --plot "$wd/curve.png"
    fi
fi

echo "tune: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
