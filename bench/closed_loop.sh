#!/usr/bin/env bash
# Benchmark (prints figures; not a test): the calibration loop of tests/calib/closed_loop.sh (fit host-cpu to
# etcalib bench and a measured tiny-gpt-cpu run, then predict and run three plans the fit never saw) repeated
# in ROUNDS rounds, each from scratch; prints every round's step and class errors after calibration, then the
# median and the largest |error| per plan and class over the rounds (the targets: 10% a step, 25% a class).
# One round is about 10 s; the machine's speed drifting within a round shows as that round's error.
# Usage: bench/closed_loop.sh [ROUNDS] [BUILD_DIR]
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
rounds=${1:-5} build=${2:-$src/build}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
echo "# OpenBLAS kernels: $("$build/runtime/etrun" --info | sed -n 's/^blas_core: //p') (etrun and etcalib select the CPU's own)"
for r in $(seq "$rounds"); do
  echo "# round $r of $rounds"
  # the test's own rounds; a round that misses the test's loose bounds still counts here
  bash "$src/tests/calib/closed_loop.sh" "$build" "$src" 2> /dev/null |
    awk -v r="$r" '/^unseen plan/ {on = 1; next} /^mean|^closed-loop|^#/ {on = 0}
      on && /^[a-z]/ {plan = $1; print r, plan, "step", $NF; print r, plan, "measured_[ms]", $2}
      on && /^  / {c = $1; for (i = 2; i <= NF - 3; i++) c = c "_" $i; print r, plan, c, $NF}' |
    tee -a "$log"
done
echo
# per plan and class: the signed median error (the model's bias after calibration), the median and largest
# |error|; for the measured step the spread of the same plan's own runs over the rounds, (max - min) / median:
# the noise the errors cannot get below
printf "%-10s %-16s %7s %17s %18s %16s\n" "plan" "what" "rounds" "median error [%]" "median |error| [%]" \
  "max |error| [%]"
awk '{k = $2 " " $3; v[k] = v[k] " " $4; n[k]++} END {for (k in v) print k, n[k], v[k]}' "$log" | sort |
  while read -r plan what n values; do
    sorted=$(echo "$values" | tr ' ' '\n' | sort -g)
    abs=$(echo "$values" | tr ' ' '\n' | sed 's/^-//' | sort -g)
    median() { awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
    if [ "$what" = "measured_[ms]" ]; then
      echo "$sorted" | awk -v p="$plan" '{a[NR] = $1} END {m = (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2
        printf "%-10s %-16s %7d   measured %.3f ms median, runs spread %.1f%% (max - min over median)\n", p, "noise", NR, m, 100 * (a[NR] - a[1]) / m}'
      continue
    fi
    printf "%-10s %-16s %7s %17.1f %18.1f %16.1f\n" "$plan" "${what//_/ }" "$n" "$(echo "$sorted" | median)" \
      "$(echo "$abs" | median)" "$(echo "$abs" | tail -1)"
  done
