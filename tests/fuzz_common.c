/*
 * fuzz_common.c — the pieces the schedule fuzzer (fuzz_sched.c) and the
 * program fuzzer (fuzz_programs.c) share; the map is in fuzz_common.h.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fuzz_common.h"

/* ---- random numbers: splitmix64 ---- */

uint64_t rng_next(Rng *r) {
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [0, n). */
int rng_int(Rng *r, int n) {
    return n <= 1 ? 0 : (int)(rng_next(r) % (uint64_t)n);
}

int rng_chance(Rng *r, int percent) {
    return rng_int(r, 100) < percent;
}

uint64_t fuzz_hash_str(const char *s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

const char *fuzz_base_name(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* ---- small helpers ---- */

void fuzz_die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(2);
}

char *fuzz_read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f)
        fuzz_die("fuzz: cannot open %s: %s", path, strerror(errno));
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (!s || fread(s, 1, (size_t)n, f) != (size_t)n)
        fuzz_die("fuzz: cannot read %s", path);
    s[n] = 0;
    fclose(f);
    return s;
}

int fuzz_is_ident_char(int c) {
    return isalnum(c) || c == '_';
}

/* ---- stages and loops, from rv_module_schedule_info ---- */

/* Does printed expression e mention identifier `name`? */
static int mentions(const char *e, const char *name) {
    size_t n = strlen(name);
    for (const char *t = e; e && (t = strstr(t, name)); t++)
        if ((t == e || !fuzz_is_ident_char((unsigned char)t[-1])) &&
            !fuzz_is_ident_char((unsigned char)t[n]))
            return 1;
    return 0;
}

int fuzz_schedule_info(rv_module *m, Info *info) {
    memset(info, 0, sizeof *info);
    rv_schedule_info *si = rv_module_schedule_info(m);
    if (!si)
        return 0;
    for (int i = 0; i < rv_schedule_info_num_stages(si) && info->nstages < MAX_STAGES; i++) {
        const rv_stage_info *q = rv_schedule_info_stage(si, i);
        StageInfo *s = &info->st[info->nstages++];
        snprintf(s->name, MAX_NAME, "%s", q->name);
        s->attach = q->attach;
        if (q->attach == RV_ATTACH_AT)
            snprintf(s->at, MAX_NAME, "%s", q->at_stage);
        s->kind = q->kind;
        if (q->kind == RV_STAGE_PART)
            snprintf(s->source, MAX_NAME, "%s", q->source);
        for (int k = 0; k < q->nnotes; k++)
            s->notes |= 1u << q->notes[k].kind;
        for (int k = 0; k < q->nloops && s->nloops < MAX_LOOPS; k++) {
            Loop *l = &s->loops[s->nloops++];
            snprintf(l->name, MAX_NAME, "%s", q->loops[k].name);
            l->reduce = q->loops[k].reduce;
            l->kind = q->loops[k].kind;
            for (int j = 0; j < q->nloops && !l->row; j++)
                l->row = j != k && mentions(q->loops[j].extent, l->name);
        }
    }
    rv_schedule_info_free(si);
    return 1;
}

/* ---- programs and their size assignments ---- */

int fuzz_tensor_index(const Program *p, const char *name) {
    for (int i = 0; i < p->ntensors; i++)
        if (strcmp(p->tname[i], name) == 0)
            return i;
    return -1;
}

