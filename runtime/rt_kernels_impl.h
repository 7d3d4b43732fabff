/* Body of the CPU kernels; included by rt_kernels_f.c and rt_kernels_d.c with REAL, S and GEMM defined. */
#include <math.h>
#include <string.h>

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define FN(name) CAT(name, S)

void FN(rt_linear_fwd)(const REAL *x, const REAL *W, const REAL *b, REAL *y, int T, int n_in, int n_out)
{
    if (b)
        for (int t = 0; t < T; t++)
            memcpy(y + (size_t)t * n_out, b, sizeof(REAL) * n_out);
    GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, T, n_out, n_in, 1, x, n_in, W, n_in, b ? 1 : 0, y, n_out);
}

void FN(rt_linear_bwd)(const REAL *x, const REAL *W, const REAL *dy, REAL *dx, REAL *dW, REAL *db, int T,
                       int n_in, int n_out)
{
    if (dx)
        GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, n_in, n_out, 1, dy, n_out, W, n_in, 1, dx, n_in);
    if (dW) GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, n_out, n_in, T, 1, dy, n_out, x, n_in, 1, dW, n_in);
    if (db)
        for (int t = 0; t < T; t++) {
            const REAL *dyt = dy + (size_t)t * n_out;
            /* db and dy never overlap: without the pragma the compiler kept this loop scalar */
#pragma omp simd
            for (int j = 0; j < n_out; j++)
                db[j] += dyt[j];
        }
}

#ifndef RT_FAST_ELEMENTWISE /* the float build has its own (rt_kernels_fast.c) */
void FN(rt_layernorm_fwd)(const REAL *x, const REAL *g, const REAL *b, REAL *y, REAL *mean, REAL *rstd, int T,
                          int n)
{
    for (int t = 0; t < T; t++) {
        const REAL *xr = x + (size_t)t * n;
        double m = 0, v = 0;
        for (int i = 0; i < n; i++)
            m += xr[i];
        m /= n;
        for (int i = 0; i < n; i++)
            v += (xr[i] - m) * (xr[i] - m);
        v /= n;
        double rs = 1 / sqrt(v + 1e-5);
        mean[t] = (REAL)m;
        rstd[t] = (REAL)rs;
        for (int i = 0; i < n; i++)
            y[(size_t)t * n + i] = (REAL)((xr[i] - m) * rs) * g[i] + b[i];
    }
}

void FN(rt_add_layernorm_fwd)(const REAL *x, const REAL *r, REAL *sum, const REAL *g, const REAL *b, REAL *y,
                              REAL *mean, REAL *rstd, int T, int n)
{
    for (size_t i = 0; i < (size_t)T * n; i++)
        sum[i] = x[i] + r[i];
    FN(rt_layernorm_fwd)(sum, g, b, y, mean, rstd, T, n);
}

void FN(rt_layernorm_bwd)(const REAL *x, const REAL *g, const REAL *mean, const REAL *rstd, const REAL *dy,
                          REAL *dx, REAL *dg, REAL *db, int T, int n)
{
    for (int t = 0; t < T; t++) {
        const REAL *xr = x + (size_t)t * n, *dyr = dy + (size_t)t * n;
        double s1 = 0, s2 = 0; /* mean of dxhat and of dxhat * xhat */
        for (int i = 0; i < n; i++) {
            double xhat = (xr[i] - mean[t]) * rstd[t], dxhat = dyr[i] * g[i];
            s1 += dxhat;
            s2 += dxhat * xhat;
            dg[i] += (REAL)(dyr[i] * xhat);
            db[i] += dyr[i];
        }
        s1 /= n;
        s2 /= n;
        for (int i = 0; i < n; i++) {
            double xhat = (xr[i] - mean[t]) * rstd[t], dxhat = dyr[i] * g[i];
            dx[(size_t)t * n + i] += (REAL)((dxhat - s1 - xhat * s2) * rstd[t]);
        }
    }
}

#define GELU_K 0.7978845608028654 /* sqrt(2/pi) */

void FN(rt_gelu_fwd)(const REAL *x, REAL *y, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        double v = x[i];
        y[i] = (REAL)(0.5 * v * (1 + tanh(GELU_K * (v + 0.044715 * v * v * v))));
    }
}

