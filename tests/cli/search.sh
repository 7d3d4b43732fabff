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
read -r tried invalid big ranked < <(sed -n 's/.*; \([0-9]*\) plans tried.*: \([0-9]*\) refused.*, \([0-9]*\) do not fit, \([0-9]*\) ranked.*/\1 \2 \3 \4/p' "$work/out")
[ $((invalid + big + ranked)) -eq "$tried" ] || { echo "FAIL: $tried tried, $invalid + $big + $ranked counted"; exit 1; }
awk '$1 ~ /^[0-9]+$/ && NF > 10 {if (prev != "" && $2 < prev) bad = 1; prev = $2} END {exit bad}' "$work/out" ||
  { echo "FAIL: the table is not sorted by step time"; exit 1; }
best=$(awk '$1 == 1 {print $2}' "$work/out")
"$etsim" --analytic --quiet --json "$work/r.json" "$work/best.json" > /dev/null
again=$(jq .estimate.step.step_s "$work/r.json")
awk -v a="$best" -v b="$again" 'BEGIN {d = a - b; if (d < 0) d = -d; exit !(d <= 5e-5 * b)}' ||
  { echo "FAIL: the best plan estimates $again s, the search said $best s"; exit 1; }
grep -q "the best is [0-9.]*x faster" "$work/out" || { echo "FAIL: no comparison with the scenario's own plan"; exit 1; }
echo "search: 1 passed, 0 failed"
