#include "memory.h"

#include <math.h>

#include "collectives.h"

et_memory et_memory_estimate(const et_scenario *s, const et_graph *g, const et_batch_shape *micro)
{
    et_memory m = {0};
    const double P = g->param_count;
    const double e = et_precision_bytes(s->precision);
    const int mixed = s->precision == ET_FP16 || s->precision == ET_BF16 || s->precision == ET_FP8 ||
                      s->precision == ET_FP4;
    const int dp = et_scenario_grad_ranks(s), z = s->parallel.zero_stage;
    /* ZeRO (Rajbhandari et al. 2020): model copy e, gradients e, Adam/LAMB states m and v in fp32 plus an
     * fp32 master copy when training in 16-bit: 2 + 2 + 12 = 16 bytes per parameter in mixed precision. */
    double states = mixed ? 12 : 8;
    /* Experts' parameters are held by the d / x ranks with the same experts (x the expert-parallel degree):
     * ZeRO and the distributed optimizer shard their share over those, the rest over all d. */
    double P_expert = 0, grad_expert = 0, weight_expert = 0;
    for (int i = 0; i < g->n_params; i++)
        if (g->params[i].expert) {
            P_expert += g->params[i].count;
            grad_expert += g->params[i].grad_elems;
            weight_expert += g->params[i].count * e + g->params[i].meta_bytes;
        }
    const int dp_expert = et_ep_data_group(s).ranks; /* dp itself without expert parallelism */
#define SHARDED(total, expert_part, on)                                                                      \
    ((on) ? ((total) - (expert_part)) / dp + (expert_part) / dp_expert : (total))
    /* sparse: kept values plus indices; gradients at the kept size unless the method keeps them dense */
    m.weights = SHARDED(g->weight_bytes, weight_expert, z >= 3);
    m.gradients = SHARDED(g->grad_elems, grad_expert, z >= 2) * e;
    m.optimizer_states = SHARDED(P, P_expert, z >= 1) * states;
    /* GaLore: projected matrices keep Adam's m and v at r x n and the projector P (fp32), the fp32 master
     * copy whole */
    if (g->galore_projected > 0)
        m.optimizer_states = (P - g->galore_projected) * states + g->galore_projected * (states - 8) +
                             4 * g->galore_state_elems;
    /* Megatron's distributed optimizer: 16-bit parameters and gradients whole, the fp32 master copy, Adam's
     * m and v and the fp32 main-gradient shard over the data ranks: 4 + 16/d bytes per parameter (its
     * documentation's table, "fp16 param, fp16 grads"); 8 + 8/d in fp32 */
    if (s->parallel.distributed_optimizer) m.optimizer_states = SHARDED(P, P_expert, 1) * (mixed ? 16 : 8);
#undef SHARDED

    et_linear per_micro, once;
    et_graph_activation_terms(g, &per_micro, &once);
    /* 1F1B keeps up to `pipeline - stage` micro-batches in flight on a stage (more with interleaving);
     * what is rebuilt during backward (one layer under full recomputation) and the head exist once */
    double in_flight = et_pipeline_in_flight(s->parallel.pipeline, s->parallel.virtual_pipeline,
                                             g->options.stage, s->batch.grad_accum);
    m.activations = et_linear_eval(&per_micro, micro) * in_flight + et_linear_eval(&once, micro);
    m.reserved = s->cluster.device.reserved_bytes;
    m.total = m.weights + m.gradients + m.optimizer_states + m.activations + m.reserved;
    m.capacity = s->cluster.device.memory_bytes;
    m.fits = m.total <= m.capacity;
    return m;
}
