/*
 * c.c — loop IR to C: kernels, preludes and the translation unit.
 *
 * Each Kernel becomes one exported function with the ravel_rt.h calling
 * convention,
 *
 *     int32_t kernel_Y(const int64_t *sizes, void *const *bufs, struct rv_rt_ctx *ctx)
 *
 * and, when it has one, its prelude kernel_Y_prelude(sizes, bufs), which
 * fills the AUX arrays. A function first binds the parameters it uses to
 * named locals (`const int64_t T = sizes[0];`, `const float *restrict X =
 * __builtin_assume_aligned(bufs[1], 64);` — const when the function never
 * stores to the buffer), then runs its statements:
 *
 *   FOR       `for (int64_t i = 0; i < n; i++)`. Vector loops of constant
 *             extent become explicit vector code (c_vector.c), a scalar
 *             loop finishing a non-power-of-two extent. Those it cannot
 *             vectorize say why in a comment and carry `#pragma omp simd`
 *             (the JIT compiles with -fopenmp-simd; GCC refuses `#pragma
 *             GCC ivdep` stacked on it, and omp simd says more), except
 *             when their iterations store to one memory element (a
 *             reduction into a buffer), which the pragma would declare
 *             independent. Unrolled loops with a constant extent carry
 *             `#pragma GCC unroll N`. GPU-bound loops run serially on the
 *             CPU. A serial loop whose body only stores one element per
 *             iteration (plain_map) is vectorized all the same, in
 *             vectors of 16 lanes (cg_vector_map): the JIT turns GCC's
 *             loop vectorizer off (src/jit/jit.c).
 *   parallel  the body is outlined into a static function over a chunk
 *             [begin, end) that reads its captured variables from a struct;
 *             the loop becomes `ctx->parallel_for(n, fn, &captures)`.
 *   IF, LET   `if`/`else if`/`else`; `const int64_t x = ...;` declared in
 *             the current block (a block of its own only when the name is
 *             already declared there).
 *   STORE     `buf[i] = v;`, or `buf[i] += v;` for an update of the same
 *             element.
 *   ALLOC     a one-element local whose every access is at index 0 becomes
 *             a scalar variable (accumulators read as `acc0 += ...`); a
 *             local of constant size up to 64 KiB a stack array aligned to
 *             64 bytes; anything else scratch memory from ctx->alloc, freed
 *             at the end of its scope. If the scratch allocation fails the
 *             body is skipped and the host reports the failure.
 *   CALL      a call of the support library (c_extern.c).
 *   BARRIER   a bug on the CPU.
 *
 * Names come from c_expr.c and are unique per kernel; outlined functions
 * share their kernel's names, so a captured variable keeps its name.
 *
 * The same statement emitter serves the CUDA back end (cg_emit_stmts),
 * which differs in GPU loops, barriers, local arrays and `__restrict__`;
 * see cuda.c.
 */
#include <string.h>

#include "codegen/codegen.h"
#include "ravel_rt.h"

#define STACK_LIMIT (64 * 1024) /* bytes: larger locals go to scratch memory */

/* One C function being written: its text and the names declared in each
 * open C block (so a LET or ALLOC knows when it needs braces). */
typedef struct CFn {
    Buf text;
    int indent;
    Vec(const char *) decls;
    Vec(int) marks; /* where each open block's names start in decls */
} CFn;

/* The extern support functions a unit needs: (kernel name, dtype). */
typedef struct ExternUse {
    const char *kernel;
    rv_dtype dtype;
} ExternUse;
typedef Vec(ExternUse) ExternVec;

/* One kernel being emitted. */
typedef struct CK {
    CgEmit *e;
    const Kernel *k;
    const char *sym;
    Buf *defs; /* unit-level definitions, in order */
    ExternVec *externs;
    PtrMap param_at; /* Buffer* / Size* -> 1 + index in bufs / sizes */
    PtrMap written;  /* Buffer* stored to in the function being emitted */
    PtrMap let_type; /* Axis* bound by a LET to a non-i64 value -> dtype + 1 */
    int npar;        /* outlined functions so far */
    int64_t unrolled; /* the product of the unroll factors of the loops around (0: none) */
} CK;

static void emit_stmt(CK *c, CFn *f, const Stmt *s);

/* ---- text ---- */

static void line(CFn *f, const char *fmt, ...) RV_PRINTF(2, 3);
static void line(CFn *f, const char *fmt, ...) {
    buf_indent(&f->text, 4 * f->indent);
    va_list ap;
    va_start(ap, fmt);
    buf_vprintf(&f->text, fmt, ap);
    va_end(ap);
}

static void open_block(CFn *f) {
    f->indent++;
    vec_push(&f->marks, f->decls.len);
}

static void close_block(CFn *f) {
    f->indent--;
    f->decls.len = vec_pop(&f->marks);
}

static bool declared_here(const CFn *f, const char *name) {
    int from = f->marks.len ? vec_last(&f->marks) : 0;
    for (int i = from; i < f->decls.len; i++)
        if (strcmp(f->decls.data[i], name) == 0)
            return true;
    return false;
}

static void declare(CFn *f, const char *name) {
    vec_push(&f->decls, name);
}

static void fn_free(CFn *f) {
    buf_free(&f->text);
    vec_free(&f->decls);
    vec_free(&f->marks);
}

static const char *name_of_buf(CK *c, const Buffer *b) {
    return cg_name(c->e, b, b->name);
}

static const char *name_of_axis(CK *c, const Axis *a) {
    return cg_name(c->e, a, a->name);
}

static const char *name_of_size(CK *c, const Size *s) {
    return cg_name(c->e, s, s->name);
}

/* The C type of an axis variable: i64 unless a LET binds it to another
 * dtype. */
static rv_dtype axis_dtype(CK *c, const Axis *a) {
    intptr_t t = (intptr_t)ptrmap_get(&c->let_type, a);
    return t ? (rv_dtype)(t - 1) : RV_I64;
}

static bool const_size(const Buffer *b, int64_t *n) {
    return b->size && ir_is_const_int(b->size, n);
}

/* Where an ALLOC puts its buffer. */
typedef enum Place { PLACE_SCALAR, PLACE_VECTOR, PLACE_STACK, PLACE_SCRATCH } Place;

static Place place_of(CK *c, const Buffer *b) {
    if (ptrmap_has(&c->e->scalars, b))
        return PLACE_SCALAR;
    if (ptrmap_has(&c->e->vregs, b))
        return PLACE_VECTOR;
    int64_t n;
    if (b->scope == BUF_LOCAL && const_size(b, &n) && n >= 0 &&
        n * (int64_t)rv_dtype_size(b->dtype) <= STACK_LIMIT)
        return PLACE_STACK;
    return PLACE_SCRATCH;
}

/* ---- analyses ---- */

/* Prepass over a function's statements: which buffers it stores to, and
 * which one-element locals can live in a scalar (every access at index 0,
 * none from inside a parallel loop nested in the allocation, since the
 * outlined body could not see a scalar). */
typedef struct Scan {
    CgEmit *e;
    PtrMap *written;
    PtrMap *let_type;
    int pdepth;
    PtrMap alloc_depth; /* candidate Buffer* -> 1 + parallel depth at its ALLOC */
    PtrMap spoiled;     /* candidates that cannot be scalars */
    PtrMap loaded;      /* candidates some expression loads */
    const Stmt *inner;  /* the innermost loop around */
    Module *m;          /* NULL: no masked tail is a whole vector (CUDA) */
    PtrMap lets;        /* Axis* of the LETs around -> value */
} Scan;

