/*
 * print.c — the tensor IR as ravel source text.
 *
 * The printer's contract is the round trip: printing a module and parsing
 * the text back (src/lang) gives the same IR, so print(parse(print(m)))
 * is textually print(m). Everything below serves that contract while
 * keeping the text close to what a person would write:
 *
 *   - Minimal parentheses. Operators print infix with C's precedence
 *     levels (the prec column of ops.def); an operand gets parentheses
 *     only when its level is lower than its position needs (the right
 *     operand of a left-associative operator needs one level more).
 *   - Reductions are prefix forms whose body is a multiplicative-level
 *     expression: `sum(k < K) a * b + c` is `(sum(k < K) a * b) + c`. So a
 *     body below that level is parenthesized, and a reduction whose body
 *     would swallow a following `*`, `/` or `%` is parenthesized as a
 *     whole. The `tight` flag carries "a multiplicative operator follows
 *     this text" down the right spine of an operand.
 *   - Constants. Integer literals are i64 and float literals f64; both
 *     adapt to a non-constant partner of another width (ir.h, "Typing"). A
 *     constant whose dtype its partner would give it anyway prints bare
 *     (`0.5 * X[i]` with X f32); any other i32/f32 constant prints as a
 *     cast of a literal (`f32(0.5)`), which the constructors fold back to
 *     the same constant. Floats print with the fewest digits that read
 *     back to the same value in their dtype, always with a '.' or an 'e'.
 *   - Casts inserted by typing print as calls (`f32(i)`): explicit casts
 *     parse to the same node.
 *   - Compute extents are omitted where the language would infer the same
 *     expression from the body (the first tensor or UF dimension the bare
 *     axis indexes, as ir_infer_extent does) and written out otherwise.
 *     The check here only compares; it never builds nodes, so printing a
 *     module leaves it untouched.
 *
 * A loop-IR LOAD prints as `buf[index]` so dumps and diagnostics can show
 * lowered expressions; it has no source form and never occurs in a module.
 *
 * Items print in a canonical order — sizes, structures, ufuns, tensors in
 * definition order, then schedule blocks — which is a valid definition
 * order because each group may refer only to the ones before it (a
 * structure's ranges use sizes only). A structure prints as its
 * declaration, never as the ufuns and hidden sizes it owns; a recursion
 * group prints as one `recurse R over T { ... }` block where its first
 * member was defined.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"

/* ---- constants ---- */

void ir_float_shortest(char s[32], double v, rv_dtype t) {
    RV_ASSERT(isfinite(v));
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(s, 32, "%.*g", prec, v);
        double r = strtod(s, NULL);
        if (t == RV_F32 ? (float)r == (float)v : r == v)
            return;
    }
}

/* The shortest decimal form of v, with a '.' or an exponent so the lexer
 * reads a float. */
static void print_float(Buf *b, double v, rv_dtype t) {
    if (isnan(v)) {
        buf_puts(b, "(0. / 0.)");
        return;
    }
    if (isinf(v)) { /* a literal beyond the f64 range reads as infinity */
        buf_puts(b, v > 0 ? "1e999" : "-1e999");
        return;
    }
    char s[32];
    ir_float_shortest(s, v, t);
    buf_puts(b, s);
    if (!strpbrk(s, ".e"))
        buf_putc(b, '.');
}

static bool is_literal(const Expr *e) {
    return (e->kind == EX_CONST_INT && e->dtype != RV_BOOL) || e->kind == EX_CONST_FLOAT;
}

/* A constant prints bare when its own literal type (i64, f64) is its dtype,
 * or when a non-constant partner of its dtype makes the literal adapt. */
static bool prints_bare(const Expr *e, const Expr *partner) {
    if (e->dtype == RV_I64 || e->dtype == RV_F64)
        return true;
    return partner && !is_literal(partner) && partner->kind != EX_CONST_INT &&
           partner->dtype == e->dtype;
}

