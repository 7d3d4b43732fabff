#include "graph.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

const char *const et_op_kind_names[] = {"gemm", "attention", "elementwise",  "embedding",
                                        "loss", "optimizer", "tp_allreduce", NULL};
const char *const et_optimizer_names[] = {"adam", "adamw", "lamb", NULL};
const char *const et_phase_names[] = {"forward", "backward", "optimizer", NULL};

/* Shorthands for linear forms in the batch letters (see graph.h). */
#define FIX(x) ((et_linear){.fixed = (x)})
#define TOK(x) ((et_linear){.per_token = (x)})
#define SEQ(x) ((et_linear){.per_sequence = (x)})
#define PRED(x) ((et_linear){.per_prediction = (x)})
#define SQ(x) ((et_linear){.per_token_sq = (x)})

double et_linear_eval(const et_linear *l, const et_batch_shape *b)
{
    return l->fixed + l->per_sequence * b->sequences + l->per_token * b->tokens +
           l->per_token_sq * b->tokens_sq + l->per_prediction * b->predictions;
}

static et_linear lin_scale(et_linear a, double s)
{
    return (et_linear){a.fixed * s, a.per_sequence * s, a.per_token * s, a.per_token_sq * s,
                       a.per_prediction * s};
}

static int lin_is_fixed(et_linear a)
{
    return !a.per_sequence && !a.per_token && !a.per_token_sq && !a.per_prediction;
}

/* Product of two dimensions of which at most one depends on the batch. */
static et_linear lin_mul(et_linear a, et_linear b)
{
    return lin_is_fixed(a) ? lin_scale(b, a.fixed) : lin_scale(a, b.fixed);
}

static et_linear lin_add(et_linear a, et_linear b)
{
    return (et_linear){a.fixed + b.fixed, a.per_sequence + b.per_sequence, a.per_token + b.per_token,
                       a.per_token_sq + b.per_token_sq, a.per_prediction + b.per_prediction};
}

/* Builder state: the graph plus the error slot and the element size e. */
typedef struct builder {
    et_graph *g;
    et_error *err;
    double e; /* bytes per activation/weight element */
    int failed;
} builder;