void FN(rt_gelu_bwd)(const REAL *x, const REAL *dy, REAL *dx, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        double v = x[i], u = GELU_K * (v + 0.044715 * v * v * v), th = tanh(u);
        double du = GELU_K * (1 + 3 * 0.044715 * v * v);
        dx[i] = (REAL)(dy[i] * (0.5 * (1 + th) + 0.5 * v * (1 - th * th) * du));
    }
}

#endif

/* probs layout: for sequence s (length l, offset o), head h: A * (sum of previous l^2) + h * l * l;
 * Q of head h: qkv + o ld + h Dqk, K: + k_offset + (h / group) Dqk, V: + v_offset + (h / group) Dv */
void FN(rt_attn_scores_fwd)(const REAL *qkv, REAL *probs, const int *offsets, int B, const rt_attn_shape *sh)
{
    const int A = sh->A, D = sh->Dqk, ld = rt_attn_ld(sh), group = A / sh->KV, ko = rt_attn_k_offset(sh);
    const REAL scale = (REAL)(1 / sqrt((double)D));
    size_t p0 = 0;
    for (int s = 0; s < B; s++) {
        const int o = offsets[s], l = offsets[s + 1] - o;
        for (int h = 0; h < A; h++) {
            const REAL *Q = qkv + (size_t)o * ld + h * D, *K = qkv + (size_t)o * ld + ko + (h / group) * D;
            GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, l, l, D, scale, Q, ld, K, ld, 0,
                 probs + p0 + (size_t)h * l * l, l);
        }
        p0 += (size_t)A * l * l;
    }
}

#ifndef RT_FAST_ELEMENTWISE /* the float build has its own (rt_kernels_fast.c) */
void FN(rt_attn_softmax_fwd)(REAL *probs, const REAL *sinks, const int *offsets, int B,
                             const rt_attn_shape *sh, int causal)
{
    const int A = sh->A;
    size_t p0 = 0;
    for (int s = 0; s < B; s++) {
        const int l = offsets[s + 1] - offsets[s];
        for (int h = 0; h < A; h++)
            for (int i = 0; i < l; i++) {
                REAL *row = probs + p0 + (size_t)h * l * l + (size_t)i * l;
                const int lo = causal ? rt_attn_first(sh, i) : 0, n = causal ? i + 1 : l;
                double mx = sinks ? sinks[h] : row[lo], sum = 0;
                for (int j = lo; j < n; j++)
                    mx = row[j] > mx ? row[j] : mx;
                if (sinks) sum = exp(sinks[h] - mx);
                for (int j = lo; j < n; j++)
                    sum += row[j] = (REAL)exp(row[j] - mx);
                for (int j = lo; j < n; j++)
                    row[j] = (REAL)(row[j] / sum);
                for (int j = 0; j < lo; j++)
                    row[j] = 0;
                for (int j = n; j < l; j++)
                    row[j] = 0;
            }
        p0 += (size_t)A * l * l;
    }
}

#endif

void FN(rt_attn_context_fwd)(const REAL *qkv, const REAL *probs, REAL *ctx, const int *offsets, int B,
                             const rt_attn_shape *sh)
{
    const int A = sh->A, Dv = sh->Dv, ld = rt_attn_ld(sh), group = A / sh->KV, vo = rt_attn_v_offset(sh);
    const int lc = rt_attn_ctx_width(sh);
    size_t p0 = 0;
    for (int s = 0; s < B; s++) {
        const int o = offsets[s], l = offsets[s + 1] - o;
        for (int h = 0; h < A; h++) {
            const REAL *Vv = qkv + (size_t)o * ld + vo + (h / group) * Dv;
            GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, l, Dv, l, 1, probs + p0 + (size_t)h * l * l, l,
                 Vv, ld, 0, ctx + (size_t)o * lc + h * Dv, lc);
        }
        p0 += (size_t)A * l * l;
    }
}

