/* Sampling library: stratified counts, presort permutation, packing, determinism, straggler factors of
 * random < stratified < stratified + presort on the MLPerf Wikipedia histogram at 1024 GPUs, binned steps
 * (one bin a step on every rank, bins drawn by their shares) and padding to the batch's longest (the
 * expected shape against hand-computed moments and against the mean of sampled shapes). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analytic.h"
#include "check.h"
#include "check_scenario.h"
#include "sampling.h"
#include "scenario.h"

#define HIST ET_SOURCE_DIR "/scenarios/data/wikipedia-bert-seqlen-512.csv"

static int ascending(const void *a, const void *b)
{
    return *(const int *)a - *(const int *)b;
}

static et_sampling stratified(int presort)
{
    et_sampling c = {.scheme = ET_SAMPLING_STRATIFIED, .n_bins = 4, .presort_group = presort};
    int upper[4] = {128, 256, 384, 512}, count[4] = {6, 3, 2, 5};
    memcpy(c.bin_upper, upper, sizeof upper);
    memcpy(c.bin_count, count, sizeof count);
    return c;
}

static void test_stratified_and_presort(const et_length_dist *d)
{
    const int ranks = 64, local = 16;
    et_error err;
    et_sampler plain, sorted;
    et_sampling a = stratified(0), b = stratified(8);
    CHECK(et_sampler_init(&plain, d, &a, local, ranks, 7, "t", "$", &err) == 0, "init: %s", err.text);
    CHECK(et_sampler_init(&sorted, d, &b, local, ranks, 7, "t", "$", &err) == 0, "init presort: %s",
          err.text);
    int *x = malloc(sizeof(int) * ranks * local), *y = malloc(sizeof(int) * ranks * local), counts[64];
    int exact = 1, permutation = 1, snake = 1;
    for (int step = 0; step < 20; step++) {
        et_sampler_draw(&plain, step, x, local, counts);
        et_sampler_draw(&sorted, step, y, local, counts);
        for (int r = 0; r < ranks; r++) {
            int per_bin[4] = {0};
            for (int i = 0; i < local; i++)
                per_bin[(x[r * local + i] - 1) / 128]++;
            exact &= per_bin[0] == 6 && per_bin[1] == 3 && per_bin[2] == 2 && per_bin[3] == 5;
        }
        for (int g = 0; g < ranks; g += 8) {
            qsort(x + g * local, 8 * local, sizeof(int), ascending);
            int pooled[128];
            memcpy(pooled, y + g * local, sizeof pooled);
            /* row r of the snake: descending across the group on even rows, ascending on odd rows */
            for (int r = 0; r + 1 < local; r++) {
                int c0 = g + (r % 2 ? 7 : 0), c1 = g + (r % 2 ? 0 : 7);
                snake &= y[c0 * local + r] >= y[c1 * local + r];
            }
            qsort(pooled, 128, sizeof(int), ascending);
            permutation &= memcmp(pooled, x + g * local, sizeof pooled) == 0;
        }
    }
    CHECK(exact, "stratified sampling reproduces 6/3/2/5 per bin on every rank and step");
    CHECK(permutation, "presort is a permutation of each group's pooled batch");
    CHECK(snake, "presorted rows alternate direction (snake order)");
    /* determinism and independence from call order */
    int *z = malloc(sizeof(int) * ranks * local);
    et_sampler_draw(&sorted, 5, z, local, counts);
    et_sampler_draw(&sorted, 3, y, local, counts);
    et_sampler_draw(&sorted, 5, y, local, counts);
    CHECK(memcmp(y, z, sizeof(int) * ranks * local) == 0, "the same step draws the same batches");
    et_sampler_draw(&sorted, 6, y, local, counts);
    CHECK(memcmp(y, z, sizeof(int) * ranks * local) != 0, "another step draws other batches");
    free(x);
    free(y);
    free(z);
    et_sampler_free(&plain);
    et_sampler_free(&sorted);
}

