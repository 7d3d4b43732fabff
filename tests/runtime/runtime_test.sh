#!/usr/bin/env bash
# Runtime tests that chain etrun runs: runtime_test.sh MODE BUILD_DIR SOURCE_DIR
set -euo pipefail
mode=$1 build=$2 src=$3
etrun=$build/runtime/etrun check=$build/tests/check_run
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mpi() { mpirun --allow-run-as-root --oversubscribe --mca btl self,vader -np "$@"; }
bert=$src/tests/data/tiny-bert-plan.json gpt=$src/tests/data/tiny-gpt-plan.json
# variant FILE JQ-FILTER: a plan changed with jq; fails if the filter changed nothing
variant() {
  jq "$2" "$1" > "$work/variant.json"
  if jq -S . "$1" | cmp -s - <(jq -S . "$work/variant.json"); then echo "FAIL: variant '$2' equals its base"; exit 1; fi
  cat "$work/variant.json"
}
steps() { variant "$1" ".run.steps = $2"; }
# two_ranks_match PLAN STEPS TOL NAME: PLAN cut to STEPS steps ($work/NAME.json) run on 1 and on 2 ranks
# ($work/NAME-1.json and NAME-2.json, checkpoints in $work/NAME-1/ and NAME-2/): parameters within TOL
two_ranks_match() {
  steps "$1" "$2" > "$work/$4.json"
  "$etrun" --quiet --save "$work/$4-1" --out "$work/$4-1.json" "$work/$4.json"
  mpi 2 "$etrun" --quiet --save "$work/$4-2" --out "$work/$4-2.json" "$work/$4.json"
  "$check" checkpoints "$work/$4-1/checkpoint.bin" "$work/$4-2/checkpoint.bin" "$3"
}
source "$src/tests/expect_error.sh"
case $mode in
  train-bert) # 600 steps: a model that only learns token frequencies stays at 0.99 of the start
    "$etrun" --quiet --out "$work/m.json" "$bert"
    "$check" loss "$work/m.json" 0.6 && "$check" ops "$work/m.json" 1 ;;
  train-gpt) # and a step waits for its device twice, at its end (its scalars, its op timers), whatever
    # its micro-batches and buckets
    "$etrun" --quiet --out "$work/m.json" "$gpt"
    "$check" loss "$work/m.json" 0.25
    jq -e '.host_waits_per_step == 2' "$work/m.json" > /dev/null ||
      { echo "FAIL: $(jq .host_waits_per_step "$work/m.json") waits for the device in a step, not 2"; exit 1; } ;;
  train-lora) # LoRA: the tiny Llama frozen, its 8,224 adapter values (rank 4 on six products) learn: the
    # last 50 steps' loss at 0.80 of the first here (the whole model's 107,328 values reach 0.02), and 2
    # ranks give 1 rank's adapters within fp32 rounding
    "$etrun" --quiet --out "$work/m.json" "$src/tests/data/tiny-llama-lora-plan.json"
    "$check" loss "$work/m.json" 0.9
    [ "$(jq .parameters "$work/m.json")" = 8224 ] || { echo "FAIL: $(jq .parameters "$work/m.json") trained values, not 8224"; exit 1; }
    two_ranks_match "$src/tests/data/tiny-llama-lora-plan.json" 20 1e-5 l ;;
  train-llama) # the Llama layers (RMSNorm, SwiGLU, rotary positions, no biases, untied output; multi-head and
    # grouped-query attention) learn, and 2 ranks give 1 rank's parameters within fp32 rounding
    "$etrun" --quiet --out "$work/m.json" "$src/tests/data/tiny-llama-plan.json"
    "$check" loss "$work/m.json" 0.25
    two_ranks_match "$src/tests/data/tiny-llama-plan.json" 20 1e-5 p
    # grouped-query attention: 4 query heads on 2 key/value heads
    "$etrun" --quiet --out "$work/g.json" "$src/tests/data/tiny-llama-gqa-plan.json"
    "$check" loss "$work/g.json" 0.25
    # a mixture of experts (top-2 of 4, every expert on every rank): learns, and 2 ranks match 1 (within 5e-5:
    # the routing's weights pass rounding differences of the summed gradients on to every expert; 1.1e-5
    # measured)
    "$etrun" --quiet --out "$work/e.json" "$src/tests/data/tiny-moe-plan.json"
    "$check" loss "$work/e.json" 0.25
    two_ranks_match "$src/tests/data/tiny-moe-plan.json" 20 5e-5 pe
    # expert parallelism 2 over the 2 ranks (each holds half the experts; the rows' all-to-all over MPI,
    # expert gradients reduced over the ranks holding the same experts): the losses of every expert on
    # every rank
    variant "$work/pe.json" '.parallelism.expert = 2' > "$work/pe2.json"
    mpi 2 "$etrun" --quiet --out "$work/x2.json" "$work/pe2.json"
    "$check" close-loss "$work/pe-2.json" "$work/x2.json" 1e-6
    # and on 4 ranks, two expert groups of 2 (the expert gradients summed over the groups)
    mpi 4 "$etrun" --quiet --out "$work/x4e1.json" "$work/pe.json"
    mpi 4 "$etrun" --quiet --out "$work/x4e2.json" "$work/pe2.json"
    "$check" close-loss "$work/x4e1.json" "$work/x4e2.json" 1e-6 ;;
  train-today) # today's models' layers: latent attention (a query latent, and queries straight from the
    # hidden state with biases), gpt-oss's attention (heads narrower than hidden / heads, sliding windows on every other layer, sinks)
    # and Qwen3's (heads wider than hidden / heads, query and key norms, experts), and two prediction modules
    # beside the tiny Llama, learn, and 2 ranks give 1 rank's parameters within fp32 rounding
    for p in tiny-mla tiny-mla-direct-q tiny-oss tiny-qwen3 tiny-llama-mtp; do
      "$etrun" --quiet --out "$work/$p.json" "$src/tests/data/$p-plan.json"
      "$check" loss "$work/$p.json" 0.25
    done
    # supervised fine-tuning's loss on answers only (the last half of each sequence's tokens scored)
    variant "$src/tests/data/tiny-llama-plan.json" '.data.answer_fraction = 0.5' > "$work/sft.json"
    "$etrun" --quiet --out "$work/sft-m.json" "$work/sft.json"
    "$check" loss "$work/sft-m.json" 0.25
    two_ranks_match "$src/tests/data/tiny-mla-plan.json" 20 1e-5 m
    two_ranks_match "$src/tests/data/tiny-oss-plan.json" 20 1e-5 o
    # DeepSeek's shape (latent attention, a dense first layer, 4 routed experts and a shared one, a prediction
    # module): learns,
    # and expert parallelism 2 over 2 ranks gives the losses of every expert on both
    "$etrun" --quiet --out "$work/ds.json" "$src/tests/data/tiny-deepseek-plan.json"
    "$check" loss "$work/ds.json" 0.25
    steps "$src/tests/data/tiny-deepseek-plan.json" 20 > "$work/ds20.json"
    variant "$work/ds20.json" '.parallelism.expert = 2' > "$work/ds20e.json"
    mpi 2 "$etrun" --quiet --out "$work/ds-x1.json" "$work/ds20.json"
    mpi 2 "$etrun" --quiet --out "$work/ds-x2.json" "$work/ds20e.json"
    "$check" close-loss "$work/ds-x1.json" "$work/ds-x2.json" 1e-6 ;;
  flash) # fused attention (parallelism.attention "flash": no probabilities kept) trains as the three
    # kernels do, 20 steps from the same weights: a decoder, an encoder, gpt-oss's windows, sinks and
    # grouped heads, latent attention; its ops are timed under the cost model's ids, beside their prediction
    for p in tiny-gpt tiny-bert tiny-oss tiny-mla; do
      plan=$src/tests/data/$p-plan.json
      steps "$plan" 20 > "$work/$p.json"
      variant "$work/$p.json" '.parallelism.attention = "flash"' > "$work/$p-flash.json"
      "$etrun" --quiet --out "$work/$p-std.out.json" "$work/$p.json"
      "$etrun" --quiet --out "$work/$p-flash.out.json" "$work/$p-flash.json"
      "$check" close-loss "$work/$p-std.out.json" "$work/$p-flash.out.json" 1e-6
      jq -e '[.ops[] | select(.id == "layer.0.attn.flash" or .id == "layer.0.attn.flash.bwd")
              | select(.predicted_s > 0 and .ranks[0].median_s > 0)] | length == 2' "$work/$p-flash.out.json" > /dev/null ||
        { echo "FAIL: $p: layer.0.attn.flash and its backward not timed beside their prediction"; exit 1; }
      jq -e '[.ops[] | select(.id | test("attn\\.(scores|softmax|context)"))] | length == 0' \
        "$work/$p-flash.out.json" > /dev/null || { echo "FAIL: $p: unfused attention ops in a flash plan"; exit 1; }
    done ;;
  train-gpt-tt) # tensor-train attention and MLP layers (rank 8) in the cost model's contraction order
    "$etrun" --quiet --out "$work/m.json" "$src/tests/data/tiny-gpt-tt-plan.json"
    "$check" loss "$work/m.json" 0.3 ;;
  mixed-precision) # bf16 and fp16 products (the linear layers' inputs rounded as tensor cores read them;
    # fp32 master weights and states) train as fp32 does; fp16's dynamic loss scale skips an update whose
    # gradient overflowed a 16-bit product, halves the scale, and the run goes on
    for p in bf16 fp16; do
      variant "$gpt" ".precision = \"$p\" | .cluster.device = \"a100-sxm4-80gb\"" > "$work/$p.json"
      "$etrun" --quiet --out "$work/$p-m.json" "$work/$p.json"
      "$check" loss "$work/$p-m.json" 0.25
    done
    jq -e '.loss_scale.skipped_steps == 0 and .loss_scale.final == 65536' "$work/fp16-m.json" > /dev/null ||
      { echo "FAIL: fp16 at the default scale skipped updates"; exit 1; }
    variant "$work/fp16.json" '.run.loss_scale = 1e9 | .run.steps = 60' > "$work/big.json"
    "$etrun" --quiet --out "$work/big-m.json" "$work/big.json"
    jq -e '.loss_scale.skipped_steps >= 1 and .loss_scale.final < 1e9 and
           ([.grad_norm[] | select(. == null)] | length) == .loss_scale.skipped_steps' "$work/big-m.json" > /dev/null ||
      { echo "FAIL: a 1e9 loss scale did not skip and back off"; jq .loss_scale "$work/big-m.json"; exit 1; }
    echo "ok: fp16 from a 1e9 scale: $(jq -c .loss_scale "$work/big-m.json")" ;;
  sparse) # 75% of the MLP weights pruned by a fixed mask stay exactly zero; only kept weights learn
    steps "$gpt" 40 > "$work/dense.json"
    variant "$work/dense.json" '.method = {"kind": "sparse", "sparsity": {"mlp": {"density": 0.25, "pattern": "unstructured"}}}' > "$work/sparse.json"
    "$etrun" --quiet --save "$work/s" --out "$work/s.json" "$work/sparse.json"
    "$etrun" --quiet --save "$work/d" --out "$work/d.json" "$work/dense.json"
    "$check" zeros "$work/s/checkpoint.bin" 0.3 0.6
    "$check" zeros "$work/d/checkpoint.bin" 0 0.1 ;;
  mpi-equal) # a fixed global batch over 1 or 2 ranks gives the same parameters within fp32 rounding
    two_ranks_match "$bert" 20 1e-5 p
    "$check" ops "$work/p-2.json" 2 ;;
  resume) # 20 steps straight, or 10 then resume to 20: the same losses and parameters, bit for bit
    steps "$gpt" 20 > "$work/p20.json"; steps "$gpt" 10 > "$work/p10.json"
    "$etrun" --quiet --save "$work/a" --out "$work/a.json" "$work/p20.json"
    "$etrun" --quiet --save "$work/b" --out "$work/b10.json" "$work/p10.json"
    "$etrun" --quiet --resume "$work/b" --save "$work/b" --out "$work/b.json" "$work/p20.json"
    "$check" same-loss "$work/a.json" "$work/b.json" 10
    "$check" checkpoints "$work/a/checkpoint.bin" "$work/b/checkpoint.bin" 0 ;;
  clip) # per-bucket clipping at a threshold below the gradients' norms: every bucket clipped to it, on 2 ranks
    steps "$bert" 10 > "$work/base.json"
    variant "$work/base.json" '.optimizer.clip = "none"' > "$work/none.json"
    variant "$work/base.json" '.optimizer.clip = "per_bucket" | .optimizer.max_grad_norm = 0.05' > "$work/bucket.json"
    mpi 2 "$etrun" --quiet --save "$work/n" --out "$work/n.json" "$work/none.json"
    mpi 2 "$etrun" --quiet --save "$work/c" --out "$work/c.json" "$work/bucket.json"
    "$check" clipped "$work/c.json" 0.05
    if "$check" checkpoints "$work/n/checkpoint.bin" "$work/c/checkpoint.bin" 0 > /dev/null 2>&1; then
      echo "FAIL: clipping changed no parameter"; exit 1; fi ;;
  checkpoint-every) # run.checkpoint_every: a checkpoint at step 10 of 20; resuming from it is bit-identical
    steps "$gpt" 20 > "$work/p20.json"
    variant "$work/p20.json" '.run.checkpoint_every = 10' > "$work/every.json"
    "$etrun" --quiet --save "$work/a" --out "$work/a.json" "$work/p20.json"
    "$etrun" --quiet --save "$work/b" --out "$work/b-full.json" "$work/every.json"
    [ -f "$work/b/step-10/checkpoint.bin" ] || { echo "FAIL: no checkpoint at step 10"; exit 1; }
    [ ! -e "$work/b/step-20" ] || { echo "FAIL: the last checkpoint belongs in the save folder itself"; exit 1; }
    "$etrun" --quiet --resume "$work/b/step-10" --save "$work/c" --out "$work/c.json" "$work/every.json"
    "$check" same-loss "$work/a.json" "$work/c.json" 10
    "$check" checkpoints "$work/a/checkpoint.bin" "$work/c/checkpoint.bin" 0 ;;
  record) # measured.json: provenance, per-step times, predictions beside each op, bucket timings; progress on rank 0
    steps "$bert" 12 > "$work/p.json"
    mpi 2 "$etrun" --log-every 4 --out "$work/m.json" "$work/p.json" > "$work/out" 2> "$work/err"
    cat "$work/err"
    "$check" record "$work/m.json" 12
    [ "$(grep -c '^etrun: step ' "$work/err")" -eq 3 ] || { echo "FAIL: expected 3 progress lines (rank 0, every 4 steps)"; exit 1; }
    grep -q '^etrun: done: 12 steps on 2 ranks (cpu backend)' "$work/err" || { echo "FAIL: no summary line"; exit 1; } ;;
  token-file) # a real pre-tokenized file trains; a truncated one is refused
    "$build/tests/make_tokens" "$work/tokens.bin" 64 500
    steps "$gpt" 30 > "$work/p30.json"
    variant "$work/p30.json" ".run.data = {\"source\": \"file\", \"file\": \"$work/tokens.bin\"}" > "$work/p.json"
    "$etrun" --quiet --out "$work/m.json" "$work/p.json"
    "$check" ops "$work/m.json" 1
    rm "$work/m.json"
    "$build/tests/make_tokens" "$work/tokens.bin" 64 500 corrupt
    cd "$work" && expect_error "$work/measured.json" "the header promises" "$etrun" --quiet --out "$work/measured.json" "$work/p.json" ;;
  errors)
    cd "$work"
    printf '{"name": "x",' > bad.json
    expect_error "$work/measured.json" "invalid JSON" "$etrun" --out "$work/measured.json" bad.json
    variant "$bert" '.run.stpes = 3' > typo.json
    expect_error "$work/measured.json" '$.run.stpes: unknown key "stpes" (did you mean "steps"?)' "$etrun" --out "$work/measured.json" typo.json
    variant "$gpt" ".run.data = {\"source\": \"file\", \"file\": \"$work/none.bin\"}" > nofile.json
    expect_error "$work/measured.json" "cannot open the token file" "$etrun" --out "$work/measured.json" nofile.json
    expect_error "$work/measured.json" "do not divide across 3 ranks" mpi 3 "$etrun" --out "$work/measured.json" "$bert"
    variant "$bert" '.model.loss_head = "mlm_nsp"' > nsp.json
    expect_error "$work/measured.json" '"mlm_nsp" is not supported yet' "$etrun" --out "$work/measured.json" nsp.json
    variant "$gpt" '.model.position_embedding = "alibi"' > alibi.json
    expect_error "$work/measured.json" '$.model.position_embedding: etrun runs learned, rotary or no positions; ALiBi is costed by etsim only' "$etrun" --out "$work/measured.json" alibi.json
    variant "$gpt" '.software = {"ep_overlap": true}' > epoverlap.json
    expect_error "$work/measured.json" "\$.software.ep_overlap: etrun's all-to-alls send every routed row and block the step" "$etrun" --out "$work/measured.json" epoverlap.json
    variant "$bert" '.precision = "fp8" | .cluster.device = "h100-sxm"' > fp8.json
    expect_error "$work/measured.json" "the cpu backend cannot train in fp8 (its products run fp32, tf32, bf16 and fp16)" "$etrun" --out "$work/measured.json" fp8.json
    variant "$bert" '.run.loss_scale = 0.5' > scale.json
    expect_error "$work/measured.json" '$.run.loss_scale' "$etrun" --out "$work/measured.json" scale.json
    # without a GPU (or without nvcc) --backend cuda says why in one line, exits 2 and writes nothing
    expect_error "$work/measured.json" 'etrun: error: backend "cuda": ' "$etrun" --backend cuda --out "$work/measured.json" "$bert"
    [ "$(wc -l < "$work/err")" -eq 1 ] || { echo "FAIL: --backend cuda printed more than one line"; exit 1; }
    variant "$bert" '.run.backend = "tpu"' > tpu.json
    expect_error "$work/measured.json" '$.run.backend' "$etrun" --out "$work/measured.json" tpu.json ;;
  faults) # hostile and careless input: a diverged run, hand-edited checkpoints, outputs that are inputs
    cd "$work"
    # a NaN loss stops the run (exit 4) and measured.json keeps the steps before, with the reason
    variant "$gpt" '.run.learning_rate = 1e12 | .run.steps = 6 | .run.warmup_steps = 0' > diverge.json
    set +e; "$etrun" --quiet --out "$work/d.json" diverge.json 2> err; rc=$?; set -e
    cat err
    [ $rc -eq 4 ] || { echo "FAIL: a diverged run exits $rc, expected 4"; exit 1; }
    grep -q "training diverged at step" err || { echo "FAIL: no divergence message"; exit 1; }
    [ "$(jq '.steps == (.loss | length) and .steps < 6 and (.stopped | test("diverged"))' d.json)" = true ] ||
      { echo "FAIL: measured.json of a diverged run"; jq -c '[.steps, .loss, .stopped]' d.json; exit 1; }
    # --steps N runs N steps whatever run.steps says; 0 is refused
    "$etrun" --quiet --steps 3 --out "$work/s3.json" "$gpt"
    [ "$(jq '.steps' s3.json)" = 3 ] || { echo "FAIL: --steps 3 ran $(jq '.steps' s3.json) steps"; exit 1; }
    expect_error "$work/r.json" "--steps expects a whole number >= 1" "$etrun" --steps 0 --out "$work/r.json" "$gpt"
    # ranks x BLAS threads past the cores: a warning, the run goes on (unbound: Open MPI's binding to a core
    # a rank would make OpenBLAS keep to that core)
    OPENBLAS_NUM_THREADS=$(nproc) mpi 2 --bind-to none "$etrun" --quiet --steps 2 --out "$work/w.json" "$gpt" 2> w.err
    grep -q "warning: 2 ranks x $(nproc) BLAS threads on $(nproc) cores" w.err ||
      { echo "FAIL: no oversubscription warning: $(cat w.err)"; exit 1; }
    # a plan from a newer ET
    variant "$gpt" '.format_version = 2' > newer.json
    expect_error "$work/r.json" '$.format_version: plan format 2 is newer than this ET reads (1)' "$etrun" --out "$work/r.json" newer.json
    # vocabularies without a token id (1: negative losses; 2: a division by zero), a causal plan whose
    # sequences hold 1 token (nothing to predict)
    for v in 1 2; do
      variant "$gpt" ".model.vocab = $v" > vocab$v.json
      expect_error "$work/r.json" '$.model.vocab: etrun needs a vocabulary of at least 3' "$etrun" --out "$work/r.json" vocab$v.json
    done
    variant "$gpt" '.data.seq_len = 1 | .data.lengths = {"distribution": "fixed"}' > one.json
    expect_error "$work/r.json" '$.data.seq_len: a causal language model predicts each next token' "$etrun" --out "$work/r.json" one.json
    # checkpoints: an altered step, a flipped bit in a weight (the checksum), another model with the same
    # parameter count (other heads; other vocabulary and positions), the older format, a step past the plan
    steps "$gpt" 4 > four.json
    "$etrun" --quiet --save "$work/ck" --out "$work/m4.json" four.json
    size=$(stat -c %s ck/checkpoint.bin)
    cp -r ck bad-step && printf '\xff\xff\xff\xff\xff\xff\xff\xff' | dd of=bad-step/checkpoint.bin bs=1 seek=8 conv=notrunc 2> /dev/null
    expect_error "$work/r.json" "checksum mismatch" "$etrun" --resume "$work/bad-step" --out "$work/r.json" four.json
    cp -r ck flip && printf '\x01' | dd of=flip/checkpoint.bin bs=1 seek=$((size - 5000)) conv=notrunc 2> /dev/null
    expect_error "$work/r.json" "checksum mismatch" "$etrun" --resume "$work/flip" --out "$work/r.json" four.json
    variant four.json '.model.heads = 8' > heads.json
    expect_error "$work/r.json" "model.heads is 4 in the checkpoint, 8 in the plan" "$etrun" --resume "$work/ck" --out "$work/r.json" heads.json
    variant four.json '.model.vocab = 96 | .model.max_positions = 32' > vocab.json # the same 108,288 parameters
    expect_error "$work/r.json" "model.vocab is 64 in the checkpoint, 96 in the plan" "$etrun" --resume "$work/ck" --out "$work/r.json" vocab.json
    cp -r ck v1 && printf 'ETCKPT01' | dd of=v1/checkpoint.bin bs=1 seek=0 conv=notrunc 2> /dev/null
    expect_error "$work/r.json" "ETCKPT01 checkpoint (an older etrun)" "$etrun" --resume "$work/v1" --out "$work/r.json" four.json
    truncate -s $((size - 1)) flip/checkpoint.bin
    expect_error "$work/r.json" "does not match its header" "$etrun" --resume "$work/flip" --out "$work/r.json" four.json
    # a killed run's leftovers: an empty step folder and a stray temporary are skipped by --resume (the newest
    # complete checkpoint is taken) and removed by the next --save
    mkdir -p kill/step-2 kill/step-9 && cp ck/checkpoint.bin kill/step-2/ && : > kill/step-9/checkpoint.bin.tmp.Ab12Cd
    variant four.json '.run.steps = 6' > six.json
    "$etrun" --quiet --resume "$work/kill" --save "$work/kill" --out "$work/k.json" six.json
    [ "$(jq '.steps' k.json)" = 2 ] && [ ! -e kill/step-9 ] && [ -f kill/checkpoint.bin ] ||
      { echo "FAIL: resuming over a killed run's folder"; ls -R kill; exit 1; }
    mkdir -p empty/step-3
    expect_error "$work/r.json" "no checkpoint here" "$etrun" --resume "$work/empty" --out "$work/r.json" four.json
    variant "$gpt" '.run.steps = 2 | .run.warmup_steps = 0' > two.json
    expect_error "$work/r.json" "past the plan's 2 steps" "$etrun" --resume "$work/ck" --out "$work/r.json" two.json
    # an output that is the input is refused before anything runs; the plan is left as it was
    cp two.json keep.json
    expect_error "$work/none" "is the input" "$etrun" --out "$work/two.json" two.json
    cmp -s two.json keep.json || { echo "FAIL: the plan was overwritten"; exit 1; }
    # an output nobody can write is found before training, not after
    expect_error "$work/none" "--out: cannot write here" "$etrun" --out "$work/no/such/dir/m.json" two.json ;;
  plan-out) # etsim writes the plan; etrun runs it on 2 ranks; measured ops line up with predicted ones by id
    "$build/sim/etsim" --quiet --plan-steps 8 --plan-out "$work/plan.json" --json "$work/predicted.json" "$src/scenarios/tiny-gpt-cpu.json" > /dev/null
    mpi 2 "$etrun" --quiet --out "$work/measured.json" "$work/plan.json"
    "$check" ops "$work/measured.json" 2
    "$check" same-ops "$work/predicted.json" "$work/measured.json"
    # a Mixtral-style decoder with expert parallelism 2: its all-to-alls too are measured under the
    # model's op ids
    jq '.name = "tiny-moe-cpu" | .model += {"mlp": "swiglu", "norm": "rmsnorm", "position_embedding": "rope",
        "bias": false, "tie_embeddings": false, "kv_heads": 2, "moe": {"experts": 4, "top_k": 2}}
        | .parallelism.expert = 2' "$src/scenarios/tiny-gpt-cpu.json" > "$work/moe.json"
    "$build/sim/etsim" --quiet --plan-steps 4 --plan-out "$work/moe-plan.json" --json "$work/moe-predicted.json" "$work/moe.json" > /dev/null
    mpi 2 "$etrun" --quiet --out "$work/moe-measured.json" "$work/moe-plan.json"
    jq -e '[.ops[] | select(.id | test("moe.dispatch"))] | length > 0' "$work/moe-measured.json" > /dev/null ||
      { echo "FAIL: no all-to-all measured"; exit 1; }
    "$check" same-ops "$work/moe-predicted.json" "$work/moe-measured.json" ;;
  *) echo "unknown mode $mode"; exit 2 ;;
esac
echo "$mode: 1 passed, 0 failed"
