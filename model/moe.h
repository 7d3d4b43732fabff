/* moe: routing statistics of a mixture-of-experts model (model_config.h's et_moe) under expert
 * parallelism: how many rows each expert rank processes, the imbalance the busiest rank imposes on its group
 * at every all-to-all, and the tokens a fixed capacity drops.
 *
 * An expert-parallel group of x ranks routes n = tokens x top_k rows per rank, x n in all, over E experts,
 * E / x per rank (experts j in [r E / x, (r + 1) E / x) on rank r). Expert j's count is drawn as a normal
 * approximation of the multinomial, n_j ~ N(x n p_j, x n p_j (1 - p_j)) clipped at 0, with p_j from the
 * routing distribution (uniform, or Zipf: p_j proportional to 1 / (j + 1)^skew). Dropless: rank r's load is
 * its experts' rows over the mean x n / x; with capacity factor c each expert computes exactly
 * c x n / E rows (padded; rows beyond are dropped), every load is 1.
 *
 * Contract: pure functions of the scenario, the tokens and a seed (splitmix streams, rng.h); no errors. */
#ifndef ET_MOE_H
#define ET_MOE_H

#include "batch_shape.h"
#include "scenario.h"

#define ET_MOE_MAX_EXPERT_RANKS 65536

/* One draw for one MoE layer and micro-batch: load[r] (r < expert degree) is rank r's rows over the mean
 * (1 with a fixed capacity or one expert rank); returns the fraction of rows dropped by the capacity (0
 * when dropless). `stream` seeds the draw. */
double et_moe_rank_loads(const et_scenario *s, double tokens_per_rank, unsigned long long stream,
                         double *load);

/* E[max_r load[r]] over 64 draws from the scenario's seed: what each expert op and all-to-all waits for in
 * the analytic estimate (1 without expert parallelism or with a fixed capacity). Cached per thread. */
double et_moe_imbalance(const et_scenario *s, const et_batch_shape *b);

/* Mean fraction of routed rows a fixed capacity drops (0 when dropless), over the same draws. */
double et_moe_dropped_fraction(const et_scenario *s, const et_batch_shape *b);

/* Tokens of a micro-batch of `tokens` (a data replica's) that one member of an expert group routes: all
 * of them, or its sequence-parallel share tokens / t when the experts are folded over the tensor ranks. */
double et_moe_routed_tokens(const et_scenario *s, double tokens);

/* Seconds of one all-to-all of `bytes` per rank over the expert-parallel group (collectives.h): each routed
 * row to its expert's rank, or under software.ep_dedup each token once to every GPU and node its experts are
 * on (et_moe_alltoall_copies). */
double et_moe_alltoall_time(const et_scenario *s, double bytes);

/* Under uniform routing, the other GPUs of the expert group one token's k experts are on, and the other
 * nodes, on average (*gpu_copies, *node_copies); returns the rows a token is routed as (k, or k x the
 * capacity factor), what the all-to-all's bytes count a token. */
double et_moe_alltoall_copies(const et_scenario *s, double *gpu_copies, double *node_copies);

#endif
