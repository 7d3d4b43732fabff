/* Attention with its probabilities kept (rt_kernels.h's six kernels): the products of every sequence and head
 * of a micro-batch in one grouped cuBLAS call (cublasGemmGroupedBatchedEx: a group a sequence, a product a
 * head), and the softmax and its backward over every row of the micro-batch in one launch. Sequences have
 * their own lengths, so one launch a sequence, as the first version ran, was launch-bound on an H200: 0.28 ms
 * for a layer's context backward against 0.05 predicted (2026-12-04).
 *
 * Layout (rt_attn.h), per sequence of length l at row o and head h (ld = rt_attn_ld): Q = qkv + o ld + h Dqk,
 * K = qkv + o ld + A Dqk + (h / group) Dqk, V = qkv + o ld + (A + KV) Dqk + (h / group) Dv, each row-major
 * [l, Dqk] or [l, Dv] with leading dimension ld; ctx + o A Dv + h Dv likewise with A Dv; P = probs + A (sum
 * of earlier l^2) + h l l, row-major [l, l]. Each product's head width D (m, n or k) is Dqk for the scores
 * and their gradients, Dv for the context and its. The products' operand pointers are written on the device
 * from the batch's offsets (attn_ptrs_kernel), so nothing waits for the host.
 *
 * Grouped-query attention (group > 1) adds the query heads' gradients into their key/value head, the first
 * writing it; products that run at once would race there, so it takes the per-sequence path of cuBLASLt
 * (cu_lt_gemm), one head at a time, as does any product cuBLAS declines to group (grouped_off, said once on
 * stderr). Arithmetic: fp32 in fp32 mode, tf32 otherwise (a 16-bit cast of these strided operands would cost
 * more than the products).
 *
 * Measured on an H200 (tests/gpu/run.sh, 2026-12-04, BERT-large, 16 sequences of up to 512): the grouped call
 * took 21.5 ms of a 71 ms step for attention, about what one call a sequence took (cuBLAS runs the groups
 * one after another); a WMMA tf32 kernel of 64 x 64 tiles over every sequence and head in one launch took
 * 26.6 ms and was dropped (git history); a fused flash-style kernel is what would remove the probabilities'
 * traffic and the launches. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cuda_attention.h"
#include "cuda_internal.h"

#define ROWS_PER_BLOCK 8

static attn_operand rows(const float *base, int ld, int head_stride, int head_div)
{
    attn_operand o = {base, 0, ld, head_stride, head_div};
    return o;
}

static attn_operand probs_of(const float *base)
{
    attn_operand o = {base, 1, 0, 0, 1};
    return o;
}

/* out[s A + h], out[B A + ...], out[2 B A + ...]: the three operands of sequence s, head h */
__global__ void attn_ptrs_kernel(const int *offsets, int B, int A, attn_operand a, attn_operand b,
                                 attn_operand c, const void **out)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= B * A) return;
    const int s = i / A, h = i % A, o = offsets[s], l = offsets[s + 1] - o;
    long long p0 = 0;
    for (int q = 0; q < s; q++) {
        const long long lq = offsets[q + 1] - offsets[q];
        p0 += (long long)A * lq * lq;
    }
    out[i] = operand_at(&a, o, l, p0, h);
    out[B * A + i] = operand_at(&b, o, l, p0, h);
    out[2 * B * A + i] = operand_at(&c, o, l, p0, h);
}

