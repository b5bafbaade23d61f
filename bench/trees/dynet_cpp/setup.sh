#!/bin/sh
# bench/trees/dynet_cpp/setup.sh — build DyNet's C++ library (CPU, Eigen
# backend) from its source distribution and the trees benchmark's C++ driver
# against it, so the `dynet_cpp` baseline of `ravel bench trees` times DyNet
# with no Python in the loop (issue 13). Never part of `make test` or CI.
#
#   sh bench/trees/dynet_cpp/setup.sh       # -> bench/trees/.dynet/
#   DYNET_JOBS=2 ...                        # parallel compile jobs (default 2)
#   DYNET_MARCH=haswell ...                 # another -march (default native):
#       -> .dynet/build-haswell/, .dynet/trees_dynet_cpp-haswell (bench.py
#       runs it with TREES_DYNET_CPP=bench/trees/.dynet/trees_dynet_cpp-haswell)
#
# Needs cmake, a C++ compiler and Eigen's headers (Debian: apt-get install
# cmake libeigen3-dev; Eigen 3.4.0). DyNet 2.1.2 pinned an Eigen development
# snapshot, but builds unmodified against Eigen 3.4.0 (gcc 12; only
# warnings). The sdist comes from PyPI through pip and is checked against
# its sha256. Build: DyNet's own release flags with -O3 for its default
# -Ofast (-funroll-loops -O3 -march=native -DNDEBUG, given as the flags of
# build type None so that DYNET_MARCH can replace -march=native), no CUDA,
# no MKL, no Boost.
# Idempotent: every step is skipped when its output exists; delete
# bench/trees/.dynet to start over.
set -eu

HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/.." && pwd)/.dynet
VER=2.1.2
SHA=c1c1de7cdd3a60b6c6491868b0e096b38b88d4ce14ef8bd065cb76bcd9f5a8b9
SDIST=$TOP/dyNET-$VER.tar.gz
SRC=$TOP/dyNET-$VER
MARCH=${DYNET_MARCH:-native}
SUFFIX=
[ "$MARCH" = native ] || SUFFIX=-$MARCH
BUILD=$TOP/build$SUFFIX
JOBS=${DYNET_JOBS:-2}
OPT="-funroll-loops -O3 -march=$MARCH -DNDEBUG"
EIGEN=${EIGEN3_INCLUDE_DIR:-/usr/include/eigen3}
PY=${PYTHON:-python3}

mkdir -p "$TOP"
if [ ! -f "$EIGEN/Eigen/Core" ]; then
    echo "dynet_cpp/setup.sh: no Eigen headers in $EIGEN" \
         "(apt-get install libeigen3-dev, or set EIGEN3_INCLUDE_DIR)" >&2
    exit 1
fi

if [ ! -f "$SDIST" ]; then
    "$PY" -m pip download -q --no-binary :all: --no-deps -d "$TOP" "dyNET==$VER"
fi
echo "$SHA  $SDIST" | sha256sum -c - >/dev/null ||
    { echo "dynet_cpp/setup.sh: $SDIST: sha256 mismatch" >&2; exit 1; }

if [ ! -f "$SRC/.unpacked" ]; then
    rm -rf "$SRC"
    tar -xzf "$SDIST" -C "$TOP"
    touch "$SRC/.unpacked"
fi

if [ ! -f "$BUILD/CMakeCache.txt" ]; then
    cmake -S "$SRC" -B "$BUILD" -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_FLAGS="$OPT" \
        -DEIGEN3_INCLUDE_DIR="$EIGEN" \
        -DBACKEND=eigen -DENABLE_BOOST=OFF -DENABLE_CPP_EXAMPLES=OFF >/dev/null
fi
nice cmake --build "$BUILD" --target dynet -- -j"$JOBS"

# The driver: same flags as the library (Eigen's code is inlined into it).
DRV=$TOP/trees_dynet_cpp$SUFFIX
if [ ! -x "$DRV" ] || [ "$HERE/trees_dynet.cc" -nt "$DRV" ]; then
    nice ${CXX:-g++} -std=c++11 $OPT \
        -DEIGEN_FAST_MATH -fno-finite-math-only \
        -Wall -isystem "$SRC" -isystem "$BUILD" -isystem "$EIGEN" "$HERE/trees_dynet.cc" \
        -o "$DRV.tmp" -L"$BUILD/dynet" -ldynet -Wl,-rpath,"$BUILD/dynet" -lpthread
    mv "$DRV.tmp" "$DRV"
fi
echo "dynet_cpp/setup.sh: $DRV"
