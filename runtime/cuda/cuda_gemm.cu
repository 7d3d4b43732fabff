/* The products through cuBLASLt: linear layers (bias epilogue forward; data and weight gradients
 * accumulated, as rt_kernels.h's contract says, with beta = 1) and attention's per-sequence products
 * (strided batches over heads). Row-major operands are handed to cuBLASLt's column-major view as their
 * transposes: row-major C[M, N] = op(A) op(B) is column-major C^T = op(B)^T op(A)^T.
 *
 * Arithmetic (rt_gemm_math): fp32 computes in CUBLAS_COMPUTE_32F; tf32 in CUBLAS_COMPUTE_32F_FAST_TF32; bf16
 * and fp16 round a linear layer's two inputs into 16-bit scratch copies (cast kernels, as PyTorch's autocast
 * does) and multiply them on the tensor cores with fp32 accumulation and fp32 outputs; attention's small
 * per-sequence products run tf32 in those modes (a cast of their strided operands would cost more than the
 * products). The bias gradient is a column sum of its own (cu_colsum_acc): cuBLASLt's BGRADB epilogue
 * overwrites where the contract accumulates.
 *
 * Each distinct shape's descriptors and heuristic's algorithm are made once and kept (cu_gemm_plan); the
 * pointers' alignments are part of the shape, since cuBLASLt's heuristic assumes 256-byte alignment unless
 * told. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.h"

typedef struct cu_gemm_key {
    int ta, tb, m, n, k, lda, ldb, ldc, batch, bias, ab_type, compute;
    long long sa, sb, sc;
    int align_a, align_b, align_c;
} cu_gemm_key;

struct cu_gemm_plan {
    cu_gemm_key key;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a, b, c;
    cublasLtMatmulAlgo_t algo;
};

static int alignment_of(const void *p)
{
    const uintptr_t u = (uintptr_t)p;
    int a = 256;
    while (a > 4 && u % (uintptr_t)a)
        a /= 2;
    return a;
}

void cu_gemm_free_plans(cu_ctx *c)
{
    for (int i = 0; i < c->n_plans; i++) {
        cu_gemm_plan *p = &c->plans[i];
        cublasLtMatrixLayoutDestroy(p->a), cublasLtMatrixLayoutDestroy(p->b),
            cublasLtMatrixLayoutDestroy(p->c);
        cublasLtMatmulDescDestroy(p->desc);
    }
    free(c->plans);
    c->plans = NULL, c->n_plans = c->cap_plans = 0;
}

static cublasLtMatrixLayout_t make_layout(cu_ctx *c, cudaDataType_t type, int rows, int cols, int ld,
                                          int batch, long long stride)
{
    cublasLtMatrixLayout_t l = NULL;
    LT_CHECK(c, cublasLtMatrixLayoutCreate(&l, type, (uint64_t)rows, (uint64_t)cols, (int64_t)ld),
             "describing a product's operand");
    if (batch > 1 && l) {
        int32_t b = batch;
        int64_t s = stride;
        LT_CHECK(c, cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &b, sizeof b),
                 "setting a batch count");
        LT_CHECK(
            c, cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &s, sizeof s),
            "setting a batch stride");
    }
    return l;
}

/* the plan of this shape, made (descriptors, heuristic) on first use; NULL after a failure */
static cu_gemm_plan *plan_of(cu_ctx *c, const cu_gemm_key *key)
{
    for (int i = 0; i < c->n_plans; i++)
        if (memcmp(&c->plans[i].key, key, sizeof *key) == 0) return &c->plans[i];
    if (c->n_plans == c->cap_plans) {
        const int cap = c->cap_plans ? 2 * c->cap_plans : 64;
        cu_gemm_plan *p = (cu_gemm_plan *)realloc(c->plans, (size_t)cap * sizeof *p);
        if (!p) {
            cu_fail(c, __FILE__, __LINE__, "realloc", "out of host memory", "keeping a product's plan");
            return NULL;
        }
        c->plans = p, c->cap_plans = cap;
    }
    cu_gemm_plan *p = &c->plans[c->n_plans];
    memset(p, 0, sizeof *p);
    p->key = *key;
    const cudaDataType_t ab = (cudaDataType_t)key->ab_type;
    LT_CHECK(c, cublasLtMatmulDescCreate(&p->desc, (cublasComputeType_t)key->compute, CUDA_R_32F),
             "creating a product's descriptor");
    const cublasOperation_t ta = key->ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                            tb = key->tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    LT_CHECK(c, cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta),
             "setting op(A)");
    LT_CHECK(c, cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb),
             "setting op(B)");
    if (key->bias) {
        const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
        LT_CHECK(c, cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi),
                 "setting the bias epilogue");
    }
    p->a = make_layout(c, ab, key->ta ? key->k : key->m, key->ta ? key->m : key->k, key->lda, key->batch,
                       key->sa);
    p->b = make_layout(c, ab, key->tb ? key->n : key->k, key->tb ? key->k : key->n, key->ldb, key->batch,
                       key->sb);
    p->c = make_layout(c, CUDA_R_32F, key->m, key->n, key->ldc, key->batch, key->sc);
    cublasLtMatmulPreference_t pref = NULL;
    LT_CHECK(c, cublasLtMatmulPreferenceCreate(&pref), "creating a heuristic preference");
    if (pref) {
        const uint64_t ws = c->workspace_bytes;
        const uint32_t aa = (uint32_t)key->align_a, ab_ = (uint32_t)key->align_b, ac = (uint32_t)key->align_c;
        LT_CHECK(c,
                 cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                                      sizeof ws),
                 "setting the workspace");
        LT_CHECK(c,
                 cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &aa,
                                                      sizeof aa),
                 "setting A's alignment");
        LT_CHECK(c,
                 cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &ab_,
                                                      sizeof ab_),
                 "setting B's alignment");
        LT_CHECK(c,
                 cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &ac,
                                                      sizeof ac),
                 "setting C's alignment");
        LT_CHECK(c,
                 cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &ac,
                                                      sizeof ac),
                 "setting D's alignment");
    }
    cublasLtMatmulHeuristicResult_t result;
    int found = 0;
    memset(&result, 0, sizeof result);
    LT_CHECK(c,
             cublasLtMatmulAlgoGetHeuristic(c->lt, p->desc, p->a, p->b, p->c, p->c, pref, 1, &result, &found),
             "asking cuBLASLt's heuristic for an algorithm");
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (!c->failure[0] && found == 0) {
        char what[200];
        snprintf(what, sizeof what, "no algorithm for m %d n %d k %d (lda %d ldb %d ldc %d, batch %d)",
                 key->m, key->n, key->k, key->lda, key->ldb, key->ldc, key->batch);
        cu_fail(c, __FILE__, __LINE__, "cublasLtMatmulAlgoGetHeuristic", what, "a shape cuBLASLt cannot run");
    }
    if (c->failure[0]) {
        cublasLtMatrixLayoutDestroy(p->a), cublasLtMatrixLayoutDestroy(p->b),
            cublasLtMatrixLayoutDestroy(p->c);
        cublasLtMatmulDescDestroy(p->desc);
        return NULL;
    }
    p->algo = result.algo;
    c->n_plans++;
    return p;
}