/* A local of `lanes` elements (a vector of a register tile, registers.c)
 * lives in a vector variable when every access is the whole vector: at
 * the variable of the innermost loop, a vector loop of that extent (one
 * block of c_vector.c, whose lanes are the variable's). */
static bool vreg_lanes(int64_t n) {
    return n >= 2 && n <= 16 && !(n & (n - 1));
}

static bool whole_vector(const Scan *sc, const Buffer *b, const Expr *idx) {
    int64_t n, w;
    const Stmt *l = sc->inner;
    if (!ir_is_const_int(b->size, &n) || !l || l->u.loop.kind != LOOP_VECTOR ||
        idx->kind != EX_VAR || idx->u.axis != l->u.loop.var)
        return false;
    if (ir_is_const_int(l->u.loop.extent, &w))
        return w == n;
    /* a masked tail (c_vector.c, masked_tail): its block runs vectors of
     * the power of two at or above its extent's bound, the lanes past the
     * extent idle (registers.c keeps a tile's tail vectors so) */
    Expr *ext = l->u.loop.extent;
    for (int k = 0; sc->m && k < 8; k++) {
        Expr *x = ir_substitute(sc->m, ext, (PtrMap *)&sc->lets);
        if (x == ext)
            break;
        ext = x;
    }
    int64_t hi;
    if (!sc->m || !ir_upper_bound(sc->m, ext, &hi) || hi < 2)
        return false;
    for (w = 1; w < hi; w *= 2)
        ;
    return w == n;
}

static void scan_access(Scan *sc, const Buffer *b, const Expr *idx) {
    intptr_t d = (intptr_t)ptrmap_get(&sc->alloc_depth, b);
    if (!d)
        return;
    bool whole = cg_is_zero(idx);
    int64_t n;
    if (ir_is_const_int(b->size, &n) && n > 1)
        whole = whole_vector(sc, b, idx);
    if (!whole || d - 1 != sc->pdepth)
        ptrmap_put(&sc->spoiled, b, (void *)b);
}

static void scan_load(const Expr *x, void *ctx) {
    if (x->kind == EX_LOAD) {
        Scan *sc = ctx;
        scan_access(sc, x->u.buf, x->args[0]);
        ptrmap_put(&sc->loaded, x->u.buf, (void *)x->u.buf);
    }
}

static void scan_expr(Scan *sc, const Expr *x) {
    if (x)
        ir_visit(x, scan_load, sc);
}

static void scan_stmt(Scan *sc, const Stmt *s) {
    if (!s)
        return;
    switch (s->kind) {
    case ST_FOR: {
        scan_expr(sc, s->u.loop.extent);
        bool par = s->u.loop.kind == LOOP_PARALLEL;
        const Stmt *inner = sc->inner;
        sc->pdepth += par;
        sc->inner = s;
        scan_stmt(sc, s->u.loop.body);
        sc->inner = inner;
        sc->pdepth -= par;
        return;
    }
    case ST_IF:
        scan_expr(sc, s->u.if_.cond);
        scan_stmt(sc, s->u.if_.then_s);
        scan_stmt(sc, s->u.if_.else_s);
        return;
    case ST_LET:
        scan_expr(sc, s->u.let.value);
        ptrmap_put(&sc->lets, s->u.let.var, s->u.let.value);
        if (s->u.let.value->dtype != RV_I64)
            ptrmap_put(sc->let_type, s->u.let.var, (void *)(intptr_t)(s->u.let.value->dtype + 1));
        scan_stmt(sc, s->u.let.body);
        return;
    case ST_STORE:
        ptrmap_put(sc->written, s->u.store.buf, (void *)s->u.store.buf);
        scan_access(sc, s->u.store.buf, s->u.store.index);
        scan_expr(sc, s->u.store.index);
        scan_expr(sc, s->u.store.value);
        return;
    case ST_ALLOC: {
        const Buffer *b = s->u.alloc.buf;
        int64_t n;
        if (b->scope == BUF_LOCAL && const_size(b, &n) &&
            (n == 1 || (vreg_lanes(n) && sc->e->target == CG_TARGET_C)))
            ptrmap_put(&sc->alloc_depth, b, (void *)(intptr_t)(sc->pdepth + 1));
        scan_stmt(sc, s->u.alloc.body);
        return;
    }
    case ST_SEQ:
        for (int i = 0; i < s->u.seq.n; i++)
            scan_stmt(sc, s->u.seq.stmts[i]);
        return;
    case ST_CALL:
        ptrmap_put(sc->written, s->u.call.args[0], (void *)s->u.call.args[0]);
        for (int i = 0; i < s->u.call.nargs; i++)
            ptrmap_put(&sc->spoiled, s->u.call.args[i], (void *)s->u.call.args[i]);
        return;
    case ST_BARRIER:
    case ST_FAIL:
        return;
    default:
        RV_UNREACHABLE();
    }
}

/* Runs the prepass over a function body: the buffers it stores to, the
 * one-element locals held in scalars (e->scalars), LET dtypes. */
static void scan_function(CgEmit *e, Module *m, const Stmt *s, PtrMap *written,
                          PtrMap *let_type) {
    ptrmap_free(written);
    ptrmap_free(&e->scalars);
    ptrmap_free(&e->unread);
    ptrmap_free(&e->vregs);
    Scan sc = {.e = e, .written = written, .let_type = let_type, .m = m};
    scan_stmt(&sc, s);
    for (int i = 0; i < sc.alloc_depth.cap; i++) {
        const void *b = sc.alloc_depth.keys ? sc.alloc_depth.keys[i] : NULL;
        /* a block-shared local is memory the threads share, never a
         * thread's scalar */
        int64_t n;
        if (b && !ptrmap_has(&sc.spoiled, b) && !ptrmap_has(&e->shared, b) &&
            const_size(b, &n) && n > 1) {
            ptrmap_put(&e->vregs, b, (void *)b);
        } else if (b && !ptrmap_has(&sc.spoiled, b) && !ptrmap_has(&e->shared, b)) {
            ptrmap_put(&e->scalars, b, (void *)b);
            if (!ptrmap_has(&sc.loaded, b))
                ptrmap_put(&e->unread, b, (void *)b);
        }
    }
    ptrmap_free(&sc.alloc_depth);
    ptrmap_free(&sc.spoiled);
    ptrmap_free(&sc.loaded);
    ptrmap_free(&sc.lets);
}

static void analyze(CK *c, const Stmt *s) {
    scan_function(c->e, c->k->m, s, &c->written, &c->let_type);
}

void cg_analyze(CgEmit *e, const Stmt *s, PtrMap *written) {
    PtrMap let_type = {0};
    scan_function(e, NULL, s, written, &let_type);
    ptrmap_free(&let_type);
}

/* The variables a statement uses from outside itself, in order of first
 * use: what a function must bind from its parameters, and what an outlined
 * parallel body must capture. */
typedef struct Free {
    Vec(const Size *) sizes;
    Vec(const Buffer *) bufs;
    Vec(const Axis *) axes;
    bool ctx; /* scratch allocations or nested parallel loops */
    PtrMap seen;
    Vec(const void *) bound; /* axes and buffers bound by enclosing statements */
} Free;

