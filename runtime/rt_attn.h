/* rt_attn: the shape of one attention, shared by the reference kernels (rt_kernels.h), the backends
 * (rt_backend.h) and the executors. A query heads over KV key/value heads (KV divides A; query head h reads
 * key/value head h / (A / KV)); each query and key Dqk values wide, each value Dv wide. A qkv row is
 * q (A Dqk) | k (KV Dqk) | v (KV Dv); a context row is A Dv.
 *   multi-head and grouped-query attention: Dqk = Dv = the head width (hidden / heads, or model.head_dim);
 *   latent attention (DeepSeek-V2's MLA): Dqk = the no-position part + the rotary part, Dv the value width.
 * The scores are scaled by 1 / sqrt(Dqk). `window` > 0 limits a causal row i to the `window` positions up to
 * it (j > i - window: gpt-oss's sliding windows, Mistral's); 0 attends to the whole prefix (or sequence).
 * Attention sinks (gpt-oss) are a learned logit per head in each row's softmax denominator with no value: a
 * parameter, passed beside the shape. */
#ifndef ET_RT_ATTN_H
#define ET_RT_ATTN_H

typedef struct rt_attn_shape {
    int A, KV, Dqk, Dv, window;
} rt_attn_shape;

#ifdef __CUDACC__
#define RT_ATTN_HD __host__ __device__ static inline
#else
#define RT_ATTN_HD static inline
#endif

/* a qkv row's width, and where its keys and values start */
RT_ATTN_HD int rt_attn_ld(const rt_attn_shape *s)
{
    return (s->A + s->KV) * s->Dqk + s->KV * s->Dv;
}
RT_ATTN_HD int rt_attn_k_offset(const rt_attn_shape *s)
{
    return s->A * s->Dqk;
}
RT_ATTN_HD int rt_attn_v_offset(const rt_attn_shape *s)
{
    return (s->A + s->KV) * s->Dqk;
}
/* a context row's width */
RT_ATTN_HD int rt_attn_ctx_width(const rt_attn_shape *s)
{
    return s->A * s->Dv;
}
/* the first live column of causal row i (0 without a window) */
RT_ATTN_HD int rt_attn_first(const rt_attn_shape *s, int i)
{
    return s->window > 0 && i - s->window + 1 > 0 ? i - s->window + 1 : 0;
}

#endif
