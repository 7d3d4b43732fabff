/* batch: the shape (B, T, Q, P; see graph.h) of one micro-batch of a scenario.
 *
 * Contract: et_batch_expected() gives the expected shape of one GPU's micro-batch of `local` sequences
 * drawn from the scenario's length distribution, computed unpadded (real lengths) or padded to seq_len as
 * the scenario says. et_batch_from_lengths() gives the exact shape of a concrete list of lengths. */
#ifndef ET_BATCH_H
#define ET_BATCH_H

#include "graph.h"
#include "scenario.h"

et_batch_shape et_batch_expected(const et_scenario *s);
et_batch_shape et_batch_from_lengths(const et_scenario *s, const int *lengths, int count);

#endif