static bool is_bound(const Free *fv, const void *p) {
    for (int i = 0; i < fv->bound.len; i++)
        if (fv->bound.data[i] == p)
            return true;
    return false;
}

static void free_node(const Expr *x, void *ctx) {
    Free *fv = ctx;
    const void *p = NULL;
    switch (x->kind) {
    case EX_SIZE:
        p = x->u.size;
        break;
    case EX_VAR:
        p = x->u.axis;
        break;
    case EX_LOAD:
        p = x->u.buf;
        break;
    default:
        return;
    }
    if (is_bound(fv, p) || ptrmap_has(&fv->seen, p))
        return;
    ptrmap_put(&fv->seen, p, (void *)p);
    if (x->kind == EX_SIZE)
        vec_push(&fv->sizes, x->u.size);
    else if (x->kind == EX_VAR)
        vec_push(&fv->axes, x->u.axis);
    else
        vec_push(&fv->bufs, x->u.buf);
}

static void free_expr(Free *fv, const Expr *x) {
    if (x)
        ir_visit(x, free_node, fv);
}

static void free_buf(Free *fv, const Buffer *b) {
    if (is_bound(fv, b) || ptrmap_has(&fv->seen, b))
        return;
    ptrmap_put(&fv->seen, b, (void *)b);
    vec_push(&fv->bufs, b);
}

/* The row-stride and extent expressions a CALL passes (c_call). */
static Expr *call_dim(Module *m, const Tensor *t, int d, bool padded) {
    Expr *ext = t->axes[d]->extent;
    int p = t->pad[d];
    if (!padded || p <= 1)
        return ext;
    Expr *q = ir_binary(m, EX_DIV, ir_binary(m, EX_ADD, ext, ir_int(m, p - 1)), ir_int(m, p));
    return ir_binary(m, EX_MUL, q, ir_int(m, p));
}

static void free_stmt(CK *c, Free *fv, const Stmt *s) {
    if (!s)
        return;
    switch (s->kind) {
    case ST_FOR:
        free_expr(fv, s->u.loop.extent);
        if (s->u.loop.kind == LOOP_PARALLEL)
            fv->ctx = true;
        vec_push(&fv->bound, s->u.loop.var);
        free_stmt(c, fv, s->u.loop.body);
        fv->bound.len--;
        return;
    case ST_IF:
        free_expr(fv, s->u.if_.cond);
        free_stmt(c, fv, s->u.if_.then_s);
        free_stmt(c, fv, s->u.if_.else_s);
        return;
    case ST_LET:
        free_expr(fv, s->u.let.value);
        vec_push(&fv->bound, s->u.let.var);
        free_stmt(c, fv, s->u.let.body);
        fv->bound.len--;
        return;
    case ST_STORE:
        free_buf(fv, s->u.store.buf);
        free_expr(fv, s->u.store.index);
        free_expr(fv, s->u.store.value);
        return;
    case ST_ALLOC:
        if (place_of(c, s->u.alloc.buf) == PLACE_SCRATCH) {
            fv->ctx = true;
            free_expr(fv, s->u.alloc.buf->size);
        }
        vec_push(&fv->bound, s->u.alloc.buf);
        free_stmt(c, fv, s->u.alloc.body);
        fv->bound.len--;
        return;
    case ST_SEQ:
        for (int i = 0; i < s->u.seq.n; i++)
            free_stmt(c, fv, s->u.seq.stmts[i]);
        return;
    case ST_CALL: {
        for (int i = 0; i < s->u.call.nargs; i++)
            free_buf(fv, s->u.call.args[i]);
        const Tensor *out = s->u.call.out;
        for (int d = 0; d < out->ndim; d++)
            free_expr(fv, call_dim(c->k->m, out, d, true));
        for (int i = 1; i < s->u.call.nargs; i++) {
            const Tensor *t = s->u.call.args[i]->tensor;
            for (int d = 0; t && d < t->ndim; d++)
                free_expr(fv, call_dim(c->k->m, t, d, true));
        }
        return;
    }
    case ST_BARRIER:
        return;
    case ST_FAIL:
        fv->ctx = true;
        return;
    default:
        RV_UNREACHABLE();
    }
}

static void free_init(CK *c, Free *fv, const Stmt *s, const Axis *bound) {
    memset(fv, 0, sizeof *fv);
    if (bound)
        vec_push(&fv->bound, bound);
    free_stmt(c, fv, s);
}

static void free_release(Free *fv) {
    vec_free(&fv->sizes);
    vec_free(&fv->bufs);
    vec_free(&fv->axes);
    vec_free(&fv->bound);
    ptrmap_free(&fv->seen);
}

/* ---- statements ---- */

static void emit_body(CK *c, CFn *f, const Stmt *s) {
    if (s)
        emit_stmt(c, f, s);
}

/* "float *restrict A" or "const float *restrict A" (CUDA: __restrict__). */
static void buf_ptr_decl(CK *c, Buf *b, const Buffer *buf, bool restrict_) {
    const char *r = !restrict_                       ? ""
                    : c->e->target == CG_TARGET_CUDA ? "__restrict__ "
                                                     : "restrict ";
    buf_printf(b, "%s%s *%s%s", ptrmap_has(&c->written, buf) ? "" : "const ", cg_ctype(buf->dtype),
               r, name_of_buf(c, buf));
}

/* True when s stores to memory at an index that does not use `var` (or
 * calls an extern): the iterations of a loop over var would then update
 * the same elements, which `omp simd` would wrongly declare independent.
 * Scalars (one-element locals) are registers, whose reductions the C
 * compiler handles. */
static bool updates_across(CK *c, const Stmt *s, const Axis *var) {
    if (!s)
        return false;
    switch (s->kind) {
    case ST_FOR:
        return updates_across(c, s->u.loop.body, var);
    case ST_IF:
        return updates_across(c, s->u.if_.then_s, var) || updates_across(c, s->u.if_.else_s, var);
    case ST_LET:
        return updates_across(c, s->u.let.body, var);
    case ST_ALLOC:
        return updates_across(c, s->u.alloc.body, var);
    case ST_SEQ:
        for (int i = 0; i < s->u.seq.n; i++)
            if (updates_across(c, s->u.seq.stmts[i], var))
                return true;
        return false;
    case ST_STORE:
        return !ptrmap_has(&c->e->scalars, s->u.store.buf) && !ir_uses_axis(s->u.store.index, var);
    case ST_CALL:
        return true;
    default:
        return false;
    }
}

/* The stores of an element-wise loop body (plain_map). */
typedef struct MapStores {
    const Stmt *st[16];
    int n;
    bool ok;
} MapStores;

