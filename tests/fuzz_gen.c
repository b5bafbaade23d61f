/*
 * fuzz_gen.c — random well-typed ravel programs for the program fuzzer
 * (tests/fuzz_programs.c).
 *
 * A program is drawn in order: sizes with ranges; length UFs (used in
 * extents) and index UFs (used as indices, their domains possibly ragged);
 * inputs of every dtype, dense or ragged (`l < len0[b]`, `l < b + 1`),
 * with or without `pad`; then a chain of computes, each over axes that
 * mirror an earlier tensor's shape or are drawn afresh, with a body drawn
 * from reads, operators, math calls, reductions (sum, max, min, argmax;
 * nested, over several axes, with extents over sizes, outer axes or UFs),
 * select and a top-level `if`.
 *
 * Correct by construction. Every extent is an Ext: a constant, a size
 * plus a constant, a length UF at an outer axis, or an outer axis plus a
 * constant. An index for a dimension of extent E is one that provably
 * lies in [0, E): an axis whose own extent is at most E (ext_le), E - 1 -
 * v for an axis v of extent E, a constant below E's least value, a
 * modulus or min against E, or an index UF whose values lie below E.
 * Reading a ragged dimension substitutes the indices of the outer ones.
 * A read may reduce over the dimensions it reads (`sum(k < len0[i])
 * X[i, k]`), which is how ragged and triangular reductions arise.
 *
 * Well conditioned by construction: each expression carries a bound on its
 * magnitude; log takes abs(x) + 0.5, division divides by abs(y) + 0.5 (or
 * + 1 for integers), exp and pow take bounded arguments, float sums of
 * large terms sum their tanh, integers stay below 1e6 in magnitude (larger
 * ones are taken % 97), and comparisons (select, casts to integers) use
 * only values the compiled code computes bit-identically (integers and
 * input reads), so a near tie cannot flip a branch.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "fuzz_gen.h"

const char *const fuzz_gen_feature_names[GEN_FEATURE_COUNT] = {
    "zero",   "dtypes", "pad",    "indirect", "ragged", "varext", "nested",
    "minmax", "argmax", "math",   "intops",   "select", "cond",   "sched",  "ufragged",
    "padragged", "recurse", "pack",
};

int fuzz_gen_parse_features(const char *list, unsigned *out) {
    unsigned f = 0;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *w = strtok(buf, ","); w; w = strtok(NULL, ",")) {
        int neg = w[0] == '-';
        const char *name = w + neg;
        unsigned bits = 0;
        if (strcmp(name, "all") == 0)
            bits = (1u << GEN_FEATURE_COUNT) - 1;
        else if (strcmp(name, "none") == 0)
            bits = 0;
        else {
            int k = 0;
            while (k < GEN_FEATURE_COUNT && strcmp(name, fuzz_gen_feature_names[k]) != 0)
                k++;
            if (k == GEN_FEATURE_COUNT) {
                fprintf(stderr, "fuzz_programs: unknown feature '%s'\n", name);
                return -1;
            }
            bits = 1u << k;
        }
        f = neg ? f & ~bits : f | bits;
    }
    *out = f;
    return 0;
}

/* ---- extents ---- */

enum { EX_CONST, EX_SIZE, EX_UF, EX_TRI };

/* CONST: c. SIZE: size a + c. UF: length UF a at ref b. TRI: ref b + c.
 * A ref is a dimension position (in a tensor or UF type) or a variable
 * (in a compute's scope). */
typedef struct Ext {
    int k, a, b, c;
} Ext;

enum { O_INPUT, O_COMPUTE, O_LENUF, O_IXUF };

#define G_SIZES 3
#define G_OBJS 16
#define G_DIMS 4
#define G_VARS 24
#define FLOAT_CAP 1000.0
#define INT_CAP 1e6

typedef struct GSize {
    char name[4];
    int lo, hi;
} GSize;

typedef struct GDim {
    Ext e;
    int pad;
} GDim;

/* A tensor or UF: its dimensions (a UF's arguments) and values. */
typedef struct GObj {
    char name[8];
    int kind;
    int fl, dt; /* tensors: float?, dtype index */
    int nd;
    GDim d[G_DIMS];
    Ext vals; /* O_IXUF: values in 0..vals-1; O_LENUF: values in lo..vals */
    int lo;
    double mag; /* tensors: a bound on |value| */
    int exact;  /* reads are bit-identical in compiled code */
} GObj;

typedef struct Var {
    char name[8];
    Ext e;
} Var;

/* An expression being built. */
typedef struct Ex {
    char *s;
    int fl;     /* float (else integer) */
    double mag; /* bound on |value| */
    int exact;  /* compiled code computes it bit-identically */
    int t32;    /* float, and some part is computed in f32 (compared as f32) */
} Ex;

typedef struct Str {
    struct Str *next;
    char s[];
} Str;

typedef struct G {
    Rng r;
    unsigned f;
    int nsz;
    GSize sz[G_SIZES];
    int no;
    GObj o[G_OBJS];
    int nv;
    Var v[G_VARS];
    int nred; /* reduction variables made in this compute */
    int cur;  /* the compute being built: reads only objects before it */
    Str *strs;
} G;

static const char *const dt_names[] = {"f32", "f64", "i32", "i64"};

static int has(const G *g, unsigned feature) {
    return (g->f & feature) != 0;
}

static int pick(G *g, int n) {
    return rng_int(&g->r, n);
}

static int chance(G *g, int percent) {
    return rng_chance(&g->r, percent);
}

/* A formatted string owned by g (freed with the program). */
static char *fmt(G *g, const char *f, ...) {
    va_list ap;
    va_start(ap, f);
    int n = vsnprintf(NULL, 0, f, ap);
    va_end(ap);
    Str *s = malloc(sizeof *s + (size_t)n + 1);
    va_start(ap, f);
    vsnprintf(s->s, (size_t)n + 1, f, ap);
    va_end(ap);
    s->next = g->strs;
    g->strs = s;
    return s->s;
}

static Ext ext(int k, int a, int b, int c) {
    Ext e = {k, a, b, c};
    return e;
}

static int ext_eq(Ext x, Ext y) {
    return x.k == y.k && x.c == y.c && (x.k == EX_CONST || x.a == y.a) &&
           (x.k == EX_CONST || x.k == EX_SIZE || x.b == y.b);
}

