/* Every CPU kernel's backward against central finite differences, in double precision, and the kernels'
 * compositions the executors make (LoRA's adapters). The loss is
 * L = sum(r * output) for a fixed random r, so dL/doutput = r. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "rt_kernels.h"
#include "rt_tt.h"

static unsigned long long state = 12345;

static double rnd(void)
{
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return ((state >> 11) / 9007199254740992.0) * 2 - 1;
}

static double *randv(size_t n)
{
    double *v = malloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++)
        v[i] = rnd();
    return v;
}

static double dot(const double *a, const double *b, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

/* Compares analytic gradient g of parameter p (n values) with finite differences of f(). */
typedef double (*loss_fn)(void *ctx);

static double max_rel_error(double *p, const double *g, size_t n, loss_fn f, void *ctx)
{
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double save = p[i], h = 1e-6;
        p[i] = save + h;
        double up = f(ctx);
        p[i] = save - h;
        double down = f(ctx);
        p[i] = save;
        double num = (up - down) / (2 * h), err = fabs(num - g[i]) / fmax(1e-6, fabs(num) + fabs(g[i]));
        if (err > worst) worst = err;
    }
    return worst;
}

/* linear */
typedef struct lin {
    int T, n_in, n_out;
    double *x, *W, *b, *y, *r;
} lin;

static double lin_loss(void *c)
{
    lin *l = c;
    rt_linear_fwd_d(l->x, l->W, l->b, l->y, l->T, l->n_in, l->n_out);
    return dot(l->y, l->r, (size_t)l->T * l->n_out);
}

static void check_linear(void)
{
    lin l = {.T = 5, .n_in = 4, .n_out = 3};
    l.x = randv(20), l.W = randv(12), l.b = randv(3), l.y = randv(15), l.r = randv(15);
    double *dx = calloc(20, sizeof(double)), *dW = calloc(12, sizeof(double)),
           *db = calloc(3, sizeof(double));
    rt_linear_bwd_d(l.x, l.W, l.r, dx, dW, db, l.T, l.n_in, l.n_out);
    CHECK(max_rel_error(l.x, dx, 20, lin_loss, &l) < 1e-6, "linear: dx");
    CHECK(max_rel_error(l.W, dW, 12, lin_loss, &l) < 1e-6, "linear: dW");
    CHECK(max_rel_error(l.b, db, 3, lin_loss, &l) < 1e-6, "linear: db");
    /* a sparse layer is the dense kernel on W * mask with the gradient masked; at density 1 it is dense */
    double *mask = malloc(12 * sizeof(double)), *Wm = malloc(12 * sizeof(double));
    for (int i = 0; i < 12; i++)
        mask[i] = 1, Wm[i] = l.W[i] * mask[i];
    double *y1 = malloc(15 * sizeof(double));
    rt_linear_fwd_d(l.x, Wm, l.b, y1, l.T, l.n_in, l.n_out);
    lin_loss(&l);
    CHECK(memcmp(y1, l.y, 15 * sizeof(double)) == 0, "sparse layer at density 1 equals the dense layer");
    /* a sparse layer at density 0.5: the loss as a function of the kept weights only (pruned ones stay 0);
     * its weight gradient is the dense one masked */
    for (int i = 0; i < 12; i++) {
        mask[i] = i % 2;
        l.W[i] *= mask[i];
    }
    memset(dW, 0, 12 * sizeof(double));
    rt_linear_bwd_d(l.x, l.W, l.r, NULL, dW, NULL, l.T, l.n_in, l.n_out);
    for (int i = 0; i < 12; i++)
        dW[i] *= mask[i];
    double gk[6];
    for (int i = 0; i < 6; i++)
        gk[i] = dW[2 * i + 1];
    double worst = 0;
    for (int i = 0; i < 6; i++) { /* finite differences over the kept weights */
        double save = l.W[2 * i + 1], h = 1e-6;
        l.W[2 * i + 1] = save + h;
        double up = lin_loss(&l);
        l.W[2 * i + 1] = save - h;
        double down = lin_loss(&l);
        l.W[2 * i + 1] = save;
        double num = (up - down) / (2 * h);
        worst = fmax(worst, fabs(num - gk[i]) / fmax(1e-6, fabs(num) + fabs(gk[i])));
    }
    CHECK(worst < 1e-6, "sparse layer (density 0.5): masked weight gradient");
    free(dx), free(dW), free(db), free(mask), free(Wm), free(y1);
    free(l.x), free(l.W), free(l.b), free(l.y), free(l.r);
}

