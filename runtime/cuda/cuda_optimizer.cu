/* The fused optimizer passes: Adam/AdamW over the flat buffer, one thread a value, and LAMB's two halves over
 * every tensor at once, a block a chunk of a tensor (rt_chunks), with rt_elementwise.h's per-value update
 * (the CPU tests check the same function). Every pass reads the step's gate (clip_gate: the gradients'
 * factor, and whether the step is skipped) on the device; LAMB's two squared norms (weights, update) are
 * reduced in double into device scalars that its second half turns into the trust ratio there, so no pass
 * waits for the host. */
#include "cuda_internal.h"
#include "rt_elementwise.h"

/* the gate's factor after the step's own gradient scale; false when the gate skips the step */
__device__ __forceinline__ bool gated(rt_adam_consts *k, const float *gate)
{
    if (!gate) return true;
    if (gate[1] != 0.0f) return false;
    k->gs *= gate[0];
    return true;
}

__global__ void adam_kernel(float *w, const float *g, float *m, float *v, const float *mask, size_t n,
                            rt_adam_consts k, const float *gate)
{
    if (!gated(&k, gate)) return;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float mi = m[i], vi = v[i];
        w[i] = rt_adam_step(&k, w[i], g[i], &mi, &vi, mask ? mask[i] : 1.0f);
        m[i] = mi, v[i] = vi;
    }
}

/* a block's double sum, added into *out by one thread (every thread of the block takes part) */
__device__ void block_add_to(double v, double *out)
{
    __shared__ double part[32];
    v = warp_sum_d(v);
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = (blockDim.x + 31) / 32;
    if (lane == 0) part[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = warp_sum_d(lane < warps ? part[lane] : 0.0);
        if (lane == 0) atomicAdd(out, v);
    }
    __syncthreads(); /* part is reused by the next call */
}

/* a block a chunk: u (over g) = direction * mask; the chunk's sums of w^2 and u^2 into its tensor's pair */
__global__ void lamb_kernel(const float *w, float *g, float *m, float *v, const float *mask, rt_chunks ch,
                            rt_adam_consts k, const float *gate, double *sq)
{
    if (!gated(&k, gate)) return;
    const size_t f = ch.first[blockIdx.x];
    const int n = ch.len[blockIdx.x], t = ch.tensor[blockIdx.x];
    double ws = 0, us = 0;
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
        const size_t i = f + (size_t)j;
        float mi = m[i], vi = v[i];
        const float u = rt_adam_direction(&k, w[i], g[i], &mi, &vi) * (mask ? mask[i] : 1.0f);
        m[i] = mi, v[i] = vi, g[i] = u;
        ws += (double)w[i] * w[i];
        us += (double)u * u;
    }
    block_add_to(ws, sq + 2 * t);
    block_add_to(us, sq + 2 * t + 1);
}

/* a block a chunk: w -= rate u, the rate from its tensor's two sums */
__global__ void lamb_apply_kernel(float *w, const float *u, rt_chunks ch, const double *sq, float lr,
                                  const float *gate)
{
    if (gate && gate[1] != 0.0f) return;
    const size_t f = ch.first[blockIdx.x];
    const int n = ch.len[blockIdx.x], t = ch.tensor[blockIdx.x];
    const float a = -rt_lamb_rate(sq[2 * t], sq[2 * t + 1], lr);
    for (int j = threadIdx.x; j < n; j += blockDim.x)
        w[f + (size_t)j] += a * u[f + (size_t)j];
}

static void cu_adam_update(rt_backend *be, float *w, const float *g, float *m, float *v, const float *mask,
                           size_t n, const rt_adam_args *a, const float *gate)
{
    cu_ctx *c = cu_of(be);
    if (c->failure[0] || !n) return;
    const rt_adam_consts k = rt_adam_make_consts(a->lr, a->beta1, a->beta2, a->eps, a->c1, a->c2,
                                                 a->grad_scale, a->decoupled_decay ? a->weight_decay : 0.0f);
    adam_kernel<<<cu_capped_blocks(c, n, 8), 256, 0, c->compute>>>(w, g, m, v, mask, n, k, gate);
    CU_CHECK_LAUNCH(c, "adam_kernel");
}

static void cu_lamb_update(rt_backend *be, const float *w, float *g, float *m, float *v, const float *mask,
                           const rt_chunks *ch, const rt_adam_args *a, const float *gate, double *sq)
{
    cu_ctx *c = cu_of(be);
    if (c->failure[0] || ch->n <= 0) return;
    const rt_adam_consts k =
        rt_adam_make_consts(a->lr, a->beta1, a->beta2, a->eps, a->c1, a->c2, a->grad_scale, a->weight_decay);
    lamb_kernel<<<(unsigned)ch->n, 256, 0, c->compute>>>(w, g, m, v, mask, *ch, k, gate, sq);
    CU_CHECK_LAUNCH(c, "lamb_kernel");
}

static void cu_lamb_apply(rt_backend *be, float *w, const float *u, const rt_chunks *ch, const double *sq,
                          float lr, const float *gate)
{
    cu_ctx *c = cu_of(be);
    if (c->failure[0] || ch->n <= 0) return;
    lamb_apply_kernel<<<(unsigned)ch->n, 256, 0, c->compute>>>(w, u, *ch, sq, lr, gate);
    CU_CHECK_LAUNCH(c, "lamb_apply_kernel");
}

void cu_table_optimizer(rt_backend *be)
{
    be->adam_update = cu_adam_update;
    be->lamb_update = cu_lamb_update;
    be->lamb_apply = cu_lamb_apply;
}
