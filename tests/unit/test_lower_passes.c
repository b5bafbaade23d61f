/*
 * test_lower_passes.c — per-pass golden tests of the loop-IR passes and
 * the loop-IR reader (src/lower/read.c).
 *
 * Each tests/lower/NAME.txt holds one pass's name, its input loop IR and
 * the expected output (docs/pipeline.md, "Per-pass golden tests"):
 *
 *     # what it shows (comment lines at the top)
 *     pass: hoist
 *     --- input
 *     size B in 1..100            (declarations the text form lacks)
 *     kernel P(B: size, ...)
 *       ...
 *     --- output
 *     kernel P(B: size, ...)
 *       ...
 *
 * The named pass alone runs on the input's kernels; the verifier checks
 * input and output; the printed result must equal the expected text.
 * Input and output must each read back to themselves (print(read(t)) ==
 * t), as must every pipeline output in tests/golden (NAME.lower.txt). The
 * reader's errors on malformed text are checked with their line:col.
 *
 * With file arguments, only round-trips those files (loop IR as `ravel
 * emit F --target lower` prints it), for checking the reader on dumps.
 */
#include <dirent.h>

#include "harness.h"
#include "lower/lower.h"

static char *slurp(const char *path) {
    char *text;
    size_t len;
    if (base_read_file(path, &text, &len) != RV_OK) {
        fprintf(stderr, "%s\n", rv_last_error());
        return NULL;
    }
    return text;
}

/* The kernels of `text` printed back, blank lines dropped (the printer's
 * callers separate kernels as they like). */
static void drop_blank_lines(Buf *b, const char *text) {
    for (const char *p = text; *p;) {
        const char *e = strchr(p, '\n');
        size_t n = e ? (size_t)(e - p + 1) : strlen(p);
        if (strspn(p, " ") < n && p[strspn(p, " ")] != '\n')
            buf_printf(b, "%.*s", (int)n, p);
        p += n;
    }
}

static void print_kernels(Buf *b, Kernel *const *ks, int n) {
    for (int i = 0; i < n; i++)
        lower_print_kernel(b, ks[i]);
}

/* The text after the declarations: the kernels as printed. */
static const char *kernels_part(const char *text) {
    const char *p = text;
    while (*p && strncmp(p, "kernel ", 7) != 0) {
        const char *e = strchr(p, '\n');
        p = e ? e + 1 : p + strlen(p);
    }
    return p;
}

/* Reads `text` (named `file`) into m and checks it prints back. */
static bool round_trip(Module *m, const char *file, const char *text, Kernel ***ks, int *n) {
    if (lower_read_kernels(m, file, text, ks, n) != RV_OK) {
        fprintf(stderr, "%s\n", rv_last_error());
        CHECK(!"reads");
        return false;
    }
    Buf want = {0}, got = {0}, printed = {0};
    drop_blank_lines(&want, kernels_part(text));
    print_kernels(&printed, *ks, *n);
    drop_blank_lines(&got, buf_str(&printed));
    bool same = strcmp(buf_str(&want), buf_str(&got)) == 0;
    CHECK(same && "print(read(text)) == text");
    if (!same)
        fprintf(stderr, "%s: read back as\n%s\n", file, buf_str(&got));
    buf_free(&want);
    buf_free(&got);
    buf_free(&printed);
    return same;
}

/* ---- golden files of tests/golden: whole-pipeline outputs ---- */

static void round_trip_file(const char *path) {
    char *text = slurp(path);
    CHECK(text != NULL);
    if (!text)
        return;
    Module *m = rv_module_new();
    Kernel **ks;
    int n;
    if (round_trip(m, path, text, &ks, &n))
        for (int i = 0; i < n; i++)
            CHECK(lower_verify_kernel(ks[i], "read") == RV_OK);
    rv_module_free(m);
    base_free(text);
}

static int by_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Paths of the files in dir whose names end in suffix, sorted;
 * NULL-terminated. */
static char **list_dir(const char *dir, const char *suffix) {
    DIR *d = opendir(dir);
    if (!d)
        return NULL;
    Vec(char *) v = {0};
    size_t sl = strlen(suffix);
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n > sl && strcmp(e->d_name + n - sl, suffix) == 0) {
            char *p = base_xmalloc(strlen(dir) + n + 2);
            sprintf(p, "%s/%s", dir, e->d_name);
            vec_push(&v, p);
        }
    }
    closedir(d);
    qsort(v.data, (size_t)v.len, sizeof(char *), by_name);
    vec_push(&v, NULL);
    return v.data;
}

