"""torch_gpu.py — cuBLAS (through PyTorch) on the GPU workloads of bench/gpu.

Prints one JSON line per (op, T): the median time of torch.bmm / torch.mm
on CUDA tensors already on the device (CUDA events around each call, after
warm-up), the baseline for `ravel run bench/gpu/*.rv --target cuda --time`
(whose `kernels` figure is each launch until the device is done, without
the copies to and from the device).
"""
import argparse
import json
import statistics

import torch


def time_cuda(fn, runs):
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(runs):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        ts.append(a.elapsed_time(b))
    return statistics.median(ts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--T", default="1,16,64,128")
    ap.add_argument("--runs", type=int, default=100)
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False  # FP32 as ravel computes
    dev = torch.device("cuda")
    for t in [int(x) for x in args.T.split(",")]:
        x = torch.randn(192, t, 64, device=dev)
        w = torch.randn(192, t, 64, device=dev)
        ms = time_cuda(lambda: torch.bmm(x, w.transpose(1, 2)), args.runs)
        print(json.dumps({"op": "bmm_nt", "T": t, "system": "cublas", "ms": ms,
                          "gflops": 2 * 192 * t * t * 64 / ms / 1e6}))
        xd = torch.randn(16 * t, 768, device=dev)
        wd = torch.randn(2304, 768, device=dev)
        ms = time_cuda(lambda: torch.mm(xd, wd.t()), args.runs)
        print(json.dumps({"op": "dense_2304x768", "T": t, "system": "cublas", "ms": ms,
                          "gflops": 2 * 16 * t * 2304 * 768 / ms / 1e6}))


if __name__ == "__main__":
    main()
