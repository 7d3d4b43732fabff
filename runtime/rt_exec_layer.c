/* Executors of one transformer layer (encoder: post-LN, decoder: pre-LN), forward and backward in the
 * graph's order; data flow in rt_exec.h. */
#include "rt_exec.h"

#define LAYER(m, op) (&(m)->acts->layers[(op)->layer])

RT_EXEC(rt_ex_qkv)
{
    rt_acts *a = m->acts;
    const rt_layer_acts *l = LAYER(m, op);
    m->be->linear_fwd(m->be, a->decoder ? l->ln1 : rt_layer_input(a, op->layer), op->W, op->bias, l->qkv,
                      b->T, a->H, a->QKV);
}

RT_EXEC(rt_ex_scores)
{
    const rt_attn_shape sh = rt_layer_attn(m, op->layer);
    m->be->attn_scores_fwd(m->be, LAYER(m, op)->qkv, LAYER(m, op)->probs, b, &sh);
}

RT_EXEC(rt_ex_softmax)
{
    const rt_attn_shape sh = rt_layer_attn(m, op->layer);
    const rt_layer_acts *l = LAYER(m, op);
    m->be->attn_softmax_fwd(m->be, l->probs, l->sinks, b, &sh, m->acts->decoder);
}

RT_EXEC(rt_ex_context)
{
    const rt_attn_shape sh = rt_layer_attn(m, op->layer);
    const rt_layer_acts *l = LAYER(m, op);
    m->be->attn_context_fwd(m->be, l->qkv, l->probs, l->ctx, b, &sh);
}

/* fused attention: the three kernels above in one, each row's log-sum-exp kept instead of its probabilities
 */
RT_EXEC(rt_ex_flash)
{
    const rt_attn_shape sh = rt_layer_attn(m, op->layer);
    const rt_layer_acts *l = LAYER(m, op);
    m->be->attn_flash_fwd(m->be, l->qkv, l->sinks, l->ctx, l->lse, b, &sh, m->acts->decoder);
}

RT_EXEC(rt_ex_attn_out)
{
    rt_acts *a = m->acts;
    const rt_layer_acts *l = LAYER(m, op);
    m->be->linear_fwd(m->be, l->ctx, op->W, op->bias, l->y, b->T, a->CW, a->H);
}

/* encoder: LN(x + y); decoder: LN(x) before attention */
RT_EXEC(rt_ex_attn_ln)
{
    rt_acts *a = m->acts;
    const rt_layer_acts *l = LAYER(m, op);
    const float *x = rt_layer_input(a, op->layer);
    if (a->decoder) {
        rt_norm_fwd(m, x, op->W, op->bias, l->ln1, l->ln1_mean, l->ln1_rstd, b->T, a->H);
    } else {
        rt_add_norm_fwd(m, x, l->y, l->res1, op->W, op->bias, l->ln1, l->ln1_mean, l->ln1_rstd, b->T, a->H);
    }
}

/* encoder: LN(ln1 + v); decoder: LN(x + y) before the MLP */
RT_EXEC(rt_ex_mlp_ln)
{
    rt_acts *a = m->acts;
    const rt_layer_acts *l = LAYER(m, op);
    if (a->decoder) {
        rt_add_norm_fwd(m, rt_layer_input(a, op->layer), l->y, l->res1, op->W, op->bias, l->ln2, l->ln2_mean,
                        l->ln2_rstd, b->T, a->H);
    } else {
        rt_add_norm_fwd(m, l->ln1, l->v, l->res2, op->W, op->bias, l->out, l->ln2_mean, l->ln2_rstd, b->T,
                        a->H);
    }
}

RT_EXEC(rt_ex_fc1)
{
    rt_acts *a = m->acts;
    const rt_layer_acts *l = LAYER(m, op);
    m->be->linear_fwd(m->be, a->decoder ? l->ln2 : l->ln1, op->W, op->bias, l->u, b->T, a->H, a->F1);
}