static void print_const(Buf *b, const Expr *e, const Expr *partner) {
    if (e->kind == EX_CONST_INT && e->dtype == RV_BOOL) {
        buf_puts(b, e->u.ival ? "true" : "false");
        return;
    }
    bool bare = prints_bare(e, partner);
    if (!bare)
        buf_printf(b, "%s(", rv_dtype_name(e->dtype));
    if (e->kind == EX_CONST_INT && e->u.ival == INT64_MIN) /* no literal: 2^63 is too large */
        buf_printf(b, "(%lld - 1)", (long long)(INT64_MIN + 1));
    else if (e->kind == EX_CONST_INT)
        buf_printf(b, "%lld", (long long)e->u.ival);
    else
        print_float(b, e->u.fval, e->dtype);
    if (!bare)
        buf_putc(b, ')');
}

/* Does the constant print with a leading '-' (a unary-level form)? */
static bool const_negative(const Expr *e) {
    return (e->kind == EX_CONST_INT && e->dtype != RV_BOOL && e->u.ival < 0) ||
           (e->kind == EX_CONST_FLOAT && signbit(e->u.fval) && !isnan(e->u.fval));
}

/* ---- expressions ---- */

static void print_rec(Buf *b, const Expr *e, int minprec, bool tight, const Expr *partner);

static void print_args(Buf *b, const Expr *e, int from) {
    for (int i = from; i < e->n; i++) {
        if (i > from)
            buf_puts(b, ", ");
        print_rec(b, e->args[i], PREC_NONE, false, NULL);
    }
}

/* An axis binder `name < extent` (extent at full precedence). */
static void print_binder(Buf *b, const Axis *a) {
    buf_printf(b, "%s < ", a->name);
    print_rec(b, a->extent, PREC_NONE, false, NULL);
}

void ir_print_reduce(Buf *b, const Expr *e, IrPrintFn print) {
    buf_printf(b, "%s(", ir_reduce_name(e->u.red.rk));
    for (int i = 0; i < e->u.red.naxes; i++) {
        const Axis *a = e->u.red.axes[i];
        buf_printf(b, "%s%s < ", i ? ", " : "", a->name);
        if (a->extent)
            print(b, a->extent, PREC_NONE);
        else
            buf_puts(b, "?");
    }
    buf_puts(b, ") ");
    print(b, e->args[0], PREC_MUL);
}

/* print_rec with no context, for ir_print_reduce. */
static void print_plain(Buf *b, const Expr *e, int minprec) {
    print_rec(b, e, minprec, false, NULL);
}

static void print_reduce(Buf *b, const Expr *e, bool tight) {
    if (tight)
        buf_putc(b, '(');
    ir_print_reduce(b, e, print_plain);
    if (tight)
        buf_putc(b, ')');
}

/* Prints e where an expression of level >= minprec is expected. `tight`:
 * a multiplicative operator follows. `partner`: the other operand of the
 * enclosing binary operator or select, for literal adaptation. */
