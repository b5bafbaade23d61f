/*
 * c_expr.c — names, types and scalar expressions in C (and CUDA C).
 *
 * Expressions are printed with the parentheses C's precedence needs and a
 * few more where GCC would warn a reader (&& inside ||, a comparison inside
 * a comparison). Integer arithmetic keeps the IR's meaning: operands of
 * one binary node always share a dtype (the IR's typing inserts casts), and
 * an i64 node whose operands would both be plain C `int` literals gets a
 * cast so C computes it in 64 bits. Division and remainder are C's; floor
 * division, NaN-propagating min/max (the interpreter's rule), sigmoid and
 * gelu are small inline helpers, emitted once per unit and dtype when an
 * expression needs them (cg_emit_helpers).
 *
 * Math calls use the float or double libm function of the node's dtype
 * (expf vs exp); rsqrt is 1/sqrt, gelu the exact erf form. Float literals
 * print with enough digits to round-trip (9 for f32, 17 for f64);
 * infinities and NaN use <math.h>'s macros in C and bit patterns in CUDA,
 * which has no headers under NVRTC.
 *
 * Names: every Axis, Size and Buffer gets one name per kernel, derived
 * from its IR name and made unique (i, i_1, ...). Local names stay clear of
 * C/C++/CUDA keywords, the library functions generated code calls, the
 * fixed parameter names (sizes, bufs, ctx, ...) and the prefixes of global
 * names ("rv_", "kernel_", leading underscores).
 */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"

/* clang-format off */
static const char *const reserved_words[] = {
    /* C11 */
    "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else",
    "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long", "register",
    "restrict", "return", "short", "signed", "sizeof", "static", "struct", "switch", "typedef",
    "union", "unsigned", "void", "volatile", "while",
    /* C++ (CUDA C is C++) */
    "alignas", "alignof", "and", "and_eq", "asm", "bitand", "bitor", "bool", "catch", "char16_t",
    "char32_t", "class", "compl", "const_cast", "constexpr", "decltype", "delete",
    "dynamic_cast", "explicit", "export", "false", "friend", "mutable", "namespace", "new",
    "noexcept", "not", "not_eq", "nullptr", "operator", "or", "or_eq", "private", "protected",
    "public", "reinterpret_cast", "static_assert", "static_cast", "template", "this",
    "thread_local", "throw", "true", "try", "typeid", "typename", "using", "virtual", "wchar_t",
    "xor", "xor_eq",
    /* CUDA built-ins */
    "blockIdx", "threadIdx", "blockDim", "gridDim", "warpSize", "dim3",
    /* types and macros generated code uses */
    "int8_t", "int16_t", "int32_t", "int64_t", "uint8_t", "uint16_t", "uint32_t", "uint64_t",
    "size_t", "ptrdiff_t", "intptr_t", "uintptr_t", "NULL", "INFINITY", "NAN", "HUGE_VAL",
    "INT64_C", "INT64_MIN", "INT64_MAX", "INT32_MIN", "INT32_MAX",
    /* library functions generated code calls */
    "exp", "expf", "log", "logf", "sqrt", "sqrtf", "tanh", "tanhf", "erf", "erff", "fabs",
    "fabsf", "pow", "powf", "main",
    /* fixed parameter and local names */
    "sizes", "bufs", "ctx", "env", "arg", "begin", "end", "tid",
};
/* clang-format on */

static bool is_reserved(const char *s) {
    if (s[0] == '_' || strncmp(s, "rv_", 3) == 0 || strncmp(s, "RV_", 3) == 0 ||
        strncmp(s, "kernel_", 7) == 0)
        return true;
    for (int i = 0; i < RV_COUNT(reserved_words); i++)
        if (strcmp(s, reserved_words[i]) == 0)
            return true;
    return false;
}

void cg_emit_init(CgEmit *e, CgTarget t) {
    memset(e, 0, sizeof *e);
    e->target = t;
    e->arena = arena_new();
}

