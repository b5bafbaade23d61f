#!/bin/sh
# suite_layers.sh — the folders of src/ are layers, each using only the
# ones before it (docs/pipeline.md, "The compile driver"): a file of one
# layer that includes a header of a later one fails the suite, naming the
# file and the header.
#
# recursive/ (structures and the linearizer: data on base alone) sits
# right after base; the capability code of recursion (its IR, schedule
# primitives and lowering) lives in ir/, sched/ and lower/.
ORDER="base recursive ir interp lang sched lower plan codegen jit runtime tune driver"
cd "$(dirname "$0")/.." || exit 1

rank() {
    i=0
    for l in $ORDER; do
        [ "$l" = "$1" ] && { echo $i; return; }
        i=$((i + 1))
    done
    echo -1
}

fail=0 pass=0
for dir in src/*/; do
    layer=$(basename "$dir")
    r=$(rank "$layer")
    if [ "$r" -lt 0 ]; then
        echo "FAIL src/$layer: a folder that is not a layer of ORDER (tests/suite_layers.sh)"
        fail=$((fail + 1))
        continue
    fi
    for f in "$dir"*.c "$dir"*.h; do
        [ -f "$f" ] || continue
        for used in $(sed -n 's|^#include "\([a-z]*\)/.*|\1|p' "$f" | sort -u); do
            u=$(rank "$used")
            if [ "$u" -gt "$r" ]; then
                echo "FAIL $f includes $used/ (layer $used comes after $layer)"
                fail=$((fail + 1))
            else
                pass=$((pass + 1))
            fi
        done
    done
done
echo "layers: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
