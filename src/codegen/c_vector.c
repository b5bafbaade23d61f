/*
 * c_vector.c — explicit vector code for vector loops in C.
 *
 * A LOOP_VECTOR loop of constant extent W (2..64) becomes blocks of
 * straight-line code on GCC/Clang vector types (`typedef float rv_f32x16
 * __attribute__((vector_size(64)))`): lane l of a block's vectors is
 * iteration base + l of the loop. The JIT compiles with -O3 -march=native,
 * so the compiler maps the types onto AVX-512, AVX2 or SSE registers.
 * Blocks are at most 16 lanes (see NATIVE_LANES): W = 64 is a loop over
 * four 16-lane blocks, W = 24 a 16-lane block and an 8-lane one, and what
 * is left below 2 lanes the caller's (c.c) scalar loop. As with `#pragma
 * omp simd`, the loop's kind
 * asserts that its iterations are independent: the block runs each
 * statement for all lanes before the next.
 *
 * Analysis. Every expression is lane-invariant (the same in all lanes:
 * printed as scalar C, broadcast where a vector needs it) or varying.
 * Varying integers are affine when lane l's value is lane 0's plus a
 * constant stride times l; index arithmetic stays scalar that way: an
 * affine index is printed for lane 0 (the loop variable replaced by 0)
 * and used as
 *
 *   stride 1   a vector load or store, unaligned, through memcpy
 *   stride 0   a scalar load (broadcast on use)
 *   otherwise  a gather or scatter, lane by lane (a transposing copy
 *              of whole blocks: c_transpose.c)
 *
 * A load at a checked index `c ? a : b` whose c is lane-invariant (the
 * lowering's safe index of a read it could not prove in bounds, such as
 * an embedding row at a node's word) loads the arm c picks, each arm by
 * the rules above (checked_load), when both arms are contiguous or one
 * element.
 *
 * Non-affine varying integers become integer vectors (iota for the loop
 * variable). Comparisons give masks, held as int32 vectors of -1/0
 * whatever the compared type; SELECT is a bitwise blend (C has no vector
 * ?:); casts are __builtin_convertvector; math calls use the vector
 * helpers of c_vmath.c. Locals allocated inside the loop are private to
 * each iteration: those stored a varying value become vector variables
 * (the lowering's one-element accumulators) or arrays of vectors, the
 * others stay scalar.
 *
 * The body may hold SEQ, LET, STORE, IF with a lane-invariant condition,
 * serial or unrolled inner loops of lane-invariant extent (kept as scalar
 * loops around vector statements: the k loop of a reduction), and ALLOC
 * of small local arrays. Anything else keeps the scalar loop, with the
 * reason in a comment: a non-constant extent (but for a masked tail,
 * masked_tail below), a varying condition, a
 * loop-local array indexed by the lane, bool memory accessed by the lane,
 * parallel or GPU loops, extern calls, a store of every lane to one
 * element other than a lane reduction.
 *
 * Lane reductions. A vectorized reduction loop (a dot product's k) stores
 * every lane into one accumulator outside the loop: acc = acc + x (or max,
 * min). Each lane then keeps its partial result in a vector (acc_lanes:
 * zero for a sum, acc for max and min), and after the loop rv_hsum (hmax,
 * hmin) combines the lanes pairwise into acc. A float sum so rounds in
 * another order than the serial loop. The loop may not otherwise read or
 * write the accumulator's buffer, and has at most one such update.
 *
 * Generated code: one statement per line; vector loads, gathers and math
 * calls get named temporaries (B_v, B_g, exp_v), arithmetic stays inline.
 * Types and helpers are emitted once per unit, only those used.
 */
#include <string.h>

#include "codegen/codegen.h"

#define MAX_LANES 64
#define LOCAL_LIMIT 4096 /* elements of a loop-local array */

/* ---- the vector types and helpers of a unit ---- */

typedef enum VHelper {
    VH_TYPE,   /* typedef, rv_load_, rv_store_, rv_splat_ */
    VH_IOTA,   /* rv_iota_: {0, 1, ..., lanes - 1} */
    VH_SELECT, /* rv_select_(mask, a, b): a where mask is -1 */
    VH_MIN,
    VH_MAX,
    VH_ABS,
    VH_FLOORDIV,
    VH_FLOORMOD,
    VH_HSUM, /* across the lanes of one vector: a lane reduction's result */
    VH_HMAX,
    VH_HMIN,
    VH_TRANSPOSE, /* rv_transpose_: a block copied transposed (c_transpose.c) */
    VH_PARTIAL,   /* rv_loadn_, rv_storen_, rv_first_: the first n lanes (a masked tail) */
    VH_EXP,       /* math: in dependency order */
    VH_LOG,
    VH_ERF,
    VH_TANH,
    VH_SIGMOID,
    VH_GELU,
    VH_SQRT,
    VH_RSQRT,
    VH_POW,
    VH_COUNT
} VHelper;
_Static_assert(VH_COUNT <= CG_VEC_HELPERS, "CgEmit.vec_use has a slot per helper");

static const ExprKind math_kind[VH_COUNT] = {
    [VH_EXP] = EX_EXP,   [VH_LOG] = EX_LOG,         [VH_ERF] = EX_ERF,
    [VH_TANH] = EX_TANH, [VH_SIGMOID] = EX_SIGMOID, [VH_GELU] = EX_GELU,
    [VH_SQRT] = EX_SQRT, [VH_RSQRT] = EX_RSQRT,     [VH_POW] = EX_POW,
};

static VHelper math_helper(ExprKind k) {
    for (int h = VH_EXP; h < VH_COUNT; h++)
        if (math_kind[h] == k)
            return (VHelper)h;
    return VH_COUNT;
}

/* The element dtype of the vector holding values of dtype t: bools are
 * int32 masks. */
static rv_dtype lane_dtype(rv_dtype t) {
    return t == RV_BOOL ? RV_I32 : t;
}

/* The mask (signed integer) dtype of vectors of t. */
static rv_dtype mask_dtype(rv_dtype t) {
    return rv_dtype_size(lane_dtype(t)) == 8 ? RV_I64 : RV_I32;
}

static int log2_lanes(int lanes) {
    int k = 0;
    while ((1 << k) < lanes)
        k++;
    return k;
}

/* Records that the unit uses helper h on vectors of t, and what h needs. */
static void use(CgEmit *e, VHelper h, rv_dtype t, int lanes) {
    t = lane_dtype(t);
    uint64_t bit = 1ull << (8 * t + log2_lanes(lanes));
    if (e->vec_use[h] & bit)
        return;
    e->vec_use[h] |= bit;
    rv_dtype m = mask_dtype(t);
    switch (h) {
    case VH_TYPE:
        if (m != t)
            use(e, VH_TYPE, m, lanes);
        return;
    case VH_IOTA:
    case VH_FLOORDIV:
    case VH_FLOORMOD:
        use(e, VH_TYPE, t, lanes);
        return;
    case VH_SELECT:
        use(e, VH_TYPE, t, lanes);
        return;
    case VH_MIN:
    case VH_MAX:
    case VH_ABS:
        use(e, VH_SELECT, t, lanes);
        return;
    case VH_HSUM:
    case VH_TRANSPOSE:
    case VH_PARTIAL:
        use(e, VH_TYPE, t, lanes);
        return;
    case VH_HMAX:
        use(e, VH_MAX, t, lanes);
        return;
    case VH_HMIN:
        use(e, VH_MIN, t, lanes);
        return;
    default: {
        use(e, VH_SELECT, t, lanes);
        ExprKind deps[2];
        int n = cg_vmath_deps(math_kind[h], t, deps);
        for (int i = 0; i < n; i++)
            use(e, math_helper(deps[i]), t, lanes);
        return;
    }
    }
}

/* "rv_f32x16" */
static const char *vtype_name(CgEmit *e, rv_dtype t, int lanes) {
    t = lane_dtype(t);
    return arena_printf(e->arena, "rv_%sx%d", rv_dtype_name(t), lanes);
}

// clang-format off
static const char type_tmpl[] =
    "typedef $E $V __attribute__((vector_size($B)));\n"
    "$Q $V rv_load_$S(const $E *p) {\n"
    "    $V v;\n"
    "    __builtin_memcpy(&v, p, sizeof v);\n"
    "    return v;\n"
    "}\n"
    "$Q void rv_store_$S($E *p, $V v) {\n"
    "    __builtin_memcpy(p, &v, sizeof v);\n"
    "}\n"
    "$Q $V rv_splat_$S($E s) {\n"
    "    return ($V){0} + s;\n"
    "}\n";
/* rv_loadn_ and rv_storen_ (partial_helpers): AVX-512's masked moves
 * where the unit is compiled for them, else copies of n elements. */
static const char partial_tmpl[] =
    "$Q $I rv_first_$S(int64_t n) {\n"
    "    $I m;\n"
    "    for (int l = 0; l < $N; l++)\n"
    "        m[l] = l < n ? -1 : 0;\n"
    "    return m;\n"
    "}\n";