void cg_emit_free(CgEmit *e) {
    strmap_free(&e->globals);
    strmap_free(&e->locals);
    ptrmap_free(&e->names);
    ptrmap_free(&e->scalars);
    ptrmap_free(&e->unread);
    ptrmap_free(&e->vregs);
    ptrmap_free(&e->shared);
    ptrmap_free(&e->lets);
    arena_free(e->arena);
    memset(e, 0, sizeof *e);
}

void cg_emit_begin_kernel(CgEmit *e) {
    strmap_free(&e->locals);
    ptrmap_free(&e->names);
    ptrmap_free(&e->scalars);
    ptrmap_free(&e->unread);
    ptrmap_free(&e->vregs);
    ptrmap_free(&e->shared);
    ptrmap_free(&e->lets);
}

const char *cg_ctype(rv_dtype t) {
    switch (t) {
    case RV_BOOL:
        return "uint8_t";
    case RV_I32:
        return "int32_t";
    case RV_I64:
        return "int64_t";
    case RV_F32:
        return "float";
    case RV_F64:
        return "double";
    default:
        RV_UNREACHABLE();
    }
}

/* `hint` as an identifier: other characters become '_', a leading digit
 * or an empty name gets a "v" in front. */
static char *sanitize(Arena *a, const char *hint) {
    if (!hint || !*hint)
        hint = "v";
    size_t n = strlen(hint);
    char *s = arena_alloc(a, n + 2);
    size_t j = 0;
    if (isdigit((unsigned char)hint[0]))
        s[j++] = 'v';
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)hint[i];
        s[j++] = (char)(isalnum(c) || c == '_' ? c : '_');
    }
    s[j] = 0;
    return s;
}

static bool taken(const CgEmit *e, const char *s, bool global) {
    if (strmap_has(&e->globals, s))
        return true;
    return !global && (is_reserved(s) || strmap_has(&e->locals, s));
}

/* A name made from hint that is free (in the unit for globals, in the
 * kernel for locals), recorded as taken. */
static const char *unique(CgEmit *e, const char *hint, bool global) {
    const char *base = sanitize(e->arena, hint);
    if (!global && is_reserved(base) &&
        (base[0] == '_' || strncmp(base, "rv_", 3) == 0 || strncmp(base, "RV_", 3) == 0 ||
         strncmp(base, "kernel_", 7) == 0))
        base = arena_printf(e->arena, "v%s%s", base[0] == '_' ? "" : "_", base);
    const char *s = base;
    for (int i = 1; taken(e, s, global); i++)
        s = arena_printf(e->arena, "%s_%d", base, i);
    strmap_put(global ? &e->globals : &e->locals, s, (void *)s);
    return s;
}

const char *cg_name(CgEmit *e, const void *obj, const char *hint) {
    const char *s = ptrmap_get(&e->names, obj);
    if (!s) {
        s = unique(e, hint, false);
        ptrmap_put(&e->names, obj, (void *)s);
    }
    return s;
}

const char *cg_fresh(CgEmit *e, const char *hint) {
    return unique(e, hint, false);
}

const char *cg_global(CgEmit *e, const char *hint) {
    return unique(e, hint, true);
}

const char *cg_global_with(CgEmit *e, const char *hint, const char *suffix) {
    const char *base = sanitize(e->arena, hint), *s = base;
    for (int i = 1;; i++) {
        const char *with = arena_printf(e->arena, "%s%s", s, suffix);
        if (!taken(e, s, true) && !taken(e, with, true)) {
            strmap_put(&e->globals, s, (void *)s);
            strmap_put(&e->globals, with, (void *)with);
            return s;
        }
        s = arena_printf(e->arena, "%s_%d", base, i);
    }
}

bool cg_is_zero(const Expr *x) {
    int64_t v;
    return ir_is_const_int(x, &v) && v == 0;
}

/* ---- expressions ---- */

/* The dtype suffix of helper names: "f32", "i64", ... */
static const char *dsuffix(rv_dtype t) {
    return rv_dtype_name(t);
}

