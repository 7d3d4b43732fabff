/* The CPU backend's float kernels against the double-precision reference kernels (llm.c's habit: a plain
 * reference beside each fast kernel): GELU, layer norm, softmax, cross-entropy, forward and backward, on
 * random inputs whose sizes are not multiples of any vector width; and its fused optimizer updates and
 * glue against plain double loops. Tolerances are fp32 rounding of a few operations (relative 1e-5 of the
 * output's scale) and the polynomial exp (2e-7 relative); GELU's backward 5e-6, its tanh being rational. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "rt_backend.h"
#include "rt_kernels.h"

static unsigned long long state = 987654321;

static double rnd(void)
{
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return ((state >> 11) / 9007199254740992.0) * 2 - 1;
}

typedef struct pair {
    float *f;
    double *d;
    size_t n;
} pair;

static pair make(size_t n, double scale)
{
    pair p = {malloc(n * sizeof(float)), malloc(n * sizeof(double)), n};
    for (size_t i = 0; i < n; i++) {
        p.f[i] = (float)(scale * rnd());
        p.d[i] = p.f[i];
    }
    return p;
}

static pair zeros(size_t n)
{
    pair p = {calloc(n, sizeof(float)), calloc(n, sizeof(double)), n};
    return p;
}

static void drop(pair *p)
{
    free(p->f), free(p->d);
}

/* max |f - d| / max(|d|, floor) over the arrays */
static double worst(const pair *p, double floor)
{
    double scale = floor, err = 0;
    for (size_t i = 0; i < p->n; i++)
        scale = fmax(scale, fabs(p->d[i]));
    for (size_t i = 0; i < p->n; i++)
        err = fmax(err, fabs(p->f[i] - p->d[i]));
    return err / scale;
}

#define CLOSE(p, tol, what)                                                                                  \
    do {                                                                                                     \
        double w_ = worst(&(p), 1e-30);                                                                      \
        CHECK(w_ <= (tol), "%s: float differs from the double reference by %.3g (relative), tolerance %.3g", \
              what, w_, (double)(tol));                                                                      \
    } while (0)

static void check_gelu(void)
{
    const size_t n = 4099;
    pair x = make(n, 6), y = zeros(n), dy = make(n, 1), dx = zeros(n);
    rt_gelu_fwd_f(x.f, y.f, n), rt_gelu_fwd_d(x.d, y.d, n);
    rt_gelu_bwd_f(x.f, dy.f, dx.f, n), rt_gelu_bwd_d(x.d, dy.d, dx.d, n);
    CLOSE(y, 2e-6, "gelu forward");
    CLOSE(dx, 5e-6, "gelu backward"); /* the rational tanh: 3.4e-6 measured */
    drop(&x), drop(&y), drop(&dy), drop(&dx);
}

static void check_layernorm(void)
{
    const int T = 7, n = 771;
    pair x = make((size_t)T * n, 3), g = make(n, 1), b = make(n, 1), y = zeros((size_t)T * n);
    pair mean = zeros(T), rstd = zeros(T), dy = make((size_t)T * n, 1), dx = make((size_t)T * n, 1);
    pair dg = make(n, 1), db = make(n, 1);
    for (int i = 0; i < T * n; i++) /* an offset mean, as residual streams have */
        x.f[i] += 2.5f, x.d[i] = x.f[i];
    rt_layernorm_fwd_f(x.f, g.f, b.f, y.f, mean.f, rstd.f, T, n);
    rt_layernorm_fwd_d(x.d, g.d, b.d, y.d, mean.d, rstd.d, T, n);
    for (int t = 0; t < T; t++) /* the backward of each reads the same saved statistics */
        mean.f[t] = (float)mean.d[t], rstd.f[t] = (float)rstd.d[t];
    rt_layernorm_bwd_f(x.f, g.f, mean.f, rstd.f, dy.f, dx.f, dg.f, db.f, T, n);
    rt_layernorm_bwd_d(x.d, g.d, mean.d, rstd.d, dy.d, dx.d, dg.d, db.d, T, n);
    CLOSE(y, 1e-5, "layernorm forward");
    CLOSE(dx, 2e-5, "layernorm backward dx");
    CLOSE(dg, 1e-5, "layernorm backward dgamma");
    CLOSE(db, 1e-6, "layernorm backward dbeta");
    /* the fused residual add: sum = x + r, then the same layer norm */
    pair r = make((size_t)T * n, 1), sum = zeros((size_t)T * n);
    rt_add_layernorm_fwd_f(x.f, r.f, sum.f, g.f, b.f, y.f, mean.f, rstd.f, T, n);
    rt_add_layernorm_fwd_d(x.d, r.d, sum.d, g.d, b.d, y.d, mean.d, rstd.d, T, n);
    CLOSE(sum, 1e-6, "add + layernorm: the sum");
    CLOSE(y, 1e-5, "add + layernorm forward");
    CLOSE(rstd, 1e-5, "add + layernorm: rstd");
    drop(&r), drop(&sum);
    drop(&x), drop(&g), drop(&b), drop(&y), drop(&mean), drop(&rstd), drop(&dy), drop(&dx), drop(&dg),
        drop(&db);
}