static void collect_map_stores(CK *c, const Stmt *s, const Axis *var, MapStores *ms) {
    switch (s->kind) {
    case ST_SEQ:
        for (int i = 0; i < s->u.seq.n && ms->ok; i++)
            collect_map_stores(c, s->u.seq.stmts[i], var, ms);
        return;
    case ST_LET:
        collect_map_stores(c, s->u.let.body, var, ms);
        return;
    case ST_STORE: {
        /* consecutive elements: a strided store would be a scatter, slower
         * than the scalar loop */
        int64_t k;
        Expr *coeff = ir_linear_coeff(c->k->m, s->u.store.index, var);
        ms->ok = ms->n < RV_COUNT(ms->st) && !ptrmap_has(&c->e->scalars, s->u.store.buf) &&
                 coeff && ir_is_const_int(coeff, &k) && k == 1;
        for (int i = 0; i < ms->n && ms->ok; i++) /* one index per buffer */
            ms->ok = ms->st[i]->u.store.buf != s->u.store.buf ||
                     ms->st[i]->u.store.index == s->u.store.index;
        if (ms->ok)
            ms->st[ms->n++] = s;
        return;
    }
    default: /* loops, branches, allocations, calls */
        ms->ok = false;
        return;
    }
}

typedef struct MapLoads {
    const MapStores *ms;
    bool ok;
} MapLoads;

/* A load from a buffer the body stores to must read the element this
 * iteration stores. */
static void check_map_load(const Expr *e, void *ctx) {
    MapLoads *ml = ctx;
    if (e->kind != EX_LOAD)
        return;
    for (int i = 0; i < ml->ms->n; i++)
        if (ml->ms->st[i]->u.store.buf == e->u.buf && ml->ms->st[i]->u.store.index != e->args[0])
            ml->ok = false;
}

static void check_map_loads(const Stmt *s, MapLoads *ml) {
    switch (s->kind) {
    case ST_SEQ:
        for (int i = 0; i < s->u.seq.n; i++)
            check_map_loads(s->u.seq.stmts[i], ml);
        break;
    case ST_LET:
        ir_visit(s->u.let.value, check_map_load, ml);
        check_map_loads(s->u.let.body, ml);
        break;
    case ST_STORE:
        ir_visit(s->u.store.index, check_map_load, ml);
        ir_visit(s->u.store.value, check_map_load, ml);
        break;
    default:
        break;
    }
}

/* Is a serial loop over var with this body element-wise: only stores (and
 * lets), each to the next element per iteration, no loop, branch,
 * call or reduction inside, no load of another iteration's element? GCC's
 * loop vectorizer is off (src/jit/jit.c; and with it `omp simd`), so ravel
 * vectorizes such loops itself (cg_vector_map): an unscheduled
 * `Y = X * W + 1` runs 3.6x faster so. */
static bool plain_map(CK *c, const Stmt *body, const Axis *var) {
    MapStores ms = {.ok = true};
    collect_map_stores(c, body, var, &ms);
    if (!ms.ok || ms.n == 0)
        return false;
    MapLoads ml = {&ms, true};
    check_map_loads(body, &ml);
    return ml.ok;
}

/* The most copies of a body that nested unrolled loops may make; an inner
 * unroll that would pass it stays rolled (64 x 32 copies of an inlined
 * reduction kept gcc busy for minutes). */
#define UNROLL_PRODUCT_MAX 512

/* Writes the loop's pragmas; returns its unroll factor (1 if not unrolled). */
static int64_t emit_pragmas(CK *c, CFn *f, const Stmt *s) {
    int64_t n, outer = c->unrolled ? c->unrolled : 1;
    switch (s->u.loop.kind) {
    case LOOP_VECTOR:
        if (updates_across(c, s->u.loop.body, s->u.loop.var))
            line(f, "/* vector loop left to the compiler: its iterations update shared "
                    "elements */\n");
        else
            line(f, "#pragma omp simd\n");
        break;
    case LOOP_UNROLL:
        if (!ir_is_const_int(s->u.loop.extent, &n))
            line(f, "/* unroll: the extent is not a constant */\n");
        else if (n > SCHED_MAX_UNROLL)
            line(f, "/* unroll: the extent %lld is over %d; left rolled */\n", (long long)n,
                 SCHED_MAX_UNROLL);
        else if (n > 1 && outer * n > UNROLL_PRODUCT_MAX)
            line(f, "/* unroll: inside unrolled loops it would make %lld copies; left rolled */\n",
                 (long long)(outer * n));
        else if (n > 1) {
            line(f, "#pragma GCC unroll %lld\n", (long long)n);
            return n;
        }
        break;
    case LOOP_GPU_BLOCK_X:
    case LOOP_GPU_BLOCK_Y:
    case LOOP_GPU_BLOCK_Z:
    case LOOP_GPU_THREAD_X:
    case LOOP_GPU_THREAD_Y:
    case LOOP_GPU_THREAD_Z:
        line(f, "/* GPU-bound loop: serial on the CPU */\n");
        break;
    default:
        break;
    }
    return 1;
}

static void emit_for_header(CK *c, CFn *f, const char *var, const char *from, const Expr *ext) {
    line(f, "for (int64_t %s = %s; %s < ", var, from, var);
    if (ext)
        cg_expr_operand(c->e, &f->text, ext);
    else
        buf_puts(&f->text, "end");
    buf_printf(&f->text, "; %s++) {\n", var);
}

/* The names of a balanced parallel loop's prefix of work (c_balance.c):
 * struct members of its captures and locals of the caller alike. */
typedef struct Balance {
    const Expr *work; /* one row's work, over the loop variable */
    const char *prefix, *rows, *chunks;
} Balance;

/* A balanced loop's call: the prefix of its rows' work, then one chunk of
 * equal work per thread. With one thread, or when the prefix cannot be
 * allocated, its chunks are its rows (prefix NULL), as in any other loop. */
static void emit_balanced_call(CK *c, CFn *f, const Stmt *s, const Balance *bal) {
    const char *var = name_of_axis(c, s->u.loop.var);
    line(f, "const int64_t %s = ", bal->rows);
    cg_expr(c->e, &f->text, s->u.loop.extent);
    buf_puts(&f->text, ";\n");
    line(f, "int64_t %s = %s;\n", bal->chunks, bal->rows);
    line(f, "int64_t *%s = NULL;\n", bal->prefix);
    line(f, "if (ctx->num_threads > 1 && %s > ctx->num_threads) {\n", bal->rows);
    open_block(f);
    line(f, "%s = ctx->alloc(ctx, (size_t)(%s + 1) * sizeof(int64_t));\n", bal->prefix, bal->rows);
    line(f, "if (%s) {\n", bal->prefix);
    open_block(f);
    line(f, "%s[0] = 0;\n", bal->prefix);
    line(f, "for (int64_t %s = 0; %s < %s; %s++) {\n", var, var, bal->rows, var);
    open_block(f);
    declare(f, var);
    line(f, "%s[%s + 1] = %s[%s] + ", bal->prefix, var, bal->prefix, var);
    cg_expr(c->e, &f->text, bal->work);
    buf_puts(&f->text, ";\n");
    close_block(f);
    line(f, "}\n");
    line(f, "%s = ctx->num_threads;\n", bal->chunks);
    close_block(f);
    line(f, "}\n");
    close_block(f);
    line(f, "}\n");
}

/* The outlined function of a parallel loop: a struct of captures and a
 * static function running iterations [begin, end). A loop whose rows
 * differ in work (c_balance.c) runs chunks [begin, end) of equal work
 * instead, each finding its rows in the prefix of work. */
