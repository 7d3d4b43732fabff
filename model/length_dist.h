/* length_dist: the distribution of sequence lengths in the training data.
 *
 * Contract: every distribution is held as a probability mass function over lengths 1..max_len (tokens).
 * Kinds: fixed (all sequences max_len long), uniform (min..max), histogram (a CSV file `length,count`,
 * '#' comment lines and one header line allowed). The struct owns `pmf`; release it with
 * et_length_dist_free(). Loading errors carry file:line:column. */
#ifndef ET_LENGTH_DIST_H
#define ET_LENGTH_DIST_H

#include "et_error.h"

typedef enum { ET_LENGTHS_FIXED, ET_LENGTHS_UNIFORM, ET_LENGTHS_HISTOGRAM } et_length_kind;
extern const char *const et_length_kind_names[]; /* "fixed", "uniform", "histogram", NULL */

typedef struct et_length_dist {
    et_length_kind kind;
    int max_len;
    double *pmf; /* pmf[l] for l in 0..max_len; pmf[0] == 0 */
    char file[512];
    double total_count; /* histogram: number of sequences in the file */
} et_length_dist;

int et_length_dist_fixed(int len, et_length_dist *out, et_error *err);
int et_length_dist_uniform(int min_len, int max_len, et_length_dist *out, et_error *err);
/* Reads a histogram; lengths above max_len are an error. */
int et_length_dist_load_histogram(const char *path, int max_len, et_length_dist *out, et_error *err);
void et_length_dist_free(et_length_dist *d);

double et_length_mean(const et_length_dist *d);
double et_length_mean_square(const et_length_dist *d);
/* Fraction of a batch padded to pad_to that is padding: 1 - E[L]/pad_to. */
double et_length_padding_fraction(const et_length_dist *d, int pad_to);
/* Share of sequences with lo <= length <= hi. */
double et_length_share(const et_length_dist *d, int lo, int hi);

#endif