/* the Llama layers: RMSNorm, rotary positions, SwiGLU */
static void check_llama_kernels(void)
{
    const int T = 7, n = 771, H = 64, A = 4, F = 301, positions[] = {0, 1, 2, 9, 100, 4000, 3};
    pair x = make((size_t)T * n, 3), g = make(n, 1), y = zeros((size_t)T * n), rstd = zeros(T);
    pair dy = make((size_t)T * n, 1), dx = make((size_t)T * n, 1), dg = make(n, 1);
    rt_rmsnorm_fwd_f(x.f, g.f, y.f, rstd.f, T, n), rt_rmsnorm_fwd_d(x.d, g.d, y.d, rstd.d, T, n);
    for (int t = 0; t < T; t++)
        rstd.f[t] = (float)rstd.d[t];
    rt_rmsnorm_bwd_f(x.f, g.f, rstd.f, dy.f, dx.f, dg.f, T, n);
    rt_rmsnorm_bwd_d(x.d, g.d, rstd.d, dy.d, dx.d, dg.d, T, n);
    CLOSE(y, 1e-5, "RMSNorm forward");
    CLOSE(dx, 2e-5, "RMSNorm backward dx");
    CLOSE(dg, 1e-5, "RMSNorm backward dgamma");
    pair qkv = make((size_t)T * 3 * H, 2);
    rt_rope_f(qkv.f, positions, T, 3 * H, 2 * A, H / A, H / A, 500000, 0);
    rt_rope_d(qkv.d, positions, T, 3 * H, 2 * A, H / A, H / A, 500000, 0);
    CLOSE(qkv, 1e-5, "rotary positions");
    pair u = make((size_t)T * 2 * F, 4), v = zeros((size_t)T * F), dv = make((size_t)T * F, 1);
    pair du = zeros((size_t)T * 2 * F);
    rt_swiglu_fwd_f(u.f, v.f, T, F), rt_swiglu_fwd_d(u.d, v.d, T, F);
    rt_swiglu_bwd_f(u.f, dv.f, du.f, T, F), rt_swiglu_bwd_d(u.d, dv.d, du.d, T, F);
    CLOSE(v, 1e-6, "SwiGLU forward");
    CLOSE(du, 1e-6, "SwiGLU backward");
    /* the experts' routing and combine (T tokens, 8 experts, top 2, rows of H) */
    const int E = 8, k = 2;
    pair z = make((size_t)T * E, 3), w = zeros((size_t)T * k), dw = make((size_t)T * k, 1);
    pair dz = zeros((size_t)T * E), Y = make((size_t)T * k * H, 1), o = zeros((size_t)T * H);
    pair dout = make((size_t)T * H, 1), dY = zeros((size_t)T * k * H), dwc = zeros((size_t)T * k);
    int idx_f[14], idx_d[14], pos[14];
    rt_moe_route_fwd_f(z.f, idx_f, w.f, T, E, k), rt_moe_route_fwd_d(z.d, idx_d, w.d, T, E, k);
    CHECK(memcmp(idx_f, idx_d, sizeof idx_f) == 0,
          "MoE routing: the same experts chosen in float and double");
    CLOSE(w, 1e-6, "MoE routing weights");
    rt_moe_route_bwd_f(idx_f, w.f, dw.f, dz.f, T, E, k), rt_moe_route_bwd_d(idx_d, w.d, dw.d, dz.d, T, E, k);
    CLOSE(dz, 1e-5, "MoE routing backward");
    for (int r = 0; r < T * k; r++)
        pos[r] = (r * 5 + 3) % (T * k);
    rt_moe_combine_fwd_f(Y.f, pos, w.f, o.f, T, k, H), rt_moe_combine_fwd_d(Y.d, pos, w.d, o.d, T, k, H);
    rt_moe_combine_bwd_f(Y.f, pos, w.f, dout.f, dY.f, dwc.f, T, k, H);
    rt_moe_combine_bwd_d(Y.d, pos, w.d, dout.d, dY.d, dwc.d, T, k, H);
    CLOSE(o, 1e-6, "MoE combine forward");
    CLOSE(dY, 1e-6, "MoE combine backward dY");
    CLOSE(dwc, 1e-5, "MoE combine backward dw");
    drop(&z), drop(&w), drop(&dw), drop(&dz), drop(&Y), drop(&o), drop(&dout), drop(&dY), drop(&dwc);
    drop(&x), drop(&g), drop(&y), drop(&rstd), drop(&dy), drop(&dx), drop(&dg), drop(&qkv), drop(&u),
        drop(&v), drop(&dv), drop(&du);
}

