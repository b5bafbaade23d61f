/*
 * cmd_compile.c — the subcommands that compile a program: emit (print the
 * generated C, with --target cuda the kernels' CUDA C, with --target lower
 * the loop IR after the pipeline) and
 * run (compile, run, and with --check compare every output with the
 * reference interpreter on the same inputs).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "codegen/codegen.h"
#include "lower/lower.h"
#include "tools.h"

static rv_program *compile(rv_module *m, rv_target target, int threads) {
    rv_program *p;
    rv_compile_options o = {.target = target, .threads = threads < 0 ? 0 : threads};
    if (rv_program_compile(m, &o, &p) != RV_OK) {
        tool_print_error(NULL);
        return NULL;
    }
    return p;
}

/* `ravel emit FILE --target lower`: the kernels after the lowering
 * pipeline, as loop-IR text (golden tests compare it); `--target cuda`:
 * each kernel's CUDA C unit, as the CUDA target compiles it (no GPU
 * needed). */
static int emit_lower(rv_module *m, bool cuda) {
    Kernel **ks = NULL;
    int n = 0;
    rv_status st = ir_verify(m);
    if (st == RV_OK)
        st = lower_pipeline(m, &ks, &n);
    if (st != RV_OK) {
        tool_print_error(NULL);
        return 1;
    }
    Buf b = {0};
    for (int i = 0; i < n && st == RV_OK; i++) {
        if (i)
            buf_putc(&b, '\n');
        char *src = NULL;
        if (!cuda)
            lower_print_kernel(&b, ks[i]);
        else if ((st = cg_cuda_kernel(ks[i], &src, NULL, NULL)) == RV_OK)
            buf_puts(&b, src);
        base_free(src);
    }
    if (st != RV_OK) {
        tool_print_error(NULL);
        buf_free(&b);
        base_free(ks);
        return 1;
    }
    fputs(buf_str(&b), stdout);
    buf_free(&b);
    base_free(ks);
    return 0;
}

int cmd_emit(int argc, char **argv) {
    const char *target = "c", *file = NULL;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--target") == 0 && i + 1 < argc) {
            target = argv[++i];
        } else if (argv[i][0] != '-' && !file) {
            file = argv[i];
        } else {
            tool_command_help(stderr, "emit");
            return 2;
        }
    }
    if (!file) {
        tool_command_help(stderr, "emit");
        return 2;
    }
    if (strcmp(target, "c") != 0 && strcmp(target, "lower") != 0 && strcmp(target, "cuda") != 0) {
        fprintf(stderr, "ravel emit: unknown target '%s' (c, cuda or lower)\n", target);
        return 2;
    }
    rv_module *m;
    if (rv_module_load(file, &m) != RV_OK) {
        tool_print_error(NULL);
        return 1;
    }
    if (strcmp(target, "lower") == 0 || strcmp(target, "cuda") == 0) {
        int r = emit_lower(m, strcmp(target, "cuda") == 0);
        rv_module_free(m);
        return r;
    }
    /* code generation only: printing the C needs no compiler run */
    char *source = NULL;
    if (rv_program_emit(m, &source) != RV_OK)
        tool_print_error(NULL);
    else
        fputs(source, stdout);
    int ok = source != NULL;
    rv_free(source);
    rv_module_free(m);
    return ok ? 0 : 1;
}

/* Binds `from`'s array `n` (an input or a UF) in `to`; 0 with a message
 * when the user gave it no value. */
static int copy_array(const rv_bindings *from, rv_bindings *to, const char *what, const char *n) {
    const rv_array *a = rv_bindings_get_array(from, n);
    if (!a) {
        fprintf(stderr, "error: %s '%s' has no value: give --input %s=FILE.npy or --random SEED\n",
                what, n, n);
        return 0;
    }
    if (rv_bindings_set_array(to, n, a) != RV_OK) {
        tool_print_error(NULL);
        return 0;
    }
    return 1;
}

