#include "schedule.h"

#include <stddef.h>

const char *const et_recompute_names[] = {"none", "full", "selective", NULL};
const char *const et_recompute_module_names[] = {"core_attn", "layernorm",      "mla_up_proj", "mlp",
                                                 "moe_act",   "shared_experts", NULL};

unsigned et_recompute_modules_of(et_recompute recompute, unsigned modules)
{
    if (recompute != ET_RECOMPUTE_SELECTIVE) return 0;
    return modules ? modules : 1u << ET_RECOMPUTE_CORE_ATTN;
}
const char *const et_attention_names[] = {"standard", "flash", NULL};
const char *const et_launch_mode_names[] = {"framework_eager", "c_runtime", "cuda_graphs", NULL};

double et_launch_default_seconds(et_launch_mode mode)
{
    switch (mode) {
    case ET_LAUNCH_C_RUNTIME:
        return 3.0e-6;
    case ET_LAUNCH_CUDA_GRAPHS:
        return 0.58e-6;
    default:
        return 9.8e-6;
    }
}

double et_host_bound(double device, double kernels, double host_per_kernel)
{
    double host = kernels * host_per_kernel;
    return host > device ? host : device;
}

double et_pipeline_bubble_micro_batches(int stages, int virtual_stages)
{
    if (stages <= 1) return 0;
    return (double)(stages - 1) / (virtual_stages > 1 ? virtual_stages : 1);
}

int et_pipeline_chunk_layers(int stage_layers, int virtual_stages)
{
    const int v = virtual_stages > 1 ? virtual_stages : 1;
    return (stage_layers + v - 1) / v;
}

int et_pipeline_sends_per_micro_batch(int stages, int virtual_stages)
{
    if (stages <= 1) return 0;
    return virtual_stages > 1 ? virtual_stages : 1;
}

double et_pipeline_in_flight(int stages, int virtual_stages, int stage, long long micro_batches)
{
    long long n = stages - stage;
    if (n > micro_batches) n = micro_batches;
    if (n < 1) n = 1;
    double f = (double)n;
    if (virtual_stages > 1 && stages > 1) f *= 1 + (double)(stages - 1) / ((double)stages * virtual_stages);
    return f;
}
