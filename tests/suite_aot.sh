#!/bin/sh
# Ahead-of-time builds: every example is built with `ravel build`, compiled
# with the system C compiler (-Wall -Wextra -Wpedantic -Werror, and with
# clang too where it is installed) against tests/e2e/aot_driver.c (no ravel
# library), run on the inputs `ravel eval --random` drew, and its outputs
# compared with the interpreter's — once with aligned arrays and the default
# context, once with misaligned arrays and a context of the driver's own.
# Then: --shared, a bad output path, an unknown target and a failing
# compiler. Under SAN=1 the generated code is compiled with the sanitizers.
BUILD=${BUILD:-build}
RAVEL=$BUILD/ravel
CC=${CC:-cc}
if [ "${SAN:-0}" = 1 ]; then
    CFLAGS="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
else
    CFLAGS="-O1"
fi
# the JIT's target flags (NAME.h recommends them): vector code assumes the host ISA
CFLAGS="$CFLAGS -march=native -fopenmp-simd"
export RAVEL_CACHE_DIR=${RAVEL_CACHE_DIR:-$(mktemp -d)}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
log=$tmp/log
passed=0
failed=0
pass() { passed=$((passed + 1)); }
fail() { echo "FAIL $1"; cat "$log"; failed=$((failed + 1)); }

# build + compile + eval + two runs for one example; all output to $log
aot_example() {
    f=$1 d=$2
    mkdir -p "$d/ref" "$d/out" || return 1
    "$RAVEL" build "$f" -o "$d/model" || return 1
    # shellcheck disable=SC2086
    # the generated C compiles without a warning, with -Werror as users may
    $CC -std=c11 $CFLAGS -Wall -Wextra -Wpedantic -Werror -I"$d" -o "$d/driver" \
        tests/e2e/aot_driver.c "$d/model.c" -lm || return 1
    # and under clang, whose -Wall says more of unused static functions
    if command -v clang >/dev/null 2>&1; then
        clang -std=c11 -O1 -Wall -Wextra -Wpedantic -Werror -I"$d" -c -o "$d/model.o" \
            "$d/model.c" || return 1
    fi
    "$RAVEL" eval "$f" --random 1 --save-inputs --output "$d/ref" >"$d/eval.txt" || return 1
    sizes=$(sed -n 's/^\([A-Za-z_][A-Za-z0-9_]*\) = \(-\{0,1\}[0-9][0-9]*\)$/\1=\2/p' "$d/eval.txt")
    # shellcheck disable=SC2086
    "$d/driver" "$d/ref" "$d/out" $sizes || return 1
    # shellcheck disable=SC2086
    "$d/driver" "$d/ref" "$d/out" --misalign --own-ctx $sizes
}

# the examples, tests/e2e/*.rv (programs for what the examples do not
# cover), and the regress cases of reductions over rows of NaN, -inf and
# INT_MIN (the AOT output's own prelude and host code run them); two at a
# time (make test runs the suites one after the other)
AOT_FILES="examples/*.rv tests/e2e/*.rv tests/regress/reduce_edge_rows*.rv tests/regress/argmax_int_difference_overflow.rv"
i=0
for f in $AOT_FILES; do
    n=$(basename "$f" .rv)
    (if aot_example "$f" "$tmp/$n" >"$tmp/$n.log" 2>&1; then :; else touch "$tmp/$n.failed"; fi) &
    i=$((i + 1))
    [ $((i % 2)) -eq 0 ] && wait
done
wait
for f in $AOT_FILES; do
    n=$(basename "$f" .rv)
    cp "$tmp/$n.log" "$log"
    if [ -e "$tmp/$n.failed" ]; then fail "aot $f"; else pass; fi
done

# --shared: libmodel.so exports the API, and the driver linked to it agrees
d=$tmp/shared
f=examples/dense_gelu.rv
if {
    mkdir -p "$d/ref" "$d/out" &&
        "$RAVEL" build "$f" -o "$d/model" --shared &&
        test -f "$d/libmodel.so" &&
        $CC -std=c11 $CFLAGS -I"$d" -o "$d/driver" tests/e2e/aot_driver.c -L"$d" -lmodel -lm &&
        "$RAVEL" eval "$f" --random 2 --save-inputs --output "$d/ref" >"$d/eval.txt" &&
        LD_LIBRARY_PATH="$d" "$d/driver" "$d/ref" "$d/out" \
            $(sed -n 's/^\([A-Za-z_][A-Za-z0-9_]*\) = \([0-9]*\)$/\1=\2/p' "$d/eval.txt")
} >"$log" 2>&1; then pass; else fail "build --shared $f"; fi

