#!/bin/sh
# suite_cli.sh — the command line's own behaviour (tools/): option values
# are validated alike (a negative or non-numeric --random seed is a usage
# error, exit status 2), and a located diagnostic is printed once, not
# behind a second "error: " prefix. Runs from the repository root; BUILD
# names the build directory. The last line is "cli: N passed, M failed".
BUILD=${BUILD:-build}
RAVEL="$BUILD/ravel"
export RAVEL_CACHE_DIR=${RAVEL_CACHE_DIR:-$(mktemp -d)}
passed=0
failed=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT

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

ex=examples/dense_gelu.rv
for seed in -5 abc '' ' 5' +5 99999999999999999999999; do
    expect_status 2 "--random expects a non-negative integer seed" "$RAVEL" eval $ex --random "$seed"
done
expect_status 0 "Y:" "$RAVEL" eval $ex --random 5
expect_status 1 "is not an integer" "$RAVEL" eval $ex --random 1 --size T=4x

# A schedule error found when `run` compiles: one "error:", at the location.
bad=tests/error/sched_unknown_prim.rv
for cmd in "run --random 1" emit; do
    expect_status 1 "$bad:5:5: error: unknown schedule primitive" "$RAVEL" $cmd $bad
    if grep -q "error: .*error:" "$out"; then
        echo "FAIL $cmd $bad: the diagnostic is prefixed twice"
        sed 's/^/  got: /' "$out"
        failed=$((failed + 1))
    fi
done

# A big program checks in memory proportional to its text, with a small
# factor (it was 87 bytes per source byte, from whole-program token and AST
# arrays; its IR is what remains). Not under the sanitizers, which multiply
# memory; needs GNU time for the peak.
if [ "${SAN:-0}" != 1 ] && [ -x /usr/bin/time ]; then
    big=$(mktemp)
    awk 'BEGIN { print "size N in 1..64"; print "input X : f32[N, 8]"; prev = "X"
        for (i = 0; i < 24000; i++) {
            printf "T%d[i < N, j < 8] = X[i, j] * 2.5 + %s[i, %d] - sum(k < 8) X[i, k] * X[i, j]\n", i, prev, i % 8
            prev = "T" i } }' >"$big"
    bytes=$(wc -c <"$big")
    if /usr/bin/time -f "%M" -o "$out.rss" "$RAVEL" check "$big" >"$out" 2>&1; then
        kb=$(tail -n 1 "$out.rss")
        if [ $((kb * 1024)) -lt $((bytes * 40)) ]; then
            passed=$((passed + 1))
        else
            echo "FAIL check of a $bytes-byte program took $kb KB (over 40 bytes per byte)"
            failed=$((failed + 1))
        fi
    else
        echo "FAIL check of a big program"
        sed 's/^/  got: /' "$out" | head -5
        failed=$((failed + 1))
    fi
    rm -f "$big" "$out.rss"
fi

# `emit` prints the C without compiling it: a compiler that always fails
# (and an empty cache) does not stop it.
expect_status 0 "int32_t kernel_Y(" env RAVEL_CC=false RAVEL_CACHE_DIR="$(mktemp -d)" "$RAVEL" emit $ex
# --target cuda prints the kernels' CUDA C without NVRTC or a GPU; what the
# CUDA back end cannot express (dense_gelu's CPU schedule copies rows of X
# into a buffer too large for a thread) is an error naming the kernel
gpu_rv=$(mktemp --suffix=.rv)
printf '%s\n' 'size N in 1..4096' 'input X : f32[N]' 'Y[i] = 2 * X[i]' 'schedule Y {' \
    '    bo, bt = split(i, 128)' '    bind(bo, "blockIdx.x")' '    bind(bt, "threadIdx.x")' '}' >"$gpu_rv"
expect_status 0 "Launch: grid ((N + 127) / 128, 1, 1), block (128, 1, 1)" "$RAVEL" emit "$gpu_rv" --target cuda
rm -f "$gpu_rv"
expect_status 1 "kernel Y: buffer" "$RAVEL" emit $ex --target cuda
expect_status 2 "unknown target 'ptx' (c, cuda or lower)" "$RAVEL" emit $ex --target ptx

