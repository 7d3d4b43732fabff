/* Sampling library: stratified counts, presort permutation, packing, determinism, and straggler factors
 * of random < stratified < stratified + presort on the MLPerf Wikipedia histogram at 1024 GPUs. */
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
    et_length_dist_free(&d);
    return check_summary("test_sampling");
}
