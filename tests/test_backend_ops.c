/* test_backend_ops: every kernel family of every backend this build has, forward and backward, against the
 * double-precision reference kernels (rt_kernels.h's _d instantiation), in the style of ggml's
 * test-backend-ops. Random inputs (a fixed seed), sequences of unequal lengths, grouped-query attention,
 * accumulating outputs started from non-zero values, masked optimizer slices.
 *
 * The error of a result is max |got - ref| / max(max |ref|, 1e-3) (normalised to the tensor's scale), and
 * its bound depends on the products' arithmetic (rt_gemm_math): fp32 1e-4 (float against double over sums of
 * at most a few hundred terms), tf32 4e-3 (10-bit mantissas, 2^-11 relative a rounding), bf16 3e-2 (8-bit
 * mantissas), fp16 4e-3 (11-bit). Kernels without products keep fp32's bound in every mode. Atomic sums on a
 * GPU change the order of additions, not the bound.
 *
 * Usage: test_backend_ops [--backend NAME] [--math fp32|tf32|bf16|fp16]: every backend and every arithmetic
 * it supports by default. Exit 0 all within bounds, 1 a failure, 77 (ctest's skip) when the one backend
 * named cannot start here (the line says why). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_backend.h"
#include "rt_elementwise.h"
#include "rt_kernels.h"
#include "rt_tt.h"

static int failures, checks;
static rt_backend *be;
static double tol_gemm, tol_plain = 1e-4;
static const char *label; /* "cpu fp32" */

/* ---- host data, device copies ---- */

static unsigned long long rng = 0x9E3779B97F4A7C15ull;
static double uniform(void) /* [-1, 1) */
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0 * 2 - 1;
}

static float *randf(size_t n, double scale)
{
    float *x = malloc((n ? n : 1) * sizeof *x);
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(uniform() * scale);
    return x;
}

static double *to_d(const float *x, size_t n)
{
    double *d = malloc((n ? n : 1) * sizeof *d);
    for (size_t i = 0; i < n; i++)
        d[i] = x[i];
    return d;
}

static void *dev(const void *host, size_t bytes)
{
    void *p = be->alloc(be, bytes);
    if (!p) {
        fprintf(stderr, "test_backend_ops: out of device memory (%zu bytes)\n", bytes);
        exit(1);
    }
    if (host) be->upload(be, p, host, bytes);
    return p;
}

static float *devf(const float *host, size_t n)
{
    return dev(host, n * sizeof(float));
}

static int *devi(const int *host, size_t n)
{
    return dev(host, n * sizeof(int));
}

/* the device result against the reference, within `tol` */
static void check(const char *family, const char *what, const float *d_got, const double *ref, size_t n,
                  double tol)
{
    float *got = malloc((n ? n : 1) * sizeof *got);
    be->download(be, got, d_got, n * sizeof *got);
    double scale = 1e-3, err = 0;
    for (size_t i = 0; i < n; i++)
        scale = fabs(ref[i]) > scale ? fabs(ref[i]) : scale;
    for (size_t i = 0; i < n; i++) {
        const double e = fabs(got[i] - ref[i]) / scale;
        err = e > err || isnan(e) ? e : err;
    }
    const char *failure = be->failure(be);
    const int ok = !failure && err <= tol && !isnan(err);
    checks++;
    if (!ok) failures++;
    printf("%-4s %-10s %-15s %-26s error %.2e bound %.0e%s%s\n", ok ? "ok" : "FAIL", label, family, what, err,
           tol, failure ? " device: " : "", failure ? failure : "");
    free(got);
}

/* device doubles (the step's scalars) starting at init, and one read back */
static double *dev_scalars(const double *init, int n)
{
    return dev(init, (size_t)n * sizeof(double));
}

static double read_scalar(const double *d)
{
    double x = 0;
    be->download(be, &x, d, sizeof x);
    return x;
}

static void check_scalar(const char *family, const char *what, double got, double ref, double tol)
{
    const double err = fabs(got - ref) / (fabs(ref) > 1e-3 ? fabs(ref) : 1e-3);
    const int ok = err <= tol && !be->failure(be);
    checks++;
    if (!ok) failures++;
    printf("%-4s %-10s %-15s %-26s error %.2e bound %.0e\n", ok ? "ok" : "FAIL", label, family, what, err,
           tol);
}

/* ---- variable-length batches: sequences of 5, 17 and 33 tokens, or (attention's tiles and k-steps) of 70
 * and 130 ---- */

static const int short_seqs[4] = {0, 5, 22, 55}, long_seqs[3] = {0, 70, 200};
static const int *offsets = short_seqs;
static int NB = 3;
#define TT_TOKENS 200

static size_t probs_size(int A)
{
    size_t n = 0;
    for (int s = 0; s < NB; s++)
        n += (size_t)A * (offsets[s + 1] - offsets[s]) * (offsets[s + 1] - offsets[s]);
    return n;
}

static rt_dev_batch make_batch(int *positions, int *tokens, int *targets, int P, int V)
{
    rt_dev_batch b;
    memset(&b, 0, sizeof b);
    const int T = offsets[NB];
    for (int s = 0; s < NB; s++)
        for (int t = offsets[s]; t < offsets[s + 1]; t++)
            positions[t] = t - offsets[s];
    for (int t = 0; t < T; t++)
        tokens[t] = (int)((uniform() + 1) / 2 * V) % V;
    for (int p = 0; p < P; p++)
        targets[p] = p % 5 == 3 ? -1 : (int)((uniform() + 1) / 2 * V) % V;
    int *types = calloc((size_t)T, sizeof *types);
    b.B = NB, b.T = T, b.P = P;
    b.offsets_host = offsets;
    b.tokens = devi(tokens, (size_t)T), b.positions = devi(positions, (size_t)T),
    b.types = devi(types, (size_t)T);
    b.offsets = devi(offsets, NB + 1), b.targets = devi(targets, (size_t)P);
    free(types);
    return b;
}

static void free_batch(rt_dev_batch *b)
{
    be->free(be, b->tokens), be->free(be, b->positions), be->free(be, b->types), be->free(be, b->offsets);
    be->free(be, b->targets);
}

/* ---- the families ---- */

