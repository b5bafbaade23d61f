/*
 * fuzz_sched.c — the schedule fuzzer: random schedules, compiled and
 * checked against the reference interpreter.
 *
 *     fuzz_sched [--seed S] [--count N] [--example FILE] [--index J]
 *                [--jobs J] [--steps K] [--budget W] [--repro-dir DIR] [-v]
 *
 * For every program (the .rv files of examples/ and tests/fuzz/, or the one given
 * with --example) the fuzzer drops the program's own `schedule` blocks and
 * builds schedules one step at a time: it reads the current stages and
 * their loops from rv_module_schedule_trace (the `# stage NAME (...): i j
 * k(r)` lines), draws a primitive and its arguments (split with awkward
 * factors, tile, fuse, reorder, parallel, vectorize, unroll, pad,
 * storage_pad, cache_read, cache_write, compute_at, compute_inline), and
 * applies it with rv_module_schedule. A step the scheduler rejects must
 * fail with RV_ERR_SCHEDULE and a message naming the primitive; it is
 * counted as rejected and dropped (the module is rebuilt from the kept
 * steps). Anything else is a bug: another status, a crash, a compile
 * error, a run error, or an output that differs from the interpreter's.
 *
 * The schedule is compiled at -O0 (quick to compile, into a temporary JIT
 * cache; -O1 for programs whose smallest sizes are already heavy, like
 * dense_gelu.rv) and run on two or three size assignments drawn from a per-program
 * pool: the low end of each size's range, 0 and 1 where allowed, small
 * primes and a few awkward larger values, and the high end, as long as the
 * work of the assignment stays under a budget (so big examples keep small
 * sizes). The pool's reference outputs are computed once by the
 * interpreter; every input and UF array is drawn by rv_bindings_randomize
 * with the run's seed, so `ravel run FILE --random SEED --size ... --check`
 * replays a failure with the same data.
 *
 * Each schedule is built, compiled and run in a child process (crashes and
 * hangs, after 300 s, become reports, not the end of the run), up to --jobs
 * at a time; the compiler's rejections at compile time (RV_ERR_SCHEDULE for
 * a schedule every step of which was accepted) are counted apart.
 * Schedule J of program F depends only on the seed, F's name and J, so
 * `fuzz_sched --seed S --example F --index J` replays it. A failure prints
 * the program, the sizes, the seed, the whole trace and the error; with
 * --repro-dir it also writes the program with the schedule as a .rv file.
 * The last line is "fuzz: N passed, N failed" (tests/run.sh reads it).
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <glob.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ravel.h"

/* ---- random numbers: splitmix64 ---- */

typedef struct Rng {
    uint64_t s;
} Rng;

static uint64_t rng_next(Rng *r) {
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [0, n). */
static int rng_int(Rng *r, int n) {
    return n <= 1 ? 0 : (int)(rng_next(r) % (uint64_t)n);
}

static int rng_chance(Rng *r, int percent) {
    return rng_int(r, 100) < percent;
}

static uint64_t hash_str(const char *s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

static const char *base_name(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* ---- small helpers ---- */

static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(2);
}

static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f)
        die("fuzz_sched: cannot open %s: %s", path, strerror(errno));
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (!s || fread(s, 1, (size_t)n, f) != (size_t)n)
        die("fuzz_sched: cannot read %s", path);
    s[n] = 0;
    fclose(f);
    return s;
}

static int is_ident_char(int c) {
    return isalnum(c) || c == '_';
}

/* The program without its `schedule NAME { ... }` blocks (comments kept;
 * a block starts a line, and braces inside comments do not count). */
static char *strip_schedules(const char *text) {
    size_t n = strlen(text);
    char *out = malloc(n + 1);
    size_t o = 0;
    const char *p = text;
    while (*p) {
        const char *line = p;
        while (*p == ' ' || *p == '\t')
            p++;
        if (strncmp(p, "schedule", 8) == 0 && !is_ident_char((unsigned char)p[8])) {
            int depth = 0, opened = 0;
            while (*p && !(opened && depth == 0)) {
                if (*p == '#') {
                    while (*p && *p != '\n')
                        p++;
                    continue;
                }
                if (*p == '{')
                    depth++, opened = 1;
                else if (*p == '}')
                    depth--;
                p++;
            }
            while (*p && *p != '\n')
                p++;
            if (*p)
                p++;
            continue;
        }
        p = line;
        while (*p && *p != '\n')
            out[o++] = *p++;
        if (*p)
            out[o++] = *p++;
    }
    out[o] = 0;
    return out;
}

/* ---- stages and loops, from the comment lines of a trace ---- */

#define MAX_NAME 64
#define MAX_LOOPS 32
#define MAX_STAGES 32

typedef struct Loop {
    char name[MAX_NAME];
    int reduce;
    int kinded; /* parallel, vector, unroll, ... */
} Loop;

typedef struct StageInfo {
    char name[MAX_NAME];
    char attach[8]; /* root, at, inline */
    char at[MAX_NAME];
    int nloops;
    Loop loops[MAX_LOOPS];
} StageInfo;

typedef struct Info {
    int nstages;
    StageInfo st[MAX_STAGES];
} Info;

