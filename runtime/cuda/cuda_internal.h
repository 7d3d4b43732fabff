/* The CUDA backend's shared state and helpers (runtime/cuda/ only; C++ compiled by nvcc). The backend's
 * table (rt_backend.h) is filled by one function per file: cu_table_buffers (cuda_backend.cu), cu_table_gemm
 * (cuda_gemm.cu: linear layers through cuBLASLt, whose plans cuda_lt.cu keeps), cu_table_attention
 * (cuda_attention.cu: attention's products and softmax), cu_table_rows (cuda_rows.cu: row normalisations,
 * cross-entropy), cu_table_elementwise (cuda_elementwise.cu), cu_table_optimizer (cuda_optimizer.cu),
 * cu_table_tt (cuda_tt.cu: tensor-train layers, rt_tt.h's walk on this backend's products), cu_table_flash
 * (cuda_flash.cu: fused attention, rt_flash.h's rows).
 *
 * Errors: every CUDA and cuBLASLt call is checked (CU_CHECK, LT_CHECK) and the first failure is kept in the
 * context as "file:line: call: what (hint)"; after it every operation returns at once and rt_backend's
 * `failure` hands the text to the caller, which stops the run. Kernels launch on the compute stream and are
 * checked with cudaGetLastError; the device's own faults surface at the next synchronising call. */
#ifndef ET_CUDA_INTERNAL_H
#define ET_CUDA_INTERNAL_H

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

extern "C" {
#include "rt_backend.h"
}

typedef struct cu_timer_pair {
    int op;
    cudaEvent_t begin, end;
} cu_timer_pair;

typedef struct cu_gemm_plan cu_gemm_plan;   /* cuda_lt.cu: cached descriptors and algorithm per shape */
typedef struct cu_algo_entry cu_algo_entry; /* cuda_lt.cu: an algorithm per class of shapes */

typedef struct cu_ctx {
    int device;
    cudaDeviceProp prop;
    cudaStream_t compute, comm;
    cublasLtHandle_t lt;
    void *workspace;
    size_t workspace_bytes;
    rt_gemm_math math;
    void *cast[2]; /* 16-bit copies of a product's two inputs (bf16 and fp16 modes) */
    size_t cast_bytes[2];
    int *moe_starts; /* the experts' first rows (moe_group), moe_starts_cap of them */
    int moe_starts_cap;
    const float *shadow_base; /* the parameters' 16-bit shadow (shadow16): weights read from it, not cast */
    const unsigned short *shadow16;
    size_t shadow_n;
    /* op timers: a pool of event pairs, one taken per bracket, read at collect */
    int n_ops, *open; /* per op: the pair its open bracket took, -1 when none */
    cu_timer_pair *pairs;
    int n_pairs, used_pairs;
    cu_gemm_plan *plans; /* hash tables (cuda_lt.cu) */
    int n_plans, cap_plans;
    cu_algo_entry *algos;
    int n_algos, cap_algos;
    cublasHandle_t blas; /* cuBLAS: attention's grouped products (cuda_attention.cu) */
    int grouped_off;     /* cuBLAS answered that it cannot group these products: one call a sequence */
    const void **ptrs;   /* device: the grouped products' operand pointers */
    size_t ptrs_cap;
    char failure[640];
} cu_ctx;

static inline cu_ctx *cu_of(const rt_backend *be)
{
    return (cu_ctx *)be->ctx;
}

void cu_fail(cu_ctx *c, const char *file, int line, const char *call, const char *what, const char *hint);
const char *cu_lt_status_name(cublasStatus_t s);

#define CU_CHECK(c, call, hint)                                                                              \
    do {                                                                                                     \
        if (!(c)->failure[0]) {                                                                              \
            cudaError_t e_ = (call);                                                                         \
            if (e_ != cudaSuccess) cu_fail((c), __FILE__, __LINE__, #call, cudaGetErrorString(e_), (hint));  \
        }                                                                                                    \
    } while (0)
#define CU_CHECK_LAUNCH(c, kernel) CU_CHECK(c, cudaGetLastError(), "launching " kernel)
#define LT_CHECK(c, call, hint)                                                                              \
    do {                                                                                                     \
        if (!(c)->failure[0]) {                                                                              \
            cublasStatus_t s_ = (call);                                                                      \
            if (s_ != CUBLAS_STATUS_SUCCESS)                                                                 \
                cu_fail((c), __FILE__, __LINE__, #call, cu_lt_status_name(s_), (hint));                      \
        }                                                                                                    \
    } while (0)

/* blocks of `threads` covering n items, capped for grid-stride loops */
static inline unsigned cu_blocks(size_t n, int threads)
{
    size_t b = (n + (size_t)threads - 1) / (size_t)threads;
    return (unsigned)(b < 1 ? 1 : b > 65535u * 8u ? 65535u * 8u : b);
}

/* blocks of 256 threads for a grid-stride loop over n items, at most per_sm a multiprocessor */
static inline unsigned cu_capped_blocks(const cu_ctx *c, size_t n, unsigned per_sm)
{
    const unsigned cap = per_sm * (unsigned)c->prop.multiProcessorCount;
    return cu_blocks(n, 256) < cap ? cu_blocks(n, 256) : cap;
}

/* a warp's sum and maximum, every lane taking part */
__device__ __forceinline__ float warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ double warp_sum_d(double v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* Column sums: out[c] += sum_r in[r * ld + c] (a bias gradient, a layer norm's beta gradient). */
void cu_colsum_acc(cu_ctx *c, float *out, const float *in, int ld, int rows, int cols);

/* Column-major C[m, n] = alpha op(A) op(B) + beta C (+ bias[m] per column), `batch` strided products, A and
 * B of ab_type, C fp32 (cuda_lt.cu). */
void cu_lt_gemm(cu_ctx *c, cublasComputeType_t compute, cudaDataType_t ab_type, bool ta, bool tb, int m,
                int n, int k, float alpha, const void *A, int lda, long long sa, const void *B, int ldb,
                long long sb, float beta, float *C, int ldc, long long sc, int batch, const float *bias);

void cu_table_buffers(rt_backend *be);
void cu_table_gemm(rt_backend *be);
void cu_table_attention(rt_backend *be);
void cu_table_rows(rt_backend *be);
void cu_table_elementwise(rt_backend *be);
void cu_table_optimizer(rt_backend *be);
void cu_table_tt(rt_backend *be);
void cu_table_flash(rt_backend *be);
void cu_gemm_free_plans(cu_ctx *c);

#endif