static void test_linear(void)
{
    const int T = 37, n_in = 48, n_out = 40;
    float *x = randf((size_t)T * n_in, 1), *W = randf((size_t)n_out * n_in, 0.3), *b = randf(n_out, 0.5);
    float *dy = randf((size_t)T * n_out, 1), *dx0 = randf((size_t)T * n_in, 1),
          *dW0 = randf((size_t)n_out * n_in, 1);
    float *db0 = randf(n_out, 1);
    double *xd = to_d(x, (size_t)T * n_in), *Wd = to_d(W, (size_t)n_out * n_in), *bd = to_d(b, n_out);
    double *dyd = to_d(dy, (size_t)T * n_out), *dxd = to_d(dx0, (size_t)T * n_in);
    double *dWd = to_d(dW0, (size_t)n_out * n_in), *dbd = to_d(db0, n_out),
           *yd = calloc((size_t)T * n_out, 8);
    float *X = devf(x, (size_t)T * n_in), *Wv = devf(W, (size_t)n_out * n_in), *B = devf(b, n_out);
    float *Y = devf(NULL, (size_t)T * n_out), *DY = devf(dy, (size_t)T * n_out),
          *DX = devf(dx0, (size_t)T * n_in);
    float *DW = devf(dW0, (size_t)n_out * n_in), *DB = devf(db0, n_out);
    be->linear_fwd(be, X, Wv, B, Y, T, n_in, n_out);
    rt_linear_fwd_d(xd, Wd, bd, yd, T, n_in, n_out);
    check("linear", "forward (bias)", Y, yd, (size_t)T * n_out, tol_gemm);
    be->linear_bwd(be, X, Wv, DY, DX, DW, DB, T, n_in, n_out);
    rt_linear_bwd_d(xd, Wd, dyd, dxd, dWd, dbd, T, n_in, n_out);
    check("linear", "backward dx (+=)", DX, dxd, (size_t)T * n_in, tol_gemm);
    check("linear", "backward dW (+=)", DW, dWd, (size_t)n_out * n_in, tol_gemm);
    check("linear", "backward db (+=)", DB, dbd, n_out, tol_plain);
    float *ptrs[] = {X, Wv, B, Y, DY, DX, DW, DB};
    for (int i = 0; i < 8; i++)
        be->free(be, ptrs[i]);
    free(x), free(W), free(b), free(dy), free(dx0), free(dW0), free(db0);
    free(xd), free(Wd), free(bd), free(dyd), free(dxd), free(dWd), free(dbd), free(yd);
}

/* The parameters' 16-bit shadow (bf16 and fp16 products): a weight inside the shadowed buffer is read from
 * its 16-bit copy: the same products as rounding it at the call; a weight changed without a refresh still
 * reads the old copy (the shadow is what is used), and after one the new. */
static void test_shadow16(void)
{
    const int T = 37, n_in = 48, n_out = 40;
    const size_t nw = (size_t)n_out * n_in, pad = 8, np = nw + 2 * pad;
    float *x = randf((size_t)T * n_in, 1), *w = randf(nw, 0.3), *dy = randf((size_t)T * n_out, 1);
    float *P = devf(NULL, np), *X = devf(x, (size_t)T * n_in), *DY = devf(dy, (size_t)T * n_out);
    float *Y = devf(NULL, (size_t)T * n_out), *DX = devf(NULL, (size_t)T * n_in);
    void *P16 = be->alloc(be, np * 2);
    float *y0 = malloc((size_t)T * n_out * sizeof *y0), *dx0 = malloc((size_t)T * n_in * sizeof *dx0);
    be->upload(be, P + pad, w, nw * sizeof *w);
    be->linear_fwd(be, X, P + pad, NULL, Y, T, n_in, n_out); /* rounded at the call */
    be->linear_bwd(be, X, P + pad, DY, DX, NULL, NULL, T, n_in, n_out);
    be->download(be, y0, Y, (size_t)T * n_out * sizeof *y0);
    be->download(be, dx0, DX, (size_t)T * n_in * sizeof *dx0);
    double *yd = to_d(y0, (size_t)T * n_out), *dxd = to_d(dx0, (size_t)T * n_in);
    be->round16(be, P16, P, np);
    be->shadow16(be, P, P16, np);
    be->fill(be, DX, 0, (size_t)T * n_in);
    be->linear_fwd(be, X, P + pad, NULL, Y, T, n_in, n_out);
    be->linear_bwd(be, X, P + pad, DY, DX, NULL, NULL, T, n_in, n_out);
    check("shadow16", "forward from the copy", Y, yd, (size_t)T * n_out, 1e-5);
    check("shadow16", "backward dx from the copy", DX, dxd, (size_t)T * n_in, 1e-5);
    be->scale(be, P + pad, 2.0f, nw); /* not refreshed: the copy still holds w */
    be->linear_fwd(be, X, P + pad, NULL, Y, T, n_in, n_out);
    check("shadow16", "a stale copy is what is read", Y, yd, (size_t)T * n_out, 1e-5);
    be->round16(be, P16, P, np);
    be->linear_fwd(be, X, P + pad, NULL, Y, T, n_in, n_out);
    for (size_t i = 0; i < (size_t)T * n_out; i++)
        yd[i] *= 2; /* 2 w rounds to twice w's rounding */
    check("shadow16", "refreshed: 2 w", Y, yd, (size_t)T * n_out, 1e-5);
    be->shadow16(be, NULL, NULL, 0);
    be->free(be, P), be->free(be, X), be->free(be, DY), be->free(be, Y), be->free(be, DX), be->free(be, P16);
    free(x), free(w), free(dy), free(y0), free(dx0), free(yd), free(dxd);
}

static void test_norms(void)
{
    const int T = 19, n = 72;
    const size_t N = (size_t)T * n;
    float *x = randf(N, 2), *r = randf(N, 1), *g = randf(n, 1), *b = randf(n, 1), *dy = randf(N, 1);
    float *dx0 = randf(N, 1), *dg0 = randf(n, 1), *db0 = randf(n, 1);
    double *xd = to_d(x, N), *rd = to_d(r, N), *gd = to_d(g, n), *bd = to_d(b, n), *dyd = to_d(dy, N);
    double *yd = calloc(N, 8), *sumd = calloc(N, 8), *md = calloc(T, 8), *rsd = calloc(T, 8);
    float *X = devf(x, N), *R = devf(r, N), *G = devf(g, n), *Bv = devf(b, n), *Y = devf(NULL, N);
    float *S = devf(NULL, N), *M = devf(NULL, T), *RS = devf(NULL, T), *DY = devf(dy, N);
    float *DX = devf(dx0, N), *DG = devf(dg0, n), *DB = devf(db0, n);
    if (be->supports(be, RT_FAMILY_LAYERNORM)) {
        be->layernorm_fwd(be, X, G, Bv, Y, M, RS, T, n);
        rt_layernorm_fwd_d(xd, gd, bd, yd, md, rsd, T, n);
        check("layer norm", "forward", Y, yd, N, tol_plain);
        check("layer norm", "forward rstd", RS, rsd, T, tol_plain);
        be->add_layernorm_fwd(be, X, R, S, G, Bv, Y, M, RS, T, n);
        rt_add_layernorm_fwd_d(xd, rd, sumd, gd, bd, yd, md, rsd, T, n);
        check("layer norm", "add + forward", Y, yd, N, tol_plain);
        check("layer norm", "add + forward sum", S, sumd, N, tol_plain);
        double *dxd = to_d(dx0, N), *dgd = to_d(dg0, n), *dbd = to_d(db0, n);
        be->layernorm_bwd(be, S, G, M, RS, DY, DX, DG, DB, T, n);
        rt_layernorm_bwd_d(sumd, gd, md, rsd, dyd, dxd, dgd, dbd, T, n);
        check("layer norm", "backward dx (+=)", DX, dxd, N, tol_plain);
        check("layer norm", "backward dg (+=)", DG, dgd, n, tol_plain);
        check("layer norm", "backward db (+=)", DB, dbd, n, tol_plain);
        free(dxd), free(dgd), free(dbd);
    }
    if (be->supports(be, RT_FAMILY_RMSNORM)) {
        be->upload(be, DX, dx0, N * 4), be->upload(be, DG, dg0, (size_t)n * 4);
        double *dxd = to_d(dx0, N), *dgd = to_d(dg0, n);
        be->rmsnorm_fwd(be, X, G, Y, RS, T, n);
        rt_rmsnorm_fwd_d(xd, gd, yd, rsd, T, n);
        check("RMSNorm", "forward", Y, yd, N, tol_plain);
        be->rmsnorm_bwd(be, X, G, RS, DY, DX, DG, T, n);
        rt_rmsnorm_bwd_d(xd, gd, rsd, dyd, dxd, dgd, T, n);
        check("RMSNorm", "backward dx (+=)", DX, dxd, N, tol_plain);
        check("RMSNorm", "backward dg (+=)", DG, dgd, n, tol_plain);
        free(dxd), free(dgd);
    }
    float *ptrs[] = {X, R, G, Bv, Y, S, M, RS, DY, DX, DG, DB};
    for (int i = 0; i < 12; i++)
        be->free(be, ptrs[i]);
    free(x), free(r), free(g), free(b), free(dy), free(dx0), free(dg0), free(db0);
    free(xd), free(rd), free(gd), free(bd), free(dyd), free(yd), free(sumd), free(md), free(rsd);
}