/* layer norm */
typedef struct ln {
    int T, n;
    double *x, *g, *b, *y, *mean, *rstd, *r;
} ln;

static double ln_loss(void *c)
{
    ln *l = c;
    rt_layernorm_fwd_d(l->x, l->g, l->b, l->y, l->mean, l->rstd, l->T, l->n);
    return dot(l->y, l->r, (size_t)l->T * l->n);
}

static void check_layernorm(void)
{
    ln l = {.T = 3, .n = 6};
    l.x = randv(18), l.g = randv(6), l.b = randv(6), l.y = randv(18), l.mean = randv(3), l.rstd = randv(3),
    l.r = randv(18);
    ln_loss(&l);
    double *dx = calloc(18, sizeof(double)), *dg = calloc(6, sizeof(double)), *db = calloc(6, sizeof(double));
    rt_layernorm_bwd_d(l.x, l.g, l.mean, l.rstd, l.r, dx, dg, db, l.T, l.n);
    CHECK(max_rel_error(l.x, dx, 18, ln_loss, &l) < 1e-5, "layer norm: dx");
    CHECK(max_rel_error(l.g, dg, 6, ln_loss, &l) < 1e-6, "layer norm: dgamma");
    CHECK(max_rel_error(l.b, db, 6, ln_loss, &l) < 1e-6, "layer norm: dbeta");
    free(dx), free(dg), free(db), free(l.x), free(l.g), free(l.b), free(l.y), free(l.mean), free(l.rstd),
        free(l.r);
}

typedef struct gelu {
    double *x, *y, *r;
    size_t n;
} gelu;

static double gelu_loss(void *c)
{
    gelu *g = c;
    rt_gelu_fwd_d(g->x, g->y, g->n);
    return dot(g->y, g->r, g->n);
}

static void check_gelu(void)
{
    gelu g = {randv(16), randv(16), randv(16), 16};
    for (int i = 0; i < 16; i++)
        g.x[i] *= 3;
    double *dx = malloc(16 * sizeof(double));
    rt_gelu_bwd_d(g.x, g.r, dx, 16);
    CHECK(max_rel_error(g.x, dx, 16, gelu_loss, &g) < 1e-6, "GELU");
    free(dx), free(g.x), free(g.y), free(g.r);
}

/* attention over variable lengths (3 sequences of lengths 1, 4, 3), A heads sharing KV key/value heads (KV
 * = A: multi-head; fewer: grouped-query, each key/value head read by A / KV query heads), queries and keys
 * Dqk wide and values Dv wide (latent attention's shape when they differ), a causal window, sinks */
typedef struct att {
    int B, causal, offsets[4];
    rt_attn_shape sh;
    double *qkv, *probs, *ctx, *r, *sinks;
} att;

static double att_loss(void *c)
{
    att *a = c;
    rt_attention_fwd_d(a->qkv, a->sinks, a->probs, a->ctx, a->offsets, a->B, &a->sh, a->causal);
    return dot(a->ctx, a->r, (size_t)a->offsets[a->B] * rt_attn_ctx_width(&a->sh));
}