RT_EXEC(rt_ex_gelu)
{
    rt_acts *a = m->acts;
    const rt_layer_acts *l = LAYER(m, op);
    m->be->gelu_fwd(m->be, l->u, l->g, (size_t)b->T * a->F);
}

RT_EXEC(rt_ex_swiglu)
{
    rt_acts *a = m->acts;
    const rt_layer_acts *l = LAYER(m, op);
    m->be->swiglu_fwd(m->be, l->u, l->g, b->T, a->F);
}

/* q and k turned by their positions, in place after the qkv product; under latent attention the rotary
 * part of each query head and the shared rotary key, before the heads are assembled */
static void rope_all(rt_model *m, float *qkv, const rt_dev_batch *b, bool inverse)
{
    rt_acts *a = m->acts;
    const rt_attn_shape *sh = &a->attn;
    if (a->Lkv) {
        m->be->rope(m->be, a->mla_q + a->Dn, b, sh->A * sh->Dqk, sh->A, sh->Dqk, a->R, a->rope_base, inverse);
        m->be->rope(m->be, a->mla_kpe, b, a->R, 1, a->R, a->R, a->rope_base, inverse);
    } else {
        m->be->rope(m->be, qkv, b, a->QKV, sh->A + sh->KV, sh->Dqk, sh->Dqk, a->rope_base, inverse);
    }
}

/* Qwen3's query and key norms: each head's D values RMS-normed with one gain for the queries and one for
 * the keys; q and k copied out as rows of D (kept for the backward), normed, copied back. */
static void qk_norm_part(rt_model *m, float *qkv, int offset, int heads, const float *g, float *pre,
                         float *rstd, int T)
{
    rt_acts *a = m->acts;
    const int D = a->attn.Dqk, w = heads * D;
    m->be->copy_2d(m->be, pre, w, qkv + offset, a->QKV, T, w);
    m->be->rmsnorm_fwd(m->be, pre, g, a->qk_tmp, rstd, T * heads, D);
    m->be->copy_2d(m->be, qkv + offset, a->QKV, a->qk_tmp, w, T, w);
}

static void qk_norm_part_bwd(rt_model *m, int offset, int heads, const float *g, const float *pre,
                             const float *rstd, float *dg, int T)
{
    rt_acts *a = m->acts;
    const int D = a->attn.Dqk, w = heads * D;
    m->be->copy_2d(m->be, a->qk_tmp, w, a->d_qkv + offset, a->QKV, T, w);
    m->be->fill(m->be, a->qk_tmp2, 0, (size_t)T * w);
    rt_norm_bwd_rms(m, pre, g, rstd, a->qk_tmp, a->qk_tmp2, dg, T * heads, D);
    m->be->copy_2d(m->be, a->d_qkv + offset, a->QKV, a->qk_tmp2, w, T, w);
}

RT_EXEC(rt_ex_qk_norm)
{
    rt_acts *a = m->acts;
    rt_layer_acts *l = LAYER(m, op);
    qk_norm_part(m, l->qkv, 0, a->A, l->qn_g, l->q_pre, l->q_rstd_h, b->T);
    qk_norm_part(m, l->qkv, rt_attn_k_offset(&a->attn), a->KV, l->kn_g, l->k_pre, l->k_rstd_h, b->T);
}

RT_EXEC(rt_ex_qk_norm_bwd)
{
    rt_acts *a = m->acts;
    const rt_layer_acts *l = LAYER(m, op);
    qk_norm_part_bwd(m, 0, a->A, l->qn_g, l->q_pre, l->q_rstd_h, l->qn_dg, b->T);
    qk_norm_part_bwd(m, rt_attn_k_offset(&a->attn), a->KV, l->kn_g, l->k_pre, l->k_rstd_h, l->kn_dg, b->T);
}

RT_EXEC(rt_ex_rope)
{
    rope_all(m, LAYER(m, op)->qkv, b, false);
}

