/*
 * test_stmt.c — loop-IR statements: constructors (sequence flattening),
 * the generic mutator (same pointer when nothing changes, rebuilds along
 * the changed path only) and the printer's text form.
 */
#include "harness.h"
#include "loop_ir.h"
#include "lower/lower.h"

static void test_names(void) {
    CHECK(strcmp(lower_stmt_name[ST_FOR], "for") == 0);
    CHECK(strcmp(lower_stmt_name[ST_CALL], "call") == 0);
    CHECK(strcmp(lower_loop_kind_name[LOOP_PARALLEL], "parallel") == 0);
    CHECK(strcmp(lower_loop_kind_name[LOOP_GPU_THREAD_Z], "gpu_thread_z") == 0);
}

static void test_seq(void) {
    Module *m = rv_module_new();
    Buffer *y = ir_buffer_new(m, "Y", RV_F32, ir_int(m, 4), BUF_ARG);
    Stmt *a = lower_store(m, y, ir_int(m, 0), ir_float(m, RV_F32, 1));
    Stmt *b = lower_store(m, y, ir_int(m, 1), ir_float(m, RV_F32, 2));
    Stmt *c = lower_store(m, y, ir_int(m, 2), ir_float(m, RV_F32, 3));
    CHECK(lower_seq(m, 0, NULL) == NULL);
    Stmt *nulls[2] = {NULL, NULL};
    CHECK(lower_seq(m, 2, nulls) == NULL);
    Stmt *one[3] = {NULL, a, NULL};
    CHECK(lower_seq(m, 3, one) == a);
    Stmt *ab[2] = {a, b};
    Stmt *inner = lower_seq(m, 2, ab);
    CHECK(inner->kind == ST_SEQ && inner->u.seq.n == 2);
    Stmt *outer_in[3] = {inner, NULL, c};
    Stmt *outer = lower_seq(m, 3, outer_in);
    CHECK(outer->kind == ST_SEQ && outer->u.seq.n == 3);
    CHECK(outer->u.seq.stmts[0] == a && outer->u.seq.stmts[1] == b && outer->u.seq.stmts[2] == c);
    check_text(outer, "Y[0] = 1.0\nY[1] = 2.0\nY[2] = 3.0\n");
    rv_module_free(m);
}

/* fe for the mutator test: replaces the variable `ctx` by 0. */
static Expr *zero_var(StmtMutator *mu, Expr *e) {
    PtrMap map = {0};
    ptrmap_put(&map, mu->ctx, ir_int(mu->m, 0));
    Expr *r = ir_substitute(mu->m, e, &map);
    ptrmap_free(&map);
    return r;
}

static int visited;
static Stmt *count_stmt(StmtMutator *mu, Stmt *s) {
    (void)mu;
    visited++;
    return s;
}

static void test_mutate(void) {
    Module *m = rv_module_new();
    Size *T = rv_size_new(m, "T", 1, 64);
    Buffer *y = ir_buffer_new(m, "Y", RV_I64, ir_size(m, T), BUF_ARG);
    Axis *i = lower_loop_var(m, "i", ir_size(m, T));
    Axis *j = lower_loop_var(m, "j", ir_int(m, 4));
    Stmt *st_i = lower_store(m, y, i->var, i->var);
    Stmt *st_j = lower_store(m, y, j->var, ir_binary(m, EX_ADD, j->var, ir_int(m, 1)));
    Stmt *loop_j = lower_for(m, j, ir_int(m, 4), LOOP_SERIAL, st_j);
    Stmt *parts[2] = {st_i, loop_j};
    Stmt *body = lower_seq(m, 2, parts);
    Stmt *top = lower_for(m, i, ir_size(m, T), LOOP_PARALLEL, body);

    /* identity: same pointer, fs sees every statement */
    StmtMutator id = {NULL, count_stmt, m, NULL};
    visited = 0;
    CHECK(lower_mutate(&id, top) == top);
    CHECK_EQ_INT(visited, 5);

    /* j -> 0: the j loop and the seq are rebuilt; the store of i is shared */
    StmtMutator mu = {zero_var, NULL, m, j};
    Stmt *r = lower_mutate(&mu, top);
    CHECK(r != top && r->kind == ST_FOR);
    CHECK(r->u.loop.body->kind == ST_SEQ);
    CHECK(r->u.loop.body->u.seq.stmts[0] == st_i);
    CHECK(r->u.loop.body->u.seq.stmts[1] != loop_j);
    check_text(r, "parallel for i in 0..T:\n"
                  "  Y[i] = i\n"
                  "  for j in 0..4:\n"
                  "    Y[0] = 1\n");
    rv_module_free(m);
}

