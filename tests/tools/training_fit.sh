#!/usr/bin/env bash
# The A100, Hopper and Blackwell profiles' large-GEMM efficiencies and GEMM half dimensions as training
# runs sustain them (the fused attention keeps its measured FlashAttention 2 rate: fitted too, it moves by
# 1.5%): `etcalib fit-runs --terms gemm,half_dim` of each datasheet-era profile (tests/data/profiles-datasheet/;
# the A100s' are their microbenchmark fits) to the published dense runs of its device that ET ships
# (scenarios/validation/published.csv: the llm-foundry MPT rows, NeMo Megatron Bridge's Llama rows,
# pretraining and fine-tuning, and on the A100 80GB Korthikanti's Megatron rows and DeepLearningExamples'
# BERT rows); the mixtures of experts' runs are held out everywhere (their errors have causes of their own:
# all-to-alls, grouped products) and test the fits. Devices without dense runs take the factor and the half
# dimension of their chip's: the H200 the H100's (GH100), the B300 the GB300's (Blackwell Ultra). A developer's tool, run by hand when the data or the cost model changes; its
# outputs are committed, and tests/calib/training_fit.sh checks they are what it writes now.
# Usage: tests/tools/training_fit.sh BUILD_DIR [OUT_DIR]   (default OUT_DIR: scenarios/profiles)
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "$1" && pwd) out=$(cd "${2:-$src/scenarios/profiles}" && pwd)
base=$src/tests/data/profiles-datasheet
# the runs' file by its path in the source tree, so that the profiles' notes name no machine's folders
cd "$src"
csv=scenarios/validation/published.csv
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# the dense runs: every MPT, Korthikanti and DeepLearningExamples row, and the NeMo rows of Llama models
# (fit-runs keeps those of the device)
only="mpt-,korthikanti-,dle-,$(grep -oE '^nemo-[0-9]+-llama' "$csv" | sort -u | paste -sd, -)"
factor() { # factor FITTED BASE KEY: fitted / base efficiency
  jq -n --slurpfile a "$1" --slurpfile b "$2" "\$a[0].efficiency.$3 / \$b[0].efficiency.$3"
}
for p in a100-sxm4-80gb a100-sxm4-40gb h100-sxm b200 gb200 gb300; do
  "$build/calib/etcalib" fit-runs "$csv" --base "$base/$p.json" --terms gemm,half_dim --only "$only" \
    --out "$work/$p.json" > "$work/fit-$p.txt"
  echo "# $p:"
  grep '^#' "$work/fit-$p.txt"
  cp "$work/$p.json" "$out/$p.json"
done
# a chip's factor for the device of the same chip without dense runs of its own
for pair in h200:h100-sxm b300:gb300; do
  p=${pair%%:*} from=${pair##*:}
  g=$(factor "$work/$from.json" "$base/$from.json" gemm_max)
  h=$(jq .efficiency.gemm_half_dim "$work/$from.json")
  jq --argjson g "$g" --argjson h "$h" --arg from "$from" '
    .efficiency.gemm_max *= $g
    | if .efficiency.flash_attention then .efficiency.flash_half_len = (.efficiency.flash_half_len // .efficiency.gemm_half_dim) else . end
    | .efficiency.gemm_half_dim = $h
    | if .efficiency.gemm_max_by_precision then .efficiency.gemm_max_by_precision |= map_values(. * $g) else . end
    | .source += " Training efficiencies (tests/tools/training_fit.sh): the large-GEMM efficiency x \($g) and the GEMM half dimension \($h), what etcalib fit-runs found for \($from) (the same chip) on its published dense training runs, applied here for want of dense runs of this device to fit."' \
    "$base/$p.json" > "$work/$p.json"
  cp "$work/$p.json" "$out/$p.json"
  echo "# $p: GEMM x $g, half dimension $h, $from's"
done
echo "# wrote a100-sxm4-80gb, a100-sxm4-40gb, h100-sxm, h200, b200, gb200, b300, gb300 into $out"