static et_op *add_op(builder *b, et_op_kind kind, et_phase phase, int layer, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static et_op *add_op(builder *b, et_op_kind kind, et_phase phase, int layer, const char *fmt, ...)
{
    et_graph *g = b->g;
    if (b->failed) return NULL;
    if (g->n_ops == g->cap_ops) {
        int cap = g->cap_ops ? 2 * g->cap_ops : 256;
        et_op *ops = realloc(g->ops, (size_t)cap * sizeof *ops);
        if (!ops) {
            b->failed = 1;
            et_error_set(b->err, NULL, 0, 0, NULL, "out of memory building the op graph");
            return NULL;
        }
        g->ops = ops;
        g->cap_ops = cap;
    }
    et_op *op = &g->ops[g->n_ops++];
    memset(op, 0, sizeof *op);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(op->id, sizeof op->id, fmt, ap);
    va_end(ap);
    op->kind = kind;
    op->phase = phase;
    op->layer = layer;
    op->grad_first = g->n_params;
    return op;
}

/* Appends a parameter whose gradient is final after the most recently added op. */
static void add_grad(builder *b, int layer, double count, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void add_grad(builder *b, int layer, double count, const char *fmt, ...)
{
    et_graph *g = b->g;
    if (b->failed) return;
    if (g->n_params == g->cap_params) {
        int cap = g->cap_params ? 2 * g->cap_params : 256;
        et_param *p = realloc(g->params, (size_t)cap * sizeof *p);
        if (!p) {
            b->failed = 1;
            et_error_set(b->err, NULL, 0, 0, NULL, "out of memory building the op graph");
            return;
        }
        g->params = p;
        g->cap_params = cap;
    }
    et_param *p = &g->params[g->n_params++];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->id, sizeof p->id, fmt, ap);
    va_end(ap);
    p->count = count;
    p->layer = layer;
    g->param_count += count;
    et_op *op = &g->ops[g->n_ops - 1];
    op->grad_count = g->n_params - op->grad_first;
}

/* A matrix product C[m,n] = A[m,k] B[k,n]: 2mnk FLOPs, reads A and B, writes C. */
static et_op *gemm(builder *b, et_phase phase, int layer, et_linear m, et_linear n, et_linear k,
                   const char *id)
{
    et_op *op = add_op(b, ET_OP_GEMM, phase, layer, "%s", id);
    if (!op) return NULL;
    op->m = m;
    op->n = n;
    op->k = k;
    /* Exactly one of m, n, k depends on the batch in every product here; the others are fixed. */
    op->flops = lin_scale(lin_mul(lin_mul(m, n), k), 2);
    /* bytes: e * (m*k + k*n + m*n) */
    et_linear mk = lin_mul(m, k), kn = lin_mul(k, n), mn = lin_mul(m, n);
    op->bytes = lin_scale(lin_add(lin_add(mk, kn), mn), b->e);
    return op;
}

static et_op *elementwise(builder *b, et_phase phase, int layer, et_linear flops, et_linear bytes,
                          const char *id)
{
    et_op *op = add_op(b, ET_OP_ELEMENTWISE, phase, layer, "%s", id);
    if (!op) return NULL;
    op->flops = flops;
    op->bytes = bytes;
    return op;
}

typedef struct dims {
    double H, A, D, F, V, t, Ht, Ft, At, e;
} dims;

/* Forward ops of one transformer layer. Formulas: docs/cost-model.md, "Transformer layer". */
static void layer_forward(builder *b, const dims *d, int i, int decoder, et_phase phase, const char *suffix)
{
    char id[80];
    const double H = d->H, Ht = d->Ht, Ft = d->Ft, At = d->At, e = d->e;
#define ID(name) (snprintf(id, sizeof id, "layer.%d.%s%s", i, name, suffix), id)
    if (decoder) elementwise(b, phase, i, TOK(8 * H), TOK(2 * e * H), ID("attn.layernorm"));
    gemm(b, phase, i, TOK(1), FIX(3 * Ht), FIX(H), ID("attn.qkv"));
    et_op *op = add_op(b, ET_OP_ATTENTION, phase, i, "%s", ID("attn.scores"));
    if (op) {
        op->k = FIX(d->D);
        op->flops = SQ(2 * Ht);
        op->bytes = lin_add(TOK(2 * e * Ht), SQ(e * At));
    }
    elementwise(b, phase, i, SQ(5 * At), SQ(2 * e * At), ID("attn.softmax"));
    op = add_op(b, ET_OP_ATTENTION, phase, i, "%s", ID("attn.context"));
    if (op) {
        op->k = FIX(d->D);
        op->flops = SQ(2 * Ht);
        op->bytes = lin_add(TOK(2 * e * Ht), SQ(e * At));
    }
    gemm(b, phase, i, TOK(1), FIX(H), FIX(Ht), ID("attn.out"));
    if (d->t > 1 && (op = add_op(b, ET_OP_TP_ALLREDUCE, phase, i, "%s", ID("attn.tp_allreduce"))))
        op->bytes = TOK(e * H);
    /* encoder (post-LN): residual add fused with layer norm after each block */
    if (decoder)
        elementwise(b, phase, i, TOK(8 * H), TOK(2 * e * H), ID("mlp.layernorm"));
    else
        elementwise(b, phase, i, TOK(8 * H), TOK(3 * e * H), ID("attn.layernorm"));
    gemm(b, phase, i, TOK(1), FIX(Ft), FIX(H), ID("mlp.fc1"));
    elementwise(b, phase, i, TOK(8 * Ft), TOK(2 * e * Ft), ID("mlp.gelu"));
    gemm(b, phase, i, TOK(1), FIX(H), FIX(Ft), ID("mlp.fc2"));
    if (d->t > 1 && (op = add_op(b, ET_OP_TP_ALLREDUCE, phase, i, "%s", ID("mlp.tp_allreduce"))))
        op->bytes = TOK(e * H);
    if (!decoder) elementwise(b, phase, i, TOK(8 * H), TOK(3 * e * H), ID("mlp.layernorm"));
#undef ID
}

/* Backward of a linear layer y = x W^T + b with W [n_out, n_in]: data grad then weight grad (which
 * finalises W and b). */
static void linear_backward(builder *b, int layer, double n_out, double n_in, const char *name, int bias,
                            int produce_weight_grad)
{
    char id[80];
    snprintf(id, sizeof id, "%s.bwd_data", name);
    gemm(b, ET_PHASE_BACKWARD, layer, TOK(1), FIX(n_in), FIX(n_out), id);
    snprintf(id, sizeof id, "%s.bwd_weight", name);
    gemm(b, ET_PHASE_BACKWARD, layer, FIX(n_out), FIX(n_in), TOK(1), id);
    if (produce_weight_grad) add_grad(b, layer, n_out * n_in, "%s.weight", name);
    if (bias) add_grad(b, layer, n_out, "%s.bias", name);
}

static void layernorm_backward(builder *b, const dims *d, int layer, const char *name, et_linear rows)
{
    char id[80];
    snprintf(id, sizeof id, "%s.bwd", name);
    elementwise(b, ET_PHASE_BACKWARD, layer, lin_scale(rows, 10 * d->H), lin_scale(rows, 4 * d->e * d->H),
                id);
    add_grad(b, layer, d->H, "%s.weight", name);
    add_grad(b, layer, d->H, "%s.bias", name);
}

static void layer_backward(builder *b, const dims *d, int i, int decoder, int recompute)
{
    char name[80];
    const double H = d->H, Ht = d->Ht, Ft = d->Ft, At = d->At, e = d->e;
    if (recompute) layer_forward(b, d, i, decoder, ET_PHASE_BACKWARD, ".recompute");
#define NAME(s) (snprintf(name, sizeof name, "layer.%d.%s", i, s), name)
    if (!decoder) layernorm_backward(b, d, i, NAME("mlp.layernorm"), TOK(1));
    /* rows of weight-grad products are the token dimension: m = n_out fixed, k = T */
    linear_backward(b, i, H, Ft, NAME("mlp.fc2"), 1, 1);
    elementwise(b, ET_PHASE_BACKWARD, i, TOK(8 * Ft), TOK(3 * e * Ft), NAME("mlp.gelu.bwd"));
    linear_backward(b, i, Ft, H, NAME("mlp.fc1"), 1, 1);
    et_op *op;
    if (d->t > 1 &&
        (op = add_op(b, ET_OP_TP_ALLREDUCE, ET_PHASE_BACKWARD, i, "%s", NAME("mlp.tp_allreduce.bwd"))))
        op->bytes = TOK(e * H);
    layernorm_backward(b, d, i, decoder ? NAME("mlp.layernorm") : NAME("attn.layernorm"), TOK(1));
    linear_backward(b, i, H, Ht, NAME("attn.out"), 1, 1);
    /* context = P V: dP = dO V^T and dV = P^T dO, each 2*l*l*D per head */
    if ((op = add_op(b, ET_OP_ATTENTION, ET_PHASE_BACKWARD, i, "%s", NAME("attn.context.bwd")))) {
        op->k = FIX(d->D);
        op->flops = SQ(4 * Ht);
        op->bytes = lin_add(TOK(4 * e * Ht), SQ(2 * e * At));
    }
    elementwise(b, ET_PHASE_BACKWARD, i, SQ(4 * At), SQ(3 * e * At), NAME("attn.softmax.bwd"));
    if ((op = add_op(b, ET_OP_ATTENTION, ET_PHASE_BACKWARD, i, "%s", NAME("attn.scores.bwd")))) {
        op->k = FIX(d->D);
        op->flops = SQ(4 * Ht);
        op->bytes = lin_add(TOK(4 * e * Ht), SQ(e * At));
    }
    linear_backward(b, i, 3 * Ht, H, NAME("attn.qkv"), 1, 1);
    if (d->t > 1 &&
        (op = add_op(b, ET_OP_TP_ALLREDUCE, ET_PHASE_BACKWARD, i, "%s", NAME("attn.tp_allreduce.bwd"))))
        op->bytes = TOK(e * H);
    if (decoder) layernorm_backward(b, d, i, NAME("attn.layernorm"), TOK(1));
#undef NAME
}

/* Same as linear_backward but with rows given by another batch letter (sequences or predictions). */
static void head_linear_backward(builder *b, et_linear rows, double n_out, double n_in, const char *name,
                                 int bias, int produce_weight_grad)
{
    char id[80];
    snprintf(id, sizeof id, "%s.bwd_data", name);
    gemm(b, ET_PHASE_BACKWARD, -1, rows, FIX(n_in), FIX(n_out), id);
    snprintf(id, sizeof id, "%s.bwd_weight", name);
    gemm(b, ET_PHASE_BACKWARD, -1, FIX(n_out), FIX(n_in), rows, id);
    if (produce_weight_grad) add_grad(b, -1, n_out * n_in, "%s.weight", name);
    if (bias) add_grad(b, -1, n_out, "%s.bias", name);
}

static void head_forward(builder *b, const dims *d, const et_model_config *m)
{
    const double H = d->H, Vt = d->V / d->t, e = d->e;
    if (m->head == ET_HEAD_CAUSAL_LM) {
        elementwise(b, ET_PHASE_FORWARD, -1, TOK(8 * H), TOK(2 * e * H), "head.final_layernorm");
        gemm(b, ET_PHASE_FORWARD, -1, PRED(1), FIX(Vt), FIX(H), "head.lm.decoder");
    } else {
        if (m->head == ET_HEAD_MLM_NSP) {
            gemm(b, ET_PHASE_FORWARD, -1, SEQ(1), FIX(H), FIX(H), "head.pooler");
            gemm(b, ET_PHASE_FORWARD, -1, SEQ(1), FIX(2), FIX(H), "head.nsp");
        }
        elementwise(b, ET_PHASE_FORWARD, -1, FIX(0), PRED(2 * e * H), "head.mlm.gather");
        gemm(b, ET_PHASE_FORWARD, -1, PRED(1), FIX(H), FIX(H), "head.mlm.transform");
        elementwise(b, ET_PHASE_FORWARD, -1, PRED(8 * H), PRED(2 * e * H), "head.mlm.gelu");
        elementwise(b, ET_PHASE_FORWARD, -1, PRED(8 * H), PRED(2 * e * H), "head.mlm.layernorm");
        gemm(b, ET_PHASE_FORWARD, -1, PRED(1), FIX(Vt), FIX(H), "head.mlm.decoder");
    }
    /* softmax cross-entropy: read logits, fp32 reductions, write the logit gradient (fused fwd+bwd) */
    et_op *op = add_op(b, ET_OP_LOSS, ET_PHASE_FORWARD, -1, "head.loss");
    if (op) {
        op->flops = PRED(6 * Vt);
        op->bytes = PRED(2 * e * Vt);
    }
}

static void head_backward(builder *b, const dims *d, const et_model_config *m)
{
    const double H = d->H, Vt = d->V / d->t, e = d->e;
    int untied = !m->tie_embeddings;
    if (m->head == ET_HEAD_CAUSAL_LM) {
        head_linear_backward(b, PRED(1), Vt, H, "head.lm.decoder", 0, untied);
        layernorm_backward(b, d, -1, "head.final_layernorm", TOK(1));
        return;
    }
    head_linear_backward(b, PRED(1), Vt, H, "head.mlm.decoder", 1, untied);
    layernorm_backward(b, d, -1, "head.mlm.layernorm", PRED(1));
    elementwise(b, ET_PHASE_BACKWARD, -1, PRED(8 * H), PRED(3 * e * H), "head.mlm.gelu.bwd");
    head_linear_backward(b, PRED(1), H, H, "head.mlm.transform", 1, 1);
    elementwise(b, ET_PHASE_BACKWARD, -1, FIX(0), PRED(2 * e * H), "head.mlm.gather.bwd");
    if (m->head == ET_HEAD_MLM_NSP) {
        head_linear_backward(b, SEQ(1), 2, H, "head.nsp", 1, 1);
        head_linear_backward(b, SEQ(1), H, H, "head.pooler", 1, 1);
    }
}

static void embedding_forward(builder *b, const dims *d, const et_model_config *m)
{
    const double H = d->H, e = d->e;
    double tables = 2 + (m->type_vocab > 0);
    et_op *op = add_op(b, ET_OP_EMBEDDING, ET_PHASE_FORWARD, -1, "embed.lookup");
    if (op) {
        op->flops = TOK(tables * H);
        op->bytes = TOK((tables + 1) * e * H);
    }
    if (d->t > 1 && (op = add_op(b, ET_OP_TP_ALLREDUCE, ET_PHASE_FORWARD, -1, "embed.tp_allreduce")))
        op->bytes = TOK(e * H);
    if (m->arch == ET_ARCH_ENCODER)
        elementwise(b, ET_PHASE_FORWARD, -1, TOK(8 * H), TOK(2 * e * H), "embed.layernorm");
}

static void embedding_backward(builder *b, const dims *d, const et_model_config *m)
{
    const double H = d->H, e = d->e, Vt = d->V / d->t;
    if (m->arch == ET_ARCH_ENCODER) layernorm_backward(b, d, -1, "embed.layernorm", TOK(1));
    /* scatter-add of token gradients into dense tables (zeroed first) */
    double tables = 2 + (m->type_vocab > 0);
    double table_elems = Vt * H + m->max_positions * H + m->type_vocab * H;
    et_op *op = add_op(b, ET_OP_EMBEDDING, ET_PHASE_BACKWARD, -1, "embed.lookup.bwd");
    if (!op) return;
    op->flops = TOK(tables * H);
    op->bytes = lin_add(TOK(2 * tables * e * H), FIX(e * table_elems));
    add_grad(b, -1, Vt * H, "embed.word_embeddings");
    add_grad(b, -1, (double)m->max_positions * H, "embed.position_embeddings");
    if (m->type_vocab > 0) add_grad(b, -1, (double)m->type_vocab * H, "embed.token_type_embeddings");
}

/* Optimizer kernels over this GPU's shard of parameters (fp32 math, bytes per parameter in docs). */
static void optimizer_ops(builder *b, const et_graph_options *o, double params)
{
    double shard = params / o->optimizer_shards;
    double ge = b->e; /* gradient element size */
    et_op *op;
    if (o->precision == ET_FP16 &&
        (op = add_op(b, ET_OP_OPTIMIZER, ET_PHASE_OPTIMIZER, -1, "optimizer.unscale"))) {
        op->flops = FIX(2 * shard);
        op->bytes = FIX(2 * ge * shard);
    }
    if (o->clip_global && (op = add_op(b, ET_OP_OPTIMIZER, ET_PHASE_OPTIMIZER, -1, "optimizer.grad_norm"))) {
        op->flops = FIX(2 * shard);
        op->bytes = FIX(ge * shard);
    }
    if (o->optimizer == ET_OPT_LAMB) {
        if ((op = add_op(b, ET_OP_OPTIMIZER, ET_PHASE_OPTIMIZER, -1, "optimizer.update"))) {
            op->flops = FIX(12 * shard);
            op->bytes = FIX((ge + 12 + 12) * shard);
        }
        if ((op = add_op(b, ET_OP_OPTIMIZER, ET_PHASE_OPTIMIZER, -1, "optimizer.trust_ratio"))) {
            op->flops = FIX(4 * shard);
            op->bytes = FIX(8 * shard);
        }
        if ((op = add_op(b, ET_OP_OPTIMIZER, ET_PHASE_OPTIMIZER, -1, "optimizer.apply"))) {
            op->flops = FIX(3 * shard);
            op->bytes = FIX((12 + ge) * shard);
        }
    } else if ((op = add_op(b, ET_OP_OPTIMIZER, ET_PHASE_OPTIMIZER, -1, "optimizer.step"))) {
        op->flops = FIX(12 * shard);
        op->bytes = FIX((ge + 12 + 12 + ge) * shard);
    }
}

int et_graph_build(const et_model_config *m, const et_graph_options *o, et_graph *g, et_error *err)
{
    memset(g, 0, sizeof *g);
    g->model = *m;
    g->options = *o;
    builder b = {g, err, et_precision_bytes(o->precision), 0};
    dims d = {.H = m->hidden,
              .A = m->heads,
              .D = (double)m->hidden / m->heads,
              .F = m->ffn,
              .V = m->vocab,
              .t = o->tensor,
              .e = b.e};
    d.Ht = d.H / d.t;
    d.Ft = d.F / d.t;
    d.At = d.A / d.t;
    int per_stage = m->layers / o->pipeline;
    g->first_layer = o->stage * per_stage;
    g->last_layer = g->first_layer + per_stage - 1;
    int first = o->stage == 0, last = o->stage == o->pipeline - 1;
    int decoder = m->arch == ET_ARCH_DECODER;

    if (first) embedding_forward(&b, &d, m);
    for (int i = g->first_layer; i <= g->last_layer; i++)
        layer_forward(&b, &d, i, decoder, ET_PHASE_FORWARD, "");
    if (last) head_forward(&b, &d, m);
    if (last) head_backward(&b, &d, m);
    for (int i = g->last_layer; i >= g->first_layer; i--)
        layer_backward(&b, &d, i, decoder, o->recompute);
    if (first) embedding_backward(&b, &d, m);
    /* An untied output projection on a one-stage model is still finalised in head_backward above; a tied one
     * on a last stage that does not hold the embedding keeps its own copy (Megatron), finalised at the end.
     */
    if (last && !first && m->tie_embeddings) {
        et_op *op = add_op(&b, ET_OP_ELEMENTWISE, ET_PHASE_BACKWARD, -1, "head.tied_embedding.grad");
        if (op) op->bytes = FIX(b.e * d.V / d.t * d.H);
        add_grad(&b, -1, d.V / d.t * d.H, "head.tied_embedding");
    }
    optimizer_ops(&b, o, g->param_count);
    if (b.failed) {
        et_graph_free(g);
        return -1;
    }
    return 0;
}

void et_graph_free(et_graph *g)
{
    free(g->ops);
    free(g->params);
    g->ops = NULL;
    g->params = NULL;
    g->n_ops = g->n_params = 0;
}

int et_graph_find(const et_graph *g, const char *id)
{
    for (int i = 0; i < g->n_ops; i++)
        if (strcmp(g->ops[i].id, id) == 0) return i;
    return -1;
}

double et_model_param_count(const et_model_config *model)
{
    et_graph g;
    et_error err;
    et_graph_options o = {
        .tensor = 1, .pipeline = 1, .stage = 0, .precision = ET_FP32, .optimizer_shards = 1};
    if (et_graph_build(model, &o, &g, &err)) return -1;
    double n = g.param_count;
    et_graph_free(&g);
    return n;
}

double et_op_time(const et_op *op, const et_batch_shape *b, const et_device_profile *d, et_precision p)
{
    double flops = et_linear_eval(&op->flops, b), bytes = et_linear_eval(&op->bytes, b);
    switch (op->kind) {
    case ET_OP_TP_ALLREDUCE:
        return 0;
    case ET_OP_GEMM: {
        double m = et_linear_eval(&op->m, b), n = et_linear_eval(&op->n, b), k = et_linear_eval(&op->k, b);
        if (m <= 0 || n <= 0 || k <= 0) return 0;
        return et_kernel_time(d, p, 1, flops, bytes, m, n, k);
    }
    case ET_OP_ATTENTION: {
        double l = b->sequences > 0 ? sqrt(b->tokens_sq / b->sequences) : 0;
        if (l <= 0) return 0;
        return et_kernel_time(d, p, 1, flops, bytes, l, l, et_linear_eval(&op->k, b));
    }
    case ET_OP_OPTIMIZER:
        return et_kernel_time(d, ET_FP32, 0, flops, bytes, 0, 0, 0);
    default:
        return et_kernel_time(d, p, 0, flops, bytes, 0, 0, 0);
    }
}
