#include "caveats.h"

int et_caveats(const et_scenario *s, const char **out, int max)
{
    int n = 0;
#define ADD(text)                                                                                            \
    do {                                                                                                     \
        if (n < max) out[n++] = (text);                                                                      \
    } while (0)
    ADD("no data loading or input pipeline");
    if (s->resilience.interruptions_per_gpu_hour > 0)
        ADD("failures independent and memoryless (no correlated failures, no slow nodes, none during a "
            "restart)");
    else
        ADD("no failures (resilience.interruptions_per_gpu_hour 0)");
    ADD("evaluations as target.eval_* states: forward passes, the metric's all-reduce and a host read, no "
        "data "
        "loading");
    if (s->data.lengths.kind != ET_LENGTHS_FIXED)
        ADD("activation memory for the worst-case micro-batch (local x seq_len tokens), not a sampled one");
    if (s->parallel.tensor > 1 && !s->parallel.tp_overlap && s->software.tp_comm == ET_TP_COMM_EXPOSED)
        ADD("tensor-parallel communication not overlapped with compute");
    if (s->parallel.tensor > 1 && !s->parallel.tp_overlap && s->software.tp_comm == ET_TP_COMM_ASYNC)
        ADD("forward tensor-parallel collectives block compute; backward ones beside their products");
    if (s->parallel.tensor > 1 && (s->parallel.tp_overlap || s->software.tp_comm == ET_TP_COMM_ASYNC))
        ADD(s->cluster.device.multiprocessors > 0
                ? "overlapped tensor-parallel communication takes SMs from its GEMM, not memory bandwidth"
                : "overlapped tensor-parallel communication slows no GEMM (the profile gives no SM count)");
    if (s->parallel.pipeline > 1) ADD("pipeline sends not overlapped with compute");
    if (s->parallel.sequence_parallel && s->parallel.tensor > 1 && s->model.mla.kv_lora > 0)
        ADD("no all-gather again of latent attention's inputs for weight gradients under sequence "
            "parallelism");
    if (s->model.dropout <= 0) ADD("no dropout kernels (model.dropout 0)");
    if (s->model.moe.experts > 0 && s->model.moe.shared_experts > 0)
        ADD("shared experts run after the router, not overlapped with the experts' all-to-all");
    if (et_model_head_dim(&s->model) * s->model.heads != s->model.hidden && s->model.mla.kv_lora <= 0)
        ADD("activation memory of attention at the hidden width (Korthikanti's terms), not heads x head_dim");
    if (s->parallel.attention == ET_ATTENTION_STANDARD)
        ADD("attention materialises the scores per head (no fused flash-style kernel)");
    else if (s->software.attention_kernel == ET_ATTENTION_CUDNN &&
             s->cluster.device.cudnn_attention_efficiency > 0)
        ADD("cuDNN's fused attention at the profile's one fitted rate (efficiency.cudnn_attention), whatever "
            "the head dimension or masking");
    else if (s->software.attention_kernel == ET_ATTENTION_CUDNN &&
             s->cluster.device.flash_attention_efficiency > 0)
        ADD("cuDNN's fused attention at FlashAttention 2's measured rate (the profile has no "
            "efficiency.cudnn_attention)");
    else if (s->cluster.device.flash_attention_efficiency > 0)
        ADD("fused attention at the profile's one measured rate (efficiency.flash_attention), whatever the "
            "head dimension (its sequence term and the blocks a causal or windowed mask wastes apart)");
    else
        ADD("flash attention at the GEMM efficiency of its l x l x D products, l x (window + 128) under a "
            "window (not fitted to the kernel)");
    if (s->method.kind == ET_METHOD_TENSOR_TRAIN && !s->cluster.device.tensor_train_layout_copies)
        ADD("tensor-train contractions on strided operands: no layout copies between them costed");
    if (s->method.kind == ET_METHOD_SPARSE) ADD("sparse kernel efficiency from the profile, not measured");
    if (s->cluster.device.caveat[0]) ADD(s->cluster.device.caveat);
    if (s->model.moe.experts > 0) {
        ADD("no router load-balancing loss");
        const bool ep = s->parallel.expert > 1, overlap = s->software.ep_overlap,
                   dedup = s->software.ep_dedup;
        if (ep && overlap)
            ADD("experts' all-to-alls overlapped (software.ep_overlap) at the busiest expert rank's rows in "
                "both engines: a pair of micro-batches' all-to-alls beside its computation, no flows played, "
                "Megatron-Core's delayed weight gradients not modelled");
        if (ep && dedup)
            ADD("experts' all-to-alls deduplicated (software.ep_dedup) by the closed form in both engines: "
                "uniform routing's expected GPUs and nodes a token reaches, no node-limited routing, the "
                "kernels' SMs not charged");
        if (ep && !overlap && !dedup)
            ADD("experts' all-to-all at the busiest expert rank's rows in the analytic estimate (the "
                "simulation plays the drawn routing)");
    }
    if (s->simulation.straggler_sigma <= 0) ADD("no per-rank compute noise (simulation.straggler_sigma 0)");
    if (s->parallel.zero_stage >= 3) ADD("ZeRO-3 parameter gathers assumed prefetched under compute");
    if (s->cluster.n_faults || s->cluster.random_faults.set)
        ADD("broken and slow parts (cluster.faults): played by the simulation only; the analytic estimate "
            "is of the healthy cluster");
#undef ADD
    return n;
}