/* The least value of an extent over all sizes and outer indices. */
static int ext_min(const G *g, Ext e) {
    switch (e.k) {
    case EX_CONST: return e.c;
    case EX_SIZE: return g->sz[e.a].lo + e.c;
    case EX_UF: return g->o[e.a].lo;
    default: return e.c;
    }
}

/* The largest value; refs[b] is the extent of ref b. */
static int ext_max(const G *g, Ext e, const Ext *refs) {
    switch (e.k) {
    case EX_CONST: return e.c;
    case EX_SIZE: return g->sz[e.a].hi + e.c;
    case EX_UF: return ext_max(g, g->o[e.a].vals, NULL);
    default: return ext_max(g, refs[e.b], refs) - 1 + e.c;
    }
}

/* x <= E for every value of the sizes and refs: an index below x is below E. */
static int ext_le(const G *g, Ext x, Ext E, const Ext *refs) {
    if (ext_eq(x, E))
        return 1;
    if (x.k == EX_CONST && x.c <= ext_min(g, E))
        return 1;
    if (x.k == EX_SIZE && E.k == EX_SIZE && x.a == E.a && x.c <= E.c)
        return 1;
    if (x.k == EX_TRI && E.k == EX_TRI && x.b == E.b && x.c <= E.c)
        return 1;
    if (x.k == EX_TRI && x.c == 1 && refs && ext_le(g, refs[x.b], E, refs))
        return 1; /* x = v + 1 <= extent of v <= E */
    return 0;
}

static char *ext_str(G *g, Ext e, char (*names)[8]) {
    switch (e.k) {
    case EX_CONST: return fmt(g, "%d", e.c);
    case EX_SIZE: return e.c ? fmt(g, "%s + %d", g->sz[e.a].name, e.c) : fmt(g, "%s", g->sz[e.a].name);
    case EX_UF: return fmt(g, "%s[%s]", g->o[e.a].name, names[e.b]);
    default: return fmt(g, "%s + %d", names[e.b], e.c);
    }
}

/* The extents of the variables in scope, as refs. */
static void var_refs(const G *g, Ext *refs) {
    for (int i = 0; i < g->nv; i++)
        refs[i] = g->v[i].e;
}

static char (*var_names(G *g))[8] {
    static char names[G_VARS][8];
    for (int i = 0; i < g->nv; i++)
        memcpy(names[i], g->v[i].name, 8);
    return names;
}

/* ---- sizes, UFs and inputs ---- */

/* A dense extent over sizes: a size (+ 1), or a constant. */
static Ext dense_ext(G *g) {
    if (chance(g, 70)) {
        int s = pick(g, g->nsz);
        return ext(EX_SIZE, s, 0, chance(g, 20));
    }
    if (has(g, GEN_ZERO) && chance(g, 5))
        return ext(EX_CONST, 0, 0, 0);
    return ext(EX_CONST, 0, 0, 1 + pick(g, 7));
}

/* Dimension k of o: dense, or (ragged) a length UF or a triangle over an
 * outer dimension. */
static Ext dim_ext(G *g, GObj *o, int k) {
    if (k > 0 && has(g, GEN_RAGGED) && chance(g, 45)) {
        Ext refs[G_DIMS];
        for (int i = 0; i < k; i++)
            refs[i] = o->d[i].e;
        int j = pick(g, k);
        int lens[G_OBJS], nl = 0;
        for (int u = 0; u < g->no; u++)
            if (g->o[u].kind == O_LENUF && ext_le(g, o->d[j].e, g->o[u].d[0].e, refs))
                lens[nl++] = u;
        if (nl > 0 && chance(g, 60))
            return ext(EX_UF, lens[pick(g, nl)], j, 0);
        return ext(EX_TRI, 0, j, 1);
    }
    return dense_ext(g);
}

static int pad_of(G *g) {
    static const int pads[] = {2, 3, 4, 8, 16};
    return has(g, GEN_PAD) && chance(g, 15) ? pads[pick(g, 5)] : 0;
}

/* Without padragged, a ragged tensor keeps no storage padding. With it,
 * padding outside a ragged dimension (a dimension with a ragged one inside,
 * which the checker rejects) is kept only now and then, to test that
 * rejection. */
static void drop_ragged_pads(G *g, GObj *o) {
    for (int k = 0; k < o->nd; k++) {
        int ragged_inside = 0, ragged = 0;
        for (int j = 0; j < o->nd; j++) {
            int r = o->d[j].e.k == EX_UF || o->d[j].e.k == EX_TRI;
            ragged |= r;
            ragged_inside |= j > k && r;
        }
        if (ragged && !has(g, GEN_PADRAGGED))
            o->d[k].pad = 0;
        else if (ragged_inside && o->d[k].pad && !chance(g, 10))
            o->d[k].pad = 0;
    }
}

static void gen_sizes(G *g) {
    static const char *names[] = {"N", "M", "L"};
    g->nsz = 1 + pick(g, G_SIZES);
    for (int s = 0; s < g->nsz; s++) {
        GSize *z = &g->sz[s];
        snprintf(z->name, sizeof z->name, "%s", names[s]);
        z->lo = has(g, GEN_ZERO) ? pick(g, 3) : 1 + pick(g, 2);
        z->hi = z->lo + (chance(g, 10) ? 0 : pick(g, chance(g, 20) ? 18 : 9));
    }
}

static GObj *new_obj(G *g, int kind, const char *prefix) {
    GObj *o = &g->o[g->no];
    memset(o, 0, sizeof *o);
    o->kind = kind;
    int n = 0;
    for (int i = 0; i < g->no; i++)
        n += g->o[i].kind == kind;
    snprintf(o->name, sizeof o->name, "%s%d", prefix, n % 100);
    g->no++;
    return o;
}

