#!/bin/sh
# bench/setup.sh — install the baseline libraries the benchmarks compare
# ravel against. Idempotent: packages already present are not reinstalled,
# and `apt-get update` runs only when something is missing.
#
#   libopenblas-pthread-dev  OpenBLAS, pthread build: its thread count is set
#                            per call site with openblas_set_num_threads()
#                            (the OpenMP build would fight oneDNN's pool).
#   libdnnl-dev              oneDNN 2.6 (Debian builds it with OpenMP, so its
#                            thread count follows omp_set_num_threads()).
#   python3-torch            PyTorch, the framework baseline (torch_bench.py).
#   gnuplot-nox              plots for plot.sh.
#   python3                  plot.sh converts JSON lines to .dat with stdlib json.
#
# Must run as root (or through sudo). Debian packages only.
set -eu

PKGS="build-essential libopenblas-pthread-dev libopenblas0-pthread libdnnl-dev \
python3 python3-torch gnuplot-nox"

missing=""
for p in $PKGS; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done

if [ -n "$missing" ]; then
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO=sudo
    echo "setup.sh: installing:$missing"
    # Only refresh the package lists if the install cannot find a package.
    # shellcheck disable=SC2086
    if ! $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $missing; then
        $SUDO apt-get update
        # shellcheck disable=SC2086
        $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $missing
    fi
else
    echo "setup.sh: all baseline packages present"
fi

# The drivers link the pthread OpenBLAS by full path (see build.sh), so the
# libblas.so.3 alternative chosen system-wide does not matter to them.
test -e /usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so || {
    echo "setup.sh: pthread OpenBLAS not found" >&2
    exit 1
}
test -e /usr/include/dnnl.h || { echo "setup.sh: dnnl.h not found" >&2; exit 1; }
echo "setup.sh: ok"