static void free_list(char **l) {
    for (char **p = l; p && *p; p++)
        base_free(*p);
    base_free(l);
}

static void test_round_trip_pipeline_goldens(void) {
    char **files = list_dir("tests/golden", ".lower.txt");
    CHECK(files && files[0]);
    for (char **p = files; p && *p; p++)
        round_trip_file(*p);
    free_list(files);
}

/* ---- per-pass goldens of tests/lower ---- */

typedef struct Golden {
    char *pass;     /* the pass's name */
    char *input;    /* declarations and kernels */
    char *output;   /* kernels */
    int input_line; /* where the input starts in the file, for messages */
} Golden;

/* The text of `s` up to `end`, as a fresh string. */
static char *dup_range(const char *s, const char *end) {
    char *r = base_xmalloc((size_t)(end - s) + 1);
    memcpy(r, s, (size_t)(end - s));
    r[end - s] = '\0';
    return r;
}

static bool split_golden(const char *path, const char *text, Golden *g) {
    memset(g, 0, sizeof *g);
    const char *p = text;
    while (*p == '#') { /* comment lines */
        const char *e = strchr(p, '\n');
        p = e ? e + 1 : p + strlen(p);
    }
    const char *in = strstr(p, "\n--- input\n"), *out = strstr(p, "\n--- output\n");
    if (strncmp(p, "pass: ", 6) != 0 || !in || !out || out < in) {
        fprintf(stderr, "%s: expected 'pass: NAME', '--- input' and '--- output' lines\n", path);
        return false;
    }
    g->pass = dup_range(p + 6, strchr(p, '\n'));
    g->input = dup_range(in + 11, out + 1);
    g->output = dup_range(out + 12, out + 12 + strlen(out + 12));
    return true;
}

/* GOLDEN_UPDATE=1 (`make golden-update`): the file with its output
 * section replaced by what the pass gives now. Review the diff. */
static bool write_output(const char *path, const char *text, const char *out) {
    const char *sep = strstr(text, "\n--- output\n");
    FILE *f = fopen(path, "w");
    if (!f)
        return false;
    fprintf(f, "%.*s%s", (int)(sep + 12 - text), text, out);
    fprintf(stderr, "%s: output updated\n", path);
    return fclose(f) == 0;
}

static void run_golden(const char *path) {
    char *text = slurp(path);
    CHECK(text != NULL);
    Golden g;
    if (!text || !split_golden(path, text, &g)) {
        CHECK(!"a golden file");
        base_free(text);
        return;
    }
    bool pass = lower_has_pass(g.pass);
    CHECK(pass);
    if (!pass)
        fprintf(stderr, "%s: no pass named '%s'\n", path, g.pass);
    Module *m = rv_module_new();
    Kernel **ks, **want;
    int n, nwant;
    /* an empty output section is written by GOLDEN_UPDATE */
    bool fresh = getenv("GOLDEN_UPDATE") && !strstr(g.output, "kernel ");
    if (pass && round_trip(m, path, g.input, &ks, &n) &&
        (fresh || round_trip(m, path, g.output, &want, &nwant))) {
        Buf got = {0}, exp = {0}, printed = {0};
        for (int i = 0; i < n; i++) {
            CHECK(lower_verify_kernel(ks[i], "read") == RV_OK);
            CHECK(lower_run_pass(ks[i], g.pass) == RV_OK);
            CHECK(lower_verify_kernel(ks[i], g.pass) == RV_OK);
        }
        print_kernels(&printed, ks, n);
        drop_blank_lines(&got, buf_str(&printed));
        drop_blank_lines(&exp, kernels_part(g.output));
        bool same = strcmp(buf_str(&got), buf_str(&exp)) == 0;
        if (!same && getenv("GOLDEN_UPDATE"))
            same = write_output(path, text, buf_str(&got));
        CHECK(same && "the pass's output is the golden output");
        if (!same)
            fprintf(stderr, "%s: pass %s gave\n%s\nexpected\n%s\n", path, g.pass, buf_str(&got),
                    buf_str(&exp));
        buf_free(&got);
        buf_free(&exp);
        buf_free(&printed);
    }
    rv_module_free(m);
    base_free(g.pass);
    base_free(g.input);
    base_free(g.output);
    base_free(text);
}

static void test_pass_goldens(void) {
    char **files = list_dir("tests/lower", ".txt");
    CHECK(files && files[0]);
    for (char **p = files; p && *p; p++)
        run_golden(*p);
    free_list(files);
}

