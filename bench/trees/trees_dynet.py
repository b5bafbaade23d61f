"""bench/trees/trees_dynet.py — the DyNet baseline of MODELS.md, with automatic
batching (`dynet_config.set(autobatch=1)`, DyNet's --dynet-autobatch 1).

A call builds a fresh computation graph (`dy.renew_cg()`) with one expression
per node op, recursing over each structure in Python as a DyNet user writes
it, then runs `forward()` on one scalar that depends on every root output (so
every node is computed; every node is an ancestor of a root). DyNet's
autobatcher groups same-shaped ops across the whole batch, including the input
products (the Cortex paper found its automatic grouping beat doing it by hand).
`graph` (expression construction in Python) and `forward` (autobatching
analysis plus the kernels) are timed separately by the driver.

Threads: the dynet38 wheel's libdynet links neither OpenMP nor a BLAS (Eigen
only, on the calling thread), so DyNet has no intra-op thread setting; its
2-thread lines run the same single-threaded code.
"""
import dynet_config

dynet_config.set(mem="1024,1,2048,1024", autobatch=1, random_seed=1)
import dynet as dy  # noqa: E402
import numpy as np  # noqa: E402

from trees_ref import mv_word  # noqa: E402


class DyModel:
    """A model's parameters in a DyNet ParameterCollection (split where DyNet
    needs separate matrices)."""

    def __init__(self, model, W):
        self.model = model
        self.pc = dy.ParameterCollection()
        H = W["Emb"].shape[1]
        self.H = H
        self.E = self.pc.lookup_parameters_from_numpy(W["Emb"])
        self.p = {}
        for k, v in W.items():
            if k == "Emb":
                continue
            if k == "Mat":
                # lookup_parameters_from_numpy stores each [H, H] entry
                # column-major (it reads back transposed): hand it A^T.
                self.Mat = self.pc.lookup_parameters_from_numpy(np.ascontiguousarray(v.transpose(0, 2, 1)))
            elif model == "mvrnn" and k in ("W", "WM"):
                self.p[k + "l"] = self.pc.parameters_from_numpy(np.ascontiguousarray(v[:, :H]))
                self.p[k + "r"] = self.pc.parameters_from_numpy(np.ascontiguousarray(v[:, H:]))
            else:
                self.p[k] = self.pc.parameters_from_numpy(v)

    def node(self, s, v, st):
        p, H, m = self.p, self.H, self.model
        ch = [st[c] for c in s.children[v]]
        w = int(s.word[v])
        x = dy.lookup(self.E, w) if w >= 0 else None
        aff = dy.affine_transform
        if m == "treernn":
            return {"h": x} if not ch else {"h": dy.tanh(ch[0]["h"] + ch[1]["h"])}
        if m == "treefc":
            return {"h": x} if not ch else {"h": dy.tanh(aff([p["b"], p["Wl"], ch[0]["h"], p["Wr"], ch[1]["h"]]))}
        if m == "treelstm":
            if not ch:
                iou = aff([p["b_iou"], p["W_iou"], x])
                c = dy.cmult(dy.logistic(dy.pick_range(iou, 0, H)), dy.tanh(dy.pick_range(iou, 2 * H, 3 * H)))
            else:
                hs = dy.esum([k["h"] for k in ch])
                iou = aff([p["b_iou"], p["U_iou"], hs])
                c = dy.esum([dy.cmult(dy.logistic(dy.pick_range(iou, 0, H)), dy.tanh(dy.pick_range(iou, 2 * H, 3 * H)))] +
                            [dy.cmult(dy.logistic(aff([p["b_f"], p["U_f"], k["h"]])), k["c"]) for k in ch])
            return {"h": dy.cmult(dy.logistic(dy.pick_range(iou, H, 2 * H)), dy.tanh(c)), "c": c}
        if m == "treegru":
            if not ch:
                # 1 - sigmoid(a) = sigmoid(-a): DyNet has no scalar - expression
                zc = dy.logistic(-aff([p["b_z"], p["W_z"], x]))
                return {"h": dy.cmult(zc, dy.tanh(aff([p["b_h"], p["W_h"], x])))}
            hs = dy.esum([k["h"] for k in ch])
            za = aff([p["b_z"], p["U_z"], hs])
            z, zc = dy.logistic(za), dy.logistic(-za)
            rh = dy.esum([dy.cmult(dy.logistic(aff([p["b_r"], p["U_r"], k["h"]])), k["h"]) for k in ch])
            return {"h": dy.cmult(z, hs) + dy.cmult(zc, dy.tanh(aff([p["b_h"], p["U_h"], rh])))}
        if m == "mvrnn":
            if not ch:
                return {"h": x, "A": dy.lookup(self.Mat, mv_word(w))}
            l, r = ch
            h = dy.tanh(aff([p["b"], p["Wl"], r["A"] * l["h"], p["Wr"], l["A"] * r["h"]]))
            return {"h": h, "A": p["WMl"] * l["A"] + p["WMr"] * r["A"]}
        if m == "dagrnn":
            args = [p["b"], p["U"], x]
            if ch:
                args += [p["W"], dy.esum([k["h"] for k in ch])]
            return {"h": dy.rectify(aff(args))}
        if m == "lstm":
            args = [p["b"], p["W_ih"], x] + ([p["W_hh"], ch[0]["h"]] if ch else [])
            g = aff(args)
            c = dy.cmult(dy.logistic(dy.pick_range(g, 0, H)), dy.tanh(dy.pick_range(g, 2 * H, 3 * H)))
            if ch:
                c = c + dy.cmult(dy.logistic(dy.pick_range(g, H, 2 * H)), ch[0]["c"])
            return {"h": dy.cmult(dy.logistic(dy.pick_range(g, 3 * H, 4 * H)), dy.tanh(c)), "c": c}
        if m == "gru":
            gi = aff([p["b_ih"], p["W_ih"], x])
            if ch:
                hp = ch[0]["h"]
                gh = aff([p["b_hh"], p["W_hh"], hp])
            else:
                hp, gh = None, p["b_hh"] + 0
            r = dy.logistic(dy.pick_range(gi, 0, H) + dy.pick_range(gh, 0, H))
            za = dy.pick_range(gi, H, 2 * H) + dy.pick_range(gh, H, 2 * H)
            z, zc = dy.logistic(za), dy.logistic(-za)
            n = dy.tanh(dy.pick_range(gi, 2 * H, 3 * H) + dy.cmult(r, dy.pick_range(gh, 2 * H, 3 * H)))
            h = dy.cmult(zc, n)
            return {"h": h + dy.cmult(z, hp) if ch else h}
        raise ValueError(m)

    def graph(self, structs):
        """Build the graph of one batch: per-node state dicts, and the scalar to force."""
        dy.renew_cg()
        outs, tops = [], []
        for s in structs:
            st = {}

            def rec(v):
                if v not in st:
                    for c in s.children[v]:
                        rec(c)
                    st[v] = self.node(s, v, st)
            for r in s.roots:
                rec(r)
                tops.extend(dy.sum_elems(e) for e in st[r].values())
            outs.append(st)
        return outs, dy.esum(tops)


def forward(final):
    return final.value()


def stack(outs, structs):
    """Every node's values (after forward) in the structures' own numbering."""
    keys = outs[0][0].keys()
    return {k: np.stack([np.asarray(o[v][k].npvalue()) for o, s in zip(outs, structs) for v in range(s.n)])
            for k in keys}
