#!/usr/bin/env bash
# A planner's day, scripted (issue 36): the questions a team asks before renting a Llama-3-70B-class run on
# 15T tokens (scenarios/llama3-70b-h100-15t.json), each answer reduced to the figures a reviewer reads,
# compared with tests/planner/day.expected so that a changed answer shows up in review. Set
# ET_UPDATE_EXPECTED=1 to rewrite the expected file after checking the change.
#   1. the cheapest plan that trains within 90 days on 1,024 to 4,096 H100s at $2.50 a GPU-hour
#   2. the fastest plan within a $15M budget (--rank-by time: the budget only filters)
#   3. the least energy
#   4. dense against 75% unstructured sparsity, part by part
#   5. one failed NIC in the cluster: the simulated step beside the healthy one
# Usage: day.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$(cd "$2" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
etsim=$build/sim/etsim
scenario=$src/scenarios/llama3-70b-h100-15t.json
space=(--search --search-gpus 1024,2048,4096 --price-per-gpu-hour 2.5 --search-top 1)
plan() { # the best plan of a search's JSON, as a reviewer reads it
  jq -r '.search | "ranked by \(.ranked_by): \(.ranked) of \(.tried) ranked; best: \(.best[0] | "\(.gpus) GPUs, tensor \(.tensor), pipeline \(.pipeline) x \(.virtual_pipeline), data \(.data), micro-batch \(.micro_batch), ZeRO \(.zero_stage), recomputation \(.recompute), step \(.step_s * 1000 | round) ms, \(.time_to_train_s / 86400 | . * 10 | round / 10) days, \(.gpu_hours / 1000 | round)k GPU-hours, $\(.cost / 1e6 | . * 100 | round / 100)M, \(.energy_kWh / 1000 | round) MWh")"' "$1"
}
{
  echo "1. cheapest within 90 days"
  "$etsim" "${space[@]}" --deadline-days 90 --json "$work/1.json" "$scenario" > /dev/null
  plan "$work/1.json"
  echo "2. fastest within \$15M"
  "$etsim" "${space[@]}" --rank-by time --budget 15000000 --json "$work/2.json" "$scenario" > /dev/null
  plan "$work/2.json"
  echo "3. least energy"
  "$etsim" "${space[@]}" --rank-by energy --json "$work/3.json" "$scenario" > /dev/null
  plan "$work/3.json"
  echo "4. dense against 75% unstructured sparsity"
  jq '.name = "llama3-70b-h100-15t-sparse75" | .method = {"kind": "sparse", "sparsity": {"attention": {"density": 0.25, "pattern": "unstructured"}, "mlp": {"density": 0.25, "pattern": "unstructured"}}}' \
    "$scenario" > "$work/sparse.json"
  "$etsim" --analytic --compare "$scenario" "$work/sparse.json" |
    grep -E '^(step \[ms\]|  compute per GPU|memory per GPU|  weights|  optimizer states|time-to-train|MFU)' | sed 's/  */ /g'
  echo "5. one failed NIC (node 3, NIC 1), simulated"
  jq '.cluster.faults = [{"part": "nic", "node": 3, "nic": 1, "failed": true}]' "$scenario" > "$work/nic.json"
  "$etsim" --quiet --steps 1 --json "$work/5.json" "$work/nic.json" > "$work/5.txt"
  jq -r '.simulation.faults | "step \(.step_s * 1000 | round) ms, healthy \(.healthy_step_s * 1000 | round) ms: the slowest part, \(.slowest.where) (\(.slowest.fraction_left * 100 | round)% of its bandwidth left), costs \(.slowest.cost_alone_s * 1000 | round) ms a step"' "$work/5.json"
} > "$work/day.txt"
cat "$work/day.txt"
if [ "${ET_UPDATE_EXPECTED:-0}" = 1 ]; then
  cp "$work/day.txt" "$src/tests/planner/day.expected"
  echo "rewrote tests/planner/day.expected"
fi
diff -u "$src/tests/planner/day.expected" "$work/day.txt" || { echo "FAIL: the planner's answers changed (ET_UPDATE_EXPECTED=1 rewrites them)"; exit 1; }
echo "planner's day: 1 passed, 0 failed"