static void test_packing(const et_length_dist *d)
{
    et_sampling c = {.scheme = ET_SAMPLING_PACKED};
    et_sampler s;
    et_error err;
    const int ranks = 8, local = 4;
    CHECK(et_sampler_init(&s, d, &c, local, ranks, 3, "t", "$", &err) == 0, "packing init");
    int per = et_sampler_max_per_rank(&s), counts[8];
    int *len = malloc(sizeof(int) * ranks * per);
    double tokens = 0;
    int fits = 1;
    for (int step = 0; step < 10; step++) {
        et_sampler_draw(&s, step, len, per, counts);
        for (int r = 0; r < ranks; r++) {
            long sum = 0;
            for (int i = 0; i < counts[r]; i++)
                sum += len[r * per + i];
            fits &= sum <= (long)local * 512;
            tokens += sum;
        }
    }
    double padding = 1 - tokens / (10.0 * ranks * local * 512);
    CHECK(fits, "packed sequences fit in local rows of 512");
    CHECK(padding < 0.05,
          "first-fit-decreasing packing leaves little padding: %.4f (unpadded batches: 0.500)", padding);
    free(len);
    et_sampler_free(&s);
}

static void test_straggler_factors(void)
{
    et_scenario s;
    et_error err;
    if (check_scenario_load(ET_SOURCE_DIR "/scenarios/mlperf-bert-1024-samsung.json", &s)) return;
    CHECK(s.parallel.data == 1024 && s.batch.local == 16, "1024 GPUs, local batch 16");
    et_graph g;
    et_graph_options o = et_scenario_graph_options(&s, 0);
    CHECK(et_graph_build(&s.model, &o, &g, &err) == 0, "et_graph_build: %s", err.text);
    double f_random, f_strat, f_presort;
    s.data.sampling.scheme = ET_SAMPLING_RANDOM;
    s.data.sampling.presort_group = 0;
    et_straggler_factor(&s, &g, 16, &f_random, NULL);
    s.data.sampling = stratified(0);
    et_straggler_factor(&s, &g, 16, &f_strat, NULL);
    s.data.sampling = stratified(8);
    et_straggler_factor(&s, &g, 16, &f_presort, NULL);
    printf(
        "straggler factors at 1024 GPUs, local 16: random %.4f, stratified %.4f, stratified + presort %.4f\n",
        f_random, f_strat, f_presort);
    CHECK(f_random >= 1 && f_strat >= 1 && f_presort >= 1, "every factor is at least 1");
    CHECK(f_presort < f_strat, "stratified + presort (%.4f) < stratified (%.4f)", f_presort, f_strat);
    CHECK(f_strat < f_random, "stratified (%.4f) < random (%.4f)", f_strat, f_random);
    et_graph_free(&g);
    et_scenario_free(&s);
}

/* Every rank of a step draws from one bin; over many steps the bins come up with their shares. */
static void test_binned(const et_length_dist *d)
{
    const int ranks = 16, local = 8, steps = 4000;
    et_sampling c = {.scheme = ET_SAMPLING_BINNED, .n_bins = 4};
    int upper[4] = {128, 256, 384, 512};
    memcpy(c.bin_upper, upper, sizeof upper);
    et_sampler s;
    et_error err;
    CHECK(et_sampler_init(&s, d, &c, local, ranks, 11, "t", "$", &err) == 0, "init binned: %s", err.text);
    int *x = malloc(sizeof(int) * ranks * local), counts[16], one_bin = 1, seen[4] = {0};
    for (int step = 0; step < steps; step++) {
        et_sampler_draw(&s, step, x, local, counts);
        const int bin = (x[0] - 1) / 128;
        seen[bin]++;
        for (int i = 0; i < ranks * local; i++)
            one_bin &= (x[i] - 1) / 128 == bin;
    }
    CHECK(one_bin, "every sequence of a binned step comes from the step's one bin");
    for (int b = 0; b < 4; b++) {
        const double share = et_length_share(d, b * 128 + 1, (b + 1) * 128), got = (double)seen[b] / steps;
        CHECK(fabs(got - share) < 4 * sqrt(share * (1 - share) / steps) + 1e-9,
              "bin %d drawn in %.4f of the steps, its share of the sequences %.4f", b, got, share);
    }
    free(x);
    et_sampler_free(&s);
}

