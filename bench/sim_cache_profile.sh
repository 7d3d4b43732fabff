#!/usr/bin/env bash
# Benchmark (not a test): why the simulator's wall time per step grows faster than GPU count from 1024 to
# 4096 GPUs. valgrind's cachegrind counts, in the simulation process only, the instructions executed and the
# data reads that miss a simulated 32 MiB last-level cache (this machine's L3), per simulated step:
# (count with 3 steps - count with 1 step) / 2. Instructions are exact and repeatable (no timing noise).
# Takes about three minutes. Usage: bench/sim_cache_profile.sh [build-dir]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
etsim=${1:-$root/build}/sim/etsim
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
command -v valgrind > /dev/null || { echo "sim_cache_profile: valgrind is not installed" >&2; exit 1; }

source "$root/bench/bert_scenario.sh"

# counts STEPS FILE -> "instructions L1_read_misses LL_read_misses" of the simulation child (the process
# that executed more instructions: the parent only computes the analytic estimate)
counts() {
  rm -f "$work"/cg.*
  valgrind --tool=cachegrind --cache-sim=yes --LL=33554432,16,64 --cachegrind-out-file="$work/cg.%p" \
    "$etsim" --quiet --steps "$1" "$2" > /dev/null 2> "$work/valgrind.log"
  grep -h '^summary:' "$work"/cg.* | awk '{print $2, $6, $7}' | sort -n | tail -1
}

echo "# per simulated step of a BERT-large data-parallel step (bench/bert_scenario.sh), simulation process only"
echo "# Ir: instructions; D1mr: L1 data read misses; DLmr: data reads missing a 32 MiB last-level cache"
printf "%8s %10s %16s %8s %14s %8s %14s\n" "GPUs" "algorithm" "Ir/step[M]" "growth" "D1mr/step[M]" "growth" \
  "DLmr/step[k]"
for algo in ring auto; do
  prev_ir="" prev_d1=""
  for nodes in 128 512; do
    f=$(scenario $nodes $algo)
    read -r ir1 d11 dl1 <<< "$(counts 1 "$f")"
    read -r ir3 d13 dl3 <<< "$(counts 3 "$f")"
    ir=$(echo "($ir3 - $ir1) / 2 / 1000000" | bc -l)
    d1=$(echo "($d13 - $d11) / 2 / 1000000" | bc -l)
    dl=$(echo "($dl3 - $dl1) / 2 / 1000" | bc -l)
    g_ir=- g_d1=-
    if [ -n "$prev_ir" ]; then
      g_ir=$(printf "%.2f" "$(echo "$ir / $prev_ir" | bc -l)")
      g_d1=$(printf "%.2f" "$(echo "$d1 / $prev_d1" | bc -l)")
    fi
    printf "%8d %10s %16.1f %8s %14.2f %8s %14.1f\n" $((nodes * 8)) $algo "$ir" "$g_ir" "$d1" "$g_d1" "$dl"
    prev_ir=$ir prev_d1=$d1
  done
done
