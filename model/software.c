#include "software.h"

#include <string.h>

const char *const et_grad_accumulation_names[] = {"fused", "add", "cast_add", NULL};
const char *const et_optimizer_path_names[] = {"fused", "copy_back", "fp16_master", "bf16_shards", NULL};
const char *const et_cross_entropy_names[] = {"fused", "fp32_passes", NULL};
const char *const et_pipeline_sends_names[] = {"sharded", "scatter_gather", "full", NULL};
const char *const et_attention_kernel_names[] = {"flash2", "flash1", "cudnn", NULL};
const char *const et_tp_comm_names[] = {"exposed", "async", NULL};
const char *const et_bias_kernels_names[] = {"fused", "megatron", "eager", NULL};
const char *const et_grouped_gemm_names[] = {"single", "per_expert", NULL};
const char *const et_moe_dispatch_names[] = {"direct", "sort_chunks", NULL};
const char *const et_stack_names[] = {"fused",
                                      "megatron-lm-2021",
                                      "megatron-lm-2022",
                                      "megatron-deepspeed",
                                      "megatron-core",
                                      "pytorch-apex",
                                      "pytorch-fsdp",
                                      "llm-foundry",
                                      NULL};

/* Each stack's terms, from its code as shared/data/software-stacks.md cites it (docs/cost-model.md, "The
 * software stack", gives the file and commit of each; software.h says what each term is). Residual kernels:
 * every real stack's autograd sums the residual stream's gradients in a kernel of its own, and without
 * dropout nothing carries the add. Tensor-parallel collectives `async`: Megatron-core's linear layers, which
 * need CUDA_DEVICE_MAX_CONNECTIONS=1. The same in every stack (EVERY_STACK): the SMs an overlapped
 * collective takes (16: NCCL_NVLS_NCHANNELS' default, and Transformer Engine's initialize_ub num_sm for its
 * pipelined overlaps), those its bulk overlaps take (4: NeMo's GPT-3 175B userbuffers preset's, where
 * initialize_ub's default of 16 is overridden), and FP8 parameter gathers off (a user's choice). One stack to
 * a few lines, its terms in the struct's order (clang-format keeps its hands off); overlapped pipeline sends
 * (p2p_overlap) only where a preset says so. */
#define EVERY_STACK .overlap_sms = 16, .bulk_overlap_sms = 4, .fp8_param_gather = false
/* SC21 and v3 alike but for the accumulation: Float16OptimizerWithFloat16Params, fp32 cross-entropy, the
 * timers' and p2p synchronisations, the norm's and the loss scaler's reads, pipeline scatter-gather,
 * exposed tensor-parallel collectives, Megatron's bias kernels */
#define MEGATRON_V2_V3                                                                                       \
    .optimizer = ET_OPTIMIZER_FP16_MASTER, .cross_entropy = ET_CROSS_ENTROPY_FP32,                           \
    .syncs_per_micro_batch = 4, .p2p_sync = true, .syncs_per_step = 1, .loss_scale_sync = true,              \
    .launch_blocking = false, .pipeline_sends = ET_SENDS_SCATTER_GATHER,                                     \
    .attention_kernel = ET_ATTENTION_FLASH2, .attention_unpad = false, .residual_kernels = true,             \
    .tp_comm = ET_TP_COMM_EXPOSED, .bias_kernels = ET_BIAS_MEGATRON, .grouped_gemm = ET_GROUPED_GEMM_SINGLE, \
    .moe_dispatch = ET_MOE_DISPATCH_DIRECT
