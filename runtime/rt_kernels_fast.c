/* The float element-wise kernels of training (layer norm, GELU, softmax, cross-entropy), written to
 * vectorise: float arithmetic, no libm call per element (a polynomial exp), reductions over contiguous rows
 * marked `omp simd` (compiled with -fopenmp-simd: no OpenMP runtime), and, on x86-64 with GCC, clones for
 * AVX2+FMA and AVX-512 picked at load time. Their double-precision twins in rt_kernels_impl.h are the
 * reference they are checked against (tests/test_kernels_float.c); the declarations are rt_kernels.h's. */
#include <math.h>
#include <string.h>

#include "rt_kernels.h"
#include "rt_vector.h"

#define GELU_K 0.7978845608f /* sqrt(2/pi) */
#define GELU_C 0.044715f

/* tanh(u) as a rational function, odd degree 13 over even degree 6 (Eigen's float tanh, the constants of
 * generic_fast_tanh_float), on u clamped to +-7.905 where it reaches +-1 in float: ten multiply-adds and one
 * division, 1.8x faster here than 1 - 2 / (exp(2u) + 1) with the polynomial exp; GELU within 6e-7
 * absolute of the double reference. */
static inline float tanh_approx(float u)
{
    const float c = 7.90531110763549805f;
    u = u < -c ? -c : u;
    u = u > c ? c : u;
    const float u2 = u * u;
    float p = -2.76076847742355e-16f;
    p = u2 * p + 2.00018790482477e-13f;
    p = u2 * p - 8.60467152213735e-11f;
    p = u2 * p + 5.12229709037114e-08f;
    p = u2 * p + 1.48572235717979e-05f;
    p = u2 * p + 6.37261928875436e-04f;
    p = u2 * p + 4.89352455891786e-03f;
    float q = 1.19825839466702e-06f;
    q = u2 * q + 1.18534705686654e-04f;
    q = u2 * q + 2.26843463243900e-03f;
    q = u2 * q + 4.89352518554385e-03f;
    return u * p / q;
}

RT_VECTOR_CLONES
void rt_gelu_fwd_f(const float *x, float *y, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        const float v = x[i];
        y[i] = 0.5f * v * (1.0f + tanh_approx(GELU_K * (v + GELU_C * v * v * v)));
    }
}

RT_VECTOR_CLONES
void rt_gelu_bwd_f(const float *x, const float *dy, float *dx, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        const float v = x[i], th = tanh_approx(GELU_K * (v + GELU_C * v * v * v));
        const float du = GELU_K * (1.0f + 3.0f * GELU_C * v * v);
        dx[i] = dy[i] * (0.5f * (1.0f + th) + 0.5f * v * (1.0f - th * th) * du);
    }
}

/* y = (x - mean) rstd g + b over one row of n whose sum is s; keeps the row's mean and rstd */
RT_VECTOR_INLINE
static void normalize_row(const float *xr, float s, const float *g, const float *b, float *yr, int n,
                          float *mean, float *rstd)
{
    const float m = s / (float)n;
    float v = 0;
#pragma omp simd reduction(+ : v)
    for (int i = 0; i < n; i++)
        v += (xr[i] - m) * (xr[i] - m);
    const float rs = 1.0f / sqrtf(v / (float)n + 1e-5f);
    *mean = m;
    *rstd = rs;
#pragma omp simd
    for (int i = 0; i < n; i++)
        yr[i] = (xr[i] - m) * rs * g[i] + b[i];
}

RT_VECTOR_CLONES
void rt_layernorm_fwd_f(const float *x, const float *g, const float *b, float *y, float *mean, float *rstd,
                        int T, int n)
{
    for (int t = 0; t < T; t++) {
        const float *xr = x + (size_t)t * n;
        float s = 0;
#pragma omp simd reduction(+ : s)
        for (int i = 0; i < n; i++)
            s += xr[i];
        normalize_row(xr, s, g, b, y + (size_t)t * n, n, &mean[t], &rstd[t]);
    }
}

RT_VECTOR_CLONES
void rt_add_layernorm_fwd_f(const float *x, const float *r, float *sum, const float *g, const float *b,
                            float *y, float *mean, float *rstd, int T, int n)
{
    for (int t = 0; t < T; t++) {
        const size_t o = (size_t)t * n;
        float *sr = sum + o, s = 0;
#pragma omp simd reduction(+ : s)
        for (int i = 0; i < n; i++) {
            sr[i] = x[o + i] + r[o + i];
            s += sr[i];
        }
        normalize_row(sr, s, g, b, y + o, n, &mean[t], &rstd[t]);
    }
}

