#!/usr/bin/env bash
# Failures and checkpoints in the reports (model/resilience.h; the formulas are checked by hand in
# tests/test_model.c): the JSON's estimate.goodput is consistent with the estimate (checkpoint of 14 bytes a
# parameter in 16-bit training, time-to-train with failures = failure-free x factor), no failures give
# factor 1, a higher rate a larger factor and a shorter optimal interval, an asynchronous checkpoint a smaller
# stall than its write, and the search ranks by the time with failures (its best plan's figure is the one
# the plan's own report gives).
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
echo "resilience: $passed passed, 0 failed"
