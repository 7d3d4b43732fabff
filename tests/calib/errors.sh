#!/usr/bin/env bash
# etcalib on bad input: a truncated measured.json, one with a negative time, one from another plan, an
# output that names an input, an unknown command, micro.json optimizer samples with a zero time or not an
# array: exit 2, a message naming the file, nothing written; and --plot without gnuplot: the report, a
# note, exit 0.
# Usage: errors.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
etcalib=$build/calib/etcalib
export OPENBLAS_NUM_THREADS=1
jq '.run.steps = 4' "$src/tests/data/tiny-gpt-plan.json" > "$work/plan.json"
"$build/runtime/etrun" --quiet --out "$work/m.json" "$work/plan.json"
source "$src/tests/expect_error.sh"
expect() { expect_error "$work/fitted.json" "$@"; }
head -c 300 "$work/m.json" > "$work/truncated.json"
expect "truncated.json" "$etcalib" report "$work/truncated.json"
jq '.ops[3].ranks[0].median_s = -1' "$work/m.json" > "$work/negative.json"
expect '$.ops[3]: ranks[0].median_s must be a number of seconds >= 0' "$etcalib" report "$work/negative.json"
# a time no run measures ("-nan days" downstream), a future format, an older one without the plan's checksum,
# a rank outside the run, a negative batch shape, a plan changed since the run (the same op ids)
jq '.ops[3].ranks[0].median_s = 1e308' "$work/m.json" > "$work/huge.json"
expect '$.ops[3]: ranks[0].median_s must be a number of seconds >= 0 and at most 10^6' "$etcalib" report "$work/huge.json"
expect '$.ops[3]: ranks[0].median_s must be' "$build/sim/etsim" --analytic --op-times "$work/huge.json" --json "$work/fitted.json" "$src/scenarios/tiny-gpt-cpu.json"
jq '.format_version = 3' "$work/m.json" > "$work/future.json"
expect '$.format_version: measured.json format 3 is newer than this ET reads (2): update ET' "$etcalib" report "$work/future.json"
jq 'del(.plan_xxh64) | .format_version = 1' "$work/m.json" > "$work/older.json"
expect '$.plan_xxh64: measured.json names no checksum of its plan (format 1' "$etcalib" report "$work/older.json"
jq '.ops[2].ranks[0].rank = 5' "$work/m.json" > "$work/rank.json"
expect '$.ops[2].ranks[0].rank: a rank of the run expected (0 to 0: the run had 1)' "$etcalib" report "$work/rank.json"
jq '.batch_shapes[0][0][1] = -64' "$work/m.json" > "$work/shape.json"
expect '$.batch_shapes[0][0]: a batch shape is [B, T, Q, P]' "$etcalib" report "$work/shape.json"
jq '.run.learning_rate = 0.5' "$work/plan.json" > "$work/plan2.json"
jq --arg p "$work/plan2.json" '.plan_file = $p' "$work/m.json" > "$work/changed.json"
expect "is not the one this run ran" "$etcalib" report "$work/changed.json"
jq --arg p "$src/tests/data/tiny-bert-plan.json" '.plan_file = $p' "$work/m.json" > "$work/other.json"
expect "from another plan" "$etcalib" fit "$work/other.json" --base "$src/scenarios/profiles/host-cpu.json" --out "$work/fitted.json"
expect "describes a gpu device" "$etcalib" report "$work/m.json" --profile "$src/scenarios/profiles/h200.json"
cp "$src/scenarios/profiles/host-cpu.json" "$work/base.json"
expect "is the input" "$etcalib" fit "$work/m.json" --base "$work/base.json" --out "$work/base.json"
expect "unknown command" "$etcalib" frobnicate
# a microbenchmark file with a bad optimizer sample, or optimizer samples that are not an array
micro='{"tool": "etcalib bench", "backend": "cpu", "gemm": [{"m": 64, "n": 64, "k": 64, "seconds": 1e-5}],
  "stream": [{"bytes": 4096, "seconds": 1e-7}], "optimizer": [{"parameters": 1024, "seconds": 5e-7}]}'
echo "$micro" | jq '.optimizer += [{"parameters": 2048, "seconds": 0}]' > "$work/micro-zero.json"
expect '$.optimizer[1]: parameters >= 1 and seconds > 0 expected' "$etcalib" fit "$work/micro-zero.json" --base "$src/scenarios/profiles/host-cpu.json" --out "$work/fitted.json"
echo "$micro" | jq '.optimizer = {"parameters": 1024}' > "$work/micro-object.json"
expect '$.optimizer: an array of {parameters, seconds} expected' "$etcalib" fit "$work/micro-object.json" --base "$src/scenarios/profiles/host-cpu.json" --out "$work/fitted.json"
echo "$micro" > "$work/micro-good.json"
"$etcalib" fit "$work/micro-good.json" --base "$src/scenarios/profiles/host-cpu.json" --out "$work/fitted.json" > /dev/null ||
  { echo "FAIL: a well-formed microbenchmark file was refused"; exit 1; }
rm -f "$work/fitted.json"
# a GEMM sample no rate within 1000x of the base explains: the terms the box, not the data, set are said to be
# so, in the table and in the profile's source, not reported as fitted
echo "$micro" | jq '.gemm[0].seconds = 1e-300' > "$work/micro-pinned.json"
"$etcalib" fit "$work/micro-pinned.json" --base "$src/scenarios/profiles/host-cpu.json" --out "$work/fitted.json" > "$work/pinned.txt"
grep -q "^# GEMM rate: at the fit's limit (1000x from the base): not determined by these inputs" "$work/pinned.txt" &&
  jq -e '.source | test("Not determined by these inputs .*: GEMM rate")' "$work/fitted.json" > /dev/null ||
  { echo "FAIL: a term at the fit's limit reported as fitted"; cat "$work/pinned.txt"; exit 1; }
echo "ok: terms at the fit's limit named"
rm -f "$work/fitted.json"
# without gnuplot the report says so, stays complete and exits 0
PATH=/nonexistent "$etcalib" report "$work/m.json" --plot "$work/p.png" > "$work/out" 2> "$work/err"
grep -q "no gnuplot on the PATH" "$work/err" && grep -q "^step (sum of ops)" "$work/out" && [ ! -e "$work/p.png" ] ||
  { echo "FAIL: --plot without gnuplot"; cat "$work/err"; exit 1; }
echo "ok: --plot without gnuplot"
echo "errors: 1 passed, 0 failed"
