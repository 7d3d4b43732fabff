/* Element-wise and gather kernels: GELU, SwiGLU, rotary positions, embeddings, the glue of rt_backend.h
 * (add, axpy, row gathers and scatters, masks, scaling, squared norms, biases) and the mixture of experts'
 * routing and combine. The per-element math is rt_elementwise.h's, the same functions the CPU tests check.
 * Grid-stride loops over 256-thread blocks; sums that several rows add into one place (embedding rows
 * read by several tokens, scattered rows) use atomic adds, so their order, and the last bits, vary. */
#include <math.h>

#include "cuda_internal.h"
#include "rt_elementwise.h"

#define GRID_LOOP(i, n)                                                                                      \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n);                                  \
         i += (size_t)gridDim.x * blockDim.x)

#define LAUNCH(c, kernel, n, ...)                                                                            \
    do {                                                                                                     \
        if (!(c)->failure[0] && (n) > 0) {                                                                   \
            kernel<<<cu_blocks((n), 256), 256, 0, (c)->compute>>>(__VA_ARGS__);                              \
            CU_CHECK_LAUNCH((c), #kernel);                                                                   \
        }                                                                                                    \
    } while (0)

/* ---- activations ---- */

__global__ void gelu_fwd_kernel(const float *x, float *y, size_t n)
{
    GRID_LOOP(i, n) y[i] = rt_gelu_tanh(x[i]);
}

__global__ void gelu_bwd_kernel(const float *x, const float *dy, float *dx, size_t n)
{
    GRID_LOOP(i, n) dx[i] = dy[i] * rt_gelu_tanh_grad(x[i]);
}

static void cu_gelu_fwd(rt_backend *be, const float *x, float *y, size_t n)
{
    LAUNCH(cu_of(be), gelu_fwd_kernel, n, x, y, n);
}

static void cu_gelu_bwd(rt_backend *be, const float *x, const float *dy, float *dx, size_t n)
{
    LAUNCH(cu_of(be), gelu_bwd_kernel, n, x, dy, dx, n);
}

/* u[T, 2F] = gate | up per row */
__global__ void swiglu_fwd_kernel(const float *u, float *y, int F, size_t n)
{
    GRID_LOOP(i, n)
    {
        const size_t t = i / F, f = i % F;
        y[i] = rt_swiglu(u[t * 2 * F + f], u[t * 2 * F + F + f]);
    }
}

__global__ void swiglu_bwd_kernel(const float *u, const float *dy, float *du, int F, size_t n)
{
    GRID_LOOP(i, n)
    {
        const size_t t = i / F, f = i % F, g = t * 2 * F + f;
        rt_swiglu_grad(u[g], u[g + F], dy[i], du + g, du + g + F);
    }
}

static void cu_swiglu_fwd(rt_backend *be, const float *u, float *y, int T, int F)
{
    LAUNCH(cu_of(be), swiglu_fwd_kernel, (size_t)T * F, u, y, F, (size_t)T * F);
}

static void cu_swiglu_bwd(rt_backend *be, const float *u, const float *dy, float *du, int T, int F)
{
    LAUNCH(cu_of(be), swiglu_bwd_kernel, (size_t)T * F, u, dy, du, F, (size_t)T * F);
}

/* ---- rotary positions: one thread a (token, head, pair); the angle in double, as the reference ---- */

/* rt_rope's runs: `heads` runs of R values a row (row stride ld, run h at h * stride), pairs (i, i + R/2) */
__global__ void rope_kernel(float *x, const int *positions, int heads, int stride, int R, int ld, double base,
                            int inverse, size_t n)
{
    const int half = R / 2;
    GRID_LOOP(idx, n)
    {
        const size_t t = idx / ((size_t)heads * half);
        const int h = (int)(idx / half % heads), i = (int)(idx % half);
        const double angle = positions[t] * pow(base, -2.0 * i / R);
        double s, c;
        sincos(angle, &s, &c);
        float *v = x + t * ld + (size_t)h * stride;
        rt_rotate_pair(v + i, v + i + half, (float)c, inverse ? (float)-s : (float)s);
    }
}

static void cu_rope(rt_backend *be, float *x, const rt_dev_batch *b, int ld, int heads, int stride, int R,
                    double base, bool inverse)
{
    const size_t n = (size_t)b->T * heads * (R / 2);
    LAUNCH(cu_of(be), rope_kernel, n, x, b->positions, heads, stride, R, ld, base, inverse ? 1 : 0, n);
}

/* dst[r ld_dst + c] += src[r ld_src + c] (rt_backend.h's add_2d) */
__global__ void add_2d_kernel(float *dst, int ld_dst, const float *src, int ld_src, int cols, size_t n)
{
    GRID_LOOP(idx, n)
    {
        const size_t r = idx / cols, col = idx % cols;
        dst[r * ld_dst + col] += src[r * ld_src + col];
    }
}

static void cu_add_2d(rt_backend *be, float *dst, int ld_dst, const float *src, int ld_src, int rows,
                      int cols)
{
    const size_t n = rows > 0 && cols > 0 ? (size_t)rows * cols : 0;
    LAUNCH(cu_of(be), add_2d_kernel, n, dst, ld_dst, src, ld_src, cols, n);
}

/* ---- embeddings ---- */

__global__ void embedding_fwd_kernel(const int *tokens, const int *positions, const int *types,
                                     const float *word, const float *pos, const float *type, float *out,
                                     int H, size_t n)
{
    GRID_LOOP(idx, n)
    {
        const size_t t = idx / H, i = idx % H;
        float v = word[(size_t)tokens[t] * H + i];
        if (pos) v += pos[(size_t)positions[t] * H + i];
        if (type) v += type[(size_t)types[t] * H + i];
        out[idx] = v;
    }
}

__global__ void embedding_bwd_kernel(const int *tokens, const int *positions, const float *dout, float *dword,
                                     float *dpos, int H, size_t n)
{
    GRID_LOOP(idx, n)
    {
        const size_t t = idx / H, i = idx % H;
        atomicAdd(dword + (size_t)tokens[t] * H + i, dout[idx]);
        if (dpos) atomicAdd(dpos + (size_t)positions[t] * H + i, dout[idx]);
    }
}

static void cu_embedding_fwd(rt_backend *be, const rt_dev_batch *b, const float *word, const float *pos,
                             const float *type, float *out, int H)
{
    const size_t n = (size_t)b->T * H;
    LAUNCH(cu_of(be), embedding_fwd_kernel, n, b->tokens, b->positions, b->types, word, pos, type, out, H, n);
}

static void cu_embedding_bwd(rt_backend *be, const rt_dev_batch *b, const float *dout, float *dword,
                             float *dpos, float *dtype, int H)
{
    cu_ctx *c = cu_of(be);
    const size_t n = (size_t)b->T * H;
    LAUNCH(c, embedding_bwd_kernel, n, b->tokens, b->positions, dout, dword, dpos, H, n);
    /* every token's type is 0 (rt_dev_batch): type row 0 gathers the column sums, without a T-way contention
     */
    if (dtype) cu_colsum_acc(c, dtype, dout, H, b->T, H);
}

/* ---- glue ---- */

__global__ void add_kernel(float *out, const float *x, const float *y, size_t n)
{
    GRID_LOOP(i, n) out[i] = x[i] + y[i];
}

__global__ void axpy_kernel(float *y, const float *x, float a, size_t n)
{
    GRID_LOOP(i, n) y[i] += a * x[i];
}

__global__ void gather_rows_kernel(float *dst, const float *src, const int *rows, int width, size_t n)
{
    GRID_LOOP(i, n) dst[i] = src[(size_t)rows[i / width] * width + i % width];
}

__global__ void scatter_add_rows_kernel(float *dst, const float *src, const int *rows, int width, size_t n)
{
    GRID_LOOP(i, n) atomicAdd(dst + (size_t)rows[i / width] * width + i % width, src[i]);
}

__global__ void mask_mul_kernel(float *x, const float *mask, size_t n)
{
    GRID_LOOP(i, n) x[i] *= mask[i];
}

__global__ void scale_kernel(float *x, float factor, size_t n)
{
    GRID_LOOP(i, n) x[i] *= factor;
}

__global__ void add_bias_kernel(float *y, int ld, const float *b, int cols, size_t n)
{
    GRID_LOOP(i, n) y[i / cols * ld + i % cols] += b[i % cols];
}

/* a warp's double sum added into *out by its first lane */
__device__ __forceinline__ void warp_add_to(double s, double *out)
{
    s = warp_sum_d(s);
    if (threadIdx.x % 32 == 0) atomicAdd(out, s);
}

/* sum of squares in double: per thread, then the warp, then one atomic add a warp */
__global__ void sum_sq_kernel(const float *x, size_t n, double *out)
{
    double s = 0;
    GRID_LOOP(i, n) s += (double)x[i] * x[i];
    warp_add_to(s, out);
}

/* x scaled by its clipping factor (every thread reads the squared norm) and its new sum of squares */
__global__ void clip_scale_kernel(float *x, size_t n, const double *sq, double max_norm, double scale,
                                  double *out)
{
    const float f = rt_clip_factor(sqrt(*sq) / scale, max_norm);
    double s = 0;
    GRID_LOOP(i, n)
    {
        const float v = f != 1.0f ? x[i] * f : x[i];
        if (f != 1.0f) x[i] = v;
        s += (double)v * v;
    }
    warp_add_to(s, out);
}

__global__ void clip_gate_kernel(const double *sq, const double *loss, double max_norm, double scale,
                                 float *gate)
{
    rt_clip_gate(sq ? *sq : 0, sq != NULL, loss ? *loss : 0, loss != NULL, max_norm, scale, gate);
}

static void cu_add(rt_backend *be, float *out, const float *x, const float *y, size_t n)
{
    LAUNCH(cu_of(be), add_kernel, n, out, x, y, n);
}

static void cu_axpy(rt_backend *be, float *y, const float *x, float a, size_t n)
{
    LAUNCH(cu_of(be), axpy_kernel, n, y, x, a, n);
}

static void cu_gather_rows(rt_backend *be, float *dst, const float *src, const int *rows, int n_rows,
                           int width)
{
    const size_t n = (size_t)n_rows * width;
    LAUNCH(cu_of(be), gather_rows_kernel, n, dst, src, rows, width, n);
}

static void cu_scatter_add_rows(rt_backend *be, float *dst, const float *src, const int *rows, int n_rows,
                                int width)
{
    const size_t n = (size_t)n_rows * width;
    LAUNCH(cu_of(be), scatter_add_rows_kernel, n, dst, src, rows, width, n);
}

static void cu_mask_mul(rt_backend *be, float *x, const float *mask, size_t n)
{
    LAUNCH(cu_of(be), mask_mul_kernel, n, x, mask, n);
}

static void cu_scale(rt_backend *be, float *x, float factor, size_t n)
{
    LAUNCH(cu_of(be), scale_kernel, n, x, factor, n);
}

static void cu_add_bias(rt_backend *be, float *y, int ld, const float *b, int rows, int cols)
{
    const size_t n = (size_t)rows * cols;
    LAUNCH(cu_of(be), add_bias_kernel, n, y, ld, b, cols, n);
}

static void cu_sum_sq(rt_backend *be, const float *x, size_t n, double *acc)
{
    cu_ctx *c = cu_of(be);
    if (c->failure[0] || !n) return;
    sum_sq_kernel<<<cu_capped_blocks(c, n, 4), 256, 0, c->compute>>>(x, n, acc);
    CU_CHECK_LAUNCH(c, "sum_sq_kernel");
}

static void cu_clip_scale(rt_backend *be, float *x, size_t n, const double *sq, double max_norm, double scale,
                          double *sq_after)
{
    cu_ctx *c = cu_of(be);
    if (c->failure[0] || !n) return;
    clip_scale_kernel<<<cu_capped_blocks(c, n, 4), 256, 0, c->compute>>>(x, n, sq, max_norm, scale, sq_after);
    CU_CHECK_LAUNCH(c, "clip_scale_kernel");
}

static void cu_clip_gate(rt_backend *be, const double *sq, const double *loss, double max_norm, double scale,
                         float *gate)
{
    cu_ctx *c = cu_of(be);
    if (c->failure[0]) return;
    clip_gate_kernel<<<1, 1, 0, c->compute>>>(sq, loss, max_norm, scale, gate);
    CU_CHECK_LAUNCH(c, "clip_gate_kernel");
}

/* ---- mixture of experts (rt_kernels.h): a thread a token for routing ---- */

__global__ void moe_route_fwd_kernel(const float *logits, int *idx, float *w, int T, int E, int k)
{
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= T) return;
    const float *z = logits + (size_t)t * E;
    int *ix = idx + (size_t)t * k;
    for (int j = 0; j < k; j++) { /* the j-th largest not chosen yet, ties to the lower expert */
        int best = -1;
        for (int e = 0; e < E; e++) {
            bool taken = false;
            for (int q = 0; q < j; q++)
                taken |= ix[q] == e;
            if (!taken && (best < 0 || z[e] > z[best])) best = e;
        }
        ix[j] = best;
    }
    const float mx = z[ix[0]];
    float s = 0;
    for (int j = 0; j < k; j++)
        s += expf(z[ix[j]] - mx);
    for (int j = 0; j < k; j++)
        w[(size_t)t * k + j] = expf(z[ix[j]] - mx) / s;
}