static void check_attention(int causal, int A, int KV, int Dqk, int Dv, int window, int sinks)
{
    att a = {.B = 3, .causal = causal, .offsets = {0, 1, 5, 8}, .sh = {A, KV, Dqk, Dv, window}};
    const int T = 8, width = rt_attn_ld(&a.sh), lc = rt_attn_ctx_width(&a.sh);
    const size_t n = (size_t)T * width;
    a.qkv = randv(n), a.probs = randv((size_t)A * (1 + 16 + 9)), a.ctx = randv((size_t)T * lc),
    a.r = randv((size_t)T * lc), a.sinks = sinks ? randv((size_t)A) : NULL;
    att_loss(&a);
    double *dqkv = malloc(n * sizeof(double)), *scratch = malloc((size_t)A * 26 * sizeof(double));
    double *dsinks = sinks ? calloc((size_t)A, sizeof(double)) : NULL;
    rt_attention_bwd_d(a.qkv, a.probs, a.r, dqkv, dsinks, scratch, a.offsets, a.B, &a.sh);
    char what[160];
    snprintf(what, sizeof what,
             "%s attention over variable lengths, %d heads, %d key/value heads, widths %d and %d%s%s",
             causal ? "causal" : "bidirectional", A, KV, Dqk, Dv, window ? ", a window of 2" : "",
             sinks ? ", sinks" : "");
    CHECK(max_rel_error(a.qkv, dqkv, n, att_loss, &a) < 1e-5, "%s", what);
    if (sinks) CHECK(max_rel_error(a.sinks, dsinks, (size_t)A, att_loss, &a) < 1e-5, "%s: the sinks", what);
    /* no attention across sequences: changing sequence 0 leaves sequence 1's output unchanged */
    double before = a.ctx[1 * lc], saved = a.qkv[0];
    a.qkv[0] += 1;
    att_loss(&a);
    CHECK(a.ctx[1 * lc] == before, "each sequence attends only within itself");
    a.qkv[0] = saved;
    if (window &&
        causal) { /* the last row of sequence 1 (row 4) sees rows 3 and 4 only: row 2's key is out */
        att_loss(&a);
        before = a.ctx[4 * lc];
        a.qkv[2 * width + rt_attn_k_offset(&a.sh)] += 1;
        att_loss(&a);
        CHECK(a.ctx[4 * lc] == before, "a sliding window of 2: a row does not see three rows back");
    }
    free(dqkv), free(scratch), free(dsinks), free(a.qkv), free(a.probs), free(a.ctx), free(a.r),
        free(a.sinks);
}

typedef struct emb {
    int tokens[5], positions[5], types[5];
    double *word, *pos, *type, *out, *r;
} emb;

static double emb_loss(void *c)
{
    emb *e = c;
    rt_embedding_fwd_d(e->tokens, e->positions, e->types, e->word, e->pos, e->type, e->out, 5, 4);
    return dot(e->out, e->r, 20);
}

static void check_embedding(void)
{
    emb e = {.tokens = {1, 3, 1, 0, 2}, .positions = {0, 1, 2, 0, 1}, .types = {0, 0, 1, 1, 1}};
    e.word = randv(16), e.pos = randv(12), e.type = randv(8), e.out = randv(20), e.r = randv(20);
    double *dw = calloc(16, sizeof(double)), *dp = calloc(12, sizeof(double)),
           *dt = calloc(8, sizeof(double));
    rt_embedding_bwd_d(e.tokens, e.positions, e.types, e.r, dw, dp, dt, 5, 4);
    CHECK(max_rel_error(e.word, dw, 16, emb_loss, &e) < 1e-6, "embeddings: word table (repeated token)");
    CHECK(max_rel_error(e.pos, dp, 12, emb_loss, &e) < 1e-6, "embeddings: positions");
    CHECK(max_rel_error(e.type, dt, 8, emb_loss, &e) < 1e-6, "embeddings: token types");
    free(dw), free(dp), free(dt), free(e.word), free(e.pos), free(e.type), free(e.out), free(e.r);
}

typedef struct ce {
    int targets[3];
    double *logits, *d;
} ce;

static double ce_loss(void *c)
{
    ce *x = c;
    return rt_cross_entropy_d(x->logits, x->targets, x->d, 3, 5, 2) /
           2; /* loss normalised like the gradient */
}

static void check_cross_entropy(void)
{
    ce x = {.targets = {4, -1, 2}}; /* one skipped position; normalised by the 2 scored */
    x.logits = randv(15), x.d = randv(15);
    double *g = malloc(15 * sizeof(double));
    rt_cross_entropy_d(x.logits, x.targets, g, 3, 5, 2);
    CHECK(max_rel_error(x.logits, g, 15, ce_loss, &x) < 1e-6, "softmax cross-entropy (both loss heads)");
    free(g), free(x.logits), free(x.d);
}

/* tensor-train layer: 12 inputs (3x4) to 10 outputs (2x5), rank 3, 5 tokens */
typedef struct tt {
    rt_tt_layer layer;
    double *x, *cores, *y, *r, *work;
    int T;
} tt;

static double tt_loss(void *c)
{
    tt *t = c;
    rt_tt_fwd_d(&t->layer, t->x, t->cores, t->y, t->work, t->T);
    return dot(t->y, t->r, (size_t)t->T * 10);
}

