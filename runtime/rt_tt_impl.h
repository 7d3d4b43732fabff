/* Body of the tensor-train kernels; included by rt_kernels_f.c / rt_kernels_d.c after rt_kernels_impl.h. The
 * float instantiation (RT_TT_OPS defined) runs its products and copies through an rt_tt_ops table (rt_tt.h),
 * so a backend plays the same walk on its own memory; the double one calls BLAS and its own loops. */
#include <stdlib.h>

#include "tt_network.h"

/* A row-major product (cblas_sgemm's arguments after the two transposes): through BLAS, and in the walk
 * through the ops table where there is one. */
#define TT_BLAS(ta, tb, ...)                                                                                 \
    GEMM(CblasRowMajor, (ta) ? CblasTrans : CblasNoTrans, (tb) ? CblasTrans : CblasNoTrans, __VA_ARGS__)
#ifdef RT_TT_OPS
#define TT_OPS_PARAM , const rt_tt_ops *ops
#define TT_OPS_ARG , ops
#define TT_GEMM(ta, tb, ...) ops->gemm(ops->ctx, (ta), (tb), __VA_ARGS__)
#else
#define TT_OPS_PARAM
#define TT_OPS_ARG
#define TT_GEMM TT_BLAS
#endif

/* The copy that permutes src (labels `from`) into dst (labels `to`, the same set) as dst's row-major index
 * over dims dim[0 .. nd) with src strides stride[]: dst's neighbouring labels that are neighbours in src too
 * merged into one (a row-major run). Returns nd (0: nothing to copy). */
static int FN(tt_permute_plan)(const tt_net *net, const tt_tensor *from, const tt_tensor *to, size_t *dim,
                               size_t *stride)
{
    size_t stride_of_label[TT_MAXL] = {0}, s = 1;
    for (int i = from->n - 1; i >= 0; i--) {
        stride_of_label[from->label[i]] = s;
        s *= (size_t)net->size[from->label[i]];
    }
    if (to->n < 1 || tt_elems(net, to) == 0) return 0;
    int nd = 0;
    for (int i = 0; i < to->n; i++) {
        size_t st = stride_of_label[to->label[i]], dm = (size_t)net->size[to->label[i]];
        if (nd > 0 && stride[nd - 1] == st * dm) {
            stride[nd - 1] = st, dim[nd - 1] *= dm;
            continue;
        }
        stride[nd] = st, dim[nd] = dm, nd++;
    }
    return nd;
}

/* dst[e] (+)= src[sum_i idx_i(e) stride[i]] over the row-major index of dims dim[0 .. nd), n values: the
 * host's loop (rt_tt.h's permute contract) */
static void FN(tt_permute_host)(REAL *dst, const REAL *src, size_t n, int nd, const size_t *dim,
                                const size_t *stride, int add)
{
    size_t idx[TT_MAXL] = {0}, off = 0;
    if (nd < 1 || n == 0) return;
    /* dst's last index in a tight loop (unit stride in src: a copy), an odometer over the others */
    const int last = nd - 1;
    const size_t inner = dim[last], step = stride[last];
    for (size_t e = 0; e < n; e += inner) {
        const REAL *s = src + off;
        REAL *o = dst + e;
        if (add)
            for (size_t j = 0; j < inner; j++)
                o[j] += s[j * step];
        else if (step == 1 && inner >= 64)
            memcpy(o, s, inner * sizeof *o);
        else if (step == 1) { /* short runs: fixed-size copies the compiler inlines, not a call each */
            size_t j = 0;
            for (; j + 8 <= inner; j += 8)
                memcpy(o + j, s + j, 8 * sizeof *o);
            for (; j < inner; j++)
                o[j] = s[j];
        } else
            for (size_t j = 0; j < inner; j++)
                o[j] = s[j * step];
        for (int i = last - 1; i >= 0; i--) { /* odometer over dst's other indices */
            off += stride[i];
            if (++idx[i] < dim[i]) break;
            off -= stride[i] * dim[i];
            idx[i] = 0;
        }
    }
}

