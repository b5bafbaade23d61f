#!/usr/bin/env python3
"""bench/encoder/torch_encoder.py — the PyTorch baselines of the encoder
layer (ENCODER.md), with the weights and batches gen.py wrote, printing the
JSON lines of packed_encoder (bench/README.md, "Encoder baselines").

Baselines (all under torch.inference_mode(), float32, CPU):
  torch_padded       nn.TransformerEncoderLayer (post-LN, gelu, eps 1e-12) on
                     the padded batch [B, max_len, H] with src_key_padding_mask:
                     the fused fast path (torch._transformer_encoder_layer_fwd)
                     over padded tensors.
  torch_padded_sdpa  the layer written out with F.linear and
                     F.scaled_dot_product_attention with a boolean key mask,
                     padded.
  torch_nested       nn.TransformerEncoder(num_layers=1,
                     enable_nested_tensor=True) with src_key_padding_mask: the
                     fast path converts the padded batch to a nested tensor,
                     runs the layer on it and pads the result again (that
                     conversion is part of what a user of this API pays).
  torch_jagged       the layer written out on a torch.jagged nested tensor
                     made from the packed tokens without a copy
                     (nested_tensor_from_jagged), F.linear / F.layer_norm /
                     F.gelu on it and SDPA over [B, heads, j, 64].
The padded baselines get the padded input already built; the packed ones
the packed tokens: each starts from its own natural input layout, and all
end with the same values at the real tokens (--check).

Usage: torch_encoder.py [--layer cora512] [--datasets a,b] [--batch 32,64,128]
                        [--threads 1,2] [--baselines a,b] [--min-time S]
                        [--min-runs N] [--max-runs N]
                        [--check]
Run with the venv of bench/encoder/setup.sh (PyPI's torch 2.x).
"""
import argparse
import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
import torch_bench as tb  # noqa: E402  (fixes the environment, re-execs once, imports torch)
import encoder_data as ed  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

BASELINES = ["torch_padded", "torch_padded_sdpa", "torch_nested", "torch_jagged"]


def load_weights(layer, data):
    d = os.path.join(data, "weights", layer)
    return {name: torch.from_numpy(np.load(os.path.join(d, name + ".npy")))
            for name, _, _, _ in ed.params(ed.CONFIGS[layer])}


def torch_layer(cfg, w):
    """nn.TransformerEncoderLayer holding the ENCODER.md weights."""
    m = torch.nn.TransformerEncoderLayer(
        cfg["hidden"], cfg["heads"], cfg["ff"], dropout=0.0, activation="gelu",
        layer_norm_eps=ed.LN_EPS, batch_first=True, norm_first=False)
    with torch.no_grad():
        m.self_attn.in_proj_weight.copy_(w["w_qkv"])
        m.self_attn.in_proj_bias.copy_(w["b_qkv"])
        m.self_attn.out_proj.weight.copy_(w["w_o"])
        m.self_attn.out_proj.bias.copy_(w["b_o"])
        m.norm1.weight.copy_(w["ln1_g"])
        m.norm1.bias.copy_(w["ln1_b"])
        m.linear1.weight.copy_(w["w_ff1"])
        m.linear1.bias.copy_(w["b_ff1"])
        m.linear2.weight.copy_(w["w_ff2"])
        m.linear2.bias.copy_(w["b_ff2"])
        m.norm2.weight.copy_(w["ln2_g"])
        m.norm2.bias.copy_(w["ln2_b"])
    return m.eval()


def sdpa_layer(cfg, w, x, attn_mask=None):
    """The layer written out; x is [B, L, H] (padded, with attn_mask) or a
    jagged nested tensor [B, j, H]."""
    h, nh, d = cfg["hidden"], cfg["heads"], cfg["head_dim"]
    qkv = F.linear(x, w["w_qkv"], w["b_qkv"])
    # jagged SDPA (math backend on CPU) wants q, k, v contiguous as [B, j, heads, 64]
    split = [t.contiguous() if x.is_nested else t for t in qkv.split(h, dim=-1)]
    q, k, v = (t.unflatten(-1, (nh, d)).transpose(1, 2) for t in split)
    a = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask).transpose(1, 2).flatten(-2)
    y1 = F.layer_norm(x + F.linear(a, w["w_o"], w["b_o"]), (h,), w["ln1_g"], w["ln1_b"], ed.LN_EPS)
    f = F.linear(F.gelu(F.linear(y1, w["w_ff1"], w["b_ff1"])), w["w_ff2"], w["b_ff2"])
    return F.layer_norm(y1 + f, (h,), w["ln2_g"], w["ln2_b"], ed.LN_EPS)