static const char select_tmpl[] =
    "$Q $V rv_select_$S($I m, $V a, $V b) {\n"
    "    return ($V)((m & ($I)a) | (~m & ($I)b));\n"
    "}\n";
static const char *const int_tmpl[VH_COUNT] = {
    [VH_MIN] = "$Q $V rv_min_$S($V a, $V b) {\n    return rv_select_$S(a < b, a, b);\n}\n",
    [VH_MAX] = "$Q $V rv_max_$S($V a, $V b) {\n    return rv_select_$S(a > b, a, b);\n}\n",
    [VH_ABS] = "$Q $V rv_abs_$S($V a) {\n    return rv_select_$S(a < 0, -a, a);\n}\n",
    [VH_FLOORDIV] =
        "/* Division rounding toward -infinity (a mask is -1 where q is one too big). */\n"
        "$Q $V rv_floordiv_$S($V a, $V b) {\n"
        "    $V r = a % b;\n"
        "    return a / b + ((r != 0) & ((r ^ b) < 0));\n"
        "}\n",
    [VH_FLOORMOD] =
        "/* Remainder with the sign of the divisor. */\n"
        "$Q $V rv_floormod_$S($V a, $V b) {\n"
        "    $V r = a % b;\n"
        "    return r + ((r != 0) & ((r ^ b) < 0) & b);\n"
        "}\n",
};
static const char *const float_tmpl[VH_COUNT] = {
    [VH_MIN] =
        "/* min and max propagate NaN, as the scalar helpers. */\n"
        "$Q $V rv_min_$S($V a, $V b) {\n    return rv_select_$S((a != a) | (a < b), a, b);\n}\n",
    [VH_MAX] =
        "$Q $V rv_max_$S($V a, $V b) {\n    return rv_select_$S((a != a) | (a > b), a, b);\n}\n",
    [VH_ABS] = "$Q $V rv_abs_$S($V a) {\n    return ($V)(($I)a & $W); /* clears the sign */\n}\n",
};
// clang-format on

/* A helper template for the vector type (t, lanes) (cg_put_template). */
static void put_template(Buf *b, const char *tmpl, rv_dtype t, int lanes) {
    CgTemplate v = {.t = t, .lanes = lanes, .mask = mask_dtype(t), .target = CG_TARGET_C};
    cg_put_template(b, tmpl, &v);
}

/* The first n lanes (1 <= n <= lanes: a masked tail) of vectors of t,
 * the others 0: one masked move with AVX-512 (VL for narrower vectors),
 * else a copy of n elements (a call to memcpy in a hot loop: slower
 * than the scalar loop it replaces). */
static void partial_helpers(Buf *b, rv_dtype t, int lanes) {
    const char *ty = rv_dtype_name(t), *ct = cg_ctype(t);
    int bits = lanes * (int)rv_dtype_size(t) * 8;
    const char *w = bits == 512 ? "_mm512" : bits == 256 ? "_mm256" : bits == 128 ? "_mm" : NULL;
    const char *sfx = t == RV_F32 ? "ps" : t == RV_F64 ? "pd" : t == RV_I32 ? "epi32" : t == RV_I64 ? "epi64" : NULL;
    const char *reg = t == RV_F32 ? "" : t == RV_F64 ? "d" : "i";
    buf_printf(b, "/* The first n lanes of a vector (1 <= n <= %d: a masked tail), the others 0. */\n",
               lanes);
    if (w && sfx)
        buf_printf(b, "#if defined(__AVX512F__)%s\n#include <immintrin.h>\n",
                   bits == 512 ? "" : " && defined(__AVX512VL__)");
    for (int k = 0; k < 2; k++) {
        if (k == 0 && !(w && sfx))
            continue;
        if (k == 1 && w && sfx)
            buf_puts(b, "#else\n");
        buf_printf(b, "static inline __attribute__((unused)) rv_%sx%d rv_loadn_%sx%d(const %s *p, int64_t n) {\n",
                   ty, lanes, ty, lanes, ct);
        if (k == 0)
            buf_printf(b, "    return (rv_%sx%d)%s_maskz_loadu_%s((__mmask%d)((1u << n) - 1), p);\n", ty,
                       lanes, w, sfx, lanes < 8 ? 8 : lanes);
        else
            buf_printf(b, "    rv_%sx%d v = {0};\n    __builtin_memcpy(&v, p, (size_t)n * sizeof *p);\n    return v;\n",
                       ty, lanes);
        buf_puts(b, "}\n");
        buf_printf(b, "static inline __attribute__((unused)) void rv_storen_%sx%d(%s *p, rv_%sx%d v, int64_t n) {\n",
                   ty, lanes, ct, ty, lanes);
        if (k == 0)
            buf_printf(b, "    %s_mask_storeu_%s(p, (__mmask%d)((1u << n) - 1), (__m%d%s)v);\n", w, sfx,
                       lanes < 8 ? 8 : lanes, bits, reg);
        else
            buf_puts(b, "    __builtin_memcpy(p, &v, (size_t)n * sizeof *p);\n");
        buf_puts(b, "}\n");
    }
    if (w && sfx)
        buf_puts(b, "#endif\n");
}

static void emit_iota(Buf *b, rv_dtype t, int lanes) {
    buf_printf(b, "static const rv_%sx%d rv_iota_%sx%d = {", rv_dtype_name(t), lanes,
               rv_dtype_name(t), lanes);
    for (int l = 0; l < lanes; l++)
        buf_printf(b, "%s%d", l ? ", " : "", l);
    buf_puts(b, "};\n");
}

/* rv_hsum_f32x16(v) and its max and min: the lanes combined pairwise, the
 * upper half of the live lanes onto the lower half, log2(lanes) steps. */
static void emit_horizontal(Buf *b, VHelper h, rv_dtype t, int lanes) {
    static const char *const what[] = {[VH_HSUM] = "sum", [VH_HMAX] = "max", [VH_HMIN] = "min"};
    const char *name = what[h];
    buf_printf(b, "/* The %s of v's lanes, halving the live lanes at each step. */\n", name);
    buf_printf(b, "static inline __attribute__((unused)) %s rv_h%s_%sx%d(rv_%sx%d v) {\n", cg_ctype(t), name,
               rv_dtype_name(t), lanes, rv_dtype_name(t), lanes);
    for (int half = lanes / 2; half >= 1; half /= 2) {
        Buf idx = {0};
        for (int l = 0; l < lanes; l++)
            buf_printf(&idx, "%s%d", l ? ", " : "", half + l % half);
        if (h == VH_HSUM)
            buf_printf(b, "    v += __builtin_shufflevector(v, v, %s);\n", buf_str(&idx));
        else
            buf_printf(b, "    v = rv_%s_%sx%d(v, __builtin_shufflevector(v, v, %s));\n", name,
                       rv_dtype_name(t), lanes, buf_str(&idx));
        buf_free(&idx);
    }
    buf_puts(b, "    return v[0];\n}\n");
}

void cg_vector_helpers(const CgEmit *e, Buf *b) {
    static const rv_dtype order[] = {RV_I32, RV_I64, RV_F32, RV_F64};
    bool any = false;
    for (int h = 0; h < VH_COUNT; h++)
        any |= e->vec_use[h] != 0;
    /* Compiled for a CPU without the vector width (no -march), GCC and
     * clang note that passing these vectors by value changes the ABI; the
     * helpers are static, so their ABI never leaves this file. */
    if (any && e->target == CG_TARGET_C)
        buf_puts(b, "#pragma GCC diagnostic ignored \"-Wpsabi\"\n\n");
    for (int h = 0; h < VH_COUNT; h++) {
        for (int ti = 0; ti < RV_COUNT(order); ti++) {
            rv_dtype t = order[ti];
            for (int k = 0; (1 << k) <= MAX_LANES; k++) {
                if (!(e->vec_use[h] & (1ull << (8 * t + k))))
                    continue;
                int lanes = 1 << k;
                const char *tmpl = NULL;
                switch (h) {
                case VH_TYPE:
                    tmpl = type_tmpl;
                    break;
                case VH_IOTA:
                    emit_iota(b, t, lanes);
                    break;
                case VH_SELECT:
                    tmpl = select_tmpl;
                    break;
                case VH_PARTIAL:
                    partial_helpers(b, t, lanes);
                    tmpl = partial_tmpl;
                    break;
                case VH_HSUM:
                case VH_HMAX:
                case VH_HMIN:
                    emit_horizontal(b, (VHelper)h, t, lanes);
                    break;
                case VH_TRANSPOSE:
                    cg_transpose_helper(b, t, lanes);
                    break;
                default:
                    tmpl = math_kind[h]     ? cg_vmath_template(math_kind[h], t)
                           : ir_is_float(t) ? float_tmpl[h]
                                            : int_tmpl[h];
                    RV_ASSERT(tmpl);
                }
                if (tmpl)
                    put_template(b, tmpl, t, lanes);
                buf_putc(b, '\n');
            }
        }
    }
}