static void gen_ufs(G *g) {
    int nlen = has(g, GEN_RAGGED) || has(g, GEN_VAREXT) ? pick(g, 3) : 0;
    for (int i = 0; i < nlen; i++) {
        GObj *o = new_obj(g, O_LENUF, "len");
        o->nd = 1;
        o->d[0].e = dense_ext(g);
        o->lo = has(g, GEN_ZERO) && chance(g, 60) ? 0 : 1;
        int s = pick(g, g->nsz);
        o->vals = chance(g, 50) && g->sz[s].lo >= o->lo ? ext(EX_SIZE, s, 0, 0)
                                                         : ext(EX_CONST, 0, 0, o->lo + pick(g, 5));
    }
    int nix = has(g, GEN_INDIRECT) ? pick(g, 3) : 0;
    for (int i = 0; i < nix; i++) {
        GObj *o = new_obj(g, O_IXUF, "ix");
        o->nd = has(g, GEN_RAGGED) && has(g, GEN_UFRAGGED) && chance(g, 30) ? 2 : 1;
        o->d[0].e = dense_ext(g);
        if (o->nd == 2)
            o->d[1].e = dim_ext(g, o, 1);
        int s = pick(g, g->nsz);
        int w = pick(g, 3);
        o->vals = w == 0 && g->sz[s].lo >= 1 ? ext(EX_SIZE, s, 0, 0)
                  : w <= 1                   ? ext(EX_SIZE, s, 0, 1)
                                             : ext(EX_CONST, 0, 0, 1 + pick(g, 6));
    }
}

static void gen_inputs(G *g) {
    int n = 1 + pick(g, 3);
    for (int i = 0; i < n; i++) {
        GObj *o = new_obj(g, O_INPUT, "X");
        o->dt = has(g, GEN_DTYPES) ? pick(g, 4) : 0;
        o->fl = o->dt < 2;
        o->mag = o->fl ? 1 : 8; /* rv_bindings_randomize: [-1, 1), [-8, 8] */
        o->exact = 1;
        o->nd = pick(g, 10) == 0 ? 0 : 1 + pick(g, 3);
        for (int k = 0; k < o->nd; k++) {
            o->d[k].e = dim_ext(g, o, k);
            o->d[k].pad = pad_of(g);
        }
        drop_ragged_pads(g, o);
    }
}

/* ---- expressions ---- */

static Ex ex(char *s, int fl, double mag, int exact) {
    Ex e = {s, fl, mag, exact, 0};
    return e;
}

/* e with its f32 taint set. */
static Ex t32(Ex e, int t) {
    e.t32 = e.fl && t;
    return e;
}

static Ex gen_expr(G *g, int depth);
static char *gen_indices(G *g, const GObj *o, int depth, int allow_red);

/* Reduction variables in scope. */
static int red_in_scope(const G *g) {
    int n = 0;
    for (int i = 0; i < g->nv; i++)
        n += g->v[i].name[0] == 'k';
    return n;
}

static int push_var(G *g, Ext e, int red) {
    Var *v = &g->v[g->nv];
    if (red)
        snprintf(v->name, sizeof v->name, "k%d", ++g->nred % 100);
    else
        snprintf(v->name, sizeof v->name, "%c", "ijpq"[g->nv]);
    v->e = e;
    return g->nv++;
}

/* An index for a dimension of extent E (vars as refs), or NULL. With
 * opaque, E's refs are not expressible: only constants below its least
 * value will do. */
static char *gen_index(G *g, Ext E, int opaque, int depth) {
    char *c[32];
    int n = 0;
    Ext refs[G_VARS];
    var_refs(g, refs);
    char(*names)[8] = var_names(g);
    int lo = ext_min(g, E);
    for (int i = 0; i < g->nv && n < 32; i++)
        if (!opaque && ext_le(g, g->v[i].e, E, refs)) {
            c[n++] = g->v[i].name; /* twice: the plain axis is the common case */
            c[n++] = g->v[i].name;
        } else if (opaque && g->v[i].e.k == EX_CONST && g->v[i].e.c <= lo)
            c[n++] = g->v[i].name;
    if (!opaque)
        for (int i = 0; i < g->nv && n < 32; i++)
            if (ext_eq(g->v[i].e, E) && chance(g, 50))
                c[n++] = fmt(g, "%s - 1 - %s", ext_str(g, E, names), g->v[i].name);
    if (lo >= 1 && n < 32)
        c[n++] = lo > 2 && chance(g, 30) ? fmt(g, "%d", pick(g, lo)) : "0";
    if (lo >= 1 && !opaque && g->nv > 0 && n < 30) {
        const char *v = g->v[pick(g, g->nv)].name, *w = g->v[pick(g, g->nv)].name;
        if (has(g, GEN_INTOPS)) {
            c[n++] = chance(g, 50) ? fmt(g, "(%s + %s) %% (%s)", v, w, ext_str(g, E, names))
                                   : fmt(g, "floormod(%s - 2 * %s, %s)", v, w, ext_str(g, E, names));
            c[n++] = fmt(g, "min(%s, %s - 1)", v, ext_str(g, E, names));
        }
    }
    if (has(g, GEN_INDIRECT) && depth < 2)
        for (int u = 0; u < g->cur && n < 32; u++) {
            const GObj *o = &g->o[u];
            if (o->kind != O_IXUF || !(opaque ? o->vals.k == EX_CONST && o->vals.c <= lo
                                              : ext_le(g, o->vals, E, refs)))
                continue;
            int from = g->nv;
            char *args = gen_indices(g, o, depth + 1, 0);
            g->nv = from;
            if (args)
                c[n++] = fmt(g, "%s[%s]", o->name, args);
        }
    return n ? c[pick(g, n)] : NULL;
}

/* Indices for every dimension of o, each in range given the ones before,
 * or NULL. With allow_red, a dimension may get a fresh reduction variable
 * over its extent (pushed; the caller reduces over it). */