static void print_rec(Buf *b, const Expr *e, int minprec, bool tight, const Expr *partner) {
    const ExprInfo *info = &ir_expr_info[e->kind];
    switch (e->kind) {
    case EX_CONST_INT:
    case EX_CONST_FLOAT:
        print_const(b, e, partner);
        return;
    case EX_SIZE:
        buf_puts(b, e->u.size->name);
        return;
    case EX_VAR:
        buf_puts(b, e->u.axis->name);
        return;
    case EX_READ:
    case EX_UFCALL:
        buf_printf(b, "%s[", e->kind == EX_READ ? e->u.tensor->name : e->u.uf->name);
        print_args(b, e, 0);
        buf_putc(b, ']');
        return;
    case EX_LOAD:
        buf_printf(b, "%s[", e->u.buf->name);
        print_rec(b, e->args[0], PREC_NONE, false, NULL);
        buf_putc(b, ']');
        return;
    case EX_REDUCE:
        print_reduce(b, e, tight);
        return;
    case EX_CAST:
        buf_printf(b, "%s(", rv_dtype_name(e->dtype));
        print_rec(b, e->args[0], PREC_NONE, false, NULL);
        buf_putc(b, ')');
        return;
    case EX_NEG:
    case EX_NOT:
        buf_puts(b, info->text);
        /* "- -x", not "--x" */
        if (e->kind == EX_NEG && (e->args[0]->kind == EX_NEG || const_negative(e->args[0])))
            buf_putc(b, ' ');
        print_rec(b, e->args[0], PREC_UNARY, tight, NULL);
        return;
    case EX_SELECT:
        buf_puts(b, "select(");
        print_rec(b, e->args[0], PREC_NONE, false, NULL);
        buf_puts(b, ", ");
        print_rec(b, e->args[1], PREC_NONE, false, e->args[2]);
        buf_puts(b, ", ");
        print_rec(b, e->args[2], PREC_NONE, false, e->args[1]);
        buf_putc(b, ')');
        return;
    default:
        break;
    }
    if (info->flags & F_INFIX) {
        int p = info->prec;
        bool paren = p < minprec;
        if (paren) {
            buf_putc(b, '(');
            tight = false;
        }
        print_rec(b, e->args[0], p, p == PREC_MUL, e->args[1]);
        buf_printf(b, " %s ", info->text);
        print_rec(b, e->args[1], p + 1, tight, e->args[0]);
        if (paren)
            buf_putc(b, ')');
        return;
    }
    /* calls: math functions, min/max, floordiv/floormod, pow */
    buf_printf(b, "%s(", info->text);
    if (e->n == 2) {
        print_rec(b, e->args[0], PREC_NONE, false, e->args[1]);
        buf_puts(b, ", ");
        print_rec(b, e->args[1], PREC_NONE, false, e->args[0]);
    } else {
        print_args(b, e, 0);
    }
    buf_putc(b, ')');
}

void ir_print_expr(Buf *b, const Expr *e) {
    if (!e) {
        buf_puts(b, "(null)");
        return;
    }
    print_rec(b, e, PREC_NONE, false, NULL);
}

char *ir_expr_str(const Expr *e) {
    Buf b = {0};
    ir_print_expr(&b, e);
    return buf_take(&b);
}

/* ---- extent inference, read-only ---- */

/* Is `e`, with the axes of `from[0..n)` replaced by `to[0..n)`, the same
 * expression as `target`? A structural comparison that builds nothing; it
 * may answer false for equal expressions (constant folding), which only
 * makes the printer write an extent out. */
static bool same_subst(const Expr *e, Axis *const *from, Expr *const *to, int n,
                       const Expr *target) {
    if (e->kind == EX_VAR)
        for (int i = 0; i < n; i++)
            if (e->u.axis == from[i])
                return to[i] == target;
    if (e->kind != target->kind || e->dtype != target->dtype || e->n != target->n)
        return false;
    switch (e->kind) {
    case EX_CONST_INT:
        if (e->u.ival != target->u.ival)
            return false;
        break;
    case EX_CONST_FLOAT:
        if (memcmp(&e->u.fval, &target->u.fval, sizeof(double)) != 0)
            return false;
        break;
    case EX_SIZE:
    case EX_VAR:
    case EX_READ:
    case EX_UFCALL:
        if (e->u.tensor != target->u.tensor) /* same pointer member of the union */
            return false;
        break;
    case EX_REDUCE:
        return false;
    default:
        break;
    }
    for (int i = 0; i < e->n; i++)
        if (!same_subst(e->args[i], from, to, n, target->args[i]))
            return false;
    return true;
}

typedef struct FirstUse {
    const Axis *a;
    const Expr *found; /* the READ / UFCALL */
    int pos;
    PtrMap seen;
} FirstUse;

/* The first READ or UFCALL indexed by the bare variable, pre-order and
 * left to right: the same search as ir_infer_extent. */
