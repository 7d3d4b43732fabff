#include "graph.h"

#include <math.h>

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
    const unsigned rm = et_recompute_modules_of(g->options.recompute, g->options.recompute_modules);
    /* a flash-style kernel keeps no scores either: its fp32 log-sum-exp per row and head (4 bytes x A/t x T,
     * written here at the 16-bit scale like the rest) */
    const int flash = g->options.attention == ET_ATTENTION_FLASH;
    const int scores = !flash && !ET_RECOMPUTES(rm, ET_RECOMPUTE_CORE_ATTN);
    /* What the products keep for their weight gradients (their inputs) is kept quantized under FP8 and
     * FP4 recipes: `qsave` bytes fewer an element than at 16 bits (quantization.h). `quant` counts such
     * elements per token, `drop` the 16-bit bytes per token selective recomputation's modules do not keep. */
    const double qsave =
        et_precision_quantized(g->options.precision) ? 2 - et_quantized_saved_bytes(g->options.scaling) : 0;
    const double in_ln = sp ? H / t : H; /* a norm's output, the input of the products after it */
    double quant = 0, drop = 0;
    if (model->arch == ET_ARCH_DECODER && ET_RECOMPUTES(rm, ET_RECOMPUTE_LAYERNORM))
        drop += 2 * 2 * in_ln; /* the two norms' outputs, rebuilt from their inputs */
    else
        quant += 2 * in_ln;
    /* Multi-head latent attention keeps its own q, k, v and context (4 A (D + R) + 4 A Dv per token at 16
     * bit, split over the tensor ranks, instead of 8 H) and, on every tensor rank, its latents before and
     * after their norms (2 x 2 Lq and 2 (Lkv + R) + 2 Lkv); mla_up_proj rebuilds q, k and v from the
     * latents. The context (the output product's input) and the normed latents are products' inputs. */
    double mla_extra = 0;
    if (model->mla.kv_lora > 0) {
        const et_mla *a = &model->mla;
        const double D = et_model_head_dim(model), Qt = A * (D + a->rope_dim) / t, Vt = A * a->v_dim / t;
        mla_extra = 2 * (2 * Qt + 2 * Vt) - 8 * H / t + 4.0 * a->q_lora + 2.0 * (a->kv_lora + a->rope_dim) +
                    2.0 * a->kv_lora;
        quant += Vt + a->q_lora + a->kv_lora;
        if (ET_RECOMPUTES(rm, ET_RECOMPUTE_MLA_UP_PROJ)) drop += 2 * (2 * Qt + Vt);
    } else {
        quant += H / t; /* the context */
    }
    /* a dense MLP's activation output feeds its second product (Korthikanti's 8 T H / t at 16 bits); mlp
     * rebuilds it and the first product's output (16 T H / t) */
    const double dense_quant = 4 * H / t, dense_drop = ET_RECOMPUTES(rm, ET_RECOMPUTE_MLP) ? 16 * H / t : 0;
    const double dense_kept = ET_RECOMPUTES(rm, ET_RECOMPUTE_MLP) ? 0 : dense_quant;
    /* without dropout (model.dropout 0) no masks: neither the two block outputs' (a byte an element each,
     * Korthikanti's 2 T H of the 34) nor the attention probabilities' (their mask and dropped copy, 3 of
     * the 5 A Q / t) */
    const int dropout = model->dropout > 0;
    const double masks = dropout ? 0 : 2 * in_ln;
    et_linear per_layer = {.per_token =
                               ((sp ? H * 34 / t : H * (10 + 24 / t)) - masks + mla_extra - drop -
                                dense_drop - (quant + dense_kept) * qsave + (flash ? 4 * A / t * 2 / e : 0)) *
                               e / 2,
                           .per_token_sq = scores ? (dropout ? 5 : 2) * A / t * e / 2 : 0};
    /* multi-token prediction's modules on the last stage: a layer each (MoE as the model's layers past the
     * dense ones), its 2H-wide projection input, and another head's logits */
    const int last = g->options.stage == g->options.pipeline - 1;
    const int mtp = last ? model->mtp_layers : 0;
    /* An MoE layer's MLP keeps, instead of the dense MLP's 19 T H (2 T H input, 8 T H each for the 4H-wide
     * product and activation, T H mask; 3 T H + 16 T H / t without sequence parallelism): the router's input
     * and fp32 probabilities (2 T H, 4 T E), and for k c T routed rows their permuted input, the first
     * product's output, the activation's and the second product's output (2 H + 2 Fc1 / t + 2 Fe / t + 2 H,
     * Fc1 = 2 Fe with SwiGLU), and the mask (T H): per token, the MoE layer keeps moe_extra more. The
     * permuted rows and the activation's output are products' inputs; moe_act rebuilds the activation. */
    double moe_layers = 0, moe_extra = 0, moe_quant = 0;
    const et_moe *moe = &model->moe;
    if (moe->experts > 0) {
        moe_layers = et_model_moe_layers(model, g->first_layer, g->last_layer) +
                     (mtp ? et_model_moe_layers(model, model->layers, model->layers + mtp - 1) : 0);
        const double Fe = et_model_expert_ffn(model), E = moe->experts;
        const double kc = moe->top_k * (moe->capacity_factor > 0 ? moe->capacity_factor : 1);
        const double Fc1 = model->mlp == ET_MLP_SWIGLU ? 2 * Fe : Fe;
        const double mask = dropout ? H / (sp ? t : 1) : 0;
        const double dense_mlp =
            (sp ? 19 * H / t : 3 * H + 16 * H / t) - mask - dense_drop - dense_kept * qsave;
        /* shared experts: their first product's output and activation on every token (shared_experts
         * rebuilds both) */
        const double Fs = (double)moe->shared_experts * Fe, Fc1s = model->mlp == ET_MLP_SWIGLU ? 2 * Fs : Fs;
        const int act = ET_RECOMPUTES(rm, ET_RECOMPUTE_MOE_ACT),
                  shared = ET_RECOMPUTES(rm, ET_RECOMPUTE_SHARED_EXPERTS);
        /* experts folded over the tensor ranks (graph.h's expert_tensor 1): the routed rows of the rank's
         * sequence-parallel tokens, each expert whole (r = 1 / t rows a token, widths over te = 1) */
        const double te = g->options.expert_tensor > 0 ? g->options.expert_tensor : t;
        const double r = te < t && sp ? 1.0 / t : 1;
        moe_quant = r * kc * (H + (act ? 0 : Fe / te)) + (shared ? 0 : Fs / t);
        const double moe_mlp = 2 * H / (sp ? t : 1) + 4 * E * r +
                               r * kc * (4 * H + 2 * Fc1 / te + (act ? 0 : 2 * Fe / te)) +
                               (shared ? 0 : 2 * (Fc1s + Fs) / t) + mask - moe_quant * qsave;
        moe_extra = (moe_mlp - dense_mlp) * e / 2;
    }
    /* Full recomputation keeps of a recomputed layer its input alone (T H / t with sequence parallelism);
     * the layers it leaves out (parallelism.recompute_layers: graph.h's et_graph_layer_recomputed) keep
     * what they would without it. The prediction modules' layers are recomputed with the rest. Layers kept
     * in 16 bits under fp8 and fp4 (graph.h's bf16_first and bf16_last) keep their products' inputs at 16
     * bits: what qsave took off their share comes back. */
    const int full = g->options.recompute == ET_RECOMPUTE_FULL;
    const double back_dense = (quant + dense_kept) * qsave * e / 2,
                 back_moe = (quant + moe_quant) * qsave * e / 2;
    double recomputed = full ? mtp : 0, kept = full ? 0 : mtp, kept_moe = 0, back = 0, bf16_on_stage = 0;
    if (!full && mtp) kept_moe = et_model_moe_layers(model, model->layers, model->layers + mtp - 1);
    for (int i = g->first_layer; i <= g->last_layer; i++) {
        const int is_moe = moe->experts > 0 && et_model_layer_is_moe(model, i);
        const double bf16 =
            qsave > 0 && et_graph_layer_bf16(model, &g->options, i) ? (is_moe ? back_moe : back_dense) : 0;
        bf16_on_stage = fmax(bf16_on_stage, bf16);
        if (et_graph_layer_recomputed(g, i)) {
            recomputed++;
        } else {
            kept++, kept_moe += is_moe, back += bf16;
        }
    }
    *per_micro = (et_linear){0};
    per_micro->per_token =
        recomputed * H * e / (sp ? t : 1) + kept * per_layer.per_token + kept_moe * moe_extra + back;
    per_micro->per_token_sq = kept * per_layer.per_token_sq;
    per_micro->per_token += H * e + mtp * 2 * H * e; /* the layers' input; the modules' projection input */
    /* the largest layer, rebuilt during backward under full recomputation (in 16 bits if the stage has such
     * a layer: an upper bound) */
    if (moe_layers > 0 && moe_extra > 0) per_layer.per_token += moe_extra;
    per_layer.per_token += bf16_on_stage;
    *once = recomputed > 0 ? per_layer : (et_linear){0};
    /* embeddings output and the loss head: logits and their gradient, and in separate fp32 passes
     * (software.cross_entropy "fp32_passes") their fp32 copy */
    if (last)
        once->per_prediction =
            (1 + mtp) * ((model->vocab / t) * (2 * e + (g->options.loss_fp32 ? 4 : 0)) + H * e * 4);
}
