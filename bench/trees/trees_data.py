"""bench/trees/trees_data.py — the inputs of the recursive-model benchmarks.

A structure is a `Struct`: `n` nodes numbered 0..n-1, `children[v]` (a list
of node ids, in order: left before right), `word[v]` (vocabulary id, -1 for
no word) and `roots`. The numbering need not put children first: levels and
a children-first order are computed (`levels`, `topo_order`), not assumed.

Workloads (MODELS.md, "Inputs"):
  sst_trees(split)          SST parse trees (STree.txt/SOStr.txt/datasetSplit.txt)
  perfect_tree(height, rng) perfect binary tree, leaves at depth `height`
  grid_dag(rows, cols, rng) grid DAG, node (i,j) reads (i-1,j) and (i,j-1)
  sequence(words)           chain: node t reads node t-1
The vocabulary is built from SOStr.txt (all splits): id 0 is "<unk>", then
tokens by decreasing count, ties in byte order; tokens are kept as written.
"""
import os
from collections import Counter

import numpy as np

SST_DIR = os.environ.get("SST_DIR", os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                 "..", "..", "..", "shared", "data", "sst"))
if not os.path.isdir(SST_DIR):
    SST_DIR = "/work/shared/data/sst"

SPLITS = {"train": 1, "test": 2, "dev": 3}


class Struct:
    """One data structure: children lists, per-node word ids, roots."""

    def __init__(self, children, word, roots, kind):
        self.children = [list(c) for c in children]
        self.word = np.asarray(word, dtype=np.int64)
        self.roots = list(roots)
        self.kind = kind  # "tree", "dag", "sequence"
        self.n = len(self.children)

    def levels(self):
        """level[v] = 0 for a node without children, else 1 + max over its children."""
        level = [-1] * self.n
        order = self.topo_order()
        for v in order:
            ch = self.children[v]
            level[v] = 0 if not ch else 1 + max(level[c] for c in ch)
        return level

    def topo_order(self):
        """Node ids, every node after all of its children (iterative DFS; cycles rejected)."""
        state = [0] * self.n  # 0 new, 1 on stack, 2 done
        out = []
        for s in range(self.n):
            if state[s]:
                continue
            stack = [(s, 0)]
            state[s] = 1
            while stack:
                v, k = stack[-1]
                if k < len(self.children[v]):
                    stack[-1] = (v, k + 1)
                    c = self.children[v][k]
                    if state[c] == 1:
                        raise ValueError("cycle through node %d" % c)
                    if state[c] == 0:
                        state[c] = 1
                        stack.append((c, 0))
                else:
                    state[v] = 2
                    out.append(v)
                    stack.pop()
        return out


def _sst_lines(name):
    with open(os.path.join(SST_DIR, name), encoding="utf-8") as f:
        return [ln.rstrip("\n") for ln in f if ln.strip()]


_VOCAB = None


def vocabulary():
    """dict token -> id; id 0 is <unk>, then tokens by decreasing count (ties: byte order)."""
    global _VOCAB
    if _VOCAB is None:
        counts = Counter(tok for ln in _sst_lines("SOStr.txt") for tok in ln.split("|"))
        toks = sorted(counts, key=lambda t: (-counts[t], t.encode("utf-8")))
        _VOCAB = {"<unk>": 0}
        for t in toks:
            _VOCAB[t] = len(_VOCAB)
    return _VOCAB


def sst_tree(parents, tokens, vocab):
    """One SST tree from its 1-based parent pointers (0 = root) and its tokens.

    Nodes keep the file's numbering (0-based): the tokens are nodes 0..L-1 in
    sentence order, the internal nodes follow. Children are ordered by the
    first token they cover, so a binary node's children are (left, right).
    """
    n = len(parents)
    L = len(tokens)
    children = [[] for _ in range(n)]
    roots = []
    for v, p in enumerate(parents):
        if p == 0:
            roots.append(v)
        elif not 1 <= p <= n or p - 1 == v:
            raise ValueError("bad parent %d of node %d" % (p, v + 1))
        else:
            children[p - 1].append(v)
    if len(roots) != 1:
        raise ValueError("SST tree with %d roots" % len(roots))
    first = list(range(L)) + [n] * (n - L)
    s = Struct(children, [vocab.get(t, 0) for t in tokens] + [-1] * (n - L), roots, "tree")
    for v in s.topo_order():  # children first, so first[] is final for them
        for c in s.children[v]:
            first[v] = min(first[v], first[c])
    for v in range(n):
        s.children[v].sort(key=lambda c: first[c])
        if v < L and s.children[v]:
            raise ValueError("token node %d has children" % (v + 1))
        if v >= L and not s.children[v]:
            raise ValueError("internal node %d has no children" % (v + 1))
    return s


