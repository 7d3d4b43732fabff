/* Executors of the loss heads: masked-LM (gather the scored rows, transform, GELU, layer norm, decoder) and
 * causal-LM (final layer norm, decoder), the softmax cross-entropy, and their backward. */
#include "rt_exec.h"

static const float *last_output(const rt_acts *a)
{
    return a->layers[a->L_main - 1].out;
}

static const float *head_input(const rt_acts *a)
{
    return a->decoder ? a->fin : a->t3;
}

RT_EXEC(rt_ex_gather)
{
    (void)op;
    rt_acts *a = m->acts;
    m->be->gather_rows(m->be, a->hs, last_output(a), b->pred_rows, b->P, a->H);
}

RT_EXEC(rt_ex_transform)
{
    rt_acts *a = m->acts;
    m->be->linear_fwd(m->be, a->hs, op->W, op->bias, a->t1, b->P, a->H, a->H);
}

RT_EXEC(rt_ex_head_gelu)
{
    (void)op;
    rt_acts *a = m->acts;
    m->be->gelu_fwd(m->be, a->t1, a->t2, (size_t)b->P * a->H);
}

RT_EXEC(rt_ex_head_ln)
{
    rt_acts *a = m->acts;
    m->be->layernorm_fwd(m->be, a->t2, op->W, op->bias, a->t3, a->t3_mean, a->t3_rstd, b->P, a->H);
}

RT_EXEC(rt_ex_final_ln)
{
    rt_acts *a = m->acts;
    rt_norm_fwd(m, last_output(a), op->W, op->bias, a->fin, a->fin_mean, a->fin_rstd, b->T, a->H);
}

RT_EXEC(rt_ex_decoder)
{
    (void)op;
    rt_acts *a = m->acts;
    m->be->linear_fwd(m->be, head_input(a), a->dec_W, a->dec_b, a->logits, b->P, a->H, a->V);
}

RT_EXEC(rt_ex_loss)
{
    (void)op;
    rt_acts *a = m->acts;
    m->be->cross_entropy(m->be, a->logits, b, a->dlogits, a->V, a->norm, rt_model_scalar(m, RT_SC_LOSS));
}

RT_EXEC(rt_ex_decoder_bwd_data)
{
    (void)op;
    rt_acts *a = m->acts;
    rt_backend *be = m->be;
    be->fill(be, a->d_head, 0, (size_t)b->P * a->H);
    be->linear_bwd(be, NULL, a->dec_W, a->dlogits, a->d_head, NULL, NULL, b->P, a->H, a->V);
}

RT_EXEC(rt_ex_decoder_bwd_weight)
{
    (void)op;
    rt_acts *a = m->acts;
    m->be->linear_bwd(m->be, head_input(a), a->dec_W, a->dlogits, NULL, a->dec_dW, a->dec_db, b->P, a->H,
                      a->V);
}

RT_EXEC(rt_ex_head_ln_bwd)
{
    rt_acts *a = m->acts;
    rt_backend *be = m->be;
    be->fill(be, a->d_head2, 0, (size_t)b->P * a->H);
    /* a frozen head's norm (LoRA): its gradients to scratch */
    float *dg = op->dW ? op->dW : a->frozen_grad, *db = op->dW ? op->dbias : a->frozen_grad + a->H;
    be->layernorm_bwd(be, a->t2, op->W, a->t3_mean, a->t3_rstd, a->d_head, a->d_head2, dg, db, b->P, a->H);
}

RT_EXEC(rt_ex_head_gelu_bwd)
{
    (void)op;
    rt_acts *a = m->acts;
    m->be->gelu_bwd(m->be, a->t1, a->d_head2, a->d_head, (size_t)b->P * a->H);
}

RT_EXEC(rt_ex_transform_bwd_data)
{
    rt_acts *a = m->acts;
    rt_backend *be = m->be;
    be->fill(be, a->d_head2, 0, (size_t)b->P * a->H);
    be->linear_bwd(be, NULL, op->W, a->d_head, a->d_head2, NULL, NULL, b->P, a->H, a->H);
}

RT_EXEC(rt_ex_transform_bwd_weight)
{
    rt_acts *a = m->acts;
    m->be->linear_bwd(m->be, a->hs, op->W, a->d_head, NULL, op->dW, op->dbias, b->P, a->H, a->H);
}

RT_EXEC(rt_ex_gather_bwd)
{
    (void)op;
    rt_acts *a = m->acts;
    rt_backend *be = m->be;
    be->fill(be, a->d_out, 0, (size_t)b->T * a->H);
    be->scatter_add_rows(be, a->d_out, a->d_head2, b->pred_rows, b->P, a->H);
}

RT_EXEC(rt_ex_final_ln_bwd)
{
    rt_acts *a = m->acts;
    rt_backend *be = m->be;
    /* causal rows: scored position p is token row p (pred_rows is the identity) */
    be->fill(be, a->d_out, 0, (size_t)b->T * a->H);
    rt_norm_bwd(m, last_output(a), op->W, a->fin_mean, a->fin_rstd, a->d_head, a->d_out, op->dW, op->dbias,
                b->T, a->H);
    rt_mtp_add_pending(m, b); /* the first prediction module read the last layer's output too */
}

RT_EXEC(rt_ex_nothing)
{
    (void)m, (void)op, (void)b;
}
