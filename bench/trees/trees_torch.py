"""bench/trees/trees_torch.py — the two PyTorch baselines of MODELS.md.

  eager(model, P, structs)    per node: recursion in Python over each structure,
                              a few torch ops on one node's vectors at a time
                              (what a PyTorch tutorial's TreeLSTM does).
  batched(model, P, lin)      level by level, written as a careful engineer would:
                              the input products of all nodes that have inputs
                              in one matmul up front, then per level one
                              gathered matmul (index_select of the children's
                              rows, then addmm) for all nodes of the level
                              across the whole batch; states in a preallocated
                              [N, H] buffer in level order.
`Linearized(structs)` is the (untimed, separately timed) host-side step that
numbers the nodes by level; `lin.unpermute(x)` maps level order back to the
structures' own numbering. Both return dicts like trees_ref.reference.
"""
import numpy as np
import torch
import torch.nn.functional as F

from trees_ref import MV_WORDS, mv_word

# Models whose inputs exist only at words, i.e. at the leaves (trees), vs at
# every node (DAG-RNN, LSTM, GRU).
INPUT_AT_ALL = ("dagrnn", "lstm", "gru")


def torch_params(model, W):
    """float32 torch tensors, plus the pre-transposed/concatenated forms batched() uses."""
    P = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in W.items()}
    T = lambda a: a.t().contiguous()  # noqa: E731
    if model == "treefc":
        P["WlrT"] = T(torch.cat([P["Wl"], P["Wr"]], 1))  # [2H, H]
    elif model == "treegru":
        P["W_zhT"], P["b_zh"] = T(torch.cat([P["W_z"], P["W_h"]])), torch.cat([P["b_z"], P["b_h"]])
        for k in ("U_z", "U_r", "U_h"):
            P[k + "T"] = T(P[k])
    elif model == "treelstm":
        for k in ("W_iou", "U_iou", "U_f"):
            P[k + "T"] = T(P[k])
    elif model == "mvrnn":
        P["WT"] = T(P["W"])
    elif model == "dagrnn":
        P["UT"], P["WT"] = T(P["U"]), T(P["W"])
    elif model in ("lstm", "gru"):
        P["W_ihT"], P["W_hhT"] = T(P["W_ih"]), T(P["W_hh"])
    return P


class Linearized:
    """A batch of structures numbered by level (level 0: nodes without children).

    pos[g]: level-order position of global node g (structures concatenated);
    begin[l]..begin[l+1]: the positions of level l; per level l >= 1, cidx (the
    children's positions, each node's children in order, flattened), arity k if
    every node of the level has k children (else None, and cseg: the parent's
    index within the level for each entry of cidx). words: word id per position.
    """

    def __init__(self, structs):
        off = np.cumsum([0] + [s.n for s in structs])
        N = int(off[-1])
        level = np.concatenate([np.asarray(s.levels(), np.int64) for s in structs])
        order = np.argsort(level, kind="stable")
        pos = np.empty(N, np.int64)
        pos[order] = np.arange(N)
        nl = int(level.max()) + 1
        self.begin = np.searchsorted(level[order], np.arange(nl + 1)).tolist()
        children = [[int(o) + c for c in s.children[v]] for s, o in zip(structs, off) for v in range(s.n)]
        self.words = torch.from_numpy(np.concatenate([s.word for s in structs])[order])
        self.levels = []
        for lv in range(1, nl):
            nodes = order[self.begin[lv]:self.begin[lv + 1]]
            ch = [children[g] for g in nodes]
            k = len(ch[0])
            cidx = torch.tensor([pos[c] for cs in ch for c in cs], dtype=torch.int64)
            if all(len(cs) == k for cs in ch):
                self.levels.append((cidx, k, None))
            else:
                cseg = torch.tensor([i for i, cs in enumerate(ch) for _ in cs], dtype=torch.int64)
                self.levels.append((cidx, None, cseg))
        self.N, self.pos = N, torch.from_numpy(pos)

    def unpermute(self, out):
        return {k: v.index_select(0, self.pos) for k, v in out.items()}


def _csum(t, n, k, cseg):
    """Sum the rows of t (one per child) into one row per parent."""
    if k is not None:
        return t.view(n, k, *t.shape[1:]).sum(1)
    return torch.zeros((n,) + tuple(t.shape[1:]), dtype=t.dtype).index_add_(0, cseg, t)


