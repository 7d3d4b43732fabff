#!/usr/bin/env bash
# Benchmark (prints figures; not a test): ET's step time for every published run in
# scenarios/data/validation/ (shipped as scenarios/validation/*.json) beside the published figure, the
# signed error of each row, and the mean and max absolute error. Targets (issue: fidelity): mean <= 5%,
# no row beyond 10%. Exit status 0 when both hold, 1 otherwise.
#
# Usage: bench/validation.sh [--simulate] [BUILD_DIR]
#   --simulate  also run the SimGrid simulation of each row (one step) and judge it instead of the analytic
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=$src/build simulate=0
for a in "$@"; do
  case $a in
    --simulate) simulate=1 ;;
    -h|--help) sed -n 2,9p "$0"; exit 0 ;;
    *) build=$a ;;
  esac
done
etsim=$build/sim/etsim
[ -x "$etsim" ] || { echo "validation: $etsim missing: build ET first"; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
csv=$src/scenarios/data/validation/megatron-korthikanti-2022-table5.csv
printf "%-40s %6s %8s %13s %13s %9s" "scenario" "GPUs" "MFU [%]" "published [s]" "analytic [s]" "error [%]"
[ $simulate -eq 1 ] && printf " %14s %9s" "simulated [s]" "error [%]"
printf "\n"
tail -n +2 "$csv" | while IFS=, read -r model layers hidden heads ffn vocab seq gpus nodes tp pp dp mbs gbs recompute seqpar vpp precision published rest; do
  size=$(echo "${model#GPT }" | tr 'A-Z' 'a-z')
  name=korthikanti-2022-gpt-$size-$recompute
  scenario=$src/scenarios/validation/$name.json
  "$etsim" --analytic --quiet --json "$work/a.json" "$scenario" > /dev/null
  analytic=$(jq .estimate.step.step_s "$work/a.json")
  mfu=$(jq .estimate.mfu "$work/a.json")
  err=$(awk -v p="$analytic" -v m="$published" 'BEGIN {printf "%+.1f", 100 * (p - m) / m}')
  printf "%-40s %6d %8.1f %13.2f %13.2f %9s" "$name" "$gpus" "$(awk -v x="$mfu" 'BEGIN {print 100 * x}')" \
    "$published" "$analytic" "$err"
  judged=$err
  if [ $simulate -eq 1 ]; then
    "$etsim" --quiet --steps 1 --json "$work/s.json" "$scenario" > /dev/null
    sim=$(jq .simulation.step_time_s.mean "$work/s.json")
    judged=$(awk -v p="$sim" -v m="$published" 'BEGIN {printf "%+.1f", 100 * (p - m) / m}')
    printf " %14.2f %9s" "$sim" "$judged"
  fi
  printf "\n"
  echo "$judged" >> "$work/errors"
done
awk '{e = $1 < 0 ? -$1 : $1; s += e; if (e > m) m = e; n++}
     END {printf "# %d rows: mean |error| %.1f%%, max |error| %.1f%% (targets: mean <= 5%%, max <= 10%%)\n", n, s / n, m;
          ok = (s / n <= 5 && m <= 10); print ok ? "# verdict: PASS" : "# verdict: BELOW TARGET"; exit !ok}' "$work/errors"
