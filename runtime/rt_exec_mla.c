/* Executors of multi-head latent attention (DeepSeek-V2 section 2.1; Megatron-Core's MultiLatentAttention),
 * decoders only, the cost model's ops (model/graph.c, mla_forward and mla_backward) one for one:
 *   q_down  cq = x Wqd^T [T, Lq]            q_norm  cqn = RMSNorm(cq)      q_up  q = cqn Wqu^T [T, A Dqk]
 *   (Lq 0:  q = x Wq^T)
 *   kv_down [ckv | kpe] = x Wkvd^T: the latent ckv [T, Lkv] and the shared rotary key kpe [T, R], as two
 *           products over Wkvd's first Lkv and last R rows (each output contiguous for the norm)
 *   kv_norm ckvn = RMSNorm(ckv)             kv_up  kvu = ckvn Wkvu^T [T, A (Dn + Dv)], head h's no-position
 *                                                  key then its value
 *   rope    q's rotary part (the last R of each head's Dqk) and kpe (rt_exec_layer.c's rt_ex_rope)
 *   qk_concat the attention's qkv row (rt_attn.h): q | per head [kvu's key | kpe] | per head kvu's value
 * x is the layer's normalised input (ln1). Backward runs them in reverse; the scratch buffers (rt_exec.h:
 * mla_q, mla_kvu, mla_kpe) then hold their own gradients, and kpe's gradient is the sum over the heads that
 * share it. The rotary pairs are (i, i + R/2) of the rotary part, as in etrun's other rotary layers. */
#include "rt_exec.h"

#define LAYER(m, op) (&(m)->acts->layers[(op)->layer])

static int qk_width(const rt_acts *a)
{
    return a->A * a->attn.Dqk;
}

static int kvu_width(const rt_acts *a)
{
    return a->A * (a->Dn + a->attn.Dv);
}

RT_EXEC(rt_ex_mla_q_down)
{
    rt_acts *a = m->acts;
    rt_layer_acts *l = LAYER(m, op);
    m->be->linear_fwd(m->be, l->ln1, op->W, op->bias, l->cq, b->T, a->H, a->Lq);
}

RT_EXEC(rt_ex_mla_q_norm)
{
    rt_layer_acts *l = LAYER(m, op);
    m->be->rmsnorm_fwd(m->be, l->cq, op->W, l->cqn, l->q_rstd, b->T, m->acts->Lq);
}

RT_EXEC(rt_ex_mla_q_up)
{
    rt_acts *a = m->acts;
    m->be->linear_fwd(m->be, LAYER(m, op)->cqn, op->W, op->bias, a->mla_q, b->T, a->Lq, qk_width(a));
}

RT_EXEC(rt_ex_mla_q)
{
    rt_acts *a = m->acts;
    m->be->linear_fwd(m->be, LAYER(m, op)->ln1, op->W, op->bias, a->mla_q, b->T, a->H, qk_width(a));
}

RT_EXEC(rt_ex_mla_kv_down)
{
    rt_acts *a = m->acts;
    rt_layer_acts *l = LAYER(m, op);
    const int H = a->H, Lkv = a->Lkv;
    m->be->linear_fwd(m->be, l->ln1, op->W, op->bias, l->ckv, b->T, H, Lkv);
    m->be->linear_fwd(m->be, l->ln1, op->W + (size_t)Lkv * H, op->bias ? op->bias + Lkv : NULL, a->mla_kpe,
                      b->T, H, a->R);
}

RT_EXEC(rt_ex_mla_kv_norm)
{
    rt_layer_acts *l = LAYER(m, op);
    m->be->rmsnorm_fwd(m->be, l->ckv, op->W, l->ckvn, l->kv_rstd, b->T, m->acts->Lkv);
}

RT_EXEC(rt_ex_mla_kv_up)
{
    rt_acts *a = m->acts;
    m->be->linear_fwd(m->be, LAYER(m, op)->ckvn, op->W, op->bias, a->mla_kvu, b->T, a->Lkv, kvu_width(a));
}

/* qkv <- q, the heads' keys [kvu's no-position part | kpe] and their values; `back`: the reverse, the
 * gradients of q, kvu and kpe from d_qkv (kpe's summed over the heads) */
static void assemble(rt_model *m, float *qkv, const rt_dev_batch *b, bool back)
{
    rt_acts *a = m->acts;
    rt_backend *be = m->be;
    const rt_attn_shape *sh = &a->attn;
    const int T = b->T, ld = a->QKV, Dqk = sh->Dqk, Dv = sh->Dv, Dn = a->Dn, R = a->R, wk = kvu_width(a);
    const int ko = rt_attn_k_offset(sh), vo = rt_attn_v_offset(sh);
    if (back)
        be->copy_2d(be, a->mla_q, qk_width(a), qkv, ld, T, qk_width(a));
    else
        be->copy_2d(be, qkv, ld, a->mla_q, qk_width(a), T, qk_width(a));
    for (int h = 0; h < sh->A; h++) {
        float *k = qkv + ko + h * Dqk, *v = qkv + vo + h * Dv, *kvu = a->mla_kvu + h * (Dn + Dv);
        if (back) {
            be->copy_2d(be, kvu, wk, k, ld, T, Dn);
            be->copy_2d(be, kvu + Dn, wk, v, ld, T, Dv);
            if (h == 0)
                be->copy_2d(be, a->mla_kpe, R, k + Dn, ld, T, R);
            else
                be->add_2d(be, a->mla_kpe, R, k + Dn, ld, T, R);
        } else {
            be->copy_2d(be, k, ld, kvu, wk, T, Dn);
            be->copy_2d(be, k + Dn, ld, a->mla_kpe, R, T, R);
            be->copy_2d(be, v, ld, kvu + Dn, wk, T, Dv);
        }
    }
}

