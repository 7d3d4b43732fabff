/* Executors of multi-token prediction (DeepSeek-V3 section 2.2; Megatron-Core's MultiTokenPredictionBlock),
 * the cost model's ops "mtp.j.*" (model/graph.c, mtp_forward and mtp_backward): module j embeds the tokens
 * j + 1 ahead with the shared table, RMS-norms that embedding and the previous depth's hidden state (the
 * main model's last layer output for j = 0, module j - 1's layer output after), concatenates them
 * (embedding first) and projects 2H -> H, runs one transformer layer (layer L_main + j, by the layer
 * executors) and the shared output head with a final norm of its own, scored on the tokens j + 2 ahead.
 * Its loss counts model.mtp_loss_scale / depth in the gradient; m->loss_sum stays the main head's.
 * Backward: the head, the layer, the projection, the norms (the hidden state's gradient kept in d_mtp_h
 * until the head that produced the state adds it: rt_mtp_add_pending) and the embedding's scatter into the
 * shared table. */
#include "rt_exec.h"

static rt_mtp_acts *module(const rt_model *m, const rt_op *op)
{
    return &m->acts->mtp[op->mtp];
}

/* the hidden state module j reads, and its transformer layer's output */
static const float *hidden_in(const rt_acts *a, int j)
{
    return a->layers[a->L_main + j - 1].out;
}

static const float *layer_out(const rt_acts *a, int j)
{
    return a->layers[a->L_main + j].out;
}

/* the batch with module j's tokens (or targets) in place of the model's */
static rt_dev_batch ahead(const rt_dev_batch *b, int j, bool targets)
{
    rt_dev_batch x = *b;
    if (targets)
        x.targets = b->mtp_targets + (size_t)j * b->T;
    else
        x.tokens = b->mtp_tokens + (size_t)j * b->T;
    return x;
}

RT_EXEC(rt_ex_mtp_embed)
{
    rt_acts *a = m->acts;
    const rt_dev_batch x = ahead(b, op->mtp, false);
    m->be->embedding_fwd(m->be, &x, a->word, NULL, NULL, module(m, op)->emb, a->H);
}

RT_EXEC(rt_ex_mtp_norms)
{
    rt_acts *a = m->acts;
    rt_backend *be = m->be;
    rt_mtp_acts *x = module(m, op);
    const int H = a->H;
    be->rmsnorm_fwd(be, x->emb, op->W, a->tmp_h, x->e_rstd, b->T, H);
    be->copy_2d(be, x->cat, 2 * H, a->tmp_h, H, b->T, H);
    be->rmsnorm_fwd(be, hidden_in(a, op->mtp), op->W + H, a->tmp_h, x->h_rstd, b->T, H);
    be->copy_2d(be, x->cat + H, 2 * H, a->tmp_h, H, b->T, H);
}

RT_EXEC(rt_ex_mtp_eh_proj)
{
    rt_acts *a = m->acts;
    rt_mtp_acts *x = module(m, op);
    m->be->linear_fwd(m->be, x->cat, op->W, op->bias, x->x0, b->T, 2 * a->H, a->H);
}

RT_EXEC(rt_ex_mtp_final_ln)
{
    rt_acts *a = m->acts;
    rt_mtp_acts *x = module(m, op);
    rt_norm_fwd(m, layer_out(a, op->mtp), op->W, op->bias, x->fin, x->fin_mean, x->fin_rstd, b->T, a->H);
}

RT_EXEC(rt_ex_mtp_decoder)
{
    rt_acts *a = m->acts;
    m->be->linear_fwd(m->be, module(m, op)->fin, a->dec_W, a->dec_b, a->logits, b->P, a->H, a->V);
}

RT_EXEC(rt_ex_mtp_loss)
{
    rt_acts *a = m->acts;
    const rt_dev_batch x = ahead(b, op->mtp, true);
    m->be->cross_entropy(m->be, a->logits, &x, module(m, op)->dlogits, a->V,
                         a->norm * a->D / et_model_mtp_loss_scale(&m->s->model),
                         rt_model_scalar(m, RT_SC_MTP_LOSS));
}

