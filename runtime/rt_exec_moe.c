/* Executors of a mixture-of-experts MLP (dropless top-k routing, every expert on this rank), forward and
 * backward in the graph's order (model/graph.c, "moe."): the router's product and top-k, the tokens'
 * rows gathered into expert order (the one host step: the routing's counts), each expert's two products
 * and activation over its rows, and the weighted combine into the MLP output. Data flow in rt_exec.h. */
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
    m->be->linear_fwd(m->be, mlp_input(a, l), op->W, NULL, l->logits, b->T, a->H, a->E);
}

RT_EXEC(rt_ex_moe_route)
{
    rt_acts *a = m->acts;
    const rt_layer_acts *l = LAYER(m, op);
    m->be->moe_route_fwd(m->be, l->logits, l->idx, l->w, b->T, a->E, a->k);
}

/* Rows in expert order: a counting sort of the choices on the host (the routing is data: its counts
 * decide every expert's product shape), then the rows gathered on the device. */
RT_EXEC(rt_ex_moe_permute)
{
    rt_acts *a = m->acts;
    rt_backend *be = m->be;
    const rt_layer_acts *l = LAYER(m, op);
    const int R = b->T * a->k, E = a->E;
    /* the host scratch: idx | order | pos (R each), then E + 1 expert starts */
    int *idx = a->host_idx, *order = idx + R, *pos = order + R, *start = pos + R;
    be->download(be, idx, l->idx, (size_t)R * sizeof(int));
    memset(l->counts, 0, (size_t)E * sizeof(int));
    for (int r = 0; r < R; r++)
        l->counts[idx[r]]++;
    start[0] = 0;
    for (int e = 0; e < E; e++)
        start[e + 1] = start[e] + l->counts[e];
    /* order[row] = the row's token, pos[choice] = the choice's row */
    for (int r = 0; r < R; r++) {
        int row = start[idx[r]]++;
        order[row] = r / a->k;
        pos[r] = row;
    }
    be->upload(be, l->order, order, (size_t)R * sizeof(int));
    be->upload(be, l->pos, pos, (size_t)R * sizeof(int));
    be->gather_rows(be, l->x, mlp_input(a, l), l->order, R, a->H);
}

/* A loop over the layer's experts: e, its first row and its row count n (counts from the permutation). */
#define FOR_EXPERTS(l, E, e, first, n)                                                                       \
    for (int e = 0, first = 0, n = (l)->counts[0]; e < (E); first += n, e++, n = e < (E) ? (l)->counts[e] : 0)

RT_EXEC(rt_ex_moe_fc1)
{
    (void)b; /* the rows per expert come from the permutation */
    rt_acts *a = m->acts;
    const rt_layer_acts *l = LAYER(m, op);
    const size_t H = (size_t)a->H, F1 = (size_t)a->Fe1;
    FOR_EXPERTS(l, a->E, e, first, n)
    if (n)
        m->be->linear_fwd(m->be, l->x + first * H, op->W + e * F1 * H, op->bias ? op->bias + e * F1 : NULL,
                          l->eu + first * F1, n, a->H, a->Fe1);
}

RT_EXEC(rt_ex_moe_act)
{
    rt_acts *a = m->acts;
    const rt_layer_acts *l = LAYER(m, op);
    const int R = b->T * a->k;
    if (a->swiglu)
        m->be->swiglu_fwd(m->be, l->eu, l->eg, R, a->Fe);
    else
        m->be->gelu_fwd(m->be, l->eu, l->eg, (size_t)R * a->Fe);
}

RT_EXEC(rt_ex_moe_fc2)
{
    (void)b; /* the rows per expert come from the permutation */
    rt_acts *a = m->acts;
    const rt_layer_acts *l = LAYER(m, op);
    const size_t H = (size_t)a->H, Fe = (size_t)a->Fe;
    FOR_EXPERTS(l, a->E, e, first, n)
    if (n)
        m->be->linear_fwd(m->be, l->eg + first * Fe, op->W + e * H * Fe, op->bias ? op->bias + e * H : NULL,
                          l->ey + first * H, n, a->Fe, a->H);
}