# a directory that does not exist: exit 1, a message naming the path
if "$RAVEL" build "$f" -o "$tmp/no/such/dir/model" >"$log" 2>&1; then
    fail "build to a missing directory succeeded"
elif [ $? -eq 1 ] && grep -q "no/such/dir/model.c: cannot create" "$log"; then pass; else
    fail "build to a missing directory: exit status or message"
fi

# an unknown target is a usage error
if "$RAVEL" build "$f" -o "$tmp/model" --target cuda >"$log" 2>&1; then
    fail "build --target cuda succeeded"
elif [ $? -eq 2 ] && grep -q "unknown target 'cuda'" "$log"; then pass; else
    fail "build --target cuda: exit status or message"
fi

# a failing compiler: exit 1 with the command and the compiler's output
mkdir -p "$tmp/cc"
printf '#!/bin/sh\necho broken compiler\nexit 3\n' >"$tmp/cc/badcc"
chmod +x "$tmp/cc/badcc"
if RAVEL_CC="$tmp/cc/badcc" "$RAVEL" build "$f" -o "$tmp/cc/model" --shared >"$log" 2>&1; then
    fail "build --shared with a failing compiler succeeded"
elif [ $? -eq 1 ] && grep -q "the C compiler failed (exit status 3)" "$log" &&
    grep -q "broken compiler" "$log"; then pass; else
    fail "build --shared with a failing compiler: exit status or message"
fi

# run-time checks: a read past the end for some sizes (K > 0) makes _run
# return RV_RT_ERR_BOUNDS, and NAME_check_message names the read; within
# range it runs (under SAN=1 the kernels are sanitized, so an unchecked
# read would be reported)
d=$tmp/checks
f=tests/regress/read_offset_size.rv
if {
    mkdir -p "$d/ref" "$d/out" &&
        "$RAVEL" build "$f" -o "$d/model" &&
        $CC -std=c11 $CFLAGS -I"$d" -o "$d/driver" tests/e2e/aot_driver.c "$d/model.c" -lm &&
        "$RAVEL" eval "$f" --random 1 --size N=16 --size K=0 --save-inputs --output "$d/ref" &&
        "$d/driver" "$d/ref" "$d/out" --own-ctx N=16 K=0 &&
        ! "$d/driver" "$d/ref" "$d/out" --own-ctx N=16 K=3 2>"$d/err.txt" &&
        grep -q "model_run returned 2: kernel Y: read X\[i + K\] out of bounds" "$d/err.txt"
} >"$log" 2>&1; then pass; else fail "build $f: run-time check"; fi