/* ---- backward ---- */

RT_EXEC(rt_ex_mtp_decoder_bwd_data)
{
    rt_acts *a = m->acts;
    m->be->fill(m->be, a->d_head, 0, (size_t)b->P * a->H);
    m->be->linear_bwd(m->be, NULL, a->dec_W, module(m, op)->dlogits, a->d_head, NULL, NULL, b->P, a->H, a->V);
}

RT_EXEC(rt_ex_mtp_decoder_bwd_weight)
{
    rt_acts *a = m->acts;
    const rt_mtp_acts *x = module(m, op);
    m->be->linear_bwd(m->be, x->fin, a->dec_W, x->dlogits, NULL, a->dec_dW, a->dec_db, b->P, a->H, a->V);
}

void rt_mtp_add_pending(rt_model *m, const rt_dev_batch *b)
{
    rt_acts *a = m->acts;
    if (!a->mtp_pending) return;
    m->be->axpy(m->be, a->d_out, a->d_mtp_h, 1.0f, (size_t)b->T * a->H);
    a->mtp_pending = false;
}

/* the gradient of the module's layer output: its head's, and the next module's where one read it */
RT_EXEC(rt_ex_mtp_final_ln_bwd)
{
    rt_acts *a = m->acts;
    const rt_mtp_acts *x = module(m, op);
    m->be->fill(m->be, a->d_out, 0, (size_t)b->T * a->H);
    rt_norm_bwd(m, layer_out(a, op->mtp), op->W, x->fin_mean, x->fin_rstd, a->d_head, a->d_out, op->dW,
                op->dbias, b->T, a->H);
    rt_mtp_add_pending(m, b);
}

/* d_out: the gradient of the projection's output (its layer's input), after the layer's backward */
RT_EXEC(rt_ex_mtp_eh_proj_bwd_data)
{
    rt_acts *a = m->acts;
    m->be->fill(m->be, a->d_cat, 0, (size_t)b->T * 2 * a->H);
    m->be->linear_bwd(m->be, NULL, op->W, a->d_out, a->d_cat, NULL, NULL, b->T, 2 * a->H, a->H);
}

RT_EXEC(rt_ex_mtp_eh_proj_bwd_weight)
{
    rt_acts *a = m->acts;
    m->be->linear_bwd(m->be, module(m, op)->cat, op->W, a->d_out, NULL, op->dW, op->dbias, b->T, 2 * a->H,
                      a->H);
}

RT_EXEC(rt_ex_mtp_norms_bwd)
{
    rt_acts *a = m->acts;
    rt_backend *be = m->be;
    const rt_mtp_acts *x = module(m, op);
    const int H = a->H, T = b->T;
    be->copy_2d(be, a->tmp_h, H, a->d_cat, 2 * H, T, H);
    be->fill(be, a->d_emb, 0, (size_t)T * H);
    rt_norm_bwd_rms(m, x->emb, op->W, x->e_rstd, a->tmp_h, a->d_emb, op->dW, T, H);
    be->copy_2d(be, a->tmp_h, H, a->d_cat + H, 2 * H, T, H);
    be->fill(be, a->d_mtp_h, 0, (size_t)T * H);
    rt_norm_bwd_rms(m, hidden_in(a, op->mtp), op->W + H, x->h_rstd, a->tmp_h, a->d_mtp_h,
                    op->dW ? op->dW + H : NULL, T, H);
    a->mtp_pending = true;
}

RT_EXEC(rt_ex_mtp_embed_bwd)
{
    rt_acts *a = m->acts;
    const rt_dev_batch x = ahead(b, op->mtp, false);
    m->be->embedding_bwd(m->be, &x, a->d_emb, a->dword, NULL, NULL, a->H);
}
