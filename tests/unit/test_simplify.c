/*
 * test_simplify.c — the index simplifier: canonical sums, bounds proved
 * symbolically (loop extents, UF ranges, ceil-division tiles), division
 * and remainder rules under C's truncating semantics, comparisons and
 * boolean folding, the statement pass (guards, extent 0/1 and <= 1 loops, lets,
 * branch facts), and two randomized self-checks: random expressions and
 * random loop nests are simplified and evaluated, before and after, at
 * random points inside the declared ranges by a small evaluator written
 * here, so a rewrite that changes a value fails loudly.
 */
#include "harness.h"
#include "lower/lower.h"

/* ---- the environment every test uses ----
 *   size T in 1..64, N in 1..1000, B in 1..32
 *   ufun len[x < B] in 0..T   (also stored in buffer `lens`)
 *   loops: i < 16*T;  b < B;  j < len[b];  io < (N + 31)/32;  ii < 32;  k < 5
 */
typedef struct Env {
    Module *m;
    Size *T, *N, *B;
    Ufun *len;
    Buffer *lens, *Y;
    Axis *i, *b, *j, *io, *ii, *k;
    Expr *eT, *eN, *eB;
} Env;

static Expr *K(Env *E, int64_t v) {
    return ir_int(E->m, v);
}
static Expr *add(Env *E, Expr *a, Expr *b) {
    return ir_binary(E->m, EX_ADD, a, b);
}
static Expr *sub(Env *E, Expr *a, Expr *b) {
    return ir_binary(E->m, EX_SUB, a, b);
}
static Expr *mul(Env *E, Expr *a, Expr *b) {
    return ir_binary(E->m, EX_MUL, a, b);
}
static Expr *bin(Env *E, ExprKind k, Expr *a, Expr *b) {
    return ir_binary(E->m, k, a, b);
}
static Expr *lenb(Env *E, Expr *x) {
    return ir_ufcall(E->m, E->len, 1, &x);
}

static void env_init(Env *E) {
    memset(E, 0, sizeof *E);
    Module *m = E->m = rv_module_new();
    E->T = rv_size_new(m, "T", 1, 64);
    E->N = rv_size_new(m, "N", 1, 1000);
    E->B = rv_size_new(m, "B", 1, 32);
    E->eT = ir_size(m, E->T);
    E->eN = ir_size(m, E->N);
    E->eB = ir_size(m, E->B);
    const char *argn[1] = {"x"};
    E->len = rv_ufun_begin(m, "len", 1, argn);
    Expr *ext[1] = {E->eB};
    rv_ufun_end(E->len, ext, ir_int(m, 0), E->eT);
    E->lens = ir_buffer_new(m, "lens", RV_I64, E->eB, BUF_ARG);
    E->lens->uf = E->len;
    E->Y = ir_buffer_new(m, "Y", RV_I64, ir_int(m, 8), BUF_GLOBAL);
    E->i = lower_loop_var(m, "i", mul(E, K(E, 16), E->eT));
    E->b = lower_loop_var(m, "b", E->eB);
    E->j = lower_loop_var(m, "j", lenb(E, E->b->var));
    E->io = lower_loop_var(m, "io", bin(E, EX_DIV, add(E, E->eN, K(E, 31)), K(E, 32)));
    E->ii = lower_loop_var(m, "ii", K(E, 32));
    E->k = lower_loop_var(m, "k", K(E, 5));
}

static void env_free(Env *E) {
    rv_module_free(E->m);
}

/* The printed form of an expression, through the loop-IR printer. */
static char *estr(Env *E, Expr *e) {
    Buffer *out = ir_buffer_new(E->m, "E", e->dtype, K(E, 1), BUF_GLOBAL);
    Buf b = {0};
    lower_print_stmt(&b, lower_store(E->m, out, K(E, 0), e), 0);
    char *s = buf_take(&b);
    size_t n = strlen(s);
    if (n && s[n - 1] == '\n')
        s[n - 1] = '\0';
    memmove(s, s + 7, strlen(s + 7) + 1); /* drop "E[0] = " */
    return s;
}

#define CHECK_SIMP(E, e, want) check_simp(E, e, want, __LINE__)
static void check_simp(Env *E, Expr *e, const char *want, int line) {
    Expr *r = ir_simplify_expr(E->m, e);
    char *got = estr(E, r);
    bool ok = strcmp(got, want) == 0;
    CHECK(ok && "simplified form");
    if (!ok) {
        char *in = estr(E, e);
        fprintf(stderr, "    line %d: %s\n      got  %s\n      want %s\n", line, in, got, want);
        base_free(in);
    }
    base_free(got);
}

/* ---- canonical sums ---- */

static void test_linear(void) {
    Env E;
    env_init(&E);
    Expr *i = E.i->var, *j = E.j->var;
    CHECK_SIMP(&E, sub(&E, add(&E, i, K(&E, 1)), i), "1");
    CHECK_SIMP(&E, mul(&E, add(&E, mul(&E, i, K(&E, 4)), j), K(&E, 2)), "i*8 + j*2");
    /* term order does not depend on how the sum was written */
    Expr *a = ir_simplify_expr(E.m, add(&E, mul(&E, j, K(&E, 2)), mul(&E, K(&E, 8), i)));
    Expr *b = ir_simplify_expr(E.m, mul(&E, add(&E, j, mul(&E, i, K(&E, 4))), K(&E, 2)));
    CHECK(a == b);
    CHECK_SIMP(&E, sub(&E, mul(&E, E.eT, K(&E, 16)), add(&E, i, mul(&E, K(&E, 16), E.eT))), "-i");
    CHECK_SIMP(&E, add(&E, mul(&E, K(&E, 2), sub(&E, i, K(&E, 3))), K(&E, 6)), "i*2");
    CHECK_SIMP(&E, sub(&E, sub(&E, i, j), sub(&E, i, j)), "0");
    CHECK_SIMP(&E, sub(&E, K(&E, 5), add(&E, i, K(&E, 7))), "-i - 2");
    CHECK_SIMP(&E, sub(&E, K(&E, 7), mul(&E, j, K(&E, 3))), "7 - j*3");
    CHECK_SIMP(&E, add(&E, sub(&E, i, j), E.eN), "N + i - j"); /* N is older than i */
    /* products of two non-constants are atoms, operands in id order */
    CHECK_SIMP(&E, sub(&E, mul(&E, j, i), mul(&E, i, j)), "0");
    /* products of sums are multiplied out into monomials */
    Expr *bT = mul(&E, E.b->var, E.eT);
    CHECK_SIMP(&E, add(&E, mul(&E, add(&E, bT, i), E.eT), j), "j + T*i + T*T*b");
    CHECK(ir_simplify_expr(E.m, mul(&E, E.eT, mul(&E, E.eT, E.b->var))) ==
          ir_simplify_expr(E.m, mul(&E, bT, E.eT)));
    CHECK_SIMP(&E, mul(&E, add(&E, i, K(&E, 1)), sub(&E, i, K(&E, 1))), "i*i - 1");
    /* x/c*c + x%c is x */
    Expr *q = bin(&E, EX_DIV, j, K(&E, 4)), *r = bin(&E, EX_MOD, j, K(&E, 4));
    CHECK_SIMP(&E, add(&E, mul(&E, q, K(&E, 4)), r), "j");
    CHECK_SIMP(&E,
               add(&E, mul(&E, bin(&E, EX_FLOORDIV, sub(&E, j, E.eN), K(&E, 8)), K(&E, 16)),
                   mul(&E, bin(&E, EX_FLOORMOD, sub(&E, j, E.eN), K(&E, 8)), K(&E, 2))),
               "j*2 - N*2");
    /* i32 arithmetic stays i32 */
    Expr *i32 = ir_cast(E.m, RV_I32, i);
    Expr *r32 = ir_simplify_expr(E.m, sub(&E, add(&E, i32, ir_const_int(E.m, RV_I32, 3)), i32));
    CHECK(r32 == ir_const_int(E.m, RV_I32, 3));
    CHECK_SIMP(&E, mul(&E, add(&E, i32, K(&E, 2)), K(&E, 4)), "i32(i)*4 + 8");
    CHECK(ir_simplify_expr(E.m, mul(&E, add(&E, i32, K(&E, 2)), K(&E, 4)))->dtype == RV_I32);
    CHECK_SIMP(&E, bin(&E, EX_LT, i32, mul(&E, ir_cast(E.m, RV_I32, E.eT), K(&E, 16))),
               "i32(i) < i32(T)*16"); /* casts are atoms */
    /* a point interval is a constant */
    CHECK_SIMP(&E, bin(&E, EX_MIN, E.k->var, K(&E, 0)), "0");
    env_free(&E);
}

