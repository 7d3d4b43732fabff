/* Row kernels: layer norm (with the residual add before it), RMSNorm and the cross-entropy of the head. One
 * warp a row (rows of a hidden width or a sequence length), float accumulation with warp shuffles; the
 * cross-entropy takes a block a row (a vocabulary). Parameter gradients (gamma, beta) are column sums over
 * the rows, a chunk of rows a block and one atomic add per chunk and column. The formulas are
 * rt_kernels_impl.h's (eps 1e-5). Attention's softmax is in cuda_attention.cu. */
#include <math.h>

#include "cuda_internal.h"

#define ROWS_PER_BLOCK 8 /* warps of 32 threads: 256-thread blocks */

static unsigned row_blocks(int rows)
{
    return (unsigned)((rows + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK);
}

/* ---- layer norm ---- */

/* sum = x + r (when r is given), y = LN(sum) g + b; each lane re-reads only the values it wrote */
__global__ void layernorm_fwd_kernel(const float *x, const float *r, float *sum, const float *g,
                                     const float *b, float *y, float *mean, float *rstd, int T, int n)
{
    const int row = blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= T) return;
    const size_t o = (size_t)row * n;
    const float *src = x + o;
    float s = 0;
    if (r) {
        for (int i = lane; i < n; i += 32) {
            const float v = x[o + i] + r[o + i];
            sum[o + i] = v;
            s += v;
        }
        src = sum + o;
    } else {
        for (int i = lane; i < n; i += 32)
            s += src[i];
    }
    const float m = warp_sum(s) / n;
    float v = 0;
    for (int i = lane; i < n; i += 32) {
        const float d = src[i] - m;
        v += d * d;
    }
    const float rs = rsqrtf(warp_sum(v) / n + 1e-5f);
    for (int i = lane; i < n; i += 32)
        y[o + i] = (src[i] - m) * rs * g[i] + b[i];
    if (lane == 0) mean[row] = m, rstd[row] = rs;
}

static void cu_layernorm_fwd(rt_backend *be, const float *x, const float *g, const float *b, float *y,
                             float *mean, float *rstd, int T, int n)
{
    cu_ctx *c = cu_of(be);
    if (c->failure[0] || T <= 0) return;
    layernorm_fwd_kernel<<<row_blocks(T), 32 * ROWS_PER_BLOCK, 0, c->compute>>>(x, NULL, NULL, g, b, y, mean,
                                                                                rstd, T, n);
    CU_CHECK_LAUNCH(c, "layernorm_fwd_kernel");
}

static void cu_add_layernorm_fwd(rt_backend *be, const float *x, const float *r, float *sum, const float *g,
                                 const float *b, float *y, float *mean, float *rstd, int T, int n)
{
    cu_ctx *c = cu_of(be);
    if (c->failure[0] || T <= 0) return;
    layernorm_fwd_kernel<<<row_blocks(T), 32 * ROWS_PER_BLOCK, 0, c->compute>>>(x, r, sum, g, b, y, mean,
                                                                                rstd, T, n);
    CU_CHECK_LAUNCH(c, "layernorm_fwd_kernel (residual add)");
}

/* dx += (dxhat - mean(dxhat) - xhat mean(dxhat xhat)) rstd, dxhat = dy g */
__global__ void layernorm_bwd_dx_kernel(const float *x, const float *g, const float *mean, const float *rstd,
                                        const float *dy, float *dx, int T, int n)
{
    const int row = blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= T) return;
    const size_t o = (size_t)row * n;
    const float m = mean[row], rs = rstd[row];
    float s1 = 0, s2 = 0;
    for (int i = lane; i < n; i += 32) {
        const float xhat = (x[o + i] - m) * rs, dxhat = dy[o + i] * g[i];
        s1 += dxhat;
        s2 += dxhat * xhat;
    }
    s1 = warp_sum(s1) / n, s2 = warp_sum(s2) / n;
    for (int i = lane; i < n; i += 32) {
        const float xhat = (x[o + i] - m) * rs, dxhat = dy[o + i] * g[i];
        dx[o + i] += (dxhat - s1 - xhat * s2) * rs;
    }
}

/* dg[c] += sum_r dy xhat, db[c] += sum_r dy (db may be NULL: RMSNorm, whose mean is NULL: xhat = x rstd) */
__global__ void norm_param_grads_kernel(const float *x, const float *mean, const float *rstd, const float *dy,
                                        float *dg, float *db, int T, int n, int rows_per_chunk)
{
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= n) return;
    const int r0 = blockIdx.y * rows_per_chunk, r1 = min(T, r0 + rows_per_chunk);
    float sg = 0, sb = 0;
    for (int r = r0; r < r1; r++) {
        const size_t i = (size_t)r * n + col;
        const float xhat = (x[i] - (mean ? mean[r] : 0.0f)) * rstd[r];
        sg += dy[i] * xhat;
        sb += dy[i];
    }
    atomicAdd(dg + col, sg);
    if (db) atomicAdd(db + col, sb);
}

static void norm_param_grads(cu_ctx *c, const float *x, const float *mean, const float *rstd, const float *dy,
                             float *dg, float *db, int T, int n)
{
    const int per = 64;
    dim3 grid((unsigned)((n + 255) / 256), (unsigned)((T + per - 1) / per));
    norm_param_grads_kernel<<<grid, 256, 0, c->compute>>>(x, mean, rstd, dy, dg, db, T, n, per);
    CU_CHECK_LAUNCH(c, "norm_param_grads_kernel");
}

