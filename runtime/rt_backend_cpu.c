/* The CPU backend (rt_backend.h): rt_kernels.h's float kernels (OpenBLAS GEMMs, rt_kernels_fast.c's
 * element-wise loops), host memory, vectorised glue and a fused optimizer pass, wall-clock op timers. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <unistd.h>

#include "rt_backend.h"
#include "rt_blas.h"
#include "rt_elementwise.h"
#include "rt_flash.h"
#include "rt_kernels.h"
#include "rt_vector.h"
#include "wall_clock.h"

const char *const rt_kernel_family_names[] = {"buffers",
                                              "linear",
                                              "layer norm",
                                              "GELU",
                                              "attention",
                                              "embedding",
                                              "cross-entropy",
                                              "glue",
                                              "tensor-train contraction",
                                              "Adam/AdamW update",
                                              "LAMB update",
                                              "RMSNorm",
                                              "rotary positions",
                                              "SwiGLU",
                                              "mixture of experts",
                                              "fused attention",
                                              NULL};

typedef struct cpu_ctx {
    rt_gemm_math math;
    float *round[3]; /* the linear layers' inputs rounded to the products' arithmetic (x, W, dy) */
    size_t round_n[3];
    const float *shadow_base; /* the parameters' 16-bit shadow (shadow16): weights read from it */
    const unsigned short *shadow16;
    size_t shadow_n;
    int n_ops;
    double *begin,
        *elapsed; /* per op: wall-clock start of the open bracket, seconds since the last collect */
} cpu_ctx;

static bool cpu_supports(const rt_backend *be, rt_kernel_family family)
{
    (void)be;
    return family >= 0 && family < RT_FAMILY_COUNT;
}

/* The products' arithmetic: fp32, or (as the CUDA backend's tensor cores read their inputs) the linear
 * layers' inputs rounded to tf32, bf16 or fp16 values before an fp32 product; attention stays fp32 here. */
static int cpu_set_gemm_math(rt_backend *be, rt_gemm_math math)
{
    if (math < 0 || math >= RT_GEMM_MATH_COUNT) return -1;
    ((cpu_ctx *)be->ctx)->math = math;
    return 0;
}

/* src[n] rounded to the arithmetic's inputs into scratch slot k; NULL when out of memory */
static const float *rounded(cpu_ctx *c, int k, const float *src, size_t n)
{
    if (c->round_n[k] < n) {
        float *p = realloc(c->round[k], n * sizeof *p);
        if (!p) return NULL;
        c->round[k] = p, c->round_n[k] = n;
    }
    float *d = c->round[k];
    const bool half = c->math == RT_GEMM_BF16 || c->math == RT_GEMM_FP16;
    if (half && c->shadow_base && src >= c->shadow_base && src + n <= c->shadow_base + c->shadow_n) {
        /* a weight of the parameters' shadow: its 16-bit values, as the GPU reads them */
        const unsigned short *h = c->shadow16 + (src - c->shadow_base);
        for (size_t i = 0; i < n; i++)
            d[i] = c->math == RT_GEMM_BF16 ? rt_bf16_value(h[i]) : rt_fp16_value(h[i]);
        return d;
    }
    for (size_t i = 0; i < n; i++)
        d[i] = c->math == RT_GEMM_TF32   ? rt_round_tf32(src[i])
               : c->math == RT_GEMM_BF16 ? rt_round_bf16(src[i])
                                         : rt_round_fp16(src[i]);
    return d;
}

static void cpu_round16(rt_backend *be, void *base16, const float *base, size_t n)
{
    const cpu_ctx *c = be->ctx;
    unsigned short *h = base16;
    for (size_t i = 0; i < n; i++)
        h[i] = c->math == RT_GEMM_FP16 ? rt_fp16_bits(base[i]) : rt_bf16_bits(base[i]);
}

static void cpu_shadow16(rt_backend *be, const float *base, const void *base16, size_t n)
{
    cpu_ctx *c = be->ctx;
    c->shadow_base = base, c->shadow16 = base16, c->shadow_n = base ? n : 0;
}

static void cpu_describe(const rt_backend *be, char *buf, size_t size)
{
    (void)be;
    snprintf(buf, size, "%s BLAS kernels \"%s\", %d thread%s",
             strcmp(rt_blas_core_name(), "reference") == 0 ? "reference" : "OpenBLAS", rt_blas_core_name(),
             rt_blas_thread_count(), rt_blas_thread_count() == 1 ? "" : "s");
}

/* ---- buffers ---- */

/* Buffers of 2 MiB and more on 2 MiB boundaries, asked for as transparent huge pages (where the kernel's
 * THP mode is `madvise`, as on Debian): a model's weights, gradients, moments and activations then fault
 * in 512 times fewer pages (a BERT-base run faulted 886k 4 KiB pages, 8 s of system time at start-up), and
 * the step's streaming kernels miss the TLB less. Smaller ones, and systems without THP, as calloc. */
