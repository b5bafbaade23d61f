#!/usr/bin/env python3
"""bench/encoder/gen.py — writes the encoder benchmark's inputs as .npy:

  out/weights/<config>/<param>.npy   float32, one file per parameter (ENCODER.md)
  out/batches/<dataset>_b<B>.npy     int32 lengths of the sampled batch
  ref/lengths.npy, ref/x.npy, ref/y.npy
                                     the fixed small batch of the reference
                                     (cora512), its input and the float64
                                     numpy oracle's output, rounded to float32
                                     (committed: ravel's correctness test)

Usage: gen.py [--out DIR] [--ref]   (--ref also rewrites ref/)
Every file is a pure function of the seeds in encoder_data.py.
"""
import argparse
import os

import numpy as np

import encoder_data as ed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=ed.OUT_DIR)
    ap.add_argument("--ref", action="store_true")
    a = ap.parse_args()
    for cname, cfg in ed.CONFIGS.items():
        d = os.path.join(a.out, "weights", cname)
        os.makedirs(d, exist_ok=True)
        for name, arr in ed.make_weights(cfg).items():
            np.save(os.path.join(d, name + ".npy"), arr)
    bd = os.path.join(a.out, "batches")
    os.makedirs(bd, exist_ok=True)
    for ds in ed.DATASETS:
        lens = ed.read_lengths(ds)
        for b in ed.BATCH_SIZES:
            np.save(os.path.join(bd, "%s_b%d.npy" % (ds, b)), ed.sample_batch(ds, b, all_lengths=lens))
    if a.ref:
        cfg = ed.CONFIGS[ed.REF_CONFIG]
        lens = np.array(ed.REF_LENGTHS, dtype=np.int32)
        x = ed.make_input(int(lens.sum()), cfg["hidden"])
        y = ed.reference(cfg, ed.make_weights(cfg), x, lens).astype(np.float32)
        rd = os.path.join(ed.HERE, "ref")
        os.makedirs(rd, exist_ok=True)
        np.save(os.path.join(rd, "lengths.npy"), lens)
        np.save(os.path.join(rd, "x.npy"), x)
        np.save(os.path.join(rd, "y.npy"), y)
    print("gen.py: wrote", a.out)


if __name__ == "__main__":
    main()
