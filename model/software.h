/* software: the training stack as an input. A named preset (what a framework launches, fuses, overlaps and
 * syncs, from its public code: docs/cost-model.md, "The software stack") plus per-key overrides, read from
 * the scenario's "software" section. Each key is one term the step schedule (step_schedule.h) places and
 * phase_time.h prices; the presets differ only in these keys.
 *
 * Contract: et_software_preset fills *out with a named preset's terms (-1 for an unknown name);
 * et_software_read reads "software" from the scenario root (absent: the preset "fused") with errors naming
 * the JSON path; nothing is allocated. */
#ifndef ET_SOFTWARE_H
#define ET_SOFTWARE_H

#include <stdbool.h>

#include "json_reader.h"

/* How a micro-batch's weight gradients reach the gradient that is reduced. */
typedef enum {
    ET_ACCUMULATE_FUSED,    /* the weight-gradient GEMM accumulates in place: no pass of its own */
    ET_ACCUMULATE_ADD,      /* one add kernel per parameter per micro-batch after the first (autograd) */
    ET_ACCUMULATE_CAST_ADD, /* a cast to fp32 and an add per parameter per micro-batch (DeepSpeed bf16) */
} et_grad_accumulation;
extern const char *const et_grad_accumulation_names[]; /* "fused", "add", "cast_add", NULL */

/* The optimizer's passes beyond the graph's (unscale, gradient norm, and an update that writes the 16-bit
 * weights as it goes). */
typedef enum {
    ET_OPTIMIZER_FUSED,       /* nothing more */
    ET_OPTIMIZER_COPY_BACK,   /* the fp32 weights copied into the 16-bit ones by a pass of its own */
    ET_OPTIMIZER_FP16_MASTER, /* that, and 16-bit accumulated gradients copied to fp32 first (Megatron's
                                 Float16Optimizer, apex amp O2) */
    ET_OPTIMIZER_BF16_SHARDS, /* the copy back on the shard, and the norm over the fp32 gradients (DeepSpeed's
                                 BF16_Optimizer) */
} et_optimizer_path;
extern const char *const et_optimizer_path_names[]; /* "fused", "copy_back", "fp16_master", "bf16_shards" */

/* The loss: one fused pass over the 16-bit logits, or Megatron's vocabulary-parallel cross-entropy over
 * fp32 logits (an upcast copy, four in-place passes forward, two backward). */
typedef enum { ET_CROSS_ENTROPY_FUSED, ET_CROSS_ENTROPY_FP32 } et_cross_entropy;
extern const char *const et_cross_entropy_names[]; /* "fused", "fp32_passes", NULL */

/* What a pipeline stage sends of the activation (without sequence parallelism, whose activations are
 * already split over the tensor ranks): each tensor rank its 1/t share with nothing more (`sharded`, the
 * lower bound), its share and then an all-gather over the tensor ranks on arrival (`scatter_gather`), or
 * the whole activation (`full`). */
typedef enum { ET_SENDS_SHARDED, ET_SENDS_SCATTER_GATHER, ET_SENDS_FULL } et_pipeline_sends;
extern const char *const et_pipeline_sends_names[]; /* "sharded", "scatter_gather", "full", NULL */

/* The fused attention kernel a stack launches (with `parallelism.attention: flash`): the one the device
 * profile's fused-attention rate was measured with (FlashAttention 2); FlashAttention 1, which Dao
 * (2023, FlashAttention-2, arXiv 2307.08691, abstract) measures at about half of FlashAttention 2's speed;
 * or cuDNN's fused attention, which Transformer Engine prefers on Hopper and later (the profile's
 * efficiency.cudnn_attention, FlashAttention 2's rate where the profile has none). */
typedef enum { ET_ATTENTION_FLASH2, ET_ATTENTION_FLASH1, ET_ATTENTION_CUDNN } et_attention_kernel;
extern const char *const et_attention_kernel_names[]; /* "flash2", "flash1", "cudnn", NULL */

/* Tensor-parallel collectives without Transformer Engine's userbuffers (parallelism.tp_overlap): each one
 * blocks compute (`exposed`), or, as Megatron's linear layers issue them, the backward ones run
 * asynchronously beside a product (`async`): a column-parallel layer's input-gradient all-reduce (under
 * sequence parallelism its reduce-scatter) beside the weight-gradient GEMM, and under sequence parallelism
 * the input's all-gather again for that weight gradient beside the input-gradient GEMM. */
typedef enum { ET_TP_COMM_EXPOSED, ET_TP_COMM_ASYNC } et_tp_comm;
extern const char *const et_tp_comm_names[]; /* "exposed", "async", NULL */

/* Linear layers' biases: in the products' epilogues and the fused element-wise kernels (`fused`); Megatron's
 * (`megatron`): the q, k, v product's bias added by a pass of its own (v3's `output + bias` after the matmul,
 * SC21's addmm copying the bias into its output first) and every bias gradient a column-sum kernel of its
 * own (grad_output.sum(dim=0), the jit kernels' autograd), the other forward biases inside the bias-GELU and
 * bias-dropout-add kernels; eager PyTorch's (`eager`): every product's bias added apart (addmm) but the one
 * feeding a fused bias-activation, and every gradient reduced apart. */
typedef enum { ET_BIAS_FUSED, ET_BIAS_MEGATRON, ET_BIAS_EAGER } et_bias_kernels;
extern const char *const et_bias_kernels_names[]; /* "fused", "megatron", "eager", NULL */