__global__ void moe_route_bwd_kernel(const int *idx, const float *w, const float *dw, float *dlogits, int T,
                                     int E, int k)
{
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= T) return;
    float *dz = dlogits + (size_t)t * E;
    for (int e = 0; e < E; e++)
        dz[e] = 0.0f;
    float dot = 0;
    for (int j = 0; j < k; j++)
        dot += w[(size_t)t * k + j] * dw[(size_t)t * k + j];
    for (int j = 0; j < k; j++)
        dz[idx[(size_t)t * k + j]] = w[(size_t)t * k + j] * (dw[(size_t)t * k + j] - dot);
}

__global__ void moe_combine_fwd_kernel(const float *Y, const int *pos, const float *w, float *out, int k,
                                       int H, size_t n)
{
    GRID_LOOP(idx, n)
    {
        const size_t t = idx / H, i = idx % H;
        float s = 0;
        for (int j = 0; j < k; j++)
            s += w[t * k + j] * Y[(size_t)pos[t * k + j] * H + i];
        out[idx] = s;
    }
}

/* dY[pos[t, j]] = w[t, j] dout[t], one thread a value */
__global__ void moe_combine_bwd_dy_kernel(const int *pos, const float *w, const float *dout, float *dY, int k,
                                          int H, size_t n)
{
    GRID_LOOP(idx, n)
    {
        const size_t tj = idx / H, i = idx % H, t = tj / k;
        dY[(size_t)pos[tj] * H + i] = w[tj] * dout[t * H + i];
    }
}

