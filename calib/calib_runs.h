/* calib_runs: a device profile's efficiencies fitted to published training runs. Each run is a shipped
 * scenario and the step time it was published with (scenarios/validation/published.csv: name, metric,
 * published figure; a throughput in samples a second becomes the global batch over it); the fit scales the
 * profile's large-GEMM efficiency (gemm_max and every precision's own) and, when asked, its
 * fused-attention efficiency by one factor each, minimising the mean absolute log error of the analytic step
 * (analytic.h) over every run whose scenario names the profile. One factor (or pair) for all those runs,
 * whatever their stack: no per-run or per-family term (the stacks' own terms are the scenarios' `software`).
 *
 * Contract: calib_runs_load reads the CSV (scenario files beside it, NAME.json) and keeps the runs whose
 * cluster device is named `device` (the profile's "name"); errors name the file and line. calib_runs_fit
 * writes the fitted profile into *out (base with the factors applied; efficiencies at most 1). */
#ifndef ET_CALIB_RUNS_H
#define ET_CALIB_RUNS_H

#include <stdbool.h>

#include "et_error.h"
#include "scenario.h"

typedef struct calib_run {
    char name[128];
    et_scenario s;
    double published_s; /* seconds a step */
} calib_run;

typedef struct calib_runs {
    calib_run *runs;
    int n;
} calib_runs;

int calib_runs_load(const char *published_csv, const char *device, calib_runs *out, et_error *err);
void calib_runs_free(calib_runs *r);

/* The terms a fit may scale, one factor each: the large-GEMM efficiencies, the fused attention's
 * (FlashAttention 2's, efficiency.flash_attention), the GEMM half dimension (efficiency.gemm_half_dim: how
 * fast a product's efficiency falls with a small M, N or K), and cuDNN's fused attention's
 * (efficiency.cudnn_attention; from FlashAttention 2's rate where the base has none). */
enum { CALIB_TERMS = 4 };
enum {
    CALIB_TERM_GEMM = 1u << 0,
    CALIB_TERM_ATTENTION = 1u << 1,
    CALIB_TERM_HALF_DIM = 1u << 2,
    CALIB_TERM_CUDNN = 1u << 3
};

/* The profile with the GEMM and fused-attention efficiencies scaled (capped at 1), and the GEMM half
 * dimension scaled. f[] holds one factor per term (CALIB_TERMS, in the bits' order); cuDNN's efficiency
 * starts from FlashAttention 2's where the base has none, and stays absent at a factor of 1. */
et_device_profile calib_runs_scaled(const et_device_profile *base, const double f[CALIB_TERMS]);
/* The analytic step of run i on profile d (its scenario's other cluster facts kept); -1 on an error. */
double calib_runs_predict(const calib_runs *r, int i, const et_device_profile *d);
/* Mean over the runs of |log(predicted / published)|: the targets' measure, and a run whose error has
 * another cause than the profile (a data pipeline ET does not model) pulls no harder than any other. */
double calib_runs_objective(const calib_runs *r, const et_device_profile *d);
/* Fits the factors of `terms` (CALIB_TERM_* bits; the attention's only where the base has a fused-attention
 * rate, the half dimension's only where it has one): golden-section search on each in turn, four rounds,
 * in log space, from 1/4 of the base up to 4 or to an efficiency of 1; a search that finds nothing better
 * keeps its start. factor[] gets them (1 for a term not fitted). Returns the final objective, never above
 * the base's. */
double calib_runs_fit(const calib_runs *r, const et_device_profile *base, unsigned terms,
                      et_device_profile *out, double factor[CALIB_TERMS]);

#endif