/* Column-major C[m, n] = alpha op(A) op(B) + beta C (+ bias[m] per column), `batch` strided products. */
static void lt_gemm(cu_ctx *c, cublasComputeType_t compute, cudaDataType_t ab_type, bool ta, bool tb, int m,
                    int n, int k, float alpha, const void *A, int lda, long long sa, const void *B, int ldb,
                    long long sb, float beta, float *C, int ldc, long long sc, int batch, const float *bias)
{
    if (c->failure[0] || m <= 0 || n <= 0 || batch <= 0) return;
    if (k <= 0) { /* an empty sum: accumulating nothing is nothing to do; anything else is not expected */
        if (beta != 1.0f || bias)
            cu_fail(c, __FILE__, __LINE__, "lt_gemm", "a product with no inner dimension", "an empty batch");
        return;
    }
    cu_gemm_key key;
    memset(&key, 0, sizeof key); /* padding too: keys are compared as bytes */
    key.ta = ta, key.tb = tb, key.m = m, key.n = n, key.k = k, key.lda = lda, key.ldb = ldb, key.ldc = ldc;
    key.batch = batch, key.bias = bias != NULL, key.ab_type = (int)ab_type, key.compute = (int)compute;
    key.sa = batch > 1 ? sa : 0, key.sb = batch > 1 ? sb : 0, key.sc = batch > 1 ? sc : 0;
    key.align_a = alignment_of(A), key.align_b = alignment_of(B), key.align_c = alignment_of(C);
    cu_gemm_plan *p = plan_of(c, &key);
    if (!p) return;
    if (bias)
        LT_CHECK(
            c, cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias),
            "setting the bias");
    LT_CHECK(c,
             cublasLtMatmul(c->lt, p->desc, &alpha, A, p->a, B, p->b, &beta, C, p->c, C, p->c, &p->algo,
                            c->workspace, c->workspace_bytes, c->compute),
             "a matrix product");
}

