#!/usr/bin/env bash
# The calibration loop on this machine's CPU: fit the host-cpu profile to etcalib bench's microbenchmarks and
# one measured tiny-gpt-cpu run, then
# predict three plans the fit never saw (a wider masked-LM encoder, tensor-train layers, a sparse MLP) and
# run them. Prints every step's and op class's error before and after calibration. Asserts what load cannot
# change: the fit writes a profile that etcalib report reads, and every report has its step and class rows
# with finite errors. The timing bounds (each plan's step within 60% after calibration, the three closer
# than before on the whole; two attempts, each from scratch, as timings drift) are judged only with
# ET_JUDGE_TIMINGS=1 (bench/calib_timings.sh): a shared machine's step moves 13-28% between runs, a loaded
# one's several times. bench/closed_loop.sh repeats it and prints the medians.
# Usage: closed_loop.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OPENBLAS_NUM_THREADS=1
etsim=$build/sim/etsim etrun=$build/runtime/etrun etcalib=$build/calib/etcalib
source "$src/tests/calib/closed_loop_plans.sh"
# One attempt: fit on this machine now, then predict and run the unseen plans; 0 when within the bounds.
attempt() {
  local status=0
  : > "$work/errors"
  closed_loop_plans "$src" "$work" "$etsim"
  "$etrun" --quiet --out "$work/fit-m.json" "$work/fit.json"
  "$etcalib" bench --scenario "$src/scenarios/tiny-gpt-cpu.json" --out "$work/micro.json" 2> /dev/null
  "$etcalib" fit "$work/micro.json" "$work/fit-m.json" --base "$src/scenarios/profiles/host-cpu.json" --out "$work/host-cpu-fitted.json"
  printf "%-16s %14s %16s %16s\n" "unseen plan" "measured [ms]" "uncalibrated [%]" "calibrated [%]"
  for p in encoder tt sparse; do
    "$etrun" --quiet --out "$work/$p-m.json" "$work/$p.json"
    "$etcalib" report "$work/$p-m.json" > "$work/before.txt"
    "$etcalib" report "$work/$p-m.json" --profile "$work/host-cpu-fitted.json" > "$work/after.txt"
    before=$(awk '/^step \(sum of ops\)/ {print $(NF)}' "$work/before.txt")
    after=$(awk '/^step \(sum of ops\)/ {print $(NF)}' "$work/after.txt")
    measured=$(awk '/^step \(sum of ops\)/ {print $(NF-2)}' "$work/before.txt")
    printf "%-16s %14s %16s %16s\n" "$p" "$measured" "$before" "$after"
    for class in "matrix products" attention element-wise optimizer; do # each class, as the same report lines
      awk -v c="$class" 'index($0, c "  ") != 1 {next} FILENAME ~ /before/ && !b {b = $NF; m = $(NF-2)}
        FILENAME ~ /after/ && !a {a = $NF; printf "  %-14s %14s %16s %16s\n", c, m, b, a}' \
        "$work/before.txt" "$work/after.txt"
    done
    awk -v a="$after" -v b="$before" 'BEGIN {exit !(a + 0 == a && b + 0 == b && a != "" && b != "" && a > -1e9 && a < 1e9 && b > -1e9 && b < 1e9)}' ||
      { echo "FAIL: $p: no step error in the report (\"$before\", \"$after\")"; return 2; }
    awk -v a="$after" 'BEGIN {exit !(a < 60 && a > -60)}' || { echo "timing: $p off by $after% after calibration"; status=1; }
    echo "$before $after" >> "$work/errors"
  done
  awk '{b += ($1 < 0 ? -$1 : $1); a += ($2 < 0 ? -$2 : $2)} END {
    printf "mean |error| of the three plans: %.1f%% uncalibrated, %.1f%% calibrated\n", b / NR, a / NR; exit !(a < b)}' "$work/errors" ||
    { echo "timing: calibration did not bring the predictions closer"; status=1; }
  return $status
}
# A shared machine's load changes between the fit and the runs: a second attempt, from scratch, is allowed;
# the timings fail only when both miss the bounds, and only with ET_JUDGE_TIMINGS=1. A broken loop (status
# 2: a report without its rows) fails always.
set +e
attempt; status=$?
if [ $status -eq 1 ]; then echo "# first attempt missed the timing bounds; once more"; attempt; status=$?; fi
set -e
if [ $status -eq 1 ] && [ "${ET_JUDGE_TIMINGS:-0}" != 1 ]; then
  echo "timing: outside the bounds on this machine now (not judged: bench/calib_timings.sh judges them)"; status=0
fi
[ $status -eq 0 ] && echo "closed-loop: 1 passed, 0 failed" || echo "closed-loop: 0 passed, 1 failed"
exit $status
