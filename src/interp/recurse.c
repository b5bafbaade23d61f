/*
 * recurse.c — a recursion group evaluated naively: node by node, each
 * node after its children, memoized (docs/recursion.md).
 *
 * The meaning of a group does not depend on how the nodes are numbered,
 * only on the structure's edges: member X at node n is its body with the
 * node axis bound to n, reading members at n's children (whose values are
 * then final) and earlier members at n itself (recurse.c in src/ir states
 * the rules). So the interpreter follows the edges, not the numbering the
 * linearizer gives: a depth-first walk over child[n, k] computes a node
 * when its last child is done, which is right for any bound arrays that
 * form a DAG, linearized or not, and the oracle stays independent of the
 * property compiled code relies on (children numbered above parents).
 *
 * The walk uses an explicit stack (a sequence of 100,000 nodes is a chain
 * that deep) and finds cycles on the way: a child still on the stack is an
 * ancestor of its parent. A child outside 0..N-1 never gets here: the UF's
 * declared range 0..N-1 is checked when the run starts.
 *
 * At a node, each member in group order is evaluated at every element of
 * its other axes (their extents do not use the node axis, so each node
 * holds the same block of elements, node n's being the n-th block in
 * canonical order), through eval.c's element-at-a-time entry.
 */
#include <string.h>

#include "interp/interp.h"

enum { NODE_NEW, NODE_OPEN, NODE_DONE }; /* a node's state in the walk */

typedef struct Member {
    const Tensor *t;
    EvalOp op;
    Layout *inner; /* the axes after the node axis */
    void *data;
} Member;

typedef struct Walk {
    const Layout *cl;     /* the child UF's domain: row n holds n's children */
    const int64_t *child; /* its values */
    uint8_t *state;       /* by node */
    int64_t *stack_node;  /* the open nodes, root of the walk first */
    int64_t *stack_k;     /* how many of its children each has started */
    int64_t *pos;         /* by node: its place on the stack while open */
} Walk;

static int64_t nchild(const Walk *w, int64_t n) {
    return ir_layout_extent_at(w->cl, 1, n);
}

static int64_t child_at(const Walk *w, int64_t n, int64_t k) {
    return w->child[ir_layout_start_at(w->cl, 1, n) + k];
}

/* "recursion R over T: node 5 depends on itself through its children
 * (child[5, 0] = 7, child[7, 1] = 5)": the cycle is the stack from the
 * child's place to the top (at most 8 links printed). */
static rv_status cycle_error(const Recurse *r, const Walk *w, int64_t top) {
    Buf b = {0};
    const Tensor *t0 = r->members.data[0];
    SrcLoc loc = r->loc.file ? r->loc : t0->loc;
    if (loc.file)
        buf_printf(&b, "%s:%d:%d: ", loc.file, loc.line, loc.col);
    int64_t from = w->pos[child_at(w, w->stack_node[top], w->stack_k[top] - 1)];
    int64_t n0 = w->stack_node[from];
    buf_printf(&b, "recursion %s over %s: node %lld depends on itself through its children (",
               r->name, r->st->name, (long long)n0);
    for (int64_t i = from; i <= top; i++) {
        if (i - from == 8 && top - i > 1) {
            buf_printf(&b, ", ... %lld more", (long long)(top - i));
            i = top;
        }
        int64_t n = w->stack_node[i], k = w->stack_k[i] - 1;
        buf_printf(&b, "%s%s[%lld, %lld] = %lld", i > from ? ", " : "", r->st->child->name,
                   (long long)n, (long long)k, (long long)child_at(w, n, k));
    }
    buf_putc(&b, ')');
    base_error(RV_ERR_BOUNDS, "%s", buf_str(&b));
    buf_free(&b);
    return RV_ERR_BOUNDS;
}

