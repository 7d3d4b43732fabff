#!/usr/bin/env bash
# The error bands (model/error_band.h): scenarios/data/validation/errors.csv is what bench/validation.sh
# writes now (a moved figure fails until it is regenerated); a report's band is the nearest-rank p10 and
# p90 of measured / ET over its family's rows, recounted here from the CSV; a family with fewer than three
# rows gives no band and says so, one with none says how far to trust the figure is unknown; a stack without
# three runs of its own takes its generation and shape's runs under every stack, and says so.
# Usage: error_band.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$(cd "$2" && pwd)
etsim=$build/sim/etsim
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
csv=$src/scenarios/data/validation/errors.csv
bash "$src/bench/validation.sh" --errors "$work/errors.csv" "$build" > /dev/null
diff "$csv" "$work/errors.csv" ||
  { echo "FAIL: $csv is not what bench/validation.sh --errors writes now (regenerate it)"; exit 1; }
passed=1
# recount CONDITION [F]: the rows of errors.csv the awk condition selects (F given to it as f), their count
# and the nearest-rank p10 and p90 of measured / ET = 1 / (1 + error)
recount() {
  awk -F, -v f="${2:-}" "NR > 1 && ($1) {r[++n] = 1 / (1 + \$4)}"'
    END {for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (r[j] < r[i]) {t = r[i]; r[i] = r[j]; r[j] = t}
         lo = int(0.1 * n); if (lo < 0.1 * n) lo++; hi = int(0.9 * n); if (hi < 0.9 * n) hi++;
         printf "%d %.9f %.9f\n", n, r[lo], r[hi]}' "$csv"
}
# a family with a band: the JSON's bounds against a recount (measured / ET = 1 / (1 + error))
"$etsim" --analytic --quiet --json "$work/r.json" "$src/scenarios/validation/korthikanti-2022-gpt-175b-full.json" > /dev/null
family=$(jq -r .estimate.error_band.family "$work/r.json")
read -r rows low high < <(recount '$2 == f' "$family")
jq -e --argjson n "$rows" --argjson lo "$low" --argjson hi "$high" '.estimate.error_band |
  .rows == $n and $n >= 3 and (.low - $lo | fabs) < 1e-6 and (.high - $hi | fabs) < 1e-6 and
  (.step_low_s / .low - .step_high_s / .high | fabs) < 1e-9 and (.nearest | length) == 3' "$work/r.json" > /dev/null ||
  { echo "FAIL: the band of family $family: $(jq -c .estimate.error_band "$work/r.json"), recounted $rows rows $low-$high"; exit 1; }
"$etsim" --analytic "$src/scenarios/validation/korthikanti-2022-gpt-175b-full.json" | grep -q "^error band   runs measured .* published runs of family $family" ||
  { echo "FAIL: the report's band line"; exit 1; }
passed=$((passed + 1))
# a stack without runs of its own: its generation and shape under every stack, said so (torchtitan's
# pytorch-fsdp on H100s, data parallel and sharded: the llm-foundry and Megatron-Core rows of that shape)
"$etsim" --analytic --quiet --json "$work/t.json" "$src/scenarios/llama3-8b-torchtitan-h100.json" > /dev/null
read -r rows low high < <(recount '$2 ~ /^H100 [^ ]+ data sharded$/')
jq -e --argjson n "$rows" --argjson lo "$low" --argjson hi "$high" '.estimate.error_band |
  .family == "H100 pytorch-fsdp data sharded" and .rows_family == "H100 data sharded, any stack: 0 of pytorch-fsdp" and
  .rows == $n and $n >= 3 and
  (.low - $lo | fabs) < 1e-6 and (.high - $hi | fabs) < 1e-6' "$work/t.json" > /dev/null ||
  { echo "FAIL: a stack without runs: $(jq -c .estimate.error_band "$work/t.json"), recounted $rows rows $low-$high"; exit 1; }
passed=$((passed + 1))
# a family without rows: said so, no bounds
"$etsim" --analytic --quiet --json "$work/c.json" "$src/scenarios/tiny-gpt-cpu.json" > /dev/null
jq -e '.estimate.error_band | .rows == 0 and (has("low") | not)' "$work/c.json" > /dev/null &&
  "$etsim" --analytic "$src/scenarios/tiny-gpt-cpu.json" | grep -q "^error band   no published run of family .* unknown" ||
  { echo "FAIL: a family without published runs"; jq -c .estimate.error_band "$work/c.json"; exit 1; }
passed=$((passed + 1))
echo "error band: $passed passed, 0 failed ($family: $rows rows, measured $low-$high x ET)"