/* Copies the sizes and every input / UF array of `from` into `to`. */
static int copy_inputs(rv_module *m, const rv_bindings *from, rv_bindings *to) {
    for (int i = 0; i < rv_module_num_sizes(m); i++) {
        const char *n = rv_size_name(rv_module_size_at(m, i));
        if (rv_bindings_get_size(from, n) < 0) {
            fprintf(stderr, "error: size '%s' has no value: give --size %s=V or --random SEED\n", n,
                    n);
            return 0;
        }
        if (rv_bindings_set_size(to, n, rv_bindings_get_size(from, n)) != RV_OK) {
            tool_print_error(NULL);
            return 0;
        }
    }
    for (int i = 0; i < rv_module_num_ufuns(m); i++)
        if (!copy_array(from, to, "ufun", rv_ufun_name(rv_module_ufun_at(m, i))))
            return 0;
    for (int i = 0; i < rv_module_num_tensors(m); i++) {
        rv_tensor *t = rv_module_tensor_at(m, i);
        if (rv_tensor_is_input(t) && !copy_array(from, to, "input", rv_tensor_name(t)))
            return 0;
    }
    return 1;
}

/* Is e computed with an f32 operation somewhere (an f32 node other than a
 * read, or a read of a tensor computed so)? An input's f32 values are
 * exact in both; an f32 operation rounds in compiled code, not in the
 * interpreter. seen[] memoizes per tensor id: 0 not yet, 1 no, 2 yes. */
static bool f32_computed(const Expr *e, char *seen);

static bool tensor_f32_computed(const Tensor *t, char *seen) {
    if (seen[t->id])
        return seen[t->id] == 2;
    seen[t->id] = 1; /* no cycles in a module; this only ends the walk */
    const Op *op = t->op;
    bool r = false;
    if (op) {
        r = (op->body && f32_computed(op->body, seen)) ||
            (op->else_body && f32_computed(op->else_body, seen)) ||
            (op->pred && f32_computed(op->pred, seen));
        for (int i = 0; i < op->nin && !r; i++) /* an extern kernel's arithmetic */
            r = op->inputs[i]->dtype == RV_F32 || tensor_f32_computed(op->inputs[i], seen);
    }
    seen[t->id] = r ? 2 : 1;
    return r;
}

static bool f32_computed(const Expr *e, char *seen) {
    if (e->kind == EX_READ)
        return tensor_f32_computed(e->u.tensor, seen);
    if (e->dtype == RV_F32)
        return true;
    for (int i = 0; i < e->n; i++)
        if (f32_computed(e->args[i], seen))
            return true;
    return false;
}

/* The tolerance of an output (docs/ir.md, "Evaluation semantics"): that of
 * the lowest float precision it was computed in, f32 1e-4 relative to the
 * magnitude, f64 1e-10; integers exact. An f64 result of f32 operations
 * (`Y : f64 = exp(Xf[i])`) carries f32 rounding: compiled code computes
 * exp in f32, the interpreter in double. */
static double tolerance(const Tensor *t) {
    if (!ir_is_float(t->dtype))
        return 0.0;
    if (t->dtype == RV_F32)
        return 1e-4;
    char *seen = base_xcalloc((size_t)rv_module_num_tensors(t->module), 1);
    bool f32 = tensor_f32_computed(t, seen);
    base_free(seen);
    return f32 ? 1e-4 : 1e-10;
}

/* Does e mention an axis (an extent that varies: a ragged layout)? */
static bool mentions_axis(const Expr *e) {
    if (e->kind == EX_VAR)
        return true;
    for (int i = 0; i < e->n; i++)
        if (mentions_axis(e->args[i]))
            return true;
    return false;
}

static bool dense(const Tensor *t) {
    for (int d = 0; d < t->ndim; d++)
        if (mentions_axis(t->axes[d]->extent))
            return false;
    return true;
}

/* For `T[i, ...] = argmax(k < E) R[i, ..., k]` with dense T and R: R, whose
 * row o holds the values T[o] chose among; else NULL. */
static const Tensor *argmax_of_rows(const Tensor *t) {
    const Expr *r = t->op && t->op->kind == OP_COMPUTE ? t->op->body : NULL;
    if (!r || r->kind != EX_REDUCE || r->u.red.rk != RV_REDUCE_ARGMAX || r->u.red.naxes != 1)
        return NULL;
    const Expr *rd = r->args[0];
    if (rd->kind != EX_READ || rd->n != t->ndim + 1 || !dense(t) || !dense(rd->u.tensor) ||
        !ir_is_float(rd->u.tensor->dtype))
        return NULL;
    for (int d = 0; d < t->ndim; d++)
        if (rd->args[d] != t->axes[d]->var)
            return NULL;
    return rd->args[t->ndim] == r->u.red.axes[0]->var ? rd->u.tensor : NULL;
}

