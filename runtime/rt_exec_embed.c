/* Executors of the embeddings: lookup (word + position (+ type)), the encoder's layer norm, and their
 * backward (the scatter-add into the tables). */
#include "rt_exec.h"

RT_EXEC(rt_ex_embed)
{
    (void)op;
    rt_acts *a = m->acts;
    m->be->embedding_fwd(m->be, b, a->word, a->pos, a->type, a->decoder ? a->x0 : a->emb, a->H);
}

RT_EXEC(rt_ex_embed_ln)
{
    (void)op;
    rt_acts *a = m->acts;
    m->be->layernorm_fwd(m->be, a->emb, a->emb_g, a->emb_b, a->x0, a->emb_mean, a->emb_rstd, b->T, a->H);
}

RT_EXEC(rt_ex_embed_ln_bwd)
{
    (void)op;
    rt_acts *a = m->acts;
    rt_backend *be = m->be;
    const size_t n = (size_t)b->T * a->H;
    be->fill(be, a->d_res, 0, n);
    /* a frozen table's norm (LoRA): its gradients to scratch */
    float *dg = a->emb_dg ? a->emb_dg : a->frozen_grad, *db = a->emb_dg ? a->emb_db : a->frozen_grad + a->H;
    be->layernorm_bwd(be, a->emb, a->emb_g, a->emb_mean, a->emb_rstd, a->d_out, a->d_res, dg, db, b->T, a->H);
    be->copy(be, a->d_out, a->d_res, n);
}

RT_EXEC(rt_ex_embed_bwd)
{
    (void)op;
    rt_acts *a = m->acts;
    m->be->embedding_bwd(m->be, b, a->d_out, a->dword, a->dpos, a->dtype, a->H);
}