void FN(rt_attn_context_bwd)(const REAL *qkv, const REAL *probs, const REAL *dctx, REAL *dqkv, REAL *dprobs,
                             const int *offsets, int B, const rt_attn_shape *sh)
{
    const int A = sh->A, Dv = sh->Dv, ld = rt_attn_ld(sh), group = A / sh->KV, vo = rt_attn_v_offset(sh);
    const int lc = rt_attn_ctx_width(sh);
    size_t p0 = 0;
    for (int s = 0; s < B; s++) {
        const int o = offsets[s], l = offsets[s + 1] - o;
        for (int h = 0; h < A; h++) {
            const size_t v = (size_t)o * ld + vo + (h / group) * Dv;
            const REAL *P = probs + p0 + (size_t)h * l * l, *Vv = qkv + v;
            const REAL *dC = dctx + (size_t)o * lc + h * Dv;
            REAL *dV = dqkv + v, *dP = dprobs + p0 + (size_t)h * l * l;
            /* the query heads of a key/value group add their gradients into its V: the first writes it */
            GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, l, Dv, l, 1, P, l, dC, lc, h % group ? 1 : 0, dV,
                 ld);
            GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, l, l, Dv, 1, dC, lc, Vv, ld, 0, dP, l);
        }
        p0 += (size_t)A * l * l;
    }
}

#ifndef RT_FAST_ELEMENTWISE /* the float build has its own (rt_kernels_fast.c) */
/* A row's sink takes 1 - sum(p) of it and has no value: its logit's gradient is -(1 - sum p) (p . dp). */
void FN(rt_attn_softmax_bwd)(const REAL *probs, REAL *dprobs, REAL *dsinks, const int *offsets, int B,
                             const rt_attn_shape *sh)
{
    const int A = sh->A;
    const REAL scale = (REAL)(1 / sqrt((double)sh->Dqk));
    size_t p0 = 0;
    for (int s = 0; s < B; s++) {
        const int l = offsets[s + 1] - offsets[s];
        for (size_t i = 0; i < (size_t)A * l; i++) {
            const REAL *pr = probs + p0 + i * l;
            REAL *dr = dprobs + p0 + i * l;
            double dot = 0, mass = 0;
            for (int j = 0; j < l; j++)
                dot += dr[j] * pr[j], mass += pr[j];
            if (dsinks) dsinks[i / l] -= (REAL)((1 - mass) * dot);
            for (int j = 0; j < l; j++)
                dr[j] = (REAL)(pr[j] * (dr[j] - dot) * scale);
        }
        p0 += (size_t)A * l * l;
    }
}

#endif

void FN(rt_attn_scores_bwd)(const REAL *qkv, const REAL *dscores, REAL *dqkv, const int *offsets, int B,
                            const rt_attn_shape *sh)
{
    const int A = sh->A, D = sh->Dqk, ld = rt_attn_ld(sh), group = A / sh->KV, ko = rt_attn_k_offset(sh);
    size_t p0 = 0;
    for (int s = 0; s < B; s++) {
        const int o = offsets[s], l = offsets[s + 1] - o;
        for (int h = 0; h < A; h++) {
            const REAL *dS = dscores + p0 + (size_t)h * l * l;
            const size_t k = (size_t)o * ld + ko + (h / group) * D;
            const REAL *Q = qkv + (size_t)o * ld + h * D, *K = qkv + k;
            REAL *dQ = dqkv + (size_t)o * ld + h * D, *dK = dqkv + k;
            GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, l, D, l, 1, dS, l, K, ld, 0, dQ, ld);
            /* accumulated over the query heads of the group, the first writing it */
            GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, l, D, l, 1, dS, l, Q, ld, h % group ? 1 : 0, dK,
                 ld);
        }
        p0 += (size_t)A * l * l;
    }
}

void FN(rt_attention_fwd)(const REAL *qkv, const REAL *sinks, REAL *probs, REAL *ctx, const int *offsets,
                          int B, const rt_attn_shape *sh, int causal)
{
    FN(rt_attn_scores_fwd)(qkv, probs, offsets, B, sh);
    FN(rt_attn_softmax_fwd)(probs, sinks, offsets, B, sh, causal);
    FN(rt_attn_context_fwd)(qkv, probs, ctx, offsets, B, sh);
}

/* masked probabilities are zero, so their gradients vanish through the softmax */
void FN(rt_attention_bwd)(const REAL *qkv, const REAL *probs, const REAL *dctx, REAL *dqkv, REAL *dsinks,
                          REAL *scratch, const int *offsets, int B, const rt_attn_shape *sh)
{
    FN(rt_attn_context_bwd)(qkv, probs, dctx, dqkv, scratch, offsets, B, sh);
    FN(rt_attn_softmax_bwd)(probs, scratch, dsinks, offsets, B, sh);
    FN(rt_attn_scores_bwd)(qkv, scratch, dqkv, offsets, B, sh);
}