static char *gen_indices(G *g, const GObj *o, int depth, int allow_red) {
    int plain[G_DIMS], konst[G_DIMS];
    char *idx[G_DIMS];
    int from = g->nv;
    for (int k = 0; k < o->nd; k++) {
        Ext E = o->d[k].e;
        int opaque = 0;
        if (E.k == EX_UF || E.k == EX_TRI) {
            int j = E.b;
            if (plain[j] >= 0)
                E.b = plain[j];
            else if (E.k == EX_TRI && konst[j] >= 0)
                E = ext(EX_CONST, 0, 0, konst[j] + E.c);
            else
                opaque = 1;
        }
        int var_ext = E.k == EX_UF || E.k == EX_TRI;
        int reducible = allow_red && !opaque && red_in_scope(g) < 2 && g->nv - from < 2 &&
                        (!var_ext || has(g, GEN_VAREXT)) &&
                        (g->nv == from || has(g, GEN_NESTED));
        idx[k] = reducible && chance(g, 30) ? NULL : gen_index(g, E, opaque, depth);
        if (!idx[k] && reducible)
            idx[k] = g->v[push_var(g, E, 1)].name;
        if (!idx[k])
            return NULL;
        plain[k] = konst[k] = -1;
        for (int i = 0; i < g->nv; i++)
            if (strcmp(idx[k], g->v[i].name) == 0)
                plain[k] = i;
        if (strcmp(idx[k], "0") == 0)
            konst[k] = 0;
    }
    char *s = "";
    for (int k = 0; k < o->nd; k++)
        s = fmt(g, "%s%s%s", s, k ? ", " : "", idx[k]);
    return s;
}

/* The largest number of points of the reduction over vars [from, nv). */
static double red_count(G *g, int from) {
    Ext refs[G_VARS];
    var_refs(g, refs);
    double n = 1;
    for (int i = from; i < g->nv; i++) {
        int m = ext_max(g, g->v[i].e, refs);
        n *= m > 0 ? m : 0;
    }
    return n;
}

/* Wraps body in a reduction over the variables [from, nv) and pops them. */
static Ex reduce(G *g, int from, Ex body) {
    char(*names)[8] = var_names(g);
    int axes = g->nv - from;
    int w = pick(g, 10);
    int kind = 0; /* sum */
    if (w >= 8 && axes == 1 && has(g, GEN_ARGMAX) && body.exact)
        kind = 3; /* over inexact floats a near tie may flip it (docs/ir.md) */
    else if (w >= 5 && has(g, GEN_MINMAX))
        kind = w % 2 ? 1 : 2;
    double count = red_count(g, from);
    int empty = 0;
    for (int i = from; i < g->nv; i++)
        empty |= ext_min(g, g->v[i].e) == 0;
    if (kind == 0) {
        if (body.fl && body.mag > 4)
            body = t32(ex(fmt(g, "tanh(%s)", body.s), 1, 1, 0), body.t32);
        else if (!body.fl && body.mag * count > INT_CAP)
            body = ex(fmt(g, "(%s %% 7)", body.s), 0, 6, body.exact);
    }
    char *head = "";
    for (int i = from; i < g->nv; i++)
        head = fmt(g, "%s%s%s < %s", head, i > from ? ", " : "", g->v[i].name,
                   ext_str(g, g->v[i].e, names));
    static const char *const kinds[] = {"sum", "max", "min", "argmax"};
    Ex r;
    char *s = fmt(g, "%s(%s) %s", kinds[kind], head, body.s);
    if (kind == 0)
        r = ex(fmt(g, "(%s)", s), body.fl, body.mag * (count > 1 ? count : 1), body.exact && !body.fl);
    else if (kind == 3)
        r = ex(fmt(g, "(%s)", s), 0, count, body.exact);
    else if (empty && (!body.fl || chance(g, 50))) /* no infinities, no integer extremes */
        r = ex(fmt(g, "%s(%s, %s)", kind == 1 ? "max" : "min", kind == 1 ? "-1000" : "1000", s),
               body.fl, body.mag > 1000 ? body.mag : 1000, body.exact);
    else /* may be an infinity: never converted to an integer (exact = 0) */
        r = ex(fmt(g, "(%s)", s), body.fl, body.mag, body.exact && !empty);
    g->nv = from;
    r = t32(r, body.t32);
    if (r.fl && r.mag > FLOAT_CAP)
        r = t32(ex(fmt(g, "tanh(%s)", r.s), 1, 1, 0), r.t32);
    else if (!r.fl && r.mag > INT_CAP)
        r = ex(fmt(g, "(%s %% 97)", r.s), 0, 96, r.exact);
    return r;
}

/* A read of an earlier tensor, sometimes (depth >= 0) reduced over the
 * dimensions it reads (`sum(k1 < len0[i]) X0[i, k1]`). */
static Ex gen_read(G *g, int depth) {
    int cands[G_OBJS], n = 0;
    for (int u = 0; u < g->cur; u++)
        if (g->o[u].kind == O_INPUT || g->o[u].kind == O_COMPUTE)
            cands[n++] = u;
    for (int tries = 0; n > 0 && tries < 4; tries++) {
        const GObj *o = &g->o[cands[pick(g, n)]];
        int from = g->nv;
        char *args = gen_indices(g, o, 0, depth >= 0);
        if (!args) {
            g->nv = from;
            continue;
        }
        Ex r = t32(ex(fmt(g, "%s[%s]", o->name, args), o->fl, o->mag, o->exact), o->dt == 0);
        return g->nv > from ? reduce(g, from, r) : r;
    }
    return ex("1.5", 1, 1.5, 1);
}

/* An integer leaf: an axis, a size, a literal or a UF application. */
static Ex gen_int_leaf(G *g) {
    int w = pick(g, 10);
    Ext refs[G_VARS];
    var_refs(g, refs);
    if (w < 4 && g->nv > 0) {
        int i = pick(g, g->nv);
        return ex(g->v[i].name, 0, ext_max(g, g->v[i].e, refs), 1);
    }
    if (w < 6) {
        int s = pick(g, g->nsz);
        return ex(g->sz[s].name, 0, g->sz[s].hi, 1);
    }
    if (w < 8) {
        for (int u = 0; u < g->cur; u++) {
            const GObj *o = &g->o[u];
            if ((o->kind == O_LENUF || o->kind == O_IXUF) && chance(g, 50)) {
                int from = g->nv;
                char *args = gen_indices(g, o, 0, 0);
                g->nv = from;
                if (args)
                    return ex(fmt(g, "%s[%s]", o->name, args), 0, ext_max(g, o->vals, NULL), 1);
            }
        }
    }
    static const char *lits[] = {"1", "2", "3", "5"};
    int l = pick(g, 4);
    return ex((char *)lits[l], 0, l == 3 ? 5 : l + 1, 1);
}

static Ex gen_leaf(G *g, int depth) {
    int w = pick(g, 10);
    if (w < 6)
        return gen_read(g, depth);
    if (w < 8)
        return gen_int_leaf(g);
    static const char *lits[] = {"0.5", "1.5", "2.0", "0.25"};
    return ex((char *)lits[pick(g, 4)], 1, 2, 1);
}