void fuzz_scan_program(Program *p) {
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
        } else if (sscanf(line + strspn(line, " "), "%63[A-Za-z0-9_]", name) == 1 &&
                   line[strspn(line, " ") + strlen(name)] == '[') {
            /* (a recursion group's members are indented) */
            int t = fuzz_tensor_index(p, name);
            if (t >= 0 && !p->is_input[t]) {
                /* identifiers after the name that are tensors: reads */
                for (char *q = line + strspn(line, " ") + strlen(name); *q;) {
                    if (*q == '#')
                        break;
                    if (isalpha((unsigned char)*q) || *q == '_') {
                        const char *start = q;
                        char id[MAX_NAME];
                        size_t k = 0;
                        while (fuzz_is_ident_char((unsigned char)*q) && k < MAX_NAME - 1)
                            id[k++] = *q++;
                        id[k] = 0;
                        while (fuzz_is_ident_char((unsigned char)*q))
                            q++;
                        int r = fuzz_tensor_index(p, id);
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
rv_array *fuzz_copy_array(const rv_array *a) {
    rv_array *c = rv_array_new(rv_array_dtype(a), rv_array_ndim(a), rv_array_shape(a));
    memcpy(rv_array_data(c), rv_array_cdata(a),
           (size_t)rv_array_numel(a) * rv_dtype_size(rv_array_dtype(a)));
    return c;
}

int fuzz_same_shape(const rv_array *a, const rv_array *b) {
    if (rv_array_dtype(a) != rv_array_dtype(b) || rv_array_ndim(a) != rv_array_ndim(b))
        return 0;
    for (int d = 0; d < rv_array_ndim(a); d++)
        if (rv_array_shape(a)[d] != rv_array_shape(b)[d])
            return 0;
    return 1;
}

void fuzz_assign_free(Assign *a) {
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
void fuzz_format_sizes(const Program *p, const Assign *a, char *buf, size_t n, const char *pre) {
    size_t o = 0;
    buf[0] = 0;
    for (int s = 0; s < p->nsizes && o < n; s++)
        o += (size_t)snprintf(buf + o, n - o, "%s%s%s=%lld", s ? " " : "", pre, p->size_name[s],
                              (long long)a->val[s]);
}

/* ---- generating one step ---- */

enum { MAX_QUEUED = 16 };

typedef struct Gen {
    Program *p;
    Rng r;
    int counter; /* fresh names */
    Info info;
    /* the steps of a recipe still to draw (gen_pack_recipe), in order */
    int nq, iq;
    char qstage[MAX_QUEUED][MAX_NAME];
    char qstep[MAX_QUEUED][256];
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
        if (g->info.st[i].attach == RV_ATTACH_AT && strcmp(g->info.st[i].at, s->name) == 0)
            cands[n++] = g->info.st[i].name;
    int t = fuzz_tensor_index(p, s->name);
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
    int t = fuzz_tensor_index(p, s->name);
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

/* A recursion group of the program (`recurse NAME over ...` starting a
 * line), drawn at random, into out; 0 when it has none. */
static int pick_group(Gen *g, char *out) {
    char names[8][MAX_NAME];
    int k = 0;
    for (const char *t = g->p->text; t && (t = strstr(t, "recurse ")) && k < 8; t += 8) {
        if (t != g->p->text && t[-1] != '\n')
            continue;
        const char *a = t + 8;
        size_t len = 0;
        while (fuzz_is_ident_char((unsigned char)a[len]) && len + 1 < MAX_NAME)
            len++;
        memcpy(names[k], a, len);
        names[k++][len] = 0;
    }
    if (k == 0)
        return 0;
    strcpy(out, names[rng_int(&g->r, k)]); /* both MAX_NAME */
    return 1;
}

/* Operation splitting (src/sched/opsplit.c): split_op of a loop of s
 * (the rules reject one after other steps or of a reduction loop), or
 * hfuse of a part with its sibling, or of s with another stage. */
static int gen_split_op(Gen *g, const StageInfo *s, int c, char *step, size_t n) {
    const char *sib = NULL;
    for (int i = 0; i < g->info.nstages && s->kind == RV_STAGE_PART; i++) {
        const StageInfo *o = &g->info.st[i];
        if (o != s && o->kind == RV_STAGE_PART && strcmp(o->source, s->source) == 0)
            sib = o->name;
    }
    if ((sib && rng_chance(&g->r, 60)) || (!sib && rng_chance(&g->r, 30))) {
        /* a part with its sibling; any stage now and then (an independent
         * operation, or a step the rules reject) */
        if (!sib || rng_chance(&g->r, 10))
            sib = g->info.st[rng_int(&g->r, g->info.nstages)].name;
        snprintf(step, n, "hfuse(%s)", sib);
        return 1;
    }
    const Loop *v = pick_loop(g, s, 0);
    if (!v)
        return 0;
    snprintf(step, n, "Pf%d, Pr%d = split_op(%s, %lld)", c, c, v->name, (long long)pick_factor(g));
    return 1;
}

/* Whether `name` is declared `param` in p's text (a line `param NAME :`). */
static int is_param(const Program *p, const char *name) {
    size_t len = strlen(name);
    for (const char *t = p->text; t && (t = strstr(t, "param ")); t += 6)
        if ((t == p->text || t[-1] == '\n') && strncmp(t + 6, name, len) == 0 &&
            !fuzz_is_ident_char((unsigned char)t[6 + len]))
            return 1;
    return 0;
}

/* Whether `name` is a member of a recursion group: defined on an
 * indented line (`    h[n, i < 8] = ...`). */
static int in_group(const Program *p, const char *name) {
    size_t len = strlen(name);
    for (const char *t = p->text; t && (t = strstr(t, "\n    ")); t += 5)
        if (strncmp(t + 5, name, len) == 0 && t[5 + len] == '[')
            return 1;
    return 0;
}

static void queue_step(Gen *g, const char *stage, const char *fmtstr, ...) {
    if (g->nq == MAX_QUEUED)
        return;
    va_list ap;
    va_start(ap, fmtstr);
    snprintf(g->qstage[g->nq], MAX_NAME, "%s", stage);
    vsnprintf(g->qstep[g->nq], sizeof g->qstep[0], fmtstr, ap);
    va_end(ap);
    g->nq++;
}

/* The packed product: the schedules of the encoder's products
 * (bench/encoder/encoder_cora512.rv) and of the models' recurrent weights
 * (models/NAME.rv), for a stage s reading a param w. Queues, each drawn or
 * left out,
 *     Wp = cache_read(w [, layout="k, n" | "n/16, k, n%16"])
 *     no, ni = split(n, 4|8|16)     n: s's last spatial loop (the panels)
 *     tb, tr = split(l, 5|8|16|48)  l: the spatial loop before it (rows of
 *                                   len[b] tokens, a batch's nodes)
 *     lo, li = split(tr, 2|3|6)     a split's inner part split again
 *     reorder(outer.., tb, no, lo, k.., li, ni)  blocks of rows above panels
 *     unroll(li), vectorize(ni), parallel(an outer loop or no)
 *     compute_at(Wp, no | tb | lo | an outer loop | the top)
 * so that the copy (a pack kept across runs, docs/schedules.md "Packs of
 * params") lands at loops of varying extent nested in varying loops
 * (tb < len[b]/16 inside b). The steps are then drawn one by one and each
 * is applied and checked like any other: a rejected one is dropped, and
 * the later ones naming its loops are rejected in turn. Returns 0 when s
 * has no spatial loop or reads no param. */
static int gen_pack_recipe(Gen *g, const StageInfo *s) {
    Program *p = g->p;
    int t = fuzz_tensor_index(p, s->name);
    const char *w = NULL;
    for (int k = 0; t >= 0 && k < p->nreads[t]; k++)
        if (is_param(p, p->tname[p->reads[t][k]]) && (!w || rng_chance(&g->r, 50)))
            w = p->tname[p->reads[t][k]];
    const Loop *sp[MAX_LOOPS], *red[MAX_LOOPS];
    int nsp = 0, nred = 0;
    for (int i = 0; i < s->nloops; i++) {
        if (s->loops[i].reduce)
            red[nred++] = &s->loops[i];
        else
            sp[nsp++] = &s->loops[i];
    }
    if (!w || nsp == 0)
        return 0;
    static const int fn[] = {4, 8, 16}, fb[] = {5, 8, 16, 48}, fl[] = {2, 3, 6};
    /* a member of a recursion group: its node loop may be split once the
     * group has dynamic batches (the models' `dynamic_batch()`,
     * `specialize()`) */
    char group[MAX_NAME];
    int dyn = 0;
    for (int i = 0; i < g->info.nstages; i++)
        dyn |= (int)(g->info.st[i].notes >> RV_NOTE_DYNAMIC_BATCH) & 1;
    if (!dyn && in_group(p, s->name) && pick_group(g, group)) {
        queue_step(g, group, "dynamic_batch()");
        if (rng_chance(&g->r, 50))
            queue_step(g, group, "specialize()");
    }
    int c = ++g->counter;
    const char *n = sp[nsp - 1]->name, *k = nred ? red[rng_int(&g->r, nred)]->name : "k";
    const Loop *row = nsp > 1 ? sp[nsp - 2] : NULL;
    int pn = fn[rng_int(&g->r, 3)];
    char no[24], ni[24], tb[24], tr[24], lo[24], li[24];
    snprintf(no, sizeof no, "no%d", c);
    snprintf(ni, sizeof ni, "ni%d", c);
    snprintf(tb, sizeof tb, "tb%d", c);
    snprintf(tr, sizeof tr, "tr%d", c);
    snprintf(lo, sizeof lo, "lo%d", c);
    snprintf(li, sizeof li, "li%d", c);
    char layout[256] = "";
    int lay = rng_int(&g->r, 3);
    if (lay == 1)
        snprintf(layout, sizeof layout, ", layout=\"%s, %s\"", k, n);
    else if (lay == 2)
        snprintf(layout, sizeof layout, ", layout=\"%s/%d, %s, %s%%%d\"", n, pn, k, n, pn);
    queue_step(g, s->name, "Wp%d = cache_read(%s%s)", c, w, layout);
    queue_step(g, s->name, "%s, %s = split(%s, %d)", no, ni, n, pn);
    int blocks = row && rng_chance(&g->r, 80), lines = blocks && rng_chance(&g->r, 60);
    if (blocks)
        queue_step(g, s->name, "%s, %s = split(%s, %d)", tb, tr, row->name, fb[rng_int(&g->r, 4)]);
    if (lines)
        queue_step(g, s->name, "%s, %s = split(%s, %d)", lo, li, tr, fl[rng_int(&g->r, 3)]);
    /* the order: the loops outside the rows, the blocks, the panels, the
     * lines, the reductions, the rows in a line, the panel's lanes */
    char order[512];
    size_t o = 0;
    order[0] = 0;
#define ADD(x) (o += (size_t)snprintf(order + o, sizeof order - o, "%s%s", o ? ", " : "", (x)))
    for (int i = 0; i < nsp - 1 - (row != NULL); i++)
        ADD(sp[i]->name);
    int panels_first = rng_chance(&g->r, 20); /* the other way round: a copy every run */
    if (panels_first)
        ADD(no);
    if (blocks)
        ADD(tb);
    if (!panels_first)
        ADD(no);
    if (row)
        ADD(lines ? lo : blocks ? tr : row->name);
    for (int i = 0; i < nred; i++)
        ADD(red[i]->name);
    if (lines)
        ADD(li);
    ADD(ni);
#undef ADD
    queue_step(g, s->name, "reorder(%s)", order);
    if (lines && rng_chance(&g->r, 50))
        queue_step(g, s->name, "unroll(%s)", li);
    if (rng_chance(&g->r, 50))
        queue_step(g, s->name, "vectorize(%s)", ni);
    if (rng_chance(&g->r, 25))
        queue_step(g, s->name, "parallel(%s)", nsp > 1 && rng_chance(&g->r, 50) ? sp[0]->name : no);
    /* a producer it reads computed at the same blocks (the models' `hc`,
     * the children's states, at the product's nodes) */
    for (int i = 0; t >= 0 && i < p->nreads[t]; i++)
        if (!p->is_input[p->reads[t][i]] && rng_chance(&g->r, 30))
            queue_step(g, s->name, "compute_at(%s, %s)", p->tname[p->reads[t][i]],
                       rng_chance(&g->r, 50) ? no : lines ? lo : blocks ? tb : sp[0]->name);
    int at = rng_int(&g->r, 10);
    const char *where = at < 5 ? no : at < 7 ? tb : at == 7 ? lo : at == 8 ? sp[0]->name : NULL;
    if (where)
        queue_step(g, s->name, "compute_at(Wp%d, %s)", c, where);
    else
        queue_step(g, s->name, "compute_at(Wp%d)", c);
    return 1;
}

/* Draws a stage and one step for it; returns 0 if nothing applies. A
 * recursion group gets its own primitives (dynamic_batch, specialize,
 * refactor of any stage, unroll_recursion) now and then; a repeated one,
 * or one the rules refuse (a refactor they do not allow, unrolling over a
 * DAG or before dynamic_batch), is rejected like any illegal step; once
 * the group has dynamic batches, unrolling is drawn more often (it is
 * legal from then on). */
static int gen_step(Gen *g, char *stage, char *step, size_t n) {
    if (g->iq < g->nq) { /* the next step of a recipe */
        snprintf(stage, MAX_NAME, "%s", g->qstage[g->iq]);
        snprintf(step, n, "%s", g->qstep[g->iq++]);
        return 1;
    }
    g->nq = g->iq = 0;
    if (rng_chance(&g->r, 25) && pick_group(g, stage)) {
        static const char *const prims[] = {"dynamic_batch()", "specialize()", "",
                                            "unroll_recursion()"};
        int dyn = 0;
        for (int i = 0; i < g->info.nstages; i++)
            dyn |= (int)(g->info.st[i].notes >> RV_NOTE_DYNAMIC_BATCH) & 1;
        int w = dyn && rng_chance(&g->r, 30) ? 3 : rng_int(&g->r, 4);
        if (w == 2 && g->info.nstages > 0)
            snprintf(step, n, "refactor(%s)", g->info.st[rng_int(&g->r, g->info.nstages)].name);
        else
            snprintf(step, n, "%s", prims[w == 2 ? 1 : w]);
        return 1;
    }
    const StageInfo *ss[MAX_STAGES];
    int ns = 0;
    for (int i = 0; i < g->info.nstages; i++)
        if (g->info.st[i].attach != RV_ATTACH_INLINE)
            ss[ns++] = &g->info.st[i];
    if (ns == 0)
        return 0;
    const StageInfo *s = ss[rng_int(&g->r, ns)];
    if (rng_chance(&g->r, 20) && gen_pack_recipe(g, s))
        return gen_step(g, stage, step, n);
    snprintf(stage, MAX_NAME, "%s", s->name);
    int c = ++g->counter;
    char a[16], b[16];
    if (rng_chance(&g->r, 8))
        return gen_split_op(g, s, c, step, n);
    int w = rng_int(&g->r, 100);
    const Loop *v = pick_loop(g, s, 0);
    if (!v && w < 70)
        w = 70 + rng_int(&g->r, 30);
    if (w < 20) { /* split */
        stem(v->name, a);
        /* (tail="merge": blocks of F..2F-1; the rules refuse it where its
         * loops are later split, moved apart, vectorized or unrolled) */
        int t = rng_int(&g->r, 100);
        snprintf(step, n, "%so%d, %si%d = split(%s, %lld%s)", a, c, a, c, v->name,
                 (long long)pick_factor(g),
                 t < 20 ? ", tail=\"guard\"" : t < 32 ? ", tail=\"merge\"" : "");
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
        /* the outermost pair half the time: on a ragged program that is
         * a variable loop and the loop its extent depends on (b, l <
         * len[b]), which fuse through the prelude's maps */
        int i = rng_chance(&g->r, 50) ? 0 : rng_int(&g->r, s->nloops - 1);
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
        if (s->nloops == 0 || rng_chance(&g->r, 20)) {
            snprintf(step, n, "compute_at(%s)", pr);
        } else {
            const Loop *at = pick_loop(g, s, 0);
            /* often a loop a ragged extent depends on: a ragged
             * producer's region there is whole rows of variable length
             * (CoRa's padding changes fused into their readers) */
            for (int i = 0; i < s->nloops; i++)
                if (s->loops[i].row && rng_chance(&g->r, 30))
                    at = &s->loops[i];
            snprintf(step, n, "compute_at(%s, %s)", pr, at->name);
        }
    } else { /* compute_inline */
        snprintf(step, n, "compute_inline(%s)", pick_producer(g, s));
    }
    return 1;
}

/* ---- the random schedule ---- */

rv_module *fuzz_rebuild(const Program *p, const Kept *kept, int n) {
    rv_module *m;
    if (rv_module_parse(p->path, p->text, &m) != RV_OK)
        fuzz_die("fuzz: %s: %s", p->path, rv_last_error());
    for (int i = 0; i < n; i++)
        if (rv_module_schedule(m, kept[i].stage, kept[i].step) != RV_OK)
            fuzz_die("fuzz: replaying a kept step failed: %s", rv_last_error());
    return m;
}

static int mentions_prim(const char *msg, const char *step) {
    /* the primitive is the identifier before '(' */
    const char *paren = strchr(step, '(');
    const char *q = paren;
    while (q > step && fuzz_is_ident_char((unsigned char)q[-1]))
        q--;
    char prim[64];
    size_t k = (size_t)(paren - q);
    if (k >= sizeof prim)
        k = sizeof prim - 1;
    memcpy(prim, q, k);
    prim[k] = 0;
    strcat(prim, ":");
    /* a step that breaks a placed stage's readers is reported at the
     * placing compute_at (the reader checks are order-free) */
    return msg && msg[0] && (strstr(msg, prim) != NULL || strstr(msg, "error: compute_at:") != NULL);
}

rv_module *fuzz_build_schedule(Program *p, Rng *r, int max_steps, int verbose, int *nkept,
                               int *rejected) {
    Gen g = {.p = p, .r = *r};
    Kept kept[64];
    int n = 0, nrej = 0;
    int target = 1 + rng_int(&g.r, max_steps);
    rv_module *m = fuzz_rebuild(p, kept, 0);
    for (int attempt = 0; attempt < 4 * target && n < target && n < 64; attempt++) {
        if (!fuzz_schedule_info(m, &g.info)) {
            printf("BUG: the schedule of kept steps fails: %s\n", rv_last_error());
            rv_module_free(m);
            return NULL;
        }
        Kept k;
        if (!gen_step(&g, k.stage, k.step, sizeof k.step))
            continue;
        /* (a recipe's steps all get their turn) */
        if (target < n + 1 + g.nq - g.iq)
            target = n + 1 + g.nq - g.iq;
        if (verbose)
            printf("try  schedule %s { %s }\n", k.stage, k.step);
        rv_status st = rv_module_schedule(m, k.stage, k.step);
        if (st == RV_OK)
            st = rv_module_check_schedule(m);
        if (st == RV_OK) {
            kept[n++] = k;
            continue;
        }
        const char *msg = rv_last_error();
        /* located at the new step, or at a kept step whose stage the new
         * one changed (the placement of a padded stage whose tile a split
         * made read outside a tensor: only bounds inference can tell) */
        int located = mentions_prim(msg, k.step);
        for (int i = 0; i < n && !located; i++)
            located = mentions_prim(msg, kept[i].step);
        if (st != RV_ERR_SCHEDULE || !located) {
            printf("BUG: step `schedule %s { %s }` failed with %s (expected RV_ERR_SCHEDULE naming "
                   "a primitive of the schedule): %s\n",
                   k.stage, k.step, rv_status_name(st), msg);
            printf("=== kept steps before it\n");
            for (int i = 0; i < n; i++)
                printf("schedule %s { %s }\n", kept[i].stage, kept[i].step);
            rv_module_free(m);
            return NULL;
        }
        if (verbose)
            printf("     rejected: %s\n", msg);
        nrej++;
        rv_module_free(m);
        m = fuzz_rebuild(p, kept, n);
    }
    *r = g.r;
    *nkept = n;
    *rejected = nrej;
    return m;
}

/* ---- comparing with the interpreter ---- */

int fuzz_compare(const char *name, const rv_array *got, const rv_array *want) {
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
int fuzz_check_assign(const Program *p, rv_module *m, rv_program *prog, const Assign *a) {
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
    /* a program with params runs twice on one binding: the second run
     * reads the packs the first one kept (docs/schedules.md "Packs of
     * params") */
    int params = 0;
    for (int t = 0; t < p->ntensors; t++)
        params |= p->is_input[t] && is_param(p, p->tname[t]);
    int ok = 1;
    for (int run = 0; ok && run < 1 + params; run++) {
        if (rv_program_run(prog, b) != RV_OK) {
            printf("RUN ERROR%s: %s\n", run ? " (second run, kept packs)" : "", rv_last_error());
            ok = 0;
        }
        for (int t = 0; ok && t < p->ntensors; t++)
            if (p->is_output[t] && !fuzz_compare(p->tname[t], rv_bindings_get_array(b, p->tname[t]),
                                                 rv_bindings_get_array(a->ref, p->tname[t]))) {
                ok = 0;
                if (run)
                    printf("(the second run on one binding, reading the kept packs)\n");
            }
    }
    rv_bindings_free(b);
    return ok;
}

/* ---- numbered jobs in children ---- */

void fuzz_remove_dir(const char *dir) {
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

typedef struct Slot {
    pid_t pid;
    FILE *out;
    long i;
} Slot;

static char *read_all(FILE *f) {
    fflush(f);
    rewind(f);
    size_t cap = 1 << 16, len = 0, got;
    char *text = malloc(cap);
    while ((got = fread(text + len, 1, cap - len - 1, f)) > 0) {
        len += got;
        if (cap - len < 4096)
            text = realloc(text, cap *= 2);
    }
    text[len] = 0;
    return text;
}

void fuzz_run_children(long n, int jobs, unsigned timeout_s, int (*run)(void *ctx, long i),
                       void (*done)(void *ctx, long i, int status, const char *output), void *ctx) {
    Slot slots[64] = {{0}};
    if (jobs > 64)
        jobs = 64;
    long next = 0;
    int active = 0;
    while (next < n || active > 0) {
        if (next < n && active < jobs) {
            Slot *s = NULL;
            for (int k = 0; k < jobs && !s; k++)
                if (!slots[k].pid)
                    s = &slots[k];
            s->i = next++;
            s->out = tmpfile();
            if (!s->out)
                fuzz_die("fuzz: tmpfile: %s", strerror(errno));
            fflush(stdout);
            fflush(stderr);
            pid_t pid = fork();
            if (pid < 0)
                fuzz_die("fuzz: fork: %s", strerror(errno));
            if (pid == 0) {
                int fd = fileno(s->out);
                dup2(fd, 1);
                dup2(fd, 2);
                setvbuf(stdout, NULL, _IONBF, 0);
                alarm(timeout_s); /* a hang */
                int code = run(ctx, s->i);
                fflush(stdout);
                _exit(code);
            }
            s->pid = pid;
            active++;
            continue;
        }
        int status;
        pid_t pid = wait(&status);
        if (pid < 0)
            fuzz_die("fuzz: wait: %s", strerror(errno));
        for (int k = 0; k < jobs; k++)
            if (slots[k].pid == pid) {
                char *text = read_all(slots[k].out);
                fclose(slots[k].out);
                slots[k].pid = 0;
                active--;
                done(ctx, slots[k].i, status, text);
                free(text);
            }
    }
}