/* every sequence and head in one grouped call; false when cuBLAS declines (nothing ran) */
static bool run_grouped(cu_ctx *c, const attn_product *p, const rt_dev_batch *b, int A, int D,
                        cublasComputeType_t compute)
{
    const int B = b->B;
    const size_t need = (size_t)3 * B * A;
    if (c->ptrs_cap < need) {
        CU_CHECK(c, cudaFree((void *)c->ptrs), "freeing the grouped products' pointers");
        c->ptrs = NULL, c->ptrs_cap = 0;
        CU_CHECK(c, cudaMalloc((void **)&c->ptrs, need * 2 * sizeof(void *)),
                 "the grouped products' pointers");
        if (c->failure[0]) return true;
        c->ptrs_cap = need * 2;
    }
    attn_ptrs_kernel<<<(unsigned)((B * A + 127) / 128), 128, 0, c->compute>>>(b->offsets, B, A, p->a, p->b,
                                                                              p->c, c->ptrs);
    CU_CHECK_LAUNCH(c, "attn_ptrs_kernel");
    /* per group (sequence) on the host: sizes, leading dimensions, scalars */
    int *ints = (int *)malloc((size_t)B * 7 * sizeof(int));
    float *scal = (float *)malloc((size_t)B * 2 * sizeof(float));
    cublasOperation_t *ops = (cublasOperation_t *)malloc((size_t)B * 2 * sizeof(cublasOperation_t));
    if (!ints || !scal || !ops) {
        free(ints), free(scal), free(ops);
        cu_fail(c, __FILE__, __LINE__, "malloc", "out of host memory", "a grouped product's sizes");
        return true;
    }
    int *m = ints, *n = ints + B, *k = ints + 2 * B, *lda = ints + 3 * B, *ldb = ints + 4 * B,
        *ldc = ints + 5 * B;
    int *size = ints + 6 * B;
    for (int s = 0; s < B; s++) {
        const int l = b->offsets_host[s + 1] - b->offsets_host[s];
        m[s] = p->m_l ? l : D, n[s] = p->n_l ? l : D, k[s] = p->k_l ? l : D;
        lda[s] = ld_of(&p->a, l), ldb[s] = ld_of(&p->b, l), ldc[s] = ld_of(&p->c, l);
        size[s] = A, scal[s] = p->alpha, scal[B + s] = p->beta;
        ops[s] = p->ta ? CUBLAS_OP_T : CUBLAS_OP_N, ops[B + s] = p->tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    }
    const void *const *dev = c->ptrs;
    const cublasStatus_t st = cublasGemmGroupedBatchedEx(
        c->blas, ops, ops + B, m, n, k, scal, dev, CUDA_R_32F, lda, dev + (size_t)B * A, CUDA_R_32F, ldb,
        scal + B, (void *const *)(dev + (size_t)2 * B * A), CUDA_R_32F, ldc, B, size, compute);
    free(ints), free(scal), free(ops);
    if (st == CUBLAS_STATUS_NOT_SUPPORTED || st == CUBLAS_STATUS_INVALID_VALUE) {
        fprintf(stderr,
                "etrun: cuBLAS declines grouped attention products (%s): one call a sequence from now on\n",
                cu_lt_status_name(st));
        c->grouped_off = 1;
        return false;
    }
    LT_CHECK(c, st, "attention's grouped products");
    return true;
}

/* the per-sequence path: heads batched by stride (group 1) or one at a time */
static void run_per_sequence(cu_ctx *c, const attn_product *p, const rt_dev_batch *b, int A, int D, int group,
                             cublasComputeType_t compute)
{
    long long p0 = 0;
    for (int s = 0; s < b->B && !c->failure[0]; s++) {
        const int o = b->offsets_host[s], l = b->offsets_host[s + 1] - o;
        const int m = p->m_l ? l : D, n = p->n_l ? l : D, k = p->k_l ? l : D, nh = group == 1 ? A : 1;
        for (int h = 0; h < A; h += nh) {
            const attn_operand *x[3] = {&p->a, &p->b, &p->c};
            const float *ptr[3];
            long long stride[3];
            for (int j = 0; j < 3; j++) {
                ptr[j] = x[j]->probs ? x[j]->base + p0 + (long long)h * l * l
                                     : x[j]->base + (long long)o * x[j]->ld +
                                           (long long)(h / x[j]->head_div) * x[j]->head_stride;
                stride[j] = x[j]->probs ? (long long)l * l : x[j]->head_stride;
            }
            const float beta = p->accumulate_group && group > 1 ? (h % group ? 1.0f : 0.0f) : p->beta;
            cu_lt_gemm(c, compute, CUDA_R_32F, p->ta, p->tb, m, n, k, p->alpha, ptr[0], ld_of(&p->a, l),
                       stride[0], ptr[1], ld_of(&p->b, l), stride[1], beta, (float *)ptr[2], ld_of(&p->c, l),
                       stride[2], nh, NULL);
        }
        p0 += (long long)A * l * l;
    }
}

static void run_product(cu_ctx *c, const attn_product *p, const rt_dev_batch *b, const rt_attn_shape *sh,
                        int D)
{
    if (c->failure[0] || b->B <= 0) return;
    const int A = sh->A, group = sh->A / sh->KV;
    const cublasComputeType_t compute =
        c->math == RT_GEMM_FP32 ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_32F_FAST_TF32;
    if (group == 1 && !c->grouped_off && run_grouped(c, p, b, A, D, compute)) return;
    run_per_sequence(c, p, b, A, D, group, compute);
}

/* ---- the four products (column-major views of rt_kernels_impl.h's row-major ones) ---- */

/* which of m, n, k are the sequence's length (the others the head width D) */
typedef enum { SIZES_L_L_D, SIZES_D_L_L } attn_sizes;