static void first_use(const Expr *e, FirstUse *fu) {
    if (fu->found || ptrmap_has(&fu->seen, e))
        return;
    ptrmap_put(&fu->seen, e, (void *)e);
    if (e->kind == EX_READ || e->kind == EX_UFCALL)
        for (int i = 0; i < e->n; i++)
            if (e->args[i]->kind == EX_VAR && e->args[i]->u.axis == fu->a) {
                fu->found = e;
                fu->pos = i;
                return;
            }
    for (int i = 0; i < e->n; i++)
        first_use(e->args[i], fu);
}

/* Would the parser infer axis a's extent from the operation's bodies? */
static bool extent_inferable(const Op *op, const Axis *a) {
    const Expr *bodies[3] = {op->body, op->else_body, op->pred};
    const Expr *found = NULL;
    int pos = 0;
    for (int i = 0; i < 3 && !found; i++) {
        if (!bodies[i])
            continue;
        FirstUse fu = {a, NULL, 0, {0}};
        first_use(bodies[i], &fu);
        ptrmap_free(&fu.seen);
        found = fu.found;
        pos = fu.pos;
    }
    if (!found)
        return false;
    Axis *const *axes = found->kind == EX_READ ? found->u.tensor->axes : found->u.uf->args;
    if (!axes[pos]->extent)
        return false;
    return same_subst(axes[pos]->extent, axes, found->args, pos, a->extent);
}

/* ---- items ---- */

static void print_string(Buf *b, const char *s) {
    buf_putc(b, '"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            buf_printf(b, "\\%c", *s);
        else if (*s == '\n')
            buf_puts(b, "\\n");
        else if (*s == '\t')
            buf_puts(b, "\\t");
        else
            buf_putc(b, *s);
    }
    buf_putc(b, '"');
}

/* `name < extent` or, for an unnamed dimension (`_<pos>`), the extent. */
static void print_dim(Buf *b, const Axis *a, int pad) {
    if (a->name[0] == '_')
        print_rec(b, a->extent, PREC_NONE, false, NULL);
    else
        print_binder(b, a);
    if (pad > 1)
        buf_printf(b, " pad %d", pad);
}

/* `f32[d0, d1]` */
static void print_type(Buf *b, const Tensor *t) {
    buf_printf(b, "%s[", rv_dtype_name(t->dtype));
    for (int i = 0; i < t->ndim; i++) {
        if (i)
            buf_puts(b, ", ");
        print_dim(b, t->axes[i], t->pad[i]);
    }
    buf_putc(b, ']');
}

static void print_ufun(Buf *b, const Ufun *f) {
    buf_printf(b, "ufun %s[", f->name);
    for (int i = 0; i < f->nargs; i++) {
        if (i)
            buf_puts(b, ", ");
        print_dim(b, f->args[i], 1);
    }
    buf_puts(b, "] in ");
    ir_print_expr(b, f->lo);
    buf_puts(b, "..");
    ir_print_expr(b, f->hi);
    buf_putc(b, '\n');
}

/* ` = body` or ` = if pred then body else else_body`, and the newline. */
static void print_body(Buf *b, const Op *op) {
    buf_puts(b, " = ");
    if (op->pred) {
        buf_puts(b, "if ");
        ir_print_expr(b, op->pred);
        buf_puts(b, " then ");
        ir_print_expr(b, op->body);
        buf_puts(b, " else ");
        ir_print_expr(b, op->else_body);
    } else {
        ir_print_expr(b, op->body);
    }
    buf_putc(b, '\n');
}

/* Y[i, j < E] (: dtype)? = body */
static void print_compute(Buf *b, const Tensor *t) {
    const Op *op = t->op;
    buf_printf(b, "%s[", t->name);
    for (int i = 0; i < t->ndim; i++) {
        const Axis *a = t->axes[i];
        if (i)
            buf_puts(b, ", ");
        if (a->extent && !extent_inferable(op, a))
            print_binder(b, a);
        else
            buf_puts(b, a->name);
        if (t->pad[i] > 1)
            buf_printf(b, " pad %d", t->pad[i]);
    }
    buf_putc(b, ']');
    if (op->body && op->body->dtype != t->dtype)
        buf_printf(b, " : %s", rv_dtype_name(t->dtype));
    print_body(b, op);
}