static void test_pointwise(void)
{
    const int T = 23, F = 40;
    const size_t n = (size_t)T * 2 * F;
    float *u = randf(n, 3), *dy = randf(n, 1);
    double *ud = to_d(u, n), *dyd = to_d(dy, n), *yd = calloc(n, 8), *dud = calloc(n, 8);
    float *U = devf(u, n), *DY = devf(dy, n), *Y = devf(NULL, n), *DU = devf(NULL, n);
    if (be->supports(be, RT_FAMILY_GELU)) {
        be->gelu_fwd(be, U, Y, n);
        rt_gelu_fwd_d(ud, yd, n);
        check("GELU", "forward", Y, yd, n, tol_plain);
        be->gelu_bwd(be, U, DY, DU, n);
        rt_gelu_bwd_d(ud, dyd, dud, n);
        check("GELU", "backward", DU, dud, n, tol_plain);
    }
    if (be->supports(be, RT_FAMILY_SWIGLU)) {
        be->swiglu_fwd(be, U, Y, T, F);
        rt_swiglu_fwd_d(ud, yd, T, F);
        check("SwiGLU", "forward", Y, yd, (size_t)T * F, tol_plain);
        be->swiglu_bwd(be, U, DY, DU, T, F);
        rt_swiglu_bwd_d(ud, dyd, dud, T, F);
        check("SwiGLU", "backward", DU, dud, n, tol_plain);
    }
    be->free(be, U), be->free(be, DY), be->free(be, Y), be->free(be, DU);
    free(u), free(dy), free(ud), free(dyd), free(yd), free(dud);
}

/* attention at A heads over KV key/value heads (KV = A: multi-head), queries and keys D wide, values Dv wide
 * (latent attention's shape when they differ), a causal sliding window of `window` (0: none), sinks or not */
/* The inputs both attention tests draw (qkv, the context's gradient, sinks), on the host, as doubles for
 * the reference and on the device, over the current sequences, and the case's name. */
typedef struct attn_case {
    rt_attn_shape sh;
    int ld, T, lc;
    size_t nq, np, nc;
    int positions[TT_TOKENS], tokens[TT_TOKENS], targets[TT_TOKENS];
    rt_dev_batch b;
    float *qkv, *dctx, *sink;    /* host; sink NULL without sinks */
    double *qd, *dcd, *sd, *dsd; /* the reference's; dsd zeros for the sinks' gradient */
    float *Q, *DC, *S, *DS;      /* device; S and DS NULL without sinks */
    char kind[80];
} attn_case;

static void attn_case_open(attn_case *c, int A, int KV, int causal, int D, int Dv, int window, int sinks)
{
    c->sh = (rt_attn_shape){A, KV, D, Dv, window};
    c->ld = rt_attn_ld(&c->sh), c->T = offsets[NB], c->lc = rt_attn_ctx_width(&c->sh);
    c->nq = (size_t)c->T * c->ld, c->np = probs_size(A), c->nc = (size_t)c->T * c->lc;
    c->b = make_batch(c->positions, c->tokens, c->targets, c->T, 11);
    c->qkv = randf(c->nq, 1), c->dctx = randf(c->nc, 1), c->sink = sinks ? randf((size_t)A, 1) : NULL;
    c->qd = to_d(c->qkv, c->nq), c->dcd = to_d(c->dctx, c->nc);
    c->sd = sinks ? to_d(c->sink, (size_t)A) : NULL, c->dsd = sinks ? calloc((size_t)A, 8) : NULL;
    c->Q = devf(c->qkv, c->nq), c->DC = devf(c->dctx, c->nc);
    c->S = sinks ? devf(c->sink, (size_t)A) : NULL, c->DS = sinks ? devf(NULL, (size_t)A) : NULL;
    snprintf(c->kind, sizeof c->kind, "%s%s D%d%s%s%s", causal ? "causal " : "", KV == A ? "MHA" : "GQA", D,
             Dv != D ? " Dv differs" : "", window ? " window" : "", sinks ? " sinks" : "");
}

static void attn_case_close(attn_case *c)
{
    be->free(be, c->Q), be->free(be, c->DC);
    if (c->S) be->free(be, c->S), be->free(be, c->DS);
    free_batch(&c->b);
    free(c->qkv), free(c->dctx), free(c->sink), free(c->qd), free(c->dcd), free(c->sd), free(c->dsd);
}

