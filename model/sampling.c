#include "sampling.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"

const char *const et_sampling_scheme_names[] = {"random", "stratified", "packed", "binned", NULL};
const char *const et_pad_to_names[] = {"seq_len", "longest", NULL};

int et_sampler_check(const et_length_dist *d, const et_sampling *cfg, int local, int ranks,
                     const char *source, const char *path, et_error *err)
{
    char p[300];
    const int strat = cfg->scheme == ET_SAMPLING_STRATIFIED;
    if (strat || cfg->scheme == ET_SAMPLING_BINNED) {
        int total = 0, lo = 1;
        for (int b = 0; b < cfg->n_bins; b++) {
            if (cfg->bin_upper[b] < lo) {
                snprintf(p, sizeof p, "%s.bins[%d]", path, b);
                return et_error_set(err, source, 0, 0, p, "bin bounds must increase (got %d after %d)",
                                    cfg->bin_upper[b], lo - 1);
            }
            double share = et_length_share(d, lo, cfg->bin_upper[b]);
            if (cfg->bin_count[b] > 0 && share <= 0) {
                snprintf(p, sizeof p, "%s.counts[%d]", path, b);
                return et_error_set(err, source, 0, 0, p, "bin %d..%d holds no sequences of the distribution",
                                    lo, cfg->bin_upper[b]);
            }
            total += cfg->bin_count[b];
            lo = cfg->bin_upper[b] + 1;
        }
        if (cfg->bin_upper[cfg->n_bins - 1] != d->max_len) {
            snprintf(p, sizeof p, "%s.bins", path);
            return et_error_set(err, source, 0, 0, p, "the last bin must end at seq_len %d, got %d",
                                d->max_len, cfg->bin_upper[cfg->n_bins - 1]);
        }
        if (strat && total != local) {
            snprintf(p, sizeof p, "%s.counts", path);
            return et_error_set(err, source, 0, 0, p, "bin counts add up to %d, the local batch is %d", total,
                                local);
        }
    }
    if (cfg->presort_group > 1) {
        if (cfg->scheme == ET_SAMPLING_PACKED || cfg->scheme == ET_SAMPLING_BINNED) {
            snprintf(p, sizeof p, "%s.presort_group", path);
            return et_error_set(err, source, 0, 0, p, "presorting applies to random or stratified sampling");
        }
        if (ranks % cfg->presort_group != 0) {
            snprintf(p, sizeof p, "%s.presort_group", path);
            return et_error_set(err, source, 0, 0, p,
                                "presort groups of %d GPUs must divide the %d data-parallel ranks",
                                cfg->presort_group, ranks);
        }
    }
    return 0;
}

int et_sampler_init(et_sampler *s, const et_length_dist *d, const et_sampling *cfg, int local, int ranks,
                    unsigned long long seed, const char *source, const char *path, et_error *err)
{
    memset(s, 0, sizeof *s);
    s->dist = d;
    s->cfg = *cfg;
    s->local = local;
    s->ranks = ranks;
    s->seq_len = d->max_len;
    s->seed = seed;
    if (et_sampler_check(d, cfg, local, ranks, source, path, err)) return -1;
    const int fixed = d->kind == ET_LENGTHS_FIXED; /* one length: the cdf is a step at it */
    s->cdf = fixed ? calloc((size_t)d->max_len + 1, sizeof *s->cdf)
                   : malloc(((size_t)d->max_len + 1) * sizeof *s->cdf);
    if (!s->cdf)
        return et_error_set_code(err, ET_ERROR_MEMORY, NULL, 0, 0, NULL, "out of memory for the sampler");
    if (fixed) s->cdf[d->max_len] = 1;
    double c = 0;
    for (int l = 0; !fixed && l <= d->max_len; l++)
        s->cdf[l] = (c += d->pmf[l]);
    for (int l = 0; !fixed && l <= d->max_len; l++)
        s->cdf[l] /= c;
    int lo = 1;
    for (int b = 0; b < cfg->n_bins; b++) {
        s->bin_lo_cdf[b] = s->cdf[lo - 1];
        s->bin_hi_cdf[b] = s->cdf[cfg->bin_upper[b]];
        lo = cfg->bin_upper[b] + 1;
    }
    return 0;
}

void et_sampler_free(et_sampler *s)
{
    free(s->cdf);
    s->cdf = NULL;
}