RT_VECTOR_CLONES
void rt_layernorm_bwd_f(const float *x, const float *g, const float *mean, const float *rstd, const float *dy,
                        float *dx, float *dg, float *db, int T, int n)
{
    for (int t = 0; t < T; t++) {
        const float *xr = x + (size_t)t * n, *dyr = dy + (size_t)t * n;
        float *dxr = dx + (size_t)t * n;
        const float m = mean[t], rs = rstd[t];
        float s1 = 0, s2 = 0; /* sums of dxhat and of dxhat * xhat */
#pragma omp simd reduction(+ : s1, s2)
        for (int i = 0; i < n; i++) {
            const float xhat = (xr[i] - m) * rs, dxhat = dyr[i] * g[i];
            s1 += dxhat;
            s2 += dxhat * xhat;
            dg[i] += dyr[i] * xhat;
            db[i] += dyr[i];
        }
        s1 /= (float)n;
        s2 /= (float)n;
#pragma omp simd
        for (int i = 0; i < n; i++) {
            const float xhat = (xr[i] - m) * rs;
            dxr[i] += (dyr[i] * g[i] - s1 - xhat * s2) * rs;
        }
    }
}

/* t[k] = exp(in[k] - mx) for the first `live` of 16 values, 0 after: one padded block of fixed length
 * (no scalar tail, no variable-length loop set-up); returns the sum of t. */
RT_VECTOR_INLINE
static float exp_block(const float *in, int live, float mx, float t[16])
{
    float sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int k = 0; k < 16; k++) {
        const float e = k < live ? rt_expf(in[k] - mx) : 0.0f;
        t[k] = e;
        sum += e;
    }
    return sum;
}

/* out[0, n) = exp(in - max(in)) (in and out may be the same row); returns their sum, *max the maximum. */
RT_VECTOR_INLINE
static float exp_shifted(const float *in, float *out, int n, float *max)
{
    float mx = in[0];
#pragma omp simd reduction(max : mx)
    for (int j = 1; j < n; j++)
        mx = in[j] > mx ? in[j] : mx;
    /* whole vectors first; the last n % 16 values through a padded block of 16, so that no exp runs
     * scalar (a row's scalar tail cost 3x its vector part on rows of about 100) */
    const int full = n - n % 16;
    float sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j < full; j++) {
        const float e = rt_expf(in[j] - mx);
        out[j] = e;
        sum += e;
    }
    if (full < n) {
        float tail[16];
        sum += exp_block(in + full, n - full, mx, tail);
        for (int k = 0; k < n - full; k++)
            out[full + k] = tail[k];
    }
    *max = mx;
    return sum;
}

RT_VECTOR_INLINE
static void scale_row(float *row, float factor, int n)
{
#pragma omp simd
    for (int j = 0; j < n; j++)
        row[j] *= factor;
}

/* A row of at most 16 live values in one padded block of fixed length: the variable-length loops' set-up
 * and scalar tails cost a row of 8 values 80 ns here, this 29 ns. */
RT_VECTOR_INLINE
static void softmax_short_row(float *row, int n, int l)
{
    float mx = -1e30f;
#pragma omp simd reduction(max : mx)
    for (int k = 0; k < 16; k++) {
        const float v = k < n ? row[k] : -1e30f;
        mx = v > mx ? v : mx;
    }
    float t[16];
    const float inv = 1.0f / exp_block(row, n, mx, t);
    const int head = l < 16 ? l : 16;
    for (int k = 0; k < head; k++)
        row[k] = t[k] * inv;
    for (int j = head; j < l; j++)
        row[j] = 0;
}

/* In place over one row of l values of which the first n are live: exp(row - max) / sum, zero after n. */
RT_VECTOR_INLINE
static void softmax_row(float *row, int n, int l)
{
    if (n <= 16) {
        softmax_short_row(row, n, l);
        return;
    }
    float mx;
    scale_row(row, 1.0f / exp_shifted(row, row, n, &mx), n);
    for (int j = n; j < l; j++)
        row[j] = 0;
}