#define CPU_HUGE_PAGE ((size_t)2 << 20)

static void *cpu_alloc(rt_backend *be, size_t bytes)
{
    (void)be;
#ifdef MADV_HUGEPAGE
    if (bytes >= CPU_HUGE_PAGE) {
        const size_t rounded = (bytes + CPU_HUGE_PAGE - 1) / CPU_HUGE_PAGE * CPU_HUGE_PAGE;
        void *p = NULL;
        if (posix_memalign(&p, CPU_HUGE_PAGE, rounded) != 0) return NULL;
        madvise(p, rounded, MADV_HUGEPAGE); /* advice only: without THP the pages stay small */
        memset(p, 0, bytes);
        return p;
    }
#endif
    return calloc(1, bytes ? bytes : 1);
}

static void cpu_free(rt_backend *be, void *p)
{
    (void)be;
    free(p);
}

static void *cpu_alloc_host(rt_backend *be, size_t bytes)
{
    (void)be;
    return calloc(1, bytes ? bytes : 1);
}

static void cpu_memcpy(rt_backend *be, void *dst, const void *src, size_t bytes)
{
    (void)be;
    if (bytes) memcpy(dst, src, bytes);
}

/* the host is the device: nothing to wait for, but a download counts where a GPU's would wait */
static void cpu_download(rt_backend *be, void *dst, const void *src, size_t bytes)
{
    be->host_waits++;
    cpu_memcpy(be, dst, src, bytes);
}

RT_VECTOR_CLONES
static void cpu_fill(rt_backend *be, float *x, float value, size_t n)
{
    (void)be;
    if (value == 0.0f) {
        memset(x, 0, n * sizeof *x);
        return;
    }
    for (size_t i = 0; i < n; i++)
        x[i] = value;
}

static void cpu_copy(rt_backend *be, float *dst, const float *src, size_t n)
{
    (void)be;
    memcpy(dst, src, n * sizeof *dst);
}

static void cpu_copy_2d(rt_backend *be, float *dst, int ld_dst, const float *src, int ld_src, int rows,
                        int cols)
{
    (void)be;
    for (int r = 0; r < rows; r++)
        memcpy(dst + (size_t)r * ld_dst, src + (size_t)r * ld_src, (size_t)cols * sizeof *dst);
}

static void cpu_add_2d(rt_backend *be, float *dst, int ld_dst, const float *src, int ld_src, int rows,
                       int cols)
{
    (void)be;
    for (int r = 0; r < rows; r++) {
        float *d = dst + (size_t)r * ld_dst;
        const float *x = src + (size_t)r * ld_src;
        for (int c = 0; c < cols; c++)
            d[c] += x[c];
    }
}

/* ---- kernels: rt_kernels.h's float instantiation ---- */

static void cpu_linear_fwd(rt_backend *be, const float *x, const float *W, const float *b, float *y, int T,
                           int n_in, int n_out)
{
    cpu_ctx *c = be->ctx;
    if (c->math != RT_GEMM_FP32) {
        const float *xr = rounded(c, 0, x, (size_t)T * n_in), *Wr = rounded(c, 1, W, (size_t)n_out * n_in);
        if (xr && Wr) x = xr, W = Wr; /* out of memory: the product stays fp32 */
    }
    rt_linear_fwd_f(x, W, b, y, T, n_in, n_out);
}

static void cpu_bias_grad(rt_backend *be, float *db, const float *dy, int ld, int rows, int cols);

/* the products from the reference's float instantiation, the bias gradient from the vectorised glue (the
 * reference's loop runs 4 wide at most: no AVX clones there) */
static void cpu_linear_bwd(rt_backend *be, const float *x, const float *W, const float *dy, float *dx,
                           float *dW, float *db, int T, int n_in, int n_out)
{
    cpu_ctx *c = be->ctx;
    const float *xr = x, *Wr = W, *dyr = dy;
    if (c->math != RT_GEMM_FP32) {
        /* x is read for dW only, W for dx only (either may be NULL when its gradient is not asked for) */
        const float *a = dW ? rounded(c, 0, x, (size_t)T * n_in) : x,
                    *w = dx ? rounded(c, 1, W, (size_t)n_out * n_in) : W,
                    *d = rounded(c, 2, dy, (size_t)T * n_out);
        if ((a || !dW) && (w || !dx) && d) xr = a, Wr = w, dyr = d;
    }
    rt_linear_bwd_f(xr, Wr, dyr, dx, dW, NULL, T, n_in, n_out);
    if (db) cpu_bias_grad(be, db, dy, n_out, T, n_out);
}

