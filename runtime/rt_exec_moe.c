/* Executors of a mixture-of-experts MLP (dropless top-k routing), forward and backward in the graph's
 * order (model/graph.c, "moe."): the router's product and top-k, the tokens' rows gathered into expert
 * order (a host step: the routing's counts), with expert parallelism the rows' all-to-all to the ranks
 * holding their experts (counts first, then the rows, regrouped by local expert) and back, each local
 * expert's two products and activation over its rows, and the weighted combine into the MLP output. Data
 * flow in rt_exec.h. */
#include <string.h>

#include "rt_exec.h"

#define LAYER(m, op) (&(m)->acts->layers[(op)->layer])

/* The MLP's input: the second norm's output (decoder) or the first's (encoder). */
static const float *mlp_input(const rt_acts *a, const rt_layer_acts *l)
{
    return a->decoder ? l->ln2 : l->ln1;
}

RT_EXEC(rt_ex_moe_router)
{
    rt_acts *a = m->acts;
    const rt_layer_acts *l = LAYER(m, op);
    m->be->linear_fwd(m->be, mlp_input(a, l), op->W, op->bias, l->logits, b->T, a->H, a->E);
}

RT_EXEC(rt_ex_moe_route)
{
    rt_acts *a = m->acts;
    const rt_layer_acts *l = LAYER(m, op);
    m->be->moe_route_fwd(m->be, l->logits, l->idx, l->w, b->T, a->E, a->k);
}

/* Rows in expert order: a stable counting sort of the choices on the device (moe_group), whose counts, the
 * shapes of every expert's products, are read back (the step's one read a MoE layer and micro-batch), then
 * the rows gathered on the device. */
RT_EXEC(rt_ex_moe_permute)
{
    rt_acts *a = m->acts;
    rt_backend *be = m->be;
    rt_layer_acts *l = &a->layers[op->layer];
    const int R = b->T * a->k, E = a->E;
    be->moe_group(be, l->idx, R, E, a->k, l->order, l->pos, l->counts_dev);
    be->download(be, l->counts, l->counts_dev, (size_t)E * sizeof(int));
    be->gather_rows(be, l->xm, mlp_input(a, l), l->order, R, a->H);
    if (a->ep == 1) { /* every expert here: the local rows are these */
        memcpy(l->counts_local, l->counts, (size_t)E * sizeof(int));
        l->rows_local = R;
    }
}

/* The counts' and rows' exchange of the dispatch: this rank's rows for member j are those of experts
 * [j E/x, (j+1) E/x), contiguous in xm; each member's rows arrive in rbuf source by source, and are
 * regrouped by local expert into x (loc_from: each local row's place in rbuf). */
RT_EXEC(rt_ex_moe_dispatch)
{
    rt_acts *a = m->acts;
    rt_backend *be = m->be;
    rt_layer_acts *l = &a->layers[op->layer];
    const int x = a->ep, El = a->E / x, H = a->H;
    (void)b;
    for (int j = 0; j < x; j++) {
        l->sent[j] = 0;
        for (int e = 0; e < El; e++)
            l->sent[j] += l->counts[j * El + e];
    }
    if (m->comm->expert_alltoall_ints(m->comm, l->counts, l->received_by, El)) m->comm_failed = 1;
    l->rows_local = 0;
    for (int i = 0; i < x; i++) {
        l->received[i] = 0;
        for (int e = 0; e < El; e++)
            l->received[i] += l->received_by[i * El + e];
        l->rows_local += l->received[i];
    }
    int *loc_from = a->host_idx, *send_f = loc_from + l->rows_local, *recv_f = send_f + x;
    for (int i = 0; i < x; i++)
        send_f[i] = l->sent[i] * H, recv_f[i] = l->received[i] * H;
    if (m->comm->expert_alltoallv(m->comm, l->xm, send_f, a->rbuf, recv_f)) m->comm_failed = 1;
    int row = 0;
    for (int e = 0; e < El; e++) {
        l->counts_local[e] = 0;
        for (int i = 0, off = 0; i < x; off += l->received[i], i++) {
            int first = off;
            for (int q = 0; q < e; q++)
                first += l->received_by[i * El + q];
            for (int r = 0; r < l->received_by[i * El + e]; r++)
                loc_from[row++] = first + r;
            l->counts_local[e] += l->received_by[i * El + e];
        }
    }
    be->upload(be, l->loc_from, loc_from, (size_t)l->rows_local * sizeof(int));
    be->gather_rows(be, l->x, a->rbuf, l->loc_from, l->rows_local, H);
}

