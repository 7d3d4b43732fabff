#define _POSIX_C_SOURCE 200809L
#include "rt_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analytic.h"
#include "rng.h"
#include "rt_kernels.h"
#include "rt_tt.h"
#include "wall_clock.h"

typedef void (*rt_exec_fn)(rt_model *m, const rt_op *op, const rt_batch *b);

/* One graph op bound to its kernel: the layer it belongs to and the parameters it touches. */
/* Linear layers that are tensor trains: q, k, v (3 copies), out, fc1, fc2. */
enum { ROLE_QKV, ROLE_OUT, ROLE_FC1, ROLE_FC2 };

struct rt_op {
    rt_exec_fn exec;
    int layer;
    float *W, *bias, *dW, *dbias; /* weight and bias of this op's layer (or LN gamma/beta) */
    int n_in, n_out;
    /* tensor-train ops: the layer (order from the cost model), cores and workspace per copy */
    int role, copies;
    rt_tt_layer *tt;
    float *cores[3], *dcores[3], *work[3], *tmp;
};

/* Activations of one layer (T_cap rows each); names follow the encoder, the decoder reuses them:
 *   encoder: qkv ctx y | res1 = x + y, ln1 = LN(res1) | u = fc1, g = GELU, v = fc2 | res2 = ln1 + v, out =
 * LN(res2) decoder: ln1 = LN(x) | qkv ctx y | res1 = x + y, ln2 = LN(res1) | u g v | out = res1 + v */
typedef struct layer_act {
    float *qkv, *probs, *ctx, *y, *res1, *ln1, *ln2, *u, *g, *v, *res2, *out;
    float *ln1_mean, *ln1_rstd, *ln2_mean, *ln2_rstd;
} layer_act;

/* Everything the executors share, hung off rt_model::act (one allocation). */
typedef struct state {
    int H, F, A, V, L, decoder;
    layer_act *layers;
    float *emb, *x0, *emb_mean, *emb_rstd;        /* embeddings output and (encoder) its layer norm */
    float *hs, *t1, *t2, *t3, *t3_mean, *t3_rstd; /* masked-LM head, P_cap rows */
    float *fin, *fin_mean, *fin_rstd;             /* causal head: final layer norm */
    float *logits, *dlogits;                      /* P_cap x V */
    float *d_out, *d_res, *d_mid, *d_ctx, *d_qkv, *d_ff, *d_ff2, *d_probs, *d_head, *d_head2;
    float *word, *dword, *pos, *dpos, *type, *dtype, *dec_W, *dec_dW, *dec_b, *dec_db;
    float *emb_g, *emb_b, *emb_dg, *emb_db;
    int *zeros;  /* token types: all 0 */
    double norm; /* loss normaliser of the current micro-batch */
    size_t probs_cap;
} state;

#define ST(m) ((state *)(m)->act)

/* ---- parameter lookup ---- */

static int param_index(const et_graph *g, const char *id)
{
    for (int i = 0; i < g->n_params; i++)
        if (strcmp(g->params[i].id, id) == 0) return i;
    return -1;
}

static float *param(rt_model *m, const char *id, float **grad)
{
    int i = param_index(&m->graph, id);
    if (i < 0) return NULL;
    if (grad) *grad = m->grads + m->param_offset[i];
    return m->params + m->param_offset[i];
}

static void bind(rt_model *m, rt_op *op, const char *prefix, const char *w, const char *b)
{
    char id[256];
    snprintf(id, sizeof id, "%s.%s", prefix, w);
    op->W = param(m, id, &op->dW);
    if (b) {
        snprintf(id, sizeof id, "%s.%s", prefix, b);
        op->bias = param(m, id, &op->dbias);
    }
}

/* ---- executors: embeddings ---- */

static void ex_embed(rt_model *m, const rt_op *op, const rt_batch *b)
{
    (void)op;
    state *s = ST(m);
    rt_embedding_fwd_f(b->tokens, b->positions, s->type ? s->zeros : NULL, s->word, s->pos, s->type,
                       s->decoder ? s->x0 : s->emb, b->T, s->H);
}

static void ex_embed_ln(rt_model *m, const rt_op *op, const rt_batch *b)
{
    (void)op;
    state *s = ST(m);
    rt_layernorm_fwd_f(s->emb, s->emb_g, s->emb_b, s->x0, s->emb_mean, s->emb_rstd, b->T, s->H);
}

static void ex_embed_ln_bwd(rt_model *m, const rt_op *op, const rt_batch *b)
{
    (void)op;
    state *s = ST(m);
    memset(s->d_res, 0, sizeof(float) * b->T * s->H);
    rt_layernorm_bwd_f(s->emb, s->emb_g, s->emb_mean, s->emb_rstd, s->d_out, s->d_res, s->emb_dg, s->emb_db,
                       b->T, s->H);
    memcpy(s->d_out, s->d_res, sizeof(float) * b->T * s->H);
}

static void ex_embed_bwd(rt_model *m, const rt_op *op, const rt_batch *b)
{
    (void)op;
    state *s = ST(m);
    rt_embedding_bwd_f(b->tokens, b->positions, s->type ? s->zeros : NULL, s->d_out, s->dword, s->dpos,
                       s->dtype, b->T, s->H);
}

/* ---- executors: one transformer layer ---- */

static const float *layer_input(const state *s, int i)
{
    return i == 0 ? s->x0 : s->layers[i - 1].out;
}

static void ex_qkv(rt_model *m, const rt_op *op, const rt_batch *b)
{
    state *s = ST(m);
    layer_act *a = &s->layers[op->layer];
    rt_linear_fwd_f(s->decoder ? a->ln1 : layer_input(s, op->layer), op->W, op->bias, a->qkv, b->T, s->H,
                    3 * s->H);
}

static void ex_scores(rt_model *m, const rt_op *op, const rt_batch *b)
{
    state *s = ST(m);
    rt_attn_scores_fwd_f(s->layers[op->layer].qkv, s->layers[op->layer].probs, b->offsets, b->B, s->H, s->A);
}

static void ex_softmax(rt_model *m, const rt_op *op, const rt_batch *b)
{
    state *s = ST(m);
    rt_attn_softmax_fwd_f(s->layers[op->layer].probs, b->offsets, b->B, s->A, s->decoder);
}

static void ex_context(rt_model *m, const rt_op *op, const rt_batch *b)
{
    state *s = ST(m);
    layer_act *a = &s->layers[op->layer];
    rt_attn_context_fwd_f(a->qkv, a->probs, a->ctx, b->offsets, b->B, s->H, s->A);
}

static void ex_attn_out(rt_model *m, const rt_op *op, const rt_batch *b)
{
    state *s = ST(m);
    layer_act *a = &s->layers[op->layer];
    rt_linear_fwd_f(a->ctx, op->W, op->bias, a->y, b->T, s->H, s->H);
}