static void check_tensor_train(void)
{
    et_tt_shape shape;
    et_error err;
    int in[] = {3, 4}, out[] = {2, 5};
    CHECK(et_tt_linear(&shape, in, 2, out, 2, 3, &err) == 0, "et_tt_linear: %s", err.text);
    tt t = {.T = 5};
    for (int hint = 1; hint <= 1000; hint *= 1000) { /* both orders: tokens first and cores first */
        rt_tt_layer_init(&t.layer, &shape, hint);
        size_t nc = t.layer.core_offset[4];
        t.x = randv(60), t.cores = randv(nc), t.y = randv(50), t.r = randv(50);
        t.work = malloc(rt_tt_workspace_size(&t.layer, t.T) * sizeof(double));
        /* forward equals the product with the reconstructed dense matrix */
        double *W = malloc(120 * sizeof(double)), *yd = malloc(50 * sizeof(double)), worst = 0;
        rt_tt_dense_d(&t.layer, t.cores, W);
        rt_linear_fwd_d(t.x, W, NULL, yd, t.T, 12, 10);
        tt_loss(&t);
        for (int i = 0; i < 50; i++)
            worst = fmax(worst, fabs(yd[i] - t.y[i]));
        char order[256];
        et_tt_plan_describe(&t.layer.plan, &shape, order, sizeof order);
        CHECK(worst < 1e-12, "TT forward equals x W^T with the reconstructed W (order %s, error %.2g)", order,
              worst);
        double *dx = calloc(60, sizeof(double)), *dc = calloc(nc, sizeof(double));
        rt_tt_bwd_d(&t.layer, t.x, t.cores, t.r, dx, dc, t.work, t.T);
        CHECK(max_rel_error(t.x, dx, 60, tt_loss, &t) < 1e-6, "TT input gradient (order %s)", order);
        CHECK(max_rel_error(t.cores, dc, nc, tt_loss, &t) < 1e-6, "TT gradient of every core (order %s)",
              order);
        free(W), free(yd), free(dx), free(dc), free(t.x), free(t.cores), free(t.y), free(t.r), free(t.work);
    }
}

/* RMSNorm, rotary positions and SwiGLU (the Llama layers), each against finite differences in double */
typedef struct rms {
    double *x, *g, *y, *rstd, *r;
    int T, n;
} rms;

static double rms_loss(void *c)
{
    rms *l = c;
    rt_rmsnorm_fwd_d(l->x, l->g, l->y, l->rstd, l->T, l->n);
    return dot(l->y, l->r, (size_t)l->T * l->n);
}

static void check_rmsnorm(void)
{
    rms l = {.T = 3, .n = 6};
    l.x = randv(18), l.g = randv(6), l.y = randv(18), l.rstd = randv(3), l.r = randv(18);
    rms_loss(&l);
    double *dx = calloc(18, sizeof(double)), *dg = calloc(6, sizeof(double));
    rt_rmsnorm_bwd_d(l.x, l.g, l.rstd, l.r, dx, dg, l.T, l.n);
    CHECK(max_rel_error(l.x, dx, 18, rms_loss, &l) < 1e-5, "RMSNorm: dx");
    CHECK(max_rel_error(l.g, dg, 6, rms_loss, &l) < 1e-6, "RMSNorm: dgamma");
    free(dx), free(dg), free(l.x), free(l.g), free(l.y), free(l.rstd), free(l.r);
}

/* rotary positions on `heads` runs of R values a row (stride `stride`, from column `off`): q and k of each
 * head, or the rotary part of latent attention's heads */
typedef struct rope {
    double *qkv, *work, *r;
    int positions[3], T, ld, heads, stride, R, off;
} rope;

static double rope_loss(void *c)
{
    rope *l = c;
    size_t n = (size_t)l->T * l->ld;
    memcpy(l->work, l->qkv, n * sizeof(double));
    rt_rope_d(l->work + l->off, l->positions, l->T, l->ld, l->heads, l->stride, l->R, 10000, 0);
    return dot(l->work, l->r, n);
}