/* dw[t, j] = dout[t] . Y[pos[t, j]], a warp a (t, j) */
__global__ void moe_combine_bwd_dw_kernel(const float *Y, const int *pos, const float *dout, float *dw, int T,
                                          int k, int H)
{
    const size_t tj = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    if (tj >= (size_t)T * k) return;
    const float *y = Y + (size_t)pos[tj] * H, *d = dout + tj / k * H;
    float s = 0;
    for (int i = lane; i < H; i += 32)
        s += d[i] * y[i];
    for (int o = 16; o > 0; o >>= 1)
        s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) dw[tj] = s;
}

/* The routed rows in expert order (rt_moe_group), in three launches: the counts (atomics), each expert's
 * first row (one thread: E is small), then a block an expert ranks its choices in choice order (a warp's
 * ballot, then the warps' totals) and places them: the host's stable counting sort, without the host. */
__global__ void moe_count_kernel(const int *idx, int R, int *counts)
{
    for (int r = blockIdx.x * blockDim.x + threadIdx.x; r < R; r += gridDim.x * blockDim.x)
        atomicAdd(&counts[idx[r]], 1);
}

__global__ void moe_starts_kernel(const int *counts, int E, int *starts)
{
    if (blockIdx.x || threadIdx.x) return;
    int s = 0;
    for (int e = 0; e < E; e++)
        starts[e] = s, s += counts[e];
}