/* the float softmax (its own vector code) against the double reference: causal or not, with a sliding
 * window of 5 and a sink logit per head or without */
static void check_softmax(int causal, int window, int sinks)
{
    const int B = 4, A = 2, H = 8, offsets[] = {0, 17, 18, 51, 60}; /* rows of 17, 1, 33 and 9 */
    const rt_attn_shape sh = {A, A, H / A, H / A, window};
    size_t n = 0;
    for (int s = 0; s < B; s++)
        n += (size_t)A * (offsets[s + 1] - offsets[s]) * (offsets[s + 1] - offsets[s]);
    pair p = make(n, 8), dp = make(n, 1), sk = make((size_t)A, 3), dsk = zeros((size_t)A);
    const float *skf = sinks ? sk.f : NULL;
    const double *skd = sinks ? sk.d : NULL;
    char what[96];
    snprintf(what, sizeof what, "%ssoftmax%s%s", causal ? "causal " : "", window ? ", window" : "",
             sinks ? ", sinks" : "");
    rt_attn_softmax_fwd_f(p.f, skf, offsets, B, &sh, causal),
        rt_attn_softmax_fwd_d(p.d, skd, offsets, B, &sh, causal);
    CLOSE(p, 2e-6, what);
    for (size_t i = 0; i < n; i++) /* the backward of each from the same probabilities */
        p.f[i] = (float)p.d[i];
    rt_attn_softmax_bwd_f(p.f, dp.f, sinks ? dsk.f : NULL, offsets, B, &sh);
    rt_attn_softmax_bwd_d(p.d, dp.d, sinks ? dsk.d : NULL, offsets, B, &sh);
    CLOSE(dp, 1e-5, what);
    if (sinks) CLOSE(dsk, 1e-4, what);
    drop(&p), drop(&dp), drop(&sk), drop(&dsk);
}

static void check_cross_entropy(void)
{
    const int P = 5, V = 1003, targets[] = {3, -1, 1002, 0, 517};
    pair z = make((size_t)P * V, 10), dz = zeros((size_t)P * V);
    double lf = rt_cross_entropy_f(z.f, targets, dz.f, P, V, 4.0);
    double ld = rt_cross_entropy_d(z.d, targets, dz.d, P, V, 4.0);
    CHECK_REL(lf, ld, 1e-6, "cross-entropy loss");
    CLOSE(dz, 1e-6, "cross-entropy dlogits");
    drop(&z), drop(&dz);
}

