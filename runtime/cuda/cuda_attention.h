/* Attention's products as one description (cuda_attention.cu). Column-major, as cuBLAS: C[m, n] = alpha op(A)
 * op(B) + beta C, per sequence (length l) and head h; each of m, n, k is l or D. */
#ifndef ET_CUDA_ATTENTION_H
#define ET_CUDA_ATTENTION_H

#include "cuda_internal.h"

/* An operand of the products: rows of the packed tokens (qkv, ctx), or a head's probabilities */
typedef struct attn_operand {
    const float *base;
    int probs;           /* 1: base + A (sum of earlier l^2) + h l l, leading dimension l */
    int ld, head_stride; /* rows: base + o ld + (h / head_div) head_stride, leading dimension ld */
    int head_div;        /* group for K and V, 1 for Q and ctx */
} attn_operand;

/* One product kind, column-major: C[m, n] = alpha op(A) op(B) + beta C; each of m, n, k is l or D */
typedef struct attn_product {
    bool ta, tb;
    bool m_l, n_l, k_l;
    float alpha, beta;
    bool accumulate_group; /* grouped-query: the group's first head writes, the others add */
    attn_operand a, b, c;
} attn_product;

/* operand x of sequence s (first row o, length l, probabilities from p0) and head h */
__host__ __device__ static inline const float *operand_at(const attn_operand *x, int o, int l, long long p0,
                                                          int h)
{
    if (x->probs) return x->base + p0 + (long long)h * l * l;
    return x->base + (long long)o * x->ld + (long long)(h / x->head_div) * x->head_stride;
}

__host__ __device__ static inline int ld_of(const attn_operand *x, int l)
{
    return x->probs ? l : x->ld;
}

#endif