static void add(float *out, const float *x, const float *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = x[i] + y[i];
}

/* encoder: LN(x + y); decoder: LN(x) before attention */
static void ex_attn_ln(rt_model *m, const rt_op *op, const rt_batch *b)
{
    state *s = ST(m);
    layer_act *a = &s->layers[op->layer];
    const float *x = layer_input(s, op->layer);
    if (s->decoder) {
        rt_layernorm_fwd_f(x, op->W, op->bias, a->ln1, a->ln1_mean, a->ln1_rstd, b->T, s->H);
    } else {
        add(a->res1, x, a->y, (size_t)b->T * s->H);
        rt_layernorm_fwd_f(a->res1, op->W, op->bias, a->ln1, a->ln1_mean, a->ln1_rstd, b->T, s->H);
    }
}

/* encoder: LN(ln1 + v); decoder: LN(x + y) before the MLP */
static void ex_mlp_ln(rt_model *m, const rt_op *op, const rt_batch *b)
{
    state *s = ST(m);
    layer_act *a = &s->layers[op->layer];
    if (s->decoder) {
        add(a->res1, layer_input(s, op->layer), a->y, (size_t)b->T * s->H);
        rt_layernorm_fwd_f(a->res1, op->W, op->bias, a->ln2, a->ln2_mean, a->ln2_rstd, b->T, s->H);
    } else {
        add(a->res2, a->ln1, a->v, (size_t)b->T * s->H);
        rt_layernorm_fwd_f(a->res2, op->W, op->bias, a->out, a->ln2_mean, a->ln2_rstd, b->T, s->H);
    }
}

static void ex_fc1(rt_model *m, const rt_op *op, const rt_batch *b)
{
    state *s = ST(m);
    layer_act *a = &s->layers[op->layer];
    rt_linear_fwd_f(s->decoder ? a->ln2 : a->ln1, op->W, op->bias, a->u, b->T, s->H, s->F);
}

static void ex_gelu(rt_model *m, const rt_op *op, const rt_batch *b)
{
    state *s = ST(m);
    layer_act *a = &s->layers[op->layer];
    rt_gelu_fwd_f(a->u, a->g, (size_t)b->T * s->F);
}

static void ex_fc2(rt_model *m, const rt_op *op, const rt_batch *b)
{
    state *s = ST(m);
    layer_act *a = &s->layers[op->layer];
    rt_linear_fwd_f(a->g, op->W, op->bias, a->v, b->T, s->F, s->H);
    if (s->decoder) add(a->out, a->res1, a->v, (size_t)b->T * s->H); /* residual */
}

/* backward, in the graph's order; d_out holds dL/d(layer output) when a layer's backward starts */

static void ex_mlp_ln_bwd(rt_model *m, const rt_op *op, const rt_batch *b)
{
    state *s = ST(m);
    layer_act *a = &s->layers[op->layer];
    size_t n = (size_t)b->T * s->H;
    if (s->decoder) { /* d_res += LN2'(d_mid): gradient of x + y */
        rt_layernorm_bwd_f(a->res1, op->W, a->ln2_mean, a->ln2_rstd, s->d_mid, s->d_res, op->dW, op->dbias,
                           b->T, s->H);
    } else { /* dres2 -> d_res (the gradient of both ln1 and v) */
        memset(s->d_res, 0, sizeof(float) * n);
        rt_layernorm_bwd_f(a->res2, op->W, a->ln2_mean, a->ln2_rstd, s->d_out, s->d_res, op->dW, op->dbias,
                           b->T, s->H);
        memcpy(s->d_mid, s->d_res, sizeof(float) * n); /* d ln1 accumulates here */
    }
}

static void ex_fc2_bwd_data(rt_model *m, const rt_op *op, const rt_batch *b)
{
    state *s = ST(m);
    const float *dv = s->decoder ? s->d_out : s->d_res;
    if (s->decoder) memcpy(s->d_res, s->d_out, sizeof(float) * b->T * s->H); /* residual: d(x + y) */
    memset(s->d_ff, 0, sizeof(float) * b->T * s->F);
    rt_linear_bwd_f(NULL, op->W, dv, s->d_ff, NULL, NULL, b->T, s->F, s->H);
}

static void ex_fc2_bwd_weight(rt_model *m, const rt_op *op, const rt_batch *b)
{
    state *s = ST(m);
    rt_linear_bwd_f(s->layers[op->layer].g, op->W, s->decoder ? s->d_out : s->d_res, NULL, op->dW, op->dbias,
                    b->T, s->F, s->H);
}

static void ex_gelu_bwd(rt_model *m, const rt_op *op, const rt_batch *b)
{
    state *s = ST(m);
    rt_gelu_bwd_f(s->layers[op->layer].u, s->d_ff, s->d_ff2, (size_t)b->T * s->F);
}

static void ex_fc1_bwd_data(rt_model *m, const rt_op *op, const rt_batch *b)
{
    state *s = ST(m);
    if (s->decoder) memset(s->d_mid, 0, sizeof(float) * b->T * s->H);
    rt_linear_bwd_f(NULL, op->W, s->d_ff2, s->d_mid, NULL, NULL, b->T, s->H, s->F);
}

static void ex_fc1_bwd_weight(rt_model *m, const rt_op *op, const rt_batch *b)
{
    state *s = ST(m);
    layer_act *a = &s->layers[op->layer];
    rt_linear_bwd_f(s->decoder ? a->ln2 : a->ln1, op->W, s->d_ff2, NULL, op->dW, op->dbias, b->T, s->H, s->F);
}

/* encoder: dres1 = LN1'(d_mid) is the gradient of both x and y -> d_res (y) and d_out (x);
 * decoder: d_out = d_res + LN1'(d_mid) (x feeds the residual and the layer norm) */
static void ex_attn_ln_bwd(rt_model *m, const rt_op *op, const rt_batch *b)
{
    state *s = ST(m);
    layer_act *a = &s->layers[op->layer];
    size_t n = (size_t)b->T * s->H;
    if (s->decoder) {
        memcpy(s->d_out, s->d_res, sizeof(float) * n);
        rt_layernorm_bwd_f(layer_input(s, op->layer), op->W, a->ln1_mean, a->ln1_rstd, s->d_mid, s->d_out,
                           op->dW, op->dbias, b->T, s->H);
    } else {
        memset(s->d_res, 0, sizeof(float) * n);
        rt_layernorm_bwd_f(a->res1, op->W, a->ln1_mean, a->ln1_rstd, s->d_mid, s->d_res, op->dW, op->dbias,
                           b->T, s->H);
        memcpy(s->d_out, s->d_res, sizeof(float) * n);
    }
}