/* ---- analysis ---- */

/* What an expression does across lanes. */
typedef struct Info {
    bool vary;      /* differs between lanes */
    bool affine;    /* an integer: lane l's value is lane 0's + stride * l */
    int64_t stride; /* (invariant integers are affine with stride 0) */
} Info;

/* A buffer allocated inside the vector loop: private to each lane. */
typedef struct Local {
    bool vary; /* stored a varying value: held in vectors */
} Local;

/* One vector loop being analysed and emitted. */
typedef struct VC {
    CgEmit *e;
    Module *m;
    const Axis *var;
    int lanes;
    PtrMap memo;     /* Expr* -> Info* */
    PtrMap lets;     /* Axis* bound by a LET inside the loop -> its value */
    PtrMap inner;    /* Axis* of the loops inside the loop */
    PtrMap locals;   /* Buffer* allocated inside the loop -> Local* */
    bool changed;    /* a local became varying in this round */
    const Stmt *red; /* the lane reduction's update, or NULL */
    const char *why;
    /* emission */
    Buf *out;
    int indent;
    PtrMap zero;           /* var -> 0, for lane 0's indices */
    PtrMap vlets;          /* Axis* bound by a LET to a non-affine varying value (a vector) */
    PtrMap temps;          /* Expr* -> its temporary, within one statement */
    const char *lane;      /* the variable of gather and scatter loops */
    const char *red_lanes; /* the lane reduction's vector of partial results */
    /* a masked tail: the C variable holding the number of lanes that run
     * (1..lanes); NULL: all of them */
    const char *count;
    Vec(const char *) decls;
    Vec(int) marks;
} VC;

static bool fail(VC *vc, const char *why) {
    if (!vc->why)
        vc->why = why;
    return false;
}

static Info info_of(VC *vc, const Expr *x) {
    const Info *memo = ptrmap_get(&vc->memo, x);
    if (memo)
        return *memo;
    Info r = {false, ir_is_int(x->dtype), 0};
    switch (x->kind) {
    case EX_VAR: {
        const Expr *v = ptrmap_get(&vc->lets, x->u.axis);
        if (x->u.axis == vc->var)
            r = (Info){true, true, 1};
        else if (v)
            r = info_of(vc, v);
        break;
    }
    case EX_LOAD: {
        const Local *l = ptrmap_get(&vc->locals, x->u.buf);
        r.vary = info_of(vc, x->args[0]).vary || (l && l->vary);
        r.affine = !r.vary && ir_is_int(x->dtype);
        break;
    }
    default: {
        Info a[3] = {{0}};
        bool any = false;
        for (int i = 0; i < x->n && i < 3; i++) {
            a[i] = info_of(vc, x->args[i]);
            any |= a[i].vary;
        }
        for (int i = 3; i < x->n; i++)
            any |= info_of(vc, x->args[i]).vary;
        if (!any)
            break;
        r = (Info){true, false, 0};
        if (!ir_is_int(x->dtype))
            break;
        int64_t c;
        switch (x->kind) {
        case EX_ADD:
        case EX_SUB:
            r.affine = a[0].affine && a[1].affine;
            r.stride = x->kind == EX_ADD ? a[0].stride + a[1].stride : a[0].stride - a[1].stride;
            break;
        case EX_NEG:
            r.affine = a[0].affine;
            r.stride = -a[0].stride;
            break;
        case EX_MUL:
            for (int i = 0; i < 2; i++)
                if (!r.affine && ir_is_const_int(x->args[i], &c) && a[1 - i].affine) {
                    r.affine = true;
                    r.stride = c * a[1 - i].stride;
                }
            break;
        case EX_CAST:
            if (ir_is_int(x->args[0]->dtype)) {
                r.affine = a[0].affine;
                r.stride = a[0].stride;
            }
            break;
        default:
            break;
        }
    }
    }
    Info *keep = arena_alloc(vc->e->arena, sizeof *keep);
    *keep = r;
    ptrmap_put(&vc->memo, x, keep);
    return r;
}

/* True when index x addresses one element for every lane. */
static bool same_element(Info i) {
    return !i.vary || (i.affine && i.stride == 0);
}

/* Checks that the varying parts of x can be written as vector code. */
static bool check_expr(VC *vc, const Expr *x) {
    if (!info_of(vc, x).vary)
        return true;
    if (x->kind == EX_LOAD) {
        bool by_lane = info_of(vc, x->args[0]).vary;
        if (ptrmap_has(&vc->locals, x->u.buf) && by_lane)
            return fail(vc, "a loop-local array is indexed by the lane");
        if (!ptrmap_has(&vc->locals, x->u.buf) && x->u.buf->dtype == RV_BOOL && by_lane)
            return fail(vc, "bool memory is loaded at an index that varies across lanes");
    }
    for (int i = 0; i < x->n; i++)
        if (!check_expr(vc, x->args[i]))
            return false;
    return true;
}

static bool same_index(const Expr *a, const Expr *b) {
    int64_t x, y;
    return a == b || (ir_is_const_int(a, &x) && ir_is_const_int(b, &y) && x == y);
}

typedef struct Inside {
    const VC *vc;
    bool found;
} Inside;

static void inside_fn(const Expr *x, void *ctx) {
    Inside *in = ctx;
    const Expr *v;
    if (x->kind != EX_VAR || in->found)
        return;
    if (ptrmap_has(&in->vc->inner, x->u.axis))
        in->found = true;
    else if ((v = ptrmap_get(&in->vc->lets, x->u.axis)))
        ir_visit(v, inside_fn, in);
}

/* Does x depend on a loop inside the vector loop (through LETs too)? */
static bool bound_inside(const VC *vc, const Expr *x) {
    Inside in = {vc, false};
    ir_visit(x, inside_fn, &in);
    return in.found;
}

/* A store of every lane to one element is a lane reduction when it is
 * `acc[i] = acc[i] (+, max, min) v` at a lane-invariant i, into memory
 * outside the loop: each lane then keeps its own partial result, and the
 * partials are combined across lanes after the loop. One per loop, and
 * one element: i may not change inside the loop (an in-place accumulation
 * over a spatial loop inside the reduction loop stays scalar; the
 * combined result is stored after the loop, where i's inner loops are not
 * bound). */
static bool check_lane_reduction(VC *vc, const Stmt *s) {
    const Buffer *b = s->u.store.buf;
    const Expr *idx = s->u.store.index, *v = s->u.store.value;
    bool update = (v->kind == EX_ADD || v->kind == EX_MAX || v->kind == EX_MIN) &&
                  v->args[0]->kind == EX_LOAD && v->args[0]->u.buf == b &&
                  same_index(v->args[0]->args[0], idx);
    if (info_of(vc, idx).vary || !update || b->dtype == RV_BOOL)
        return fail(vc, "every lane stores to one element, not as a sum, max or min");
    if (bound_inside(vc, idx))
        return fail(vc, "every lane accumulates into an element that an inner loop changes");
    if (vc->red && vc->red != s)
        return fail(vc, "two stores of every lane to one element");
    vc->red = s;
    return check_expr(vc, idx) && check_expr(vc, v->args[1]);
}

typedef struct FindLoad {
    const Buffer *buf;
    bool found;
} FindLoad;

static void find_load(const Expr *x, void *ctx) {
    FindLoad *f = ctx;
    if (x->kind == EX_LOAD && x->u.buf == f->buf)
        f->found = true;
}

/* True when s reads or writes f->buf other than in the lane reduction's
 * own update. */
static bool touches_other(const VC *vc, const Stmt *s, FindLoad *f) {
    if (!s)
        return false;
    const Expr *x[3] = {0};
    switch (s->kind) {
    case ST_SEQ:
        for (int i = 0; i < s->u.seq.n; i++)
            if (touches_other(vc, s->u.seq.stmts[i], f))
                return true;
        return false;
    case ST_LET:
        x[0] = s->u.let.value;
        break;
    case ST_IF:
        x[0] = s->u.if_.cond;
        break;
    case ST_FOR:
        x[0] = s->u.loop.extent;
        break;
    case ST_ALLOC:
        x[0] = s->u.alloc.buf->size;
        break;
    case ST_STORE:
        if (s != vc->red && s->u.store.buf == f->buf)
            return true;
        x[0] = s->u.store.index;
        x[1] = s == vc->red ? s->u.store.value->args[1] : s->u.store.value;
        break;
    default:
        return false;
    }
    for (int i = 0; i < 3; i++)
        if (x[i])
            ir_visit(x[i], find_load, f);
    if (f->found)
        return true;
    switch (s->kind) {
    case ST_LET:
        return touches_other(vc, s->u.let.body, f);
    case ST_IF:
        return touches_other(vc, s->u.if_.then_s, f) || touches_other(vc, s->u.if_.else_s, f);
    case ST_FOR:
        return touches_other(vc, s->u.loop.body, f);
    case ST_ALLOC:
        return touches_other(vc, s->u.alloc.body, f);
    default:
        return false;
    }
}