/* The backend's fused Adam/AdamW/LAMB against the update written plainly in double. */
static void check_optimizer(rt_backend *be)
{
    const size_t n = 1031;
    const rt_adam_args a = {.lr = 1e-3f,
                            .beta1 = 0.9f,
                            .beta2 = 0.999f,
                            .eps = 1e-8f,
                            .weight_decay = 0.01f,
                            .c1 = 1 - 0.9f * 0.9f,
                            .c2 = 1 - 0.999f * 0.999f,
                            .decoupled_decay = true,
                            .grad_scale = 1};
    pair w = make(n, 1), g = make(n, 0.1), m = make(n, 0.01), v = make(n, 0.001), mask = make(n, 1);
    for (size_t i = 0; i < n; i++) {
        v.f[i] = fabsf(v.f[i]), v.d[i] = v.f[i];
        mask.f[i] = mask.f[i] > 0 ? 1.0f : 0.0f, mask.d[i] = mask.f[i];
    }
    rt_chunks one; /* LAMB over one tensor of n values */
    if (rt_chunks_build(be, &n, 1, &one)) {
        CHECK(0, "chunks built");
        return;
    }
    /* AdamW masked (clipping's factor from a gate), Adam dense, LAMB masked (the factor in its arguments) */
    for (int variant = 0; variant < 3; variant++) {
        pair w2 = make(n, 0), m2 = make(n, 0), v2 = make(n, 0), g2 = make(n, 0);
        memcpy(w2.f, w.f, n * 4), memcpy(m2.f, m.f, n * 4), memcpy(v2.f, v.f, n * 4),
            memcpy(g2.f, g.f, n * 4);
        rt_adam_args args = a;
        args.decoupled_decay = variant != 1;
        args.grad_scale = variant == 2 ? 0.5f : 1.0f; /* clipping fused into the update */
        const float gate[2] = {0.5f, 0.0f};
        const double factor = variant == 1 ? 1.0 : 0.5;
        const float *mk = variant == 1 ? NULL : mask.f;
        double sq[2] = {0.25, 0.5}, ref_wsq = 0.25, ref_usq = 0.5; /* the sums add to what is there */
        if (variant < 2)
            be->adam_update(be, w2.f, g2.f, m2.f, v2.f, mk, n, &args, variant == 0 ? gate : NULL);
        else
            be->lamb_update(be, w2.f, g2.f, m2.f, v2.f, mk, &one, &args, NULL, sq);
        for (size_t i = 0; i < n; i++) {
            const double gi = factor * g.d[i];
            double mi = a.beta1 * m.d[i] + (1 - (double)a.beta1) * gi;
            double vi = a.beta2 * v.d[i] + (1 - (double)a.beta2) * gi * gi;
            double u = (mi / a.c1) / (sqrt(vi / a.c2) + a.eps) +
                       (args.decoupled_decay ? a.weight_decay * w.d[i] : 0);
            if (mk) u *= mask.d[i];
            m2.d[i] = mi, v2.d[i] = vi;
            ref_wsq += w.d[i] * w.d[i], ref_usq += u * u;
            if (variant < 2)
                w2.d[i] = w.d[i] - a.lr * u, g2.d[i] = g.d[i];
            else
                w2.d[i] = w.d[i], g2.d[i] = u;
        }
        const char *names[] = {"AdamW (masked)", "Adam", "LAMB update (masked)"};
        char what[96];
        snprintf(what, sizeof what, "%s weights", names[variant]);
        CLOSE(w2, 1e-6, what);
        snprintf(what, sizeof what, "%s moments", names[variant]);
        CLOSE(m2, 1e-6, what);
        CLOSE(v2, 1e-6, what);
        if (variant == 2) {
            CLOSE(g2, 1e-5, "LAMB update direction");
            CHECK_REL(sq[0], ref_wsq, 1e-6, "LAMB sum of squared weights");
            CHECK_REL(sq[1], ref_usq, 1e-5, "LAMB sum of squared updates");
            /* the second half: w -= lr sqrt(sum w^2) / sqrt(sum u^2) u, the ratio taken from the sums */
            const double rate = a.lr * sqrt(ref_wsq) / sqrt(ref_usq);
            be->lamb_apply(be, w2.f, g2.f, &one, sq, a.lr, NULL);
            for (size_t i = 0; i < n; i++)
                w2.d[i] = w.d[i] - rate * g2.d[i];
            CLOSE(w2, 1e-6, "LAMB apply (trust ratio from the device sums)");
        }
        drop(&w2), drop(&m2), drop(&v2), drop(&g2);
    }
    /* a gate that skips the step: nothing is written */
    {
        const float skip[2] = {1.0f, 1.0f};
        pair w2 = make(n, 0), m2 = make(n, 0), v2 = make(n, 0), g2 = make(n, 0);
        memcpy(w2.f, w.f, n * 4), memcpy(m2.f, m.f, n * 4), memcpy(v2.f, v.f, n * 4),
            memcpy(g2.f, g.f, n * 4);
        double sq[2] = {1, 2};
        be->adam_update(be, w2.f, g2.f, m2.f, v2.f, NULL, n, &a, skip);
        be->lamb_update(be, w2.f, g2.f, m2.f, v2.f, NULL, &one, &a, skip, sq);
        be->lamb_apply(be, w2.f, g2.f, &one, sq, a.lr, skip);
        CHECK(!memcmp(w2.f, w.f, n * 4) && !memcmp(m2.f, m.f, n * 4) && !memcmp(v2.f, v.f, n * 4) &&
                  !memcmp(g2.f, g.f, n * 4) && sq[0] == 1 && sq[1] == 2,
              "a skipping gate leaves weights, moments, gradients and sums untouched");
        drop(&w2), drop(&m2), drop(&v2), drop(&g2);
    }
    rt_chunks_free(be, &one);
    drop(&w), drop(&g), drop(&m), drop(&v), drop(&mask);
}