/* dy is d_res in both architectures at this point */
static void ex_attn_out_bwd_data(rt_model *m, const rt_op *op, const rt_batch *b)
{
    state *s = ST(m);
    memset(s->d_ctx, 0, sizeof(float) * b->T * s->H);
    rt_linear_bwd_f(NULL, op->W, s->d_res, s->d_ctx, NULL, NULL, b->T, s->H, s->H);
}

static void ex_attn_out_bwd_weight(rt_model *m, const rt_op *op, const rt_batch *b)
{
    state *s = ST(m);
    rt_linear_bwd_f(s->layers[op->layer].ctx, op->W, s->d_res, NULL, op->dW, op->dbias, b->T, s->H, s->H);
}

static void ex_context_bwd(rt_model *m, const rt_op *op, const rt_batch *b)
{
    state *s = ST(m);
    layer_act *a = &s->layers[op->layer];
    rt_attn_context_bwd_f(a->qkv, a->probs, s->d_ctx, s->d_qkv, s->d_probs, b->offsets, b->B, s->H, s->A);
}

static void ex_softmax_bwd(rt_model *m, const rt_op *op, const rt_batch *b)
{
    state *s = ST(m);
    rt_attn_softmax_bwd_f(s->layers[op->layer].probs, s->d_probs, b->offsets, b->B, s->H, s->A);
}

static void ex_scores_bwd(rt_model *m, const rt_op *op, const rt_batch *b)
{
    state *s = ST(m);
    rt_attn_scores_bwd_f(s->layers[op->layer].qkv, s->d_probs, s->d_qkv, b->offsets, b->B, s->H, s->A);
}

static void ex_qkv_bwd_data(rt_model *m, const rt_op *op, const rt_batch *b)
{
    state *s = ST(m);
    if (s->decoder) { /* gradient of LN1's output */
        memset(s->d_mid, 0, sizeof(float) * b->T * s->H);
        rt_linear_bwd_f(NULL, op->W, s->d_qkv, s->d_mid, NULL, NULL, b->T, s->H, 3 * s->H);
    } else { /* encoder: x also feeds the residual, already in d_out */
        rt_linear_bwd_f(NULL, op->W, s->d_qkv, s->d_out, NULL, NULL, b->T, s->H, 3 * s->H);
    }
}

static void ex_qkv_bwd_weight(rt_model *m, const rt_op *op, const rt_batch *b)
{
    state *s = ST(m);
    layer_act *a = &s->layers[op->layer];
    rt_linear_bwd_f(s->decoder ? a->ln1 : layer_input(s, op->layer), op->W, s->d_qkv, NULL, op->dW, op->dbias,
                    b->T, s->H, 3 * s->H);
}

/* ---- executors: tensor-train linear layers (same data flow as the dense ones above) ---- */

static const float *tt_input(const state *s, const rt_op *op)
{
    const layer_act *a = &s->layers[op->layer];
    switch (op->role) {
    case ROLE_QKV:
        return s->decoder ? a->ln1 : layer_input(s, op->layer);
    case ROLE_OUT:
        return a->ctx;
    case ROLE_FC1:
        return s->decoder ? a->ln2 : a->ln1;
    default:
        return a->g;
    }
}

static float *tt_output(const state *s, const rt_op *op)
{
    const layer_act *a = &s->layers[op->layer];
    return op->role == ROLE_QKV ? a->qkv : op->role == ROLE_OUT ? a->y : op->role == ROLE_FC1 ? a->u : a->v;
}

static void ex_tt_fwd(rt_model *m, const rt_op *op, const rt_batch *b)
{
    state *s = ST(m);
    const int T = b->T, n_out = op->n_out, ld = n_out * op->copies;
    float *y = tt_output(s, op);
    for (int c = 0; c < op->copies; c++) {
        rt_tt_fwd_f(op->tt, tt_input(s, op), op->cores[c], op->tmp, op->work[c], T);
        for (int t = 0; t < T; t++)
            for (int j = 0; j < n_out; j++)
                y[(size_t)t * ld + c * n_out + j] =
                    op->tmp[(size_t)t * n_out + j] + (op->bias ? op->bias[c * n_out + j] : 0);
    }
    if (op->role == ROLE_FC2 && s->decoder)
        add(s->layers[op->layer].out, s->layers[op->layer].res1, y, (size_t)T * s->H);
}

/* Gradient of the output, as the dense backward ops see it. */
static const float *tt_dy(const state *s, const rt_op *op)
{
    switch (op->role) {
    case ROLE_QKV:
        return s->d_qkv;
    case ROLE_OUT:
        return s->d_res;
    case ROLE_FC1:
        return s->d_ff2;
    default:
        return s->decoder ? s->d_out : s->d_res;
    }
}

/* Input and core gradients (the reverse contraction yields both); bias gradients in bwd_weight. */
static void ex_tt_bwd_data(rt_model *m, const rt_op *op, const rt_batch *b)
{
    state *s = ST(m);
    const int T = b->T, n_in = op->n_in, n_out = op->n_out, ld = n_out * op->copies;
    float *dx;
    switch (op->role) { /* where the input gradient goes, and whether it is fresh or accumulated */
    case ROLE_QKV:
        dx = s->decoder ? s->d_mid : s->d_out;
        if (s->decoder) memset(dx, 0, sizeof(float) * T * n_in);
        break;
    case ROLE_OUT:
        dx = s->d_ctx, memset(dx, 0, sizeof(float) * T * n_in);
        break;
    case ROLE_FC1:
        dx = s->d_mid;
        if (s->decoder) memset(dx, 0, sizeof(float) * T * n_in);
        break;
    default:
        if (s->decoder) memcpy(s->d_res, s->d_out, sizeof(float) * T * s->H);
        dx = s->d_ff, memset(dx, 0, sizeof(float) * T * n_in);
    }
    const float *dy = tt_dy(s, op);
    float *dy_c = op->tmp, *dx_c = op->tmp + (size_t)T * n_out;
    for (int c = 0; c < op->copies; c++) {
        for (int t = 0; t < T; t++)
            memcpy(dy_c + (size_t)t * n_out, dy + (size_t)t * ld + c * n_out, sizeof(float) * n_out);
        /* each copy's workspace still holds its forward intermediates */
        rt_tt_bwd_f(op->tt, tt_input(s, op), op->cores[c], dy_c, dx_c, op->dcores[c], op->work[c], T);
        for (size_t i = 0; i < (size_t)T * n_in; i++)
            dx[i] += dx_c[i];
    }
}

static void ex_tt_bwd_weight(rt_model *m, const rt_op *op, const rt_batch *b)
{
    state *s = ST(m);
    const int ld = op->n_out * op->copies;
    const float *dy = tt_dy(s, op);
    if (op->dbias)
        for (int t = 0; t < b->T; t++)
            for (int j = 0; j < ld; j++)
                op->dbias[j] += dy[(size_t)t * ld + j];
}

