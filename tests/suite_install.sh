#!/bin/sh
# `make install` and what an installed ravel must do without its source
# tree: install into a temporary prefix (reusing the built files), check
# the files, the SONAME links and the shared library's exports; check that
# nothing installed names the source tree; build a C program with
# `pkg-config --cflags --libs ravel` only (shared, then --static) and run
# it from outside the repository with a fresh cache and no
# RAVEL_INCLUDE_DIR, so the JIT must compile its kernels against the
# ravel_rt.h embedded in the library; run the installed `ravel` the same
# way; `man -l` the man page; then `make uninstall` must leave no file.
BUILD=${BUILD:-build}
SAN=${SAN:-0}
repo=$(pwd -P)
tmp=$(mktemp -d)
trap '[ -n "$KEEP" ] || rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
log=$tmp/log
passed=0
failed=0
pass() { passed=$((passed + 1)); }
fail() { echo "FAIL $1"; cat "$log"; failed=$((failed + 1)); }
check() { # NAME COMMAND...: passes when COMMAND succeeds; its output goes to $log
    name=$1
    shift
    if "$@" >"$log" 2>&1; then pass; else fail "$name"; fi
}
# The sanitizer runtime must come first in a sanitized program.
SANFLAGS=""
[ "$SAN" = 1 ] && SANFLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer"
unset RAVEL_INCLUDE_DIR MAKEFLAGS MFLAGS

check "make install" make --no-print-directory -s install BUILD="$BUILD" SAN="$SAN" PREFIX="$prefix"

major=$(sed -n 's/^#define RV_VERSION_MAJOR \([0-9]*\).*/\1/p' include/ravel.h)
minor=$(sed -n 's/^#define RV_VERSION_MINOR \([0-9]*\).*/\1/p' include/ravel.h)
patch=$(sed -n 's/^#define RV_VERSION_PATCH \([0-9]*\).*/\1/p' include/ravel.h)
version=$major.$minor.$patch
files() {
    for f in bin/ravel include/ravel.h include/ravel_rt.h lib/libravel.a "lib/libravel.so.$version" \
        lib/pkgconfig/ravel.pc share/man/man1/ravel.1; do
        [ -f "$prefix/$f" ] || { echo "missing $f"; return 1; }
    done
    [ "$(readlink "$prefix/lib/libravel.so.$major")" = "libravel.so.$version" ] &&
        [ "$(readlink "$prefix/lib/libravel.so")" = "libravel.so.$major" ] &&
        readelf -d "$prefix/lib/libravel.so.$version" | grep -F "[libravel.so.$major]"
}
check "installed files and SONAME" files

# Only the public API: rv_* and ravel_rt_parallel_for (src/libravel.map).
exports() {
    nm -D --defined-only "$prefix/lib/libravel.so" | awk '{ print $3 }' >"$tmp/exports"
    grep -qx rv_version "$tmp/exports" && grep -qx rv_program_compile "$tmp/exports" || return 1
    ! grep -v -e '^rv_' -e '^ravel_rt_parallel_for$' "$tmp/exports"
}
check "libravel.so exports only rv_ names" exports

# No installed file may point into the source tree (debug info, __FILE__,
# a build-time include path); grep -r does not follow the symlinks.
check "no source-tree path in installed files" sh -c "! grep -rl -F '$repo' '$prefix'"

check "pkg-config version" sh -c "[ \"\$(PKG_CONFIG_PATH='$prefix/lib/pkgconfig' pkg-config --modversion ravel)\" = $version ]"

# A program through the public API only: parse, compile (JIT), run with a
# parallel loop, check Y = 2 X + 1 and the run-time version.
cat >"$tmp/app.c" <<'EOF'
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <ravel.h>
#include <ravel_rt.h>

static const char *SRC = "size N in 1..1000\n"
                         "input X : f32[N, 8]\n"
                         "Y[i, j] = 2.0 * X[i, j] + 1.0\n"
                         "schedule Y {\n    parallel(i)\n}\n";