#define MOE_PLACE_THREADS 256
__global__ void moe_place_kernel(const int *idx, int R, int k, const int *starts, int *order, int *pos)
{
    __shared__ int warp_total[MOE_PLACE_THREADS / 32];
    const int e = blockIdx.x, lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    int base = starts[e];
    for (int r0 = 0; r0 < R; r0 += MOE_PLACE_THREADS) {
        const int r = r0 + threadIdx.x, mine = r < R && idx[r] == e;
        const unsigned ballot = __ballot_sync(0xffffffffu, mine);
        if (lane == 0) warp_total[warp] = __popc(ballot);
        __syncthreads();
        int before = __popc(ballot & ((1u << lane) - 1u)), total = 0;
        for (int w = 0; w < MOE_PLACE_THREADS / 32; w++) {
            if (w < warp) before += warp_total[w];
            total += warp_total[w];
        }
        if (mine) {
            order[base + before] = r / k;
            pos[r] = base + before;
        }
        base += total;
        __syncthreads(); /* warp_total is rewritten by the next chunk */
    }
}

static void cu_moe_group(rt_backend *be, const int *idx, int R, int E, int k, int *order, int *pos,
                         int *counts)
{
    cu_ctx *c = cu_of(be);
    if (c->failure[0] || R < 1 || E < 1) return;
    if (c->moe_starts_cap < E) {
        CU_CHECK(c, cudaFree(c->moe_starts), "freeing the experts' first rows");
        c->moe_starts = NULL, c->moe_starts_cap = 0;
        CU_CHECK(c, cudaMalloc((void **)&c->moe_starts, (size_t)E * sizeof(int)), "the experts' first rows");
        if (c->failure[0]) return;
        c->moe_starts_cap = E;
    }
    CU_CHECK(c, cudaMemsetAsync(counts, 0, (size_t)E * sizeof(int), c->compute),
             "zeroing the experts' counts");
    LAUNCH(c, moe_count_kernel, (size_t)R, idx, R, counts);
    if (c->failure[0]) return;
    moe_starts_kernel<<<1, 1, 0, c->compute>>>(counts, E, c->moe_starts);
    CU_CHECK_LAUNCH(c, "moe_starts_kernel");
    moe_place_kernel<<<E, MOE_PLACE_THREADS, 0, c->compute>>>(idx, R, k, c->moe_starts, order, pos);
    CU_CHECK_LAUNCH(c, "moe_place_kernel");
}

