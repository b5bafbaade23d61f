/*
 * test_hoist.c — loop-invariant code motion (src/lower/hoist.c) and the
 * loop-IR verifier (src/lower/verify.c).
 *
 * Loop nests are built by hand. The checks pin what moves (UF/AUX loads
 * and i64 arithmetic that do not depend on the loop, to just outside the
 * outermost loop they do not depend on) and what must not (tensor loads,
 * loads under an `if` of the loop, divisions by a non-constant, anything
 * using a variable bound inside the loop, GPU-bound loop extents). The
 * ragged kernel is then compiled by the JIT before and after hoisting and
 * both must write the same bytes, serially and on the thread pool.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include "codegen/codegen.h"
#include "harness.h"
#include "loop_ir.h"
#include "jit/jit.h"
#include "ravel_rt.h"

static char cache_dir[PATH_MAX];

#if defined(__SANITIZE_ADDRESS__)
#define KERNEL_FLAGS "-fopenmp-simd", "-fsanitize=address,undefined", "-fno-omit-frame-pointer"
#else
#define KERNEL_FLAGS "-fopenmp-simd"
#endif

/* ---- what moves ---- */

/* Y[off[b] + l] = A[off[b] + l] * 2 over a ragged nest: the extent
 * len[b] and the row start off[b] leave the l loop; b*3 too. */
static void test_ragged_loads(void) {
    Module *m = rv_module_new();
    Size *B = rv_size_new(m, "B", 1, 100);
    Expr *bsz = ir_size(m, B);
    Buffer *len = ir_buffer_new(m, "len", RV_I32, bsz, BUF_ARG);
    Ufun *f = rv_ufun_begin(m, "len", 1, (const char *const[]){"b"});
    len->uf = rv_ufun_end(f, (Expr *const[]){bsz}, I(m, 0), I(m, 9));
    Buffer *off = ir_buffer_new(m, "off", RV_I64, bin(m, EX_ADD, bsz, I(m, 1)), BUF_AUX);
    Buffer *A = ir_buffer_new(m, "A", RV_F32, ir_load(m, off, bsz), BUF_ARG);
    Buffer *Y = ir_buffer_new(m, "Y", RV_F32, ir_load(m, off, bsz), BUF_ARG);
    Axis *b = lower_loop_var(m, "b", bsz);
    Axis *l = lower_loop_var(m, "l", ir_cast(m, RV_I64, ir_load(m, len, b->var)));
    Expr *at = bin(m, EX_ADD, ir_load(m, off, b->var), l->var);
    Expr *v = bin(m, EX_MUL, ir_load(m, A, bin(m, EX_ADD, at, bin(m, EX_MUL, b->var, I(m, 3)))),
                  ir_float(m, RV_F32, 2));
    Stmt *s = loop(m, b, LOOP_SERIAL, loop(m, l, LOOP_SERIAL, lower_store(m, Y, at, v)));
    check_text(s, "for b in 0..B:\n"
                  "  for l in 0..i64(len[b]):\n"
                  "    Y[off[b] + l] = A[off[b] + l + b*3]*2.0\n");
    Stmt *h = lower_hoist(m, s);
    check_text(h, "for b in 0..B:\n"
                  "  let off_b = off[b]\n"
                  "  let t0 = b*3\n"
                  "  let len_b = i64(len[b])\n"
                  "  for l in 0..len_b:\n"
                  "    Y[off_b + l] = A[off_b + l + t0]*2.0\n");
    /* nothing left to move: the same pointer */
    CHECK(lower_hoist(m, h) == h);
    rv_module_free(m);
}

/* Sizes-only arithmetic leaves every loop; an expression is bound once
 * however often it occurs, and one containing another uses its variable. */