static void cpu_layernorm_fwd(rt_backend *be, const float *x, const float *g, const float *b, float *y,
                              float *mean, float *rstd, int T, int n)
{
    (void)be;
    rt_layernorm_fwd_f(x, g, b, y, mean, rstd, T, n);
}

static void cpu_add_layernorm_fwd(rt_backend *be, const float *x, const float *r, float *sum, const float *g,
                                  const float *b, float *y, float *mean, float *rstd, int T, int n)
{
    (void)be;
    rt_add_layernorm_fwd_f(x, r, sum, g, b, y, mean, rstd, T, n);
}

static void cpu_layernorm_bwd(rt_backend *be, const float *x, const float *g, const float *mean,
                              const float *rstd, const float *dy, float *dx, float *dg, float *db, int T,
                              int n)
{
    (void)be;
    rt_layernorm_bwd_f(x, g, mean, rstd, dy, dx, dg, db, T, n);
}

static void cpu_rmsnorm_fwd(rt_backend *be, const float *x, const float *g, float *y, float *rstd, int T,
                            int n)
{
    (void)be;
    rt_rmsnorm_fwd_f(x, g, y, rstd, T, n);
}

static void cpu_rmsnorm_bwd(rt_backend *be, const float *x, const float *g, const float *rstd,
                            const float *dy, float *dx, float *dg, int T, int n)
{
    (void)be;
    rt_rmsnorm_bwd_f(x, g, rstd, dy, dx, dg, T, n);
}

static void cpu_rope(rt_backend *be, float *x, const rt_dev_batch *b, int ld, int heads, int stride, int R,
                     double base, bool inverse)
{
    (void)be;
    rt_rope_f(x, b->positions, b->T, ld, heads, stride, R, base, inverse);
}

static void cpu_swiglu_fwd(rt_backend *be, const float *u, float *y, int T, int F)
{
    (void)be;
    rt_swiglu_fwd_f(u, y, T, F);
}

static void cpu_swiglu_bwd(rt_backend *be, const float *u, const float *dy, float *du, int T, int F)
{
    (void)be;
    rt_swiglu_bwd_f(u, dy, du, T, F);
}

static void cpu_moe_group(rt_backend *be, const int *idx, int R, int E, int k, int *order, int *pos,
                          int *counts)
{
    (void)be;
    rt_moe_group(idx, R, E, k, order, pos, counts);
}

static void cpu_moe_route_fwd(rt_backend *be, const float *logits, int *idx, float *w, int T, int E, int k)
{
    (void)be;
    rt_moe_route_fwd_f(logits, idx, w, T, E, k);
}

static void cpu_moe_route_bwd(rt_backend *be, const int *idx, const float *w, const float *dw, float *dlogits,
                              int T, int E, int k)
{
    (void)be;
    rt_moe_route_bwd_f(idx, w, dw, dlogits, T, E, k);
}

static void cpu_moe_combine_fwd(rt_backend *be, const float *Y, const int *pos, const float *w, float *out,
                                int T, int k, int H)
{
    (void)be;
    rt_moe_combine_fwd_f(Y, pos, w, out, T, k, H);
}

static void cpu_moe_combine_bwd(rt_backend *be, const float *Y, const int *pos, const float *w,
                                const float *dout, float *dY, float *dw, int T, int k, int H)
{
    (void)be;
    rt_moe_combine_bwd_f(Y, pos, w, dout, dY, dw, T, k, H);
}

static void cpu_gelu_fwd(rt_backend *be, const float *x, float *y, size_t n)
{
    (void)be;
    rt_gelu_fwd_f(x, y, n);
}

static void cpu_gelu_bwd(rt_backend *be, const float *x, const float *dy, float *dx, size_t n)
{
    (void)be;
    rt_gelu_bwd_f(x, dy, dx, n);
}

static void cpu_attn_scores_fwd(rt_backend *be, const float *qkv, float *probs, const rt_dev_batch *b,
                                const rt_attn_shape *sh)
{
    (void)be;
    rt_attn_scores_fwd_f(qkv, probs, b->offsets_host, b->B, sh);
}

static void cpu_attn_softmax_fwd(rt_backend *be, float *probs, const float *sinks, const rt_dev_batch *b,
                                 const rt_attn_shape *sh, bool causal)
{
    (void)be;
    rt_attn_softmax_fwd_f(probs, sinks, b->offsets_host, b->B, sh, causal);
}

static void cpu_attn_context_fwd(rt_backend *be, const float *qkv, const float *probs, float *ctx,
                                 const rt_dev_batch *b, const rt_attn_shape *sh)
{
    (void)be;
    rt_attn_context_fwd_f(qkv, probs, ctx, b->offsets_host, b->B, sh);
}

