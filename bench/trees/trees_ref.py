"""bench/trees/trees_ref.py — parameters, weights and the NumPy oracle of the
recursive models specified in MODELS.md.

`params(model, H, V)` lists every parameter (name -> shape), `weights(model,
H, seed)` draws them deterministically, `save_weights`/`load_weights` write
and read one .npy per parameter, and `reference(model, W, structs)` evaluates
the model naively, node by node in an order that respects the data, in
float64: the oracle the PyTorch and DyNet baselines (and later ravel) are
checked against. Written independently of the baselines on purpose.
"""
import os

import numpy as np

from trees_data import vocabulary

MODELS = ["treefc", "treernn", "treegru", "treelstm", "mvrnn", "dagrnn", "lstm", "gru"]
HIDDEN = {m: (64, 128) if m == "mvrnn" else (256, 512) for m in MODELS}
MV_WORDS = 1024  # MV-RNN: per-word matrices for the 1024 most frequent ids (MODELS.md)


def params(model, H, V):
    """Ordered dict name -> shape of a model's parameters (MODELS.md)."""
    p = {"Emb": (V, H)}
    sq = (H, H)
    if model == "treefc":
        p.update(Wl=sq, Wr=sq, b=(H,))
    elif model == "treernn":
        pass
    elif model == "treegru":
        p.update(W_z=sq, W_h=sq, b_z=(H,), b_h=(H,), U_z=sq, U_r=sq, U_h=sq, b_r=(H,))
    elif model == "treelstm":
        p.update(W_iou=(3 * H, H), b_iou=(3 * H,), U_iou=(3 * H, H), U_f=sq, b_f=(H,))
    elif model == "mvrnn":
        p.update(Mat=(MV_WORDS, H, H), W=(H, 2 * H), b=(H,), WM=(H, 2 * H))
    elif model == "dagrnn":
        p.update(U=sq, W=sq, b=(H,))
    elif model == "lstm":
        p.update(W_ih=(4 * H, H), W_hh=(4 * H, H), b=(4 * H,))
    elif model == "gru":
        p.update(W_ih=(3 * H, H), W_hh=(3 * H, H), b_ih=(3 * H,), b_hh=(3 * H,))
    else:
        raise ValueError("unknown model " + model)
    return p


def weights(model, H, seed=0):
    """Deterministic float32 weights: matrices and biases U(-1/sqrt(H), 1/sqrt(H))
    (PyTorch's Linear init), Emb U(-1, 1); MV-RNN word matrices I + U(-0.01, 0.01)
    and WM = [I I]/2 + U(-0.01, 0.01) (Socher et al. 2012: near-identity)."""
    V = len(vocabulary())
    rng = np.random.default_rng([seed, MODELS.index(model), H])
    out = {}
    k = 1.0 / np.sqrt(H)
    for name, shape in params(model, H, V).items():
        if name == "Emb":
            a = rng.uniform(-1, 1, shape)
        elif name == "Mat":
            a = np.eye(H)[None] + rng.uniform(-0.01, 0.01, shape)
        elif name == "WM":
            a = 0.5 * np.concatenate([np.eye(H), np.eye(H)], 1) + rng.uniform(-0.01, 0.01, shape)
        else:
            a = rng.uniform(-k, k, shape)
        out[name] = a.astype(np.float32)
    return out


def weights_dir(root, model, H):
    return os.path.join(root, "%s_h%d" % (model, H))


def save_weights(root, model, H, W):
    d = weights_dir(root, model, H)
    os.makedirs(d, exist_ok=True)
    for name, a in W.items():
        np.save(os.path.join(d, name + ".npy"), a)
    return d


def load_weights(root, model, H):
    d = weights_dir(root, model, H)
    V = len(vocabulary())
    return {name: np.load(os.path.join(d, name + ".npy")) for name in params(model, H, V)}


def mv_word(w):
    """MV-RNN matrix id of a word id: itself below MV_WORDS, else 0 (<unk>)."""
    return w if 0 <= w < MV_WORDS else 0


def sig(x):
    return 1.0 / (1.0 + np.exp(-x))


