#!/usr/bin/env bash
# etsim --search: every candidate counted once (tried = refused + too big + ranked), the table sorted by
# step time, and the best plan, written with --search-out, estimated again by etsim as that very step.
# Usage: search.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$(cd "$2" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
etsim=$build/sim/etsim
"$etsim" --search --search-top 5 --search-out "$work/best.json" "$src/scenarios/gpt3-13b-dense-a100.json" > "$work/out"
cat "$work/out"
counts() { sed -n 's/.*; \([0-9]*\) plans tried.*: \([0-9]*\) refused.*, \([0-9]*\) do not fit, \([0-9]*\) miss the deadline, \([0-9]*\) ranked.*/\1 \2 \3 \4 \5/p' "$1"; }
read -r tried invalid big slow ranked < <(counts "$work/out")
[ $((invalid + big + slow + ranked)) -eq "$tried" ] || { echo "FAIL: $tried tried, $invalid + $big + $slow + $ranked counted"; exit 1; }
sorted() { sed '/^Pareto/q' "$1" | awk -v c="$2" '$1 ~ /^[0-9]+$/ && NF > 10 {if (prev != "" && $c < prev) bad = 1; prev = $c} END {exit bad}'; }
sorted "$work/out" 4 || { echo "FAIL: the table is not sorted by step time"; exit 1; }
best=$(awk '$1 == 1 {print $4; exit}' "$work/out")
"$etsim" --analytic --quiet --json "$work/r.json" "$work/best.json" > /dev/null
again=$(jq .estimate.step.step_s "$work/r.json")
awk -v a="$best" -v b="$again" 'BEGIN {d = a - b; if (d < 0) d = -d; exit !(d <= 5e-5 * b)}' ||
  { echo "FAIL: the best plan estimates $again s, the search said $best s"; exit 1; }
grep -q "the best is [0-9.]*x faster" "$work/out" || { echo "FAIL: no comparison with the scenario's own plan"; exit 1; }
# one thread or two: the same plans, the same ranking
"$etsim" --search --search-top 8 --search-threads 1 "$src/scenarios/gpt3-13b-dense-a100.json" | sed 1d > "$work/t1"
"$etsim" --search --search-top 8 --search-threads 2 "$src/scenarios/gpt3-13b-dense-a100.json" | sed 1d > "$work/t2"
cmp -s "$work/t1" "$work/t2" || { echo "FAIL: the ranking depends on the threads"; diff "$work/t1" "$work/t2"; exit 1; }
# the two best simulated too: SimGrid's step beside the analytic one
"$etsim" --search --search-top 2 --search-simulate 2 --steps 1 "$src/scenarios/gpt3-13b-dense-a100.json" > "$work/s"
[ "$(sed -n '/^simulated (SimGrid)/,/^$/p' "$work/s" | awk '$1 ~ /^[0-9]+$/ && $4 > 0.5 && $4 < 2' | wc -l)" -eq 2 ] ||
  { echo "FAIL: the simulated top plans"; cat "$work/s"; exit 1; }
# several GPU counts and a deadline: every plan listed trains within it, ranked by GPU-hours
"$etsim" --search --search-top 8 --search-gpus 256,512 --deadline-days 4 "$src/scenarios/gpt3-13b-dense-a100.json" > "$work/d"
read -r tried invalid big slow ranked < <(counts "$work/d")
[ "$slow" -gt 0 ] && [ $((invalid + big + slow + ranked)) -eq "$tried" ] || { echo "FAIL: deadline counts"; cat "$work/d"; exit 1; }
sorted "$work/d" 17 || { echo "FAIL: not ranked by GPU-hours"; exit 1; }
awk '$1 ~ /^[0-9]+$/ && NF > 10 && $16 == "days" && $15 > 4 {exit 1}' "$work/d" || { echo "FAIL: a plan past the deadline"; exit 1; }
# two devices: the Pareto front of time against GPU-hours, each plan beating the next on time and losing on
# GPU-hours
"$etsim" --search --search-top 3 --search-gpus 256,512 --search-devices a100-sxm4-80gb,h100-sxm \
  "$src/scenarios/gpt3-13b-dense-a100.json" > "$work/f"
grep -q "h100-sxm" "$work/f" && grep -q "^Pareto front" "$work/f" || { echo "FAIL: devices or front missing"; exit 1; }
sed -n '/^Pareto front/,/^$/p' "$work/f" | awk '$1 ~ /^[0-9]+$/ {h = $17; if (prev != "" && h >= prev) bad = 1; prev = h} END {exit bad}' ||
  { echo "FAIL: the front is not ordered by falling GPU-hours"; exit 1; }
set +e
"$etsim" --search --search-gpus 100 "$src/scenarios/gpt3-13b-dense-a100.json" > /dev/null 2> "$work/err"
rc=$?
set -e
[ $rc -eq 2 ] && grep -q "not a multiple of the 8 GPUs" "$work/err" || { echo "FAIL: --search-gpus 100 (exit $rc)"; exit 1; }
echo "search: 1 passed, 0 failed"