/* ---- executors: heads ---- */

static const float *last_output(const state *s)
{
    return s->layers[s->L - 1].out;
}

static void ex_gather(rt_model *m, const rt_op *op, const rt_batch *b)
{
    (void)op;
    state *s = ST(m);
    for (int p = 0; p < b->P; p++)
        memcpy(s->hs + (size_t)p * s->H, last_output(s) + (size_t)b->pred_rows[p] * s->H,
               sizeof(float) * s->H);
}

static void ex_transform(rt_model *m, const rt_op *op, const rt_batch *b)
{
    state *s = ST(m);
    rt_linear_fwd_f(s->hs, op->W, op->bias, s->t1, b->P, s->H, s->H);
}

static void ex_head_gelu(rt_model *m, const rt_op *op, const rt_batch *b)
{
    (void)op;
    state *s = ST(m);
    rt_gelu_fwd_f(s->t1, s->t2, (size_t)b->P * s->H);
}

static void ex_head_ln(rt_model *m, const rt_op *op, const rt_batch *b)
{
    state *s = ST(m);
    rt_layernorm_fwd_f(s->t2, op->W, op->bias, s->t3, s->t3_mean, s->t3_rstd, b->P, s->H);
}

static void ex_final_ln(rt_model *m, const rt_op *op, const rt_batch *b)
{
    state *s = ST(m);
    rt_layernorm_fwd_f(last_output(s), op->W, op->bias, s->fin, s->fin_mean, s->fin_rstd, b->T, s->H);
}

static const float *head_input(const state *s)
{
    return s->decoder ? s->fin : s->t3;
}

static void ex_decoder(rt_model *m, const rt_op *op, const rt_batch *b)
{
    (void)op;
    state *s = ST(m);
    rt_linear_fwd_f(head_input(s), s->dec_W, s->dec_b, s->logits, b->P, s->H, s->V);
}

static void ex_loss(rt_model *m, const rt_op *op, const rt_batch *b)
{
    (void)op;
    state *s = ST(m);
    m->loss_sum += rt_cross_entropy_f(s->logits, b->targets, s->dlogits, b->P, s->V, s->norm);
}

static void ex_decoder_bwd_data(rt_model *m, const rt_op *op, const rt_batch *b)
{
    (void)op;
    state *s = ST(m);
    memset(s->d_head, 0, sizeof(float) * b->P * s->H);
    rt_linear_bwd_f(NULL, s->dec_W, s->dlogits, s->d_head, NULL, NULL, b->P, s->H, s->V);
}

static void ex_decoder_bwd_weight(rt_model *m, const rt_op *op, const rt_batch *b)
{
    (void)op;
    state *s = ST(m);
    rt_linear_bwd_f(head_input(s), s->dec_W, s->dlogits, NULL, s->dec_dW, s->dec_db, b->P, s->H, s->V);
}

static void ex_head_ln_bwd(rt_model *m, const rt_op *op, const rt_batch *b)
{
    state *s = ST(m);
    memset(s->d_head2, 0, sizeof(float) * b->P * s->H);
    rt_layernorm_bwd_f(s->t2, op->W, s->t3_mean, s->t3_rstd, s->d_head, s->d_head2, op->dW, op->dbias, b->P,
                       s->H);
}

static void ex_head_gelu_bwd(rt_model *m, const rt_op *op, const rt_batch *b)
{
    (void)op;
    state *s = ST(m);
    rt_gelu_bwd_f(s->t1, s->d_head2, s->d_head, (size_t)b->P * s->H);
}

static void ex_transform_bwd_data(rt_model *m, const rt_op *op, const rt_batch *b)
{
    state *s = ST(m);
    memset(s->d_head2, 0, sizeof(float) * b->P * s->H);
    rt_linear_bwd_f(NULL, op->W, s->d_head, s->d_head2, NULL, NULL, b->P, s->H, s->H);
}

static void ex_transform_bwd_weight(rt_model *m, const rt_op *op, const rt_batch *b)
{
    state *s = ST(m);
    rt_linear_bwd_f(s->hs, op->W, s->d_head, NULL, op->dW, op->dbias, b->P, s->H, s->H);
}

static void ex_gather_bwd(rt_model *m, const rt_op *op, const rt_batch *b)
{
    (void)op;
    state *s = ST(m);
    memset(s->d_out, 0, sizeof(float) * b->T * s->H);
    for (int p = 0; p < b->P; p++) {
        float *d = s->d_out + (size_t)b->pred_rows[p] * s->H;
        const float *g = s->d_head2 + (size_t)p * s->H;
        for (int i = 0; i < s->H; i++)
            d[i] += g[i];
    }
}

static void ex_final_ln_bwd(rt_model *m, const rt_op *op, const rt_batch *b)
{
    state *s = ST(m);
    /* causal rows: scored position p is token row p (pred_rows is the identity) */
    memset(s->d_out, 0, sizeof(float) * b->T * s->H);
    rt_layernorm_bwd_f(last_output(s), op->W, s->fin_mean, s->fin_rstd, s->d_head, s->d_out, op->dW,
                       op->dbias, b->T, s->H);
}

/* ---- optimizer ---- */

static void ex_nothing(rt_model *m, const rt_op *op, const rt_batch *b)
{
    (void)m, (void)op, (void)b;
}

/* ---- binding graph ops to executors ---- */

typedef struct binding {
    const char *name; /* op id after "layer.N." or the whole id */
    rt_exec_fn exec;
    const char *weight, *bias; /* parameter names under the op's prefix */
} binding;

static const binding layer_ops[] = {
    {"attn.qkv", ex_qkv, "weight", "bias"},
    {"attn.scores", ex_scores, NULL, NULL},
    {"attn.softmax", ex_softmax, NULL, NULL},
    {"attn.context", ex_context, NULL, NULL},
    {"attn.out", ex_attn_out, "weight", "bias"},
    {"attn.layernorm", ex_attn_ln, "weight", "bias"},
    {"mlp.fc1", ex_fc1, "weight", "bias"},
    {"mlp.gelu", ex_gelu, NULL, NULL},
    {"mlp.fc2", ex_fc2, "weight", "bias"},
    {"mlp.layernorm", ex_mlp_ln, "weight", "bias"},
    {"mlp.layernorm.bwd", ex_mlp_ln_bwd, "weight", "bias"},
    {"mlp.fc2.bwd_data", ex_fc2_bwd_data, "weight", "bias"},
    {"mlp.fc2.bwd_weight", ex_fc2_bwd_weight, "weight", "bias"},
    {"mlp.gelu.bwd", ex_gelu_bwd, NULL, NULL},
    {"mlp.fc1.bwd_data", ex_fc1_bwd_data, "weight", "bias"},
    {"mlp.fc1.bwd_weight", ex_fc1_bwd_weight, "weight", "bias"},
    {"attn.layernorm.bwd", ex_attn_ln_bwd, "weight", "bias"},
    {"attn.out.bwd_data", ex_attn_out_bwd_data, "weight", "bias"},
    {"attn.out.bwd_weight", ex_attn_out_bwd_weight, "weight", "bias"},
    {"attn.context.bwd", ex_context_bwd, NULL, NULL},
    {"attn.softmax.bwd", ex_softmax_bwd, NULL, NULL},
    {"attn.scores.bwd", ex_scores_bwd, NULL, NULL},
    {"attn.qkv.bwd_data", ex_qkv_bwd_data, "weight", "bias"},
    {"attn.qkv.bwd_weight", ex_qkv_bwd_weight, "weight", "bias"},
};