static bool check_stmt(VC *vc, const Stmt *s) {
    if (!s)
        return true;
    switch (s->kind) {
    case ST_SEQ:
        for (int i = 0; i < s->u.seq.n; i++)
            if (!check_stmt(vc, s->u.seq.stmts[i]))
                return false;
        return true;
    case ST_LET:
        ptrmap_put(&vc->lets, s->u.let.var, s->u.let.value);
        return check_expr(vc, s->u.let.value) && check_stmt(vc, s->u.let.body);
    case ST_IF:
        if (info_of(vc, s->u.if_.cond).vary)
            return fail(vc, "an if condition varies across lanes");
        return check_stmt(vc, s->u.if_.then_s) && check_stmt(vc, s->u.if_.else_s);
    case ST_FOR: {
        LoopKind k = s->u.loop.kind;
        if (k != LOOP_SERIAL && k != LOOP_UNROLL && k != LOOP_VECTOR)
            return fail(vc, "it contains a parallel or GPU loop");
        if (info_of(vc, s->u.loop.extent).vary)
            return fail(vc, "an inner loop's extent varies across lanes");
        ptrmap_put(&vc->inner, s->u.loop.var, s->u.loop.var);
        return check_stmt(vc, s->u.loop.body);
    }
    case ST_ALLOC: {
        const Buffer *b = s->u.alloc.buf;
        int64_t n;
        if (b->scope != BUF_LOCAL || !b->size || !ir_is_const_int(b->size, &n) || n < 1 ||
            n > LOCAL_LIMIT)
            return fail(vc, "it allocates a buffer other than a small local array");
        if (!ptrmap_has(&vc->locals, b)) {
            Local *l = arena_alloc(vc->e->arena, sizeof *l);
            l->vary = false;
            ptrmap_put(&vc->locals, b, l);
        }
        return check_stmt(vc, s->u.alloc.body);
    }
    case ST_STORE: {
        const Buffer *b = s->u.store.buf;
        Info ii = info_of(vc, s->u.store.index), iv = info_of(vc, s->u.store.value);
        Local *l = ptrmap_get(&vc->locals, b);
        if (l) {
            if (ii.vary)
                return fail(vc, "a loop-local array is indexed by the lane");
            if (iv.vary && !l->vary) {
                l->vary = true;
                vc->changed = true;
            }
        } else if (same_element(ii)) {
            return check_lane_reduction(vc, s);
        } else if (b->dtype == RV_BOOL) {
            return fail(vc, "it stores bool values to memory");
        }
        return check_expr(vc, s->u.store.index) && check_expr(vc, s->u.store.value);
    }
    case ST_CALL:
        return fail(vc, "it calls an extern kernel");
    case ST_BARRIER:
        return fail(vc, "it contains a barrier");
    case ST_FAIL:
        return fail(vc, "it contains a run-time check");
    default:
        RV_UNREACHABLE();
    }
}

/* ---- text ---- */

static void line(VC *vc, const char *fmt, ...) RV_PRINTF(2, 3);
static void line(VC *vc, const char *fmt, ...) {
    buf_indent(vc->out, 4 * vc->indent);
    va_list ap;
    va_start(ap, fmt);
    buf_vprintf(vc->out, fmt, ap);
    va_end(ap);
}

static void open_block(VC *vc) {
    vc->indent++;
    vec_push(&vc->marks, vc->decls.len);
}

static void close_block(VC *vc) {
    vc->indent--;
    vc->decls.len = vec_pop(&vc->marks);
}

static bool declared_here(const VC *vc, const char *name) {
    for (int i = vec_last(&vc->marks); i < vc->decls.len; i++)
        if (strcmp(vc->decls.data[i], name) == 0)
            return true;
    return false;
}

/* A vector type name, recorded as used. */
static const char *vt(VC *vc, rv_dtype t) {
    use(vc->e, VH_TYPE, t, vc->lanes);
    return vtype_name(vc->e, t, vc->lanes);
}

/* A helper's name on vectors of t ("rv_exp_f32x16"), recorded as used. */
static const char *helper(VC *vc, VHelper h, const char *base, rv_dtype t) {
    use(vc->e, h, t, vc->lanes);
    return arena_printf(vc->e->arena, "rv_%s_%sx%d", base, rv_dtype_name(lane_dtype(t)), vc->lanes);
}

const char *cg_vector_type(CgEmit *e, rv_dtype t, int lanes) {
    use(e, VH_TYPE, t, lanes);
    return vtype_name(e, t, lanes);
}

const char *cg_vector_use_transpose(CgEmit *e, rv_dtype t, int lanes) {
    use(e, VH_TRANSPOSE, t, lanes);
    return arena_printf(e->arena, "rv_transpose_%sx%d", rv_dtype_name(lane_dtype(t)), lanes);
}

/* C text of a value and its precedence; `vec` when it is a vector (else
 * a scalar, broadcast by the operator using it). */
typedef struct VX {
    const char *text;
    int prec;
    bool vec;
} VX;

static const char *wrap(VC *vc, VX v, int need) {
    return v.prec < need ? arena_printf(vc->e->arena, "(%s)", v.text) : v.text;
}

/* A lane-invariant expression as scalar C. */
static VX scalar(VC *vc, const Expr *x) {
    Buf b = {0};
    cg_expr(vc->e, &b, x);
    int prec = P_LOWEST;
    int64_t iv;
    switch (x->kind) {
    case EX_CONST_INT:
        prec = ir_is_const_int(x, &iv) && iv >= 0 ? P_POSTFIX : P_UNARY;
        break;
    case EX_CONST_FLOAT:
        prec = x->u.fval >= 0 ? P_POSTFIX : P_UNARY;
        break;
    default: /* a call or a name, or else parenthesized wherever it goes */
        if (cg_expr_prec(x) == P_POSTFIX)
            prec = P_POSTFIX;
        break;
    }
    VX r = {arena_printf(vc->e->arena, "%s", buf_str(&b)), prec, false};
    buf_free(&b);
    return r;
}

/* Lane 0's value of an affine (or invariant) integer expression. */
static VX lane0(VC *vc, const Expr *x) {
    if (info_of(vc, x).vary) {
        Expr *y = ir_substitute(vc->m, (Expr *)x, &vc->zero);
        Expr *z = y ? ir_simplify_expr(vc->m, y) : NULL;
        RV_ASSERT(y);
        x = z ? z : y;
    }
    return scalar(vc, x);
}

/* A fresh local name for a temporary, declared in the current block. */
static const char *temp(VC *vc, const char *hint) {
    const char *n = cg_fresh(vc->e, hint);
    vec_push(&vc->decls, n);
    return n;
}

static VX vx(VC *vc, const Expr *x);

/* x as a vector (an invariant is broadcast). Bools are masks. */
static VX full_vx(VC *vc, const Expr *x) {
    VX v = vx(vc, x);
    if (v.vec)
        return v;
    const char *s = v.text;
    if (x->dtype == RV_BOOL)
        s = arena_printf(vc->e->arena, "-(int32_t)%s", wrap(vc, v, P_UNARY));
    return (VX){arena_printf(vc->e->arena, "%s(%s)", helper(vc, VH_TYPE, "splat", x->dtype), s),
                P_POSTFIX, true};
}

static const char *full(VC *vc, const Expr *x) {
    return full_vx(vc, x).text;
}

/* An operand of an operator at precedence `need`: a vector, or a scalar
 * the operator broadcasts (invariant bools become -1/0 for masks). */
static const char *operand(VC *vc, const Expr *x, int need) {
    VX v = vx(vc, x);
    if (!v.vec && x->dtype == RV_BOOL) {
        const char *m = arena_printf(vc->e->arena, "-(int32_t)%s", wrap(vc, v, P_UNARY));
        return need > P_UNARY ? arena_printf(vc->e->arena, "(%s)", m) : m;
    }
    return wrap(vc, v, need);
}

/* A mask of 32-bit lanes as the mask type of t (64-bit lanes convert). */
static const char *mask_for(VC *vc, const char *m, rv_dtype t) {
    if (mask_dtype(t) == RV_I32)
        return m;
    return arena_printf(vc->e->arena, "__builtin_convertvector(%s, %s)", m, vt(vc, RV_I64));
}

/* Declares `const T name = text;` for x's value and returns the name. */
static VX named(VC *vc, const Expr *x, const char *hint, const char *text) {
    const char *n = temp(vc, hint);
    line(vc, "const %s %s = %s;\n", vt(vc, x->dtype), n, text);
    ptrmap_put(&vc->temps, x, (void *)n);
    return (VX){n, P_POSTFIX, true};
}

static const char *lane_var(VC *vc) {
    if (!vc->lane)
        vc->lane = cg_fresh(vc->e, "lane");
    return vc->lane;
}

