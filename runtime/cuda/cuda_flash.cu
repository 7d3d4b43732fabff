/* Fused attention (rt_backend.h's attn_flash_fwd and attn_flash_bwd): rt_flash.h's per-row math, a thread a
 * (row, head), so no probability is stored: the forward writes each row's context and log-sum-exp; the
 * backward a row's delta (dctx . ctx), its query gradient and its share of the sink's gradient, then in a
 * second launch a thread a (key row, key/value head) sums its key and value gradients over the query rows
 * and heads that read it (no atomics but the sinks'). Every sequence of the micro-batch and every head in
 * one launch; a thread finds its sequence by a binary search of the offsets on the device.
 *
 * fp32 on the CUDA cores, the same arithmetic as the CPU backend's rows, each thread's sums in its own memory
 * (heads up to 256 wide): correct first, not yet fast (a tiled kernel on the tensor cores is what would be;
 * docs/runtime.md). */
#include "cuda_internal.h"
#include "rt_flash.h"

#define FLASH_THREADS 128
/* the widest head these kernels accumulate in a thread's own memory (local arrays, cached in L1, not a
 * write-through global row a key); wider heads are refused by name */
#define FLASH_MAX_D 256

/* the sequence holding row t: the last s with offsets[s] <= t */
__device__ static int flash_seq_of(const int *offsets, int B, int t)
{
    int lo = 0, hi = B - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (offsets[mid] <= t)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* thread (t, h), t fastest: the rows of one head side by side read the same keys */
__global__ void flash_fwd_kernel(const float *qkv, const float *sinks, float *ctx, float *lse,
                                 const int *offsets, int B, int T, rt_attn_shape sh, int causal, float scale)
{
    const long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (idx >= (long long)T * sh.A) return;
    const int t = (int)(idx % T), h = (int)(idx / T), g = h / (sh.A / sh.KV);
    const int s = flash_seq_of(offsets, B, t), o = offsets[s], l = offsets[s + 1] - o, ld = rt_attn_ld(&sh);
    int j0, j1;
    rt_flash_keys(&sh, causal, t - o, l, &j0, &j1);
    const float *row0 = qkv + (long long)o * ld;
    float out[FLASH_MAX_D];
    lse[(long long)t * sh.A + h] =
        rt_flash_fwd_row(qkv + (long long)t * ld + h * sh.Dqk, row0 + rt_attn_k_offset(&sh) + g * sh.Dqk,
                         row0 + rt_attn_v_offset(&sh) + g * sh.Dv, ld, j0, j1, sh.Dqk, sh.Dv, scale,
                         sinks != NULL, sinks ? sinks[h] : 0.0f, out);
    float *c = ctx + (long long)t * rt_attn_ctx_width(&sh) + h * sh.Dv;
    for (int d = 0; d < sh.Dv; d++)
        c[d] = out[d];
}

/* thread (t, h): delta, the query's gradient (written over), the sink's share */
__global__ void flash_dq_kernel(const float *qkv, const float *sinks, const float *ctx, const float *lse,
                                const float *dctx, float *dqkv, float *dsinks, float *delta,
                                const int *offsets, int B, int T, rt_attn_shape sh, int causal, float scale)
{
    const long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (idx >= (long long)T * sh.A) return;
    const int t = (int)(idx % T), h = (int)(idx / T), g = h / (sh.A / sh.KV);
    const int s = flash_seq_of(offsets, B, t), o = offsets[s], l = offsets[s + 1] - o, ld = rt_attn_ld(&sh);
    const long long c = (long long)t * rt_attn_ctx_width(&sh) + h * sh.Dv, r = (long long)t * sh.A + h;
    const float dl = rt_flash_dot(dctx + c, ctx + c, sh.Dv);
    delta[r] = dl;
    float dq[FLASH_MAX_D];
    for (int d = 0; d < sh.Dqk; d++)
        dq[d] = 0;
    int j0, j1;
    rt_flash_keys(&sh, causal, t - o, l, &j0, &j1);
    const float *row0 = qkv + (long long)o * ld;
    rt_flash_dq_row(qkv + (long long)t * ld + h * sh.Dqk, row0 + rt_attn_k_offset(&sh) + g * sh.Dqk,
                    row0 + rt_attn_v_offset(&sh) + g * sh.Dv, ld, j0, j1, sh.Dqk, sh.Dv, scale, lse[r], dl,
                    dctx + c, dq);
    float *out = dqkv + (long long)t * ld + h * sh.Dqk;
    for (int d = 0; d < sh.Dqk; d++)
        out[d] = dq[d];
    if (sinks && dsinks) atomicAdd(&dsinks[h], rt_flash_dsink(sinks[h], lse[r], dl));
}

/* thread (t, g): key row t of key/value head g, its gradients (written over) from every query head of its
 * group and every query row that reads it */
__global__ void flash_dkv_kernel(const float *qkv, const float *lse, const float *dctx, float *dqkv,
                                 const float *delta, const int *offsets, int B, int T, rt_attn_shape sh,
                                 int causal, float scale)
{
    const long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (idx >= (long long)T * sh.KV) return;
    const int t = (int)(idx % T), g = (int)(idx / T), group = sh.A / sh.KV;
    const int s = flash_seq_of(offsets, B, t), o = offsets[s], l = offsets[s + 1] - o, ld = rt_attn_ld(&sh);
    const int lc = rt_attn_ctx_width(&sh), ko = rt_attn_k_offset(&sh), vo = rt_attn_v_offset(&sh);
    float dk[FLASH_MAX_D], dv[FLASH_MAX_D];
    for (int d = 0; d < sh.Dqk; d++)
        dk[d] = 0;
    for (int d = 0; d < sh.Dv; d++)
        dv[d] = 0;
    int i0, i1;
    rt_flash_queries(&sh, causal, t - o, l, &i0, &i1);
    const float *row0 = qkv + (long long)o * ld, *kj = qkv + (long long)t * ld + ko + g * sh.Dqk;
    const float *vj = qkv + (long long)t * ld + vo + g * sh.Dv;
    for (int h = g * group; h < (g + 1) * group; h++)
        rt_flash_dkv_row(kj, vj, row0 + h * sh.Dqk, ld, dctx + (long long)o * lc + h * sh.Dv, lc,
                         lse + (long long)o * sh.A + h, delta + (long long)o * sh.A + h, sh.A, i0, i1, sh.Dqk,
                         sh.Dv, scale, dk, dv);
    float *gk = dqkv + (long long)t * ld + ko + g * sh.Dqk, *gv = dqkv + (long long)t * ld + vo + g * sh.Dv;
    for (int d = 0; d < sh.Dqk; d++)
        gk[d] = dk[d];
    for (int d = 0; d < sh.Dv; d++)
        gv[d] = dv[d];
}

static bool flash_width_ok(cu_ctx *c, const rt_attn_shape *sh)
{
    if (sh->Dqk <= FLASH_MAX_D && sh->Dv <= FLASH_MAX_D) return true;
    cu_fail(c, __FILE__, __LINE__, "flash attention", "a head wider than 256",
            "the fused kernels accumulate a head in a thread's own memory: run attention \"standard\"");
    return false;
}

static unsigned flash_blocks(long long n)
{
    return (unsigned)((n + FLASH_THREADS - 1) / FLASH_THREADS);
}

static void cu_attn_flash_fwd(rt_backend *be, const float *qkv, const float *sinks, float *ctx, float *lse,
                              const rt_dev_batch *b, const rt_attn_shape *sh, bool causal)
{
    cu_ctx *c = cu_of(be);
    if (c->failure[0] || b->T < 1 || !flash_width_ok(c, sh)) return;
    flash_fwd_kernel<<<flash_blocks((long long)b->T * sh->A), FLASH_THREADS, 0, c->compute>>>(
        qkv, sinks, ctx, lse, b->offsets, b->B, b->T, *sh, causal, rt_flash_scale(sh));
    CU_CHECK_LAUNCH(c, "flash_fwd_kernel");
}

static void cu_attn_flash_bwd(rt_backend *be, const float *qkv, const float *sinks, const float *ctx,
                              const float *lse, const float *dctx, float *dqkv, float *dsinks, float *delta,
                              const rt_dev_batch *b, const rt_attn_shape *sh, bool causal)
{
    cu_ctx *c = cu_of(be);
    if (c->failure[0] || b->T < 1 || !flash_width_ok(c, sh)) return;
    const float scale = rt_flash_scale(sh);
    flash_dq_kernel<<<flash_blocks((long long)b->T * sh->A), FLASH_THREADS, 0, c->compute>>>(
        qkv, sinks, ctx, lse, dctx, dqkv, dsinks, delta, b->offsets, b->B, b->T, *sh, causal, scale);
    CU_CHECK_LAUNCH(c, "flash_dq_kernel");
    flash_dkv_kernel<<<flash_blocks((long long)b->T * sh->KV), FLASH_THREADS, 0, c->compute>>>(
        qkv, lse, dctx, dqkv, delta, b->offsets, b->B, b->T, *sh, causal, scale);
    CU_CHECK_LAUNCH(c, "flash_dkv_kernel");
}

void cu_table_flash(rt_backend *be)
{
    be->attn_flash_fwd = cu_attn_flash_fwd;
    be->attn_flash_bwd = cu_attn_flash_bwd;
}