static void test_nesting_and_sharing(void) {
    Module *m = rv_module_new();
    Size *N = rv_size_new(m, "N", 1, 1000);
    Expr *n = ir_size(m, N);
    Buffer *Y = ir_buffer_new(m, "Y", RV_I64, bin(m, EX_MUL, n, n), BUF_ARG);
    Axis *i = lower_loop_var(m, "i", n), *j = lower_loop_var(m, "j", n);
    Expr *io = bin(m, EX_MUL, i->var, I(m, 24576));
    Expr *big = bin(m, EX_MUL, bin(m, EX_ADD, io, n), I(m, 2));
    Stmt *st[2] = {lower_store(m, Y, bin(m, EX_ADD, io, j->var), big),
                   lower_store(m, Y, bin(m, EX_ADD, big, j->var), io)};
    Stmt *s = loop(m, i, LOOP_PARALLEL, loop(m, j, LOOP_VECTOR, lower_seq(m, 2, st)));
    Stmt *h = lower_hoist(m, s);
    check_text(h, "parallel for i in 0..N:\n"
                  "  let t0 = i*24576\n"
                  "  let t1 = (t0 + N)*2\n"
                  "  vector for j in 0..N:\n"
                  "    Y[t0 + j] = t1\n"
                  "    Y[t1 + j] = t0\n");
    rv_module_free(m);
}

/* What stays: tensor loads, loads under an if of the loop, divisions by a
 * non-constant, values using a variable bound in the loop, float values. */
static void test_what_stays(void) {
    Module *m = rv_module_new();
    Size *N = rv_size_new(m, "N", 1, 1000), *K = rv_size_new(m, "K", 0, 10);
    Expr *n = ir_size(m, N), *k = ir_size(m, K);
    Buffer *X = ir_buffer_new(m, "X", RV_I64, n, BUF_ARG);
    Buffer *Y = ir_buffer_new(m, "Y", RV_I64, n, BUF_ARG);
    Buffer *F = ir_buffer_new(m, "F", RV_F32, n, BUF_ARG);
    Buffer *off = ir_buffer_new(m, "off", RV_I64, n, BUF_AUX);
    Axis *b = lower_loop_var(m, "b", n), *i = lower_loop_var(m, "i", n);
    Axis *v = lower_loop_var(m, "v", NULL);
    Expr *tensor_load = ir_load(m, X, b->var);                        /* a tensor: stays */
    Expr *guarded = ir_load(m, off, bin(m, EX_ADD, b->var, I(m, 1))); /* under the if */
    Expr *quot = bin(m, EX_DIV, n, k);                                /* K may be 0 */
    Stmt *in_if = lower_store(m, Y, i->var, guarded);
    Expr *cond = bin(m, EX_LT, bin(m, EX_ADD, b->var, i->var), n);
    Stmt *let = lower_let(
        m, v, bin(m, EX_MUL, i->var, I(m, 2)),
        lower_store(m, Y, bin(m, EX_ADD, v->var, I(m, 1)), bin(m, EX_ADD, tensor_load, quot)));
    Stmt *fl = lower_store(m, F, i->var, ir_cast(m, RV_F32, bin(m, EX_MUL, b->var, b->var)));
    Stmt *body[3] = {lower_if(m, cond, in_if, NULL), let, fl};
    Stmt *s = loop(m, b, LOOP_SERIAL, loop(m, i, LOOP_SERIAL, lower_seq(m, 3, body)));
    Stmt *h = lower_hoist(m, s);
    /* only b + 1 (arithmetic, even under the if) and b*b (inside the
     * float cast) move */
    check_text(h, "for b in 0..N:\n"
                  "  let t0 = b + 1\n"
                  "  let t1 = b*b\n"
                  "  for i in 0..N:\n"
                  "    if b + i < N:\n"
                  "      Y[i] = off[t0]\n"
                  "    let v = i*2:\n"
                  "      Y[v + 1] = X[b] + N/K\n"
                  "    F[i] = f32(t1)\n");
    rv_module_free(m);
}

/* A load runs where the original did not only when its index is proven
 * inside its buffer. f runs past off's domain (a tile past the end); the
 * region loop e is empty there: off[f] may leave e only under `if extent
 * > 0`, while off[b] (b < Q, off of size Q + 1) moves out of e and out of
 * an `if` freely. */