static void cpu_attn_context_bwd(rt_backend *be, const float *qkv, const float *probs, const float *dctx,
                                 float *dqkv, float *dprobs, const rt_dev_batch *b, const rt_attn_shape *sh)
{
    (void)be;
    rt_attn_context_bwd_f(qkv, probs, dctx, dqkv, dprobs, b->offsets_host, b->B, sh);
}

static void cpu_attn_softmax_bwd(rt_backend *be, const float *probs, float *dprobs, float *dsinks,
                                 const rt_dev_batch *b, const rt_attn_shape *sh)
{
    (void)be;
    rt_attn_softmax_bwd_f(probs, dprobs, dsinks, b->offsets_host, b->B, sh);
}

/* Fused attention: rt_flash.h's rows, a sequence, head and row at a time (the GPU runs a thread a row). */
static void cpu_attn_flash_fwd(rt_backend *be, const float *qkv, const float *sinks, float *ctx, float *lse,
                               const rt_dev_batch *b, const rt_attn_shape *sh, bool causal)
{
    (void)be;
    const int A = sh->A, group = A / sh->KV, ld = rt_attn_ld(sh), lc = rt_attn_ctx_width(sh);
    const float scale = rt_flash_scale(sh);
    for (int s = 0; s < b->B; s++) {
        const int o = b->offsets_host[s], l = b->offsets_host[s + 1] - o;
        for (int h = 0; h < A; h++) {
            const float *k = qkv + (size_t)o * ld + rt_attn_k_offset(sh) + (size_t)(h / group) * sh->Dqk;
            const float *v = qkv + (size_t)o * ld + rt_attn_v_offset(sh) + (size_t)(h / group) * sh->Dv;
            for (int i = 0; i < l; i++) {
                int j0, j1;
                rt_flash_keys(sh, causal, i, l, &j0, &j1);
                const size_t t = (size_t)o + (size_t)i;
                lse[t * A + h] = rt_flash_fwd_row(qkv + t * ld + (size_t)h * sh->Dqk, k, v, ld, j0, j1,
                                                  sh->Dqk, sh->Dv, scale, sinks != NULL, sinks ? sinks[h] : 0,
                                                  ctx + t * lc + (size_t)h * sh->Dv);
            }
        }
    }
}

static void cpu_attn_flash_bwd(rt_backend *be, const float *qkv, const float *sinks, const float *ctx,
                               const float *lse, const float *dctx, float *dqkv, float *dsinks, float *delta,
                               const rt_dev_batch *b, const rt_attn_shape *sh, bool causal)
{
    (void)be;
    const int A = sh->A, KV = sh->KV, group = A / KV, ld = rt_attn_ld(sh), lc = rt_attn_ctx_width(sh);
    const int Dqk = sh->Dqk, Dv = sh->Dv, ko = rt_attn_k_offset(sh), vo = rt_attn_v_offset(sh);
    const float scale = rt_flash_scale(sh);
    const size_t T = (size_t)b->offsets_host[b->B];
    memset(dqkv, 0, T * (size_t)ld * sizeof *dqkv);
    for (size_t t = 0; t < T; t++) /* delta = dctx . ctx, a row and head */
        for (int h = 0; h < A; h++)
            delta[t * A + h] =
                rt_flash_dot(dctx + t * lc + (size_t)h * Dv, ctx + t * lc + (size_t)h * Dv, Dv);
    for (int s = 0; s < b->B; s++) {
        const int o = b->offsets_host[s], l = b->offsets_host[s + 1] - o;
        const float *row0 = qkv + (size_t)o * ld;
        for (int h = 0; h < A; h++) {
            const int g = h / group;
            const float *k = row0 + ko + (size_t)g * Dqk, *v = row0 + vo + (size_t)g * Dv;
            for (int i = 0; i < l; i++) { /* dq, and the sink's share */
                int j0, j1;
                rt_flash_keys(sh, causal, i, l, &j0, &j1);
                const size_t t = (size_t)o + (size_t)i;
                rt_flash_dq_row(qkv + t * ld + (size_t)h * Dqk, k, v, ld, j0, j1, Dqk, Dv, scale,
                                lse[t * A + h], delta[t * A + h], dctx + t * lc + (size_t)h * Dv,
                                dqkv + t * ld + (size_t)h * Dqk);
                if (sinks && dsinks) dsinks[h] += rt_flash_dsink(sinks[h], lse[t * A + h], delta[t * A + h]);
            }
            for (int j = 0; j < l; j++) { /* dk and dv of key row j from this query head */
                int i0, i1;
                rt_flash_queries(sh, causal, j, l, &i0, &i1);
                const size_t t = (size_t)o + (size_t)j;
                rt_flash_dkv_row(k + (size_t)j * ld, v + (size_t)j * ld, row0 + (size_t)h * Dqk, ld,
                                 dctx + (size_t)o * lc + (size_t)h * Dv, lc, lse + (size_t)o * A + h,
                                 delta + (size_t)o * A + h, A, i0, i1, Dqk, Dv, scale,
                                 dqkv + t * ld + ko + (size_t)g * Dqk, dqkv + t * ld + vo + (size_t)g * Dv);
            }
        }
    }
}