/* A gather: lane by lane from buf at lane 0's index + stride * lane, or
 * at the lanes of an index vector. */
static VX gather(VC *vc, const Expr *x) {
    const Buffer *b = x->u.buf;
    const char *bn = cg_name(vc->e, b, b->name);
    Info i = info_of(vc, x->args[0]);
    const char *at;
    const char *lane = lane_var(vc);
    if (i.affine) {
        at = arena_printf(vc->e->arena, "%s + %s * %lld", wrap(vc, lane0(vc, x->args[0]), P_ADD),
                          lane, (long long)i.stride);
    } else {
        const char *idx = full(vc, x->args[0]);
        if (!ptrmap_has(&vc->temps, x->args[0]))
            idx = named(vc, x->args[0], arena_printf(vc->e->arena, "%s_idx", bn), idx).text;
        at = arena_printf(vc->e->arena, "%s[%s]", idx, lane);
    }
    const char *n = temp(vc, arena_printf(vc->e->arena, "%s_g", bn));
    line(vc, "%s %s%s;\n", vt(vc, x->dtype), n, vc->count ? " = {0}" : "");
    if (vc->count)
        line(vc, "for (int %s = 0; %s < %s; %s++)\n", lane, lane, vc->count, lane);
    else
        line(vc, "for (int %s = 0; %s < %d; %s++)\n", lane, lane, vc->lanes, lane);
    line(vc, "    %s[%s] = %s[%s];\n", n, lane, bn, at);
    ptrmap_put(&vc->temps, x, (void *)n);
    return (VX){n, P_POSTFIX, true};
}

/* The load of buffer bn at index ix as one C expression (no statement, so
 * it may stand in one arm of a ?:), or NULL: a vector load when ix is
 * affine with stride 1, lane 0's element broadcast when it addresses one. */
static const char *load_text(VC *vc, const char *bn, rv_dtype t, const Expr *ix) {
    Info i = info_of(vc, ix);
    Arena *a = vc->e->arena;
    if (same_element(i))
        return arena_printf(a, "%s(%s[%s])", helper(vc, VH_TYPE, "splat", t), bn,
                            lane0(vc, ix).text);
    if (!i.affine || i.stride != 1)
        return NULL;
    if (vc->count)
        return arena_printf(a, "%s(&%s[%s], %s)", helper(vc, VH_PARTIAL, "loadn", t), bn,
                            lane0(vc, ix).text, vc->count);
    return arena_printf(a, "%s(&%s[%s])", helper(vc, VH_TYPE, "load", t), bn, lane0(vc, ix).text);
}

/* A read at a checked index, `c ? base + lane : 0` with c the same in every
 * lane (the lowering's safe index of a read whose bounds it could not
 * prove: an embedding row at a node's word): the arm that c picks, loaded
 * whole (a vector load where the arm is contiguous) instead of gathered
 * lane by lane through the select's index vector. NULL when an arm is
 * neither contiguous nor one element. Only the arm c picks is read, as
 * the gather read only its indices. */
static const char *checked_load(VC *vc, const Expr *x) {
    const Expr *ix = x->args[0];
    if (ix->kind != EX_SELECT || info_of(vc, ix->args[0]).vary)
        return NULL;
    const char *bn = cg_name(vc->e, x->u.buf, x->u.buf->name);
    const char *then = load_text(vc, bn, x->dtype, ix->args[1]);
    const char *other = then ? load_text(vc, bn, x->dtype, ix->args[2]) : NULL;
    if (!other)
        return NULL;
    return arena_printf(vc->e->arena, "%s ? %s : %s", wrap(vc, vx(vc, ix->args[0]), P_BOR), then,
                        other);
}

static VX load(VC *vc, const Expr *x) {
    const Buffer *b = x->u.buf;
    const char *bn = cg_name(vc->e, b, b->name);
    if (ptrmap_has(&vc->locals, b)) { /* a varying local: a vector variable or array */
        if (ptrmap_has(&vc->e->scalars, b))
            return (VX){bn, P_POSTFIX, true};
        return (VX){arena_printf(vc->e->arena, "%s[%s]", bn, lane0(vc, x->args[0]).text), P_POSTFIX,
                    true};
    }
    if (ptrmap_has(&vc->e->vregs, b)) /* a vector of a register tile, this block's lanes (c.c) */
        return (VX){bn, P_POSTFIX, true};
    Info i = info_of(vc, x->args[0]);
    if (same_element(i))
        return (VX){arena_printf(vc->e->arena, "%s[%s]", bn, lane0(vc, x->args[0]).text), P_POSTFIX,
                    false};
    if (i.affine && i.stride == 1) {
        const char *t =
            vc->count
                ? arena_printf(vc->e->arena, "%s(&%s[%s], %s)",
                               helper(vc, VH_PARTIAL, "loadn", x->dtype), bn,
                               lane0(vc, x->args[0]).text, vc->count)
                : arena_printf(vc->e->arena, "%s(&%s[%s])", helper(vc, VH_TYPE, "load", x->dtype),
                               bn, lane0(vc, x->args[0]).text);
        return named(vc, x, arena_printf(vc->e->arena, "%s_v", bn), t);
    }
    const char *checked = checked_load(vc, x);
    if (checked)
        return named(vc, x, arena_printf(vc->e->arena, "%s_v", bn), checked);
    return gather(vc, x);
}

/* A varying affine integer: lane 0's value + stride * iota. */
static VX affine(VC *vc, const Expr *x) {
    Info i = info_of(vc, x);
    VX base = lane0(vc, x);
    const char *iota = helper(vc, VH_IOTA, "iota", x->dtype);
    VX step = {iota, P_POSTFIX, true};
    if (i.stride != 1)
        step =
            (VX){arena_printf(vc->e->arena, "%lld * %s", (long long)i.stride, iota), P_MUL, true};
    if (strcmp(base.text, "0") == 0)
        return step;
    return (VX){arena_printf(vc->e->arena, "%s + %s", wrap(vc, base, P_ADD), step.text), P_ADD,
                true};
}

