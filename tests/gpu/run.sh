#!/usr/bin/env bash
# tests/gpu/run.sh OUT_DIR: the GPU checks in one command, at most 10 minutes on one H200 (issue 35).
# Builds the device build (ET_DEVICE_BUILD: the runtime, its CUDA backend, etcalib and these checks; no
# SimGrid, MPI or OpenBLAS, which the device machine lacks; Jansson and xxHash from .gpu-deps, which
# tests/gpu/prepare.sh fills here and the device tool carries), then on the GPU:
#   1. the conformance test (every kernel family, every arithmetic, against the double reference);
#   2. tiny-gpt 50 steps on the CUDA backend and on the CPU reference from the same weights, loss curves
#      compared (fp32; and tf32 on the GPU against the CPU's fp32); its tensor-train variant 20 steps;
#   3. a BERT-large step (sequence 512 unpadded, local batch 16) in bf16 and in fp16: per op class measured
#      against predicted (H200 profile), MFU, and PyTorch eager's step on the same model and batches; and in
#      bf16 with fused attention (the CUDA-core kernel: timed, not yet fast);
#   4. the linear layer's rate on the step's shapes against a large square product, in each arithmetic;
#   5. a one-rank NCCL all-reduce, nccl-tests style, and etrun's NCCL communicator through its table
#      (test_comm: buckets reduced on the communication stream after their events, no host wait);
#   6. etcalib bench --backend cuda and a fitted H200 profile (etcalib fit of the bench and the bf16 run).
# Writes OUT_DIR/table.md (the short table), log.txt (everything printed) and the measurements. Where the
# machine has no GPU (a dry run), it builds, skips each device step with the reason, and exits 0.
set -uo pipefail
out=${1:?usage: tests/gpu/run.sh OUT_DIR}
src=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d)
build=${ET_GPU_BUILD:-$work/build}
deps=${ET_DEPS_DIR:-$src/.gpu-deps}
log=$out/log.txt
: > "$log"
say() { echo "$*" | tee -a "$log"; }
run() { # run LIMIT_S CMD...: its output into the log, its status returned
  timeout "$1" "${@:2}" >> "$log" 2>&1
}
t_start=$(date +%s)
say "# tests/gpu/run.sh $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo unknown)"

device=0
if command -v nvidia-smi > /dev/null && nvidia-smi -L 2> /dev/null | grep -q GPU; then
  device=1
  nvidia-smi -L | tee -a "$log"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv | tee -a "$log"
fi

# ---- build ----
[ -d "$deps" ] || bash "$src/tests/gpu/prepare.sh" "$deps" >> "$log" 2>&1
nccl_root=$(python3 -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__))' 2>/dev/null ||
  python3 -c 'import nvidia.nccl, os; print(list(nvidia.nccl.__path__)[0])' 2>/dev/null || true)
gen=(); command -v ninja > /dev/null && gen=(-G Ninja)
arch=${ET_GPU_ARCH:-90}
if ! run 300 cmake -S "$src" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DET_DEVICE_BUILD=ON \
    -DET_DEPS_DIR="$deps" -DCMAKE_CUDA_ARCHITECTURES="$arch" ${nccl_root:+-DET_NCCL_ROOT=$nccl_root} ||
  ! run 400 cmake --build "$build" -j "$(nproc)"; then
  say "FAIL build (the log's end):"; tail -30 "$log"; exit 1
fi
say "build: ok in $(( $(date +%s) - t_start )) s ($build, CUDA architectures $arch)"
have_cuda=0; [ -x "$build/runtime/etrun" ] && "$build/runtime/etrun" --info 2>/dev/null | grep -q "backends:.*cuda" && have_cuda=1
if [ $device -eq 0 ] || [ $have_cuda -eq 0 ]; then
  why=$([ $device -eq 0 ] && echo "no GPU on this machine (nvidia-smi lists none)" || echo "the build has no CUDA backend (no nvcc)")
  for s in "conformance test on cuda" "tiny-gpt 50 steps, GPU against CPU" "tiny-gpt-tt 20 steps, GPU against CPU" \
           "tiny-gpt fused attention 50 steps, GPU against CPU" \
           "BERT-large step bf16 and fp16" \
           "PyTorch eager BERT-large step" "linear-layer rates" "one-rank NCCL all-reduce" \
           "etrun's NCCL communicator (test_comm)" "etcalib bench --backend cuda"; do
    say "skip: $s: $why"
  done
  "$build/tests/gpu/test_backend_ops" --backend cpu >> "$log" 2>&1 && say "cpu conformance (reference BLAS): $(tail -1 "$log")"
  rm -rf "$work"
  exit 0
fi

# ---- 1. conformance ----
run 120 "$build/tests/gpu/test_elementwise"; say "elementwise math: $(tail -1 "$log")"
run 180 "$build/tests/gpu/test_backend_ops" --backend cuda; rc=$?
say "conformance on cuda: $(tail -1 "$log") (exit $rc)"