static void test_speculation(void) {
    Module *m = rv_module_new();
    Size *Q = rv_size_new(m, "Q", 1, 4);
    Expr *q = ir_size(m, Q), *q1 = bin(m, EX_ADD, q, I(m, 1));
    Buffer *off = ir_buffer_new(m, "off", RV_I32, q1, BUF_ARG);
    Ufun *f = rv_ufun_begin(m, "off", 1, (const char *const[]){"s"});
    off->uf = rv_ufun_end(f, (Expr *const[]){q1}, I(m, 0), q);
    Buffer *Y = ir_buffer_new(m, "Y", RV_F32, q1, BUF_ARG);
    Axis *t = lower_loop_var(m, "t", I(m, 64));
    Axis *e = lower_loop_var(m, "e", bin(m, EX_MAX, I(m, 0), bin(m, EX_SUB, q, t->var)));
    Expr *at = ir_cast(m, RV_I64, ir_load(m, off, t->var));
    Stmt *s = loop(m, t, LOOP_SERIAL,
                   loop(m, e, LOOP_SERIAL, lower_store(m, Y, at, ir_float(m, RV_F32, 1))));
    check_text(lower_hoist(m, s), "for t in 0..64:\n"
                                  "  if max(0, Q - t) > 0:\n"
                                  "    let off_t = i64(off[t])\n"
                                  "    for e in 0..max(0, Q - t):\n"
                                  "      Y[off_t] = 1.0\n");
    Axis *b = lower_loop_var(m, "b", q);
    Axis *j = lower_loop_var(m, "j", bin(m, EX_SUB, q, b->var));
    Expr *ab = ir_cast(m, RV_I64, ir_load(m, off, b->var));
    Stmt *in_if = lower_if(m, bin(m, EX_LT, j->var, I(m, 2)),
                           lower_store(m, Y, ab, ir_float(m, RV_F32, 1)), NULL);
    s = loop(m, b, LOOP_SERIAL, loop(m, j, LOOP_SERIAL, in_if));
    check_text(lower_hoist(m, s), "for b in 0..Q:\n"
                                  "  let off_b = i64(off[b])\n"
                                  "  for j in 0..Q - b:\n"
                                  "    if j < 2:\n"
                                  "      Y[off_b] = 1.0\n");
    /* the arm of a select is guarded like the branch of an if; what the
     * extent evaluates moves with it, unguarded */
    Expr *sel = ir_select(m, bin(m, EX_LT, t->var, q), at, I(m, 0));
    Axis *k = lower_loop_var(m, "k", bin(m, EX_DIV, bin(m, EX_ADD, sel, I(m, 1)), I(m, 2)));
    Expr *arm = ir_select(m, bin(m, EX_LT, k->var, I(m, 2)), at, I(m, 0));
    Stmt *two[2] = {lower_store(m, Y, bin(m, EX_ADD, sel, k->var), ir_float(m, RV_F32, 1)),
                    lower_store(m, Y, arm, ir_float(m, RV_F32, 2))};
    s = loop(m, t, LOOP_SERIAL, loop(m, k, LOOP_SERIAL, lower_seq(m, 2, two)));
    check_text(lower_hoist(m, s), "for t in 0..64:\n"
                                  "  let t0 = select(t < Q, i64(off[t]), 0)\n"
                                  "  let t1 = (t0 + 1)/2\n"
                                  "  for k in 0..t1:\n"
                                  "    Y[t0 + k] = 1.0\n"
                                  "    Y[select(k < 2, i64(off[t]), 0)] = 2.0\n");
    rv_module_free(m);
}

/* ---- compiled before and after ---- */

static void *scratch_alloc(struct rv_rt_ctx *ctx, size_t n) {
    (void)ctx;
    return aligned_alloc(RV_RT_ALIGN, (n + RV_RT_ALIGN - 1) / RV_RT_ALIGN * RV_RT_ALIGN);
}
static void scratch_free(struct rv_rt_ctx *ctx, void *p) {
    (void)ctx;
    free(p);
}
static void serial_for(int64_t n, void (*fn)(void *, int64_t, int64_t, int), void *closure) {
    if (n > 0)
        fn(closure, 0, n, 0);
}

