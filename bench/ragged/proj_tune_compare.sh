#!/bin/sh
# proj_tune_compare.sh — the tuned packed-token projection against the
# hand-written schedule (docs/tuning.md, "Ragged rows"), paired: for each
# workload (B sequences, lengths drawn by `--random SEED`) the variant the
# tuned decision tree picks for its sum of len, and the median kernel time
# (`ravel run --time`) of that variant and of the file's own schedule,
# alternated ROUNDS times on the same inputs. Prints one line per workload:
# B, seed, sum(len), the variant, both medians of medians and their ratio.
#
#   ravel tune bench/ragged/proj_tune.rv --threads 1 --records R.jsonl -o OUT
#   sh bench/ragged/proj_tune_compare.sh OUT [ROUNDS [THREADS]]
set -eu
cd "$(dirname "$0")/../.."
RAVEL=${RAVEL:-build/ravel}
out=$1
rounds=${2:-5}
threads=${3:-1}
src=bench/ragged/proj_tune.rv
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# the definitions without the hand-written schedule, then each variant's
sed '/^schedule /,$d' "$src" >"$tmp/defs.rv"
for v in "$out".v*.sched; do
    k=${v##*.v}
    k=${k%.sched}
    cat "$tmp/defs.rv" "$v" >"$tmp/v$k.rv"
done
# the tree as a program: sum(len) -> variant
cat >"$tmp/main.c" <<'CEOF'
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
int TREE(const int64_t *sizes);
int main(int argc, char **argv) {
    int64_t s[2] = {0, atoll(argv[1])};
    (void)argc;
    printf("%d\n", TREE(s));
    return 0;
}
CEOF
tree=$(sed -n 's/^int \([A-Za-z0-9_]*_tree_dispatch\)(.*/\1/p' "${out}_dispatch.c")
${CC:-cc} -O2 -DTREE="$tree" -o "$tmp/tree" "$tmp/main.c" "${out}_dispatch.c"
median() { sed -n 's/.*run median \([0-9.]*\) ms.*/\1/p'; }
for w in "1 1" "1 2" "4 3" "8 4" "32 5" "32 6"; do
    set -- $w
    b=$1 seed=$2
    "$RAVEL" eval "$src" --random "$seed" --size B="$b" --save-inputs --output "$tmp/in" >/dev/null
    sum=$(python3 - "$tmp/in/len.npy" <<'PEOF'
import ast, struct, sys
d = open(sys.argv[1], "rb").read()  # .npy version 1: magic, header, data
n = struct.unpack("<H", d[8:10])[0]
h = ast.literal_eval(d[10:10 + n].decode())
w = int(h["descr"][2:])
body = d[10 + n:]
print(sum(struct.unpack("<%d%s" % (len(body) // w, "i" if w == 4 else "q"), body)))
PEOF
)
    v=$("$tmp/tree" "$sum")
    ta="" tb=""
    for r in $(seq "$rounds"); do
        ta="$ta $("$RAVEL" run "$tmp/v$v.rv" --random "$seed" --size B="$b" --time --repeat 50 \
            --threads "$threads" | median)"
        tb="$tb $("$RAVEL" run "$src" --random "$seed" --size B="$b" --time --repeat 50 \
            --threads "$threads" | median)"
    done
    python3 - "$b" "$seed" "$sum" "$v" "$ta" "$tb" <<'PEOF'
import statistics, sys
b, seed, s, v, ta, tb = sys.argv[1:]
a = [float(x) for x in ta.split()]
h = [float(x) for x in tb.split()]
ratio = statistics.median([y / x for x, y in zip(a, h)])
print(f"B={b} seed={seed} sum(len)={s} variant {v}: tuned {statistics.median(a):.4f} ms, "
      f"hand-written {statistics.median(h):.4f} ms, hand/tuned {ratio:.2f}x (median of {len(a)} pairs)")
PEOF
done
