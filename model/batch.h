/* batch: the shape (B, T, Q, P; see graph.h) of one micro-batch of a scenario.
 *
 * Contract: et_batch_expected() gives the expected shape of one GPU's micro-batch (its context-parallel
 * share) of `local` sequences
 * drawn from the scenario's length distribution and sampling scheme, computed unpadded (real lengths) or
 * padded (to seq_len, or to each micro-batch's longest) as the scenario says (et_batch_shape_unknown(), all
 * NaN, when out of memory). Shapes of concrete sampled batches: et_sampler_shapes(). */
#ifndef ET_BATCH_H
#define ET_BATCH_H

#include "batch_shape.h"
#include "scenario.h"

et_batch_shape et_batch_expected(const et_scenario *s);

/* The share of a padded micro-batch's tokens that are padding: 1 - E[L] / seq_len padded to seq_len, 1 -
 * local E[L] / E[T] padded to the batch's longest (data.pad_to); what padding would cost when unpadded. */
double et_batch_padding_fraction(const et_scenario *s);

/* The largest micro-batch the sampler's constraints allow: `local` rows of seq_len tokens each (a padded
 * batch; unpadded or packed batches never hold more tokens, nor a larger sum of squared lengths, since
 * the squares of lengths adding to at most seq_len add to at most seq_len^2). Activation memory is sized
 * for it, so the memory verdict is a bound, not the luck of a seed. */
et_batch_shape et_batch_worst_case(const et_scenario *s);

/* One rank's share of a micro-batch under context parallelism c (parallelism.context): the same sequences,
 * T/c of their tokens, Q/c of the attention (its queries against every key, causal work balanced by the
 * two-chunk split), P/c predictions. Unchanged when c is 1. */
et_batch_shape et_batch_context_share(const et_scenario *s, et_batch_shape b);

#endif
