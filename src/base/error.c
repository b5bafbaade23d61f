/*
 * error.c — the thread-local "last error" and caret diagnostics.
 *
 * Every public function that can fail for user or environment reasons
 * returns a status and leaves a message here, readable with rv_last_error()
 * on the same thread (like errno, but with a full sentence). The message is
 * sized to fit: diagnostics quote source lines and compiler logs, and a
 * truncated compiler log is worse than none.
 *
 * The message buffer deliberately bypasses the allocation hook (alloc.c)
 * and uses libc malloc: reporting "out of memory" must work while a test is
 * injecting allocation failures, and a per-thread buffer that lives as long
 * as its thread would read as a leak to tests that count live bytes. A
 * C11 thread-specific-storage key frees the buffer when a worker thread
 * exits; if even libc malloc fails, rv_last_error() says so instead.
 *
 * base_diag formats a located error the way chibicc and Rust do:
 *
 *     file.rv:3:11: error: undefined name 'Xq'
 *         3 | Y[i, j] = Xq[i, j] * 2
 *           |           ^
 *
 * Tabs of the source line are repeated in the caret line, so the caret
 * lines up whatever the terminal's tab width; columns count bytes, and
 * UTF-8 continuation bytes take no room in the caret line.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <threads.h>

#include "base/base.h"

static _Thread_local char *err_msg; /* libc-malloc'd; NULL: none or lost */
static _Thread_local rv_status err_status;

static tss_t err_key;
static bool err_key_ok;
static once_flag err_once = ONCE_FLAG_INIT;

static void err_key_init(void) {
    err_key_ok = tss_create(&err_key, free) == thrd_success;
}

/* Replaces the current message by `msg` (already malloc'd; may be NULL
 * when formatting ran out of memory). */
static rv_status err_set(rv_status st, char *msg) {
    RV_ASSERT(st > RV_OK && st < RV_STATUS_COUNT);
    free(err_msg);
    err_msg = msg;
    err_status = st;
    call_once(&err_once, err_key_init);
    if (err_key_ok)
        tss_set(err_key, err_msg);
    return st;
}

/* vsnprintf into a fresh libc block; NULL when out of memory. */
static char *vformat(const char *fmt, va_list ap) {
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (s)
        vsnprintf(s, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    return s;
}

static char *format(const char *fmt, ...) RV_PRINTF(1, 2);
static char *format(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = vformat(fmt, ap);
    va_end(ap);
    return s;
}

/* The arguments may include rv_last_error() itself ("loading x: %s"): the
 * new message is formatted before the old one is freed. */
rv_status base_verror(rv_status st, const char *fmt, va_list ap) {
    return err_set(st, vformat(fmt, ap));
}

rv_status base_error(rv_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    base_verror(st, fmt, ap);
    va_end(ap);
    return st;
}

void base_error_clear(void) {
    free(err_msg);
    err_msg = NULL;
    err_status = RV_OK;
    if (err_key_ok)
        tss_set(err_key, NULL);
}

rv_status base_error_status(void) {
    return err_status;
}

const char *rv_last_error(void) {
    if (err_msg)
        return err_msg;
    return err_status == RV_OK ? "" : "out of memory while recording an error message";
}

// clang-format off
static const char *const status_names[RV_STATUS_COUNT] = {
    [RV_OK]              = "ok",
    [RV_ERR_SYNTAX]      = "syntax error",
    [RV_ERR_TYPE]        = "type error",
    [RV_ERR_SHAPE]       = "shape error",
    [RV_ERR_BOUNDS]      = "out of bounds",
    [RV_ERR_SCHEDULE]    = "schedule error",
    [RV_ERR_ARG]         = "bad argument",
    [RV_ERR_IO]          = "i/o error",
    [RV_ERR_COMPILER]    = "compiler error",
    [RV_ERR_OOM]         = "out of memory",
    [RV_ERR_UNSUPPORTED] = "unsupported",
};
// clang-format on
_Static_assert(RV_STATUS_COUNT == 11, "status_names must list every rv_status");

const char *rv_status_name(rv_status st) {
    if ((int)st < 0 || st >= RV_STATUS_COUNT)
        return "unknown status";
    return status_names[st];
}

/* ---- caret diagnostics ---- */

/* Finds 1-based line `line` of src: its start and length without the line
 * break ("\n" or "\r\n"). False when the text has no such line. */
static bool find_line(const SrcFile *src, int line, const char **start, size_t *len) {
    if (!src || !src->text || line <= 0)
        return false;
    const char *p = src->text, *end = src->text + src->len;
    for (int l = 1; l < line; l++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl)
            return false;
        p = nl + 1;
    }
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
    if (n && p[n - 1] == '\r')
        n--;
    *start = p;
    *len = n;
    return true;
}

/* The caret line's indentation for column `col` (1-based) of `line`: a tab
 * for each tab, nothing for UTF-8 continuation bytes, a space otherwise.
 * Past the end of the line (at most one column) it pads with spaces. */
static char *caret_pad(const char *line, size_t len, int col) {
    size_t upto = (size_t)col - 1;
    if (upto > len)
        upto = len; /* a caret just past the end: "expected ')'" */
    char *pad = malloc(upto + 1);
    if (!pad)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < upto; i++) {
        unsigned char c = (unsigned char)line[i];
        if (c == '\t')
            pad[k++] = '\t';
        else if ((c & 0xC0) != 0x80)
            pad[k++] = ' ';
    }
    pad[k] = '\0';
    return pad;
}

rv_status base_diag(rv_status st, const SrcFile *src, SrcLoc loc, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *msg = vformat(fmt, ap);
    va_end(ap);
    if (!msg)
        return err_set(st, NULL);

    char *head;
    if (!loc.file)
        head = format("error: %s", msg);
    else if (loc.line <= 0)
        head = format("%s: error: %s", loc.file, msg);
    else if (loc.col <= 0)
        head = format("%s:%d: error: %s", loc.file, loc.line, msg);
    else
        head = format("%s:%d:%d: error: %s", loc.file, loc.line, loc.col, msg);
    free(msg);

    const char *line;
    size_t len;
    if (!head || !find_line(src, loc.line, &line, &len))
        return err_set(st, head);
    if (len > INT_MAX / 2)
        len = INT_MAX / 2; /* %.*s takes an int; nobody reads such a line anyway */

    int width = snprintf(NULL, 0, "%d", loc.line);
    if (width < 5)
        width = 5;
    char *full;
    if (loc.col <= 0) {
        full = format("%s\n%*d | %.*s", head, width, loc.line, (int)len, line);
    } else {
        char *pad = caret_pad(line, len, loc.col);
        full = pad ? format("%s\n%*d | %.*s\n%*s | %s^", head, width, loc.line, (int)len, line,
                            width, "", pad)
                   : NULL;
        free(pad);
    }
    if (!full)
        return err_set(st, head); /* the first line is better than nothing */
    free(head);
    return err_set(st, full);
}