/* A bool over exact values: integers, input reads, literals. */
static char *gen_cmp(G *g, int depth) {
    static const char *ops[] = {"<", "<=", ">", ">=", "==", "!="};
    Ex a, b;
    int tries = 0;
    do {
        a = chance(g, 50) ? gen_int_leaf(g) : gen_read(g, -1);
    } while (!a.exact && ++tries < 4);
    if (!a.exact)
        a = gen_int_leaf(g);
    b = a.fl ? ex("0.25", 1, 1, 1) : gen_int_leaf(g);
    char *c = fmt(g, "%s %s %s", a.s, ops[pick(g, 6)], b.s);
    if (depth > 0 && chance(g, 30))
        c = fmt(g, "(%s) %s (%s)", c, chance(g, 50) ? "&&" : "||", gen_cmp(g, 0));
    if (chance(g, 10))
        c = fmt(g, "!(%s)", c);
    return c;
}

static Ex cap(G *g, Ex e) {
    if (e.fl && e.mag > FLOAT_CAP)
        return t32(ex(fmt(g, "tanh(%s)", e.s), 1, 1, 0), e.t32);
    if (!e.fl && e.mag > INT_CAP)
        return ex(fmt(g, "(%s %% 97)", e.s), 0, 96, e.exact);
    return e;
}

/* A reduction over 1 or 2 fresh axes with extents over sizes, constants,
 * outer axes (`k < i + 1`) or length UFs (`k < len0[i]`). */
static Ex gen_reduction(G *g, int depth) {
    if (red_in_scope(g) >= 2)
        return gen_read(g, 0); /* bounded work: at most 2 reduction axes in scope */
    int from = g->nv;
    int axes = has(g, GEN_NESTED) && red_in_scope(g) == 0 && chance(g, 30) ? 2 : 1;
    for (int a = 0; a < axes && g->nv < G_VARS - 2; a++) {
        Ext E = dense_ext(g);
        if (has(g, GEN_VAREXT) && g->nv > 0 && chance(g, 50)) {
            int v = pick(g, g->nv);
            Ext refs[G_VARS];
            var_refs(g, refs);
            int lens[G_OBJS], nl = 0;
            for (int u = 0; u < g->cur; u++)
                if (g->o[u].kind == O_LENUF && ext_le(g, g->v[v].e, g->o[u].d[0].e, refs))
                    lens[nl++] = u;
            E = nl > 0 && chance(g, 50) ? ext(EX_UF, lens[pick(g, nl)], v, 0)
                                        : ext(EX_TRI, 0, v, chance(g, 70) ? 1 : 2);
        }
        push_var(g, E, 1);
    }
    int inner = has(g, GEN_NESTED) ? depth - 1 : 0;
    Ex body = inner > 0 ? gen_expr(g, inner) : gen_read(g, 0);
    return reduce(g, from, body);
}

static Ex math_call(G *g, int depth, Ex a);

/* Math calls compute in f32 for f32 and integer arguments. */
static Ex gen_math(G *g, int depth) {
    Ex a = gen_expr(g, depth - 1);
    Ex r = math_call(g, depth, a);
    return t32(r, r.t32 || a.t32 || !a.fl);
}

static Ex math_call(G *g, int depth, Ex a) {
    switch (pick(g, 11)) {
    case 0:
        return a.mag <= 5 ? ex(fmt(g, "exp(%s)", a.s), 1, 150, 0)
                          : ex(fmt(g, "exp(tanh(%s))", a.s), 1, 3, 0);
    case 1: return ex(fmt(g, "log(abs(%s) + 0.5)", a.s), 1, a.mag + 1, 0);
    case 2: return ex(fmt(g, "sqrt(abs(%s))", a.s), 1, a.mag < 1 ? 1 : a.mag, 0);
    case 3: return ex(fmt(g, "rsqrt(abs(%s) + 0.5)", a.s), 1, 1.5, 0);
    case 4: return ex(fmt(g, "tanh(%s)", a.s), 1, 1, 0);
    case 5: return ex(fmt(g, "sigmoid(%s)", a.s), 1, 1, 0);
    case 6: return ex(fmt(g, "erf(%s)", a.s), 1, 1, 0);
    case 7: return ex(fmt(g, "gelu(%s)", a.s), 1, a.mag + 1, 0);
    case 8: return t32(ex(fmt(g, "abs(%s)", a.s), a.fl, a.mag, a.exact), a.t32);
    case 9: {
        Ex b = gen_expr(g, depth - 1);
        const char *x = a.mag <= 5 ? a.s : fmt(g, "tanh(%s)", a.s);
        const char *y = b.mag <= 2 ? b.s : "2.0";
        return t32(ex(fmt(g, "pow(abs(%s) + 0.5, %s)", x, y), 1, 40, 0), b.t32 || !b.fl);
    }
    default: {
        Ex b = gen_expr(g, depth - 1);
        if (!a.fl && !b.fl)
            return ex(fmt(g, "(%s / (abs(%s) + 1))", a.s, b.s), 0, a.mag, a.exact && b.exact);
        return t32(ex(fmt(g, "(%s / (abs(%s) + 0.5))", a.s, b.s), 1, 2 * a.mag, 0), b.t32);
    }
    }
}

/* Integer operations: % floordiv floormod by divisors bounded away from 0. */
static Ex gen_intop(G *g, int depth) {
    Ex a = gen_expr(g, depth - 1), b = gen_expr(g, depth - 1);
    if (a.fl || b.fl) {
        const char *f = chance(g, 50) ? "min" : "max";
        return t32(ex(fmt(g, "%s(%s, %s)", f, a.s, b.s), 1, a.mag > b.mag ? a.mag : b.mag,
                      a.exact && b.exact),
                   a.t32 || b.t32);
    }
    int exact = a.exact && b.exact;
    switch (pick(g, 4)) {
    case 0: return ex(fmt(g, "(%s %% (abs(%s) + 1))", a.s, b.s), 0, b.mag, exact);
    case 1: return ex(fmt(g, "floordiv(%s, abs(%s) + 1)", a.s, b.s), 0, a.mag, exact);
    case 2: return ex(fmt(g, "floormod(%s, 0 - abs(%s) - 1)", a.s, b.s), 0, b.mag + 1, exact);
    default: return ex(fmt(g, "floormod(%s, abs(%s) + 1)", a.s, b.s), 0, b.mag + 1, exact);
    }
}

