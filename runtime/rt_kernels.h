/* rt_kernels: the CPU reference kernels of etrun, each with its backward. Built twice from one source:
 * float (suffix _f, training) and double (suffix _d, gradient checks against finite differences).
 *
 * Shape letters as in model/graph.h: T tokens (rows), H hidden, F ffn, A heads, V vocabulary, P scored
 * positions; attention's heads, key/value heads and widths are an rt_attn_shape (rt_attn.h). Matrices are
 * row-major; a linear layer's weight W is [n_out, n_in] (y = x W^T + b). Variable-length attention: sequences
 * are packed back to back (offsets[0..B], offsets[B] = T); every sequence attends only within itself,
 * causally when `causal`. Kernels never allocate unless stated; gradients are accumulated (+=) into dW/db/dx
 * where noted so shared inputs can sum contributions. */
#ifndef ET_RT_KERNELS_H
#define ET_RT_KERNELS_H

#include <stddef.h>

#include "rt_attn.h"

#define RT_DECLARE(REAL, S)                                                                                  \
    /* y[T, n_out] = x[T, n_in] W^T + b (b may be NULL) */                                                   \
    void rt_linear_fwd##S(const REAL *x, const REAL *W, const REAL *b, REAL *y, int T, int n_in, int n_out); \
    /* dx[T, n_in] += dy W;  dW += dy^T x;  db += sum_rows dy  (any of dx, dW, db may be NULL) */            \
    void rt_linear_bwd##S(const REAL *x, const REAL *W, const REAL *dy, REAL *dx, REAL *dW, REAL *db, int T, \
                          int n_in, int n_out);                                                              \
    /* y = LN(x) * g + b over rows of n; keeps mean and rstd per row */                                      \
    void rt_layernorm_fwd##S(const REAL *x, const REAL *g, const REAL *b, REAL *y, REAL *mean, REAL *rstd,   \
                             int T, int n);                                                                  \
    /* sum = x + r and y = LN(sum) * g + b in one pass over each row (a residual add and the layer norm      \
     * after it); keeps sum, mean and rstd for the backward */                                               \
    void rt_add_layernorm_fwd##S(const REAL *x, const REAL *r, REAL *sum, const REAL *g, const REAL *b,      \
                                 REAL *y, REAL *mean, REAL *rstd, int T, int n);                             \
    /* dx += d(LN)/dx^T dy; dg += ...; db += ... */                                                          \
    void rt_layernorm_bwd##S(const REAL *x, const REAL *g, const REAL *mean, const REAL *rstd,               \
                             const REAL *dy, REAL *dx, REAL *dg, REAL *db, int T, int n);                    \
    /* tanh-approximated GELU, elementwise over n values; bwd: dx = dy * gelu'(x) (overwrites) */            \
    void rt_gelu_fwd##S(const REAL *x, REAL *y, size_t n);                                                   \
    void rt_gelu_bwd##S(const REAL *x, const REAL *dy, REAL *dx, size_t n);                                  \
    /* attention in three kernels, as the cost model's ops, of shape sh (rt_attn.h): scores = Q K^T /        \
     * sqrt(Dqk) into probs (A * sum(l^2) values, sequence by sequence, head by head), softmax in place      \
     * (causal mask, sliding window; sinks[A] a logit per head in each row's denominator, NULL: none),       \
     * ctx[T, A Dv] = probs V */                                                                             \
    void rt_attn_scores_fwd##S(const REAL *qkv, REAL *probs, const int *offsets, int B,                      \
                               const rt_attn_shape *sh);                                                     \
    void rt_attn_softmax_fwd##S(REAL *probs, const REAL *sinks, const int *offsets, int B,                   \
                                const rt_attn_shape *sh, int causal);                                        \
    void rt_attn_context_fwd##S(const REAL *qkv, const REAL *probs, REAL *ctx, const int *offsets, int B,    \
                                const rt_attn_shape *sh);                                                    \
    /* backward: context.bwd writes dV into dqkv and dprobs; softmax.bwd turns dprobs into dscores in place  \
     * (scaled by 1/sqrt(Dqk)) and adds the sinks' gradient into dsinks[A] (NULL: none); scores.bwd writes   \
     * dQ and dK into dqkv (every row of the batch written) */                                               \
    void rt_attn_context_bwd##S(const REAL *qkv, const REAL *probs, const REAL *dctx, REAL *dqkv,            \
                                REAL *dprobs, const int *offsets, int B, const rt_attn_shape *sh);           \
    void rt_attn_softmax_bwd##S(const REAL *probs, REAL *dprobs, REAL *dsinks, const int *offsets, int B,    \
                                const rt_attn_shape *sh);                                                    \
    void rt_attn_scores_bwd##S(const REAL *qkv, const REAL *dscores, REAL *dqkv, const int *offsets, int B,  \
                               const rt_attn_shape *sh);                                                     \
    /* the three composed: qkv[T, ld] -> ctx[T, A Dv]; scratch holds A * sum(l^2) values */                  \
    void rt_attention_fwd##S(const REAL *qkv, const REAL *sinks, REAL *probs, REAL *ctx, const int *offsets, \
                             int B, const rt_attn_shape *sh, int causal);                                    \
    /* dqkv[T, ld] = gradient of the attention wrt qkv given dctx (overwrites dqkv); dsinks += */            \
    void rt_attention_bwd##S(const REAL *qkv, const REAL *probs, const REAL *dctx, REAL *dqkv, REAL *dsinks, \
                             REAL *scratch, const int *offsets, int B, const rt_attn_shape *sh);             \
    /* out[T, H] = sum of table rows: word[tokens], position[pos within sequence] (if pos is not NULL), type \
     * (if not NULL) */                                                                                      \
    void rt_embedding_fwd##S(const int *tokens, const int *positions, const int *types, const REAL *word,    \
                             const REAL *pos, const REAL *type, REAL *out, int T, int H);                    \
    void rt_embedding_bwd##S(const int *tokens, const int *positions, const int *types, const REAL *dout,    \
                             REAL *dword, REAL *dpos, REAL *dtype, int T, int H);                            \
    /* RMSNorm (Zhang and Sennrich 2019): y = x * rstd * g over rows of n, rstd = 1 / sqrt(mean(x^2) +       \
     * 1e-5), kept per row; bwd: dx += ..., dg += ... */                                                     \
    void rt_rmsnorm_fwd##S(const REAL *x, const REAL *g, REAL *y, REAL *rstd, int T, int n);                 \
    void rt_rmsnorm_bwd##S(const REAL *x, const REAL *g, const REAL *rstd, const REAL *dy, REAL *dx,         \
                           REAL *dg, int T, int n);                                                          \
    /* rotary positions (Su et al. 2021), in place on `heads` runs of R values in each of T rows of x        \
     * (row stride ld, run h at h * stride): pairs (i, i + R/2) turn by positions[t] x base^(-2i/R);         \
     * `inverse` turns them back (the backward of an orthogonal map is its transpose). q and k of a qkv row: \
     * heads A + KV, stride and R the head width; latent attention's rotary parts: R of each Dqk */          \
    void rt_rope##S(REAL *x, const int *positions, int T, int ld, int heads, int stride, int R, double base, \
                    int inverse);                                                                            \
    /* SwiGLU (Shazeer 2020): u[T, 2F] holds gate | up per row, y[T, F] = silu(gate) * up; bwd writes        \
     * du[T, 2F] (overwrites) from dy */                                                                     \
    void rt_swiglu_fwd##S(const REAL *u, REAL *y, int T, int F);                                             \
    void rt_swiglu_bwd##S(const REAL *u, const REAL *dy, REAL *du, int T, int F);                            \
    /* mixture of experts (dropless top-k routing, Mixtral's form): route picks each token's k largest of    \
     * logits[T, E] (ties to the lower expert) into idx[T, k] and weights w[T, k] = softmax over the k       \
     * chosen logits; its backward turns dw[T, k] into dlogits[T, E] (overwrites; 0 off the chosen).         \
     * combine: out[t] = sum_j w[t, j] Y[pos[t, j]] over rows of H (overwrites); its backward writes         \
     * dY[pos[t, j]] = w[t, j] dout[t] (every row of Y is some pos) and dw[t, j] = dout[t] . Y[pos[t, j]] */ \
    void rt_moe_route_fwd##S(const REAL *logits, int *idx, REAL *w, int T, int E, int k);                    \
    void rt_moe_route_bwd##S(const int *idx, const REAL *w, const REAL *dw, REAL *dlogits, int T, int E,     \
                             int k);                                                                         \
    void rt_moe_combine_fwd##S(const REAL *Y, const int *pos, const REAL *w, REAL *out, int T, int k,        \
                               int H);                                                                       \
    void rt_moe_combine_bwd##S(const REAL *Y, const int *pos, const REAL *w, const REAL *dout, REAL *dY,     \
                               REAL *dw, int T, int k, int H);                                               \
    /* softmax cross-entropy of logits[P, V] against targets (negative targets are skipped); returns the     \
     * summed loss and writes dlogits = (softmax - onehot) / norm */                                         \
    double rt_cross_entropy##S(const REAL *logits, const int *targets, REAL *dlogits, int P, int V,          \
                               double norm);

RT_DECLARE(float, _f)
RT_DECLARE(double, _d)

/* The routed rows in expert order (a stable counting sort of the R = T k choices idx[R] over E experts):
 * counts[e] the rows of expert e, order[row] the token of each row (choice r's token r / k), pos[r] the row
 * of choice r; rows of one expert in the order of their choices. (rt_kernels_fast.c) */
void rt_moe_group(const int *idx, int R, int E, int k, int *order, int *pos, int *counts);

#endif