/* ---- values: no new intermediate that may overflow ---- */

/* Loads of a tensor (Y) are unbounded values, unlike indices: a rewrite
 * that forms a sum the original never formed could overflow where the
 * original does not (argmax's `acc < X[k] - Y[k]` at acc = INT64_MIN). */
static void test_values(void) {
    Env E;
    env_init(&E);
    Expr *acc = ir_load(E.m, E.Y, K(&E, 0)), *x = ir_load(E.m, E.Y, E.k->var),
         *y = ir_load(E.m, E.Y, add(&E, E.k->var, K(&E, 1)));
    /* a comparison keeps its sides: no acc + Y[k + 1] */
    Expr *c = ir_simplify_expr(E.m, bin(&E, EX_GT, sub(&E, x, y), acc));
    CHECK(c->kind == EX_LT && c->args[0] == acc && c->args[1] == ir_simplify_expr(E.m, sub(&E, x, y)));
    /* one operation whose value is the original's is fine */
    CHECK_SIMP(&E, sub(&E, add(&E, x, y), y), "Y[k]");
    CHECK_SIMP(&E, sub(&E, add(&E, x, K(&E, 2)), K(&E, 3)), "Y[k] - 1");
    /* x + 2*y - y: the rewrite x + y adds no intermediate beyond the result */
    CHECK_SIMP(&E, sub(&E, add(&E, x, mul(&E, y, K(&E, 2))), y), "Y[k] + Y[k + 1]");
    /* three unbounded pieces are not reordered: (x - y) + acc stays */
    Expr *three = add(&E, sub(&E, x, y), acc);
    CHECK(ir_simplify_expr(E.m, three) == three);
    /* a prelude array holds indices (row starts): sums of them are still
     * put in one canonical order, as any index arithmetic */
    Buffer *starts = ir_buffer_new(E.m, "starts", RV_I64, E.eB, BUF_AUX);
    Expr *st = ir_load(E.m, starts, E.b->var);
    CHECK(ir_simplify_expr(E.m, add(&E, add(&E, E.k->var, st), K(&E, 3))) ==
          ir_simplify_expr(E.m, add(&E, add(&E, st, K(&E, 3)), E.k->var)));
    /* ... while bounded index terms still are (k < 5, b < 32) */
    CHECK_SIMP(&E, add(&E, sub(&E, E.k->var, E.b->var), K(&E, 3)), "k + 3 - b");
    CHECK_SIMP(&E, bin(&E, EX_LT, E.k->var, sub(&E, E.b->var, K(&E, 2))), "k + 2 < b");
    env_free(&E);
}

/* ---- symbolic bounds ---- */

static void test_bounds(void) {
    Env E;
    env_init(&E);
    Expr *i = E.i->var, *j = E.j->var, *io = E.io->var, *ii = E.ii->var;
    Expr *T16 = mul(&E, K(&E, 16), E.eT);
    CHECK_SIMP(&E, bin(&E, EX_LT, i, T16), "true");
    CHECK_SIMP(&E, bin(&E, EX_LE, i, sub(&E, T16, K(&E, 1))), "true");
    CHECK_SIMP(&E, bin(&E, EX_GE, i, T16), "false");
    CHECK_SIMP(&E, bin(&E, EX_GT, T16, i), "true");
    CHECK_SIMP(&E, bin(&E, EX_NE, i, T16), "true");
    CHECK_SIMP(&E, bin(&E, EX_LT, i, E.eT), "i < T"); /* not provable */
    CHECK_SIMP(&E, bin(&E, EX_LT, j, lenb(&E, E.b->var)), "true");
    CHECK_SIMP(&E, bin(&E, EX_LE, j, E.eT), "true"); /* through len's range */
    CHECK_SIMP(&E, bin(&E, EX_LT, j, E.eT), "true");
    CHECK_SIMP(&E, bin(&E, EX_GE, lenb(&E, E.b->var), K(&E, 0)), "true");
    CHECK_SIMP(&E, bin(&E, EX_LE, ir_load(E.m, E.lens, E.b->var), E.eT), "true");
    /* a non-dividing split: the guard stays, the tile bound is proved */
    Expr *flat = add(&E, mul(&E, io, K(&E, 32)), ii);
    CHECK_SIMP(&E, bin(&E, EX_LT, flat, E.eN), "io*32 + ii < N");
    Expr *tiles = bin(&E, EX_DIV, add(&E, E.eN, K(&E, 31)), K(&E, 32));
    CHECK_SIMP(&E, bin(&E, EX_LT, flat, mul(&E, K(&E, 32), tiles)), "true");
    CHECK_SIMP(&E, bin(&E, EX_LT, flat, add(&E, E.eN, K(&E, 31))), "true");
    CHECK_SIMP(&E, bin(&E, EX_LE, E.eN, mul(&E, tiles, K(&E, 32))), "true");
    Expr *ftiles = bin(&E, EX_FLOORDIV, add(&E, E.eN, K(&E, 31)), K(&E, 32));
    CHECK_SIMP(&E, bin(&E, EX_GE, mul(&E, ftiles, K(&E, 32)), E.eN), "true");
    /* a tile count with coefficient 1: the form is scaled by 32 first */
    CHECK_SIMP(&E, bin(&E, EX_LT, io, E.eN), "true");
    CHECK_SIMP(&E, bin(&E, EX_LE, mul(&E, tiles, K(&E, 3)), add(&E, E.eN, K(&E, 93))), "true");
    /* min/max decided by the same bounds */
    CHECK_SIMP(&E, bin(&E, EX_MIN, i, T16), "i");
    CHECK_SIMP(&E, bin(&E, EX_MAX, i, sub(&E, T16, K(&E, 1))), "T*16 - 1");
    CHECK_SIMP(&E, bin(&E, EX_MIN, j, E.eT), "j");
    CHECK_SIMP(&E, bin(&E, EX_MAX, j, E.eN), "max(N, j)");
    /* an inner extent min(32, N - io*32): the split tail */
    Axis *t =
        lower_loop_var(E.m, "t", bin(&E, EX_MIN, K(&E, 32), sub(&E, E.eN, mul(&E, io, K(&E, 32)))));
    CHECK_SIMP(&E, bin(&E, EX_LT, add(&E, mul(&E, io, K(&E, 32)), t->var), E.eN), "true");
    /* the full 6-row tiles of the last block of a split of a UF value by
     * 48: lo*6 + li + len/48*48 < len, the tiles' extent len/6 - len/48*8
     * (loops, then divisions, then the UF's range; the UF bounded first
     * proves nothing) */
    Expr *L = lenb(&E, E.b->var);
    Axis *lo = lower_loop_var(E.m, "lo", sub(&E, bin(&E, EX_DIV, L, K(&E, 6)),
                                             mul(&E, bin(&E, EX_DIV, L, K(&E, 48)), K(&E, 8))));
    Axis *li = lower_loop_var(E.m, "li", K(&E, 6));
    Expr *row = add(&E, add(&E, mul(&E, lo->var, K(&E, 6)), li->var),
                    mul(&E, bin(&E, EX_DIV, L, K(&E, 48)), K(&E, 48)));
    CHECK_SIMP(&E, bin(&E, EX_LT, row, L), "true");
    /* (not past the last whole tile: row + 6 may reach len) */
    Expr *past = ir_simplify_expr(E.m, bin(&E, EX_LT, add(&E, row, K(&E, 6)), L));
    int64_t pv;
    CHECK(!ir_is_const_int(past, &pv));
    /* triangular: k2 < N - k1 */
    Axis *k1 = lower_loop_var(E.m, "k1", E.eN);
    Axis *k2 = lower_loop_var(E.m, "k2", sub(&E, E.eN, k1->var));
    CHECK_SIMP(&E, bin(&E, EX_LT, add(&E, k1->var, k2->var), E.eN), "true");
    env_free(&E);
}

