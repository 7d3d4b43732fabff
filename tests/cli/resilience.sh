#!/usr/bin/env bash
# Failures, checkpoints and energy in the reports (model/resilience.h; the formulas are checked by hand in
# tests/test_model.c): the JSON's estimate.goodput is consistent with the estimate (checkpoint of 14 bytes a
# parameter in 16-bit training, time-to-train with failures = failure-free x factor), no failures give
# factor 1, a higher rate a larger factor and a shorter optimal interval, an asynchronous checkpoint a smaller
# stall than its write, and the search ranks by the time with failures (its best plan's figure is the one
# the plan's own report gives); --memory-headroom, --max-gpus and --deadline-at-band-edge filter. Energy: a step's is every GPU's busy power over its compute and idle power
# over the rest, the run's adds evaluations, failures and the PUE, emissions with a carbon intensity; a
# profile without power says so; --rank-by ranks by what it names (energy; time under a budget, which then
# only filters) and refuses what it cannot rank.
# Usage: resilience.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$(cd "$2" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
etsim=$build/sim/etsim
base=$src/scenarios/gpt3-13b-dense-a100.json
passed=0
check() { # what jq-condition file
  jq -e "$2" "$3" > /dev/null || { echo "FAIL: $1"; jq -c '.estimate.goodput' "$3"; exit 1; }
  passed=$((passed + 1))
}
"$etsim" --analytic --quiet --json "$work/d.json" "$base" > /dev/null
check "the checkpoint holds 2 + 12 bytes a parameter" \
  '(.estimate.goodput.checkpoint_GiB * 1073741824 / (.estimate.params_total * 14) - 1 | fabs) < 1e-9' "$work/d.json"
check "time-to-train with failures is the failure-free one times the factor" \
  '.estimate.goodput.factor > 1 and ((.estimate.goodput.time_to_train_s / (.estimate.time_to_train.total_s * .estimate.goodput.factor) - 1) | fabs) < 1e-9' "$work/d.json"
jq '.resilience = {"interruptions_per_gpu_hour": 0}' "$base" > "$work/none.json"
"$etsim" --analytic --json "$work/n.json" "$work/none.json" > "$work/n.txt"
check "no failures: factor 1, no MTBF" '.estimate.goodput.factor == 1 and .estimate.goodput.mtbf_s == null' "$work/n.json"
grep -q "^failures     none (resilience.interruptions_per_gpu_hour 0)" "$work/n.txt" || { echo "FAIL: the text without failures"; exit 1; }
passed=$((passed + 1))
jq '.resilience = {"interruptions_per_gpu_hour": 1e-3}' "$base" > "$work/often.json"
"$etsim" --analytic --quiet --json "$work/o.json" "$work/often.json" > /dev/null
fo=$(jq .estimate.goodput.factor "$work/o.json") fd=$(jq .estimate.goodput.factor "$work/d.json")
io=$(jq .estimate.goodput.checkpoint_interval_s "$work/o.json") id=$(jq .estimate.goodput.checkpoint_interval_s "$work/d.json")
awk -v fo="$fo" -v fd="$fd" -v io="$io" -v id="$id" 'BEGIN {exit !(fo > fd && io < id)}' ||
  { echo "FAIL: 50x the rate: factor $fo against $fd, interval $io against $id"; exit 1; }
passed=$((passed + 1))
jq '.resilience = {"checkpoint": "asynchronous"}' "$base" > "$work/async.json"
"$etsim" --analytic --quiet --json "$work/a.json" "$work/async.json" > /dev/null
check "an asynchronous checkpoint stalls less than it writes" \
  '.estimate.goodput.checkpoint_stall_s < .estimate.goodput.checkpoint_write_s' "$work/a.json"
# the search: its best plan's time-to-train is that plan's own time with failures
"$etsim" --search --search-top 1 --search-out "$work/best.json" --json "$work/s.json" "$base" > /dev/null
"$etsim" --analytic --quiet --json "$work/b.json" "$work/best.json" > /dev/null
searched=$(jq '.search.best[0].time_to_train_s' "$work/s.json") alone=$(jq '.estimate.goodput.time_to_train_s' "$work/b.json")
awk -v a="$searched" -v b="$alone" 'BEGIN {d = a - b; if (d < 0) d = -d; exit !(d <= 1e-6 * b)}' ||
  { echo "FAIL: the search's best trains in $searched s, its report says $alone s with failures"; exit 1; }
