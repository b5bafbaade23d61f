#!/bin/sh
# A bounded run of the schedule fuzzer (tests/fuzz_sched.c): 256 random
# schedules over examples/*.rv and tests/fuzz/*.rv, each compiled at -O0 and
# compared with the interpreter. `make fuzz-sched` runs the long version.
# Prints "fuzz: N passed, N failed"; a failure prints its replay command.
BUILD=${BUILD:-build}
FUZZ=$BUILD/fuzz_sched
if [ ! -x "$FUZZ" ]; then
    echo "$FUZZ is missing (make $FUZZ)"
    echo "fuzz: 0 passed, 1 failed"
    exit 1
fi
"$FUZZ" --seed "${FUZZ_SEED:-1}" --count "${FUZZ_COUNT:-256}" --jobs 2