/* ---- division and remainder ---- */

static void test_divmod(void) {
    Env E;
    env_init(&E);
    Expr *i = E.i->var, *j = E.j->var, *ii = E.ii->var, *io = E.io->var;
    ExprKind D = EX_DIV, M = EX_MOD, FD = EX_FLOORDIV, FM = EX_FLOORMOD;
    CHECK_SIMP(&E, bin(&E, D, mul(&E, i, K(&E, 4)), K(&E, 4)), "i");
    /* (x*c)/c is x even when x may be negative */
    Expr *neg = sub(&E, i, K(&E, 100));
    CHECK_SIMP(&E, bin(&E, D, mul(&E, neg, K(&E, 4)), K(&E, 4)), "i - 100");
    CHECK_SIMP(&E, bin(&E, M, mul(&E, neg, K(&E, 4)), K(&E, 4)), "0");
    CHECK_SIMP(&E, bin(&E, D, add(&E, mul(&E, i, K(&E, 8)), K(&E, 3)), K(&E, 8)), "i");
    CHECK_SIMP(&E, bin(&E, M, add(&E, mul(&E, i, K(&E, 8)), K(&E, 3)), K(&E, 8)), "3");
    CHECK_SIMP(&E, bin(&E, D, add(&E, mul(&E, io, K(&E, 32)), ii), K(&E, 32)), "io");
    CHECK_SIMP(&E, bin(&E, M, add(&E, mul(&E, io, K(&E, 32)), ii), K(&E, 32)), "ii");
    CHECK_SIMP(&E, bin(&E, D, add(&E, mul(&E, i, K(&E, 8)), ii), K(&E, 8)), "i + ii/8");
    CHECK_SIMP(&E, bin(&E, M, add(&E, mul(&E, i, K(&E, 8)), ii), K(&E, 8)), "ii%8");
    CHECK_SIMP(&E, bin(&E, M, ii, K(&E, 32)), "ii");
    CHECK_SIMP(&E, bin(&E, D, ii, K(&E, 32)), "0");
    CHECK_SIMP(&E, bin(&E, FM, ii, K(&E, 32)), "ii");
    CHECK_SIMP(&E, bin(&E, FD, ii, K(&E, 64)), "0");
    CHECK_SIMP(&E, bin(&E, D, add(&E, ii, K(&E, 32)), K(&E, 32)), "1");
    CHECK_SIMP(&E, bin(&E, M, sub(&E, ii, K(&E, 32)), K(&E, 32)), "(ii - 32)%32");
    /* C truncation: the sign of i - 5 is unknown, so `/` and `%` stay */
    CHECK_SIMP(&E, bin(&E, D, sub(&E, i, K(&E, 5)), K(&E, 5)), "(i - 5)/5");
    CHECK_SIMP(&E, bin(&E, M, sub(&E, i, K(&E, 5)), K(&E, 5)), "(i - 5)%5");
    /* ... while floor division splits off the constant */
    CHECK_SIMP(&E, bin(&E, FD, sub(&E, i, K(&E, 5)), K(&E, 5)), "floordiv(i, 5) - 1");
    CHECK_SIMP(&E, bin(&E, FM, sub(&E, i, K(&E, 5)), K(&E, 5)), "floormod(i, 5)");
    CHECK_SIMP(&E, bin(&E, FM, sub(&E, ii, K(&E, 32)), K(&E, 32)), "ii");
    /* a non-positive dividend: (x*c + y)/c with y <= 0 */
    Expr *np = sub(&E, mul(&E, K(&E, -8), i), E.ii->var);  /* <= 0 */
    CHECK_SIMP(&E, bin(&E, D, np, K(&E, 8)), "-ii/8 - i"); /* (-ii)/8 - i */
    CHECK_SIMP(&E, bin(&E, M, np, K(&E, 8)), "-ii%8");
    /* nested */
    CHECK_SIMP(&E, bin(&E, D, bin(&E, D, i, K(&E, 4)), K(&E, 8)), "i/32");
    CHECK_SIMP(&E, bin(&E, M, bin(&E, M, i, K(&E, 32)), K(&E, 8)), "i%8");
    CHECK_SIMP(&E, bin(&E, FD, bin(&E, FD, sub(&E, i, E.eN), K(&E, 2)), K(&E, 3)),
               "floordiv(i - N, 6)");
    /* by a variable: 0 <= j < len[b] */
    CHECK_SIMP(&E, bin(&E, D, j, lenb(&E, E.b->var)), "0");
    CHECK_SIMP(&E, bin(&E, M, j, lenb(&E, E.b->var)), "j");
    CHECK_SIMP(&E, bin(&E, D, E.eN, E.eN), "1");
    /* constants, with C semantics */
    CHECK_SIMP(&E, bin(&E, D, K(&E, -7), K(&E, 2)), "-3");
    CHECK_SIMP(&E, bin(&E, M, K(&E, -7), K(&E, 2)), "-1");
    CHECK_SIMP(&E, bin(&E, FD, K(&E, -7), K(&E, 2)), "-4");
    CHECK_SIMP(&E, bin(&E, FM, K(&E, -7), K(&E, 2)), "1");
    CHECK_SIMP(&E, bin(&E, D, i, K(&E, 0)), "i/0"); /* left for the program to fault */
    env_free(&E);
}

/* ---- comparisons, min/max, select, logic ---- */

