#!/usr/bin/env bash
# Benchmark (prints figures; not a test): ET's step time for every published run listed in
# scenarios/validation/published.csv (one shipped scenario per row) beside the published figure, the signed
# error of each row (negative: ET predicts a faster step than was measured), and the mean and max absolute
# error over the judged rows: the published GPT runs of scenarios/data/validation/ (targets: mean <= 5%, no
# row beyond 10%). Rows published as a throughput compare as step times (global batch / throughput) and
# are shown, not judged, as are the NeMo Megatron Bridge and llm-foundry rows ET can express; each source's
# mean error follows, then every row's together (issue 33's measure) and each error-band family's, how
# many rows fall inside the error band drawn from other models' runs (etsim --band-held-out: how far the
# band holds on a model it has not seen), and the published rows ET cannot express, with why.
# Exit status 0 when the targets hold, 1 otherwise.
#
# Usage: bench/validation.sh [--simulate | --simulate-all] [--errors FILE] [BUILD_DIR]
#   --errors FILE  write every row's family, ET's analytic error and model shape as CSV: the error bands' data
#                  (scenarios/data/validation/errors.csv; tests/error_band.sh checks it is current)
#   --simulate  also run the SimGrid simulation (one step) of each judged row and judge it instead of the
#               analytic estimate (the rows shown, not judged, are estimated only: a 256-GPU mixture of
#               experts' step takes the simulator minutes)
#   --simulate-all  simulate every row
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=$src/build simulate=0 simulate_all=0 errors_out=""
next_is_errors=0
for a in "$@"; do
  if [ $next_is_errors -eq 1 ]; then errors_out=$a; next_is_errors=0; continue; fi
  case $a in
    --simulate) simulate=1 ;;
    --simulate-all) simulate=1 simulate_all=1 ;;
    --errors) next_is_errors=1 ;;
    -h|--help) sed -n 2,19p "$0"; exit 0 ;;
    *) build=$a ;;
  esac