static void *aligned(size_t n) {
    void *p = aligned_alloc(64, (n + 63) / 64 * 64 + 64);
    memset(p, 0, (n + 63) / 64 * 64 + 64);
    return p;
}

/* A ragged kernel over A[b, l < len[b], c < 4] with the row starts off[]
 * filled by its prelude:
 *
 *     for b in 0..B:                  (parallel when `par`)
 *       for l in 0..i64(len[b]):
 *         for c in 0..4:
 *           Y[(off[b] + l)*4 + c] = A[(off[b] + l)*4 + c] * f32(i64(len[b]) + c)
 *                                   + f32(off[B])
 *
 * the row start, the row length and (off[b] + l)*4 are invariant in the
 * inner loops, the total off[B] in all of them. */
static Kernel *ragged_kernel(Module *m, bool par) {
    Size *B = rv_size_new(m, par ? "Bp" : "B", 0, 100);
    Expr *bsz = ir_size(m, B);
    Ufun *f = rv_ufun_begin(m, par ? "lenp" : "len", 1, (const char *const[]){"b"});
    f = rv_ufun_end(f, (Expr *const[]){bsz}, I(m, 0), I(m, 50));
    Buffer *len = ir_buffer_new(m, "len", RV_I32, bsz, BUF_ARG);
    len->uf = f;
    Buffer *off = ir_buffer_new(m, "off", RV_I64, bin(m, EX_ADD, bsz, I(m, 1)), BUF_AUX);
    Expr *total = bin(m, EX_MUL, ir_load(m, off, bsz), I(m, 4));
    Buffer *A = ir_buffer_new(m, "A", RV_F32, total, BUF_ARG);
    Buffer *Y = ir_buffer_new(m, "Y", RV_F32, total, BUF_ARG);
    Axis *pb = lower_loop_var(m, "b", bsz);
    Expr *lenp = ir_cast(m, RV_I64, ir_load(m, len, pb->var));
    Stmt *pre[2] = {lower_store(m, off, I(m, 0), I(m, 0)),
                    loop(m, pb, LOOP_SERIAL,
                         lower_store(m, off, bin(m, EX_ADD, pb->var, I(m, 1)),
                                     bin(m, EX_ADD, ir_load(m, off, pb->var), lenp)))};
    Axis *b = lower_loop_var(m, "b", bsz);
    Expr *lenb = ir_cast(m, RV_I64, ir_load(m, len, b->var));
    Axis *l = lower_loop_var(m, "l", lenb), *c = lower_loop_var(m, "c", I(m, 4));
    Expr *at =
        bin(m, EX_ADD, bin(m, EX_MUL, bin(m, EX_ADD, ir_load(m, off, b->var), l->var), I(m, 4)),
            c->var);
    Expr *v = bin(m, EX_MUL, ir_load(m, A, at), ir_cast(m, RV_F32, bin(m, EX_ADD, lenb, c->var)));
    v = bin(m, EX_ADD, v, ir_cast(m, RV_F32, ir_load(m, off, bsz)));
    Stmt *body = loop(m, b, par ? LOOP_PARALLEL : LOOP_SERIAL,
                      loop(m, l, LOOP_SERIAL, loop(m, c, LOOP_SERIAL, lower_store(m, Y, at, v))));
    Kernel *k = arena_alloc(m->arena, sizeof(Kernel));
    Param ps[5] = {{.kind = PARAM_SIZE, .size = B},
                   {.kind = PARAM_UF, .buf = len},
                   {.kind = PARAM_TENSOR, .buf = A},
                   {.kind = PARAM_AUX, .buf = off},
                   {.kind = PARAM_TENSOR, .buf = Y}};
    k->name = par ? "ragged_par" : "ragged";
    k->m = m;
    k->nparams = 5;
    k->params = arena_memdup(m->arena, ps, sizeof ps);
    k->prelude = lower_seq(m, 2, pre);
    k->body = body;
    return k;
}