static void test_logic(void) {
    Env E;
    env_init(&E);
    Module *m = E.m;
    Expr *i = E.i->var, *j = E.j->var;
    Expr *T16 = mul(&E, K(&E, 16), E.eT);
    Expr *j5 = bin(&E, EX_LT, j, K(&E, 5));
    CHECK_SIMP(&E, bin(&E, EX_AND, bin(&E, EX_LT, i, T16), j5), "j < 5");
    CHECK_SIMP(&E, bin(&E, EX_OR, bin(&E, EX_LT, i, T16), j5), "true");
    CHECK_SIMP(&E, bin(&E, EX_OR, bin(&E, EX_GE, i, T16), j5), "j < 5");
    CHECK_SIMP(&E, bin(&E, EX_AND, j5, ir_unary(m, EX_NOT, j5)), "false");
    CHECK_SIMP(&E, ir_unary(m, EX_NOT, j5), "5 <= j");
    CHECK_SIMP(&E, ir_unary(m, EX_NOT, ir_unary(m, EX_NOT, j5)), "j < 5");
    CHECK_SIMP(&E, ir_select(m, bin(&E, EX_LT, i, T16), i, K(&E, 0)), "i");
    CHECK_SIMP(&E, ir_select(m, j5, add(&E, i, K(&E, 1)), add(&E, K(&E, 1), i)), "i + 1");
    /* moved terms and gcd */
    CHECK_SIMP(&E, bin(&E, EX_LT, add(&E, i, K(&E, 1)), E.eN), "i + 1 < N");
    CHECK_SIMP(&E, bin(&E, EX_LT, i, sub(&E, E.eN, K(&E, 1))), "i + 1 < N");
    CHECK_SIMP(&E, bin(&E, EX_LT, mul(&E, i, K(&E, 4)), add(&E, E.eN, E.eN)), "i*2 < N");
    CHECK_SIMP(&E, bin(&E, EX_LT, mul(&E, i, K(&E, 4)), K(&E, 10)), "i < 3");
    CHECK_SIMP(&E, bin(&E, EX_LE, mul(&E, i, K(&E, 4)), K(&E, 10)), "i <= 2");
    CHECK_SIMP(&E, bin(&E, EX_EQ, mul(&E, i, K(&E, 4)), K(&E, 2)), "false");
    CHECK_SIMP(&E, bin(&E, EX_NE, mul(&E, i, K(&E, 4)), K(&E, 2)), "true");
    CHECK_SIMP(&E, bin(&E, EX_EQ, add(&E, mul(&E, i, K(&E, 4)), mul(&E, j, K(&E, 2))), K(&E, 8)),
               "i*2 + j == 4");
    CHECK_SIMP(&E, bin(&E, EX_EQ, K(&E, 8), add(&E, mul(&E, i, K(&E, 4)), mul(&E, j, K(&E, 2)))),
               "i*2 + j == 4");
    CHECK_SIMP(&E, bin(&E, EX_LT, ir_unary(m, EX_ABS, i), T16), "true");
    /* floats are left alone (besides their integer operands) */
    Expr *f = ir_cast(m, RV_F32, add(&E, i, sub(&E, K(&E, 0), i)));
    CHECK_SIMP(&E, ir_unary(m, EX_NOT, bin(&E, EX_LT, f, ir_float(m, RV_F32, 1))), "!(0.0 < 1.0)");
    env_free(&E);
}

/* ---- the statement pass ---- */

static char *sstr(const Stmt *s) {
    Buf b = {0};
    lower_print_stmt(&b, s, 0);
    return buf_take(&b);
}

#define CHECK_STMT(s, want) check_stmt(s, want, __LINE__)
static void check_stmt(const Stmt *s, const char *want, int line) {
    char *got = sstr(s);
    bool ok = strcmp(got, want) == 0;
    CHECK(ok && "simplified statement");
    if (!ok)
        fprintf(stderr, "    line %d: got:\n%s    want:\n%s", line, got, want);
    base_free(got);
}

static void test_stmts(void) {
    Env E;
    env_init(&E);
    Module *m = E.m;
    Expr *T16 = mul(&E, K(&E, 16), E.eT);
    Buffer *Y = E.Y;
    /* for i in 0..16*T: if i < 16*T: Y[i] = i   -> the guard goes */
    Axis *i = lower_loop_var(m, "i", NULL); /* the loop's extent is the statement's */
    Stmt *g = lower_if(m, bin(&E, EX_LT, i->var, T16), lower_store(m, Y, i->var, i->var), NULL);
    Stmt *loop = lower_for(m, i, T16, LOOP_PARALLEL, g);
    CHECK_STMT(lower_simplify(m, loop), "parallel for i in 0..T*16:\n  Y[i] = i\n");

    /* nothing to do: the same pointer */
    Expr *T16c = mul(&E, E.eT, K(&E, 16)); /* canonical */
    Stmt *plain = lower_for(m, i, T16c, LOOP_SERIAL, lower_store(m, Y, i->var, i->var));
    CHECK(lower_simplify(m, plain) == plain);

    /* extent 0 and 1 */
    Axis *z = lower_loop_var(m, "z", NULL);
    CHECK(lower_simplify(m, lower_for(m, z, sub(&E, E.eT, E.eT), LOOP_SERIAL,
                                      lower_store(m, Y, z->var, K(&E, 1)))) == NULL);
    Stmt *one = lower_for(m, z, sub(&E, add(&E, E.eT, K(&E, 1)), E.eT), LOOP_SERIAL,
                          lower_store(m, Y, add(&E, z->var, K(&E, 3)), z->var));
    CHECK_STMT(lower_simplify(m, one), "Y[3] = 0\n");
    /* extent at most 1 (T/64 with T in 1..64): a test, the variable 0 */
    Stmt *upto1 = lower_for(m, z, bin(&E, EX_DIV, E.eT, K(&E, 64)), LOOP_SERIAL,
                            lower_store(m, Y, add(&E, z->var, K(&E, 3)), z->var));
    CHECK_STMT(lower_simplify(m, upto1), "if 0 < T/64:\n  Y[3] = 0\n");
    /* unrolled, extent at most 2 (T/32): a guarded copy per iteration; a
     * serial loop stays */
    Stmt *upto2 = lower_for(m, z, bin(&E, EX_DIV, E.eT, K(&E, 32)), LOOP_UNROLL,
                            lower_store(m, Y, add(&E, z->var, K(&E, 3)), z->var));
    CHECK_STMT(lower_simplify(m, upto2), "if 0 < T/32:\n  Y[3] = 0\nif 1 < T/32:\n  Y[4] = 1\n");
    Stmt *upto2s = lower_for(m, z, bin(&E, EX_DIV, E.eT, K(&E, 32)), LOOP_SERIAL,
                             lower_store(m, Y, add(&E, z->var, K(&E, 3)), z->var));
    CHECK(lower_simplify(m, upto2s) == upto2s);

    /* ... unless something the pass does not rewrite still uses the variable */
    Buffer *tmp = ir_buffer_new(m, "tmp", RV_I64, add(&E, z->var, K(&E, 1)), BUF_LOCAL);
    Stmt *one2 = lower_for(m, z, K(&E, 1), LOOP_SERIAL,
                           lower_alloc(m, tmp, lower_store(m, tmp, K(&E, 0), z->var)));
    CHECK_STMT(lower_simplify(m, one2), "let z = 0\nallocate tmp: i64[z + 1] local\ntmp[0] = 0\n");

    /* the split: the tail guard stays, the tile-bound one goes */
    Axis *io = lower_loop_var(m, "io", NULL), *ii = lower_loop_var(m, "ii", NULL);
    Expr *tiles = bin(&E, EX_DIV, add(&E, E.eN, K(&E, 31)), K(&E, 32));
    Expr *flat = add(&E, mul(&E, io->var, K(&E, 32)), ii->var);
    Stmt *st = lower_store(m, Y, K(&E, 0), flat);
    Stmt *in = lower_if(m, bin(&E, EX_LT, flat, mul(&E, tiles, K(&E, 32))),
                        lower_if(m, bin(&E, EX_LT, flat, E.eN), st, NULL), NULL);
    Stmt *split =
        lower_for(m, io, tiles, LOOP_SERIAL, lower_for(m, ii, K(&E, 32), LOOP_VECTOR, in));
    CHECK_STMT(lower_simplify(m, split), "for io in 0..(N + 31)/32:\n"
                                         "  vector for ii in 0..32:\n"
                                         "    if io*32 + ii < N:\n"
                                         "      Y[0] = io*32 + ii\n");

    /* lets: a pure value is known exactly; a constant one disappears */
    Axis *t = lower_loop_var(m, "t", NULL), *c = lower_loop_var(m, "c", NULL);
    Stmt *lt = lower_let(m, t, mul(&E, i->var, K(&E, 2)),
                         lower_if(m, bin(&E, EX_LT, t->var, mul(&E, E.eT, K(&E, 32))),
                                  lower_store(m, Y, K(&E, 1), t->var), lower_barrier(m)));
    Stmt *lc = lower_let(m, c, sub(&E, E.eT, E.eT),
                         lower_store(m, Y, add(&E, c->var, K(&E, 2)), K(&E, 7)));
    Stmt *parts[2] = {lt, lc};
    CHECK_STMT(lower_simplify(m, lower_for(m, i, T16, LOOP_SERIAL, lower_seq(m, 2, parts))),
               "for i in 0..T*16:\n"
               "  let t = i*2:\n"
               "    Y[1] = t\n"
               "  Y[2] = 7\n");

    /* a let that loads is known by its range only: a store may intervene */
    Axis *v = lower_loop_var(m, "v", NULL);
    Expr *ld = ir_load(m, Y, K(&E, 0));
    Stmt *seq[2] = {lower_store(m, Y, K(&E, 0), K(&E, 5)),
                    lower_if(m, bin(&E, EX_EQ, v->var, ir_load(m, Y, K(&E, 0))),
                             lower_store(m, Y, K(&E, 1), K(&E, 1)), NULL)};
    Stmt *lv = lower_let(m, v, ld, lower_seq(m, 2, seq));
    CHECK(lower_simplify(m, lv) == lv);

    /* a loop bound loaded from a buffer nothing stores to (a UF array) is
     * known below; one from a buffer the loop writes is not */
    Axis *l = lower_loop_var(m, "l", NULL);
    Expr *lensb = ir_load(m, E.lens, E.b->var);
    Stmt *gl =
        lower_if(m, bin(&E, EX_LT, l->var, lensb), lower_store(m, Y, K(&E, 0), l->var), NULL);
    CHECK_STMT(lower_simplify(m, lower_for(m, l, lensb, LOOP_SERIAL, gl)),
               "for l in 0..lens[b]:\n  Y[0] = l\n");
    Stmt *gy = lower_if(m, bin(&E, EX_LT, l->var, ld), lower_store(m, Y, K(&E, 0), l->var), NULL);
    Stmt *ly = lower_for(m, l, ld, LOOP_SERIAL, gy);
    CHECK(lower_simplify(m, ly) == ly);

    /* branch facts: the same guard inside is decided; so is its negation */
    Expr *j5 = bin(&E, EX_LT, E.j->var, K(&E, 5));
    Stmt *inner = lower_if(m, j5, lower_store(m, Y, K(&E, 2), K(&E, 2)),
                           lower_store(m, Y, K(&E, 3), K(&E, 3)));
    Stmt *inner2 = lower_if(m, bin(&E, EX_GE, E.j->var, K(&E, 5)),
                            lower_store(m, Y, K(&E, 4), K(&E, 4)), NULL);
    Stmt *outer = lower_if(m, bin(&E, EX_AND, j5, bin(&E, EX_LT, E.eT, K(&E, 9))), inner, inner2);
    CHECK_STMT(lower_simplify(m, outer), "if j < 5 && T < 9:\n"
                                         "  Y[2] = 2\n"
                                         "else:\n"
                                         "  if 5 <= j:\n"
                                         "    Y[4] = 4\n");
    Stmt *outer2 = lower_if(m, j5, NULL, inner2);
    CHECK_STMT(lower_simplify(m, outer2), "if 5 <= j:\n  Y[4] = 4\n");
    /* decided conditions and empty statements */
    CHECK_STMT(lower_simplify(m, lower_if(m, bin(&E, EX_LT, E.eT, K(&E, 0)), inner2, inner)),
               "if j < 5:\n  Y[2] = 2\nelse:\n  Y[3] = 3\n");
    CHECK(lower_simplify(m, lower_if(m, bin(&E, EX_LT, E.eT, K(&E, 0)), inner2, NULL)) == NULL);
    env_free(&E);
}

