"""bench/encoder/encoder_data.py — what every encoder baseline shares: the
two layer configurations, the parameters and how they are generated, the
eight length distributions and the sampled batches, and a float64 numpy
reference of the layer (the oracle). ENCODER.md is the spec this follows.

Everything is generated from integer seeds with splitmix64, a counter-based
generator that any language reproduces in a few lines (ENCODER.md gives it),
so ravel can regenerate the same numbers without reading files, and the .npy
files written by gen.py are only a convenience.
"""
import math
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def _data_dir():
    """RAVEL_DATA_DIR, else ../shared/data beside the checkout, else /work/shared/data."""
    if "RAVEL_DATA_DIR" in os.environ:
        return os.environ["RAVEL_DATA_DIR"]
    near = os.path.normpath(os.path.join(HERE, "..", "..", "..", "shared", "data"))
    return near if os.path.isdir(near) else "/work/shared/data"


DATA_DIR = _data_dir()
OUT_DIR = os.environ.get("ENCODER_OUT", os.path.join(HERE, "out"))

# name -> hidden, heads, head_dim, ff
CONFIGS = {
    "cora512": dict(hidden=512, heads=8, head_dim=64, ff=2048),
    "bert768": dict(hidden=768, heads=12, head_dim=64, ff=3072),
}
LN_EPS = 1e-12  # BERT's layernorm epsilon
WEIGHT_SEED = 1234
BATCH_SEED = 2024
INPUT_SEED = 7
BATCH_SIZES = [32, 64, 128]

# name -> (file under DATA_DIR, maximum length)
DATASETS = {
    "race": ("race/train_lengths.txt", 512),
    "wiki512": ("wiki512/full_lengths_512.txt", 512),
    "squadv2": ("squadv2/train_lengths.txt", 384),
    "wiki128": ("wiki128/full_lengths_128.txt", 128),
    "mnli": ("mnli/train_lengths.txt", 128),
    "xnli": ("xnli/train_lengths.txt", 128),
    "mrpc": ("mrpc/train_lengths.txt", 112),
    "cola": ("cola/train_lengths.txt", 48),
}

# The small fixed batch of the reference output (lengths 1 and the cora512
# maximum-free shapes included).
REF_CONFIG = "cora512"
REF_LENGTHS = [7, 1, 12, 3, 16, 5]

M64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def params(cfg):
    """(name, shape, kind, fan_in) in file order; weights are [out, in] as
    torch.nn.Linear stores them (y = x·Wᵀ + b)."""
    h, f = cfg["hidden"], cfg["ff"]
    return [
        ("w_qkv", (3 * h, h), "weight", h),  # rows: Q (heads in order), K, V
        ("b_qkv", (3 * h,), "bias", h),
        ("w_o", (h, h), "weight", h),
        ("b_o", (h,), "bias", h),
        ("ln1_g", (h,), "gamma", h),
        ("ln1_b", (h,), "beta", h),
        ("w_ff1", (f, h), "weight", h),
        ("b_ff1", (f,), "bias", h),
        ("w_ff2", (h, f), "weight", f),
        ("b_ff2", (h,), "bias", f),
        ("ln2_g", (h,), "gamma", h),
        ("ln2_b", (h,), "beta", h),
    ]