/* A causal row whose live values are [lo, n) of l, with a sink logit in its denominator (NULL: none):
 * with m = max(live, sink), p_j = exp(x_j - max(live)) exp(max(live) - m) / (that sum + exp(sink - m)). */
RT_VECTOR_INLINE
static void softmax_row_window(float *row, int lo, int n, int l, const float *sink)
{
    for (int j = 0; j < lo; j++)
        row[j] = 0;
    if (!sink) {
        softmax_row(row + lo, n - lo, l - lo);
        return;
    }
    float mx;
    const float sum = exp_shifted(row + lo, row + lo, n - lo, &mx);
    const float m = mx > *sink ? mx : *sink, c = expf(mx - m);
    scale_row(row + lo, c / (sum * c + expf(*sink - m)), n - lo);
    for (int j = n; j < l; j++)
        row[j] = 0;
}

RT_VECTOR_CLONES
void rt_attn_softmax_fwd_f(float *probs, const float *sinks, const int *offsets, int B,
                           const rt_attn_shape *sh, int causal)
{
    const int A = sh->A;
    size_t p0 = 0;
    for (int s = 0; s < B; s++) {
        const int l = offsets[s + 1] - offsets[s];
        for (int h = 0; h < A; h++)
            for (int i = 0; i < l; i++) {
                float *row = probs + p0 + (size_t)h * l * l + (size_t)i * l;
                const int lo = causal ? rt_attn_first(sh, i) : 0;
                if (lo == 0 && !sinks)
                    softmax_row(row, causal ? i + 1 : l, l);
                else
                    softmax_row_window(row, lo, causal ? i + 1 : l, l, sinks ? sinks + h : NULL);
            }
        p0 += (size_t)A * l * l;
    }
}

/* A row's sink takes 1 - sum(p) of it and has no value: its logit's gradient is -(1 - sum p) (p . dp). */
RT_VECTOR_CLONES
void rt_attn_softmax_bwd_f(const float *probs, float *dprobs, float *dsinks, const int *offsets, int B,
                           const rt_attn_shape *sh)
{
    const int A = sh->A;
    const float scale = 1.0f / sqrtf((float)sh->Dqk);
    size_t p0 = 0;
    for (int s = 0; s < B; s++) {
        const int l = offsets[s + 1] - offsets[s];
        for (size_t i = 0; i < (size_t)A * l; i++) {
            const float *pr = probs + p0 + i * l;
            float *dr = dprobs + p0 + i * l;
            float dot = 0, mass = 0;
#pragma omp simd reduction(+ : dot, mass)
            for (int j = 0; j < l; j++)
                dot += dr[j] * pr[j], mass += pr[j];
            if (dsinks) dsinks[i / l] -= (1 - mass) * dot;
#pragma omp simd
            for (int j = 0; j < l; j++)
                dr[j] = pr[j] * (dr[j] - dot) * scale;
        }
        p0 += (size_t)A * l * l;
    }
}

RT_VECTOR_CLONES
double rt_cross_entropy_f(const float *logits, const int *targets, float *dlogits, int P, int V, double norm)
{
    double loss = 0;
    for (int p = 0; p < P; p++) {
        const float *z = logits + (size_t)p * V;
        float *dz = dlogits + (size_t)p * V;
        if (targets[p] < 0) {
            memset(dz, 0, sizeof(float) * (size_t)V);
            continue;
        }
        float mx;
        const float sum = exp_shifted(z, dz, V, &mx);
        loss += log((double)sum) + mx - z[targets[p]];
        scale_row(dz, (float)(1.0 / ((double)sum * norm)), V);
        dz[targets[p]] -= (float)(1.0 / norm);
    }
    return loss;
}

void rt_moe_group(const int *idx, int R, int E, int k, int *order, int *pos, int *counts)
{
    memset(counts, 0, (size_t)E * sizeof *counts);
    for (int r = 0; r < R; r++)
        counts[idx[r]]++;
    /* counts become each expert's first row, then its next free row as the rows are placed */
    for (int e = 0, start = 0; e < E; e++) {
        const int n = counts[e];
        counts[e] = start;
        start += n;
    }
    for (int r = 0; r < R; r++) {
        const int row = counts[idx[r]]++;
        order[row] = r / k;
        pos[r] = row;
    }
    /* each expert's next free row is now the next one's first: their differences are the counts again */
    for (int e = E - 1; e > 0; e--)
        counts[e] -= counts[e - 1];
}