class Batch:
    """One batch in every layout the baselines start from."""

    def __init__(self, cfg, lengths, x=None):
        self.lengths = [int(n) for n in lengths]
        t, h = sum(self.lengths), cfg["hidden"]
        self.x = torch.from_numpy(x if x is not None else ed.make_input(t, h))
        self.max_len = max(self.lengths)
        bsz = len(self.lengths)
        self.pad_mask = torch.ones(bsz, self.max_len, dtype=torch.bool)  # True = padding
        self.padded = torch.zeros(bsz, self.max_len, h)
        off = 0
        for i, n in enumerate(self.lengths):
            self.padded[i, :n] = self.x[off:off + n]
            self.pad_mask[i, :n] = False
            off += n
        self.attn_mask = (~self.pad_mask)[:, None, None, :]  # True = attend
        self.offsets = torch.tensor([0] + list(np.cumsum(self.lengths)), dtype=torch.int64)

    def jagged(self):
        return torch.nested.nested_tensor_from_jagged(self.x, self.offsets)

    def unpad(self, y):
        return torch.cat([y[i, :n] for i, n in enumerate(self.lengths)])


def make_fns(cfg, w, layer, encoder, batch):
    return {
        "torch_padded": lambda: layer(batch.padded, src_key_padding_mask=batch.pad_mask),
        "torch_padded_sdpa": lambda: sdpa_layer(cfg, w, batch.padded, batch.attn_mask),
        "torch_nested": lambda: encoder(batch.padded, src_key_padding_mask=batch.pad_mask),
        "torch_jagged": lambda: sdpa_layer(cfg, w, batch.jagged()),
    }


def packed_output(name, batch, y):
    if name == "torch_jagged":
        return y.values()
    return batch.unpad(y)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layer", default="cora512", choices=sorted(ed.CONFIGS))
    ap.add_argument("--data", default=ed.OUT_DIR)
    ap.add_argument("--datasets", default=",".join(ed.DATASETS))
    ap.add_argument("--batch", default="32,64,128")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--baselines", default=",".join(BASELINES))
    ap.add_argument("--min-time", type=float, default=0.2)
    ap.add_argument("--min-runs", type=int, default=5)
    ap.add_argument("--max-runs", type=int, default=10000)
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    cfg = ed.CONFIGS[a.layer]
    w = load_weights(a.layer, a.data)
    layer = torch_layer(cfg, w)
    encoder = torch.nn.TransformerEncoder(layer, 1, enable_nested_tensor=True).eval()
    names = a.baselines.split(",")
    print("torch_encoder: torch %s, MKL %s, oneDNN %s" % (torch.__version__, torch.backends.mkl.is_available(), torch.backends.mkldnn.is_available()),
          file=sys.stderr)
    with torch.inference_mode():
        if a.check:
            ref_dir = os.path.join(HERE, "ref")
            lens = np.load(os.path.join(ref_dir, "lengths.npy"))
            batch = Batch(ed.CONFIGS[ed.REF_CONFIG], lens, np.load(os.path.join(ref_dir, "x.npy")))
            ref = torch.from_numpy(np.load(os.path.join(ref_dir, "y.npy")))
            bad = 0
            for name, fn in make_fns(cfg, w, layer, encoder, batch).items():
                if name not in names:
                    continue
                err = (packed_output(name, batch, fn()) - ref).abs().max().item()
                print("torch_encoder: %s: max abs error vs ref/y.npy %.3g (%s)"
                      % (name, err, "ok" if err < 1e-3 else "FAIL"))
                bad |= not err < 1e-3
            sys.exit(1 if bad else 0)
        for ds in a.datasets.split(","):
            for bs in a.batch.split(","):
                lens = np.load(os.path.join(a.data, "batches", "%s_b%s.npy" % (ds, bs)))
                batch = Batch(cfg, lens)
                flops = ed.flops(cfg, lens)
                fns = make_fns(cfg, w, layer, encoder, batch)
                for th in [int(t) for t in a.threads.split(",")]:
                    tb.set_threads(th)
                    for name in names:
                        s = tb.time_calls(fns[name], a.min_time, min_runs=a.min_runs, max_runs=a.max_runs)
                        print(json.dumps({
                            "bench": "encoder", "layer": a.layer, "dataset": ds, "batch": len(lens),
                            "tokens": int(lens.sum()), "max_len": int(lens.max()),
                            "hidden": cfg["hidden"], "threads": th, "baseline": name,
                            "median_ms": round(s["median_ms"], 4), "min_ms": round(s["min_ms"], 4),
                            "max_ms": round(s["max_ms"], 4), "runs": s["runs"],
                            "useful_gflops": round(flops / (s["median_ms"] * 1e6), 2),
                            "torch": torch.__version__}), flush=True)


if __name__ == "__main__":
    main()
