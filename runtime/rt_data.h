/* rt_data: the batches etrun trains on, identical whatever the number of ranks.
 *
 * Every step draws the global batch as chunks of `local` sequences: chunk c holds the lengths the sampling
 * library (model/sampling.h) draws for its rank c, and chunk c is micro-batch (c mod accum) of rank
 * (c / accum). Tokens come from a synthetic source with learnable structure (each sequence is an
 * arithmetic progression modulo the vocabulary with a random start and a random stride of 1..3) or from a
 * pre-tokenized file (format in docs/runtime.md: magic "ETTOKENS", version, vocabulary, sequences, tokens,
 * offsets, token ids). Masked-LM batches mask min(max_predictions, ceil(0.15 L)) positions per sequence
 * with [MASK]; causal-LM batches predict every next token inside a sequence. Token 0 is [PAD], 1 is [MASK].
 *
 * Contract: rt_data_open() validates a token file completely (sizes, offsets, ids below the vocabulary) and
 * fails with *err naming the file and the problem; rt_data_batch() fills a caller-owned batch. */
#ifndef ET_RT_DATA_H
#define ET_RT_DATA_H

#include <stdint.h>

#include "et_error.h"
#include "sampling.h"
#include "scenario.h"

#define RT_TOKEN_PAD 0
#define RT_TOKEN_MASK 1
#define RT_FIRST_TOKEN 2

typedef struct rt_token_file {
    uint32_t vocab;
    uint64_t n_sequences, n_tokens;
    uint64_t *offsets; /* n_sequences + 1 */
    uint32_t *tokens;
    uint64_t *by_length; /* sequence indices sorted by length */
} rt_token_file;

typedef struct rt_data {
    const et_scenario *s;
    et_sampler sampler; /* ranks = chunks per global batch */
    int chunks, local, accum, world, rank;
    unsigned long long seed;
    int causal;
    rt_token_file *file; /* NULL: synthetic */
} rt_data;

typedef struct rt_batch {
    int B, T;                          /* sequences and tokens */
    int *tokens, *positions, *offsets; /* offsets: B + 1 */
    int P;                             /* scored positions (rows of the loss) */
    int *pred_rows;                    /* token row of each scored position */
    int *targets;                      /* target token, or -1 (not scored) */
    int capacity_T, capacity_B;
} rt_batch;

int rt_token_file_load(const char *path, int vocab, int seq_len, rt_token_file *out, et_error *err);
void rt_token_file_free(rt_token_file *f);
/* Writes a token file (tests and the synthetic-data exporter use it); atomic. */
int rt_token_file_write(const char *path, uint32_t vocab, const uint64_t *offsets, uint64_t n_sequences,
                        const uint32_t *tokens, et_error *err);

int rt_data_init(rt_data *d, const et_scenario *s, int world, int rank, unsigned long long seed,
                 rt_token_file *file, et_error *err);
void rt_data_free(rt_data *d);

/* The rank's micro-batch `micro` of step `step`. The batch grows as needed (-1: out of memory). */
int rt_data_batch(const rt_data *d, int step, int micro, rt_batch *b);
/* Scored positions in the whole global batch of a step (the loss normaliser, equal on every rank). */
double rt_data_global_predictions(const rt_data *d, int step);
void rt_batch_free(rt_batch *b);
/* The batch in the cost model's letters (B, T, Q = sum of squared lengths, P), as graph.h costs it. */
et_batch_shape rt_batch_shape(const rt_batch *b);

#endif
