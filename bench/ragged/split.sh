#!/bin/sh
# bench/ragged/split.sh — operation splitting on AttnV (issue 14): the
# kernel time of attnv.rv (last row tile partitioned by the lowering),
# attnv.rv with the tile guarded instead (tail="guard"), attnv_split.rv
# (split_op: full tiles and the rest as two parts) and it without hfuse
# (two parallel loops), on batches of B lengths sampled with a fixed seed
# from $DATA_DIR/DATASET/train_lengths.txt (DATA_DIR: ../shared/data).
#
#   sh bench/ragged/split.sh [DATASET [B... ]]      (default: mnli 32 64 128)
#
# THREADS (default "1 2") and REPEAT (default 300) set the runs; prints one
# line per configuration: the median and min kernel time in ms (`ravel run
# --time`, which includes the prelude and the runtime's checks).
set -eu
cd "$(dirname "$0")/../.."
RAVEL=${RAVEL:-build/ravel}
data=${1:-mnli}
[ $# -gt 0 ] && shift
sizes=${*:-32 64 128}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sed 's/, tail="guard"//; s/split(l, 8)/split(l, 8, tail="guard")/' bench/ragged/attnv.rv >"$tmp/guard.rv"
sed '/hfuse(R)/d' bench/ragged/attnv_split.rv >"$tmp/split_nohfuse.rv"
for B in $sizes; do
    python3 - "${DATA_DIR:-../shared/data}/$data" "$B" "$tmp/len$B.npy" <<'PY'
import random, struct, sys
data, B, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
L = [int(x) for x in open(data + "/train_lengths.txt")]
random.seed(7)
s = [min(x, 512) for x in random.sample(L, B)]
hdr = "{'descr': '<i4', 'fortran_order': False, 'shape': (%d,), }" % B
hdr += " " * (64 - 10 - len(hdr) - 1) + "\n"
with open(out, "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode())
    f.write(struct.pack("<%di" % B, *s))
PY
    for t in ${THREADS:-1 2}; do
        for v in bench/ragged/attnv.rv "$tmp/guard.rv" bench/ragged/attnv_split.rv "$tmp/split_nohfuse.rv"; do
            r=$("$RAVEL" run "$v" --random 1 --input len="$tmp/len$B.npy" --time \
                --repeat "${REPEAT:-300}" --threads "$t" | tail -n 1)
            printf '%s B=%s threads=%s %-18s %s\n' "$data" "$B" "$t" "$(basename "$v" .rv)" \
                "$(echo "$r" | sed 's/.*run median \([0-9.]*\) ms, min \([0-9.]*\) ms.*/median \1 ms  min \2 ms/')"
        done
    done
done
