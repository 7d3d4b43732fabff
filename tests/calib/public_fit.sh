#!/usr/bin/env bash
# The shipped H100 profile fitted to public measurements (scenarios/profiles/h100-sxm-public-fit.json) is
# what `etcalib fit` gives from scenarios/data/calibration today; a table without matching rows is refused.
# Usage: public_fit.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$(cd "$2" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
data=$src/scenarios/data/calibration
"$build/calib/etcalib" fit "$data/gemm.csv" "$data/memory.csv" --gpu "H100|sm_90" --precision bf16 \
  --base "$src/scenarios/profiles/h100-sxm.json" --out "$work/fit.json"
terms='[.peak_tflops.bf16, .memory_bandwidth_GBps, .efficiency.gemm_max, .efficiency.gemm_half_dim,
        .efficiency.memory, .efficiency.kernel_overhead_us] | map(. * 1e6 | round)'
if [ "$(jq -c "$terms" "$work/fit.json")" != "$(jq -c "$terms" "$src/scenarios/profiles/h100-sxm-public-fit.json")" ]; then
  echo "FAIL: the fit no longer gives the shipped profile:"; jq -c "$terms" "$work/fit.json" \
    "$src/scenarios/profiles/h100-sxm-public-fit.json"; exit 1
fi
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
echo "public-fit: 1 passed, 0 failed"
