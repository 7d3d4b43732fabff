/* sampling: how each GPU's local batch of sequence lengths is drawn, step by step (seeded). The simulator
 * uses it to give every rank its own load; the runtime's data loader will call the same code.
 *
 * Schemes:
 *   random      every GPU draws its `local` sequences independently from the length distribution;
 *   stratified  the lengths are split into bins (upper bounds, inclusive) and every local batch takes a
 *               fixed count from each bin (e.g. bins 128, 256, 384, 512 with counts 6, 3, 2, 5), so all
 *               GPUs get the same length mix;
 *   packed      sequences are packed first-fit-decreasing into rows of seq_len tokens and each GPU
 *               processes `local` rows (the comparison NVIDIA used at scale);
 *   binned      the lengths are split into bins and every rank of a draw takes all its `local` sequences
 *               from one bin, picked per draw with the bin's share of the sequences (LDDL's binned loader,
 *               NVIDIA DeepLearningExamples BERT). The cost model and the simulator draw once a micro-batch
 *               (LDDL picks a bin per iteration); etrun draws once a step for all its micro-batches, so that
 *               its data do not depend on the rank count: the same expected cost a micro-batch;
 * and, on top of random or stratified, local presort: within each group of G consecutive GPUs the
 * group's batches are pooled, sorted by length descending, laid out in rows of G, every other row
 * reversed (snake order), and GPU i of the group takes column i.
 *
 * Padding (data.pad_to): a padded micro-batch computes every sequence at seq_len, or, with `longest`, at
 * its longest sequence rounded up to pad_multiple (at most seq_len): a loader that pads each batch
 * dynamically (LDDL's sequence_length_alignment, Hugging Face's pad_to_multiple_of).
 *
 * Contract: et_sampler_init() validates the configuration against the distribution and batch (errors
 * name `path` in *err) and allocates; et_sampler_free() releases. et_sampler_draw() is deterministic in
 * (seed, step) and independent of call order. Lengths are in tokens. */
#ifndef ET_SAMPLING_H
#define ET_SAMPLING_H

#include "batch_shape.h"
#include "et_error.h"
#include "length_dist.h"
#include "model_config.h"

#define ET_MAX_BINS 16

typedef enum {
    ET_SAMPLING_RANDOM,
    ET_SAMPLING_STRATIFIED,
    ET_SAMPLING_PACKED,
    ET_SAMPLING_BINNED
} et_sampling_scheme;
extern const char *const et_sampling_scheme_names[]; /* "random", "stratified", "packed", "binned", NULL */

typedef enum { ET_PAD_SEQ_LEN, ET_PAD_LONGEST } et_pad_to;
extern const char *const et_pad_to_names[]; /* "seq_len", "longest", NULL */

typedef struct et_sampling {
    et_sampling_scheme scheme;
    int n_bins;
    int bin_upper[ET_MAX_BINS]; /* inclusive upper bound of each bin; bin b starts at bin_upper[b-1] + 1 */
    int bin_count[ET_MAX_BINS]; /* sequences per local batch from each bin (stratified; 0 when binned) */
    int presort_group;          /* GPUs per presort group; 0 or 1 = no presort */
    et_pad_to pad_to;           /* $.data.pad_to: what a padded micro-batch is padded to */
    int pad_multiple;           /* $.data.pad_multiple: `longest` rounds up to a multiple of it (>= 1) */
} et_sampling;

typedef struct et_sampler {
    const et_length_dist *dist;
    et_sampling cfg;
    int local; /* sequences (or packed rows) per GPU */
    int ranks; /* GPUs drawing batches */
    int seq_len;
    unsigned long long seed;
    double *cdf; /* cumulative distribution over lengths, cdf[max_len] = 1 */
    double bin_lo_cdf[ET_MAX_BINS], bin_hi_cdf[ET_MAX_BINS];
} et_sampler;

int et_sampler_init(et_sampler *s, const et_length_dist *d, const et_sampling *cfg, int local, int ranks,
                    unsigned long long seed, const char *source, const char *path, et_error *err);
void et_sampler_free(et_sampler *s);
/* et_sampler_init's checks alone, allocating nothing (the parser's check of a plan). */
int et_sampler_check(const et_length_dist *d, const et_sampling *cfg, int local, int ranks,
                     const char *source, const char *path, et_error *err);

/* One step: the lengths of every GPU's batch. `lengths` has room for ranks * max_per_rank entries and
 * `counts[r]` receives how many sequences rank r got (always `local` except with packing, where rows hold
 * several sequences; max_per_rank = local * seq_len is always enough). Returns -1 on out of memory. */
int et_sampler_draw(const et_sampler *s, int step, int *lengths, int max_per_rank, int *counts);

/* The length every sequence of a padded micro-batch of n drawn lengths is computed at: seq_len, or under
 * pad_to `longest` the longest rounded up to pad_multiple, at most seq_len. */
int et_sampler_padded_length(const et_sampler *s, const int *lengths, int n);

/* Room per rank that et_sampler_draw() needs: `local`, or local * seq_len with packing. */
int et_sampler_max_per_rank(const et_sampler *s);

/* The shape of every rank's micro-batch for one step (B, T, Q, P as in graph.h), computed on real lengths
 * when `unpadded`, else padded (et_sampler_padded_length); packed rows count as seq_len tokens each for the
 * linear ops while attention stays within each sequence. Returns -1 on out of memory. */
int et_sampler_shapes(const et_sampler *s, const et_model_config *m, int unpadded, int step,
                      et_batch_shape *shapes);

/* Expected shape of one rank's micro-batch under the scheme: exact for random, stratified and binned
 * sampling (padded to the longest: from the distribution of the batch's largest draw), the mean of 64
 * seeded draws of one rank for packing. */
et_batch_shape et_sampler_expected_shape(const et_sampler *s, const et_model_config *m, int unpadded);

#endif