# variants (tests/variants/): two schedules of one program in one library,
# NAME_run picking one per call, by a rule table (B >= 16: variant 1) and by
# the user's NAME_dispatch (--dispatch extern); each checked against the
# interpreter on both sides of the threshold, aligned and misaligned (each
# driver run dispatches twice: its run and its NULL-input check)
d=$tmp/variants
f=tests/variants/row_softmax.rv
variants="--variant tests/variants/row_softmax_small.sched --variant tests/variants/row_softmax_large.sched"
variant_runs() {
    for B in 15 16; do
        rm -rf "$d/ref" "$d/out" && mkdir -p "$d/ref" "$d/out" &&
            "$RAVEL" eval "$f" --random 1 --size B=$B --save-inputs --output "$d/ref" >/dev/null &&
            "$d/driver" "$d/ref" "$d/out" B=$B 2>>"$d/err.txt" &&
            "$d/driver" "$d/ref" "$d/out" --misalign --own-ctx B=$B 2>>"$d/err.txt" || return 1
    done
}
# shellcheck disable=SC2086
if {
    mkdir -p "$d" &&
        "$RAVEL" build "$f" -o "$d/model" $variants --dispatch B=16..64:1 &&
        grep -q "(B >= 16LL && B <= 64LL)" "$d/model.c" &&
        grep -q "model_run_v1(rv_args" "$d/model.c" &&
        $CC -std=c11 $CFLAGS -I"$d" -o "$d/driver" tests/e2e/aot_driver.c "$d/model.c" -lm &&
        variant_runs
} >"$log" 2>&1; then pass; else fail "build $f: variants by rules"; fi
# shellcheck disable=SC2086
if {
    rm -f "$d/err.txt" &&
        "$RAVEL" build "$f" -o "$d/model" $variants --dispatch extern &&
        grep -q "int model_dispatch(const int64_t \*sizes, void \*user);" "$d/model.h" &&
        $CC -std=c11 $CFLAGS -I"$d" -o "$d/driver" tests/e2e/aot_driver.c "$d/model.c" \
            tests/variants/dispatch.c -lm &&
        variant_runs &&
        test "$(grep -c 'dispatch: variant 0' "$d/err.txt")" -eq 4 &&
        test "$(grep -c 'dispatch: variant 1' "$d/err.txt")" -eq 4
} >"$log" 2>&1; then pass; else fail "build $f: variants by NAME_dispatch"; fi
# a dispatch on the sum of a UF (--dispatch-sum len: a tuned program over
# ragged rows reads the packed rows after the sizes): B = 1 sums at most
# 40, B = 64 at least 64, so each takes its side of the threshold
variant_sum_runs() {
    for B in 1 64; do
        rm -rf "$d/ref" "$d/out" && mkdir -p "$d/ref" "$d/out" &&
            "$RAVEL" eval "$f" --random 2 --size B=$B --save-inputs --output "$d/ref" >/dev/null &&
            "$d/driver" "$d/ref" "$d/out" B=$B 2>>"$d/err_$B.txt" || return 1
    done
}
# shellcheck disable=SC2086
if {
    rm -f "$d"/err_*.txt &&
        "$RAVEL" build "$f" -o "$d/model" $variants --dispatch extern --dispatch-sum len &&
        grep -q "rv_sizes\[1\] += (int64_t)len\[rv_i\];" "$d/model.c" &&
        $CC -std=c11 $CFLAGS -I"$d" -o "$d/driver" tests/e2e/aot_driver.c "$d/model.c" \
            tests/variants/dispatch_sum.c -lm &&
        variant_sum_runs &&
        grep -q 'variant 0' "$d/err_1.txt" && ! grep -q 'variant 1' "$d/err_1.txt" &&
        grep -q 'variant 1' "$d/err_64.txt" && ! grep -q 'variant 0' "$d/err_64.txt"
} >"$log" 2>&1; then pass; else fail "build $f: variants by NAME_dispatch over sum(len)"; fi
# a dispatch without variants, or a malformed rule, is a usage error
if "$RAVEL" build "$f" -o "$d/model" --dispatch B=1..2:1 >"$log" 2>&1; then
    fail "build --dispatch without variants succeeded"
elif [ $? -eq 2 ] && grep -q "needs two --variant files" "$log"; then pass; else
    fail "build --dispatch without variants: exit status or message"
fi
# shellcheck disable=SC2086
if "$RAVEL" build "$f" -o "$d/model" $variants --dispatch B=16:1 >"$log" 2>&1; then
    fail "build --dispatch B=16:1 succeeded"
elif [ $? -eq 2 ] && grep -q "expected SIZE=LO..HI" "$log"; then pass; else
    fail "build --dispatch B=16:1: exit status or message"
fi

# --threads: NAME_run(args, NULL) runs parallel loops on the runtime's pool,
# embedded in NAME.c. Built with -fsanitize=thread where the compiler has
# it (not under SAN=1: ASan and TSan do not combine), the driver runs with
# model_set_num_threads(1) and (2): both match the interpreter and each
# other bit for bit (static chunks: every element is computed alike).
tsan=""
if [ "${SAN:-0}" != 1 ] && printf 'int main(void) { return 0; }\n' |
    $CC -fsanitize=thread -x c - -o "$tmp/tsan_probe" 2>/dev/null && "$tmp/tsan_probe"; then
    tsan="-fsanitize=thread -g"
