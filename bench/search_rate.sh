#!/usr/bin/env bash
# Benchmark (not a test): the plan search's analytic evaluation rate on one core, and the whole GPT-3 175B
# search (>= 10^5 plans over GPU counts and two devices, every core, the 10 best simulated with SimGrid).
# Prints plans per second per core, counting every candidate tried and, separately, those estimated (the
# analytic model run to the end: refused-by-rule candidates cost only the parser).
# Usage: bench/search_rate.sh [build-dir]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
etsim=${1:-$root/build}/sim/etsim
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
counts() { # output file -> tried estimated seconds (from the printed rate: the seconds print to 0.1 s)
  sed -n 's/.*; \([0-9]*\) plans tried in [0-9.]* s: \([0-9]*\) refused by the scenario.s rules.* \([0-9]*\) plans\/s).*/\1 \2 \3/p' "$1" |
    awk '{print $1, $1 - $2, $1 / $3}'
}
echo "# one core (--search-threads 1), best of three wall times; estimated = tried - refused by the rules"
printf "%-36s %10s %10s %10s %16s %20s\n" "space" "tried" "estimated" "wall[s]" "tried/s/core" "estimated/s/core"
one_core() { # label args...
  local label=$1 best="" out
  shift
  for _ in 1 2 3; do
    "$etsim" --quiet --search --search-threads 1 --search-top 10 "$@" > "$work/o"
    read -r tried est secs < <(counts "$work/o")
    if [ -z "$best" ] || [ "$(echo "$secs < $best" | bc -l)" = 1 ]; then best=$secs; out="$tried $est"; fi
  done
  read -r tried est <<< "$out"
  printf "%-36s %10d %10d %10.2f %16.0f %20.0f\n" "$label" "$tried" "$est" "$best" \
    "$(echo "$tried / $best" | bc -l)" "$(echo "$est / $best" | bc -l)"
}
one_core "GPT-3 13B, 512 A100" "$root/scenarios/gpt3-13b-dense-a100.json"
one_core "GPT-3 175B, 1024 A100" "$root/scenarios/gpt3-175b-a100-search.json"
echo
echo "# the whole GPT-3 175B search: 9 GPU counts x 2 devices, every core, the 10 best simulated (1 step each)"
t0=$(date +%s.%N)
"$etsim" --quiet --search --search-top 10 --search-simulate 10 --steps 1 \
  --search-gpus 512,768,1024,1536,2048,3072,4096,6144,8192 --search-devices a100-sxm4-80gb,h100-sxm \
  --search-csv "$work/all.csv" "$root/scenarios/gpt3-175b-a100-search.json" > "$work/all"
t1=$(date +%s.%N)
read -r tried est secs < <(counts "$work/all")
printf "plans tried %d, estimated %d, analytic stage %.1f s, whole search with the simulated top 10 %.1f s\n" \
  "$tried" "$est" "$secs" "$(echo "$t1 - $t0" | bc -l)"
awk '/^rank/ {on = 1} on && n++ < 4' "$work/all"
best=$(awk '$1 == 1 {print $5; exit}' "$work/all")
exhaustive=$(awk -F, '$23 == "ranked" && (m == "" || $13 < m) {m = $13} END {print m}' "$work/all.csv")
printf "the search's best step %.4f s (the table's 4 decimals) against the fastest of every estimated plan %.6f s:\n" \
  "$best" "$exhaustive"
printf "%.3f%% apart; the search evaluates every candidate (exhaustive: nothing is pruned before its estimate)\n" \
  "$(echo "($best - $exhaustive) * 100 / $exhaustive" | bc -l)"
sed -n '/^simulated (SimGrid)/,/^$/p' "$work/all"