static void check_rope(int KV, int R)
{
    /* 3 tokens at positions 0, 5, 2; 2 heads of 4, KV key heads; R < 4: the last R of each query head */
    rope l = {.positions = {0, 5, 2},
              .T = 3,
              .ld = 8 + 2 * KV * 4,
              .heads = R < 4 ? 2 : 2 + KV,
              .stride = 4,
              .R = R,
              .off = 4 - R};
    const size_t n = (size_t)3 * l.ld;
    l.qkv = randv(n), l.work = randv(n), l.r = randv(n);
    /* the backward is the inverse rotation of the output gradient (v untouched) */
    double *d = malloc(n * sizeof(double));
    memcpy(d, l.r, n * sizeof(double));
    rt_rope_d(d + l.off, l.positions, l.T, l.ld, l.heads, l.stride, l.R, 10000, 1);
    CHECK(max_rel_error(l.qkv, d, n, rope_loss, &l) < 1e-6,
          "rotary positions (%d key heads, %d of 4 turned): the inverse turn is the gradient", KV, R);
    /* forward then inverse is the identity */
    memcpy(l.work, l.qkv, n * sizeof(double));
    rt_rope_d(l.work + l.off, l.positions, l.T, l.ld, l.heads, l.stride, l.R, 10000, 0);
    rt_rope_d(l.work + l.off, l.positions, l.T, l.ld, l.heads, l.stride, l.R, 10000, 1);
    double worst = 0;
    for (size_t i = 0; i < n; i++)
        worst = fmax(worst, fabs(l.work[i] - l.qkv[i]));
    CHECK(worst < 1e-12, "rotary positions: turned and turned back (%.1e)", worst);
    free(d), free(l.qkv), free(l.work), free(l.r);
}

typedef struct glu {
    double *u, *y, *r;
    int T, F;
} glu;

static double glu_loss(void *c)
{
    glu *l = c;
    rt_swiglu_fwd_d(l->u, l->y, l->T, l->F);
    return dot(l->y, l->r, (size_t)l->T * l->F);
}

static void check_swiglu(void)
{
    glu l = {.T = 3, .F = 5};
    l.u = randv(30), l.y = randv(15), l.r = randv(15);
    for (int i = 0; i < 30; i++)
        l.u[i] *= 3;
    double *du = malloc(30 * sizeof(double));
    rt_swiglu_bwd_d(l.u, l.r, du, l.T, l.F);
    CHECK(max_rel_error(l.u, du, 30, glu_loss, &l) < 1e-6, "SwiGLU: dgate and dup");
    free(du), free(l.u), free(l.y), free(l.r);
}

/* the experts' routing (top-2 of 5, softmax over the chosen) and combine, against finite differences */
typedef struct moe {
    double *logits, *w, *Y, *out, *r, *rw;
    int idx[8], pos[8], T, E, k, H;
} moe;

static double route_loss(void *c)
{
    moe *m = c;
    rt_moe_route_fwd_d(m->logits, m->idx, m->w, m->T, m->E, m->k);
    return dot(m->w, m->rw, (size_t)m->T * m->k);
}

static double combine_loss(void *c)
{
    moe *m = c;
    rt_moe_combine_fwd_d(m->Y, m->pos, m->w, m->out, m->T, m->k, m->H);
    return dot(m->out, m->r, (size_t)m->T * m->H);
}

static void check_moe(void)
{
    moe m = {.T = 4, .E = 5, .k = 2, .H = 3, .pos = {3, 0, 6, 1, 2, 7, 5, 4}};
    m.logits = randv(20), m.w = randv(8), m.Y = randv(24), m.out = randv(12), m.r = randv(12),
    m.rw = randv(8);
    route_loss(&m);
    for (int t = 0; t < m.T; t++) /* the k largest, each once, weights summing to 1 */
        CHECK(m.idx[2 * t] != m.idx[2 * t + 1] &&
                  m.logits[5 * t + m.idx[2 * t]] >= m.logits[5 * t + m.idx[2 * t + 1]] &&
                  fabs(m.w[2 * t] + m.w[2 * t + 1] - 1) < 1e-12,
              "routing picks the top 2 of token %d", t);
    double *dlogits = malloc(20 * sizeof(double));
    rt_moe_route_bwd_d(m.idx, m.w, m.rw, dlogits, m.T, m.E, m.k);
    CHECK(max_rel_error(m.logits, dlogits, 20, route_loss, &m) < 1e-6, "MoE routing: dlogits");
    double *dY = malloc(24 * sizeof(double)), *dw = malloc(8 * sizeof(double));
    combine_loss(&m);
    rt_moe_combine_bwd_d(m.Y, m.pos, m.w, m.r, dY, dw, m.T, m.k, m.H);
    CHECK(max_rel_error(m.Y, dY, 24, combine_loss, &m) < 1e-6, "MoE combine: dY");
    CHECK(max_rel_error(m.w, dw, 8, combine_loss, &m) < 1e-6, "MoE combine: dw");
    free(dlogits), free(dY), free(dw), free(m.logits), free(m.w), free(m.Y), free(m.out), free(m.r),
        free(m.rw);
}