/* Rows back to the ranks their tokens live on: local rows to their places in rbuf, then the reverse
 * all-to-all into eym (this rank's rows, in its expert order). */
static void send_back(rt_model *m, const rt_layer_acts *l, const float *local, float *mine)
{
    rt_acts *a = m->acts;
    rt_backend *be = m->be;
    const int x = a->ep, H = a->H;
    int *send_f = a->host_idx, *recv_f = send_f + x;
    for (int i = 0; i < x; i++)
        send_f[i] = l->received[i] * H, recv_f[i] = l->sent[i] * H;
    be->fill(be, a->rbuf, 0, (size_t)l->rows_local * H);
    be->scatter_add_rows(be, a->rbuf, local, l->loc_from, l->rows_local, H);
    if (m->comm->expert_alltoallv(m->comm, a->rbuf, send_f, mine, recv_f)) m->comm_failed = 1;
}

/* This rank's rows out to the ranks holding their experts, regrouped by local expert (as the dispatch). */
static void send_out(rt_model *m, const rt_layer_acts *l, const float *mine, float *local)
{
    rt_acts *a = m->acts;
    rt_backend *be = m->be;
    const int x = a->ep, H = a->H;
    int *send_f = a->host_idx, *recv_f = send_f + x;
    for (int i = 0; i < x; i++)
        send_f[i] = l->sent[i] * H, recv_f[i] = l->received[i] * H;
    if (m->comm->expert_alltoallv(m->comm, mine, send_f, a->rbuf, recv_f)) m->comm_failed = 1;
    be->gather_rows(be, local, a->rbuf, l->loc_from, l->rows_local, H);
}

RT_EXEC(rt_ex_moe_combine)
{
    (void)b;
    const rt_layer_acts *l = LAYER(m, op);
    send_back(m, l, l->ey, l->eym);
}

RT_EXEC(rt_ex_moe_combine_bwd)
{
    (void)b;
    rt_acts *a = m->acts;
    send_out(m, LAYER(m, op), a->d_eym, a->d_ey);
}

RT_EXEC(rt_ex_moe_dispatch_bwd)
{
    (void)b;
    rt_acts *a = m->acts;
    send_back(m, LAYER(m, op), a->d_x, a->d_xm);
}

/* A loop over the layer's experts: e, its first row and its row count n (counts from the permutation). */
#define FOR_EXPERTS(l, E, e, first, n)                                                                       \
    for (int e = 0, first = 0, n = (l)->counts_local[0]; e < (E);                                            \
         first += n, e++, n = e < (E) ? (l)->counts_local[e] : 0)

/* Each local expert's product over its rows (n_in -> n_out; weights [n_out, n_in] and biases [n_out] expert
 * after expert): y = x W_e^T + b_e, its data gradient dx = dy W_e (zeroed first) and its weight gradient
 * dW_e += dy^T x, db_e += sum dy. */
static void experts_fwd(rt_model *m, const rt_op *op, const float *x, float *y, int n_in, int n_out)
{
    const rt_acts *a = m->acts;
    const rt_layer_acts *l = &a->layers[op->layer];
    const size_t I = (size_t)n_in, O = (size_t)n_out;
    FOR_EXPERTS(l, a->E / a->ep, e, first, n)
    if (n)
        m->be->linear_fwd(m->be, x + first * I, op->W + e * O * I, op->bias ? op->bias + e * O : NULL,
                          y + first * O, n, n_in, n_out);
}

static void experts_bwd_data(rt_model *m, const rt_op *op, const float *dy, float *dx, int n_in, int n_out)
{
    const rt_acts *a = m->acts;
    const rt_layer_acts *l = &a->layers[op->layer];
    const size_t I = (size_t)n_in, O = (size_t)n_out;
    m->be->fill(m->be, dx, 0, (size_t)l->rows_local * I);
    FOR_EXPERTS(l, a->E / a->ep, e, first, n)
    if (n)
        m->be->linear_bwd(m->be, NULL, op->W + e * O * I, dy + first * O, dx + first * I, NULL, NULL, n, n_in,
                          n_out);
}