# ---- 2. tiny-gpt, GPU against the CPU reference ----
tiny=$src/tests/data/tiny-gpt-plan.json
run 240 "$build/runtime/etrun" --backend cpu --steps 50 --quiet --out "$work/tiny-cpu.json" "$tiny"
run 120 "$build/runtime/etrun" --backend cuda --steps 50 --quiet --out "$work/tiny-cuda.json" "$tiny"
# the same in tf32 (attention's products on the tensor-core kernel, the layers' on tf32 tensor cores): an H200
# plan, since the CPU profile has no tf32
python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); d["precision"] = "tf32"; d["cluster"]["device"] = "h200"; json.dump(d, open(sys.argv[2], "w"))' "$tiny" "$work/tiny-tf32.plan.json"
run 120 "$build/runtime/etrun" --backend cuda --steps 50 --quiet --out "$work/tiny-tf32.json" "$work/tiny-tf32.plan.json"
# tensor-train layers (rt_tt.h's walk on cuBLASLt and the copy kernel) against the CPU's, 20 steps
tt=$src/tests/data/tiny-gpt-tt-plan.json
run 240 "$build/runtime/etrun" --backend cpu --steps 20 --quiet --out "$work/tt-cpu.json" "$tt"
run 120 "$build/runtime/etrun" --backend cuda --steps 20 --quiet --out "$work/tt-cuda.json" "$tt"
# fused attention (rt_flash.h's rows, a thread a row) against the CPU's, 50 steps
python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); d["parallelism"]["attention"] = "flash"; json.dump(d, open(sys.argv[2], "w"))' "$tiny" "$work/tiny-flash.plan.json"
run 240 "$build/runtime/etrun" --backend cpu --steps 50 --quiet --out "$work/flash-cpu.json" "$work/tiny-flash.plan.json"
run 120 "$build/runtime/etrun" --backend cuda --steps 50 --quiet --out "$work/flash-cuda.json" "$work/tiny-flash.plan.json"

# ---- 3. BERT-large: bf16 and fp16, etrun and PyTorch eager ----
bert=$src/tests/gpu/bert-large-h200.plan.json
python3 - "$bert" "$work" "$src" << 'PY'
import json, sys
plan, work, src = sys.argv[1:]
d = json.load(open(plan))
d["data"]["lengths"]["file"] = src + "/scenarios/data/wikipedia-bert-seqlen-512.csv"
for p in ("bf16", "fp16", "tf32", "fp32"):
    d["precision"] = p
    json.dump(d, open(f"{work}/bert-{p}.plan.json", "w"), indent=1)
d["precision"] = "bf16"
d.setdefault("parallelism", {})["attention"] = "flash"
json.dump(d, open(f"{work}/bert-bf16-flash.plan.json", "w"), indent=1)
PY
for p in bf16 fp16 tf32 bf16-flash; do
  run 240 "$build/runtime/etrun" --backend cuda --out "$out/bert-$p.json" "$work/bert-$p.plan.json" ||
    say "FAIL etrun BERT-large $p (log above)"
  run 60 "$build/calib/etcalib" report "$out/bert-$p.json"
done
if python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
  run 120 "$build/tests/gpu/export_run" "$work/bert-fp32.plan.json" 8 "$work/export"
  # PyTorch's default attention dispatch (cuDNN's on this machine), profiled, then with cuDNN's kept off
  run 240 python3 "$src/bench/pytorch/torch_twin.py" "$work/export" --device cuda --amp bf16 --warmup 3 --profile \
    --out "$work/torch-bf16-default.json" || say "FAIL PyTorch eager bf16 (log above)"
  for p in bf16 fp16; do
    run 240 python3 "$src/bench/pytorch/torch_twin.py" "$work/export" --device cuda --amp "$p" --warmup 3 \
      --no-cudnn-attention --out "$work/torch-$p.json" || say "FAIL PyTorch eager $p (log above)"
  done
else
  say "skip: PyTorch eager: no torch with CUDA here"
fi

# ---- 4, 5. products and NCCL ----
run 180 "$build/tests/gpu/gpu_gemm" --backend cuda --csv "$out/gemm.csv"
if [ -x "$build/tests/gpu/nccl_allreduce" ]; then run 120 "$build/tests/gpu/nccl_allreduce"; else say "skip: NCCL all-reduce: NCCL not found by the build"; fi
run 120 "$build/tests/gpu/test_comm" --backend cuda; rc=$?
say "etrun's communicator on cuda: $(grep -m1 '^# test_comm' "$log" | sed 's/^# test_comm: //'): $(tail -1 "$log") (exit $rc)"

# ---- 6. calibration ----
run 240 "$build/calib/etcalib" bench --backend cuda --scenario "$work/bert-bf16.plan.json" --out "$out/micro-h200.json" &&
  run 120 "$build/calib/etcalib" fit "$out/micro-h200.json" "$out/bert-bf16.json" --base "$src/scenarios/profiles/h200.json" \
    --precision bf16 --only-precision --out "$out/h200-etrun.json" &&
  say "calibrated (in-sample, the bf16 run is in the fit): $("$build/calib/etcalib" report "$out/bert-bf16.json" \
    --profile "$out/h200-etrun.json" 2>&1 | grep -m1 '^step (sum of ops)')"

# ---- the table ----
python3 "$src/tests/gpu/gpu_table.py" "$work" "$out" | tee "$out/table.md" | tee -a "$log"
say "total: $(( $(date +%s) - t_start )) s"
rm -rf "$work"