/* ---- structures and recursion groups ---- */

static const char *const struct_kind_name[RV_STRUCT_KIND_COUNT] = {"sequence", "tree", "dag"};

/* Is the size or ufun `obj` part of a structure (printed with it)? */
static bool owned_by_structure(const Module *m, const void *obj) {
    for (int i = 0; i < m->structures.len; i++) {
        const Structure *st = m->structures.data[i];
        if (obj == st->child || obj == st->nchild || obj == st->root || obj == st->nbatch ||
            obj == st->batch_begin || obj == st->batch_length || obj == st->nunroll ||
            obj == st->unroll_begin || obj == st->unroll_length || obj == st->unroll_node)
            return true;
        for (int k = 0; k < st->ndata; k++)
            if (obj == st->data[k])
                return true;
    }
    return false;
}

/* structure T : tree(N, 2) {
 *     children child, nchild
 *     roots root[s < B]
 *     data word in 0..9999, label in 0..4
 * } */
static void print_structure(Buf *b, const Structure *st) {
    buf_printf(b, "structure %s : %s(%s", st->name, struct_kind_name[st->kind], st->nodes->name);
    if (st->kind != RV_STRUCT_SEQUENCE)
        buf_printf(b, ", %d", st->max_children);
    buf_printf(b, ") {\n    children %s, %s\n", st->child->name, st->nchild->name);
    if (st->root) {
        buf_printf(b, "    roots %s[", st->root->name);
        print_dim(b, st->root->args[0], 1);
        buf_puts(b, "]\n");
    }
    for (int i = 0; i < st->ndata; i++) {
        const Ufun *f = st->data[i];
        buf_printf(b, "%s%s in ", i ? ", " : "    data ", f->name);
        ir_print_expr(b, f->lo);
        buf_puts(b, "..");
        ir_print_expr(b, f->hi);
    }
    buf_puts(b, st->ndata ? "\n}\n" : "}\n");
}

/* A member of a recursion group: `h[n, i < E] (: dtype)? = body`, its
 * node axis bare and every other extent written (the language requires
 * them), its dtype unless f32 (bodies are converted to it). */
static void print_member(Buf *b, const Tensor *t) {
    const Op *op = t->op;
    buf_printf(b, "    %s[", t->name);
    for (int i = 0; i < t->ndim; i++) {
        if (i) {
            buf_puts(b, ", ");
            print_binder(b, t->axes[i]);
        } else {
            buf_puts(b, t->axes[0]->name);
        }
        if (t->pad[i] > 1)
            buf_printf(b, " pad %d", t->pad[i]);
    }
    buf_putc(b, ']');
    if (t->dtype != RV_F32)
        buf_printf(b, " : %s", rv_dtype_name(t->dtype));
    print_body(b, op);
}

static void print_recurse(Buf *b, const Recurse *r) {
    buf_printf(b, "recurse %s over %s {\n", r->name, r->st->name);
    for (int i = 0; i < r->members.len; i++)
        print_member(b, r->members.data[i]);
    buf_puts(b, "}\n");
}

static void print_tensor(Buf *b, const Tensor *t) {
    switch (t->op->kind) {
    case OP_INPUT:
        buf_printf(b, "%s %s : ", t->param ? "param" : "input", t->name);
        print_type(b, t);
        buf_putc(b, '\n');
        return;
    case OP_COMPUTE:
    case OP_COND:
        print_compute(b, t);
        return;
    case OP_EXTERN:
        buf_printf(b, "%s : ", t->name);
        print_type(b, t);
        buf_puts(b, " = extern ");
        print_string(b, t->op->kernel);
        buf_putc(b, '(');
        for (int i = 0; i < t->op->nin; i++)
            buf_printf(b, "%s%s", i ? ", " : "", t->op->inputs[i]->name);
        buf_puts(b, ")\n");
        return;
    case OP_RECURSE: /* its group's first member prints the group */
        if (t->op->rec->members.data[0] == t)
            print_recurse(b, t->op->rec);
        return;
    default:
        RV_UNREACHABLE();
    }
}

