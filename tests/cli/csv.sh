#!/usr/bin/env bash
# etsim --csv PREFIX: the op, bucket, rank and step tables as CSV, the same records as the JSON report.
# Usage: csv.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$(cd "$2" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
etsim=$build/sim/etsim
"$etsim" --quiet --steps 2 --json "$work/r.json" --csv "$work/t" "$src/scenarios/mlperf-bert-8.json" > /dev/null
check() { # FILE HEADER ROWS
  [ "$(head -1 "$1")" = "$2" ] || { echo "FAIL: $1 header: $(head -1 "$1")"; exit 1; }
  [ "$(($(wc -l < "$1") - 1))" -eq "$3" ] || { echo "FAIL: $1 has $(($(wc -l < "$1") - 1)) rows, want $3"; exit 1; }
}
check "$work/t-ops.csv" "id,phase,kind,flops,bytes,time_s" "$(jq '.simulation.ops | length' "$work/r.json")"
check "$work/t-buckets.csv" "bucket,bytes,algorithm,time_s,closed_form_s,algbw_GBps,busbw_GBps" \
  "$(jq '.simulation.buckets | length' "$work/r.json")"
check "$work/t-ranks.csv" "rank,stage,compute_s,exposed_comm_s,idle_s" 8
check "$work/t-steps.csv" "step,time_s,compute_s,idle_s,exposed_comm_s,straggler_factor" 2
# the same numbers as the JSON: the first step's time
want=$(jq '.simulation.steps[0].time_s' "$work/r.json")
got=$(sed -n 2p "$work/t-steps.csv" | cut -d, -f2)
awk -v a="$want" -v b="$got" 'BEGIN {exit !(a - b < 1e-9 * a && b - a < 1e-9 * a)}' || { echo "FAIL: $got vs $want"; exit 1; }
# the analytic engine writes the op table only
"$etsim" --analytic --quiet --csv "$work/a" "$src/scenarios/tiny-gpt-cpu.json" > /dev/null
[ -f "$work/a-ops.csv" ] && [ ! -e "$work/a-steps.csv" ] || { echo "FAIL: analytic CSV files"; exit 1; }
echo "csv: 1 passed, 0 failed"
