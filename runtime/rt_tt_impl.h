/* Body of the tensor-train kernels; included by rt_kernels_f.c / rt_kernels_d.c after rt_kernels_impl.h. */
#include <stdlib.h>

#include "rt_tt_net.h"

/* dst (labels `to`) = src (labels `from`, same set) permuted; accumulate when add. */
static void FN(tt_permute)(const tt_net *net, const REAL *src, const tt_tensor *from, REAL *dst,
                           const tt_tensor *to, int add)
{
    size_t stride_of_label[TT_MAXL] = {0}, s = 1;
    for (int i = from->n - 1; i >= 0; i--) {
        stride_of_label[from->label[i]] = s;
        s *= (size_t)net->size[from->label[i]];
    }
    size_t n = tt_elems(net, to), stride[TT_MAXL] = {0}, dim[TT_MAXL] = {0}, idx[TT_MAXL] = {0}, off = 0;
    if (to->n < 1 || n == 0) return;
    /* dst's indices, neighbours that are also neighbours in src merged into one (a row-major run) */
    int nd = 0;
    for (int i = 0; i < to->n; i++) {
        size_t st = stride_of_label[to->label[i]], dm = (size_t)net->size[to->label[i]];
        if (nd > 0 && stride[nd - 1] == st * dm) {
            stride[nd - 1] = st, dim[nd - 1] *= dm;
            continue;
        }
        stride[nd] = st, dim[nd] = dm, nd++;
    }
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

void FN(rt_tt_fwd)(const rt_tt_layer *l, const REAL *X, const REAL *cores, REAL *Y, REAL *work, int T)
{
    tt_net net;
    tt_build(l, T, &net);
    const int d = net.d, steps = l->plan.steps;
    REAL *scratch = FN(tt_result)(&net, work, steps, 0);
    for (int st = 0; st < steps; st++) {
        const tt_tensor *a = &net.t[l->plan.left[st]], *b = &net.t[l->plan.right[st]];
        tt_tensor af, sh, bf;
        tt_split(a, b, &af, &sh, &bf);
        tt_tensor am = tt_concat(&af, &sh), bm = tt_concat(&sh, &bf);
        size_t m = tt_elems(&net, &af), k = tt_elems(&net, &sh), n = tt_elems(&net, &bf);
        REAL *A = scratch, *B = scratch + m * k;
        FN(tt_permute)(&net, FN(tt_tensor_data)(l, &net, X, cores, work, l->plan.left[st]), a, A, &am, 0);
        FN(tt_permute)(&net, FN(tt_tensor_data)(l, &net, X, cores, work, l->plan.right[st]), b, B, &bm, 0);
        GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)n, (int)k, 1, A, (int)k, B, (int)n, 0,
             FN(tt_result)(&net, work, st, 0), (int)n);
    }
    tt_tensor out = {0};
    out.label[out.n++] = 0;
    for (int k = l->shape.d_in; k < d; k++)
        out.label[out.n++] = 1 + k;
    FN(tt_permute)(&net, FN(tt_result)(&net, work, steps - 1, 0), &net.t[d + steps], Y, &out, 0);
}

void FN(rt_tt_bwd)(const rt_tt_layer *l, const REAL *X, const REAL *cores, const REAL *dY, REAL *dX,
                   REAL *dcores, REAL *work, int T)
{
    tt_net net;
    tt_build(l, T, &net);
    const int d = net.d, steps = l->plan.steps;
    REAL *scratch = FN(tt_result)(&net, work, steps, 0);
    for (int st = 0; st < steps; st++)
        memset(FN(tt_result)(&net, work, st, 1), 0, sizeof(REAL) * tt_elems(&net, &net.t[d + 1 + st]));
    tt_tensor out = {0};
    out.label[out.n++] = 0;
    for (int k = l->shape.d_in; k < d; k++)
        out.label[out.n++] = 1 + k;
    FN(tt_permute)(&net, dY, &out, FN(tt_result)(&net, work, steps - 1, 1), &net.t[d + steps], 0);
    if (dX) memset(dX, 0, sizeof(REAL) * (size_t)T * (size_t)et_tt_in(&l->shape));
    for (int st = steps - 1; st >= 0; st--) {
        int ia = l->plan.left[st], ib = l->plan.right[st];
        const tt_tensor *a = &net.t[ia], *b = &net.t[ib];
        tt_tensor af, sh, bf;
        tt_split(a, b, &af, &sh, &bf);
        tt_tensor am = tt_concat(&af, &sh), bm = tt_concat(&sh, &bf);
        size_t m = tt_elems(&net, &af), k = tt_elems(&net, &sh), n = tt_elems(&net, &bf);
        REAL *A = scratch, *B = A + m * k, *dA = B + k * n, *dB = dA + m * k;
        FN(tt_permute)(&net, FN(tt_tensor_data)(l, &net, X, cores, work, ia), a, A, &am, 0);
        FN(tt_permute)(&net, FN(tt_tensor_data)(l, &net, X, cores, work, ib), b, B, &bm, 0);
        const REAL *dC = FN(tt_result)(&net, work, st, 1); /* labels af ++ bf: already m x n */
        GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m, (int)k, (int)n, 1, dC, (int)n, B, (int)n, 0, dA,
             (int)k);
        GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, (int)k, (int)n, (int)m, 1, A, (int)k, dC, (int)n, 0, dB,
             (int)n);
        /* scatter back into each operand's own layout */
        REAL *ga = ia == 0   ? dX
                   : ia <= d ? dcores + l->core_offset[ia - 1]
                             : FN(tt_result)(&net, work, ia - d - 1, 1);
        REAL *gb = ib == 0   ? dX
                   : ib <= d ? dcores + l->core_offset[ib - 1]
                             : FN(tt_result)(&net, work, ib - d - 1, 1);
        if (ga) FN(tt_permute)(&net, dA, &am, ga, a, 1);
        if (gb) FN(tt_permute)(&net, dB, &bm, gb, b, 1);
    }
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