static void print_sched_arg(Buf *b, const SchedArg *a) {
    if (a->key)
        buf_printf(b, "%s=", a->key);
    switch (a->kind) {
    case SA_IDENT:
        buf_puts(b, a->s);
        break;
    case SA_INT:
        buf_printf(b, "%lld", (long long)a->i);
        break;
    case SA_STRING:
        print_string(b, a->s);
        break;
    default:
        RV_UNREACHABLE();
    }
}

void ir_print_schedule(Buf *b, const SchedBlock *blk) {
    buf_printf(b, "schedule %s {\n", blk->name);
    for (int i = 0; i < blk->nsteps; i++) {
        const SchedStep *s = &blk->steps[i];
        buf_indent(b, 4);
        for (int j = 0; j < s->nout; j++)
            buf_printf(b, "%s%s", j ? ", " : "", s->outs[j]);
        if (s->nout)
            buf_puts(b, " = ");
        buf_printf(b, "%s(", s->prim);
        for (int j = 0; j < s->nargs; j++) {
            if (j)
                buf_puts(b, ", ");
            print_sched_arg(b, &s->args[j]);
        }
        buf_puts(b, ")\n");
    }
    buf_puts(b, "}\n");
}

/* A blank line before a new section, unless it is the first. */
static void section(Buf *b, bool *any) {
    if (*any)
        buf_putc(b, '\n');
    *any = true;
}

/* Does t start a run of its own: a recursion group starts one and a
 * definition after it too; otherwise inputs and definitions alternate. */
static bool starts_run(const Tensor *prev, const Tensor *t) {
    if (prev->op->kind == OP_RECURSE && t->op->kind == OP_RECURSE)
        return prev->op->rec != t->op->rec;
    return prev->op->kind == OP_RECURSE || t->op->kind == OP_RECURSE ||
           (prev->op->kind == OP_INPUT) != (t->op->kind == OP_INPUT);
}

void ir_print_module(Buf *b, const Module *m) {
    bool any = false, started = false;
    for (int i = 0; i < m->sizes.len; i++) {
        const Size *s = m->sizes.data[i];
        if (owned_by_structure(m, s))
            continue;
        if (!started)
            section(b, &any);
        started = true;
        buf_printf(b, "size %s in %lld..%lld\n", s->name, (long long)s->lo, (long long)s->hi);
    }
    for (int i = 0; i < m->structures.len; i++) {
        section(b, &any);
        print_structure(b, m->structures.data[i]);
    }
    started = false;
    for (int i = 0; i < m->ufuns.len; i++) {
        const Ufun *f = m->ufuns.data[i];
        if (owned_by_structure(m, f))
            continue;
        if (!started)
            section(b, &any);
        started = true;
        print_ufun(b, f);
    }
    for (int i = 0; i < m->tensors.len; i++) {
        /* a blank line between a run of inputs and a run of definitions */
        const Tensor *t = m->tensors.data[i];
        if (t->op->kind == OP_RECURSE && t->op->rec->members.data[0] != t)
            continue;
        if (i == 0 || starts_run(m->tensors.data[i - 1], t))
            section(b, &any);
        print_tensor(b, t);
    }
    /* named outputs after every definition (each name is defined by then) */
    for (int i = 0; i < m->outputs.len; i++) {
        if (i == 0)
            section(b, &any);
        buf_printf(b, "%s%s", i ? ", " : "output ", m->outputs.data[i]->name);
    }
    if (m->outputs.len)
        buf_putc(b, '\n');
    for (int i = 0; i < m->scheds.len; i++) {
        buf_putc(b, '\n');
        ir_print_schedule(b, &m->scheds.data[i]);
    }
}

char *rv_module_print(const rv_module *m) {
    Buf b = {0};
    ir_print_module(&b, m);
    return buf_take(&b);
}
