#include "graph.h"

void et_graph_activation_terms(const et_graph *g, et_linear *per_micro, et_linear *once)
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