static Ex gen_cast(G *g, int depth) {
    Ex a = gen_expr(g, depth - 1);
    if (!a.fl) {
        int dt = pick(g, 4);
        return t32(ex(fmt(g, "%s(%s)", dt_names[dt], a.s), dt < 2, a.mag, a.exact), dt == 0);
    }
    if (a.exact && a.mag <= 8) /* an input read: x * 4 is exact, its truncation too */
        return ex(fmt(g, "%s(4.0 * %s)", dt_names[2 + pick(g, 2)], a.s), 0, 4 * a.mag, 1);
    int dt = pick(g, 2);
    return t32(ex(fmt(g, "%s(%s)", dt_names[dt], a.s), 1, a.mag, 0), dt == 0 || a.t32);
}

static Ex gen_expr(G *g, int depth) {
    if (depth <= 0)
        return gen_leaf(g, 0);
    int w = pick(g, 100);
    if (w < 35) {
        Ex a = gen_expr(g, depth - 1), b = gen_expr(g, depth - 1);
        static const char *const ops[] = {"+", "-", "*"};
        int op = pick(g, 3);
        if (op == 2 && a.mag * b.mag > (a.fl || b.fl ? FLOAT_CAP : INT_CAP))
            op = 0;
        double mag = op == 2 ? a.mag * b.mag : a.mag + b.mag;
        Ex r = ex(fmt(g, "(%s %s %s)", a.s, ops[op], b.s), a.fl || b.fl, mag,
                  a.exact && b.exact && !(a.fl || b.fl));
        return cap(g, t32(r, a.t32 || b.t32));
    }
    if (w < 45)
        return cap(g, gen_reduction(g, depth));
    if (w < 58 && has(g, GEN_MATH))
        return cap(g, gen_math(g, depth));
    if (w < 66 && has(g, GEN_INTOPS))
        return cap(g, gen_intop(g, depth));
    if (w < 74 && has(g, GEN_SELECT)) {
        char *c = gen_cmp(g, 1);
        Ex a = gen_expr(g, depth - 1), b = gen_expr(g, depth - 1);
        return t32(ex(fmt(g, "select(%s, %s, %s)", c, a.s, b.s), a.fl || b.fl,
                      a.mag > b.mag ? a.mag : b.mag, a.exact && b.exact && !(a.fl || b.fl)),
                   a.t32 || b.t32);
    }
    if (w < 80 && has(g, GEN_DTYPES))
        return gen_cast(g, depth);
    if (w < 84) {
        Ex a = gen_expr(g, depth - 1);
        return t32(ex(fmt(g, "(-%s)", a.s), a.fl, a.mag, a.exact), a.t32);
    }
    return gen_leaf(g, depth);
}

/* ---- computes ---- */

/* The compute's axes: the shape of an earlier tensor (so its reads are
 * direct), or drawn afresh. */
static void gen_axes(G *g, GObj *o) {
    int src[G_OBJS], n = 0;
    for (int u = 0; u < g->no - 1; u++)
        if ((g->o[u].kind == O_INPUT || g->o[u].kind == O_COMPUTE) && g->o[u].nd > 0)
            src[n++] = u;
    if (n > 0 && chance(g, 65)) {
        const GObj *s = &g->o[src[pick(g, n)]];
        o->nd = s->nd;
        for (int k = 0; k < s->nd; k++) {
            o->d[k].e = s->d[k].e;
            o->d[k].pad = pad_of(g);
        }
    } else {
        o->nd = pick(g, 8) == 0 ? 0 : 1 + pick(g, 3);
        for (int k = 0; k < o->nd; k++) {
            o->d[k].e = dim_ext(g, o, k);
            o->d[k].pad = pad_of(g);
        }
    }
    drop_ragged_pads(g, o);
    g->nv = 0;
    g->nred = 0;
    for (int k = 0; k < o->nd; k++)
        push_var(g, o->d[k].e, 0); /* dims refs are positions, and so are var ids */
}

/* `if P then A else B` over indices, sizes and UFs; P may guard the
 * then-branch's reads (`i < M` lets A read a dimension of extent M). */
static char *gen_cond_body(G *g, int depth, Ex *out) {
    char(*names)[8] = var_names(g);
    int v = pick(g, g->nv);
    Ext E = dense_ext(g);
    char *guard = fmt(g, "%s < %s", g->v[v].name, ext_str(g, E, names));
    char *p = guard;
    if (chance(g, 40)) {
        int w = pick(g, g->nv);
        p = fmt(g, "%s && %s %% 2 == %d", guard, g->v[w].name, pick(g, 2));
    }
    int guarded = !chance(g, 20);
    if (!guarded)
        p = fmt(g, "%s || %s > %s", guard, g->v[pick(g, g->nv)].name, g->sz[pick(g, g->nsz)].name);
    Ext saved = g->v[v].e;
    if (guarded)
        g->v[v].e = E; /* v < E inside the then-branch */
    Ex a = gen_expr(g, depth);
    g->v[v].e = saved;
    Ex b = chance(g, 50) ? ex(a.fl ? "0.0" : "0", a.fl, 0, 1) : gen_expr(g, depth - 1);
    *out = t32(ex("", a.fl || b.fl, a.mag > b.mag ? a.mag : b.mag,
                  a.exact && b.exact && !(a.fl || b.fl)),
               a.t32 || b.t32);
    return fmt(g, "if %s then %s else %s", p, a.s, b.s);
}