static void experts_bwd_weight(rt_model *m, const rt_op *op, const float *x, const float *dy, int n_in,
                               int n_out)
{
    const rt_acts *a = m->acts;
    const rt_layer_acts *l = &a->layers[op->layer];
    const size_t I = (size_t)n_in, O = (size_t)n_out;
    FOR_EXPERTS(l, a->E / a->ep, e, first, n)
    if (n)
        m->be->linear_bwd(m->be, x + first * I, op->W + e * O * I, dy + first * O, NULL, op->dW + e * O * I,
                          op->dbias ? op->dbias + e * O : NULL, n, n_in, n_out);
}

RT_EXEC(rt_ex_moe_fc1)
{
    (void)b; /* the rows per expert come from the routing */
    const rt_layer_acts *l = LAYER(m, op);
    experts_fwd(m, op, l->x, l->eu, m->acts->H, m->acts->Fe1);
}

RT_EXEC(rt_ex_moe_act)
{
    rt_acts *a = m->acts;
    const rt_layer_acts *l = LAYER(m, op);
    const int R = l->rows_local;
    (void)b;
    if (a->swiglu)
        m->be->swiglu_fwd(m->be, l->eu, l->eg, R, a->Fe);
    else
        m->be->gelu_fwd(m->be, l->eu, l->eg, (size_t)R * a->Fe);
}

RT_EXEC(rt_ex_moe_fc2)
{
    (void)b;
    const rt_layer_acts *l = LAYER(m, op);
    experts_fwd(m, op, l->eg, l->ey, m->acts->Fe, m->acts->H);
}

/* v = sum of each token's k expert outputs, weighted; the decoder's residual as the dense MLP's fc2 */
RT_EXEC(rt_ex_moe_unpermute)
{
    rt_acts *a = m->acts;
    rt_backend *be = m->be;
    const rt_layer_acts *l = LAYER(m, op);
    be->moe_combine_fwd(be, l->eym, l->pos, l->w, l->v, b->T, a->k, a->H);
    if (l->sy) be->axpy(be, l->v, l->sy, 1.0f, (size_t)b->T * a->H); /* the shared experts' output */
    if (a->decoder) be->add(be, l->out, l->res1, l->v, (size_t)b->T * a->H);
}

/* ---- backward ---- */

RT_EXEC(rt_ex_moe_unpermute_bwd)
{
    rt_acts *a = m->acts;
    rt_backend *be = m->be;
    const rt_layer_acts *l = LAYER(m, op);
    const float *dv = a->decoder ? a->d_out : a->d_res;
    if (a->decoder) be->copy(be, a->d_res, a->d_out, (size_t)b->T * a->H); /* residual: d(x + y) */
    be->moe_combine_bwd(be, l->eym, l->pos, l->w, dv, a->d_eym, a->d_w, b->T, a->k, a->H);
}

RT_EXEC(rt_ex_moe_fc2_bwd_data)
{
    (void)b;
    experts_bwd_data(m, op, m->acts->d_ey, m->acts->d_eg, m->acts->Fe, m->acts->H);
}

RT_EXEC(rt_ex_moe_fc2_bwd_weight)
{
    (void)b;
    experts_bwd_weight(m, op, LAYER(m, op)->eg, m->acts->d_ey, m->acts->Fe, m->acts->H);
}

RT_EXEC(rt_ex_moe_act_bwd)
{
    rt_acts *a = m->acts;
    const rt_layer_acts *l = LAYER(m, op);
    const int R = l->rows_local;
    (void)b;
    if (a->swiglu)
        m->be->swiglu_bwd(m->be, l->eu, a->d_eg, a->d_eu, R, a->Fe);
    else
        m->be->gelu_bwd(m->be, l->eu, a->d_eg, a->d_eu, (size_t)R * a->Fe);
}

RT_EXEC(rt_ex_moe_fc1_bwd_data)
{
    (void)b;
    experts_bwd_data(m, op, m->acts->d_eu, m->acts->d_x, m->acts->H, m->acts->Fe1);
}

RT_EXEC(rt_ex_moe_fc1_bwd_weight)
{
    (void)b;
    experts_bwd_weight(m, op, LAYER(m, op)->x, m->acts->d_eu, m->acts->H, m->acts->Fe1);
}

/* the rows' gradients back to their tokens: d_mid is the gradient of the MLP's input (the decoder's starts
 * here; the encoder's already holds the residual's part, as the dense MLP's fc1 backward) */