/* ---- the randomized self-check ---- */

typedef struct Rng {
    uint64_t s;
} Rng;

/* RAVEL_TEST_SEED=n runs the random tests from another seed. */
static uint64_t seed(uint64_t dflt) {
    const char *s = getenv("RAVEL_TEST_SEED");
    return s && *s ? dflt ^ (strtoull(s, NULL, 10) * 0x9e3779b97f4a7c15ull) : dflt;
}

static uint64_t rnd(Rng *r) {
    r->s ^= r->s << 13;
    r->s ^= r->s >> 7;
    r->s ^= r->s << 17;
    return r->s;
}

/* uniform in [lo, hi] */
static int64_t rnd_in(Rng *r, int64_t lo, int64_t hi) {
    return lo + (int64_t)(rnd(r) % (uint64_t)(hi - lo + 1));
}

/* Values for everything an expression may mention: sizes by id, axes by
 * id, the UF `len`, and the buffer Y. */
typedef struct Point {
    int64_t size[3];
    int64_t len[32];
    int64_t *ax;
    int64_t Y[8];
} Point;

/* Evaluates e with C semantics; false where C leaves it undefined
 * (division by zero, overflow, an index outside an array). Both operands
 * of && || and select are evaluated. */
static bool ev(const Env *E, const Point *p, const Expr *e, int64_t *out) {
    int64_t a = 0, b = 0, c = 0;
    if (e->n >= 1 && e->kind != EX_UFCALL && e->kind != EX_LOAD && !ev(E, p, e->args[0], &a))
        return false;
    if (e->n >= 2 && !ev(E, p, e->args[1], &b))
        return false;
    if (e->n >= 3 && !ev(E, p, e->args[2], &c))
        return false;
    switch (e->kind) {
    case EX_CONST_INT:
        *out = e->u.ival;
        return true;
    case EX_SIZE:
        *out = p->size[e->u.size->id];
        return true;
    case EX_VAR:
        *out = p->ax[e->u.axis->id];
        return true;
    case EX_UFCALL:
    case EX_LOAD: {
        int64_t x;
        if (!ev(E, p, e->args[0], &x))
            return false;
        if (e->kind == EX_UFCALL || e->u.buf == E->lens) {
            if (x < 0 || x >= p->size[E->B->id])
                return false;
            *out = p->len[x];
        } else {
            if (x < 0 || x >= 8)
                return false;
            *out = p->Y[x];
        }
        return true;
    }
    case EX_CAST:
        *out = a;
        return true;
    case EX_NEG:
        *out = -a;
        return a != INT64_MIN;
    case EX_ABS:
        *out = a < 0 ? -a : a;
        return a != INT64_MIN;
    case EX_ADD:
        return !__builtin_add_overflow(a, b, out);
    case EX_SUB:
        return !__builtin_sub_overflow(a, b, out);
    case EX_MUL:
        return !__builtin_mul_overflow(a, b, out);
    case EX_DIV:
    case EX_MOD:
    case EX_FLOORDIV:
    case EX_FLOORMOD: {
        if (b == 0 || (a == INT64_MIN && b == -1))
            return false;
        int64_t q = a / b, r = a % b;
        if ((e->kind == EX_FLOORDIV || e->kind == EX_FLOORMOD) && r != 0 && ((r < 0) != (b < 0))) {
            q--;
            r += b;
        }
        *out = (e->kind == EX_DIV || e->kind == EX_FLOORDIV) ? q : r;
        return true;
    }
    case EX_MIN:
        *out = a < b ? a : b;
        return true;
    case EX_MAX:
        *out = a > b ? a : b;
        return true;
    case EX_EQ:
        *out = a == b;
        return true;
    case EX_NE:
        *out = a != b;
        return true;
    case EX_LT:
        *out = a < b;
        return true;
    case EX_LE:
        *out = a <= b;
        return true;
    case EX_GT:
        *out = a > b;
        return true;
    case EX_GE:
        *out = a >= b;
        return true;
    case EX_AND:
        *out = a && b;
        return true;
    case EX_OR:
        *out = a || b;
        return true;
    case EX_NOT:
        *out = !a;
        return true;
    case EX_SELECT:
        *out = a ? b : c;
        return true;
    default:
        fprintf(stderr, "ev: unexpected %s\n", ir_expr_info[e->kind].name);
        return false;
    }
}

static Expr *gen_bool(Env *E, Rng *r, int depth);
static Expr *gen_int(Env *E, Rng *r, int depth);

/* An index-shaped expression: a few terms c*x with the coefficients tiling
 * and flattening produce, plus an offset; atoms are leaves, or divisions,
 * remainders, min and max of such sums. This is where the rules that need
 * sign proofs get exercised. */