static char *gen_compute(G *g) {
    GObj *o = new_obj(g, O_COMPUTE, "T");
    g->cur = g->no - 1;
    gen_axes(g, o);
    int depth = 1 + pick(g, 3);
    Ex body;
    char *text;
    if (has(g, GEN_COND) && o->nd > 0 && chance(g, 25)) {
        text = gen_cond_body(g, depth, &body);
    } else {
        body = gen_expr(g, depth);
        text = body.s;
        if (text[0] == '(' && chance(g, 50)) {
            /* strip one pair of outer parentheses when they enclose everything */
            int d = 0, whole = 1;
            size_t len = strlen(text);
            for (size_t i = 0; i < len && whole; i++) {
                d += text[i] == '(' ? 1 : text[i] == ')' ? -1 : 0;
                whole = d > 0 || i == len - 1;
            }
            if (whole)
                text = fmt(g, "%.*s", (int)len - 2, text + 1);
        }
    }
    char *cast = "";
    o->fl = body.fl;
    o->dt = body.fl ? 1 : 3;
    if (has(g, GEN_DTYPES) && chance(g, 25)) {
        int dt = pick(g, 4);
        if (dt >= 2 && body.fl)
            dt -= 2; /* a float body truncated to an integer could flip at a near tie */
        cast = fmt(g, " : %s", dt_names[dt]);
        o->dt = dt;
        o->fl = dt < 2;
    }
    if (o->fl && body.t32 && o->dt != 0) {
        /* f32 rounding inside (math in f32, f32 reads) differs in the last
         * bits between libm and the compiled code's math: compare as f32 */
        cast = " : f32";
        o->dt = 0;
    }
    o->mag = body.mag;
    o->exact = !o->fl && body.exact;
    char(*names)[8] = var_names(g);
    char *head = "";
    for (int k = 0; k < o->nd; k++) {
        head = fmt(g, "%s%s%s < %s", head, k ? ", " : "", g->v[k].name, ext_str(g, o->d[k].e, names));
        if (o->d[k].pad)
            head = fmt(g, "%s pad %d", head, o->d[k].pad);
    }
    g->nv = 0;
    return fmt(g, "%s[%s]%s = %s\n", o->name, head, cast, text);
}

/* ---- the program ---- */

static char *type_str(G *g, const GObj *o) {
    static const char dimnames[] = "abcd";
    char names[G_DIMS][8];
    int named[G_DIMS] = {0};
    for (int k = 0; k < o->nd; k++) {
        snprintf(names[k], 8, "%c", dimnames[k]);
        if (o->d[k].e.k == EX_UF || o->d[k].e.k == EX_TRI)
            named[o->d[k].e.b] = 1;
    }
    char *s = "";
    for (int k = 0; k < o->nd; k++) {
        s = fmt(g, "%s%s", s, k ? ", " : "");
        if (named[k] || chance(g, 30))
            s = fmt(g, "%s%s < ", s, names[k]);
        s = fmt(g, "%s%s", s, ext_str(g, o->d[k].e, names));
        if (o->d[k].pad)
            s = fmt(g, "%s pad %d", s, o->d[k].pad);
    }
    return s;
}

/* Frees g and the strings it made. */
static void g_free(G *g) {
    while (g->strs) {
        Str *s = g->strs;
        g->strs = s->next;
        free(s);
    }
    free(g);
}

/* ---- recursion groups ---- */

/* One term of member m's body (hidden width h, K children at most, nm
 * members): an input, a same-node read of an earlier member, a sum over
 * the children of any member, with or without a product by a weight, or a
 * node-independent value (a learned initial state). Each is bounded and
 * scaled so that values stay contractive through any depth. */
static char *rec_term(G *g, int m, int h, int k, int nm) {
    int j = pick(g, nm);
    switch (pick(g, m > 0 ? 7 : 5)) {
    case 0:
        return "X[word[n], i]";
    case 1:
        return "b[i]";
    case 2:
        return fmt(g, "sum(k < nchild[n]) m%d[child[n, k], i] / %d.0", j, 2 * k);
    case 3:
        return fmt(g, "sum(k < nchild[n], j < %d) U%d[i, j] * m%d[child[n, k], j] / %d.0", h, m,
                   j, 2 * k * h);
    case 4:
        return fmt(g, "tanh(sum(j < %d) U%d[i, j] * b[j])", h, m);
    case 5:
        return fmt(g, "m%d[n, i]", pick(g, m));
    default:
        return fmt(g, "sum(j < %d) U%d[i, j] * m%d[n, j] / %d.0", h, m, pick(g, m), h);
    }
}

/* 1 to 3 terms, under tanh or not. */
static char *rec_sum(G *g, int m, int h, int k, int nm) {
    char *e = rec_term(g, m, h, k, nm);
    for (int t = pick(g, 3); t > 0; t--)
        e = fmt(g, "%s %s %s", e, chance(g, 70) ? "+" : "-", rec_term(g, m, h, k, nm));
    return chance(g, 60) ? fmt(g, "tanh(%s)", e) : fmt(g, "(%s) / 2.0", e);
}

/* A recursion program: a structure (sequence, tree or DAG), a group of 1
 * to 3 members reading each other at the children (child-sums) and the
 * earlier ones at their own node, conditional members (a leaf case, zero
 * or a node-independent state now and then), and the roots gathered. */
static char *gen_recursion(G *g) {
    static const int hs[] = {3, 4, 5, 8};
    int h = hs[pick(g, 4)], kind = pick(g, 3), k = kind == 0 ? 1 : 1 + pick(g, kind == 1 ? 3 : 2);
    int nm = 1 + pick(g, 3), bmax = 1 + pick(g, 3);
    const char *wkind = has(g, GEN_PACK) && chance(g, 50) ? "param" : "input";
    const char *shape = kind == 0   ? "sequence(N)"
                        : kind == 1 ? fmt(g, "tree(N, %d)", k)
                                    : fmt(g, "dag(N, %d)", k);
    char *text = fmt(g,
                     "size N in %d..%d\nsize B in 1..%d\n"
                     "structure T : %s {\n    children child, nchild\n"
                     "    roots root[s < B]\n    data word in 0..7\n}\n"
                     "%s X : f32[8, %d]\ninput b : f32[%d]\n",
                     bmax, bmax + 5 + pick(g, 40), bmax, shape, wkind, h, h);
    for (int m = 0; m < nm; m++)
        text = fmt(g, "%s%s U%d : f32[%d, %d]\n", text, wkind, m, h, h);
    text = fmt(g, "%srecurse R over T {\n", text);
    for (int m = 0; m < nm; m++) {
        char *body = rec_sum(g, m, h, k, nm);
        if (chance(g, 40)) {
            const char *leaf = chance(g, 30)   ? "0.0"
                               : chance(g, 50) ? fmt(g, "tanh(sum(j < %d) U%d[i, j] * b[j])", h, m)
                                               : rec_sum(g, m, h, k, nm);
            body = fmt(g, "if nchild[n] == 0 then %s else %s", leaf, body);
        }
        text = fmt(g, "%s    m%d[n, i < %d] = %s\n", text, m, h, body);
    }
    text = fmt(g, "%s}\nOut[s, i] = m%d[root[s], i]\n", text, nm - 1);
    if (nm > 1 && chance(g, 50))
        text = fmt(g, "%sOut2[s, i] = m%d[root[s], i] * 2.0\n", text, pick(g, nm - 1));
    return text;
}