static void test_attention(int A, int KV, int causal, int D, int Dv, int window, int sinks)
{
    attn_case c;
    attn_case_open(&c, A, KV, causal, D, Dv, window, sinks);
    const rt_attn_shape sh = c.sh;
    const int ld = c.ld, T = c.T;
    const size_t nq = c.nq, np = c.np, nc = c.nc;
    const int *positions = c.positions;
    float *qkv = c.qkv, *Q = c.Q, *DC = c.DC, *S = c.S, *DS = c.DS;
    double *qd = c.qd, *dcd = c.dcd, *sd = c.sd, *dsd = c.dsd, *pd = calloc(np, 8), *cd = calloc(nc, 8);
    double *dqd = calloc(nq, 8), *dpd = calloc(np, 8);
    float *P = devf(NULL, np), *C = devf(NULL, nc), *DQ = devf(NULL, nq), *DP = devf(NULL, np);
    const char *kind = c.kind;
    char what[128];
    be->attn_scores_fwd(be, Q, P, &c.b, &sh);
    rt_attn_scores_fwd_d(qd, pd, offsets, NB, &sh);
    snprintf(what, sizeof what, "scores %s", kind);
    check("attention", what, P, pd, np, tol_gemm);
    {
        float *pf = malloc(np * 4); /* the softmax from the reference's scores, so its error is its own */
        for (size_t i = 0; i < np; i++)
            pf[i] = (float)pd[i];
        be->upload(be, P, pf, np * 4);
        free(pf);
    }
    be->attn_softmax_fwd(be, P, S, &c.b, &sh, causal);
    rt_attn_softmax_fwd_d(pd, sd, offsets, NB, &sh, causal);
    snprintf(what, sizeof what, "softmax %s", kind);
    check("attention", what, P, pd, np, tol_plain);
    be->attn_context_fwd(be, Q, P, C, &c.b, &sh);
    rt_attn_context_fwd_d(qd, pd, cd, offsets, NB, &sh);
    snprintf(what, sizeof what, "context %s", kind);
    check("attention", what, C, cd, nc, tol_gemm);
    be->attn_context_bwd(be, Q, P, DC, DQ, DP, &c.b, &sh);
    rt_attn_context_bwd_d(qd, pd, dcd, dqd, dpd, offsets, NB, &sh);
    snprintf(what, sizeof what, "context.bwd dP %s", kind);
    check("attention", what, DP, dpd, np, tol_gemm);
    be->attn_softmax_bwd(be, P, DP, DS, &c.b, &sh);
    rt_attn_softmax_bwd_d(pd, dpd, dsd, offsets, NB, &sh);
    snprintf(what, sizeof what, "softmax.bwd %s", kind);
    check("attention", what, DP, dpd, np, tol_gemm);
    if (sinks) {
        snprintf(what, sizeof what, "sinks' gradient %s", kind);
        check("attention", what, DS, dsd, (size_t)A, tol_gemm);
    }
    be->attn_scores_bwd(be, Q, DP, DQ, &c.b, &sh);
    rt_attn_scores_bwd_d(qd, dpd, dqd, offsets, NB, &sh);
    snprintf(what, sizeof what, "dqkv %s", kind);
    check("attention", what, DQ, dqd, nq, tol_gemm);
    if (be->supports(be, RT_FAMILY_ROPE) && causal && !window) {
        /* q and k of every head (the standard layout), then a rotary part of R = 4 inside each query
         * head (latent attention's) */
        for (int pass = 0; pass < 2; pass++) {
            const int heads = pass ? A : A + KV, R = pass ? 4 : D, off = pass ? D - 4 : 0;
            be->upload(be, Q, qkv, nq * 4);
            for (size_t i = 0; i < nq; i++)
                qd[i] = qkv[i];
            be->rope(be, Q + off, &c.b, ld, heads, D, R, 10000.0, false);
            rt_rope_d(qd + off, positions, T, ld, heads, D, R, 10000.0, 0);
            snprintf(what, sizeof what, "forward %s%s", kind, pass ? " rotary part" : "");
            check("rotary", what, Q, qd, nq, tol_plain);
            be->rope(be, Q + off, &c.b, ld, heads, D, R, 10000.0, true);
            rt_rope_d(qd + off, positions, T, ld, heads, D, R, 10000.0, 1);
            snprintf(what, sizeof what, "inverse %s%s", kind, pass ? " rotary part" : "");
            check("rotary", what, Q, qd, nq, tol_plain);
        }
    }
    be->free(be, P), be->free(be, C), be->free(be, DQ), be->free(be, DP);
    free(pd), free(cd), free(dqd), free(dpd);
    attn_case_close(&c);
}

/* Fused attention against the double reference of the unfused kernels (rt_attention_fwd_d, _bwd_d): the
 * context, the gradient wrt qkv and the sinks' gradient; fp32 arithmetic in every mode. */
static void test_flash(int A, int KV, int causal, int D, int Dv, int window, int sinks)
{
    attn_case c;
    attn_case_open(&c, A, KV, causal, D, Dv, window, sinks);
    const size_t nl = (size_t)c.T * A;
    double *pd = calloc(c.np, 8), *cd = calloc(c.nc, 8), *dqd = calloc(c.nq, 8), *scratch = calloc(c.np, 8);
    float *C = devf(NULL, c.nc), *L = devf(NULL, nl), *DL = devf(NULL, nl);
    float *DQ = devf(c.qkv, c.nq); /* starts non-zero: the backward overwrites */
    char w[128];
    be->attn_flash_fwd(be, c.Q, c.S, C, L, &c.b, &c.sh, causal);
    rt_attention_fwd_d(c.qd, c.sd, pd, cd, offsets, NB, &c.sh, causal);
    snprintf(w, sizeof w, "context %s", c.kind);
    check("fused attention", w, C, cd, c.nc, tol_plain);
    be->attn_flash_bwd(be, c.Q, c.S, C, L, c.DC, DQ, c.DS, DL, &c.b, &c.sh, causal);
    rt_attention_bwd_d(c.qd, pd, c.dcd, dqd, c.dsd, scratch, offsets, NB, &c.sh);
    snprintf(w, sizeof w, "dqkv %s", c.kind);
    check("fused attention", w, DQ, dqd, c.nq, tol_plain);
    if (sinks) {
        snprintf(w, sizeof w, "sinks' gradient %s", c.kind);
        check("fused attention", w, c.DS, c.dsd, (size_t)A, tol_plain);
    }
    be->free(be, C), be->free(be, L), be->free(be, DQ), be->free(be, DL);
    free(pd), free(cd), free(dqd), free(scratch);
    attn_case_close(&c);
}

static void test_embedding_head(void)
{
    const int T = offsets[NB], H = 24, V = 97, NP = 40, P = 17; /* positions up to 32 */
    int positions[TT_TOKENS], tokens[TT_TOKENS], targets[TT_TOKENS], types[TT_TOKENS] = {0};
    rt_dev_batch b = make_batch(positions, tokens, targets, P, V);
    float *word = randf((size_t)V * H, 1), *pos = randf((size_t)NP * H, 1), *type = randf(2 * (size_t)H, 1);
    float *dout = randf((size_t)T * H, 1);
    double *wd = to_d(word, (size_t)V * H), *pd = to_d(pos, (size_t)NP * H), *td = to_d(type, 2 * (size_t)H);
    double *dod = to_d(dout, (size_t)T * H), *od = calloc((size_t)T * H, 8);
    float *W = devf(word, (size_t)V * H), *Pp = devf(pos, (size_t)NP * H), *Ty = devf(type, 2 * (size_t)H);
    float *O = devf(NULL, (size_t)T * H), *DO = devf(dout, (size_t)T * H);
    be->embedding_fwd(be, &b, W, Pp, Ty, O, H);
    rt_embedding_fwd_d(tokens, positions, types, wd, pd, td, od, T, H);
    check("embedding", "forward", O, od, (size_t)T * H, tol_plain);
    be->embedding_bwd(be, &b, DO, W, Pp, Ty, H); /* accumulated into the tables themselves */
    rt_embedding_bwd_d(tokens, positions, types, dod, wd, pd, td, T, H);
    check("embedding", "backward word (+=)", W, wd, (size_t)V * H, tol_plain);
    check("embedding", "backward position (+=)", Pp, pd, (size_t)NP * H, tol_plain);
    check("embedding", "backward type (+=)", Ty, td, 2 * (size_t)H, tol_plain);
    /* the head: P scored rows of logits over V */
    float *z = randf((size_t)P * V, 4);
    double *zd = to_d(z, (size_t)P * V), *dzd = calloc((size_t)P * V, 8);
    float *Z = devf(z, (size_t)P * V), *DZ = devf(NULL, (size_t)P * V);
    const double start = 0.5; /* the loss is added into a device double */
    double *L = dev_scalars(&start, 1);
    be->cross_entropy(be, Z, &b, DZ, V, 7.0, L);
    const double ref = rt_cross_entropy_d(zd, targets, dzd, P, V, 7.0);
    check_scalar("cross-entropy", "loss (+= on the device)", read_scalar(L) - start, ref, tol_plain);
    be->free(be, L);
    check("cross-entropy", "dlogits", DZ, dzd, (size_t)P * V, tol_plain);
    be->free(be, W), be->free(be, Pp), be->free(be, Ty), be->free(be, O), be->free(be, DO), be->free(be, Z);
    be->free(be, DZ);
    free_batch(&b);
    free(word), free(pos), free(type), free(dout), free(wd), free(pd), free(td), free(dod), free(od), free(z);
    free(zd), free(dzd);
}