/* An argmax that differs from the interpreter's where the two chosen values
 * tie within R's tolerance (docs/ir.md) is no error: both are a maximum of
 * the row up to rounding. Counts the mismatches that are not such ties and
 * reports the ties. */
static int compare_argmax(const char *name, const rv_array *got, const rv_array *want,
                          const Tensor *R, const rv_array *rows) {
    int64_t n = rv_array_numel(want);
    if (!got || rv_array_numel(got) != n || !rows || n == 0 || rv_array_numel(rows) % n != 0) {
        printf("%s: MISMATCH: element count differs\n", name);
        return 0;
    }
    int64_t len = rv_array_numel(rows) / n, ties = 0, bad = -1;
    double tol = tolerance(R);
    for (int64_t o = 0; o < n && bad < 0; o++) {
        int64_t a = (int64_t)rv_array_get_f64(got, o), b = (int64_t)rv_array_get_f64(want, o);
        if (a == b)
            continue;
        double va = a >= 0 && a < len ? rv_array_get_f64(rows, o * len + a) : NAN;
        double vb = b >= 0 && b < len ? rv_array_get_f64(rows, o * len + b) : NAN;
        if (!isnan(va) && !isnan(vb) && fabs(va - vb) <= tol * (1.0 + fabs(vb)))
            ties++;
        else
            bad = o;
    }
    if (bad >= 0) {
        printf("%s: %lld elements: MISMATCH\n  first mismatch at flat index %lld: compiled %lld, "
               "interpreter %lld\n",
               name, (long long)n, (long long)bad, (long long)rv_array_get_f64(got, bad),
               (long long)rv_array_get_f64(want, bad));
        return 0;
    }
    printf("%s: %lld elements, %lld argmax ties within tolerance: ok\n", name, (long long)n,
           (long long)ties);
    return 1;
}

/* Max abs and rel error of `got` against `want`; returns 1 when within
 * tol relative to the magnitude (0: exact). */