// clang-format off
static const et_software presets[ET_STACKS] = {
    /* every pass fused, no host sync: ET's model before stacks were inputs */
    [ET_STACK_FUSED] = {EVERY_STACK, .stack = ET_STACK_FUSED, .grad_accumulation = ET_ACCUMULATE_FUSED,
        .accumulate_bytes = 4, .optimizer = ET_OPTIMIZER_FUSED, .cross_entropy = ET_CROSS_ENTROPY_FUSED,
        .syncs_per_micro_batch = 0, .p2p_sync = false, .syncs_per_step = 0, .loss_scale_sync = false,
        .launch_blocking = false, .pipeline_sends = ET_SENDS_SHARDED,
        .attention_kernel = ET_ATTENTION_FLASH2, .attention_unpad = false, .residual_kernels = false,
        .tp_comm = ET_TP_COMM_ASYNC, .bias_kernels = ET_BIAS_FUSED, .grouped_gemm = ET_GROUPED_GEMM_SINGLE,
        .moe_dispatch = ET_MOE_DISPATCH_DIRECT},
    /* SC21: autograd accumulates fp16 param.grad; Float16OptimizerWithFloat16Params; fp32 vocab-parallel
     * cross-entropy; _Timer start/stop synchronise around each micro-batch's forward and backward; p2p
     * synchronises after every call; the norm's .item() and, under fp16, found_inf.item() */
    [ET_STACK_MEGATRON_2021] = {EVERY_STACK, MEGATRON_V2_V3, .stack = ET_STACK_MEGATRON_2021,
        .grad_accumulation = ET_ACCUMULATE_ADD, .accumulate_bytes = 2},
    /* v3 (mid-2022): gradient accumulation fused into the weight-gradient GEMM into an fp32 main_grad; the
     * same optimizer (its fp32 gradients need no copy); the timers still synchronise (made no-ops 2022-08);
     * the backward collectives issued asynchronously, but beside a product launched on another hardware queue
     * a 3 us dummy kernel apart, which can take every SM first (made reliable only by
     * CUDA_DEVICE_MAX_CONNECTIONS = 1, bdd9731288, 2022-10-14): exposed */
    [ET_STACK_MEGATRON_2022] = {EVERY_STACK, MEGATRON_V2_V3, .stack = ET_STACK_MEGATRON_2022,
        .grad_accumulation = ET_ACCUMULATE_FUSED, .accumulate_bytes = 4},
    /* BLOOM: BF16_Optimizer's cast and add per parameter per micro-batch into one fp32 buffer; its sharded
     * update and copy; fp32 cross-entropy; CUDA_LAUNCH_BLOCKING=1 in tr11-176B-ml.slurm */
    [ET_STACK_MEGATRON_DEEPSPEED] = {EVERY_STACK, .stack = ET_STACK_MEGATRON_DEEPSPEED,
        .grad_accumulation = ET_ACCUMULATE_CAST_ADD, .accumulate_bytes = 4,
        .optimizer = ET_OPTIMIZER_BF16_SHARDS, .cross_entropy = ET_CROSS_ENTROPY_FP32,
        .syncs_per_micro_batch = 0, .p2p_sync = false, .syncs_per_step = 0, .loss_scale_sync = false,
        .launch_blocking = true, .pipeline_sends = ET_SENDS_SCATTER_GATHER,
        .attention_kernel = ET_ATTENTION_FLASH2, .attention_unpad = false, .residual_kernels = true,
        .tp_comm = ET_TP_COMM_EXPOSED, .bias_kernels = ET_BIAS_MEGATRON,
        .grouped_gemm = ET_GROUPED_GEMM_SINGLE, .moe_dispatch = ET_MOE_DISPATCH_DIRECT},
    /* Megatron-core / NeMo with Transformer Engine: fuse_wgrad_accumulation into fp32 main_grad; the
     * distributed optimizer copies its fp32 shard back; fused cross-entropy; no timer syncs; the norm's
     * .item(); the all-to-all dispatcher's sort_chunks_by_idxs; cuDNN's fused attention (Transformer
     * Engine's get_attention_backend prefers FusedAttention to FlashAttention on sm90 and later); the
     * interleaved schedule's sends overlapped (overlap_p2p_comm, which NeMo sets with virtual pipelining) */
    [ET_STACK_MEGATRON_CORE] = {EVERY_STACK, .stack = ET_STACK_MEGATRON_CORE,
        .grad_accumulation = ET_ACCUMULATE_FUSED, .accumulate_bytes = 4,
        .optimizer = ET_OPTIMIZER_COPY_BACK, .cross_entropy = ET_CROSS_ENTROPY_FUSED,
        .syncs_per_micro_batch = 0, .p2p_sync = false, .syncs_per_step = 1, .loss_scale_sync = true,
        .launch_blocking = false, .pipeline_sends = ET_SENDS_FULL, .p2p_overlap = true,
        .attention_kernel = ET_ATTENTION_CUDNN, .attention_unpad = false, .residual_kernels = true,
        .tp_comm = ET_TP_COMM_ASYNC, .bias_kernels = ET_BIAS_FUSED, .grouped_gemm = ET_GROUPED_GEMM_PER_EXPERT,
        .moe_dispatch = ET_MOE_DISPATCH_SORT_CHUNKS},
    /* eager PyTorch with apex amp O2 (DeepLearningExamples BERT, the MLPerf BERT reference stacks): autograd
     * accumulates fp16 grads; master gradients copied to fp32 and weights back; PyTorch's cross-entropy in
     * fp32; the loss scaler's overflow check each step */
    [ET_STACK_PYTORCH_APEX] = {EVERY_STACK, .stack = ET_STACK_PYTORCH_APEX,
        .grad_accumulation = ET_ACCUMULATE_ADD, .accumulate_bytes = 2,
        .optimizer = ET_OPTIMIZER_FP16_MASTER, .cross_entropy = ET_CROSS_ENTROPY_FP32,
        .syncs_per_micro_batch = 0, .p2p_sync = false, .syncs_per_step = 0, .loss_scale_sync = true,
        .launch_blocking = false, .pipeline_sends = ET_SENDS_FULL, .attention_kernel = ET_ATTENTION_FLASH2,
        .attention_unpad = false, .residual_kernels = true, .tp_comm = ET_TP_COMM_EXPOSED,
        .bias_kernels = ET_BIAS_EAGER, .grouped_gemm = ET_GROUPED_GEMM_SINGLE,
        .moe_dispatch = ET_MOE_DISPATCH_DIRECT},
    /* PyTorch FSDP (torchtitan; llm-foundry with FlashAttention 2): what is confirmed in their code is fused
     * or absent (flash-attn's fused cross-entropy, SDPA or FlashAttention 2); the reduce between
     * micro-batches and the optimizer's form are unconfirmed and not charged; activation checkpointing
     * through checkpoint_wrapper's non-reentrant torch.utils.checkpoint, which since PyTorch 2.1 stops its
     * recomputation early (recompute_early_stop; llm-foundry's 2023 tables predate it: docs/cost-model.md) */
    [ET_STACK_PYTORCH_FSDP] = {EVERY_STACK, .stack = ET_STACK_PYTORCH_FSDP,
        .grad_accumulation = ET_ACCUMULATE_FUSED, .accumulate_bytes = 4, .optimizer = ET_OPTIMIZER_FUSED,
        .cross_entropy = ET_CROSS_ENTROPY_FUSED, .syncs_per_micro_batch = 0, .p2p_sync = false,
        .syncs_per_step = 0, .loss_scale_sync = false, .launch_blocking = false,
        .pipeline_sends = ET_SENDS_FULL, .attention_kernel = ET_ATTENTION_FLASH2, .attention_unpad = false,
        .residual_kernels = true, .tp_comm = ET_TP_COMM_EXPOSED, .bias_kernels = ET_BIAS_FUSED,
        .grouped_gemm = ET_GROUPED_GEMM_SINGLE, .moe_dispatch = ET_MOE_DISPATCH_DIRECT,
        .recompute_early_stop = true},
    /* llm-foundry as its 2023 benchmark tables ran it (Composer, FSDP1): pytorch-fsdp's terms, with
     * flash-attn 1.0.9 (docs/cost-model.md says on what evidence, and what of it is unchecked) called through
     * the unpadded interface: llmfoundry/models/layers/attention.py flash_attn_fn gathers q, k and v with
     * bert_padding.unpad_input and scatters the context back with pad_input */
    [ET_STACK_LLM_FOUNDRY] = {EVERY_STACK, .stack = ET_STACK_LLM_FOUNDRY,
        .grad_accumulation = ET_ACCUMULATE_FUSED, .accumulate_bytes = 4, .optimizer = ET_OPTIMIZER_FUSED,
        .cross_entropy = ET_CROSS_ENTROPY_FUSED, .syncs_per_micro_batch = 0, .p2p_sync = false,
        .syncs_per_step = 0, .loss_scale_sync = false, .launch_blocking = false,
        .pipeline_sends = ET_SENDS_FULL, .attention_kernel = ET_ATTENTION_FLASH1, .attention_unpad = true,
        .residual_kernels = true, .tp_comm = ET_TP_COMM_EXPOSED, .bias_kernels = ET_BIAS_FUSED,
        .grouped_gemm = ET_GROUPED_GEMM_SINGLE, .moe_dispatch = ET_MOE_DISPATCH_DIRECT},
};
// clang-format on
#undef EVERY_STACK
#undef MEGATRON_V2_V3

