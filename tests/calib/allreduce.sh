#!/usr/bin/env bash
# etcalib bench under mpirun measures the all-reduce's bus bandwidth over message sizes (nccl-tests
# style), and etcalib fit-network fits the scenario cluster's bandwidth factor and step latency to those
# rows: the fitted closed form predicts the measured 1 MiB all-reduce within a factor of 2, where the
# uncalibrated one (NVLink figures) is more than 5x too fast. Skipped without mpirun.
# Usage: allreduce.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$(cd "$2" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
command -v mpirun > /dev/null || { echo "SKIP: no mpirun"; exit 0; }
export OPENBLAS_NUM_THREADS=1
mpirun --allow-run-as-root --oversubscribe --mca btl self,vader -np 2 "$build/calib/etcalib" bench \
  --out "$work/micro.json" 2> "$work/bench.err"
grep -q "^# all-reduce over 2 MPI ranks" "$work/bench.err" || { echo "FAIL: no all-reduce table"; cat "$work/bench.err"; exit 1; }
jq -e '(.allreduce | length) == 8 and all(.allreduce[]; .ranks == 2 and .seconds > 0 and .busbw_GBps > 0)
       and (.gemm | length) > 0' "$work/micro.json" > /dev/null || { echo "FAIL: the all-reduce rows"; exit 1; }
"$build/calib/etcalib" fit-network "$work/micro.json" --scenario "$src/scenarios/tiny-gpt-cpu.json" \
  --out "$work/net.json" > "$work/fit.txt"
cat "$work/fit.txt"
read -r measured base fitted < <(awk '$3 == 1048576 {print $4, $5, $6}' "$work/fit.txt")
awk -v m="$measured" -v b="$base" -v f="$fitted" 'BEGIN {r = f / m; exit !(r > 0.5 && r < 2 && b > 5 * m)}' ||
  { echo "FAIL: 1 MiB busbw measured $measured, uncalibrated $base, fitted $fitted GB/s"; exit 1; }
jq -e '.cluster.bandwidth_factor < 1 and .cluster.collective_latency_us > 0' "$work/net.json" > /dev/null ||
  { echo "FAIL: the calibrated scenario"; exit 1; }
echo "allreduce: 1 passed, 0 failed"