static Expr *gen_lin(Env *E, Rng *r, int depth) {
    static const int64_t coefs[] = {1, 1, 1, 2, 4, 8, 16, 32, 3, -1, -1, -2, -4, -8, -32};
    static const int64_t divs[] = {2, 3, 4, 8, 16, 32};
    static const ExprKind dk[6] = {EX_DIV, EX_MOD, EX_FLOORDIV, EX_FLOORMOD, EX_MIN, EX_MAX};
    Expr *acc = K(E, rnd(r) % 2 ? rnd_in(r, -40, 40) : 0);
    int n = 1 + (int)(rnd(r) % 3);
    for (int t = 0; t < n; t++) {
        Expr *x;
        int64_t c = coefs[rnd(r) % RV_COUNT(coefs)];
        if (depth > 0 && rnd(r) % 3 == 0) {
            ExprKind k = dk[rnd(r) % 6];
            int64_t d = divs[rnd(r) % 6];
            Expr *a = gen_lin(E, r, depth - 1);
            x = k == EX_MIN || k == EX_MAX ? bin(E, k, a, gen_lin(E, r, depth - 1))
                                           : bin(E, k, a, K(E, d));
            if (rnd(r) % 2) /* a tile: x/d*d, x/d*(-2d), ... */
                c = d * rnd_in(r, -2, 2);
        } else {
            x = gen_int(E, r, 0);
        }
        acc = add(E, acc, mul(E, x, K(E, c)));
    }
    return acc;
}

/* A random integer expression: leaves are the loop variables, sizes,
 * len[b], lens[b], Y[0] and small constants of both signs; operators are
 * sums, products (mostly by constants), divisions and remainders by
 * constants of both signs (and sometimes by expressions), min, max,
 * select and abs. */
static Expr *gen_int(Env *E, Rng *r, int depth) {
    Module *m = E->m;
    if (depth > 0 && rnd(r) % 4 == 0)
        return gen_lin(E, r, depth - 1);
    if (depth <= 0 || rnd(r) % 4 == 0) {
        switch (rnd(r) % 14) {
        case 0:
            return E->i->var;
        case 1:
            return E->b->var;
        case 2:
            return E->j->var;
        case 3:
            return E->io->var;
        case 4:
            return E->ii->var;
        case 5:
            return E->k->var;
        case 6:
            return E->eT;
        case 7:
            return E->eN;
        case 8:
            return E->eB;
        case 9:
            return lenb(E, E->b->var);
        case 10:
            return ir_load(m, E->lens, E->b->var);
        case 11:
            return ir_load(m, E->Y, K(E, 0));
        default:
            return K(E, rnd_in(r, -12, 12));
        }
    }
    static const int64_t divisors[] = {1, 2, 3, 4, 5, 7, 8, 16, 32, -1, -2, -3, -8};
    Expr *a = gen_int(E, r, depth - 1);
    switch (rnd(r) % 12) {
    case 0:
    case 1:
        return add(E, a, gen_int(E, r, depth - 1));
    case 2:
        return sub(E, a, gen_int(E, r, depth - 1));
    case 3:
        return mul(E, a, K(E, rnd_in(r, -9, 9)));
    case 4:
        return rnd(r) % 3 ? mul(E, K(E, rnd_in(r, -5, 33)), a)
                          : mul(E, a, gen_int(E, r, depth - 2));
    case 5:
    case 6: {
        static const ExprKind dk[4] = {EX_DIV, EX_MOD, EX_FLOORDIV, EX_FLOORMOD};
        ExprKind k = dk[rnd(r) % 4];
        Expr *d =
            rnd(r) % 6 ? K(E, divisors[rnd(r) % RV_COUNT(divisors)]) : gen_int(E, r, depth - 2);
        return bin(E, k, a, d);
    }
    case 7:
        return bin(E, EX_MIN, a, gen_int(E, r, depth - 1));
    case 8:
        return bin(E, EX_MAX, a, gen_int(E, r, depth - 1));
    case 9:
        return ir_select(m, gen_bool(E, r, depth - 1), a, gen_int(E, r, depth - 1));
    case 10:
        return ir_unary(m, rnd(r) % 2 ? EX_NEG : EX_ABS, a);
    default:
        return a;
    }
}

/* A sum over a few atoms drawn from a small pool that holds variables
 * together with their extents and tile counts, so that comparisons with 0
 * need cancellation and often sit right at the edge of what is provable. */
static Expr *gen_shared(Env *E, Rng *r) {
    Expr *N31 = add(E, E->eN, K(E, 31));
    Expr *pool[] = {
        E->i->var,
        mul(E, E->eT, K(E, 16)),
        E->j->var,
        lenb(E, E->b->var),
        E->eT,
        E->io->var,
        E->ii->var,
        bin(E, EX_DIV, N31, K(E, 32)),
        bin(E, EX_FLOORDIV, N31, K(E, 32)),
        E->eN,
        bin(E, EX_DIV, add(E, E->i->var, K(E, 7)), K(E, 8)),
        bin(E, EX_MOD, E->i->var, K(E, 8)),
        bin(E, EX_DIV, E->ii->var, K(E, 8)),
        bin(E, EX_MIN, K(E, 32), sub(E, E->eN, mul(E, E->io->var, K(E, 32)))),
        /* divisions and remainders of operands that may be negative */
        bin(E, EX_DIV, sub(E, E->i->var, K(E, 3)), K(E, 8)),
        bin(E, EX_DIV, sub(E, E->ii->var, K(E, 5)), K(E, 4)),
        bin(E, EX_MOD, sub(E, E->k->var, K(E, 7)), K(E, 8)),
        bin(E, EX_MOD, sub(E, E->ii->var, K(E, 40)), K(E, 16)),
        bin(E, EX_MOD, sub(E, E->k->var, K(E, 8)), K(E, 8)),
        bin(E, EX_FLOORMOD, sub(E, E->k->var, K(E, 7)), K(E, 8)),
        /* min and max on both sides of their arms */
        bin(E, EX_MAX, sub(E, E->i->var, mul(E, E->eT, K(E, 3))), K(E, 0)),
        bin(E, EX_MIN, E->j->var, K(E, 2)),
        bin(E, EX_MAX, E->ii->var, K(E, 16)),
        ir_select(E->m, bin(E, EX_LT, E->k->var, K(E, 2)), E->ii->var, E->k->var),
    };
    static const int64_t coefs[] = {1, -1, 2, -2, 8, -8, 16, -16, 32, -32};
    Expr *acc = K(E, rnd_in(r, -40, 40));
    int n = 2 + (int)(rnd(r) % 3);
    for (int t = 0; t < n; t++)
        acc = add(E, acc,
                  mul(E, pool[rnd(r) % RV_COUNT(pool)], K(E, coefs[rnd(r) % RV_COUNT(coefs)])));
    return acc;
}

static Expr *gen_bool(Env *E, Rng *r, int depth) {
    static const ExprKind cmp[6] = {EX_LT, EX_LE, EX_GT, EX_GE, EX_EQ, EX_NE};
    if (rnd(r) % 3 == 0)
        return bin(E, cmp[rnd(r) % 6], gen_shared(E, r), K(E, 0));
    switch (depth <= 0 ? 0 : rnd(r) % 6) {
    case 0:
    case 1:
    case 2:
        return bin(E, cmp[rnd(r) % 6], gen_int(E, r, depth - 1), gen_int(E, r, depth - 1));
    case 3:
        return bin(E, EX_AND, gen_bool(E, r, depth - 1), gen_bool(E, r, depth - 1));
    case 4:
        return bin(E, EX_OR, gen_bool(E, r, depth - 1), gen_bool(E, r, depth - 1));
    default:
        return ir_unary(E->m, EX_NOT, gen_bool(E, r, depth - 1));
    }
}

