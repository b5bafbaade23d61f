#!/bin/sh
# suite_fuzz_parse.sh — replays the parse/print fuzzer's seed corpus
# (tests/fuzz_parse/: every input `make fuzz-parse` found a bug with) and
# every program of the repository through $BUILD/fuzz_parse, a normal build
# of tests/fuzz_parse.c: each parses or fails with a located error, and
# prints to a fixed point. Prints "fuzz-parse: N passed, N failed".
BUILD=${BUILD:-build}
exec "$BUILD/fuzz_parse" tests/fuzz_parse/* examples/*.rv tests/error/*.rv tests/regress/*.rv \
    tests/fuzz/*.rv