static void cu_layernorm_bwd(rt_backend *be, const float *x, const float *g, const float *mean,
                             const float *rstd, const float *dy, float *dx, float *dg, float *db, int T,
                             int n)
{
    cu_ctx *c = cu_of(be);
    if (c->failure[0] || T <= 0) return;
    layernorm_bwd_dx_kernel<<<row_blocks(T), 32 * ROWS_PER_BLOCK, 0, c->compute>>>(x, g, mean, rstd, dy, dx,
                                                                                   T, n);
    CU_CHECK_LAUNCH(c, "layernorm_bwd_dx_kernel");
    norm_param_grads(c, x, mean, rstd, dy, dg, db, T, n);
}

/* ---- RMSNorm ---- */

__global__ void rmsnorm_fwd_kernel(const float *x, const float *g, float *y, float *rstd, int T, int n)
{
    const int row = blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= T) return;
    const size_t o = (size_t)row * n;
    float ss = 0;
    for (int i = lane; i < n; i += 32)
        ss += x[o + i] * x[o + i];
    const float rs = rsqrtf(warp_sum(ss) / n + 1e-5f);
    for (int i = lane; i < n; i += 32)
        y[o + i] = x[o + i] * rs * g[i];
    if (lane == 0) rstd[row] = rs;
}

/* dx += dy g rs - x (sum dy g x) rs^3 / n */
__global__ void rmsnorm_bwd_dx_kernel(const float *x, const float *g, const float *rstd, const float *dy,
                                      float *dx, int T, int n)
{
    const int row = blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= T) return;
    const size_t o = (size_t)row * n;
    const float rs = rstd[row];
    float dot = 0;
    for (int i = lane; i < n; i += 32)
        dot += dy[o + i] * g[i] * x[o + i];
    const float k = warp_sum(dot) * rs * rs * rs / n;
    for (int i = lane; i < n; i += 32)
        dx[o + i] += dy[o + i] * g[i] * rs - x[o + i] * k;
}

static void cu_rmsnorm_fwd(rt_backend *be, const float *x, const float *g, float *y, float *rstd, int T,
                           int n)
{
    cu_ctx *c = cu_of(be);
    if (c->failure[0] || T <= 0) return;
    rmsnorm_fwd_kernel<<<row_blocks(T), 32 * ROWS_PER_BLOCK, 0, c->compute>>>(x, g, y, rstd, T, n);
    CU_CHECK_LAUNCH(c, "rmsnorm_fwd_kernel");
}

static void cu_rmsnorm_bwd(rt_backend *be, const float *x, const float *g, const float *rstd, const float *dy,
                           float *dx, float *dg, int T, int n)
{
    cu_ctx *c = cu_of(be);
    if (c->failure[0] || T <= 0) return;
    rmsnorm_bwd_dx_kernel<<<row_blocks(T), 32 * ROWS_PER_BLOCK, 0, c->compute>>>(x, g, rstd, dy, dx, T, n);
    CU_CHECK_LAUNCH(c, "rmsnorm_bwd_dx_kernel");
    norm_param_grads(c, x, NULL, rstd, dy, dg, NULL, T, n);
}

/* ---- cross-entropy: a block a scored row ---- */

__device__ float block_reduce(float v, bool is_max)
{
    __shared__ float part[32];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = (blockDim.x + 31) / 32;
    v = is_max ? warp_max(v) : warp_sum(v);
    __syncthreads(); /* part[] may still be read from a previous call */
    if (lane == 0) part[warp] = v;
    __syncthreads();
    v = lane < warps ? part[lane] : (is_max ? -INFINITY : 0.0f);
    return is_max ? warp_max(v) : warp_sum(v);
}

__global__ void cross_entropy_kernel(const float *logits, const int *targets, float *dlogits, int V,
                                     float inv_norm, double *loss)
{
    const int p = blockIdx.x, t = targets[p];
    const float *z = logits + (size_t)p * V;
    float *dz = dlogits + (size_t)p * V;
    if (t < 0) {
        for (int v = threadIdx.x; v < V; v += blockDim.x)
            dz[v] = 0.0f;
        return;
    }
    float mx = -INFINITY;
    for (int v = threadIdx.x; v < V; v += blockDim.x)
        mx = fmaxf(mx, z[v]);
    mx = block_reduce(mx, true);
    float s = 0;
    for (int v = threadIdx.x; v < V; v += blockDim.x)
        s += expf(z[v] - mx);
    s = block_reduce(s, false);
    const float inv = 1.0f / s;
    for (int v = threadIdx.x; v < V; v += blockDim.x)
        dz[v] = expf(z[v] - mx) * inv * inv_norm - (v == t ? inv_norm : 0.0f);
    if (threadIdx.x == 0) atomicAdd(loss, (double)logf(s) + (double)mx - (double)z[t]);
}

static void cu_cross_entropy(rt_backend *be, const float *logits, const rt_dev_batch *b, float *dlogits,
                             int V, double norm, double *loss)
{
    cu_ctx *c = cu_of(be);
    if (c->failure[0] || b->P <= 0) return;
    cross_entropy_kernel<<<(unsigned)b->P, 256, 0, c->compute>>>(logits, b->targets, dlogits, V,
                                                                 (float)(1.0 / norm), loss);
    CU_CHECK_LAUNCH(c, "cross_entropy_kernel");
}

void cu_table_rows(rt_backend *be)
{
    be->layernorm_fwd = cu_layernorm_fwd;
    be->add_layernorm_fwd = cu_add_layernorm_fwd;
    be->layernorm_bwd = cu_layernorm_bwd;
    be->rmsnorm_fwd = cu_rmsnorm_fwd;
    be->rmsnorm_bwd = cu_rmsnorm_bwd;
    be->cross_entropy = cu_cross_entropy;
}