@torch.inference_mode()
def batched(model, P, lin):
    H = P["Emb"].shape[1]
    N, B = lin.N, lin.begin
    h = torch.empty(N, H)
    out = {"h": h}
    n0 = B[1]
    # Input products up front: all leaves (trees) or all nodes, one matmul.
    xs = F.embedding(lin.words[:n0] if model not in INPUT_AT_ALL else lin.words, P["Emb"])
    if model in ("treefc", "treernn"):
        h[:n0] = xs
    elif model == "treelstm":
        c = out["c"] = torch.empty(N, H)
        iou = torch.addmm(P["b_iou"], xs, P["W_iouT"])
        c[:n0] = torch.sigmoid(iou[:, :H]) * torch.tanh(iou[:, 2 * H:])
        h[:n0] = torch.sigmoid(iou[:, H:2 * H]) * torch.tanh(c[:n0])
    elif model == "treegru":
        zh = torch.addmm(P["b_zh"], xs, P["W_zhT"])
        h[:n0] = (1 - torch.sigmoid(zh[:, :H])) * torch.tanh(zh[:, H:])
    elif model == "mvrnn":
        A = out["A"] = torch.empty(N, H, H)
        h[:n0] = xs
        w0 = lin.words[:n0]
        A[:n0] = P["Mat"][torch.where(w0 < MV_WORDS, w0, 0)]
    elif model == "dagrnn":
        xu = torch.addmm(P["b"], xs, P["UT"])
        torch.clamp_min(xu[:n0], 0, out=h[:n0])
    elif model == "lstm":
        c = out["c"] = torch.empty(N, H)
        g = torch.addmm(P["b"], xs, P["W_ihT"])
        c[:n0] = torch.sigmoid(g[:n0, :H]) * torch.tanh(g[:n0, 2 * H:3 * H])
        h[:n0] = torch.sigmoid(g[:n0, 3 * H:]) * torch.tanh(c[:n0])
    elif model == "gru":
        gi = torch.addmm(P["b_ih"], xs, P["W_ihT"])
        g0, bh = gi[:n0], P["b_hh"]
        r, z = torch.sigmoid(g0[:, :H] + bh[:H]), torch.sigmoid(g0[:, H:2 * H] + bh[H:2 * H])
        h[:n0] = (1 - z) * torch.tanh(g0[:, 2 * H:] + r * bh[2 * H:])
    for lv, (cidx, k, cseg) in enumerate(lin.levels, 1):
        b, e = B[lv], B[lv + 1]
        n = e - b
        hch = h.index_select(0, cidx)  # the gather: children's rows, in order
        if model == "treefc":
            torch.tanh(torch.addmm(P["b"], hch.view(n, 2 * H), P["WlrT"]), out=h[b:e])
        elif model == "treernn":
            torch.tanh(hch.view(n, 2, H).sum(1), out=h[b:e])
        elif model == "treelstm":
            hs = _csum(hch, n, k, cseg)
            iou = torch.addmm(P["b_iou"], hs, P["U_iouT"])
            f = torch.sigmoid(torch.addmm(P["b_f"], hch, P["U_fT"]))
            cc = torch.sigmoid(iou[:, :H]) * torch.tanh(iou[:, 2 * H:]) + _csum(f * c.index_select(0, cidx), n, k, cseg)
            c[b:e] = cc
            h[b:e] = torch.sigmoid(iou[:, H:2 * H]) * torch.tanh(cc)
        elif model == "treegru":
            hs = _csum(hch, n, k, cseg)
            z = torch.sigmoid(torch.addmm(P["b_z"], hs, P["U_zT"]))
            r = torch.sigmoid(torch.addmm(P["b_r"], hch, P["U_rT"]))
            nn_ = torch.tanh(torch.addmm(P["b_h"], _csum(r * hch, n, k, cseg), P["U_hT"]))
            h[b:e] = z * hs + (1 - z) * nn_
        elif model == "mvrnn":
            Ach = A.index_select(0, cidx).view(n, 2, H, H)
            hv = hch.view(n, 2, H, 1)
            # [A_r h_l ; A_l h_r] for the whole level: two batched matvecs
            v = torch.cat([torch.bmm(Ach[:, 1], hv[:, 0]), torch.bmm(Ach[:, 0], hv[:, 1])], 1).view(n, 2 * H)
            torch.tanh(torch.addmm(P["b"], v, P["WT"]), out=h[b:e])
            torch.matmul(P["WM"], Ach.reshape(n, 2 * H, H), out=A[b:e])
        elif model == "dagrnn":
            torch.clamp_min(torch.addmm(xu[b:e], _csum(hch, n, k, cseg), P["WT"]), 0, out=h[b:e])
        elif model == "lstm":
            gg = torch.addmm(g[b:e], hch, P["W_hhT"])
            cc = torch.sigmoid(gg[:, H:2 * H]) * c.index_select(0, cidx) + \
                torch.sigmoid(gg[:, :H]) * torch.tanh(gg[:, 2 * H:3 * H])
            c[b:e] = cc
            h[b:e] = torch.sigmoid(gg[:, 3 * H:]) * torch.tanh(cc)
        elif model == "gru":
            gh = torch.addmm(P["b_hh"], hch, P["W_hhT"])
            gi_ = gi[b:e]
            r = torch.sigmoid(gi_[:, :H] + gh[:, :H])
            z = torch.sigmoid(gi_[:, H:2 * H] + gh[:, H:2 * H])
            nn_ = torch.tanh(gi_[:, 2 * H:] + r * gh[:, 2 * H:])
            h[b:e] = (1 - z) * nn_ + z * hch
    return out


