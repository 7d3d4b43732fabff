#!/usr/bin/env bash
# Benchmark (prints figures; not a test): the calibration loop of tests/calib/closed_loop.sh with the
# machine's drift sampled evenly. In each of ROUNDS rounds it measures, back to back, what the fit sees
# (etcalib bench and a tiny-gpt-cpu run) and the three plans the fit never sees (a wider masked-LM encoder,
# tensor-train layers, a sparse MLP); then fits host-cpu once to every round's microbenchmarks and tiny-gpt
# run, and reports each unseen plan's run of each round against that one profile. Prints every round's step
# and class errors after calibration, then per plan and class the signed median, the median and the largest
# |error| over the rounds (the targets: 10% a step, 25% a class), and the spread of the plan's own measured
# steps. A test that fits and runs once (tests/calib/closed_loop.sh) measures the machine's drift between
# its fit and its runs as much as the model; here the fit and the runs span the same minutes.
# About 6 s a round. Usage: bench/closed_loop.sh [ROUNDS (2-7)] [BUILD_DIR]
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
rounds=${1:-5} build=${2:-$src/build}
[ "$rounds" -ge 2 ] && [ "$rounds" -le 7 ] || { echo "bench/closed_loop.sh: ROUNDS must be 2 to 7 (etcalib fit takes 16 files)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OPENBLAS_NUM_THREADS=1
etsim=$build/sim/etsim etrun=$build/runtime/etrun etcalib=$build/calib/etcalib
source "$src/tests/calib/closed_loop_plans.sh"
closed_loop_plans "$src" "$work" "$etsim"
echo "# OpenBLAS kernels: $("$etrun" --info | sed -n 's/^blas_core: //p') (etrun and etcalib select the CPU's own)"
plans="encoder tt sparse"
for r in $(seq "$rounds"); do
  echo "# round $r of $rounds: measuring"
  "$etcalib" bench --scenario "$src/scenarios/tiny-gpt-cpu.json" --out "$work/micro-$r.json" 2> /dev/null
  "$etrun" --quiet --out "$work/fit-$r.json" "$work/fit.json"
  for p in $plans; do "$etrun" --quiet --out "$work/$p-$r.json" "$work/$p.json"; done
done
fit_inputs=()
for r in $(seq "$rounds"); do fit_inputs+=("$work/micro-$r.json" "$work/fit-$r.json"); done
"$etcalib" fit "${fit_inputs[@]}" --base "$src/scenarios/profiles/host-cpu.json" --out "$work/fitted.json" |
  sed -n '1,/^$/p'
log=$work/log
for r in $(seq "$rounds"); do
  for p in $plans; do
    "$etcalib" report "$work/$p-$r.json" --profile "$work/fitted.json" |
      awk -v r="$r" -v p="$p" '/^step \(sum of ops\)/ {print r, p, "step", $NF; print r, p, "measured_[ms]", $(NF-2)}
        /^(matrix products|attention|element-wise|optimizer)  / {c = $1; for (i = 2; i <= NF - 3; i++) c = c "_" $i
          print r, p, c, $NF}'
  done
done | tee "$log"
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