/* LoRA beside a frozen product (rt_exec_lora.c's sequence of kernels, in double): y = x W^T + s (x A^T) B^T;
 * forward u = s x A^T, y += u B^T; backward du = s dy B, dB = dy^T u, dA = du^T x, dx = dy W + du A. */
typedef struct lora {
    int T, n_in, n_out, r;
    double s;
    double *x, *W, *A, *B, *u, *y, *t, *rr;
} lora;

static double lora_loss(void *c)
{
    lora *l = c;
    const size_t nu = (size_t)l->T * l->r, ny = (size_t)l->T * l->n_out;
    rt_linear_fwd_d(l->x, l->W, NULL, l->y, l->T, l->n_in, l->n_out);
    rt_linear_fwd_d(l->x, l->A, NULL, l->u, l->T, l->n_in, l->r);
    for (size_t i = 0; i < nu; i++)
        l->u[i] *= l->s;
    rt_linear_fwd_d(l->u, l->B, NULL, l->t, l->T, l->r, l->n_out);
    for (size_t i = 0; i < ny; i++)
        l->y[i] += l->t[i];
    return dot(l->y, l->rr, ny);
}

static void check_lora(void)
{
    lora l = {.T = 6, .n_in = 5, .n_out = 4, .r = 2, .s = 8.0 / 2};
    l.x = randv(30), l.W = randv(20), l.A = randv(10), l.B = randv(8), l.u = randv(12), l.y = randv(24);
    l.t = randv(24), l.rr = randv(24);
    lora_loss(&l); /* u as the forward leaves it */
    double *du = calloc(12, sizeof(double)), *dA = calloc(10, sizeof(double)),
           *dB = calloc(8, sizeof(double)), *dx = calloc(30, sizeof(double));
    rt_linear_bwd_d(NULL, l.W, l.rr, dx, NULL, NULL, l.T, l.n_in, l.n_out); /* the frozen product's dx */
    rt_linear_bwd_d(NULL, l.B, l.rr, du, NULL, NULL, l.T, l.r, l.n_out);
    for (int i = 0; i < 12; i++)
        du[i] *= l.s;
    rt_linear_bwd_d(l.u, l.B, l.rr, NULL, dB, NULL, l.T, l.r, l.n_out);
    rt_linear_bwd_d(NULL, l.A, du, dx, NULL, NULL, l.T, l.n_in, l.r);
    rt_linear_bwd_d(l.x, l.A, du, NULL, dA, NULL, l.T, l.n_in, l.r);
    CHECK(max_rel_error(l.A, dA, 10, lora_loss, &l) < 1e-6, "LoRA: dA");
    CHECK(max_rel_error(l.B, dB, 8, lora_loss, &l) < 1e-6, "LoRA: dB");
    CHECK(max_rel_error(l.x, dx, 30, lora_loss, &l) < 1e-6,
          "LoRA: dx (the frozen product's and the adapters')");
    free(l.x), free(l.W), free(l.A), free(l.B), free(l.u), free(l.y), free(l.t), free(l.rr);
    free(du), free(dA), free(dB), free(dx);
}

int main(void)
{
    check_lora();
    check_moe();
    check_rmsnorm();
    check_rope(2, 4);
    check_rope(1, 4);
    check_rope(2, 2);
    check_swiglu();
    check_linear();
    check_layernorm();
    check_gelu();
    check_attention(0, 2, 2, 3, 3, 0, 0);
    check_attention(1, 2, 2, 3, 3, 0, 0);
    check_attention(0, 4, 2, 3, 3, 0, 0);
    check_attention(1, 4, 1, 3, 3, 0, 0);
    check_attention(1, 2, 2, 5, 3, 0, 0); /* latent attention: queries and keys wider than values */
    check_attention(1, 4, 2, 3, 3, 2, 0); /* a sliding window */
    check_attention(1, 4, 2, 3, 3, 0, 1); /* sinks */
    check_attention(1, 2, 2, 5, 3, 2, 1); /* all three */
    check_embedding();
    check_cross_entropy();
    check_tensor_train();
    return check_summary("test_gradcheck");
}