static void test_glue(void)
{
    const int rows = 13, width = 21, ld = 25;
    const size_t n = (size_t)rows * ld;
    float *x = randf(n, 1), *y = randf(n, 1), *mask = randf(n, 1), *bias = randf(width, 1);
    for (size_t i = 0; i < n; i++)
        mask[i] = mask[i] > 0 ? 1.0f : 0.0f;
    const int idx[6] = {3, 0, 12, 3, 7, 3}; /* repeated rows: the scatter adds them up */
    double *ref = calloc(n, 8);
    float *X = devf(x, n), *Y = devf(y, n), *O = devf(NULL, n), *M = devf(mask, n), *Bv = devf(bias, width);
    int *I = devi(idx, 6);
    be->add(be, O, X, Y, n);
    for (size_t i = 0; i < n; i++)
        ref[i] = (double)x[i] + y[i];
    check("glue", "add", O, ref, n, tol_plain);
    be->axpy(be, O, X, 0.75f, n);
    for (size_t i = 0; i < n; i++)
        ref[i] += 0.75 * x[i];
    check("glue", "axpy", O, ref, n, tol_plain);
    be->gather_rows(be, O, X, I, 6, ld);
    for (int p = 0; p < 6; p++)
        for (int c = 0; c < ld; c++)
            ref[(size_t)p * ld + c] = x[(size_t)idx[p] * ld + c];
    check("glue", "gather_rows", O, ref, 6 * (size_t)ld, tol_plain);
    be->upload(be, O, y, n * 4);
    be->scatter_add_rows(be, O, X, I, 6, ld);
    for (size_t i = 0; i < n; i++)
        ref[i] = y[i];
    for (int p = 0; p < 6; p++)
        for (int c = 0; c < ld; c++)
            ref[(size_t)idx[p] * ld + c] += x[(size_t)p * ld + c];
    check("glue", "scatter_add_rows", O, ref, n, tol_plain);
    be->upload(be, O, x, n * 4);
    be->mask_mul(be, O, M, n);
    be->scale(be, O, -1.5f, n);
    for (size_t i = 0; i < n; i++)
        ref[i] = -1.5 * x[i] * mask[i];
    check("glue", "mask_mul, scale", O, ref, n, tol_plain);
    double ss = 0;
    for (size_t i = 0; i < n; i++)
        ss += (double)x[i] * x[i];
    const double start = 2;
    double *SS = dev_scalars(&start, 1);
    be->sum_sq(be, X, n, SS);
    check_scalar("glue", "sum_sq (+=)", read_scalar(SS) - start, ss, tol_plain);
    be->free(be, SS);
    be->upload(be, O, y, n * 4);
    be->add_bias(be, O, ld, Bv, rows, width);
    for (size_t i = 0; i < n; i++)
        ref[i] = y[i] + (i % ld < (size_t)width ? bias[i % ld] : 0);
    check("glue", "add_bias (ld > cols)", O, ref, n, tol_plain);
    be->bias_grad(be, Bv, X, ld, rows, width);
    double bref[32];
    for (int c = 0; c < width; c++) {
        bref[c] = bias[c];
        for (int r = 0; r < rows; r++)
            bref[c] += x[(size_t)r * ld + c];
    }
    check("glue", "bias_grad (+=)", Bv, bref, width, tol_plain);
    float out2[8];
    float *P2 = devf(NULL, 8);
    be->fill(be, P2, 2.5f, 8);
    be->copy_2d(be, P2, 4, X, ld, 2, 3);
    be->download(be, out2, P2, sizeof out2);
    double r2[8];
    for (int i = 0; i < 8; i++)
        r2[i] = i % 4 < 3 ? x[(size_t)(i / 4) * ld + i % 4] : 2.5;
    check("buffers", "fill, copy_2d", P2, r2, 8, 0);
    be->add_2d(be, P2 + 1, 4, X, ld, 2, 2); /* columns 1 and 2 of each row of 4 gain x's first two */
    for (int i = 0; i < 8; i++)
        if (i % 4 == 1 || i % 4 == 2) r2[i] += x[(size_t)(i / 4) * ld + i % 4 - 1];
    check("buffers", "add_2d (+=)", P2, r2, 8, 1e-6);
    be->free(be, X), be->free(be, Y), be->free(be, O), be->free(be, M), be->free(be, Bv), be->free(be, I);
    be->free(be, P2);
    free(x), free(y), free(mask), free(bias), free(ref);
}

/* clipping on the device: a slice by its own norm (clip_scale) and the optimizer's gate (clip_gate),
 * against the double reference and the shared rt_elementwise.h rule on the host */
static void test_clip(void)
{
    const size_t n = 5003;
    float *x = randf(n, 1);
    double ss = 0;
    for (size_t i = 0; i < n; i++)
        ss += (double)x[i] * x[i];
    double sc[2] = {ss, 0};
    float *X = devf(x, n);
    double *S = dev_scalars(sc, 2);
    const double scale = 4, max = 0.3 * sqrt(ss) / scale; /* past the bound: scaled */
    be->clip_scale(be, X, n, S, max, scale, S + 1);
    const double f = max / (sqrt(ss) / scale + 1e-6);
    double *ref = malloc(n * sizeof *ref), after = 0;
    for (size_t i = 0; i < n; i++)
        ref[i] = x[i] * f, after += ref[i] * ref[i];
    check("clip", "clip_scale (past the bound)", X, ref, n, tol_plain);
    double got[2];
    be->download(be, got, S, sizeof got);
    check_scalar("clip", "clip_scale sum after (+=)", got[1], after, tol_plain);
    be->upload(be, X, x, n * sizeof(float));
    be->clip_scale(be, X, n, S, 2 * sqrt(ss) / scale, scale, S + 1); /* under the bound: as it was */
    for (size_t i = 0; i < n; i++)
        ref[i] = x[i];
    check("clip", "clip_scale (under the bound)", X, ref, n, 0);
    /* the gate: a clipped norm over fp16's scale, no clipping, a non-finite norm, a non-finite loss */
    const double cases[4][4] = {
        {ss, 1.5, 0.5, scale}, {ss, 1.5, -1, 1}, {NAN, 1.5, 1, 2}, {ss, INFINITY, -1, 1}};
    float *Gt = devf(NULL, 2);
    for (int c = 0; c < 4; c++) {
        double *D = dev_scalars(cases[c], 2);
        float gate[2], want[2];
        be->clip_gate(be, D, D + 1, cases[c][2], cases[c][3], Gt);
        be->download(be, gate, Gt, sizeof gate);
        rt_clip_gate(cases[c][0], 1, cases[c][1], 1, cases[c][2], cases[c][3], want);
        double g2[2] = {gate[0], gate[1]};
        char what[32];
        snprintf(what, sizeof what, "clip_gate case %d", c);
        check_scalar("clip", what, g2[0] + 10 * g2[1], want[0] + 10.0 * want[1], 0);
        be->free(be, D);
    }
    be->free(be, X), be->free(be, Gt);
    be->free(be, S);
    free(x), free(ref);
}

