#!/usr/bin/python3
"""bench/torch_bench.py — the PyTorch baseline for the dense, bmm and sgemm
workloads, printing the same JSON lines as the C drivers with
"baseline": "pytorch" and, for now, "ravel_ms": null.

The calls are the ones a PyTorch user writes, under torch.inference_mode():
  dense   torch.nn.functional.linear(x, w)                      epilogue "none"
          torch.nn.functional.gelu(F.linear(x, w, b))           epilogue "bias_gelu"
  bmm     torch.bmm(q, k.transpose(1, 2))                       layout "NT"
          torch.bmm(p, v)                                       layout "NN"
  sgemm   torch.matmul(a, b)
Output tensors are allocated by PyTorch on every call, as in real use.

Threads: Debian's torch runs its own kernels on OpenMP (torch.set_num_threads)
and its GEMMs on the system OpenBLAS (pthread build), which ignores
torch.set_num_threads; we set both, OpenBLAS through ctypes.

Timing follows bench/timing.h: warm-up, run count chosen so each line covers
at least --min-time seconds (>= 10 runs, <= 10000), median/min/max of
individually timed calls with time.perf_counter (CLOCK_MONOTONIC).

The environment is fixed up as in the C drivers (bl_init in baselines.c):
OPENBLAS_CORETYPE removed, GOMP_SPINCOUNT=1000 and OPENBLAS_THREAD_TIMEOUT=17
unless set; the script re-executes itself once, before importing torch.

Usage: torch_bench.py [--bench dense,bmm,sgemm] [--threads 1,2] [--T list]
                      [--min-time S] [--quick]
"""
import argparse
import ctypes
import json
import math
import os
import sys
import time

SPIN_ENV = {"GOMP_SPINCOUNT": "1000", "OPENBLAS_THREAD_TIMEOUT": "17"}


def fix_environment():
    """Re-exec without OPENBLAS_CORETYPE and with the spin budget, as bl_init does."""
    env = dict(os.environ)
    changed = False
    if "OPENBLAS_CORETYPE" in env and env.get("RAVEL_BENCH_KEEP_CORETYPE") != "1":
        del env["OPENBLAS_CORETYPE"]
        changed = True
    if env.get("RAVEL_BENCH_LIBRARY_SPIN") != "1":
        for k, v in SPIN_ENV.items():
            if k not in env:
                env[k] = v
                changed = True
    if changed:
        os.execve(sys.executable, [sys.executable] + sys.argv, env)


fix_environment()
import torch  # noqa: E402  (after the environment is final)
import torch.nn.functional as F  # noqa: E402

DEFAULT_T = [1, 2, 3, 5, 8, 13, 16, 24, 32, 47, 64, 96, 128]
DENSE_SHAPES = [(2304, 768), (768, 768), (3072, 768), (768, 3072)]  # W is [N, K]
BATCH, HEAD = 192, 64


def openblas_handle():
    """The OpenBLAS torch loaded (libopenblas.so.0 via Debian's alternative)."""
    for name in ("libopenblas.so.0", "libblas.so.3"):
        try:
            lib = ctypes.CDLL(name)
            lib.openblas_set_num_threads  # raises AttributeError if not OpenBLAS
            lib.openblas_get_corename.restype = ctypes.c_char_p
            return lib
        except (OSError, AttributeError):
            continue
    return None


OPENBLAS = openblas_handle()


def set_threads(n):
    torch.set_num_threads(n)
    if OPENBLAS is not None:
        OPENBLAS.openblas_set_num_threads(n)


def time_calls(fn, min_time, min_runs=10, max_runs=10000, warmup=3):
    """Median/min/max in ms of individually timed calls (bench/timing.c's method)."""
    fn()  # first call untimed: cold caches, lazy initialisation
    est = min(timed(fn) for _ in range(max(warmup - 1, 1)))
    runs = max_runs if est <= 0 else min(max_runs, math.ceil(min_time / est))
    runs = max(runs, min_runs)
    ts = sorted(timed(fn) for _ in range(runs))
    mid = len(ts) // 2
    median = ts[mid] if len(ts) % 2 else 0.5 * (ts[mid - 1] + ts[mid])
    return {"median_ms": 1e3 * median, "min_ms": 1e3 * ts[0], "max_ms": 1e3 * ts[-1], "runs": runs}


# BENCH_CLOCK=cpu: the process's CPU time, as bench/timing.c's run_clock
# (one thread only: with more it sums the threads' time)
_CLOCK = time.process_time if os.environ.get("BENCH_CLOCK") == "cpu" else time.perf_counter


def timed(fn):
    t0 = _CLOCK()
    fn()
    return _CLOCK() - t0