static void emit_parallel(CK *c, CFn *f, const Stmt *s) {
    CgEmit *e = c->e;
    const Axis *var = s->u.loop.var;
    Free fv;
    free_init(c, &fv, s->u.loop.body, var);
    const char *fn = cg_global(e, arena_printf(e->arena, "%s_par%d", c->sym, c->npar++));
    Balance bal = {.work = cg_loop_work(c->k->m, s, &c->written)};
    if (bal.work) {
        bal.prefix = cg_fresh(e, "work_prefix");
        bal.rows = cg_fresh(e, "work_rows");
        bal.chunks = cg_fresh(e, "work_chunks");
    }
    bool any = fv.sizes.len || fv.axes.len || fv.bufs.len || fv.ctx || bal.work;

    /* the struct of captured variables */
    Buf *d = c->defs;
    if (any) {
        buf_printf(d, "/* What the parallel loop over %s in %s reads from its kernel. */\n",
                   name_of_axis(c, var), c->sym);
        buf_printf(d, "struct %s {\n", fn);
        for (int i = 0; i < fv.sizes.len; i++)
            buf_printf(d, "    int64_t %s;\n", name_of_size(c, fv.sizes.data[i]));
        for (int i = 0; i < fv.axes.len; i++)
            buf_printf(d, "    %s %s;\n", cg_ctype(axis_dtype(c, fv.axes.data[i])),
                       name_of_axis(c, fv.axes.data[i]));
        for (int i = 0; i < fv.bufs.len; i++) {
            const Buffer *b = fv.bufs.data[i];
            RV_ASSERT(!ptrmap_has(&e->scalars, b));
            buf_puts(d, "    ");
            buf_ptr_decl(c, d, b, false);
            buf_puts(d, ";\n");
        }
        if (fv.ctx)
            buf_puts(d, "    struct rv_rt_ctx *ctx;\n");
        if (bal.work)
            buf_printf(d, "    const int64_t *%s; /* NULL: chunks are rows */\n    int64_t %s, %s;\n",
                       bal.prefix, bal.rows, bal.chunks);
        buf_puts(d, "};\n\n");
    }

    /* the function */
    CFn g = {0};
    buf_printf(&g.text, "/* Iterations [begin, end) of the parallel loop over %s in %s. */\n",
               name_of_axis(c, var), c->sym);
    buf_printf(&g.text, "static void %s(void *arg, int64_t begin, int64_t end, int tid) {\n", fn);
    open_block(&g);
    if (any)
        line(&g, "const struct %s *env = arg;\n", fn);
    else
        line(&g, "(void)arg;\n");
    line(&g, "(void)tid;\n");
    for (int i = 0; i < fv.sizes.len; i++) {
        const char *n = name_of_size(c, fv.sizes.data[i]);
        line(&g, "const int64_t %s = env->%s;\n", n, n);
    }
    for (int i = 0; i < fv.axes.len; i++) {
        const char *n = name_of_axis(c, fv.axes.data[i]);
        line(&g, "const %s %s = env->%s;\n", cg_ctype(axis_dtype(c, fv.axes.data[i])), n, n);
    }
    for (int i = 0; i < fv.bufs.len; i++) {
        const Buffer *b = fv.bufs.data[i];
        buf_indent(&g.text, 4 * g.indent);
        buf_ptr_decl(c, &g.text, b, true);
        buf_printf(&g.text, " = __builtin_assume_aligned(env->%s, 64);\n", name_of_buf(c, b));
    }
    if (fv.ctx)
        line(&g, "struct rv_rt_ctx *ctx = env->ctx;\n");
    if (bal.work) {
        line(&g, "if (env->%s) { /* chunks of equal work */\n", bal.prefix);
        open_block(&g);
        line(&g, "const int64_t first = rv_rt_work_start(env->%s, env->%s, begin, env->%s);\n",
             bal.prefix, bal.rows, bal.chunks);
        line(&g, "end = rv_rt_work_start(env->%s, env->%s, end, env->%s);\n", bal.prefix, bal.rows,
             bal.chunks);
        line(&g, "begin = first;\n");
        close_block(&g);
        line(&g, "}\n");
    }
    emit_for_header(c, &g, name_of_axis(c, var), "begin", NULL);
    open_block(&g);
    declare(&g, name_of_axis(c, var));
    emit_body(c, &g, s->u.loop.body);
    close_block(&g);
    line(&g, "}\n");
    close_block(&g);
    buf_puts(&g.text, "}\n\n");
    buf_puts(d, buf_str(&g.text));
    fn_free(&g);

    /* the call */
    if (bal.work) {
        line(f, "{\n");
        open_block(f);
        emit_balanced_call(c, f, s, &bal);
    }
    if (any) {
        const char *cap = cg_fresh(e, arena_printf(e->arena, "par%d", c->npar - 1));
        line(f, "struct %s %s = {", fn, cap);
        const char *sep = "";
        for (int i = 0; i < fv.sizes.len; i++, sep = ", ") {
            const char *n = name_of_size(c, fv.sizes.data[i]);
            buf_printf(&f->text, "%s.%s = %s", sep, n, n);
        }
        for (int i = 0; i < fv.axes.len; i++, sep = ", ") {
            const char *n = name_of_axis(c, fv.axes.data[i]);
            buf_printf(&f->text, "%s.%s = %s", sep, n, n);
        }
        for (int i = 0; i < fv.bufs.len; i++, sep = ", ") {
            const char *n = name_of_buf(c, fv.bufs.data[i]);
            buf_printf(&f->text, "%s.%s = %s", sep, n, n);
        }
        if (fv.ctx)
            buf_printf(&f->text, "%s.ctx = ctx", sep);
        if (bal.work)
            buf_printf(&f->text, "%s.%s = %s, .%s = %s, .%s = %s", sep, bal.prefix, bal.prefix,
                       bal.rows, bal.rows, bal.chunks, bal.chunks);
        buf_puts(&f->text, "};\n");
        line(f, "ctx->parallel_for(");
        if (bal.work)
            buf_puts(&f->text, bal.chunks);
        else
            cg_expr(e, &f->text, s->u.loop.extent);
        buf_printf(&f->text, ", %s, &%s);\n", fn, cap);
        if (bal.work) {
            line(f, "ctx->free(ctx, %s);\n", bal.prefix);
            close_block(f);
            line(f, "}\n");
        }
    } else {
        line(f, "ctx->parallel_for(");
        cg_expr(e, &f->text, s->u.loop.extent);
        buf_printf(&f->text, ", %s, NULL);\n", fn);
    }
    free_release(&fv);
}

/* The block of a loop whose header is written: its variable, its body. */
static void emit_loop_body(CK *c, CFn *f, const char *var, const Stmt *body) {
    open_block(f);
    declare(f, var);
    emit_body(c, f, body);
    close_block(f);
    line(f, "}\n");
}

/* CUDA: a loop bound to a block or thread index is that index, guarded
 * by the loop's extent (the launch may cover more, see cuda.c); in a
 * persistent kernel (CgEmit.gpu_strided), whose grid is what the device
 * holds at once, a loop from the index in steps of the grid's extent. */
