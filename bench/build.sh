#!/bin/sh
# bench/build.sh — builds the benchmark drivers into ${BENCH_BUILD:-build/bench}
# without the top-level Makefile (which may include bench/Makefile.inc instead).
set -eu
cd "$(dirname "$0")/.."
exec make --no-print-directory -f bench/Makefile.inc BENCH_BUILD="${BENCH_BUILD:-build/bench}" bench-build