/* The libm function for a math node on dtype t: "expf" or "exp". */
static const char *libm(CgEmit *e, const char *base, rv_dtype t) {
    if (t == RV_F32)
        return arena_printf(e->arena, "%sf", base);
    return base;
}

/* True when C would type x as plain `int` (a small integer literal, or a
 * select or negation of such), so arithmetic on it alone could overflow
 * in 32 bits. */
static bool is_c_int(const Expr *x) {
    switch (x->kind) {
    case EX_CONST_INT:
        return x->dtype != RV_I64 || (x->u.ival >= INT32_MIN && x->u.ival <= INT32_MAX);
    case EX_SELECT:
        return is_c_int(x->args[1]) && is_c_int(x->args[2]);
    case EX_NEG:
        return is_c_int(x->args[0]);
    default:
        return x->dtype != RV_I64 && x->dtype != RV_F32 && x->dtype != RV_F64;
    }
}

/* The C level of an infix operator's ravel level (ir.h, Prec). */
static const int c_level[] = {
    [PREC_OR] = P_OR,   [PREC_AND] = P_AND, [PREC_EQ] = P_EQ,
    [PREC_REL] = P_REL, [PREC_ADD] = P_ADD, [PREC_MUL] = P_MUL,
};

int cg_expr_prec(const Expr *x) {
    switch (x->kind) {
    case EX_CONST_INT:
        return x->u.ival < 0 ? P_UNARY : P_POSTFIX;
    case EX_CONST_FLOAT:
        return signbit(x->u.fval) ? P_UNARY : P_POSTFIX;
    case EX_NEG:
    case EX_NOT:
        return P_UNARY;
    case EX_CAST:
        return x->dtype == RV_BOOL ? P_EQ : P_UNARY;
    case EX_RSQRT:
        return P_MUL; /* 1 / sqrt(x) */
    case EX_SELECT:
        return P_COND;
    default: /* C binds ravel's infix operators as ravel does */
        return ir_expr_info[x->kind].flags & F_INFIX ? c_level[ir_expr_info[x->kind].prec]
                                                     : P_POSTFIX;
    }
}

static void expr_at(CgEmit *e, Buf *b, const Expr *x, int need);

static void int_literal(CgEmit *e, Buf *b, rv_dtype t, int64_t v) {
    if (t == RV_I64 && v == INT64_MIN)
        buf_puts(b, e->target == CG_TARGET_C ? "INT64_MIN" : "(-9223372036854775807LL - 1)");
    else if (t == RV_I64 && (v < INT32_MIN || v > INT32_MAX))
        buf_printf(b, e->target == CG_TARGET_C ? "INT64_C(%lld)" : "%lldLL", (long long)v);
    else
        buf_printf(b, "%lld", (long long)v);
}

static void float_literal(CgEmit *e, Buf *b, rv_dtype t, double v) {
    bool f32 = t == RV_F32, cuda = e->target == CG_TARGET_CUDA;
    if (isnan(v)) {
        if (cuda)
            buf_puts(b, f32 ? "__int_as_float(0x7fc00000)"
                            : "__longlong_as_double(0x7ff8000000000000LL)");
        else
            buf_puts(b, f32 ? "NAN" : "(double)NAN");
        return;
    }
    if (isinf(v)) {
        if (v < 0)
            buf_putc(b, '-');
        if (cuda)
            buf_puts(b, f32 ? "__int_as_float(0x7f800000)"
                            : "__longlong_as_double(0x7ff0000000000000LL)");
        else
            buf_puts(b, f32 ? "INFINITY" : "HUGE_VAL");
        return;
    }
    char s[32];
    ir_float_shortest(s, v, t); /* for readability */
    buf_puts(b, s);
    if (!strpbrk(s, ".e"))
        buf_puts(b, ".0");
    if (f32)
        buf_putc(b, 'f');
}