/* Every member at node n, in group order. */
static rv_status eval_node(Member *ms, int nm, int64_t n) {
    for (int i = 0; i < nm; i++) {
        Member *m = &ms[i];
        const Layout *l = m->inner;
        int64_t idx[RV_MAX_DIMS];
        idx[0] = n;
        LayoutIter it;
        for (bool ok = ir_layout_iter_begin(l, &it); ok; ok = ir_layout_iter_next(l, &it)) {
            memcpy(idx + 1, it.idx, sizeof(int64_t) * (size_t)l->ndim);
            rv_status st = interp_op_elem(&m->op, idx, m->data, n * l->numel + it.rank[l->ndim]);
            if (st != RV_OK)
                return st;
        }
    }
    return RV_OK;
}

/* The walk: from every node not yet done, depth first over children; a
 * node is evaluated when its last child is done. */
static rv_status walk(const Recurse *r, Walk *w, Member *ms, int nm, int64_t N) {
    for (int64_t start = 0; start < N; start++) {
        if (w->state[start] == NODE_DONE)
            continue;
        int64_t top = 0;
        w->stack_node[0] = start;
        w->stack_k[0] = 0;
        w->pos[start] = 0;
        w->state[start] = NODE_OPEN;
        while (top >= 0) {
            int64_t n = w->stack_node[top];
            if (w->stack_k[top] < nchild(w, n)) {
                int64_t c = child_at(w, n, w->stack_k[top]++);
                if (w->state[c] == NODE_DONE)
                    continue;
                if (w->state[c] == NODE_OPEN)
                    return cycle_error(r, w, top);
                top++;
                w->stack_node[top] = c;
                w->stack_k[top] = 0;
                w->pos[c] = top;
                w->state[c] = NODE_OPEN;
                continue;
            }
            rv_status st = eval_node(ms, nm, n);
            if (st != RV_OK)
                return st;
            w->state[n] = NODE_DONE;
            top--;
        }
    }
    return RV_OK;
}

rv_status interp_eval_recurse(Interp *in, const Recurse *r) {
    const Structure *st = r->st;
    int nm = r->members.len;
    int64_t N = in->sizes[st->nodes->id];
    Member *ms = base_xcalloc((size_t)nm, sizeof *ms);
    rv_status s = RV_OK;
    /* every member's result first: bodies read members defined after them */
    for (int i = 0; s == RV_OK && i < nm; i++) {
        const Tensor *t = r->members.data[i];
        rv_array *a;
        if ((s = interp_result_new(in, t, &a)) != RV_OK)
            break;
        interp_result_store(in, t, a);
        ms[i].t = t;
        ms[i].data = rv_array_data(a);
        char what[300];
        snprintf(what, sizeof what, "tensor %s", t->name);
        s = ir_layout_eval(&in->env, what, t->ndim - 1, t->axes + 1, &ms[i].inner);
        RV_ASSERT(s != RV_OK || ms[i].inner->numel * N == in->tv[t->id].lay->numel);
    }
    int begun = 0; /* members compiled (or failing to), to end below */
    while (s == RV_OK && begun < nm) {
        Member *m = &ms[begun++];
        s = interp_op_begin(in, m->t, &m->op);
    }
    Walk w = {.cl = in->ufl[st->child->id], .child = in->ufv[st->child->id]};
    if (s == RV_OK) {
        size_t n = (size_t)(N > 0 ? N : 1);
        w.state = base_xcalloc(n, 1);
        w.stack_node = base_xmalloc(sizeof(int64_t) * n);
        w.stack_k = base_xmalloc(sizeof(int64_t) * n);
        w.pos = base_xmalloc(sizeof(int64_t) * n);
        s = walk(r, &w, ms, nm, N);
    }
    base_free(w.state);
    base_free(w.stack_node);
    base_free(w.stack_k);
    base_free(w.pos);
    for (int i = 0; i < begun; i++)
        interp_op_end(&ms[i].op);
    for (int i = 0; i < nm; i++)
        ir_layout_free(ms[i].inner);
    base_free(ms);
    return s;
}
