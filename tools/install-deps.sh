#!/bin/sh
# Installs the Debian packages ravel needs to build and test, if missing.
# Library: libdlpack-dev (the DLPack header for tensor interchange).
# Tests: pkg-config (tests/suite_install.sh builds against an installed ravel);
# python3-venv (tests/suite_python.sh makes a virtual environment for the
# Python package and pip-installs NumPy and pytest into it from PyPI).
# Tuner (src/tune, docs/tuning.md): libcjson-dev (its records are JSON
# lines) and libxgboost-dev (its learned cost model; loaded with dlopen, so
# only tuning needs it).
# The system C compiler (gcc) and make are the base and already present on
# the machines we build on; the JIT uses `cc` at run time.
# `install-deps.sh clang` also installs clang, which only `make fuzz-parse`
# (libFuzzer) needs.
set -e
need=""
if [ "$1" = clang ]; then
    command -v clang >/dev/null 2>&1 || need="$need clang"
fi
[ -f /usr/include/dlpack/dlpack.h ] || need="$need libdlpack-dev"
[ -f /usr/include/cjson/cJSON.h ] || need="$need libcjson-dev"
[ -f /usr/include/xgboost/c_api.h ] || need="$need libxgboost-dev"
command -v cc >/dev/null 2>&1 || need="$need gcc"
command -v python3 >/dev/null 2>&1 || need="$need python3"
python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || need="$need python3-venv"
command -v pkg-config >/dev/null 2>&1 || need="$need pkg-config"
if [ -n "$need" ]; then
    echo "install-deps: installing$need"
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $need
fi