/* Padding to the longest: P(longest <= l) = F(l)^local, by hand on lengths uniform on 1..4. */
static void test_pad_longest(void)
{
    et_length_dist u;
    et_error err;
    CHECK(et_length_dist_uniform(1, 4, &u, &err) == 0, "uniform 1..4: %s", err.text);
    et_model_config m = {.head = ET_HEAD_CAUSAL_LM};
    et_sampling c = {.scheme = ET_SAMPLING_RANDOM, .pad_to = ET_PAD_LONGEST, .pad_multiple = 1};
    et_sampler s;
    CHECK(et_sampler_init(&s, &u, &c, 2, 1, 5, "t", "$", &err) == 0, "init: %s", err.text);
    const int three[3] = {3, 1, 2};
    CHECK(et_sampler_padded_length(&s, three, 3) == 3, "longest of 3, 1, 2: 3");
    /* the longest of two draws is l with probability (2l - 1)/16: E = 50/16, E[l^2] = 170/16 */
    et_batch_shape b = et_sampler_expected_shape(&s, &m, 0);
    CHECK(fabs(b.tokens - 2 * 50.0 / 16) < 1e-12 && fabs(b.tokens_sq - 2 * 170.0 / 16) < 1e-12,
          "random, longest of 2: T %.6f (6.25), Q %.6f (21.25)", b.tokens, b.tokens_sq);
    /* the sampled shapes average to the expectation */
    double mean_t = 0;
    for (int k = 0; k < 20000; k++) {
        et_batch_shape one;
        et_sampler_shapes(&s, &m, 0, k, &one);
        mean_t += one.tokens / 20000;
    }
    CHECK(fabs(mean_t - b.tokens) < 0.03, "sampled mean T %.4f against the expectation %.4f", mean_t,
          b.tokens);
    et_sampler_free(&s);
    /* binned by 2: bins {1, 2} and {3, 4}, half the sequences each; the longest of two is the bin's upper
     * length with probability 3/4: E = (1.75 + 3.75)/2; padded to a multiple of 2, each bin's upper length */
    c.scheme = ET_SAMPLING_BINNED;
    c.n_bins = 2;
    c.bin_upper[0] = 2;
    c.bin_upper[1] = 4;
    CHECK(et_sampler_init(&s, &u, &c, 2, 1, 5, "t", "$", &err) == 0, "init binned: %s", err.text);
    b = et_sampler_expected_shape(&s, &m, 0);
    CHECK(fabs(b.tokens - 2 * 2.75) < 1e-12, "binned, longest of 2: T %.6f (5.5)", b.tokens);
    et_sampler_free(&s);
    c.pad_multiple = 2;
    CHECK(et_sampler_init(&s, &u, &c, 2, 1, 5, "t", "$", &err) == 0, "init binned by 2: %s", err.text);
    b = et_sampler_expected_shape(&s, &m, 0);
    CHECK(fabs(b.tokens - 2 * 3.0) < 1e-12 && fabs(b.tokens_sq - 2 * 10.0) < 1e-12,
          "binned, padded to a multiple of 2: T %.6f (6), Q %.6f (20)", b.tokens, b.tokens_sq);
    const int odd[2] = {1, 3};
    CHECK(et_sampler_padded_length(&s, odd, 2) == 4, "longest 3 rounded up to a multiple of 2: 4");
    c.pad_multiple = 3;
    et_sampler_free(&s);
    CHECK(et_sampler_init(&s, &u, &c, 2, 1, 5, "t", "$", &err) == 0, "init binned by 3: %s", err.text);
    const int four[2] = {4, 2};
    CHECK(et_sampler_padded_length(&s, odd, 2) == 3, "longest 3, a multiple of 3 already: 3");
    CHECK(et_sampler_padded_length(&s, four, 2) == 4, "longest 4 rounded up to 6, capped at seq_len 4");
    /* stratified, one from each bin: the longest is the second bin's */
    c.scheme = ET_SAMPLING_STRATIFIED;
    c.bin_count[0] = c.bin_count[1] = 1;
    c.pad_multiple = 1;
    et_sampler_free(&s);
    CHECK(et_sampler_init(&s, &u, &c, 2, 1, 5, "t", "$", &err) == 0, "init stratified: %s", err.text);
    b = et_sampler_expected_shape(&s, &m, 0);
    CHECK(fabs(b.tokens - 2 * 3.5) < 1e-12, "stratified 1 + 1, longest: T %.6f (7)", b.tokens);
    et_sampler_free(&s);
    et_length_dist_free(&u);
}

int main(void)
{
    et_length_dist d;
    et_error err;
    if (et_length_dist_load_histogram(HIST, 512, &d, &err)) {
        fprintf(stderr, "%s\n", err.text);
        return 1;
    }
    test_stratified_and_presort(&d);
    test_packing(&d);
    test_straggler_factors();
    test_binned(&d);
    test_pad_longest();
    et_length_dist_free(&d);
    return check_summary("test_sampling");
}