static void cu_moe_route_fwd(rt_backend *be, const float *logits, int *idx, float *w, int T, int E, int k)
{
    LAUNCH(cu_of(be), moe_route_fwd_kernel, (size_t)T, logits, idx, w, T, E, k);
}

static void cu_moe_route_bwd(rt_backend *be, const int *idx, const float *w, const float *dw, float *dlogits,
                             int T, int E, int k)
{
    LAUNCH(cu_of(be), moe_route_bwd_kernel, (size_t)T, idx, w, dw, dlogits, T, E, k);
}

static void cu_moe_combine_fwd(rt_backend *be, const float *Y, const int *pos, const float *w, float *out,
                               int T, int k, int H)
{
    const size_t n = (size_t)T * H;
    LAUNCH(cu_of(be), moe_combine_fwd_kernel, n, Y, pos, w, out, k, H, n);
}

static void cu_moe_combine_bwd(rt_backend *be, const float *Y, const int *pos, const float *w,
                               const float *dout, float *dY, float *dw, int T, int k, int H)
{
    cu_ctx *c = cu_of(be);
    const size_t n = (size_t)T * k * H;
    LAUNCH(c, moe_combine_bwd_dy_kernel, n, pos, w, dout, dY, k, H, n);
    LAUNCH(c, moe_combine_bwd_dw_kernel, (size_t)T * k * 32, Y, pos, dout, dw, T, k, H);
}

void cu_table_elementwise(rt_backend *be)
{
    be->gelu_fwd = cu_gelu_fwd;
    be->gelu_bwd = cu_gelu_bwd;
    be->swiglu_fwd = cu_swiglu_fwd;
    be->swiglu_bwd = cu_swiglu_bwd;
    be->rope = cu_rope;
    be->add_2d = cu_add_2d;
    be->embedding_fwd = cu_embedding_fwd;
    be->embedding_bwd = cu_embedding_bwd;
    be->add = cu_add;
    be->axpy = cu_axpy;
    be->gather_rows = cu_gather_rows;
    be->scatter_add_rows = cu_scatter_add_rows;
    be->mask_mul = cu_mask_mul;
    be->scale = cu_scale;
    be->sum_sq = cu_sum_sq;
    be->clip_scale = cu_clip_scale;
    be->clip_gate = cu_clip_gate;
    be->add_bias = cu_add_bias;
    be->moe_route_fwd = cu_moe_route_fwd;
    be->moe_group = cu_moe_group;
    be->moe_route_bwd = cu_moe_route_bwd;
    be->moe_combine_fwd = cu_moe_combine_fwd;
    be->moe_combine_bwd = cu_moe_combine_bwd;
}