static void cpu_attn_scores_bwd(rt_backend *be, const float *qkv, const float *dscores, float *dqkv,
                                const rt_dev_batch *b, const rt_attn_shape *sh)
{
    (void)be;
    rt_attn_scores_bwd_f(qkv, dscores, dqkv, b->offsets_host, b->B, sh);
}

static void cpu_embedding_fwd(rt_backend *be, const rt_dev_batch *b, const float *word, const float *pos,
                              const float *type, float *out, int H)
{
    (void)be;
    rt_embedding_fwd_f(b->tokens, b->positions, type ? b->types : NULL, word, pos, type, out, b->T, H);
}

static void cpu_embedding_bwd(rt_backend *be, const rt_dev_batch *b, const float *dout, float *dword,
                              float *dpos, float *dtype, int H)
{
    (void)be;
    rt_embedding_bwd_f(b->tokens, b->positions, dtype ? b->types : NULL, dout, dword, dpos, dtype, b->T, H);
}

static void cpu_cross_entropy(rt_backend *be, const float *logits, const rt_dev_batch *b, float *dlogits,
                              int V, double norm, double *loss)
{
    (void)be;
    *loss += rt_cross_entropy_f(logits, b->targets, dlogits, b->P, V, norm);
}

/* ---- glue ---- */

RT_VECTOR_CLONES
static void cpu_add(rt_backend *be, float *out, const float *x, const float *y, size_t n)
{
    (void)be;
#pragma omp simd
    for (size_t i = 0; i < n; i++)
        out[i] = x[i] + y[i];
}

RT_VECTOR_CLONES
static void cpu_axpy(rt_backend *be, float *y, const float *x, float a, size_t n)
{
    (void)be;
#pragma omp simd
    for (size_t i = 0; i < n; i++)
        y[i] += a * x[i];
}

static void cpu_gather_rows(rt_backend *be, float *dst, const float *src, const int *rows, int n_rows,
                            int width)
{
    (void)be;
    for (int p = 0; p < n_rows; p++)
        memcpy(dst + (size_t)p * width, src + (size_t)rows[p] * width, (size_t)width * sizeof *dst);
}

RT_VECTOR_CLONES
static void cpu_scatter_add_rows(rt_backend *be, float *dst, const float *src, const int *rows, int n_rows,
                                 int width)
{
    (void)be;
    for (int p = 0; p < n_rows; p++) {
        float *d = dst + (size_t)rows[p] * width;
        const float *s = src + (size_t)p * width;
#pragma omp simd
        for (int i = 0; i < width; i++)
            d[i] += s[i];
    }
}

RT_VECTOR_CLONES
static void cpu_mask_mul(rt_backend *be, float *x, const float *mask, size_t n)
{
    (void)be;
#pragma omp simd
    for (size_t i = 0; i < n; i++)
        x[i] *= mask[i];
}

RT_VECTOR_CLONES
static void cpu_scale(rt_backend *be, float *x, float factor, size_t n)
{
    (void)be;
#pragma omp simd
    for (size_t i = 0; i < n; i++)
        x[i] *= factor;
}

RT_VECTOR_CLONES
static double sum_sq(const float *x, size_t n)
{
    double s = 0;
#pragma omp simd reduction(+ : s)
    for (size_t i = 0; i < n; i++)
        s += (double)x[i] * x[i];
    return s;
}

static void cpu_sum_sq(rt_backend *be, const float *x, size_t n, double *acc)
{
    (void)be;
    *acc += sum_sq(x, n);
}

static void cpu_clip_scale(rt_backend *be, float *x, size_t n, const double *sq, double max_norm,
                           double scale, double *sq_after)
{
    const float f = rt_clip_factor(sqrt(*sq) / scale, max_norm);
    if (f != 1.0f) cpu_scale(be, x, f, n);
    *sq_after += sum_sq(x, n);
}

static void cpu_clip_gate(rt_backend *be, const double *sq, const double *loss, double max_norm, double scale,
                          float *gate)
{
    (void)be;
    rt_clip_gate(sq ? *sq : 0, sq != NULL, loss ? *loss : 0, loss != NULL, max_norm, scale, gate);
}