static void emit_gpu_loop(CK *c, CFn *f, const Stmt *s) {
    static const char *const index[6] = {"blockIdx.x",  "blockIdx.y",  "blockIdx.z",
                                         "threadIdx.x", "threadIdx.y", "threadIdx.z"};
    static const char *const step[6] = {"gridDim.x",  "gridDim.y",  "gridDim.z",
                                        "blockDim.x", "blockDim.y", "blockDim.z"};
    const char *var = name_of_axis(c, s->u.loop.var);
    int d = s->u.loop.kind - LOOP_GPU_BLOCK_X;
    if (c->e->gpu_strided) {
        line(f, "for (int64_t %s = %s; %s < ", var, index[d], var);
        cg_expr_operand(c->e, &f->text, s->u.loop.extent);
        buf_printf(&f->text, "; %s += %s) {\n", var, step[d]);
        emit_loop_body(c, f, var, s->u.loop.body);
        return;
    }
    bool braces = declared_here(f, var);
    if (braces) {
        line(f, "{\n");
        open_block(f);
    }
    line(f, "const int64_t %s = %s;\n", var, index[s->u.loop.kind - LOOP_GPU_BLOCK_X]);
    declare(f, var);
    line(f, "if (%s < ", var);
    cg_expr_operand(c->e, &f->text, s->u.loop.extent);
    buf_puts(&f->text, ") {\n");
    open_block(f);
    emit_body(c, f, s->u.loop.body);
    close_block(f);
    line(f, "}\n");
    if (braces) {
        close_block(f);
        line(f, "}\n");
    }
}

static void emit_for(CK *c, CFn *f, const Stmt *s) {
    LoopKind kind = s->u.loop.kind;
    if (c->e->target == CG_TARGET_CUDA) {
        if (sched_kind_is_gpu(kind)) {
            emit_gpu_loop(c, f, s);
            return;
        }
        /* parallel and vector loops run serially inside a CUDA thread */
        const char *var = name_of_axis(c, s->u.loop.var);
        int64_t n;
        if (kind == LOOP_UNROLL && ir_is_const_int(s->u.loop.extent, &n) && n > 1)
            line(f, "#pragma unroll\n");
        emit_for_header(c, f, var, "0", s->u.loop.extent);
        emit_loop_body(c, f, var, s->u.loop.body);
        return;
    }
    if (kind == LOOP_PARALLEL) {
        emit_parallel(c, f, s);
        return;
    }
    if (kind == LOOP_UNROLL && cg_transpose_loop(c->e, c->k->m, s, f->indent, &f->text))
        return;
    const char *var = name_of_axis(c, s->u.loop.var);
    const char *from = "0";
    if (kind == LOOP_VECTOR) {
        /* explicit vector code (c_vector.c); the loop below runs what it leaves */
        const char *why = "";
        int64_t n = 0, done = cg_vector_loop(c->e, c->k->m, s, f->indent, &f->text, &why);
        if (done < 0 || (done && ir_is_const_int(s->u.loop.extent, &n) && done == n))
            return;
        if (done)
            from = arena_printf(c->e->arena, "%lld", (long long)done);
        else
            line(f, "/* not vectorized: %s */\n", why);
    } else if (kind == LOOP_SERIAL && c->e->target == CG_TARGET_C &&
               plain_map(c, s->u.loop.body, s->u.loop.var)) {
        const char *rest = cg_vector_map(c->e, c->k->m, s, f->indent, &f->text);
        if (rest)
            from = rest;
    }
    int64_t factor = strcmp(from, "0") == 0 ? emit_pragmas(c, f, s) : 1;
    int64_t around = c->unrolled;
    if (factor > 1)
        c->unrolled = (around ? around : 1) * factor;
    emit_for_header(c, f, var, from, s->u.loop.extent);
    open_block(f);
    declare(f, var);
    emit_body(c, f, s->u.loop.body);
    close_block(f);
    line(f, "}\n");
    c->unrolled = around;
}

static void emit_if(CK *c, CFn *f, const Stmt *s) {
    line(f, "if (");
    for (;;) {
        cg_expr(c->e, &f->text, s->u.if_.cond);
        buf_puts(&f->text, ") {\n");
        open_block(f);
        emit_body(c, f, s->u.if_.then_s);
        close_block(f);
        const Stmt *els = s->u.if_.else_s;
        if (els && els->kind == ST_IF) {
            line(f, "} else if (");
            s = els;
            continue;
        }
        if (els) {
            line(f, "} else {\n");
            open_block(f);
            emit_body(c, f, els);
            close_block(f);
        }
        line(f, "}\n");
        return;
    }
}

static void emit_let(CK *c, CFn *f, const Stmt *s) {
    const char *var = name_of_axis(c, s->u.let.var);
    bool braces = declared_here(f, var);
    if (braces) {
        line(f, "{\n");
        open_block(f);
    }
    line(f, "const %s %s = ", cg_ctype(s->u.let.value->dtype), var);
    cg_expr(c->e, &f->text, s->u.let.value);
    buf_puts(&f->text, ";\n");
    declare(f, var);
    /* (a masked vector tail bounds its extent through them, c_vector.c) */
    ptrmap_put(&c->e->lets, s->u.let.var, s->u.let.value);
    emit_body(c, f, s->u.let.body);
    ptrmap_put(&c->e->lets, s->u.let.var, NULL);
    if (braces) {
        close_block(f);
        line(f, "}\n");
    }
}

/* `buf[i] op= v` when value is `buf[i] op v` (or `v + buf[i]`). */
static bool compound_store(CK *c, CFn *f, const Stmt *s) {
    const Expr *v = s->u.store.value;
    const char *op;
    switch (v->kind) {
    case EX_ADD:
        op = "+=";
        break;
    case EX_SUB:
        op = "-=";
        break;
    case EX_MUL:
        op = "*=";
        break;
    default:
        return false;
    }
    const Expr *self = NULL, *other = NULL;
    for (int i = 0; i < 2 && !self; i++) {
        const Expr *a = v->args[i];
        if (a->kind == EX_LOAD && a->u.buf == s->u.store.buf && a->args[0] == s->u.store.index &&
            (i == 0 || v->kind != EX_SUB)) {
            self = a;
            other = v->args[1 - i];
        }
    }
    if (!self)
        return false;
    buf_printf(&f->text, " %s ", op);
    cg_expr(c->e, &f->text, other);
    return true;
}

static void emit_store(CK *c, CFn *f, const Stmt *s) {
    const Buffer *b = s->u.store.buf;
    line(f, "%s", name_of_buf(c, b));
    if (!ptrmap_has(&c->e->scalars, b)) {
        buf_putc(&f->text, '[');
        cg_expr(c->e, &f->text, s->u.store.index);
        buf_putc(&f->text, ']');
    }
    if (!compound_store(c, f, s)) {
        buf_puts(&f->text, " = ");
        cg_expr(c->e, &f->text, s->u.store.value);
    }
    buf_puts(&f->text, ";\n");
}