/* A random point inside the declared ranges, with every loop variable
 * inside its extent (len[b] >= 1, so the j loop runs). Small sizes are
 * favoured so that edges (T = 1, N = 1, a last partial tile) come up. */
static void gen_point(Env *E, Rng *r, Point *p, int64_t maxT) {
    int64_t T = rnd(r) % 2 ? rnd_in(r, 1, 4) : rnd_in(r, 1, maxT);
    int64_t N = rnd(r) % 2 ? rnd_in(r, 1, 70) : rnd_in(r, 1, 1000);
    int64_t B = rnd_in(r, 1, 32);
    p->size[E->T->id] = T;
    p->size[E->N->id] = N;
    p->size[E->B->id] = B;
    for (int x = 0; x < 32; x++)
        p->len[x] = rnd_in(r, 0, T);
    for (int x = 0; x < 8; x++)
        p->Y[x] = rnd_in(r, -20, 20);
    int64_t b = rnd_in(r, 0, B - 1);
    if (p->len[b] == 0)
        p->len[b] = rnd_in(r, 1, T);
    p->ax[E->i->id] = rnd(r) % 4 ? rnd_in(r, 0, 16 * T - 1) : 16 * T - 1;
    p->ax[E->b->id] = b;
    p->ax[E->j->id] = rnd(r) % 4 ? rnd_in(r, 0, p->len[b] - 1) : p->len[b] - 1;
    p->ax[E->io->id] = rnd(r) % 4 ? rnd_in(r, 0, (N + 31) / 32 - 1) : (N + 31) / 32 - 1;
    p->ax[E->ii->id] = rnd_in(r, 0, 31);
    p->ax[E->k->id] = rnd_in(r, 0, 4);
}

static void test_random_exprs(void) {
    Env E;
    env_init(&E);
    Rng r = {seed(0x9e3779b97f4a7c15ull)};
    int cases = 6000, points = 24, compared = 0, bad = 0, changed = 0, unstable = 0;
    for (int n = 0; n < cases && bad < 5; n++) {
        int depth = 1 + (int)(rnd(&r) % 5);
        Expr *e = rnd(&r) % 3 ? gen_int(&E, &r, depth) : gen_bool(&E, &r, depth);
        Expr *s = ir_simplify_expr(E.m, e);
        changed += s != e;
        Expr *s2 = ir_simplify_expr(E.m, s);
        if (s2 != s) {
            if (unstable++ < 3) {
                char *a = estr(&E, s), *b2 = estr(&E, s2), *o = estr(&E, e);
                fprintf(stderr, "    not a fixpoint: %s\n      -> %s\n      from %s\n", a, b2, o);
                base_free(o);
                base_free(a);
                base_free(b2);
            }
        }
        Point p = {0};
        p.ax = base_xcalloc((size_t)E.m->n_axes, sizeof(int64_t));
        for (int k = 0; k < points; k++) {
            gen_point(&E, &r, &p, 64);
            int64_t want, got;
            if (!ev(&E, &p, e, &want))
                continue;
            compared++;
            bool ok = ev(&E, &p, s, &got);
            if (!ok || got != want) {
                char *es = estr(&E, e), *ss = estr(&E, s);
                fprintf(
                    stderr,
                    "    value changed: %s\n      -> %s\n      T=%lld N=%lld B=%lld i=%lld b=%lld "
                    "j=%lld io=%lld ii=%lld k=%lld len[b]=%lld Y0=%lld: %lld, got %s%lld\n",
                    es, ss, (long long)p.size[0], (long long)p.size[1], (long long)p.size[2],
                    (long long)p.ax[E.i->id], (long long)p.ax[E.b->id], (long long)p.ax[E.j->id],
                    (long long)p.ax[E.io->id], (long long)p.ax[E.ii->id], (long long)p.ax[E.k->id],
                    (long long)p.len[p.ax[E.b->id]], (long long)p.Y[0], (long long)want,
                    ok ? "" : "undefined ", (long long)got);
                base_free(es);
                base_free(ss);
                bad++;
                break;
            }
        }
        base_free(p.ax);
    }
    CHECK_EQ_INT(bad, 0);
    CHECK(compared > cases * points / 2);
    CHECK(changed > cases / 2);
    CHECK_EQ_INT(unstable, 0);
    env_free(&E);
}

/* Bounds at their edge: for a random index-shaped sum L, the smallest and
 * largest values seen at many random points, lo and hi, are attained, so
 * the simplifier must not prove L <= hi - 1 or L >= lo + 1 (a bound that
 * cuts off a value that occurs), nor disprove L <= hi or L >= lo. This
 * catches an unsound bound far more often than random comparisons do. */
static void test_random_bounds(void) {
    Env E;
    env_init(&E);
    Rng r = {seed(0x5851f42d4c957f2dull)};
    int cases = 3000, bad = 0, decided = 0;
    Point p = {0};
    p.ax = base_xcalloc((size_t)E.m->n_axes + 64, sizeof(int64_t));
    for (int n = 0; n < cases && bad < 5; n++) {
        Expr *L = rnd(&r) % 2 ? gen_shared(&E, &r) : gen_lin(&E, &r, 2);
        int64_t lo = INT64_MAX, hi = INT64_MIN, v;
        for (int k = 0; k < 200; k++) {
            gen_point(&E, &r, &p, 64);
            if (ev(&E, &p, L, &v)) {
                lo = v < lo ? v : lo;
                hi = v > hi ? v : hi;
            }
        }
        if (lo > hi || lo <= INT64_MIN + 1 || hi >= INT64_MAX - 1)
            continue;
        struct {
            ExprKind k;
            int64_t c;
            bool must_not; /* the value the simplifier must not give */
        } q[4] = {
            {EX_LE, hi - 1, true}, {EX_GE, lo + 1, true}, {EX_LE, hi, false}, {EX_GE, lo, false}};
        for (int t = 0; t < 4; t++) {
            Expr *s = ir_simplify_expr(E.m, bin(&E, q[t].k, L, K(&E, q[t].c)));
            if (s->kind != EX_CONST_INT)
                continue;
            decided++;
            if ((s->u.ival != 0) == q[t].must_not) {
                char *es = estr(&E, L);
                fprintf(stderr, "    %s: seen in [%lld, %lld], yet %s %s %lld is %s\n", es,
                        (long long)lo, (long long)hi, es,
                        q[t].k == EX_LE ? "<=" : ">=", (long long)q[t].c,
                        s->u.ival ? "true" : "false");
                base_free(es);
                bad++;
            }
        }
    }
    base_free(p.ax);
    CHECK_EQ_INT(bad, 0);
    CHECK(decided > cases / 2);
    env_free(&E);
}

/* ---- random loop nests through lower_simplify ---- */

typedef struct Run {
    const Env *E;
    Point *p;
    long steps;
    bool ok;
} Run;

/* Executes s, loops for real; ok turns false on undefined behaviour or a
 * runaway loop. */
static void exec(Run *R, const Stmt *s) {
    if (!s || !R->ok)
        return;
    int64_t v, w;
    switch (s->kind) {
    case ST_FOR:
        if (!ev(R->E, R->p, s->u.loop.extent, &v)) {
            R->ok = false;
            return;
        }
        for (int64_t x = 0; x < v && R->ok; x++) {
            if (++R->steps > 20000) {
                R->ok = false;
                return;
            }
            R->p->ax[s->u.loop.var->id] = x;
            exec(R, s->u.loop.body);
        }
        break;
    case ST_IF:
        if (!ev(R->E, R->p, s->u.if_.cond, &v)) {
            R->ok = false;
            return;
        }
        exec(R, v ? s->u.if_.then_s : s->u.if_.else_s);
        break;
    case ST_LET:
        if (!ev(R->E, R->p, s->u.let.value, &v)) {
            R->ok = false;
            return;
        }
        R->p->ax[s->u.let.var->id] = v;
        exec(R, s->u.let.body);
        break;
    case ST_STORE:
        if (!ev(R->E, R->p, s->u.store.index, &v) || !ev(R->E, R->p, s->u.store.value, &w) ||
            v < 0 || v >= 8 || s->u.store.buf != R->E->Y) {
            R->ok = false;
            return;
        }
        R->p->Y[v] = w;
        break;
    case ST_SEQ:
        for (int i = 0; i < s->u.seq.n; i++)
            exec(R, s->u.seq.stmts[i]);
        break;
    default:
        break;
    }
}