/* Parses `# stage NAME (root|at X.v|inline[, padded]): i j k(r)[vector] ...`. */
static void parse_trace(const char *trace, Info *info) {
    memset(info, 0, sizeof *info);
    for (const char *p = trace; p && *p;) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        if (len > 8 && strncmp(p, "# stage ", 8) == 0 && info->nstages < MAX_STAGES) {
            char line[2048];
            if (len >= sizeof line)
                len = sizeof line - 1;
            memcpy(line, p, len);
            line[len] = 0;
            StageInfo *s = &info->st[info->nstages++];
            char *q = line + 8;
            sscanf(q, "%63[^ (]", s->name);
            q = strchr(q, '(');
            if (q) {
                sscanf(q + 1, "%7[a-z]", s->attach);
                if (strcmp(s->attach, "at") == 0)
                    sscanf(q + 4, "%63[^.]", s->at);
                q = strstr(q, "):");
            }
            char *tok = q ? strtok(q + 2, " ") : NULL;
            for (; tok && s->nloops < MAX_LOOPS; tok = strtok(NULL, " ")) {
                Loop *l = &s->loops[s->nloops++];
                size_t k = 0;
                while (tok[k] && tok[k] != '(' && tok[k] != '[' && k < MAX_NAME - 1)
                    k++;
                memcpy(l->name, tok, k);
                l->name[k] = 0;
                l->reduce = strstr(tok, "(r)") != NULL;
                l->kinded = strchr(tok, '[') != NULL;
            }
        }
        p = eol ? eol + 1 : NULL;
    }
}

/* ---- programs and their size pools ---- */

#define MAX_SIZES 8
#define MAX_TENSORS 32
#define MAX_POOL 16
#define MAX_READS 16

typedef struct Assign {
    int64_t val[MAX_SIZES];
    rv_bindings *ref;                /* sizes, inputs, UFs and the interpreter's results */
    rv_array *owned[2 * MAX_TENSORS]; /* the input and UF arrays ref borrows */
    int nowned;
    double work;
} Assign;

typedef struct Program {
    const char *path;
    char *text; /* without schedule blocks */
    rv_module *m;
    int nsizes;
    char size_name[MAX_SIZES][MAX_NAME];
    int64_t size_lo[MAX_SIZES], size_hi[MAX_SIZES];
    int ntensors;
    char tname[MAX_TENSORS][MAX_NAME];
    int is_input[MAX_TENSORS], is_output[MAX_TENSORS];
    int nreads[MAX_TENSORS];
    int reads[MAX_TENSORS][MAX_READS]; /* tensor indices each definition reads */
    double red_factor[MAX_TENSORS];    /* constant reduction extent, 0: one over sizes */
    Assign pool[MAX_POOL];
    int npool;
    uint64_t data_seed;
    int heavy; /* even the smallest assignment is over the work budget */
    /* counts */
    int passed, failed, rejected, applied, late_rejected;
} Program;

static int tensor_index(const Program *p, const char *name) {
    for (int i = 0; i < p->ntensors; i++)
        if (strcmp(p->tname[i], name) == 0)
            return i;
    return -1;
}

/* Sizes (with their ranges), tensors, what each definition reads and its
 * reduction extent, from the program text and the module. */
static void scan_program(Program *p) {
    for (int i = 0; i < rv_module_num_tensors(p->m) && p->ntensors < MAX_TENSORS; i++) {
        rv_tensor *t = rv_module_tensor_at(p->m, i);
        snprintf(p->tname[p->ntensors], MAX_NAME, "%s", rv_tensor_name(t));
        p->is_input[p->ntensors] = rv_tensor_is_input(t);
        p->is_output[p->ntensors] = rv_tensor_is_output(p->m, t);
        p->ntensors++;
    }
    for (const char *l = p->text; l && *l;) {
        const char *eol = strchr(l, '\n');
        size_t len = eol ? (size_t)(eol - l) : strlen(l);
        char line[4096];
        if (len >= sizeof line)
            len = sizeof line - 1;
        memcpy(line, l, len);
        line[len] = 0;
        char name[MAX_NAME];
        long long lo, hi;
        if (sscanf(line, "size %63s in %lld..%lld", name, &lo, &hi) == 3 &&
            p->nsizes < MAX_SIZES) {
            snprintf(p->size_name[p->nsizes], MAX_NAME, "%s", name);
            p->size_lo[p->nsizes] = lo;
            p->size_hi[p->nsizes] = hi;
            p->nsizes++;
        } else if (sscanf(line, "%63[A-Za-z0-9_]", name) == 1 && line[strlen(name)] == '[') {
            int t = tensor_index(p, name);
            if (t >= 0 && !p->is_input[t]) {
                /* identifiers after the name that are tensors: reads */
                for (char *q = line + strlen(name); *q;) {
                    if (*q == '#')
                        break;
                    if (isalpha((unsigned char)*q) || *q == '_') {
                        const char *start = q;
                        char id[MAX_NAME];
                        size_t k = 0;
                        while (is_ident_char((unsigned char)*q) && k < MAX_NAME - 1)
                            id[k++] = *q++;
                        id[k] = 0;
                        while (is_ident_char((unsigned char)*q))
                            q++;
                        int r = tensor_index(p, id);
                        if (r >= 0 && r != t && p->nreads[t] < MAX_READS) {
                            int dup = 0;
                            for (int x = 0; x < p->nreads[t]; x++)
                                dup |= p->reads[t][x] == r;
                            if (!dup)
                                p->reads[t][p->nreads[t]++] = r;
                        }
                        /* `(k < 768)`: a constant reduction extent */
                        const char *lt = q;
                        while (*lt == ' ')
                            lt++;
                        if (*lt == '<' && start > line && start[-1] == '(') {
                            long long ext;
                            char close;
                            if (sscanf(lt + 1, " %lld %c", &ext, &close) == 2 && close == ')')
                                p->red_factor[t] = fmax(p->red_factor[t], (double)ext);
                            else
                                p->red_factor[t] = fmax(p->red_factor[t], 0.5); /* symbolic */
                        }
                    } else {
                        q++;
                    }
                }
            }
        }
        l = eol ? eol + 1 : NULL;
    }
}

/* The interpreter's work on an assignment: elements computed times the
 * reduction extent of each definition (symbolic extents count as the
 * largest size). */
