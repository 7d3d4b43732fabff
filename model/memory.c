#include "memory.h"

#include <math.h>

#include "collectives.h"

et_memory et_memory_estimate(const et_scenario *s, const et_graph *g, const et_batch_shape *micro)
{
    et_memory m = {0};
    const double P = g->param_count;
    const double e = et_precision_bytes(s->precision);
    const int mixed = s->precision == ET_FP16 || s->precision == ET_BF16 || s->precision == ET_FP8;
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
    et_memory_activation_terms(g, &per_micro, &once);
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

void et_memory_activation_terms(const et_graph *g, et_linear *per_micro, et_linear *once)
{
    /* Activations per layer (Korthikanti et al. 2022, eqs. 2-5, Table 2), written for 16-bit tensors and
     * scaled by e/2 for other precisions: T*H*(10 + 24/t) + 5*A*Q/t bytes with tensor parallelism t;
     * T*H*34/t + 5*A*Q/t with sequence parallelism; selective recomputation drops the attention core's
     * 5*A*Q/t. With full recomputation each layer keeps only its input (2*T*H bytes at 16 bit, T*H/t with
     * sequence parallelism), and one layer's full set is rebuilt at a time. Per token (T) and per squared
     * length (Q) below; the head's per scored position (P). */
    const et_model_config *model = &g->model;
    const double e = et_precision_bytes(g->options.precision);
    const double H = model->hidden, A = model->heads, t = g->options.tensor;
    const int sp = g->options.sequence_parallel;
    /* a flash-style kernel keeps no scores either: its fp32 log-sum-exp per row and head (4 bytes x A/t x T,
     * written here at the 16-bit scale like the rest) */
    const int flash = g->options.attention == ET_ATTENTION_FLASH;
    const int scores = !flash && g->options.recompute != ET_RECOMPUTE_SELECTIVE;
    et_linear per_layer = {
        .per_token = ((sp ? H * 34 / t : H * (10 + 24 / t)) + (flash ? 4 * A / t * 2 / e : 0)) * e / 2,
        .per_token_sq = scores ? 5 * A / t * e / 2 : 0};
    double layers = g->last_layer - g->first_layer + 1;
    /* An MoE layer's MLP keeps, instead of the dense MLP's 19 T H (2 T H input, 8 T H each for the 4H-wide
     * product and activation, T H mask; 3 T H + 16 T H / t without sequence parallelism): the router's input
     * and fp32 probabilities (2 T H, 4 T E), and for k c T routed rows their permuted input, the first
     * product's output, the activation's and the second product's output (2 H + 2 Fc1 / t + 2 Fe / t + 2 H,
     * Fc1 = 2 Fe with SwiGLU), and the mask (T H): per token, the MoE layer keeps moe_extra more. */
    double moe_layers = 0, moe_extra = 0;
    const et_moe *moe = &model->moe;
    if (moe->experts > 0) {
        moe_layers = et_model_moe_layers(model, g->first_layer, g->last_layer);
        const double Fe = et_model_expert_ffn(model), E = moe->experts;
        const double kc = moe->top_k * (moe->capacity_factor > 0 ? moe->capacity_factor : 1);
        const double Fc1 = model->mlp == ET_MLP_SWIGLU ? 2 * Fe : Fe;
        const double dense_mlp = sp ? 19 * H / t : 3 * H + 16 * H / t;
        const double moe_mlp =
            2 * H / (sp ? t : 1) + 4 * E + kc * (4 * H + 2 * (Fc1 + Fe) / t) + H / (sp ? t : 1);
        moe_extra = (moe_mlp - dense_mlp) * e / 2;
    }
    *per_micro = (et_linear){0};
    if (g->options.recompute == ET_RECOMPUTE_FULL)
        per_micro->per_token = layers * H * e / (sp ? t : 1);
    else
        per_micro->per_token = layers * per_layer.per_token + moe_layers * moe_extra,
        per_micro->per_token_sq = layers * per_layer.per_token_sq;
    per_micro->per_token += H * e; /* the layers' input */
    /* the largest layer, rebuilt during backward under full recomputation */
    if (moe_layers > 0 && moe_extra > 0) per_layer.per_token += moe_extra;
    *once = g->options.recompute == ET_RECOMPUTE_FULL ? per_layer : (et_linear){0};
    /* embeddings output and the loss head: logits and their gradient, fp32 softmax statistics */
    if (g->options.stage == g->options.pipeline - 1)
        once->per_prediction = (model->vocab / t) * (2 * e + 4) + H * e * 4;
}
