#!/bin/sh
# A bounded run of the program fuzzer (tests/fuzz_programs.c): 150 random
# programs (tests/fuzz_gen.c), each compiled with the JIT's flags and
# compared with the interpreter on five size assignments, over every
# feature of the generator (tests/fuzz_gen.h), random schedules included.
# Narrow it with FUZZ_PROGRAMS_FEATURES (e.g. "all,-sched") to bisect a
# failure; `make fuzz-programs` runs the long version.
# Prints "fuzz_programs: N passed, N failed"; a failure prints its replay
# command and the reproducer's path.
BUILD=${BUILD:-build}
FUZZ=$BUILD/fuzz_programs
FEATURES=${FUZZ_PROGRAMS_FEATURES:-all}
if [ ! -x "$FUZZ" ]; then
    echo "$FUZZ is missing (make $FUZZ)"
    echo "fuzz_programs: 0 passed, 1 failed"
    exit 1
fi
"$FUZZ" --seed "${FUZZ_SEED:-1}" --count "${FUZZ_PROGRAMS_COUNT:-150}" --jobs 2 \
    --features "$FEATURES" --repro-dir "$BUILD/fuzz_program_repros"
