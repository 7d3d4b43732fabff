#!/usr/bin/env bash
# The shipped A100, H100, H200, B200, GB200, B300 and GB300 profiles' efficiencies are what
# tests/tools/training_fit.sh writes today (etcalib fit-runs on each device's published dense runs); fit-runs never ends worse than its base, writes a
# profile etsim loads, and refuses bad input with a file, a line and exit 2, writing nothing.
# Usage: training_fit.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$(cd "$2" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bash "$src/tests/tools/training_fit.sh" "$build" "$work" > "$work/log"
for p in a100-sxm4-80gb a100-sxm4-40gb h100-sxm h200 b200 gb200 b300 gb300; do
  terms='[.name, (.efficiency | to_entries[] | .key, (.value | if type == "number" then . * 1e6 | round else map_values(. * 1e6 | round) end))]'
  if [ "$(jq -c "$terms" "$work/$p.json")" != "$(jq -c "$terms" "$src/scenarios/profiles/$p.json")" ]; then
    echo "FAIL: scenarios/profiles/$p.json is not what tests/tools/training_fit.sh writes now:"
    jq -c "$terms" "$work/$p.json" "$src/scenarios/profiles/$p.json"; exit 1
  fi
done
# three runs: the fit's objective never rises, and the table has them, fitted
csv=$src/scenarios/validation/published.csv
only=mpt-1b-h100-80gb-8gpu-seq512-mbs56-ampbf16,mpt-1b-h100-80gb-8gpu-seq2048-mbs14,mpt-7b-h100-80gb-8gpu-seq2048
"$build/calib/etcalib" fit-runs "$csv" --base "$src/tests/data/profiles-datasheet/h100-sxm.json" --only "$only" \
  --out "$work/three.json" > "$work/three.txt"
read -r before after < <(sed -n 's/.*mean |log error| \([0-9.e+-]*\) -> \([0-9.e+-]*\)$/\1 \2/p' "$work/three.txt")
awk -v a="$before" -v b="$after" 'BEGIN {exit !(b <= a && b < 0.1)}' ||
  { cat "$work/three.txt"; echo "FAIL: objective $before -> $after"; exit 1; }
[ "$(grep -c ' yes ' "$work/three.txt")" -eq 3 ] || { cat "$work/three.txt"; echo "FAIL: three runs fitted"; exit 1; }
jq --arg p "$work/three.json" '.cluster.device = $p' "$src/scenarios/validation/mpt-1b-h100-80gb-8gpu-seq2048-mbs14-ampbf16.json" \
  > "$work/s.json"
"$build/sim/etsim" --analytic --quiet "$work/s.json" > /dev/null || { echo "FAIL: etsim on the fitted profile"; exit 1; }
# the half dimension alone: the efficiencies kept, the half dimension moved, the objective never higher
"$build/calib/etcalib" fit-runs "$csv" --base "$src/tests/data/profiles-datasheet/h100-sxm.json" --only "$only" \
  --terms half_dim --out "$work/half.json" > "$work/half.txt"
read -r before after < <(sed -n 's/.*mean |log error| \([0-9.e+-]*\) -> \([0-9.e+-]*\)$/\1 \2/p' "$work/half.txt")
awk -v a="$before" -v b="$after" 'BEGIN {exit !(b <= a)}' || { cat "$work/half.txt"; echo "FAIL: half_dim objective $before -> $after"; exit 1; }
[ "$(jq '.efficiency.gemm_max' "$work/half.json")" = "$(jq '.efficiency.gemm_max' "$src/tests/data/profiles-datasheet/h100-sxm.json")" ] &&
  [ "$(jq '.efficiency.gemm_half_dim' "$work/half.json")" != "$(jq '.efficiency.gemm_half_dim' "$src/tests/data/profiles-datasheet/h100-sxm.json")" ] ||
  { cat "$work/half.txt"; echo "FAIL: --terms half_dim moved gemm_max or left the half dimension"; exit 1; }
# cuDNN's fused attention alone, on a base without its rate: fitted from FlashAttention 2's, written, the
# objective never higher, the other efficiencies kept
jq 'del(.efficiency.cudnn_attention)' "$src/tests/data/profiles-datasheet/h100-sxm.json" > "$work/no-cudnn.json"
"$build/calib/etcalib" fit-runs "$csv" --base "$work/no-cudnn.json" --only nemo-2604-llama370b-h100 \
  --terms cudnn_attention --out "$work/cudnn.json" > "$work/cudnn.txt"
read -r before after < <(sed -n 's/.*mean |log error| \([0-9.e+-]*\) -> \([0-9.e+-]*\)$/\1 \2/p' "$work/cudnn.txt")
awk -v a="$before" -v b="$after" 'BEGIN {exit !(b < a)}' || { cat "$work/cudnn.txt"; echo "FAIL: cudnn_attention objective $before -> $after"; exit 1; }
[ "$(jq '.efficiency.cudnn_attention != .efficiency.flash_attention and .efficiency.gemm_max == 0.78' "$work/cudnn.json")" = true ] ||
  { cat "$work/cudnn.txt"; jq .efficiency "$work/cudnn.json"; echo "FAIL: --terms cudnn_attention wrote no cuDNN rate of its own, or moved gemm_max"; exit 1; }
# --terms takes a subset of gemm, attention, half_dim and cudnn_attention, each once
for t in gemm,gemm bogus "gemm,"; do
  rc=0
  "$build/calib/etcalib" fit-runs "$csv" --base "$src/tests/data/profiles-datasheet/h100-sxm.json" --terms "$t" \
    --out "$work/no.json" 2> "$work/err" || rc=$?
  [ $rc -eq 2 ] && grep -q "expected a comma-separated subset of gemm, attention, half_dim and cudnn_attention" "$work/err" &&
    [ ! -e "$work/no.json" ] || { cat "$work/err"; echo "FAIL: --terms $t (exit $rc)"; exit 1; }
done
# bad input: exit 2, the file and line named, nothing written
refused() { # refused WHAT CSV BASE EXPECTED-TEXT
  local rc=0
  "$build/calib/etcalib" fit-runs "$2" --base "$3" --out "$work/no.json" 2> "$work/err" || rc=$?
  cat "$work/err"
  [ $rc -eq 2 ] && grep -q "$4" "$work/err" && [ ! -e "$work/no.json" ] || { echo "FAIL: $1 (exit $rc)"; exit 1; }
}
printf 'name,metric,published,source,judged\nmpt-1b-h100-80gb-8gpu-seq512-mbs56-ampbf16,step_s,-3,x,no\n' > "$work/bad.csv"
refused "a bad published figure" "$work/bad.csv" "$src/scenarios/profiles/h100-sxm.json" "bad.csv:2:1: expected name,metric"
refused "a missing file" "$work/none.csv" "$src/scenarios/profiles/h100-sxm.json" "none.csv: cannot read file"
refused "a device without runs" "$csv" "$src/scenarios/profiles/host-cpu.json" "no published run names the device profile"
echo "training_fit: the shipped profiles are the fit's; fit-runs $before -> $after on three runs; bad input refused"
