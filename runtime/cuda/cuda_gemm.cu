/* Linear layers through cuBLASLt (cu_lt_gemm, cuda_lt.cu): bias epilogue forward; data and weight
 * gradients accumulated, as rt_kernels.h's contract says, with beta = 1. Row-major operands are handed to
 * cuBLASLt's column-major view as their transposes: row-major C[M, N] = op(A) op(B) is column-major
 * C^T = op(B)^T op(A)^T.
 *
 * Arithmetic (rt_gemm_math): fp32 computes in CUBLAS_COMPUTE_32F; tf32 in CUBLAS_COMPUTE_32F_FAST_TF32; bf16
 * and fp16 round a layer's two inputs into 16-bit scratch copies (as PyTorch's autocast does; a weight of the
 * parameters' 16-bit shadow is read from it instead) and multiply them on the tensor cores with fp32
 * accumulation and fp32 outputs; the backward rounds dy once for both of its products. The bias gradient is a
 * column sum of its own (cu_colsum_acc): cuBLASLt's BGRADB epilogue overwrites where the contract
 * accumulates. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.h"
#include "rt_elementwise.h"

/* ---- bf16 and fp16 inputs: fp32 values rounded into scratch, or read from the parameters' 16-bit shadow;
 * one rounding for both, rt_elementwise.h's storage (the CPU tests check it bit for bit) ---- */

__global__ void round16_kernel(unsigned short *dst, const float *src, size_t n, int fp16)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = fp16 ? rt_fp16_bits(src[i]) : rt_bf16_bits(src[i]);
}

static void round16(cu_ctx *c, void *dst, const float *src, size_t n)
{
    if (c->failure[0] || !n) return;
    round16_kernel<<<cu_blocks(n, 256), 256, 0, c->compute>>>((unsigned short *)dst, src, n,
                                                              c->math == RT_GEMM_FP16);
    CU_CHECK_LAUNCH(c, "round16_kernel");
}

/* src[n] rounded into scratch slot `slot` (grown as needed); NULL after a failure */
static const void *cast16(cu_ctx *c, int slot, const float *src, size_t n)
{
    if (c->failure[0]) return NULL;
    const size_t bytes = n * 2;
    if (c->cast_bytes[slot] < bytes) { /* grown with a quarter to spare: token counts vary by micro-batch */
        const size_t grown = bytes + bytes / 4;
        CU_CHECK(c, cudaFree(c->cast[slot]), "freeing a product's scratch");
        c->cast[slot] = NULL, c->cast_bytes[slot] = 0;
        CU_CHECK(c, cudaMalloc(&c->cast[slot], grown), "allocating a product's 16-bit scratch");
        if (c->failure[0]) return NULL;
        c->cast_bytes[slot] = grown;
    }
    round16(c, c->cast[slot], src, n);
    return c->failure[0] ? NULL : c->cast[slot];
}

/* ---- the parameters' 16-bit shadow: rounded once after each update, read by every product ---- */

static void cu_round16(rt_backend *be, void *base16, const float *base, size_t n)
{
    round16(cu_of(be), base16, base, n);
}

static void cu_shadow16(rt_backend *be, const float *base, const void *base16, size_t n)
{
    cu_ctx *c = cu_of(be);
    c->shadow_base = base, c->shadow16 = (const unsigned short *)base16, c->shadow_n = base ? n : 0;
}

/* src's 16-bit values: from the parameters' shadow where src is a weight there, else rounded into scratch */
static const void *input16(cu_ctx *c, int slot, const float *src, size_t n)
{
    if (c->shadow_base && src >= c->shadow_base && src + n <= c->shadow_base + c->shadow_n)
        return c->shadow16 + (src - c->shadow_base);
    return cast16(c, slot, src, n);
}

/* A linear layer's product on contiguous operands (a_count, b_count values), in the backend's arithmetic;
 * b_ready: scratch slot 1 already holds B's 16-bit copy (the backward's dy, rounded once for two products).
 */
static void linear_gemm(cu_ctx *c, bool ta, bool tb, int m, int n, int k, const float *A, int lda,
                        size_t a_count, const float *B, int ldb, size_t b_count, bool b_ready, float beta,
                        float *C, int ldc, const float *bias)
{
    if (c->math == RT_GEMM_BF16 || c->math == RT_GEMM_FP16) {
        const void *a16 = input16(c, 0, A, a_count), *b16 = b_ready ? c->cast[1] : input16(c, 1, B, b_count);
        if (!a16 || !b16) return;
        cu_lt_gemm(c, CUBLAS_COMPUTE_32F, c->math == RT_GEMM_BF16 ? CUDA_R_16BF : CUDA_R_16F, ta, tb, m, n, k,
                   1.0f, a16, lda, 0, b16, ldb, 0, beta, C, ldc, 0, 1, bias);
        return;
    }
    const cublasComputeType_t compute =
        c->math == RT_GEMM_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    cu_lt_gemm(c, compute, CUDA_R_32F, ta, tb, m, n, k, 1.0f, A, lda, 0, B, ldb, 0, beta, C, ldc, 0, 1, bias);
}

/* ---- linear layers: W[n_out, n_in], x[T, n_in], y[T, n_out] row-major ---- */

static void cu_linear_fwd(rt_backend *be, const float *x, const float *W, const float *b, float *y, int T,
                          int n_in, int n_out)
{
    /* y^T[n_out, T] = W (column-major W^T[n_in, n_out] transposed) x^T[n_in, T] (+ b per column) */
    linear_gemm(cu_of(be), true, false, n_out, T, n_in, W, n_in, (size_t)n_out * n_in, x, n_in,
                (size_t)T * n_in, false, 0.0f, y, n_out, b);
}

static void cu_linear_bwd(rt_backend *be, const float *x, const float *W, const float *dy, float *dx,
                          float *dW, float *db, int T, int n_in, int n_out)
{
    cu_ctx *c = cu_of(be);
    /* dx^T[n_in, T] += W^T[n_in, n_out] dy^T[n_out, T] */
    if (dx)
        linear_gemm(c, false, false, n_in, T, n_out, W, n_in, (size_t)n_out * n_in, dy, n_out,
                    (size_t)T * n_out, false, 1.0f, dx, n_in, NULL);
    /* dW^T[n_in, n_out] += x^T[n_in, T] (dy^T[n_out, T])^T */
    if (dW)
        linear_gemm(c, false, true, n_in, n_out, T, x, n_in, (size_t)T * n_in, dy, n_out, (size_t)T * n_out,
                    dx != NULL, 1.0f, dW, n_in, NULL);
    if (db) cu_colsum_acc(c, db, dy, n_out, T, n_out);
}

static void cu_bias_grad(rt_backend *be, float *db, const float *dy, int ld, int rows, int cols)
{
    cu_colsum_acc(cu_of(be), db, dy, ld, rows, cols);
}

void cu_table_gemm(rt_backend *be)
{
    be->round16 = cu_round16;
    be->shadow16 = cu_shadow16;
    be->linear_fwd = cu_linear_fwd;
    be->linear_bwd = cu_linear_bwd;
    be->bias_grad = cu_bias_grad;
}