/* Every pass of the pipeline has at least one golden. */
static void test_every_pass_has_a_golden(void) {
    static const char *const names[] = {"checks",  "flatten", "simplify", "forward",
                                        "promote", "hoist",   "reduce",   "partition"};
    char **files = list_dir("tests/lower", ".txt");
    for (int i = 0; i < (int)RV_COUNT(names); i++) {
        CHECK(lower_has_pass(names[i]));
        bool found = false;
        for (char **p = files; p && *p && !found; p++) {
            char *text = slurp(*p);
            Golden g;
            if (text && split_golden(*p, text, &g)) {
                found = strcmp(g.pass, names[i]) == 0;
                base_free(g.pass);
                base_free(g.input);
                base_free(g.output);
            }
            base_free(text);
        }
        CHECK(found);
        if (!found)
            fprintf(stderr, "    no golden in tests/lower for pass %s\n", names[i]);
    }
    CHECK(!lower_has_pass("nonesuch"));
    free_list(files);
}

/* ---- the reader's errors ---- */

static void check_error(const char *text, const char *want) {
    Module *m = rv_module_new();
    Kernel **ks;
    int n;
    rv_status st = lower_read_kernels(m, "t.lir", text, &ks, &n);
    CHECK(st == RV_ERR_SYNTAX);
    if (st == RV_ERR_SYNTAX)
        CHECK_STR_CONTAINS(rv_last_error(), want);
    rv_module_free(m);
}

static void test_reader_errors(void) {
    check_error("", "t.lir:1:1: error: expected 'kernel'");
    check_error("kernel K(N: size, Y: f32*)\n"
                "  for i in 0..N:\n"
                "    Y[i] = Z[i]\n",
                "t.lir:3:12: error: undefined buffer 'Z'");
    check_error("kernel K(N: size, Y: f32*)\n"
                "  for i in 0..N:\n"
                "    Y[j] = 1.0\n",
                "t.lir:3:7: error: undefined name 'j'");
    check_error("kernel K(N: size, Y: f32*)\n"
                "  for i in 0..N\n"
                "    Y[i] = 1.0\n",
                "t.lir:2:16: error: expected ':'");
    check_error("kernel K(N: size, Y: f32*)\n"
                "  for i in 0..N:\n"
                "      Y[i] = 1.0\n",
                "t.lir:3:7: error: unexpected indentation (expected 4 spaces)");
    check_error("kernel K(N: size, Y: f32*)\n"
                "  for i in 0..N:\n"
                "  Y[0] = 1.0\n",
                "t.lir:3:3: error: expected a block indented by 4");
    check_error("kernel K(N: size, Y: f32*)\n"
                "  Y[0] = (1.0 + \n",
                "t.lir:2:17: error: expected an expression");
    check_error("kernel K(N: size, Y: f32*)\n"
                "  Y[0] = 1.0 +* 2.0\n",
                "t.lir:2:15: error: expected an expression, found '*'");
    check_error("kernel K(N: size, Y: i32*)\n"
                "  Y[0] = 1.5\n",
                "t.lir:2:10: error: storing f64 into i32 buffer 'Y'");
    check_error("kernel K(N: size, Y: f32*)\n"
                "  Y[1.5] = 1.0\n",
                "t.lir:2:5: error: a store index must be i64, got f64");
    check_error("kernel K(N: size, Y: f16*)\n", "t.lir:1:22: error: unknown dtype 'f16'");
    check_error("kernel K(N: size, Y: f32*)\n"
                "  allocate T: f32[4] shared\n"
                "  Y[0] = T[0]\n",
                "t.lir:2:22: error: unknown scope 'shared' (global or local)");
    check_error("kernel K(N: size, Y: f32*)\n"
                "  Y[0] = frob(1.0)\n",
                "t.lir:2:10: error: unknown function 'frob'");
    check_error("kernel K(N: size, Y: f32*)\n"
                "  else:\n"
                "    Y[0] = 1.0\n",
                "t.lir:2:3: error: 'else' without an 'if'");
    check_error("kernel K(N: size, Y: f32*)\n"
                "  Y[0] = 1.0 1.0\n",
                "t.lir:2:14: error: unexpected '1'");
    check_error("size N in 5..1\n"
                "kernel K(N: size, Y: f32*)\n"
                "  Y[0] = 1.0\n",
                "t.lir:1:1: error: size 'N' has an empty range 5..1");
    check_error(
        "frob N\n",
        "t.lir:1:1: error: expected a declaration (size, uf, aux, buffer, tensor) or 'kernel'");
    check_error("uf len: i32[B] in 0..9\n", "t.lir:1:13: error: undefined name 'B'");
    check_error("kernel K(N: size, Y: f32*)\n"
                "  if N:\n"
                "    Y[0] = 1.0\n",
                "t.lir:2:6: error: an if condition must be bool, got i64");
    /* reductions before the reduce pass */
    check_error("kernel K(N: size, Y: f32*)\n"
                "  reduce prod into Y:\n"
                "    Y[0] = Y[0]*2.0\n",
                "t.lir:2:10: error: unknown reduction 'prod' (sum, max, min, argmax)");
    check_error("kernel K(N: size, Y: f32*)\n"
                "  reduce argmax into Y:\n"
                "    Y[0] = 1.0\n",
                "t.lir:2:23: error: argmax needs an index buffer: ', ARG'");
    check_error("kernel K(N: size, Y: f32*)\n"
                "  reduce sum into Y, Z:\n"
                "    Y[0] = 1.0\n",
                "t.lir:2:22: error: undefined buffer 'Z'");
    /* multi-dimensional accesses and the tensors they name */
    check_error("kernel K(Y: f32*)\n"
                "  Y[0] = Q{0}\n",
                "t.lir:2:10: error: 'Q' is neither a declared tensor nor a uf");
    check_error("size N in 1..9\n"
                "tensor X: f32[i < N, j < 4]\n"
                "kernel K(X: f32*, Y: f32*)\n"
                "  Y[0] = X{0}\n",
                "t.lir:4:10: error: ill-typed access of 'X': tensor 'X' has 2 dimensions, indexed "
                "with 1");
    check_error("tensor X: f32[i < M]\n", "t.lir:1:19: error: undefined name 'M'");
    check_error("size N in 1..9\n"
                "tensor X: f32[i < N pad 0]\n",
                "t.lir:2:25: error: expected a padding multiple");
}