static void adam_reference(double *w, const double *g, double *m, double *v, const float *mask, size_t n,
                           const rt_adam_args *a, int lamb, double *w_sq, double *u_sq)
{
    *w_sq = *u_sq = 0;
    for (size_t i = 0; i < n; i++) {
        const double gi = a->grad_scale * g[i];
        m[i] = a->beta1 * m[i] + (1 - a->beta1) * gi;
        v[i] = a->beta2 * v[i] + (1 - a->beta2) * gi * gi;
        const double wd = lamb || a->decoupled_decay ? a->weight_decay : 0;
        const double u = (m[i] / a->c1) / (sqrt(v[i] / a->c2) + a->eps) + wd * w[i];
        const double mk = mask ? mask[i] : 1;
        if (lamb) {
            *w_sq += w[i] * w[i];
            *u_sq += u * mk * u * mk;
            ((double *)g)[i] = u * mk;
        } else {
            w[i] -= a->lr * mk * u;
        }
    }
}

/* Adam/AdamW or LAMB's two halves, the gradients' factor split between the arguments (0.8) and a device
 * gate (0.5); then a gate that skips the step, which must leave everything as it was */
static void test_optimizer(int lamb, int masked)
{
    const size_t n = lamb ? 3 * RT_CHUNK_VALUES + 4099 : 4099;
    float *w = randf(n, 1), *g = randf(n, 0.1), *m = randf(n, 0.01), *v = randf(n, 0.001),
          *mask = randf(n, 1);
    for (size_t i = 0; i < n; i++)
        v[i] = fabsf(v[i]), mask[i] = mask[i] > -0.5f ? 1.0f : 0.0f;
    double *wd = to_d(w, n), *gd = to_d(g, n), *md = to_d(m, n), *vd = to_d(v, n), ws = 0, us = 0;
    float *W = devf(w, n), *G = devf(g, n), *M = devf(m, n), *Vv = devf(v, n),
          *K = masked ? devf(mask, n) : NULL;
    const float gate[2] = {0.5f, 0.0f}, skip[2] = {1.0f, 1.0f};
    float *Gate = devf(gate, 2), *Skip = devf(skip, 2);
    rt_adam_args a = rt_adam_bench_args;
    a.grad_scale = 0.8f;
    a.decoupled_decay = !lamb;
    const char *fam = lamb ? "LAMB" : "AdamW";
    rt_adam_args ref_args = a;
    ref_args.grad_scale = a.grad_scale * gate[0];
    if (!lamb) adam_reference(wd, gd, md, vd, masked ? mask : NULL, n, &ref_args, lamb, &ws, &us);
    if (lamb) {
        /* four tensors, the second in three chunks: per-tensor sums and ratios in one launch each */
        const size_t sizes[4] = {1000, 2 * RT_CHUNK_VALUES + 77, 29, n - 1106 - 2 * RT_CHUNK_VALUES};
        double start[8], sq[8], ref_sq[8];
        rt_chunks ch;
        if (rt_chunks_build(be, sizes, 4, &ch)) {
            fprintf(stderr, "test_backend_ops: out of device memory for chunks\n");
            exit(1);
        }
        /* the reference, tensor by tensor (adam_reference's sums are over the slice it is given) */
        for (size_t t = 0, at = 0; t < 4; at += sizes[t], t++) {
            start[2 * t] = 0.25 * (double)(t + 1), start[2 * t + 1] = 0.5;
            adam_reference(wd + at, gd + at, md + at, vd + at, masked ? mask + at : NULL, sizes[t], &ref_args,
                           lamb, &ref_sq[2 * t], &ref_sq[2 * t + 1]);
            ref_sq[2 * t] += start[2 * t], ref_sq[2 * t + 1] += start[2 * t + 1];
        }
        double *SQ = dev_scalars(start, 8);
        be->lamb_update(be, W, G, M, Vv, K, &ch, &a, Gate, SQ);
        check(fam, masked ? "direction (masked)" : "direction", G, gd, n, tol_plain);
        be->download(be, sq, SQ, sizeof sq);
        for (int t = 0; t < 4; t++) {
            char what[40];
            snprintf(what, sizeof what, "tensor %d: sum w^2 (+=)", t);
            check_scalar(fam, what, sq[2 * t], ref_sq[2 * t], tol_plain);
            snprintf(what, sizeof what, "tensor %d: sum u^2 (+=)", t);
            check_scalar(fam, what, sq[2 * t + 1], ref_sq[2 * t + 1], tol_plain);
        }
        be->lamb_apply(be, W, G, &ch, SQ, a.lr, Gate);
        for (size_t t = 0, at = 0; t < 4; at += sizes[t], t++) {
            const double rate = a.lr * sqrt(sq[2 * t]) / sqrt(sq[2 * t + 1]);
            for (size_t i = at; i < at + sizes[t]; i++)
                wd[i] -= rate * gd[i];
        }
        check(fam, "apply (per-tensor trust ratios on the device)", W, wd, n, tol_plain);
        be->lamb_update(be, W, G, M, Vv, K, &ch, &a, Skip, SQ);
        be->lamb_apply(be, W, G, &ch, SQ, a.lr, Skip);
        double sq2[8], d = 0;
        be->download(be, sq2, SQ, sizeof sq2);
        for (int t = 0; t < 8; t++)
            d += fabs(sq2[t] - sq[t]);
        check_scalar(fam, "a skipped step: sums", d, 0, 0);
        be->free(be, SQ);
        rt_chunks_free(be, &ch);
    } else {
        be->adam_update(be, W, G, M, Vv, K, n, &a, Gate);
        check(fam, masked ? "weights (masked)" : "weights", W, wd, n, tol_plain);
        be->adam_update(be, W, G, M, Vv, K, n, &a, Skip);
    }
    check(fam, lamb ? "weights, after a skipped step" : "weights, after a skipped step", W, wd, n, tol_plain);
    check(fam, "first moment", M, md, n, tol_plain);
    check(fam, "second moment", Vv, vd, n, tol_plain);
    be->free(be, W), be->free(be, G), be->free(be, M), be->free(be, Vv), be->free(be, Gate),
        be->free(be, Skip);
    if (K) be->free(be, K);
    free(w), free(g), free(m), free(v), free(mask), free(wd), free(gd), free(md), free(vd);
}

