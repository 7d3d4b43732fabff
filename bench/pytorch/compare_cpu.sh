#!/usr/bin/env bash
# Benchmark (prints figures; not a test): etrun's CPU backend against PyTorch on exactly the same model,
# initial weights, batches and optimizer (export_run + torch_twin.py), one core (taskset), one BLAS thread,
# interleaved runs, the median of the per-pair ratios of median step times. PyTorch is not a dependency of
# ET: with --install this script creates a virtual environment of its own and installs torch from PyPI
# into it, and says so; without it, it uses $ET_TORCH_VENV (default ~/.cache/et-torch-venv) or stops.
#
# Usage: bench/pytorch/compare_cpu.sh [--install] [--pairs N] [--sizes "tiny bert"] [--no-compile]
#                                     [--blas-as-detected] [BUILD_DIR]
# If OpenBLAS falls back to old kernels on this CPU, etrun selects the CPU's own (it sets OPENBLAS_CORETYPE
# and restarts; --blas-as-detected keeps OpenBLAS's choice, ET_BLAS_AS_DETECTED=1), and the table says which
# core ran; PyTorch uses its own GEMM libraries either way.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
install=0 pairs=5 sizes="tiny bert" compile=1 blas_fix=1 build=$src/build
while [ $# -gt 0 ]; do
  case $1 in
    --install) install=1 ;;
    --pairs) pairs=$2; shift ;;
    --sizes) sizes=$2; shift ;;
    --no-compile) compile=0 ;;
    --blas-as-detected) blas_fix=0 ;;
    -h|--help) sed -n 2,13p "$0"; exit 0 ;;
    *) build=$1 ;;
  esac
  shift
done
venv=${ET_TORCH_VENV:-$HOME/.cache/et-torch-venv}
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import torch, numpy' 2>/dev/null; then
  if [ $install -eq 0 ]; then
    echo "compare_cpu: no PyTorch in $venv; run with --install to create it (pip install torch numpy from PyPI)"
    exit 2
  fi
  echo "compare_cpu: installing PyTorch and NumPy from PyPI into $venv (a virtual environment of its own)"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q torch numpy