def _eager_node(model, P, s, v, st):
    """One node, one structure, torch ops on [H] vectors (children's states in st)."""
    ch = [st[c] for c in s.children[v]]
    w = int(s.word[v])
    x = P["Emb"][w] if w >= 0 else None
    H = P["Emb"].shape[1]
    if model == "treernn":
        return {"h": x} if not ch else {"h": torch.tanh(ch[0]["h"] + ch[1]["h"])}
    if model == "treefc":
        if not ch:
            return {"h": x}
        return {"h": torch.tanh(F.linear(ch[0]["h"], P["Wl"]) + F.linear(ch[1]["h"], P["Wr"]) + P["b"])}
    if model == "treelstm":
        if not ch:
            iou = F.linear(x, P["W_iou"], P["b_iou"])
            c = torch.sigmoid(iou[:H]) * torch.tanh(iou[2 * H:])
            return {"h": torch.sigmoid(iou[H:2 * H]) * torch.tanh(c), "c": c}
        hs = sum(k["h"] for k in ch)
        iou = F.linear(hs, P["U_iou"], P["b_iou"])
        c = torch.sigmoid(iou[:H]) * torch.tanh(iou[2 * H:])
        for k in ch:
            c = c + torch.sigmoid(F.linear(k["h"], P["U_f"], P["b_f"])) * k["c"]
        return {"h": torch.sigmoid(iou[H:2 * H]) * torch.tanh(c), "c": c}
    if model == "treegru":
        if not ch:
            z = torch.sigmoid(F.linear(x, P["W_z"], P["b_z"]))
            return {"h": (1 - z) * torch.tanh(F.linear(x, P["W_h"], P["b_h"]))}
        hs = sum(k["h"] for k in ch)
        z = torch.sigmoid(F.linear(hs, P["U_z"], P["b_z"]))
        rh = sum(torch.sigmoid(F.linear(k["h"], P["U_r"], P["b_r"])) * k["h"] for k in ch)
        return {"h": z * hs + (1 - z) * torch.tanh(F.linear(rh, P["U_h"], P["b_h"]))}
    if model == "mvrnn":
        if not ch:
            return {"h": x, "A": P["Mat"][mv_word(w)]}
        l, r = ch
        v_ = torch.cat([torch.mv(r["A"], l["h"]), torch.mv(l["A"], r["h"])])
        return {"h": torch.tanh(F.linear(v_, P["W"], P["b"])),
                "A": torch.mm(P["WM"], torch.cat([l["A"], r["A"]]))}
    if model == "dagrnn":
        a = F.linear(x, P["U"], P["b"])
        if ch:
            a = a + F.linear(sum(k["h"] for k in ch), P["W"])
        return {"h": torch.relu(a)}
    if model == "lstm":
        g = F.linear(x, P["W_ih"], P["b"])
        if ch:
            g = g + F.linear(ch[0]["h"], P["W_hh"])
        c = torch.sigmoid(g[:H]) * torch.tanh(g[2 * H:3 * H])
        if ch:
            c = c + torch.sigmoid(g[H:2 * H]) * ch[0]["c"]
        return {"h": torch.sigmoid(g[3 * H:]) * torch.tanh(c), "c": c}
    if model == "gru":
        gi = F.linear(x, P["W_ih"], P["b_ih"])
        hp = ch[0]["h"] if ch else torch.zeros(H)
        gh = F.linear(hp, P["W_hh"], P["b_hh"])
        r = torch.sigmoid(gi[:H] + gh[:H])
        z = torch.sigmoid(gi[H:2 * H] + gh[H:2 * H])
        return {"h": (1 - z) * torch.tanh(gi[2 * H:] + r * gh[2 * H:]) + z * hp}
    raise ValueError(model)


@torch.inference_mode()
def eager(model, P, structs):
    """Per node, recursion in Python (memoized, so DAG nodes run once)."""
    outs = []
    for s in structs:
        st = {}

        def rec(v):
            if v not in st:
                for c in s.children[v]:
                    rec(c)
                st[v] = _eager_node(model, P, s, v, st)
            return st[v]
        for r in s.roots:
            rec(r)
        outs.append(st)
    return outs


def eager_stack(outs, structs):
    """eager()'s per-node dicts as arrays in the structures' own numbering."""
    keys = outs[0][0].keys()
    return {k: torch.stack([o[v][k] for o, s in zip(outs, structs) for v in range(s.n)]) for k in keys}
