#!/usr/bin/env python3
"""bench/trees/make_reference.py — write the weights and the reference outputs
the ravel models are checked against (MODELS.md, "Files"). NumPy only.

  python3 bench/trees/make_reference.py [--out bench/trees/out] [--seed 0]
                                        [--models treelstm,...]

For each model and hidden size:
  OUT/weights/<model>_h<H>/<name>.npy     every parameter, float32, named as in
                                          MODELS.md (deterministic from --seed)
  OUT/reference/<model>_h<H>/             the fixed small batch and its outputs:
      offsets.npy word.npy nchild.npy child_begin.npy child.npy root.npy
                                          (int64: the structures, trees_ref.struct_arrays)
      h.npy (float32 [N, H]), c.npy (LSTMs), A.npy (MV-RNN, [N, H, H])
                                          every node's state from the float64
                                          oracle, in the structures' own numbering
Idempotent: the same seed writes the same bytes.
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402

import trees_data as td  # noqa: E402
import trees_ref as tr  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(HERE, "out"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--models", default=",".join(tr.MODELS))
    a = ap.parse_args()
    for model in a.models.split(","):
        sb = td.small_batch(model)
        arrays = tr.struct_arrays(sb)
        for H in tr.HIDDEN[model]:
            W = tr.weights(model, H, a.seed)
            wd = tr.save_weights(os.path.join(a.out, "weights"), model, H, W)
            rd = os.path.join(a.out, "reference", "%s_h%d" % (model, H))
            os.makedirs(rd, exist_ok=True)
            for k, v in arrays.items():
                np.save(os.path.join(rd, k + ".npy"), v)
            ref = tr.reference(model, W, sb)
            for k, v in ref.items():
                np.save(os.path.join(rd, k + ".npy"), v.astype(np.float32))
            print("%s H=%d: %d structures, %d nodes -> %s, %s" % (model, H, len(sb), ref["h"].shape[0], wd, rd))


if __name__ == "__main__":
    main()
