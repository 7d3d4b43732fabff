/* Executors of tensor-train linear layers (same data flow as the dense ones in rt_exec_layer.c): the cost
 * model's contraction order forward, its reverse for the input and core gradients (timed under
 * `.bwd_data`), the bias gradient under `.bwd_weight`. */
#include "rt_exec.h"

static const float *tt_input(const rt_acts *a, const rt_op *op)
{
    const rt_layer_acts *l = &a->layers[op->layer];
    switch (op->role) {
    case RT_ROLE_QKV:
        return a->decoder ? l->ln1 : rt_layer_input(a, op->layer);
    case RT_ROLE_OUT:
        return l->ctx;
    case RT_ROLE_FC1:
        return a->decoder ? l->ln2 : l->ln1;
    default:
        return l->g;
    }
}

static float *tt_output(const rt_acts *a, const rt_op *op)
{
    const rt_layer_acts *l = &a->layers[op->layer];
    return op->role == RT_ROLE_QKV   ? l->qkv
           : op->role == RT_ROLE_OUT ? l->y
           : op->role == RT_ROLE_FC1 ? l->u
                                     : l->v;
}

/* Gradient of the output, as the dense backward ops see it. */
static const float *tt_dy(const rt_acts *a, const rt_op *op)
{
    switch (op->role) {
    case RT_ROLE_QKV:
        return a->d_qkv;
    case RT_ROLE_OUT:
        return a->d_res;
    case RT_ROLE_FC1:
        return a->d_ff2;
    default:
        return a->decoder ? a->d_out : a->d_res;
    }
}

RT_EXEC(rt_ex_tt_fwd)
{
    rt_acts *a = m->acts;
    rt_backend *be = m->be;
    const rt_tt_record *r = op->tt;
    const int T = b->T, n_out = r->n_out, ld = n_out * r->copies;
    float *y = tt_output(a, op);
    for (int c = 0; c < r->copies; c++) {
        /* layers sharing the op (q, k, v) write their columns of the shared rows through a copy */
        be->tt_fwd(be, &r->tt, tt_input(a, op), r->cores[c], r->copies > 1 ? r->tmp : y, r->work[c], T);
        if (r->copies > 1) be->copy_2d(be, y + c * n_out, ld, r->tmp, n_out, T, n_out);
        if (op->bias) be->add_bias(be, y + c * n_out, ld, op->bias + c * n_out, T, n_out);
    }
    if (op->role == RT_ROLE_FC2 && a->decoder)
        be->add(be, a->layers[op->layer].out, a->layers[op->layer].res1, y, (size_t)T * a->H);
}

/* Input and core gradients (the reverse contraction yields both); bias gradients in bwd_weight. */
RT_EXEC(rt_ex_tt_bwd_data)
{
    rt_acts *a = m->acts;
    rt_backend *be = m->be;
    const rt_tt_record *r = op->tt;
    const int T = b->T, n_in = r->n_in, n_out = r->n_out, ld = n_out * r->copies;
    float *dx;
    bool fresh; /* the input gradient starts here, or accumulates onto what is there */
    switch (op->role) {
    case RT_ROLE_QKV:
        dx = a->decoder ? a->d_mid : a->d_out, fresh = a->decoder;
        break;
    case RT_ROLE_OUT:
        dx = a->d_ctx, fresh = true;
        break;
    case RT_ROLE_FC1:
        dx = a->d_mid, fresh = a->decoder;
        break;
    default:
        if (a->decoder) be->copy(be, a->d_res, a->d_out, (size_t)T * a->H);
        dx = a->d_ff, fresh = true;
    }
    if (fresh) be->fill(be, dx, 0, (size_t)T * n_in);
    const float *dy = tt_dy(a, op);
    const float *dy_c = r->copies > 1 ? r->tmp : dy;
    for (int c = 0; c < r->copies; c++) {
        if (r->copies > 1) be->copy_2d(be, r->tmp, n_out, dy + c * n_out, ld, T, n_out);
        /* each copy's workspace still holds its forward intermediates; the input gradient adds up */
        be->tt_bwd(be, &r->tt, tt_input(a, op), r->cores[c], dy_c, dx, r->dcores[c], r->work[c], T);
    }
}

RT_EXEC(rt_ex_tt_bwd_weight)
{
    const rt_tt_record *r = op->tt;
    const int ld = r->n_out * r->copies;
    if (op->dbias) m->be->bias_grad(m->be, op->dbias, tt_dy(m->acts, op), ld, b->T, ld);
}
