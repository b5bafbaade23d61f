/*
 * c_transpose.c — a copy that transposes a block, done in registers.
 *
 * The k-major copy of a matrix that is contiguous in k (W's panel in bmm
 * NT, X in a stream dense kernel) is, per lane, a read with a large stride:
 * a vector loop over j reading W[j, k] gathers 16 elements 64 floats
 * apart. On AVX-512 a gather costs about as much as 16 loads plus a blend
 * each, more than the FMAs the copy feeds at small sizes. The schedule
 * says more than one loop at a time, though: with k split, its inner part
 * unrolled and j vectorized,
 *
 *     for c in 0..C (unroll):        WL[d + D*c + r] = W[s + c + S*r]
 *       for r in 0..R (vector):
 *
 * is an R x C block of W (R rows of C consecutive elements) stored as its
 * transpose. When both R and C fit one native vector (16 lanes of 4 bytes,
 * 8 of 8), the nest becomes a call of rv_transpose_<t>x<N>, which loads R
 * rows as vectors, exchanges the off-diagonal halves of ever smaller
 * blocks with two-vector shuffles (log2 N rounds of N shuffles), and
 * stores C vectors: 4 shuffles per 16 elements instead of 16 lane loads.
 *
 * The nest may hold LETs between and inside the two loops; anything else
 * (a guard, a second statement, a conversion) keeps the loops, which the
 * vectorizer then emits as gathers.
 */
#include "codegen/codegen.h"
#include "lower/lower.h"

/* Adds the LETs at the top of s to `lets` (their values with the earlier
 * LETs substituted) and returns the statement they wrap. */
static const Stmt *skip_lets(Module *m, const Stmt *s, PtrMap *lets) {
    while (s && s->kind == ST_LET) {
        ptrmap_put(lets, s->u.let.var, ir_substitute(m, s->u.let.value, lets));
        s = s->u.let.body;
    }
    return s;
}

/* One side of the block: buffer, index at c = r = 0, and the index's
 * coefficients of c and r, simplified. */
typedef struct Side {
    const Buffer *buf;
    Expr *base, *dc, *dr;
} Side;

static bool side_of(Module *m, const Buffer *b, Expr *idx, const Axis *c, const Axis *r,
                    PtrMap *lets, Side *out) {
    idx = ir_substitute(m, idx, lets);
    Expr *dc = ir_linear_coeff(m, idx, c), *dr = ir_linear_coeff(m, idx, r);
    if (!dc || !dr)
        return false;
    PtrMap zero = {0};
    ptrmap_put(&zero, c, ir_int(m, 0));
    ptrmap_put(&zero, r, ir_int(m, 0));
    Expr *base = ir_substitute(m, idx, &zero);
    ptrmap_free(&zero);
    *out = (Side){b, ir_simplify_expr(m, base), ir_simplify_expr(m, dc),
                  ir_simplify_expr(m, dr)};
    return out->base && out->dc && out->dr;
}

static bool is_one(const Expr *x) {
    int64_t v;
    return ir_is_const_int(x, &v) && v == 1;
}

