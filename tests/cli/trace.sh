#!/usr/bin/env bash
# etsim --trace: the last step's events from time zero, collectives with their bytes and algorithm, each
# rank's process named with its node and stage, and the compute lane's idle time while others are late.
# Usage: trace.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$(cd "$2" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$build/sim/etsim" --quiet --steps 2 --trace "$work/t.json" "$src/scenarios/mlperf-bert-8.json" > /dev/null
ok=$(jq '.traceEvents as $e
  | ($e | map(select(.ph == "X")) | (map(.ts) | min) == 0)
  and ($e | map(select(.cat == "comm" and (.name | test("bucket")))) | length > 0 and all(.args.bytes > 0 and .args.algorithm == "ring"))
  and ($e | map(select(.name == "process_name")) | any(.args.name == "GPU 1 (node 0, stage 0)"))
  and ($e | map(select(.name | test("^idle"))) | length > 0 and all(.tid == 0 and .dur > 0))' "$work/t.json")
[ "$ok" = true ] || { echo "FAIL: the trace lacks time zero, args, process names or idle events"; exit 1; }
# pipelining and accumulation: one event per micro-batch's forward and backward in 1F1B order, the bubble
# where the stage waits (the last stage before its first forward), tensor-parallel communication and
# pipeline sends on the communication lane, and the step's events back to back up to the last backward
"$build/sim/etsim" --quiet --steps 1 --trace "$work/p.json" --trace-ranks 4 "$src/scenarios/gpt3-13b-dense-a100.json" > /dev/null
ok=$(jq '.traceEvents | map(select(.ph == "X")) as $x
  | ($x | map(select(.pid == 0)) | sort_by(.ts) | map(.name)) as $first
  | ($x | map(select(.pid == 256)) | sort_by(.ts) | map(.name)) as $last
  | ($first | index("forward micro-batch 1")) < ($first | index("backward micro-batch 0"))
  and ($last | index("backward micro-batch 0")) < ($last | index("forward micro-batch 1"))
  and $last[0] == "pipeline bubble (fill)" and ($first | index("pipeline bubble (drain)")) != null
  and ($x | map(select(.name | test("^tensor-parallel communication"))) | length > 0 and all(.tid == 1))
  and ($x | map(select(.name | test("^send (activations|gradients)"))) | length > 0 and all(.tid == 1))
  and ($first | map(select(test("^forward micro-batch"))) | length) as $f
  | $f > 2 and ($first | map(select(test("^backward micro-batch"))) | length) == $f - 1' "$work/p.json")
[ "$ok" = true ] || { echo "FAIL: the pipelined trace lacks per-micro-batch events in 1F1B order, the bubble or TP/PP events"; exit 1; }
gap=$(jq '[.traceEvents[] | select(.ph == "X" and .pid == 0)] | sort_by(.ts)
  | (map(.name | test("^backward to bucket")) | index(true)) as $n | .[0:$n + 1] as $e
  | [range(1; $n + 1) as $i | $e[$i].ts - $e[$i - 1].ts - $e[$i - 1].dur | fabs] | max' "$work/p.json")
awk -v g="$gap" 'BEGIN { exit !(g < 0.01) }' || { echo "FAIL: the step's events leave a gap of $gap us"; exit 1; }
echo "trace: 2 passed, 0 failed"
