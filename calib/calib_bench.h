/* calib_bench: microbenchmarks of one backend on the machine at hand, for `etcalib bench` and `etcalib fit`.
 *   gemm    the backend's linear forward (y = x W^T) over a grid of (M, N, K) and over every distinct GEMM
 *           shape of a scenario's graph (its expected batch), seconds per product (best of a few)
 *   stream  the backend's add (out = x + y, 12 bytes a value) over sizes from 4 KiB to 16 MiB
 *   optimizer  the backend's fused Adam update (AdamW, fp32 gradients) over 1 Ki to 64 Ki parameters
 *           (working sets of 32 KiB to 2 MiB, where its arithmetic shows; larger updates stream like the
 *           streaming kernels)
 *   op overhead  one empty op as etrun brackets it (timer begin and end around a zero-length add)
 * The result is JSON ({"tool": "etcalib bench", ...}; docs/calibration.md). Progress goes to `progress`
 * (may be NULL). Errors: out of memory or an unknown backend fill *err. */
#ifndef ET_CALIB_BENCH_H
#define ET_CALIB_BENCH_H

#include <jansson.h>
#include <stdio.h>

#include "et_error.h"
#include "scenario.h"

json_t *calib_bench_run(const char *backend, const et_scenario *scenario, FILE *progress, et_error *err);

/* What a microbenchmark sample timed; etcalib fit prints the fit's quality per kind in this order. */
typedef enum calib_sample_kind {
    CALIB_SAMPLE_MATRIX,    /* a GEMM of m x n x k */
    CALIB_SAMPLE_STREAM,    /* a streaming kernel of `bytes` */
    CALIB_SAMPLE_OPTIMIZER, /* an Adam update of `values` parameters (the graph's optimizer.step costs) */
    CALIB_SAMPLE_KINDS
} calib_sample_kind;

/* A loaded microbenchmark file: samples the fit compares with the profile's times (calib_sample_time:
 * et_kernel_time for products and streaming kernels, et_op_time for the optimizer). */
typedef struct calib_sample {
    calib_sample_kind kind;
    double m, n, k;      /* GEMM shape */
    double flops, bytes; /* what the profile's kernel time reads (matrix and stream) */
    double seconds;      /* measured */
    double values;       /* optimizer: parameters updated */
} calib_sample;

typedef struct calib_micro {
    char file[1024];
    char backend[16];
    calib_sample *samples;
    int n_samples;
} calib_micro;

/* Loads micro.json; refuses another tool's file, non-positive times, a backend other than the profile's kind.
 */
int calib_micro_load(const char *path, calib_micro *out, et_error *err);
void calib_micro_free(calib_micro *m);

#endif

/* Public measurements in the calibset CSV format (docs/calibration.md; shared/data/calibration): gemm.csv
 * rows (gpu, dtype, batch, M, N, K, value in TFLOP/s) become matrix samples, memory.csv rows of category
 * HBM (value in TB/s) streaming samples of 1 GiB. Rows are kept when `gpu` contains one of the '|'-separated
 * names in gpu_filter and (gemm) the dtype names `precision`; rows with ranges instead of numbers are
 * skipped. Fails when the file is neither table or nothing matches. */
int calib_micro_load_csv(const char *path, const char *gpu_filter, const char *precision, calib_micro *out,
                         et_error *err);