static VX vx_node(VC *vc, const Expr *x) {
    Arena *a = vc->e->arena;
    rv_dtype t = x->dtype;
    Info info = info_of(vc, x);
    if (x->kind == EX_VAR && ptrmap_has(&vc->vlets, x->u.axis))
        return (VX){cg_name(vc->e, x->u.axis, x->u.axis->name), P_POSTFIX, true};
    if (x->kind == EX_LOAD)
        return load(vc, x);
    if (info.affine)
        return affine(vc, x);
    const Expr *l = x->args[0], *r = x->n > 1 ? x->args[1] : NULL;
    const char *ls, *rs;
    int p;
    switch (x->kind) {
    case EX_NEG: { /* a space keeps - -x from reading as the decrement --x */
        const char *o = operand(vc, l, P_UNARY);
        return (VX){arena_printf(a, o[0] == '-' ? "- %s" : "-%s", o), P_UNARY, true};
    }
    case EX_NOT:
        return (VX){arena_printf(a, "~%s", operand(vc, l, P_UNARY)), P_UNARY, true};
    case EX_ADD:
    case EX_SUB:
    case EX_MUL:
    case EX_DIV:
    case EX_MOD:
        p = x->kind == EX_ADD || x->kind == EX_SUB ? P_ADD : P_MUL;
        ls = operand(vc, l, p); /* in order: operands may declare temporaries */
        rs = operand(vc, r, p + 1);
        return (VX){arena_printf(a, "%s %s %s", ls, ir_expr_info[x->kind].text, rs), p, true};
    case EX_AND:
    case EX_OR:
        p = x->kind == EX_AND ? P_BAND : P_BOR;
        ls = operand(vc, l, p);
        rs = operand(vc, r, p + 1);
        return (VX){arena_printf(a, "%s %s %s", ls, x->kind == EX_AND ? "&" : "|", rs), p, true};
#define CMP(k, text, prec, flags) case EX_##k:
#include "ir/ops.def"
#undef CMP
    {
        ls = operand(vc, l, P_REL + 1);
        rs = operand(vc, r, P_REL + 1);
        const char *c = arena_printf(a, "%s %s %s", ls, ir_expr_info[x->kind].text, rs);
        if (mask_dtype(l->dtype) == RV_I32)
            return (VX){c, P_REL, true};
        return (VX){arena_printf(a, "__builtin_convertvector(%s, %s)", c, vt(vc, RV_BOOL)),
                    P_POSTFIX, true};
    }
    case EX_SELECT: {
        const Expr *cond = x->args[0];
        bool vary = info_of(vc, cond).vary;
        const char *cs = vary ? mask_for(vc, full(vc, cond), t) : wrap(vc, vx(vc, cond), P_BOR);
        ls = full(vc, x->args[1]);
        rs = full(vc, x->args[2]);
        if (!vary)
            return (VX){arena_printf(a, "%s ? %s : %s", cs, ls, rs), P_COND, true};
        return (VX){
            arena_printf(a, "%s(%s, %s, %s)", helper(vc, VH_SELECT, "select", t), cs, ls, rs),
            P_POSTFIX, true};
    }
    case EX_CAST: {
        if (t == RV_BOOL) {
            const char *c = arena_printf(a, "%s != 0", operand(vc, l, P_REL + 1));
            if (mask_dtype(l->dtype) == RV_I32)
                return (VX){c, P_EQ, true};
            return (VX){arena_printf(a, "__builtin_convertvector(%s, %s)", c, vt(vc, RV_BOOL)),
                        P_POSTFIX, true};
        }
        const char *v = full(vc, l);
        if (l->dtype == RV_BOOL) /* -1 -> 1 */
            v = arena_printf(a, "-%s", wrap(vc, full_vx(vc, l), P_UNARY));
        if (lane_dtype(l->dtype) == t)
            return (VX){v, l->dtype == RV_BOOL ? P_UNARY : P_POSTFIX, true};
        /* gcc 12 at -O0 with AVX-512 fails on i32 -> f64 of a variable
         * (internal compiler error: unrecognizable insn, a vec_select of the
         * upper half of a 16-lane i32 in memory); through i64 it is exact
         * and at -O1 and above the same instructions */
        if (lane_dtype(l->dtype) == RV_I32 && t == RV_F64)
            v = arena_printf(a, "__builtin_convertvector(%s, %s)", v, vt(vc, RV_I64));
        return (VX){arena_printf(a, "__builtin_convertvector(%s, %s)", v, vt(vc, t)), P_POSTFIX,
                    true};
    }
    case EX_MIN:
    case EX_MAX:
    case EX_FLOORDIV:
    case EX_FLOORMOD: {
        static const VHelper hs[] = {VH_MIN, VH_MAX, VH_FLOORDIV, VH_FLOORMOD};
        static const char *const names[] = {"min", "max", "floordiv", "floormod"};
        int k = x->kind == EX_MIN ? 0 : x->kind == EX_MAX ? 1 : x->kind == EX_FLOORDIV ? 2 : 3;
        ls = full(vc, l);
        rs = full(vc, r);
        return (VX){arena_printf(a, "%s(%s, %s)", helper(vc, hs[k], names[k], t), ls, rs),
                    P_POSTFIX, true};
    }
    case EX_ABS:
        return (VX){arena_printf(a, "%s(%s)", helper(vc, VH_ABS, "abs", t), full(vc, l)), P_POSTFIX,
                    true};
#define MATH(k, text, arity, libm, def) case EX_##k:
#include "ir/ops.def"
#undef MATH
    {
        const char *name = ir_expr_info[x->kind].text;
        ls = full(vc, l);
        rs = r ? full(vc, r) : NULL;
        const char *call = arena_printf(a, "%s(%s%s%s)", helper(vc, math_helper(x->kind), name, t),
                                        ls, r ? ", " : "", r ? rs : "");
        return named(vc, x, arena_printf(a, "%s_v", name), call);
    }
    default:
        break;
    }
    char *s = ir_expr_str(x);
    base_panic(__FILE__, __LINE__, "codegen: no vector form for %s", s);
}

/* x's value in vector code: scalar C when lane-invariant. */
static VX vx(VC *vc, const Expr *x) {
    if (!info_of(vc, x).vary)
        return scalar(vc, x);
    const char *t = ptrmap_get(&vc->temps, x);
    if (t)
        return (VX){t, P_POSTFIX, true};
    return vx_node(vc, x);
}

/* ---- statements ---- */

static void emit(VC *vc, const Stmt *s);

static void emit_body(VC *vc, const Stmt *s) {
    if (s)
        emit(vc, s);
}

/* `name` or `name[i]` of a local or scalar-held buffer, lane 0's index. */
static const char *elem(VC *vc, const Buffer *b, const Expr *idx) {
    const char *bn = cg_name(vc->e, b, b->name);
    if (ptrmap_has(&vc->e->scalars, b) || ptrmap_has(&vc->e->vregs, b))
        return bn;
    return arena_printf(vc->e->arena, "%s[%s]", bn, lane0(vc, idx).text);
}

static void emit_store(VC *vc, const Stmt *s) {
    Arena *a = vc->e->arena;
    const Buffer *b = s->u.store.buf;
    const Expr *idx = s->u.store.index, *v = s->u.store.value;
    const char *bn = cg_name(vc->e, b, b->name);
    const Local *l = ptrmap_get(&vc->locals, b);
    ptrmap_free(&vc->temps);
    if (s == vc->red && vc->count) { /* the lanes that run update theirs */
        const Expr *x = v->args[1];
        rv_dtype t = v->dtype;
        const char *upd =
            v->kind == EX_ADD
                ? arena_printf(a, "%s + %s", vc->red_lanes, operand(vc, x, P_ADD))
                : arena_printf(a, "%s(%s, %s)",
                               helper(vc, v->kind == EX_MAX ? VH_MAX : VH_MIN,
                                      v->kind == EX_MAX ? "max" : "min", t),
                               vc->red_lanes, full(vc, x));
        line(vc, "%s = %s(%s(%s), %s, %s);\n", vc->red_lanes, helper(vc, VH_SELECT, "select", t),
             helper(vc, VH_PARTIAL, "first", t), vc->count, upd, vc->red_lanes);
        return;
    }
    if (s == vc->red) { /* each lane's partial result */
        const Expr *x = v->args[1];
        if (v->kind == EX_ADD)
            line(vc, "%s += %s;\n", vc->red_lanes, operand(vc, x, P_ADD));
        else
            line(vc, "%s = %s(%s, %s);\n", vc->red_lanes,
                 helper(vc, v->kind == EX_MAX ? VH_MAX : VH_MIN, v->kind == EX_MAX ? "max" : "min",
                        v->dtype),
                 vc->red_lanes, full(vc, x));
        return;
    }
    if (l && !l->vary) { /* a scalar local */
        line(vc, "%s = %s;\n", elem(vc, b, idx), scalar(vc, v).text);
        return;
    }
    if (l || ptrmap_has(&vc->e->vregs, b)) { /* a vector local: `acc += x` for an update */
        const char *dst = elem(vc, b, idx);
        if (v->kind == EX_ADD && v->args[0]->kind == EX_LOAD && v->args[0]->u.buf == b &&
            v->args[0]->args[0] == idx && info_of(vc, v->args[1]).vary) {
            const char *rhs = vx(vc, v->args[1]).text;
            line(vc, "%s += %s;\n", dst, rhs);
            return;
        }
        const char *rhs = full(vc, v);
        line(vc, "%s = %s;\n", dst, rhs);
        return;
    }
    Info i = info_of(vc, idx);
    if (i.affine && i.stride == 1) {
        const char *rhs = full(vc, v);
        if (vc->count)
            line(vc, "%s(&%s[%s], %s, %s);\n", helper(vc, VH_PARTIAL, "storen", b->dtype), bn,
                 lane0(vc, idx).text, rhs, vc->count);
        else
            line(vc, "%s(&%s[%s], %s);\n", helper(vc, VH_TYPE, "store", b->dtype), bn,
                 lane0(vc, idx).text, rhs);
        return;
    }
    /* a scatter, lane by lane */
    VX val = vx(vc, v);
    if (val.vec && val.prec < P_POSTFIX)
        val = named(vc, v, arena_printf(a, "%s_s", bn), val.text);
    const char *lane = lane_var(vc);
    const char *at;
    if (i.affine) {
        at = arena_printf(a, "%s + %s * %lld", wrap(vc, lane0(vc, idx), P_ADD), lane,
                          (long long)i.stride);
    } else {
        VX iv = vx(vc, idx);
        if (iv.prec < P_POSTFIX)
            iv = named(vc, idx, arena_printf(a, "%s_idx", bn), iv.text);
        at = arena_printf(a, "%s[%s]", iv.text, lane);
    }
    if (vc->count)
        line(vc, "for (int %s = 0; %s < %s; %s++)\n", lane, lane, vc->count, lane);
    else
        line(vc, "for (int %s = 0; %s < %d; %s++)\n", lane, lane, vc->lanes, lane);
    line(vc, "    %s[%s] = %s%s%s%s;\n", bn, at, val.vec ? val.text : wrap(vc, val, P_POSTFIX),
         val.vec ? "[" : "", val.vec ? lane : "", val.vec ? "]" : "");
}

static void emit_let(VC *vc, const Stmt *s) {
    const Axis *var = s->u.let.var;
    const Expr *v = s->u.let.value;
    const char *n = cg_name(vc->e, var, var->name);
    bool braces = declared_here(vc, n);
    if (braces) {
        line(vc, "{\n");
        open_block(vc);
    }
    ptrmap_free(&vc->temps);
    Info i = info_of(vc, v);
    if (!i.vary) {
        line(vc, "const %s %s = %s;\n", cg_ctype(v->dtype), n, scalar(vc, v).text);
    } else if (i.affine) {
        line(vc, "const %s %s = %s; /* lane 0; lane l adds %lld * l */\n", cg_ctype(v->dtype), n,
             lane0(vc, v).text, (long long)i.stride);
    } else {
        const char *rhs = full(vc, v);
        line(vc, "const %s %s = %s;\n", vt(vc, v->dtype), n, rhs);
        ptrmap_put(&vc->vlets, var, (void *)var);
    }
    vec_push(&vc->decls, n);
    emit_body(vc, s->u.let.body);
    if (braces) {
        close_block(vc);
        line(vc, "}\n");
    }
}

