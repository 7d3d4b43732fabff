/* rt_tt: tensor-train linear layers at run time: the cost model's contraction order (model/tensor_train.h)
 * executed as pairwise contractions (permute to matrices, one GEMM each), and its reverse for the input and
 * core gradients. Float (training) and double (gradient checks) instantiations, as rt_kernels.
 *
 * Cores are stored back to back, core k as [r_k][dim_k][r_{k+1}] row-major; the input X is [T][n_in] and the
 * output Y [T][n_out], both row-major over their factor digits (n_1 most significant). The workspace keeps
 * the forward intermediates for the backward: rt_tt_workspace_size() floats/doubles for up to T tokens. */
#ifndef ET_RT_TT_H
#define ET_RT_TT_H

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

#endif