/* ---- bf16 and fp16 inputs: fp32 values rounded into scratch ---- */

__global__ void cast_bf16_kernel(__nv_bfloat16 *dst, const float *src, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = __float2bfloat16_rn(src[i]);
}

__global__ void cast_fp16_kernel(__half *dst, const float *src, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = __float2half_rn(src[i]);
}

/* src[n] rounded into scratch slot `slot` (grown as needed); NULL after a failure */
static const void *cast16(cu_ctx *c, int slot, const float *src, size_t n)
{
    if (c->failure[0]) return NULL;
    const size_t bytes = n * 2;
    if (c->cast_bytes[slot] < bytes) {
        CU_CHECK(c, cudaFree(c->cast[slot]), "freeing a product's scratch");
        c->cast[slot] = NULL, c->cast_bytes[slot] = 0;
        CU_CHECK(c, cudaMalloc(&c->cast[slot], bytes), "allocating a product's 16-bit scratch");
        if (c->failure[0]) return NULL;
        c->cast_bytes[slot] = bytes;
    }
    if (c->math == RT_GEMM_BF16)
        cast_bf16_kernel<<<cu_blocks(n, 256), 256, 0, c->compute>>>((__nv_bfloat16 *)c->cast[slot], src, n);
    else
        cast_fp16_kernel<<<cu_blocks(n, 256), 256, 0, c->compute>>>((__half *)c->cast[slot], src, n);
    CU_CHECK_LAUNCH(c, "cast16 kernel");
    return c->cast[slot];
}

/* A linear layer's product on contiguous operands (a_count, b_count values), in the backend's arithmetic. */
static void linear_gemm(cu_ctx *c, bool ta, bool tb, int m, int n, int k, const float *A, int lda,
                        size_t a_count, const float *B, int ldb, size_t b_count, float beta, float *C,
                        int ldc, const float *bias)
{
    if (c->math == RT_GEMM_BF16 || c->math == RT_GEMM_FP16) {
        const void *a16 = cast16(c, 0, A, a_count), *b16 = cast16(c, 1, B, b_count);
        if (!a16 || !b16) return;
        lt_gemm(c, CUBLAS_COMPUTE_32F, c->math == RT_GEMM_BF16 ? CUDA_R_16BF : CUDA_R_16F, ta, tb, m, n, k,
                1.0f, a16, lda, 0, b16, ldb, 0, beta, C, ldc, 0, 1, bias);
        return;
    }
    const cublasComputeType_t compute =
        c->math == RT_GEMM_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    lt_gemm(c, compute, CUDA_R_32F, ta, tb, m, n, k, 1.0f, A, lda, 0, B, ldb, 0, beta, C, ldc, 0, 1, bias);
}

/* attention's products: fp32 in fp32 mode, tf32 otherwise */
static void attn_gemm(cu_ctx *c, bool ta, bool tb, int m, int n, int k, float alpha, const float *A, int lda,
                      long long sa, const float *B, int ldb, long long sb, float beta, float *C, int ldc,
                      long long sc, int batch)
{
    const cublasComputeType_t compute =
        c->math == RT_GEMM_FP32 ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_32F_FAST_TF32;
    lt_gemm(c, compute, CUDA_R_32F, ta, tb, m, n, k, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc, sc, batch,
            NULL);
}

/* ---- linear layers: W[n_out, n_in], x[T, n_in], y[T, n_out] row-major ---- */