static void test_moe(void)
{
    const int T = 31, E = 8, k = 2, H = 40;
    float *logits = randf((size_t)T * E, 2), *dw = randf((size_t)T * k, 1), *dout = randf((size_t)T * H, 1);
    float *Yv = randf((size_t)T * k * H, 1);
    double *ld_ = to_d(logits, (size_t)T * E), *dwd = to_d(dw, (size_t)T * k),
           *dod = to_d(dout, (size_t)T * H);
    double *Yd = to_d(Yv, (size_t)T * k * H), *wref = calloc((size_t)T * k, 8),
           *dlref = calloc((size_t)T * E, 8);
    double *oref = calloc((size_t)T * H, 8), *dYref = calloc((size_t)T * k * H, 8),
           *dwref = calloc((size_t)T * k, 8);
    int *idx_ref = calloc((size_t)T * k, sizeof(int)), pos[31 * 2];
    for (int i = 0; i < T * k; i++) /* every row of Y some (t, j): a permutation */
        pos[i] = (i * 7) % (T * k);
    float *L = devf(logits, (size_t)T * E), *Wt = devf(NULL, (size_t)T * k), *DW = devf(dw, (size_t)T * k);
    float *DL = devf(NULL, (size_t)T * E), *Y = devf(Yv, (size_t)T * k * H), *O = devf(NULL, (size_t)T * H);
    float *DO = devf(dout, (size_t)T * H), *DY = devf(NULL, (size_t)T * k * H),
          *DW2 = devf(NULL, (size_t)T * k);
    int *I = devi(NULL, (size_t)T * k), *Pp = devi(pos, (size_t)T * k);
    be->moe_route_fwd(be, L, I, Wt, T, E, k);
    rt_moe_route_fwd_d(ld_, idx_ref, wref, T, E, k);
    int idx[31 * 2];
    be->download(be, idx, I, sizeof idx);
    const int same = memcmp(idx, idx_ref, sizeof idx) == 0;
    checks++, failures += !same;
    printf("%-4s %-10s %-15s %-26s %s\n", same ? "ok" : "FAIL", label, "experts", "route choices", "exact");
    check("experts", "route weights", Wt, wref, (size_t)T * k, tol_plain);
    { /* the rows in expert order on the device, against the host's counting sort */
        int order[31 * 2], pos_got[31 * 2], counts[8], order_ref[31 * 2], pos_ref[31 * 2], counts_ref[8];
        int *O_ = devi(NULL, (size_t)T * k), *P_ = devi(NULL, (size_t)T * k), *C_ = devi(NULL, (size_t)E);
        be->moe_group(be, I, T * k, E, k, O_, P_, C_);
        int start[9] = {0}; /* the reference: each expert's rows from its start, choice by choice */
        memset(counts_ref, 0, sizeof counts_ref);
        for (int r = 0; r < T * k; r++)
            counts_ref[idx_ref[r]]++;
        for (int e = 0; e < E; e++)
            start[e + 1] = start[e] + counts_ref[e];
        for (int r = 0; r < T * k; r++) {
            const int row = start[idx_ref[r]]++;
            order_ref[row] = r / k, pos_ref[r] = row;
        }
        be->download(be, order, O_, sizeof order), be->download(be, pos_got, P_, sizeof pos_got);
        be->download(be, counts, C_, sizeof counts);
        const int grouped = memcmp(order, order_ref, sizeof order) == 0 &&
                            memcmp(pos_got, pos_ref, sizeof pos_got) == 0 &&
                            memcmp(counts, counts_ref, sizeof counts) == 0;
        checks++, failures += !grouped;
        printf("%-4s %-10s %-15s %-26s %s\n", grouped ? "ok" : "FAIL", label, "experts",
               "rows in expert order", "exact");
        be->free(be, O_), be->free(be, P_), be->free(be, C_);
    }
    be->moe_route_bwd(be, I, Wt, DW, DL, T, E, k);
    rt_moe_route_bwd_d(idx_ref, wref, dwd, dlref, T, E, k);
    check("experts", "route backward", DL, dlref, (size_t)T * E, tol_plain);
    be->moe_combine_fwd(be, Y, Pp, Wt, O, T, k, H);
    rt_moe_combine_fwd_d(Yd, pos, wref, oref, T, k, H);
    check("experts", "combine", O, oref, (size_t)T * H, tol_plain);
    be->moe_combine_bwd(be, Y, Pp, Wt, DO, DY, DW2, T, k, H);
    rt_moe_combine_bwd_d(Yd, pos, wref, dod, dYref, dwref, T, k, H);
    check("experts", "combine backward dY", DY, dYref, (size_t)T * k * H, tol_plain);
    check("experts", "combine backward dw", DW2, dwref, (size_t)T * k, tol_plain);
    float *ptrs[] = {L, Wt, DW, DL, Y, O, DO, DY, DW2};
    for (int i = 0; i < 9; i++)
        be->free(be, ptrs[i]);
    be->free(be, I), be->free(be, Pp);
    free(logits), free(dw), free(dout), free(Yv), free(ld_), free(dwd), free(dod), free(Yd), free(wref);
    free(dlref), free(oref), free(dYref), free(dwref), free(idx_ref);
}

/* a tensor-train layer of factors in_f (n_in of them) and out_f, rank 3, over T tokens */
static void test_tensor_train(const int *in_f, int n_in, const int *out_f, int n_out, int T)
{
    et_tt_shape shape;
    et_error err;
    if (et_tt_linear(&shape, in_f, n_in, out_f, n_out, 3, &err)) {
        printf("FAIL %-10s tensor-train: %s\n", label, err.text);
        failures++;
        return;
    }
    rt_tt_layer l;
    rt_tt_layer_init(&l, &shape, T);
    const size_t nc = l.core_offset[shape.d_in + shape.d_out], nw = rt_tt_workspace_size(&l, T);
    const size_t nx = (size_t)T * (size_t)et_tt_in(&shape), ny = (size_t)T * (size_t)et_tt_out(&shape);
    float *x = randf(nx, 1), *cores = randf(nc, 0.5), *dy = randf(ny, 1);
    double *xd = to_d(x, nx), *cd = to_d(cores, nc), *dyd = to_d(dy, ny), *yd = calloc(ny, 8);
    double *wd = calloc(nw, 8), *dxd = calloc(nx, 8), *dcd = calloc(nc, 8);
    float *X = devf(x, nx), *C = devf(cores, nc), *Y = devf(NULL, ny), *Wk = devf(NULL, nw),
          *DY = devf(dy, ny);
    float *DX = devf(NULL, nx), *DC = devf(NULL, nc);
    be->tt_fwd(be, &l, X, C, Y, Wk, T);
    rt_tt_fwd_d(&l, xd, cd, yd, wd, T);
    char what[3][48];
    snprintf(what[0], sizeof what[0], "forward, %d cores", n_in + n_out);
    snprintf(what[1], sizeof what[1], "backward dX, %d cores", n_in + n_out);
    snprintf(what[2], sizeof what[2], "backward dcores, %d cores", n_in + n_out);
    check("tensor-train", what[0], Y, yd, ny, tol_gemm);
    be->tt_bwd(be, &l, X, C, DY, DX, DC, Wk, T);
    rt_tt_bwd_d(&l, xd, cd, dyd, dxd, dcd, wd, T);
    check("tensor-train", what[1], DX, dxd, nx, tol_gemm);
    check("tensor-train", what[2], DC, dcd, nc, tol_gemm);
    float *ptrs[] = {X, C, Y, Wk, DY, DX, DC};
    for (int i = 0; i < 7; i++)
        be->free(be, ptrs[i]);
    free(x), free(cores), free(dy), free(xd), free(cd), free(dyd), free(yd), free(wd), free(dxd), free(dcd);
}

/* Streams and events (rt_backend.h): a point recorded on the compute stream that the communication stream
 * waits for is reached before the communication stream's later point; the host sees a kernel's result
 * after waiting for an event behind it, and only event_sync counts as a wait; times between events run
 * forward, and are 0 for an event never recorded. */