/* Declarations give what the text does not show: UF and AUX buffers
 * become UF and AUX parameters, sizes keep their ranges. */
static void test_declarations(void) {
    Module *m = rv_module_new();
    Kernel **ks;
    int n;
    const char *text = "size B in 1..100\n"
                       "uf len: i32[B] in 0..9\n"
                       "aux off: i64[B + 1]\n"
                       "buffer A: f32[off[B]]\n"
                       "kernel P(B: size, len: i32*, off: i64*, A: f32*)\n"
                       "  for b in 0..B:\n"
                       "    for l in 0..i64(len[b]):\n"
                       "      A[off[b] + l] = A[off[b] + l]*2.0\n";
    CHECK(round_trip(m, "t.lir", text, &ks, &n));
    CHECK_EQ_INT(n, 1);
    if (n == 1) {
        Kernel *k = ks[0];
        CHECK_EQ_INT(k->nparams, 4);
        CHECK(k->params[0].kind == PARAM_SIZE && k->params[0].size->lo == 1 &&
              k->params[0].size->hi == 100);
        CHECK(k->params[1].kind == PARAM_UF && k->params[1].buf->uf);
        CHECK(k->params[2].kind == PARAM_AUX && k->params[2].buf->scope == BUF_AUX);
        CHECK(k->params[3].kind == PARAM_TENSOR && k->params[3].buf->size);
        CHECK(lower_verify_kernel(k, "read") == RV_OK);
    }
    rv_module_free(m);
}

/* Every statement kind, loop kind and scope reads back to itself. */
static void test_every_statement(void) {
    Module *m = rv_module_new();
    Kernel **ks;
    int n;
    const char *text = "kernel K(N: size, X: f32*, Y: f32*)\n"
                       "  prelude:\n"
                       "    allocate P: i64[1] local\n"
                       "    P[0] = 0\n"
                       "  gpu_block_x for b in 0..N:\n"
                       "    gpu_thread_x for t in 0..32:\n"
                       "      allocate S: f32[32] global:\n"
                       "        S[t] = X[b*32 + t]\n"
                       "        barrier\n"
                       "      unroll for u in 0..2:\n"
                       "        let v = u + t:\n"
                       "          if v < 2 && !(N == 1) || false:\n"
                       "            fail 1\n"
                       "          else:\n"
                       "            Y[v] = 0.0\n"
                       "          if v > 4:\n"
                       "            nop\n"
                       "        Y[u] = -X[u]\n"
                       "      parallel for p in 0..N:\n"
                       "        vector for q in 0..8:\n"
                       "          let w = p*8 + q\n"
                       "          Y[w] = f32(w)\n"
                       "  call matmul(Y, X, X)\n"
                       "  fail 0\n";
    CHECK(round_trip(m, "t.lir", text, &ks, &n));
    if (n == 1) {
        CHECK_EQ_INT(ks[0]->nsites, 2);
        CHECK(ks[0]->prelude != NULL);
    }
    rv_module_free(m);
}