# `ravel help schedules` shows every row of the table of primitives, and
# docs/schedules.md's table of primitives has a line for each.
for prim in $(sed -n 's/^PRIM(\([a-z_]*\),.*/\1/p' src/sched/prims.def); do
    expect_status 0 " $prim(" "$RAVEL" help schedules
    if ! grep -q "^| \`[^|]*\b$prim(" docs/schedules.md; then
        echo "FAIL docs/schedules.md does not describe the primitive $prim"
        failed=$((failed + 1))
    fi
done

# --weights binds the inputs named in a safetensors file (written here byte
# by byte: the 8-byte header length, the JSON, two f32s 1 and 2); --input
# overrides one of them; a missing file, a dtype mismatch and a corrupt
# file are errors naming the file and the input.
wd=$(mktemp -d)
printf 'input W : f32[2]\nY[i] = W[i] * 2.0\n' >"$wd/p.rv"
write_st() { # FILE JSON DATA(printf escapes)
    printf "$(printf '\\%03o' ${#2})\0\0\0\0\0\0\0" >"$1"
    printf '%s' "$2" >>"$1"
    printf "$3" >>"$1"
}
write_st "$wd/w.safetensors" '{"W":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}' '\0\0\200\77\0\0\0\100'
expect_status 0 "Y: f32[2]" "$RAVEL" eval "$wd/p.rv" --weights "$wd/w.safetensors"
expect_status 0 "Y: 2 elements, max abs error 0" "$RAVEL" run "$wd/p.rv" --weights "$wd/w.safetensors" --check
"$RAVEL" eval "$wd/p.rv" --weights "$wd/w.safetensors" --output "$wd/out" >/dev/null 2>&1
if ! od -An -tx1 "$wd/out/Y.npy" | tr -d ' \n' | grep -q '0000004000008040$'; then
    echo "FAIL eval --weights: Y.npy does not hold 2, 4"
    failed=$((failed + 1))
fi
expect_status 1 "error: --weights $wd/nope: cannot open" "$RAVEL" run "$wd/p.rv" --weights "$wd/nope"
write_st "$wd/d.safetensors" '{"W":{"dtype":"I32","shape":[2],"data_offsets":[0,8]}}' '\0\0\0\0\0\0\0\0'
expect_status 1 "input W is declared f32 but the file's tensor is i32" "$RAVEL" eval "$wd/p.rv" --weights "$wd/d.safetensors"
write_st "$wd/c.safetensors" '{"W":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}' '\0\0'
expect_status 1 "tensor 'W': data_offsets [0, 8] run past the end" "$RAVEL" eval "$wd/p.rv" --weights "$wd/c.safetensors"
rm -rf "$wd"

# `ravel run`: --output writes the outputs as .npy, the same bytes eval
# writes for an exact program; --time / --repeat print the compile time and
# the median and min of the timed runs; --threads picks the pool; bad
# values are usage errors (status 2).
rd=$(mktemp -d)
printf 'size T in 1..8\ninput X : f32[16*T, 4]\nY[i < 16*T, j < 4] = X[i, j] * 2.0 + 1.0\n' >"$rd/p.rv"
expect_status 0 "Y: f32[48, 4] -> $rd/run/Y.npy" "$RAVEL" run "$rd/p.rv" --size T=3 --random 7 --output "$rd/run"
expect_status 0 "Y: f32[48, 4] -> $rd/eval/Y.npy" "$RAVEL" eval "$rd/p.rv" --size T=3 --random 7 --output "$rd/eval" --save-inputs
if ! cmp -s "$rd/run/Y.npy" "$rd/eval/Y.npy"; then
    echo "FAIL run --output: Y.npy differs from eval's"
    failed=$((failed + 1))
fi
expect_status 0 "run median" "$RAVEL" run "$rd/p.rv" --random 1 --time
expect_status 0 "(3 runs after 1 warm-up, threads 2)" "$RAVEL" run "$rd/p.rv" --random 1 --repeat 3 --threads 2
if ! grep -q "^time: compile [0-9.]* ms; run median [0-9.]* ms, min [0-9.]* ms" "$out" ||
   ! grep -q "^time: per run (mean) kernels [0-9.]* ms, preludes [0-9.]* ms" "$out"; then
    echo "FAIL run --repeat: no time lines"
    sed 's/^/  got: /' "$out"
    failed=$((failed + 1))