/* a product C = alpha op(A) op(B); `accumulate`: grouped-query heads add into their shared key/value head */
static attn_product product(bool ta, bool tb, attn_sizes sizes, float alpha, bool accumulate, attn_operand a,
                            attn_operand b, attn_operand c)
{
    attn_product p;
    p.ta = ta, p.tb = tb, p.alpha = alpha, p.beta = 0.0f, p.accumulate_group = accumulate;
    p.m_l = sizes == SIZES_L_L_D, p.n_l = true, p.k_l = sizes == SIZES_D_L_L;
    p.a = a, p.b = b, p.c = c;
    return p;
}

static void cu_attn_scores_fwd(rt_backend *be, const float *qkv, float *probs, const rt_dev_batch *b,
                               const rt_attn_shape *sh)
{
    const int D = sh->Dqk, ld = rt_attn_ld(sh), ko = rt_attn_k_offset(sh);
    /* S^T = K Q^T: S[i][j] = Q_i . K_j / sqrt(Dqk) */
    const attn_product p =
        product(true, false, SIZES_L_L_D, 1.0f / sqrtf((float)D), false,
                rows(qkv + ko, ld, D, sh->A / sh->KV), rows(qkv, ld, D, 1), probs_of(probs));
    run_product(cu_of(be), &p, b, sh, D);
}

static void cu_attn_context_fwd(rt_backend *be, const float *qkv, const float *probs, float *ctx,
                                const rt_dev_batch *b, const rt_attn_shape *sh)
{
    const int Dv = sh->Dv, ld = rt_attn_ld(sh), vo = rt_attn_v_offset(sh), lc = rt_attn_ctx_width(sh);
    /* ctx = P V: ctx^T = V^T P^T */
    const attn_product p =
        product(false, false, SIZES_D_L_L, 1.0f, false, rows(qkv + vo, ld, Dv, sh->A / sh->KV),
                probs_of(probs), rows(ctx, lc, Dv, 1));
    run_product(cu_of(be), &p, b, sh, Dv);
}

static void cu_attn_context_bwd(rt_backend *be, const float *qkv, const float *probs, const float *dctx,
                                float *dqkv, float *dprobs, const rt_dev_batch *b, const rt_attn_shape *sh)
{
    const int Dv = sh->Dv, ld = rt_attn_ld(sh), vo = rt_attn_v_offset(sh), lc = rt_attn_ctx_width(sh);
    const attn_operand V = rows(qkv + vo, ld, Dv, sh->A / sh->KV), dC = rows(dctx, lc, Dv, 1);
    /* dV = P^T dC: dV^T = dC^T P; dP = dC V^T: dP^T = V dC^T */
    const attn_product dv = product(false, true, SIZES_D_L_L, 1.0f, true, dC, probs_of(probs),
                                    rows(dqkv + vo, ld, Dv, sh->A / sh->KV));
    const attn_product dp = product(true, false, SIZES_L_L_D, 1.0f, false, V, dC, probs_of(dprobs));
    run_product(cu_of(be), &dv, b, sh, Dv);
    run_product(cu_of(be), &dp, b, sh, Dv);
}

static void cu_attn_scores_bwd(rt_backend *be, const float *qkv, const float *dscores, float *dqkv,
                               const rt_dev_batch *b, const rt_attn_shape *sh)
{
    const int D = sh->Dqk, ld = rt_attn_ld(sh), ko = rt_attn_k_offset(sh);
    /* dQ = dS K: dQ^T = K^T dS^T; dK = dS^T Q: dK^T = Q^T dS */
    const attn_product dq =
        product(false, false, SIZES_D_L_L, 1.0f, false, rows(qkv + ko, ld, D, sh->A / sh->KV),
                probs_of(dscores), rows(dqkv, ld, D, 1));
    const attn_product dk = product(false, true, SIZES_D_L_L, 1.0f, true, rows(qkv, ld, D, 1),
                                    probs_of(dscores), rows(dqkv + ko, ld, D, sh->A / sh->KV));
    run_product(cu_of(be), &dq, b, sh, D);
    run_product(cu_of(be), &dk, b, sh, D);
}

/* ---- softmax over every row of the micro-batch: a warp a row ---- */

/* row r of the A T rows (sequence by sequence, head by head): its sequence's length l, its head h, its index
 * i within its head, and where it starts in probs */
