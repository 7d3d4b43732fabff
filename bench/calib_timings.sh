#!/usr/bin/env bash
# Benchmark (prints figures and a verdict; not in ctest): the timing claims of the calibration tests, judged.
# tests/calib/{op_times,allreduce,closed_loop}.sh check in ctest only what load cannot change and print their
# timings; with ET_JUDGE_TIMINGS=1 they also hold them to their bounds (each script's header says which).
# Run on a quiet machine. Usage: bench/calib_timings.sh [BUILD_DIR]
set -uo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build}
export ET_JUDGE_TIMINGS=1
passed=0 failed=0
for t in op_times allreduce closed_loop; do
  echo "# $t"
  if bash "$src/tests/calib/$t.sh" "$build" "$src"; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
done
echo "calib timings: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