int main(void) {
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", RV_VERSION_MAJOR, RV_VERSION_MINOR, RV_VERSION_PATCH);
    if (strcmp(rv_version(), want) != 0 || RV_RT_ABI_VERSION < 1) {
        printf("version %s, headers say %s\n", rv_version(), want);
        return 1;
    }
    rv_module *m = NULL;
    rv_program *p = NULL;
    if (rv_module_parse("app.rv", SRC, &m) != RV_OK || rv_program_compile(m, NULL, &p) != RV_OK) {
        printf("%s\n", rv_last_error());
        return 1;
    }
    int64_t shape[2] = {100, 8};
    rv_array *x = rv_array_new(RV_F32, 2, shape);
    for (int64_t i = 0; i < 800; i++)
        rv_array_set_f64(x, i, (double)(i % 37) - 18.0);
    rv_bindings *b = rv_bindings_new(m);
    if (rv_bindings_set_size(b, "N", 100) != RV_OK || rv_bindings_set_array(b, "X", x) != RV_OK ||
        rv_program_run(p, b) != RV_OK) {
        printf("%s\n", rv_last_error());
        return 1;
    }
    const rv_array *y = rv_bindings_get_array(b, "Y");
    for (int64_t i = 0; i < 800; i++) {
        double v = rv_array_get_f64(y, i), w = 2.0 * ((double)(i % 37) - 18.0) + 1.0;
        if (fabs(v - w) > 1e-6) {
            printf("Y[%lld] = %g, want %g\n", (long long)i, v, w);
            return 1;
        }
    }
    rv_bindings_free(b);
    rv_array_free(x);
    rv_program_free(p);
    rv_module_free(m);
    printf("ok %s\n", rv_version());
    return 0;
}
EOF
PKG_CONFIG_PATH=$prefix/lib/pkgconfig
export PKG_CONFIG_PATH
# shellcheck disable=SC2046,SC2086
check "build against the installed shared library" \
    cc -std=c11 $SANFLAGS -o "$tmp/app" "$tmp/app.c" $(pkg-config --cflags --libs ravel)
# --static adds Libs.private (-lm -ldl -lpthread); -l:libravel.a picks the
# archive where -lravel would pick the shared library beside it.
# shellcheck disable=SC2046,SC2086
check "build against the installed static library" \
    cc -std=c11 $SANFLAGS -o "$tmp/app_static" "$tmp/app.c" \
    $(pkg-config --static --cflags --libs ravel | sed 's/-lravel/-l:libravel.a/')
check "the static program needs no libravel.so" sh -c "! readelf -d '$tmp/app_static' | grep -F libravel"
check "the programs name no source-tree path" sh -c "! grep -l -F '$repo' '$tmp/app' '$tmp/app_static'"
check "the shared program links libravel.so.$major" sh -c "readelf -d '$tmp/app' | grep -F '[libravel.so.$major]'"

# Run outside the repository, with a fresh cache (so the kernel is
# compiled now) and the library found only through LD_LIBRARY_PATH.
mkdir "$tmp/elsewhere"
run_app() { # PROGRAM CACHE
    (cd "$tmp/elsewhere" && RAVEL_CACHE_DIR=$2 LD_LIBRARY_PATH=$prefix/lib "$1") &&
        ls "$2"/rt-*/ravel_rt.h && cmp "$2"/rt-*/ravel_rt.h "$prefix/include/ravel_rt.h"
}
check "JIT from the installed shared library" run_app "$tmp/app" "$tmp/cache1"
check "JIT from the installed static library" run_app "$tmp/app_static" "$tmp/cache2"
grep -q "^ok $version" "$log" || fail "the static program's output"

# The installed command: a run compared with the interpreter, and an AOT
# build whose ravel_rt.h is the embedded one.
cp examples/softmax.rv "$tmp/elsewhere/"
check "installed ravel run --check" sh -c "cd '$tmp/elsewhere' && RAVEL_CACHE_DIR='$tmp/cache3' \
    '$prefix/bin/ravel' run softmax.rv --random 1 --check"
check "installed ravel build" sh -c "cd '$tmp/elsewhere' && '$prefix/bin/ravel' build softmax.rv -o sm &&
    cmp ravel_rt.h '$prefix/include/ravel_rt.h'"
check "ravel --version" sh -c "'$prefix/bin/ravel' --version | grep -x 'ravel $version'"

if command -v man >/dev/null 2>&1; then
    check "man -l ravel.1" sh -c "MANWIDTH=80 man --warnings -l '$prefix/share/man/man1/ravel.1' 2>&1 >'$tmp/man.txt' |
        grep . && exit 1; grep -q RAVEL_CACHE_DIR '$tmp/man.txt' && grep -q 'ravel build FILE.rv' '$tmp/man.txt'"
fi

check "make uninstall" make --no-print-directory -s uninstall BUILD="$BUILD" SAN="$SAN" PREFIX="$prefix"
check "nothing left after uninstall" sh -c "[ -z \"\$(find '$prefix' ! -type d)\" ]"

echo "install: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
