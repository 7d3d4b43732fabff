#!/usr/bin/env bash
# The shipped H100 profile fitted to public measurements (scenarios/profiles/h100-sxm-public-fit.json) is
# what `etcalib fit` gives from scenarios/data/calibration today, from the datasheet-era profile it was made
# from (tests/data/profiles-datasheet/; the shipped h100-sxm.json carries the training fit since); fit-network fits a cluster's network to the
# nccl-tests rows; tables without matching rows are refused.
# Usage: public_fit.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$(cd "$2" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
data=$src/scenarios/data/calibration
"$build/calib/etcalib" fit "$data/gemm.csv" "$data/memory.csv" --gpu "H100|sm_90" --precision bf16 \
  --base "$src/tests/data/profiles-datasheet/h100-sxm.json" --out "$work/fit.json"
terms='[.peak_tflops.bf16, .memory_bandwidth_GBps, .efficiency.gemm_max, .efficiency.gemm_half_dim,
        .efficiency.memory, .efficiency.kernel_overhead_us] | map(. * 1e6 | round)'
if [ "$(jq -c "$terms" "$work/fit.json")" != "$(jq -c "$terms" "$src/scenarios/profiles/h100-sxm-public-fit.json")" ]; then
  echo "FAIL: the fit no longer gives the shipped profile:"; jq -c "$terms" "$work/fit.json" \
    "$src/scenarios/profiles/h100-sxm-public-fit.json"; exit 1
fi
# the H200's FP8 products fitted on their own (--only-precision): the shipped h200-public-fit.json
"$build/calib/etcalib" fit "$data/gemm.csv" "$data/memory.csv" --gpu "H200 141GB|H200 SXM" --precision fp8 \
  --only-precision --base "$src/tests/data/profiles-datasheet/h200.json" --out "$work/h200.json" > /dev/null
terms8='[.efficiency.gemm_max_by_precision.fp8, .efficiency.gemm_max, .memory_bandwidth_GBps, .efficiency.memory,
         .efficiency.kernel_overhead_us] | map(. * 1e6 | round)'
if [ "$(jq -c "$terms8" "$work/h200.json")" != "$(jq -c "$terms8" "$src/scenarios/profiles/h200-public-fit.json")" ]; then
  echo "FAIL: the fp8 fit no longer gives the shipped H200 profile:"; jq -c "$terms8" "$work/h200.json" \
    "$src/scenarios/profiles/h200-public-fit.json"; exit 1
fi
jq -e '.efficiency.gemm_max == 0.8' "$work/h200.json" > /dev/null || { echo "FAIL: --only-precision moved bf16's term"; exit 1; }
"$build/sim/etsim" --analytic --quiet "$src/scenarios/mlperf-bert-8.json" > /dev/null
jq --arg dir "$src/scenarios" '.cluster.device = $dir + "/profiles/h100-sxm-public-fit.json" | .precision = "bf16"
    | .data.lengths.file = $dir + "/" + .data.lengths.file' "$src/scenarios/mlperf-bert-8.json" > "$work/bert-h100.json"
"$build/sim/etsim" --analytic --quiet "$work/bert-h100.json" | grep -q "H100-SXM5-80GB-calibrated" ||
  { echo "FAIL: etsim does not take the fitted profile"; exit 1; }
set +e
"$build/calib/etcalib" fit "$data/gemm.csv" --gpu "B300" --precision bf16 \
  --base "$src/scenarios/profiles/h100-sxm.json" --out "$work/none.json" 2> "$work/err"
rc=$?
set -e
cat "$work/err"
[ $rc -eq 2 ] && grep -q 'no row matches GPU "B300"' "$work/err" && [ ! -e "$work/none.json" ] ||
  { echo "FAIL: a table without matching rows was not refused"; exit 1; }
# the network: nccl-tests all-reduce rows of one DGX A100 node fitted into mlperf-bert-8's cluster
"$build/calib/etcalib" fit-network "$data/nccl.csv" --gpu "A100 SXM4 80GB" --scenario "$src/scenarios/mlperf-bert-8.json" \
  --out "$work/bert8-net.json" | tail -2
bf=$(jq .cluster.bandwidth_factor "$work/bert8-net.json")
awk -v b="$bf" 'BEGIN {exit !(b > 0.3 && b <= 1)}' || { echo "FAIL: fitted bandwidth_factor $bf"; exit 1; }
"$build/sim/etsim" --analytic --quiet --json "$work/base.json" "$src/scenarios/mlperf-bert-8.json" > /dev/null
"$build/sim/etsim" --analytic --quiet --json "$work/fitted.json" "$work/bert8-net.json" > /dev/null
base=$(jq .estimate.step.dp_comm_s "$work/base.json") fitted=$(jq .estimate.step.dp_comm_s "$work/fitted.json")
awk -v a="$base" -v b="$fitted" 'BEGIN {exit !(b > a)}' ||
  { echo "FAIL: the fitted network (factor $bf) does not slow the all-reduces ($fitted s against $base s)"; exit 1; }
echo "ok: fit-network, bandwidth_factor $bf; gradient all-reduces $base s -> $fitted s"
set +e
"$build/calib/etcalib" fit-network "$data/nccl.csv" --gpu "B300" --scenario "$src/scenarios/mlperf-bert-8.json" \
  --out "$work/none.json" 2> "$work/err"
rc=$?
set -e
[ $rc -eq 2 ] && grep -q 'no measured all_reduce row matches GPU "B300"' "$work/err" && [ ! -e "$work/none.json" ] ||
  { echo "FAIL: fit-network without matching rows was not refused"; cat "$work/err"; exit 1; }
echo "public-fit: 1 passed, 0 failed"