/* ---- products with param weights ---- */

/* A product of rows with a param weight, `P[b, l < len[b], n < N] =
 * sum(k < K) X[b, l, k] * W[n, k]` (or dense rows `t < T`), as the
 * encoder and the models write it, with a bias now and then, a second
 * product reading the same weight (a tied weight: one kept pack), and a
 * product chained on the first. The lengths' ranges make the loops of
 * blocks of rows vary: short first rows and long later ones (`b * 20 ..
 * b * 20 + 12`: a block loop of 16 runs no iteration at b = 0 and some
 * later), or any length up to 100; the rows stay few enough for the
 * interpreter. */
static char *gen_pack_program(G *g) {
    static const int ks[] = {3, 8, 16, 32}, ns[] = {6, 16, 32, 48}, steps[] = {8, 20, 30};
    int K = ks[pick(g, 4)], N = ns[pick(g, 4)], bhi = 1 + pick(g, 6);
    int blo = has(g, GEN_ZERO) && chance(g, 30) ? 0 : 1;
    if (blo > bhi)
        blo = bhi;
    int dense = chance(g, 25);
    char *rows, *idx, *text;
    if (dense) {
        text = fmt(g, "size T in %d..%d\n", has(g, GEN_ZERO) ? 0 : 1, 20 + pick(g, 100));
        rows = "t < T";
        idx = "t";
    } else {
        text = fmt(g, "size B in %d..%d\n", blo, bhi);
        int st = steps[pick(g, 3)];
        int w = pick(g, 3);
        const char *r = w == 0   ? fmt(g, "b * %d..b * %d + %d", st, st, 2 + pick(g, st))
                        : w == 1 ? fmt(g, "%d..%d", has(g, GEN_ZERO) ? 0 : 1, 10 + pick(g, 90))
                                 : fmt(g, "%d..%d", pick(g, 10), 40 + pick(g, 30));
        text = fmt(g, "%sufun len[b < B] in %s\n", text, r);
        rows = "b < B, l < len[b]";
        idx = "b, l";
    }
    int tied = chance(g, 35), bias = chance(g, 40), chain = chance(g, 35);
    int M = ns[pick(g, 4)];
    text = fmt(g, "%sinput X : f32[%s, %d]\nparam W : f32[%d, %d]\n", text, rows, K, N, K);
    if (tied)
        text = fmt(g, "%sinput Y : f32[%s, %d]\n", text, rows, K);
    if (bias)
        text = fmt(g, "%sparam bias : f32[%d]\n", text, N);
    if (chain)
        text = fmt(g, "%sparam W2 : f32[%d, %d]\n", text, M, N);
    const char *head = dense ? "t < T" : "b, l < len[b]";
    text = fmt(g, "%sP[%s, n < %d] = sum(k < %d) X[%s, k] * W[n, k]%s\n", text, head, N, K, idx,
               bias ? " + bias[n]" : "");
    if (tied)
        text = fmt(g, "%sQ[%s, n < %d] = sum(k < %d) Y[%s, k] * W[n, k]\n", text, head, N, K, idx);
    if (chain)
        text = fmt(g, "%sR[%s, m < %d] = sum(n < %d) tanh(P[%s, n]) * W2[m, n] / %d.0\n", text,
                   head, M, N, idx, N);
    return text;
}

char *fuzz_gen_program(uint64_t seed, unsigned features) {
    G *g = calloc(1, sizeof *g);
    g->r.s = seed;
    rng_next(&g->r);
    g->f = features;
    if (has(g, GEN_RECURSE) && chance(g, 30)) {
        char *out = strdup(gen_recursion(g));
        g_free(g);
        return out;
    }
    if (has(g, GEN_PACK) && chance(g, 30)) {
        char *out = strdup(gen_pack_program(g));
        g_free(g);
        return out;
    }
    gen_sizes(g);
    gen_ufs(g);
    gen_inputs(g);
    char *text = "";
    for (int s = 0; s < g->nsz; s++)
        text = fmt(g, "%ssize %s in %d..%d\n", text, g->sz[s].name, g->sz[s].lo, g->sz[s].hi);
    for (int u = 0; u < g->no; u++) {
        GObj *o = &g->o[u];
        char names[G_DIMS][8] = {"a", "b", "c", "d"};
        if (o->kind == O_LENUF)
            text = fmt(g, "%sufun %s[a < %s] in %d..%s\n", text, o->name,
                       ext_str(g, o->d[0].e, names), o->lo, ext_str(g, o->vals, names));
        else if (o->kind == O_IXUF) {
            char *dims = fmt(g, "a < %s", ext_str(g, o->d[0].e, names));
            if (o->nd == 2)
                dims = fmt(g, "%s, b < %s", dims, ext_str(g, o->d[1].e, names));
            Ext v = o->vals;
            char *hi = v.k == EX_CONST  ? fmt(g, "%d", v.c - 1)
                       : v.c == 0       ? fmt(g, "%s - 1", g->sz[v.a].name)
                                        : fmt(g, "%s", g->sz[v.a].name);
            text = fmt(g, "%sufun %s[%s] in 0..%s\n", text, o->name, dims, hi);
        } else if (o->kind == O_INPUT)
            text = fmt(g, "%sinput %s : %s[%s]\n", text, o->name, dt_names[o->dt], type_str(g, o));
    }
    int n = 1 + pick(g, 4);
    for (int c = 0; c < n && g->no < G_OBJS; c++) {
        g->cur = g->no;
        text = fmt(g, "%s%s", text, gen_compute(g));
    }
    char *out = strdup(text);
    g_free(g);
    return out;
}