/* Runs kernel k (compiled from its C) on fixed ragged inputs; returns Y. */
static float *run_ragged(const Kernel *k, bool par, char **src_out) {
    char *src = cg_c_kernel(k);
    const char *flags[] = {KERNEL_FLAGS};
    JitOptions opt = {
        .cache_dir = cache_dir, .extra_flags = flags, .n_extra_flags = RV_COUNT(flags)};
    JitLib *lib = NULL;
    rv_status st = jit_compile(src, &opt, &lib);
    CHECK_EQ_INT(st, RV_OK);
    if (st != RV_OK) {
        fprintf(stderr, "%s\n--- source ---\n%s\n", rv_last_error(), src);
        base_free(src);
        return NULL;
    }
    char sym[128], psym[160];
    snprintf(sym, sizeof sym, "kernel_%s", k->name);
    snprintf(psym, sizeof psym, "%s_prelude", sym);
    rv_rt_kernel_fn fn = (rv_rt_kernel_fn)jit_fn(lib, sym);
    rv_rt_prelude_fn pre = (rv_rt_prelude_fn)jit_fn(lib, psym);
    CHECK(fn && pre);
    enum { BB = 11 };
    int32_t lv[BB] = {3, 0, 7, 1, 0, 0, 12, 5, 2, 50, 1};
    int32_t *lens = aligned(sizeof lv);
    memcpy(lens, lv, sizeof lv);
    int64_t *offs = aligned((BB + 1) * sizeof(int64_t));
    int64_t tot = 0;
    for (int q = 0; q < BB; q++)
        tot += lv[q];
    float *as = aligned((size_t)tot * 4 * sizeof(float)),
          *ys = aligned((size_t)tot * 4 * sizeof(float));
    for (int64_t q = 0; q < tot * 4; q++)
        as[q] = (float)q * 0.5f - 3;
    int64_t sizes[1] = {BB};
    void *bufs[4] = {lens, as, offs, ys};
    struct rv_rt_ctx ctx = {.abi_version = RV_RT_ABI_VERSION,
                            .num_threads = par ? 8 : 1,
                            .parallel_for = par ? ravel_rt_parallel_for : serial_for,
                            .alloc = scratch_alloc,
                            .free = scratch_free};
    if (fn && pre) {
        CHECK_EQ_INT(pre(sizes, bufs), RV_RT_OK);
        CHECK_EQ_INT(offs[BB], tot);
        CHECK_EQ_INT(fn(sizes, bufs, &ctx), RV_RT_OK);
    }
    free(lens);
    free(offs);
    free(as);
    jit_close(lib);
    *src_out = src;
    return ys;
}

static void check_ragged_jit(bool par) {
    Module *m = rv_module_new();
    Kernel *k = ragged_kernel(m, par);
    Kernel after = *k;
    after.body = lower_hoist(m, k->body);
    CHECK(after.body != k->body);
    CHECK_EQ_INT(lower_verify_kernel(&after, "hoist"), RV_OK);
    char *src0 = NULL, *src1 = NULL;
    float *y0 = run_ragged(k, par, &src0), *y1 = run_ragged(&after, par, &src1);
    /* the hoisted loads are locals of the kernel (or captured by the
     * outlined parallel body) */
    CHECK_STR_CONTAINS(src1, "const int64_t off_b = off[b];");
    CHECK_STR_CONTAINS(src1, "const int64_t len_b = (int64_t)len[b];");
    CHECK_STR_CONTAINS(src1, "const int64_t off_B");
    if (par) /* computed once, captured by the outlined body */
        CHECK_STR_CONTAINS(src1, ".off_Bp = off_Bp");
    if (y0 && y1) {
        int64_t n = (3 + 7 + 1 + 12 + 5 + 2 + 50 + 1) * 4;
        CHECK(memcmp(y0, y1, (size_t)n * sizeof(float)) == 0);
        /* and both are right */
        int bad = 0;
        int32_t lv[] = {3, 0, 7, 1, 0, 0, 12, 5, 2, 50, 1};
        for (int64_t b = 0, row = 0; b < 11; row += lv[b], b++)
            for (int64_t l = 0; l < lv[b]; l++)
                for (int64_t c = 0; c < 4; c++) {
                    int64_t at = (row + l) * 4 + c;
                    bad += y1[at] != ((float)at * 0.5f - 3) * (float)(lv[b] + c) + 81.0f;
                }
        CHECK_EQ_INT(bad, 0);
    }
    free(y0);
    free(y1);
    base_free(src0);
    base_free(src1);
    rv_module_free(m);
}

