/*
 * assert.c — what happens when ravel finds a bug in itself.
 *
 * RV_ASSERT and RV_UNREACHABLE stay on in release builds: a broken invariant
 * is a bug in ravel, never a user error, and going on would only move the
 * crash somewhere harder to explain. base_panic prints "file:line: panic:"
 * with the message, then whatever the current phase registered with
 * base_panic_set_dump (typically the IR being processed), and aborts so a
 * debugger or a core dump catches the moment.
 *
 * User and environment errors never come here: they go through base_error
 * (error.c) and are returned to the caller as a status.
 */
#include <stdio.h>
#include <stdlib.h>

#include "base/base.h"

/* The per-thread dump hook: a phase that walks some IR registers a printer
 * for it, so an assertion deep inside the phase shows what it was working
 * on. Thread-local because independent compilations may run in parallel. */
static _Thread_local PanicDump panic_dump;
static _Thread_local void *panic_dump_ctx;

PanicDump base_panic_set_dump(PanicDump fn, void *ctx, void **old_ctx) {
    PanicDump old = panic_dump;
    if (old_ctx)
        *old_ctx = panic_dump_ctx;
    panic_dump = fn;
    panic_dump_ctx = ctx;
    return old;
}

void base_panic(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    fflush(stdout);
    fprintf(stderr, "%s:%d: panic: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    PanicDump dump = panic_dump;
    if (dump) {
        panic_dump = NULL; /* a dump that itself panics must not recurse */
        fputs("while processing:\n", stderr);
        dump(panic_dump_ctx, stderr);
    }
    fflush(stderr);
    abort();
}
