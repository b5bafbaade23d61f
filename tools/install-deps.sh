#!/bin/sh
# Installs the Debian packages ravel needs to build and test, if missing.
# Library: libdlpack-dev (the DLPack header for tensor interchange).
# Tests: pkg-config (tests/suite_install.sh builds against an installed ravel).
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
command -v cc >/dev/null 2>&1 || need="$need gcc"
command -v python3 >/dev/null 2>&1 || need="$need python3"
command -v pkg-config >/dev/null 2>&1 || need="$need pkg-config"
if [ -n "$need" ]; then
    echo "install-deps: installing$need"
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $need
fi