static const binding other_ops[] = {
    {"embed.lookup", ex_embed, NULL, NULL},
    {"embed.layernorm", ex_embed_ln, NULL, NULL},
    {"embed.layernorm.bwd", ex_embed_ln_bwd, NULL, NULL},
    {"embed.lookup.bwd", ex_embed_bwd, NULL, NULL},
    {"head.mlm.gather", ex_gather, NULL, NULL},
    {"head.mlm.transform", ex_transform, "weight", "bias"},
    {"head.mlm.gelu", ex_head_gelu, NULL, NULL},
    {"head.mlm.layernorm", ex_head_ln, "weight", "bias"},
    {"head.mlm.decoder", ex_decoder, NULL, NULL},
    {"head.final_layernorm", ex_final_ln, "weight", "bias"},
    {"head.lm.decoder", ex_decoder, NULL, NULL},
    {"head.loss", ex_loss, NULL, NULL},
    {"head.mlm.decoder.bwd_data", ex_decoder_bwd_data, NULL, NULL},
    {"head.mlm.decoder.bwd_weight", ex_decoder_bwd_weight, NULL, NULL},
    {"head.lm.decoder.bwd_data", ex_decoder_bwd_data, NULL, NULL},
    {"head.lm.decoder.bwd_weight", ex_decoder_bwd_weight, NULL, NULL},
    {"head.mlm.layernorm.bwd", ex_head_ln_bwd, "weight", "bias"},
    {"head.mlm.gelu.bwd", ex_head_gelu_bwd, NULL, NULL},
    {"head.mlm.transform.bwd_data", ex_transform_bwd_data, "weight", "bias"},
    {"head.mlm.transform.bwd_weight", ex_transform_bwd_weight, "weight", "bias"},
    {"head.mlm.gather.bwd", ex_gather_bwd, NULL, NULL},
    {"head.final_layernorm.bwd", ex_final_ln_bwd, "weight", "bias"},
    /* the optimizer ops are run by rt_model_update, in graph order */
    {"optimizer.unscale", ex_nothing, NULL, NULL},
    {"optimizer.grad_norm", ex_nothing, NULL, NULL},
    {"optimizer.step", ex_nothing, NULL, NULL},
    {"optimizer.update", ex_nothing, NULL, NULL},
    {"optimizer.trust_ratio", ex_nothing, NULL, NULL},
    {"optimizer.apply", ex_nothing, NULL, NULL},
};

/* The parameter prefix of an op id: "layer.3.mlp.fc2.bwd_data" -> "layer.3.mlp.fc2". */
static void prefix_of(const char *name, int layer, char *out, size_t size)
{
    char base[96];
    snprintf(base, sizeof base, "%s", name);
    char *suffix = strstr(base, ".bwd");
    if (suffix) *suffix = 0;
    if (layer >= 0)
        snprintf(out, size, "layer.%d.%s", layer, base);
    else
        snprintf(out, size, "%s", base);
}

/* The tensor-train record of (layer, role), shared by its forward and backward ops: the layer with the
 * cost model's order, the cores of each copy (stored in reverse in the flat buffer), workspaces. */
typedef struct tt_record {
    rt_tt_layer tt;
    int copies, n_in, n_out, ready;
    float *cores[3], *dcores[3], *work[3], *tmp;
} tt_record;

static int bind_tt(rt_model *m, rt_op *r, const et_op *op, const char *name, et_error *err)
{
    static const char *const roles[] = {"attn.qkv", "attn.out", "mlp.fc1", "mlp.fc2"};
    int role = -1;
    for (int k = 0; k < 4; k++)
        if (strncmp(name, roles[k], strlen(roles[k])) == 0) role = k;
    if (role < 0 || op->layer < 0)
        return et_error_set(err, m->s->source, 0, 0, NULL, "etrun has no tensor-train kernel for op \"%s\"",
                            op->id);
    tt_record *rec = (tt_record *)m->tt_records + op->layer * 4 + role;
    const int H = m->s->model.hidden, F = m->s->model.ffn;
    if (!rec->ready) {
        int n_in = role == ROLE_FC2 ? F : H, n_out = role == ROLE_FC1 ? F : H;
        const et_tt_factors *f = et_method_factors(&m->s->method, n_in, n_out);
        et_tt_shape shape;
        if (!f || et_tt_linear(&shape, f->in, f->d_in, f->out, f->d_out, m->s->method.tt_rank, err))
            return -1;
        rt_tt_layer_init(&rec->tt, &shape, m->graph.options.tokens_hint);
        rec->copies = role == ROLE_QKV ? 3 : 1;
        rec->n_in = n_in;
        rec->n_out = n_out;
        int d = shape.d_in + shape.d_out;
        size_t ws = rt_tt_workspace_size(&rec->tt, m->T_cap);
        rec->tmp = malloc(sizeof(float) * (size_t)m->T_cap * (n_in + n_out));
        static const char *const copy[] = {"q", "k", "v"};
        for (int c = 0; c < rec->copies; c++) {
            char id[128];
            size_t off[ET_TT_MAX_CORES] = {0};
            for (int k = 0; k < d; k++) {
                if (rec->copies > 1)
                    snprintf(id, sizeof id, "layer.%d.%s.%s.core.%d", op->layer, roles[role], copy[c], k);
                else
                    snprintf(id, sizeof id, "layer.%d.%s.core.%d", op->layer, roles[role], k);
                int p = param_index(&m->graph, id);
                if (p < 0) return et_error_set(err, m->s->source, 0, 0, NULL, "no parameter %s", id);
                off[k] = m->param_offset[p];
            }
            /* the graph lists cores last to first: the base is core d-1 */
            for (int k = 0; k < d; k++)
                rec->tt.core_offset[k] = off[k] - off[d - 1];
            rec->cores[c] = m->params + off[d - 1];
            rec->dcores[c] = m->grads + off[d - 1];
            rec->work[c] = malloc(sizeof(float) * ws);
            if (!rec->work[c] || !rec->tmp)
                return et_error_set(err, NULL, 0, 0, NULL, "out of memory for TT workspaces");
            /* cores drawn so the matrix they represent has the dense layers' scale (std 0.02): each entry
             * sums prod(r_k) paths of d factors, so sigma^(2d) prod(r_k) = 0.02^2 */
            double paths = 1;
            for (int k = 1; k < d; k++)
                paths *= shape.rank[k];
            double sigma = pow(0.0004 / paths, 1.0 / (2 * d));
            unsigned long long st =
                et_rng_stream(m->seed, 13, (unsigned long long)(op->layer * 16 + role * 4 + c));
            size_t total = 0;
            for (int k = 0; k < d; k++)
                total += (size_t)et_tt_core_params(&shape, k);
            for (size_t k = 0; k < total; k++)
                rec->cores[c][k] = (float)(sigma * et_rng_normal(&st));
        }
        rec->ready = 1;
    }
    r->role = role;
    r->copies = rec->copies;
    r->n_in = rec->n_in;
    r->n_out = rec->n_out;
    r->tt = &rec->tt;
    r->tmp = rec->tmp;
    for (int c = 0; c < 3; c++)
        r->cores[c] = rec->cores[c], r->dcores[c] = rec->dcores[c], r->work[c] = rec->work[c];
    char prefix[128];
    snprintf(prefix, sizeof prefix, "layer.%d.%s.bias", op->layer, roles[role]);
    r->bias = param(m, prefix, &r->dbias);
    size_t len = strlen(name);
    r->exec = len > 9 && strcmp(name + len - 9, ".bwd_data") == 0       ? ex_tt_bwd_data
              : len > 11 && strcmp(name + len - 11, ".bwd_weight") == 0 ? ex_tt_bwd_weight
                                                                        : ex_tt_fwd;
    return 0;
}