static double assign_work(const Program *p, const Assign *a) {
    int64_t maxsize = 1;
    for (int s = 0; s < p->nsizes; s++)
        if (a->val[s] > maxsize)
            maxsize = a->val[s];
    double w = 0;
    for (int t = 0; t < p->ntensors; t++) {
        if (p->is_input[t])
            continue;
        const rv_array *arr = rv_bindings_get_array(a->ref, p->tname[t]);
        double f = p->red_factor[t] >= 1 ? p->red_factor[t] : p->red_factor[t] > 0 ? (double)maxsize : 1;
        if (arr)
            w += (double)rv_array_numel(arr) * f;
    }
    return w;
}

static rv_array *copy_array(const rv_array *a) {
    rv_array *c = rv_array_new(rv_array_dtype(a), rv_array_ndim(a), rv_array_shape(a));
    memcpy(rv_array_data(c), rv_array_cdata(a),
           (size_t)rv_array_numel(a) * rv_dtype_size(rv_array_dtype(a)));
    return c;
}

static int same_shape(const rv_array *a, const rv_array *b) {
    if (rv_array_dtype(a) != rv_array_dtype(b) || rv_array_ndim(a) != rv_array_ndim(b))
        return 0;
    for (int d = 0; d < rv_array_ndim(a); d++)
        if (rv_array_shape(a)[d] != rv_array_shape(b)[d])
            return 0;
    return 1;
}

/* Same shape and the same values: what was drawn depends on the sizes
 * through value ranges too (`ufun col[...] in 0..C - 1`), not only shapes. */
static int same_array(const rv_array *a, const rv_array *b) {
    return same_shape(a, b) &&
           memcmp(rv_array_cdata(a), rv_array_cdata(b),
                  (size_t)rv_array_numel(a) * rv_dtype_size(rv_array_dtype(a))) == 0;
}

static void assign_free(Assign *a) {
    rv_bindings_free(a->ref);
    for (int i = 0; i < a->nowned; i++)
        if (a->owned[i])
            rv_array_free(a->owned[i]);
    memset(a, 0, sizeof *a);
}

/* Draws the arrays of one assignment (rv_bindings_randomize with the
 * program's data seed) and runs the interpreter. Arrays whose shape does
 * not change with the sizes are shared with earlier assignments (the same
 * seed draws the same values), so a 30000 x 512 embedding table exists
 * once. Returns 0 when the interpreter rejects the assignment. */
static int assign_make(Program *p, Assign *a) {
    rv_bindings *draw = rv_bindings_new(p->m);
    for (int s = 0; s < p->nsizes; s++)
        rv_bindings_set_size(draw, p->size_name[s], a->val[s]);
    if (p->npool >= 2) {
        /* the same seed draws the same values: reuse what did not change shape */
        const rv_bindings *x = p->pool[0].ref, *y = p->pool[1].ref;
        for (int t = 0; t < p->ntensors; t++) {
            const rv_array *ax = rv_bindings_get_array(x, p->tname[t]);
            const rv_array *ay = rv_bindings_get_array(y, p->tname[t]);
            if (p->is_input[t] && ax && ay && same_shape(ax, ay))
                rv_bindings_set_array(draw, p->tname[t], ax);
        }
    }
    if (rv_bindings_randomize(draw, p->data_seed) != RV_OK) {
        fprintf(stderr, "fuzz_sched: %s: cannot draw inputs: %s\n", p->path, rv_last_error());
        rv_bindings_free(draw);
        return 0;
    }
    a->ref = rv_bindings_new(p->m);
    for (int s = 0; s < p->nsizes; s++)
        rv_bindings_set_size(a->ref, p->size_name[s], a->val[s]);
    int nnames = 0;
    const char *names[2 * MAX_TENSORS];
    for (int i = 0; i < rv_module_num_ufuns(p->m) && nnames < MAX_TENSORS; i++)
        names[nnames++] = rv_ufun_name(rv_module_ufun_at(p->m, i));
    for (int t = 0; t < p->ntensors; t++)
        if (p->is_input[t])
            names[nnames++] = p->tname[t];
    for (int i = 0; i < nnames; i++) {
        const rv_array *src = rv_bindings_get_array(draw, names[i]);
        const rv_array *use = NULL;
        for (int e = 0; e < p->npool && !use; e++) {
            const rv_array *o = rv_bindings_get_array(p->pool[e].ref, names[i]);
            if (o && same_array(o, src))
                use = o;
        }
        if (!use) {
            rv_array *c = copy_array(src);
            a->owned[a->nowned++] = c;
            use = c;
        }
        rv_bindings_set_array(a->ref, names[i], use);
    }
    rv_bindings_free(draw);
    if (rv_interp_run(p->m, a->ref) != RV_OK) {
        fprintf(stderr, "fuzz_sched: %s: interpreter: %s\n", p->path, rv_last_error());
        return 0;
    }
    a->work = assign_work(p, a);
    return 1;
}

/* Candidate values of size s: the ends of its range, 0 and 1, small
 * primes and a few values just past powers of two. */
static int size_candidates(const Program *p, int s, int64_t *out) {
    static const int64_t vals[] = {0, 1, 2, 3, 5, 7, 11, 13, 17, 31, 33, 65, 101};
    int n = 0;
    int64_t lo = p->size_lo[s], hi = p->size_hi[s];
    out[n++] = lo;
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++)
        if (vals[i] > lo && vals[i] < hi)
            out[n++] = vals[i];
    if (hi > lo)
        out[n++] = hi;
    return n;
}

/* Fills the pool: with one size, every candidate in increasing order while
 * the work stays under the budget (extrapolated from the last two before
 * running the interpreter, so a huge high end is never tried); with
 * several, the low ends, the high ends, then random mixtures under the
 * budget. Input arrays whose shape is the same for the first two
 * assignments are bound for the later ones instead of drawn again. */
