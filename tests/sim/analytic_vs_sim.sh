#!/usr/bin/env bash
# One step, two engines: on every shipped scenario whose network does not contend and whose batches do not
# vary (fixed sequence lengths, no faults, no per-rank noise), the analytic step and one step simulated by
# SimGrid, overlap on, agree within 0.1%: both play the one step schedule (model/step_schedule.h). Each
# scenario's two figures are listed; the others are listed with why they are left out (sampled lengths make
# each step's batches, and so its stragglers, differ from the analytic model's 16-step mean; faults are not
# in the analytic estimate; an experts' all-to-all across nodes is a network that contends: every rank's
# flows share the NICs, which the closed form does not, as an all-to-all inside a node with more than one
# expert group shares the node's links with the reduction of the experts' gradients between the groups;
# experts' all-to-alls of more than 2 million flows a step take SimGrid minutes, too long for the suite).
# Usage: analytic_vs_sim.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$(cd "$2" && pwd)
etsim=$build/sim/etsim
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
compared=0 bad=0
printf "%-34s %14s %14s %9s\n" "scenario" "analytic[s]" "simulated[s]" "sim/ana-1"
for f in "$src"/scenarios/*.json "$src"/scenarios/validation/*.json; do
  n=$(basename "$f" .json)
  why=$(jq -r 'if (.data.lengths // {distribution: "fixed"}).distribution != "fixed" then "sampled lengths"
               elif (.cluster.faults // [] | length) > 0 or .cluster.random_faults then "faults"
               elif (.parallelism.expert // 1) * (.parallelism.tensor // 1) > .cluster.gpus_per_node
               then "experts all-to-all across nodes (its flows contend on the NICs)"
               elif (.parallelism.expert // 1) > 1 and
                    (.parallelism.expert // 1) * (.parallelism.tensor // 1) < .cluster.gpus_per_node
               then "experts all-to-all beside their gradients reduction in one node (their flows contend on its links)"
               else "" end' "$f")
  if [ -z "$why" ] && [ "$(jq '.parallelism.expert // 1' "$f")" -gt 1 ]; then
    # the experts' all-to-alls a step, as flows: gpus (x - 1) each, four a layer and micro-batch (every layer
    # counted): beyond 2 million (a 256-GPU DeepSeek-V3 step has 240 million) SimGrid plays them for minutes
    "$etsim" --analytic --quiet --json "$work/a.json" "$f" > /dev/null 2>&1 || [ $? -eq 3 ]
    flows=$(jq '.scenario | .cluster.gpus * (.parallelism.expert - 1) * 4 * .model.layers * .batch.grad_accum' "$work/a.json")
    [ "$flows" -gt 2000000 ] && why="experts' all-to-alls of $flows flows a step (minutes to simulate)"
  fi
  if [ -n "$why" ]; then
    printf "%-34s left out: %s\n" "$n" "$why"
    continue
  fi
  "$etsim" --quiet --steps 1 --set simulation.straggler_sigma=0 --json "$work/r.json" "$f" > /dev/null 2>&1 || [ $? -eq 3 ] ||
    { echo "FAIL: $n: etsim failed (exit status other than 0, or 3 for a plan that does not fit)"; exit 1; }
  read -r a s < <(jq -r '[.estimate.step.step_s, .simulation.step_time_s.mean] | @tsv' "$work/r.json")
  d=$(awk -v a="$a" -v s="$s" 'BEGIN {printf "%+.3f%%", (s / a - 1) * 100}')
  printf "%-34s %14.6f %14.6f %9s\n" "$n" "$a" "$s" "$d"
  awk -v a="$a" -v s="$s" 'BEGIN {d = s / a - 1; if (d < 0) d = -d; exit !(d <= 0.001)}' ||
    { echo "FAIL: $n: the simulated step is $d from the analytic one (at most 0.1%)"; bad=1; }
  compared=$((compared + 1))
done
[ "$compared" -ge 15 ] || { echo "FAIL: only $compared scenarios compared"; exit 1; }
[ $bad -eq 0 ] || exit 1
echo "analytic vs simulated: $compared scenarios within 0.1%"
