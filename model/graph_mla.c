/* The op graph's multi-head latent attention (DeepSeek-V2; docs/cost-model.md): its down and up
 * projections, latent norms and rotary parts (graph_build.h). */
#include "graph_build.h"

/* Multi-head latent attention's projections (DeepSeek-V2 section 2.1; Megatron-Core's
 * MultiLatentAttention): the hidden state projected down to the query latent Lq and to the key-value latent
 * Lkv with the shared rotary key R (both products duplicated on every tensor rank), each latent RMS-normed,
 * then projected up to the heads' queries (D + R each) and to their no-position keys and values (D + Dv);
 * the rotary parts rotated, and each head's key and query assembled from its parts (a copy of each). */
/* MLA's rotary parts, each head's query part and the shared key (forward, recomputed or backward alike). */
static void mla_rope(builder *b, const dims *d, int i, et_phase phase, const char *id)
{
    if (!d->rope) return;
    const double n = (d->At + 1) * d->R;
    gb_elementwise(b, phase, i, TOK(6 * n), TOK(2 * d->e * n), id);
}

void gb_mla_forward(builder *b, const dims *d, int i, et_phase phase, const char *suffix)
{
    char id[80];
    const double H = d->H, e = d->e, At = d->At, Lq = d->Lq, Lkv = d->Lkv, R = d->R;
#define ID(name) (gb_id_printf(id, sizeof id, "layer.%d.attn.%s%s", i, name, suffix), id)
    if (Lq > 0) {
        gb_weight_forward(b, phase, i, ET_GROUP_ATTENTION, TOK(1), H, Lq, 1, ID("q_down"));
        gb_elementwise(b, phase, i, TOK(8 * Lq), TOK(2 * e * Lq), ID("q_norm"));
        gb_weight_forward(b, phase, i, ET_GROUP_ATTENTION, TOK(1), Lq, d->Qt, 1, ID("q_up"));
    } else {
        gb_weight_forward(b, phase, i, ET_GROUP_ATTENTION, TOK(1), H, d->Qt, 1, ID("q"));
    }
    gb_weight_forward(b, phase, i, ET_GROUP_ATTENTION, TOK(1), H, Lkv + R, 1, ID("kv_down"));
    gb_elementwise(b, phase, i, TOK(8 * Lkv), TOK(2 * e * Lkv), ID("kv_norm"));
    gb_weight_forward(b, phase, i, ET_GROUP_ATTENTION, TOK(1), Lkv, At * (d->D + d->Dv), 1, ID("kv_up"));
    mla_rope(b, d, i, phase, ID("rope"));
    gb_copies(b, phase, i, TOK(4 * e * d->Qt), 2, ID("qk_concat"));
#undef ID
}

/* MLA's backward, the forward's products in reverse: each finalises its weight, each norm its scale. */
void gb_mla_backward(builder *b, const dims *d, int i)
{
    char name[80];
    const double H = d->H, e = d->e, At = d->At, Lq = d->Lq, Lkv = d->Lkv, R = d->R;
#define NAME(s) (gb_id_printf(name, sizeof name, "layer.%d.attn.%s", i, s), name)
    if (ET_RECOMPUTES(d->rm,
                      ET_RECOMPUTE_MLA_UP_PROJ)) { /* selective "mla_up_proj": q, k, v from the latents */
        if (Lq > 0)
            gb_weight_forward(b, ET_PHASE_BACKWARD, i, ET_GROUP_ATTENTION, TOK(1), Lq, d->Qt, 1,
                              NAME("q_up.recompute"));
        gb_weight_forward(b, ET_PHASE_BACKWARD, i, ET_GROUP_ATTENTION, TOK(1), Lkv, At * (d->D + d->Dv), 1,
                          NAME("kv_up.recompute"));
        mla_rope(b, d, i, ET_PHASE_BACKWARD, NAME("rope.recompute"));
        gb_copies(b, ET_PHASE_BACKWARD, i, TOK(4 * e * d->Qt), 2, NAME("qk_concat.recompute"));
    }
    gb_copies(b, ET_PHASE_BACKWARD, i, TOK(4 * e * d->Qt), 2, NAME("qk_concat.bwd"));
    mla_rope(b, d, i, ET_PHASE_BACKWARD, NAME("rope.bwd"));
    gb_weight_backward(b, i, ET_GROUP_ATTENTION, TOK(1), Lkv, At * (d->D + d->Dv), 1, NAME("kv_up"), d->bias,
                       1);
    gb_elementwise(b, ET_PHASE_BACKWARD, i, TOK(10 * Lkv), TOK(4 * e * Lkv), NAME("kv_norm.bwd"));
    gb_add_grad(b, i, Lkv, "layer.%d.attn.kv_norm.weight", i);
    gb_weight_backward(b, i, ET_GROUP_ATTENTION, TOK(1), H, Lkv + R, 1, NAME("kv_down"), d->bias, 1);
    if (Lq > 0) {
        gb_weight_backward(b, i, ET_GROUP_ATTENTION, TOK(1), Lq, d->Qt, 1, NAME("q_up"), d->bias, 1);
        gb_elementwise(b, ET_PHASE_BACKWARD, i, TOK(10 * Lq), TOK(4 * e * Lq), NAME("q_norm.bwd"));
        gb_add_grad(b, i, Lq, "layer.%d.attn.q_norm.weight", i);
        gb_weight_backward(b, i, ET_GROUP_ATTENTION, TOK(1), H, Lq, 1, NAME("q_down"), d->bias, 1);
    } else {
        gb_weight_backward(b, i, ET_GROUP_ATTENTION, TOK(1), H, d->Qt, 1, NAME("q"), d->bias, 1);
    }
#undef NAME
}