static int bind_ops(rt_model *m, et_error *err)
{
    for (int i = 0; i < m->graph.n_ops; i++) {
        const et_op *op = &m->graph.ops[i];
        rt_op *r = &m->ops[i];
        r->layer = op->layer;
        if (op->kind == ET_OP_TT) {
            if (bind_tt(m, r, op, strchr(strchr(op->id, '.') + 1, '.') + 1, err)) return -1;
            continue;
        }
        const char *name = op->id;
        const binding *table = other_ops;
        size_t n = sizeof other_ops / sizeof other_ops[0];
        if (op->layer >= 0) {
            name = strchr(strchr(op->id, '.') + 1, '.') + 1; /* after "layer.N." */
            table = layer_ops;
            n = sizeof layer_ops / sizeof layer_ops[0];
        }
        const binding *found = NULL;
        for (size_t k = 0; k < n && !found; k++)
            if (strcmp(table[k].name, name) == 0) found = &table[k];
        if (!found)
            return et_error_set(
                err, m->s->source, 0, 0, NULL,
                "etrun has no CPU kernel for op \"%s\" (%s); the plan uses a feature the runtime "
                "does not run yet",
                op->id, et_op_kind_names[op->kind]);
        r->exec = found->exec;
        if (found->weight) {
            char prefix[128];
            prefix_of(name, op->layer, prefix, sizeof prefix);
            bind(m, r, prefix, found->weight, found->bias);
            if (!r->W)
                return et_error_set(err, m->s->source, 0, 0, NULL, "op %s: no parameter %s.%s", op->id,
                                    prefix, found->weight);
        }
    }
    return 0;
}

/* ---- allocation ---- */

static float *take(float **cursor, size_t n)
{
    float *p = *cursor;
    *cursor += n;
    return p;
}

static int allocate_state(rt_model *m, et_error *err)
{
    const et_scenario *sc = m->s;
    state *s = calloc(1, sizeof *s);
    if (!s) return et_error_set(err, NULL, 0, 0, NULL, "out of memory");
    s->H = sc->model.hidden, s->F = sc->model.ffn, s->A = sc->model.heads, s->V = sc->model.vocab;
    s->L = sc->model.layers, s->decoder = sc->model.arch == ET_ARCH_DECODER;
    const size_t T = (size_t)m->T_cap, H = s->H, F = s->F, P = (size_t)m->P_cap, V = s->V;
    s->probs_cap = (size_t)s->A * sc->batch.local * sc->data.seq_len * sc->data.seq_len;
    size_t per_layer = T * (3 * H + 8 * H + 2 * F) + s->probs_cap + 4 * T;
    size_t total = s->L * per_layer + T * (2 * H) + 2 * T + P * (4 * H) + 2 * P + T * H + 2 * T + 2 * P * V +
                   T * (4 * H + 3 * H + 2 * F) + s->probs_cap + 2 * P * H;
    float *block = malloc(total * sizeof(float)), *c = block;
    s->layers = calloc((size_t)s->L, sizeof *s->layers);
    s->zeros = calloc(T + 1, sizeof(int));
    if (!block || !s->layers || !s->zeros) {
        free(block), free(s->layers), free(s->zeros), free(s);
        return et_error_set(err, NULL, 0, 0, NULL, "out of memory for activations (%.1f MiB)",
                            total * 4.0 / 1048576);
    }
    for (int i = 0; i < s->L; i++) {
        layer_act *a = &s->layers[i];
        a->qkv = take(&c, T * 3 * H), a->ctx = take(&c, T * H), a->y = take(&c, T * H),
        a->res1 = take(&c, T * H);
        a->ln1 = take(&c, T * H), a->ln2 = take(&c, T * H), a->v = take(&c, T * H), a->res2 = take(&c, T * H);
        a->out = take(&c, T * H), a->u = take(&c, T * F), a->g = take(&c, T * F);
        a->probs = take(&c, s->probs_cap);
        a->ln1_mean = take(&c, T), a->ln1_rstd = take(&c, T), a->ln2_mean = take(&c, T),
        a->ln2_rstd = take(&c, T);
    }
    s->emb = take(&c, T * H), s->x0 = take(&c, T * H), s->emb_mean = take(&c, T), s->emb_rstd = take(&c, T);
    s->hs = take(&c, P * H), s->t1 = take(&c, P * H), s->t2 = take(&c, P * H), s->t3 = take(&c, P * H);
    s->t3_mean = take(&c, P), s->t3_rstd = take(&c, P);
    s->fin = take(&c, T * H), s->fin_mean = take(&c, T), s->fin_rstd = take(&c, T);
    s->logits = take(&c, P * V), s->dlogits = take(&c, P * V);
    s->d_out = take(&c, T * H), s->d_res = take(&c, T * H), s->d_mid = take(&c, T * H),
    s->d_ctx = take(&c, T * H);
    s->d_qkv = take(&c, T * 3 * H), s->d_ff = take(&c, T * F), s->d_ff2 = take(&c, T * F);
    s->d_probs = take(&c, s->probs_cap);
    s->d_head = take(&c, P * H), s->d_head2 = take(&c, P * H);
    m->act = (float *)s;
    /* keep the block pointer for free(): it is the first layer's qkv */
    return 0;
}