/* dst (labels `to`) = src (labels `from`, same set) permuted; accumulate when add. */
static void FN(tt_permute)(const tt_net *net, const REAL *src, const tt_tensor *from, REAL *dst,
                           const tt_tensor *to, int add TT_OPS_PARAM)
{
    size_t dim[TT_MAXL] = {0}, stride[TT_MAXL] = {0};
    const int nd = FN(tt_permute_plan)(net, from, to, dim, stride);
    if (nd < 1) return;
#ifdef RT_TT_OPS
    ops->permute(ops->ctx, dst, src, tt_elems(net, to), nd, dim, stride, add);
#else
    FN(tt_permute_host)(dst, src, tt_elems(net, to), nd, dim, stride, add);
#endif
}

/* Workspace layout for T tokens: per step its result then its gradient, then scratch matrices. */
static REAL *FN(tt_result)(const tt_net *net, REAL *work, int step, int grad)
{
    const int d = net->d;
    size_t off = 0;
    for (int s = 0; s < step; s++)
        off += 2 * tt_elems(net, &net->t[d + 1 + s]);
    return work + off + (grad ? tt_elems(net, &net->t[d + 1 + step]) : 0);
}

static const REAL *FN(tt_tensor_data)(const rt_tt_layer *l, const tt_net *net, const REAL *X,
                                      const REAL *cores, REAL *work, int id)
{
    if (id == 0) return X;
    if (id <= net->d) return cores + l->core_offset[id - 1];
    return FN(tt_result)(net, work, id - net->d - 1, 0);
}

/* The gradient buffer of tensor `id` (the input's, a core's or an intermediate's), beside tt_tensor_data. */
static REAL *FN(tt_tensor_grad)(const rt_tt_layer *l, const tt_net *net, REAL *dX, REAL *dcores, REAL *work,
                                int id)
{
    if (id == 0) return dX;
    if (id <= net->d) return dcores + l->core_offset[id - 1];
    return FN(tt_result)(net, work, id - net->d - 1, 1);
}

/* An operand of a step as a matrix: its own storage when its labels are already (rows ++ cols), read as is,
 * or (cols ++ rows), read transposed; else a permuted copy in scratch. */
typedef struct FN(tt_view) {
    const REAL *p;
    int t, ld, direct;
} FN(tt_view);

/* The rows x cols view of tensor x (labels `rl` then `cl`), permuting into `scratch` when neither order
 * is its storage order. */
static FN(tt_view) FN(tt_view_of)(const tt_net *net, const REAL *data, const tt_tensor *x,
                                  const tt_tensor *rl, const tt_tensor *cl, REAL *scratch TT_OPS_PARAM)
{
    const int rows = (int)tt_elems(net, rl), cols = (int)tt_elems(net, cl);
    if (tt_labels_are(x, rl, cl)) return (FN(tt_view)){data, 0, cols, 1};
    if (tt_labels_are(x, cl, rl)) return (FN(tt_view)){data, 1, rows, 1};
    tt_tensor m = tt_concat(rl, cl);
    FN(tt_permute)(net, data, x, scratch, &m, 0 TT_OPS_ARG);
    return (FN(tt_view)){scratch, 0, cols, 0};
}

/* C (m x n; stored transposed, n x m, when ct) = beta C + P (m x k) Q (k x n). */
static void FN(tt_product)(REAL *C, int ct, REAL beta, FN(tt_view) P, FN(tt_view) Q, int m, int n,
                           int k TT_OPS_PARAM)
{
    if (!ct)
        TT_GEMM(P.t, Q.t, m, n, k, 1, P.p, P.ld, Q.p, Q.ld, beta, C, n);
    else /* C^T = Q^T P^T */
        TT_GEMM(!Q.t, !P.t, n, m, k, 1, Q.p, Q.ld, P.p, P.ld, beta, C, m);
}

static FN(tt_view) FN(tt_transposed)(FN(tt_view) v)
{
    v.t = !v.t;
    return v;
}