static void cu_linear_fwd(rt_backend *be, const float *x, const float *W, const float *b, float *y, int T,
                          int n_in, int n_out)
{
    /* y^T[n_out, T] = W (column-major W^T[n_in, n_out] transposed) x^T[n_in, T] (+ b per column) */
    linear_gemm(cu_of(be), true, false, n_out, T, n_in, W, n_in, (size_t)n_out * n_in, x, n_in,
                (size_t)T * n_in, 0.0f, y, n_out, b);
}

static void cu_linear_bwd(rt_backend *be, const float *x, const float *W, const float *dy, float *dx,
                          float *dW, float *db, int T, int n_in, int n_out)
{
    cu_ctx *c = cu_of(be);
    /* dx^T[n_in, T] += W^T[n_in, n_out] dy^T[n_out, T] */
    if (dx)
        linear_gemm(c, false, false, n_in, T, n_out, W, n_in, (size_t)n_out * n_in, dy, n_out,
                    (size_t)T * n_out, 1.0f, dx, n_in, NULL);
    /* dW^T[n_in, n_out] += x^T[n_in, T] (dy^T[n_out, T])^T */
    if (dW)
        linear_gemm(c, false, true, n_in, n_out, T, x, n_in, (size_t)T * n_in, dy, n_out, (size_t)T * n_out,
                    1.0f, dW, n_in, NULL);
    if (db) cu_colsum_acc(c, db, dy, n_out, T, n_out);
}

static void cu_bias_grad(rt_backend *be, float *db, const float *dy, int ld, int rows, int cols)
{
    cu_colsum_acc(cu_of(be), db, dy, ld, rows, cols);
}

/* ---- attention's products, sequence by sequence (probs: rt_kernels.h's layout) ----
 * Per sequence of length l at row o, head h: Q = qkv + o ld + h D, K = qkv + o ld + H + (h / group) D,
 * V = qkv + o ld + H + (KV + h / group) D, each row-major [l, D] with leading dimension ld = H + 2 KV D;
 * P = probs + p0 + h l l, row-major [l, l]. Multi-head attention (group 1) batches the A heads with
 * strides D (operands) and l l (probabilities); grouped-query attention runs each head alone. */

typedef struct attn_geom {
    int D, ld, group, A, H, KV;
} attn_geom;

static attn_geom geom(int H, int A, int KV)
{
    attn_geom g;
    g.D = H / A, g.ld = H + 2 * KV * (H / A), g.group = A / KV, g.A = A, g.H = H, g.KV = KV;
    return g;
}

/* heads [h0, h0 + nh) of one sequence; batched when group == 1 */
#define FOR_HEAD_RUNS(g, h0, nh) for (int h0 = 0, nh = (g).group == 1 ? (g).A : 1; h0 < (g).A; h0 += nh)

static void cu_attn_scores_fwd(rt_backend *be, const float *qkv, float *probs, const rt_dev_batch *b, int H,
                               int A, int KV)
{
    cu_ctx *c = cu_of(be);
    const attn_geom g = geom(H, A, KV);
    const float scale = 1.0f / sqrtf((float)g.D);
    size_t p0 = 0;
    for (int s = 0; s < b->B; s++) {
        const int o = b->offsets_host[s], l = b->offsets_host[s + 1] - o;
        FOR_HEAD_RUNS(g, h0, nh)
        {
            const float *Q = qkv + (size_t)o * g.ld + h0 * g.D,
                        *K = qkv + (size_t)o * g.ld + H + (h0 / g.group) * g.D;
            /* S^T (column-major [l, l]) = K Q^T: S[i][j] = Q_i . K_j */
            attn_gemm(c, true, false, l, l, g.D, scale, K, g.ld, g.D, Q, g.ld, g.D, 0.0f,
                      probs + p0 + (size_t)h0 * l * l, l, (long long)l * l, nh);
        }
        p0 += (size_t)A * l * l;
    }
}