void FN(rt_embedding_fwd)(const int *tokens, const int *positions, const int *types, const REAL *word,
                          const REAL *pos, const REAL *type, REAL *out, int T, int H)
{
    for (int t = 0; t < T; t++) {
        const REAL *w = word + (size_t)tokens[t] * H, *p = pos ? pos + (size_t)positions[t] * H : NULL;
        const REAL *ty = type && types ? type + (size_t)types[t] * H : NULL;
        for (int i = 0; i < H; i++)
            out[(size_t)t * H + i] = w[i] + (p ? p[i] : 0) + (ty ? ty[i] : 0);
    }
}

void FN(rt_embedding_bwd)(const int *tokens, const int *positions, const int *types, const REAL *dout,
                          REAL *dword, REAL *dpos, REAL *dtype, int T, int H)
{
    for (int t = 0; t < T; t++) {
        const REAL *d = dout + (size_t)t * H;
        REAL *w = dword + (size_t)tokens[t] * H, *p = dpos ? dpos + (size_t)positions[t] * H : NULL;
        REAL *ty = dtype && types ? dtype + (size_t)types[t] * H : NULL;
        for (int i = 0; i < H; i++) {
            w[i] += d[i];
            if (p) p[i] += d[i];
            if (ty) ty[i] += d[i];
        }
    }
}

#ifndef RT_FAST_ELEMENTWISE
double FN(rt_cross_entropy)(const REAL *logits, const int *targets, REAL *dlogits, int P, int V, double norm)
{
    double loss = 0;
    for (int p = 0; p < P; p++) {
        const REAL *z = logits + (size_t)p * V;
        REAL *dz = dlogits + (size_t)p * V;
        if (targets[p] < 0) {
            memset(dz, 0, sizeof(REAL) * V);
            continue;
        }
        double mx = z[0], sum = 0;
        for (int v = 1; v < V; v++)
            mx = z[v] > mx ? z[v] : mx;
        for (int v = 0; v < V; v++)
            sum += exp(z[v] - mx);
        loss += log(sum) + mx - z[targets[p]];
        for (int v = 0; v < V; v++)
            dz[v] = (REAL)(exp(z[v] - mx) / sum / norm);
        dz[targets[p]] -= (REAL)(1.0 / norm);
    }
    return loss;
}
#endif

void FN(rt_rmsnorm_fwd)(const REAL *x, const REAL *g, REAL *y, REAL *rstd, int T, int n)
{
    for (int t = 0; t < T; t++) {
        const REAL *xr = x + (size_t)t * n;
        double ss = 0;
        for (int i = 0; i < n; i++)
            ss += (double)xr[i] * xr[i];
        const double rs = 1 / sqrt(ss / n + 1e-5);
        rstd[t] = (REAL)rs;
        for (int i = 0; i < n; i++)
            y[(size_t)t * n + i] = (REAL)(xr[i] * rs) * g[i];
    }
}

void FN(rt_rmsnorm_bwd)(const REAL *x, const REAL *g, const REAL *rstd, const REAL *dy, REAL *dx, REAL *dg,
                        int T, int n)
{
    for (int t = 0; t < T; t++) {
        const REAL *xr = x + (size_t)t * n, *dyr = dy + (size_t)t * n;
        const double rs = rstd[t];
        double dot = 0; /* sum of dy g x */
        for (int i = 0; i < n; i++) {
            dot += (double)dyr[i] * g[i] * xr[i];
            dg[i] += (REAL)(dyr[i] * xr[i] * rs);
        }
        /* d(x rs)/dx: rs (I - x x^T rs^2 / n) */
        const double c = dot * rs * rs * rs / n;
        for (int i = 0; i < n; i++)
            dx[(size_t)t * n + i] += (REAL)(dyr[i] * g[i] * rs - xr[i] * c);
    }
}

void FN(rt_rope)(REAL *x, const int *positions, int T, int ld, int heads, int stride, int R, double base,
                 int inverse)
{
    const int half = R / 2;
    for (int t = 0; t < T; t++)
        for (int h = 0; h < heads; h++) {
            REAL *v = x + (size_t)t * ld + (size_t)h * stride;
            for (int i = 0; i < half; i++) {
                const double angle = positions[t] * pow(base, -2.0 * i / R);
                const double c = cos(angle), s = inverse ? -sin(angle) : sin(angle);
                const double a = v[i], b = v[i + half];
                v[i] = (REAL)(a * c - b * s);
                v[i + half] = (REAL)(a * s + b * c);
            }
        }
}