/* A call of helper h on dtype t, recording that the unit needs it. */
static void helper_call(CgEmit *e, Buf *b, CgHelper h, const Expr *x) {
    static const char *const names[CG_H_COUNT] = {"floordiv", "floormod", "min", "max",
                                                  "abs",      "sigmoid",  "gelu"};
    rv_dtype t = x->args[0]->dtype;
    e->helpers[h] |= 1u << t;
    buf_printf(b, "rv_%s_%s(", names[h], dsuffix(t));
    for (int i = 0; i < x->n; i++) {
        if (i)
            buf_puts(b, ", ");
        expr_at(e, b, x->args[i], P_COND);
    }
    buf_putc(b, ')');
}

static void call1(CgEmit *e, Buf *b, const char *fn, const Expr *x) {
    buf_printf(b, "%s(", fn);
    for (int i = 0; i < x->n; i++) {
        if (i)
            buf_puts(b, ", ");
        expr_at(e, b, x->args[i], P_COND);
    }
    buf_putc(b, ')');
}

/* Left and right operands of an infix operator at precedence p. */
static void infix(CgEmit *e, Buf *b, const Expr *x, const char *op, int pl, int pr) {
    const Expr *l = x->args[0], *r = x->args[1];
    /* i64 arithmetic on two C ints: widen the left operand */
    if (x->dtype == RV_I64 && (ir_expr_info[x->kind].flags & F_ARITH) && is_c_int(l) &&
        is_c_int(r)) {
        buf_puts(b, "(int64_t)");
        expr_at(e, b, l, P_UNARY);
    } else {
        expr_at(e, b, l, pl);
    }
    buf_printf(b, " %s ", op);
    expr_at(e, b, r, pr);
}

/* The need for an operand of || or && : a nested && under || (or the
 * other way) gets parentheses, a chain of the same operator does not. */
static int logic_need(const Expr *x, const Expr *child) {
    return child->kind == x->kind ? cg_expr_prec(x) : P_AND + 1;
}

/* A math function: the libm function ops.def names for it, or where it
 * names none, our own form. */
static void math_call(CgEmit *e, Buf *b, const Expr *x) {
    rv_dtype t = x->dtype;
    switch (x->kind) {
    case EX_RSQRT:
        buf_puts(b, t == RV_F32 ? "1.0f / " : "1.0 / ");
        call1(e, b, libm(e, "sqrt", t), x);
        return;
    case EX_SIGMOID:
        helper_call(e, b, CG_H_SIGMOID, x);
        return;
    case EX_GELU:
        helper_call(e, b, CG_H_GELU, x);
        return;
    default:
        RV_ASSERT(ir_expr_info[x->kind].libm);
        call1(e, b, libm(e, ir_expr_info[x->kind].libm, t), x);
        return;
    }
}

