#!/usr/bin/env bash
# Every key of etsim's reports (analytic, simulated, tensor-train phases, --compare, --collective) and of
# etrun's measured.json is named in docs/report-format.md; fails listing the keys that are not.
# Usage: report_keys.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$(cd "$2" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
etsim=$build/sim/etsim
export OPENBLAS_NUM_THREADS=1
"$etsim" --analytic --quiet --json "$work/a.json" "$src/scenarios/mlperf-bert-8.json" > /dev/null
"$etsim" --quiet --steps 1 --json "$work/s.json" "$src/scenarios/mlperf-bert-8.json" > /dev/null
"$etsim" --quiet --steps 1 --json "$work/tt.json" "$src/scenarios/encoder-6x768-tt.json" > /dev/null
"$etsim" --analytic --quiet --json "$work/c.json" --compare "$src/scenarios/mlperf-bert-1024-baseline.json" \
  "$src/scenarios/mlperf-bert-1024-samsung.json" > /dev/null
"$etsim" --quiet --steps 1 --json "$work/f.json" "$src/tests/data/faults-8.json" > /dev/null 2>&1
"$etsim" --quiet --search --search-top 2 --search-simulate 1 --steps 1 --search-gpus 256,512 --json "$work/se.json" \
  "$src/scenarios/gpt3-13b-dense-a100.json" > /dev/null
"$etsim" --quiet --steps 1 --json "$work/moe.json" "$src/tests/data/moe-a2a-8.json" > /dev/null
"$etsim" --quiet --collective allreduce --json "$work/col.json" "$src/tests/data/uniform-8.json" > /dev/null
"$etsim" --analytic --quiet --plan-steps 3 --plan-out "$work/plan.json" "$src/scenarios/tiny-gpt-cpu.json" > /dev/null
jq '.run.warmup_steps = 1' "$work/plan.json" > "$work/plan1.json"
"$build/runtime/etrun" --quiet --out "$work/m.json" "$work/plan1.json" 2> /dev/null
for f in a s tt f se c col m moe; do "$src/tests/tools/json_keys.sh" "$work/$f.json"; done | sed 's/^compare\[\]\.//' |
  sort -u > "$work/produced"
# the first column of each table row: a full path, then siblings written as .name
awk -F'|' '/^\| `/ {
    n = split($2, t, "`"); base = ""
    for (i = 2; i <= n; i += 2) {
      k = t[i]
      if (substr(k, 1, 1) == ".") print base k
      else { print k; base = k; sub(/\.[^.]*$/, "", base); if (base == k) base = "" }
    }
  }' "$src/docs/report-format.md" | sort -u > "$work/documented"
missing=$(comm -23 "$work/produced" "$work/documented")
if [ -n "$missing" ]; then
  echo "FAIL: keys not in docs/report-format.md:"; echo "$missing"; exit 1
fi
echo "report keys: $(wc -l < "$work/produced") produced, all documented"
