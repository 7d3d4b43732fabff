/* Tensor-train layers on the GPU: the walk of rt_tt.h (the cost model's contraction order, its reverse for
 * the gradients) played with this backend's operations: each pairwise contraction a cuBLASLt product
 * (fp32; tf32 on the tensor cores in the tf32, bf16 and fp16 modes, as attention's products), each permuted
 * copy a kernel. The walk itself (which tensors, which views, which copies) is the host's, shared with the
 * CPU backend, whose conformance runs the same walk through rt_tt_host_ops. */
#include "cuda_internal.h"
#include "rt_elementwise.h"

/* a permutation's dims and source strides, passed by value */
typedef struct cu_permute_args {
    int nd;
    unsigned long long dim[RT_TT_MAX_DIMS], stride[RT_TT_MAX_DIMS];
} cu_permute_args;

/* dst[e] (+)= src[sum_i idx_i(e) stride_i], idx(e) the row-major index of e over dim: a thread an output */
__global__ void tt_permute_kernel(float *dst, const float *src, size_t n, cu_permute_args p, int add)
{
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < n;
         e += (size_t)gridDim.x * blockDim.x) {
        const unsigned long long off = rt_permute_source(e, p.nd, p.dim, p.stride);
        dst[e] = add ? dst[e] + src[off] : src[off];
    }
}

static void cu_tt_permute(void *ctx, float *dst, const float *src, size_t n, int nd, const size_t *dim,
                          const size_t *stride, bool add)
{
    cu_ctx *c = (cu_ctx *)ctx;
    if (c->failure[0] || !n) return;
    if (nd < 1 || nd > RT_TT_MAX_DIMS) {
        cu_fail(c, __FILE__, __LINE__, "cu_tt_permute", "too many dims",
                "a tensor-train copy of over 20 dims");
        return;
    }
    cu_permute_args p;
    p.nd = nd;
    for (int i = 0; i < nd; i++)
        p.dim[i] = dim[i], p.stride[i] = stride[i];
    tt_permute_kernel<<<cu_blocks(n, 256), 256, 0, c->compute>>>(dst, src, n, p, add);
    CU_CHECK_LAUNCH(c, "tt_permute_kernel");
}

/* row-major C[m, n] = alpha op(A) op(B) + beta C: column-major C^T = op(B)^T op(A)^T */
static void cu_tt_gemm(void *ctx, bool ta, bool tb, int m, int n, int k, float alpha, const float *A, int lda,
                       const float *B, int ldb, float beta, float *C, int ldc)
{
    cu_ctx *c = (cu_ctx *)ctx;
    if (c->failure[0] || m < 1 || n < 1) return;
    const cublasComputeType_t compute =
        c->math == RT_GEMM_FP32 ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_32F_FAST_TF32;
    cu_lt_gemm(c, compute, CUDA_R_32F, tb, ta, n, m, k, alpha, B, ldb, 0, A, lda, 0, beta, C, ldc, 0, 1,
               NULL);
}

static void cu_tt_fwd(rt_backend *be, const rt_tt_layer *l, const float *X, const float *cores, float *Y,
                      float *work, int T)
{
    const rt_tt_ops ops = {cu_of(be), cu_tt_gemm, cu_tt_permute};
    rt_tt_fwd_ops(l, X, cores, Y, work, T, &ops);
}

static void cu_tt_bwd(rt_backend *be, const rt_tt_layer *l, const float *X, const float *cores,
                      const float *dY, float *dX, float *dcores, float *work, int T)
{
    const rt_tt_ops ops = {cu_of(be), cu_tt_gemm, cu_tt_permute};
    rt_tt_bwd_ops(l, X, cores, dY, dX, dcores, work, T, &ops);
}

void cu_table_tt(rt_backend *be)
{
    be->tt_fwd = cu_tt_fwd;
    be->tt_bwd = cu_tt_bwd;
}
