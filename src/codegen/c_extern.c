/*
 * c_extern.c — the C support library behind extern calls.
 *
 * An extern operation (src/ir/extern.c) lowers to a CALL statement over
 * whole buffers. The C back end implements each registered kernel as a
 * plain static function in the generated translation unit, one per dtype
 * used, so generated objects stay self-contained (no ravel or BLAS symbols
 * to resolve). They are the straightforward loops, written for clarity and
 * a decent memory order (i-k-j for matmul_nn); a tuned library can replace
 * them later behind the same names.
 *
 * Arguments are dense 2-D row-major buffers with a row stride (`ld*`, in
 * elements), which storage padding of the last dimension may make larger
 * than the number of columns:
 *
 *   rv_matmul_nt_T(M, N, K, out, ldo, A, lda, B, ldb)  out[M,N] = A[M,K] B[N,K]^T
 *   rv_matmul_nn_T(M, N, K, out, ldo, A, lda, B, ldb)  out[M,N] = A[M,K] B[K,N]
 *   rv_softmax_rows_T(M, N, out, ldo, X, ldx)          softmax over each row
 *
 * Integer matmuls accumulate in int64_t; softmax subtracts the row maximum
 * first, like the interpreter's reference (src/interp/extern_ref.c).
 */
#include <string.h>

#include "codegen/codegen.h"

// clang-format off
static const char *const matmul_nt =
    "/* out[M,N] = A[M,K] * B[N,K]^T (extern matmul_nt). */\n"
    "static void rv_matmul_nt_$S(int64_t M, int64_t N, int64_t K, $T *restrict out, int64_t ldo,\n"
    "                            const $T *restrict A, int64_t lda, const $T *restrict B,\n"
    "                            int64_t ldb) {\n"
    "    for (int64_t i = 0; i < M; i++) {\n"
    "        for (int64_t j = 0; j < N; j++) {\n"
    "            $A acc = 0;\n"
    "            for (int64_t k = 0; k < K; k++)\n"
    "                acc += ($A)A[i * lda + k] * B[j * ldb + k];\n"
    "            out[i * ldo + j] = ($T)acc;\n"
    "        }\n"
    "    }\n"
    "}\n";

static const char *const matmul_nn =
    "/* out[M,N] = A[M,K] * B[K,N] (extern matmul_nn), in i-k-j order. */\n"
    "static void rv_matmul_nn_$S(int64_t M, int64_t N, int64_t K, $T *restrict out, int64_t ldo,\n"
    "                            const $T *restrict A, int64_t lda, const $T *restrict B,\n"
    "                            int64_t ldb) {\n"
    "    for (int64_t i = 0; i < M; i++) {\n"
    "        for (int64_t j = 0; j < N; j++)\n"
    "            out[i * ldo + j] = 0;\n"
    "        for (int64_t k = 0; k < K; k++) {\n"
    "            $T a = A[i * lda + k];\n"
    "            for (int64_t j = 0; j < N; j++)\n"
    "                out[i * ldo + j] += a * B[k * ldb + j];\n"
    "        }\n"
    "    }\n"
    "}\n";

static const char *const softmax_rows =
    "/* out[i,:] = exp(X[i,:] - max) / sum (extern softmax_rows). */\n"
    "static void rv_softmax_rows_$S(int64_t M, int64_t N, $T *restrict out, int64_t ldo,\n"
    "                               const $T *restrict X, int64_t ldx) {\n"
    "    for (int64_t i = 0; i < M; i++) {\n"
    "        $T max = -HUGE_VAL;\n"
    "        for (int64_t j = 0; j < N; j++)\n"
    "            max = X[i * ldx + j] > max ? X[i * ldx + j] : max;\n"
    "        $T sum = 0;\n"
    "        for (int64_t j = 0; j < N; j++) {\n"
    "            out[i * ldo + j] = exp$F(X[i * ldx + j] - max);\n"
    "            sum += out[i * ldo + j];\n"
    "        }\n"
    "        for (int64_t j = 0; j < N; j++)\n"
    "            out[i * ldo + j] /= sum;\n"
    "    }\n"
    "}\n";
// clang-format on

static const char *template_of(const char *kernel, rv_dtype t) {
    if (strcmp(kernel, "matmul_nt") == 0 && t != RV_BOOL)
        return matmul_nt;
    if (strcmp(kernel, "matmul_nn") == 0 && t != RV_BOOL)
        return matmul_nn;
    if (strcmp(kernel, "softmax_rows") == 0 && ir_is_float(t))
        return softmax_rows;
    return NULL;
}

bool cg_extern_fn(const char *kernel, rv_dtype t, char name[64]) {
    if (!template_of(kernel, t))
        return false;
    snprintf(name, 64, "rv_%s_%s", kernel, rv_dtype_name(t));
    return true;
}

void cg_extern_define(Buf *b, const char *kernel, rv_dtype t) {
    const char *tmpl = template_of(kernel, t);
    RV_ASSERT(tmpl);
    cg_put_template(b, tmpl, &(CgTemplate){.t = t, .target = CG_TARGET_C});
}