/* ---- initialisation ---- */

static void init_params(rt_model *m, unsigned long long seed)
{
    for (int i = 0; i < m->graph.n_params; i++) {
        const et_param *p = &m->graph.params[i];
        float *w = m->params + m->param_offset[i];
        size_t n = (size_t)p->dense;
        size_t len = strlen(p->id);
        int is_gamma = strstr(p->id, "layernorm.weight") != NULL;
        int is_bias = (len > 5 && strcmp(p->id + len - 5, ".bias") == 0) || strstr(p->id, "layernorm.bias");
        unsigned long long st = et_rng_stream(seed, 7, (unsigned long long)i);
        for (size_t k = 0; k < n; k++)
            w[k] = is_gamma ? 1.0f : is_bias ? 0.0f : (float)(0.02 * et_rng_normal(&st));
    }
}

/* Fixed masks of sparse weights: unstructured, b x b blocks, or 2 of every 4 along the input. */
static void init_masks(rt_model *m, unsigned long long seed)
{
    const et_method *meth = &m->s->method;
    if (meth->kind != ET_METHOD_SPARSE) return;
    for (size_t k = 0; k < m->n_params; k++)
        m->mask[k] = 1;
    for (int i = 0; i < m->graph.n_params; i++) {
        const et_param *p = &m->graph.params[i];
        if (p->count == p->dense) continue;
        /* the op that finalises this parameter names its group and shape */
        et_sparse_spec sp = {1, ET_PATTERN_DENSE, 0};
        int n_in = 1;
        for (int o = 0; o < m->graph.n_ops; o++) {
            const et_op *op = &m->graph.ops[o];
            if (i >= op->grad_first && i < op->grad_first + op->grad_count) {
                sp = op->sparse;
                n_in = (int)et_linear_eval(&op->n, &(et_batch_shape){0});
            }
        }
        float *mask = m->mask + m->param_offset[i];
        size_t n = (size_t)p->dense;
        unsigned long long st = et_rng_stream(seed, 11, (unsigned long long)i);
        if (sp.pattern == ET_PATTERN_2_4) {
            for (size_t k = 0; k + 3 < n; k += 4) {
                int a = (int)(et_rng_uniform(&st) * 4), b = (a + 1 + (int)(et_rng_uniform(&st) * 3)) % 4;
                for (int j = 0; j < 4; j++)
                    mask[k + j] = (j == a || j == b) ? 1.0f : 0.0f;
            }
        } else if (sp.pattern == ET_PATTERN_BLOCK && n_in > 0) {
            int bs = sp.block, rows = (int)(n / n_in);
            for (int r0 = 0; r0 < rows; r0 += bs)
                for (int c0 = 0; c0 < n_in; c0 += bs) {
                    float keep = et_rng_uniform(&st) < sp.density ? 1.0f : 0.0f;
                    for (int r = r0; r < r0 + bs && r < rows; r++)
                        for (int c = c0; c < c0 + bs && c < n_in; c++)
                            mask[(size_t)r * n_in + c] = keep;
                }
        } else {
            for (size_t k = 0; k < n; k++)
                mask[k] = et_rng_uniform(&st) < sp.density ? 1.0f : 0.0f;
        }
        float *w = m->params + m->param_offset[i];
        for (size_t k = 0; k < n; k++)
            w[k] *= mask[k];
    }
}

int rt_model_init(rt_model *m, const et_scenario *s, unsigned long long seed, et_error *err)
{
    memset(m, 0, sizeof *m);
    m->s = s;
    if (s->parallel.tensor != 1 || s->parallel.pipeline != 1 || s->parallel.zero_stage != 0)
        return et_error_set(err, s->source, 0, 0, "$.parallelism",
                            "etrun runs data parallelism only: tensor and pipeline must be 1 and ZeRO 0");
    if (s->precision != ET_FP32)
        return et_error_set(err, s->source, 0, 0, "$.precision",
                            "the CPU backend trains in fp32, the plan says %s",
                            et_precision_names[s->precision]);
    if (s->method.kind == ET_METHOD_TENSOR_TRAIN && s->method.tt_embedding)
        return et_error_set(
            err, s->source, 0, 0, "$.method.tensor_train.embedding",
            "etrun runs tensor-train linear layers; tensor-train embeddings are not supported yet");
    if (s->method.kind == ET_METHOD_TENSOR_TRAIN && s->method.n_phases > 1)
        return et_error_set(err, s->source, 0, 0, "$.method.tensor_train.rank_schedule",
                            "etrun trains at one rank; rank schedules are costed by etsim only");
    if (s->model.head == ET_HEAD_MLM_NSP)
        return et_error_set(
            err, s->source, 0, 0, "$.model.loss_head",
            "etrun runs the \"mlm\" and \"causal_lm\" heads; \"mlm_nsp\" is not supported yet");
    et_graph_options o = et_scenario_graph_options(s, 0);
    o.optimizer_shards = 1;
    if (et_graph_build(&s->model, &o, &m->graph, err)) return -1;
    /* every parameter is held dense (sparse ones with a mask) */
    m->param_offset = malloc((size_t)m->graph.n_params * sizeof *m->param_offset);
    if (!m->param_offset) return et_error_set(err, NULL, 0, 0, NULL, "out of memory");
    for (int i = 0; i < m->graph.n_params; i++) {
        m->param_offset[i] = m->n_params;
        m->n_params += (size_t)m->graph.params[i].dense;
    }
    m->params = calloc(m->n_params, sizeof(float));
    m->grads = calloc(m->n_params, sizeof(float));
    m->m = calloc(m->n_params, sizeof(float));
    m->v = calloc(m->n_params, sizeof(float));
    m->mask = s->method.kind == ET_METHOD_SPARSE ? calloc(m->n_params, sizeof(float)) : NULL;
    m->ops = calloc((size_t)m->graph.n_ops, sizeof *m->ops);
    m->op_time = calloc((size_t)m->graph.n_ops, sizeof *m->op_time);
    if (!m->params || !m->grads || !m->m || !m->v || !m->ops || !m->op_time ||
        (s->method.kind == ET_METHOD_SPARSE && !m->mask))
        return et_error_set(err, NULL, 0, 0, NULL, "out of memory for %zu parameters", m->n_params);
    /* buckets over the dense layout: element counts are what the runtime reduces */
    for (int i = 0; i < m->graph.n_params; i++)
        m->graph.params[i].grad_elems = m->graph.params[i].dense;
    if (et_buckets_build(&m->graph, s->parallel.bucket_bytes, 4, &m->buckets, &m->n_buckets, err)) return -1;
    m->T_cap = (int)(s->batch.local * s->data.seq_len);
    m->P_cap = m->T_cap;
    if (allocate_state(m, err)) return -1;
    state *st = ST(m);
    st->word = param(m, "embed.word_embeddings", &st->dword);
    st->pos = param(m, "embed.position_embeddings", &st->dpos);
    st->type = param(m, "embed.token_type_embeddings", &st->dtype);
    st->emb_g = param(m, "embed.layernorm.weight", &st->emb_dg);
    st->emb_b = param(m, "embed.layernorm.bias", &st->emb_db);
    const char *dec = st->decoder ? "head.lm.decoder" : "head.mlm.decoder";
    char id[64];
    snprintf(id, sizeof id, "%s.weight", dec);
    st->dec_W = s->model.tie_embeddings ? st->word : param(m, id, &st->dec_dW);
    if (s->model.tie_embeddings) st->dec_dW = st->dword;
    snprintf(id, sizeof id, "%s.bias", dec);
    st->dec_b = param(m, id, &st->dec_db);
    if (!st->word || !st->pos || !st->dec_W)
        return et_error_set(err, NULL, 0, 0, NULL, "the graph lacks the embedding or decoder parameters");
    /* GPT's decoder has no bias: dec_b stays NULL and the kernels skip it */
    m->tt_records = calloc((size_t)s->model.layers * 4, sizeof(tt_record));
    if (!m->tt_records) return et_error_set(err, NULL, 0, 0, NULL, "out of memory");
    m->seed = seed;
    init_params(m, seed);
    if (bind_ops(m, err)) return -1; /* also draws tensor-train cores at their own scale */
    init_masks(m, seed);
    return 0;
}