done
etsim=$build/sim/etsim
[ -x "$etsim" ] || { echo "validation: $etsim missing: build ET first"; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
: > "$work/errors"
printf "%-36s %5s %7s %14s %13s %9s" "scenario" "GPUs" "MFU[%]" "published[s]" "analytic[s]" "error[%]"
[ $simulate -eq 1 ] && printf " %13s %9s" "simulated[s]" "error[%]"
printf "  %s\n" "judged"
tail -n +2 "$src/scenarios/validation/published.csv" | while IFS=, read -r name metric published source judged; do
  scenario=$src/scenarios/validation/$name.json
  # a plan ET finds too large still has its estimate (exit 3): shown, marked
  fits=yes
  "$etsim" --analytic --quiet --band-held-out --json "$work/a.json" "$scenario" > /dev/null 2>&1 || { [ $? -eq 3 ] && fits=no; } ||
    { echo "validation: etsim failed on $scenario" >&2; exit 2; }
  analytic=$(jq .estimate.step.step_s "$work/a.json")
  gpus=$(jq .scenario.cluster.gpus "$work/a.json")
  if [ "$metric" = samples_per_s ]; then
    published=$(jq -n --argjson g "$(jq .scenario.batch.global "$work/a.json")" --argjson r "$published" '$g / $r')
  fi
  err() { awk -v p="$1" -v m="$published" 'BEGIN {printf "%+.1f", 100 * (p - m) / m}'; }
  printf "%-36s %5d %7.1f %14.3f %13.3f %9s" "$name" "$gpus" "$(jq '.estimate.mfu * 100' "$work/a.json")" \
    "$published" "$analytic" "$(err "$analytic")"
  judged_err=$(err "$analytic")
  if [ $simulate -eq 1 ] && { [ "$judged" = yes ] || [ $simulate_all -eq 1 ]; }; then
    "$etsim" --quiet --steps 1 --json "$work/s.json" "$scenario" > /dev/null 2>&1 || [ $? -eq 3 ]
    sim=$(jq .simulation.step_time_s.mean "$work/s.json")
    judged_err=$(err "$sim")
    printf " %13.3f %9s" "$sim" "$judged_err"
  elif [ $simulate -eq 1 ]; then
    printf " %13s %9s" "-" "-"
  fi
  printf "  %s%s\n" "$judged" "$([ $fits = no ] && printf " (does not fit: %.1f GiB of %.0f)" \
    "$(jq .estimate.memory_per_gpu.total_GiB "$work/a.json")" "$(jq .estimate.memory_per_gpu.capacity_GiB "$work/a.json")")"
  if [ "$judged" = yes ]; then echo "$judged_err" >> "$work/errors"; fi
  echo "${source%% *} $judged_err" >> "$work/by_source"
  # the error bands' data (model/error_band.h): ET's analytic error, by the family ET gives the row
  printf "%s,%s,%d,%s,%s\n" "$name" "$(jq -r .estimate.error_band.family "$work/a.json")" "$gpus" \
    "$(awk -v p="$analytic" -v m="$published" 'BEGIN {printf "%.6f", (p - m) / m}')" \
    "$(jq -r .estimate.error_band.model "$work/a.json")" >> "$work/band"
  # the band held out from the row (its own model's rows left out): does the run fall inside it?
  jq -r --argjson r "$(awk -v p="$analytic" -v m="$published" 'BEGIN {printf "%.9f", m / p}')" --arg s "${source%% *}" \
    '.estimate.error_band | if has("low") then "\($s) \(if .low <= $r and $r <= .high then 1 else 0 end)"
                            else "\($s) -" end' "$work/a.json" >> "$work/held_out"
done
if [ -n "$errors_out" ]; then
  { echo "scenario,family,gpus,error,model"; sort "$work/band"; } > "$errors_out"
fi
# every source's rows, judged or shown: the mean signed and absolute error
awk '{n[$1]++; s[$1] += $2; a[$1] += ($2 < 0 ? -$2 : $2)}
     END {for (k in n) printf "# %-44s %3d rows: mean error %+.1f%%, mean |error| %.1f%%\n", k, n[k], s[k] / n[k], a[k] / n[k]}' \
  "$work/by_source" | sort
# every row ET expresses together: issue 33's measure (mean |error| <= 5%, no family's max beyond 12%)
awk '{n++; s += $2; a += ($2 < 0 ? -$2 : $2)}
     END {printf "# all %d rows: mean error %+.1f%%, mean |error| %.1f%% (issue 33: mean |error| <= 5%%)\n", n, s / n, a / n}' \
  "$work/by_source"
# every family of the error bands (device generation, stack, shape): its rows' mean signed and max error
awk -F, '{n[$2]++; s[$2] += $4; a = ($4 < 0 ? -$4 : $4); if (a > m[$2]) m[$2] = a}
     END {for (k in n) printf "# family %-36s %3d rows: mean error %+.1f%%, max |error| %.1f%%\n", k, n[k], 100 * s[k] / n[k], 100 * m[k]}' \
  "$work/band" | sort
# how far the error band holds on models it was not drawn from: each row against the p10-p90 band of its
# family's runs of other models (etsim --band-held-out; a band holds 80% of the rows it is drawn from)
awk '{k[$1]++} $2 == "-" {none[$1]++; nn++} $2 != "-" {n[$1]++; in_[$1] += $2; t++; i += $2}
     END {for (s in k) if (n[s]) printf "# band held out, %-32s %3d of %3d rows inside (%.0f%%)%s\n", s, in_[s], n[s],
            100 * in_[s] / n[s], none[s] ? sprintf("; %d without a band", none[s]) : "";
          printf "# band held out by model: %d of %d rows inside their family'"'"'s p10-p90 of other models'"'"' runs (%.1f%%; nominal 80%%); %d rows without a band\n",
            i, t, t ? 100 * i / t : 0, nn}' "$work/held_out" | sort
# the published rows ET cannot express yet, and why (scenarios/validation/not-expressed.csv)
if [ -f "$src/scenarios/validation/not-expressed.csv" ]; then
  printf "# not expressed: %d published rows (tests/tools/nemo_validation.py); why, and how many:\n" \
    "$(($(wc -l < "$src/scenarios/validation/not-expressed.csv") - 1))"
  tail -n +2 "$src/scenarios/validation/not-expressed.csv" | sed 's/^[^"]*"//; s/"$//' | sort | uniq -c | sort -rn |
    sed 's/^/#   /'
fi
awk '{e = $1 < 0 ? -$1 : $1; s += e; if (e > m) m = e; n++}
     END {printf "# %d judged rows: mean |error| %.1f%%, max |error| %.1f%% (targets: mean <= 5%%, max <= 10%%)\n", n, s / n, m;
          ok = (n > 0 && s / n <= 5 && m <= 10); print ok ? "# verdict: PASS" : "# verdict: BELOW TARGET"; exit !ok}' "$work/errors"