def _node(model, W, s, v, st):
    """State of node v of struct s given its children's states st[c] (float64)."""
    ch = s.children[v]
    x = W["Emb"][s.word[v]] if s.word[v] >= 0 else None
    if model in ("treefc", "treernn"):
        if not ch:
            return {"h": x}
        hl, hr = st[ch[0]]["h"], st[ch[1]]["h"]
        if model == "treernn":
            return {"h": np.tanh(hl + hr)}
        return {"h": np.tanh(W["Wl"] @ hl + W["Wr"] @ hr + W["b"])}
    if model == "treelstm":
        H = W["U_f"].shape[0]
        hs = sum((st[c]["h"] for c in ch), np.zeros(H))
        iou = W["b_iou"] + W["U_iou"] @ hs
        if x is not None and not ch:  # input at the leaves only (MODELS.md)
            iou = iou + W["W_iou"] @ x
        i, o, u = sig(iou[:H]), sig(iou[H:2 * H]), np.tanh(iou[2 * H:])
        c = i * u
        for k in ch:  # internal nodes have no word: f_k = sig(U_f h_k + b_f)
            c = c + sig(W["U_f"] @ st[k]["h"] + W["b_f"]) * st[k]["c"]
        return {"h": o * np.tanh(c), "c": c}
    if model == "treegru":
        H = W["U_z"].shape[0]
        hs = sum((st[c]["h"] for c in ch), np.zeros(H))
        z = W["U_z"] @ hs + W["b_z"]
        n = W["b_h"] + W["U_h"] @ sum((sig(W["U_r"] @ st[c]["h"] + W["b_r"]) * st[c]["h"] for c in ch),
                                      np.zeros(H))
        if x is not None and not ch:  # input at the leaves only (MODELS.md)
            z = z + W["W_z"] @ x
            n = n + W["W_h"] @ x
        z = sig(z)
        return {"h": z * hs + (1 - z) * np.tanh(n)}
    if model == "mvrnn":
        if not ch:
            return {"h": x, "A": W["Mat"][mv_word(int(s.word[v]))]}
        l, r = st[ch[0]], st[ch[1]]
        H = W["b"].shape[0]
        h = np.tanh(W["W"][:, :H] @ (r["A"] @ l["h"]) + W["W"][:, H:] @ (l["A"] @ r["h"]) + W["b"])
        A = W["WM"][:, :H] @ l["A"] + W["WM"][:, H:] @ r["A"]
        return {"h": h, "A": A}
    if model == "dagrnn":
        acc = W["U"] @ x + W["b"]
        if ch:
            acc = acc + W["W"] @ sum(st[c]["h"] for c in ch)
        return {"h": np.maximum(acc, 0)}
    if model == "lstm":
        H = W["W_hh"].shape[1]
        g = W["W_ih"] @ x + W["b"]
        hp, cp = (st[ch[0]]["h"], st[ch[0]]["c"]) if ch else (np.zeros(H), np.zeros(H))
        g = g + W["W_hh"] @ hp
        i, f, gg, o = sig(g[:H]), sig(g[H:2 * H]), np.tanh(g[2 * H:3 * H]), sig(g[3 * H:])
        c = f * cp + i * gg
        return {"h": o * np.tanh(c), "c": c}
    if model == "gru":
        H = W["W_hh"].shape[1]
        hp = st[ch[0]]["h"] if ch else np.zeros(H)
        gi = W["W_ih"] @ x + W["b_ih"]
        gh = W["W_hh"] @ hp + W["b_hh"]
        r = sig(gi[:H] + gh[:H])
        z = sig(gi[H:2 * H] + gh[H:2 * H])
        n = np.tanh(gi[2 * H:] + r * gh[2 * H:])
        return {"h": (1 - z) * n + z * hp}
    raise ValueError(model)


def reference(model, W, structs):
    """Every node's state, structures concatenated in order, nodes in their own
    numbering: dict of float64 arrays h [N, H] (and c [N, H] for the LSTMs, A [N, H, H]
    for MV-RNN)."""
    W = {k: v.astype(np.float64) for k, v in W.items()}
    outs = []
    for s in structs:
        st = {}
        for v in s.topo_order():
            st[v] = _node(model, W, s, v, st)
        outs.append([st[v] for v in range(s.n)])
    keys = outs[0][0].keys()
    return {k: np.stack([o[k] for so in outs for o in so]) for k in keys}


def struct_arrays(structs):
    """The structures of a batch as flat arrays (for ravel's loader): offsets [S+1]
    (first node of each structure), word [N] (-1: none), nchild [N], child_begin [N+1]
    and child [E] (global node ids, in order), root [S] (global ids)."""
    off = np.cumsum([0] + [s.n for s in structs]).astype(np.int64)
    word = np.concatenate([s.word for s in structs]).astype(np.int64)
    nchild, child, root = [], [], []
    for s, o in zip(structs, off):
        for v in range(s.n):
            nchild.append(len(s.children[v]))
            child.extend(o + c for c in s.children[v])
        root.extend(o + r for r in s.roots)
    nchild = np.array(nchild, np.int64)
    return {"offsets": off, "word": word, "nchild": nchild,
            "child_begin": np.concatenate([[0], np.cumsum(nchild)]).astype(np.int64),
            "child": np.array(child, np.int64), "root": np.array(root, np.int64)}


def flops(model, H, structs):
    """Useful FLOPs of a call: the matrix products only (2 per multiply-add, as
    Cortex's Fig. 14 counts them), the products a node needs given its
    inputs: W·x only where a node has a word (TreeLSTM, TreeGRU: a leaf with
    a word), U·h only where it has children (a zero state is not multiplied). Element-wise work is not counted, so
    TreeRNN (no matrix) is 0."""
    total = 0
    for s in structs:
        for v in range(s.n):
            k = len(s.children[v])
            x = s.word[v] >= 0
            if model == "treefc":
                total += 4 * H * H if k else 0
            elif model == "treelstm":
                total += (6 * H * H if x and not k else 0) + ((6 * H * H + k * 2 * H * H) if k else 0)
            elif model == "treegru":
                total += (4 * H * H if x and not k else 0) + ((4 * H * H + k * 2 * H * H) if k else 0)
            elif model == "mvrnn":
                total += (8 * H * H + 4 * H ** 3) if k else 0
            elif model == "dagrnn":
                total += 2 * H * H + (2 * H * H if k else 0)
            elif model == "lstm":
                total += 8 * H * H + (8 * H * H if k else 0)
            elif model == "gru":
                total += 6 * H * H + (6 * H * H if k else 0)
    return total