/* Expressions the IR's constructors build, printed, read and printed
 * again: every operator, with the parentheses precedence asks for, and
 * literals of every dtype. */
static void test_every_operator(void) {
    Module *m = rv_module_new();
    Size *N = rv_size_new(m, "N", 1, 100);
    Expr *n = ir_size(m, N);
    Buffer *F = ir_buffer_new(m, "F", RV_F32, n, BUF_ARG);
    Buffer *D = ir_buffer_new(m, "D", RV_F64, n, BUF_ARG);
    Buffer *I = ir_buffer_new(m, "I", RV_I32, n, BUF_ARG);
    Buffer *L = ir_buffer_new(m, "L", RV_I64, n, BUF_ARG);
    Axis *i = lower_loop_var(m, "i", n);
    Expr *x = i->var;
    Expr *f = ir_load(m, F, x), *d = ir_load(m, D, x), *k = ir_load(m, I, x);
    Vec(Stmt *) st = {0};
    for (int kind = 0; kind < EX_COUNT; kind++) {
        const ExprInfo *info = &ir_expr_info[kind];
        Expr *e = NULL;
        if (info->flags & F_MATH)
            e = info->arity == 1 ? ir_unary(m, (ExprKind)kind, f)
                                 : ir_binary(m, (ExprKind)kind, f, ir_float(m, RV_F32, 0.5));
        else if (info->flags & F_CMP)
            e = ir_select(m, ir_binary(m, (ExprKind)kind, ir_binary(m, EX_SUB, x, n), x),
                          ir_float(m, RV_F32, 1e-30), ir_float(m, RV_F32, -2.5e30));
        else if (info->flags & F_LOGIC)
            e = ir_select(m,
                          info->arity == 1
                              ? ir_unary(m, (ExprKind)kind, ir_binary(m, EX_LT, x, n))
                              : ir_binary(m, (ExprKind)kind, ir_binary(m, EX_LT, x, n),
                                          ir_binary(m, EX_EQ, k, ir_const_int(m, RV_I32, -3))),
                          f, ir_float(m, RV_F32, INFINITY));
        else if (info->flags & F_ARITH) {
            bool ints = kind == EX_MOD || kind == EX_FLOORDIV || kind == EX_FLOORMOD;
            Expr *a = ints ? k : d,
                 *b = ints ? ir_const_int(m, RV_I32, 7) : ir_float(m, RV_F64, -0.25);
            Expr *r = info->arity == 1 ? ir_unary(m, (ExprKind)kind, a)
                                       : ir_binary(m, (ExprKind)kind, ir_binary(m, EX_SUB, a, b),
                                                   ir_binary(m, EX_ADD, b, a));
            e = ir_cast(m, RV_F32, r);
        }
        if (e)
            vec_push(&st, lower_store(m, F, x, e));
    }
    vec_push(&st, lower_store(m, L, x,
                              ir_binary(m, EX_SUB, ir_int(m, INT64_MIN), ir_cast(m, RV_I64, k))));
    vec_push(&st, lower_store(m, D, x, ir_float(m, RV_F64, NAN)));
    Kernel k0 = {.name = "K",
                 .m = m,
                 .nparams = 5,
                 .params = (Param[]){{PARAM_SIZE, N, NULL},
                                     {PARAM_TENSOR, NULL, F},
                                     {PARAM_TENSOR, NULL, D},
                                     {PARAM_TENSOR, NULL, I},
                                     {PARAM_TENSOR, NULL, L}},
                 .body = lower_for(m, i, n, LOOP_SERIAL, lower_seq(m, st.len, st.data))};
    vec_free(&st);
    CHECK(lower_verify_kernel(&k0, "built") == RV_OK);
    Buf b = {0};
    lower_print_kernel(&b, &k0);
    Module *m2 = rv_module_new();
    Kernel **ks;
    int nk;
    CHECK(round_trip(m2, "built", buf_str(&b), &ks, &nk));
    rv_module_free(m2);
    buf_free(&b);
    rv_module_free(m);
}

