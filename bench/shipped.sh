#!/usr/bin/env bash
# The shipped example scenarios' analytic predictions as a Markdown table: step, MFU and time-to-train as
# etsim --analytic reports them with the shipped profiles (docs/validation.md, "Predictions of the shipped
# scenarios", is this output; the test shipped/table, tests/doc_table.sh, fails when a figure moves and the
# table was not regenerated).
# Usage: bench/shipped.sh [BUILD_DIR]
set -euo pipefail
. "$(dirname "$0")/etsim_reports.sh"
et_reports_init shipped "${1:-}"
# scenario (scenarios/NAME.json) and what it shows
rows=(
  "mlperf-bert-8|LAMB, clip after all-reduce, local 56, random lengths, fused attention"
  "mlperf-bert-1024-samsung|Adam, per-bucket clip, local 16, stratified + presort"
  "mlperf-bert-1024-baseline|Samsung without stratification, presort, per-bucket clip"
  "mlperf-bert-1024-nvidia|LAMB, local 3, 8 NICs, random lengths, fused attention, CUDA graphs"
  "bert-base-8-padded|A100 40GB, padded to 128"
  "gpt3-13b-dense-a100|TP 8, PP 2, ZeRO 1, recompute"
  "mixtral-8x7b-h100|expert parallelism 8, dropless"
  "llama3-8b-128k-context|context 16 x tensor 4, flash at FA2's measured rate"
  "deepseek-v3-gb200|pipeline 4 x 4 chunks, experts over a rack's 64 GPUs, MXFP8; published 13.3 s on this layout"
  "llama3-70b-lora-h100|LoRA rank 32, FP8 current scaling, adapters in 16 bits, tensor 2 x pipeline 4 x 20 chunks; published 6.2 s"
  "llama3-8b-torchtitan-h100|FSDP over 64 GPUs, full activation checkpointing with PyTorch's early stop, pytorch-fsdp; not a published run"
)
echo "| scenario | GPUs | step | MFU | time-to-train |"
echo "| --- | --- | --- | --- | --- |"
for r in "${rows[@]}"; do
  name=${r%%|*} what=${r#*|}
  # a plan ET finds too large still has its estimate (exit 3)
  "$etsim" --analytic --json "$work/a.json" "$src/scenarios/$name.json" > "$work/a.txt" 2>&1 || [ $? -eq 3 ] ||
    { echo "shipped: etsim failed on $name" >&2; exit 2; }
  step=$(jq .estimate.step.step_s "$work/a.json" | awk '{if ($1 < 1) printf "%.2f ms", 1000 * $1; else printf "%.2f s", $1}')
  mfu=$(grep -o 'MFU [0-9.]*%' "$work/a.txt" | head -1 | cut -d' ' -f2)
  # "time-to-train N steps: ... = T unit" (the run with its evaluations)
  ttt=$(sed -n 's/^time-to-train \([0-9]*\) steps: .* = \(.*\)$/\2 (\1 steps)/p' "$work/a.txt" | head -1)
  printf "| %s (%s) | %s | %s | %s | %s |\n" "$name" "$what" "$(jq .scenario.cluster.gpus "$work/a.json")" "$step" \
    "$mfu" "$ttt"
done