static void emit_alloc(CK *c, CFn *f, const Stmt *s) {
    const Buffer *b = s->u.alloc.buf;
    const char *n = name_of_buf(c, b);
    const char *t = cg_ctype(b->dtype);
    bool braces = declared_here(f, n);
    if (braces) {
        line(f, "{\n");
        open_block(f);
    }
    declare(f, n);
    int64_t size;
    switch (place_of(c, b)) {
    case PLACE_SCALAR:
        line(f, "%s %s;\n", t, n);
        if (ptrmap_has(&c->e->unread, b)) /* stored, never read: not a warning */
            line(f, "(void)%s;\n", n);
        emit_body(c, f, s->u.alloc.body);
        break;
    case PLACE_VECTOR: /* zero: stores before loads are not always provable (-Wmaybe-uninitialized) */
        const_size(b, &size);
        line(f, "%s %s = {0};\n", cg_vector_type(c->e, b->dtype, (int)size), n);
        emit_body(c, f, s->u.alloc.body);
        break;
    case PLACE_STACK:
        const_size(b, &size);
        line(f, "%s%s %s[%lld]%s;\n", ptrmap_has(&c->e->shared, b) ? "__shared__ " : "", t, n,
             (long long)(size > 0 ? size : 1),
             c->e->target == CG_TARGET_C ? " __attribute__((aligned(64)))" : "");
        emit_body(c, f, s->u.alloc.body);
        break;
    case PLACE_SCRATCH:
        RV_ASSERT(c->e->target == CG_TARGET_C); /* cuda.c rejects these first */
        line(f, "%s *restrict %s = ctx->alloc(ctx, (size_t)(", t, n);
        cg_expr(c->e, &f->text, b->size);
        buf_printf(&f->text, ") * sizeof(%s));\n", t);
        line(f, "if (%s) {\n", n);
        open_block(f);
        emit_body(c, f, s->u.alloc.body);
        line(f, "ctx->free(ctx, %s);\n", n);
        close_block(f);
        line(f, "}\n");
        break;
    }
    if (braces) {
        close_block(f);
        line(f, "}\n");
    }
}

/* An extern call: rv_<kernel>_<dtype>(dims..., out, ldo, inputs with
 * their row strides...). */
static void emit_call(CK *c, CFn *f, const Stmt *s) {
    Module *m = c->k->m;
    const Tensor *out = s->u.call.out;
    const char *kernel = s->u.call.kernel;
    char fn[64];
    RV_ASSERT(c->e->target == CG_TARGET_C); /* cuda.c rejects calls first */
    if (!cg_extern_fn(kernel, out->dtype, fn))
        base_panic(__FILE__, __LINE__, "codegen: no C implementation of extern %s on %s", kernel,
                   rv_dtype_name(out->dtype));
    bool known = false;
    for (int i = 0; i < c->externs->len; i++)
        known |= strcmp(c->externs->data[i].kernel, kernel) == 0 &&
                 c->externs->data[i].dtype == out->dtype;
    if (!known) {
        ExternUse u = {kernel, out->dtype};
        vec_push(c->externs, u);
    }
    RV_ASSERT(out->ndim == 2 && s->u.call.nargs >= 2);
    const Tensor *a = s->u.call.args[1]->tensor;
    RV_ASSERT(a && a->ndim == 2);
    /* dimensions: M, N (the output's), then K for the matmuls */
    Expr *dims[3] = {call_dim(m, out, 0, false), call_dim(m, out, 1, false), NULL};
    if (strncmp(kernel, "matmul", 6) == 0)
        dims[2] = call_dim(m, a, 1, false);
    line(f, "%s(", fn);
    for (int i = 0; i < 3 && dims[i]; i++) {
        cg_expr(c->e, &f->text, dims[i]);
        buf_puts(&f->text, ", ");
    }
    for (int i = 0; i < s->u.call.nargs; i++) {
        const Buffer *b = s->u.call.args[i];
        const Tensor *t = i == 0 ? out : b->tensor;
        RV_ASSERT(t && t->ndim == 2);
        buf_printf(&f->text, "%s%s, ", i ? ", " : "", name_of_buf(c, b));
        cg_expr(c->e, &f->text, call_dim(m, t, 1, true));
    }
    buf_puts(&f->text, ");\n");
}

static void emit_stmt(CK *c, CFn *f, const Stmt *s) {
    switch (s->kind) {
    case ST_FOR:
        emit_for(c, f, s);
        return;
    case ST_IF:
        emit_if(c, f, s);
        return;
    case ST_LET:
        emit_let(c, f, s);
        return;
    case ST_STORE:
        emit_store(c, f, s);
        return;
    case ST_ALLOC:
        emit_alloc(c, f, s);
        return;
    case ST_SEQ:
        for (int i = 0; i < s->u.seq.n; i++)
            emit_stmt(c, f, s->u.seq.stmts[i]);
        return;
    case ST_CALL:
        emit_call(c, f, s);
        return;
    case ST_BARRIER:
        if (c->e->target == CG_TARGET_CUDA) {
            line(f, s->u.barrier.grid ? "rv_grid_sync();\n" : "__syncthreads();\n");
            return;
        }
        base_panic(__FILE__, __LINE__, "codegen: a barrier in CPU code (kernel %s)", c->k->name);
    case ST_FAIL:
        /* the first failure wins; the host reports it after the kernel */
        if (c->e->target == CG_TARGET_CUDA)
            line(f, "__trap();\n");
        else
            line(f, "(void)__atomic_compare_exchange_n(&ctx->error, &(int32_t){0}, %d, 0, "
                    "__ATOMIC_RELAXED, __ATOMIC_RELAXED);\n",
                 s->u.fail.site + 1);
        return;
    default:
        RV_UNREACHABLE();
    }
}

void cg_emit_stmts(CgEmit *e, const Kernel *k, const Stmt *s, const PtrMap *written, int indent,
                   Buf *out) {
    CK c = {.e = e, .k = k, .sym = k->name};
    c.written = *written; /* borrowed: not freed here */
    CFn f = {.indent = indent};
    vec_push(&f.marks, 0); /* the caller's block */
    emit_body(&c, &f, s);
    buf_puts(out, buf_str(&f.text));
    fn_free(&f);
    ptrmap_free(&c.let_type);
}

/* ---- kernels ---- */

/* True when x can be printed as C (for the header comment). */
static bool printable(const Expr *x) {
    if (!x || x->kind == EX_READ || x->kind == EX_UFCALL || x->kind == EX_REDUCE)
        return false;
    for (int i = 0; i < x->n; i++)
        if (!printable(x->args[i]))
            return false;
    return true;
}

static const char *param_role(const Param *p) {
    switch (p->kind) {
    case PARAM_UF:
        return "ufun";
    case PARAM_TENSOR:
        return "tensor";
    case PARAM_AUX:
        return "aux";
    case PARAM_PACK:
        return "pack";
    default:
        return "size";
    }
}

/* The comment above a kernel: its name and parameters. */
static void emit_header(CK *c, Buf *b) {
    const Kernel *k = c->k;
    buf_printf(b, "/*\n * Kernel %s (tensor %s)%s\n", c->sym, k->name,
               k->prelude ? "; its prelude fills the aux arrays" : "");
    int ns = 0, nb = 0;
    for (int i = 0; i < k->nparams; i++) {
        const Param *p = &k->params[i];
        if (p->kind == PARAM_SIZE) {
            buf_printf(b, " *   sizes[%d]  %s\n", ns++, name_of_size(c, p->size));
            continue;
        }
        const Buffer *buf = p->buf;
        buf_printf(b, " *   bufs[%d]   %-5s %s %s", nb++, param_role(p), rv_dtype_name(buf->dtype),
                   name_of_buf(c, buf));
        if (printable(buf->size)) {
            buf_puts(b, ", ");
            cg_expr(c->e, b, buf->size);
            buf_puts(b, " elements");
        }
        buf_putc(b, '\n');
    }
    buf_puts(b, " */\n");
}