/* Malformed text never crashes the reader: every prefix of a golden's
 * input, and the input with each character replaced by one of a few that
 * break it, reads or is a located syntax error. */
static void test_reader_never_crashes(void) {
    char *text = slurp("tests/lower/hoist_ragged_softmax.txt");
    CHECK(text != NULL);
    Golden g;
    if (!text || !split_golden("hoist_ragged_softmax.txt", text, &g)) {
        base_free(text);
        return;
    }
    size_t n = strlen(g.input);
    char *t = base_xmalloc(n + 1);
    int ok = 0, errors = 0, other = 0;
    for (size_t cut = 0; cut <= n; cut += 3) {
        static const char subst[] = {'\n', ' ', '(', ']', ':', '-', '9', 'q'};
        for (int v = -1; v < (int)sizeof subst; v++) {
            memcpy(t, g.input, n + 1);
            if (v < 0)
                t[cut] = '\0';
            else if (cut < n)
                t[cut] = subst[v];
            else
                continue;
            Module *m = rv_module_new();
            Kernel **ks;
            int nk;
            rv_status st = lower_read_kernels(m, "t.lir", t, &ks, &nk);
            if (st == RV_OK)
                ok++;
            else if (st == RV_ERR_SYNTAX && strncmp(rv_last_error(), "t.lir:", 6) == 0)
                errors++;
            else
                other++;
            rv_module_free(m);
        }
    }
    CHECK(ok > 0 && errors > 0);
    CHECK_EQ_INT(other, 0);
    base_free(t);
    base_free(g.pass);
    base_free(g.input);
    base_free(g.output);
    base_free(text);
}

/* A reduction the reduce pass has not initialised is loop IR until
 * flatten, an internal error after it (the verifier). */
static void test_reduce_verified(void) {
    Module *m = rv_module_new();
    Kernel **ks;
    int n;
    const char *text = "kernel K(N: size, X: f32*, Y: f32*)\n"
                       "  allocate acc0: f32[1] local\n"
                       "  reduce sum into acc0:\n"
                       "    for k in 0..N:\n"
                       "      acc0[0] = acc0[0] + X[k]\n"
                       "  Y[0] = acc0[0]\n";
    CHECK(round_trip(m, "t.lir", text, &ks, &n));
    if (n == 1) {
        CHECK(!ks[0]->flat); /* flatten runs after reduce */
        CHECK_EQ_INT(lower_verify_kernel(ks[0], "lower"), RV_OK);
        ks[0]->flat = true;
        CHECK_EQ_INT(lower_verify_kernel(ks[0], "flatten"), RV_ERR_UNSUPPORTED);
        CHECK_STR_CONTAINS(rv_last_error(), "a reduction into 'acc0' is left uninitialised");
        ks[0]->flat = false;
        CHECK_EQ_INT(lower_run_pass(ks[0], "reduce"), RV_OK);
        ks[0]->flat = true;
        CHECK_EQ_INT(lower_verify_kernel(ks[0], "reduce"), RV_OK);
    }
    rv_module_free(m);
}

/* The partition pass's copies of an access or division stand for what
 * the original does (Kernel.check_src), as nest.c's lowering of each
 * tile gave them: in the last tile of rows, the division is checked and
 * the read of a stage that pads its loop over j reaches the padding of X
 * (stored padded to 4), as in the full tiles. */
