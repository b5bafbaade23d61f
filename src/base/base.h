/*
 * base.h — the foundation every layer of ravel stands on.
 *
 * Arena allocation (IR lives in arenas and is never freed node by node),
 * one growable-array macro, a string builder, hash maps keyed by strings or
 * pointers, interned strings, hashing, assertions, and the thread-local
 * "last error" that every fallible public function sets before it returns a
 * status. Everything here depends only on libc.
 */
#ifndef RAVEL_BASE_H
#define RAVEL_BASE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <stdio.h>

#include "ravel.h"

#if defined(__GNUC__)
#define RV_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define RV_PRINTF(f, a)
#endif
#define RV_NORETURN _Noreturn /* C11; also what lets cppcheck see panics end paths */

/* ---- assert.c: bugs (never user errors) abort with file:line ---- */

RV_NORETURN void base_panic(const char *file, int line, const char *fmt, ...) RV_PRINTF(3, 4);
/* Stays on in release builds: a failed assertion is a bug in ravel. */
#define RV_ASSERT(x)                                                                               \
    do {                                                                                           \
        if (!(x))                                                                                  \
            base_panic(__FILE__, __LINE__, "assertion failed: %s", #x);                            \
    } while (0)
#define RV_UNREACHABLE() base_panic(__FILE__, __LINE__, "unreachable")
#define RV_COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))
/* What a panic prints after its message: a phase registers a printer for
 * the IR it is working on (per thread) and restores the previous one when
 * it is done. Returns the previous printer and, in *old_ctx, its context. */
typedef void (*PanicDump)(void *ctx, FILE *out);
PanicDump base_panic_set_dump(PanicDump fn, void *ctx, void **old_ctx);

/* ---- alloc.c: the single allocation hook ---- */

/* All heap memory goes through these, so tests can count bytes and inject
 * failures. base_malloc returns NULL on failure (callers that cannot
 * recover use base_xmalloc, which panics with "out of memory"). */
void *base_malloc(size_t n);
void *base_calloc(size_t n, size_t size);
void *base_realloc(void *p, size_t n);
void base_free(void *p);
void *base_xmalloc(size_t n);
void *base_xcalloc(size_t n, size_t size);
void *base_xrealloc(void *p, size_t n);
char *base_xstrdup(const char *s);
/* Test hooks: bytes currently live (requested sizes, all threads), and
 * make the Nth allocation from now fail, that one only (0 = never). */
size_t base_alloc_live_bytes(void);
void base_alloc_fail_after(long n);

/* ---- arena.c: bump allocation for IR and other phase-lived data ---- */

typedef struct Arena Arena;
Arena *arena_new(void);
void arena_free(Arena *a);
/* Zeroed, 16-byte aligned; never NULL (panics when memory is exhausted). */
void *arena_alloc(Arena *a, size_t n);
char *arena_strdup(Arena *a, const char *s);
char *arena_strndup(Arena *a, const char *s, size_t n);
char *arena_printf(Arena *a, const char *fmt, ...) RV_PRINTF(2, 3);
void *arena_memdup(Arena *a, const void *p, size_t n);

/* ---- vec.h-style growable arrays (macros here, no file) ----
 *   Vec(int) v = {0};  vec_push(&v, 3);  v.data[0];  vec_free(&v);
 */
#define Vec(T)                                                                                     \
    struct {                                                                                       \
        T *data;                                                                                   \
        int len, cap;                                                                              \
    }
#define vec_push(v, x)                                                                             \
    do {                                                                                           \
        if ((v)->len == (v)->cap) {                                                                \
            (v)->cap = (v)->cap ? 2 * (v)->cap : 8;                                                \
            (v)->data = base_xrealloc((v)->data, sizeof(*(v)->data) * (size_t)(v)->cap);           \
        }                                                                                          \
        (v)->data[(v)->len++] = (x);                                                               \
    } while (0)
/* Inserts x at position i (0 <= i <= len), shifting the rest up. */
#define vec_insert(v, i, x)                                                                        \
    do {                                                                                           \
        int vec_i_ = (i);                                                                          \
        vec_push((v), (x));                                                                        \
        memmove(&(v)->data[vec_i_ + 1], &(v)->data[vec_i_],                                        \
                sizeof(*(v)->data) * (size_t)((v)->len - 1 - vec_i_));                             \
        (v)->data[vec_i_] = (x);                                                                   \
    } while (0)
/* Removes the element at position i, shifting the rest down. */
#define vec_remove(v, i)                                                                           \
    do {                                                                                           \
        int vec_i_ = (i);                                                                          \
        memmove(&(v)->data[vec_i_], &(v)->data[vec_i_ + 1],                                        \
                sizeof(*(v)->data) * (size_t)((v)->len - 1 - vec_i_));                             \
        (v)->len--;                                                                                \
    } while (0)
#define vec_pop(v) ((v)->data[--(v)->len])
#define vec_last(v) ((v)->data[(v)->len - 1])
#define vec_free(v)                                                                                \
    do {                                                                                           \
        base_free((v)->data);                                                                      \
        (v)->data = NULL;                                                                          \
        (v)->len = (v)->cap = 0;                                                                   \
    } while (0)

/* ---- buf.c: a growable string ---- */

typedef struct Buf {
    char *data; /* always NUL-terminated once anything was written */
    size_t len, cap;
} Buf;
void buf_puts(Buf *b, const char *s);
void buf_putc(Buf *b, char c);
void buf_printf(Buf *b, const char *fmt, ...) RV_PRINTF(2, 3);
void buf_vprintf(Buf *b, const char *fmt, va_list ap);
/* Appends `n` spaces (indentation for printers and code generators). */
void buf_indent(Buf *b, int n);
/* Returns the string (caller frees with base_free) and resets b. */
char *buf_take(Buf *b);
void buf_free(Buf *b);
const char *buf_str(const Buf *b); /* "" when empty */

/* ---- hash.c ---- */

uint64_t hash_bytes(const void *p, size_t n, uint64_t seed);
uint64_t hash_str(const char *s);
uint64_t hash_combine(uint64_t h, uint64_t v);
/* Lower-case hex of a 64-bit value into out[17]. */
void hash_hex(uint64_t h, char out[17]);
/* The n <= 8 bytes at p as a little-endian integer (missing bytes are 0). */
uint64_t hash_load_le(const unsigned char *p, size_t n);

/* ---- map.c: open-addressing hash maps ----
 * StrMap: string keys (the map copies nothing: keys must outlive the map,
 * e.g. interned or arena strings). PtrMap: pointer keys. Values are void*. */
typedef struct StrMap {
    const char **keys;
    void **vals;
    int len, cap;
} StrMap;
void *strmap_get(const StrMap *m, const char *key);
bool strmap_has(const StrMap *m, const char *key);
void strmap_put(StrMap *m, const char *key, void *val);
void strmap_free(StrMap *m);
/* The stored key equal to the first n bytes of `key`, or NULL (lookup by a
 * slice of a larger text; intern_n uses it). */
const char *strmap_key_n(const StrMap *m, const char *key, size_t n);

typedef struct PtrMap {
    const void **keys;
    void **vals;
    int len, cap;
} PtrMap;
void *ptrmap_get(const PtrMap *m, const void *key);
bool ptrmap_has(const PtrMap *m, const void *key);
void ptrmap_put(PtrMap *m, const void *key, void *val);
void ptrmap_free(PtrMap *m);

/* ---- intern.c: one canonical copy of each string ---- */

typedef struct Interner {
    Arena *arena;
    StrMap map;
} Interner;
void interner_init(Interner *in);
void interner_free(Interner *in);
const char *intern(Interner *in, const char *s);
const char *intern_n(Interner *in, const char *s, size_t n);

/* ---- error.c: the thread-local last error behind rv_last_error() ---- */

/* Records the message and returns `st`, so callers write
 *   return base_error(RV_ERR_IO, "%s: cannot open: %s", path, strerror(errno)); */
rv_status base_error(rv_status st, const char *fmt, ...) RV_PRINTF(2, 3);
rv_status base_verror(rv_status st, const char *fmt, va_list ap);
void base_error_clear(void);
rv_status base_error_status(void);

/* Source locations and caret diagnostics, shared by every front end. */
typedef struct SrcLoc {
    const char *file; /* interned or arena string; NULL for IR built through the C API */
    int line, col;    /* 1-based; 0 when unknown */
} SrcLoc;

/* A source file kept in memory so diagnostics can show the offending line. */
typedef struct SrcFile {
    const char *name;
    const char *text; /* NUL-terminated */
    size_t len;
} SrcFile;

/* Records a located error and returns `st`:
 *     file.rv:3:11: error: undefined name 'Xq'
 *         3 | Y[i, j] = Xq[i, j] * 2
 *           |           ^
 * (no trailing newline). The caret line repeats the source line's tabs.
 * Without `src`, or when the line does not exist, only the first line;
 * without loc.file, no "file:line:col: " prefix; col 0 shows no caret. */
rv_status base_diag(rv_status st, const SrcFile *src, SrcLoc loc, const char *fmt, ...)
    RV_PRINTF(4, 5);

/* ---- near.c: "did you mean" for unknown names ---- */

/* Edit distance with adjacent transpositions (optimal string alignment);
 * names over 63 characters are 64 from everything. */
int base_edit_distance(const char *a, const char *b);
/* The candidate nearest to `name` (one differing in case only, else at
 * most two edits changing at most half of the longer name; the first of
 * equals), or NULL. NULL candidates and
 * `name` itself are skipped. */
const char *base_near_name(const char *name, const char *const *cands, int n);
/* Appends "; did you mean 'NEAR'?" to b when base_near_name finds one. */
void base_near_hint(Buf *b, const char *name, const char *const *cands, int n);

/* ---- file.c ---- */

/* Reads a whole file; NUL-terminates. Returns RV_ERR_IO with a message. */
rv_status base_read_file(const char *path, char **out, size_t *len);
rv_status base_write_file(const char *path, const void *data, size_t len);
/* The same for a file written in pieces, one after the other (a header
 * and a payload) without joining them in memory first. */
typedef struct FilePiece {
    const void *data;
    size_t len;
} FilePiece;
rv_status base_write_pieces(const char *path, int n, const FilePiece *pieces);

#endif
