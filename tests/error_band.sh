#!/usr/bin/env bash
# The error bands (model/error_band.h): scenarios/data/validation/errors.csv is what bench/validation.sh
# writes now (a moved figure fails until it is regenerated); a report's band is the nearest-rank p10 and
# p90 of measured / ET over its family's rows, recounted here from the CSV; a family without three runs of
# three models (or of its own model) takes the next level of its generation that has them (its shape under
# every stack, its stack in every shape, the generation; mixtures of experts apart), and says so; one with
# no runs says how far to trust the figure is unknown; held out (--band-held-out), the scenario's own model's
# runs are left out; a band drawn from rows without the scenario's own model's is widened as a prediction
# interval for a new model unless they hold three of its runs (its widening then 1).
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
# recount CONDITION [F] [WIDEN]: the rows of errors.csv the awk condition selects (F given to it as f), their
# count, the models they come from and the nearest-rank p10 and p90 of measured / ET = 1 / (1 + error); with
# WIDEN (a model outside the rows) each edge's log distance from the median widened by a prediction
# interval's t(k - 1, 0.9) / z(0.9) x sqrt(1 + 1/k), k models (Student's t from a printed table)
recount() {
  awk -F, -v f="${2:-}" -v widen="${3:-}" "NR > 1 && ($1) {r[++n] = 1 / (1 + \$4); if (!(\$5 in m)) {m[\$5]; k++}}"'
    END {for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (r[j] < r[i]) {t = r[i]; r[i] = r[j]; r[j] = t}
         lo = int(0.1 * n); if (lo < 0.1 * n) lo++; hi = int(0.9 * n); if (hi < 0.9 * n) hi++;
         md = int(0.5 * n); if (md < 0.5 * n) md++;
         split("3.078 1.886 1.638 1.533 1.476 1.440 1.415 1.397 1.383 1.372", t90, " ");
         w = widen && k >= 2 && k <= 11 ? t90[k - 1] / 1.2815515655446004 * sqrt(1 + 1 / k) : 1;
         if (widen && (k < 2 || k > 11)) w = -1;  # outside the table: no recount
         printf "%d %d %.9f %.9f %.9f\n", n, k, r[md] * (r[lo] / r[md]) ^ w, r[md] * (r[hi] / r[md]) ^ w, w}' "$csv"
}
# a family with a band: the JSON's bounds against a recount (measured / ET = 1 / (1 + error))
"$etsim" --analytic --quiet --json "$work/r.json" "$src/scenarios/validation/korthikanti-2022-gpt-175b-full.json" > /dev/null
family=$(jq -r .estimate.error_band.family "$work/r.json")
read -r rows models low high widening < <(recount '$2 == f' "$family" widen)
jq -e --argjson n "$rows" --argjson lo "$low" --argjson hi "$high" --argjson w "$widening" '.estimate.error_band |
  .rows == $n and $n >= 3 and .models >= 3 and $w > 1 and (.widening - $w | fabs) < 1e-9 and
  (.low - $lo | fabs) < 1e-6 and (.high - $hi | fabs) < 1e-6 and
  (.step_low_s / .low - .step_high_s / .high | fabs) < 1e-9 and (.nearest | length) == 3' "$work/r.json" > /dev/null ||
  { echo "FAIL: the band of family $family: $(jq -c .estimate.error_band "$work/r.json"), recounted $rows rows $low-$high"; exit 1; }
summary="$family: $rows rows of $models models, measured $low-$high x ET"
"$etsim" --analytic "$src/scenarios/validation/korthikanti-2022-gpt-175b-full.json" | grep -q "^error band   runs measured .* published runs of 3 models of $family" ||
  { echo "FAIL: the report's band line"; exit 1; }
passed=$((passed + 1))
# three runs of its own model in the family (BERT-large's eight): the band speaks for it, not widened
"$etsim" --analytic --quiet --json "$work/b.json" "$src/scenarios/validation/dle-bert-large-phase2-fp16-8gpu.json" > /dev/null
read -r rows models low high _ < <(recount '$2 == "A100 pytorch-apex data"')
jq -e --argjson n "$rows" --argjson lo "$low" --argjson hi "$high" '.estimate.error_band |
  .rows == $n and $n >= 3 and .models == 1 and .widening == 1 and
  (.low - $lo | fabs) < 1e-6 and (.high - $hi | fabs) < 1e-6' "$work/b.json" > /dev/null ||
  { echo "FAIL: a band of its own model's runs: $(jq -c .estimate.error_band "$work/b.json"), recounted $rows rows $low-$high"; exit 1; }
