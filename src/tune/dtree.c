/*
 * dtree.c — the dispatcher: a decision tree over the size variables that
 * picks a kernel variant per shape at run time (DietCode §4, step 7).
 *
 * Each shape of the tuned range votes for its best variant; CART (Breiman
 * et al.) learns the shape -> variant map as axis-aligned threshold tests,
 * which group neighbouring shapes that chose the same variant. DietCode
 * trains it with scikit-learn and exports C; the tree is small enough that
 * training it here, in C, costs less than a dependency. Thresholds sit
 * halfway between neighbouring training values, so a shape between two
 * trained ones goes to the nearer side.
 *
 * The tree is kept as a flat node array (root first) that tune_dtree_eval
 * walks and tune_dtree_emit_c prints as nested ifs: the two are the same
 * function, which the unit test checks by compiling the emitted C.
 */
#include "tune/tune.h"

#include <math.h>
#include <stdlib.h>

typedef struct Sample {
    int64_t v; /* the value of the variable being split on */
    int i;     /* the shape's index */
} Sample;

typedef struct Trainer {
    const int64_t *sizes;
    const int *labels;
    const double *weights;
    int nvars, nlabels, max_depth;
    double *left, *right; /* per-label weights on each side of a candidate split */
    Sample *sorted;
    DTree *t;
} Trainer;

static int cmp_sample(const void *a, const void *b) {
    const Sample *x = a, *y = b;
    if (x->v != y->v)
        return x->v < y->v ? -1 : 1;
    return x->i - y->i;
}

static double weight_of(const Trainer *tr, int i) {
    return tr->weights ? tr->weights[i] : 1.0;
}

static int new_node(DTree *t) {
    if (t->len == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 16;
        t->nodes = base_xrealloc(t->nodes, sizeof *t->nodes * (size_t)t->cap);
    }
    t->nodes[t->len] = (DTreeNode){.var = -1, .left = -1, .right = -1};
    return t->len++;
}

/* The weighted majority label of idx[0..n); ties go to the smaller label. */
static int majority(Trainer *tr, const int *idx, int n) {
    memset(tr->left, 0, sizeof *tr->left * (size_t)tr->nlabels);
    for (int k = 0; k < n; k++)
        tr->left[tr->labels[idx[k]]] += weight_of(tr, idx[k]);
    int best = 0;
    for (int l = 1; l < tr->nlabels; l++)
        if (tr->left[l] > tr->left[best])
            best = l;
    return best;
}

/* The split of idx[0..n) with the least weighted Gini impurity,
 *   sum over sides of  W_side - sum_l w_{side,l}^2 / W_side,
 * swept over each variable's sorted values with running sums of squares.
 * Returns false when every shape has the same sizes (nothing separates them). */
static bool best_split(Trainer *tr, const int *idx, int n, int *var, int64_t *thresh) {
    double total = 0, best = INFINITY;
    for (int k = 0; k < n; k++)
        total += weight_of(tr, idx[k]);
    bool found = false;
    for (int v = 0; v < tr->nvars; v++) {
        for (int k = 0; k < n; k++)
            tr->sorted[k] =
                (Sample){tr->sizes[(size_t)idx[k] * (size_t)tr->nvars + (size_t)v], idx[k]};
        qsort(tr->sorted, (size_t)n, sizeof *tr->sorted, cmp_sample);
        memset(tr->left, 0, sizeof *tr->left * (size_t)tr->nlabels);
        memset(tr->right, 0, sizeof *tr->right * (size_t)tr->nlabels);
        double sq_l = 0, sq_r = 0, w_l = 0, w_r = total;
        for (int k = 0; k < n; k++)
            tr->right[tr->labels[tr->sorted[k].i]] += weight_of(tr, tr->sorted[k].i);
        for (int l = 0; l < tr->nlabels; l++)
            sq_r += tr->right[l] * tr->right[l];
        for (int k = 0; k + 1 < n; k++) {
            int i = tr->sorted[k].i, y = tr->labels[i];
            double w = weight_of(tr, i);
            sq_l += (tr->left[y] + w) * (tr->left[y] + w) - tr->left[y] * tr->left[y];
            sq_r += (tr->right[y] - w) * (tr->right[y] - w) - tr->right[y] * tr->right[y];
            tr->left[y] += w;
            tr->right[y] -= w;
            w_l += w;
            w_r -= w;
            int64_t a = tr->sorted[k].v, b = tr->sorted[k + 1].v;
            if (a == b)
                continue;
            double imp = (w_l - sq_l / w_l) + (w_r - sq_r / w_r);
            /* Strictly better (beyond rounding) keeps the first variable
             * and the smallest threshold on ties: deterministic trees. */
            if (imp < best - 1e-9 * total) {
                best = imp;
                *var = v;
                /* a <= thresh < b; the difference in unsigned arithmetic
                 * cannot overflow. */
                *thresh = a + (int64_t)(((uint64_t)b - (uint64_t)a) / 2);
                found = true;
            }
        }
    }
    return found;
}