RT_VECTOR_CLONES
static void cpu_add_bias(rt_backend *be, float *y, int ld, const float *b, int rows, int cols)
{
    (void)be;
    for (int r = 0; r < rows; r++) {
        float *yr = y + (size_t)r * ld;
#pragma omp simd
        for (int c = 0; c < cols; c++)
            yr[c] += b[c];
    }
}

RT_VECTOR_CLONES
static void cpu_bias_grad(rt_backend *be, float *db, const float *dy, int ld, int rows, int cols)
{
    (void)be;
    for (int r = 0; r < rows; r++) {
        const float *d = dy + (size_t)r * ld;
#pragma omp simd
        for (int c = 0; c < cols; c++)
            db[c] += d[c];
    }
}

/* ---- tensor-train layers ---- */

static void cpu_tt_fwd(rt_backend *be, const rt_tt_layer *l, const float *X, const float *cores, float *Y,
                       float *work, int T)
{
    (void)be;
    rt_tt_fwd_f(l, X, cores, Y, work, T);
}

static void cpu_tt_bwd(rt_backend *be, const rt_tt_layer *l, const float *X, const float *cores,
                       const float *dY, float *dX, float *dcores, float *work, int T)
{
    (void)be;
    rt_tt_bwd_f(l, X, cores, dY, dX, dcores, work, T);
}

/* ---- optimizer: one pass over the slice, one square root and one division per value ---- */

/* the step's constants, as the CUDA backend makes them (rt_elementwise.h): the gate's factor after the
 * arguments' gradient scale */
static rt_adam_consts adam_consts(const rt_adam_args *a, const float *gate, float weight_decay)
{
    return rt_adam_make_consts(a->lr, a->beta1, a->beta2, a->eps, a->c1, a->c2,
                               gate ? a->grad_scale * gate[0] : a->grad_scale, weight_decay);
}

RT_VECTOR_CLONES
static void cpu_adam_update(rt_backend *be, float *w, const float *g, float *m, float *v, const float *mask,
                            size_t n, const rt_adam_args *a, const float *gate)
{
    (void)be;
    if (gate && gate[1] != 0) return; /* a skipped step */
    const rt_adam_consts k = adam_consts(a, gate, a->decoupled_decay ? a->weight_decay : 0.0f);
    if (mask) {
#pragma omp simd
        for (size_t i = 0; i < n; i++)
            w[i] = rt_adam_step(&k, w[i], g[i], &m[i], &v[i], mask[i]);
    } else {
#pragma omp simd
        for (size_t i = 0; i < n; i++)
            w[i] = rt_adam_step(&k, w[i], g[i], &m[i], &v[i], 1.0f);
    }
}

/* one tensor's slice: u over g, its two sums returned */
RT_VECTOR_CLONES
static void lamb_slice(const rt_adam_consts *k, const float *w, float *g, float *m, float *v,
                       const float *mask, size_t n, double *w_sq, double *u_sq)
{
    double ws = 0, us = 0;
#pragma omp simd reduction(+ : ws, us)
    for (size_t i = 0; i < n; i++) {
        const float u = rt_adam_direction(k, w[i], g[i], &m[i], &v[i]) * (mask ? mask[i] : 1.0f);
        g[i] = u;
        ws += (double)w[i] * w[i];
        us += (double)u * u;
    }
    *w_sq = ws, *u_sq = us;
}

static void cpu_lamb_update(rt_backend *be, const float *w, float *g, float *m, float *v, const float *mask,
                            const rt_chunks *ch, const rt_adam_args *a, const float *gate, double *sq)
{
    (void)be;
    if (gate && gate[1] != 0) return;
    const rt_adam_consts k = adam_consts(a, gate, a->weight_decay);
    for (int c = 0; c < ch->n; c++) {
        const size_t f = ch->first[c];
        double ws, us;
        lamb_slice(&k, w + f, g + f, m + f, v + f, mask ? mask + f : NULL, (size_t)ch->len[c], &ws, &us);
        sq[2 * ch->tensor[c]] += ws, sq[2 * ch->tensor[c] + 1] += us;
    }
}

static void cpu_lamb_apply(rt_backend *be, float *w, const float *u, const rt_chunks *ch, const double *sq,
                           float lr, const float *gate)
{
    if (gate && gate[1] != 0) return;
    for (int c = 0; c < ch->n; c++) {
        const int t = ch->tensor[c];
        cpu_axpy(be, w + ch->first[c], u + ch->first[c], -rt_lamb_rate(sq[2 * t], sq[2 * t + 1], lr),
                 (size_t)ch->len[c]);
    }
}

/* ---- streams and events: every call has finished when it returns, so an event is the wall clock at its
 * record (0 before one) ---- */

typedef struct cpu_event {
    double seconds;
} cpu_event;

static rt_event *cpu_event_create(rt_backend *be)
{
    (void)be;
    return (rt_event *)calloc(1, sizeof(cpu_event));
}