static void expr_node(CgEmit *e, Buf *b, const Expr *x) {
    rv_dtype t = x->dtype;
    int p = cg_expr_prec(x);
    switch (x->kind) {
    case EX_CONST_INT:
        int_literal(e, b, t, x->u.ival);
        return;
    case EX_CONST_FLOAT:
        float_literal(e, b, t, x->u.fval);
        return;
    case EX_SIZE:
        buf_puts(b, cg_name(e, x->u.size, x->u.size->name));
        return;
    case EX_VAR:
        buf_puts(b, cg_name(e, x->u.axis, x->u.axis->name));
        return;
    case EX_LOAD: {
        const Buffer *buf = x->u.buf;
        buf_puts(b, cg_name(e, buf, buf->name));
        if (ptrmap_has(&e->scalars, buf))
            return;
        buf_putc(b, '[');
        expr_at(e, b, x->args[0], P_LOWEST);
        buf_putc(b, ']');
        return;
    }
    case EX_NEG: {
        const Expr *a = x->args[0];
        buf_putc(b, '-');
        /* never "--x" or "--1" */
        bool minus = a->kind == EX_NEG || (cg_expr_prec(a) == P_UNARY && a->n == 0);
        expr_at(e, b, a, minus ? P_POSTFIX : P_UNARY);
        return;
    }
    case EX_NOT:
        buf_putc(b, '!');
        expr_at(e, b, x->args[0], P_UNARY);
        return;
    case EX_ADD:
    case EX_SUB:
    case EX_MUL:
    case EX_DIV:
    case EX_MOD:
        infix(e, b, x, ir_expr_info[x->kind].text, p, p + 1);
        return;
#define CMP(k, text, prec, flags) case EX_##k:
#include "ir/ops.def"
#undef CMP
        /* comparisons of comparisons get parentheses */
        infix(e, b, x, ir_expr_info[x->kind].text, P_REL + 1, P_REL + 1);
        return;
    case EX_AND:
    case EX_OR:
        expr_at(e, b, x->args[0], logic_need(x, x->args[0]));
        buf_printf(b, " %s ", ir_expr_info[x->kind].text);
        expr_at(e, b, x->args[1], logic_need(x, x->args[1]) + (x->args[1]->kind == x->kind));
        return;
    case EX_FLOORDIV:
        helper_call(e, b, CG_H_FLOORDIV, x);
        return;
    case EX_FLOORMOD:
        helper_call(e, b, CG_H_FLOORMOD, x);
        return;
    case EX_MIN:
        helper_call(e, b, CG_H_MIN, x);
        return;
    case EX_MAX:
        helper_call(e, b, CG_H_MAX, x);
        return;
    case EX_ABS:
        if (ir_is_float(t))
            call1(e, b, libm(e, "fabs", t), x);
        else
            helper_call(e, b, CG_H_ABS, x);
        return;
    case EX_SELECT:
        expr_at(e, b, x->args[0], P_OR);
        buf_puts(b, " ? ");
        expr_at(e, b, x->args[1], P_OR);
        buf_puts(b, " : ");
        expr_at(e, b, x->args[2], P_COND);
        return;
    case EX_CAST:
        if (t == RV_BOOL) {
            expr_at(e, b, x->args[0], P_REL);
            buf_puts(b, " != 0");
        } else {
            buf_printf(b, "(%s)", cg_ctype(t));
            expr_at(e, b, x->args[0], P_UNARY);
        }
        return;
#define MATH(k, text, arity, libm, def) case EX_##k:
#include "ir/ops.def"
#undef MATH
        math_call(e, b, x);
        return;
    case EX_READ:
    case EX_UFCALL:
    case EX_REDUCE:
    case EX_COUNT:
        break;
    }
    char *s = ir_expr_str(x);
    base_panic(__FILE__, __LINE__, "codegen: %s node in the loop IR (lowering removes it): %s",
               ir_expr_info[x->kind].name, s);
}

static void expr_at(CgEmit *e, Buf *b, const Expr *x, int need) {
    bool paren = cg_expr_prec(x) < need;
    if (paren)
        buf_putc(b, '(');
    expr_node(e, b, x);
    if (paren)
        buf_putc(b, ')');
}

void cg_expr(CgEmit *e, Buf *b, const Expr *x) {
    expr_at(e, b, x, P_LOWEST);
}

/* ---- helpers ---- */

void cg_put_template(Buf *b, const char *tmpl, const CgTemplate *v) {
    rv_dtype t = v->t;
    for (const char *p = tmpl; *p; p++) {
        if (*p != '$') {
            buf_putc(b, *p);
            continue;
        }
        switch (*++p) {
        case 'T': /* the C type */
        case 'E': /* a vector's element type */
            buf_puts(b, cg_ctype(t));
            break;
        case 'A': /* an accumulator of t */
            buf_puts(b, ir_is_float(t) ? cg_ctype(t) : "int64_t");
            break;
        case 'S': /* the suffix of helper names: f32, f32x16 */
            if (v->lanes)
                buf_printf(b, "%sx%d", rv_dtype_name(t), v->lanes);
            else
                buf_puts(b, dsuffix(t));
            break;
        case 'F': /* libm suffix, also of float literals: "f" or "" */
            buf_puts(b, t == RV_F32 ? "f" : "");
            break;
        case 'Q': /* function qualifiers */
            /* unused: a helper of a type group (rv_load_i32x16 beside the
             * i32 masks) may go unused, which clang -Wall reports */
            buf_puts(b, v->target == CG_TARGET_CUDA ? "static __device__ __forceinline__"
                                                    : "static inline __attribute__((unused))");
            break;
        case 'V': /* the vector type */
            buf_printf(b, "rv_%sx%d", rv_dtype_name(t), v->lanes);
            break;
        case 'I': /* its comparison-mask type */
            buf_printf(b, "rv_%sx%d", rv_dtype_name(v->mask), v->lanes);
            break;
        case 'N': /* lanes */
            buf_printf(b, "%d", v->lanes);
            break;
        case 'B': /* the vector's bytes */
            buf_printf(b, "%d", v->lanes * (int)rv_dtype_size(t));
            break;
        case 'W': /* the largest value of the mask's lane type, in hex */
            buf_puts(b, rv_dtype_size(t) == 8 ? "0x7fffffffffffffff" : "0x7fffffff");
            break;
        default:
            RV_UNREACHABLE();
        }
    }
}