static void build_pool(Program *p, uint64_t seed, double budget) {
    Rng r = {seed ^ hash_str(base_name(p->path)) ^ 0x5eedull};
    int64_t cand[MAX_SIZES][32];
    int ncand[MAX_SIZES];
    for (int s = 0; s < p->nsizes; s++)
        ncand[s] = size_candidates(p, s, cand[s]);
    int tries = p->nsizes == 1 ? ncand[0] : 40;
    for (int k = 0; k < tries && p->npool < MAX_POOL; k++) {
        Assign *a = &p->pool[p->npool];
        memset(a, 0, sizeof *a);
        for (int s = 0; s < p->nsizes; s++) {
            int c = p->nsizes == 1 ? k : k == 0 ? 0 : k == 1 ? ncand[s] - 1 : rng_int(&r, ncand[s]);
            a->val[s] = cand[s][c];
        }
        int dup = 0;
        for (int e = 0; e < p->npool && !dup; e++)
            dup = memcmp(p->pool[e].val, a->val, sizeof a->val) == 0;
        if (dup)
            continue;
        if (p->nsizes == 1 && p->npool >= 2) {
            const Assign *x = &p->pool[p->npool - 2], *y = &p->pool[p->npool - 1];
            double d = 1;
            if (x->work > 0 && y->work > x->work && y->val[0] > x->val[0] && x->val[0] > 0)
                d = log(y->work / x->work) / log((double)y->val[0] / (double)x->val[0]);
            double est = y->work * pow((double)a->val[0] / (double)(y->val[0] ? y->val[0] : 1),
                                       d < 1 ? 1 : d);
            if (est > 4 * budget)
                break;
        }
        if (!assign_make(p, a)) {
            assign_free(a);
            continue;
        }
        if (p->npool > 0 && a->work > budget) {
            assign_free(a);
            if (p->nsizes == 1)
                break; /* the rest are larger */
            continue;
        }
        p->npool++;
    }
}

static void format_sizes(const Program *p, const Assign *a, char *buf, size_t n, const char *pre) {
    size_t o = 0;
    buf[0] = 0;
    for (int s = 0; s < p->nsizes && o < n; s++)
        o += (size_t)snprintf(buf + o, n - o, "%s%s%s=%lld", s ? " " : "", pre, p->size_name[s],
                              (long long)a->val[s]);
}

/* ---- generating one step ---- */

typedef struct Gen {
    Program *p;
    Rng r;
    int counter; /* fresh names */
    Info info;
} Gen;

static const int64_t factors[] = {1, 2, 3, 4, 7, 8, 16, 32, 64, 100};

static int64_t pick_factor(Gen *g) {
    return factors[rng_int(&g->r, (int)(sizeof factors / sizeof factors[0]))];
}

/* A short stem of a loop name for the names of its parts. */
static void stem(const char *name, char *out) {
    size_t k = 0;
    while (name[k] && isalpha((unsigned char)name[k]) && k < 6)
        out[k] = name[k], k++;
    if (k == 0)
        out[k++] = 'v';
    out[k] = 0;
}

static const Loop *pick_loop(Gen *g, const StageInfo *s, int prefer_inner) {
    if (s->nloops == 0)
        return NULL;
    if (prefer_inner && rng_chance(&g->r, 60))
        return &s->loops[s->nloops - 1 - rng_int(&g->r, s->nloops > 1 ? 2 : 1)];
    return &s->loops[rng_int(&g->r, s->nloops)];
}

/* A stage other than `s` to place: stages already attached to s, tensors s
 * reads, or (sometimes) any stage. */
static const char *pick_producer(Gen *g, const StageInfo *s) {
    Program *p = g->p;
    const char *cands[64];
    int n = 0;
    for (int i = 0; i < g->info.nstages; i++)
        if (strcmp(g->info.st[i].at, s->name) == 0 && strcmp(g->info.st[i].attach, "at") == 0)
            cands[n++] = g->info.st[i].name;
    int t = tensor_index(p, s->name);
    for (int k = 0; t >= 0 && k < p->nreads[t] && n < 64; k++)
        if (!p->is_input[p->reads[t][k]])
            cands[n++] = p->tname[p->reads[t][k]];
    if (n == 0 || rng_chance(&g->r, 15)) {
        const StageInfo *o = &g->info.st[rng_int(&g->r, g->info.nstages)];
        return o->name;
    }
    return cands[rng_int(&g->r, n)];
}

/* A tensor for cache_read in stage s: what its definition reads, or any. */
static const char *pick_read(Gen *g, const StageInfo *s) {
    Program *p = g->p;
    int t = tensor_index(p, s->name);
    if (t >= 0 && p->nreads[t] > 0 && !rng_chance(&g->r, 15))
        return p->tname[p->reads[t][rng_int(&g->r, p->nreads[t])]];
    if (rng_chance(&g->r, 50) || g->info.nstages == 0)
        return p->tname[rng_int(&g->r, p->ntensors)];
    return g->info.st[rng_int(&g->r, g->info.nstages)].name;
}

static void cache_opts(Gen *g, char *buf, size_t n, int allow_align) {
    size_t o = 0;
    buf[0] = 0;
    if (rng_chance(&g->r, 50))
        o += (size_t)snprintf(buf + o, n - o, ", \"local\"");
    if (rng_chance(&g->r, 50))
        o += (size_t)snprintf(buf + o, n - o, ", pad=1");
    if (allow_align && rng_chance(&g->r, 30)) {
        static const int al[] = {2, 4, 8, 16};
        snprintf(buf + o, n - o, ", align=%d", al[rng_int(&g->r, 4)]);
    }
}