/* Glue: gather, scatter-add, bias, bias gradient, sum of squares against plain loops. */
static void check_glue(rt_backend *be)
{
    const int rows = 9, width = 37, picks[] = {8, 0, 3, 3, 5};
    float src[9 * 37], dst[5 * 37], acc[9 * 37] = {0}, want[9 * 37] = {0}, db[37] = {0};
    double ss = 0, colsum[37] = {0};
    for (int i = 0; i < rows * width; i++)
        src[i] = (float)rnd(), ss += (double)src[i] * src[i], colsum[i % width] += src[i];
    be->gather_rows(be, dst, src, picks, 5, width);
    int ok = 1;
    for (int p = 0; p < 5; p++)
        for (int i = 0; i < width; i++) {
            ok &= dst[p * width + i] == src[picks[p] * width + i];
            want[picks[p] * width + i] += dst[p * width + i];
        }
    CHECK(ok, "gather_rows copies the named rows");
    be->scatter_add_rows(be, acc, dst, picks, 5, width);
    CHECK(memcmp(acc, want, sizeof acc) == 0, "scatter_add_rows sums repeated rows");
    double acc_sq = 1; /* added into */
    be->sum_sq(be, src, (size_t)rows * width, &acc_sq);
    CHECK_REL(acc_sq - 1, ss, 1e-12, "sum of squares");
    be->bias_grad(be, db, src, width, rows, width);
    double e = 0;
    for (int c = 0; c < width; c++)
        e = fmax(e, fabs(db[c] - colsum[c]));
    CHECK(e < 1e-5, "bias gradient is the column sum (off by %.3g)", e);
}

/* Clipping on the device: the gate's factor and skip, and a slice clipped by its own norm. */
static void check_clip(rt_backend *be)
{
    float gate[2];
    const double sq = 64, loss = 3, nan_sq = NAN, inf_loss = INFINITY;
    be->clip_gate(be, &sq, &loss, 1.0, 2.0, gate); /* norm sqrt(64) / 2 = 4 > 1 */
    CHECK(gate[0] == (float)((float)(1.0 / (4 + 1e-6)) / 2.0) && gate[1] == 0,
          "the gate clips over the loss scale (%g, %g)", gate[0], gate[1]);
    be->clip_gate(be, &sq, &loss, 10.0, 2.0, gate);
    CHECK(gate[0] == 0.5f && gate[1] == 0, "a norm under the bound keeps the loss scale's inverse only");
    be->clip_gate(be, &sq, NULL, -1, 1.0, gate);
    CHECK(gate[0] == 1 && gate[1] == 0, "no clipping, no loss scale: factor 1");
    be->clip_gate(be, &nan_sq, &loss, 1.0, 1.0, gate);
    CHECK(gate[1] == 1, "a non-finite norm skips the step");
    be->clip_gate(be, NULL, &inf_loss, -1, 1.0, gate);
    CHECK(gate[1] == 1, "a non-finite loss skips the step");
    be->clip_gate(be, NULL, &loss, -1, 1.0, gate);
    CHECK(gate[1] == 0, "a finite loss and no norm: the step runs");

    enum { N = 300 };
    float x[N], y[N];
    double ss = 0;
    for (int i = 0; i < N; i++)
        x[i] = (float)rnd(), y[i] = x[i], ss += (double)x[i] * x[i];
    double after = 0;
    be->clip_scale(be, x, N, &ss, 2 * sqrt(ss), 1.0, &after); /* under its bound: untouched */
    CHECK(!memcmp(x, y, sizeof x) && fabs(after - ss) <= 1e-12 * ss,
          "a bucket under its bound is not scaled");
    const double max = 0.25 * sqrt(ss) * 0.5; /* fp16's scale 2 divides the norm: sqrt(ss) / 2 */
    const float f = (float)(max / (sqrt(ss) / 2 + 1e-6));
    double after2 = 0, want = 0;
    be->clip_scale(be, x, N, &ss, max, 2.0, &after2);
    int ok = 1;
    for (int i = 0; i < N; i++)
        ok &= x[i] == y[i] * f, want += (double)x[i] * x[i];
    CHECK(ok && fabs(after2 - want) <= 1e-12 * want, "a bucket past its bound scaled by bound / norm, its "
                                                     "new sum of squares added");
}

int main(void)
{
    check_gelu();
    check_layernorm();
    check_llama_kernels();
    check_softmax(0, 0, 0);
    check_softmax(1, 0, 0);
    check_softmax(1, 5, 0);
    check_softmax(1, 0, 1);
    check_softmax(1, 5, 1);
    check_cross_entropy();
    et_error err;
    rt_backend *be = rt_backend_cpu_create(&err);
    CHECK(be != NULL, "CPU backend created");
    if (be) {
        check_optimizer(be);
        check_glue(be);
        check_clip(be);
        be->destroy(be);
    }
    return check_summary("test_kernels_float");
}
