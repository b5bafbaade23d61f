/*
 * extern.c — the registry of extern kernels.
 *
 * An extern operation calls a named library kernel instead of a compute
 * definition (DESIGN.md: "extern (a call into a library kernel)"). The IR
 * knows each kernel's name and checks the shapes of a call; the
 * interpreter holds the reference semantics and code generation maps the
 * name to an implementation. Shapes are compared as expressions, which is
 * exact because expressions are hash-consed.
 */
#include <string.h>

#include "ir/ir.h"

static const char *check_2d(const Op *op, int nin) {
    if (op->nin != nin)
        return nin == 1 ? "takes 1 tensor argument" : "takes 2 tensor arguments";
    for (int i = 0; i < op->nin; i++)
        if (op->inputs[i]->ndim != 2)
            return "arguments must be 2-dimensional";
    if (op->out->ndim != 2)
        return "the output must be 2-dimensional";
    for (int i = 0; i < op->nin; i++)
        if (op->inputs[i]->dtype != op->out->dtype)
            return "arguments and output must have the same element type";
    return NULL;
}

static Expr *ext(const Tensor *t, int i) {
    return t->axes[i]->extent;
}

/* matmul_nt(A:[M,K], B:[N,K]) -> [M,N] */
static const char *check_matmul_nt(Op *op) {
    const char *msg = check_2d(op, 2);
    if (msg)
        return msg;
    const Tensor *a = op->inputs[0], *b = op->inputs[1], *o = op->out;
    if (ext(a, 1) != ext(b, 1))
        return "A:[M,K] and B:[N,K] disagree on K";
    if (ext(o, 0) != ext(a, 0) || ext(o, 1) != ext(b, 0))
        return "the output must be [M, N]";
    return NULL;
}

/* matmul_nn(A:[M,K], B:[K,N]) -> [M,N] */
static const char *check_matmul_nn(Op *op) {
    const char *msg = check_2d(op, 2);
    if (msg)
        return msg;
    const Tensor *a = op->inputs[0], *b = op->inputs[1], *o = op->out;
    if (ext(a, 1) != ext(b, 0))
        return "A:[M,K] and B:[K,N] disagree on K";
    if (ext(o, 0) != ext(a, 0) || ext(o, 1) != ext(b, 1))
        return "the output must be [M, N]";
    return NULL;
}

/* softmax_rows(X:[M,N]) -> [M,N], softmax over the last dimension */
static const char *check_softmax_rows(Op *op) {
    const char *msg = check_2d(op, 1);
    if (msg)
        return msg;
    if (!ir_is_float(op->out->dtype))
        return "needs a floating-point tensor";
    if (ext(op->out, 0) != ext(op->inputs[0], 0) || ext(op->out, 1) != ext(op->inputs[0], 1))
        return "the output must have the input's shape";
    return NULL;
}

// clang-format off
static const ExternKernel kernels[] = {
    {"matmul_nt",    "matmul_nt(A:[M,K], B:[N,K]) -> [M,N] = A * B^T", check_matmul_nt},
    {"matmul_nn",    "matmul_nn(A:[M,K], B:[K,N]) -> [M,N] = A * B",   check_matmul_nn},
    {"softmax_rows", "softmax_rows(X:[M,N]) -> [M,N], over the last dimension", check_softmax_rows},
};
// clang-format on

const ExternKernel *ir_extern_lookup(const char *name) {
    for (int i = 0; name && i < RV_COUNT(kernels); i++)
        if (strcmp(kernels[i].name, name) == 0)
            return &kernels[i];
    return NULL;
}

int ir_extern_count(void) {
    return RV_COUNT(kernels);
}

const ExternKernel *ir_extern_at(int i) {
    return i >= 0 && i < RV_COUNT(kernels) ? &kernels[i] : NULL;
}