/* A run-time check at the head of a loop's body that the loop does not
 * change runs once before the loop (it kept a vector loop scalar): only
 * out of a loop that provably runs, only a prefix of the body, not one
 * that reads the loop's variable. */
static void test_invariant_checks(void) {
    Module *m = rv_module_new();
    Size *N = rv_size_new(m, "N", 1, 100);
    Expr *n = ir_size(m, N);
    Buffer *len = ir_buffer_new(m, "len", RV_I32, n, BUF_ARG);
    Ufun *f = rv_ufun_begin(m, "len", 1, (const char *const[]){"i"});
    len->uf = rv_ufun_end(f, (Expr *const[]){n}, I(m, 0), I(m, 9));
    Buffer *Y = ir_buffer_new(m, "Y", RV_F32, bin(m, EX_MUL, n, I(m, 16)), BUF_ARG);
    Axis *i = lower_loop_var(m, "i", n), *j = lower_loop_var(m, "j", I(m, 16));
    Expr *at = bin(m, EX_ADD, bin(m, EX_MUL, i->var, I(m, 16)), j->var);
    Stmt *st = lower_store(m, Y, at, ir_float(m, RV_F32, 1));
    Stmt *chk_i = lower_if(m, bin(m, EX_GE, i->var, I(m, 5)), lower_fail(m, 0), NULL);
    Stmt *chk_j = lower_if(m, bin(m, EX_GE, j->var, I(m, 5)), lower_fail(m, 1), NULL);
    Stmt *s = loop(m, i, LOOP_SERIAL,
                   loop(m, j, LOOP_SERIAL, lower_seq(m, 3, (Stmt *[]){chk_i, chk_j, st})));
    check_text(lower_hoist(m, s), "for i in 0..N:\n"
                                  "  let t0 = i*16\n"
                                  "  if i >= 5:\n"
                                  "    fail 0\n"
                                  "  for j in 0..16:\n"
                                  "    if j >= 5:\n"
                                  "      fail 1\n"
                                  "    Y[t0 + j] = 1.0\n");
    /* behind a check that varies: stays */
    s = loop(m, i, LOOP_SERIAL,
             loop(m, j, LOOP_SERIAL, lower_seq(m, 3, (Stmt *[]){chk_j, chk_i, st})));
    check_text(lower_hoist(m, s), "for i in 0..N:\n"
                                  "  let t0 = i*16\n"
                                  "  for j in 0..16:\n"
                                  "    if j >= 5:\n"
                                  "      fail 1\n"
                                  "    if i >= 5:\n"
                                  "      fail 0\n"
                                  "    Y[t0 + j] = 1.0\n");
    /* a loop that may run no iteration keeps it */
    Axis *k = lower_loop_var(m, "k", ir_cast(m, RV_I64, ir_load(m, len, i->var)));
    Expr *at2 = bin(m, EX_ADD, bin(m, EX_MUL, i->var, I(m, 16)), k->var);
    s = loop(m, i, LOOP_SERIAL,
             loop(m, k, LOOP_SERIAL,
                  seq2(m, chk_i, lower_store(m, Y, at2, ir_float(m, RV_F32, 1)))));
    check_text(lower_hoist(m, s), "for i in 0..N:\n"
                                  "  let t0 = i*16\n"
                                  "  let len_i = i64(len[i])\n"
                                  "  for k in 0..len_i:\n"
                                  "    if i >= 5:\n"
                                  "      fail 0\n"
                                  "    Y[t0 + k] = 1.0\n");
    rv_module_free(m);
}

static void test_jit_same_results(void) {
    check_ragged_jit(false);
    check_ragged_jit(true);
}

/* ---- the verifier ---- */

