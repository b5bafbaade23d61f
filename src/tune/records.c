/*
 * records.c — tuning records: every measured candidate as one line of JSON
 * (JSON lines), so a tuning run can resume, a second run measures nothing
 * twice, and `ravel build --records` can compile the tuned program without
 * tuning (issue 15). A line:
 *
 *   {"version":1,"program":"3fa9…","machine":"…","trace":"split i 4 …",
 *    "threads":2,"shape":{"K":768,"T":16},"seconds":1.25e-05,"status":"ok"}
 *
 * "threads" is the size of the thread pool the kernel ran on: records of
 * one count never stand for another (a line without it, written before
 * the field, reads as 0: the shared pool of every usable core).
 * "code" names the code the time stands for: the JIT's cache key (32 hex
 * digits) of the candidate's C compiled alone, for its shape alone when
 * "spec", with the compiler's identity and flags (rv_program_code_key).
 * A record is current where the candidate's code, generated again, has
 * that key: a change to ravel that leaves its C alone keeps it, one that
 * changes its C makes it stale (docs/tuning.md, "Stale records"). Records
 * written before the field carry "codegen" (a hash of the code
 * generator's sources) or nothing: read, and stale.
 * "clock":"cpu" says "seconds" is the process's CPU time (a 1-thread
 * kernel timed on a shared machine: tune_clock_for_threads); absent, as
 * in records written before the field, or "wall": the wall clock.
 * "spec":true marks a candidate compiled for that shape alone, its sizes
 * constants (a specialized leaf; absent, as in records written before the
 * field: the generic candidate); the two are different measurements of one
 * trace and neither replaces the other.
 *
 * The file is append-only: each record is written with one write() on an
 * O_APPEND descriptor under an exclusive flock, so concurrent writers do
 * not interleave and a crash leaves at most one torn last line, which the
 * reader skips with a warning and the next append cuts off. Any other bad
 * line is an error naming the line: records are data a tuner trusts, and a
 * silently dropped or misread one would make it re-measure or, worse, pick
 * a wrong kernel.
 *
 * Parsing and printing go through cJSON (Debian libcjson-dev), a small,
 * well-kept JSON library, rather than a JSON parser of our own.
 */
#include "tune/tune.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

enum { RECORD_VERSION = 1 };

static const char *const status_names[] = {"ok", "wrong", "failed"};
_Static_assert(sizeof status_names / sizeof status_names[0] == TUNE_STATUS_COUNT, "status_names");

bool tune_record_current(const TuneRecord *r, const char *code) {
    return r->code && code && strcmp(r->code, code) == 0;
}

const char *tune_status_name(TuneStatus st) {
    return status_names[st];
}

void tune_records_init(TuneRecords *rs) {
    memset(rs, 0, sizeof *rs);
    rs->arena = arena_new();
}

void tune_records_free(TuneRecords *rs) {
    arena_free(rs->arena);
    base_free(rs->data);
    strmap_free(&rs->index);
    buf_free(&rs->warnings);
    memset(rs, 0, sizeof *rs);
}

/* ---- lookup keys ---- */

typedef struct SizePair {
    const char *name;
    int64_t value;
} SizePair;

static int cmp_pair(const void *a, const void *b) {
    return strcmp(((const SizePair *)a)->name, ((const SizePair *)b)->name);
}

/* Length-prefixed parts, so no trace text can make two keys collide. */
static void key_part(Buf *b, const char *s) {
    buf_printf(b, "%zu:%s", strlen(s), s);
}

/* The shape sorted by name into `pairs` (n entries). */
static void sort_shape(SizePair *pairs, const char *const *names, const int64_t *values, int n) {
    for (int i = 0; i < n; i++)
        pairs[i] = (SizePair){names[i], values[i]};
    qsort(pairs, (size_t)n, sizeof *pairs, cmp_pair);
}

static void make_key(Buf *b, const char *program, int threads, const SizePair *pairs, int n,
                     const char *trace, bool spec) {
    if (spec)
        buf_puts(b, "spec:");
    key_part(b, program);
    buf_printf(b, "%d:", threads);
    buf_printf(b, "%d:", n);
    for (int i = 0; i < n; i++) {
        key_part(b, pairs[i].name);
        buf_printf(b, "=%lld,", (long long)pairs[i].value);
    }
    key_part(b, trace);
}