passed=$((passed + 1))
# a stack without runs of its own: its generation and shape under every stack, said so (torchtitan's
# pytorch-fsdp on H100s, data parallel and sharded: the llm-foundry and Megatron-Core rows of that shape)
"$etsim" --analytic --quiet --json "$work/t.json" "$src/scenarios/llama3-8b-torchtitan-h100.json" > /dev/null
read -r rows models low high widening < <(recount '$2 ~ /^H100 [^ ]+ data sharded$/' "" widen)
jq -e --argjson n "$rows" --argjson k "$models" --argjson lo "$low" --argjson hi "$high" --argjson w "$widening" '.estimate.error_band |
  $w > 1 and (.widening - $w | fabs) < 1e-9 and
  .family == "H100 pytorch-fsdp data sharded" and
  .rows_family == "H100 data sharded, any stack (H100 pytorch-fsdp data sharded: 0 runs of 0 models)" and
  .rows == $n and .models == $k and $k >= 3 and
  (.low - $lo | fabs) < 1e-6 and (.high - $hi | fabs) < 1e-6' "$work/t.json" > /dev/null ||
  { echo "FAIL: a stack without runs: $(jq -c .estimate.error_band "$work/t.json"), recounted $rows rows $low-$high"; exit 1; }
passed=$((passed + 1))
# runs of one model only: the generation's mixtures of experts under every stack and shape (Mixtral on H100,
# no stack named: the one H100 data-parallel mixture is Qwen3 30B-A3B's)
"$etsim" --analytic --quiet --json "$work/x.json" "$src/scenarios/mixtral-8x7b-h100.json" > /dev/null
read -r own own_models _ _ _ < <(recount '$2 ~ /^H100 [^ ]+ data experts$/')
read -r rows models low high widening < <(recount '$2 ~ /^H100 .*experts$/' "" widen)
jq -e --argjson n "$rows" --argjson k "$models" --argjson lo "$low" --argjson hi "$high" --argjson w "$widening" \
  --arg why "H100 experts, any stack and shape (H100 data experts, any stack: $own runs of $own_models model)" \
  '.estimate.error_band | .rows_family == $why and .rows == $n and .models == $k and $k >= 3 and
  $w > 1 and (.widening - $w | fabs) < 1e-9 and
  (.low - $lo | fabs) < 1e-6 and (.high - $hi | fabs) < 1e-6' "$work/x.json" > /dev/null && [ "$own_models" = 1 ] ||
  { echo "FAIL: runs of one model: $(jq -c .estimate.error_band "$work/x.json"), recounted $rows rows of $models models $low-$high"; exit 1; }
passed=$((passed + 1))
# held out: GPT 175B's own runs left out of its band; the other two models' four pipeline runs are too few
# models, so its generation and stack in every shape (the 22B tensor-parallel runs too)
"$etsim" --analytic --quiet --band-held-out --json "$work/h.json" "$src/scenarios/validation/korthikanti-2022-gpt-175b-full.json" > /dev/null
model=$(jq -r .estimate.error_band.model "$work/h.json")
read -r rows models low high widening < <(recount '$2 ~ /^A100 megatron-lm-2022 / && $5 != f' "$model" widen)
jq -e --argjson n "$rows" --argjson k "$models" --argjson lo "$low" --argjson hi "$high" --argjson w "$widening" '.estimate.error_band |
  $w > 1 and (.widening - $w | fabs) < 1e-9 and
  .held_out and .model == "96x12288x49152x0" and .rows == $n and .models == $k and $k >= 3 and
  (.rows_family | startswith("A100 megatron-lm-2022 dense, any shape")) and
  (.low - $lo | fabs) < 1e-6 and (.high - $hi | fabs) < 1e-6 and
  all(.nearest[]; startswith("korthikanti-2022-gpt-175b") | not)' "$work/h.json" > /dev/null ||
  { echo "FAIL: held out: $(jq -c .estimate.error_band "$work/h.json"), recounted $rows rows of $models models $low-$high"; exit 1; }
passed=$((passed + 1))
# a family without rows: said so, no bounds
"$etsim" --analytic --quiet --json "$work/c.json" "$src/scenarios/tiny-gpt-cpu.json" > /dev/null
jq -e '.estimate.error_band | .rows == 0 and (has("low") | not)' "$work/c.json" > /dev/null &&
  "$etsim" --analytic "$src/scenarios/tiny-gpt-cpu.json" | grep -q "^error band   no published run of family .* unknown" ||
  { echo "FAIL: a family without published runs"; jq -c .estimate.error_band "$work/c.json"; exit 1; }
passed=$((passed + 1))
echo "error band: $passed passed, 0 failed ($summary)"