static void test_verify(void) {
    Module *m = rv_module_new();
    Kernel *k = ragged_kernel(m, false);
    CHECK_EQ_INT(lower_verify_kernel(k, "test"), RV_OK);
    Kernel bad = *k;
    /* a variable used outside its loop */
    Axis *stray = lower_loop_var(m, "stray", NULL);
    Buffer *Y = k->params[4].buf, *len = k->params[1].buf, *off = k->params[3].buf;
    bad.body = lower_store(m, Y, stray->var, ir_float(m, RV_F32, 1));
    CHECK_EQ_INT(lower_verify_kernel(&bad, "hoist"), RV_ERR_UNSUPPORTED);
    CHECK_STR_CONTAINS(rv_last_error(), "internal error after pass hoist: kernel ragged: variable "
                                        "'stray' is used outside the FOR or LET binding it");
    /* a buffer that is neither a parameter nor allocated */
    Buffer *tmp = ir_buffer_new(m, "tmp", RV_F32, I(m, 4), BUF_LOCAL);
    bad.body = lower_store(m, tmp, I(m, 0), ir_float(m, RV_F32, 1));
    CHECK_EQ_INT(lower_verify_kernel(&bad, "x"), RV_ERR_UNSUPPORTED);
    CHECK_STR_CONTAINS(rv_last_error(), "store to buffer 'tmp', which is neither");
    bad.body = lower_alloc(m, tmp, bad.body);
    CHECK_EQ_INT(lower_verify_kernel(&bad, "x"), RV_OK);
    /* the body never stores to UF or AUX arrays */
    bad.body = lower_store(m, off, I(m, 0), I(m, 1));
    CHECK_EQ_INT(lower_verify_kernel(&bad, "x"), RV_ERR_UNSUPPORTED);
    CHECK_STR_CONTAINS(rv_last_error(), "store to read-only AUX array 'off'");
    /* i32 indices, tensor-level nodes */
    bad.body = lower_store(m, Y, ir_cast(m, RV_I32, I(m, 0)), ir_float(m, RV_F32, 1));
    CHECK_EQ_INT(lower_verify_kernel(&bad, "x"), RV_ERR_UNSUPPORTED);
    CHECK_STR_CONTAINS(rv_last_error(), "a store index is i32, not i64");
    Expr *uf = ir_ufcall(m, len->uf, 1, (Expr *const[]){I(m, 0)});
    bad.body = lower_store(m, Y, ir_cast(m, RV_I64, uf), ir_float(m, RV_F32, 1));
    CHECK_EQ_INT(lower_verify_kernel(&bad, "x"), RV_ERR_UNSUPPORTED);
    CHECK_STR_CONTAINS(rv_last_error(), "access of 'len', whose storage is not a parameter");
    bad.flat = true;
    CHECK_EQ_INT(lower_verify_kernel(&bad, "x"), RV_ERR_UNSUPPORTED);
    CHECK_STR_CONTAINS(rv_last_error(), "multi-dimensional access len{...} left after pass flatten");
    bad.flat = false;
    /* a loop rebinding its own variable */
    Axis *i = lower_loop_var(m, "i", I(m, 2));
    bad.body = loop(m, i, LOOP_SERIAL,
                    loop(m, i, LOOP_SERIAL, lower_store(m, Y, i->var, ir_float(m, RV_F32, 1))));
    CHECK_EQ_INT(lower_verify_kernel(&bad, "x"), RV_ERR_UNSUPPORTED);
    CHECK_STR_CONTAINS(rv_last_error(), "'i' is bound again inside its own scope");
    rv_module_free(m);
}

int main(void) {
    snprintf(cache_dir, sizeof cache_dir, "/tmp/ravel-test-hoist-XXXXXX");
    if (!mkdtemp(cache_dir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(test_ragged_loads);
    RUN(test_nesting_and_sharing);
    RUN(test_what_stays);
    RUN(test_speculation);
    RUN(test_jit_same_results);
    RUN(test_verify);
    RUN(test_invariant_checks);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", cache_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", cache_dir);
    return harness_report();
}