// clang-format off
static const char *const int_helpers[CG_H_COUNT] = {
    [CG_H_FLOORDIV] =
        "/* Division rounding toward -infinity. */\n"
        "$Q $T rv_floordiv_$S($T a, $T b) {\n"
        "    $T q = a / b;\n"
        "    return a % b != 0 && (a < 0) != (b < 0) ? q - 1 : q;\n"
        "}\n",
    [CG_H_FLOORMOD] =
        "/* Remainder with the sign of the divisor. */\n"
        "$Q $T rv_floormod_$S($T a, $T b) {\n"
        "    $T r = a % b;\n"
        "    return r != 0 && (r < 0) != (b < 0) ? r + b : r;\n"
        "}\n",
    [CG_H_MIN] = "$Q $T rv_min_$S($T a, $T b) {\n    return a < b ? a : b;\n}\n",
    [CG_H_MAX] = "$Q $T rv_max_$S($T a, $T b) {\n    return a > b ? a : b;\n}\n",
    [CG_H_ABS] = "$Q $T rv_abs_$S($T a) {\n    return a < 0 ? -a : a;\n}\n",
};
static const char *const float_helpers[CG_H_COUNT] = {
    [CG_H_MIN] =
        "/* min and max propagate NaN (fmin and fmax would drop it). */\n"
        "$Q $T rv_min_$S($T a, $T b) {\n    return a != a || a < b ? a : b;\n}\n",
    [CG_H_MAX] = "$Q $T rv_max_$S($T a, $T b) {\n    return a != a || a > b ? a : b;\n}\n",
    [CG_H_SIGMOID] =
        "$Q $T rv_sigmoid_$S($T x) {\n    return 1 / (1 + exp$F(-x));\n}\n",
    [CG_H_GELU] =
        "/* Exact gelu: x/2 (1 + erf(x / sqrt(2))), as x/2 erfc(-x / sqrt(2)),\n"
        " * which does not cancel in the negative tail. */\n"
        "$Q $T rv_gelu_$S($T x) {\n"
        "    return 0.5$F * x * erfc$F(x * -0.70710678118654752440$F);\n"
        "}\n",
};
// clang-format on

void cg_emit_helpers(const CgEmit *e, Buf *b) {
    for (int h = 0; h < CG_H_COUNT; h++) {
        for (int t = 0; t < RV_DTYPE_COUNT; t++) {
            if (!(e->helpers[h] & (1u << t)))
                continue;
            const char *tmpl = ir_is_float((rv_dtype)t) ? float_helpers[h] : int_helpers[h];
            RV_ASSERT(tmpl);
            cg_put_template(b, tmpl, &(CgTemplate){.t = (rv_dtype)t, .target = e->target});
            buf_putc(b, '\n');
        }
    }
    cg_vector_helpers(e, b); /* vector types and helpers (c_vector.c) */
}

void cg_expr_operand(CgEmit *e, Buf *b, const Expr *x) {
    bool paren = x->kind == EX_SELECT;
    if (paren)
        buf_putc(b, '(');
    cg_expr(e, b, x);
    if (paren)
        buf_putc(b, ')');
}
