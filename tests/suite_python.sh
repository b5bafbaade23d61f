#!/bin/sh
# The Python package (python/): a virtual environment in $BUILD/pyvenv
# with ./python installed (pip install ./python: Python, and ravel._fast
# compiled where this Python has its headers) and NumPy and pytest from
# PyPI (once; later runs reinstall only the package), then python/tests
# under pytest against $BUILD's library.
# Under SAN=1 the library is instrumented: Python loads it with the
# sanitizer runtime preloaded. Prints "python: N passed, N failed".
BUILD=${BUILD:-build}
export BUILD
root=$(pwd)
venv=$BUILD/pyvenv
py=$venv/bin/python
log=$(mktemp)
tmp=$(mktemp -d)
trap 'rm -rf "$log" "$tmp"' EXIT
failed() {
    cat "$log"
    echo "python: $1"
    echo "python: 0 passed, 1 failed"
    exit 1
}
command -v python3 >/dev/null 2>&1 || failed "python3 is missing: run 'make deps'"
if ! [ -x "$py" ] || ! "$py" -c 'import numpy, pytest, setuptools, wheel' >/dev/null 2>&1; then
    rm -rf "$venv"
    python3 -m venv "$venv" >"$log" 2>&1 ||
        failed "python3 -m venv failed: run 'make deps' (Debian's python3-venv)"
    "$py" -m pip install -q --disable-pip-version-check numpy pytest 'setuptools>=61' wheel >>"$log" 2>&1 ||
        failed "pip could not install numpy, pytest, setuptools and wheel from PyPI"
fi
# the package as a user installs it (setuptools is in the venv, so no
# isolated build environment is downloaded on every run)
"$py" -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps \
    --force-reinstall ./python >"$log" 2>&1 || failed "pip install ./python failed"
rm -rf python/build python/*.egg-info
RAVEL_LIBRARY=$root/$BUILD/libravel.so.0
RAVEL_CACHE_DIR=$tmp/cache
export RAVEL_LIBRARY RAVEL_CACHE_DIR
if [ "${SAN:-0}" = 1 ]; then
    LD_PRELOAD=$(${CC:-cc} -print-file-name=libasan.so)
    # Python's own allocations are not ravel's leaks
    ASAN_OPTIONS=detect_leaks=0
    export LD_PRELOAD ASAN_OPTIONS
fi
# the installed package, not python/ravel: run from outside the tree
(cd "$tmp" && "$root/$py" -c 'import ravel, sys
sys.exit(0 if "site-packages" in ravel.__file__ else "imported " + ravel.__file__)') >"$log" 2>&1 ||
    failed "the installed package is not the one imported"
(cd "$tmp" && "$root/$py" -m pytest -q -p no:cacheprovider "$root/python/tests") >"$log" 2>&1
rc=$?
cat "$log"
summary=$(tail -n 1 "$log")
passed=$(echo "$summary" | sed -n 's/.*[^0-9]\([0-9][0-9]*\) passed.*/\1/p; s/^\([0-9][0-9]*\) passed.*/\1/p' | head -n 1)
nfail=$(echo "$summary" | sed -n 's/.*[^0-9]\([0-9][0-9]*\) failed.*/\1/p; s/^\([0-9][0-9]*\) failed.*/\1/p' | head -n 1)
nerr=$(echo "$summary" | sed -n 's/.*[^0-9]\([0-9][0-9]*\) error.*/\1/p; s/^\([0-9][0-9]*\) error.*/\1/p' | head -n 1)
passed=${passed:-0}
nfail=$((${nfail:-0} + ${nerr:-0}))
[ "$rc" -ne 0 ] && [ "$nfail" -eq 0 ] && nfail=1
echo "python: $passed passed, $nfail failed"
[ "$nfail" -eq 0 ]