static void cu_attn_context_fwd(rt_backend *be, const float *qkv, const float *probs, float *ctx,
                                const rt_dev_batch *b, int H, int A, int KV)
{
    cu_ctx *c = cu_of(be);
    const attn_geom g = geom(H, A, KV);
    size_t p0 = 0;
    for (int s = 0; s < b->B; s++) {
        const int o = b->offsets_host[s], l = b->offsets_host[s + 1] - o;
        FOR_HEAD_RUNS(g, h0, nh)
        {
            const float *V = qkv + (size_t)o * g.ld + H + (KV + h0 / g.group) * g.D;
            /* ctx[l, D] (ld H) = P[l, l] V[l, D]: column-major ctx^T = V^T P^T */
            attn_gemm(c, false, false, g.D, l, l, 1.0f, V, g.ld, g.D, probs + p0 + (size_t)h0 * l * l, l,
                      (long long)l * l, 0.0f, ctx + (size_t)o * H + h0 * g.D, H, g.D, nh);
        }
        p0 += (size_t)A * l * l;
    }
}

static void cu_attn_context_bwd(rt_backend *be, const float *qkv, const float *probs, const float *dctx,
                                float *dqkv, float *dprobs, const rt_dev_batch *b, int H, int A, int KV)
{
    cu_ctx *c = cu_of(be);
    const attn_geom g = geom(H, A, KV);
    size_t p0 = 0;
    for (int s = 0; s < b->B; s++) {
        const int o = b->offsets_host[s], l = b->offsets_host[s + 1] - o;
        FOR_HEAD_RUNS(g, h0, nh)
        {
            const size_t v = (size_t)o * g.ld + H + (KV + h0 / g.group) * g.D;
            const float *P = probs + p0 + (size_t)h0 * l * l, *dC = dctx + (size_t)o * H + h0 * g.D;
            /* the query heads of a group add into its dV, the first writing it */
            const float beta_v = g.group > 1 && h0 % g.group ? 1.0f : 0.0f;
            /* dV[l, D] = P^T dC: column-major dV^T = dC^T P */
            attn_gemm(c, false, true, g.D, l, l, 1.0f, dC, H, g.D, P, l, (long long)l * l, beta_v, dqkv + v,
                      g.ld, g.D, nh);
            /* dP[l, l] = dC V^T: column-major dP^T = V dC^T */
            attn_gemm(c, true, false, l, l, g.D, 1.0f, qkv + v, g.ld, g.D, dC, H, g.D, 0.0f,
                      dprobs + p0 + (size_t)h0 * l * l, l, (long long)l * l, nh);
        }
        p0 += (size_t)A * l * l;
    }
}

static void cu_attn_scores_bwd(rt_backend *be, const float *qkv, const float *dscores, float *dqkv,
                               const rt_dev_batch *b, int H, int A, int KV)
{
    cu_ctx *c = cu_of(be);
    const attn_geom g = geom(H, A, KV);
    size_t p0 = 0;
    for (int s = 0; s < b->B; s++) {
        const int o = b->offsets_host[s], l = b->offsets_host[s + 1] - o;
        FOR_HEAD_RUNS(g, h0, nh)
        {
            const size_t k = (size_t)o * g.ld + H + (h0 / g.group) * g.D, q = (size_t)o * g.ld + h0 * g.D;
            const float *dS = dscores + p0 + (size_t)h0 * l * l;
            const float beta_k = g.group > 1 && h0 % g.group ? 1.0f : 0.0f;
            /* dQ[l, D] = dS K: column-major dQ^T = K^T dS^T */
            attn_gemm(c, false, false, g.D, l, l, 1.0f, qkv + k, g.ld, g.D, dS, l, (long long)l * l, 0.0f,
                      dqkv + q, g.ld, g.D, nh);
            /* dK[l, D] = dS^T Q: column-major dK^T = Q^T dS */
            attn_gemm(c, false, true, g.D, l, l, 1.0f, qkv + q, g.ld, g.D, dS, l, (long long)l * l, beta_k,
                      dqkv + k, g.ld, g.D, nh);
        }
        p0 += (size_t)A * l * l;
    }
}

void cu_table_gemm(rt_backend *be)
{
    be->linear_fwd = cu_linear_fwd;
    be->linear_bwd = cu_linear_bwd;
    be->bias_grad = cu_bias_grad;
    be->attn_scores_fwd = cu_attn_scores_fwd;
    be->attn_context_fwd = cu_attn_context_fwd;
    be->attn_context_bwd = cu_attn_context_bwd;
    be->attn_scores_bwd = cu_attn_scores_bwd;
}
