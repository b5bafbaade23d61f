/*
 * extern_ref.c — reference implementations of the extern kernels.
 *
 * The IR registry (src/ir/extern.c) knows each kernel's name and checks a
 * call's shapes symbolically; here is what each kernel computes, written as
 * the plainest loops, in double precision for floats (exact, checked int64
 * for integer matmuls), with the result rounded to the output's dtype when
 * stored. The concrete shapes come from the operation's input and output
 * layouts and are checked again, since symbolic agreement says nothing
 * about arrays the layouts were evaluated from. Only dense arguments are
 * supported.
 *
 *   matmul_nt(A:[M,K], B:[N,K]) -> [M,N]   out[m,n] = sum_k A[m,k] B[n,k]
 *   matmul_nn(A:[M,K], B:[K,N]) -> [M,N]   out[m,n] = sum_k A[m,k] B[k,n]
 *   softmax_rows(X:[M,N]) -> [M,N]         out[m,:] = exp(X[m,:] - max) / sum
 */
#include <math.h>
#include <string.h>

#include "interp/interp.h"

/* One dense argument or the result. */
typedef struct Arg {
    const char *name;
    rv_dtype dtype;
    const void *data;
    int64_t rows, cols;
} Arg;

static double get_f(const Arg *a, int64_t r, int64_t c) {
    int64_t i = r * a->cols + c;
    switch (a->dtype) {
    case RV_F32:
        return ((const float *)a->data)[i];
    case RV_F64:
        return ((const double *)a->data)[i];
    case RV_I32:
        return ((const int32_t *)a->data)[i];
    default:
        return (double)((const int64_t *)a->data)[i];
    }
}

static int64_t get_i(const Arg *a, int64_t r, int64_t c) {
    int64_t i = r * a->cols + c;
    return a->dtype == RV_I32 ? ((const int32_t *)a->data)[i] : ((const int64_t *)a->data)[i];
}

static void put_f(rv_array *out, int64_t i, double v) {
    if (rv_array_dtype(out) == RV_F32)
        ((float *)rv_array_data(out))[i] = (float)v;
    else
        ((double *)rv_array_data(out))[i] = v;
}

typedef struct Call {
    Interp *in;
    const Tensor *t;
    int nin;
    Arg args[4];
    Arg out;
    rv_array *arr;
} Call;

static rv_status call_error(const Call *c, rv_status st, const char *fmt, ...) RV_PRINTF(3, 4);
static rv_status call_error(const Call *c, rv_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    interp_verror(st, c->t, NULL, c->t->op->kernel, fmt, ap);
    va_end(ap);
    return st;
}

/* Out-of-range integer results are errors, as everywhere in the oracle. */
static rv_status put_i(const Call *c, int64_t i, int64_t v) {
    if (rv_array_dtype(c->arr) == RV_I32) {
        if (v < INT32_MIN || v > INT32_MAX)
            return call_error(c, RV_ERR_BOUNDS, "value %lld does not fit in i32", (long long)v);
        ((int32_t *)rv_array_data(c->arr))[i] = (int32_t)v;
    } else {
        ((int64_t *)rv_array_data(c->arr))[i] = v;
    }
    return RV_OK;
}

/* Shared by both matmuls: B is indexed [n, k] (nt) or [k, n] (nn). */
static rv_status matmul(Call *c, bool nt) {
    const Arg *a = &c->args[0], *b = &c->args[1];
    int64_t M = a->rows, K = a->cols;
    int64_t N = nt ? b->rows : b->cols, Kb = nt ? b->cols : b->rows;
    if (Kb != K || c->out.rows != M || c->out.cols != N)
        return call_error(c, RV_ERR_SHAPE,
                          "%s is [%lld, %lld], %s is [%lld, %lld], result is "
                          "[%lld, %lld]: the shapes do not agree",
                          a->name, (long long)a->rows, (long long)a->cols, b->name,
                          (long long)b->rows, (long long)b->cols, (long long)c->out.rows,
                          (long long)c->out.cols);
    bool fl = ir_is_float(c->out.dtype);
    for (int64_t m = 0; m < M; m++) {
        for (int64_t n = 0; n < N; n++) {
            if (fl) {
                double acc = 0;
                for (int64_t k = 0; k < K; k++)
                    acc += get_f(a, m, k) * (nt ? get_f(b, n, k) : get_f(b, k, n));
                put_f(c->arr, m * N + n, acc);
                continue;
            }
            int64_t acc = 0, p;
            for (int64_t k = 0; k < K; k++)
                if (ir_int_arith(EX_MUL, get_i(a, m, k), nt ? get_i(b, n, k) : get_i(b, k, n),
                                 &p) != IA_OK ||
                    ir_int_arith(EX_ADD, acc, p, &acc) != IA_OK)
                    return call_error(c, RV_ERR_BOUNDS, "integer overflow at [%lld, %lld]",
                                      (long long)m, (long long)n);
            rv_status st = put_i(c, m * N + n, acc);
            if (st != RV_OK)
                return st;
        }
    }
    return RV_OK;
}