/* A mixture of experts' grouped products: one kernel over every local expert (CUTLASS grouped GEMM,
 * MegaBlocks, `single`), or one product launched per local expert (`per_expert`: Transformer Engine's
 * GroupedLinear, whose general_grouped_gemm runs one cuBLASLt call per group over a few streams,
 * nvte_multi_stream_cublas_gemm). */
typedef enum { ET_GROUPED_GEMM_SINGLE, ET_GROUPED_GEMM_PER_EXPERT } et_grouped_gemm;
extern const char *const et_grouped_gemm_names[]; /* "single", "per_expert", NULL */

/* How an expert rank orders the rows it receives: written straight into local-expert order (`direct`), or,
 * as Megatron-Core's all-to-all dispatcher does with more than one local expert, received grouped by source
 * rank and copied into local-expert order after the dispatch and back before the combine
 * (`sort_chunks`: MoEAlltoAllTokenDispatcher's sort_chunks_by_idxs, megatron/core/transformer/moe/
 * token_dispatcher.py). */
typedef enum { ET_MOE_DISPATCH_DIRECT, ET_MOE_DISPATCH_SORT_CHUNKS } et_moe_dispatch;
extern const char *const et_moe_dispatch_names[]; /* "direct", "sort_chunks", NULL */

typedef enum {
    ET_STACK_FUSED,
    ET_STACK_MEGATRON_2021,
    ET_STACK_MEGATRON_2022,
    ET_STACK_MEGATRON_DEEPSPEED,
    ET_STACK_MEGATRON_CORE,
    ET_STACK_PYTORCH_APEX,
    ET_STACK_PYTORCH_FSDP,
    ET_STACK_LLM_FOUNDRY,
    ET_STACKS
} et_stack;
extern const char *const et_stack_names[]; /* "fused", "megatron-lm-2021", ..., NULL */

typedef struct et_software {
    et_stack stack;
    et_grad_accumulation grad_accumulation;
    double accumulate_bytes; /* the accumulated gradient's element: 4 (fp32 main_grad) or 2 */
    et_optimizer_path optimizer;
    et_cross_entropy cross_entropy;
    int syncs_per_micro_batch; /* host waits for the device each micro-batch (timers around its passes) */
    bool p2p_sync;             /* and after every pipeline send (torch.cuda.synchronize after batched p2p) */
    int syncs_per_step;        /* and each step (the gradient norm's .item()) */
    bool loss_scale_sync;      /* and under fp16, the loss scaler's overflow check (found_inf.item()) */
    bool launch_blocking;      /* CUDA_LAUNCH_BLOCKING=1: every launch waits for its kernel */
    et_pipeline_sends pipeline_sends;
    bool p2p_overlap; /* under an interleaved schedule (parallelism.virtual_pipeline > 1) the pipeline's
                         sends and receives run asynchronously beside the next chunk's pass, taking
                         overlap_sms of its multiprocessors for as long as they last (Megatron-Core's
                         overlap_p2p_comm); false: each blocks the compute stream */
    et_attention_kernel attention_kernel;
    bool attention_unpad;  /* the fused attention behind gather and scatter copies of q, k, v and the context
                              (flash-attn's unpadded interface through bert_padding's unpad_input/pad_input) */
    bool residual_kernels; /* residual adds (without a dropout kernel to carry them) and the backward sums of
                              the residual stream's gradients run as kernels of their own; false: folded into
                              the layer norms (etrun's add-norm forward and accumulating backward) */
    et_tp_comm tp_comm;    /* tensor-parallel collectives beside their products, or blocking */
    double overlap_sms;    /* multiprocessors a collective running beside a product takes from it (NCCL's
                              channels, one block each; Transformer Engine's pipelined userbuffers' num_sm) */
    double bulk_overlap_sms; /* and Transformer Engine's bulk overlaps (backward, parallelism.tp_overlap) */
    et_bias_kernels bias_kernels; /* biases' adds and gradient sums as kernels of their own, or fused */
    et_grouped_gemm grouped_gemm; /* the experts' products: one kernel, or one launch per local expert */
    et_moe_dispatch moe_dispatch; /* the received rows written in expert order, or sorted there and back */
    bool ep_dedup;   /* the experts' all-to-alls send a token once to each GPU and node it reaches, not once
                        per routed expert (DeepEP's normal kernels through Megatron-Core's flex dispatcher;
                        user's choice, off in every preset) */
    bool ep_overlap; /* the experts' all-to-alls beside another micro-batch's computation (Megatron-Core's
                        --overlap-moe-expert-parallel-comm; user's choice, off in every preset) */
    bool recompute_early_stop; /* full recomputation stops once the block's last tensor saved for backward is
                                  rebuilt (PyTorch 2.1's non-reentrant torch.utils.checkpoint,
                                  set_checkpoint_early_stop's default): a dense decoder layer's second MLP
                                  product and what follows it are not recomputed; false: the whole forward
                                  again (Megatron's CheckpointFunction, reentrant checkpoint) */
    bool fp8_param_gather;     /* FP8 parameters (Megatron-Core's --fp8-param-gather): the quantized products'
                                  weights gathered at a byte, an amax pass over their fp32 shard after the update
                                  (user's choice, off in every preset) */
} et_software;

int et_software_preset(const char *name, et_software *out);
/* The stack's fused attention kernel's share of the profile's FlashAttention 2 rate: 1 for FlashAttention 2
 * (the kernel the profiles' rates were measured with) and for cuDNN's (whose own rate, where a profile has
 * one, et_op_time takes instead), 1/2 for FlashAttention 1 (Dao 2023's "around 2x"). */
double et_software_flash_rate(const et_software *s);
int et_software_read(const et_json_reader *r, json_t *root, et_software *out);

#endif