void tune_records_add(TuneRecords *rs, const TuneRecord *r) {
    SizePair *pairs = base_xmalloc(sizeof *pairs * (size_t)(r->nsizes ? r->nsizes : 1));
    sort_shape(pairs, r->size_names, r->size_values, r->nsizes);
    TuneRecord c = *r;
    c.program = arena_strdup(rs->arena, r->program);
    c.machine = arena_strdup(rs->arena, r->machine);
    c.trace = arena_strdup(rs->arena, r->trace);
    c.code = r->code ? arena_strdup(rs->arena, r->code) : NULL;
    c.codegen = r->codegen ? arena_strdup(rs->arena, r->codegen) : NULL;
    c.size_names = arena_alloc(rs->arena, sizeof *c.size_names * (size_t)(r->nsizes + 1));
    c.size_values = arena_alloc(rs->arena, sizeof *c.size_values * (size_t)(r->nsizes + 1));
    for (int i = 0; i < r->nsizes; i++) {
        c.size_names[i] = arena_strdup(rs->arena, pairs[i].name);
        c.size_values[i] = pairs[i].value;
    }
    if (rs->len == rs->cap) {
        rs->cap = rs->cap ? 2 * rs->cap : 64;
        rs->data = base_xrealloc(rs->data, sizeof *rs->data * (size_t)rs->cap);
    }
    rs->data[rs->len++] = c;
    Buf key = {0};
    make_key(&key, c.program, c.threads, pairs, c.nsizes, c.trace, c.spec);
    const char *k = strmap_key_n(&rs->index, buf_str(&key), key.len);
    if (!k)
        k = arena_strdup(rs->arena, buf_str(&key));
    strmap_put(&rs->index, k, (void *)(intptr_t)rs->len);
    buf_free(&key);
    base_free(pairs);
}

const TuneRecord *tune_records_find(const TuneRecords *rs, const char *program, int threads,
                                    const char *const *size_names, const int64_t *size_values,
                                    int nsizes, const char *trace) {
    SizePair *pairs = base_xmalloc(sizeof *pairs * (size_t)(nsizes ? nsizes : 1));
    sort_shape(pairs, size_names, size_values, nsizes);
    Buf key = {0};
    make_key(&key, program, threads, pairs, nsizes, trace, false);
    intptr_t i = (intptr_t)strmap_get(&rs->index, buf_str(&key));
    buf_free(&key);
    base_free(pairs);
    return i ? &rs->data[i - 1] : NULL;
}

/* ---- JSON ---- */

char *tune_record_to_json(const TuneRecord *r) {
    cJSON *o = cJSON_CreateObject(), *shape = cJSON_CreateObject();
    RV_ASSERT(o && shape);
    cJSON_AddNumberToObject(o, "version", RECORD_VERSION);
    cJSON_AddStringToObject(o, "program", r->program);
    cJSON_AddStringToObject(o, "machine", r->machine);
    cJSON_AddStringToObject(o, "trace", r->trace);
    if (r->threads > 0)
        cJSON_AddNumberToObject(o, "threads", r->threads);
    for (int i = 0; i < r->nsizes; i++)
        cJSON_AddNumberToObject(shape, r->size_names[i], (double)r->size_values[i]);
    cJSON_AddItemToObject(o, "shape", shape);
    cJSON_AddNumberToObject(o, "seconds", r->seconds);
    cJSON_AddStringToObject(o, "status", tune_status_name(r->status));
    if (r->spec)
        cJSON_AddBoolToObject(o, "spec", true);
    if (r->code)
        cJSON_AddStringToObject(o, "code", r->code);
    if (r->clock == TUNE_CLOCK_CPU)
        cJSON_AddStringToObject(o, "clock", "cpu");
    if (r->codegen)
        cJSON_AddStringToObject(o, "codegen", r->codegen);
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    RV_ASSERT(s);
    char *out = base_xstrdup(s);
    cJSON_free(s);
    return out;
}

static const char *get_string(const cJSON *o, const char *field) {
    return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, field));
}

/* Sizes are integers; JSON numbers are doubles, exact up to 2^53. */
static bool exact_int(const cJSON *v, int64_t *out) {
    if (!cJSON_IsNumber(v))
        return false;
    double d = v->valuedouble;
    if (!(fabs(d) <= 9007199254740992.0) || d != floor(d))
        return false;
    *out = (int64_t)d;
    return true;
}

