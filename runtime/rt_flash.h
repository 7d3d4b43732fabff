/* rt_flash: fused ("flash") attention's per-row math, written once for the host and the device: the CPU
 * backend runs these functions row by row, the CUDA kernels (runtime/cuda/cuda_flash.cu) a thread a row,
 * and test_backend_ops checks both against the double reference of the unfused kernels (rt_kernels.h's
 * rt_attention_fwd_d and rt_attention_bwd_d). Float arithmetic; an online softmax (Milakov and Gimelshein
 * 2018) so no row of probabilities is ever stored: the forward keeps each row's log-sum-exp, the backward
 * recomputes the probabilities from it and the row's delta = dctx . ctx (Dao et al. 2022, FlashAttention's
 * backward).
 *
 * Shapes (rt_attn.h): a query row's live keys are [j0, j1] of its sequence (causal: rt_attn_first(sh, i) to
 * i; otherwise the whole sequence); keys and values are rows of stride ld (a qkv row) from their head's
 * start; scale = 1 / sqrt(Dqk). A sink (gpt-oss) is one more logit in the denominator with no value. */
#ifndef ET_RT_FLASH_H
#define ET_RT_FLASH_H

#include <math.h>

#include "rt_attn.h"

/* The scores' scale, 1 / sqrt(Dqk). */
RT_ATTN_HD float rt_flash_scale(const rt_attn_shape *sh)
{
    return 1.0f / sqrtf((float)sh->Dqk);
}

/* The live keys of query row i of a sequence of l rows. */
RT_ATTN_HD void rt_flash_keys(const rt_attn_shape *sh, int causal, int i, int l, int *j0, int *j1)
{
    *j0 = causal ? rt_attn_first(sh, i) : 0;
    *j1 = causal ? i : l - 1;
}

/* The query rows whose live keys hold key j (the transpose of rt_flash_keys). */
RT_ATTN_HD void rt_flash_queries(const rt_attn_shape *sh, int causal, int j, int l, int *i0, int *i1)
{
    *i0 = causal ? j : 0;
    *i1 = causal && sh->window > 0 && j + sh->window - 1 < l - 1 ? j + sh->window - 1 : l - 1;
}

RT_ATTN_HD float rt_flash_dot(const float *a, const float *b, int n)
{
    float s = 0;
    for (int d = 0; d < n; d++)
        s += a[d] * b[d];
    return s;
}

/* One query row q forward: out[Dv] = softmax(scale q k_j, sink) v_j over j in [j0, j1] (k_j = k + j ld,
 * v_j = v + j ld); returns the row's log-sum-exp (the sink's exp included; has_sink 0: none). */
RT_ATTN_HD float rt_flash_fwd_row(const float *q, const float *k, const float *v, int ld, int j0, int j1,
                                  int Dqk, int Dv, float scale, int has_sink, float sink, float *out)
{
    float m = has_sink ? sink : -INFINITY, sum = has_sink ? 1.0f : 0.0f;
    for (int d = 0; d < Dv; d++)
        out[d] = 0;
    for (int j = j0; j <= j1; j++) {
        const float s = scale * rt_flash_dot(q, k + (long long)j * ld, Dqk);
        if (s > m) { /* a new maximum: what was summed is rescaled to it */
            const float c = expf(m - s);
            sum *= c;
            for (int d = 0; d < Dv; d++)
                out[d] *= c;
            m = s;
        }
        const float p = expf(s - m);
        const float *vj = v + (long long)j * ld;
        sum += p;
        for (int d = 0; d < Dv; d++)
            out[d] += p * vj[d];
    }
    for (int d = 0; d < Dv; d++)
        out[d] /= sum;
    return m + logf(sum);
}

/* One query row's gradient: dq[Dqk] += scale sum_j p_j (dout . v_j - delta) k_j, p_j = exp(scale q k_j - lse)
 * (delta = dout . out of the forward). */
RT_ATTN_HD void rt_flash_dq_row(const float *q, const float *k, const float *v, int ld, int j0, int j1,
                                int Dqk, int Dv, float scale, float lse, float delta, const float *dout,
                                float *dq)
{
    for (int j = j0; j <= j1; j++) {
        const float *kj = k + (long long)j * ld;
        const float p = expf(scale * rt_flash_dot(q, kj, Dqk) - lse);
        const float ds = p * (rt_flash_dot(dout, v + (long long)j * ld, Dv) - delta) * scale;
        for (int d = 0; d < Dqk; d++)
            dq[d] += ds * kj[d];
    }
}

/* One key row's gradients from one query head: over the query rows i in [i0, i1] (q_i = q + i ld, dout_i =
 * dout + i lc, lse_i = lse[i A], delta_i = delta[i A]): dv[Dv] += p_ij dout_i, dk[Dqk] += scale p_ij
 * (dout_i . v_j - delta_i) q_i. */
RT_ATTN_HD void rt_flash_dkv_row(const float *kj, const float *vj, const float *q, int ld, const float *dout,
                                 int lc, const float *lse, const float *delta, int A, int i0, int i1, int Dqk,
                                 int Dv, float scale, float *dk, float *dv)
{
    for (int i = i0; i <= i1; i++) {
        const float *qi = q + (long long)i * ld, *di = dout + (long long)i * lc;
        const float p = expf(scale * rt_flash_dot(qi, kj, Dqk) - lse[(long long)i * A]);
        const float ds = p * (rt_flash_dot(di, vj, Dv) - delta[(long long)i * A]) * scale;
        for (int d = 0; d < Dv; d++)
            dv[d] += p * di[d];
        for (int d = 0; d < Dqk; d++)
            dk[d] += ds * qi[d];
    }
}

/* A row's share of its head's sink gradient: d loss / d sink = -p_sink delta. */
RT_ATTN_HD float rt_flash_dsink(float sink, float lse, float delta)
{
    return -expf(sink - lse) * delta;
}

#endif