RT_EXEC(rt_ex_mla_concat)
{
    assemble(m, LAYER(m, op)->qkv, b, false);
}

RT_EXEC(rt_ex_mla_concat_bwd)
{
    (void)op;
    assemble(m, m->acts->d_qkv, b, true);
}

/* ---- backward: the scratch holds the gradients of q, kvu and kpe ---- */

/* A latent's up projection (latent L -> width n, its output's gradient dy in the scratch) and its RMSNorm:
 * the latent's gradient into d_lat1, the weight's, then the norm's input gradient into d_lat2. */
static void up_bwd_data(rt_model *m, const rt_op *op, const rt_dev_batch *b, const float *dy, int L, int n)
{
    m->be->fill(m->be, m->acts->d_lat1, 0, (size_t)b->T * L);
    m->be->linear_bwd(m->be, NULL, op->W, dy, m->acts->d_lat1, NULL, NULL, b->T, L, n);
}

static void up_bwd_weight(rt_model *m, const rt_op *op, const rt_dev_batch *b, const float *normed,
                          const float *dy, int L, int n)
{
    m->be->linear_bwd(m->be, normed, op->W, dy, NULL, op->dW, op->dbias, b->T, L, n);
}

static void latent_norm_bwd(rt_model *m, const rt_op *op, const rt_dev_batch *b, const float *x,
                            const float *rstd, int L)
{
    rt_acts *a = m->acts;
    m->be->fill(m->be, a->d_lat2, 0, (size_t)b->T * L);
    rt_norm_bwd_rms(m, x, op->W, rstd, a->d_lat1, a->d_lat2, op->dW, b->T, L);
}

RT_EXEC(rt_ex_mla_kv_up_bwd_data)
{
    up_bwd_data(m, op, b, m->acts->mla_kvu, m->acts->Lkv, kvu_width(m->acts));
}

RT_EXEC(rt_ex_mla_kv_up_bwd_weight)
{
    up_bwd_weight(m, op, b, LAYER(m, op)->ckvn, m->acts->mla_kvu, m->acts->Lkv, kvu_width(m->acts));
}

RT_EXEC(rt_ex_mla_kv_norm_bwd)
{
    latent_norm_bwd(m, op, b, LAYER(m, op)->ckv, LAYER(m, op)->kv_rstd, m->acts->Lkv);
}

/* the layer norm's output gradient starts here: written, then added to by the query's products */
RT_EXEC(rt_ex_mla_kv_down_bwd_data)
{
    rt_acts *a = m->acts;
    rt_backend *be = m->be;
    const int H = a->H, Lkv = a->Lkv;
    be->fill(be, a->d_mid, 0, (size_t)b->T * H);
    be->linear_bwd(be, NULL, op->W, a->d_lat2, a->d_mid, NULL, NULL, b->T, H, Lkv);
    be->linear_bwd(be, NULL, op->W + (size_t)Lkv * H, a->mla_kpe, a->d_mid, NULL, NULL, b->T, H, a->R);
}

RT_EXEC(rt_ex_mla_kv_down_bwd_weight)
{
    rt_acts *a = m->acts;
    rt_backend *be = m->be;
    const rt_layer_acts *l = LAYER(m, op);
    const int H = a->H, Lkv = a->Lkv;
    be->linear_bwd(be, l->ln1, op->W, a->d_lat2, NULL, op->dW, op->dbias, b->T, H, Lkv);
    be->linear_bwd(be, l->ln1, op->W, a->mla_kpe, NULL, op->dW + (size_t)Lkv * H,
                   op->dbias ? op->dbias + Lkv : NULL, b->T, H, a->R);
}

RT_EXEC(rt_ex_mla_q_up_bwd_data)
{
    up_bwd_data(m, op, b, m->acts->mla_q, m->acts->Lq, qk_width(m->acts));
}

RT_EXEC(rt_ex_mla_q_up_bwd_weight)
{
    up_bwd_weight(m, op, b, LAYER(m, op)->cqn, m->acts->mla_q, m->acts->Lq, qk_width(m->acts));
}

RT_EXEC(rt_ex_mla_q_norm_bwd)
{
    latent_norm_bwd(m, op, b, LAYER(m, op)->cq, LAYER(m, op)->q_rstd, m->acts->Lq);
}

RT_EXEC(rt_ex_mla_q_down_bwd_data)
{
    rt_acts *a = m->acts;
    m->be->linear_bwd(m->be, NULL, op->W, a->d_lat2, a->d_mid, NULL, NULL, b->T, a->H, a->Lq);
}

RT_EXEC(rt_ex_mla_q_down_bwd_weight)
{
    rt_acts *a = m->acts;
    m->be->linear_bwd(m->be, LAYER(m, op)->ln1, op->W, a->d_lat2, NULL, op->dW, op->dbias, b->T, a->H, a->Lq);
}

RT_EXEC(rt_ex_mla_q_bwd_data)
{
    rt_acts *a = m->acts;
    m->be->linear_bwd(m->be, NULL, op->W, a->mla_q, a->d_mid, NULL, NULL, b->T, a->H, qk_width(a));
}

RT_EXEC(rt_ex_mla_q_bwd_weight)
{
    rt_acts *a = m->acts;
    m->be->linear_bwd(m->be, LAYER(m, op)->ln1, op->W, a->mla_q, NULL, op->dW, op->dbias, b->T, a->H,
                      qk_width(a));
}
