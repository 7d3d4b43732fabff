#include "scenario_graph.h"

#include "batch.h"
#include "collectives.h"

et_graph_options et_scenario_graph_options(const et_scenario *s, int stage)
{
    const bool sharded = s->parallel.zero_stage >= 1 || s->parallel.distributed_optimizer;
    et_graph_options o = {
        .tensor = s->parallel.tensor,
        .expert = s->parallel.expert,
        .expert_tensor = et_scenario_expert_tensor(s),
        .context = s->parallel.context,
        .pipeline = s->parallel.pipeline,
        .stage = stage,
        .layers_per_stage = s->parallel.uneven ? s->parallel.layers_per_stage : NULL,
        .precision = s->precision,
        .scaling = s->scaling,
        .bf16_first = s->bf16_layers.first,
        .bf16_last = s->bf16_layers.last,
        .recompute = s->parallel.recompute,
        .recompute_modules = s->parallel.recompute_modules,
        .recompute_layers = s->parallel.recompute_layers,
        .recompute_early_stop = s->software.recompute_early_stop,
        .virtual_pipeline = s->parallel.virtual_pipeline,
        .sequence_parallel = s->parallel.sequence_parallel && s->parallel.tensor > 1,
        .attention = s->parallel.attention,
        .optimizer = s->optimizer.name,
        /* ZeRO and the distributed optimizer shard the states over the data ranks, the experts' over the
         * ranks holding the same experts */
        .optimizer_shards = sharded ? et_scenario_grad_ranks(s) : 1,
        .expert_optimizer_shards = sharded ? et_ep_data_group(s).ranks : 1,
        .clip_global = s->optimizer.clip == ET_CLIP_AFTER_ALLREDUCE,
        .loss_fp32 = s->software.cross_entropy == ET_CROSS_ENTROPY_FP32,
        .flash_rate = et_software_flash_rate(&s->software),
        .attention_unpad = s->software.attention_unpad,
        .attention_cudnn = s->software.attention_kernel == ET_ATTENTION_CUDNN,
        .tp_async = s->software.tp_comm == ET_TP_COMM_ASYNC,
        .bias_kernels = (int)s->software.bias_kernels,
        .expert_launches = s->software.grouped_gemm == ET_GROUPED_GEMM_PER_EXPERT,
        .moe_sort_chunks = s->software.moe_dispatch == ET_MOE_DISPATCH_SORT_CHUNKS,
        .residual_kernels = s->software.residual_kernels,
        .galore = s->optimizer.galore,
        .method = &s->method,
        .tt_rank = 0,
        .op_scales = s->op_scales.n ? &s->op_scales : NULL,
    };
    if (s->method.kind == ET_METHOD_TENSOR_TRAIN) o.tokens_hint = et_batch_expected(s).tokens;
    return o;
}

et_graph_options et_plan_graph_options(const et_scenario *s)
{
    et_graph_options o = et_scenario_graph_options(s, 0);
    o.optimizer_shards = 1, o.expert_optimizer_shards = 1;
    return o;
}