/* Draws a stage and one step for it; returns 0 if nothing applies. */
static int gen_step(Gen *g, char *stage, char *step, size_t n) {
    const StageInfo *ss[MAX_STAGES];
    int ns = 0;
    for (int i = 0; i < g->info.nstages; i++)
        if (strcmp(g->info.st[i].attach, "inline") != 0)
            ss[ns++] = &g->info.st[i];
    if (ns == 0)
        return 0;
    const StageInfo *s = ss[rng_int(&g->r, ns)];
    snprintf(stage, MAX_NAME, "%s", s->name);
    int c = ++g->counter;
    char a[16], b[16];
    int w = rng_int(&g->r, 100);
    const Loop *v = pick_loop(g, s, 0);
    if (!v && w < 70)
        w = 70 + rng_int(&g->r, 30);
    if (w < 20) { /* split */
        stem(v->name, a);
        snprintf(step, n, "%so%d, %si%d = split(%s, %lld%s)", a, c, a, c, v->name,
                 (long long)pick_factor(g), rng_chance(&g->r, 20) ? ", tail=\"guard\"" : "");
    } else if (w < 27) { /* tile */
        if (s->nloops < 2)
            return 0;
        int i = rng_int(&g->r, s->nloops - 1);
        int j = rng_chance(&g->r, 70) ? i + 1 : rng_int(&g->r, s->nloops);
        stem(s->loops[i].name, a);
        stem(s->loops[j].name, b);
        snprintf(step, n, "%so%d, %so%d, %si%d, %si%d = tile(%s, %s, %lld, %lld%s)", a, c, b, c, a,
                 c, b, c, s->loops[i].name, s->loops[j].name, (long long)pick_factor(g),
                 (long long)pick_factor(g), rng_chance(&g->r, 15) ? ", tail=\"guard\"" : "");
    } else if (w < 34) { /* fuse */
        if (s->nloops < 2)
            return 0;
        int i = rng_int(&g->r, s->nloops - 1);
        snprintf(step, n, "f%d = fuse(%s, %s)", c, s->loops[i].name, s->loops[i + 1].name);
    } else if (w < 44) { /* reorder */
        if (s->nloops < 2)
            return 0;
        int idx[MAX_LOOPS];
        for (int i = 0; i < s->nloops; i++)
            idx[i] = i;
        for (int i = s->nloops - 1; i > 0; i--) {
            int j = rng_int(&g->r, i + 1), t = idx[i];
            idx[i] = idx[j];
            idx[j] = t;
        }
        int k = 2 + rng_int(&g->r, s->nloops - 1);
        size_t o = (size_t)snprintf(step, n, "reorder(");
        for (int i = 0; i < k; i++)
            o += (size_t)snprintf(step + o, n - o, "%s%s", i ? ", " : "", s->loops[idx[i]].name);
        snprintf(step + o, n - o, ")");
    } else if (w < 50) { /* parallel */
        snprintf(step, n, "parallel(%s)", pick_loop(g, s, 0)->name);
    } else if (w < 58) {
        snprintf(step, n, "vectorize(%s)", pick_loop(g, s, 1)->name);
    } else if (w < 63) {
        snprintf(step, n, "unroll(%s)", pick_loop(g, s, 1)->name);
    } else if (w < 66) {
        static const int pads[] = {2, 3, 4, 8, 16};
        snprintf(step, n, "pad(%s, %d)", v->name, pads[rng_int(&g->r, 5)]);
    } else if (w < 70) {
        static const int pads[] = {2, 3, 4, 8, 16, 32};
        snprintf(step, n, "storage_pad(%s, %d)", v->name, pads[rng_int(&g->r, 6)]);
    } else if (w < 79) { /* cache_read */
        char opts[64];
        cache_opts(g, opts, sizeof opts, 1);
        snprintf(step, n, "Lr%d = cache_read(%s%s)", c, pick_read(g, s), opts);
    } else if (w < 85) { /* cache_write, mostly of stages with a reduction */
        int has_reduce = 0;
        for (int i = 0; i < s->nloops; i++)
            has_reduce |= s->loops[i].reduce;
        if (!has_reduce && !rng_chance(&g->r, 10))
            return 0;
        char opts[64];
        cache_opts(g, opts, sizeof opts, 1);
        snprintf(step, n, "Lw%d = cache_write(%s%s)", c, s->name, opts);
    } else if (w < 94) { /* compute_at */
        const char *pr = pick_producer(g, s);
        if (s->nloops == 0 || rng_chance(&g->r, 20))
            snprintf(step, n, "compute_at(%s)", pr);
        else
            snprintf(step, n, "compute_at(%s, %s)", pr, pick_loop(g, s, 0)->name);
    } else { /* compute_inline */
        snprintf(step, n, "compute_inline(%s)", pick_producer(g, s));
    }
    return 1;
}

/* ---- one schedule, in a child process ---- */

typedef struct Kept {
    char stage[MAX_NAME];
    char step[512];
} Kept;

enum {
    EXIT_PASS = 0,
    EXIT_LATE_REJECT = 3, /* RV_ERR_SCHEDULE from the compiler */
    EXIT_FAIL = 10,
};

static const char *opt_cache;
static int opt_steps = 8;
static int opt_verbose;

static rv_module *rebuild(const Program *p, const Kept *kept, int n) {
    rv_module *m;
    if (rv_module_parse(p->path, p->text, &m) != RV_OK)
        die("fuzz_sched: %s: %s", p->path, rv_last_error());
    for (int i = 0; i < n; i++)
        if (rv_module_schedule(m, kept[i].stage, kept[i].step) != RV_OK)
            die("fuzz_sched: replaying a kept step failed: %s", rv_last_error());
    return m;
}

/* Compares one output (tools/cmd_compile.c's tolerance: f32 1e-4 and f64
 * 1e-10 relative to the magnitude, integers exact, plus 1e-4 absolute for
 * sums of f32). */