__device__ void locate_row(const int *offsets, int B, int A, int r, int *l, int *h, int *i, long long *start)
{
    int s = 0;
    long long p0 = 0;
    while (s + 1 < B && (long long)A * offsets[s + 1] <= r) {
        const long long ls = offsets[s + 1] - offsets[s];
        p0 += (long long)A * ls * ls, s++;
    }
    *l = offsets[s + 1] - offsets[s];
    const int local = r - A * offsets[s];
    *h = local / *l, *i = local % *l;
    *start = p0 + (long long)local * *l; /* (h l + i) l */
}

/* live values [lo, n) of each row (a causal mask, a sliding window); sinks[A]: a logit per head in the
 * denominator (NULL: none) */
__global__ void attn_softmax_fwd_kernel(float *probs, const float *sinks, const int *offsets, int B,
                                        rt_attn_shape sh, int rows, int causal)
{
    const int r = blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (r >= rows) return;
    int l, h, i;
    long long start;
    locate_row(offsets, B, sh.A, r, &l, &h, &i, &start);
    float *p = probs + start;
    const int n = causal ? i + 1 : l, lo = causal ? rt_attn_first(&sh, i) : 0;
    float mx = sinks ? sinks[h] : -INFINITY;
    for (int j = lo + lane; j < n; j += 32)
        mx = fmaxf(mx, p[j]);
    mx = warp_max(mx);
    float s = 0;
    for (int j = lo + lane; j < n; j += 32) {
        const float e = expf(p[j] - mx);
        p[j] = e;
        s += e;
    }
    s = warp_sum(s);
    if (sinks) s += expf(sinks[h] - mx);
    const float inv = 1.0f / s;
    for (int j = lane; j < l; j += 32)
        p[j] = j >= lo && j < n ? p[j] * inv : 0.0f;
}

/* dprobs = probs (dprobs - probs . dprobs) / sqrt(Dqk), in place; a row's sink holds 1 - sum(probs) and adds
 * -(1 - sum probs) (probs . dprobs) to its head's dsinks (NULL: none) */
__global__ void attn_softmax_bwd_kernel(const float *probs, float *dprobs, float *dsinks, const int *offsets,
                                        int B, int A, int rows, float scale)
{
    const int r = blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (r >= rows) return;
    int l, h, i;
    long long start;
    locate_row(offsets, B, A, r, &l, &h, &i, &start);
    const float *p = probs + start;
    float *d = dprobs + start;
    float dot = 0, mass = 0;
    for (int j = lane; j < l; j += 32)
        dot += d[j] * p[j], mass += p[j];
    dot = warp_sum(dot);
    mass = warp_sum(mass);
    if (dsinks && lane == 0) atomicAdd(dsinks + h, -(1.0f - mass) * dot);
    for (int j = lane; j < l; j += 32)
        d[j] = p[j] * (d[j] - dot) * scale;
}

static void cu_attn_softmax_fwd(rt_backend *be, float *probs, const float *sinks, const rt_dev_batch *b,
                                const rt_attn_shape *sh, bool causal)
{
    cu_ctx *c = cu_of(be);
    const int rows = sh->A * b->offsets_host[b->B];
    if (c->failure[0] || rows <= 0) return;
    attn_softmax_fwd_kernel<<<(unsigned)((rows + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK), 32 * ROWS_PER_BLOCK,
                              0, c->compute>>>(probs, sinks, b->offsets, b->B, *sh, rows, causal);
    CU_CHECK_LAUNCH(c, "attn_softmax_fwd_kernel");
}

static void cu_attn_softmax_bwd(rt_backend *be, const float *probs, float *dprobs, float *dsinks,
                                const rt_dev_batch *b, const rt_attn_shape *sh)
{
    cu_ctx *c = cu_of(be);
    const int rows = sh->A * b->offsets_host[b->B];
    if (c->failure[0] || rows <= 0) return;
    attn_softmax_bwd_kernel<<<(unsigned)((rows + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK), 32 * ROWS_PER_BLOCK,
                              0, c->compute>>>(probs, dprobs, dsinks, b->offsets, b->B, sh->A, rows,
                                               1.0f / sqrtf((float)sh->Dqk));
    CU_CHECK_LAUNCH(c, "attn_softmax_bwd_kernel");
}

void cu_table_attention(rt_backend *be)
{
    be->attn_scores_fwd = cu_attn_scores_fwd;
    be->attn_context_fwd = cu_attn_context_fwd;
    be->attn_context_bwd = cu_attn_context_bwd;
    be->attn_scores_bwd = cu_attn_scores_bwd;
    be->attn_softmax_fwd = cu_attn_softmax_fwd;
    be->attn_softmax_bwd = cu_attn_softmax_bwd;
}