bool cg_transpose_loop(CgEmit *e, Module *m, const Stmt *s, int indent, Buf *out) {
    int64_t cols, rows;
    if (e->target != CG_TARGET_C || s->kind != ST_FOR || s->u.loop.kind != LOOP_UNROLL ||
        !ir_is_const_int(s->u.loop.extent, &cols))
        return false;
    PtrMap lets = {0};
    bool ok = false;
    const Stmt *v = skip_lets(m, s->u.loop.body, &lets);
    if (!v || v->kind != ST_FOR || v->u.loop.kind != LOOP_VECTOR ||
        !ir_is_const_int(v->u.loop.extent, &rows))
        goto done;
    const Stmt *st = skip_lets(m, v->u.loop.body, &lets);
    if (!st || st->kind != ST_STORE)
        goto done;
    const Expr *val = st->u.store.value;
    const Buffer *db = st->u.store.buf;
    if (val->kind != EX_LOAD || val->u.buf == db || val->dtype != db->dtype)
        goto done;
    rv_dtype t = db->dtype;
    int size = (int)rv_dtype_size(t), lanes = 64 / (size ? size : 1);
    if ((size != 4 && size != 8) || t == RV_BOOL || rows < 2 || rows > lanes || cols < 2 ||
        cols > lanes)
        goto done;
    const Axis *c = s->u.loop.var, *r = v->u.loop.var;
    Side dst, src;
    if (!side_of(m, db, st->u.store.index, c, r, &lets, &dst) ||
        !side_of(m, val->u.buf, val->args[0], c, r, &lets, &src))
        goto done;
    /* dst contiguous along r (the lanes), src along c: a transpose */
    if (!is_one(dst.dr) || !is_one(src.dc))
        goto done;
    const char *fn = cg_vector_use_transpose(e, t, lanes);
    const char *dn = cg_name(e, db, db->name), *sn = cg_name(e, src.buf, src.buf->name);
    Buf d = {0}, sr = {0};
    cg_expr(e, &d, dst.dc);
    cg_expr(e, &sr, src.dr);
    buf_indent(out, 4 * indent);
    buf_printf(out,
               "/* %s[... + %s * %s + %s] = %s[... + %s + %s * %s] for %s < %lld, %s < %lld: "
               "one block, transposed in registers */\n",
               dn, buf_str(&d), cg_name(e, c, c->name), cg_name(e, r, r->name), sn,
               cg_name(e, c, c->name), buf_str(&sr), cg_name(e, r, r->name), cg_name(e, c, c->name),
               (long long)cols, cg_name(e, r, r->name), (long long)rows);
    buf_indent(out, 4 * indent);
    buf_printf(out, "%s(&%s[", fn, dn);
    cg_expr(e, out, dst.base);
    buf_printf(out, "], %s, &%s[", buf_str(&d), sn);
    cg_expr(e, out, src.base);
    buf_printf(out, "], %s, %lld, %lld);\n", buf_str(&sr), (long long)rows, (long long)cols);
    buf_free(&d);
    buf_free(&sr);
    ok = true;
done:
    ptrmap_free(&lets);
    return ok;
}

/* The shuffle mask of one round: block size `bit`, `upper` for the row
 * with the bit set. Row r (bit clear) keeps its columns with the bit
 * clear and takes row r + bit's columns c - bit for the others; row
 * r + bit takes row r's columns c + bit for its columns with the bit
 * clear. */
static void put_mask(Buf *b, int lanes, int bit, bool upper) {
    for (int col = 0; col < lanes; col++) {
        int from;
        if (!upper)
            from = col & bit ? lanes + col - bit : col;
        else
            from = col & bit ? lanes + col : col + bit;
        buf_printf(b, "%s%d", col ? ", " : "", from);
    }
}

void cg_transpose_helper(Buf *b, rv_dtype t, int lanes) {
    const char *et = cg_ctype(t), *dn = rv_dtype_name(t);
    buf_printf(b,
               "/* dst[c * dst_stride + r] = src[r * src_stride + c] for r < rows and c < cols\n"
               " * (both at most %d): rows vectors loaded, then in each round the\n"
               " * off-diagonal quarters of blocks of %d, %d, ... exchanged between row\n"
               " * pairs by two-vector shuffles, and cols vectors stored. */\n",
               lanes, lanes, lanes / 2);
    buf_printf(b,
               "static inline __attribute__((always_inline)) void rv_transpose_%sx%d(\n"
               "    %s *dst, int64_t dst_stride, const %s *src, int64_t src_stride, int rows, "
               "int cols) {\n",
               dn, lanes, et, et);
    buf_printf(b, "    rv_%sx%d v[%d];\n", dn, lanes, lanes);
    buf_printf(b, "    for (int r = 0; r < %d; r++) {\n", lanes);
    buf_printf(b, "        v[r] = (rv_%sx%d){0};\n", dn, lanes);
    buf_puts(b, "        if (r < rows)\n");
    buf_printf(b,
               "            __builtin_memcpy(&v[r], src + r * src_stride, "
               "(size_t)cols * sizeof(%s));\n",
               et);
    buf_puts(b, "    }\n");
    for (int bit = lanes / 2; bit >= 1; bit /= 2) {
        buf_printf(b, "    /* blocks of %d */\n", 2 * bit);
        for (int row = 0; row < lanes; row++) {
            if (row & bit)
                continue;
            buf_printf(b, "    {\n        const rv_%sx%d a = v[%d], z = v[%d];\n", dn, lanes, row,
                       row + bit);
            for (int upper = 0; upper < 2; upper++) {
                buf_printf(b, "        v[%d] = __builtin_shufflevector(a, z, ", row + upper * bit);
                put_mask(b, lanes, bit, upper);
                buf_puts(b, ");\n");
            }
            buf_puts(b, "    }\n");
        }
    }
    buf_printf(b, "    for (int c = 0; c < cols; c++)\n");
    buf_printf(b,
               "        __builtin_memcpy(dst + c * dst_stride, &v[c], (size_t)rows * "
               "sizeof(%s));\n",
               et);
    buf_puts(b, "}\n");
}
