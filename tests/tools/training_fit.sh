#!/usr/bin/env bash
# The Hopper and Blackwell profiles' large-GEMM efficiencies as training runs sustain them (the fused
# attention keeps its measured FlashAttention 2 rate: fitted too, it moves by 1.5%): `etcalib fit-runs
# --terms gemm` of the datasheet-era H100 profile (tests/data/profiles-datasheet/h100-sxm.json) to
# every published H100 run ET ships (scenarios/validation/published.csv: the llm-foundry MPT and NeMo
# Megatron Bridge rows), then the same factor applied to the datasheet-era H200 (the same GH100 chip),
# B200, GB200, B300 and GB300 profiles, which have no public GEMM rows of their own; their published runs test the
# transfer. A developer's tool, run by hand when the data or the cost model changes; its outputs are
# committed, and tests/calib/training_fit.sh checks they are what it writes now.
# Usage: tests/tools/training_fit.sh BUILD_DIR [OUT_DIR]   (default OUT_DIR: scenarios/profiles)
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=$1 out=${2:-$src/scenarios/profiles}
base=$src/tests/data/profiles-datasheet
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$build/calib/etcalib" fit-runs "$src/scenarios/validation/published.csv" --base "$base/h100-sxm.json" \
  --terms gemm --out "$work/h100-sxm.json" > "$work/fit.txt"
grep '^#' "$work/fit.txt"
g=$(jq -n --slurpfile a "$work/h100-sxm.json" --slurpfile b "$base/h100-sxm.json" \
  '$a[0].efficiency.gemm_max / $b[0].efficiency.gemm_max')
f=$(jq -n --slurpfile a "$work/h100-sxm.json" --slurpfile b "$base/h100-sxm.json" \
  '$a[0].efficiency.flash_attention / $b[0].efficiency.flash_attention')
cp "$work/h100-sxm.json" "$out/h100-sxm.json"
for p in h200 b200 gb200 b300 gb300; do
  jq --argjson g "$g" --argjson f "$f" '
    .efficiency.gemm_max *= $g
    | if .efficiency.gemm_max_by_precision then .efficiency.gemm_max_by_precision |= map_values(. * $g) else . end
    | if .efficiency.flash_attention then .efficiency.flash_attention *= $f else . end
    | .source += " Training efficiencies (tests/tools/training_fit.sh): the large-GEMM efficiency x \($g) and the fused attention'"'"'s x \($f), the factors etcalib fit-runs found for the H100 on its published training runs (the H100 profile'"'"'s source), applied here for want of public runs or GEMM rows of this device to fit."' \
    "$base/$p.json" > "$work/$p.json"
  cp "$work/$p.json" "$out/$p.json"
done
echo "# GEMM x $g, fused attention x $f: wrote h100-sxm, h200, b200, gb200, b300, gb300 into $out"