RT_EXEC(rt_ex_moe_permute_bwd)
{
    rt_acts *a = m->acts;
    rt_backend *be = m->be;
    const rt_layer_acts *l = LAYER(m, op);
    if (a->decoder) be->fill(be, a->d_mid, 0, (size_t)b->T * a->H);
    be->scatter_add_rows(be, a->d_mid, a->d_xm, l->order, b->T * a->k, a->H);
}

RT_EXEC(rt_ex_moe_route_bwd)
{
    rt_acts *a = m->acts;
    const rt_layer_acts *l = LAYER(m, op);
    m->be->moe_route_bwd(m->be, l->idx, l->w, a->d_w, a->d_logits, b->T, a->E, a->k);
}

RT_EXEC(rt_ex_moe_router_bwd_data)
{
    rt_acts *a = m->acts;
    m->be->linear_bwd(m->be, NULL, op->W, a->d_logits, a->d_mid, NULL, NULL, b->T, a->H, a->E);
}

RT_EXEC(rt_ex_moe_router_bwd_weight)
{
    rt_acts *a = m->acts;
    const rt_layer_acts *l = LAYER(m, op);
    m->be->linear_bwd(m->be, mlp_input(a, l), op->W, a->d_logits, NULL, op->dW, op->dbias, b->T, a->H, a->E);
}

/* ---- shared experts (DeepSeekMoE): a dense MLP of Fs = shared_experts x Fe beside the router, on every
 * token, its output added to the routed one by the combine; backward after the routed rows' (their input
 * gradient added to the MLP input's, which the permutation's backward started) ---- */

RT_EXEC(rt_ex_moe_shared_fc1)
{
    rt_acts *a = m->acts;
    const rt_layer_acts *l = LAYER(m, op);
    m->be->linear_fwd(m->be, mlp_input(a, l), op->W, op->bias, l->su, b->T, a->H, a->Fs1);
}

RT_EXEC(rt_ex_moe_shared_act)
{
    rt_acts *a = m->acts;
    const rt_layer_acts *l = LAYER(m, op);
    if (a->swiglu)
        m->be->swiglu_fwd(m->be, l->su, l->sg, b->T, a->Fs);
    else
        m->be->gelu_fwd(m->be, l->su, l->sg, (size_t)b->T * a->Fs);
}

RT_EXEC(rt_ex_moe_shared_fc2)
{
    rt_acts *a = m->acts;
    const rt_layer_acts *l = LAYER(m, op);
    m->be->linear_fwd(m->be, l->sg, op->W, op->bias, l->sy, b->T, a->Fs, a->H);
}

/* the MLP output's gradient: d_out (decoder; its residual copy taken by the combine's backward) or d_res */
static const float *mlp_out_grad(const rt_acts *a)
{
    return a->decoder ? a->d_out : a->d_res;
}

RT_EXEC(rt_ex_moe_shared_fc2_bwd_data)
{
    rt_acts *a = m->acts;
    m->be->fill(m->be, a->d_sg, 0, (size_t)b->T * a->Fs);
    m->be->linear_bwd(m->be, NULL, op->W, mlp_out_grad(a), a->d_sg, NULL, NULL, b->T, a->Fs, a->H);
}

RT_EXEC(rt_ex_moe_shared_fc2_bwd_weight)
{
    rt_acts *a = m->acts;
    m->be->linear_bwd(m->be, LAYER(m, op)->sg, op->W, mlp_out_grad(a), NULL, op->dW, op->dbias, b->T, a->Fs,
                      a->H);
}

RT_EXEC(rt_ex_moe_shared_act_bwd)
{
    rt_acts *a = m->acts;
    const rt_layer_acts *l = LAYER(m, op);
    if (a->swiglu)
        m->be->swiglu_bwd(m->be, l->su, a->d_sg, a->d_su, b->T, a->Fs);
    else
        m->be->gelu_bwd(m->be, l->su, a->d_sg, a->d_su, (size_t)b->T * a->Fs);
}

RT_EXEC(rt_ex_moe_shared_fc1_bwd_data)
{
    rt_acts *a = m->acts;
    m->be->linear_bwd(m->be, NULL, op->W, a->d_su, a->d_mid, NULL, NULL, b->T, a->H, a->Fs1);
}

RT_EXEC(rt_ex_moe_shared_fc1_bwd_weight)
{
    rt_acts *a = m->acts;
    const rt_layer_acts *l = LAYER(m, op);
    m->be->linear_bwd(m->be, mlp_input(a, l), op->W, a->d_su, NULL, op->dW, op->dbias, b->T, a->H, a->Fs1);
}