int et_software_preset(const char *name, et_software *out)
{
    for (int i = 0; i < ET_STACKS; i++)
        if (!strcmp(name, et_stack_names[i])) {
            *out = presets[i];
            return 0;
        }
    return -1;
}

double et_software_flash_rate(const et_software *s)
{
    return s->attention_kernel == ET_ATTENTION_FLASH1 ? 0.5 : 1;
}

int et_software_read(const et_json_reader *r, json_t *root, et_software *out)
{
    static const char *const keys[] = {"stack",
                                       "grad_accumulation",
                                       "grad_accumulation_bytes",
                                       "optimizer",
                                       "cross_entropy",
                                       "syncs_per_micro_batch",
                                       "p2p_sync",
                                       "syncs_per_step",
                                       "loss_scale_sync",
                                       "launch_blocking",
                                       "pipeline_sends",
                                       "p2p_overlap",
                                       "attention_kernel",
                                       "attention_unpad",
                                       "residual_kernels",
                                       "fp8_param_gather",
                                       "tp_comm",
                                       "overlap_sms",
                                       "bulk_overlap_sms",
                                       "bias_kernels",
                                       "grouped_gemm",
                                       "moe_dispatch",
                                       "ep_overlap",
                                       "ep_dedup",
                                       "recompute_early_stop",
                                       NULL};
    json_t *o;
    *out = presets[ET_STACK_FUSED];
    if (et_json_get_object(r, root, "$", "software", false, keys, &o)) return -1;
    if (!o) return 0;
    const char *const where = "$.software";
    int e = 0;
    if (et_json_get_enum(r, o, where, "stack", false, et_stack_names, ET_STACK_FUSED, &e)) return -1;
    *out = presets[e];
    long long n;
    if (et_json_get_enum(r, o, where, "grad_accumulation", false, et_grad_accumulation_names,
                         (int)out->grad_accumulation, &e))
        return -1;
    out->grad_accumulation = (et_grad_accumulation)e;
    if (et_json_get_number(r, o, where, "grad_accumulation_bytes", false, out->accumulate_bytes, 2, 4,
                           &out->accumulate_bytes) ||
        et_json_get_enum(r, o, where, "optimizer", false, et_optimizer_path_names, (int)out->optimizer, &e))
        return -1;
    out->optimizer = (et_optimizer_path)e;
    if (et_json_get_enum(r, o, where, "cross_entropy", false, et_cross_entropy_names, (int)out->cross_entropy,
                         &e))
        return -1;
    out->cross_entropy = (et_cross_entropy)e;
    if (et_json_get_int(r, o, where, "syncs_per_micro_batch", false, out->syncs_per_micro_batch, 0, 64, &n))
        return -1;
    out->syncs_per_micro_batch = (int)n;
    if (et_json_get_int(r, o, where, "syncs_per_step", false, out->syncs_per_step, 0, 64, &n)) return -1;
    out->syncs_per_step = (int)n;
    if (et_json_get_enum(r, o, where, "pipeline_sends", false, et_pipeline_sends_names,
                         (int)out->pipeline_sends, &e))
        return -1;
    out->pipeline_sends = (et_pipeline_sends)e;
    if (et_json_get_enum(r, o, where, "attention_kernel", false, et_attention_kernel_names,
                         (int)out->attention_kernel, &e))
        return -1;
    out->attention_kernel = (et_attention_kernel)e;
    if (et_json_get_enum(r, o, where, "tp_comm", false, et_tp_comm_names, (int)out->tp_comm, &e)) return -1;
    out->tp_comm = (et_tp_comm)e;
    if (et_json_get_enum(r, o, where, "bias_kernels", false, et_bias_kernels_names, (int)out->bias_kernels,
                         &e))
        return -1;
    out->bias_kernels = (et_bias_kernels)e;
    if (et_json_get_enum(r, o, where, "grouped_gemm", false, et_grouped_gemm_names, (int)out->grouped_gemm,
                         &e))
        return -1;
    out->grouped_gemm = (et_grouped_gemm)e;
    if (et_json_get_enum(r, o, where, "moe_dispatch", false, et_moe_dispatch_names, (int)out->moe_dispatch,
                         &e))
        return -1;
    out->moe_dispatch = (et_moe_dispatch)e;
    if (et_json_get_number(r, o, where, "overlap_sms", false, out->overlap_sms, 0, 1024, &out->overlap_sms) ||
        et_json_get_number(r, o, where, "bulk_overlap_sms", false, out->bulk_overlap_sms, 0, 1024,
                           &out->bulk_overlap_sms))
        return -1;
    return et_json_get_bool(r, o, where, "p2p_sync", false, out->p2p_sync, &out->p2p_sync) ||
                   et_json_get_bool(r, o, where, "loss_scale_sync", false, out->loss_scale_sync,
                                    &out->loss_scale_sync) ||
                   et_json_get_bool(r, o, where, "launch_blocking", false, out->launch_blocking,
                                    &out->launch_blocking) ||
                   et_json_get_bool(r, o, where, "attention_unpad", false, out->attention_unpad,
                                    &out->attention_unpad) ||
                   et_json_get_bool(r, o, where, "residual_kernels", false, out->residual_kernels,
                                    &out->residual_kernels) ||
                   et_json_get_bool(r, o, where, "fp8_param_gather", false, false, &out->fp8_param_gather) ||
                   et_json_get_bool(r, o, where, "ep_overlap", false, false, &out->ep_overlap) ||
                   et_json_get_bool(r, o, where, "ep_dedup", false, false, &out->ep_dedup) ||
                   et_json_get_bool(r, o, where, "recompute_early_stop", false, out->recompute_early_stop,
                                    &out->recompute_early_stop) ||
                   et_json_get_bool(r, o, where, "p2p_overlap", false, out->p2p_overlap, &out->p2p_overlap)
               ? -1
               : 0;
}