static rv_status ref_matmul_nt(Call *c) {
    return matmul(c, true);
}

static rv_status ref_matmul_nn(Call *c) {
    return matmul(c, false);
}

static rv_status ref_softmax_rows(Call *c) {
    const Arg *x = &c->args[0];
    if (x->rows != c->out.rows || x->cols != c->out.cols)
        return call_error(c, RV_ERR_SHAPE, "%s is [%lld, %lld], result is [%lld, %lld]", x->name,
                          (long long)x->rows, (long long)x->cols, (long long)c->out.rows,
                          (long long)c->out.cols);
    if (!ir_is_float(c->out.dtype))
        return call_error(c, RV_ERR_UNSUPPORTED, "needs a floating-point result");
    for (int64_t m = 0; m < x->rows; m++) {
        double mx = -INFINITY, sum = 0;
        for (int64_t n = 0; n < x->cols; n++)
            mx = fmax(mx, get_f(x, m, n));
        for (int64_t n = 0; n < x->cols; n++)
            sum += exp(get_f(x, m, n) - mx);
        for (int64_t n = 0; n < x->cols; n++)
            put_f(c->arr, m * x->cols + n, exp(get_f(x, m, n) - mx) / sum);
    }
    return RV_OK;
}

typedef struct RefKernel {
    const char *name;
    int nin;
    rv_status (*run)(Call *c);
} RefKernel;

static const RefKernel refs[] = {
    {"matmul_nt", 2, ref_matmul_nt},
    {"matmul_nn", 2, ref_matmul_nn},
    {"softmax_rows", 1, ref_softmax_rows},
};

/* Describes a dense 2-D tensor value as an Arg. */
static rv_status make_arg(Call *c, const Tensor *t, const TensorVal *tv, Arg *a) {
    if (tv->lay->ragged || t->ndim != 2)
        return call_error(c, RV_ERR_UNSUPPORTED, "%s must be a dense 2-D tensor", t->name);
    *a = (Arg){t->name, t->dtype, tv->data, tv->lay->shape[0], tv->lay->shape[1]};
    return RV_OK;
}

rv_status interp_eval_extern(Interp *in, const Tensor *t, rv_array *out) {
    const Op *op = t->op;
    Call c = {.in = in, .t = t, .nin = op->nin, .arr = out};
    const RefKernel *k = NULL;
    for (int i = 0; i < RV_COUNT(refs); i++)
        if (strcmp(refs[i].name, op->kernel) == 0)
            k = &refs[i];
    if (!k)
        return call_error(&c, RV_ERR_UNSUPPORTED, "no reference implementation");
    if (op->nin != k->nin)
        return call_error(&c, RV_ERR_TYPE, "takes %d arguments, given %d", k->nin, op->nin);
    rv_status st;
    for (int i = 0; i < op->nin; i++) {
        const Tensor *src = op->inputs[i];
        if (!in->tv[src->id].data)
            return call_error(&c, RV_ERR_TYPE, "%s has no value before it", src->name);
        if ((st = make_arg(&c, src, &in->tv[src->id], &c.args[i])) != RV_OK)
            return st;
    }
    TensorVal self = {out, rv_array_cdata(out), t->dtype, in->tv[t->id].lay};
    if ((st = make_arg(&c, t, &self, &c.out)) != RV_OK)
        return st;
    return k->run(&c);
}