/* A code key: 32 lower-case hex digits (jit_source_key). */
static bool hex_key(const char *s) {
    if (!s || strlen(s) != 32)
        return false;
    for (int i = 0; i < 32; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return true;
}

static const char not_json[] = "not valid JSON";

/* One line (NUL-terminated) into rs; on error the message without the
 * "name:line: " prefix goes to *why (not_json when it is not JSON at all:
 * what a torn line looks like). */
static bool parse_line(TuneRecords *rs, const char *text, int line, const char **why) {
    const char *end = NULL;
    cJSON *o = cJSON_ParseWithOpts(text, &end, true);
    bool ok = false;
    if (!o) {
        *why = not_json;
        return false;
    }
    const cJSON *version = cJSON_GetObjectItemCaseSensitive(o, "version");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(o, "shape");
    const cJSON *seconds = cJSON_GetObjectItemCaseSensitive(o, "seconds");
    const cJSON *threads = cJSON_GetObjectItemCaseSensitive(o, "threads");
    const cJSON *spec = cJSON_GetObjectItemCaseSensitive(o, "spec");
    const cJSON *codegen = cJSON_GetObjectItemCaseSensitive(o, "codegen");
    const cJSON *code = cJSON_GetObjectItemCaseSensitive(o, "code");
    TuneRecord r = {.line = line};
    r.program = get_string(o, "program");
    r.machine = get_string(o, "machine");
    r.trace = get_string(o, "trace");
    r.codegen = get_string(o, "codegen");
    r.code = get_string(o, "code");
    const cJSON *clock = cJSON_GetObjectItemCaseSensitive(o, "clock");
    const char *clock_name = get_string(o, "clock");
    const char *status = get_string(o, "status");
    int64_t v;
    if (!cJSON_IsObject(o))
        *why = "not a JSON object";
    else if (!exact_int(version, &v) || v != RECORD_VERSION)
        *why = "\"version\" is missing or not 1 (a record of another ravel?)";
    else if (!r.program || !r.program[0])
        *why = "\"program\" is missing or not a non-empty string";
    else if (!r.machine)
        *why = "\"machine\" is missing or not a string";
    else if (!r.trace)
        *why = "\"trace\" is missing or not a string";
    else if (threads && (!exact_int(threads, &v) || v < 1 || v > 4096))
        *why = "\"threads\" is not an integer in 1..4096";
    else if (spec && !cJSON_IsBool(spec))
        *why = "\"spec\" is not true or false";
    else if (codegen && (!r.codegen || !r.codegen[0]))
        *why = "\"codegen\" is not a non-empty string";
    else if (clock && (!clock_name || (strcmp(clock_name, "cpu") != 0 &&
                                        strcmp(clock_name, "wall") != 0)))
        *why = "\"clock\" is not one of wall, cpu";
    else if (code && !hex_key(r.code))
        *why = "\"code\" is not a key of 32 hex digits";
    else if (!cJSON_IsObject(shape))
        *why = "\"shape\" is missing or not an object of size = integer";
    else if (!cJSON_IsNumber(seconds) || !(seconds->valuedouble >= 0) ||
             !isfinite(seconds->valuedouble))
        *why = "\"seconds\" is missing or not a finite number >= 0";
    else if (!status)
        *why = "\"status\" is missing or not a string";
    else {
        r.status = TUNE_STATUS_COUNT;
        for (int s = 0; s < TUNE_STATUS_COUNT; s++)
            if (strcmp(status, status_names[s]) == 0)
                r.status = (TuneStatus)s;
        r.seconds = seconds->valuedouble;
        r.threads = threads ? (int)threads->valuedouble : 0;
        r.spec = spec && cJSON_IsTrue(spec);
        r.clock = clock && strcmp(clock_name, "cpu") == 0 ? TUNE_CLOCK_CPU : TUNE_CLOCK_WALL;
        r.nsizes = cJSON_GetArraySize(shape);
        r.size_names = base_xmalloc(sizeof *r.size_names * (size_t)(r.nsizes + 1));
        r.size_values = base_xmalloc(sizeof *r.size_values * (size_t)(r.nsizes + 1));
        int i = 0;
        bool ints = true, unique = true;
        for (const cJSON *e = shape->child; e; e = e->next, i++) {
            r.size_names[i] = e->string;
            ints = ints && e->string && e->string[0] && exact_int(e, &r.size_values[i]);
            for (int j = 0; j < i && ints && unique; j++)
                unique = strcmp(r.size_names[j], e->string) != 0;
        }
        if (r.status == TUNE_STATUS_COUNT)
            *why = "\"status\" is not one of ok, wrong, failed";
        else if (!ints)
            *why = "\"shape\" has a size that is not an integer";
        else if (!unique)
            *why = "\"shape\" names a size twice";
        else {
            tune_records_add(rs, &r);
            ok = true;
        }
        base_free(r.size_names);
        base_free(r.size_values);
    }
    cJSON_Delete(o);
    return ok;
}

static bool blank(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r')
            return false;
    return true;
}

rv_status tune_records_parse(const char *name, const char *text, size_t len, TuneRecords *rs) {
    Buf line = {0};
    int lineno = 0;
    rv_status st = RV_OK;
    for (size_t pos = 0; pos < len && st == RV_OK;) {
        const char *nl = memchr(text + pos, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - (text + pos)) : len - pos;
        lineno++;
        if (!blank(text + pos, n)) {
            line.len = 0;
            for (size_t i = 0; i < n; i++)
                buf_putc(&line, text[pos + i]);
            const char *why = NULL;
            if (memchr(text + pos, 0, n))
                why = "contains a NUL byte";
            else
                parse_line(rs, buf_str(&line), lineno, &why);
            if (why == not_json && !nl)
                buf_printf(&rs->warnings,
                           "%s:%d: skipped a torn last line (no newline: a write cut short)\n",
                           name, lineno);
            else if (why)
                st = base_error(RV_ERR_IO, "%s:%d: corrupt tuning record: %s", name, lineno, why);
        }
        pos += n + (nl != NULL);
    }
    buf_free(&line);
    return st;
}

rv_status tune_records_load(const char *path, TuneRecords *rs) {
    if (access(path, F_OK) != 0 && errno == ENOENT)
        return RV_OK;
    char *text;
    size_t len;
    rv_status st = base_read_file(path, &text, &len);
    if (st != RV_OK)
        return st;
    st = tune_records_parse(path, text, len, rs);
    base_free(text);
    return st;
}

/* A last line without its newline: kept (newline added) when it is a whole
 * record, cut off when it is the torn remains of an interrupted write. */
static rv_status repair_tail(int fd, const char *path) {
    struct stat sb;
    if (fstat(fd, &sb) != 0)
        return base_error(RV_ERR_IO, "%s: %s", path, strerror(errno));
    if (sb.st_size == 0)
        return RV_OK;
    char last;
    if (pread(fd, &last, 1, sb.st_size - 1) != 1)
        return base_error(RV_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
    if (last == '\n')
        return RV_OK;
    off_t start = sb.st_size - 1;
    while (start > 0) {
        char c;
        if (pread(fd, &c, 1, start - 1) != 1)
            return base_error(RV_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
        if (c == '\n')
            break;
        start--;
    }
    size_t n = (size_t)(sb.st_size - start);
    char *tail = base_xmalloc(n + 1);
    bool whole = pread(fd, tail, n, start) == (ssize_t)n;
    tail[n] = 0;
    TuneRecords probe;
    tune_records_init(&probe);
    const char *why = NULL;
    whole = whole && parse_line(&probe, tail, 1, &why);
    tune_records_free(&probe);
    base_free(tail);
    if (whole ? write(fd, "\n", 1) != 1 : ftruncate(fd, start) != 0)
        return base_error(RV_ERR_IO, "%s: cannot repair the last line: %s", path, strerror(errno));
    return RV_OK;
}

rv_status tune_record_append(const char *path, const TuneRecord *r) {
    int fd = open(path, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return base_error(RV_ERR_IO, "%s: cannot open for appending: %s", path, strerror(errno));
    /* Tuners appending to one file take turns, so none mistakes another's
     * write in progress for a torn line and cuts it. */
    if (flock(fd, LOCK_EX) != 0) {
        rv_status st = base_error(RV_ERR_IO, "%s: cannot lock: %s", path, strerror(errno));
        close(fd);
        return st;
    }
    rv_status st = repair_tail(fd, path);
    if (st == RV_OK) {
        Buf b = {0};
        char *json = tune_record_to_json(r);
        buf_puts(&b, json);
        buf_putc(&b, '\n');
        base_free(json);
        ssize_t w = write(fd, b.data, b.len);
        if (w != (ssize_t)b.len)
            st = base_error(RV_ERR_IO, "%s: cannot append a record: %s", path,
                            w < 0 ? strerror(errno) : "short write");
        buf_free(&b);
    }
    if (close(fd) != 0 && st == RV_OK)
        st = base_error(RV_ERR_IO, "%s: %s", path, strerror(errno));
    return st;
}