static int compare(const char *name, const rv_array *got, const rv_array *want) {
    int64_t n = rv_array_numel(want);
    if (!got || rv_array_numel(got) != n) {
        printf("%s: MISMATCH: element count %lld, expected %lld\n", name,
               (long long)(got ? rv_array_numel(got) : -1), (long long)n);
        return 0;
    }
    rv_dtype t = rv_array_dtype(want);
    double tol = t == RV_F32 ? 1e-4 : t == RV_F64 ? 1e-10 : 0.0;
    double atol = t == RV_F32 ? 1e-4 : 0.0;
    for (int64_t i = 0; i < n; i++) {
        double x = rv_array_get_f64(got, i), y = rv_array_get_f64(want, i);
        int bad = isnan(x) != isnan(y) || (!isnan(x) && fabs(x - y) > tol * (1.0 + fabs(y)) + atol);
        if (bad) {
            printf("%s: MISMATCH at flat index %lld of %lld: compiled %.9g, interpreter %.9g\n",
                   name, (long long)i, (long long)n, x, y);
            return 0;
        }
    }
    return 1;
}

/* Runs the compiled program on assignment a and compares its outputs. */
static int check_assign(const Program *p, rv_module *m, rv_program *prog, const Assign *a) {
    rv_bindings *b = rv_bindings_new(m);
    for (int s = 0; s < p->nsizes; s++)
        rv_bindings_set_size(b, p->size_name[s], a->val[s]);
    for (int i = 0; i < rv_module_num_ufuns(m); i++) {
        const char *n = rv_ufun_name(rv_module_ufun_at(m, i));
        rv_bindings_set_array(b, n, rv_bindings_get_array(a->ref, n));
    }
    for (int t = 0; t < p->ntensors; t++)
        if (p->is_input[t])
            rv_bindings_set_array(b, p->tname[t], rv_bindings_get_array(a->ref, p->tname[t]));
    int ok = 1;
    if (rv_program_run(prog, b) != RV_OK) {
        printf("RUN ERROR: %s\n", rv_last_error());
        ok = 0;
    }
    for (int t = 0; ok && t < p->ntensors; t++)
        if (p->is_output[t])
            ok &= compare(p->tname[t], rv_bindings_get_array(b, p->tname[t]),
                          rv_bindings_get_array(a->ref, p->tname[t]));
    rv_bindings_free(b);
    return ok;
}

static int mentions_prim(const char *msg, const char *step) {
    /* the primitive is the identifier before '(' */
    const char *paren = strchr(step, '(');
    const char *q = paren;
    while (q > step && is_ident_char((unsigned char)q[-1]))
        q--;
    char prim[64];
    size_t k = (size_t)(paren - q);
    if (k >= sizeof prim)
        k = sizeof prim - 1;
    memcpy(prim, q, k);
    prim[k] = 0;
    strcat(prim, ":");
    return msg && msg[0] && strstr(msg, prim) != NULL;
}

/* Builds schedule j of program p, compiles it and runs it on 2-3 pool
 * assignments. Output goes to stdout (the parent's report file); the
 * status line "@@ applied A rejected R sizes I,J,K" comes last. */
static int run_one(Program *p, uint64_t seed, int j) {
    Gen g = {p, {seed ^ hash_str(base_name(p->path)) ^ ((uint64_t)(j + 1) * 0x9e3779b97f4a7c15ull)},
             0, {0}};
    rng_next(&g.r);
    Kept kept[64];
    int nkept = 0, rejected = 0;
    int target = 1 + rng_int(&g.r, opt_steps);
    rv_module *m = rebuild(p, kept, 0);
    for (int attempt = 0; attempt < 4 * target && nkept < target && nkept < 64; attempt++) {
        char *tr = rv_module_schedule_trace(m);
        if (!tr) {
            printf("BUG: the trace of kept steps fails: %s\n", rv_last_error());
            return EXIT_FAIL;
        }
        parse_trace(tr, &g.info);
        rv_free(tr);
        Kept k;
        if (!gen_step(&g, k.stage, k.step, sizeof k.step))
            continue;
        if (opt_verbose)
            printf("try  schedule %s { %s }\n", k.stage, k.step);
        rv_status st = rv_module_schedule(m, k.stage, k.step);
        if (st == RV_OK)
            st = rv_module_check_schedule(m);
        if (st == RV_OK) {
            kept[nkept++] = k;
            continue;
        }
        const char *msg = rv_last_error();
        if (st != RV_ERR_SCHEDULE || !mentions_prim(msg, k.step)) {
            printf("BUG: step `schedule %s { %s }` failed with %s (expected RV_ERR_SCHEDULE naming "
                   "the primitive): %s\n",
                   k.stage, k.step, rv_status_name(st), msg);
            printf("=== kept steps before it\n");
            for (int i = 0; i < nkept; i++)
                printf("schedule %s { %s }\n", kept[i].stage, kept[i].step);
            return EXIT_FAIL;
        }
        if (opt_verbose)
            printf("     rejected: %s\n", msg);
        rejected++;
        rv_module_free(m);
        m = rebuild(p, kept, nkept);
    }
    char *tr = rv_module_schedule_trace(m);
    printf("=== trace\n%s", tr ? tr : "(none)\n");
    rv_free(tr);
    /* the assignments */
    int pick[3], npick = p->npool < 2 ? p->npool : 2 + rng_int(&g.r, p->npool < 3 ? 1 : 2);
    for (int i = 0; i < npick; i++) {
        int again;
        do {
            pick[i] = rng_int(&g.r, p->npool);
            again = 0;
            for (int k = 0; k < i; k++)
                again |= pick[k] == pick[i];
        } while (again);
    }
    printf("@@ applied %d rejected %d pool", nkept, rejected);
    for (int i = 0; i < npick; i++)
        printf(" %d", pick[i]);
    printf("\n");
    rv_compile_options opt = {0};
    /* -O0 compiles fastest; programs whose smallest assignment is over the
     * budget (dense_gelu's 16 x 3072 x 768) spend longer running than
     * compiling, so they get -O1 */
    opt.cflags = p->heavy ? "-O1" : "-O0";
    opt.cache_dir = opt_cache;
    rv_program *prog;
    rv_status st = rv_program_compile(m, &opt, &prog);
    if (st == RV_ERR_SCHEDULE) {
        printf("LATE REJECT (compile): %s\n", rv_last_error());
        return EXIT_LATE_REJECT;
    }
    if (st != RV_OK) {
        printf("COMPILE ERROR (%s): %s\n", rv_status_name(st), rv_last_error());
        return EXIT_FAIL;
    }
    rv_program_counters pc;
    rv_program_stats(prog, &pc);
    printf("compiled in %.3fs\n", pc.compile_seconds);
    int ok = 1;
    for (int i = 0; i < npick && ok; i++) {
        char sz[256];
        format_sizes(p, &p->pool[pick[i]], sz, sizeof sz, "");
        printf("run %s\n", sz);
        ok = check_assign(p, m, prog, &p->pool[pick[i]]);
    }
    rv_program_free(prog);
    rv_module_free(m);
    return ok ? EXIT_PASS : EXIT_FAIL;
}