fi
expect_status 0 "Y: 64 elements, max abs error 0" "$RAVEL" run "$rd/p.rv" --random 2 --size T=1 --threads 1 --check
expect_status 2 "--repeat expects a number of runs" "$RAVEL" run "$rd/p.rv" --random 1 --repeat 0
expect_status 2 "--threads expects 0..4096" "$RAVEL" run "$rd/p.rv" --random 1 --threads -1
expect_status 2 "unknown option '--time'" "$RAVEL" eval "$rd/p.rv" --random 1 --time

# Sizes inferred from --input shapes: X.npy of 48 rows sets T = 3 (eval and
# run alike); 50 rows fit no T, 160 rows give T = 10 outside 1..8, and a
# --size that disagrees is named.
expect_status 0 "T = 3" "$RAVEL" run "$rd/p.rv" --input X="$rd/eval/X.npy" --check
expect_status 0 "T = 3" "$RAVEL" eval "$rd/p.rv" --input X="$rd/eval/X.npy"
printf 'size N in 1..200\ninput X : f32[N, 4]\nY[i < N, j < 4] = X[i, j]\n' >"$rd/n.rv"
"$RAVEL" eval "$rd/n.rv" --size N=50 --random 1 --save-inputs --output "$rd/n50" >/dev/null
"$RAVEL" eval "$rd/n.rv" --size N=160 --random 1 --save-inputs --output "$rd/n160" >/dev/null
expect_status 1 "error: input X: dimension 0 has 50 elements, but its extent 16 * T is 50 for no integer T" \
    "$RAVEL" run "$rd/p.rv" --input X="$rd/n50/X.npy"
expect_status 1 "is 160 only for T = 10, outside its declared range 1..8" \
    "$RAVEL" run "$rd/p.rv" --input X="$rd/n160/X.npy"
expect_status 1 "its extent 16 * T is 32: T = 2 was given" \
    "$RAVEL" run "$rd/p.rv" --input X="$rd/eval/X.npy" --size T=2

# "did you mean" for commands, options and the program's names.
expect_status 2 "unknown command 'rnu'; did you mean 'run'?" "$RAVEL" rnu "$rd/p.rv"
expect_status 2 "unknown command 'biuld'; did you mean 'build'?" "$RAVEL" help biuld
expect_status 2 "unknown option '--rpeat'; did you mean '--repeat'?" "$RAVEL" run "$rd/p.rv" --rpeat 3
expect_status 2 "unknown option '--ouput'; did you mean '--output'?" "$RAVEL" eval "$rd/p.rv" --ouput=d
expect_status 1 "no size 't'; did you mean 'T'?" "$RAVEL" run "$rd/p.rv" --size t=2
expect_status 1 "no input or ufun 'x'; did you mean 'X'?" "$RAVEL" eval "$rd/p.rv" --input x="$rd/eval/X.npy"
rm -rf "$rd"

# `ravel bench` without what a benchmark needs says how to get it: drivers
# not built, the baselines' headers missing (make bench-build), PyTorch
# missing for /usr/bin/python3.
expect_status 1 "is not built: run" env RAVEL_BENCH_DIR=/nonexistent "$RAVEL" bench dense
expect_status 2 "the baselines (OpenBLAS, oneDNN) are not installed: run 'sh bench/setup.sh'" \
    make -s bench-check-baselines "BENCH_CC=cc -nostdinc"
if ! /usr/bin/python3 -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("torch") is None)' 2>/dev/null; then
    expect_status 1 "run \`sh bench/setup.sh\` (it installs python3-torch)" "$RAVEL" bench torch
fi
# `ravel bench encoder` runs bench/encoder/run.sh, which checks its options
# before building or running anything
expect_status 2 "usage: run.sh" "$RAVEL" bench encoder --bogus
expect_status 1 "not found: run \`sh bench/encoder/setup.sh\`" \
    env ENCODER_PYTHON=/nonexistent/python "$RAVEL" bench encoder --datasets cola

echo "cli: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