/* A top-level function (kernel or prelude): binds the parameters its
 * statements use, then the statements. */
static void emit_function(CK *c, const Stmt *body, const char *sym, bool prelude) {
    analyze(c, body);
    Free fv;
    free_init(c, &fv, body, NULL);
    RV_ASSERT(fv.axes.len == 0);
    CFn f = {0};
    if (!prelude)
        emit_header(c, &f.text);
    if (prelude)
        buf_printf(&f.text,
                   "/* Fills the aux arrays of %s from sizes and ufun arrays. */\n"
                   "int32_t %s(const int64_t *sizes, void *const *bufs) {\n",
                   c->sym, sym);
    else
        buf_printf(&f.text,
                   "int32_t %s(const int64_t *sizes, void *const *bufs, struct rv_rt_ctx *ctx) {\n",
                   sym);
    open_block(&f);
    /* bind the parameters used, in parameter order */
    for (int i = 0; i < fv.sizes.len; i++)
        if (!ptrmap_has(&c->param_at, fv.sizes.data[i]))
            base_panic(__FILE__, __LINE__, "codegen: kernel %s uses size %s, not a parameter",
                       c->k->name, fv.sizes.data[i]->name);
    for (int i = 0; i < fv.bufs.len; i++)
        if (!ptrmap_has(&c->param_at, fv.bufs.data[i]))
            base_panic(__FILE__, __LINE__,
                       "codegen: kernel %s uses buffer %s, neither a parameter nor allocated",
                       c->k->name, fv.bufs.data[i]->name);
    if (!fv.sizes.len)
        line(&f, "(void)sizes;\n");
    if (!fv.bufs.len)
        line(&f, "(void)bufs;\n");
    int ns = 0, nb = 0;
    for (int i = 0; i < c->k->nparams; i++) {
        const Param *p = &c->k->params[i];
        if (p->kind == PARAM_SIZE) {
            if (ptrmap_has(&fv.seen, p->size))
                line(&f, "const int64_t %s = sizes[%d];\n", name_of_size(c, p->size), ns);
            ns++;
        } else {
            if (ptrmap_has(&fv.seen, p->buf)) {
                buf_indent(&f.text, 4);
                buf_ptr_decl(c, &f.text, p->buf, true);
                buf_printf(&f.text, " = __builtin_assume_aligned(bufs[%d], 64);\n", nb);
            }
            nb++;
        }
    }
    if (!prelude && !fv.ctx)
        line(&f, "(void)ctx;\n");
    emit_body(c, &f, body);
    line(&f, "return RV_RT_OK;\n");
    close_block(&f);
    buf_puts(&f.text, "}\n\n");
    buf_puts(c->defs, buf_str(&f.text));
    fn_free(&f);
    free_release(&fv);
}

/* Names the kernel's parameters first, in order, so they get the clean
 * names, and records where each one is passed. */
static void bind_params(CK *c) {
    cg_emit_begin_kernel(c->e);
    ptrmap_free(&c->param_at);
    const Kernel *k = c->k;
    int ns = 0, nb = 0;
    for (int i = 0; i < k->nparams; i++) {
        const Param *p = &k->params[i];
        if (p->kind == PARAM_SIZE) {
            name_of_size(c, p->size);
            ptrmap_put(&c->param_at, p->size, (void *)(intptr_t)(++ns));
        } else {
            name_of_buf(c, p->buf);
            ptrmap_put(&c->param_at, p->buf, (void *)(intptr_t)(++nb));
        }
    }
}

static void emit_kernel(CgEmit *e, const Kernel *k, const char *sym, const char *prelude_sym,
                        Buf *defs, ExternVec *externs) {
    CK c = {.e = e, .k = k, .sym = sym, .defs = defs, .externs = externs};
    bind_params(&c);
    emit_function(&c, k->body, sym, false);
    if (k->prelude) {
        /* a function of its own: its loop variables need not avoid the body's */
        bind_params(&c);
        emit_function(&c, k->prelude, prelude_sym, true);
    }
    ptrmap_free(&c.param_at);
    ptrmap_free(&c.written);
    ptrmap_free(&c.let_type);
}

void cg_c_module(Kernel *const *ks, int n, CgUnit *out) {
    memset(out, 0, sizeof *out);
    CgEmit e;
    cg_emit_init(&e, CG_TARGET_C);
    Buf defs = {0};
    ExternVec externs = {0};
    out->n = n;
    out->kernel_syms = base_xcalloc((size_t)n + 1, sizeof(char *));
    out->prelude_syms = base_xcalloc((size_t)n + 1, sizeof(char *));
    for (int i = 0; i < n; i++) {
        const char *sym =
            cg_global_with(&e, arena_printf(e.arena, "kernel_%s", ks[i]->name), "_prelude");
        const char *pre = arena_printf(e.arena, "%s_prelude", sym);
        out->kernel_syms[i] = base_xstrdup(sym);
        out->prelude_syms[i] = ks[i]->prelude ? base_xstrdup(pre) : NULL;
        emit_kernel(&e, ks[i], sym, pre, &defs, &externs);
    }

    Buf b = {0};
    buf_puts(&b, "/*\n * Generated by ravel: ");
    for (int i = 0; i < n; i++)
        buf_printf(&b, "%s%s", i ? ", " : "", out->kernel_syms[i]);
    buf_printf(&b,
               ".\n * Calling convention: ravel_rt.h (ABI version %d). Vector loops use GCC\n"
               " * vector extensions, or OpenMP simd pragmas (compile with -fopenmp-simd).\n"
               " */\n",
               RV_RT_ABI_VERSION);
    buf_puts(&b, "#include <math.h>\n\n#include \"ravel_rt.h\"\n\n");
    /* `#pragma omp simd` is a hint: without -fopenmp-simd the loop runs as
     * written, so -Wall (unknown pragmas) need not say so */
    buf_puts(&b, "#pragma GCC diagnostic ignored \"-Wunknown-pragmas\"\n"
                 "#ifdef __clang__\n#pragma clang diagnostic ignored \"-Wsource-uses-openmp\"\n"
                 "#endif\n\n");
    cg_emit_helpers(&e, &b);
    for (int i = 0; i < externs.len; i++) {
        cg_extern_define(&b, externs.data[i].kernel, externs.data[i].dtype);
        buf_putc(&b, '\n');
    }
    buf_puts(&b, buf_str(&defs));
    /* one trailing newline */
    while (b.len > 1 && b.data[b.len - 1] == '\n' && b.data[b.len - 2] == '\n')
        b.data[--b.len] = 0;
    out->source = buf_take(&b);
    buf_free(&defs);
    vec_free(&externs);
    cg_emit_free(&e);
}

void cg_unit_free(CgUnit *u) {
    if (!u)
        return;
    base_free(u->source);
    for (int i = 0; i < u->n; i++) {
        base_free(u->kernel_syms[i]);
        base_free(u->prelude_syms[i]);
    }
    base_free(u->kernel_syms);
    base_free(u->prelude_syms);
    memset(u, 0, sizeof *u);
}

char *cg_c_kernel(const Kernel *k) {
    Kernel *ks[1] = {(Kernel *)k};
    CgUnit u;
    cg_c_module(ks, 1, &u);
    char *src = u.source;
    u.source = NULL;
    cg_unit_free(&u);
    return src;
}