static void test_streams(void)
{
    const char *saved = label;
    char l[32];
    snprintf(l, sizeof l, "%s", be->name);
    label = l;
    const size_t n = (size_t)1 << 22;
    float *x = be->alloc(be, n * sizeof *x);
    rt_event *start = be->event_create(be), *mid = be->event_create(be), *end = be->event_create(be),
             *comm = be->event_create(be), *never = be->event_create(be);
    if (!x || !start || !mid || !end || !comm || !never) {
        checks++, failures++;
        printf("FAIL %-10s streams         out of memory\n", label);
        return;
    }
    const long long w0 = be->host_waits;
    be->event_record(be, start, RT_STREAM_COMPUTE);
    for (int i = 0; i < 8; i++)
        be->fill(be, x, (float)(i + 1), n);
    be->event_record(be, mid, RT_STREAM_COMPUTE);
    be->stream_wait(be, RT_STREAM_COMM, mid);
    be->event_record(be, comm, RT_STREAM_COMM);
    for (int i = 0; i < 8; i++)
        be->scale(be, x, 1.0f, n);
    be->event_record(be, end, RT_STREAM_COMPUTE);
    const long long w1 = be->host_waits;
    be->event_sync(be, comm);
    check_scalar("streams", "waits before event_sync", (double)(w1 - w0), 0, 0);
    check_scalar("streams", "one wait in event_sync", (double)(be->host_waits - w1), 1, 0);
    check_scalar("streams", "waited-for point reached", be->event_done(be, mid), 1, 0);
    be->event_sync(be, end);
    check_scalar("streams", "end reached after sync", be->event_done(be, end), 1, 0);
    check_scalar("streams", "never-recorded is done", be->event_done(be, never), 1, 0);
    const double t_mid = be->event_seconds(be, start, mid), t_end = be->event_seconds(be, start, end),
                 t_comm = be->event_seconds(be, start, comm);
    check_scalar("streams", "time start->mid > 0", t_mid > 0, 1, 0);
    check_scalar("streams", "time mid <= end", t_mid <= t_end, 1, 0);
    check_scalar("streams", "comm after what it waited", t_comm >= t_mid, 1, 0);
    check_scalar("streams", "unrecorded event: 0 s", be->event_seconds(be, start, never), 0, 0);
    float last = 0;
    be->download(be, &last, x + n - 1, sizeof last);
    check_scalar("streams", "kernel result seen", last, 8, 0);
    be->event_destroy(be, start), be->event_destroy(be, mid), be->event_destroy(be, end);
    be->event_destroy(be, comm), be->event_destroy(be, never);
    be->free(be, x);
    label = saved;
}

/* Every attention test over the same shapes: heads, key/value heads, causal, Dqk, Dv, window, sinks; the
 * last three over BERT's head width and sequences of 70 and 130 (several tiles and k-steps). */
static void attention_cases(void (*test)(int A, int KV, int causal, int D, int Dv, int window, int sinks))
{
    static const int shapes[][7] = {
        {4, 4, 0, 16, 16, 0, 0}, {4, 4, 1, 16, 16, 0, 0}, {4, 2, 1, 16, 16, 0, 0},
        {4, 4, 1, 24, 16, 0, 0}, /* latent attention's shape */
        {4, 2, 1, 16, 16, 5, 1}, /* gpt-oss: windows and sinks */
        {4, 4, 1, 16, 16, 0, 1}, {4, 4, 0, 16, 16, 0, 1}, {2, 2, 0, 64, 64, 0, 0},
        {2, 2, 1, 64, 64, 0, 0}, {2, 1, 1, 64, 64, 0, 0},
    };
    const int n = (int)(sizeof shapes / sizeof shapes[0]);
    for (int i = 0; i < n; i++) {
        if (i == n - 3) offsets = long_seqs, NB = 2;
        const int *c = shapes[i];
        test(c[0], c[1], c[2], c[3], c[4], c[5], c[6]);
    }
    offsets = short_seqs, NB = 3;
}

static const double gemm_bounds[RT_GEMM_MATH_COUNT] = {1e-4, 4e-3, 3e-2, 4e-3};

static void run_backend(const char *name, int math)
{
    for (int mth = 0; mth < RT_GEMM_MATH_COUNT; mth++) {
        if (math >= 0 && mth != math) continue;
        if (be->set_gemm_math(be, (rt_gemm_math)mth)) {
            printf("skip %s %s: the backend's products have no %s arithmetic\n", name,
                   rt_gemm_math_names[mth], rt_gemm_math_names[mth]);
            continue;
        }
        char l[32];
        snprintf(l, sizeof l, "%s %s", name, rt_gemm_math_names[mth]);
        label = l;
        tol_gemm = gemm_bounds[mth];
        for (int f = 0; f < RT_FAMILY_COUNT; f++)
            if (!be->supports(be, (rt_kernel_family)f))
                printf("skip %-10s %s: not supported by this backend (etrun refuses plans that need it)\n",
                       label, rt_kernel_family_names[f]);
        if (be->supports(be, RT_FAMILY_LINEAR)) test_linear();
        if (be->supports(be, RT_FAMILY_LINEAR) && (mth == RT_GEMM_BF16 || mth == RT_GEMM_FP16))
            test_shadow16();
        test_norms();
        test_pointwise();
        if (be->supports(be, RT_FAMILY_ATTENTION)) attention_cases(test_attention);
        if (be->supports(be, RT_FAMILY_FLASH)) attention_cases(test_flash);
        if (be->supports(be, RT_FAMILY_EMBEDDING) && be->supports(be, RT_FAMILY_CROSS_ENTROPY))
            test_embedding_head();
        if (be->supports(be, RT_FAMILY_GLUE)) test_glue(), test_clip();
        if (be->supports(be, RT_FAMILY_ADAM)) test_optimizer(0, 0), test_optimizer(0, 1);
        if (be->supports(be, RT_FAMILY_LAMB)) test_optimizer(1, 1);
        if (be->supports(be, RT_FAMILY_MOE)) test_moe();
        if (be->supports(be, RT_FAMILY_TENSOR_TRAIN)) {
            const int in2[2] = {4, 6}, out2[2] = {5, 4}, in3[3] = {4, 2, 3}, out3[3] = {3, 5, 2};
            test_tensor_train(in2, 2, out2, 2, 9);
            test_tensor_train(in3, 3, out3, 3, 37); /* six cores: more copies, transposed views */
        }
    }
    be->set_gemm_math(be, RT_GEMM_FP32);
}

int main(int argc, char **argv)
{
    const char *only = NULL;
    int math = -1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--backend") == 0 && i + 1 < argc) {
            only = argv[++i];
        } else if (strcmp(argv[i], "--math") == 0 && i + 1 < argc) {
            const char *m = argv[++i];
            for (int k = 0; k < RT_GEMM_MATH_COUNT; k++)
                if (strcmp(m, rt_gemm_math_names[k]) == 0) math = k;
            if (math < 0) {
                fprintf(stderr, "test_backend_ops: --math expects fp32, tf32, bf16 or fp16, got \"%s\"\n", m);
                return 2;
            }
        } else {
            fprintf(stderr, "usage: test_backend_ops [--backend NAME] [--math fp32|tf32|bf16|fp16]\n");
            return 2;
        }
    }
    int ran = 0;
    for (int i = 0; rt_backend_names[i]; i++) {
        const char *name = rt_backend_names[i];
        if (only && strcmp(only, name) != 0) continue;
        et_error err;
        be = rt_backend_create(name, &err);
        if (!be) {
            printf("skip %s: %s\n", name, err.text);
            if (only) return 77;
            continue;
        }
        char about[256];
        be->describe(be, about, sizeof about);
        printf("backend %s: %s\n", name, about);
        test_streams();
        run_backend(name, math);
        be->destroy(be);
        ran++;
    }
    if (only && !ran) {
        printf("skip %s: not in this build (it has:", only);
        for (int i = 0; rt_backend_names[i]; i++)
            printf(" %s", rt_backend_names[i]);
        printf(")\n");
        return 77;
    }
    printf("%d passed, %d failed\n", checks - failures, failures);
    return failures ? 1 : 0;
}