static void emit_if(VC *vc, const Stmt *s) {
    line(vc, "if (%s) {\n", scalar(vc, s->u.if_.cond).text);
    open_block(vc);
    emit_body(vc, s->u.if_.then_s);
    close_block(vc);
    if (s->u.if_.else_s) {
        line(vc, "} else {\n");
        open_block(vc);
        emit_body(vc, s->u.if_.else_s);
        close_block(vc);
    }
    line(vc, "}\n");
}

static void emit_loop(VC *vc, const Stmt *s) {
    const char *n = cg_name(vc->e, s->u.loop.var, s->u.loop.var->name);
    int64_t ext;
    bool is_const = ir_is_const_int(s->u.loop.extent, &ext);
    if (s->u.loop.kind == LOOP_UNROLL && is_const && ext > 1 && ext <= SCHED_MAX_UNROLL)
        line(vc, "#pragma GCC unroll %lld\n", (long long)ext);
    if (s->u.loop.kind == LOOP_VECTOR)
        line(vc, "/* inner vector loop: serial inside the vector loop around it */\n");
    line(vc, "for (int64_t %s = 0; %s < (%s); %s++) {\n", n, n, scalar(vc, s->u.loop.extent).text,
         n);
    open_block(vc);
    vec_push(&vc->decls, n);
    emit_body(vc, s->u.loop.body);
    close_block(vc);
    line(vc, "}\n");
}

static void emit_alloc(VC *vc, const Stmt *s) {
    const Buffer *b = s->u.alloc.buf;
    const char *n = cg_name(vc->e, b, b->name);
    const Local *l = ptrmap_get(&vc->locals, b);
    int64_t size = 1;
    ir_is_const_int(b->size, &size);
    bool braces = declared_here(vc, n);
    if (braces) {
        line(vc, "{\n");
        open_block(vc);
    }
    bool var = ptrmap_has(&vc->e->scalars, b);
    if (l->vary && var)
        line(vc, "%s %s;\n", vt(vc, b->dtype), n);
    else if (l->vary)
        line(vc, "%s %s[%lld];\n", vt(vc, b->dtype), n, (long long)size);
    else if (var)
        line(vc, "%s %s;\n", cg_ctype(b->dtype), n);
    else
        line(vc, "%s %s[%lld] __attribute__((aligned(64)));\n", cg_ctype(b->dtype), n,
             (long long)size);
    vec_push(&vc->decls, n);
    emit_body(vc, s->u.alloc.body);
    if (braces) {
        close_block(vc);
        line(vc, "}\n");
    }
}

static void emit(VC *vc, const Stmt *s) {
    switch (s->kind) {
    case ST_SEQ:
        for (int i = 0; i < s->u.seq.n; i++)
            emit(vc, s->u.seq.stmts[i]);
        return;
    case ST_LET:
        emit_let(vc, s);
        return;
    case ST_IF:
        emit_if(vc, s);
        return;
    case ST_FOR:
        emit_loop(vc, s);
        return;
    case ST_ALLOC:
        emit_alloc(vc, s);
        return;
    case ST_STORE:
        emit_store(vc, s);
        return;
    default:
        RV_UNREACHABLE(); /* check_stmt rejected it */
    }
}

/* ---- the entry point ---- */

static void vc_free(VC *vc) {
    ptrmap_free(&vc->memo);
    ptrmap_free(&vc->lets);
    ptrmap_free(&vc->inner);
    ptrmap_free(&vc->locals);
    ptrmap_free(&vc->zero);
    ptrmap_free(&vc->vlets);
    ptrmap_free(&vc->temps);
    vec_free(&vc->decls);
    vec_free(&vc->marks);
}

/* Analyses the loop's body for `lanes` lanes; false with vc->why set when
 * it cannot be vectorized. */
static bool analyse(VC *vc, const Stmt *s) {
    bool ok;
    /* a local's varying status feeds back into the expressions: iterate */
    do {
        ptrmap_free(&vc->memo);
        ptrmap_free(&vc->lets);
        ptrmap_free(&vc->inner);
        vc->changed = false;
        vc->red = NULL;
        ok = check_stmt(vc, s->u.loop.body);
    } while (ok && vc->changed);
    if (ok && vc->red) {
        FindLoad f = {.buf = vc->red->u.store.buf};
        if (touches_other(vc, s->u.loop.body, &f))
            return fail(vc, "the loop reads or writes the buffer every lane accumulates into");
    }
    return ok;
}

/* Emits `lanes`-lane vector code for the loop: lane l runs var = base + l,
 * or, with a chunk variable, a loop over `whole` / lanes vectors in which
 * lane l of vector `chunk` runs var = chunk + l (`whole` a C expression
 * in `bound` when it is not a constant). A lane reduction keeps its
 * partial results in a vector declared before the vectors and combined
 * after them. Returns false, emitting nothing, when the body cannot be
 * vectorized. */
static bool emit_vector_block(CgEmit *e, Module *m, const Stmt *s, int lanes, Expr *base,
                              Axis *chunk, int64_t whole, const char *bound, const char *count,
                              int indent, Buf *out, const char **why) {
    VC vc = {.e = e, .m = m, .var = s->u.loop.var, .lanes = lanes, .out = out, .indent = indent,
             .count = count};
    if (!analyse(&vc, s)) {
        *why = vc.why;
        vc_free(&vc);
        return false;
    }
    ptrmap_put(&vc.zero, vc.var, chunk ? ir_var(m, chunk) : base);
    bool braces = !chunk || vc.red;
    vec_push(&vc.marks, 0);
    const char *acc = NULL;
    rv_dtype t = RV_F32;
    if (braces) {
        line(&vc, "{\n");
        open_block(&vc);
    }
    if (vc.red) {
        const Stmt *r = vc.red;
        t = r->u.store.buf->dtype;
        acc = elem(&vc, r->u.store.buf, r->u.store.index);
        vc.red_lanes = temp(&vc, arena_printf(e->arena, "%s_lanes",
                                              cg_name(e, r->u.store.buf, r->u.store.buf->name)));
        if (r->u.store.value->kind == EX_ADD)
            line(&vc, "%s %s = (%s){0}; /* each lane's partial sum */\n", vt(&vc, t), vc.red_lanes,
                 vt(&vc, t));
        else
            line(&vc, "%s %s = %s(%s); /* each lane's partial result */\n", vt(&vc, t),
                 vc.red_lanes, helper(&vc, VH_TYPE, "splat", t), acc);
    }
    if (chunk) {
        const char *cv = cg_name(e, chunk, chunk->name);
        if (bound) {
            line(&vc, "for (int64_t %s = 0; %s < %s; %s += %d) {\n", cv, cv, bound, cv, lanes);
        } else {
            line(&vc, "#pragma GCC unroll %lld\n", (long long)(whole / lanes));
            line(&vc, "for (int64_t %s = 0; %s < %lld; %s += %d) {\n", cv, cv, (long long)whole,
                 cv, lanes);
        }
        open_block(&vc);
    }
    emit_body(&vc, s->u.loop.body);
    if (chunk) {
        close_block(&vc);
        line(&vc, "}\n");
    }
    if (vc.red) {
        ExprKind op = vc.red->u.store.value->kind;
        VHelper h = op == EX_ADD ? VH_HSUM : op == EX_MAX ? VH_HMAX : VH_HMIN;
        const char *fn = helper(&vc, h, op == EX_ADD ? "hsum" : op == EX_MAX ? "hmax" : "hmin", t);
        if (op == EX_ADD)
            line(&vc, "%s += %s(%s);\n", acc, fn, vc.red_lanes);
        else
            line(&vc, "%s = %s(%s);\n", acc, fn, vc.red_lanes);
    }
    if (braces) {
        close_block(&vc);
        line(&vc, "}\n");
    }
    vc_free(&vc);
    return true;
}

static int pow2_floor(int64_t n) {
    int p = 1;
    while (p * 2 <= n)
        p *= 2;
    return p;
}

/*
 * The loop [0, W) runs as vectors of at most NATIVE_LANES lanes, the widest
 * that fill one register of the widest vector unit ravel targets (AVX-512:
 * 16 x 32 bits). Wider GCC vectors are legal but GCC splits them late:
 * a 64-lane erf polynomial spills and partly scalarizes (measured 5-10x
 * slower than four 16-lane ones). So W = 64 becomes a loop over four
 * 16-lane vectors, and what is left past the last whole vector one
 * narrower power-of-two vector (W = 24: 16 + 8), the rest (< 2 lanes or
 * a body that fails to vectorize) the caller's scalar loop.
 */
