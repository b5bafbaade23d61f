/*
 * buf.c — a growable string.
 *
 * Printers, code generators and diagnostics build text piece by piece into
 * a Buf. A zero-initialized Buf is empty and ready; data is NUL-terminated
 * as soon as anything was written, so buf_str can hand it to printf at any
 * point. Growth doubles the capacity (amortized O(1) appends) and goes
 * through base_xrealloc: running out of memory while printing is a panic.
 */
#include <stdio.h>
#include <string.h>

#include "base/base.h"

/* Makes room for `extra` more bytes plus the terminating NUL. */
static void buf_reserve(Buf *b, size_t extra) {
    RV_ASSERT(extra < SIZE_MAX - b->len - 1);
    size_t need = b->len + extra + 1;
    if (need <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need)
        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    b->data = base_xrealloc(b->data, cap);
    b->cap = cap;
}

/* Appends n bytes; s may point into b's own data (buf_puts(b, buf_str(b))),
 * so an inside pointer is re-based after growing. */
static void buf_append(Buf *b, const char *s, size_t n) {
    uintptr_t us = (uintptr_t)s, ud = (uintptr_t)b->data;
    bool inside = b->data && us >= ud && us < ud + b->cap;
    buf_reserve(b, n);
    if (inside)
        s = b->data + (us - ud);
    memmove(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void buf_puts(Buf *b, const char *s) {
    buf_append(b, s, strlen(s));
}

void buf_putc(Buf *b, char c) {
    buf_append(b, &c, 1);
}

/* Appends formatted text; arguments may point into b's own data. */
void buf_vprintf(Buf *b, const char *fmt, va_list ap) {
    va_list ap2;
    va_copy(ap2, ap);
    char small[256];
    int n = vsnprintf(small, sizeof small, fmt, ap);
    RV_ASSERT(n >= 0);
    if ((size_t)n < sizeof small) {
        buf_append(b, small, (size_t)n);
    } else {
        /* Format into a scratch block rather than in place: an argument may
         * point into b->data, which growing would move. */
        char *big = base_xmalloc((size_t)n + 1);
        vsnprintf(big, (size_t)n + 1, fmt, ap2);
        buf_append(b, big, (size_t)n);
        base_free(big);
    }
    va_end(ap2);
}

void buf_printf(Buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    buf_vprintf(b, fmt, ap);
    va_end(ap);
}

void buf_indent(Buf *b, int n) {
    if (n <= 0)
        return;
    buf_reserve(b, (size_t)n);
    memset(b->data + b->len, ' ', (size_t)n);
    b->len += (size_t)n;
    b->data[b->len] = '\0';
}

/* Hands the string over (never NULL: an empty Buf gives a fresh "") and
 * leaves b empty and reusable. */
char *buf_take(Buf *b) {
    char *s = b->data;
    if (!s) {
        s = base_xmalloc(1);
        s[0] = '\0';
    }
    b->data = NULL;
    b->len = b->cap = 0;
    return s;
}

void buf_free(Buf *b) {
    base_free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

const char *buf_str(const Buf *b) {
    return b->data ? b->data : "";
}
