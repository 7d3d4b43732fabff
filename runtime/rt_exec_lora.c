/* Executors of LoRA's adapters (Hu et al. 2021): beside a frozen target product y = x W^T, y += s x A^T B^T
 * with s = alpha / r, A [r, n_in], B [n_out, r]. Forward keeps u = s x A^T [T, r] for B's gradient; backward,
 * after the product's own data gradient: du = dy B, dB += dy^T u, then (du scaled by s) dA += du^T x and
 * dx += du A, accumulated into the product's input gradient. Each target names its x, y, dy and dx in the
 * data flow of rt_exec.h (rt_exec_layer.c's executors write them). */
#include "rt_exec.h"

typedef struct target {
    const float *x, *dy;
    float *y, *dx;
    int n_in, n_out;
} target;

static target target_of(rt_model *m, const rt_op *op, et_lora_target t)
{
    rt_acts *a = m->acts;
    rt_layer_acts *l = &a->layers[op->layer];
    switch (t) {
    case ET_LORA_QKV:
        return (target){a->decoder ? l->ln1 : rt_layer_input(a, op->layer),
                        a->d_qkv,
                        l->qkv,
                        a->decoder ? a->d_mid : a->d_out,
                        a->H,
                        a->QKV};
    case ET_LORA_PROJ:
        return (target){l->ctx, a->d_res, l->y, a->d_ctx, a->CW, a->H};
    case ET_LORA_FC1:
        return (target){a->decoder ? l->ln2 : l->ln1, a->d_ff2, l->u, a->d_mid, a->H, a->F1};
    case ET_LORA_FC2:
    default:
        return (target){l->g, a->decoder ? a->d_out : a->d_res, l->v, a->d_ff, a->F, a->H};
    }
}

/* u = s x A^T */
static void lora_a_fwd(rt_model *m, const rt_op *op, const rt_dev_batch *b, et_lora_target t)
{
    rt_acts *a = m->acts;
    const target x = target_of(m, op, t);
    float *u = a->layers[op->layer].lora_u[t];
    m->be->linear_fwd(m->be, x.x, op->W, NULL, u, b->T, x.n_in, a->lora_r);
    m->be->scale(m->be, u, a->lora_scale, (size_t)b->T * a->lora_r);
}

/* y += u B^T (fc2 in a decoder: its executor already added the residual, so the layer's output too) */
static void lora_b_fwd(rt_model *m, const rt_op *op, const rt_dev_batch *b, et_lora_target t)
{
    rt_acts *a = m->acts;
    rt_backend *be = m->be;
    const target x = target_of(m, op, t);
    const size_t n = (size_t)b->T * x.n_out;
    be->linear_fwd(be, a->layers[op->layer].lora_u[t], op->W, NULL, a->lora_tmp, b->T, a->lora_r, x.n_out);
    be->axpy(be, x.y, a->lora_tmp, 1.0f, n);
    if (t == ET_LORA_FC2 && a->decoder) be->axpy(be, a->layers[op->layer].out, a->lora_tmp, 1.0f, n);
}

/* du = s dy B (the scale of x A^T's gradient folded in) */
static void lora_b_bwd_data(rt_model *m, const rt_op *op, const rt_dev_batch *b, et_lora_target t)
{
    rt_acts *a = m->acts;
    rt_backend *be = m->be;
    const target x = target_of(m, op, t);
    const size_t n = (size_t)b->T * a->lora_r;
    be->fill(be, a->d_lora, 0, n);
    be->linear_bwd(be, NULL, op->W, x.dy, a->d_lora, NULL, NULL, b->T, a->lora_r, x.n_out);
    be->scale(be, a->d_lora, a->lora_scale, n);
}

/* dB += dy^T u */
static void lora_b_bwd_weight(rt_model *m, const rt_op *op, const rt_dev_batch *b, et_lora_target t)
{
    rt_acts *a = m->acts;
    const target x = target_of(m, op, t);
    m->be->linear_bwd(m->be, a->layers[op->layer].lora_u[t], op->W, x.dy, NULL, op->dW, NULL, b->T, a->lora_r,
                      x.n_out);
}

/* dx += du A */
static void lora_a_bwd_data(rt_model *m, const rt_op *op, const rt_dev_batch *b, et_lora_target t)
{
    rt_acts *a = m->acts;
    const target x = target_of(m, op, t);
    m->be->linear_bwd(m->be, NULL, op->W, a->d_lora, x.dx, NULL, NULL, b->T, x.n_in, a->lora_r);
}

/* dA += du^T x */
static void lora_a_bwd_weight(rt_model *m, const rt_op *op, const rt_dev_batch *b, et_lora_target t)
{
    rt_acts *a = m->acts;
    const target x = target_of(m, op, t);
    m->be->linear_bwd(m->be, x.x, op->W, a->d_lora, NULL, op->dW, NULL, b->T, x.n_in, a->lora_r);
}

#define LORA_EXECUTORS(name, t)                                                                              \
    RT_EXEC(rt_ex_lora_a_##name)                                                                             \
    {                                                                                                        \
        lora_a_fwd(m, op, b, t);                                                                             \
    }                                                                                                        \
    RT_EXEC(rt_ex_lora_b_##name)                                                                             \
    {                                                                                                        \
        lora_b_fwd(m, op, b, t);                                                                             \
    }                                                                                                        \
    RT_EXEC(rt_ex_lora_b_bwd_data_##name)                                                                    \
    {                                                                                                        \
        lora_b_bwd_data(m, op, b, t);                                                                        \
    }                                                                                                        \
    RT_EXEC(rt_ex_lora_b_bwd_weight_##name)                                                                  \
    {                                                                                                        \
        lora_b_bwd_weight(m, op, b, t);                                                                      \
    }                                                                                                        \
    RT_EXEC(rt_ex_lora_a_bwd_data_##name)                                                                    \
    {                                                                                                        \
        lora_a_bwd_data(m, op, b, t);                                                                        \
    }                                                                                                        \
    RT_EXEC(rt_ex_lora_a_bwd_weight_##name)                                                                  \
    {                                                                                                        \
        lora_a_bwd_weight(m, op, b, t);                                                                      \
    }

LORA_EXECUTORS(qkv, ET_LORA_QKV)
LORA_EXECUTORS(proj, ET_LORA_PROJ)
LORA_EXECUTORS(fc1, ET_LORA_FC1)
LORA_EXECUTORS(fc2, ET_LORA_FC2)