void FN(rt_swiglu_fwd)(const REAL *u, REAL *y, int T, int F)
{
    for (int t = 0; t < T; t++) {
        const REAL *gate = u + (size_t)t * 2 * F, *up = gate + F;
        for (int i = 0; i < F; i++) {
            const double g = gate[i];
            y[(size_t)t * F + i] = (REAL)(g / (1 + exp(-g)) * up[i]);
        }
    }
}

void FN(rt_swiglu_bwd)(const REAL *u, const REAL *dy, REAL *du, int T, int F)
{
    for (int t = 0; t < T; t++) {
        const REAL *gate = u + (size_t)t * 2 * F, *up = gate + F, *d = dy + (size_t)t * F;
        REAL *dgate = du + (size_t)t * 2 * F, *dup = dgate + F;
        for (int i = 0; i < F; i++) {
            const double g = gate[i], sig = 1 / (1 + exp(-g)), silu = g * sig;
            dgate[i] = (REAL)(d[i] * up[i] * (sig + silu * (1 - sig)));
            dup[i] = (REAL)(d[i] * silu);
        }
    }
}

void FN(rt_moe_route_fwd)(const REAL *logits, int *idx, REAL *w, int T, int E, int k)
{
    for (int t = 0; t < T; t++) {
        const REAL *z = logits + (size_t)t * E;
        int *ix = idx + (size_t)t * k;
        for (int j = 0; j < k; j++) { /* the j-th largest not chosen yet */
            int best = -1;
            for (int e = 0; e < E; e++) {
                int taken = 0;
                for (int q = 0; q < j; q++)
                    taken |= ix[q] == e;
                if (!taken && (best < 0 || z[e] > z[best])) best = e;
            }
            ix[j] = best;
        }
        double mx = z[ix[0]], sum = 0;
        for (int j = 0; j < k; j++)
            sum += exp(z[ix[j]] - mx);
        for (int j = 0; j < k; j++)
            w[(size_t)t * k + j] = (REAL)(exp(z[ix[j]] - mx) / sum);
    }
}

void FN(rt_moe_route_bwd)(const int *idx, const REAL *w, const REAL *dw, REAL *dlogits, int T, int E, int k)
{
    memset(dlogits, 0, sizeof(REAL) * (size_t)T * E);
    for (int t = 0; t < T; t++) {
        const REAL *wt = w + (size_t)t * k, *dwt = dw + (size_t)t * k;
        double dot = 0;
        for (int j = 0; j < k; j++)
            dot += (double)wt[j] * dwt[j];
        for (int j = 0; j < k; j++)
            dlogits[(size_t)t * E + idx[(size_t)t * k + j]] = (REAL)(wt[j] * (dwt[j] - dot));
    }
}

void FN(rt_moe_combine_fwd)(const REAL *Y, const int *pos, const REAL *w, REAL *out, int T, int k, int H)
{
    for (int t = 0; t < T; t++) {
        REAL *o = out + (size_t)t * H;
        memset(o, 0, sizeof(REAL) * H);
        for (int j = 0; j < k; j++) {
            const REAL *y = Y + (size_t)pos[(size_t)t * k + j] * H, wj = w[(size_t)t * k + j];
            for (int i = 0; i < H; i++)
                o[i] += wj * y[i];
        }
    }
}

void FN(rt_moe_combine_bwd)(const REAL *Y, const int *pos, const REAL *w, const REAL *dout, REAL *dY,
                            REAL *dw, int T, int k, int H)
{
    for (int t = 0; t < T; t++) {
        const REAL *d = dout + (size_t)t * H;
        for (int j = 0; j < k; j++) {
            const size_t r = (size_t)pos[(size_t)t * k + j];
            const REAL *y = Y + r * H, wj = w[(size_t)t * k + j];
            REAL *dy = dY + r * H;
            double dot = 0;
            for (int i = 0; i < H; i++) {
                dy[i] = wj * d[i];
                dot += (double)d[i] * y[i];
            }
            dw[(size_t)t * k + j] = (REAL)dot;
        }
    }
}