fi
for tool in sim/etsim runtime/etrun bench/export_run; do
  [ -x "$build/$tool" ] || { echo "compare_cpu: $build/$tool missing: build ET first"; exit 2; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
et_env=(env)
[ $blas_fix -eq 0 ] && et_env=(env ET_BLAS_AS_DETECTED=1)
info=$("${et_env[@]}" "$build/runtime/etrun" --info)
core=$(sed -n 's/^blas_core: //p' <<< "$info")
detected=$(sed -n 's/^blas_core_detected: \([A-Za-z0-9]*\).*/\1/p' <<< "$info")
[ -n "$detected" ] && echo "# OpenBLAS chose $detected kernels here; etrun runs with $core (it sets OPENBLAS_CORETYPE itself)"
[ $blas_fix -eq 0 ] && echo "# etrun runs with OpenBLAS's kernels as detected: $core (--blas-as-detected)"
pin=(taskset -c 0)
torch_version=$("$venv/bin/python" -c 'import torch; print(torch.__version__)')
echo "# etrun (ET CPU backend, OpenBLAS $core) against PyTorch $torch_version, one core, one thread, $pairs interleaved pairs"

median() { sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }

run_size() { # name scenario steps warmup
  local name=$1 scenario=$2 steps=$3 warm=$4
  "$build/sim/etsim" --analytic --quiet --plan-steps "$steps" --plan-out "$work/$name.json" "$scenario" > /dev/null
  jq ".run.warmup_steps = $warm" "$work/$name.json" > "$work/$name-plan.json"
  "$build/bench/export_run" "$work/$name-plan.json" "$steps" "$work/$name-export"
  : > "$work/$name.ratios-eager"; : > "$work/$name.ratios-compile"
  : > "$work/$name.et"; : > "$work/$name.eager"; : > "$work/$name.compile"
  for pair in $(seq "$pairs"); do
    "${et_env[@]}" "${pin[@]}" "$build/runtime/etrun" --quiet --out "$work/$name-m.json" "$work/$name-plan.json"
    et=$(jq .step_time_s.median "$work/$name-m.json")
    "${pin[@]}" "$venv/bin/python" "$src/bench/pytorch/torch_twin.py" "$work/$name-export" --warmup "$warm" \
      --out "$work/$name-t.json" > /dev/null
    eager=$(jq .median_step_s "$work/$name-t.json")
    echo "$et" >> "$work/$name.et"; echo "$eager" >> "$work/$name.eager"
    awk -v a="$eager" -v b="$et" 'BEGIN {print a / b}' >> "$work/$name.ratios-eager"
    if [ $compile -eq 1 ]; then
      if "${pin[@]}" "$venv/bin/python" "$src/bench/pytorch/torch_twin.py" "$work/$name-export" --warmup "$warm" \
        --compile --out "$work/$name-c.json" > /dev/null 2> "$work/$name-c.err"; then
        comp=$(jq .median_step_s "$work/$name-c.json")
        echo "$comp" >> "$work/$name.compile"
        awk -v a="$comp" -v b="$et" 'BEGIN {print a / b}' >> "$work/$name.ratios-compile"
      else
        echo "# torch.compile failed on $name: $(tail -1 "$work/$name-c.err")"
      fi
    fi
  done
  # the two runs trained the same model: their losses agree
  dloss=$(jq -s '[.[0].loss, .[1].loss] | transpose | map(.[0] - .[1] | fabs) | max' "$work/$name-m.json" \
    "$work/$name-t.json")
  local et_ms eager_ms comp_ms r_e r_c
  et_ms=$(median < "$work/$name.et" | awk '{printf "%.1f", $1 * 1e3}')
  eager_ms=$(median < "$work/$name.eager" | awk '{printf "%.1f", $1 * 1e3}')
  r_e=$(median < "$work/$name.ratios-eager" | awk '{printf "%.2f", $1}')
  comp_ms=-; r_c=-
  if [ -s "$work/$name.compile" ]; then
    comp_ms=$(median < "$work/$name.compile" | awk '{printf "%.1f", $1 * 1e3}')
    r_c=$(median < "$work/$name.ratios-compile" | awk '{printf "%.2f", $1}')
  fi
  printf "%-10s %10s %14s %16s %14s %16s %14.2g\n" "$name" "$et_ms" "$eager_ms" "$comp_ms" "$r_e" "$r_c" "$dloss"
  echo "$name $r_e $r_c" >> "$work/verdicts"
}

printf "%-10s %10s %14s %16s %14s %16s %14s\n" "model" "ET [ms]" "eager [ms]" "compile [ms]" \
  "eager/ET [x]" "compile/ET [x]" "max |dloss|"
for size in $sizes; do
  case $size in
    tiny) run_size tiny-gpt "$src/scenarios/tiny-gpt-cpu.json" 30 5 ;;
    bert) run_size bert-base "$src/bench/bert-base-cpu.json" 5 1 ;;
    *) echo "compare_cpu: unknown size $size (tiny, bert)"; exit 2 ;;
  esac
done
echo "# ms are median step times after warm-up (median over pairs); x is the median of per-pair ratios,"
echo "# above 1 when ET is faster. Targets: eager/ET >= 1.2, compile/ET >= 1.0."
ok=1
while read -r name r_e r_c; do
  awk -v e="$r_e" 'BEGIN {exit !(e >= 1.2)}' || ok=0
  [ "$r_c" = "-" ] || awk -v c="$r_c" 'BEGIN {exit !(c >= 1.0)}' || ok=0
done < "$work/verdicts"
[ $ok -eq 1 ] && echo "# verdict: PASS" || echo "# verdict: BELOW TARGET"