RT_EXEC(rt_ex_fc2)
{
    rt_acts *a = m->acts;
    rt_backend *be = m->be;
    const rt_layer_acts *l = LAYER(m, op);
    be->linear_fwd(be, l->g, op->W, op->bias, l->v, b->T, a->F, a->H);
    if (a->decoder) be->add(be, l->out, l->res1, l->v, (size_t)b->T * a->H); /* residual */
}

/* ---- backward ---- */

RT_EXEC(rt_ex_mlp_ln_bwd)
{
    rt_acts *a = m->acts;
    rt_backend *be = m->be;
    const rt_layer_acts *l = LAYER(m, op);
    const size_t n = (size_t)b->T * a->H;
    if (a->decoder) { /* d_res += LN2'(d_mid): gradient of x + y */
        rt_norm_bwd(m, l->res1, op->W, l->ln2_mean, l->ln2_rstd, a->d_mid, a->d_res, op->dW, op->dbias, b->T,
                    a->H);
    } else { /* dres2 -> d_res (the gradient of both ln1 and v) */
        be->fill(be, a->d_res, 0, n);
        rt_norm_bwd(m, l->res2, op->W, l->ln2_mean, l->ln2_rstd, a->d_out, a->d_res, op->dW, op->dbias, b->T,
                    a->H);
        be->copy(be, a->d_mid, a->d_res, n); /* d ln1 accumulates here */
    }
}

RT_EXEC(rt_ex_fc2_bwd_data)
{
    rt_acts *a = m->acts;
    rt_backend *be = m->be;
    const float *dv = a->decoder ? a->d_out : a->d_res;
    if (a->decoder) be->copy(be, a->d_res, a->d_out, (size_t)b->T * a->H); /* residual: d(x + y) */
    be->fill(be, a->d_ff, 0, (size_t)b->T * a->F);
    be->linear_bwd(be, NULL, op->W, dv, a->d_ff, NULL, NULL, b->T, a->F, a->H);
}

RT_EXEC(rt_ex_fc2_bwd_weight)
{
    rt_acts *a = m->acts;
    m->be->linear_bwd(m->be, LAYER(m, op)->g, op->W, a->decoder ? a->d_out : a->d_res, NULL, op->dW,
                      op->dbias, b->T, a->F, a->H);
}

RT_EXEC(rt_ex_gelu_bwd)
{
    rt_acts *a = m->acts;
    m->be->gelu_bwd(m->be, LAYER(m, op)->u, a->d_ff, a->d_ff2, (size_t)b->T * a->F);
}

RT_EXEC(rt_ex_swiglu_bwd)
{
    rt_acts *a = m->acts;
    m->be->swiglu_bwd(m->be, LAYER(m, op)->u, a->d_ff, a->d_ff2, b->T, a->F);
}

/* dq and dk turned back, in place before the qkv product's backward (latent attention: in its scratch) */
RT_EXEC(rt_ex_rope_bwd)
{
    (void)op;
    rope_all(m, m->acts->d_qkv, b, true);
}

RT_EXEC(rt_ex_fc1_bwd_data)
{
    rt_acts *a = m->acts;
    rt_backend *be = m->be;
    if (a->decoder) be->fill(be, a->d_mid, 0, (size_t)b->T * a->H);
    be->linear_bwd(be, NULL, op->W, a->d_ff2, a->d_mid, NULL, NULL, b->T, a->H, a->F1);
}

RT_EXEC(rt_ex_fc1_bwd_weight)
{
    rt_acts *a = m->acts;
    const rt_layer_acts *l = LAYER(m, op);
    m->be->linear_bwd(m->be, a->decoder ? l->ln2 : l->ln1, op->W, a->d_ff2, NULL, op->dW, op->dbias, b->T,
                      a->H, a->F1);
}

/* encoder: dres1 = LN1'(d_mid) is the gradient of both x and y -> d_res (y) and d_out (x);
 * decoder: d_out = d_res + LN1'(d_mid) (x feeds the residual and the layer norm) */
