/* tensor_train: linear and embedding layers stored as tensor-train (TT) cores, CoMERA-style.
 *
 * A linear layer of n_in x n_out is factorised n_in = n_1...n_p (input factors) and n_out = m_1...m_q
 * (output factors) into d = p + q cores, input factors then output factors; core k has shape
 * r_{k-1} x dim_k x r_k with r_0 = r_d = 1 and r_k = min(R, prod(dims up to k), prod(dims after k)).
 * (The TT of the transposed matrix is the same chain reversed: 3072 x 768 as 16x16x12 by 8x8x12.)
 * An embedding table is a TT-matrix with one core per (row factor, column factor) pair, core k of shape
 * r_{k-1} x a_k x b_k x r_k; rows are padded up to the product of the row factors.
 *
 * Applying a TT linear layer to T tokens is a tensor network of the input X[T, n_1..n_p] and the cores;
 * the contraction order changes the FLOPs by orders of magnitude. et_tt_plan_best() finds the cheapest
 * pairwise order exactly (dynamic programming over subsets of the network) for a token count; the cost
 * of a fixed order is affine in T, returned as fixed + per_token * T. Contract: pure functions; shapes
 * hold at most ET_TT_MAX_CORES cores; errors are -1 with *err filled. */
#ifndef ET_TENSOR_TRAIN_H
#define ET_TENSOR_TRAIN_H

#include <stddef.h>

#include "et_error.h"

#define ET_TT_MAX_CORES 10

typedef struct et_tt_shape {
    int d_in, d_out;
    int dims[ET_TT_MAX_CORES]; /* input factors then output factors (linear), or row factors (embedding) */
    int cols[ET_TT_MAX_CORES]; /* embedding only: column factors */
    int rank[ET_TT_MAX_CORES + 1]; /* r_0..r_d */
    int embedding;                 /* 1 for a TT-matrix embedding */
} et_tt_shape;

/* Builds a linear layer's TT with maximum rank R (ranks capped as above). */
int et_tt_linear(et_tt_shape *tt, const int *in_factors, int d_in, const int *out_factors, int d_out,
                 int max_rank, et_error *err);
/* Builds an embedding TT-matrix: rows = prod(row_factors) >= vocabulary, cols = prod(col_factors). */
int et_tt_embedding(et_tt_shape *tt, const int *row_factors, const int *col_factors, int d, int max_rank,
                    et_error *err);

double et_tt_params(const et_tt_shape *tt);
double et_tt_core_params(const et_tt_shape *tt, int k);
/* Input and output sizes of a linear TT (prod of input factors, prod of output factors). */
double et_tt_in(const et_tt_shape *tt);
double et_tt_out(const et_tt_shape *tt);

/* One contraction step as a product (m x k) (k x n), its sizes at one token; `tokens` says which side also
 * carries the tokens (0: m, 1: n, -1: neither, a step of cores alone). */
typedef struct et_tt_step {
    double m, n, k;
    int tokens;
} et_tt_step;

/* A pairwise contraction order for a linear TT applied to T tokens. Tensor 0 is the input X, tensor
 * k + 1 is core k; step s contracts left[s] with right[s] (tensor ids; merged tensors get ids d+1, d+2..). */
typedef struct et_tt_plan {
    int steps;
    int left[2 * ET_TT_MAX_CORES], right[2 * ET_TT_MAX_CORES];
    double flops_fixed;                     /* FLOPs of steps that do not involve the tokens */
    double flops_per_token;                 /* FLOPs per token of the other steps */
    double largest_m, largest_n, largest_k; /* GEMM view of the most expensive step (for efficiency) */
    et_tt_step step[ET_TT_MAX_CORES];       /* every step as a product */
    double intermediate_per_token; /* elements per token of all token-carrying intermediates (kept for
                                      backward) */
} et_tt_plan;

/* Elements etrun's layout copies read and write in one application of a linear TT layer (tt_network.h's
 * storage orders): each step permutes the operands it cannot read as matrices (and, backward, adds or
 * writes their gradients back), the last result is laid out as the output and, backward, the output's
 * gradient as the last result's; fixed and per-token parts. */
typedef struct et_tt_copies {
    double fwd_fixed, fwd_per_token, bwd_fixed, bwd_per_token;
} et_tt_copies;
void et_tt_plan_copies(const et_tt_shape *tt, const et_tt_plan *p, et_tt_copies *c);

/* Cheapest order for `tokens` (exact); and the naive one: X times core 0, then core 1, ... left to right. */
int et_tt_plan_best(const et_tt_shape *tt, double tokens, et_tt_plan *best);
void et_tt_plan_naive(const et_tt_shape *tt, et_tt_plan *naive);
/* FLOPs of a plan for a token count. */
double et_tt_plan_flops(const et_tt_plan *p, double tokens);

/* Writes the order as nested products of X (the input) and cores G0..G(d-1), e.g. "((X G0) (G1 G2))". */
void et_tt_plan_describe(const et_tt_plan *p, const et_tt_shape *tt, char *buf, size_t size);

/* Embedding lookup: FLOPs per token to rebuild one row from the cores (left to right). */
double et_tt_embedding_flops_per_token(const et_tt_shape *tt);

#endif