static void test_partition_keeps_check_sources(void) {
    Module *m = rv_module_new();
    Kernel **ks;
    int n;
    const char *text = "size M in 1..100\n"
                       "size N in 1..100\n"
                       "tensor X: i32[i < M, j < N pad 4]\n"
                       "tensor D: i32[i < M]\n"
                       "kernel Y(M: size, N: size, X: i32*, D: i32*, Y: i32*)\n"
                       "  partition for io in 0..(M + 1)/2:\n"
                       "    for ii in 0..2:\n"
                       "      for j in 0..(N + 3)/4*4:\n"
                       "        if io*2 + ii < M:\n"
                       "          Y[(io*2 + ii)*((N + 3)/4*4) + j] = X{io*2 + ii, j}/D{io*2 + ii}\n";
    CHECK(round_trip(m, "t.lir", text, &ks, &n));
    CHECK_EQ_INT(n, 1);
    if (n == 1) {
        Kernel *k = ks[0];
        for (int i = 0; i < k->ncheck_src; i++) /* X's read is of a padded loop's stage */
            k->check_src[i].loop_pad = k->check_src[i].node->kind == EX_READ &&
                                       strcmp(k->check_src[i].node->u.tensor->name, "X") == 0;
        CHECK(lower_run_pass(k, "partition") == RV_OK);
        CHECK(lower_run_pass(k, "checks") == RV_OK);
        Buf b = {0};
        lower_print_kernel(&b, k);
        const char *want =
            "kernel Y(M: size, N: size, X: i32*, D: i32*, Y: i32*)\n"
            "  for io in 0..M/2:\n"
            "    for ii in 0..2:\n"
            "      for j in 0..(N + 3)/4*4:\n"
            "        if !(D[io*2 + ii] != 0 && (D[io*2 + ii] != -1 || X[j + (N + 3)/4*io*8"
            " + (N + 3)/4*ii*4] != -2147483648)):\n"
            "          fail 0\n"
            "        Y[(io*2 + ii)*((N + 3)/4*4) + j] = X{io*2 + ii, j}/select(D[io*2 +"
            " ii] != 0 && (D[io*2 + ii] != -1 || X[j + (N + 3)/4*io*8 + (N + 3)/4*ii*4] !="
            " -2147483648), D{io*2 + ii}, 1)\n"
            "  if 0 < M%2:\n"
            "    for ii in 0..M - M/2*2:\n"
            "      for j in 0..(N + 3)/4*4:\n"
            "        if !(M/2*2 < M):\n"
            "          fail 1\n"
            "        if !(M/2*2 < M):\n"
            "          fail 2\n"
            "        if !(D[select(M/2*2 < M, M/2*2, 0)] != 0 && (D[select(M/2*2 < M,"
            " M/2*2, 0)] != -1 || X[select(M/2*2 < M, j + (N + 3)/4*(M/2)*8, 0)] !="
            " -2147483648)):\n"
            "          fail 3\n"
            "        Y[(M/2*2 + ii)*((N + 3)/4*4) + j] = X{select(M/2*2 < M, M/2*2 + ii,"
            " 0), select(M/2*2 < M, j, 0)}/select(D[select(M/2*2 < M, M/2*2, 0)] != 0 &&"
            " (D[select(M/2*2 < M, M/2*2, 0)] != -1 || X[select(M/2*2 < M, j + (N +"
            " 3)/4*(M/2)*8, 0)] != -2147483648), D{select(M/2*2 < M, M/2*2 + ii, 0)}, 1)\n";
        bool same = strcmp(buf_str(&b), want) == 0;
        CHECK(same && "both tiles' accesses and divisions checked as the original");
        if (!same)
            fprintf(stderr, "got\n%s\nexpected\n%s\n", buf_str(&b), want);
        buf_free(&b);
    }
    rv_module_free(m);
}

/* ---- the bounds pass (regions.c), on the schedule ---- */

/* tests/bounds/NAME.rv, a program with compute_at schedules, and
 * NAME.txt, the region table the bounds pass prints for it (written by
 * GOLDEN_UPDATE=1 when missing or different: review it). */
static void run_bounds_golden(const char *path) {
    char *text = slurp(path);
    if (!text) {
        CHECK(!"reads the program");
        return;
    }
    rv_module *m = NULL;
    Schedule *s = NULL;
    RegionTable t = {0};
    Buf got = {0}, want_path = {0};
    buf_printf(&want_path, "%.*s.txt", (int)(strlen(path) - 3), path);
    bool ok = rv_module_parse(path, text, &m) == RV_OK && sched_from_module(m, &s) == RV_OK &&
              lower_infer_bounds(s, &t) == RV_OK;
    if (!ok)
        fprintf(stderr, "%s: %s\n", path, rv_last_error());
    CHECK(ok && "the bounds pass runs");
    if (ok) {
        lower_print_regions(&got, &t);
        char *want = NULL;
        size_t len;
        if (base_read_file(buf_str(&want_path), &want, &len) != RV_OK)
            want = NULL;
        bool same = want && strcmp(want, buf_str(&got)) == 0;
        if (!same && getenv("GOLDEN_UPDATE")) {
            FILE *f = fopen(buf_str(&want_path), "w");
            same = f && fputs(buf_str(&got), f) >= 0;
            same = f && fclose(f) == 0 && same;
            fprintf(stderr, "%s: region table updated\n", buf_str(&want_path));
        }
        CHECK(same && "the region table is the golden one");
        if (!same)
            fprintf(stderr, "%s: the bounds pass gave\n%s\nexpected\n%s\n", path, buf_str(&got),
                    want ? want : "(no file)");
        base_free(want);
    }
    lower_regions_free(&t);
    if (s)
        sched_free(s);
    if (m)
        rv_module_free(m);
    buf_free(&got);
    buf_free(&want_path);
    base_free(text);
}

