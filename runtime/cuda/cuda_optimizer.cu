/* The fused optimizer passes: Adam/AdamW and LAMB's first half over a contiguous slice, one thread a value,
 * with rt_elementwise.h's per-value update (the CPU tests check the same function). LAMB's two squared
 * norms (weights, update) are reduced in double on the device and read once per call. */
#include "cuda_internal.h"
#include "rt_elementwise.h"

__global__ void adam_kernel(float *w, const float *g, float *m, float *v, const float *mask, size_t n,
                            rt_adam_consts k)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float mi = m[i], vi = v[i];
        w[i] = rt_adam_step(&k, w[i], g[i], &mi, &vi, mask ? mask[i] : 1.0f);
        m[i] = mi, v[i] = vi;
    }
}

/* u (over g) = direction * mask; sums of w^2 and u^2 into out[0], out[1] */
__global__ void lamb_kernel(const float *w, float *g, float *m, float *v, const float *mask, size_t n,
                            rt_adam_consts k, double *out)
{
    double ws = 0, us = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float mi = m[i], vi = v[i];
        const float u = rt_adam_direction(&k, w[i], g[i], &mi, &vi) * (mask ? mask[i] : 1.0f);
        m[i] = mi, v[i] = vi, g[i] = u;
        ws += (double)w[i] * w[i];
        us += (double)u * u;
    }
    for (int o = 16; o > 0; o >>= 1) {
        ws += __shfl_xor_sync(0xffffffffu, ws, o);
        us += __shfl_xor_sync(0xffffffffu, us, o);
    }
    if (threadIdx.x % 32 == 0) atomicAdd(out, ws), atomicAdd(out + 1, us);
}

static unsigned optimizer_blocks(const cu_ctx *c, size_t n)
{
    const unsigned cap = 8u * (unsigned)c->prop.multiProcessorCount;
    return cu_blocks(n, 256) < cap ? cu_blocks(n, 256) : cap;
}

static void cu_adam_update(rt_backend *be, float *w, const float *g, float *m, float *v, const float *mask,
                           size_t n, const rt_adam_args *a)
{
    cu_ctx *c = cu_of(be);
    if (c->failure[0] || !n) return;
    const rt_adam_consts k = rt_adam_make_consts(a->lr, a->beta1, a->beta2, a->eps, a->c1, a->c2,
                                                 a->grad_scale, a->decoupled_decay ? a->weight_decay : 0.0f);
    adam_kernel<<<optimizer_blocks(c, n), 256, 0, c->compute>>>(w, g, m, v, mask, n, k);
    CU_CHECK_LAUNCH(c, "adam_kernel");
}

static void cu_lamb_update(rt_backend *be, const float *w, float *g, float *m, float *v, const float *mask,
                           size_t n, const rt_adam_args *a, double *w_sq, double *u_sq)
{
    cu_ctx *c = cu_of(be);
    double sums[2] = {0, 0};
    if (!c->failure[0] && n) {
        const rt_adam_consts k = rt_adam_make_consts(a->lr, a->beta1, a->beta2, a->eps, a->c1, a->c2,
                                                     a->grad_scale, a->weight_decay);
        cu_scalars_zero(c, 2);
        lamb_kernel<<<optimizer_blocks(c, n), 256, 0, c->compute>>>(w, g, m, v, mask, n, k, c->scalars);
        CU_CHECK_LAUNCH(c, "lamb_kernel");
        cu_scalars_read(c, sums, 2);
    }
    *w_sq = sums[0], *u_sq = sums[1];
}

void cu_table_optimizer(rt_backend *be)
{
    be->adam_update = cu_adam_update;
    be->lamb_update = cu_lamb_update;
}