passed=$((passed + 1))
# energy, recomputed from the report's own figures and the profile's power
jq '.energy = {"pue": 1.1, "carbon_g_per_kWh": 400}' "$base" > "$work/green.json"
"$etsim" --analytic --json "$work/g.json" "$work/green.json" > "$work/g.txt"
check "the step's and the run's energy" '
  (.scenario.cluster.gpus // 512) as $g | .estimate as $e | ($e.step.forward_s + $e.step.backward_s + $e.step.clip_s + $e.step.optimizer_s) as $busy
  | ($g * (400 * $busy + 60 * ($e.step.step_s - $busy))) as $step
  | ((($e.energy.step_J / $step) - 1) | fabs) < 1e-9
  and (((($e.time_to_train.train_s / $e.step.step_s * $step + $g * 400 * $e.time_to_train.eval_s) * $e.goodput.factor * 1.1 / 3.6e6) / $e.energy.run_kWh - 1) | fabs) < 1e-9
  and ((($e.energy.co2_kg / ($e.energy.run_kWh * 0.4)) - 1) | fabs) < 1e-9' "$work/g.json"
grep -qE '^energy       [0-9.]+ kJ a step on 512 GPUs \(400 W computing, 60 W idle\); [0-9.]+ MWh for the run with failures at PUE 1.10; [0-9.]+ t CO2e at 400 g a kWh$' "$work/g.txt" ||
  { echo "FAIL: the energy line: $(grep ^energy "$work/g.txt")"; exit 1; }
passed=$((passed + 1))
"$etsim" --analytic "$src/scenarios/tiny-gpt-cpu.json" | grep -q "^energy       not estimated: the profile .* gives no power_W" ||
  { echo "FAIL: a profile without power"; exit 1; }
passed=$((passed + 1))
# --rank-by energy: the best plan uses the least energy of every ranked plan (the CSV has 6 digits)
"$etsim" --search --rank-by energy --search-top 1 --search-csv "$work/e.csv" --json "$work/e.json" "$base" > /dev/null
least=$(awk -F, 'NR > 1 && $23 == "ranked" && (m == "" || $27 < m) {m = $27} END {print m}' "$work/e.csv")
awk -v a="$(jq '.search.best[0].energy_kWh' "$work/e.json")" -v b="$least" 'BEGIN {exit !(a <= b * (1 + 1e-5))}' ||
  { echo "FAIL: --rank-by energy's best is not the least energy ($least kWh)"; exit 1; }
passed=$((passed + 1))
# --rank-by time with a GPU-hours budget: the budget filters, time ranks
"$etsim" --search --rank-by time --budget-gpu-hours 40000 --search-top 5 --json "$work/t.json" "$base" > "$work/t.txt"
jq -e '.search.ranked_by == "time-to-train" and ([.search.best[].gpu_hours] | all(. <= 40000))
       and ([.search.best[].time_to_train_s] | . == sort)' "$work/t.json" > /dev/null ||
  { echo "FAIL: --rank-by time under a budget"; jq -c '[.search.ranked_by, [.search.best[] | [.time_to_train_s, .gpu_hours]]]' "$work/t.json"; exit 1; }
passed=$((passed + 1))
# --memory-headroom filters: every ranked plan leaves that share of an 80 GiB GPU free, and plans that fit
# without it are refused with it
"$etsim" --search --memory-headroom 0.5 --search-top 50 --json "$work/h.json" "$base" > /dev/null
"$etsim" --search --search-top 50 --json "$work/h0.json" "$base" > /dev/null
jq -e '[.search.best[].memory_GiB] | length > 0 and all(. <= 40)' "$work/h.json" > /dev/null &&
  jq -e '[.search.best[].memory_GiB] | any(. > 40)' "$work/h0.json" > /dev/null &&
  [ "$(jq .search.too_big "$work/h.json")" -gt "$(jq .search.too_big "$work/h0.json")" ] ||
  { echo "FAIL: --memory-headroom 0.5"; jq -c '[.search.too_big, [.search.best[].memory_GiB]]' "$work/h.json"; exit 1; }
passed=$((passed + 1))
# --max-gpus filters the GPU counts searched
"$etsim" --search --search-gpus 1024,2048,4096 --max-gpus 2048 --search-top 50 --json "$work/g.json" "$base" > /dev/null
jq -e '[.search.plans[].gpus] | unique == [1024, 2048]' "$work/g.json" > /dev/null ||
  { echo "FAIL: --max-gpus 2048"; jq -c '[.search.plans[].gpus] | unique' "$work/g.json"; exit 1; }
passed=$((passed + 1))
# --deadline-at-band-edge: a deadline 5% past the fastest plan's time is missed by more plans at the error
# band's slow edge (the A100 pipeline family's runs took longer than ET predicts)
"$etsim" --search --rank-by time --search-top 1 --json "$work/b0.json" "$base" > /dev/null
days=$(jq '.search.best[0].time_to_train_s * 1.05 / 86400' "$work/b0.json")
"$etsim" --search --rank-by time --deadline-days "$days" --json "$work/b1.json" "$base" > /dev/null
"$etsim" --search --rank-by time --deadline-days "$days" --deadline-at-band-edge --json "$work/b2.json" "$base" > "$work/b2.txt" || true
[ "$(jq .search.too_slow "$work/b2.json")" -gt "$(jq .search.too_slow "$work/b1.json")" ] &&
  grep -q "the deadline holds at each plan's error band's slow edge" "$work/b2.txt" ||
  { echo "FAIL: --deadline-at-band-edge: $(jq .search.too_slow "$work/b1.json") then $(jq .search.too_slow "$work/b2.json") miss $days days"; exit 1; }
passed=$((passed + 1))
for args in "--rank-by cost" "--rank-by speed" "--max-gpus 8" "--memory-headroom 0.95" "--memory-headroom 10%"; do
  set +e
  # shellcheck disable=SC2086
  "$etsim" --search $args "$base" > /dev/null 2> "$work/err"
  rc=$?
  set -e
  [ $rc -eq 2 ] && grep -q -- "${args%% *}" "$work/err" || { echo "FAIL: $args: exit $rc: $(cat "$work/err")"; exit 1; }
  passed=$((passed + 1))
done
echo "resilience: $passed passed, 0 failed"