fi
for f in examples/dense_gelu.rv examples/ragged_softmax.rv examples/tree_rnn.rv; do
    d=$tmp/threads_$(basename "$f" .rv)
    # shellcheck disable=SC2086
    if {
        mkdir -p "$d/ref" "$d/out1" "$d/out2" &&
            "$RAVEL" build "$f" -o "$d/model" --threads 2 &&
            grep -q "tp_parallel_for(model_pool" "$d/model.c" &&
            $CC -std=c11 $CFLAGS $tsan -pthread -Wall -Wextra -Werror -I"$d" -o "$d/driver" \
                tests/e2e/aot_driver.c "$d/model.c" -lm &&
            "$RAVEL" eval "$f" --random 3 --save-inputs --output "$d/ref" >"$d/eval.txt" &&
            sizes=$(sed -n 's/^\([A-Za-z_][A-Za-z0-9_]*\) = \(-\{0,1\}[0-9][0-9]*\)$/\1=\2/p' "$d/eval.txt") &&
            "$d/driver" "$d/ref" "$d/out1" --threads 1 $sizes &&
            "$d/driver" "$d/ref" "$d/out2" --threads 2 $sizes &&
            for o in "$d"/out1/*.npy; do cmp "$o" "$d/out2/$(basename "$o")" || exit 1; done
    } >"$log" 2>&1; then pass; else fail "build --threads 2 $f (tsan: ${tsan:-no})"; fi
done
# without --threads NAME.c needs no pthreads; a bad --threads is a usage error
if ! grep -q pthread "$tmp/shared/model.c" && grep -q "This build" "$tmp/shared/model.h"; then pass; else
    echo "a build without --threads" >"$log"
    fail "a build without --threads mentions pthreads"
fi
if "$RAVEL" build examples/softmax.rv -o "$tmp/model" --threads -2 >"$log" 2>&1; then
    fail "build --threads -2 succeeded"
elif [ $? -eq 2 ] && grep -q "\-\-threads expects 0..4096" "$log"; then pass; else
    fail "build --threads -2: exit status or message"
fi

# --march: the CPU of --shared's -march (default: none, the compiler's
# portable target); -pthread with --threads; a value that is no CPU name
# and a misspelt option are usage errors
printf '#!/bin/sh\necho "$@" >>"%s"\nexec cc "$@"\n' "$tmp/cc/args.txt" >"$tmp/cc/logcc"
chmod +x "$tmp/cc/logcc"
if {
    RAVEL_CC="$tmp/cc/logcc" "$RAVEL" build examples/softmax.rv -o "$tmp/cc/m1" --shared &&
        RAVEL_CC="$tmp/cc/logcc" "$RAVEL" build examples/softmax.rv -o "$tmp/cc/m2" --shared \
            --march x86-64-v2 --threads 0 &&
        test -f "$tmp/cc/libm2.so" &&
        grep -- "-shared" "$tmp/cc/args.txt" | sed -n 1p | grep -v -q -- "-march" &&
        grep -- "-shared" "$tmp/cc/args.txt" | sed -n 1p | grep -v -q -- "-pthread" &&
        grep -- "-shared" "$tmp/cc/args.txt" | sed -n 2p | grep -q -- "-march=x86-64-v2 -pthread"
} >"$log" 2>&1; then pass; else cat "$tmp/cc/args.txt" >>"$log"; fail "build --march"; fi
if "$RAVEL" build examples/softmax.rv -o "$tmp/model" --march 'native;rm' >"$log" 2>&1; then
    fail "build --march 'native;rm' succeeded"
elif [ $? -eq 2 ] && grep -q "is not a CPU name" "$log"; then pass; else
    fail "build --march 'native;rm': exit status or message"
fi
if "$RAVEL" build examples/softmax.rv -o "$tmp/model" --thread 2 >"$log" 2>&1; then
    fail "build --thread succeeded"
elif [ $? -eq 2 ] && grep -q "unknown option '--thread'; did you mean '--threads'?" "$log"; then pass; else
    fail "build --thread: exit status or message"
fi

echo "aot: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