static void test_bounds_goldens(void) {
    char **files = list_dir("tests/bounds", ".rv");
    CHECK(files && files[0]);
    for (char **p = files; p && *p; p++)
        run_bounds_golden(*p);
    free_list(files);
    CHECK(lower_has_pass("bounds"));
    /* a pass over the schedule, not over a kernel */
    Module *m = rv_module_new();
    Kernel k = {.name = "K", .m = m};
    CHECK(lower_run_pass(&k, "bounds") == RV_ERR_ARG);
    rv_module_free(m);
}

/* A recursion's batch loop with its GPU choice (gpu_batches) and the grid
 * barrier cuda.c puts between batches, printed, read and printed again. */
static void test_gpu_batches_round_trip(void) {
    Module *m = rv_module_new();
    Kernel **ks;
    int n;
    const char *text = "kernel K(N: size, Y: f32*)\n"
                       "  launch_batches for b in 0..N:\n"
                       "    gpu_block_x for i in 0..N:\n"
                       "      Y[i] = f32(b)\n"
                       "  persistent_batches for c in 0..N:\n"
                       "    Y[c] = 1.0\n"
                       "    barrier grid\n";
    CHECK(round_trip(m, "t.lir", text, &ks, &n));
    if (n == 1 && ks[0]->body->kind == ST_SEQ && ks[0]->body->u.seq.n == 2) {
        const Stmt *a = ks[0]->body->u.seq.stmts[0], *b = ks[0]->body->u.seq.stmts[1];
        CHECK_EQ_INT(a->u.loop.gpu_batches, SCHED_GPU_LAUNCH);
        CHECK_EQ_INT(b->u.loop.gpu_batches, SCHED_GPU_PERSISTENT);
        const Stmt *bar = b->u.loop.body->u.seq.stmts[1];
        CHECK(bar->kind == ST_BARRIER && bar->u.barrier.grid);
    } else {
        CHECK(!"two loops");
    }
    rv_module_free(m);
}

/* split(i, 8, tail="merge") with a stage computed in the block: the full
 * blocks' copy runs N/8 - 1 blocks of 8 over a region of 8 + 2, the last
 * block's runs the rest (up to 15 rows) over a region of up to 17. */
static void test_merge_tail_lowering(void) {
    rv_module *m = parse_ok("size N in 1..1000\ninput X : f32[N + 2]\n"
                            "P[i < N + 2] = X[i] * 2.0\nY[i < N] = P[i] + P[i + 2]\n"
                            "schedule Y {\n    io, ii = split(i, 8, tail=\"merge\")\n"
                            "    compute_at(P, io)\n}\n");
    if (!m)
        return;
    char *c = NULL;
    CHECK(rv_program_emit(m, &c) == RV_OK);
    if (c) {
        CHECK_STR_CONTAINS(c, "for (int64_t io = 0; io < N / 8 - 1; io++) {");
        CHECK_STR_CONTAINS(c, "float P[10]");
        /* 17 rows at most, laid out at whole vectors (a local of varying
         * extent is laid out at its bound rounded up, lower/attach.c) */
        CHECK_STR_CONTAINS(c, "float P_1[32]");
        CHECK_STR_CONTAINS(c, "rv_max_i64(0, N / 8 - 1) * 8");
        CHECK(strstr(c, "% 8") == NULL); /* (no test of a partial tile) */
    }
    rv_free(c);
    rv_module_free(m);
}

int main(int argc, char **argv) {
    if (argc > 1) {
        for (int i = 1; i < argc; i++)
            round_trip_file(argv[i]);
        return harness_report();
    }
    RUN(test_reader_errors);
    RUN(test_declarations);
    RUN(test_every_statement);
    RUN(test_every_operator);
    RUN(test_reader_never_crashes);
    RUN(test_round_trip_pipeline_goldens);
    RUN(test_pass_goldens);
    RUN(test_every_pass_has_a_golden);
    RUN(test_reduce_verified);
    RUN(test_partition_keeps_check_sources);
    RUN(test_bounds_goldens);
    RUN(test_gpu_batches_round_trip);
    RUN(test_merge_tail_lowering);
    return harness_report();
}