/* Smallest length whose cumulative probability reaches u (inverse CDF). */
static int inverse_cdf(const et_sampler *s, double u)
{
    int lo = 1, hi = s->seq_len;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (s->cdf[mid] >= u)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

static int draw_between(const et_sampler *s, unsigned long long *st, double lo_cdf, double hi_cdf)
{
    double u = lo_cdf + (hi_cdf - lo_cdf) * et_rng_uniform(st);
    if (u <= lo_cdf) u = lo_cdf + 1e-15;
    return inverse_cdf(s, u);
}

static int descending(const void *a, const void *b)
{
    return *(const int *)b - *(const int *)a;
}

/* Packs sequences first-fit decreasing into rows of seq_len and keeps the first `local` rows. */
static int draw_packed(const et_sampler *s, unsigned long long *st, int *out)
{
    int cap = s->local * s->seq_len, n = 0;
    int *pool = malloc((size_t)cap * sizeof *pool), *row_of = malloc((size_t)cap * sizeof *row_of);
    int *room = malloc((size_t)cap * sizeof *room);
    if (!pool || !row_of || !room) {
        free(pool);
        free(row_of);
        free(room);
        return -1;
    }
    long total = 0;
    while (total < cap && n < cap)
        total += pool[n++] = draw_between(s, st, 0, 1);
    qsort(pool, (size_t)n, sizeof *pool, descending);
    int rows = 0;
    for (int i = 0; i < n; i++) {
        int r = 0;
        while (r < rows && room[r] < pool[i])
            r++;
        if (r == rows) room[rows++] = s->seq_len;
        room[r] -= pool[i];
        row_of[i] = r;
    }
    int kept = 0;
    for (int i = 0; i < n; i++)
        if (row_of[i] < s->local) out[kept++] = pool[i];
    free(pool);
    free(row_of);
    free(room);
    return kept;
}

/* -1 when out of memory (never unsorted batches standing in for sorted ones) */
static int presort(const et_sampler *s, int *lengths, int max_per_rank)
{
    const int G = s->cfg.presort_group, L = s->local;
    int *pool = malloc((size_t)G * L * sizeof *pool);
    if (!pool) return -1;
    for (int g0 = 0; g0 < s->ranks; g0 += G) {
        for (int i = 0; i < G; i++)
            memcpy(pool + i * L, lengths + (size_t)(g0 + i) * max_per_rank, L * sizeof(int));
        qsort(pool, (size_t)G * L, sizeof *pool, descending);
        /* rows of G in snake order: row r, column c holds pool[r*G + (r odd ? G-1-c : c)] */
        for (int r = 0; r < L; r++)
            for (int c = 0; c < G; c++)
                lengths[(size_t)(g0 + c) * max_per_rank + r] = pool[r * G + (r % 2 ? G - 1 - c : c)];
    }
    free(pool);
    return 0;
}

/* The bin of a binned step: the same on every rank, picked with the bins' shares of the sequences. */
static int step_bin(const et_sampler *s, int step)
{
    unsigned long long st = et_rng_stream(s->seed, (unsigned long long)step, ~0ULL);
    const double u = et_rng_uniform(&st);
    for (int b = 0; b < s->cfg.n_bins - 1; b++)
        if (u < s->bin_hi_cdf[b]) return b;
    return s->cfg.n_bins - 1;
}

int et_sampler_draw(const et_sampler *s, int step, int *lengths, int max_per_rank, int *counts)
{
    const int bin = s->cfg.scheme == ET_SAMPLING_BINNED ? step_bin(s, step) : -1;
    for (int r = 0; r < s->ranks; r++) {
        unsigned long long st = et_rng_stream(s->seed, (unsigned long long)step, (unsigned long long)r);
        int *out = lengths + (size_t)r * max_per_rank;
        if (s->cfg.scheme == ET_SAMPLING_PACKED) {
            counts[r] = draw_packed(s, &st, out);
            if (counts[r] < 0) return -1;
            continue;
        }
        int n = 0;
        if (s->cfg.scheme == ET_SAMPLING_STRATIFIED) {
            for (int b = 0; b < s->cfg.n_bins; b++)
                for (int i = 0; i < s->cfg.bin_count[b]; i++)
                    out[n++] = draw_between(s, &st, s->bin_lo_cdf[b], s->bin_hi_cdf[b]);
        } else if (bin >= 0) {
            for (int i = 0; i < s->local; i++)
                out[n++] = draw_between(s, &st, s->bin_lo_cdf[bin], s->bin_hi_cdf[bin]);
        } else {
            for (int i = 0; i < s->local; i++)
                out[n++] = draw_between(s, &st, 0, 1);
        }
        counts[r] = n;
    }
    return s->cfg.presort_group > 1 ? presort(s, lengths, max_per_rank) : 0;
}

/* l rounded up to the padding multiple, at most seq_len */
static int pad_length(const et_sampler *s, int l)
{
    const int k = s->cfg.pad_multiple > 1 ? s->cfg.pad_multiple : 1;
    const long long up = ((long long)l + k - 1) / k * k;
    return up < s->seq_len ? (int)up : s->seq_len;
}

int et_sampler_padded_length(const et_sampler *s, const int *lengths, int n)
{
    if (s->cfg.pad_to != ET_PAD_LONGEST) return s->seq_len;
    int longest = 0;
    for (int i = 0; i < n; i++)
        longest = lengths[i] > longest ? lengths[i] : longest;
    return pad_length(s, longest);
}

static et_batch_shape shape_of(const et_sampler *s, const et_model_config *m, int unpadded, const int *len,
                               int n)
{
    et_batch_shape b = {.sequences = n};
    int packed = s->cfg.scheme == ET_SAMPLING_PACKED;
    const int padded = et_sampler_padded_length(s, len, n);
    for (int i = 0; i < n; i++) {
        double l = unpadded || packed ? len[i] : padded;
        b.tokens += l;
        b.tokens_sq += l * l;
        /* a masked-LM row padded to seq_len carries max_predictions masks (the padded data's fixed slots);
         * padded to its batch's longest, the masks of its real tokens */
        b.predictions += unpadded || packed || m->head == ET_HEAD_CAUSAL_LM
                             ? et_model_predictions_for_length(m, (int)l)
                         : s->cfg.pad_to == ET_PAD_LONGEST ? et_model_predictions_for_length(m, len[i])
                                                           : m->max_predictions;
    }
    if (packed) b.tokens = (double)s->local * s->seq_len; /* rows are padded to seq_len */
    return b;
}

int et_sampler_max_per_rank(const et_sampler *s)
{
    return s->cfg.scheme == ET_SAMPLING_PACKED ? s->local * s->seq_len : s->local;
}

int et_sampler_shapes(const et_sampler *s, const et_model_config *m, int unpadded, int step,
                      et_batch_shape *shapes)
{
    int per = et_sampler_max_per_rank(s);
    int *lengths = malloc((size_t)s->ranks * per * sizeof *lengths);
    int *counts = malloc((size_t)s->ranks * sizeof *counts);
    if (!lengths || !counts || et_sampler_draw(s, step, lengths, per, counts)) {
        free(lengths);
        free(counts);
        return -1;
    }
    for (int r = 0; r < s->ranks; r++)
        shapes[r] = shape_of(s, m, unpadded, lengths + (size_t)r * per, counts[r]);
    free(lengths);
    free(counts);
    return 0;
}

/* E[f(L)] over lengths lo..hi (conditional on the range), for f = L, L^2, predictions. */
static void moments(const et_sampler *s, const et_model_config *m, int lo, int hi, double *el, double *el2,
                    double *ep)
{
    double w = 0, a = 0, b = 0, c = 0;
    for (int l = lo; l <= hi; l++) {
        double p = s->dist->pmf[l];
        if (p <= 0) continue;
        w += p;
        a += p * l;
        b += p * (double)l * l;
        c += p * et_model_predictions_for_length(m, l);
    }
    *el = w > 0 ? a / w : 0;
    *el2 = w > 0 ? b / w : 0;
    *ep = w > 0 ? c / w : 0;
}

/* Within-range CDF of group g at l: 0 below lo, 1 from hi on. */
static double range_cdf(const et_sampler *s, int lo, int hi, int l)
{
    if (l < lo) return 0;
    if (l >= hi) return 1;
    const double w = s->cdf[hi] - s->cdf[lo - 1];
    return w > 0 ? (s->cdf[l] - s->cdf[lo - 1]) / w : 1;
}

/* E[P] and E[P^2] of the padded length P of a micro-batch whose draws are count[g] sequences from lengths
 * lo[g]..hi[g]: P(longest <= l) = prod_g F_g(l)^count[g], P = pad_length(longest). */
static void longest_moments(const et_sampler *s, int groups, const int *lo, const int *hi, const int *count,
                            double *ep, double *ep2, double *epred, const et_model_config *m)
{
    double prev = 0;
    *ep = *ep2 = *epred = 0;
    for (int l = 1; l <= s->seq_len; l++) {
        double G = 1;
        for (int g = 0; g < groups; g++)
            if (count[g] > 0) G *= pow(range_cdf(s, lo[g], hi[g], l), count[g]);
        const double p = G - prev;
        prev = G;
        if (p <= 0) continue;
        const double P = pad_length(s, l);
        *ep += p * P;
        *ep2 += p * P * P;
        *epred += p * et_model_predictions_for_length(m, (int)P);
    }
}

/* The expected shape of a micro-batch padded to its longest: its draws' groups (one range for random
 * sampling, the bins with their counts for stratified, one bin at a time for binned). A masked-LM row's
 * masks are its real tokens', so its predictions are the unpadded expectation's. */
static et_batch_shape expected_longest(const et_sampler *s, const et_model_config *m)
{
    et_batch_shape shape = et_sampler_expected_shape(s, m, 1);
    int lo[ET_MAX_BINS], hi[ET_MAX_BINS];
    for (int b = 0; b < s->cfg.n_bins; b++) {
        lo[b] = b ? s->cfg.bin_upper[b - 1] + 1 : 1;
        hi[b] = s->cfg.bin_upper[b];
    }
    double ep = 0, ep2 = 0, epred = 0;
    if (s->cfg.scheme == ET_SAMPLING_BINNED) {
        for (int b = 0; b < s->cfg.n_bins; b++) {
            const double w = s->bin_hi_cdf[b] - s->bin_lo_cdf[b];
            double bp, bp2, bpred;
            if (w <= 0) continue;
            longest_moments(s, 1, lo + b, hi + b, &s->local, &bp, &bp2, &bpred, m);
            ep += w * bp, ep2 += w * bp2, epred += w * bpred;
        }
    } else if (s->cfg.scheme == ET_SAMPLING_STRATIFIED) {
        longest_moments(s, s->cfg.n_bins, lo, hi, s->cfg.bin_count, &ep, &ep2, &epred, m);
    } else {
        const int whole_lo = 1, whole_hi = s->seq_len;
        longest_moments(s, 1, &whole_lo, &whole_hi, &s->local, &ep, &ep2, &epred, m);
    }
    shape.tokens = s->local * ep;
    shape.tokens_sq = s->local * ep2;
    if (m->head == ET_HEAD_CAUSAL_LM) shape.predictions = s->local * epred;
    return shape;
}

et_batch_shape et_sampler_expected_shape(const et_sampler *s, const et_model_config *m, int unpadded)
{
    et_batch_shape shape = {0};
    if (s->cfg.scheme == ET_SAMPLING_PACKED) {
        et_sampler one = *s;
        one.ranks = 1;
        et_batch_shape b;
        for (int i = 0; i < 64; i++) {
            if (et_sampler_shapes(&one, m, unpadded, 1000000 + i, &b)) return et_batch_shape_unknown();
            shape.sequences += b.sequences / 64;
            shape.tokens += b.tokens / 64;
            shape.tokens_sq += b.tokens_sq / 64;
            shape.predictions += b.predictions / 64;
        }
        return shape;
    }
    shape.sequences = s->local;
    if (!unpadded && s->cfg.pad_to == ET_PAD_LONGEST) return expected_longest(s, m);
    if (!unpadded) {
        double S = s->seq_len;
        shape.tokens = s->local * S;
        shape.tokens_sq = s->local * S * S;
        shape.predictions = s->local * (m->head == ET_HEAD_CAUSAL_LM ? S : m->max_predictions);
        return shape;
    }
    double el, el2, ep;
    if (s->cfg.scheme == ET_SAMPLING_STRATIFIED) {
        int lo = 1;
        for (int b = 0; b < s->cfg.n_bins; b++) {
            moments(s, m, lo, s->cfg.bin_upper[b], &el, &el2, &ep);
            shape.tokens += s->cfg.bin_count[b] * el;
            shape.tokens_sq += s->cfg.bin_count[b] * el2;
            shape.predictions += s->cfg.bin_count[b] * ep;
            lo = s->cfg.bin_upper[b] + 1;
        }
    } else {
        moments(s, m, 1, s->seq_len, &el, &el2, &ep);
        shape.tokens = s->local * el;
        shape.tokens_sq = s->local * el2;
        shape.predictions = s->local * ep;
    }
    return shape;
}
