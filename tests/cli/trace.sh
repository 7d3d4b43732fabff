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
echo "trace: 1 passed, 0 failed"
