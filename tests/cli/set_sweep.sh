#!/usr/bin/env bash
# etsim --set and --sweep: overrides go through the scenario parser (an unknown key fails with its JSON
# path, exit 2), a set value changes the estimate as editing the file would, a sweep prints a row a value.
# Usage: set_sweep.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$(cd "$2" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
source "$src/tests/expect_error.sh"
etsim=$build/sim/etsim scenario=$src/scenarios/gpt3-13b-dense-a100.json
expect_error "$work/none" '$.parallelism.tensr: unknown key "tensr" (did you mean "tensor"?)' \
  "$etsim" --analytic --set parallelism.tensr=2 "$scenario"
expect_error "$work/none" "--set parallelism: expected key.path=value" "$etsim" --analytic --set parallelism "$scenario"
# --set equals the edited file
jq '.parallelism.tensor = 4 | .parallelism.recompute = "selective"' "$scenario" > "$work/edited.json"
"$etsim" --analytic --quiet --json "$work/a.json" --set parallelism.tensor=4 --set parallelism.recompute=selective "$scenario" > /dev/null
"$etsim" --analytic --quiet --json "$work/b.json" "$work/edited.json" > /dev/null
[ "$(jq .estimate.step.step_s "$work/a.json")" = "$(jq .estimate.step.step_s "$work/b.json")" ] ||
  { echo "FAIL: --set and the edited file differ"; exit 1; }
out=$("$etsim" --sweep parallelism.tensor=1,2,4,8 --set parallelism.pipeline=1 "$scenario")
echo "$out"
[ "$(echo "$out" | grep -cE '^(1|2|4|8) +[0-9.]+ ')" -eq 4 ] || { echo "FAIL: a sweep row per value"; exit 1; }
echo "set-sweep: 1 passed, 0 failed"