/* v = sum of each token's k expert outputs, weighted; the decoder's residual as the dense MLP's fc2 */
RT_EXEC(rt_ex_moe_unpermute)
{
    rt_acts *a = m->acts;
    rt_backend *be = m->be;
    const rt_layer_acts *l = LAYER(m, op);
    be->moe_combine_fwd(be, l->ey, l->pos, l->w, l->v, b->T, a->k, a->H);
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
    be->moe_combine_bwd(be, l->ey, l->pos, l->w, dv, a->d_ey, a->d_w, b->T, a->k, a->H);
}

RT_EXEC(rt_ex_moe_fc2_bwd_data)
{
    rt_acts *a = m->acts;
    const rt_layer_acts *l = LAYER(m, op);
    const size_t H = (size_t)a->H, Fe = (size_t)a->Fe;
    m->be->fill(m->be, a->d_eg, 0, (size_t)b->T * a->k * Fe);
    FOR_EXPERTS(l, a->E, e, first, n)
    if (n)
        m->be->linear_bwd(m->be, NULL, op->W + e * H * Fe, a->d_ey + first * H, a->d_eg + first * Fe, NULL,
                          NULL, n, a->Fe, a->H);
}

RT_EXEC(rt_ex_moe_fc2_bwd_weight)
{
    (void)b; /* the rows per expert come from the permutation */
    rt_acts *a = m->acts;
    const rt_layer_acts *l = LAYER(m, op);
    const size_t H = (size_t)a->H, Fe = (size_t)a->Fe;
    FOR_EXPERTS(l, a->E, e, first, n)
    if (n)
        m->be->linear_bwd(m->be, l->eg + first * Fe, op->W + e * H * Fe, a->d_ey + first * H, NULL,
                          op->dW + e * H * Fe, op->dbias ? op->dbias + e * H : NULL, n, a->Fe, a->H);
}

RT_EXEC(rt_ex_moe_act_bwd)
{
    rt_acts *a = m->acts;
    const rt_layer_acts *l = LAYER(m, op);
    const int R = b->T * a->k;
    if (a->swiglu)
        m->be->swiglu_bwd(m->be, l->eu, a->d_eg, a->d_eu, R, a->Fe);
    else
        m->be->gelu_bwd(m->be, l->eu, a->d_eg, a->d_eu, (size_t)R * a->Fe);
}

RT_EXEC(rt_ex_moe_fc1_bwd_data)
{
    rt_acts *a = m->acts;
    const rt_layer_acts *l = LAYER(m, op);
    const size_t H = (size_t)a->H, F1 = (size_t)a->Fe1;
    m->be->fill(m->be, a->d_x, 0, (size_t)b->T * a->k * H);
    FOR_EXPERTS(l, a->E, e, first, n)
    if (n)
        m->be->linear_bwd(m->be, NULL, op->W + e * F1 * H, a->d_eu + first * F1, a->d_x + first * H, NULL,
                          NULL, n, a->H, a->Fe1);
}

RT_EXEC(rt_ex_moe_fc1_bwd_weight)
{
    (void)b; /* the rows per expert come from the permutation */
    rt_acts *a = m->acts;
    const rt_layer_acts *l = LAYER(m, op);
    const size_t H = (size_t)a->H, F1 = (size_t)a->Fe1;
    FOR_EXPERTS(l, a->E, e, first, n)
    if (n)
        m->be->linear_bwd(m->be, l->x + first * H, op->W + e * F1 * H, a->d_eu + first * F1, NULL,
                          op->dW + e * F1 * H, op->dbias ? op->dbias + e * F1 : NULL, n, a->H, a->Fe1);
}

/* the rows' gradients back to their tokens: d_mid is the gradient of the MLP's input (the decoder's starts
 * here; the encoder's already holds the residual's part, as the dense MLP's fc1 backward) */
RT_EXEC(rt_ex_moe_permute_bwd)
{
    rt_acts *a = m->acts;
    rt_backend *be = m->be;
    const rt_layer_acts *l = LAYER(m, op);
    if (a->decoder) be->fill(be, a->d_mid, 0, (size_t)b->T * a->H);
    be->scatter_add_rows(be, a->d_mid, a->d_x, l->order, b->T * a->k, a->H);
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
    m->be->linear_bwd(m->be, mlp_input(a, l), op->W, a->d_logits, NULL, op->dW, NULL, b->T, a->H, a->E);
}