/* ---- the parent: pools, children, reports ---- */

typedef struct Slot {
    pid_t pid;
    FILE *out;
    Program *p;
    int j;
} Slot;

static uint64_t opt_seed = 1;
static const char *opt_repro_dir;
static int total_passed, total_failed;

/* Writes FILE with the schedule blocks of `trace` appended to the program. */
static void write_repro(const Program *p, int j, const char *trace, const char *why) {
    if (!opt_repro_dir)
        return;
    mkdir(opt_repro_dir, 0777);
    char path[1024];
    char stemname[256];
    snprintf(stemname, sizeof stemname, "%s", base_name(p->path));
    char *dot = strrchr(stemname, '.');
    if (dot)
        *dot = 0;
    snprintf(path, sizeof path, "%s/%s_s%llu_j%d.rv", opt_repro_dir, stemname,
             (unsigned long long)opt_seed, j);
    FILE *f = fopen(path, "w");
    if (!f)
        return;
    fprintf(f, "# fuzz_sched --seed %llu --example %s --index %d\n# %s\n",
            (unsigned long long)opt_seed, p->path, j, why);
    fputs(p->text, f);
    fputs("\n", f);
    /* the trace's schedule blocks, without its stage comments */
    for (const char *l = trace; l && *l;) {
        const char *eol = strchr(l, '\n');
        size_t len = eol ? (size_t)(eol - l + 1) : strlen(l);
        if (l[0] == '@')
            break;
        if (l[0] != '#')
            fwrite(l, 1, len, f);
        l += len;
    }
    fclose(f);
    printf("  reproducer: %s\n", path);
}

static void finish(Slot *s, int status) {
    Program *p = s->p;
    fflush(s->out);
    rewind(s->out);
    /* read the child's output */
    size_t cap = 1 << 16, len = 0;
    char *text = malloc(cap);
    size_t got;
    while ((got = fread(text + len, 1, cap - len - 1, s->out)) > 0) {
        len += got;
        if (cap - len < 4096)
            text = realloc(text, cap *= 2);
    }
    text[len] = 0;
    fclose(s->out);
    int applied = 0, rejected = 0;
    int pool[3] = {-1, -1, -1};
    const char *at = strstr(text, "@@ applied ");
    if (at)
        sscanf(at, "@@ applied %d rejected %d pool %d %d %d", &applied, &rejected, &pool[0],
               &pool[1], &pool[2]);
    p->applied += applied;
    p->rejected += rejected;
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (code == EXIT_PASS) {
        p->passed++;
        total_passed++;
    } else if (code == EXIT_LATE_REJECT) {
        p->late_rejected++; /* neither passed nor failed: counted apart */
    } else {
        p->failed++;
        total_failed++;
        char why[256];
        if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM)
            snprintf(why, sizeof why, "timed out after 300 s (a hang, or a very loaded machine)");
        else if (WIFSIGNALED(status))
            snprintf(why, sizeof why, "crashed with signal %d (%s)", WTERMSIG(status),
                     strsignal(WTERMSIG(status)));
        else
            snprintf(why, sizeof why, "failed (exit %d)", code);
        printf("FAIL %s schedule #%d %s\n", p->path, s->j, why);
        printf("  replay: fuzz_sched --seed %llu --example %s --index %d -v\n",
               (unsigned long long)opt_seed, p->path, s->j);
        for (int i = 0; i < 3; i++) {
            if (pool[i] < 0)
                continue;
            char sz[256];
            format_sizes(p, &p->pool[pool[i]], sz, sizeof sz, "--size ");
            printf("  sizes: %s   (data: --random %llu)\n", sz, (unsigned long long)p->data_seed);
        }
        const char *trace = strstr(text, "=== trace\n");
        if (trace)
            write_repro(p, s->j, trace + 10, why);
        printf("%s", text);
        printf("---- end of schedule #%d\n", s->j);
    }
    if (opt_verbose && (code == EXIT_PASS || code == EXIT_LATE_REJECT))
        printf("%s", text);
    fflush(stdout);
    free(text);
    s->pid = 0;
}

static void launch(Slot *s, Program *p, int j) {
    s->p = p;
    s->j = j;
    s->out = tmpfile();
    if (!s->out)
        die("fuzz_sched: tmpfile: %s", strerror(errno));
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0)
        die("fuzz_sched: fork: %s", strerror(errno));
    if (pid == 0) {
        int fd = fileno(s->out);
        dup2(fd, 1);
        dup2(fd, 2);
        setvbuf(stdout, NULL, _IONBF, 0);
        alarm(300); /* a hang; generous, since loaded machines are slow */
        int code = run_one(p, opt_seed, j);
        fflush(stdout);
        _exit(code);
    }
    s->pid = pid;
}

static void remove_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    char path[4096];
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    closedir(d);
    rmdir(dir);
}

static void usage(void) {
    fprintf(stderr, "usage: fuzz_sched [--seed S] [--count N] [--example FILE]... [--index J] "
                    "[--jobs J] [--steps K] [--budget W] [--repro-dir DIR] [-v]\n");
    exit(2);
}