/* A random nest over fresh loop variables whose extents are random
 * expressions of the outer ones (0, 1 and negative extents included),
 * with lets, guards and stores Y[c] = Y[c'] + e. */
static Stmt *gen_stmt(Env *E, Rng *r, int depth, Axis **vars, int *nvars) {
    Module *m = E->m;
    int pick = depth <= 0 ? 4 : (int)(rnd(r) % 6);
    switch (pick) {
    case 0: {
        static int serial;
        char name[16];
        snprintf(name, sizeof name, "p%d", serial++ % 1000);
        Expr *ext;
        switch (rnd(r) % 5) {
        case 0:
            ext = K(E, rnd_in(r, -1, 3));
            break;
        case 1:
            ext = add(E, E->eT, K(E, rnd_in(r, -2, 1)));
            break;
        case 2:
            ext = bin(E, EX_MIN, gen_int(E, r, 2), K(E, 4));
            break;
        default:
            ext = *nvars ? sub(E, E->eT, vars[rnd(r) % (uint64_t)*nvars]->var) : E->eT;
            break;
        }
        Axis *a = lower_loop_var(m, name, NULL);
        vars[(*nvars)++] = a;
        Stmt *body = gen_stmt(E, r, depth - 1, vars, nvars);
        (*nvars)--;
        return lower_for(m, a, ext, LOOP_SERIAL, body);
    }
    case 1: {
        Axis *a = lower_loop_var(m, "t", NULL);
        Expr *v = rnd(r) % 4 ? gen_int(E, r, 2) : ir_load(m, E->Y, K(E, rnd_in(r, 0, 7)));
        vars[(*nvars)++] = a;
        Stmt *body = gen_stmt(E, r, depth - 1, vars, nvars);
        (*nvars)--;
        return lower_let(m, a, v, body);
    }
    case 2:
    case 3: {
        Expr *c = gen_bool(E, r, 2);
        if (*nvars && rnd(r) % 2)
            c = bin(E, EX_LT, vars[rnd(r) % (uint64_t)*nvars]->var, gen_int(E, r, 1));
        return lower_if(m, c, gen_stmt(E, r, depth - 1, vars, nvars),
                        rnd(r) % 2 ? gen_stmt(E, r, depth - 1, vars, nvars) : NULL);
    }
    case 4: {
        Expr *v = gen_int(E, r, 2);
        if (*nvars)
            v = add(E, v, vars[rnd(r) % (uint64_t)*nvars]->var);
        Expr *idx =
            rnd(r) % 3 ? K(E, rnd_in(r, 0, 7)) : bin(E, EX_FLOORMOD, gen_int(E, r, 1), K(E, 8));
        return lower_store(m, E->Y, idx, add(E, ir_load(m, E->Y, K(E, rnd_in(r, 0, 7))), v));
    }
    default: {
        Stmt *two[2] = {gen_stmt(E, r, depth - 1, vars, nvars),
                        gen_stmt(E, r, depth - 1, vars, nvars)};
        return lower_seq(m, 2, two);
    }
    }
}

static void test_random_stmts(void) {
    Env E;
    env_init(&E);
    Rng r = {seed(0x2545f4914f6cdd1dull)};
    int cases = 1500, compared = 0, bad = 0;
    for (int n = 0; n < cases && bad < 3; n++) {
        Axis *vars[16];
        int nvars = 0;
        Stmt *s = gen_stmt(&E, &r, 4, vars, &nvars);
        Stmt *t = lower_simplify(E.m, s);
        Point p = {0};
        p.ax = base_xcalloc((size_t)E.m->n_axes, sizeof(int64_t));
        for (int k = 0; k < 6; k++) {
            gen_point(&E, &r, &p, 6);
            Point q = p;
            q.ax = base_xcalloc((size_t)E.m->n_axes, sizeof(int64_t));
            memcpy(q.ax, p.ax, sizeof(int64_t) * (size_t)E.m->n_axes);
            Run a = {&E, &p, 0, true}, b = {&E, &q, 0, true};
            exec(&a, s);
            if (a.ok) {
                exec(&b, t);
                compared++;
                if (!b.ok || memcmp(p.Y, q.Y, sizeof p.Y) != 0) {
                    char *x = sstr(s), *y = sstr(t);
                    fprintf(stderr, "    statement result changed (T=%lld):\n%s    ->\n%s",
                            (long long)p.size[E.T->id], x, y);
                    base_free(x);
                    base_free(y);
                    bad++;
                }
            }
            base_free(q.ax);
            if (bad)
                break;
        }
        base_free(p.ax);
    }
    CHECK_EQ_INT(bad, 0);
    CHECK(compared > cases);
    env_free(&E);
}

/* ---- a fused loop's row starts and row map (lower/vfuse.c) ----
 * Their values are element counts of the fused levels: without a bound
 * they range over [0, INT64_MAX/4] (a region over all the fused rows was
 * sized by that: "out of scratch memory"); with the bound vfuse.c stores,
 * the level's number of tuples, they range over [0, that bound]. */
static void test_vfuse_bounds(void) {
    Env E;
    env_init(&E);
    /* the row starts of l < len[b]: B*T tuples at most (32*64 = 2048) */
    Buffer *st = ir_buffer_new(E.m, "st", RV_I64, add(&E, E.eB, K(&E, 1)), BUF_AUX);
    st->vfuse_key = E.b;
    st->vfuse_level = 1;
    Expr *at = ir_load(E.m, st, E.b->var);
    CHECK_SIMP(&E, bin(&E, EX_LE, at, K(&E, 2048)), "st[b] <= 2048");
    st->vfuse_hi = mul(&E, E.eB, E.eT);
    CHECK_SIMP(&E, bin(&E, EX_LE, at, K(&E, 2048)), "true");
    CHECK_SIMP(&E, bin(&E, EX_LT, at, K(&E, 2048)), "st[b] < 2048"); /* the bound is tight */
    CHECK_SIMP(&E, bin(&E, EX_GE, at, K(&E, 0)), "true");
    /* its row map: the row (a prefix index b < B) of each fused index */
    Buffer *row = ir_buffer_new(E.m, "st_row", RV_I64, mul(&E, E.eB, E.eT), BUF_AUX);
    row->vfuse_key = E.b;
    row->vfuse_level = -1;
    row->vfuse_hi = E.eB;
    Expr *r = ir_load(E.m, row, E.i->var);
    CHECK_SIMP(&E, bin(&E, EX_LE, r, K(&E, 32)), "true");
    CHECK_SIMP(&E, bin(&E, EX_LE, r, K(&E, 31)), "st_row[i] <= 31");
    /* a region's size over all rows (st[B] rows of 64 elements) is bounded */
    Expr *all = mul(&E, ir_load(E.m, st, E.eB), K(&E, 64));
    CHECK_SIMP(&E, bin(&E, EX_LE, all, K(&E, 2048 * 64)), "true");
    env_free(&E);
}

int main(void) {
    RUN(test_linear);
    RUN(test_bounds);
    RUN(test_divmod);
    RUN(test_logic);
    RUN(test_stmts);
    RUN(test_random_exprs);
    RUN(test_random_bounds);
    RUN(test_random_stmts);
    RUN(test_values);
    RUN(test_vfuse_bounds);
    return harness_report();
}
