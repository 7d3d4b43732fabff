#!/usr/bin/env bash
# Benchmark (not a test): wall time of simulating one BERT-large data-parallel step, all gradient buckets
# included, at 8 to 4096 GPUs (best of three) and at 4,096 to 131,072 GPUs (one run each, with peak memory);
# and the fluid collectives against the detailed (step-by-step ring) form.
# Usage: bench/sim_scaling.sh [build-dir] [--large-only]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
etsim=${1:-$root/build}/sim/etsim
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

source "$root/bench/bert_scenario.sh"
large_only=${2:-}

wall() { # command... -> seconds
  local t0 t1
  t0=$(date +%s.%N)
  "$@" > /dev/null
  t1=$(date +%s.%N)
  echo "$t1 - $t0" | bc -l
}

best_wall() { # command... -> the smallest of three wall times (this machine is shared and noisy)
  local a b c
  a=$(wall "$@")
  b=$(wall "$@")
  c=$(wall "$@")
  printf "%s\n%s\n%s\n" "$a" "$b" "$c" | sort -g | head -1
}

peak_kib() { # command... -> peak resident KiB of the command and its children (GNU time), output discarded
  /usr/bin/time -f "%M" -o "$work/time.txt" "$@" > /dev/null 2> /dev/null
  tail -1 "$work/time.txt"
}

echo "# large clusters: one BERT-large data-parallel step, all 21 buckets, auto algorithm, one run per size"
echo "# wall_1: one step including start-up; per_step: (wall_6 - wall_1) / 5; sim_RSS: the simulator's peak"
echo "# (etsim --stats), etsim_RSS: the whole run's (GNU time); growth: per 4x GPUs against the row above"
echo "# (ratio^(2 / log2(GPU ratio)); linear: 4.0)"
printf "%8s %10s %10s %12s %14s %12s %12s %14s %16s\n" "GPUs" "wall_1[s]" "wall_6[s]" "per_step[s]" \
  "per_GPU_step[us]" "sim_RSS[MiB]" "etsim_RSS[MiB]" "wall_1_growth" "per_step_growth"
prev1="" prevs="" prevn=""
for nodes in 512 2048 8192 16384; do
  f=$(scenario $nodes auto)
  w1=$(wall "$etsim" --quiet --steps 1 "$f")
  w6=$(wall "$etsim" --quiet --steps 6 "$f")
  ps=$(echo "($w6 - $w1) / 5" | bc -l)
  sim_rss=$("$etsim" --quiet --stats --steps 1 "$f" 2>&1 > /dev/null | sed -nE 's/.*peak RSS ([0-9.]+) MiB.*/\1/p')
  all_rss=$(peak_kib "$etsim" --quiet --steps 1 "$f")
  g1=- gs=-
  if [ -n "$prev1" ]; then
    e=$(echo "2 / (l($nodes / $prevn) / l(2))" | bc -l)
    g1=$(printf "%.1f" "$(echo "e($e * l($w1 / $prev1))" | bc -l)")
    gs=$(printf "%.1f" "$(echo "e($e * l($ps / $prevs))" | bc -l)")
  fi
  printf "%8d %10.2f %10.2f %12.3f %14.1f %12.1f %12.1f %14s %16s\n" $((nodes * 8)) "$w1" "$w6" "$ps" \
    "$(echo "$ps * 1000000 / ($nodes * 8)" | bc -l)" "$sim_rss" "$(echo "$all_rss / 1024" | bc -l)" "$g1" "$gs"
  prev1=$w1 prevs=$ps prevn=$nodes
done
[ "$large_only" = "--large-only" ] && exit 0
echo

echo "# simulating BERT-large data-parallel steps (21 buckets of 25 MiB, fp16, per-bucket clipping)"
echo "# wall_1: one step including start-up (platform, actors); per_step: (wall_21 - wall_1) / 20; best of three"
echo "# growth: the same figure divided by the one at 4x fewer GPUs (linear cost: 4.0); none from per-step"
echo "# figures under 5 ms (0.1 s over 20 steps), which are mostly noise on a shared machine"
printf "%8s %10s %12s %12s %14s %18s %14s %16s\n" "GPUs" "algorithm" "wall_1[s]" "wall_21[s]" "per_step[s]" \
  "per_step/GPU[ms]" "wall_1_growth" "per_step_growth"
for algo in auto ring; do
  prev1="" prevs=""
  for nodes in 1 8 32 128 512; do
    f=$(scenario $nodes $algo)
    w1=$(best_wall "$etsim" --quiet --steps 1 "$f")
    w21=$(best_wall "$etsim" --quiet --steps 21 "$f")
    ps=$(echo "($w21 - $w1) / 20" | bc -l)
    g1=- gs=-
    if [ -n "$prev1" ]; then
      g1=$(printf "%.1f" "$(echo "$w1 / $prev1" | bc -l)")
      # per-step figures under 5 ms are mostly noise here: no ratio from them
      if [ "$(echo "$prevs >= 0.005" | bc -l)" = 1 ]; then gs=$(printf "%.1f" "$(echo "$ps / $prevs" | bc -l)"); fi
    fi
    printf "%8d %10s %12.3f %12.3f %14.3f %18.4f %14s %16s\n" $((nodes * 8)) $algo "$w1" "$w21" "$ps" \
      "$(echo "$ps * 1000 / ($nodes * 8)" | bc -l)" "$g1" "$gs"
    # growth is quoted against 4x fewer GPUs: 8 -> 64 is 8x, so start comparing from 64 -> 256
    if [ $nodes -ge 8 ]; then prev1=$w1 prevs=$ps; fi
  done
