/* batch: the shape (B, T, Q, P; see graph.h) of one micro-batch of a scenario.
 *
 * Contract: et_batch_expected() gives the expected shape of one GPU's micro-batch of `local` sequences
 * drawn from the scenario's length distribution and sampling scheme, computed unpadded (real lengths) or
 * padded to seq_len as the scenario says. Shapes of concrete sampled batches: et_sampler_shapes(). */
#ifndef ET_BATCH_H
#define ET_BATCH_H

#include "batch_shape.h"
#include "scenario.h"

et_batch_shape et_batch_expected(const et_scenario *s);

#endif