int main(int argc, char **argv) {
    long count = 300;
    int jobs = 2, index = -1;
    double budget = 1.5e6;
    const char *examples[64];
    int nexamples = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "-v") == 0) {
            opt_verbose = 1;
            continue;
        }
        if (!v)
            usage();
        if (strcmp(a, "--seed") == 0)
            opt_seed = strtoull(v, NULL, 10);
        else if (strcmp(a, "--count") == 0)
            count = strtol(v, NULL, 10);
        else if (strcmp(a, "--example") == 0 && nexamples < 64)
            examples[nexamples++] = v;
        else if (strcmp(a, "--index") == 0)
            index = atoi(v);
        else if (strcmp(a, "--jobs") == 0)
            jobs = atoi(v) < 1 ? 1 : atoi(v) > 64 ? 64 : atoi(v);
        else if (strcmp(a, "--steps") == 0)
            opt_steps = atoi(v) < 1 ? 1 : atoi(v);
        else if (strcmp(a, "--budget") == 0)
            budget = atof(v);
        else if (strcmp(a, "--repro-dir") == 0)
            opt_repro_dir = v;
        else
            usage();
        i++;
    }
    glob_t gl = {0};
    if (nexamples == 0) {
        glob("examples/*.rv", 0, NULL, &gl);
        glob("tests/fuzz/*.rv", GLOB_APPEND, NULL, &gl);
        for (size_t i = 0; i < gl.gl_pathc && nexamples < 64; i++)
            examples[nexamples++] = gl.gl_pathv[i];
        if (nexamples == 0)
            die("fuzz_sched: no examples (run it from the repository root)");
    }
    char cache[] = "/tmp/fuzz_sched_cache.XXXXXX";
    if (!mkdtemp(cache))
        die("fuzz_sched: mkdtemp: %s", strerror(errno));
    opt_cache = cache;
    time_t t0 = time(NULL);

    Program *progs = calloc((size_t)nexamples, sizeof(Program));
    for (int e = 0; e < nexamples; e++) {
        Program *p = &progs[e];
        p->path = examples[e];
        char *text = read_text(p->path);
        p->text = strip_schedules(text);
        free(text);
        if (rv_module_parse(p->path, p->text, &p->m) != RV_OK)
            die("fuzz_sched: %s: %s", p->path, rv_last_error());
        scan_program(p);
        p->data_seed = opt_seed;
        struct timespec ta, tb;
        clock_gettime(CLOCK_MONOTONIC, &ta);
        build_pool(p, opt_seed, budget);
        clock_gettime(CLOCK_MONOTONIC, &tb);
        if (p->npool == 0)
            die("fuzz_sched: %s: no size assignment the interpreter accepts", p->path);
        p->heavy = p->pool[0].work > budget;
        printf("%-32s pool:", p->path);
        for (int a = 0; a < p->npool; a++) {
            char sz[256];
            format_sizes(p, &p->pool[a], sz, sizeof sz, "");
            printf(" [%s]", sz);
        }
        printf("%s (%.1fs)\n", p->heavy ? " heavy, -O1" : "", (double)(tb.tv_sec - ta.tv_sec) + 1e-9 * (double)(tb.tv_nsec - ta.tv_nsec));
    }
    fflush(stdout);

    /* One compile in the parent asks the compiler for its identity (the JIT
     * key), so the children do not each run `cc --version`. */
    {
        rv_compile_options opt = {0};
        opt.cflags = "-O0";
        opt.cache_dir = opt_cache;
        rv_program *prog;
        if (rv_program_compile(progs[0].m, &opt, &prog) == RV_OK)
            rv_program_free(prog);
    }

    Slot slots[64] = {{0}};
    long total = index >= 0 ? nexamples : count, next = 0, done = 0;
    int active = 0;
    while (next < total || active > 0) {
        if (next < total && active < jobs) {
            int e = (int)(next % nexamples);
            int j = index >= 0 ? index : (int)(next / nexamples);
            next++;
            for (int s = 0; s < jobs; s++)
                if (!slots[s].pid) {
                    launch(&slots[s], &progs[e], j);
                    active++;
                    break;
                }
            continue;
        }
        int status;
        pid_t pid = wait(&status);
        if (pid < 0)
            die("fuzz_sched: wait: %s", strerror(errno));
        for (int s = 0; s < jobs; s++)
            if (slots[s].pid == pid) {
                finish(&slots[s], status);
                active--;
                done++;
                if (done % 500 == 0) {
                    printf("... %ld of %ld schedules: %d passed, %d failed (%lds)\n", done, total,
                           total_passed, total_failed, (long)(time(NULL) - t0));
                    fflush(stdout);
                }
            }
    }

    long applied = 0, rejected = 0, late = 0;
    printf("\n%-32s %7s %7s %7s %9s %9s\n", "program", "passed", "failed", "late-rej", "steps",
           "rejected");
    for (int e = 0; e < nexamples; e++) {
        Program *p = &progs[e];
        printf("%-32s %7d %7d %7d %9d %9d\n", p->path, p->passed, p->failed, p->late_rejected,
               p->applied, p->rejected);
        applied += p->applied;
        rejected += p->rejected;
        late += p->late_rejected;
        for (int a = 0; a < p->npool; a++)
            assign_free(&p->pool[a]);
        rv_module_free(p->m);
        free(p->text);
    }
    printf("%ld schedules (seed %llu, %lds): %d passed, %ld rejected by the compiler, %d failed; "
           "%ld steps applied, %ld steps rejected\n",
           total, (unsigned long long)opt_seed, (long)(time(NULL) - t0), total_passed, late,
           total_failed, applied, rejected);
    printf("fuzz: %d passed, %d failed\n", total_passed, total_failed);
    free(progs);
    globfree(&gl);
    remove_dir(cache);
    return total_failed ? 1 : 0;
}