/* G, the gradient of operand x (viewed as V, rows `rl` x cols `cl`) in x's own layout, gets P Q (inner
 * dimension k), added when `add`: straight from the product where V is direct, else through `scratch` and a
 * permutation back. G NULL: not wanted. */
static void FN(tt_grad_into)(const tt_net *net, REAL *G, int add, const tt_tensor *x, FN(tt_view) V,
                             const tt_tensor *rl, const tt_tensor *cl, FN(tt_view) P, FN(tt_view) Q, int k,
                             REAL *scratch TT_OPS_PARAM)
{
    if (!G) return;
    const int rows = (int)tt_elems(net, rl), cols = (int)tt_elems(net, cl);
    if (V.direct) {
        FN(tt_product)(G, V.t, add, P, Q, rows, cols, k TT_OPS_ARG);
        return;
    }
    FN(tt_product)(scratch, 0, 0, P, Q, rows, cols, k TT_OPS_ARG);
    tt_tensor xm = tt_concat(rl, cl);
    FN(tt_permute)(net, scratch, &xm, G, x, add TT_OPS_ARG);
}

static void FN(tt_fwd_walk)(const rt_tt_layer *l, const REAL *X, const REAL *cores, REAL *Y, REAL *work,
                            int T TT_OPS_PARAM)
{
    tt_net net;
    tt_build(&l->shape, &l->plan, T, &net);
    const int d = net.d, steps = l->plan.steps;
    REAL *scratch = FN(tt_result)(&net, work, steps, 0);
    for (int st = 0; st < steps; st++) {
        const tt_tensor *a = &net.t[l->plan.left[st]], *b = &net.t[l->plan.right[st]];
        tt_tensor af, sh, bf;
        tt_split(a, b, &af, &sh, &bf);
        size_t m = tt_elems(&net, &af), k = tt_elems(&net, &sh), n = tt_elems(&net, &bf);
        FN(tt_view)
        A = FN(tt_view_of)(&net, FN(tt_tensor_data)(l, &net, X, cores, work, l->plan.left[st]), a, &af, &sh,
                           scratch TT_OPS_ARG);
        FN(tt_view)
        B = FN(tt_view_of)(&net, FN(tt_tensor_data)(l, &net, X, cores, work, l->plan.right[st]), b, &sh, &bf,
                           scratch + m * k TT_OPS_ARG);
        FN(tt_product)(FN(tt_result)(&net, work, st, 0), 0, 0, A, B, (int)m, (int)n, (int)k TT_OPS_ARG);
    }
    const tt_tensor out = tt_output(&l->shape);
    FN(tt_permute)(&net, FN(tt_result)(&net, work, steps - 1, 0), &net.t[d + steps], Y, &out, 0 TT_OPS_ARG);
}

/* Every tensor of the tree is an operand of exactly one step: the intermediates' gradients are written
 * once (no zeroing), the input's and the cores' added to what their buffers hold. */
static void FN(tt_bwd_walk)(const rt_tt_layer *l, const REAL *X, const REAL *cores, const REAL *dY, REAL *dX,
                            REAL *dcores, REAL *work, int T TT_OPS_PARAM)
{
    tt_net net;
    tt_build(&l->shape, &l->plan, T, &net);
    const int d = net.d, steps = l->plan.steps;
    REAL *scratch = FN(tt_result)(&net, work, steps, 0);
    const tt_tensor out = tt_output(&l->shape);
    FN(tt_permute)(&net, dY, &out, FN(tt_result)(&net, work, steps - 1, 1), &net.t[d + steps], 0 TT_OPS_ARG);
    for (int st = steps - 1; st >= 0; st--) {
        int ia = l->plan.left[st], ib = l->plan.right[st];
        const tt_tensor *a = &net.t[ia], *b = &net.t[ib];
        tt_tensor af, sh, bf;
        tt_split(a, b, &af, &sh, &bf);
        size_t m = tt_elems(&net, &af), k = tt_elems(&net, &sh), n = tt_elems(&net, &bf);
        REAL *sA = scratch, *sB = sA + m * k, *dA = sB + k * n, *dB = dA + m * k;
        FN(tt_view)
        A = FN(tt_view_of)(&net, FN(tt_tensor_data)(l, &net, X, cores, work, ia), a, &af, &sh, sA TT_OPS_ARG);
        FN(tt_view)
        B = FN(tt_view_of)(&net, FN(tt_tensor_data)(l, &net, X, cores, work, ib), b, &sh, &bf, sB TT_OPS_ARG);
        const FN(tt_view) dC = {FN(tt_result)(&net, work, st, 1), 0, (int)n, 1}; /* labels af ++ bf */
        /* dA = dC B^T and dB = A^T dC; the input and the cores accumulate */
        FN(tt_grad_into)
        (&net, FN(tt_tensor_grad)(l, &net, dX, dcores, work, ia), ia <= d, a, A, &af, &sh, dC,
         FN(tt_transposed)(B), (int)n, dA TT_OPS_ARG);
        FN(tt_grad_into)
        (&net, FN(tt_tensor_grad)(l, &net, dX, dcores, work, ib), ib <= d, b, B, &sh, &bf,
         FN(tt_transposed)(A), dC, (int)m, dB TT_OPS_ARG);
    }
}