#define NATIVE_LANES 16

/* Does e divide integers by a value other than a positive constant (in
 * a masked tail, the lanes that do not run hold 0)? */
static void int_div_fn(const Expr *e, void *ctx) {
    int64_t c;
    if ((e->kind == EX_DIV || e->kind == EX_MOD) && ir_is_int(e->dtype) &&
        !(ir_is_const_int(e->args[1], &c) && c > 0))
        *(bool *)ctx = true;
}

/* (StmtMutator: every expression of the body, unchanged) */
static Expr *int_div_expr(StmtMutator *mu, Expr *x) {
    ir_visit(x, int_div_fn, mu->ctx);
    return x;
}

static bool divides_ints(Module *m, const Stmt *s) {
    bool any = false;
    StmtMutator mu = {.fe = int_div_expr, .m = m, .ctx = &any};
    lower_mutate(&mu, (Stmt *)s);
    return any;
}

/*
 * A loop whose extent is not a constant but at most NATIVE_LANES (the
 * last, partial vector of a split by 16 of a variable loop: len[b] -
 * jo*16 < 16 by the simplifier's bound) runs as one vector of the lanes
 * that cover the bound, masked to the extent n: loads and stores of the
 * first n lanes, gathers and scatters of n, a lane reduction updated
 * where a lane runs. The other lanes compute on zeros, whose results go
 * nowhere; a body that divides integers by a non-constant would trap
 * there, and keeps the scalar loop. Returns -1 (every iteration done) or
 * 0 with *why.
 */
static int64_t masked_tail(CgEmit *e, Module *m, const Stmt *s, int indent, Buf *out,
                           const char **why) {
    int64_t hi;
    /* the extent with the values of the LETs it names (hoisted index
     * arithmetic: t3 = len_v - len_v / 16 * 16) */
    Expr *ext = s->u.loop.extent;
    for (int k = 0; k < 8; k++) {
        Expr *x = ir_substitute(m, ext, &e->lets);
        if (x == ext)
            break;
        ext = x;
    }
    if (!ir_upper_bound(m, ext, &hi) || hi > NATIVE_LANES) {
        *why = "its extent is not a constant (nor one below 16 lanes)";
        return 0;
    }
    if (hi < 2 || divides_ints(m, s->u.loop.body)) {
        *why = hi < 2 ? "its extent is below 2" : "a masked tail would divide by its idle lanes' 0";
        return 0;
    }
    int lanes = pow2_floor(hi) < hi ? pow2_floor(hi) * 2 : (int)hi;
    const char *var = cg_name(e, s->u.loop.var, s->u.loop.var->name);
    const char *n = cg_fresh(e, arena_printf(e->arena, "%s_n", s->u.loop.var->name));
    Buf c_ext = {0}, text = {0};
    cg_expr(e, &c_ext, s->u.loop.extent);
    buf_indent(&text, 4 * indent);
    buf_printf(&text,
               "/* vector loop over %s: a tail of %s < %lld iterations, as %d lanes of which "
               "lane l < %s runs %s = l */\n",
               var, n, (long long)hi + 1, lanes, n, var);
    buf_indent(&text, 4 * indent);
    buf_printf(&text, "const int64_t %s = %s;\n", n, buf_str(&c_ext));
    buf_indent(&text, 4 * indent);
    buf_printf(&text, "if (%s > 0)\n", n);
    bool ok = emit_vector_block(e, m, s, lanes, ir_int(m, 0), NULL, 0, NULL, n, indent, &text, why);
    if (ok)
        buf_puts(out, buf_str(&text));
    buf_free(&c_ext);
    buf_free(&text);
    return ok ? -1 : 0;
}

int64_t cg_vector_loop(CgEmit *e, Module *m, const Stmt *s, int indent, Buf *out,
                       const char **why) {
    RV_ASSERT(s->kind == ST_FOR && s->u.loop.kind == LOOP_VECTOR && e->target == CG_TARGET_C);
    int64_t w;
    if (!ir_is_const_int(s->u.loop.extent, &w))
        return masked_tail(e, m, s, indent, out, why);
    if (w < 2 || w > MAX_LANES) {
        *why = "its extent is not within 2..64";
        return 0;
    }
    int lanes = pow2_floor(w) < NATIVE_LANES ? pow2_floor(w) : NATIVE_LANES;
    int64_t whole = w / lanes * lanes;
    const char *var = cg_name(e, s->u.loop.var, s->u.loop.var->name);
    Buf text = {0};
    int64_t done = 0;
    if (whole == lanes) {
        buf_indent(&text, 4 * indent);
        buf_printf(&text, "/* vector loop over %s: %d lanes, lane l runs %s = l */\n", var, lanes,
                   var);
        if (emit_vector_block(e, m, s, lanes, ir_int(m, 0), NULL, 0, NULL, NULL, indent, &text,
                              why))
            done = lanes;
    } else {
        Axis *chunk = ir_axis_new(m, arena_printf(e->arena, "%s_v", s->u.loop.var->name), AX_LOOP,
                                  ir_int(m, whole));
        const char *cv = cg_name(e, chunk, chunk->name);
        buf_indent(&text, 4 * indent);
        buf_printf(&text,
                   "/* vector loop over %s: %lld lanes as %lld vectors of %d, lane l of vector "
                   "%s runs %s = %s + l */\n",
                   var, (long long)whole, (long long)(whole / lanes), lanes, cv, var, cv);
        if (emit_vector_block(e, m, s, lanes, NULL, chunk, whole, NULL, NULL, indent, &text, why))
            done = whole;
    }
    /* the rest past the whole vectors: one narrower vector where it fits */
    if (done && w - done >= 2) {
        int rest = pow2_floor(w - done);
        Buf block = {0};
        buf_indent(&block, 4 * indent);
        buf_printf(&block, "/* vector loop over %s: %d lanes, lane l runs %s = %lld + l */\n", var,
                   rest, var, (long long)done);
        const char *ignored;
        if (emit_vector_block(e, m, s, rest, ir_int(m, done), NULL, 0, NULL, NULL, indent,
                              &block, &ignored)) {
            buf_puts(&text, buf_str(&block));
            done += rest;
        }
        buf_free(&block);
    }
    if (done)
        buf_puts(out, buf_str(&text));
    buf_free(&text);
    return done;
}

/*
 * An element-wise serial loop (c.c decides which) that no schedule
 * vectorized: GCC's own loop vectorizer is off (src/jit/jit.c), so ravel
 * vectorizes it here, as vectorize() would after a split by NATIVE_LANES:
 * a loop over whole vectors of NATIVE_LANES lanes up to extent rounded
 * down, the rest scalar. A constant extent of at most MAX_LANES goes
 * through cg_vector_loop.
 */
const char *cg_vector_map(CgEmit *e, Module *m, const Stmt *s, int indent, Buf *out) {
    RV_ASSERT(s->kind == ST_FOR && e->target == CG_TARGET_C);
    Stmt *v = lower_for(m, s->u.loop.var, s->u.loop.extent, LOOP_VECTOR, s->u.loop.body);
    int64_t w;
    const char *why;
    if (ir_is_const_int(s->u.loop.extent, &w) && w <= MAX_LANES) {
        int64_t done = cg_vector_loop(e, m, v, indent, out, &why);
        return done ? arena_printf(e->arena, "%lld", (long long)done) : NULL;
    }
    Buf ext = {0};
    if (ir_is_const_int(s->u.loop.extent, &w)) {
        buf_printf(&ext, "%lld", (long long)(w / NATIVE_LANES * NATIVE_LANES));
    } else {
        buf_puts(&ext, "(");
        cg_expr(e, &ext, s->u.loop.extent);
        buf_printf(&ext, ") / %d * %d", NATIVE_LANES, NATIVE_LANES);
    }
    const char *bound = arena_printf(e->arena, "%s", buf_str(&ext));
    buf_free(&ext);
    const char *var = cg_name(e, s->u.loop.var, s->u.loop.var->name);
    Axis *chunk = ir_axis_new(m, arena_printf(e->arena, "%s_v", s->u.loop.var->name), AX_LOOP,
                              s->u.loop.extent);
    const char *cv = cg_name(e, chunk, chunk->name);
    Buf text = {0};
    buf_indent(&text, 4 * indent);
    buf_printf(&text,
               "/* element-wise loop over %s as vectors of %d: lane l of vector %s runs %s = %s "
               "+ l */\n",
               var, NATIVE_LANES, cv, var, cv);
    bool ok = emit_vector_block(e, m, v, NATIVE_LANES, NULL, chunk, 0, bound, NULL, indent, &text,
                                &why);
    if (ok)
        buf_puts(out, buf_str(&text));
    buf_free(&text);
    return ok ? bound : NULL;
}