RT_EXEC(rt_ex_attn_ln_bwd)
{
    rt_acts *a = m->acts;
    rt_backend *be = m->be;
    const rt_layer_acts *l = LAYER(m, op);
    const size_t n = (size_t)b->T * a->H;
    if (a->decoder) {
        be->copy(be, a->d_out, a->d_res, n);
        rt_norm_bwd(m, rt_layer_input(a, op->layer), op->W, l->ln1_mean, l->ln1_rstd, a->d_mid, a->d_out,
                    op->dW, op->dbias, b->T, a->H);
    } else {
        be->fill(be, a->d_res, 0, n);
        rt_norm_bwd(m, l->res1, op->W, l->ln1_mean, l->ln1_rstd, a->d_mid, a->d_res, op->dW, op->dbias, b->T,
                    a->H);
        be->copy(be, a->d_out, a->d_res, n);
    }
}

/* dy is d_res in both architectures at this point */
RT_EXEC(rt_ex_attn_out_bwd_data)
{
    rt_acts *a = m->acts;
    rt_backend *be = m->be;
    be->fill(be, a->d_ctx, 0, (size_t)b->T * a->CW);
    be->linear_bwd(be, NULL, op->W, a->d_res, a->d_ctx, NULL, NULL, b->T, a->CW, a->H);
}

RT_EXEC(rt_ex_attn_out_bwd_weight)
{
    rt_acts *a = m->acts;
    m->be->linear_bwd(m->be, LAYER(m, op)->ctx, op->W, a->d_res, NULL, op->dW, op->dbias, b->T, a->CW, a->H);
}

RT_EXEC(rt_ex_context_bwd)
{
    rt_acts *a = m->acts;
    const rt_attn_shape sh = rt_layer_attn(m, op->layer);
    const rt_layer_acts *l = LAYER(m, op);
    m->be->attn_context_bwd(m->be, l->qkv, l->probs, a->d_ctx, a->d_qkv, a->d_probs, b, &sh);
}

RT_EXEC(rt_ex_softmax_bwd)
{
    const rt_attn_shape sh = rt_layer_attn(m, op->layer);
    const rt_layer_acts *l = LAYER(m, op);
    m->be->attn_softmax_bwd(m->be, l->probs, m->acts->d_probs, l->dsinks, b, &sh);
}

RT_EXEC(rt_ex_flash_bwd)
{
    rt_acts *a = m->acts;
    const rt_attn_shape sh = rt_layer_attn(m, op->layer);
    const rt_layer_acts *l = LAYER(m, op);
    m->be->attn_flash_bwd(m->be, l->qkv, l->sinks, l->ctx, l->lse, a->d_ctx, a->d_qkv, l->dsinks, a->d_lse, b,
                          &sh, a->decoder);
}

RT_EXEC(rt_ex_scores_bwd)
{
    rt_acts *a = m->acts;
    const rt_attn_shape sh = rt_layer_attn(m, op->layer);
    m->be->attn_scores_bwd(m->be, LAYER(m, op)->qkv, a->d_probs, a->d_qkv, b, &sh);
}

RT_EXEC(rt_ex_qkv_bwd_data)
{
    rt_acts *a = m->acts;
    rt_backend *be = m->be;
    if (a->decoder) { /* gradient of LN1's output */
        be->fill(be, a->d_mid, 0, (size_t)b->T * a->H);
        be->linear_bwd(be, NULL, op->W, a->d_qkv, a->d_mid, NULL, NULL, b->T, a->H, a->QKV);
    } else { /* encoder: x also feeds the residual, already in d_out */
        be->linear_bwd(be, NULL, op->W, a->d_qkv, a->d_out, NULL, NULL, b->T, a->H, a->QKV);
    }
}

RT_EXEC(rt_ex_qkv_bwd_weight)
{
    rt_acts *a = m->acts;
    const rt_layer_acts *l = LAYER(m, op);
    m->be->linear_bwd(m->be, a->decoder ? l->ln1 : rt_layer_input(a, op->layer), op->W, a->d_qkv, NULL,
                      op->dW, op->dbias, b->T, a->H, a->QKV);
}