static void cpu_event_destroy(rt_backend *be, rt_event *e)
{
    (void)be;
    free(e);
}

static void cpu_event_record(rt_backend *be, rt_event *e, rt_stream s)
{
    (void)be, (void)s;
    ((cpu_event *)e)->seconds = et_wall_seconds();
}

static void cpu_stream_wait(rt_backend *be, rt_stream s, rt_event *e)
{
    (void)be, (void)s, (void)e;
}

static bool cpu_event_done(rt_backend *be, rt_event *e)
{
    (void)be, (void)e;
    return true;
}

static void cpu_event_sync(rt_backend *be, rt_event *e)
{
    (void)e;
    be->host_waits++;
}

static double cpu_event_seconds(rt_backend *be, rt_event *from, rt_event *to)
{
    (void)be;
    const double a = ((cpu_event *)from)->seconds, b = ((cpu_event *)to)->seconds;
    return a > 0 && b > 0 ? b - a : 0;
}

/* ---- timing ---- */

static int cpu_timers_init(rt_backend *be, int n_ops)
{
    cpu_ctx *c = be->ctx;
    free(c->begin), free(c->elapsed);
    c->n_ops = n_ops > 0 ? n_ops : 1;
    c->begin = calloc((size_t)c->n_ops, sizeof *c->begin);
    c->elapsed = calloc((size_t)c->n_ops, sizeof *c->elapsed);
    return c->begin && c->elapsed ? 0 : -1;
}

static void cpu_timer_begin(rt_backend *be, int op)
{
    ((cpu_ctx *)be->ctx)->begin[op] = et_wall_seconds();
}

static void cpu_timer_end(rt_backend *be, int op)
{
    cpu_ctx *c = be->ctx;
    c->elapsed[op] += et_wall_seconds() - c->begin[op];
}

static void cpu_timers_collect(rt_backend *be, double *op_time, int n_ops)
{
    cpu_ctx *c = be->ctx;
    be->host_waits++;
    for (int i = 0; i < n_ops && i < c->n_ops; i++)
        op_time[i] += c->elapsed[i], c->elapsed[i] = 0;
}

static void cpu_sync(rt_backend *be)
{
    be->host_waits++;
}

static const char *cpu_failure(const rt_backend *be)
{
    (void)be;
    return NULL;
}

static void cpu_destroy(rt_backend *be)
{
    if (!be) return;
    cpu_ctx *c = be->ctx;
    if (c) free(c->begin), free(c->elapsed), free(c->round[0]), free(c->round[1]), free(c->round[2]), free(c);
    free(be);
}

rt_backend *rt_backend_cpu_create(et_error *err)
{
    rt_backend *be = calloc(1, sizeof *be);
    cpu_ctx *c = calloc(1, sizeof *c);
    if (!be || !c) {
        free(c), free(be);
        et_error_set_code(err, ET_ERROR_MEMORY, NULL, 0, 0, NULL, "out of memory creating the CPU backend");
        return NULL;
    }
    *be = (rt_backend){
        .name = "cpu",
        .ctx = c,
        .supports = cpu_supports,
        .set_gemm_math = cpu_set_gemm_math,
        .describe = cpu_describe,
        .alloc = cpu_alloc,
        .free = cpu_free,
        .alloc_host = cpu_alloc_host,
        .free_host = cpu_free,
        .upload = cpu_memcpy,
        .download = cpu_download,
        .fill = cpu_fill,
        .copy = cpu_copy,
        .copy_2d = cpu_copy_2d,
        .add_2d = cpu_add_2d,
        .linear_fwd = cpu_linear_fwd,
        .linear_bwd = cpu_linear_bwd,
        .layernorm_fwd = cpu_layernorm_fwd,
        .add_layernorm_fwd = cpu_add_layernorm_fwd,
        .layernorm_bwd = cpu_layernorm_bwd,
        .gelu_fwd = cpu_gelu_fwd,
        .gelu_bwd = cpu_gelu_bwd,
        .rmsnorm_fwd = cpu_rmsnorm_fwd,
        .rmsnorm_bwd = cpu_rmsnorm_bwd,
        .rope = cpu_rope,
        .swiglu_fwd = cpu_swiglu_fwd,
        .swiglu_bwd = cpu_swiglu_bwd,
        .moe_route_fwd = cpu_moe_route_fwd,
        .moe_group = cpu_moe_group,
        .moe_route_bwd = cpu_moe_route_bwd,
        .moe_combine_fwd = cpu_moe_combine_fwd,
        .moe_combine_bwd = cpu_moe_combine_bwd,
        .attn_scores_fwd = cpu_attn_scores_fwd,
        .attn_softmax_fwd = cpu_attn_softmax_fwd,
        .attn_context_fwd = cpu_attn_context_fwd,
        .attn_context_bwd = cpu_attn_context_bwd,
        .attn_softmax_bwd = cpu_attn_softmax_bwd,
        .attn_scores_bwd = cpu_attn_scores_bwd,
        .round16 = cpu_round16,
        .shadow16 = cpu_shadow16,
        .attn_flash_fwd = cpu_attn_flash_fwd,
        .attn_flash_bwd = cpu_attn_flash_bwd,
        .embedding_fwd = cpu_embedding_fwd,
        .embedding_bwd = cpu_embedding_bwd,
        .cross_entropy = cpu_cross_entropy,
        .add = cpu_add,
        .axpy = cpu_axpy,
        .gather_rows = cpu_gather_rows,
        .scatter_add_rows = cpu_scatter_add_rows,
        .mask_mul = cpu_mask_mul,
        .scale = cpu_scale,
        .sum_sq = cpu_sum_sq,
        .clip_scale = cpu_clip_scale,
        .clip_gate = cpu_clip_gate,
        .add_bias = cpu_add_bias,
        .bias_grad = cpu_bias_grad,
        .tt_fwd = cpu_tt_fwd,
        .tt_bwd = cpu_tt_bwd,
        .adam_update = cpu_adam_update,
        .lamb_update = cpu_lamb_update,
        .lamb_apply = cpu_lamb_apply,
        .event_create = cpu_event_create,
        .event_destroy = cpu_event_destroy,
        .event_record = cpu_event_record,
        .stream_wait = cpu_stream_wait,
        .event_done = cpu_event_done,
        .event_sync = cpu_event_sync,
        .event_seconds = cpu_event_seconds,
        .op_timers_init = cpu_timers_init,
        .op_timer_begin = cpu_timer_begin,
        .op_timer_end = cpu_timer_end,
        .op_timers_collect = cpu_timers_collect,
        .sync = cpu_sync,
        .failure = cpu_failure,
        .destroy = cpu_destroy,
    };
    return be;
}