static int compare(const char *name, const rv_array *got, const rv_array *want, double tol) {
    int64_t n = rv_array_numel(want);
    if (!got || rv_array_numel(got) != n) {
        printf("%s: MISMATCH: element count differs\n", name);
        return 0;
    }
    double max_abs = 0, max_rel = 0;
    int64_t bad = -1;
    for (int64_t i = 0; i < n; i++) {
        double a = rv_array_get_f64(got, i), b = rv_array_get_f64(want, i);
        double d = fabs(a - b);
        if (isnan(a) != isnan(b))
            d = INFINITY;
        else if (isnan(a) || a == b)
            d = 0;
        double r = d / (fabs(b) > 1e-30 ? fabs(b) : 1e-30);
        if (d > max_abs)
            max_abs = d;
        if (r > max_rel && fabs(b) > 1e-6)
            max_rel = r;
        if (d > tol * (1.0 + fabs(b)) && bad < 0)
            bad = i;
    }
    printf("%s: %lld elements, max abs error %.3g, max rel error %.3g: %s\n", name, (long long)n,
           max_abs, max_rel, bad < 0 ? "ok" : "MISMATCH");
    if (bad >= 0)
        printf("  first mismatch at flat index %lld: compiled %.9g, interpreter %.9g\n",
               (long long)bad, rv_array_get_f64(got, bad), rv_array_get_f64(want, bad));
    return bad < 0;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* --time / --repeat N: N more runs of the compiled program on the same
 * bindings (the first run, already done, is the warm-up: it touched the
 * pages and woke the pool), each timed alone around rv_program_run; prints
 * the median and the minimum (the median is the figure to quote, the
 * minimum the noise floor), with the compile time and the first run's apart
 * (first_ms: it also fills the packs of params the program keeps, which
 * the timed runs on the same bindings reuse; their count says so). */
static int time_runs(rv_program *p, rv_bindings *b, int repeat, int threads, double compile_ms,
                     double first_ms) {
    double *t = base_xcalloc((size_t)repeat, sizeof *t);
    int ok = 1;
    rv_program_counters c0, c1;
    rv_program_stats(p, &c0);
    for (int i = 0; i < repeat && ok; i++) {
        double t0 = now_ms();
        if (rv_program_run(p, b) != RV_OK) {
            tool_print_error(NULL);
            ok = 0;
        }
        t[i] = now_ms() - t0;
    }
    if (ok) {
        qsort(t, (size_t)repeat, sizeof *t, cmp_double);
        double median = repeat % 2 ? t[repeat / 2] : (t[repeat / 2 - 1] + t[repeat / 2]) / 2;
        char th[32];
        snprintf(th, sizeof th, threads > 0 ? "%d" : "default", threads);
        printf("time: compile %.3f ms; run median %.4f ms, min %.4f ms, max %.4f ms "
               "(%d runs after 1 warm-up, threads %s)\n",
               compile_ms, median, t[0], t[repeat - 1], repeat, th);
        /* the parts of a run: its kernels (on a GPU, each launch until the
         * device is done, without the copies to and from it) and preludes */
        rv_program_stats(p, &c1);
        printf("time: per run (mean) kernels %.4f ms, preludes %.4f ms\n",
               (c1.kernel_seconds - c0.kernel_seconds) * 1e3 / repeat,
               (c1.prelude_seconds - c0.prelude_seconds) * 1e3 / repeat);
        printf("time: first run %.4f ms (filled %lld packs of params); timed runs filled %lld\n",
               first_ms, (long long)c0.pack_fills, (long long)(c1.pack_fills - c0.pack_fills));
    }
    base_free(t);
    return ok;
}

int cmd_run(int argc, char **argv) {
    ToolArgs a;
    if (!tool_parse_args("run", argc, argv, &a))
        return 2;
    int check = a.check;
    rv_module *m;
    if (rv_module_load(a.file, &m) != RV_OK) {
        tool_print_error(NULL);
        return 1;
    }
    rv_bindings *ref = rv_bindings_new(m), *b = rv_bindings_new(m);
    rv_program *p = NULL;
    int ok = tool_bind(&a, m, ref) && copy_inputs(m, ref, b);
    double t0 = now_ms(), compile_ms = 0;
    if (ok && !(p = compile(m, a.target, a.threads)))
        ok = 0;
    compile_ms = now_ms() - t0;
    double first_ms = now_ms();
    if (ok && rv_program_run(p, b) != RV_OK) {
        tool_print_error(NULL);
        ok = 0;
    }
    first_ms = now_ms() - first_ms;
    if (ok && check && rv_interp_run(m, ref) != RV_OK) {
        tool_print_error("interpreter");
        ok = 0;
    }
    for (int i = 0; ok && i < rv_module_num_sizes(m); i++) {
        const char *n = rv_size_name(rv_module_size_at(m, i));
        printf("%s = %lld\n", n, (long long)rv_bindings_get_size(b, n));
    }
    int all_match = 1;
    for (int i = 0; ok && i < rv_module_num_tensors(m); i++) {
        rv_tensor *t = rv_module_tensor_at(m, i);
        if (!rv_tensor_is_output(m, t))
            continue;
        const char *n = rv_tensor_name(t);
        const Tensor *rows = check ? argmax_of_rows(t) : NULL;
        if (rows)
            all_match &= compare_argmax(n, rv_bindings_get_array(b, n), rv_bindings_get_array(ref, n),
                                        rows, rv_bindings_get_array(ref, rows->name));
        else if (check)
            all_match &= compare(n, rv_bindings_get_array(b, n), rv_bindings_get_array(ref, n),
                                 tolerance(t));
        else
            printf("%s: %lld elements\n", n,
                   (long long)rv_array_numel(rv_bindings_get_array(b, n)));
    }
    if (ok && a.output)
        ok = tool_write_results(&a, m, b);
    if (ok && a.time)
        ok = time_runs(p, b, a.repeat ? a.repeat : 10, a.threads, compile_ms, first_ms);
    rv_program_free(p);
    rv_bindings_free(b);
    rv_bindings_free(ref);
    rv_module_free(m);
    return ok && all_match ? 0 : 1;
}
