#!/usr/bin/env bash
# etcalib fit-network reads nccl-tests' own all_reduce_perf output (tests/data/nccl-tests-a100-8.log: the
# times of nccl.csv's rows nccl-001..020 as nccl-tests prints them): the same fit as those rows from the
# CSV; the log's GPUs against --gpu; another collective's log, a row that is not a result (its line
# named) and a head without rank lines refused (exit 2, nothing written).
# Usage: nccl_tests.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$(cd "$2" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
etcalib=$build/calib/etcalib
log=$src/tests/data/nccl-tests-a100-8.log scenario=$src/scenarios/mlperf-bert-8.json
"$etcalib" fit-network "$log" --scenario "$scenario" --out "$work/log.json" > /dev/null
(head -1 "$src/scenarios/data/calibration/nccl.csv"; grep -E '^nccl-0(0[1-9]|1[0-9]|20),' "$src/scenarios/data/calibration/nccl.csv") > "$work/rows.csv"
"$etcalib" fit-network "$work/rows.csv" --gpu A100 --scenario "$scenario" --out "$work/csv.json" > /dev/null
[ "$(jq -c '.cluster | [.bandwidth_factor, .collective_latency_us]' "$work/log.json")" = \
  "$(jq -c '.cluster | [.bandwidth_factor, .collective_latency_us]' "$work/csv.json")" ] ||
  { echo "FAIL: the log and the CSV rows fit differently"; exit 1; }
echo "ok: the log fits as its CSV rows ($(jq -c '.cluster | [.bandwidth_factor, .collective_latency_us]' "$work/log.json"))"
source "$src/tests/expect_error.sh"
expect() { expect_error "$work/out.json" "$@"; }
expect 'the run'"'"'s GPUs are "NVIDIA A100-SXM4-80GB", not "H100"' "$etcalib" fit-network "$log" --gpu H100 --scenario "$scenario" --out "$work/out.json"
sed 's/ sum      -1 / none     -1 /' "$log" > "$work/gather.log"
expect "not an all_reduce_perf run" "$etcalib" fit-network "$work/gather.log" --scenario "$scenario" --out "$work/out.json"
sed '20s/.*/     garbage here/' "$log" > "$work/row.log"
expect "row.log:20:1: not an nccl-tests result row" "$etcalib" fit-network "$work/row.log" --scenario "$scenario" --out "$work/out.json"
grep -v "Rank" "$log" > "$work/norank.log"
expect "no '#  Rank N ... on HOST device D [bus] NAME' lines" "$etcalib" fit-network "$work/norank.log" --scenario "$scenario" --out "$work/out.json"
echo "nccl-tests: 1 passed, 0 failed"