#ifndef ET_REFERENCE_BLAS
/* OpenBLAS's own queries (cblas.h in 0.3.x) */
const char *rt_blas_core_name(void)
{
    return openblas_get_corename();
}

int rt_blas_thread_count(void)
{
    return openblas_get_num_threads();
}
#endif

const char *rt_cpu_blas_core(void)
{
    return rt_blas_core_name();
}

int rt_cpu_blas_threads(void)
{
    return rt_blas_thread_count();
}

/* The kernels of this CPU's vector units when OpenBLAS chose older ones (and OPENBLAS_CORETYPE is unset),
 * else NULL. */
static const char *better_core(void)
{
    if (getenv("OPENBLAS_CORETYPE")) return NULL;
    const char *better = NULL;
#if defined(__GNUC__) && defined(__x86_64__)
    const char *core = rt_cpu_blas_core();
    static const char *const old[] = {"Prescott", "Core2",      "Penryn",    "Dunnington", "Nehalem", "Atom",
                                      "Katmai",   "Coppermine", "Northwood", "Banias",     NULL};
    int is_old = 0;
    for (int i = 0; old[i]; i++)
        is_old |= core && strcasecmp(core, old[i]) == 0;
    __builtin_cpu_init();
    if (is_old && __builtin_cpu_supports("avx512f"))
        better = "SkylakeX";
    else if (is_old && __builtin_cpu_supports("avx2"))
        better = "Haswell";
#endif
    return better;
}

void rt_cpu_blas_hint(char *hint, size_t size)
{
    hint[0] = 0;
    const char *core = rt_cpu_blas_core(), *better = better_core();
    if (better)
        snprintf(hint, size,
                 "OpenBLAS chose its %s kernels on a CPU with %s (it does not know this CPU model); matrix "
                 "products run several times slower than they can. Set OPENBLAS_CORETYPE=%s to use them.",
                 core, strcmp(better, "SkylakeX") == 0 ? "AVX-512" : "AVX2", better);
}

void rt_cpu_blas_select(char **argv)
{
    const char *better = better_core();
    if (!better || getenv("ET_BLAS_AS_DETECTED") || getenv("ET_BLAS_SELECTED")) return;
    if (setenv("ET_BLAS_SELECTED", rt_cpu_blas_core(), 1) || setenv("OPENBLAS_CORETYPE", better, 1)) return;
    execv("/proc/self/exe", argv);
    unsetenv("OPENBLAS_CORETYPE"); /* the restart failed: this process keeps OpenBLAS's choice, and says so */
    unsetenv("ET_BLAS_SELECTED");
}

const char *rt_cpu_blas_selected_from(void)
{
    return getenv("ET_BLAS_SELECTED");
}