static int build(Trainer *tr, int *idx, int n, int depth) {
    int node = new_node(tr->t);
    bool pure = true;
    for (int k = 1; k < n && pure; k++)
        pure = tr->labels[idx[k]] == tr->labels[idx[0]];
    int var = -1;
    int64_t thresh = 0;
    if (pure || (tr->max_depth > 0 && depth >= tr->max_depth) ||
        !best_split(tr, idx, n, &var, &thresh)) {
        tr->t->nodes[node].label = majority(tr, idx, n);
        return node;
    }
    /* Partition in place: shapes with sizes[var] <= thresh first. */
    int nl = 0;
    for (int k = 0; k < n; k++) {
        if (tr->sizes[(size_t)idx[k] * (size_t)tr->nvars + (size_t)var] <= thresh) {
            int tmp = idx[nl];
            idx[nl++] = idx[k];
            idx[k] = tmp;
        }
    }
    RV_ASSERT(nl > 0 && nl < n);
    int left = build(tr, idx, nl, depth + 1);
    int right = build(tr, idx + nl, n - nl, depth + 1);
    DTreeNode *nd = &tr->t->nodes[node];
    const DTreeNode *l = &tr->t->nodes[left], *r = &tr->t->nodes[right];
    if (l->var < 0 && r->var < 0 && l->label == r->label) {
        /* A depth-limited split whose sides answer the same: one leaf. The
         * two leaves were the last nodes made. */
        nd->label = l->label;
        tr->t->len = node + 1;
        return node;
    }
    nd->var = var;
    nd->thresh = thresh;
    nd->left = left;
    nd->right = right;
    return node;
}

rv_status tune_dtree_train(const int64_t *sizes, const int *labels, const double *weights, int n,
                           int nvars, int max_depth, DTree *out) {
    memset(out, 0, sizeof *out);
    if (n <= 0 || nvars <= 0 || max_depth < 0)
        return base_error(RV_ERR_ARG,
                          "decision tree: need at least one shape and one size variable");
    int nlabels = 0;
    for (int i = 0; i < n; i++) {
        if (labels[i] < 0)
            return base_error(RV_ERR_ARG, "decision tree: shape %d has a negative label %d", i,
                              labels[i]);
        if (weights && !(weights[i] > 0 && isfinite(weights[i])))
            return base_error(RV_ERR_ARG, "decision tree: shape %d has weight %g (must be > 0)", i,
                              weights[i]);
        if (labels[i] + 1 > nlabels)
            nlabels = labels[i] + 1;
    }
    Trainer tr = {sizes, labels, weights, nvars, nlabels, max_depth, NULL, NULL, NULL, out};
    tr.left = base_xcalloc((size_t)nlabels, sizeof *tr.left);
    tr.right = base_xcalloc((size_t)nlabels, sizeof *tr.right);
    tr.sorted = base_xmalloc(sizeof *tr.sorted * (size_t)n);
    int *idx = base_xmalloc(sizeof *idx * (size_t)n);
    for (int i = 0; i < n; i++)
        idx[i] = i;
    out->nvars = nvars;
    build(&tr, idx, n, 0);
    base_free(idx);
    base_free(tr.sorted);
    base_free(tr.left);
    base_free(tr.right);
    return RV_OK;
}

int tune_dtree_eval(const DTree *t, const int64_t *sizes) {
    const DTreeNode *nd = &t->nodes[0];
    while (nd->var >= 0)
        nd = &t->nodes[sizes[nd->var] <= nd->thresh ? nd->left : nd->right];
    return nd->label;
}

static int depth_of(const DTree *t, int k) {
    const DTreeNode *nd = &t->nodes[k];
    if (nd->var < 0)
        return 0;
    int l = depth_of(t, nd->left), r = depth_of(t, nd->right);
    return 1 + (l > r ? l : r);
}

int tune_dtree_depth(const DTree *t) {
    return t->len ? depth_of(t, 0) : 0;
}

int tune_dtree_leaves(const DTree *t) {
    int n = 0;
    for (int k = 0; k < t->len; k++)
        n += t->nodes[k].var < 0;
    return n;
}

static void emit_var(Buf *out, const char *const *var_names, int v) {
    if (var_names)
        buf_puts(out, var_names[v]);
    else
        buf_printf(out, "sizes[%d]", v);
}

static void emit_node(const DTree *t, int k, const char *const *var_names,
                      const char *const *label_names, int indent, Buf *out) {
    const DTreeNode *nd = &t->nodes[k];
    buf_indent(out, indent);
    if (nd->var < 0) {
        buf_printf(out, "return %d;", nd->label);
        if (label_names)
            buf_printf(out, " /* %s */", label_names[nd->label]);
        buf_putc(out, '\n');
        return;
    }
    buf_printf(out, "if (sizes[%d] <= %lld) { /* ", nd->var, (long long)nd->thresh);
    emit_var(out, var_names, nd->var);
    buf_printf(out, " <= %lld */\n", (long long)nd->thresh);
    emit_node(t, nd->left, var_names, label_names, indent + 4, out);
    buf_indent(out, indent);
    buf_puts(out, "} else { /* ");
    emit_var(out, var_names, nd->var);
    buf_printf(out, " > %lld */\n", (long long)nd->thresh);
    emit_node(t, nd->right, var_names, label_names, indent + 4, out);
    buf_indent(out, indent);
    buf_puts(out, "}\n");
}

void tune_dtree_emit_c(const DTree *t, const char *name, const char *const *var_names,
                       const char *const *label_names, Buf *out) {
    buf_printf(out,
               "/* %s_dispatch: the kernel variant for a shape, chosen by a decision tree\n"
               " * over (",
               name);
    for (int v = 0; v < t->nvars; v++) {
        if (v)
            buf_puts(out, ", ");
        emit_var(out, var_names, v);
    }
    buf_printf(out, ") that ravel tune trained: %d leaves, depth %d. */\n", tune_dtree_leaves(t),
               tune_dtree_depth(t));
    buf_printf(out, "int %s_dispatch(const int64_t *sizes) {\n", name);
    if (t->nodes[0].var < 0)
        buf_puts(out, "    (void)sizes;\n");
    emit_node(t, 0, var_names, label_names, 4, out);
    buf_puts(out, "}\n");
}

void tune_dtree_free(DTree *t) {
    base_free(t->nodes);
    memset(t, 0, sizeof *t);
}