def sst_trees(split="test"):
    """The SST trees of one split (datasetSplit.txt: 1 train, 2 test, 3 dev), file order."""
    want = SPLITS[split]
    split_of = {}
    for ln in _sst_lines("datasetSplit.txt")[1:]:
        i, s = ln.split(",")
        split_of[int(i)] = int(s)
    vocab = vocabulary()
    out = []
    for i, (tl, sl) in enumerate(zip(_sst_lines("STree.txt"), _sst_lines("SOStr.txt")), 1):
        if split_of[i] == want:
            out.append(sst_tree([int(x) for x in tl.split("|")], sl.split("|"), vocab))
    return out


def perfect_tree(height, rng, vocab_size):
    """Perfect binary tree, leaves at depth `height` (2^(height+1)-1 nodes), heap order:
    node v has children 2v+1, 2v+2; leaves get random word ids, internal nodes none."""
    n = 2 ** (height + 1) - 1
    first_leaf = 2 ** height - 1
    children = [[2 * v + 1, 2 * v + 2] if v < first_leaf else [] for v in range(n)]
    word = [-1] * first_leaf + list(rng.integers(1, vocab_size, n - first_leaf))
    return Struct(children, word, [0], "tree")


def grid_dag(rows, cols, rng, vocab_size):
    """rows x cols grid DAG, node id i*cols+j; node (i,j) reads (i-1,j) then (i,j-1).
    Every node has an input (a random word id); the root is the last node."""
    children = []
    for i in range(rows):
        for j in range(cols):
            ch = []
            if i > 0:
                ch.append((i - 1) * cols + j)
            if j > 0:
                ch.append(i * cols + j - 1)
            children.append(ch)
    return Struct(children, rng.integers(1, vocab_size, rows * cols), [rows * cols - 1], "dag")


def sequence(words):
    """Chain over word ids: node t reads node t-1; the root is the last node."""
    n = len(words)
    return Struct([[t - 1] if t else [] for t in range(n)], words, [n - 1], "sequence")


def random_sequence(rng, vocab_size, lo, hi):
    return sequence(rng.integers(1, vocab_size, int(rng.integers(lo, hi + 1))))


def sst_sequences(split="test"):
    """The sentences of one split as sequences of word ids (the sequential LSTM/GRU workload)."""
    return [sequence([int(w) for w in t.word if w >= 0]) for t in sst_trees(split)]


def workload(model, batch, seed=0, split="test"):
    """The benchmark's list of batches of structures for a model (MODELS.md, "Inputs").

    SST models: consecutive batches of `batch` trees of the split, in file order
    (the last partial batch dropped). TreeFC: perfect trees of height 7; DAG-RNN:
    10x10 grids; both 64 random batches from `seed`. LSTM/GRU: the split's
    sentences as sequences, batched as the trees.
    """
    V = len(vocabulary())
    rng = np.random.default_rng(seed)
    if model == "treefc":
        items = [perfect_tree(7, rng, V) for _ in range(64 * batch)]
    elif model == "dagrnn":
        items = [grid_dag(10, 10, rng, V) for _ in range(64 * batch)]
    elif model in ("lstm", "gru"):
        items = sst_sequences(split)
    else:
        items = sst_trees(split)
    nb = len(items) // batch
    return [items[i * batch:(i + 1) * batch] for i in range(nb)]


def small_batch(model, seed=1):
    """The fixed small batch of the reference outputs: mixed shapes, a few nodes each."""
    V = len(vocabulary())
    rng = np.random.default_rng(seed)
    if model == "treefc":
        return [perfect_tree(h, rng, V) for h in (0, 1, 3, 7)]
    if model == "dagrnn":
        return [grid_dag(r, c, rng, V) for r, c in ((1, 1), (1, 5), (4, 3), (10, 10))]
    if model in ("lstm", "gru"):
        return [sequence([int(rng.integers(1, V))])] + [random_sequence(rng, V, 2, 40) for _ in range(3)]
    t = sst_trees("test")
    one = Struct([[]], [int(rng.integers(1, V))], [0], "tree")
    return [one, t[0], t[1], max(t[:200], key=lambda s: s.n)]