void rt_model_free(rt_model *m)
{
    state *s = ST(m);
    if (s) {
        free(s->layers ? s->layers[0].qkv : NULL);
        free(s->layers);
        free(s->zeros);
        free(s);
    }
    free(m->params), free(m->grads), free(m->m), free(m->v), free(m->mask), free(m->ops), free(m->op_time);
    free(m->param_offset);
    free(m->buckets);
    tt_record *rec = m->tt_records;
    for (int i = 0; rec && i < m->s->model.layers * 4; i++) {
        free(rec[i].tmp);
        for (int c = 0; c < 3; c++)
            free(rec[i].work[c]);
    }
    free(m->tt_records);
    et_graph_free(&m->graph);
    memset(m, 0, sizeof *m);
}

void rt_model_begin_step(rt_model *m)
{
    memset(m->grads, 0, m->n_params * sizeof(float));
    memset(m->op_time, 0, (size_t)m->graph.n_ops * sizeof *m->op_time);
    m->loss_sum = 0;
}

int rt_model_step_micro(rt_model *m, const rt_batch *b, double norm, rt_grad_ready_fn ready, void *ctx)
{
    if (b->T > m->T_cap || b->P > m->P_cap) return -1;
    ST(m)->norm = norm;
    for (int i = 0; i < m->graph.n_ops; i++) {
        const et_op *op = &m->graph.ops[i];
        if (op->phase == ET_PHASE_OPTIMIZER) continue;
        double t0 = et_wall_seconds();
        m->ops[i].exec(m, &m->ops[i], b);
        if (op->phase == ET_PHASE_BACKWARD && m->mask && op->grad_count) {
            /* only kept weights learn: mask the gradients as soon as they are final */
            for (int p = op->grad_first; p < op->grad_first + op->grad_count; p++) {
                size_t off = m->param_offset[p], n = (size_t)m->graph.params[p].dense;
                for (size_t k = 0; k < n; k++)
                    m->grads[off + k] *= m->mask[off + k];
            }
        }
        m->op_time[i] += et_wall_seconds() - t0;
        if (ready && op->phase == ET_PHASE_BACKWARD) ready(ctx, i);
    }
    return 0;
}

double rt_model_grad_sq(const rt_model *m, size_t first, size_t count)
{
    double s = 0;
    for (size_t k = first; k < first + count; k++)
        s += (double)m->grads[k] * m->grads[k];
    return s;
}

void rt_model_scale_grads(rt_model *m, size_t first, size_t count, double factor)
{
    for (size_t k = first; k < first + count; k++)
        m->grads[k] = (float)(m->grads[k] * factor);
}

/* Adam / AdamW / LAMB over every parameter tensor, timed under the graph's optimizer op ids. */
void rt_model_update(rt_model *m, const rt_hyper *h)
{
    const et_optimizer opt = m->s->optimizer.name;
    m->adam_t++;
    const double c1 = 1 - pow(h->beta1, (double)m->adam_t), c2 = 1 - pow(h->beta2, (double)m->adam_t);
    double t0 = et_wall_seconds();
    for (int i = 0; i < m->graph.n_params; i++) {
        size_t off = m->param_offset[i], n = (size_t)m->graph.params[i].dense;
        float *w = m->params + off, *g = m->grads + off, *mm = m->m + off, *vv = m->v + off;
        const float *mask = m->mask ? m->mask + off : NULL;
        double wn = 0, un = 0;
        for (size_t k = 0; k < n; k++) {
            mm[k] = (float)(h->beta1 * mm[k] + (1 - h->beta1) * g[k]);
            vv[k] = (float)(h->beta2 * vv[k] + (1 - h->beta2) * g[k] * g[k]);
            double u = (mm[k] / c1) / (sqrt(vv[k] / c2) + h->eps);
            if (opt != ET_OPT_ADAM) u += h->weight_decay * w[k]; /* decoupled weight decay */
            if (mask) u *= mask[k];
            g[k] = (float)u; /* the gradient buffer holds the update from here on */
            wn += (double)w[k] * w[k];
            un += u * u;
        }
        double rate =
            h->lr *
            (h->warmup_steps > 0 && m->adam_t < h->warmup_steps ? (double)m->adam_t / h->warmup_steps : 1);
        if (opt == ET_OPT_LAMB && wn > 0 && un > 0) rate *= sqrt(wn) / sqrt(un); /* per-tensor trust ratio */
        for (size_t k = 0; k < n; k++)
            w[k] = (float)(w[k] - rate * g[k]);
    }
    double dt = et_wall_seconds() - t0;
    /* attribute the time to the graph's optimizer ops (one for Adam, three for LAMB) */
    int n_opt = 0;
    for (int i = 0; i < m->graph.n_ops; i++)
        n_opt += m->graph.ops[i].phase == ET_PHASE_OPTIMIZER;
    for (int i = 0; i < m->graph.n_ops; i++)
        if (m->graph.ops[i].phase == ET_PHASE_OPTIMIZER) m->op_time[i] += dt / n_opt;
}
