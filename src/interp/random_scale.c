/*
 * random_scale.c — how large rv_bindings_randomize draws a program's
 * weights when the program has a recursion group.
 *
 * A recursion applies the same weights once per level, as many times as
 * the deepest structure is deep (a chain of 200 nodes: 200 times). With
 * weights uniform in [-1, 1), `sum(j < H) W[i, j] * h[child, j]` multiplies
 * a state's spread by about sqrt(H / 3) per level, so deep structures are
 * chaotic: any two correct evaluation orders (the interpreter's double
 * sums, compiled float sums in another order) round differently and
 * drift apart until `--check` compares noise. Drawn as a network is
 * initialized (LeCun: uniform in [-1, 1) / sqrt(fan-in)), a product
 * shrinks a state's spread by sqrt(3) instead and the rounding errors of
 * every level stay as small as one level's.
 *
 * The fan-in of a tensor is read off the program, at its reads:
 *   - a read inside reductions counts the extents (their upper bounds)
 *     of the reduction axes its indices use: W[i, j] in `sum(j < H)`
 *     has H, h[child[n, k], j] in `sum(k < nchild[n], j < H)` has 2 H;
 *   - a read that is its reader's whole value (a copy: the body, a branch
 *     of a conditional, an operand of a select) takes the reader's fan-in,
 *     so a transposed, stacked or gathered weight is scaled as the product
 *     that reads the copy (TreeFC's WT of Wl and Wr, Emb gathered into x);
 *   - other reads (a bias, an elementwise gate) count 1;
 * and a tensor's fan-in is the largest over its reads (members read each
 * other in cycles: the largest value propagates to a fixpoint). Programs
 * without recursion keep weights in [-1, 1): their depth is their text's,
 * and the same seed draws the same values as before.
 */
#include <math.h>

#include "interp/interp.h"

typedef struct FanIn {
    const Module *m;
    double *fanin;           /* by tensor id */
    const Tensor *reader;    /* the operation whose body is walked */
    Vec(const Axis *) axes;  /* the reduction axes enclosing the current node */
    bool changed;
} FanIn;

static void raise_to(FanIn *f, const Tensor *t, double v) {
    if (v > f->fanin[t->id]) {
        f->fanin[t->id] = v;
        f->changed = true;
    }
}

/* The product of the extents of the enclosing reduction axes that the
 * read's indices use (1 when they use none). */
static double reduced_extent(const FanIn *f, const Expr *read) {
    double p = 1;
    for (int a = 0; a < f->axes.len; a++) {
        const Axis *ax = f->axes.data[a];
        bool used = false;
        for (int d = 0; d < read->n && !used; d++)
            used = ir_uses_axis(read->args[d], ax);
        int64_t lo, hi;
        if (used && ir_int_bounds(ax->extent, &lo, &hi) && hi > 1)
            p *= (double)hi;
    }
    return p;
}

static void walk(FanIn *f, const Expr *e) {
    if (e->kind == EX_REDUCE) {
        int mark = f->axes.len;
        for (int a = 0; a < e->u.red.naxes; a++)
            vec_push(&f->axes, e->u.red.axes[a]);
        walk(f, e->args[0]);
        f->axes.len = mark;
        return;
    }
    if (e->kind == EX_READ)
        raise_to(f, e->u.tensor, reduced_extent(f, e));
    for (int i = 0; i < e->n; i++)
        walk(f, e->args[i]);
}

/* A read that is the reader's whole value, through selects and casts. */
static void copies(FanIn *f, const Expr *e) {
    if (!e)
        return;
    if (e->kind == EX_READ)
        raise_to(f, e->u.tensor, f->fanin[f->reader->id]);
    else if (e->kind == EX_SELECT) {
        copies(f, e->args[1]);
        copies(f, e->args[2]);
    } else if (e->kind == EX_CAST)
        copies(f, e->args[0]);
}

void interp_random_fanin(const Module *m, double *fanin) {
    for (int i = 0; i < m->tensors.len; i++)
        fanin[i] = 1;
    FanIn f = {.m = m, .fanin = fanin};
    /* each pass raises at least one value to one that a read gives, and
     * there are finitely many: a fixpoint within tensors.len + 1 passes */
    for (int pass = 0; pass <= m->tensors.len; pass++) {
        f.changed = false;
        for (int i = 0; i < m->tensors.len; i++) {
            const Op *op = m->tensors.data[i]->op;
            if (op->kind != OP_COMPUTE && op->kind != OP_COND && op->kind != OP_RECURSE)
                continue;
            f.reader = m->tensors.data[i];
            const Expr *parts[] = {op->body, op->else_body};
            for (int p = 0; p < 2; p++)
                if (parts[p]) {
                    walk(&f, parts[p]);
                    copies(&f, parts[p]);
                }
        }
        if (!f.changed)
            break;
    }
    vec_free(&f.axes);
}

double interp_random_scale(const Module *m, const double *fanin, const Tensor *t) {
    if (m->recurses.len == 0 || fanin[t->id] <= 1)
        return 1;
    return 1 / sqrt(fanin[t->id]);
}
