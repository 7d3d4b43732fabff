/* rt_tt: tensor-train linear layers at run time: the cost model's contraction order (model/tensor_train.h)
 * executed as pairwise contractions (permute to matrices, one GEMM each), and its reverse for the input and
 * core gradients. Float (training) and double (gradient checks) instantiations, as rt_kernels.
 *
 * Cores are stored back to back, core k as [r_k][dim_k][r_{k+1}] row-major; the input X is [T][n_in] and the
 * output Y [T][n_out], both row-major over their factor digits (n_1 most significant). The workspace keeps
 * the forward intermediates for the backward: rt_tt_workspace_size() floats/doubles for up to T tokens. */
#ifndef ET_RT_TT_H
#define ET_RT_TT_H

#include <stdbool.h>
#include <stddef.h>

#include "tensor_train.h"

typedef struct rt_tt_layer {
    et_tt_shape shape;
    et_tt_plan plan;
    size_t core_offset[ET_TT_MAX_CORES + 1]; /* element offset of each core; [d] = total */
} rt_tt_layer;

/* Prepares a layer: the order is the cost model's best for `tokens_hint` tokens. */
void rt_tt_layer_init(rt_tt_layer *l, const et_tt_shape *shape, double tokens_hint);
size_t rt_tt_workspace_size(const rt_tt_layer *l, int T);

#define RT_TT_DECLARE(REAL, S)                                                                               \
    /* Y[T, n_out] = X (x) cores, in the plan's order; the workspace keeps every intermediate */             \
    void rt_tt_fwd##S(const rt_tt_layer *l, const REAL *X, const REAL *cores, REAL *Y, REAL *work, int T);   \
    /* dX[T, n_in] and dcores from dY, both accumulated (dX may be NULL), using the forward workspace        \
     */                                                                                                      \
    void rt_tt_bwd##S(const rt_tt_layer *l, const REAL *X, const REAL *cores, const REAL *dY, REAL *dX,      \
                      REAL *dcores, REAL *work, int T);                                                      \
    /* The dense matrix W[n_out, n_in] the cores represent (for checks) */                                   \
    void rt_tt_dense##S(const rt_tt_layer *l, const REAL *cores, REAL *W);

RT_TT_DECLARE(float, _f)
RT_TT_DECLARE(double, _d)

/* The data operations of the float walk, so a backend plays it on its own memory (the CPU backend with
 * rt_tt_host_ops, the CUDA backend with cuBLASLt and a copy kernel). gemm: row-major
 * C[m, n] = alpha op(A) op(B) + beta C, cblas_sgemm's arguments (ta, tb: A, B transposed). permute:
 * dst[e] = src[sum_i idx_i(e) stride[i]] (+= when add) for e < n, idx(e) the row-major index of e over dims
 * dim[0 .. nd), nd <= RT_TT_MAX_DIMS. Every pointer is the backend's memory; the calls may run
 * asynchronously, in order. */
#define RT_TT_MAX_DIMS (2 * ET_TT_MAX_CORES)
typedef struct rt_tt_ops {
    void *ctx;
    void (*gemm)(void *ctx, bool ta, bool tb, int m, int n, int k, float alpha, const float *A, int lda,
                 const float *B, int ldb, float beta, float *C, int ldc);
    void (*permute)(void *ctx, float *dst, const float *src, size_t n, int nd, const size_t *dim,
                    const size_t *stride, bool add);
} rt_tt_ops;
extern const rt_tt_ops rt_tt_host_ops; /* OpenBLAS and the host's loop: rt_tt_fwd_f and rt_tt_bwd_f use it */
void rt_tt_fwd_ops(const rt_tt_layer *l, const float *X, const float *cores, float *Y, float *work, int T,
                   const rt_tt_ops *ops);
void rt_tt_bwd_ops(const rt_tt_layer *l, const float *X, const float *cores, const float *dY, float *dX,
                   float *dcores, float *work, int T, const rt_tt_ops *ops);

#endif