done

echo
echo "# where the time goes (etsim --stats, 5 steps, one run each): flows per step the model describes and"
echo "# those played in SimGrid (the rest mirrored), and the simulation's wall time per GPU and step"
printf "%8s %10s %18s %18s %12s %14s %14s\n" "GPUs" "algorithm" "modelled/step" "simulated/step" "setup[s]" \
  "simulation[s]" "us/GPU-step"
for algo in auto ring; do
  for nodes in 32 128 512; do
    f=$(scenario $nodes $algo)
    line=$("$etsim" --quiet --stats --steps 5 "$f" 2>&1 > /dev/null | grep "etsim: stats:")
    read -r setup run modelled simulated <<< "$(echo "$line" |
      sed -E 's/.*set-up ([0-9.]+) s, simulation ([0-9.]+) s; flows ([0-9]+) modelled, ([0-9]+) simulated.*/\1 \2 \3 \4/')"
    printf "%8d %10s %18d %18d %12.3f %14.3f %14.2f\n" $((nodes * 8)) $algo $((modelled / 5)) $((simulated / 5)) \
      "$setup" "$run" "$(echo "$run * 1000000 / 5 / ($nodes * 8)" | bc -l)"
  done
done

echo
echo "# mirroring identical flows alone on their links against playing every flow (--all-flows), auto algorithm"
printf "%8s %18s %18s %12s %14s %14s\n" "GPUs" "mirrored_step[ms]" "all_flows_step[ms]" "same_json" \
  "mirrored[s]" "all_flows[s]"
for nodes in 8 32 128; do
  f=$(scenario $nodes auto)
  "$etsim" --quiet --steps 2 --json "$work/m.json" "$f" > /dev/null
  "$etsim" --quiet --steps 2 --all-flows --json "$work/a.json" "$f" > /dev/null
  wm=$(wall "$etsim" --quiet --steps 2 "$f")
  wa=$(wall "$etsim" --quiet --steps 2 --all-flows "$f")
  a=$(python3 -c "import json;print(json.load(open('$work/m.json'))['simulation']['step_time_s']['mean']*1e3)")
  b=$(python3 -c "import json;print(json.load(open('$work/a.json'))['simulation']['step_time_s']['mean']*1e3)")
  same=$(cmp -s "$work/m.json" "$work/a.json" && echo yes || echo NO)
  printf "%8d %18.3f %18.3f %12s %14.3f %14.3f\n" $((nodes * 8)) "$a" "$b" "$same" "$wm" "$wa"
done
echo
echo "# fluid versus detailed ring (2(N-1) messages per all-reduce): step time and wall time"
printf "%8s %18s %18s %12s %12s %12s\n" "GPUs" "fluid_step[ms]" "detailed_step[ms]" "diff[%]" "fluid[s]" "detailed[s]"
for nodes in 1 2 4 8; do
  f=$(scenario $nodes ring)
  "$etsim" --quiet --json "$work/fluid.json" "$f" > /dev/null
  wf=$(wall "$etsim" --quiet "$f")
  "$etsim" --quiet --detailed-collectives --json "$work/detailed.json" "$f" > /dev/null
  wd=$(wall "$etsim" --quiet --detailed-collectives "$f")
  a=$(python3 -c "import json;print(json.load(open('$work/fluid.json'))['simulation']['step_time_s']['mean']*1e3)")
  b=$(python3 -c "import json;print(json.load(open('$work/detailed.json'))['simulation']['step_time_s']['mean']*1e3)")
  printf "%8d %18.3f %18.3f %12.3f %12.3f %12.3f\n" $((nodes * 8)) "$a" "$b" "$(echo "($a - $b) * 100 / $b" | bc -l)" "$wf" "$wd"
done

echo
echo "# fluid versus detailed ring on contended or uneven networks: 64 MiB all-reduce time"
printf "%-44s %14s %14s %10s\n" "case" "fluid[us]" "detailed[us]" "diff[%]"
contended() { # name scenario-file
  "$etsim" --quiet --collective allreduce --algo ring --min-bytes 67108864 --max-bytes 67108864 \
    --json "$work/f.json" "$2" > /dev/null || true
  "$etsim" --quiet --collective allreduce --algo ring --detailed-collectives --min-bytes 67108864 \
    --max-bytes 67108864 --json "$work/d.json" "$2" > /dev/null || true
  a=$(python3 -c "import json;print(json.load(open('$work/f.json'))['results'][0]['time_s']*1e6)")
  b=$(python3 -c "import json;print(json.load(open('$work/d.json'))['results'][0]['time_s']*1e6)")
  printf "%-44s %14.1f %14.1f %10.3f\n" "$1" "$a" "$b" "$(echo "($a - $b) * 100 / $b" | bc -l)"
}
contended "8 GPUs, one degraded NVSwitch port" "$root/tests/data/slow-link-8.json"
for tp in 2 4; do
  f="$work/oversub-tp$tp.json"
  python3 - "$root/tests/data/uniform-64.json" "$f" $tp <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
s["name"] = "oversubscribed"
s["parallelism"] = {"tensor": int(sys.argv[3])}
s["cluster"]["nodes"] = 32
s["cluster"]["fabric"] = {"oversubscription": 4.0, "nodes_per_leaf": 4}
json.dump(s, open(sys.argv[2], "w"))
PY
  contended "256 GPUs, 4:1 fat tree, tensor $tp (shared NICs)" "$f"
done