#ifdef RT_TT_OPS
void rt_tt_fwd_ops(const rt_tt_layer *l, const float *X, const float *cores, float *Y, float *work, int T,
                   const rt_tt_ops *ops)
{
    FN(tt_fwd_walk)(l, X, cores, Y, work, T, ops);
}

void rt_tt_bwd_ops(const rt_tt_layer *l, const float *X, const float *cores, const float *dY, float *dX,
                   float *dcores, float *work, int T, const rt_tt_ops *ops)
{
    FN(tt_bwd_walk)(l, X, cores, dY, dX, dcores, work, T, ops);
}

/* the host's operations: BLAS's product and the loop above */
static void tt_host_gemm(void *ctx, bool ta, bool tb, int m, int n, int k, float alpha, const float *A,
                         int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    (void)ctx;
    TT_BLAS(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}

static void tt_host_permute(void *ctx, float *dst, const float *src, size_t n, int nd, const size_t *dim,
                            const size_t *stride, bool add)
{
    (void)ctx;
    FN(tt_permute_host)(dst, src, n, nd, dim, stride, add);
}

const rt_tt_ops rt_tt_host_ops = {NULL, tt_host_gemm, tt_host_permute};
#define TT_DEFAULT_OPS , &rt_tt_host_ops
#else
#define TT_DEFAULT_OPS
#endif

void FN(rt_tt_fwd)(const rt_tt_layer *l, const REAL *X, const REAL *cores, REAL *Y, REAL *work, int T)
{
    FN(tt_fwd_walk)(l, X, cores, Y, work, T TT_DEFAULT_OPS);
}

void FN(rt_tt_bwd)(const rt_tt_layer *l, const REAL *X, const REAL *cores, const REAL *dY, REAL *dX,
                   REAL *dcores, REAL *work, int T)
{
    FN(tt_bwd_walk)(l, X, cores, dY, dX, dcores, work, T TT_DEFAULT_OPS);
}

void FN(rt_tt_dense)(const rt_tt_layer *l, const REAL *cores, REAL *W)
{
    /* push the identity through the layer: row i of X = e_i gives Y[i] = column i of W^T */
    const size_t n_in = (size_t)et_tt_in(&l->shape), n_out = (size_t)et_tt_out(&l->shape);
    REAL *X = calloc(n_in * n_in, sizeof(REAL)), *Y = malloc(n_in * n_out * sizeof(REAL));
    REAL *work = malloc(rt_tt_workspace_size(l, (int)n_in) * sizeof(REAL));
    for (size_t i = 0; i < n_in; i++)
        X[i * n_in + i] = 1;
    FN(rt_tt_fwd)(l, X, cores, Y, work, (int)n_in);
    for (size_t i = 0; i < n_in; i++)
        for (size_t j = 0; j < n_out; j++)
            W[j * n_in + i] = Y[i * n_out + j];
    free(X), free(Y), free(work);
}