def fnv1a64(s):
    x = 0xCBF29CE484222325
    for c in s.encode():
        x = ((x ^ c) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return x


def splitmix64(key, n):
    """n outputs of splitmix64 for stream `key`: z_i = mix(key + (i+1)·γ)."""
    with np.errstate(over="ignore"):
        z = np.uint64(key) + (np.arange(1, n + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15))
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return z


def uniform(key, n):
    """n floats in [-1, 1): the top 24 bits of each splitmix64 output."""
    u = (splitmix64(key, n) >> np.uint64(40)).astype(np.float64) / float(1 << 24)
    return (2.0 * u - 1.0).astype(np.float32)


def stream_key(seed, name):
    return (seed * 0x100000001B3 ^ fnv1a64(name)) & 0xFFFFFFFFFFFFFFFF


def make_param(seed, name, shape, kind, fan_in):
    n = int(np.prod(shape))
    u = uniform(stream_key(seed, name), n).reshape(shape)
    if kind == "weight":
        return (u / np.float32(math.sqrt(fan_in))).astype(np.float32)
    if kind == "bias":
        return (u * np.float32(0.1)).astype(np.float32)
    if kind == "gamma":
        return (np.float32(1.0) + u * np.float32(0.1)).astype(np.float32)
    return (u * np.float32(0.1)).astype(np.float32)  # beta


def make_weights(cfg, seed=WEIGHT_SEED):
    return {name: make_param(seed, name, shape, kind, fan)
            for name, shape, kind, fan in params(cfg)}


def make_input(total_tokens, hidden, seed=INPUT_SEED):
    """The packed input x [sum(len), hidden], uniform in [-1, 1)."""
    return uniform(stream_key(seed, "x"), total_tokens * hidden).reshape(total_tokens, hidden)


def read_lengths(dataset):
    path, _ = DATASETS[dataset]
    with open(os.path.join(DATA_DIR, path)) as f:
        return np.array([int(line) for line in f], dtype=np.int64)


def sample_batch(dataset, batch, seed=BATCH_SEED, all_lengths=None):
    """batch lengths drawn with replacement: index_i = splitmix64 output i of
    stream (seed, "<dataset>/<batch>") modulo the file's line count."""
    if all_lengths is None:
        all_lengths = read_lengths(dataset)
    idx = splitmix64(stream_key(seed, "%s/%d" % (dataset, batch)), batch) % np.uint64(len(all_lengths))
    return all_lengths[idx.astype(np.int64)].astype(np.int32)


def flops(cfg, lengths):
    """Useful (unpadded) floating-point operations of one layer: 2 per
    multiply-add of the six GEMMs. Softmax, gelu and layernorm are left out
    (they are O(tokens·hidden), below 1%)."""
    h, f = cfg["hidden"], cfg["ff"]
    t = int(np.sum(lengths))
    sq = int(np.sum(np.asarray(lengths, dtype=np.int64) ** 2))
    dense = 2 * t * h * (3 * h + h + 2 * f)
    attn = 2 * 2 * sq * h  # QKᵀ and AttnV, all heads: heads·head_dim = hidden
    return dense + attn


def gelu(x):
    """Exact gelu: x·Φ(x) = 0.5·x·(1 + erf(x/√2))."""
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def _erf(x):
    # numpy has no erf; vectorise math.erf (the oracle is small)
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def layernorm(x, g, b):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + LN_EPS) * g + b


def reference(cfg, w, x, lengths):
    """The layer in float64 numpy on packed tokens: the oracle."""
    w = {k: v.astype(np.float64) for k, v in w.items()}
    x = x.astype(np.float64)
    h, nh, d = cfg["hidden"], cfg["heads"], cfg["head_dim"]
    qkv = x @ w["w_qkv"].T + w["b_qkv"]
    ctx = np.zeros_like(x)
    off = 0
    for n in lengths:
        n = int(n)
        for hd in range(nh):
            q = qkv[off:off + n, hd * d:(hd + 1) * d]
            k = qkv[off:off + n, h + hd * d:h + (hd + 1) * d]
            v = qkv[off:off + n, 2 * h + hd * d:2 * h + (hd + 1) * d]
            s = q @ k.T / math.sqrt(d)
            s = np.exp(s - s.max(axis=-1, keepdims=True))
            s /= s.sum(axis=-1, keepdims=True)
            ctx[off:off + n, hd * d:(hd + 1) * d] = s @ v
        off += n
    y = layernorm(x + ctx @ w["w_o"].T + w["b_o"], w["ln1_g"], w["ln1_b"])
    ff = gelu(y @ w["w_ff1"].T + w["b_ff1"]) @ w["w_ff2"].T + w["b_ff2"]
    return layernorm(y + ff, w["ln2_g"], w["ln2_b"])