static void test_print(void) {
    Module *m = rv_module_new();
    Size *T = rv_size_new(m, "T", 1, 128);
    const char *argn[1] = {"b"};
    Ufun *len = rv_ufun_begin(m, "len", 1, argn);
    Expr *ext[1] = {ir_size(m, T)};
    rv_ufun_end(len, ext, ir_int(m, 1), ir_size(m, T));
    Expr *rows = ir_binary(m, EX_MUL, ir_int(m, 16), ir_size(m, T));
    Buffer *X = ir_buffer_new(m, "X", RV_F32, ir_binary(m, EX_MUL, rows, ir_int(m, 768)), BUF_ARG);
    Buffer *Y = ir_buffer_new(m, "Y", RV_F32, ir_binary(m, EX_MUL, rows, ir_int(m, 2304)), BUF_ARG);
    Buffer *acc = ir_buffer_new(m, "acc", RV_F32, ir_int(m, 4), BUF_LOCAL);
    Axis *i = lower_loop_var(m, "i", rows);
    Axis *j = lower_loop_var(m, "j", ir_int(m, 2304));
    Axis *t = lower_loop_var(m, "t", NULL);
    Axis *b = lower_loop_var(m, "b", ir_size(m, T));
    Axis *l = lower_loop_var(m, "l", NULL);

    Expr *xi = ir_load(m, X, ir_binary(m, EX_MUL, i->var, ir_int(m, 768)));
    Expr *yidx = ir_binary(m, EX_ADD, ir_binary(m, EX_MUL, i->var, ir_int(m, 2304)), j->var);
    Expr *v = ir_binary(m, EX_MUL, ir_binary(m, EX_SUB, t->var, ir_int(m, 1)), ir_int(m, 3));
    Expr *cond = ir_binary(m, EX_AND, ir_binary(m, EX_LT, j->var, ir_int(m, 100)),
                           ir_unary(m, EX_NOT, ir_binary(m, EX_EQ, i->var, ir_int(m, 0))));
    Stmt *store = lower_store(m, Y, yidx, ir_binary(m, EX_MUL, xi, ir_cast(m, RV_F32, t->var)));
    Stmt *guarded =
        lower_if(m, cond, store, lower_store(m, acc, ir_int(m, 0), ir_float(m, RV_F32, -0.5)));
    Stmt *let = lower_let(m, t, ir_binary(m, EX_FLOORDIV, j->var, ir_int(m, 4)), guarded);
    Stmt *inner = lower_for(m, j, ir_int(m, 2304), LOOP_VECTOR, let);
    Stmt *parts[2] = {inner, lower_barrier(m)};
    Stmt *alloc = lower_alloc(m, acc, lower_seq(m, 2, parts));
    Stmt *body = lower_for(m, i, rows, LOOP_PARALLEL, alloc);
    (void)v;

    /* a let followed by a sibling prints as a block */
    Buffer *L = ir_buffer_new(m, "len", RV_I64, ir_size(m, T), BUF_ARG);
    Expr *lb = ir_load(m, L, b->var);
    Stmt *st2 = lower_store(
        m, Y, ir_unary(m, EX_NEG, ir_binary(m, EX_SUB, l->var, ir_int(m, -2))),
        ir_cast(m, RV_F32, ir_binary(m, EX_MIN, l->var, ir_ufcall(m, len, 1, &b->var))));
    Stmt *seq2[2] = {
        lower_let(m, l, ir_binary(m, EX_SUB, lb, ir_binary(m, EX_SUB, b->var, ir_int(m, 1))), st2),
        lower_call(m, "gemm", 2, (Buffer *[]){Y, X}, NULL)};
    Stmt *pre = lower_for(m, b, ir_size(m, T), LOOP_SERIAL, lower_seq(m, 2, seq2));

    Param params[3] = {{PARAM_SIZE, T, NULL}, {PARAM_TENSOR, NULL, X}, {PARAM_TENSOR, NULL, Y}};
    Kernel k = {.name = "dense", .m = m, .nparams = 3, .params = params, .prelude = pre, .body = body};
    Buf out = {0};
    lower_print_kernel(&out, &k);
    const char *want = "kernel dense(T: size, X: f32*, Y: f32*)\n"
                       "  prelude:\n"
                       "    for b in 0..T:\n"
                       "      let l = len[b] - (b - 1):\n"
                       "        Y[-(l - -2)] = f32(min(l, len{b}))\n"
                       "      call gemm(Y, X)\n"
                       "  parallel for i in 0..16*T:\n"
                       "    allocate acc: f32[4] local\n"
                       "    vector for j in 0..2304:\n"
                       "      let t = floordiv(j, 4)\n"
                       "      if j < 100 && !(i == 0):\n"
                       "        Y[i*2304 + j] = X[i*768]*f32(t)\n"
                       "      else:\n"
                       "        acc[0] = -0.5\n"
                       "    barrier\n";
    CHECK(strcmp(buf_str(&out), want) == 0);
    if (strcmp(buf_str(&out), want) != 0)
        fprintf(stderr, "got:\n%s", buf_str(&out));
    buf_free(&out);
    rv_module_free(m);
}

int main(void) {
    RUN(test_names);
    RUN(test_seq);
    RUN(test_mutate);
    RUN(test_print);
    return harness_report();
}