def emit(bench, config, flops, base):
    """One line in the C drivers' format; ravel is null until it has Python bindings."""
    line = {
        "bench": bench,
        "config": config,
        "ravel_ms": None,
        "baseline": "pytorch",
        "baseline_ms": round(base["median_ms"], 6),
        "ratio": None,
        "gflops": None,
        "baseline_gflops": round(flops / (base["median_ms"] * 1e6), 3),
        "runs": base["runs"],
        "ravel_min_ms": None,
        "ravel_max_ms": None,
        "baseline_min_ms": round(base["min_ms"], 6),
        "baseline_max_ms": round(base["max_ms"], 6),
    }
    print(json.dumps(line), flush=True)


def rand(*shape):
    return torch.rand(*shape, dtype=torch.float32) * 2 - 1


def bench_dense(args, threads):
    shapes = [DENSE_SHAPES[0]] if args.quick else DENSE_SHAPES
    for n, k in shapes:
        w, b = rand(n, k), rand(n)
        x_all = rand(16 * max(args.T), k)
        for epilogue in ("none", "bias_gelu"):
            for t in args.T:
                m = 16 * t
                x = x_all[:m]
                if epilogue == "none":
                    fn = lambda: F.linear(x, w)  # noqa: E731
                else:
                    fn = lambda: F.gelu(F.linear(x, w, b))  # noqa: E731
                config = {"T": t, "M": m, "N": n, "K": k, "threads": threads, "epilogue": epilogue}
                emit("dense", config, 2.0 * m * n * k, time_calls(fn, args.min_time))


def bench_bmm(args, threads):
    for layout in ("NT", "NN"):
        for t in args.T:
            if layout == "NT":
                q, kk = rand(BATCH, t, HEAD), rand(BATCH, t, HEAD)
                m, n, k = t, t, HEAD
                fn = lambda: torch.bmm(q, kk.transpose(1, 2))  # noqa: E731
            else:
                p, v = rand(BATCH, t, t), rand(BATCH, t, HEAD)
                m, n, k = t, HEAD, t
                fn = lambda: torch.bmm(p, v)  # noqa: E731
            config = {"T": t, "batch": BATCH, "M": m, "N": n, "K": k, "layout": layout,
                      "threads": threads}
            emit("bmm", config, 2.0 * BATCH * m * n * k, time_calls(fn, args.min_time))


def bench_sgemm(args, threads):
    for n in args.sizes:
        a, b = rand(n, n), rand(n, n)
        config = {"M": n, "N": n, "K": n, "threads": threads}
        emit("sgemm", config, 2.0 * n ** 3, time_calls(lambda: torch.matmul(a, b), args.min_time))


def verify():
    """The PyTorch calls against float64 references at small sizes."""
    ok = True
    torch.manual_seed(0)
    x, w, b = rand(48, 768), rand(2304, 768), rand(2304)
    ref = (x.double() @ w.double().t() + b.double())
    checks = [("dense none", F.linear(x, w), x.double() @ w.double().t()),
              ("dense bias_gelu", F.gelu(F.linear(x, w, b)), F.gelu(ref))]
    q, kk, p, v = rand(BATCH, 47, HEAD), rand(BATCH, 47, HEAD), rand(BATCH, 47, 47), rand(BATCH, 47, HEAD)
    checks.append(("bmm NT", torch.bmm(q, kk.transpose(1, 2)), q.double() @ kk.double().transpose(1, 2)))
    checks.append(("bmm NN", torch.bmm(p, v), p.double() @ v.double()))
    a, bb = rand(257, 257), rand(257, 257)
    checks.append(("sgemm", torch.matmul(a, bb), a.double() @ bb.double()))
    for name, got, want in checks:
        err = (got.double() - want).abs().max().item()
        good = err < 1e-3
        ok &= good
        print(f"verify pytorch {name:<20} {'ok' if good else 'FAIL'} (max abs error {err:.3g})")
    return ok


def int_list(s):
    return [int(v) for v in s.split(",") if v]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bench", default="dense,bmm,sgemm")
    ap.add_argument("--threads", type=int_list, default=[1, 2])
    ap.add_argument("--T", type=int_list, default=DEFAULT_T)
    ap.add_argument("--sizes", type=int_list, default=[512, 1024, 2048])
    ap.add_argument("--min-time", type=float, default=0.2)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--verify", action="store_true")
    args = ap.parse_args()
    if args.verify:
        sys.exit(0 if verify() else 1)
    if args.quick:
        args.T, args.sizes = [1, 16, 128], [512, 1024]
    print(f"torch_bench: torch {torch.__version__}, OpenBLAS "
          f"{OPENBLAS.openblas_get_corename().decode() if OPENBLAS else '(not found)'} kernels "
          f"via {'ctypes' if OPENBLAS else '-'}, GOMP_SPINCOUNT={os.environ.get('GOMP_SPINCOUNT')}",
          file=sys.stderr)
    runners = {"dense": bench_dense, "bmm": bench_bmm, "sgemm": bench_sgemm}
    with torch.inference_mode():
        for threads in args.threads:
            set_threads(threads)
            for name in args.bench.split(","):
                runners[name](args, threads)


if __name__ == "__main__":
    main()
